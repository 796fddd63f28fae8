//! The one reader of the machine's own files (sysfs, procfs): every path is read
//! under a root directory, `/` on a live system or a fixture tree in tests, so
//! that limit detection, doctor, the verbs port facts and copy_bw's NUMA lookup
//! can all be tested on the same fixture trees (see `fixture`, which writes them).
//!
//! - this file: [`Root`], bounded reads of one file, listings and symlinks, and
//!   [`Reading`]: a value, an absent file, or a file that holds no value
//!   (named with its text, so that callers can say what they could not read);
//! - `rdma`: what sysfs says about an RDMA port (state, rate, link layer);
//! - `counters`: snapshots of every RDMA port's and netdev's counters;
//! - `numa`: an RDMA device's NUMA node, the nodes' CPUs, CPU lists;
//! - `topology`: GPUs, NICs and netdevs, and the PCI path class of each pair;
//! - `identity`: which machine and network namespace a process runs on;
//! - `cpu_wait`: how long this thread waited for a CPU (procfs schedstat).

pub mod counters;
pub mod cpu_wait;
pub mod identity;
pub mod numa;
pub mod rdma;
pub mod topology;

#[cfg(test)]
pub(crate) mod fixture;

use crate::input::{read_bounded, read_text, InputError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Where sysfs lists the PCI devices.
pub const PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// The sysfs folder of the PCI device at `bus_id` ("0000:18:00.0").
pub fn pci_device(bus_id: &str) -> String {
    format!("{PCI_DEVICES}/{bus_id}")
}

/// The most one read takes. A sysfs attribute is at most a page; the largest
/// procfs file read is `/proc/self/environ`, tens of KiB in a loaded module
/// environment. A longer file is not one of those and reads as unreadable.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// What reading one value gave: no file, a file that holds no value, or the value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reading<T> {
    Absent,
    Unreadable(Unreadable),
    Value(T),
}

/// Nothing read yet reads as nothing there.
impl<T> Default for Reading<T> {
    fn default() -> Self {
        Reading::Absent
    }
}

impl<T> Reading<T> {
    /// The value; None where it is absent or unreadable (for readers that judge
    /// nothing by it).
    pub fn value(self) -> Option<T> {
        match self {
            Reading::Value(v) => Some(v),
            _ => None,
        }
    }

    pub fn get(&self) -> Option<&T> {
        match self {
            Reading::Value(v) => Some(v),
            _ => None,
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Reading<U> {
        self.and_then(|v| Reading::Value(f(v)))
    }

    /// `f` of the value; an absent or unreadable reading stays what it is.
    pub fn and_then<U>(self, f: impl FnOnce(T) -> Reading<U>) -> Reading<U> {
        match self {
            Reading::Absent => Reading::Absent,
            Reading::Unreadable(u) => Reading::Unreadable(u),
            Reading::Value(v) => f(v),
        }
    }

    /// What could not be read, where something could not.
    pub fn unreadable(&self) -> Option<&Unreadable> {
        match self {
            Reading::Unreadable(u) => Some(u),
            _ => None,
        }
    }
}

/// A file that is there but holds no value its reader accepts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unreadable {
    /// The file, under the root.
    pub path: String,
    /// Its trimmed text; None where no text was read (see `why`).
    pub text: Option<String>,
    /// Why no text was read: permission denied, not a regular file, longer
    /// than [`MAX_FILE_BYTES`], not UTF-8.
    #[serde(default)]
    pub why: Option<InputError>,
}

impl Unreadable {
    /// This process may not read it (another user's file, a hardened /proc):
    /// no fault of what it describes.
    pub fn denied(&self) -> bool {
        self.why == Some(InputError::Denied)
    }
}

impl std::fmt::Display for Unreadable {
    /// "could not read /sys/.../rate: 'fast (4X NDR)'", "could not read
    /// /sys/.../rate: permission denied".
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match (&self.text, &self.why) {
            (Some(t), _) => write!(f, "could not read {}: '{t}'", self.path),
            (None, Some(why)) => write!(f, "could not read {}: {why}", self.path),
            (None, None) => write!(f, "could not read {}: no value in it", self.path),
        }
    }
}

/// A root directory that absolute system paths are read under.
#[derive(Clone, Debug)]
pub struct Root {
    dir: PathBuf,
    /// The read pass of a fixture tree with [`STEPS`] (see [`Root::at_pass`]).
    pass: Option<usize>,
}

/// The test hook of a fixture tree whose files change between reads: the file
/// `STEPS/<abs>` holds one line per read pass, the text of `<abs>` at that
/// pass (the last line repeats; a line `absent` is no file). No live system
/// has this folder, so a live root never steps.
pub const STEPS: &str = "/fabricbench-steps";

impl Root {
    pub fn new(dir: impl Into<PathBuf>) -> Root {
        Root {
            dir: dir.into(),
            pass: None,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// This root as read at pass `n` (counter snapshots count their passes):
    /// where the tree has [`STEPS`], files there read as at that pass.
    pub fn at_pass(&self, n: usize) -> Root {
        Root {
            dir: self.dir.clone(),
            pass: self.path(STEPS).is_dir().then_some(n),
        }
    }

    /// What `abs` holds at this pass, where a step file says: Some(None) absent.
    fn stepped(&self, abs: &str) -> Option<Option<String>> {
        let pass = self.pass?;
        let steps = read_text(&self.path(&format!("{STEPS}{abs}")), MAX_FILE_BYTES).ok()?;
        let lines: Vec<&str> = steps.lines().collect();
        let line = lines.get(pass).or(lines.last())?.trim();
        Some((line != "absent").then(|| line.to_string()))
    }

    /// `/sys/class/net` under the root.
    pub fn path(&self, abs: &str) -> PathBuf {
        self.dir.join(abs.trim_start_matches('/'))
    }

    /// A regular file's bytes, at most [`MAX_FILE_BYTES`], or why they could not
    /// be read (absent, denied, longer, not a regular file). The root may be a
    /// path the user gave: a FIFO would block the open and a device could be
    /// endless, so neither is opened (see `input`).
    pub fn read_bytes(&self, abs: &str) -> Result<Vec<u8>, InputError> {
        match self.stepped(abs) {
            Some(Some(text)) => Ok(text.into_bytes()),
            Some(None) => Err(InputError::Missing),
            None => read_bounded(&self.path(abs), MAX_FILE_BYTES),
        }
    }

    /// A file's text, trimmed, or why it could not be read (sysfs answers EINVAL
    /// for empty GID table entries, for instance).
    pub fn read_text(&self, abs: &str) -> Result<String, InputError> {
        let text = String::from_utf8(self.read_bytes(abs)?).map_err(|_| InputError::NotText)?;
        Ok(text.trim().to_string())
    }

    /// A file's text, trimmed; None when it could not be read.
    pub fn read(&self, abs: &str) -> Option<String> {
        self.read_text(abs).ok()
    }

    /// A file's value as `parse` reads its trimmed text: every attribute value
    /// read through this crate is parsed here. A file that is there but does not
    /// read as a value is [`Reading::Unreadable`], never taken for an absent one:
    /// doctor reports it and limit detection skips only that link.
    pub fn read_with<T>(&self, abs: &str, parse: impl FnOnce(&str) -> Option<T>) -> Reading<T> {
        let path = self.path(abs);
        let stepped_absent = self.stepped(abs) == Some(None);
        if stepped_absent || std::fs::symlink_metadata(&path).is_err() {
            return Reading::Absent;
        }
        let unreadable = |text, why| {
            Reading::Unreadable(Unreadable {
                path: path.display().to_string(),
                text,
                why,
            })
        };
        match self.read_text(abs) {
            Err(why) => unreadable(None, Some(why)),
            Ok(text) => match parse(&text) {
                Some(value) => Reading::Value(value),
                None => unreadable(Some(text), None),
            },
        }
    }

    /// A file's value as a `T` ("16" as 16u32).
    pub fn read_parsed<T: FromStr>(&self, abs: &str) -> Reading<T> {
        self.read_with(abs, |text| text.parse().ok())
    }

    pub fn exists(&self, abs: &str) -> bool {
        self.path(abs).exists()
    }

    /// Entry names of a directory, sorted, or why it could not be listed.
    pub fn read_dir(&self, abs: &str) -> Result<Vec<String>, InputError> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(abs))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Entry names of a directory, sorted; empty when it is absent or unreadable.
    pub fn list(&self, abs: &str) -> Vec<String> {
        self.read_dir(abs).unwrap_or_default()
    }

    /// Why a directory that is there cannot be listed ("Permission denied (os
    /// error 13)"); None where it lists or is absent. `list` reads both as empty.
    pub fn unlistable(&self, abs: &str) -> Option<String> {
        match std::fs::read_dir(self.path(abs)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Some(e.to_string()),
            _ => None,
        }
    }

    /// The entries of a directory that parse as `T` (port numbers, GID indexes),
    /// in order of their value, or why it could not be listed; other entries are skipped.
    pub fn read_dir_parsed<T: FromStr + Ord>(&self, abs: &str) -> Result<Vec<T>, InputError> {
        let mut values: Vec<T> = self
            .read_dir(abs)?
            .iter()
            .filter_map(|name| name.parse().ok())
            .collect();
        values.sort();
        Ok(values)
    }

    /// [`Root::read_dir_parsed`]; empty when the directory is absent or unreadable.
    pub fn list_parsed<T: FromStr + Ord>(&self, abs: &str) -> Vec<T> {
        self.read_dir_parsed(abs).unwrap_or_default()
    }

    /// The last component of a symlink's target ("mlx5_core" for a driver link).
    pub fn link_name(&self, abs: &str) -> Option<String> {
        std::fs::read_link(self.path(abs))
            .ok()
            .and_then(|t| t.file_name().map(|f| f.to_string_lossy().into_owned()))
    }

    /// Where `abs` leads once every symlink on the way is followed, as an absolute
    /// path under the root (`/sys/bus/pci/devices/0000:17:00.0` leads to
    /// `/sys/devices/pci0000:16/0000:17:00.0`); None when it is absent or leads
    /// out of the root.
    pub fn resolve(&self, abs: &str) -> Option<String> {
        let real = std::fs::canonicalize(self.path(abs)).ok()?;
        let base = std::fs::canonicalize(&self.dir).ok()?;
        let inside = real.strip_prefix(&base).ok()?;
        Some(format!("/{}", inside.to_string_lossy()))
    }
}

/// The last component of an absolute path ("0000:17:00.0").
pub fn file_name(abs: &str) -> &str {
    abs.rsplit('/').next().unwrap_or(abs)
}

/// The folder an absolute path is in ("/sys/devices/pci0000:16"); None for "/".
pub fn parent(abs: &str) -> Option<&str> {
    abs.rsplit_once('/')
        .map(|(dir, _)| dir)
        .filter(|d| !d.is_empty())
}

#[cfg(test)]
mod tests {
    use super::fixture::Tree;
    use super::*;

    #[test]
    fn reads_live_proc_files_whose_size_says_zero() {
        // procfs reports size 0 for generated files: the read must not trust it.
        let root = Root::new("/");
        assert!(root
            .read("/proc/meminfo")
            .unwrap()
            .contains("MemAvailable:"));
        let stat = root
            .read(&format!("/proc/{}/stat", std::process::id()))
            .unwrap();
        assert!(stat.starts_with(&std::process::id().to_string()));
    }

    #[test]
    fn reads_trimmed_text_and_values() {
        let t = Tree::temp("sysfs-read");
        t.put("/sys/class/net/eth0/mtu", "9000");
        t.put("/sys/x/speed", "16.0 GT/s PCIe");
        t.put("/sys/x/width", "sixteen");
        let root = t.root();
        assert_eq!(
            root.read("/sys/class/net/eth0/mtu").as_deref(),
            Some("9000")
        );
        assert_eq!(
            root.read_parsed::<u32>("/sys/class/net/eth0/mtu"),
            Reading::Value(9000)
        );
        // Unparsable and absent are told apart, the unparsable text kept.
        let width = root.read_parsed::<u32>("/sys/x/width");
        assert_eq!(
            width.unreadable().map(ToString::to_string),
            Some(format!(
                "could not read {}: 'sixteen'",
                t.dir().join("sys/x/width").display()
            ))
        );
        assert_eq!(width.value(), None);
        assert_eq!(root.read_parsed::<u32>("/sys/x/absent"), Reading::Absent);
        assert_eq!(root.read("/sys/x/absent"), None);
        assert_eq!(
            root.read_with("/sys/x/speed", |s| s.split_once(' ').map(|(n, _)| n.len())),
            Reading::Value(4)
        );
        // A folder where a value should be is there, and holds no value.
        let folder = root.read_parsed::<u32>("/sys/x");
        assert!(folder.unreadable().is_some_and(|u| u
            .to_string()
            .ends_with("/sys/x: is a directory, not a regular file")));
        assert!(root.exists("/sys/x") && !root.exists("/sys/y"));
    }

    #[test]
    fn lists_entries_sorted_and_by_value() {
        let t = Tree::temp("sysfs-list");
        for n in ["10", "2", "1", "x"] {
            t.put(&format!("/sys/ports/{n}/state"), "4: ACTIVE");
        }
        let root = t.root();
        assert_eq!(root.list("/sys/ports"), ["1", "10", "2", "x"]);
        assert_eq!(root.list_parsed::<u32>("/sys/ports"), [1, 2, 10]);
        assert!(root.list("/sys/none").is_empty());
        assert!(root.list_parsed::<u32>("/sys/ports/1/state").is_empty());
    }

    #[test]
    fn follows_symlinks_within_the_root() {
        let t = Tree::temp("sysfs-links");
        t.put("/sys/devices/pci0000:16/0000:17:00.0/vendor", "0x15b3");
        t.link(
            "/sys/bus/pci/devices/0000:17:00.0",
            "../../../devices/pci0000:16/0000:17:00.0",
        );
        t.link(
            "/sys/bus/pci/devices/0000:17:00.0/driver",
            "../../mlx5_core",
        );
        t.link("/sys/escape", "/");
        let root = t.root();
        let dev = pci_device("0000:17:00.0");
        assert_eq!(
            root.read(&format!("{dev}/vendor")).as_deref(),
            Some("0x15b3")
        );
        assert_eq!(
            root.resolve(&dev).as_deref(),
            Some("/sys/devices/pci0000:16/0000:17:00.0")
        );
        assert_eq!(root.link_name(&dev).as_deref(), Some("0000:17:00.0"));
        // A dangling link still names its target.
        assert_eq!(
            root.link_name(&format!("{dev}/driver")).as_deref(),
            Some("mlx5_core")
        );
        assert_eq!(root.resolve("/sys/escape"), None);
        assert_eq!(root.resolve("/sys/absent"), None);
        assert_eq!(file_name("/sys/devices/pci0000:16"), "pci0000:16");
        assert_eq!(parent("/sys/devices/pci0000:16"), Some("/sys/devices"));
        assert_eq!(parent("/sys"), None);
    }

    #[test]
    fn reads_are_bounded_and_only_of_regular_files() {
        let t = Tree::temp("sysfs-bounded");
        t.put_bytes("/proc/big", &vec![b'x'; MAX_FILE_BYTES as usize + 1]);
        t.put_bytes("/proc/edge", &vec![b'x'; MAX_FILE_BYTES as usize]);
        t.put_bytes("/proc/binary", &[0xff, 0xfe]);
        let fifo = t.dir().join("proc/fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let root = t.root();
        assert_eq!(
            root.read_bytes("/proc/big"),
            Err(InputError::TooLarge {
                max: MAX_FILE_BYTES
            })
        );
        assert_eq!(root.read_bytes("/proc/edge").map(|b| b.len()), Ok(1 << 20));
        assert_eq!(root.read_bytes("/proc/binary"), Ok(vec![0xff, 0xfe]));
        assert_eq!(root.read_text("/proc/binary"), Err(InputError::NotText));
        // Neither blocks: a FIFO with no writer, an endless device, a directory.
        assert_eq!(root.read("/proc/fifo"), None);
        assert!(Root::new("/").read_bytes("/dev/zero").is_err());
        assert_eq!(root.read("/proc"), None);
        let unreadable = root.read_parsed::<u32>("/proc/fifo");
        assert_eq!(
            unreadable.unreadable().map(ToString::to_string),
            Some(format!(
                "could not read {}: is a FIFO, not a regular file",
                fifo.display()
            ))
        );
    }
}
