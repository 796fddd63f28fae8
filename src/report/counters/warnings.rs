//! The field guide's faults that a run's counters show: the bytes did not
//! cross the RDMA port meant (a socket fallback moves none on any port, a
//! wrong HCA moves them on another), and one rail carried far less than its peers.

use super::FabricPlan;
use crate::nccl_names::{split_port, NameList};
use crate::sysfs::counters::{Class, Key};
use std::collections::BTreeMap;

/// A rail below this fraction of an even share is "far less than its peers".
const SLOW_RAIL_OF_EVEN_SHARE: f64 = 0.5;

/// The RDMA ports a run was told to use, and who told it.
#[derive(Clone, Debug, PartialEq)]
pub struct Meant {
    /// "-d", "NCCL_IB_HCA", "UCX_NET_DEVICES".
    pub by: String,
    /// Devices, with a port where one was named.
    pub ports: Vec<(String, Option<u32>)>,
    /// NCCL_IB_HCA without '=': a name matches every device it begins
    /// (mlx5 is mlx5_0, mlx5_1, ...).
    pub prefix: bool,
}

impl Meant {
    /// NCCL_IB_HCA, else UCX_NET_DEVICES; None where neither names devices
    /// (an exclusion list `^mlx5_1` or UCX's `all` name none).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Option<Meant> {
        if let Some(v) = var("NCCL_IB_HCA").filter(|v| !v.trim().is_empty()) {
            let list = NameList::parse(v.trim());
            if list.exclude {
                return None;
            }
            return Meant::list("NCCL_IB_HCA", &list.entries, !list.exact);
        }
        let ucx = var("UCX_NET_DEVICES").filter(|v| v.trim() != "all")?;
        // UCX has no prefixes: every entry is a device, or device:port.
        let entries: Vec<&str> = ucx.split(',').map(str::trim).collect();
        Meant::list("UCX_NET_DEVICES", &entries, false)
    }

    /// `-d DEV` (and `-i PORT`) of a verbs run.
    pub fn device(dev: &str, port: u32) -> Meant {
        Meant {
            by: "-d".into(),
            ports: vec![(dev.to_string(), Some(port))],
            prefix: false,
        }
    }

    fn list(by: &str, entries: &[&str], prefix: bool) -> Option<Meant> {
        let ports: Vec<(String, Option<u32>)> = entries
            .iter()
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (device, port) = split_port(e);
                (device.to_string(), port)
            })
            .collect();
        (!ports.is_empty()).then(|| Meant {
            by: by.into(),
            ports,
            prefix,
        })
    }

    /// Whether port `port` of `device` is one of those named.
    pub fn names(&self, device: &str, port: u32) -> bool {
        self.ports.iter().any(|(d, p)| {
            let dev = match self.prefix {
                true => device.starts_with(d.as_str()),
                false => device == d,
            };
            dev && p.is_none_or(|p| p == port)
        })
    }

    /// "NCCL_IB_HCA names mlx5_0,mlx5_1".
    pub fn text(&self) -> String {
        let names: Vec<String> = self
            .ports
            .iter()
            .map(|(d, p)| p.map_or(d.clone(), |p| format!("{d}:{p}")))
            .collect();
        format!("{} names {}", self.by, names.join(","))
    }
}

/// What a node's data counters are counted in: bytes where any port counts
/// them, else packets (rxe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Packets,
}

/// The data each RDMA port of one node moved over the run.
#[derive(Debug)]
pub struct NodeData {
    pub unit: Unit,
    /// "mlx5_0:1" -> bytes (or packets), sent + received; every port with data counters.
    pub ports: BTreeMap<String, u64>,
    /// The same ports by device and port number.
    places: BTreeMap<String, (String, u32)>,
}

impl NodeData {
    /// From each counter's counted total.
    pub fn of<'a>(totals: impl Iterator<Item = (&'a Key, u64)> + Clone) -> NodeData {
        let rdma_of = |class: Class| {
            totals
                .clone()
                .filter(move |(k, _)| k.family.rdma() && k.class() == class)
        };
        let unit = match rdma_of(Class::DataBytes).next() {
            Some(_) => Unit::Bytes,
            None => Unit::Packets,
        };
        let class = match unit {
            Unit::Bytes => Class::DataBytes,
            Unit::Packets => Class::DataPackets,
        };
        let mut ports = BTreeMap::new();
        let mut places = BTreeMap::new();
        for (key, n) in rdma_of(class) {
            *ports.entry(key.place()).or_insert(0) += n;
            places.insert(key.place(), (key.device.clone(), key.port.unwrap_or(1)));
        }
        NodeData {
            unit,
            ports,
            places,
        }
    }

    fn moved(&self) -> u64 {
        self.ports.values().sum()
    }
}

/// The warnings of a run, one line each.
pub fn warnings(plan: &FabricPlan, nodes: &BTreeMap<&str, NodeData>) -> Vec<String> {
    let mut out = Vec::new();
    let with_ports = nodes.values().any(|n| !n.ports.is_empty());
    let moved: u64 = nodes.values().map(NodeData::moved).sum();
    if plan.expects_rdma && with_ports && moved == 0 {
        out.push(
            "no bytes crossed any RDMA port on any node while the benchmark ran: the transport \
             fell back to sockets (NCCL prints NET/Socket with NCCL_DEBUG=INFO; check NCCL_IB_HCA, \
             NCCL_IB_DISABLE, NCCL_NET and that the RDMA devices are up)"
                .to_string(),
        );
        return out;
    }
    for (host, node) in nodes {
        if let Some(meant) = &plan.meant {
            out.extend(wrong_hca(host, node, meant));
        }
        out.extend(slow_rail(host, node, plan.meant.as_ref()));
    }
    out
}

/// Bytes on ports other than those named, and none on those named.
fn wrong_hca(host: &str, node: &NodeData, meant: &Meant) -> Option<String> {
    let named = |place: &str| {
        let (d, p) = &node.places[place];
        meant.names(d, *p)
    };
    let on_named: u64 = node
        .ports
        .iter()
        .filter(|(p, _)| named(p))
        .map(|(_, n)| n)
        .sum();
    let elsewhere: Vec<&String> = node
        .ports
        .iter()
        .filter(|(p, &n)| n > 0 && !named(p))
        .map(|(p, _)| p)
        .collect();
    (on_named == 0 && !elsewhere.is_empty()).then(|| {
        format!(
            "{host}: {} but the bytes crossed {} and none crossed a port it names: the wrong HCA \
             carried the benchmark (check the name and port; doctor --hca lists the node's ports)",
            meant.text(),
            elsewhere
                .iter()
                .map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// One rail far below an even share: among the ports named (or, with none
/// named, those that moved data) on a node with two or more.
fn slow_rail(host: &str, node: &NodeData, meant: Option<&Meant>) -> Vec<String> {
    let rails: Vec<(&String, u64)> = node
        .ports
        .iter()
        .filter(|(p, &n)| match meant {
            Some(m) => {
                let (d, port) = &node.places[p.as_str()];
                m.names(d, *port)
            }
            None => n > 0,
        })
        .map(|(p, &n)| (p, n))
        .collect();
    let total: u64 = rails.iter().map(|(_, n)| n).sum();
    if rails.len() < 2 || total == 0 {
        return Vec::new();
    }
    let even = 1.0 / rails.len() as f64;
    rails
        .iter()
        .filter(|(_, n)| (*n as f64 / total as f64) < SLOW_RAIL_OF_EVEN_SHARE * even)
        .map(|(p, n)| {
            format!(
                "{host}: {p} carried {:.1}% of the node's RDMA data, an even share is {:.1}%: one \
                 rail far below its peers paces every collective (check its rate, errors and \
                 cabling: doctor, ibdiagnet)",
                100.0 * *n as f64 / total as f64,
                100.0 * even
            )
        })
        .collect()
}
