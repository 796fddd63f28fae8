//! doctor's outputs: the table on stdout, the findings as CSV, and the findings
//! with every node's facts as JSON. Files are created, never overwritten.

use super::{count, Finding, NodeFacts, Severity};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The JSON document: what was found and what it was found from.
#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    pub nodes: Vec<NodeFacts>,
    pub findings: Vec<Finding>,
}

/// "1 error", "2 errors".
pub fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// "2 errors, 1 warning": the counts of findings that matter.
pub fn counts(findings: &[Finding]) -> String {
    format!(
        "{}, {}",
        plural(count(findings, Severity::Error), "error"),
        plural(count(findings, Severity::Warning), "warning")
    )
}

pub fn summary_line(nodes: &[NodeFacts], findings: &[Finding]) -> String {
    format!(
        "doctor: {}, {} on {} ({})",
        counts(findings),
        plural(count(findings, Severity::Info), "note"),
        plural(nodes.len(), "node"),
        nodes
            .iter()
            .map(|n| n.node.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The most of a findings CSV read: a few hundred bytes a finding.
const MAX_FINDINGS_BYTES: u64 = 256 << 20;

/// Aligned columns, then the fix, which is long, on its own indented line.
pub fn write_table(
    out: &mut dyn Write,
    nodes: &[NodeFacts],
    findings: &[Finding],
) -> std::io::Result<()> {
    for n in nodes {
        let ports: usize = n.hcas.iter().map(|h| h.ports.len()).sum();
        writeln!(
            out,
            "# {}: kernel {}, {} RDMA device(s) checked ({} port(s)), {} GPU(s), root {}",
            n.node,
            n.kernel.as_deref().unwrap_or("?"),
            n.hcas.len(),
            ports,
            n.gpus.gpus.len(),
            n.root
        )?;
    }
    let head = ["severity", "node", "component", "check", "seen", "expected"];
    let rows: Vec<[&str; 6]> = findings
        .iter()
        .map(|f| {
            [
                f.severity.name(),
                f.node.as_str(),
                f.component.as_str(),
                f.check.as_str(),
                f.seen.as_str(),
                f.expected.as_str(),
            ]
        })
        .collect();
    let mut widths = head.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str; 6]| {
        cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    if !findings.is_empty() {
        writeln!(out, "{}", line(&head))?;
    }
    for (row, f) in rows.iter().zip(findings) {
        writeln!(out, "{}", line(row))?;
        writeln!(out, "    fix: {}", f.fix)?;
    }
    writeln!(out, "{}", summary_line(nodes, findings))
}

pub fn write_csv(path: &Path, findings: &[Finding]) -> anyhow::Result<()> {
    let file = create_new(path, "--csv")?;
    let mut w = csv::Writer::from_writer(file);
    for f in findings {
        w.serialize(f)?;
    }
    if findings.is_empty() {
        w.write_record([
            "severity",
            "node",
            "component",
            "check",
            "seen",
            "expected",
            "fix",
        ])?;
    }
    w.flush()
        .with_context(|| format!("--csv {}: write failed", path.display()))
}

pub fn write_json(path: &Path, report: &Report) -> anyhow::Result<()> {
    let file = create_new(path, "--json")?;
    serde_json::to_writer_pretty(file, report)
        .with_context(|| format!("--json {}: write failed", path.display()))
}

pub fn read_csv(path: &Path) -> anyhow::Result<Vec<Finding>> {
    let (file, len) = crate::input::open_regular(path, MAX_FINDINGS_BYTES)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut reader = csv::Reader::from_reader(std::io::Read::take(file, len));
    reader
        .deserialize()
        .collect::<Result<Vec<Finding>, _>>()
        .with_context(|| format!("{}: not a doctor findings CSV", path.display()))
}

/// Refuses, before doctor reads anything, a `flag` path that `create_new` would
/// refuse at the end: a folder, a file that exists, or a place where no file
/// can be created.
pub fn check_target(flag: &str, path: &Path) -> Result<(), String> {
    let shown = path.display();
    if path.is_dir() {
        return Err(format!(
            "{flag} {shown}: is a directory; give the path of a new file in it"
        ));
    }
    if path.symlink_metadata().is_ok() {
        return Err(format!(
            "{flag} {shown}: the file exists and findings are never overwritten; choose a new path"
        ));
    }
    let cannot = |dir: &Path, e: std::io::Error| {
        format!(
            "{flag} {shown}: cannot write in {}: {e}; choose a folder this user can write",
            dir.display()
        )
    };
    let parent = |p: &Path| -> PathBuf {
        p.parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    };
    let dir = parent(path);
    let mut existing = dir.clone();
    while existing.symlink_metadata().is_err() {
        existing = parent(&existing);
    }
    if !existing.is_dir() {
        return Err(format!(
            "{flag} {shown}: {} is a file, not a folder; choose a path in a folder",
            existing.display()
        ));
    }
    // The folders would be created at the end anyway; creating the file is the
    // one sure test of writing there (root passes access(2) on folders it still
    // cannot write in: sysfs, a read-only mount).
    std::fs::create_dir_all(&dir).map_err(|e| cannot(&dir, e))?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| cannot(&dir, e))?;
    std::fs::remove_file(path).map_err(|e| cannot(&dir, e))
}

fn create_new(path: &Path, flag: &str) -> anyhow::Result<std::fs::File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| {
            format!("{flag} {}: cannot create {}", path.display(), dir.display())
        })?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| {
            format!(
                "{flag} {}: cannot create it (results are never overwritten: choose a new path)",
                path.display()
            )
        })
}
