//! Making outputs: never through a link, and a file written whole never seen
//! (or left) part written.

use super::path::{bare, file_kind, folder_of};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Files are made readable as the umask allows, as `File::create` makes them
/// (`tempfile` alone would make them 0600).
const MODE: u32 = 0o666;

/// A new file, its folders made first: O_EXCL|O_NOFOLLOW, so a file or link
/// that appeared at the path since it was checked is refused, never followed.
/// O_APPEND: another process that reuses the file (the other side of a verbs
/// pair given the same --csv) adds its rows after ours, never over them.
pub fn create_new(path: &Path) -> io::Result<File> {
    std::fs::create_dir_all(folder_of(path))?;
    OpenOptions::new()
        .append(true)
        .create_new(true)
        .mode(MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// An existing regular file, never through a link at its path (O_NOFOLLOW), nor
/// blocking on a FIFO put there since it was checked (O_NONBLOCK): to read, or
/// with `append` to read and add to.
pub fn open_existing(path: &Path, append: bool) -> io::Result<File> {
    let not_regular = |meta: &std::fs::Metadata| {
        file_kind(meta).map(|kind| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("is {kind}, not a regular file"),
            )
        })
    };
    // Said before opening: a folder or link would otherwise be an OS error.
    if let Some(e) = std::fs::symlink_metadata(path)
        .ok()
        .and_then(|m| not_regular(&m))
    {
        return Err(e);
    }
    let file = OpenOptions::new()
        .read(true)
        .append(append)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    match not_regular(&file.metadata()?) {
        Some(e) => Err(e),
        None => Ok(file),
    }
}

/// What a whole file may take the place of.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Replace {
    /// Nothing: an existing file (or link) stays and the write fails.
    Never,
    /// An empty regular file only (one a run left without contents).
    IfEmpty,
    /// Whatever is at the path (the entry is replaced; a link is not followed).
    Always,
}

/// A file written whole: a temporary file of unpredictable name (O_EXCL) beside
/// its final path, renamed into place when complete. Dropped before that, it is
/// removed.
pub struct WholeFile {
    temp: tempfile::NamedTempFile,
}

impl WholeFile {
    /// A temporary file in the folder of `path` (made if need be), named
    /// `.NAME.XXXXXX.tmp` after it.
    pub fn beside(path: &Path) -> io::Result<WholeFile> {
        let folder = folder_of(path);
        std::fs::create_dir_all(folder)?;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .permissions(std::fs::Permissions::from_mode(MODE))
            .tempfile_in(folder)
            .map_err(bare)?;
        Ok(WholeFile { temp })
    }

    pub fn file(&mut self) -> &mut File {
        self.temp.as_file_mut()
    }

    /// Syncs the file and renames it to `path`, as `replace` allows; returns the
    /// file, still open, now under its name. On failure the temporary file is
    /// handed back (to try another name) or, when dropped, removed.
    pub fn persist(mut self, path: &Path, replace: Replace) -> Result<File, (io::Error, Self)> {
        if let Err(e) = self.temp.as_file_mut().sync_data() {
            return Err((e, self));
        }
        let renamed = match replace {
            Replace::Always => self.temp.persist(path),
            Replace::Never | Replace::IfEmpty => match self.temp.persist_noclobber(path) {
                Err(e) if replace == Replace::IfEmpty && is_empty_file(path) => {
                    e.file.persist(path)
                }
                other => other,
            },
        };
        renamed.map_err(|e| (bare(e.error), WholeFile { temp: e.file }))
    }
}

fn is_empty_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0)
}

/// Writes `bytes` as the whole of `path` (see `WholeFile`).
pub fn write_whole(path: &Path, replace: Replace, bytes: &[u8]) -> io::Result<File> {
    let mut whole = WholeFile::beside(path)?;
    whole.file().write_all(bytes)?;
    whole.persist(path, replace).map_err(|(e, _)| e)
}

/// A folder this process makes inside one the user named (`<run_id>`): made
/// with mkdir, or one that is already a real folder, never a link.
pub fn create_subfolder(dir: &Path) -> io::Result<()> {
    match create_new_folder(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            match std::fs::symlink_metadata(dir)?.is_dir() {
                true => Ok(()),
                false => Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "exists and is not a folder (links are not followed)",
                )),
            }
        }
        other => other,
    }
}

/// A folder that must not exist yet (rack_check's report), its parents made first.
pub fn create_new_folder(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::create_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::fixture::Tree;
    use std::os::unix::fs::symlink;

    /// Hidden files left in `dir`: temporary files that should be gone.
    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect()
    }

    #[test]
    fn nothing_is_written_through_a_link() {
        let tree = Tree::temp("links");
        let dir = tree.dir().to_path_buf();
        let precious = dir.join("precious");
        std::fs::write(&precious, "kept\n").unwrap();
        let link = dir.join("out.json");
        symlink(&precious, &link).unwrap();
        assert_eq!(
            create_new(&link).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert!(open_existing(&link, true).is_err());
        for replace in [Replace::Never, Replace::IfEmpty] {
            let e = write_whole(&link, replace, b"new").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        }
        // Replacing takes the link's place and leaves what it pointed at alone.
        write_whole(&link, Replace::Always, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
        assert_eq!(std::fs::read_to_string(&precious).unwrap(), "kept\n");
        assert_eq!(leftovers(&dir), Vec::<String>::new());
        // A link where a subfolder goes is refused.
        let sub = dir.join("run");
        symlink(&dir, &sub).unwrap();
        assert!(create_subfolder(&sub).is_err());
        create_subfolder(&dir.join("real")).unwrap();
        create_subfolder(&dir.join("real")).unwrap();
    }

    #[test]
    fn whole_files_replace_only_what_they_may() {
        let tree = Tree::temp("whole");
        let dir = tree.dir().to_path_buf();
        let path = dir.join("a.json");
        write_whole(&path, Replace::Never, b"one").unwrap();
        assert!(write_whole(&path, Replace::IfEmpty, b"two").is_err());
        std::fs::write(&path, "").unwrap();
        write_whole(&path, Replace::IfEmpty, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        // Made as File::create makes files (the umask's mode), not 0600.
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let umask = status
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .map(|u| u32::from_str_radix(u.trim(), 8).unwrap())
            .unwrap();
        assert_eq!(mode, 0o666 & !umask);
        assert_eq!(leftovers(&dir), Vec::<String>::new());
    }
}
