//! What a size's (or an all-pairs round's) counter deltas add up to: every
//! node's changes and the six counter columns of a results CSV. Apart from the
//! exporters in `counters.rs`, so that a results row can hold them without
//! depending on the CSV writer.

use crate::sysfs::counters::{Change, Class, Key};
use serde::{Deserialize, Serialize};

/// One node's deltas over one size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeChanges {
    pub host: String,
    pub changes: Vec<Change>,
}

/// Every node's deltas over one size (on rank 0).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SizeCounters {
    pub nodes: Vec<NodeChanges>,
}

impl SizeCounters {
    fn counted<'a>(&'a self, keep: impl Fn(&Key) -> bool + 'a) -> impl Iterator<Item = u64> + 'a {
        self.nodes
            .iter()
            .flat_map(|n| &n.changes)
            .filter(move |c| keep(&c.key))
            .filter_map(Change::counted)
    }

    /// Bytes sent and received on every node's RDMA ports; None where no
    /// port counts bytes (rxe counts packets only).
    pub fn rdma_bytes(&self) -> Option<u64> {
        let on_rdma = |k: &Key| k.family.rdma() && k.class() == Class::DataBytes;
        let any = self.counted(on_rdma).next().is_some();
        any.then(|| self.counted(on_rdma).sum())
    }

    /// Packets sent and received on every node's RDMA ports; None where no port counts them.
    pub fn rdma_packets(&self) -> Option<u64> {
        let on_rdma = |k: &Key| k.family.rdma() && k.class() == Class::DataPackets;
        let any = self.counted(on_rdma).next().is_some();
        any.then(|| self.counted(on_rdma).sum())
    }

    /// The counted deltas of `class`, over every node and device.
    pub fn sum(&self, class: Class) -> u64 {
        self.counted(|k| k.class() == class).sum()
    }
}

/// The six counter columns of a results CSV: what a size's (or an all-pairs
/// round's) deltas add up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    RdmaBytes,
    RdmaPackets,
    Errors,
    Retransmits,
    Congestion,
    Pauses,
}

impl Column {
    /// In the order the CSVs list them.
    pub const ALL: [Column; 6] = [
        Column::RdmaBytes,
        Column::RdmaPackets,
        Column::Errors,
        Column::Retransmits,
        Column::Congestion,
        Column::Pauses,
    ];

    /// The column's name in the CSVs.
    pub fn name(self) -> &'static str {
        match self {
            Column::RdmaBytes => "rdma_bytes",
            Column::RdmaPackets => "rdma_packets",
            Column::Errors => "counter_errors",
            Column::Retransmits => "counter_retransmits",
            Column::Congestion => "counter_congestion",
            Column::Pauses => "counter_pauses",
        }
    }

    pub fn from_name(name: &str) -> Option<Column> {
        Column::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The trouble class a column sums; None for the data columns.
    pub fn class(self) -> Option<Class> {
        match self {
            Column::RdmaBytes | Column::RdmaPackets => None,
            Column::Errors => Some(Class::Errors),
            Column::Retransmits => Some(Class::Retransmits),
            Column::Congestion => Some(Class::Congestion),
            Column::Pauses => Some(Class::Pauses),
        }
    }

    /// The column's value over `counters`.
    pub fn of(self, counters: &SizeCounters) -> Option<u64> {
        match (self, self.class()) {
            (Column::RdmaBytes, _) => counters.rdma_bytes(),
            (Column::RdmaPackets, _) => counters.rdma_packets(),
            (_, Some(class)) => Some(counters.sum(class)),
            (_, None) => None,
        }
    }
}
