//! The one reader of the machine's own files (sysfs, procfs): every path is read
//! under a root directory, `/` on a live system or a fixture tree in tests, so
//! that limit detection, doctor, the verbs port facts and copy_bw's NUMA lookup
//! can all be tested on the same fixture trees.

use std::path::{Path, PathBuf};

/// A root directory that absolute system paths are read under.
#[derive(Clone, Debug)]
pub struct Root(PathBuf);

impl Root {
    pub fn new(dir: impl Into<PathBuf>) -> Root {
        Root(dir.into())
    }

    pub fn dir(&self) -> &Path {
        &self.0
    }

    /// `/sys/class/net` under the root.
    pub fn path(&self, abs: &str) -> PathBuf {
        self.0.join(abs.trim_start_matches('/'))
    }

    /// A file's text, trimmed; None when it is absent or unreadable (sysfs answers
    /// EINVAL for empty GID table entries, for instance).
    pub fn read(&self, abs: &str) -> Option<String> {
        std::fs::read_to_string(self.path(abs))
            .ok()
            .map(|s| s.trim().to_string())
    }

    pub fn exists(&self, abs: &str) -> bool {
        self.path(abs).exists()
    }

    /// Entry names of a directory, sorted; empty when it is absent.
    pub fn list(&self, abs: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(abs))
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// The last component of a symlink's target ("mlx5_core" for a driver link).
    pub fn link_name(&self, abs: &str) -> Option<String> {
        std::fs::read_link(self.path(abs))
            .ok()
            .and_then(|t| t.file_name().map(|f| f.to_string_lossy().into_owned()))
    }
}
