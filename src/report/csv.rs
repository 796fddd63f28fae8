//! The long-form CSV: one `Row` per measurement, flushed as soon as it is
//! measured, in a file that is never overwritten; and reading it back for
//! `plot` and `compare`.

use super::{Exporter, Row, RunInfo, Summary, ToRows, SCHEMA_VERSION};
use anyhow::{bail, Context};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

pub struct CsvExport {
    path: PathBuf,
    writer: csv::Writer<File>,
}

/// The header line this version writes: the `Row` field names.
pub fn header() -> Vec<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(Row::default())
        .expect("serialising a row to memory cannot fail");
    let bytes = w.into_inner().expect("in-memory writer");
    let text = String::from_utf8(bytes).expect("CSV is UTF-8");
    text.lines()
        .next()
        .unwrap_or("")
        .split(',')
        .map(str::to_string)
        .collect()
}

/// Reads every row of a fabricbench CSV, refusing files of another schema_version.
pub fn read_rows(path: &Path) -> anyhow::Result<Vec<Row>> {
    if !path.exists() {
        bail!("{}: no such file", path.display());
    }
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let headers = reader
        .headers()
        .with_context(|| format!("{}: cannot read the header", path.display()))?
        .clone();
    let Some(version_column) = headers.iter().position(|h| h == "schema_version") else {
        bail!(
            "{}: not a fabricbench CSV (no schema_version column)",
            path.display()
        );
    };
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let line = i + 2;
        let record = record.with_context(|| format!("{}:{line}: unreadable", path.display()))?;
        let version = record.get(version_column).unwrap_or("");
        if version != SCHEMA_VERSION.to_string() {
            bail!(
                "{}:{line}: schema_version {version}, but this fabricbench reads schema_version {SCHEMA_VERSION}; \
                 use the fabricbench version that wrote the file",
                path.display()
            );
        }
        let row: Row = record.deserialize(Some(&headers)).with_context(|| {
            format!(
                "{}:{line}: not a schema_version {SCHEMA_VERSION} row",
                path.display()
            )
        })?;
        rows.push(row);
    }
    if rows.is_empty() {
        bail!("{}: no rows", path.display());
    }
    Ok(rows)
}

impl CsvExport {
    /// Creates `path` (it must not exist), or with `append` adds to an existing
    /// file after checking that its header is this version's.
    pub fn open(path: &Path, append: bool) -> anyhow::Result<CsvExport> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| {
                format!("--csv {}: cannot create {}", path.display(), dir.display())
            })?;
        }
        let existing = append && path.exists();
        if existing {
            let mut reader = csv::Reader::from_path(path)
                .with_context(|| format!("--csv {}: cannot read", path.display()))?;
            let found: Vec<String> = reader.headers()?.iter().map(str::to_string).collect();
            if found != header() {
                bail!(
                    "--csv {} --append: the file has other columns (another schema_version); write to a new file",
                    path.display()
                );
            }
        }
        let file = if existing {
            OpenOptions::new().append(true).open(path)
        } else {
            // create_new: a file that appeared since the arguments were checked is not clobbered.
            OpenOptions::new().write(true).create_new(true).open(path)
        }
        .with_context(|| format!("--csv {}: cannot open for writing", path.display()))?;
        let writer = csv::WriterBuilder::new()
            .has_headers(!existing)
            .from_writer(file);
        Ok(CsvExport {
            path: path.to_path_buf(),
            writer,
        })
    }
}

impl CsvExport {
    /// Writes rows and flushes them, so a crash keeps every row measured before it.
    pub fn write_rows(&mut self, rows: impl IntoIterator<Item = Row>) -> anyhow::Result<()> {
        for row in rows {
            self.writer.serialize(row)?;
        }
        self.writer
            .flush()
            .with_context(|| format!("--csv {}: write failed", self.path.display()))?;
        Ok(())
    }
}

impl<R: ToRows + ?Sized> Exporter<R> for CsvExport {
    fn start(&mut self, _run: &RunInfo) -> anyhow::Result<()> {
        Ok(())
    }

    fn record(&mut self, run: &RunInfo, result: &R) -> anyhow::Result<()> {
        self.write_rows(result.rows(run))
    }

    fn finish(&mut self, _run: &RunInfo, _summary: &Summary) -> anyhow::Result<()> {
        self.writer.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fb-csv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn written(dir: &Path, rows: Vec<Row>) -> PathBuf {
        let path = dir.join("run.csv");
        CsvExport::open(&path, false)
            .unwrap()
            .write_rows(rows)
            .unwrap();
        path
    }

    fn row(size: u64) -> Row {
        Row {
            schema_version: SCHEMA_VERSION,
            collective: "all_reduce".into(),
            size_bytes: size,
            ..Row::default()
        }
    }

    fn error(path: &Path) -> String {
        format!("{:#}", read_rows(path).unwrap_err())
    }

    #[test]
    fn rows_read_back_as_written() {
        let dir = scratch("back");
        let rows = vec![row(8), row(16)];
        assert_eq!(read_rows(&written(&dir, rows.clone())).unwrap(), rows);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn other_schemas_and_other_files_are_refused() {
        let dir = scratch("refuse");
        let missing = dir.join("missing.csv");
        assert_eq!(
            error(&missing),
            format!("{}: no such file", missing.display())
        );
        let mut future = row(8);
        future.schema_version = SCHEMA_VERSION + 1;
        let path = written(&dir, vec![row(4), future]);
        assert!(error(&path).starts_with(&format!(
            "{}:3: schema_version {}, but this fabricbench reads schema_version {SCHEMA_VERSION}",
            path.display(),
            SCHEMA_VERSION + 1
        )));
        std::fs::write(&path, "a,b\n1,2\n").unwrap();
        assert!(error(&path).ends_with("not a fabricbench CSV (no schema_version column)"));
        std::fs::write(&path, header().join(",") + "\n").unwrap();
        assert_eq!(error(&path), format!("{}: no rows", path.display()));
        std::fs::write(&path, "schema_version,size_bytes\n1,eight\n").unwrap();
        assert!(error(&path).contains(":2: not a schema_version 1 row"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
