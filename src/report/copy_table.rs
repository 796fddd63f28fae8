//! copy_bw's table on stdout, in the collectives' style: '#' header lines, one
//! line per copy and size as it is measured, then the GPU-to-GPU matrix and the
//! best figure of each copy against its limit.

use super::copy::{CopyKind, CopyResult};
use super::table::fit;
use super::{Exporter, RunInfo, Summary};
use crate::limits::Limit;
use std::io::Write;

/// What the header says about one GPU measured.
#[derive(Clone, Debug)]
pub struct CopyGpu {
    pub ordinal: usize,
    /// "GPU 0 NVIDIA H200 (0000:18:00.0)".
    pub described: String,
    pub pcie: Option<Limit>,
    pub memory: Option<Limit>,
    pub numa_node: Option<i32>,
}

impl CopyGpu {
    /// "GPU 0 NVIDIA H200 (0000:18:00.0): PCIe Gen5 x16 (sysfs) 63.02 GB/s; ..."
    fn line(&self) -> String {
        let limit = |what: &str, l: &Option<Limit>| match l {
            Some(l) => format!("{} {:.2} GB/s", l.name, l.gbs),
            None => format!("{what} limit unknown"),
        };
        format!(
            "{}: {}; {}; NUMA node {}",
            self.described,
            limit("PCIe", &self.pcie),
            limit("memory", &self.memory),
            self.numa_node.map_or("none".to_string(), |n| n.to_string())
        )
    }
}

pub struct CopyTable<W: Write> {
    out: W,
    gpus: Vec<CopyGpu>,
    /// Every result so far, for the matrix and the best sizes at the end.
    results: Vec<CopyResult>,
}

/// The %limit cell.
fn percent(r: &CopyResult) -> String {
    r.pct_of_limit()
        .map_or("   N/A".to_string(), |p| format!("{p:>5.1}%"))
}

fn limit_cell(limit: &Option<Limit>) -> String {
    limit.as_ref().map_or("N/A".to_string(), |x| fit(x.gbs, 7))
}

impl<W: Write> CopyTable<W> {
    pub fn new(out: W, gpus: Vec<CopyGpu>) -> Self {
        CopyTable {
            out,
            gpus,
            results: Vec::new(),
        }
    }

    /// The GPU-to-GPU matrix at the largest size.
    fn peer_matrix(&mut self) -> anyhow::Result<()> {
        let o = &mut self.out;
        let largest = self.results.iter().map(|r| r.size).max().unwrap_or(0);
        let peers: Vec<&CopyResult> = self
            .results
            .iter()
            .filter(|r| r.kind == CopyKind::Peer && r.size == largest)
            .collect();
        if peers.is_empty() {
            return Ok(());
        }
        let ordinals: Vec<usize> = self.gpus.iter().map(|g| g.ordinal).collect();
        writeln!(o, "#")?;
        writeln!(
            o,
            "# GPU-to-GPU copy bandwidth at {largest} B, GB/s (rows: source, columns: destination)"
        )?;
        let header: Vec<String> = ordinals
            .iter()
            .map(|d| format!("{:>8}", format!("gpu{d}")))
            .collect();
        writeln!(o, "# {:>6}{}", "", header.join(""))?;
        for &from in &ordinals {
            let cells: Vec<String> = ordinals
                .iter()
                .map(|&to| {
                    let path = format!("gpu{from}->gpu{to}");
                    match peers.iter().find(|r| r.path == path) {
                        Some(r) => format!("{:>8}", fit(r.gbs(), 7)),
                        None => format!("{:>8}", "-"),
                    }
                })
                .collect();
            writeln!(o, "# {:>6}{}", format!("gpu{from}"), cells.join(""))?;
        }
        Ok(())
    }

    /// The best size of every copy against its limit.
    fn best_sizes(&mut self) -> anyhow::Result<()> {
        let o = &mut self.out;
        writeln!(o, "#")?;
        writeln!(o, "# Best size of each copy against its limit")?;
        writeln!(
            o,
            "# {:>4}  {:>12}  {:>12}  {:>7}  {:>7}  {:>6}  limit is",
            "copy", "path", "size (B)", "GB/s", "limit", "%limit"
        )?;
        let mut seen: Vec<(CopyKind, &str)> = Vec::new();
        for r in &self.results {
            if seen.contains(&(r.kind, r.path.as_str())) {
                continue;
            }
            seen.push((r.kind, r.path.as_str()));
            let best = self
                .results
                .iter()
                .filter(|x| x.kind == r.kind && x.path == r.path)
                .max_by(|a, b| a.gbs().total_cmp(&b.gbs()))
                .unwrap_or(r);
            writeln!(
                o,
                "# {:>4}  {:>12}  {:>12}  {}  {:>7}  {}  {}",
                best.kind.name(),
                best.path,
                best.size,
                fit(best.gbs(), 7),
                limit_cell(&best.limit),
                percent(best),
                best.limit
                    .as_ref()
                    .map_or("unknown (not readable on this machine)".to_string(), |x| x
                        .name
                        .clone())
            )?;
        }
        Ok(())
    }
}

impl<W: Write> Exporter<CopyResult> for CopyTable<W> {
    fn start(&mut self, run: &RunInfo) -> anyhow::Result<()> {
        let o = &mut self.out;
        writeln!(
            o,
            "# fabricbench {} copy_bw: GPU copy bandwidth, one direction at a time",
            run.tool_version
        )?;
        writeln!(
            o,
            "# Backend: {} | library: {} | run id: {}",
            run.backend_choice, run.library_version, run.run_id
        )?;
        writeln!(
            o,
            "# Units: size in bytes, time in us, GB/s = 1e9 bytes/s; d2d counts each byte read and written, as CUDA's bandwidthTest"
        )?;
        writeln!(
            o,
            "# Host buffers pinned (cuMemHostAlloc) on the GPU's NUMA node; per-iteration p50/p99/max from CUDA events; iters: {} warmup iters: {}",
            run.iters, run.warmup_iters
        )?;
        for note in &run.notes {
            writeln!(o, "# WARNING: {note}")?;
        }
        writeln!(o, "#")?;
        writeln!(o, "# Using devices")?;
        for g in &self.gpus {
            writeln!(o, "#  {}", g.line())?;
        }
        writeln!(o, "#")?;
        writeln!(
            o,
            "# {:>4}  {:>12}  {:>12}  {:>7}  {:>7}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7}  {:>6}  via",
            "copy",
            "path",
            "size",
            "time",
            "GB/s",
            "#wrong",
            "p50",
            "p99",
            "max",
            "limit",
            "%limit"
        )?;
        writeln!(
            o,
            "# {:>4}  {:>12}  {:>12}  {:>7}  {:>7}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7}  {:>6}",
            "", "", "(B)", "(us)", "", "", "(us)", "(us)", "(us)", "(GB/s)", ""
        )?;
        o.flush()?;
        Ok(())
    }

    fn record(&mut self, _run: &RunInfo, r: &CopyResult) -> anyhow::Result<()> {
        let l = r.latency();
        writeln!(
            self.out,
            "  {:>4}  {:>12}  {:>12}  {}  {}  {:>6}  {}  {}  {}  {:>7}  {}  {}",
            r.kind.name(),
            r.path,
            r.size,
            fit(r.seconds * 1e6, 7),
            fit(r.gbs(), 7),
            r.wrong.map_or("N/A".to_string(), |w| w.to_string()),
            fit(l.p50_us, 7),
            fit(l.p99_us, 7),
            fit(l.max_us, 7),
            limit_cell(&r.limit),
            percent(r),
            r.transport
        )?;
        self.out.flush()?;
        self.results.push(r.clone());
        Ok(())
    }

    /// The GPU-to-GPU matrix at the largest size, the best size of every copy, and
    /// the verdict of the byte checks.
    fn finish(&mut self, run: &RunInfo, summary: &Summary) -> anyhow::Result<()> {
        self.peer_matrix()?;
        self.best_sizes()?;
        let o = &mut self.out;
        for note in &run.notes {
            writeln!(o, "# WARNING: {note}")?;
        }
        let wrong = summary.wrong_total;
        if run.checked {
            let verdict = if wrong > 0 { "FAILED" } else { "OK" };
            writeln!(o, "# {:<20} : {wrong} {verdict}", "Wrong bytes")?;
        } else {
            writeln!(o, "# {:<20} : N/A (run with -c 1 to check)", "Wrong bytes")?;
        }
        writeln!(o, "#")?;
        writeln!(o, "# copy_bw concluded")?;
        o.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(kind: CopyKind, path: &str, size: u64, seconds: f64) -> CopyResult {
        CopyResult {
            kind,
            path: path.into(),
            size,
            seconds,
            per_iteration: vec![seconds; 3],
            wrong: Some(0),
            limit: Some(Limit {
                name: "PCIe Gen5 x16 (sysfs)".into(),
                gbs: 63.0,
            }),
            transport: "PCIe".into(),
            device: "GPU".into(),
            timestamp: String::new(),
        }
    }

    #[test]
    fn rows_matrix_and_best_sizes() {
        let gpu = |ordinal| CopyGpu {
            ordinal,
            described: format!("GPU {ordinal} X (0000:1{ordinal}:00.0)"),
            pcie: None,
            memory: Some(Limit {
                name: "memory".into(),
                gbs: 4800.0,
            }),
            numa_node: Some(0),
        };
        let mut table = CopyTable::new(Vec::new(), vec![gpu(0), gpu(1)]);
        let run = RunInfo {
            checked: true,
            ..RunInfo::default()
        };
        table.start(&run).unwrap();
        for r in [
            result(CopyKind::HostToDevice, "gpu0", 1000, 1e-6),
            result(CopyKind::HostToDevice, "gpu0", 2_000_000, 1e-4),
            result(CopyKind::Peer, "gpu0->gpu1", 2_000_000, 1e-4),
        ] {
            table.record(&run, &r).unwrap();
        }
        let summary = Summary {
            wrong_total: 0,
            ..Summary::default()
        };
        table.finish(&run, &summary).unwrap();
        let text = String::from_utf8(table.out).unwrap();
        assert!(text.contains(
            "#  GPU 1 X (0000:11:00.0): PCIe limit unknown; memory 4800.00 GB/s; NUMA node 0\n"
        ));
        // 1000 B in 1 us: 1 GB/s, 1.6% of 63 GB/s.
        assert!(text.contains("   h2d          gpu0          1000     1.00     1.00       0"));
        assert!(text.contains("  63.00    1.6%  PCIe\n"), "{text}");
        // The matrix has the peer copy at the largest size, and "-" elsewhere.
        assert!(text.contains("#   gpu0       -   20.00\n"), "{text}");
        assert!(text.contains("#   gpu1       -       -\n"), "{text}");
        // The best size of h2d is the 2 MB one.
        assert!(text.contains(
            "#  h2d          gpu0       2000000    20.00    63.00   31.7%  PCIe Gen5 x16 (sysfs)\n"
        ), "{text}");
        assert!(text.ends_with("# Wrong bytes          : 0 OK\n#\n# copy_bw concluded\n"));
    }
}
