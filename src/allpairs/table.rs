//! What an all-pairs run prints on stdout: the header, the matrices at the sizes
//! that were judged, and the verdict.

use super::confirm::Confirmation;
use super::judging::{PairsVerdict, Thresholds};
use super::matrix::{Matrix, PairResults};
use crate::cli::shown;
use crate::report::table::fit;
use std::io::Write;

/// What was run, before anything is measured.
pub struct PairsHeader<'a> {
    pub program: &'a str,
    /// Who pairs up: "4 ranks", "4 nodes (...)".
    pub participants: String,
    pub rounds: usize,
    /// Times the whole schedule is run, interleaved.
    pub repeats: usize,
    /// In sweep order.
    pub sizes: &'a [u64],
    pub iters: usize,
    /// What one exchange is (`PairMeasure::describe`).
    pub each_pair: &'a str,
}

pub fn write_header(out: &mut dyn Write, h: &PairsHeader) -> std::io::Result<()> {
    writeln!(
        out,
        "# {} --all-pairs: {}, {} rounds of disjoint pairs, {} sizes from {} to {} B, {} iterations each; \
         every pair measured in {} rounds (the schedule over again), a suspect again alone beside a typical pair",
        h.program,
        h.participants,
        h.rounds,
        h.sizes.len(),
        h.sizes.first().copied().unwrap_or(0),
        h.sizes.last().copied().unwrap_or(0),
        h.iters,
        h.repeats
    )?;
    writeln!(out, "# each pair: {}", h.each_pair)
}

/// The matrix of one metric as aligned text, "-" on the diagonal.
/// Above this many ranks the console gets summaries instead of N x N matrices
/// (200 MB of text at 16,384 ranks); the CSV keeps the whole matrices.
pub const MATRIX_LIMIT: usize = 32;
/// Pairs listed as the worst, and bins of the histogram, in a summary.
const WORST: usize = 10;
const BINS: usize = 10;

/// Which end of a metric is bad: the lowest bandwidth, the highest time.
#[derive(Clone, Copy)]
enum Bad {
    Low,
    High,
}

/// A matrix whole when small; when large, the worst pairs, each node's worst
/// pair and a histogram of every pair: O(N) lines for N ranks.
fn write_metric(
    out: &mut dyn Write,
    title: &str,
    labels: &[String],
    m: &Matrix,
    bad: Bad,
) -> std::io::Result<()> {
    if labels.len() <= MATRIX_LIMIT {
        return write_matrix(out, title, labels, m);
    }
    let mut pairs = m.pairs();
    let worse = |x: f64, y: f64| match bad {
        Bad::Low => x.total_cmp(&y),
        Bad::High => y.total_cmp(&x),
    };
    pairs.sort_by(|p, q| worse(p.2, q.2));
    writeln!(
        out,
        "# {title}: {} pairs of {} ranks, summarised (more than {MATRIX_LIMIT} ranks; the whole matrix is in --csv)",
        pairs.len(),
        labels.len()
    )?;
    let pair = |&(a, b, v): &(usize, usize, f64)| {
        format!("{} <-> {} {}", labels[a], labels[b], fit(v, 10).trim())
    };
    let worst: Vec<String> = pairs.iter().take(WORST).map(pair).collect();
    writeln!(out, "#   worst pairs: {}", worst.join(", "))?;
    // Each node (the host of a label "host/rank") with its worst pair, in label order.
    let node = |i: usize| {
        labels[i]
            .rsplit_once('/')
            .map_or(&labels[i][..], |(h, _)| h)
    };
    let mut nodes: std::collections::BTreeMap<&str, (usize, usize, f64)> = Default::default();
    for p in &pairs {
        for end in [p.0, p.1] {
            // The pairs come worst first: a node's first is its worst.
            nodes.entry(node(end)).or_insert(*p);
        }
    }
    for (name, p) in nodes {
        writeln!(out, "#   node {name}: worst pair {}", pair(&p))?;
    }
    let (Some(lo), Some(hi)) = (
        pairs.iter().map(|p| p.2).reduce(f64::min),
        pairs.iter().map(|p| p.2).reduce(f64::max),
    ) else {
        return Ok(());
    };
    let width = (hi - lo) / BINS as f64;
    let mut counts = [0usize; BINS];
    for p in &pairs {
        let bin = if width > 0.0 {
            ((p.2 - lo) / width) as usize
        } else {
            0
        };
        counts[bin.min(BINS - 1)] += 1;
    }
    for (i, count) in counts.iter().enumerate().filter(|(_, c)| **c > 0) {
        let from = lo + width * i as f64;
        writeln!(
            out,
            "#   histogram {} to {}: {count} pairs",
            fit(from, 10).trim(),
            fit(from + width, 10).trim()
        )?;
    }
    Ok(())
}

fn write_matrix(
    out: &mut dyn Write,
    title: &str,
    labels: &[String],
    m: &Matrix,
) -> std::io::Result<()> {
    let width = labels.iter().map(|l| l.len()).max().unwrap_or(0).max(10);
    writeln!(out, "# {title}")?;
    write!(out, "{:>width$}", "")?;
    for l in labels {
        write!(out, " {l:>width$}")?;
    }
    writeln!(out)?;
    for (i, label) in labels.iter().enumerate() {
        write!(out, "{label:>width$}")?;
        for v in m.row(i) {
            match v {
                Some(v) => write!(out, " {:>width$}", fit(v, width))?,
                None => write!(out, " {:>width$}", "-")?,
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The stdout report: bandwidth at the largest size, time at the smallest (the
/// medians over the rounds), the verdict and what measuring suspects alone said.
pub fn write_table(
    out: &mut dyn Write,
    results: &PairResults,
    verdict: &PairsVerdict,
    confirmation: &Confirmation,
    t: &Thresholds,
) -> std::io::Result<()> {
    if let Some(s) = results.at(verdict.bw_size) {
        write_metric(
            out,
            &format!("algbw (GB/s) of each pair at {} B", s.size_bytes),
            &results.labels,
            &s.algbw_gbs,
            Bad::Low,
        )?;
    }
    if let Some(s) = results.at(verdict.latency_size) {
        write_metric(
            out,
            &format!("median time (us) of each pair at {} B", s.size_bytes),
            &results.labels,
            &s.p50_us,
            Bad::High,
        )?;
    }
    let bytes = |s: u64| format!("{s} B");
    let mut criteria = verdict.bandwidth(bytes);
    if verdict.bw_judged {
        criteria += &format!(": pairs below {} x median are slow", shown(t.bw_fraction));
    }
    criteria += &format!("; {}", verdict.latency(bytes));
    if verdict.latency_judged {
        criteria += &format!(
            ": pairs above {} x lowest are slow",
            shown(t.latency_factor)
        );
    }
    writeln!(out, "# {criteria}")?;
    let lines = verdict.lines(&results.labels, t);
    if verdict.passed() && confirmation.inconclusive() {
        writeln!(
            out,
            "# all-pairs: INCONCLUSIVE: no slow pair confirmed, but some cannot be told"
        )?;
    } else if verdict.passed() {
        writeln!(out, "# all-pairs: no slow pair")?;
    }
    for line in lines.iter().chain(&confirmation.lines(&results.labels)) {
        writeln!(out, "# {line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::matrix::tests::results;
    use super::*;

    fn table(results: &PairResults) -> String {
        let t = Thresholds::default();
        let mut out = Vec::new();
        write_table(
            &mut out,
            results,
            &results.judge(&t),
            &Confirmation::default(),
            &t,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_large_job_gets_summaries_in_lines_that_grow_with_n_not_n_squared() {
        let n = MATRIX_LIMIT * 2;
        let mut r = results(n, None, 45.0, 0.0);
        r.sizes[1].algbw_gbs.set(3, 7, 4.5);
        let text = table(&r);
        assert!(
            text.contains(&format!(
                "# algbw (GB/s) of each pair at 1048576 B: {} pairs of {n} ranks, summarised",
                n * (n - 1) / 2
            )),
            "{text}"
        );
        assert!(
            text.contains("#   worst pairs: node3 <-> node7 4.50, "),
            "{text}"
        );
        assert!(
            text.contains("#   node node7: worst pair node3 <-> node7 4.50"),
            "{text}"
        );
        assert!(
            text.contains("#   histogram 4.50 to 8.55: 1 pairs"),
            "{text}"
        );
        assert!(text.lines().count() < 3 * n, "{text}");
    }

    #[test]
    fn a_healthy_table() {
        let text = table(&results(3, None, 45.0, 0.0));
        let expected = [
            "# algbw (GB/s) of each pair at 1048576 B",
            "                node0      node1      node2",
            "     node0          -      45.00      45.00",
            "     node1      45.00          -      45.00",
            "     node2      45.00      45.00          -",
            "# median time (us) of each pair at 8 B",
            "                node0      node1      node2",
            "     node0          -       5.00       5.00",
            "     node1       5.00          -       5.00",
            "     node2       5.00       5.00          -",
            "# median algbw 45.000 GB/s at 1048576 B: pairs below 0.9 x median are slow; lowest median time 5.00 us at 8 B: pairs above 2 x lowest are slow",
            "# all-pairs: no slow pair",
        ];
        assert_eq!(text.lines().collect::<Vec<_>>(), expected, "{text}");
    }

    #[test]
    fn columns_widen_to_the_longest_label_and_findings_follow() {
        let mut r = results(3, Some(1), 45.0, 20.0);
        r.labels[2] = "a-long-host-name".into();
        let text = table(&r);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[1],
            "                            node0            node1 a-long-host-name"
        );
        assert_eq!(
            lines[2],
            "           node0                -            20.00            45.00"
        );
        // Two of the three pairs at 20 GB/s make 20 the median: only latency flags them.
        assert!(
            lines[10].starts_with("# median algbw 20.000 GB/s at 1048576 B"),
            "{text}"
        );
        assert_eq!(
            lines[11..],
            [
                "# slow pair node0 <-> node1: median time 50.00 us at 8 B > 10.00 (2 x lowest 5.00)",
                "# slow pair node1 <-> a-long-host-name: median time 50.00 us at 8 B > 10.00 (2 x lowest 5.00)",
                "# suspect node node1: all 2 of its pairs are slow",
            ]
        );
    }

    #[test]
    fn the_header_says_what_runs() {
        let mut out = Vec::new();
        let h = PairsHeader {
            program: "sendrecv_perf",
            participants: "3 ranks".into(),
            rounds: 3,
            repeats: 3,
            sizes: &[8, 1024, 65536],
            iters: 20,
            each_pair: "MPI_Sendrecv",
        };
        write_header(&mut out, &h).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "# sendrecv_perf --all-pairs: 3 ranks, 3 rounds of disjoint pairs, 3 sizes from 8 to 65536 B, 20 iterations each; \
             every pair measured in 3 rounds (the schedule over again), a suspect again alone beside a typical pair\n# each pair: MPI_Sendrecv\n"
        );
    }
}
