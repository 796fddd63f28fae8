//! The long-form CSV: one `Row` per measurement, flushed as soon as it is
//! measured, in a file that is never overwritten.

use super::{Exporter, Row, RunInfo, SizeResult, Summary};
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
    /// Writes and flushes rows measured outside the collective driver (the
    /// verbs benchmarks build their own).
    pub fn write_rows(&mut self, rows: &[Row]) -> anyhow::Result<()> {
        for row in rows {
            self.writer.serialize(row)?;
        }
        self.writer
            .flush()
            .with_context(|| format!("--csv {}: write failed", self.path.display()))?;
        Ok(())
    }
}

impl Exporter for CsvExport {
    fn start(&mut self, _run: &RunInfo) -> anyhow::Result<()> {
        Ok(())
    }

    fn record(&mut self, run: &RunInfo, result: &SizeResult) -> anyhow::Result<()> {
        let rows: Vec<Row> = result
            .measurements
            .iter()
            .map(|m| Row::new(run, result, m))
            .collect();
        self.write_rows(&rows)
    }

    fn finish(&mut self, _run: &RunInfo, _summary: &Summary) -> anyhow::Result<()> {
        self.writer.flush()?;
        Ok(())
    }
}
