//! The `-J` document on disk, grown in place so that a size costs the same
//! however many came before it (`-N 0` runs for days):
//! - created whole: a temporary file in the folder, renamed to the first free
//!   name of PATH, PATH.0, PATH.1, ... (as nccl-tests probes; never over a file
//!   or through a link, never an empty or partial file left on a full disk);
//! - each size: its record written over the closing `]}` with `]}` after it;
//! - the end: the closing keys written the same way, then the document's
//!   `"complete":false` turned into `"complete":true ` in place.
//!
//! A reader finds a valid document between these writes (so after a kill at
//! any moment but the few microseconds of a write, SIGKILL included); one that
//! reads during a write may see a torn end and should read again. A write that
//! fails (a full disk) is cut back to the last whole record and its `]}`.

use crate::output::{Replace, WholeFile};
use anyhow::{bail, Context};
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// What ends the document while it grows.
const CLOSE: &[u8] = b"]}\n";
const RESULTS: &str = "\"results\":[]}";
const INCOMPLETE: &str = "\"complete\":false";

pub struct GrowingDocument {
    file: File,
    path: PathBuf,
    /// Where the results array's closing `]` is.
    tail: u64,
    /// Where `false` of `"complete":false` is.
    complete_at: u64,
    records: usize,
    /// Bytes written since the document was created: what the sizes cost.
    written: u64,
}

impl GrowingDocument {
    /// `doc`: the document, compact, its last key an empty `results` array and
    /// `"complete":false` before it. Written to PATH or the first free PATH.N.
    pub fn create(path: &Path, doc: &str) -> anyhow::Result<GrowingDocument> {
        let Some(tail) = doc
            .strip_suffix(RESULTS)
            .map(|d| d.len() + RESULTS.len() - 2)
        else {
            bail!("the document does not end with an empty results array");
        };
        let Some(complete_at) = doc[..tail].rfind(INCOMPLETE) else {
            bail!("the document has no {INCOMPLETE}");
        };
        let mut whole = WholeFile::beside(path)?;
        whole.file().write_all(doc.as_bytes())?;
        whole.file().write_all(b"\n")?;
        let mut candidate = path.to_path_buf();
        for n in 0.. {
            match whole.persist(&candidate, Replace::Never) {
                Ok(file) => {
                    return Ok(GrowingDocument {
                        file,
                        path: candidate,
                        tail: tail as u64,
                        complete_at: (complete_at + INCOMPLETE.len() - "false".len()) as u64,
                        records: 0,
                        written: 0,
                    })
                }
                Err((e, back)) if e.kind() == io::ErrorKind::AlreadyExists => {
                    whole = back;
                    candidate = PathBuf::from(format!("{}.{n}", path.display()));
                }
                Err((e, _)) => return Err(e).with_context(|| candidate.display().to_string()),
            }
        }
        unreachable!("an unbounded probe returns")
    }

    /// The file the document went to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written since it was created.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Adds one result (a serialized JSON object) to the results array.
    pub fn append(&mut self, record: &[u8]) -> io::Result<()> {
        let mut bytes = Vec::with_capacity(record.len() + 1 + CLOSE.len());
        if self.records > 0 {
            bytes.push(b',');
        }
        bytes.extend_from_slice(record);
        bytes.extend_from_slice(CLOSE);
        self.write_at_tail(&bytes)?;
        self.tail += (bytes.len() - CLOSE.len()) as u64;
        self.records += 1;
        Ok(())
    }

    /// Ends the document with `keys` (`"a":1,"b":2`, after the results array)
    /// and marks it complete.
    pub fn close(&mut self, keys: &str) -> io::Result<()> {
        let end = format!("],{keys}}}\n");
        self.write_at_tail(end.as_bytes())?;
        self.file.write_all_at(b"true ", self.complete_at)?;
        self.written += 5;
        self.file.sync_data()
    }

    /// Writes `bytes` over the closing `]}`; when that fails, cuts the file back
    /// and puts the `]}` back.
    fn write_at_tail(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self.file.write_all_at(bytes, self.tail) {
            Ok(()) => {
                self.written += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                let _ = self.file.set_len(self.tail);
                let _ = self.file.write_all_at(CLOSE, self.tail);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::fixture::Tree;

    const DOC: &str = r#"{"version":3,"fabricbench":{"run":"r","complete":false},"results":[]}"#;

    fn load(path: &Path) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn valid_after_every_write_and_probed_names() {
        let tree = Tree::temp("valid");
        let dir = tree.dir().to_path_buf();
        let path = dir.join("r.json");
        let mut doc = GrowingDocument::create(&path, DOC).unwrap();
        assert_eq!(doc.path(), path);
        assert_eq!(load(&path)["results"], serde_json::json!([]));
        doc.append(br#"{"size":8}"#).unwrap();
        doc.append(br#"{"size":16}"#).unwrap();
        let grown = load(&path);
        assert_eq!(grown["results"][1]["size"], 16);
        assert_eq!(grown["fabricbench"]["complete"], false);
        doc.close(r#""errors":[],"end_time":"now""#).unwrap();
        let done = load(&path);
        assert_eq!(done["fabricbench"]["complete"], true);
        assert_eq!(done["end_time"], "now");
        assert_eq!(done["results"].as_array().unwrap().len(), 2);
        // Existing names are kept, as nccl-tests probes them.
        assert_eq!(
            GrowingDocument::create(&path, DOC).unwrap().path(),
            dir.join("r.json.0")
        );
        std::os::unix::fs::symlink("/nowhere", dir.join("r.json.1")).unwrap();
        assert_eq!(
            GrowingDocument::create(&path, DOC).unwrap().path(),
            dir.join("r.json.2")
        );
    }

    /// What a size costs does not grow with the sizes before it: the bytes
    /// written for the 2000th are those written for the 2nd.
    #[test]
    fn a_size_costs_the_same_however_many_came_before() {
        let tree = Tree::temp("cost");
        let dir = tree.dir().to_path_buf();
        let mut doc = GrowingDocument::create(&dir.join("r.json"), DOC).unwrap();
        let record = br#"{"size":1048576,"time":12.5,"alg_bw":80.1,"bus_bw":150.2}"#;
        let mut costs = Vec::new();
        for _ in 0..2000 {
            let before = doc.written();
            doc.append(record).unwrap();
            costs.push(doc.written() - before);
        }
        let each = (record.len() + 1 + CLOSE.len()) as u64;
        assert_eq!(costs[0], each - 1, "no comma before the first");
        assert!(costs[1..].iter().all(|&c| c == each), "{costs:?}");
        assert_eq!(
            load(&dir.join("r.json"))["results"]
                .as_array()
                .unwrap()
                .len(),
            2000
        );
    }
}
