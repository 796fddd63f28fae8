//! NCCL's environment: debug and tuning variables left set (NCCL's docs warn
//! that what helps one benchmark hurts elsewhere), NCCL_IB_DISABLE on an RDMA
//! node, and NCCL_SOCKET_IFNAME / NCCL_IB_HCA naming what this node lacks (NCCL
//! silently skips such entries and may fall back to TCP sockets).
//!
//! The environment is `/proc/self/environ` under the root: on a live node, the
//! environment the launcher gave this rank, as NCCL in the job would see it.

use super::facts::{NcclFacts, NcclLibrary, NodeFacts};
use super::{Finding, Severity};
use crate::nccl_names::NameList;
use crate::sysfs::rdma::INFINIBAND;
use crate::sysfs::Root;
use std::collections::BTreeMap;

/// Variables for debugging NCCL, not for production runs.
const DEBUG_VARS: &[&str] = &[
    "NCCL_DEBUG_SUBSYS",
    "NCCL_DEBUG_FILE",
    "NCCL_TOPO_DUMP_FILE",
    "NCCL_GRAPH_DUMP_FILE",
];

/// Tuning variables that override NCCL's own choices.
const TUNING_VARS: &[&str] = &[
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_NTHREADS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_CTAS",
    "NCCL_MAX_CTAS",
    "NCCL_BUFFSIZE",
    "NCCL_P2P_LEVEL",
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_READ",
    "NCCL_CROSS_NIC",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_QPS_PER_CONNECTION",
    "NCCL_IB_SPLIT_DATA_ON_QPS",
    "NCCL_NSOCKS_PERTHREAD",
    "NCCL_SOCKET_NTHREADS",
    "NCCL_LL_THRESHOLD",
    "NCCL_TREE_THRESHOLD",
    "NCCL_CHECKS_DISABLE",
    "NCCL_LAUNCH_MODE",
];

/// Where libnccl is looked for, besides LD_LIBRARY_PATH.
const LIB_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/local/cuda/lib64",
    "/usr/local/nccl/lib",
];

/// The NUL-separated environment under the root.
pub fn read_environ(root: &Root) -> BTreeMap<String, String> {
    root.read_bytes("/proc/self/environ")
        .map(|bytes| {
            bytes
                .split(|&b| b == 0)
                .filter_map(|kv| {
                    let kv = String::from_utf8_lossy(kv);
                    let (k, v) = kv.split_once('=')?;
                    Some((k.to_string(), v.to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// NCCL's variables and library versions under `root`, with `library`, the one
/// the node would load.
pub fn collect(root: &Root, env: BTreeMap<String, String>, library: NcclLibrary) -> NcclFacts {
    let mut dirs: Vec<String> = env
        .get("LD_LIBRARY_PATH")
        .map(|p| {
            p.split(':')
                .filter(|d| !d.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    dirs.extend(LIB_DIRS.iter().map(|d| d.to_string()));
    let mut versions: Vec<String> = dirs
        .iter()
        .flat_map(|d| root.list(d))
        .filter_map(|f| f.strip_prefix("libnccl.so.").map(str::to_string))
        // libnccl.so.2.21.5 names the version; libnccl.so.2 is only the soname link.
        .filter(|v| v.matches('.').count() == 2)
        .collect();
    versions.sort();
    versions.dedup();
    NcclFacts {
        env: env
            .into_iter()
            .filter(|(k, _)| k.starts_with("NCCL_"))
            .collect(),
        versions,
        library,
    }
}

pub fn check(node: &NodeFacts, out: &mut Vec<Finding>) {
    let env = &node.nccl.env;
    let leftover = |var: &str, kind: &str, value: &str| {
        Finding::new(
            Severity::Warning,
            &node.node,
            var,
            "nccl-env",
            format!("{var}={value}"),
            "unset in production",
            format!("unset {var}: a {kind} variable left set (NCCL's docs: what helps one benchmark can hurt elsewhere)"),
        )
    };
    for (var, value) in env {
        if var == "NCCL_DEBUG" {
            // WARN and VERSION print little; INFO and TRACE flood the logs and slow the job.
            if !matches!(value.to_ascii_uppercase().as_str(), "WARN" | "VERSION") {
                out.push(leftover(var, "debug", value));
            }
        } else if DEBUG_VARS.contains(&var.as_str()) {
            out.push(leftover(var, "debug", value));
        } else if TUNING_VARS.contains(&var.as_str()) {
            out.push(leftover(var, "tuning", value));
        }
    }
    if env.get("NCCL_IB_DISABLE").is_some_and(|v| v == "1") && !node.rdma_devices.is_empty() {
        out.push(Finding::new(
            Severity::Error,
            &node.node,
            "NCCL_IB_DISABLE",
            "nccl-env",
            "NCCL_IB_DISABLE=1 on a node with RDMA devices",
            "unset",
            "unset NCCL_IB_DISABLE: with it NCCL uses TCP sockets instead of the RDMA NICs",
        ));
    }
    if let Some(value) = env.get("NCCL_SOCKET_IFNAME") {
        check_list(
            node,
            "NCCL_SOCKET_IFNAME",
            value,
            (super::NET, &node.netdevs),
            |e| e,
            "network interface",
            out,
        );
    }
    if let Some(value) = env.get("NCCL_IB_HCA") {
        // Entries are <hca>[:<port>]; the port is checked by NCCL itself.
        check_list(
            node,
            "NCCL_IB_HCA",
            value,
            (INFINIBAND, &node.rdma_devices),
            |e| e.split(':').next().unwrap_or(e),
            "RDMA device",
            out,
        );
    }
}

fn check_list(
    node: &NodeFacts,
    var: &str,
    value: &str,
    (listed_from, names): (&str, &[String]),
    name_of: impl Fn(&str) -> &str,
    what: &str,
    out: &mut Vec<Finding>,
) {
    let list = NameList::parse(value);
    // A folder that could not be listed is its own finding: what it holds is
    // unknown, so no entry can be said to match nothing.
    if list.exclude || node.unlisted(listed_from) {
        return;
    }
    let unmatched = list.unmatched(names, &name_of);
    if unmatched.is_empty() {
        return;
    }
    let all_missing = unmatched.len() == list.entries.len();
    let have = if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    };
    out.push(Finding::new(
        if all_missing {
            Severity::Error
        } else {
            Severity::Warning
        },
        &node.node,
        var,
        "nccl-env",
        format!(
            "{var}={value}: {} matches no {what} here (have: {have})",
            unmatched.join(", ")
        ),
        format!("every entry matches a {what} of this node"),
        if all_missing {
            format!("fix or unset {var}: NCCL finds no {what} it names and fails or falls back to another transport")
        } else {
            format!("drop the missing entries from {var} or fix the node that lacks them")
        },
    ));
}

#[cfg(test)]
mod tests {
    use super::super::testing::facts;
    use super::*;
    use crate::sysfs::fixture::Tree;

    #[test]
    fn reads_the_environment_and_the_library_versions() {
        let t = Tree::named("doctor/nccl-env");
        let env = read_environ(&t.root());
        assert_eq!(env.get("NCCL_ALGO").map(String::as_str), Some("Ring"));
        assert_eq!(env.len(), 9);
        t.put_bytes("/proc/self/environ", b"A=1\0garbage\0B=x=y\0");
        let env = read_environ(&t.root());
        assert_eq!(env.get("B").map(String::as_str), Some("x=y"));
        assert_eq!(env.len(), 2);
        t.remove("/proc/self/environ");
        assert!(read_environ(&t.root()).is_empty());
        let node = facts("doctor/healthy", |t| {
            t.put_bytes("/opt/nccl/lib/libnccl.so.2.18.1", b"")
        });
        assert_eq!(node.nccl.versions, ["2.18.1", "2.21.5"]);
    }

    #[test]
    fn a_folder_not_listed_is_no_proof_that_a_name_matches_nothing() {
        let mut node = facts("doctor/healthy", |_| {});
        node.nccl.env.insert("NCCL_IB_HCA".into(), "mlx5_9".into());
        node.nccl
            .env
            .insert("NCCL_SOCKET_IFNAME".into(), "nosuch0".into());
        let said = |node: &NodeFacts| {
            let mut out = Vec::new();
            check(node, &mut out);
            out.iter().map(|f| f.component.clone()).collect::<Vec<_>>()
        };
        assert_eq!(said(&node), ["NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"]);
        for dir in [INFINIBAND, super::super::NET] {
            node.unlisted.push(crate::doctor::facts::Unlisted {
                dir: dir.into(),
                why: "Permission denied (os error 13)".into(),
            });
        }
        assert!(said(&node).is_empty(), "{:?}", said(&node));
    }
}
