//! No two outputs of one run on one file: told apart by what they are, not by
//! how they were typed (`./x/../a.csv` is `a.csv`; a hard link is its file).

use crate::job::UsageError;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A binary's outputs, each with its flag.
#[derive(Debug, Default)]
pub struct Outputs {
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    /// "--csv", "-J/--output_file".
    flag: String,
    typed: PathBuf,
    /// The real path it would have once created.
    real: PathBuf,
    /// Device and inode, where it exists.
    inode: Option<(u64, u64)>,
    folder: bool,
}

impl Outputs {
    pub fn new() -> Outputs {
        Outputs::default()
    }

    /// An output file (a link at its path is not followed: it is refused anyway).
    pub fn file(self, flag: &str, path: Option<&Path>) -> Outputs {
        self.add(flag, path, false)
    }

    /// An output folder: two folders may be one (`--plot D --hist D` write
    /// different files); a folder and a file may not.
    pub fn folder(self, flag: &str, path: Option<&Path>) -> Outputs {
        self.add(flag, path, true)
    }

    fn add(mut self, flag: &str, path: Option<&Path>, folder: bool) -> Outputs {
        if let Some(path) = path {
            let meta = match folder {
                true => std::fs::metadata(path),
                false => std::fs::symlink_metadata(path),
            };
            self.entries.push(Entry {
                flag: flag.to_string(),
                typed: path.to_path_buf(),
                real: resolved(path),
                inode: meta.ok().map(|m| (m.dev(), m.ino())),
                folder,
            });
        }
        self
    }

    /// Refuses, in one line, the first two outputs that are one file.
    pub fn distinct(&self) -> Result<(), UsageError> {
        for (i, a) in self.entries.iter().enumerate() {
            for b in &self.entries[i + 1..] {
                let same = a.real == b.real || (a.inode.is_some() && a.inode == b.inode);
                if same && !(a.folder && b.folder) {
                    return Err(UsageError(clash(a, b)));
                }
            }
        }
        Ok(())
    }
}

/// "--csv and --json both name a.csv: ...", with each spelling when they differ.
fn clash(a: &Entry, b: &Entry) -> String {
    let fix = "give each its own path";
    if a.typed == b.typed {
        return format!(
            "{} and {} both name {}: {fix}",
            a.flag,
            b.flag,
            a.typed.display()
        );
    }
    format!(
        "{} {} and {} {} both name one file, {}: {fix}",
        a.flag,
        a.typed.display(),
        b.flag,
        b.typed.display(),
        a.real.display()
    )
}

/// The real path of `path` as it would be when created: the part that exists
/// resolved (links followed, as the kernel follows them), the rest taken as
/// written, `.` and `..` included (the folders in between get created).
fn resolved(path: &Path) -> PathBuf {
    use std::path::Component;
    let start = match path.is_absolute() {
        true => PathBuf::from("/"),
        false => std::env::current_dir().unwrap_or_default(),
    };
    let mut out = start.canonicalize().unwrap_or(start);
    let mut exists = true;
    for part in path.components() {
        match part {
            Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
            // `out` is real up to here: its parent is the real "..".
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => {
                out.push(name);
                if exists {
                    match out.canonicalize() {
                        Ok(real) => out = real,
                        Err(_) => exists = false,
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::fixture::Tree;

    #[test]
    fn one_file_under_two_spellings_is_refused() {
        let tree = Tree::temp("identity");
        std::fs::create_dir_all(tree.dir().join("x")).unwrap();
        let dir = tree.dir().canonicalize().unwrap();
        let a = dir.join("a.csv");
        let twisted = dir.join("x/../a.csv");
        let e = Outputs::new()
            .file("--csv", Some(&twisted))
            .file("-J/--output_file", Some(&a))
            .distinct()
            .unwrap_err()
            .0;
        assert_eq!(
            e,
            format!(
                "--csv {} and -J/--output_file {} both name one file, {}: give each its own path",
                twisted.display(),
                a.display(),
                a.display()
            )
        );
        // A hard link is the file it links.
        std::fs::write(&a, "").unwrap();
        let linked = dir.join("b.csv");
        std::fs::hard_link(&a, &linked).unwrap();
        assert!(Outputs::new()
            .file("--csv", Some(&a))
            .file("--counters", Some(&linked))
            .distinct()
            .is_err());
        // Same spelling: said once.
        assert_eq!(
            Outputs::new()
                .file("--csv", Some(&a))
                .file("--json", Some(&a))
                .distinct()
                .unwrap_err()
                .0,
            format!(
                "--csv and --json both name {}: give each its own path",
                a.display()
            )
        );
        // Two folders may be one; a folder and a file may not.
        assert!(Outputs::new()
            .folder("--plot", Some(&dir))
            .folder("--hist", Some(&dir.join("x/..")))
            .distinct()
            .is_ok());
        assert!(Outputs::new()
            .folder("--plot", Some(&dir.join("new")))
            .file("--csv", Some(&dir.join("x/../new")))
            .distinct()
            .is_err());
        assert!(Outputs::new()
            .file("--csv", Some(&a))
            .file("--counters", Some(&dir.join("c.csv")))
            .file("-J", None)
            .distinct()
            .is_ok());
    }

    #[test]
    fn paths_resolve_as_they_would_be_created() {
        let tree = Tree::temp("resolve");
        let dir = tree.dir().canonicalize().unwrap();
        std::fs::create_dir_all(dir.join("x")).unwrap();
        let real = dir.join("a.csv");
        assert_eq!(resolved(&dir.join("x/../a.csv")), real);
        assert_eq!(resolved(&dir.join("./x/./../a.csv")), real);
        assert_eq!(resolved(&dir.join("new/../a.csv")), real);
        assert_eq!(
            resolved(&dir.join("new/deeper/b.csv")),
            dir.join("new/deeper/b.csv")
        );
    }
}
