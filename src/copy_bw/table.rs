//! copy_bw's table on stdout, in the collectives' style: '#' header lines, one
//! line per copy and size as it is measured, then the GPU-to-GPU matrix and the
//! best figure of each copy against its limit.

use super::{CopyResult, Gpu, Kind};
use crate::report::table::fit;
use crate::report::RunInfo;
use crate::stats::{histogram, IterStats};
use std::io::Write;

/// "GPU 0 NVIDIA H200 (0000:18:00.0): PCIe Gen5 x16 (sysfs) 63.02 GB/s; ..."
pub(super) fn describe_gpu(g: &Gpu) -> String {
    let limit = |what: &str, l: &Option<crate::limits::Limit>| match l {
        Some(l) => format!("{} {:.2} GB/s", l.name, l.gbs),
        None => format!("{what} limit unknown"),
    };
    format!(
        "{}: {}; {}; NUMA node {}",
        g.info.describe(),
        limit("PCIe", &g.pcie),
        limit("memory", &g.memory),
        g.numa_node.map_or("none".to_string(), |n| n.to_string())
    )
}

pub struct CopyTable<W: Write> {
    out: W,
}

fn percent(r: &CopyResult) -> String {
    r.pct_of_limit()
        .map_or("   N/A".to_string(), |p| format!("{p:>5.1}%"))
}

impl<W: Write> CopyTable<W> {
    pub fn new(out: W) -> Self {
        CopyTable { out }
    }

    pub fn start(&mut self, run: &RunInfo, gpus: &[String]) -> anyhow::Result<()> {
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
        for g in gpus {
            writeln!(o, "#  {g}")?;
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

    pub fn row(&mut self, r: &CopyResult) -> anyhow::Result<()> {
        let h = histogram(&r.per_iteration);
        let l = IterStats::from_seconds(&r.per_iteration, &h);
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
            r.limit
                .as_ref()
                .map_or("N/A".to_string(), |x| fit(x.gbs, 7)),
            percent(r),
            r.transport
        )?;
        self.out.flush()?;
        Ok(())
    }

    /// The GPU-to-GPU matrix at the largest size, the best size of every copy, and
    /// the verdict of the byte checks.
    pub fn finish(
        &mut self,
        run: &RunInfo,
        results: &[CopyResult],
        ordinals: &[usize],
    ) -> anyhow::Result<()> {
        let o = &mut self.out;
        let largest = results.iter().map(|r| r.size).max().unwrap_or(0);
        let peers: Vec<&CopyResult> = results
            .iter()
            .filter(|r| r.kind == Kind::Peer && r.size == largest)
            .collect();
        if !peers.is_empty() {
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
            for &from in ordinals {
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
        }
        writeln!(o, "#")?;
        writeln!(o, "# Best size of each copy against its limit")?;
        writeln!(
            o,
            "# {:>4}  {:>12}  {:>12}  {:>7}  {:>7}  {:>6}  limit is",
            "copy", "path", "size (B)", "GB/s", "limit", "%limit"
        )?;
        let mut seen: Vec<(Kind, &str)> = Vec::new();
        for r in results {
            if seen.contains(&(r.kind, r.path.as_str())) {
                continue;
            }
            seen.push((r.kind, r.path.as_str()));
            let best = results
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
                best.limit
                    .as_ref()
                    .map_or("N/A".to_string(), |x| fit(x.gbs, 7)),
                percent(best),
                best.limit
                    .as_ref()
                    .map_or("unknown (not readable on this machine)".to_string(), |x| x
                        .name
                        .clone())
            )?;
        }
        for note in &run.notes {
            writeln!(o, "# WARNING: {note}")?;
        }
        let wrong: u64 = results.iter().filter_map(|r| r.wrong).sum();
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
