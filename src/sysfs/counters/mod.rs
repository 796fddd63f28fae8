//! Snapshots of a node's fabric counters, read between a benchmark's sizes,
//! and what moved between two of them:
//! - every RDMA port's `counters/*` (the IB PMA's) and `hw_counters/*` (mlx5's,
//!   rxe's), every netdev's `statistics/*`, and the pause and PFC counters of
//!   each netdev's ethtool statistics (`ethtool`);
//! - TCP's loss counters of the node's network namespace (`tcp`);
//! - `classes`: the one table of what each counter means;
//! - [`delta`]: what a counter moved by, when it may have wrapped, been reset
//!   or saturated.
//!
//! Every read goes through [`Root`]; a fixture tree steps its counters between
//! snapshots through [`Root::at_pass`], one pass per snapshot.

pub mod classes;
pub mod ethtool;
pub mod tcp;

use super::rdma::INFINIBAND;
use super::Root;
pub use classes::Class;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a counter is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// `/sys/class/infiniband/DEV/ports/N/counters`.
    Port,
    /// `/sys/class/infiniband/DEV/ports/N/hw_counters`.
    Hw,
    /// `/sys/class/net/DEV/statistics`.
    Netdev,
    /// The netdev's ethtool statistics (pause and PFC counters only).
    Ethtool,
    /// `/proc/net/snmp` and `/proc/net/netstat`: TCP's loss counters.
    Tcp,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Port => "counters",
            Family::Hw => "hw_counters",
            Family::Netdev => "statistics",
            Family::Ethtool => "ethtool",
            Family::Tcp => "tcp",
        }
    }

    /// Whether the counter is an RDMA port's.
    pub fn rdma(self) -> bool {
        matches!(self, Family::Port | Family::Hw)
    }
}

/// One counter of one device.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Key {
    /// "mlx5_0" (an RDMA device) or "eth2" (a netdev).
    pub device: String,
    /// The RDMA port; None for a netdev.
    pub port: Option<u32>,
    pub family: Family,
    pub name: String,
}

impl Key {
    /// "mlx5_0:1" or "eth2": the port or netdev, as the footer names it.
    pub fn place(&self) -> String {
        match self.port {
            Some(p) => format!("{}:{p}", self.device),
            None => self.device.clone(),
        }
    }

    pub fn class(&self) -> Class {
        match self.family {
            Family::Tcp => tcp::class(&self.name),
            family => classes::class(family, &self.name),
        }
    }
}

/// Every counter of a node at one moment; a file that reads as no number is left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub values: BTreeMap<Key, u64>,
}

/// Reads snapshots, counting passes for a fixture tree's steps.
#[derive(Clone, Debug)]
pub struct Reader {
    root: Root,
    passes: usize,
}

impl Reader {
    pub fn new(root: Root) -> Reader {
        Reader { root, passes: 0 }
    }

    /// Every counter the node has now.
    pub fn snapshot(&mut self) -> Snapshot {
        let root = self.root.at_pass(self.passes);
        self.passes += 1;
        read(&root)
    }
}

/// Every counter under `root`.
pub fn read(root: &Root) -> Snapshot {
    let mut values = BTreeMap::new();
    for device in root.list(INFINIBAND) {
        for port in root.list_parsed::<u32>(&format!("{INFINIBAND}/{device}/ports")) {
            for family in [Family::Port, Family::Hw] {
                let dir = format!("{INFINIBAND}/{device}/ports/{port}/{}", family.name());
                files(root, &dir, &device, Some(port), family, &mut values);
            }
        }
    }
    for netdev in root.list("/sys/class/net") {
        let dir = format!("/sys/class/net/{netdev}/statistics");
        files(root, &dir, &netdev, None, Family::Netdev, &mut values);
        let stats = root.ethtool_stats(&netdev).unwrap_or_default();
        for (name, value) in stats.into_iter().filter(|(n, _)| classes::keeps_ethtool(n)) {
            let key = Key {
                device: netdev.clone(),
                port: None,
                family: Family::Ethtool,
                name,
            };
            values.insert(key, value);
        }
    }
    for (name, value) in tcp::read(root) {
        let key = Key {
            device: tcp::DEVICE.to_string(),
            port: None,
            family: Family::Tcp,
            name,
        };
        values.insert(key, value);
    }
    Snapshot { values }
}

fn files(
    root: &Root,
    dir: &str,
    device: &str,
    port: Option<u32>,
    family: Family,
    out: &mut BTreeMap<Key, u64>,
) {
    for name in root.list(dir) {
        if let Some(value) = root.read_parsed::<u64>(&format!("{dir}/{name}")).value() {
            let key = Key {
                device: device.to_string(),
                port,
                family,
                name,
            };
            out.insert(key, value);
        }
    }
}

/// What a counter moved by between two snapshots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delta {
    /// Moved by this much, in the counter's units times [`classes::bytes_per_unit`].
    Counted(u64),
    /// Moved by an amount no snapshot can tell.
    Unknown(Unknown),
}

/// Why a delta is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unknown {
    /// Went down from well below a wrap: the counter was reset (perfquery -R, a driver reload).
    Reset,
    /// Stuck at its largest 32-bit value: the IB PMA's legacy counters
    /// saturate instead of wrapping (mlx5 without extended counters).
    Saturated,
    /// There before and not after, or the other way round.
    Vanished,
    Appeared,
}

impl Unknown {
    pub fn name(self) -> &'static str {
        match self {
            Unknown::Reset => "reset",
            Unknown::Saturated => "saturated",
            Unknown::Vanished => "vanished",
            Unknown::Appeared => "appeared",
        }
    }
}

/// What went from `before` to `after`: a 32- or 64-bit counter that went
/// down from its top half wrapped; from lower, it was reset. One at the top
/// of 32 bits may have saturated there (the IB PMA's legacy counters do).
pub fn delta(before: u64, after: u64) -> Delta {
    const TOP32: u64 = u32::MAX as u64;
    match after.checked_sub(before) {
        _ if after == TOP32 => Delta::Unknown(Unknown::Saturated),
        Some(d) => Delta::Counted(d),
        None if before <= TOP32 && before > TOP32 / 2 => Delta::Counted(TOP32 - before + 1 + after),
        None if before > u64::MAX / 2 => Delta::Counted(after.wrapping_sub(before)),
        None => Delta::Unknown(Unknown::Reset),
    }
}

/// One counter's movement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub key: Key,
    pub delta: Delta,
}

impl Change {
    /// The counted amount; None where unknown.
    pub fn counted(&self) -> Option<u64> {
        match self.delta {
            Delta::Counted(d) => Some(d),
            Delta::Unknown(_) => None,
        }
    }
}

/// What moved from `before` to `after`: every counter that moved or could not
/// be told, and every RDMA port's data counters even where they did not (a
/// port that carried nothing is a finding too).
pub fn diff(before: &Snapshot, after: &Snapshot) -> Vec<Change> {
    let keys: std::collections::BTreeSet<&Key> =
        before.values.keys().chain(after.values.keys()).collect();
    keys.into_iter()
        .filter_map(|key| {
            let d = match (before.values.get(key), after.values.get(key)) {
                (Some(&b), Some(&a)) => match delta(b, a) {
                    Delta::Counted(d) => {
                        Delta::Counted(d * classes::bytes_per_unit(key.family, &key.name))
                    }
                    unknown => unknown,
                },
                (Some(_), None) => Delta::Unknown(Unknown::Vanished),
                (None, _) => Delta::Unknown(Unknown::Appeared),
            };
            let data = matches!(key.class(), Class::DataBytes | Class::DataPackets);
            let keep = d != Delta::Counted(0) || (key.family.rdma() && data);
            keep.then(|| Change {
                key: key.clone(),
                delta: d,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
