//! Command-line pieces that several families share: the size parser and the flag
//! groups that clap `flatten`s into each binary's arguments; `numbers`: the
//! parsers of number flags.

mod numbers;

pub use numbers::{real, shown, whole, Rule, Whole};

use crate::job::UsageError;
use crate::sizes::parse_size;
use clap::Parser;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// A size flag's value: bytes, with binary K, M, G suffixes (1K = 1024).
pub fn size_arg(text: &str) -> Result<u64, String> {
    parse_size(text)
}

/// `--csv PATH` and `--append`: where rows go; a file is never overwritten.
#[derive(clap::Args, Debug, Clone, Default, Serialize)]
pub struct CsvArgs {
    /// Append one row per measured size to this CSV (never overwritten)
    #[arg(long = "csv")]
    pub csv: Option<PathBuf>,
    /// With --csv: add rows to an existing file of the same schema
    #[arg(long = "append", requires = "csv")]
    pub append: bool,
}

/// `--counters FILE`: every fabric counter delta of every size, in long form.
#[derive(clap::Args, Debug, Clone, Default, Serialize)]
pub struct CountersArgs {
    /// Write every fabric counter delta of every size to this CSV (long form; never overwritten)
    #[arg(long = "counters", value_name = "FILE")]
    pub counters: Option<PathBuf>,
}

impl CountersArgs {
    /// The file must be new (or empty) and not the --csv file.
    pub fn check(&self, csv: Option<&Path>) -> Result<(), UsageError> {
        let Some(path) = &self.counters else {
            return Ok(());
        };
        let flag = format!("--counters {}", path.display());
        if csv == Some(path.as_path()) {
            return Err(UsageError(format!(
                "{flag}: is the --csv file too; give the counters a file of their own, e.g. --counters counters.csv"
            )));
        }
        match std::fs::metadata(path) {
            Ok(meta) => match file_kind(&meta) {
                Some(kind) => Err(UsageError(format!(
                    "{flag}: is {kind}, not a regular file; give the path of a new .csv file"
                ))),
                None if meta.len() > 0 => Err(UsageError(format!(
                    "{flag}: the file exists and runs are never overwritten; choose a new path"
                ))),
                None => Ok(()),
            },
            Err(_) => check_new_file(&flag, path),
        }
    }
}

/// `--all-pairs` and how a slow pair is judged.
#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct AllPairsArgs {
    /// Measure every pair of ranks in rounds of disjoint pairs; --csv gets the N x N matrices and a heatmap
    #[arg(long = "all-pairs")]
    pub all_pairs: bool,
    /// With --all-pairs: a pair whose bandwidth is below this fraction of the median is slow
    #[arg(long = "slow-fraction", default_value_t = 0.9, value_parser = real(SLOW_FRACTION), allow_hyphen_values = true)]
    pub slow_fraction: f64,
    /// With --all-pairs: a pair whose latency is above this multiple of the lowest is slow
    #[arg(long = "slow-latency", default_value_t = 2.0, value_parser = real(SLOW_LATENCY), allow_hyphen_values = true)]
    pub slow_latency: f64,
}

/// --slow-fraction (a spec's slow_fraction): 1 calls every pair below the
/// median slow, 0 none.
pub const SLOW_FRACTION: Rule = Rule {
    least: 0.0,
    above: true,
    most: 1.0,
    what: "a fraction of the median",
    example: "0.9",
};

/// --slow-latency (a spec's slow_latency): below 1 even the fastest pair is
/// slow; a million times the lowest is no bound on any fabric.
pub const SLOW_LATENCY: Rule = Rule {
    least: 1.0,
    above: false,
    most: 1e6,
    what: "a multiple of the lowest latency",
    example: "2",
};

/// What a path other than a regular file is, for messages ("a directory", "a FIFO").
pub fn file_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    [
        (t.is_dir(), "a directory"),
        (t.is_fifo(), "a FIFO"),
        (t.is_char_device(), "a character device"),
        (t.is_block_device(), "a block device"),
        (t.is_socket(), "a socket"),
    ]
    .into_iter()
    .find_map(|(is, kind)| is.then_some(kind))
    .or((!t.is_file()).then_some("not a regular file"))
}

/// A file longer than this holds more than a header line.
const HEADER_MAX: u64 = 64 << 10;

/// `--csv PATH`, checked before anything is created: a regular file, or a new one
/// in a folder that can be created and written; an existing file is refused
/// unless `append` or it holds no rows (empty, or one header line left by a run
/// that stopped before its first row: that run lost nothing, so the same command
/// may run again). Never opens what is not a regular file (a FIFO would block).
pub fn check_csv_target(csv: Option<&Path>, append: bool) -> Result<(), UsageError> {
    let Some(path) = csv else {
        return Ok(());
    };
    let flag = format!("--csv {}", path.display());
    match std::fs::metadata(path) {
        Ok(meta) => match file_kind(&meta) {
            Some("a directory") => Err(UsageError(format!(
                "{flag}: is a directory; give a file in it, e.g. --csv {}",
                path.join("results.csv").display()
            ))),
            Some(kind) => Err(UsageError(format!(
                "{flag}: is {kind}, not a regular file; give the path of a .csv file"
            ))),
            None if !append && holds_rows(path, meta.len()) => Err(UsageError(format!(
                "{flag}: the file exists and runs are never overwritten; choose a new path or add --append"
            ))),
            None => Ok(()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => check_new_file(&flag, path),
        // A file where a folder should be, or a folder that cannot be searched.
        Err(e) => check_new_file(&flag, path)
            .and(Err(UsageError(format!("{flag}: {}", io_reason(&e))))),
    }
}

/// A results file other than the CSV (`--out_json_file`), checked as `--csv` is
/// without `--append`: a new file in a folder this process can write, or an
/// empty regular file; never a FIFO, device or directory, never one with contents.
pub fn check_output_target(flag: &str, path: &Path, ext: &str) -> Result<(), UsageError> {
    let flag = format!("{flag} {}", path.display());
    match std::fs::metadata(path) {
        Ok(meta) => match file_kind(&meta) {
            Some(kind) => Err(UsageError(format!(
                "{flag}: is {kind}, not a regular file; give the path of a .{ext} file"
            ))),
            None if meta.len() > 0 => Err(UsageError(format!(
                "{flag}: the file exists and runs are never overwritten; choose a new path"
            ))),
            None => Ok(()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => check_new_file(&flag, path),
        Err(e) => {
            check_new_file(&flag, path).and(Err(UsageError(format!("{flag}: {}", io_reason(&e)))))
        }
    }
}

/// Whether a regular file of `len` bytes holds anything but a fabricbench header
/// line (whose first column is schema_version).
fn holds_rows(path: &Path, len: u64) -> bool {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    if len > HEADER_MAX {
        return true;
    }
    let mut text = Vec::new();
    // O_NONBLOCK: should a FIFO replace the file after its check, the open does not block.
    let read = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .and_then(|f| f.take(HEADER_MAX).read_to_end(&mut text));
    let header_only = text.starts_with(b"schema_version,")
        && text.iter().position(|&b| b == b'\n') == Some(text.len() - 1);
    read.is_err() || !(text.is_empty() || header_only)
}

/// A file that does not exist yet: the folder it goes in must be one this
/// process can create and write.
fn check_new_file(flag: &str, path: &Path) -> Result<(), UsageError> {
    let folder = path.parent().filter(|d| !d.as_os_str().is_empty());
    check_folder(flag, folder.unwrap_or(Path::new(".")))
}

/// `--plot DIR`, `--hist DIR`: a folder this process can write, or one it can create.
pub fn check_folder_target(flag: &str, dir: Option<&Path>) -> Result<(), UsageError> {
    match dir {
        Some(dir) if dir.exists() && !dir.is_dir() => Err(UsageError(format!(
            "{flag} {}: exists and is not a directory; give a directory",
            dir.display()
        ))),
        Some(dir) => check_folder(&format!("{flag} {}", dir.display()), dir),
        None => Ok(()),
    }
}

/// `dir`, or its nearest existing parent when the folders below are still to be
/// created, must be a directory this process may write in.
fn check_folder(flag: &str, dir: &Path) -> Result<(), UsageError> {
    let mut existing = dir;
    while !existing.exists() {
        match existing.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(up) => existing = up,
            None => {
                existing = Path::new(".");
                break;
            }
        }
    }
    if !existing.is_dir() {
        return Err(UsageError(format!(
            "{flag}: {} is not a directory; give a path in a folder",
            existing.display()
        )));
    }
    writable(existing).map_err(|e| {
        UsageError(format!(
            "{flag}: cannot create files in {} ({}); choose a folder you can write",
            existing.display(),
            io_reason(&e)
        ))
    })
}

/// access(2) W_OK: permissions and read-only mounts (root passes the first).
fn writable(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    match unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// An I/O error as words: "No space left on device", without Rust's "(os error 28)".
pub fn io_reason(e: &std::io::Error) -> String {
    in_words(&e.to_string())
}

/// A message with Rust's " (os error N)" after each I/O error taken out.
pub fn in_words(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(" (os error ") {
        out += &rest[..at];
        rest = &rest[at..];
        rest = rest.find(')').map_or("", |end| &rest[end + 1..]);
    }
    out + rest
}

/// Parses a command line, turning clap's multi-line errors into one line.
/// `--help` and `--version` print and exit 0 as usual.
pub fn parse_one_line<P, I, T>(argv: I) -> Result<P, UsageError>
where
    P: Parser,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    P::try_parse_from(argv).map_err(|e| match e.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => e.exit(),
        _ => UsageError(
            invalid_choice(&e)
                .or_else(|| invalid_value(&e, &P::command()))
                .unwrap_or_else(|| one_line(&e)),
        ),
    })
}

/// A value its parser refused, in the house style: "-n/--iters -1: use a whole
/// number >= 1" (clap's own message quotes the value name and spans lines). A
/// reason that quotes the value already follows the flag alone:
/// "-e/--maxbytes: '12Q' is not a size: ...".
fn invalid_value(e: &clap::Error, command: &clap::Command) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let (
        ErrorKind::ValueValidation,
        Some(ContextValue::String(arg)),
        Some(ContextValue::String(value)),
    ) = (
        e.kind(),
        e.get(ContextKind::InvalidArg),
        e.get(ContextKind::InvalidValue),
    )
    else {
        return None;
    };
    let reason = std::error::Error::source(e)?.to_string();
    let token = arg.split_whitespace().next().unwrap_or(arg);
    let flag = command
        .get_arguments()
        .find(|a| {
            a.get_long().map(|l| format!("--{l}")).as_deref() == Some(token)
                || a.get_short().map(|s| format!("-{s}")).as_deref() == Some(token)
        })
        .map_or(token.to_string(), |a| match (a.get_short(), a.get_long()) {
            (Some(s), Some(l)) => format!("-{s}/--{l}"),
            _ => token.to_string(),
        });
    Some(match reason.starts_with(&format!("'{value}'")) {
        true => format!("{flag}: {reason}"),
        false => format!("{flag} {value}: {reason}"),
    })
}

/// clap's message up to its usage block, on one line (a missing argument is named
/// on the line after the first).
fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let message: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    format!(
        "{} (see --help)",
        message.join(" ").trim_start_matches("error: ")
    )
}

/// A value outside a flag's fixed choices, in the house style: "--backend tcp: use
/// mpi, nccl or auto" (clap's own message spans lines and lists them in brackets).
fn invalid_choice(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let (
        Some(ContextValue::String(arg)),
        Some(ContextValue::String(value)),
        Some(ContextValue::Strings(valid)),
    ) = (
        e.get(ContextKind::InvalidArg),
        e.get(ContextKind::InvalidValue),
        e.get(ContextKind::ValidValue),
    )
    else {
        return None;
    };
    let flag = arg.split_whitespace().next().unwrap_or(arg);
    let choices = match valid.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => return None,
    };
    Some(format!("{flag} {value}: use {choices}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_in_words() {
        assert_eq!(
            in_words("cannot read x: No such file or directory (os error 2)"),
            "cannot read x: No such file or directory"
        );
        assert_eq!(in_words("a (os error 2); b (os error 28)!"), "a; b!");
    }

    #[test]
    fn csv_targets() {
        let dir = std::env::temp_dir().join(format!("fb-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let check = |p: &Path, append| check_csv_target(Some(p), append).map_err(|e| e.0);
        let new = dir.join("sub/new.csv");
        assert_eq!(check(&new, false), Ok(()));
        let header_only = dir.join("header.csv");
        std::fs::write(&header_only, "schema_version,run_id\n").unwrap();
        assert_eq!(check(&header_only, false), Ok(()));
        let rows = dir.join("rows.csv");
        std::fs::write(&rows, "schema_version,run_id\n1,x\n").unwrap();
        assert!(check(&rows, false).unwrap_err().ends_with(
            "the file exists and runs are never overwritten; choose a new path or add --append"
        ));
        assert_eq!(check(&rows, true), Ok(()));
        let other = dir.join("other.csv");
        std::fs::write(&other, "precious\n").unwrap();
        assert!(check(&other, false).is_err());
        assert!(check(&dir, true)
            .unwrap_err()
            .contains("is a directory; give a file in it"));
        assert!(check(&rows.join("x.csv"), false)
            .unwrap_err()
            .contains("rows.csv is not a directory"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
