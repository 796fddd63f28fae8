//! The rounds of a sweep (`--rounds`): after each round, whether another
//! follows and which lines it measures (rank 0 decides for `auto` and every
//! rank takes its word), and the closing medians and `--min-busbw` verdict.

use crate::driver::args::{Plan, Rounds};
use crate::job::Comm;
use crate::report::rounds::{Ledger, MinBusbw, RoundsSummary};
use crate::report::Summary;
use crate::watchdog::Watchdog;
use std::time::Instant;

/// --rounds auto's word after a round: go on, or stop (all settled, or a cap).
const GO_ON: u8 = 0;
const STOP_SETTLED: u8 = 1;
const STOP_CAP: u8 = 2;
const STOP_TIME: u8 = 3;

/// Which lines a round measures, by their place in the sweep.
pub(super) enum RoundLines {
    Every,
    Only(Vec<bool>),
}

impl RoundLines {
    pub(super) fn has(&self, line: usize) -> bool {
        match self {
            RoundLines::Every => true,
            RoundLines::Only(wanted) => wanted.get(line).copied().unwrap_or(false),
        }
    }
}

/// After a round: the lines of the next, or why the rounds stopped (None:
/// the count was reached, or every line settled).
pub(super) enum Next {
    Measure(RoundLines),
    Stop(Option<String>),
}

/// After `round`: whether another follows and which lines it measures.
/// A fixed count needs no exchange; with `auto` rank 0 judges the lines it
/// holds and every rank takes its word, so all call the same collectives.
pub(super) fn next<C: Comm>(
    comm: &C,
    watchdog: &Watchdog,
    plan: &Plan,
    round: u32,
    ledger: &Ledger,
    started: Instant,
) -> Next {
    let Rounds::Auto {
        tolerance,
        max_rounds,
        max_seconds,
    } = plan.rounds.rounds
    else {
        return match plan.rounds.rounds {
            Rounds::Fixed(n) if round < n => Next::Measure(RoundLines::Every),
            _ => Next::Stop(None),
        };
    };
    // Rank 0's word: a stop code, then one byte per line (1: measure it).
    let mine = match comm.rank() {
        0 => {
            let unsettled = ledger.unsettled(tolerance);
            let code = if !unsettled.contains(&true) {
                STOP_SETTLED
            } else if round >= max_rounds {
                STOP_CAP
            } else if started.elapsed().as_secs_f64() >= max_seconds {
                STOP_TIME
            } else {
                GO_ON
            };
            std::iter::once(code)
                .chain(unsettled.iter().map(|&u| u8::from(u)))
                .collect()
        }
        _ => Vec::new(),
    };
    watchdog.begin(format!("--rounds auto: agreeing on round {}", round + 1));
    watchdog.enter_call();
    let word = comm.all_gather_bytes(&mine).swap_remove(0);
    watchdog.end();
    match word.first().copied() {
        Some(GO_ON) => Next::Measure(RoundLines::Only(
            word[1..].iter().map(|&b| b == 1).collect(),
        )),
        Some(STOP_CAP) => Next::Stop(Some(format!("the {max_rounds}-round cap (--max-rounds)"))),
        Some(STOP_TIME) => Next::Stop(Some(format!(
            "the {} s budget (--rounds-time)",
            crate::cli::shown(max_seconds)
        ))),
        _ => Next::Stop(None),
    }
}

/// After the last round: each line's median and the --min-busbw verdict into
/// `summary`; returns the busbw figures its average is over (each line's medians).
pub(super) fn close(
    plan: &Plan,
    ledger: &Ledger,
    stopped_by: Option<String>,
    summary: &mut Summary,
) -> Vec<f64> {
    let rounds = plan.rounds.rounds;
    let tolerance = match rounds {
        Rounds::Auto { tolerance, .. } => Some(tolerance),
        Rounds::Fixed(_) => None,
    };
    let lines = ledger.medians(tolerance);
    let busbw = lines
        .iter()
        .flat_map(|l| l.result.measurements.iter().map(|m| m.busbw_gbs))
        .collect();
    summary.rounds = rounds.many().then(|| RoundsSummary {
        lines,
        auto: tolerance.map(|t| (t, stopped_by)),
    });
    summary.min_busbw = plan
        .rounds
        .min_busbw_gbs
        .map(|min| MinBusbw::judge(min, &ledger.round_averages()));
    busbw
}
