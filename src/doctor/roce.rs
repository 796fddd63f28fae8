//! RoCE GIDs: an Ethernet port needs a RoCE v2 GID (NCCL and perftest pick one),
//! and a GID index forced with NCCL_IB_GID_INDEX must point at one.

use super::facts::{Gid, NodeFacts, Port};
use super::{Finding, Severity};
use crate::sysfs::Root;

const ZERO_GID: &str = "0000:0000:0000:0000:0000:0000:0000:0000";

/// The non-empty entries of a port's GID table (`dir` is the port's sysfs folder).
pub fn collect_gids(root: &Root, dir: &str) -> Vec<Gid> {
    root.list_parsed::<u32>(&format!("{dir}/gids"))
        .into_iter()
        .filter_map(|index| {
            let gid = root.read(&format!("{dir}/gids/{index}"))?;
            // Unused entries read as zeros, and their type as EINVAL.
            let kind = root.read(&format!("{dir}/gid_attrs/types/{index}"))?;
            (gid != ZERO_GID).then(|| Gid {
                index,
                gid,
                kind,
                netdev: root
                    .read(&format!("{dir}/gid_attrs/ndevs/{index}"))
                    .filter(|n| !n.is_empty()),
            })
        })
        .collect()
}

fn is_v2(gid: &Gid) -> bool {
    gid.kind.eq_ignore_ascii_case("RoCE v2")
}

fn v2_indexes(port: &Port) -> String {
    let v2: Vec<String> = port
        .gids
        .iter()
        .filter(|g| is_v2(g))
        .map(|g| g.index.to_string())
        .collect();
    if v2.is_empty() {
        "none".to_string()
    } else {
        v2.join(", ")
    }
}

pub fn check(node: &NodeFacts, out: &mut Vec<Finding>) {
    let forced = node.nccl.env.get("NCCL_IB_GID_INDEX");
    for hca in &node.hcas {
        for port in hca.ports.iter().filter(|p| p.is_ethernet()) {
            let component = hca.port_name(port);
            let netdev = port.netdev.as_deref().unwrap_or("its netdev");
            if !port.gids.iter().any(is_v2) {
                let seen = if port.gids.is_empty() {
                    "an empty GID table".to_string()
                } else {
                    format!(
                        "only {}",
                        port.gids
                            .iter()
                            .map(|g| format!("{} ({})", g.index, g.kind))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                out.push(Finding::new(
                    Severity::Error,
                    &node.node,
                    component.as_str(),
                    "roce-v2-gid",
                    seen,
                    "a RoCE v2 GID (from an IPv4 or IPv6 address of the port's netdev)",
                    format!(
                        "give {netdev} an IP address and check that RoCE v2 is enabled (show_gids, cma_roce_mode); without it QPs fail with 'ibv_modify_qp ... Invalid argument'"
                    ),
                ));
            }
            let Some(text) = forced else { continue };
            let entry = text
                .parse::<u32>()
                .ok()
                .and_then(|i| port.gids.iter().find(|g| g.index == i));
            match entry {
                Some(gid) if is_v2(gid) => {}
                _ => out.push(Finding::new(
                    Severity::Error,
                    &node.node,
                    component.as_str(),
                    "gid-index",
                    match entry {
                        Some(gid) => format!("NCCL_IB_GID_INDEX={text} is {} ({})", gid.kind, gid.gid),
                        None => format!("NCCL_IB_GID_INDEX={text} is an empty entry"),
                    },
                    format!("a RoCE v2 GID at that index (RoCE v2 here: {})", v2_indexes(port)),
                    "unset NCCL_IB_GID_INDEX (NCCL 2.21 and later pick the GID themselves) or set it to a RoCE v2 index",
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{facts, findings};

    #[test]
    fn a_gid_index_must_name_a_roce_v2_entry() {
        let node = facts("doctor/healthy", |t| {
            t.put_bytes("/proc/self/environ", b"NCCL_IB_GID_INDEX=3\0")
        });
        assert!(findings(&[node], "gid-index").is_empty());
        let node = facts("doctor/healthy", |t| {
            t.put_bytes("/proc/self/environ", b"NCCL_IB_GID_INDEX=4\0")
        });
        let f = findings(&[node], "gid-index");
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].seen, "NCCL_IB_GID_INDEX=4 is an empty entry");
        assert_eq!(
            f[0].expected,
            "a RoCE v2 GID at that index (RoCE v2 here: 1, 3)"
        );
    }

    #[test]
    fn an_empty_gid_table_is_named() {
        let node = facts("doctor/healthy", |t| {
            t.remove("/sys/class/infiniband/mlx5_1/ports/1/gids")
        });
        let f = findings(&[node], "roce-v2-gid");
        assert_eq!((f.len(), f[0].seen.as_str()), (1, "an empty GID table"));
    }
}
