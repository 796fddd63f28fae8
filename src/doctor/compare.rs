//! What must match across the rack: adapter and GPU counts, firmware, drivers,
//! kernel, NCCL version, link layer, and the RoCE MTU (a mismatch there only
//! fails between nodes). The most common value is the reference and the nodes
//! that differ are named; with no majority, every node is.

use super::facts::{Hca, NodeFacts};
use super::{Finding, Severity};
use std::collections::{BTreeMap, BTreeSet};

/// One value seen on one component of one node.
struct Observation {
    node: String,
    component: String,
    /// What is compared.
    value: String,
    /// How it is shown (the value with context).
    shown: String,
}

fn observe(node: &str, component: impl Into<String>, value: impl Into<String>) -> Observation {
    let value = value.into();
    Observation {
        node: node.to_string(),
        component: component.into(),
        shown: value.clone(),
        value,
    }
}

/// What one comparison is called and what it says.
struct Rule {
    check: &'static str,
    what: &'static str,
    severity: Severity,
    fix: &'static str,
}

fn outliers(rule: &Rule, observations: &[Observation], out: &mut Vec<Finding>) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for o in observations {
        *counts.entry(&o.value).or_default() += 1;
    }
    if counts.len() < 2 {
        return;
    }
    let top = counts.values().copied().max().unwrap_or(0);
    let leaders: Vec<&str> = counts
        .iter()
        .filter(|(_, &c)| c == top)
        .map(|(v, _)| *v)
        .collect();
    let reference = (leaders.len() == 1).then(|| leaders[0]);
    let where_seen = |value: &str| {
        observations
            .iter()
            .filter(|o| o.value == value)
            .map(|o| format!("{} {}", o.node, o.component))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let expected = match reference {
        Some(r) => format!(
            "{} {r}, as on {top} of {} ({})",
            rule.what,
            observations.len(),
            where_seen(r)
        ),
        None => format!(
            "one {} across the rack; seen: {}",
            rule.what,
            counts
                .keys()
                .map(|v| format!("{v} on {}", where_seen(v)))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    };
    for o in observations
        .iter()
        .filter(|o| Some(o.value.as_str()) != reference)
    {
        out.push(Finding::new(
            rule.severity,
            &o.node,
            o.component.as_str(),
            rule.check,
            format!("{} {}", rule.what, o.shown),
            expected.as_str(),
            rule.fix,
        ));
    }
}

pub fn check(nodes: &[NodeFacts], out: &mut Vec<Finding>) {
    let per_node = |f: &dyn Fn(&NodeFacts) -> Option<String>| -> Vec<Observation> {
        nodes
            .iter()
            .filter_map(|n| f(n).map(|v| observe(&n.node, "node", v)))
            .collect()
    };
    outliers(
        &Rule {
            check: "hca-count",
            what: "RDMA device count",
            severity: Severity::Error,
            fix: "find the missing adapter (lspci, ibv_devices, dmesg): a dead or unbound NIC leaves its GPUs without a rail",
        },
        &per_node(&|n| Some(n.hcas.len().to_string())),
        out,
    );
    outliers(
        &Rule {
            check: "gpu-count",
            what: "NVIDIA GPU count",
            severity: Severity::Error,
            fix: "find the missing GPU (lspci, nvidia-smi, dmesg for Xid errors)",
        },
        &per_node(&|n| Some(n.gpus.gpus.len().to_string())),
        out,
    );
    // Adapters are compared with those of their own model only.
    let models: BTreeSet<&str> = nodes
        .iter()
        .flat_map(|n| n.hcas.iter().map(|h| h.model.as_str()))
        .collect();
    for model in models {
        let hcas = || {
            nodes.iter().flat_map(move |n| {
                n.hcas
                    .iter()
                    .filter(move |h| h.model == model)
                    .map(move |h| (n.node.as_str(), h))
            })
        };
        let per_hca = |f: &dyn Fn(&Hca) -> Option<String>| -> Vec<Observation> {
            hcas()
                .filter_map(|(node, h)| f(h).map(|v| observe(node, h.name.as_str(), v)))
                .collect()
        };
        outliers(
            &Rule {
                check: "firmware",
                what: "firmware",
                severity: Severity::Warning,
                fix: "flash every adapter of a model to the same firmware (mlxfwmanager)",
            },
            &per_hca(&|h| h.firmware.clone()),
            out,
        );
        outliers(
            &Rule {
                check: "hca-driver",
                what: "driver",
                severity: Severity::Warning,
                fix: "install the same NIC driver (MOFED/DOCA or in-box) on every node",
            },
            &per_hca(&|h| h.driver.clone()),
            out,
        );
        outliers(
            &Rule {
                check: "link-layer",
                what: "link layer",
                severity: Severity::Error,
                fix: "set every adapter of the fabric to the same link layer (mlxconfig LINK_TYPE_P1)",
            },
            &hcas()
                .flat_map(|(node, h)| {
                    h.ports
                        .iter()
                        .map(move |p| observe(node, h.port_name(p), p.link_layer.as_str()))
                })
                .collect::<Vec<_>>(),
            out,
        );
    }
    outliers(
        &Rule {
            check: "kernel",
            what: "kernel",
            severity: Severity::Warning,
            fix: "run the same kernel on every node",
        },
        &per_node(&|n| n.kernel.clone()),
        out,
    );
    outliers(
        &Rule {
            check: "gpu-driver",
            what: "NVIDIA driver",
            severity: Severity::Warning,
            fix: "install the same NVIDIA driver on every node",
        },
        &per_node(&|n| n.gpus.driver_version.clone()),
        out,
    );
    outliers(
        &Rule {
            check: "nccl-version",
            what: "NCCL",
            severity: Severity::Error,
            fix: "install the same NCCL on every node: ranks of one job must run the same NCCL version",
        },
        &per_node(&|n| n.nccl.version_in_use()),
        out,
    );
    // Each interface against the interfaces of that name on the other nodes: on
    // one L2 network, frames above a peer's (or the switch's) MTU are dropped.
    let ifnames: BTreeSet<&str> = nodes
        .iter()
        .flat_map(|n| n.netdev_mtus.keys().map(String::as_str))
        .collect();
    for ifname in ifnames {
        outliers(
            &Rule {
                check: "netdev-mtu",
                what: "MTU",
                severity: Severity::Error,
                fix: "set one MTU on this interface on every node and on the switch ports (ip link set DEV mtu N): frames above a peer's MTU are dropped, so UDP, RoCE and TCP without path-MTU discovery stall",
            },
            &nodes
                .iter()
                .filter_map(|n| {
                    let mtu = n.netdev_mtus.get(ifname)?;
                    Some(observe(&n.node, ifname, mtu.to_string()))
                })
                .collect::<Vec<_>>(),
            out,
        );
    }
    let mtus: Vec<Observation> = nodes
        .iter()
        .flat_map(|n| {
            n.hcas.iter().flat_map(move |h| {
                h.ports
                    .iter()
                    .filter(|p| p.is_active())
                    .filter_map(move |p| {
                        let mtu = p.active_mtu?;
                        Some(Observation {
                            node: n.node.clone(),
                            component: h.port_name(p),
                            value: mtu.to_string(),
                            shown: format!(
                                "{mtu} (netdev {} MTU {})",
                                p.netdev.as_deref().unwrap_or("?"),
                                p.netdev_mtu.get().map_or("?".into(), |m| m.to_string())
                            ),
                        })
                    })
            })
        })
        .collect();
    outliers(
        &Rule {
            check: "mtu-mismatch",
            what: "active MTU",
            severity: Severity::Error,
            fix: "set the same netdev MTU on every RoCE port and switch port (ip link set DEV mtu 9000): peers negotiate down or drop oversize packets, and QPs between these nodes fail or stall",
        },
        &mtus,
        out,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, kernel: &str) -> NodeFacts {
        NodeFacts {
            node: name.into(),
            kernel: Some(kernel.into()),
            ..NodeFacts::default()
        }
    }

    #[test]
    fn the_odd_node_out_is_named() {
        let nodes = [node("a", "6.8"), node("b", "6.8"), node("c", "6.5")];
        let mut out = Vec::new();
        check(&nodes, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(
            (out[0].node.as_str(), out[0].check.as_str()),
            ("c", "kernel")
        );
        assert_eq!(out[0].expected, "kernel 6.8, as on 2 of 3 (a node, b node)");
    }

    #[test]
    fn a_tie_names_every_node() {
        let nodes = [node("a", "6.8"), node("b", "6.5")];
        let mut out = Vec::new();
        check(&nodes, &mut out);
        let named: Vec<&str> = out.iter().map(|f| f.node.as_str()).collect();
        assert_eq!(named, vec!["a", "b"]);
        assert!(out[0].expected.contains("6.5 on b node; 6.8 on a node"));
    }

    #[test]
    fn an_interface_mtu_set_apart_is_named() {
        let with_mtu = |name: &str, mtu: u32| NodeFacts {
            netdev_mtus: [("eth0".to_string(), mtu)].into(),
            ..node(name, "6.8")
        };
        let nodes = [
            with_mtu("a", 1500),
            with_mtu("b", 9000),
            with_mtu("c", 1500),
        ];
        let mut out = Vec::new();
        check(&nodes, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        let f = &out[0];
        assert_eq!(
            (f.node.as_str(), f.component.as_str(), f.check.as_str()),
            ("b", "eth0", "netdev-mtu")
        );
        assert_eq!((f.seen.as_str(), f.severity), ("MTU 9000", Severity::Error));
        assert_eq!(f.expected, "MTU 1500, as on 2 of 3 (a eth0, c eth0)");
    }

    #[test]
    fn alike_nodes_have_no_findings() {
        let nodes = [node("a", "6.8"), node("b", "6.8")];
        let mut out = Vec::new();
        check(&nodes, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }
}
