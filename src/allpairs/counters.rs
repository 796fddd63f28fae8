//! The fabric counters around each round of an all-pairs run: each node's
//! local rank 0 snapshots its node's counters before and after the round
//! (between barriers, so no rank of the node is timing while it reads), rank 0
//! gathers the deltas (`report::counters::Watch`, as a sweep does per size)
//! and attributes each node's deltas to the pair(s) its ranks ran in that
//! round: a counter that moves names the link it moved on. Rank 0 then prints
//! the footer (with a warning per pair whose round moved an error, retransmit,
//! congestion or pause counter), fills the matrix CSV's counter columns and
//! writes `--counters FILE` with the round and pair of every raw delta.

use super::matrix::{Matrix, PairResults};
use crate::job::world::World;
use crate::report::counters::{
    Column, CounterCsv, FabricPlan, NodeChanges, RunTotals, SizeCounters, Span, Watch,
};
use crate::report::RunInfo;
use crate::sysfs::counters::{Class, Snapshot};
use crate::watchdog::Watchdog;

/// Every node's deltas over each round, in round order (on rank 0).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoundCounters {
    pub rounds: Vec<SizeCounters>,
}

/// One rank's watch over its node's counters, round after round.
pub struct RoundWatch {
    watch: Watch,
    before: Option<Snapshot>,
    /// Rank 0: every round's gathered deltas.
    gathered: RoundCounters,
}

impl RoundWatch {
    /// Read on each node's first rank under `plan`; with None, on none.
    pub fn new(plan: Option<&FabricPlan>, local_rank: usize) -> RoundWatch {
        RoundWatch {
            watch: plan.map_or_else(Watch::off, |p| Watch::new(p, local_rank)),
            before: None,
            gathered: RoundCounters::default(),
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

    /// After round `what`: a barrier (every rank of the node has finished),
    /// the node's snapshot, and every node's deltas gathered to rank 0.
    pub fn after(&mut self, world: &World, watchdog: &Watchdog, what: &str) {
        watchdog.begin(format!("{what} (barrier before the fabric counters)"));
        watchdog.enter_call();
        world.barrier();
        watchdog.begin(format!("{what} (gathering the fabric counters)"));
        watchdog.enter_call();
        if let Some(round) = self.watch.after(world, self.before.take()) {
            self.gathered.rounds.push(round);
        }
        watchdog.end();
    }

    pub fn into_rounds(self) -> RoundCounters {
        self.gathered
    }
}

/// Who ran in the rounds: each rank's host and label, and each round's pairs.
pub struct Schedule<'a> {
    pub hosts: &'a [String],
    pub labels: &'a [String],
    pub rounds: &'a [Vec<(usize, usize)>],
}

impl Schedule<'_> {
    fn pair_name(&self, (a, b): (usize, usize)) -> String {
        format!("{} <-> {}", self.labels[a], self.labels[b])
    }

    /// The pairs of round `r` with a rank on `host`.
    fn pairs_on(&self, r: usize, host: &str) -> Vec<(usize, usize)> {
        self.rounds[r]
            .iter()
            .copied()
            .filter(|&(a, b)| self.hosts[a] == host || self.hosts[b] == host)
            .collect()
    }

    /// What each node's deltas of round `r` spanned: the pairs its ranks ran.
    fn spans<'c>(
        &'c self,
        r: usize,
        round: &'c SizeCounters,
    ) -> impl Iterator<Item = (Span, &'c NodeChanges)> + 'c {
        round.nodes.iter().map(move |node| {
            let pairs = self.pairs_on(r, &node.host);
            let span = Span::Round {
                round: r + 1,
                pairs: pairs.into_iter().map(|p| self.pair_name(p)).collect(),
            };
            (span, node)
        })
    }

    /// The deltas of pair `(a, b)` over its round: its two nodes'.
    fn of_pair(&self, round: &SizeCounters, (a, b): (usize, usize)) -> SizeCounters {
        SizeCounters {
            nodes: round
                .nodes
                .iter()
                .filter(|n| n.host == self.hosts[a] || n.host == self.hosts[b])
                .cloned()
                .collect(),
        }
    }
}

impl RoundCounters {
    /// The matrix CSV's counter columns: pair (a, b) holds the deltas of its
    /// rounds added up (it runs once in each repetition of the schedule).
    pub fn matrices(&self, schedule: &Schedule) -> Vec<(Column, Matrix)> {
        Column::ALL
            .into_iter()
            .map(|column| {
                let mut m = Matrix::empty(schedule.hosts.len());
                for (r, round) in self.rounds.iter().enumerate() {
                    for &pair in &schedule.rounds[r] {
                        if let Some(v) = column.of(&schedule.of_pair(round, pair)) {
                            let before = m.get(pair.0, pair.1).unwrap_or(0.0);
                            m.set(pair.0, pair.1, before + v as f64);
                        }
                    }
                }
                (column, m)
            })
            .collect()
    }

    /// The footer's lines, without their "# ": the sweeps' block over rounds,
    /// then a warning for each pair whose round moved a trouble counter.
    pub fn lines(&self, plan: &FabricPlan, schedule: &Schedule) -> Vec<String> {
        let mut totals = RunTotals::default();
        for (r, round) in self.rounds.iter().enumerate() {
            totals.add_spanned(schedule.spans(r, round));
        }
        let mut out = totals.lines(plan);
        for (r, round) in self.rounds.iter().enumerate() {
            for &pair in &schedule.rounds[r] {
                out.extend(pair_warning(schedule, r, round, pair));
            }
        }
        out
    }

    /// `--counters FILE`: every round's raw deltas with the round and pair(s).
    pub fn write(
        &self,
        file: &mut CounterCsv,
        run: &RunInfo,
        schedule: &Schedule,
    ) -> anyhow::Result<()> {
        for (r, round) in self.rounds.iter().enumerate() {
            file.write_spanned(run, schedule.spans(r, round))?;
        }
        Ok(())
    }
}

/// The warning of a pair whose round moved a trouble counter on its nodes.
fn pair_warning(
    schedule: &Schedule,
    r: usize,
    round: &SizeCounters,
    pair: (usize, usize),
) -> Option<String> {
    let mine = schedule.of_pair(round, pair);
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
    let hosts = [&schedule.hosts[pair.0], &schedule.hosts[pair.1]];
    let sharing: Vec<String> = schedule.rounds[r]
        .iter()
        .copied()
        .filter(|&p| p != pair)
        .filter(|&(a, b)| {
            hosts.contains(&&schedule.hosts[a]) || hosts.contains(&&schedule.hosts[b])
        })
        .map(|p| schedule.pair_name(p))
        .collect();
    let shared = match sharing.is_empty() {
        true => String::new(),
        false => format!(
            "; {} ran on the same node(s) in that round and the counters cannot tell the pairs \
             apart (launch one rank per node)",
            sharing.join(", ")
        ),
    };
    Some(format!(
        "WARNING: pair {} (round {} of {}): {} while this pair ran ({}): check the link between \
         them (cables and switch ports: ibdiagnet, mlxlink; on RoCE the PFC/ECN settings){shared}",
        schedule.pair_name(pair),
        r + 1,
        schedule.rounds.len(),
        moved.join(", "),
        places.join(", ")
    ))
}

/// Rank 0, after the rounds: the counter matrices into `results` and the
/// footer's lines (printed after the table).
pub fn fill(
    rounds: &RoundCounters,
    plan: &FabricPlan,
    schedule: &Schedule,
    results: &mut PairResults,
) -> Vec<String> {
    results.counters = rounds.matrices(schedule);
    rounds.lines(plan, schedule)
}

#[cfg(test)]
mod tests;
