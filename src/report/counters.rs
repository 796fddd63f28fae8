//! The fabric counters around every size of a run: a [`Watch`] snapshots each
//! node's counters before and after each size (on the node's local rank 0,
//! never inside a timed loop) and gathers the deltas to rank 0 as a
//! [`SizeCounters`]; rank 0's [`Footer`] prints which ports carried the bytes,
//! every trouble counter that moved and the warnings (`warnings`), and
//! [`CounterCsv`] writes every raw delta (`--counters FILE`) in long form.

mod columns;
mod warnings;

use super::csv::CsvExport;
use super::{Exporter, RunInfo, SizeResult, Summary};
use crate::job::Group;
use crate::sizes::human_bytes;
use crate::sysfs::counters::{Class, Delta, Key, Reader, Snapshot};
use crate::sysfs::Root;
pub use columns::{Column, NodeChanges, SizeCounters};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
pub use warnings::Meant;

/// What a run's counters are read from and judged against.
#[derive(Clone, Debug)]
pub struct FabricPlan {
    /// The root the counters are read under (`--sysfs-root`, `/` live).
    pub root: PathBuf,
    /// The RDMA ports the user named (-d, NCCL_IB_HCA, UCX_NET_DEVICES).
    pub meant: Option<Meant>,
    /// The benchmark's bytes should cross an RDMA port: a collective over
    /// several nodes, or a verbs run.
    pub expects_rdma: bool,
}

impl Default for FabricPlan {
    fn default() -> Self {
        FabricPlan {
            root: PathBuf::from("/"),
            meant: None,
            expects_rdma: false,
        }
    }
}

impl FabricPlan {
    /// A collective's: the HCAs its environment names, RDMA expected across nodes.
    pub fn collective(root: &Path, nnodes: usize) -> FabricPlan {
        FabricPlan {
            root: root.to_path_buf(),
            meant: Meant::from_env(|v| std::env::var(v).ok()),
            expects_rdma: nnodes > 1,
        }
    }
}

/// What one pair of snapshots spans: a size of a sweep, or a round of an
/// all-pairs run with the pair(s) a node's ranks were in.
#[derive(Clone, Debug, PartialEq)]
pub enum Span {
    Size(u64),
    /// 1-based; `pairs` as "a <-> b", empty where the node sat the round out.
    Round {
        round: usize,
        pairs: Vec<String>,
    },
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Span::Size(size) => f.write_str(&human_bytes(*size)),
            Span::Round { round, pairs } if pairs.is_empty() => {
                write!(f, "round {round} (no pair on this node)")
            }
            Span::Round { round, pairs } => write!(f, "round {round} ({})", pairs.join(", ")),
        }
    }
}

/// Reads a node's counters around each size and gathers the deltas.
pub struct Watch {
    reader: Option<Reader>,
}

impl Watch {
    /// Reads on `local_rank` 0 only: one reader per node.
    pub fn new(plan: &FabricPlan, local_rank: usize) -> Watch {
        Watch {
            reader: (local_rank == 0).then(|| Reader::new(Root::new(&plan.root))),
        }
    }

    /// A watch that reads nothing.
    pub fn off() -> Watch {
        Watch { reader: None }
    }

    /// The snapshot before a size (None on ranks that do not read).
    pub fn before(&mut self) -> Option<Snapshot> {
        self.reader.as_mut().map(Reader::snapshot)
    }

    /// This node's deltas since `before`.
    pub fn after_here(&mut self, host: &str, before: Option<Snapshot>) -> Option<NodeChanges> {
        let (reader, before) = (self.reader.as_mut()?, before?);
        let after = reader.snapshot();
        Some(NodeChanges {
            host: host.to_string(),
            changes: crate::sysfs::counters::diff(&before, &after),
        })
    }

    /// Every node's deltas since `before`, on rank 0 (a step every rank takes).
    pub fn after(&mut self, group: &dyn Group, before: Option<Snapshot>) -> Option<SizeCounters> {
        let mine = self.after_here(group.host(group.rank()), before);
        let bytes = serde_json::to_vec(&mine).expect("counters serialise");
        let all = group.all_gather_bytes(&bytes);
        (group.rank() == 0).then(|| SizeCounters {
            nodes: all
                .iter()
                .filter_map(|b| {
                    serde_json::from_slice::<Option<NodeChanges>>(b)
                        .ok()
                        .flatten()
                })
                .collect(),
        })
    }
}

/// A result that carries its size's counters.
pub trait WithCounters {
    fn size_bytes(&self) -> u64;
    fn counters(&self) -> Option<&SizeCounters>;
}

impl WithCounters for SizeResult {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }
    fn counters(&self) -> Option<&SizeCounters> {
        self.counters.as_ref()
    }
}

/// One counter's movement over the run.
#[derive(Debug, Default)]
struct Total {
    counted: u64,
    /// Sizes (or rounds) during which it moved, in order, each once.
    moved: Spans<Span>,
    /// Sizes (or rounds) during which its delta was unknown, and why.
    unknown: Spans<(Span, &'static str)>,
}

/// Every counter's movement over a run, by node, from each size's (or round's) deltas.
#[derive(Debug, Default)]
pub struct RunTotals {
    nodes: BTreeMap<String, BTreeMap<Key, Total>>,
    spans: usize,
    rounds: bool,
}

impl RunTotals {
    pub fn add(&mut self, size: u64, counters: &SizeCounters) {
        self.add_spanned(counters.nodes.iter().map(|n| (Span::Size(size), n)));
    }

    /// One reading's deltas, each node's with what it spanned.
    pub fn add_spanned<'a>(&mut self, nodes: impl IntoIterator<Item = (Span, &'a NodeChanges)>) {
        self.spans += 1;
        for (span, node) in nodes {
            self.rounds = matches!(span, Span::Round { .. });
            let keys = self.nodes.entry(node.host.clone()).or_default();
            for change in &node.changes {
                let total = keys.entry(change.key.clone()).or_default();
                match change.delta {
                    Delta::Counted(0) => {}
                    Delta::Counted(d) => {
                        total.counted += d;
                        total.moved.push(&span);
                    }
                    Delta::Unknown(why) => total.unknown.push(&(span.clone(), why.name())),
                }
            }
        }
    }

    /// The footer's lines, without their "# ".
    pub fn lines(&self, plan: &FabricPlan) -> Vec<String> {
        let what = match self.rounds {
            true => "round(s) of pairs",
            false => "size(s)",
        };
        let mut out = vec![format!(
            "Fabric counters: deltas over {} {what}, read before and after each",
            self.spans
        )];
        if self.nodes.is_empty() {
            out.push("  no counters were read".into());
        }
        for (host, keys) in &self.nodes {
            out.push(format!("  {host}: {}", rails_line(keys)));
            if let Some(net) = netdev_line(keys) {
                out.push(format!("  {host}: {net}"));
            }
            let mut quiet = true;
            for (key, total) in keys {
                let class = key.class();
                if Class::TROUBLE.contains(&class) && total.counted > 0 {
                    quiet = false;
                    out.push(format!(
                        "  {host}: {} {} {}/{} +{} during {}",
                        class.name(),
                        key.place(),
                        key.family.name(),
                        key.name,
                        total.counted,
                        total.moved.list()
                    ));
                }
                let place = format!("{} {}/{}", key.place(), key.family.name(), key.name);
                for (span, why) in &total.unknown.first {
                    out.push(format!(
                        "  {host}: {place}: {why} during {span}, its delta unknown"
                    ));
                }
                if let Some(more) = total.unknown.more() {
                    out.push(format!(
                        "  {host}: {place}: its delta unknown during {more} more"
                    ));
                }
            }
            if quiet {
                out.push(format!(
                    "  {host}: no error, retransmit, congestion or pause counter moved"
                ));
            }
        }
        out.extend(
            warnings::warnings(plan, &self.data_by_node())
                .into_iter()
                .map(|w| format!("WARNING: {w}")),
        );
        out
    }

    /// Each node's RDMA ports with the data they moved.
    fn data_by_node(&self) -> BTreeMap<&str, warnings::NodeData> {
        self.nodes
            .iter()
            .map(|(host, keys)| {
                (
                    host.as_str(),
                    warnings::NodeData::of(keys.iter().map(|(k, t)| (k, t.counted))),
                )
            })
            .collect()
    }
}

/// "data on mlx5_0:1 24.0 MiB (50.0%), mlx5_1:1 ...": each RDMA port's share.
fn rails_line(keys: &BTreeMap<Key, Total>) -> String {
    let data = warnings::NodeData::of(keys.iter().map(|(k, t)| (k, t.counted)));
    if data.ports.is_empty() {
        return "no RDMA port with data counters".into();
    }
    let total: u64 = data.ports.values().sum();
    let shares: Vec<String> = data
        .ports
        .iter()
        .map(|(port, &n)| {
            let amount = match data.unit {
                warnings::Unit::Bytes => human_bytes(n),
                warnings::Unit::Packets => format!("{n} packets"),
            };
            match total {
                0 => format!("{port} {amount}"),
                t => format!("{port} {amount} ({:.1}%)", 100.0 * n as f64 / t as f64),
            }
        })
        .collect();
    format!(
        "data on RDMA ports (sent + received): {}",
        shares.join(", ")
    )
}

/// The netdevs that moved data, most first (a socket fallback shows here).
fn netdev_line(keys: &BTreeMap<Key, Total>) -> Option<String> {
    let mut bytes: BTreeMap<String, u64> = BTreeMap::new();
    for (key, total) in keys {
        if !key.family.rdma() && key.class() == Class::DataBytes && total.counted > 0 {
            *bytes.entry(key.device.clone()).or_default() += total.counted;
        }
    }
    let mut by_size: Vec<(String, u64)> = bytes.into_iter().collect();
    by_size.sort_by_key(|b| std::cmp::Reverse(b.1));
    let named: Vec<String> = by_size
        .iter()
        .take(4)
        .map(|(d, n)| format!("{d} {}", human_bytes(*n)))
        .collect();
    (!named.is_empty()).then(|| format!("data on netdevs (sent + received): {}", named.join(", ")))
}

/// Spans named in a footer line at most: a counter that moved in every round
/// of a long run keeps these and a count, not every round.
const SPANS_NAMED: usize = 8;

/// The first spans of something, each once, and how many in all.
#[derive(Debug)]
struct Spans<T> {
    first: Vec<T>,
    all: usize,
}

impl<T> Default for Spans<T> {
    fn default() -> Self {
        Spans {
            first: Vec::new(),
            all: 0,
        }
    }
}

impl<T: Clone + PartialEq> Spans<T> {
    /// Counts `span` unless it is the last one counted (each span comes in order).
    fn push(&mut self, span: &T) {
        if self.all == self.first.len() && self.first.last() == Some(span) {
            return;
        }
        self.all += 1;
        if self.first.len() < SPANS_NAMED {
            self.first.push(span.clone());
        }
    }

    /// How many were not kept, if any.
    fn more(&self) -> Option<usize> {
        Some(self.all - self.first.len()).filter(|&m| m > 0)
    }
}

impl Spans<Span> {
    /// "8 B, 16 B" (at most `SPANS_NAMED`, then how many more).
    fn list(&self) -> String {
        let mut named: Vec<String> = self.first.iter().map(Span::to_string).collect();
        named.extend(self.more().map(|m| format!("{m} more")));
        named.join(", ")
    }
}

/// Rank 0's footer block: printed once the run finishes.
pub struct Footer<W: Write> {
    out: W,
    plan: FabricPlan,
    totals: RunTotals,
}

impl<W: Write> Footer<W> {
    pub fn new(out: W, plan: FabricPlan) -> Self {
        Footer {
            out,
            plan,
            totals: RunTotals::default(),
        }
    }
}

impl<W: Write, R: WithCounters> Exporter<R> for Footer<W> {
    fn start(&mut self, _run: &RunInfo) -> anyhow::Result<()> {
        Ok(())
    }

    fn record(&mut self, _run: &RunInfo, result: &R) -> anyhow::Result<()> {
        if let Some(c) = result.counters() {
            self.totals.add(result.size_bytes(), c);
        }
        Ok(())
    }

    fn finish(&mut self, _run: &RunInfo, _summary: &Summary) -> anyhow::Result<()> {
        for line in self.totals.lines(&self.plan) {
            writeln!(self.out, "# {line}")?;
        }
        self.out.flush()?;
        Ok(())
    }
}

/// One raw delta of `--counters FILE`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CounterRow {
    pub run_id: String,
    pub program: String,
    /// Which size of the run this is (0-based): sizes repeat over datatypes,
    /// ops, roots and cycles; an all-pairs run's round (0-based).
    pub seq: u64,
    /// The size; empty for an all-pairs round, which spans every size.
    pub size_bytes: Option<u64>,
    pub host: String,
    pub device: String,
    pub port: Option<u32>,
    /// counters, hw_counters, statistics or ethtool.
    pub family: String,
    pub counter: String,
    /// data_bytes, data_packets, errors, retransmits, congestion, pauses or other.
    pub class: String,
    /// The delta (bytes for port_xmit_data and port_rcv_data); empty where unknown.
    pub delta: Option<u64>,
    /// Why the delta is unknown: reset, saturated, vanished, appeared.
    pub unknown: Option<String>,
    /// All-pairs: the round (1-based) and the pair(s) the node's ranks were
    /// in ("a <-> b", ';' between several); empty for a sweep.
    pub round: Option<u64>,
    pub pairs: Option<String>,
}

/// `--counters FILE`: every size's raw deltas, each row written whole as it comes.
pub struct CounterCsv {
    csv: CsvExport,
    seq: u64,
}

impl CounterCsv {
    pub fn create(path: &Path) -> anyhow::Result<CounterCsv> {
        Ok(CounterCsv {
            csv: CsvExport::create_for::<CounterRow>(path, "--counters")?,
            seq: 0,
        })
    }

    /// One reading's deltas: each node's, with what it spanned.
    pub fn write_spanned<'a>(
        &mut self,
        run: &RunInfo,
        nodes: impl IntoIterator<Item = (Span, &'a NodeChanges)>,
    ) -> anyhow::Result<()> {
        let seq = self.seq;
        self.seq += 1;
        let rows = nodes.into_iter().flat_map(|(span, node)| {
            let (size_bytes, round, pairs) = match span {
                Span::Size(size) => (Some(size), None, None),
                Span::Round { round, pairs } => (None, Some(round as u64), Some(pairs.join(";"))),
            };
            node.changes.iter().map(move |c| CounterRow {
                run_id: run.run_id.clone(),
                program: run.program.clone(),
                seq,
                size_bytes,
                host: node.host.clone(),
                device: c.key.device.clone(),
                port: c.key.port,
                family: c.key.family.name().into(),
                counter: c.key.name.clone(),
                class: c.key.class().id().into(),
                delta: c.counted(),
                unknown: match c.delta {
                    Delta::Unknown(why) => Some(why.name().into()),
                    Delta::Counted(_) => None,
                },
                round,
                pairs: pairs.clone(),
            })
        });
        self.csv.write_records(rows)
    }
}

impl<R: WithCounters> Exporter<R> for CounterCsv {
    fn start(&mut self, _run: &RunInfo) -> anyhow::Result<()> {
        Ok(())
    }

    fn record(&mut self, run: &RunInfo, result: &R) -> anyhow::Result<()> {
        let nodes = result.counters().into_iter().flat_map(|c| &c.nodes);
        let size = result.size_bytes();
        self.write_spanned(run, nodes.map(|n| (Span::Size(size), n)))
    }

    fn finish(&mut self, _run: &RunInfo, _summary: &Summary) -> anyhow::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
