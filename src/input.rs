//! The one way a file that a flag, a variable, a spec or the machine names is
//! read: only a regular file (opening a FIFO blocks until a writer comes, a
//! device such as /dev/zero never ends), opened so that the open itself never
//! blocks, and never more than a bound the caller states. What could not be
//! read says why ([`InputError`]), so that messages can say "permission denied"
//! rather than guess.

use crate::cli::io_reason;
use crate::output::file_kind;
use crate::sizes::human_bytes;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Why a named file was not read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum InputError {
    #[error("no such file")]
    Missing,
    #[error("permission denied")]
    Denied,
    /// What it is instead ("a FIFO", "a directory").
    #[error("is {0}, not a regular file")]
    NotRegular(String),
    /// The file holds more than `max` bytes.
    #[error("holds more than {}", human_bytes(*max))]
    TooLarge { max: u64 },
    #[error("is not UTF-8 text")]
    NotText,
    /// Any other I/O error, in words.
    #[error("{0}")]
    Io(String),
}

impl From<std::io::Error> for InputError {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::NotFound => InputError::Missing,
            std::io::ErrorKind::PermissionDenied => InputError::Denied,
            _ => InputError::Io(io_reason(&e)),
        }
    }
}

/// The regular file at `path` (a symlink to one is followed), open for reading,
/// and its length; refused before it is opened when it is no regular file or
/// longer than `max`. Procfs files say length 0: [`read_bounded`] does not trust it.
pub fn open_regular(path: &Path, max: u64) -> Result<(File, u64), InputError> {
    let refuse = |meta: &std::fs::Metadata| regular_len(meta, max);
    refuse(&std::fs::metadata(path)?)?;
    // O_NONBLOCK: should a FIFO replace the file after the check, opening it does not block.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    // Checked again on the open file: the path may have changed in between.
    let len = refuse(&file.metadata()?)?;
    Ok((file, len))
}

/// The length of what `meta` describes when it is a regular file of at most
/// `max` bytes.
pub fn regular_len(meta: &std::fs::Metadata, max: u64) -> Result<u64, InputError> {
    match file_kind(meta) {
        Some(kind) => Err(InputError::NotRegular(kind.to_string())),
        None if meta.len() > max => Err(InputError::TooLarge { max }),
        None => Ok(meta.len()),
    }
}

/// The bytes of the regular file at `path`: at most `max`, or [`InputError::TooLarge`].
pub fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, InputError> {
    let (file, len) = open_regular(path, max)?;
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(InputError::from)?;
    match bytes.len() as u64 > max {
        true => Err(InputError::TooLarge { max }),
        false => Ok(bytes),
    }
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_text(path: &Path, max: u64) -> Result<String, InputError> {
    String::from_utf8(read_bounded(path, max)?).map_err(|_| InputError::NotText)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("fabricbench-input-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn only_regular_files_within_the_bound_are_read() {
        let d = dir("bounds");
        let file = d.join("f");
        std::fs::write(&file, "0123456789").unwrap();
        assert_eq!(read_text(&file, 10).unwrap(), "0123456789");
        assert_eq!(read_bounded(&file, 9), Err(InputError::TooLarge { max: 9 }));
        assert_eq!(read_bounded(&d.join("none"), 9), Err(InputError::Missing));
        assert_eq!(
            read_bounded(&d, 9),
            Err(InputError::NotRegular("a directory".into()))
        );
        // A device never ends: refused before it is opened.
        assert_eq!(
            read_bounded(Path::new("/dev/zero"), 1 << 20),
            Err(InputError::NotRegular("a character device".into()))
        );
        // A FIFO without a writer: refused at once, never waited on.
        let fifo = d.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        assert_eq!(
            read_bounded(&fifo, 9),
            Err(InputError::NotRegular("a FIFO".into()))
        );
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert_eq!(read_text(&file, 9), Err(InputError::NotText));
        // Procfs says length 0 and holds more: the bound holds on what is read.
        let stat = Path::new("/proc/self/status");
        assert!(read_text(stat, 1 << 20).unwrap().contains("Pid:"));
        assert_eq!(
            read_bounded(stat, 16),
            Err(InputError::TooLarge { max: 16 })
        );
        assert_eq!(
            InputError::TooLarge { max: 1 << 20 }.to_string(),
            "holds more than 1 MiB"
        );
    }
}
