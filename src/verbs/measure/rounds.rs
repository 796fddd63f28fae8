//! `--rounds R`: every size measured R times, interleaved (round 1 of every
//! size, then round 2, ...), so that a slow spell of the machine touches every
//! size instead of ruining one. Both sides run the same schedule (the count is
//! one of the flags checked against the peer's). The CSV gets every round as
//! measured; the table each size's medians over its rounds and the spread of
//! its main figure (BW average, t_typical), from `stats::interval`.

use crate::job::UsageError;
use crate::report::verbs::{Figures, LatStats, Line, Spread, VerbsResult};
use crate::stats::interval::{median, Estimate};
use crate::verbs::flags::duration::Timing;
use anyhow::{anyhow, bail, ensure};

/// More rounds than this is a typo (1e9 rounds of 2 B would run for days).
pub const MAX_ROUNDS: u32 = 10_000;

/// --rounds' value: a count from 1 to `MAX_ROUNDS`, in digits.
pub fn rounds_arg(text: &str) -> anyhow::Result<u32> {
    let fix = format!("use a whole number from 1 to {MAX_ROUNDS}");
    match text.trim().parse::<i128>() {
        Ok(n) if n > MAX_ROUNDS as i128 => bail!("too many rounds; {fix}"),
        Ok(n) if n < 1 => bail!(fix),
        Ok(n) => Ok(n as u32),
        // Both sides of a verbs run must agree on the count before the first size.
        Err(_) if text.trim() == "auto" => bail!(
            "the verbs binaries take a count of rounds, which client and server agree on \
             before they start (auto is the collectives'); {fix}, e.g. --rounds 5"
        ),
        Err(_) => bail!("'{text}' is not a whole number in digits; {fix}"),
    }
}

/// --rounds, checked against the rest of the plan.
pub fn check(rounds: u32, timing: &Timing, all_pairs: bool) -> Result<u32, UsageError> {
    let refuse = |why: &str| Err(UsageError(format!("--rounds {rounds}: {why}")));
    if rounds > 1 && timing.infinite {
        return refuse(
            "--run_infinitely measures one size until it is stopped, so there are no rounds \
             to interleave; drop --rounds, or use -D SECONDS without --run_infinitely",
        );
    }
    if rounds > 1 && all_pairs {
        return refuse(
            "--all-pairs measures its matrices once; drop --rounds (or measure one pair at a time)",
        );
    }
    Ok(rounds)
}

/// The order of the run: (round, size), round 1 of every size first.
pub fn schedule(sizes: &[u64], rounds: u32) -> Vec<(u32, u64)> {
    (1..=rounds)
        .flat_map(|r| sizes.iter().map(move |&s| (r, s)))
        .collect()
}

/// One size's table result from its rounds (in measured order): every
/// column the median over rounds, histograms merged, and the spread of each
/// line's main figure.
pub fn median_result(rounds: &[VerbsResult]) -> anyhow::Result<VerbsResult> {
    let first = rounds
        .first()
        .ok_or_else(|| anyhow!("no rounds to summarise"))?;
    let count = first.lines.len();
    ensure!(
        rounds.iter().all(|r| r.lines.len() == count),
        "the rounds of {} B have different numbers of lines",
        first.lines.first().map_or(0, |l| l.size)
    );
    let mut lines = Vec::with_capacity(count);
    let mut half_width_pct = Vec::with_capacity(count);
    for i in 0..count {
        let of_line: Vec<&Line> = rounds.iter().map(|r| &r.lines[i]).collect();
        let (line, main) = median_line(&of_line)?;
        let estimate = Estimate::median_of(&main);
        half_width_pct.push(
            estimate
                .interval
                .map(|iv| iv.half_width_of(estimate.value) * 100.0),
        );
        lines.push(line);
    }
    let cpu: Vec<f64> = rounds.iter().filter_map(|r| r.cpu_util).collect();
    Ok(VerbsResult {
        lines,
        // The table's row is the size's: the counters were each round's.
        counters: None,
        cpu_util: (cpu.len() == rounds.len()).then(|| median(&cpu)),
        timestamp: rounds[rounds.len() - 1].timestamp.clone(),
        round: rounds.len() as u32,
        spread: Some(Spread {
            rounds: rounds.len(),
            half_width_pct,
        }),
        ..first.clone()
    })
}

/// The median of `f` over the rounds.
fn median_by<T>(items: &[T], f: impl Fn(&T) -> f64) -> f64 {
    median(&items.iter().map(f).collect::<Vec<_>>())
}

/// One line over its rounds, and the main figure of each round.
fn median_line(rounds: &[&Line]) -> anyhow::Result<(Line, Vec<f64>)> {
    let mut histogram = crate::stats::empty_histogram();
    let mut bw = Vec::new();
    let mut lat = Vec::new();
    for line in rounds {
        match &line.figures {
            Figures::Bw {
                iterations,
                peak,
                average,
                msgs_per_s,
                histogram: h,
            } => {
                histogram.add(h)?;
                bw.push((*iterations, *peak, *average, *msgs_per_s));
            }
            Figures::Lat {
                iterations,
                stats,
                histogram: h,
            } => {
                histogram.add(h)?;
                lat.push((*iterations, stats.clone()));
            }
        }
    }
    ensure!(
        bw.is_empty() || lat.is_empty(),
        "a line mixes bandwidth and latency rounds"
    );
    let (figures, main) = if lat.is_empty() {
        let peaks: Option<Vec<f64>> = bw.iter().map(|b| b.1).collect();
        let figures = Figures::Bw {
            iterations: median_by(&bw, |b| b.0 as f64).round() as u64,
            peak: peaks.map(|p| median(&p)),
            average: median_by(&bw, |b| b.2),
            msgs_per_s: median_by(&bw, |b| b.3),
            histogram,
        };
        (figures, bw.iter().map(|b| b.2).collect())
    } else {
        let m = |f: fn(&LatStats) -> f64| median_by(&lat, |l| f(&l.1));
        let figures = Figures::Lat {
            iterations: median_by(&lat, |l| l.0 as f64).round() as u64,
            stats: LatStats {
                t_min_us: m(|s| s.t_min_us),
                t_max_us: m(|s| s.t_max_us),
                t_typical_us: m(|s| s.t_typical_us),
                t_avg_us: m(|s| s.t_avg_us),
                t_stdev_us: m(|s| s.t_stdev_us),
                p99_us: m(|s| s.p99_us),
                p999_us: m(|s| s.p999_us),
            },
            histogram,
        };
        (figures, lat.iter().map(|l| l.1.t_typical_us).collect())
    };
    let wrong: Option<Vec<u64>> = rounds.iter().map(|l| l.wrong).collect();
    let line = Line {
        figures,
        // Every message checked in every round.
        wrong: wrong.map(|w| w.iter().sum()),
        ..rounds[0].clone()
    };
    Ok((line, main))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
    use crate::verbs::flags::parse;

    const WRITE_BW: Benchmark = Benchmark::new(Verb::Write, Test::Bw);
    const WRITE_LAT: Benchmark = Benchmark::new(Verb::Write, Test::Lat);

    /// `rounds_arg` with its message as the user reads it.
    fn rounds_arg(text: &str) -> Result<u32, String> {
        super::rounds_arg(text).map_err(|e| format!("{e:#}"))
    }

    fn err(bench: Benchmark, args: &[&str]) -> String {
        let argv = std::iter::once(bench.program()).chain(args.iter().copied());
        parse(bench, argv).unwrap_err().0
    }

    #[test]
    fn parse_defaults_to_one_and_refuses_bad_counts() {
        let plan = parse(WRITE_BW, ["ib_write_bw"]).unwrap();
        assert_eq!(plan.rounds, 1);
        let plan = parse(WRITE_BW, ["ib_write_bw", "-a", "--rounds", "5"]).unwrap();
        assert_eq!(plan.rounds, 5);
        assert_eq!(rounds_arg(" 10000"), Ok(10000));
        let fix = "use a whole number from 1 to 10000";
        assert_eq!(rounds_arg("0"), Err(fix.to_string()));
        assert_eq!(rounds_arg("-1"), Err(fix.to_string()));
        assert_eq!(rounds_arg("10001"), Err(format!("too many rounds; {fix}")));
        for typo in ["abc", "1e9", "2.5", ""] {
            let want = format!("'{typo}' is not a whole number in digits; {fix}");
            assert_eq!(rounds_arg(typo), Err(want));
        }
        let e = err(WRITE_BW, &["--rounds", "0"]);
        assert!(e.starts_with("--rounds") && e.ends_with(fix), "{e}");
        let e = err(WRITE_BW, &["-D", "2", "--run_infinitely", "--rounds", "3"]);
        assert!(
            e.starts_with("--rounds 3: --run_infinitely measures one size until it is stopped"),
            "{e}"
        );
        // -D without --run_infinitely has sizes to interleave.
        assert!(parse(WRITE_LAT, ["ib_write_lat", "-D", "2", "--rounds", "3"]).is_ok());
        let e = err(WRITE_BW, &["--all-pairs", "--rounds", "2"]);
        assert!(e.starts_with("--rounds 2: --all-pairs"), "{e}");
        assert!(parse(WRITE_BW, ["ib_write_bw", "--all-pairs", "--rounds", "1"]).is_ok());
    }

    #[test]
    fn the_peers_must_agree_on_the_count() {
        let one = parse(WRITE_BW, ["ib_write_bw"]).unwrap();
        let three = parse(WRITE_BW, ["ib_write_bw", "--rounds", "3"]).unwrap();
        let (a, b) = (one.symmetric_settings(), three.symmetric_settings());
        assert!(a.contains(&("--rounds".into(), "1".into())));
        assert!(b.contains(&("--rounds".into(), "3".into())));
        assert_eq!(a.len(), b.len());
    }

    #[test]
    fn rounds_interleave_across_sizes() {
        assert_eq!(
            schedule(&[2, 4, 8], 2),
            [(1, 2), (1, 4), (1, 8), (2, 2), (2, 4), (2, 8)]
        );
        assert_eq!(schedule(&[65536], 1), [(1, 65536)]);
    }

    fn bw_round(average_mib: f64, peak: Option<f64>) -> VerbsResult {
        let mut line = crate::report::verbs::tests::bw_line(None, None);
        line.figures = Figures::Bw {
            iterations: 5000,
            peak: peak.map(|p| p * 1048576.0),
            average: average_mib * 1048576.0,
            msgs_per_s: average_mib * 1048576.0 / 65536.0,
            histogram: crate::stats::histogram(&[1e-6]),
        };
        VerbsResult {
            collective: "ib_write".into(),
            bidirectional: false,
            timestamp: format!("t{average_mib}"),
            lines: vec![line],
            counters: None,
            cpu_util: None,
            round: 1,
            spread: None,
        }
    }

    #[test]
    fn bandwidth_medians_per_column_and_their_spread() {
        let rounds = [
            bw_round(3000.0, Some(3500.0)),
            bw_round(1000.0, Some(3700.0)),
            bw_round(3100.0, Some(3600.0)),
        ];
        let m = median_result(&rounds).unwrap();
        let Figures::Bw {
            average,
            peak,
            msgs_per_s,
            histogram,
            iterations,
        } = &m.lines[0].figures
        else {
            panic!("not bandwidth")
        };
        assert_eq!(*average, 3000.0 * 1048576.0);
        assert_eq!(*peak, Some(3600.0 * 1048576.0));
        assert_eq!(*msgs_per_s, 3000.0 * 16.0);
        assert_eq!((*iterations, histogram.len()), (5000, 3));
        assert_eq!((m.round, m.timestamp.as_str()), (3, "t3100"));
        let spread = m.spread.unwrap();
        assert_eq!(spread.rounds, 3);
        // The interval of the median of three figures spans them all.
        let want = Estimate::median_of(&[3000.0, 1000.0, 3100.0]);
        let iv = want.interval.unwrap();
        let pct = spread.half_width_pct[0].unwrap();
        assert!((pct - (iv.hi - iv.lo) / 2.0 / 3000.0 * 100.0).abs() < 1e-9);
        assert!(pct > 1.0, "{pct}");
        // A round without a peak (-N): no peak in the median.
        let m = median_result(&[bw_round(1.0, None), bw_round(2.0, Some(2.0))]).unwrap();
        assert!(matches!(m.lines[0].figures, Figures::Bw { peak: None, .. }));
        // Under three rounds the spread is not estimated.
        assert_eq!(m.spread.unwrap().half_width_pct, [None]);
    }

    #[test]
    fn latency_medians_take_t_typical_as_the_main_figure() {
        let round = |typical: f64| {
            let stats = LatStats {
                t_min_us: typical - 1.0,
                t_max_us: typical + 10.0,
                t_typical_us: typical,
                t_avg_us: typical + 0.5,
                t_stdev_us: 0.1,
                p99_us: typical + 2.0,
                p999_us: typical + 5.0,
            };
            let mut r = bw_round(1.0, None);
            r.lines[0].figures = Figures::Lat {
                iterations: 1000,
                stats,
                histogram: crate::stats::histogram(&[typical * 1e-6]),
            };
            r
        };
        let rounds: Vec<VerbsResult> = [5.0, 4.0, 9.0, 4.5, 5.5].map(round).into();
        let m = median_result(&rounds).unwrap();
        let Figures::Lat { stats, .. } = &m.lines[0].figures else {
            panic!("not latency")
        };
        assert_eq!((stats.t_typical_us, stats.t_min_us), (5.0, 4.0));
        assert_eq!((stats.t_avg_us, stats.p999_us), (5.5, 10.0));
        let pct = m.spread.unwrap().half_width_pct[0].unwrap();
        let iv = Estimate::median_of(&[5.0, 4.0, 9.0, 4.5, 5.5])
            .interval
            .unwrap();
        assert!((pct - iv.half_width_of(5.0) * 100.0).abs() < 1e-9);
    }
}
