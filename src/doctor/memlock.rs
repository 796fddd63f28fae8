//! Locked-memory limit: registering a buffer with the NIC pins its pages, and the
//! kernel refuses (ibv_reg_mr, ibv_create_qp fail with ENOMEM) beyond
//! RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK.
//!
//! Both are read from `/proc/self/limits` and `/proc/self/status` under the root:
//! on a live node that is this process's RLIMIT_MEMLOCK and capabilities (as the
//! launcher passed them on), and a fixture tree can set them.

use super::{Finding, NodeFacts, Severity};
use crate::sizes::human_bytes;
use crate::sysfs::Root;
use serde::{Deserialize, Serialize};

/// Below this a registration of one large buffer already fails; at or above it,
/// a finite limit is still a risk for a job that registers many.
pub const MEMLOCK_NEEDED_BYTES: u64 = 1 << 30;

/// Linux capability number of CAP_IPC_LOCK.
const CAP_IPC_LOCK: u32 = 14;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Memlock {
    /// Whether /proc/self/limits was readable.
    pub known: bool,
    /// Soft limit in bytes; None = unlimited.
    pub soft_bytes: Option<u64>,
    pub hard_bytes: Option<u64>,
    /// CAP_IPC_LOCK in the effective set: the limit does not apply.
    pub cap_ipc_lock: bool,
}

/// "unlimited" -> None, "8388608" -> Some(8388608).
fn limit_value(text: &str) -> Option<Option<u64>> {
    if text == "unlimited" {
        Some(None)
    } else {
        text.parse().ok().map(Some)
    }
}

pub fn collect(root: &Root) -> Memlock {
    let line = root.read("/proc/self/limits").and_then(|limits| {
        limits
            .lines()
            .find_map(|l| l.strip_prefix("Max locked memory").map(str::to_string))
    });
    let fields: Vec<String> = line
        .as_deref()
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let soft = fields.first().and_then(|f| limit_value(f));
    let hard = fields.get(1).and_then(|f| limit_value(f));
    let cap_ipc_lock = root
        .read("/proc/self/status")
        .and_then(|status| {
            status.lines().find_map(|l| {
                let hex = l.strip_prefix("CapEff:")?.trim();
                u64::from_str_radix(hex, 16).ok()
            })
        })
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0);
    Memlock {
        known: soft.is_some(),
        soft_bytes: soft.flatten(),
        hard_bytes: hard.flatten(),
        cap_ipc_lock,
    }
}

fn show(limit: Option<u64>) -> String {
    limit.map_or_else(|| "unlimited".to_string(), human_bytes)
}

const FIX: &str = "raise it to unlimited: `ulimit -l unlimited` where the job starts, `* - memlock unlimited` in /etc/security/limits.conf, LimitMEMLOCK=infinity in the slurmd/containerd/docker unit; in Kubernetes add the IPC_LOCK capability to the container";

pub fn check(node: &NodeFacts, out: &mut Vec<Finding>) {
    let m = &node.memlock;
    let seen = format!(
        "RLIMIT_MEMLOCK soft {} hard {}{}",
        show(m.soft_bytes),
        show(m.hard_bytes),
        if m.cap_ipc_lock {
            ", CAP_IPC_LOCK held"
        } else {
            ""
        }
    );
    let expected = "unlimited, or CAP_IPC_LOCK";
    let finding = |severity, fix: &str| {
        Finding::new(
            severity,
            &node.node,
            "memlock",
            "memlock",
            seen.as_str(),
            expected,
            fix,
        )
    };
    if !m.known {
        out.push(finding(
            Severity::Info,
            "could not read /proc/self/limits: check `ulimit -l` by hand",
        ));
        return;
    }
    let Some(soft) = m.soft_bytes else { return };
    if m.cap_ipc_lock {
        return;
    }
    if node.rdma_devices.is_empty() {
        out.push(finding(
            Severity::Info,
            "matters only for RDMA registration, and this node has no RDMA device",
        ));
    } else if soft < MEMLOCK_NEEDED_BYTES {
        out.push(finding(Severity::Error, FIX));
    } else {
        out.push(finding(Severity::Warning, FIX));
    }
}
