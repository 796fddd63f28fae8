//! The fabric counters around each round of an all-pairs run: each node's
//! local rank 0 snapshots its node's counters before and after the round
//! (between barriers, so no rank of the node is timing while it reads), rank 0
//! gathers the deltas (`report::counters::Watch`, as a sweep does per size)
//! and attributes each node's deltas to the pair(s) its ranks ran in that
//! round: a counter that moves names the link it moved on. Rank 0 then prints
//! the footer (with a warning per pair whose round moved an error, retransmit,
//! congestion or pause counter), fills the matrix CSV's counter columns and
//! writes `--counters FILE` with the round and pair of every raw delta.

use super::judging::LINES_EACH;
use super::matrix::{Matrix, PairResults};
use super::schedule::Repeated;
use crate::job::world::World;
use crate::report::counters::{
    Column, CounterCsv, FabricPlan, NodeChanges, RunTotals, SizeCounters, Span, Watch,
};
use crate::report::RunInfo;
use crate::sysfs::counters::{Class, Snapshot};
use crate::watchdog::Watchdog;
use std::collections::HashMap;

/// One rank's watch over its node's counters, round after round.
pub struct RoundWatch {
    watch: Watch,
    before: Option<Snapshot>,
    /// Rank 0: what the rounds so far add up to.
    tally: Option<RoundTally>,
}

impl RoundWatch {
    /// Read on each node's first rank under `plan` (with None, on none),
    /// each round's deltas added to `tally` (rank 0's).
    pub fn new(
        plan: Option<&FabricPlan>,
        local_rank: usize,
        tally: Option<RoundTally>,
    ) -> RoundWatch {
        RoundWatch {
            watch: plan.map_or_else(Watch::off, |p| Watch::new(p, local_rank)),
            before: None,
            tally,
        }
    }

    /// Before round `what` measures: the node's snapshot, then a barrier so
    /// no rank starts timing while its node reads.
    pub fn before(&mut self, world: &World, watchdog: &Watchdog, what: &str) {
        self.before = self.watch.before();
        watchdog.begin(format!("{what} (barrier after the fabric counters)"));
        watchdog.enter_call();
        world.barrier();
        watchdog.end();
    }

    /// After round `r` (`what`): a barrier (every rank of the node has
    /// finished), the node's snapshot, and every node's deltas gathered to
    /// rank 0, which tallies them and keeps nothing else of the round.
    pub fn after(&mut self, world: &World, watchdog: &Watchdog, what: &str, r: usize) {
        watchdog.begin(format!("{what} (barrier before the fabric counters)"));
        watchdog.enter_call();
        world.barrier();
        watchdog.begin(format!("{what} (gathering the fabric counters)"));
        watchdog.enter_call();
        if let (Some(round), Some(tally)) =
            (self.watch.after(world, self.before.take()), &mut self.tally)
        {
            tally.add(r, &round);
        }
        watchdog.end();
    }

    pub fn into_tally(self) -> Option<RoundTally> {
        self.tally
    }
}

/// Who ran in the rounds: each participant's host and label, and the schedule.
pub struct Schedule {
    pub hosts: Vec<String>,
    pub labels: Vec<String>,
    pub rounds: Repeated,
}

/// One round's pairs, found by host.
struct RoundPairs<'a> {
    schedule: &'a Schedule,
    r: usize,
    pairs: Vec<(usize, usize)>,
    by_host: HashMap<&'a str, Vec<(usize, usize)>>,
}

impl<'a> RoundPairs<'a> {
    fn of(schedule: &'a Schedule, r: usize) -> RoundPairs<'a> {
        let pairs = schedule.rounds.pairs(r);
        let mut by_host: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
        for &(a, b) in &pairs {
            let (ha, hb) = (&schedule.hosts[a][..], &schedule.hosts[b][..]);
            by_host.entry(ha).or_default().push((a, b));
            if hb != ha {
                by_host.entry(hb).or_default().push((a, b));
            }
        }
        RoundPairs {
            schedule,
            r,
            pairs,
            by_host,
        }
    }

    fn pair_name(&self, (a, b): (usize, usize)) -> String {
        format!(
            "{} <-> {}",
            self.schedule.labels[a], self.schedule.labels[b]
        )
    }

    /// The pairs of the round with a rank on `host`.
    fn on(&self, host: &str) -> &[(usize, usize)] {
        self.by_host.get(host).map_or(&[], Vec::as_slice)
    }

    /// What each node's deltas spanned: the pairs its ranks ran.
    fn spans<'c>(
        &'c self,
        round: &'c SizeCounters,
    ) -> impl Iterator<Item = (Span, &'c NodeChanges)> + 'c {
        round.nodes.iter().map(move |node| {
            let span = Span::Round {
                round: self.r + 1,
                pairs: self
                    .on(&node.host)
                    .iter()
                    .map(|&p| self.pair_name(p))
                    .collect(),
            };
            (span, node)
        })
    }
}

/// The deltas of pair `(a, b)` over its round: its two nodes'.
fn of_pair(
    nodes: &HashMap<&str, &NodeChanges>,
    hosts: &[String],
    (a, b): (usize, usize),
) -> SizeCounters {
    let mut mine: Vec<&str> = vec![&hosts[a], &hosts[b]];
    mine.dedup();
    SizeCounters {
        nodes: mine
            .iter()
            .filter_map(|h| nodes.get(h))
            .map(|&n| n.clone())
            .collect(),
    }
}

/// Rank 0's account of the fabric counters, each round's deltas added as they
/// arrive, then dropped: the footer's totals, the matrix CSV's counter columns,
/// the pair warnings and `--counters FILE` (written round by round) grow with
/// the nodes and pairs, never with the rounds times the nodes.
pub struct RoundTally {
    schedule: Schedule,
    totals: RunTotals,
    matrices: Vec<(Column, Matrix)>,
    warnings: Vec<String>,
    unshown: usize,
    file: Option<(CounterCsv, RunInfo)>,
    file_error: Option<anyhow::Error>,
}

impl RoundTally {
    /// `file`: `--counters FILE` with the run it belongs to.
    pub fn new(schedule: Schedule, file: Option<(CounterCsv, RunInfo)>) -> RoundTally {
        let n = schedule.hosts.len();
        RoundTally {
            matrices: Column::ALL
                .into_iter()
                .map(|c| (c, Matrix::empty(n)))
                .collect(),
            schedule,
            totals: RunTotals::default(),
            warnings: Vec::new(),
            unshown: 0,
            file,
            file_error: None,
        }
    }

    /// Round `r`'s deltas: into the totals, each of its pairs' cells (a pair
    /// holds the deltas of its rounds added up: it runs once in each
    /// repetition of the schedule), a warning for each pair whose round moved
    /// a trouble counter, and a row a delta in the file.
    pub fn add(&mut self, r: usize, round: &SizeCounters) {
        let pairs = RoundPairs::of(&self.schedule, r);
        self.totals.add_spanned(pairs.spans(round));
        if let (Some((file, run)), None) = (&mut self.file, &self.file_error) {
            self.file_error = file.write_spanned(run, pairs.spans(round)).err();
        }
        let nodes: HashMap<&str, &NodeChanges> =
            round.nodes.iter().map(|n| (&n.host[..], n)).collect();
        for &pair in &pairs.pairs {
            let mine = of_pair(&nodes, &self.schedule.hosts, pair);
            for (column, m) in &mut self.matrices {
                if let Some(v) = column.of(&mine) {
                    let before = m.get(pair.0, pair.1).unwrap_or(0.0);
                    m.set(pair.0, pair.1, before + v as f64);
                }
            }
            if let Some(w) = pair_warning(&pairs, &mine, pair) {
                // As the verdict's lines of a kind: the rest counted (each pair's counts
                // are in the matrix CSV's columns, each delta in --counters FILE).
                match self.warnings.len() < LINES_EACH {
                    true => self.warnings.push(w),
                    false => self.unshown += 1,
                }
            }
        }
    }

    /// After the rounds: the counter matrices into `results`, and the footer's
    /// lines, without their "# ": the sweeps' block over rounds, then the pair
    /// warnings; Err when writing `--counters FILE` failed.
    pub fn finish(
        self,
        plan: &FabricPlan,
        results: &mut PairResults,
    ) -> (Vec<String>, anyhow::Result<()>) {
        results.counters = self.matrices;
        let mut out = self.totals.lines(plan);
        out.extend(self.warnings);
        if self.unshown > 0 {
            out.push(format!(
                "WARNING: {} more pair rounds moved a trouble counter: each pair's counts are in \
                 the matrix CSV's counter columns, each delta in --counters FILE",
                self.unshown
            ));
        }
        (out, self.file_error.map_or(Ok(()), Err))
    }
}

/// The warning of a pair whose round moved a trouble counter on its nodes
/// (`mine`: their deltas).
fn pair_warning(round: &RoundPairs, mine: &SizeCounters, pair: (usize, usize)) -> Option<String> {
    let moved: Vec<String> = Class::TROUBLE
        .into_iter()
        .filter_map(|class| {
            let n = mine.sum(class);
            (n > 0).then(|| format!("{} +{n}", class.name()))
        })
        .collect();
    if moved.is_empty() {
        return None;
    }
    let mut places: Vec<String> = mine
        .nodes
        .iter()
        .flat_map(|node| {
            node.changes
                .iter()
                .filter(|c| Class::TROUBLE.contains(&c.key.class()))
                .filter_map(move |c| {
                    let d = c.counted().filter(|&d| d > 0)?;
                    Some(format!(
                        "{} {} {}/{} +{d}",
                        node.host,
                        c.key.place(),
                        c.key.family.name(),
                        c.key.name
                    ))
                })
        })
        .collect();
    if places.len() > 4 {
        let more = places.len() - 4;
        places.truncate(4);
        places.push(format!("{more} more"));
    }
    let hosts = &round.schedule.hosts;
    let mut sharing: Vec<(usize, usize)> = [&hosts[pair.0], &hosts[pair.1]]
        .iter()
        .flat_map(|h| round.on(h))
        .copied()
        .filter(|&p| p != pair)
        .collect();
    sharing.sort_unstable();
    sharing.dedup();
    let shared =
        match sharing.is_empty() {
            true => String::new(),
            false => format!(
            "; {} ran on the same node(s) in that round and the counters cannot tell the pairs \
             apart (launch one rank per node)",
            sharing.iter().map(|&p| round.pair_name(p)).collect::<Vec<_>>().join(", ")
        ),
        };
    Some(format!(
        "WARNING: pair {} (round {} of {}): {} while this pair ran ({}): check the link between \
         them (cables and switch ports: ibdiagnet, mlxlink; on RoCE the PFC/ECN settings){shared}",
        round.pair_name(pair),
        round.r + 1,
        round.schedule.rounds.total(),
        moved.join(", "),
        places.join(", ")
    ))
}

#[cfg(test)]
mod tests;
