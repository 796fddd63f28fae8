//! Locked-memory limit: registering a buffer with the NIC pins its pages, and the
//! kernel refuses (ibv_reg_mr, ibv_create_qp fail with ENOMEM) beyond
//! RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK.
//!
//! Both are read from `/proc/self/limits` and `/proc/self/status` under the root:
//! on a live node that is this process's RLIMIT_MEMLOCK and capabilities (as the
//! launcher passed them on), and a fixture tree can set them.

use super::facts::{Memlock, NodeFacts};
use super::{Finding, Severity, DENIED_FIX};
use crate::sizes::human_bytes;
use crate::sysfs::{Root, Unreadable};

/// Below this a registration of one large buffer already fails; at or above it,
/// a finite limit is still a risk for a job that registers many.
pub const MEMLOCK_NEEDED_BYTES: u64 = 1 << 30;

/// Linux capability number of CAP_IPC_LOCK.
const CAP_IPC_LOCK: u32 = 14;

/// "unlimited" -> None, "8388608" -> Some(8388608).
fn limit_value(text: &str) -> Option<Option<u64>> {
    if text == "unlimited" {
        Some(None)
    } else {
        text.parse().ok().map(Some)
    }
}

const LIMITS: &str = "/proc/self/limits";

pub fn collect(root: &Root) -> Memlock {
    let limits = root.read_text(LIMITS);
    let line = limits.as_ref().ok().and_then(|limits| {
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
    // What could not be read says why: the file (permission denied, ...), or its line.
    let unknown = soft.is_none().then(|| Unreadable {
        path: root.path(LIMITS).display().to_string(),
        text: line.map(|l| format!("Max locked memory{l}")),
        why: limits.err(),
    });
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
        unknown,
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
    if let Some(u) = &m.unknown {
        let fix = match u.denied() {
            true => DENIED_FIX,
            false => "check `ulimit -l` by hand where the job starts",
        };
        out.push(Finding::new(
            Severity::Info,
            &node.node,
            "memlock",
            "memlock",
            format!("RLIMIT_MEMLOCK unknown: {u}"),
            "unlimited, or CAP_IPC_LOCK",
            fix,
        ));
        return;
    }
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

#[cfg(test)]
mod tests {
    use super::super::testing::{facts, findings};
    use super::*;

    #[test]
    fn reads_the_limit_and_the_capability() {
        let node = facts("doctor/memlock-low", |_| {});
        assert_eq!(
            (node.memlock.soft_bytes, node.memlock.hard_bytes),
            (Some(8 << 20), Some(8 << 20))
        );
        assert_eq!(findings(&[node], "memlock")[0].severity, Severity::Error);
        // CAP_IPC_LOCK lifts the limit.
        let node = facts("doctor/memlock-low", |t| {
            t.put("/proc/self/status", "CapEff:\t0000000000004000")
        });
        assert!(node.memlock.cap_ipc_lock);
        assert!(findings(&[node], "memlock").is_empty());
        assert_eq!(limit_value("unlimited"), Some(None));
        assert_eq!(limit_value("4096"), Some(Some(4096)));
        assert_eq!(limit_value("lots"), None);
    }

    #[test]
    fn an_unreadable_limit_is_a_note() {
        let node = facts("doctor/healthy", |t| {
            t.put("/proc/self/limits", "Max locked memory lots lots bytes")
        });
        assert!(node.memlock.unknown.is_some());
        let f = findings(&[node], "memlock");
        assert_eq!(f[0].severity, Severity::Info);
        assert!(
            f[0].seen
                .starts_with("RLIMIT_MEMLOCK unknown: could not read ")
                && f[0]
                    .seen
                    .ends_with("/proc/self/limits: 'Max locked memory lots lots bytes'"),
            "{}",
            f[0].seen
        );
        assert!(
            f[0].fix.starts_with("check `ulimit -l` by hand"),
            "{}",
            f[0].fix
        );
    }
}
