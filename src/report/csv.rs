//! The long-form CSV: one `Row` per measurement, each written whole (one write of
//! a complete line) as soon as it is measured, in a file that is never
//! overwritten; and reading it back for `plot` and `compare`.
//!
//! The header is written when the file is created, so a run that stops before its
//! first row leaves a header-only file, which the same command accepts again
//! (`output::check_file`). `--append` checks the header and every row's
//! schema_version, and cuts away a partial last line (a crash or a full disk in
//! the middle of a row) before adding to the file. A write that fails is cut back
//! to the last whole row, so every row written before it still loads.

use super::{Exporter, Row, RunInfo, Summary, ToRows, SCHEMA_VERSION};
use crate::cli::io_reason;
use crate::input::{self, InputError};
use crate::output::{create_new, open_existing};
use crate::sizes::human_bytes;
use anyhow::{anyhow, bail, Context};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// The most a results file may hold: what `read_rows` and the `--append` check
/// read from a path the user gave (rows are about 1 KB: half a million of them).
pub const MAX_CSV_BYTES: u64 = 512 << 20;
/// The longest last line searched for its start when a file does not end in a
/// line break.
const MAX_LINE: u64 = 1 << 20;

pub struct CsvExport {
    /// "--csv PATH": what messages name.
    flag: String,
    file: File,
    /// Where the last whole row ends: a write that fails is cut back to it.
    len: u64,
    rows: u64,
}

/// The header line this version writes: the `Row` field names.
pub fn header() -> Vec<String> {
    let line = header_line();
    line.trim_end().split(',').map(str::to_string).collect()
}

/// The header as written, line break included.
fn header_line() -> String {
    header_line_of::<Row>()
}

/// The header of rows of type `T`: its field names.
fn header_line_of<T: serde::Serialize + Default>() -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(T::default())
        .expect("serialising a row to memory cannot fail");
    let bytes = w.into_inner().expect("in-memory writer");
    let text = String::from_utf8(bytes).expect("CSV is UTF-8");
    text.split_inclusive('\n').next().unwrap_or("").to_string()
}

/// One row as one complete CSV line.
fn row_line<T: serde::Serialize>(row: &T) -> anyhow::Result<Vec<u8>> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    w.serialize(row)?;
    w.into_inner().map_err(|e| anyhow!("{}", e.error()))
}

/// Opens a path the user gave for reading, refusing before it is opened what is
/// not a regular file (opening a FIFO blocks; a device has no end) or is larger
/// than a results file; `what` names it in messages. Returns the file and its length.
pub fn open_regular(path: &Path, what: &str) -> anyhow::Result<(File, u64)> {
    input::open_regular(path, MAX_CSV_BYTES).map_err(|e| results_file_error(e, what))
}

/// The length of an open results file, or why it is not one.
fn regular_len(meta: &std::fs::Metadata, what: &str) -> anyhow::Result<u64> {
    input::regular_len(meta, MAX_CSV_BYTES).map_err(|e| results_file_error(e, what))
}

fn results_file_error(e: InputError, what: &str) -> anyhow::Error {
    match e {
        InputError::NotRegular(kind) => {
            anyhow!("{what}: is {kind}, not a regular file; give a fabricbench CSV")
        }
        InputError::TooLarge { max } => anyhow!(
            "{what}: is larger than a fabricbench CSV may be ({}); split it or give another file",
            human_bytes(max)
        ),
        other => anyhow!("{what}: {other}"),
    }
}

/// Where the last whole line of `file` (`len` bytes) ends: `len` when the file
/// ends in a line break (or is empty), else just after the last line break.
fn whole_lines_end(file: &mut File, len: u64, what: &str) -> anyhow::Result<u64> {
    let from = len.saturating_sub(MAX_LINE);
    let mut tail = Vec::new();
    file.seek(SeekFrom::Start(from))?;
    file.take(len - from).read_to_end(&mut tail)?;
    file.seek(SeekFrom::Start(0))?;
    match tail.iter().rposition(|&b| b == b'\n') {
        Some(at) => Ok(from + at as u64 + 1),
        None if len == 0 => Ok(0),
        None if from == 0 => Ok(0),
        None => bail!(
            "{what}: the last line is longer than {}: not a fabricbench CSV",
            human_bytes(MAX_LINE)
        ),
    }
}

/// Hands `each` the rows of the first `len` bytes of a fabricbench CSV, one
/// at a time, refusing rows of another schema_version; returns how many.
/// `label` starts each message.
fn parse_rows(
    file: File,
    len: u64,
    label: &str,
    each: &mut dyn FnMut(Row) -> anyhow::Result<()>,
) -> anyhow::Result<usize> {
    let mut reader = csv::Reader::from_reader(std::io::BufReader::new(file.take(len)));
    let headers = reader
        .headers()
        .with_context(|| format!("{label}: cannot read the header"))?
        .clone();
    let Some(version_column) = headers.iter().position(|h| h == "schema_version") else {
        bail!("{label}: not a fabricbench CSV (no schema_version column)");
    };
    let mut record = csv::StringRecord::new();
    let mut rows = 0;
    loop {
        let line = rows + 2;
        let more = reader
            .read_record(&mut record)
            .with_context(|| format!("{label}:{line}: unreadable"))?;
        if !more {
            return Ok(rows);
        }
        let version = record.get(version_column).unwrap_or("");
        if version != SCHEMA_VERSION.to_string() {
            bail!(
                "{label}:{line}: schema_version {version}, but this fabricbench reads schema_version {SCHEMA_VERSION}; \
                 use the fabricbench version that wrote the file"
            );
        }
        let row: Row = record.deserialize(Some(&headers)).with_context(|| {
            format!("{label}:{line}: not a schema_version {SCHEMA_VERSION} row")
        })?;
        each(row)?;
        rows += 1;
    }
}

/// Hands `each` every row of a fabricbench CSV as it is read, so that a file
/// of any length takes no more memory than what `each` keeps; refuses files of
/// another schema_version, a partial last row, what is not a regular file,
/// files larger than `MAX_CSV_BYTES`, and files of no rows.
pub fn for_each_row(
    path: &Path,
    mut each: impl FnMut(Row) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let label = path.display().to_string();
    let (mut file, len) = open_regular(path, &label)?;
    let whole = whole_lines_end(&mut file, len, &label)?;
    let rows = parse_rows(file, whole, &label, &mut each)?;
    if whole < len {
        bail!(
            "{label}:{}: a partial last row ({} bytes without a line break: the run that wrote it was \
             interrupted); --append to this file removes it",
            rows + 2,
            len - whole
        );
    }
    if rows == 0 {
        bail!("{label}: no rows");
    }
    Ok(())
}

/// Reads every row of a fabricbench CSV (see `for_each_row`).
pub fn read_rows(path: &Path) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for_each_row(path, |row| {
        rows.push(row);
        Ok(())
    })?;
    Ok(rows)
}

impl CsvExport {
    /// Creates `path` and writes the header, or reuses a file of this version's
    /// header alone (a run that wrote no rows), or with `append` adds to a file of
    /// this version after checking it (see the module's comment).
    pub fn open(path: &Path, append: bool) -> anyhow::Result<CsvExport> {
        let flag = format!("--csv {}", path.display());
        let (file, len) = match create_new(path) {
            Ok(file) => (file, 0),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let file = open_existing(path, true)
                    .map_err(|e| anyhow!("{flag}: cannot open for writing: {}", io_reason(&e)))?;
                let len = check_existing(&file, append, &flag)?;
                (file, len)
            }
            Err(e) => bail!("{flag}: cannot create the file: {}", io_reason(&e)),
        };
        let mut csv = CsvExport {
            flag: flag.clone(),
            file,
            len,
            rows: 0,
        };
        if len == 0 {
            if let Err(e) = csv.write_line(header_line().as_bytes()) {
                // Empty, so nothing is lost: no 0-byte file is left behind.
                let _ = std::fs::remove_file(path);
                bail!("{flag}: cannot write the header: {e}");
            }
        }
        Ok(csv)
    }

    /// Writes `line` with one write (a row is never split across two), or cuts
    /// the file back to its last whole row and says why it could not.
    fn write_line(&mut self, line: &[u8]) -> anyhow::Result<()> {
        match self.file.write_all(line) {
            Ok(()) => {
                self.len += line.len() as u64;
                Ok(())
            }
            Err(e) => {
                // A write that stopped part way (a full disk) leaves no partial row.
                let _ = self.file.set_len(self.len);
                Err(anyhow!("{}", io_reason(&e)))
            }
        }
    }

    /// A new file (`flag` names it) of rows of another type than `Row`
    /// (`--counters`), its header written: never an existing file.
    pub fn create_for<T: serde::Serialize + Default>(
        path: &Path,
        flag: &str,
    ) -> anyhow::Result<CsvExport> {
        let flag = format!("{flag} {}", path.display());
        let file = new_file(path, &flag)?;
        let mut csv = CsvExport {
            flag: flag.clone(),
            file,
            len: 0,
            rows: 0,
        };
        if let Err(e) = csv.write_line(header_line_of::<T>().as_bytes()) {
            let _ = std::fs::remove_file(path);
            bail!("{flag}: cannot write the header: {e}");
        }
        Ok(csv)
    }

    /// Writes rows, each whole, so a crash or a full disk keeps every row before it.
    pub fn write_rows(&mut self, rows: impl IntoIterator<Item = Row>) -> anyhow::Result<()> {
        self.write_records(rows)
    }

    /// Writes rows of any type, each whole (see `write_rows`).
    pub fn write_records<T: serde::Serialize>(
        &mut self,
        rows: impl IntoIterator<Item = T>,
    ) -> anyhow::Result<()> {
        for row in rows {
            let line = row_line(&row)?;
            if let Err(e) = self.write_line(&line) {
                bail!(
                    "{}: {e}: row {} was not written; the {} rows before it are kept",
                    self.flag,
                    self.rows + 1,
                    self.rows
                );
            }
            self.rows += 1;
        }
        Ok(())
    }
}

/// A new file for writing: created (never a file or link that appeared since
/// the arguments were checked), or an empty regular one, left by a run that
/// stopped before it wrote anything.
pub fn new_file(path: &Path, flag: &str) -> anyhow::Result<File> {
    let exists =
        || anyhow!("{flag}: the file exists and runs are never overwritten; choose a new path");
    match create_new(path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let file = open_existing(path, true).map_err(|_| exists())?;
            match file.metadata()?.len() {
                0 => Ok(file),
                _ => Err(exists()),
            }
        }
        other => other.map_err(|e| anyhow!("{flag}: cannot create the file: {}", io_reason(&e))),
    }
}

/// An existing file, opened to add to. Without `append` it is reused only when
/// it holds no rows (empty, or this version's header alone); with `append` its
/// header and rows must be this version's, and a partial last line is cut away
/// and said so. Returns where its whole lines end.
fn check_existing(file: &File, append: bool, flag: &str) -> anyhow::Result<u64> {
    let len = regular_len(&file.metadata()?, flag)?;
    let mut reader = file.try_clone()?;
    let whole = whole_lines_end(&mut reader, len, flag)?;
    let ours = header_line();
    let mut start = vec![0u8; ours.len().min(len as usize)];
    reader.read_exact(&mut start)?;
    reader.seek(SeekFrom::Start(0))?;
    if !append {
        if len == 0 || (len == ours.len() as u64 && start == ours.as_bytes()) {
            return Ok(len);
        }
        bail!("{flag}: the file exists and runs are never overwritten; choose a new path or add --append");
    }
    // Before the first line break, only a partial header can be ours.
    let our_header = match whole {
        0 => ours.as_bytes().starts_with(&start),
        _ => start == ours.as_bytes(),
    };
    if !our_header {
        bail!("{flag} --append: the file has other columns (another schema_version); write to a new file");
    }
    if whole > 0 {
        // Every row is checked, none kept: a file of any length in constant memory.
        parse_rows(
            reader,
            whole,
            flag.trim_start_matches("--csv "),
            &mut |_| Ok(()),
        )
        .with_context(|| format!("{flag} --append"))?;
    }
    if whole < len {
        file.set_len(whole).map_err(|e| {
            anyhow!(
                "{flag}: cannot remove a partial last row: {}",
                io_reason(&e)
            )
        })?;
        eprintln!(
            "fabricbench: {flag}: removed a partial last row ({} bytes) left by an interrupted run",
            len - whole
        );
    }
    Ok(whole)
}

impl<R: ToRows + ?Sized> Exporter<R> for CsvExport {
    fn start(&mut self, _run: &RunInfo) -> anyhow::Result<()> {
        Ok(())
    }

    fn record(&mut self, run: &RunInfo, result: &R) -> anyhow::Result<()> {
        self.write_rows(result.rows(run))
    }

    fn finish(&mut self, _run: &RunInfo, _summary: &Summary) -> anyhow::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

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

    fn open_error(path: &Path, append: bool) -> String {
        format!("{:#}", CsvExport::open(path, append).err().unwrap())
    }

    #[test]
    fn a_file_without_rows_is_reused_and_one_with_rows_is_not() {
        let dir = scratch("reuse");
        let path = dir.join("run.csv");
        drop(CsvExport::open(&path, false).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), header_line());
        CsvExport::open(&path, false)
            .unwrap()
            .write_rows(vec![row(8)])
            .unwrap();
        assert_eq!(read_rows(&path).unwrap(), vec![row(8)]);
        assert!(open_error(&path, false).ends_with(
            "the file exists and runs are never overwritten; choose a new path or add --append"
        ));
        std::fs::write(&path, "").unwrap();
        CsvExport::open(&path, false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), header_line());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn append_cuts_a_partial_last_row_and_refuses_other_schemas() {
        let dir = scratch("torn");
        let path = written(&dir, vec![row(8), row(16)]);
        let whole = std::fs::read(&path).unwrap();
        let torn = &row_line(&row(32)).unwrap()[..20];
        std::fs::write(&path, [&whole[..], torn].concat()).unwrap();
        assert_eq!(
            error(&path),
            format!("{}:4: a partial last row (20 bytes without a line break: the run that wrote it was interrupted); --append to this file removes it", path.display())
        );
        CsvExport::open(&path, true)
            .unwrap()
            .write_rows(vec![row(64)])
            .unwrap();
        assert_eq!(read_rows(&path).unwrap(), vec![row(8), row(16), row(64)]);

        let mut future = row(8);
        future.schema_version = SCHEMA_VERSION + 1;
        let other = dir.join("other.csv");
        std::fs::write(
            &other,
            [header_line().into_bytes(), row_line(&future).unwrap()].concat(),
        )
        .unwrap();
        let e = open_error(&other, true);
        assert!(
            e.starts_with(&format!(
                "--csv {0} --append: {0}:2: schema_version 2, but",
                other.display()
            )),
            "{e}"
        );
        std::fs::write(&other, "a,b\n1,2\n").unwrap();
        assert!(open_error(&other, true).ends_with(
            "--append: the file has other columns (another schema_version); write to a new file"
        ));
        // A header cut short is ours started over.
        std::fs::write(&other, &header_line()[..10]).unwrap();
        drop(CsvExport::open(&other, true).unwrap());
        assert_eq!(std::fs::read_to_string(&other).unwrap(), header_line());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_new_file_may_be_an_empty_one_left_by_a_run_that_wrote_nothing() {
        let dir = scratch("new-file");
        let path = dir.join("m.csv");
        drop(new_file(&path, "--csv m.csv").unwrap());
        drop(new_file(&path, "--csv m.csv").unwrap());
        std::fs::write(&path, "x").unwrap();
        let e = new_file(&path, "--csv m.csv").unwrap_err().to_string();
        assert!(
            e.starts_with("--csv m.csv: the file exists and runs are never overwritten"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn what_is_not_a_regular_file_is_refused_unopened() {
        let dir = scratch("kinds");
        let fifo = dir.join("fifo.csv");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for (path, kind) in [
            (fifo.as_path(), "a FIFO"),
            (Path::new("/dev/null"), "a character device"),
            (dir.as_path(), "a directory"),
        ] {
            let e = error(path);
            assert_eq!(
                e,
                format!(
                    "{}: is {kind}, not a regular file; give a fabricbench CSV",
                    path.display()
                )
            );
            assert!(open_error(path, true).contains(&format!("is {kind}, not a regular file")));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
