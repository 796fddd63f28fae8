//! doctor's outputs: the table on stdout, the findings as CSV, and the findings
//! with every node's facts as JSON. Files are created, never overwritten.

use super::{count, topology, Finding, NodeFacts, Severity};
use crate::cli::io_reason;
use crate::output::{write_whole, Replace};
use crate::sysfs::topology::Kind;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

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
        let t = &n.topology.topology;
        if t.of(Kind::Gpu).next().is_some() {
            for line in topology::matrix(&n.topology) {
                writeln!(out, "  {line}")?;
            }
        }
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

/// The findings as CSV, written whole (see `output::write_whole`).
pub fn write_csv(path: &Path, findings: &[Finding]) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(Vec::new());
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
    let bytes = w
        .into_inner()
        .map_err(|e| anyhow::anyhow!("{}", e.error()))?;
    write_new(path, "--csv", &bytes)
}

/// The findings and the facts as JSON, written whole.
pub fn write_json(path: &Path, report: &Report) -> anyhow::Result<()> {
    write_new(path, "--json", &serde_json::to_vec_pretty(report)?)
}

/// Findings are never written over: a new file, or one a run left empty.
fn write_new(path: &Path, flag: &str, bytes: &[u8]) -> anyhow::Result<()> {
    write_whole(path, Replace::IfEmpty, bytes)
        .map(drop)
        .map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::AlreadyExists => {
                    "the file exists and findings are never overwritten; choose a new path".into()
                }
                _ => format!("cannot write it: {}", io_reason(&e)),
            };
            anyhow::anyhow!("{flag} {}: {why}", path.display())
        })
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
