//! `doctor`: is every node configured alike and as RDMA needs it? Each rank reads
//! its node's facts from sysfs and procfs under a root directory (`/` on a live
//! node, a fixture tree in tests), rank 0 gathers them and checks each node and
//! the rack as a whole. A problem is a `Finding` row: severity, node, component,
//! what was seen, what was expected, and the fix.
//!
//! One file per area: `ports` (RDMA port state, rate, MTU), `roce` (GIDs),
//! `memlock`, `gpudirect` (peermem, DMA-BUF, PCIe links), `nccl_env`, and
//! `compare` (what must match across nodes).

pub mod cli;
pub mod compare;
pub mod gpudirect;
pub mod memlock;
pub mod nccl_env;
pub mod output;
pub mod ports;
pub mod roce;

use crate::sysfs::Root;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// One problem (or fact worth saying) about one component of one node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub severity: Severity,
    pub node: String,
    /// What it is about: "mlx5_0:1", "memlock", "NCCL_IB_HCA", "gpu 0000:18:00.0".
    pub component: String,
    /// Stable name of the check, for filtering: "port-state", "mtu-mismatch".
    pub check: String,
    pub seen: String,
    pub expected: String,
    pub fix: String,
}

impl Finding {
    pub fn new(
        severity: Severity,
        node: &str,
        component: impl Into<String>,
        check: &str,
        seen: impl Into<String>,
        expected: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding {
            severity,
            node: node.to_string(),
            component: component.into(),
            check: check.to_string(),
            seen: seen.into(),
            expected: expected.into(),
            fix: fix.into(),
        }
    }
}

/// Everything doctor knows about one node: gathered on its rank, checked on rank 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeFacts {
    pub node: String,
    /// The root directory the facts were read from.
    pub root: String,
    /// Kernel release (`uname -r`).
    pub kernel: Option<String>,
    /// Every RDMA device on the node, selected or not (NCCL_IB_HCA is checked against these).
    pub rdma_devices: Vec<String>,
    /// The RDMA devices checked (all, or those named by --hca).
    pub hcas: Vec<ports::Hca>,
    /// Network interfaces (NCCL_SOCKET_IFNAME is checked against these).
    pub netdevs: Vec<String>,
    pub memlock: memlock::Memlock,
    pub gpus: gpudirect::GpuFacts,
    pub nccl: nccl_env::NcclFacts,
    /// Expected rate of every port in Gb/s (--port-rate), when given.
    pub port_rate_gbps: Option<f64>,
}

/// What selects and labels the node's facts (doctor's flags).
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// --node-name: overrides the root's host name (to let one host act as two nodes).
    pub node_name: Option<String>,
    /// --hca: devices (optionally device:port) to check; empty = all.
    pub hcas: Vec<ports::HcaFilter>,
    /// --port-rate: the rate every selected port should run at, Gb/s.
    pub port_rate_gbps: Option<f64>,
}

/// Reads one node's facts under `root`.
pub fn collect(root: &Root, selection: &Selection) -> NodeFacts {
    let node = selection
        .node_name
        .clone()
        .or_else(|| root.read("/proc/sys/kernel/hostname"))
        .unwrap_or_else(|| "unknown".to_string());
    let rdma_devices = root.list("/sys/class/infiniband");
    let hcas = ports::collect(root, &rdma_devices, &selection.hcas);
    let env = nccl_env::read_environ(root);
    NodeFacts {
        node,
        root: root.dir().display().to_string(),
        kernel: root.read("/proc/sys/kernel/osrelease"),
        rdma_devices,
        hcas,
        netdevs: root.list("/sys/class/net"),
        memlock: memlock::collect(root),
        gpus: gpudirect::collect(root),
        nccl: nccl_env::collect(root, env),
        port_rate_gbps: selection.port_rate_gbps,
    }
}

/// Every finding about these nodes: each node's own, then the cross-node ones.
/// Sorted by severity, then node, so errors come first.
pub fn check(nodes: &[NodeFacts]) -> Vec<Finding> {
    let mut findings = Vec::new();
    for node in nodes {
        ports::check(node, nodes, &mut findings);
        roce::check(node, &mut findings);
        memlock::check(node, &mut findings);
        gpudirect::check(node, &mut findings);
        nccl_env::check(node, &mut findings);
    }
    compare::check(nodes, &mut findings);
    findings.sort_by(|a, b| (a.severity, &a.node).cmp(&(b.severity, &b.node)));
    findings
}

pub fn count(findings: &[Finding], severity: Severity) -> usize {
    findings.iter().filter(|f| f.severity == severity).count()
}

/// Keeps the first facts of each node name: ranks sharing a node report it once.
pub fn one_per_node(all: Vec<NodeFacts>) -> Vec<NodeFacts> {
    let mut nodes: Vec<NodeFacts> = Vec::new();
    for facts in all {
        if !nodes.iter().any(|n| n.node == facts.node) {
            nodes.push(facts);
        }
    }
    nodes
}
