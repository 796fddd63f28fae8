//! Where an output may go, checked before anything is measured or created: one
//! line naming the flag, what was typed and the fix.

use super::path::{bare, file_kind, folder_of};
use crate::cli::io_reason;
use crate::job::UsageError;
use std::path::Path;

/// What an existing regular file at an output path means.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Existing {
    /// Refused unless empty: `what` ("runs", "findings") are never overwritten.
    Refused { what: &'static str },
    /// `--csv`: refused when it holds rows, unless `append`.
    Rows { append: bool },
    /// `-J`: kept; the output goes to PATH.0, PATH.1, ... as nccl-tests probes.
    Numbered,
}

/// An output file's flag, as its messages name it.
#[derive(Clone, Copy, Debug)]
pub struct FileFlag<'a> {
    /// "--csv", "-J/--output_file".
    pub flag: &'a str,
    /// A file name the fix suggests: "results.csv" (its extension names the kind).
    pub example: &'a str,
    pub existing: Existing,
}

/// `--csv`, of every benchmark.
pub fn csv_flag(append: bool) -> FileFlag<'static> {
    FileFlag {
        flag: "--csv",
        example: "results.csv",
        existing: Existing::Rows { append },
    }
}

/// `--counters`, of the collectives and the verbs binaries.
pub const COUNTERS_FLAG: FileFlag<'static> = FileFlag {
    flag: "--counters",
    example: "counters.csv",
    existing: Existing::Refused { what: "runs" },
};

/// A file longer than this holds more than a header line.
const HEADER_MAX: u64 = 64 << 10;

/// An output file, before anything is created: a regular file the rule takes,
/// or a new one in a folder this process can create files in (the folders
/// between are made later). Never opens what is not a regular file (a FIFO would
/// block) and never follows a link at the path: a link planted there would
/// have the run write wherever it points.
pub fn check_file(f: &FileFlag, path: Option<&Path>) -> Result<(), UsageError> {
    let Some(path) = path else {
        return Ok(());
    };
    let flag = format!("{} {}", f.flag, path.display());
    let refuse = |fix: String| Err(UsageError(format!("{flag}: {fix}")));
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return check_new_file(&flag, path),
        // A file where a folder should be, or a folder that cannot be searched.
        Err(e) => return check_new_file(&flag, path).and(refuse(io_reason(&e))),
    };
    let ext = Path::new(f.example)
        .extension()
        .map_or(String::new(), |e| e.to_string_lossy().into_owned());
    match file_kind(&meta) {
        Some("a directory") => refuse(format!(
            "is a directory; give a file in it, e.g. {} {}",
            f.flag.split('/').next().unwrap_or(f.flag),
            path.join(f.example).display()
        )),
        Some("a symbolic link") => refuse(format!(
            "is a symbolic link{}, and outputs are never written through one; give the path of a new .{ext} file",
            std::fs::read_link(path).map_or(String::new(), |to| format!(" (to {})", to.display()))
        )),
        Some(kind) => refuse(format!(
            "is {kind}, not a regular file; give the path of a .{ext} file"
        )),
        None => match f.existing {
            Existing::Refused { what } if meta.len() > 0 => refuse(format!(
                "the file exists and {what} are never overwritten; choose a new path"
            )),
            Existing::Rows { append: false } if holds_rows(path, meta.len()) => refuse(
                "the file exists and runs are never overwritten; choose a new path or add --append"
                    .into(),
            ),
            // Added to where it is: the folder need not take new files.
            Existing::Rows { .. } => super::create::open_existing(path, true)
                .map(drop)
                .or_else(|e| refuse(format!("cannot write it ({})", io_reason(&e)))),
            _ => check_new_file(&flag, path),
        },
    }
}

/// Whether a regular file of `len` bytes holds anything but a fabricbench header
/// line (whose first column is schema_version): a run that stopped before its
/// first row lost nothing, so the same command may run again.
fn holds_rows(path: &Path, len: u64) -> bool {
    use std::io::Read;
    if len > HEADER_MAX {
        return true;
    }
    let mut text = Vec::new();
    let read = super::create::open_existing(path, false)
        .and_then(|f| f.take(HEADER_MAX).read_to_end(&mut text));
    let header_only = text.starts_with(b"schema_version,")
        && text.iter().position(|&b| b == b'\n') == Some(text.len() - 1);
    read.is_err() || !(text.is_empty() || header_only)
}

/// A file that does not exist yet: the folder it goes in must be one this
/// process can create and write.
fn check_new_file(flag: &str, path: &Path) -> Result<(), UsageError> {
    check_writable(flag, folder_of(path))
}

/// `--plot DIR`, `--hist DIR`, `plot -o DIR`: a folder this process can write,
/// or one it can create; `holds` says what goes in it ("pictures").
pub fn check_folder(flag: &str, dir: Option<&Path>, holds: &str) -> Result<(), UsageError> {
    let Some(dir) = dir else {
        return Ok(());
    };
    let flag = format!("{flag} {}", dir.display());
    match std::fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => Err(UsageError(format!(
            "{flag}: is a file, not a folder; give a folder for the {holds}"
        ))),
        _ if dir.symlink_metadata().is_ok() && !dir.exists() => Err(UsageError(format!(
            "{flag}: is a symbolic link to nothing; give a folder for the {holds}"
        ))),
        _ => check_writable(&flag, dir),
    }
}

/// rack_check's `--out DIR`: a folder to create, never one that exists.
pub fn check_new_folder(flag: &str, dir: &Path, what: &str) -> Result<(), UsageError> {
    let flag = format!("{flag} {}", dir.display());
    if dir.symlink_metadata().is_ok() {
        return Err(UsageError(format!(
            "{flag}: exists, and {what} are never overwritten; choose a new directory"
        )));
    }
    check_writable(&flag, dir)
}

/// `dir`, or its nearest existing parent when the folders below are still to be
/// created, must be a directory this process can create a file in: tried with a
/// temporary file, removed at once (access(2) lets root pass where it still
/// cannot write: sysfs).
fn check_writable(flag: &str, dir: &Path) -> Result<(), UsageError> {
    let mut existing = dir;
    while existing.symlink_metadata().is_err() {
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
    let probe = tempfile::Builder::new()
        .prefix(".fabricbench-probe-")
        .tempfile_in(existing);
    probe.map(drop).map_err(|e| {
        UsageError(format!(
            "{flag}: cannot create files in {} ({}); choose a folder you can write",
            existing.display(),
            io_reason(&bare(e))
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::fixture::Tree;

    const CSV: FileFlag = FileFlag {
        flag: "--csv",
        example: "results.csv",
        existing: Existing::Rows { append: false },
    };

    #[test]
    fn csv_targets() {
        let tree = Tree::temp("csv");
        let dir = tree.dir().to_path_buf();
        let check = |p: &Path, append| {
            let f = FileFlag {
                existing: Existing::Rows { append },
                ..CSV
            };
            check_file(&f, Some(p)).map_err(|e| e.0)
        };
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
            .contains("is a directory; give a file in it, e.g. --csv"));
        assert!(check(&rows.join("x.csv"), false)
            .unwrap_err()
            .contains("rows.csv is not a directory"));
        // A link is refused whatever it points at, --append or not.
        let link = dir.join("link.csv");
        std::os::unix::fs::symlink(&rows, &link).unwrap();
        assert_eq!(
            check(&link, true).unwrap_err(),
            format!(
                "--csv {}: is a symbolic link (to {}), and outputs are never written through one; give the path of a new .csv file",
                link.display(),
                rows.display()
            )
        );
        let dangling = dir.join("dangling.csv");
        std::os::unix::fs::symlink(dir.join("nowhere"), &dangling).unwrap();
        assert!(check(&dangling, false)
            .unwrap_err()
            .contains("is a symbolic link"));
        // No probe file is left behind.
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with(".fabricbench-probe"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn refused_and_numbered_files() {
        let tree = Tree::temp("files");
        let dir = tree.dir().to_path_buf();
        let full = dir.join("full.json");
        std::fs::write(&full, "{}").unwrap();
        let empty = dir.join("empty.json");
        std::fs::write(&empty, "").unwrap();
        let refused = FileFlag {
            flag: "--json",
            example: "doctor.json",
            existing: Existing::Refused { what: "findings" },
        };
        assert_eq!(
            check_file(&refused, Some(&full)).unwrap_err().0,
            format!(
                "--json {}: the file exists and findings are never overwritten; choose a new path",
                full.display()
            )
        );
        assert!(check_file(&refused, Some(&empty)).is_ok());
        let numbered = FileFlag {
            existing: Existing::Numbered,
            ..refused
        };
        assert!(check_file(&numbered, Some(&full)).is_ok());
        assert_eq!(
            check_file(&numbered, Some(Path::new("/dev/null"))).unwrap_err().0,
            "--json /dev/null: is a character device, not a regular file; give the path of a .json file"
        );
    }

    #[test]
    fn folders() {
        let tree = Tree::temp("folders");
        let dir = tree.dir().to_path_buf();
        let file = dir.join("f");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(
            check_folder("--plot", Some(&file), "pictures")
                .unwrap_err()
                .0,
            format!(
                "--plot {}: is a file, not a folder; give a folder for the pictures",
                file.display()
            )
        );
        assert!(check_folder("--plot", Some(&dir.join("a/b")), "pictures").is_ok());
        assert!(check_new_folder("--out", &dir, "reports")
            .unwrap_err()
            .0
            .ends_with("exists, and reports are never overwritten; choose a new directory"));
        assert!(check_new_folder("--out", &dir.join("new"), "reports").is_ok());
    }
}
