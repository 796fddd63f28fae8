//! `doctor`: is every node configured alike and as RDMA needs it? Each rank reads
//! its node's facts from sysfs and procfs under a root directory (`/` on a live
//! node, a fixture tree in tests), rank 0 gathers them and checks each node and
//! the rack as a whole. A problem is a `Finding` row: severity, node, component,
//! what was seen, what was expected, and the fix. A value a check judges by
//! that cannot be read is an `unreadable` error ("could not read PATH: 'TEXT'"),
//! never silence and never a value made up for it.
//!
//! The facts are in `facts`; each area reads its own and checks them, one file
//! per area: `ports` (RDMA port state, rate, MTU), `roce` (GIDs), `memlock`,
//! `gpudirect` (peermem, DMA-BUF, PCIe links), `nccl_env`, `nccl_library` (the
//! libnccl the node would load), `counters` (error
//! counters since boot), `topology` (GPU-NIC paths, ACS, IOMMU), and `compare` (what
//! must match across nodes). `output` writes the table, CSV and JSON; `cli` is
//! the binary.

pub mod cli;
pub mod compare;
pub mod counters;
pub mod facts;
pub mod gpudirect;
pub mod memlock;
pub mod nccl_env;
pub mod nccl_library;
pub mod nvlink;
pub mod nvlink_facts;
pub mod output;
pub mod ports;
pub mod roce;
pub mod topology;
pub mod topology_facts;

pub use facts::NodeFacts;

use crate::sysfs::identity::machine_identity;
use crate::sysfs::rdma::INFINIBAND;
use crate::sysfs::{Root, Unreadable, PCI_DEVICES};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

impl Finding {
    /// A value doctor judges by that is absent or does not read as one: an
    /// error, since nothing can be said about what it describes.
    pub fn unreadable(
        node: &str,
        component: &str,
        seen: String,
        expected: &str,
        fix: &str,
    ) -> Finding {
        Finding::new(
            Severity::Error,
            node,
            component,
            "unreadable",
            seen,
            expected,
            fix,
        )
    }

    /// [`Finding::unreadable`] of a file, seen as `u` says; where this process
    /// may not read it, the fix is to let it (nothing is wrong with what the
    /// file describes that doctor knows of).
    pub fn unreadable_file(
        node: &str,
        component: &str,
        u: &Unreadable,
        expected: &str,
        fix: &str,
    ) -> Finding {
        let fix = if u.denied() { DENIED_FIX } else { fix };
        Finding::unreadable(node, component, u.to_string(), expected, fix)
    }
}

/// The fix of a file doctor may not read as the user it runs as.
pub const DENIED_FIX: &str = "doctor may not read it as this user: run doctor as root (sudo) or as \
    the user the jobs run as, or make it readable; until then nothing is known of what it describes";

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
    // A node named by hand is that node, whatever machine runs it.
    let identity = match selection.node_name {
        Some(_) => None,
        None => machine_identity(root),
    };
    let rdma_devices = root.list(INFINIBAND);
    let hcas = ports::collect(root, &rdma_devices, &selection.hcas);
    let env = nccl_env::read_environ(root);
    let netdevs = root.list(NET);
    NodeFacts {
        node,
        identity,
        root: root.dir().display().to_string(),
        kernel: root.read("/proc/sys/kernel/osrelease"),
        rdma_devices,
        hcas,
        netdev_mtus: netdev_mtus(root, &netdevs),
        netdevs,
        memlock: memlock::collect(root),
        gpus: gpudirect::collect(root),
        nccl: nccl_env::collect(root, env, nccl_library::collect(root)),
        port_rate_gbps: selection.port_rate_gbps,
        error_counters: counters::collect(root, &selection.hcas),
        topology: topology_facts::collect(root),
        unlisted: [INFINIBAND, NET, PCI_DEVICES]
            .into_iter()
            .filter_map(|dir| {
                root.unlistable(dir).map(|why| facts::Unlisted {
                    dir: dir.to_string(),
                    why,
                })
            })
            .collect(),
    }
}

const NET: &str = "/sys/class/net";

/// A directory doctor lists that could not be listed: nothing in it was checked,
/// so an error, never the "no RDMA device" or "no GPU" an empty one would be.
fn unlisted(node: &NodeFacts, out: &mut Vec<Finding>) {
    for u in &node.unlisted {
        let path = format!("{}{}", node.root.trim_end_matches('/'), u.dir);
        out.push(Finding::unreadable(
            &node.node,
            &u.dir,
            format!("could not list {path}: {}", u.why),
            "a directory doctor can list",
            "run doctor as root, or as a user who can read this directory: nothing in it was checked",
        ));
    }
}

/// The MTU of every interface that is up, loopback aside: a down interface
/// carries nothing, whatever its MTU.
fn netdev_mtus(root: &Root, netdevs: &[String]) -> BTreeMap<String, u32> {
    netdevs
        .iter()
        .filter(|d| d.as_str() != "lo")
        .filter(|d| {
            root.read(&format!("/sys/class/net/{d}/operstate"))
                .as_deref()
                == Some("up")
        })
        .filter_map(|d| {
            Some((
                d.clone(),
                root.read_parsed(&format!("/sys/class/net/{d}/mtu"))
                    .value()?,
            ))
        })
        .collect()
}

/// Every finding about these nodes: each node's own, then the cross-node ones.
/// Sorted by severity, then node, so errors come first.
pub fn check(nodes: &[NodeFacts]) -> Vec<Finding> {
    check_with(nodes, Vec::new())
}

/// [`check`], beside findings already made (`one_per_node`'s).
pub fn check_with(nodes: &[NodeFacts], mut findings: Vec<Finding>) -> Vec<Finding> {
    for node in nodes {
        unlisted(node, &mut findings);
        ports::check(node, nodes, &mut findings);
        roce::check(node, &mut findings);
        memlock::check(node, &mut findings);
        gpudirect::check(node, &mut findings);
        nccl_env::check(node, &mut findings);
        nccl_library::check(node, &mut findings);
        counters::check(node, &mut findings);
        topology::check(node, &mut findings);
    }
    compare::check(nodes, &mut findings);
    findings.sort_by(|a, b| (a.severity, &a.node).cmp(&(b.severity, &b.node)));
    findings
}

pub fn count(findings: &[Finding], severity: Severity) -> usize {
    findings.iter().filter(|f| f.severity == severity).count()
}

/// What tells one node from another: its identity, or its name where it has none.
fn node_key(facts: &NodeFacts) -> &str {
    facts.identity.as_deref().unwrap_or(&facts.node)
}

/// Keeps the first facts of each node (by rank, `all[r]` is rank r's), counted
/// by identity, not by name: ranks sharing a node report it once. A host name
/// claimed by two identities (a node renamed, a copied image) is an error
/// naming the ranks and identities, and each claimant is named "NAME (rank R)"
/// in the other findings, so that one's faults are not blamed on the other.
pub fn one_per_node(all: Vec<NodeFacts>, out: &mut Vec<Finding>) -> Vec<NodeFacts> {
    let mut nodes: Vec<(usize, NodeFacts)> = Vec::new();
    for (rank, facts) in all.into_iter().enumerate() {
        if !nodes.iter().any(|(_, n)| node_key(n) == node_key(&facts)) {
            nodes.push((rank, facts));
        }
    }
    let names: Vec<String> = nodes.iter().map(|(_, n)| n.node.clone()).collect();
    for (i, name) in names.iter().enumerate() {
        let claimants: Vec<usize> = (0..nodes.len()).filter(|&j| names[j] == *name).collect();
        if claimants.len() < 2 {
            continue;
        }
        if claimants[0] == i {
            out.push(duplicate_name(name, &claimants, &nodes));
        }
        let rank = nodes[i].0;
        nodes[i].1.node = claimant(name, rank);
    }
    nodes.into_iter().map(|(_, n)| n).collect()
}

/// "node3 (rank 2)": one of several nodes answering as `name`, by its first rank.
fn claimant(name: &str, rank: usize) -> String {
    format!("{name} (rank {rank})")
}

/// The host name a node answered as: "node3" of "node3 (rank 2)" (see
/// [`one_per_node`]), and whether another node answered as it too.
pub fn claimed_name(node: &str) -> (&str, bool) {
    node.strip_suffix(')')
        .and_then(|s| s.rsplit_once(" (rank "))
        .filter(|(_, r)| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
        .map_or((node, false), |(name, _)| (name, true))
}

/// The check name of that error.
pub const DUPLICATE_HOST: &str = "duplicate-host";

/// The error of one host name answered from several nodes.
fn duplicate_name(name: &str, claimants: &[usize], nodes: &[(usize, NodeFacts)]) -> Finding {
    let seen: Vec<String> = claimants
        .iter()
        .map(|&j| {
            let (rank, facts) = &nodes[j];
            let id = facts.identity.as_deref().unwrap_or("unknown");
            format!("rank {rank} from {id}")
        })
        .collect();
    Finding::new(
        Severity::Error,
        name,
        "host name",
        DUPLICATE_HOST,
        format!(
            "{} nodes answer as {name}: {}",
            claimants.len(),
            seen.join("; ")
        ),
        "one host name per node (machine-id, boot id, network namespace)",
        "give every node its own host name (hostnamectl set-hostname) and check the launcher's \
         host list: until then results and findings of these nodes cannot be told apart",
    )
}

/// The one fixture builder of doctor's unit tests: a node's facts as doctor
/// reads them from a tree of `sysfs::fixture`, and the findings about them.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::sysfs::fixture::Tree;

    /// The facts of the fixture tree `name` after `edit` (every device selected).
    pub fn facts(name: &str, edit: impl FnOnce(&Tree)) -> NodeFacts {
        let tree = Tree::named(name);
        edit(&tree);
        collect(&tree.root(), &Selection::default())
    }

    /// doctor's findings about these nodes whose check name starts with `prefix`.
    pub fn findings(nodes: &[NodeFacts], prefix: &str) -> Vec<Finding> {
        let mut all = check(nodes);
        all.retain(|f| f.check.starts_with(prefix));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{facts, findings};
    use super::*;
    use crate::sysfs::fixture::Tree;
    use crate::sysfs::Reading;

    #[test]
    fn reads_a_healthy_node() {
        let node = facts("doctor/healthy", |_| {});
        assert_eq!(node.node, "gpu-a");
        assert_eq!(node.kernel.as_deref(), Some("6.8.0-45-generic"));
        assert_eq!(node.rdma_devices, ["mlx5_0", "mlx5_1"]);
        assert_eq!(node.netdevs, ["eth0", "eth2", "eth3", "lo"]);
        let hca = &node.hcas[0];
        assert_eq!(
            (
                hca.model.as_str(),
                hca.firmware.as_deref(),
                hca.driver.as_deref()
            ),
            ("MT4129", Some("28.41.1000"), Some("mlx5_core 24.04-0.6.6"))
        );
        assert_eq!(
            hca.pci.as_ref().map(|p| p.bdf.as_str()),
            Some("0000:17:00.0")
        );
        let port = &hca.ports[0];
        assert_eq!(hca.port_name(port), "mlx5_0:1");
        assert_eq!(
            (port.state.as_str(), port.phys_state.as_str()),
            ("ACTIVE", "LinkUp")
        );
        assert_eq!(
            (port.rate.as_str(), port.rate_gbps.clone(), port.width),
            ("400 Gb/sec (4X NDR)", Reading::Value(400.0), Some(4))
        );
        assert_eq!(
            (
                port.netdev.as_deref(),
                port.netdev_mtu.clone(),
                port.active_mtu
            ),
            (Some("eth2"), Reading::Value(9000), Some(4096))
        );
        let gids: Vec<u32> = port.gids.iter().map(|g| g.index).collect();
        assert_eq!(gids, [0, 1, 2, 3], "the zero entry 4 is no GID");
        assert_eq!(port.gids[3].kind, "RoCE v2");
        assert_eq!(node.gpus.gpus.len(), 1);
        assert!(node.gpus.gpus[0].link.get().is_some());
        assert_eq!(node.gpus.driver_version.as_deref(), Some("550.54.15"));
        assert!(node.gpus.peermem && !node.gpus.open_module);
        assert!(node.memlock.unknown.is_none() && node.memlock.soft_bytes.is_none());
        assert_eq!(node.nccl.versions, ["2.21.5"]);
        let vars: Vec<&str> = node.nccl.env.keys().map(String::as_str).collect();
        assert_eq!(vars, ["NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"]);
        assert!(check(&[node]).is_empty());
    }

    #[test]
    fn selection_names_and_filters() {
        let tree = Tree::named("doctor/healthy");
        let selection = Selection {
            node_name: Some("n1".into()),
            hcas: vec!["mlx5_1:1".parse().unwrap()],
            port_rate_gbps: Some(800.0),
        };
        let node = collect(&tree.root(), &selection);
        assert_eq!(node.node, "n1");
        assert_eq!(node.rdma_devices.len(), 2);
        let checked: Vec<&str> = node.hcas.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(checked, ["mlx5_1"]);
        let f = findings(&[node], "link-downgrade");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].expected, "800 Gb/sec (--port-rate)");
    }

    #[test]
    fn an_empty_root_is_a_node_with_nothing() {
        let node = facts("sysfs-no-fabric", |t| t.remove("/sys/devices"));
        assert_eq!(node.node, "unknown");
        assert!(node.hcas.is_empty() && node.gpus.gpus.is_empty());
        assert!(node.memlock.unknown.is_some());
        let checks: Vec<String> = check(&[node]).into_iter().map(|f| f.check).collect();
        assert_eq!(checks, ["no-rdma-device", "memlock", "no-gpu"]);
    }

    #[test]
    fn ranks_of_one_node_count_once() {
        let a = facts("doctor/healthy", |_| {});
        let b = facts("doctor/skew", |_| {});
        let mut named = Vec::new();
        let nodes = one_per_node(vec![a.clone(), b.clone(), a], &mut named);
        assert!(named.is_empty());
        let names: Vec<&str> = nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(names, ["gpu-a", "gpu-b"]);
        let all = check(&nodes);
        assert_eq!(count(&all, Severity::Error), 4, "{all:#?}");
        // Errors first, then by node.
        assert!(all
            .windows(2)
            .all(|w| (w[0].severity, &w[0].node) <= (w[1].severity, &w[1].node)));
    }

    /// `name`'s healthy facts as read on the machine `identity`.
    fn node(name: &str, identity: Option<&str>) -> NodeFacts {
        let mut n = facts("doctor/healthy", |_| {});
        n.node = name.into();
        n.identity = identity.map(String::from);
        n
    }

    #[test]
    fn nodes_count_by_identity_and_a_shared_name_is_an_error() {
        let all = vec![
            node("node1", Some("m-b-net:[1]")),
            node("node1", Some("m-b-net:[1]")),
            node("node3", Some("m-b-net:[3]")),
            node("node3", Some("m-b-net:[4]")),
        ];
        let mut named = Vec::new();
        let nodes = one_per_node(all, &mut named);
        let names: Vec<&str> = nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(names, ["node1", "node3 (rank 2)", "node3 (rank 3)"]);
        assert_eq!(claimed_name(names[2]), ("node3", true));
        assert_eq!(claimed_name("node1"), ("node1", false));
        assert_eq!(claimed_name("a (rank x)"), ("a (rank x)", false));
        assert_eq!(named.len(), 1, "{named:?}");
        let f = &named[0];
        assert_eq!((f.severity, f.node.as_str()), (Severity::Error, "node3"));
        assert_eq!(f.check, "duplicate-host");
        assert_eq!(
            f.seen,
            "2 nodes answer as node3: rank 2 from m-b-net:[3]; rank 3 from m-b-net:[4]"
        );
        let all = check_with(&nodes, named);
        assert_eq!(all[0].check, "duplicate-host", "errors first: {all:?}");
    }

    #[test]
    fn without_identities_names_tell_nodes_apart() {
        let mut named = Vec::new();
        let nodes = one_per_node(
            vec![node("a", None), node("a", None), node("b", None)],
            &mut named,
        );
        assert_eq!(nodes.len(), 2);
        assert!(named.is_empty());
        let live = collect(&crate::sysfs::Root::new("/"), &Selection::default());
        assert!(live.identity.is_some(), "{live:?}");
        let by_hand = Selection {
            node_name: Some("n1".into()),
            ..Selection::default()
        };
        assert_eq!(
            collect(&crate::sysfs::Root::new("/"), &by_hand).identity,
            None
        );
    }
}
