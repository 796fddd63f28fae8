//! What sysfs says about NUMA: an RDMA device's node (`device/numa_node`,
//! -1 where the platform gives none, as VMs and software devices do), the
//! nodes there are, each node's CPUs, and the kernel's CPU-list format
//! ("0-3,8,12-15"), which `--pin_cores` takes as well.

use super::{Reading, Root};
use anyhow::{anyhow, ensure};

/// Where sysfs lists the NUMA nodes.
pub const NODES: &str = "/sys/devices/system/node";

/// An RDMA device's NUMA node as sysfs gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceNode {
    Node(u32),
    /// `numa_node` reads -1: the platform does not say (VMs, single-node boxes).
    Unknown,
}

/// `/sys/class/infiniband/DEV/device/numa_node`, as perftest reads it.
pub fn device_node_file(device: &str) -> String {
    format!("/sys/class/infiniband/{device}/device/numa_node")
}

/// The NUMA node of RDMA device `device`: absent where the device has no
/// parent device (Soft-RoCE), unreadable where the file holds no number.
pub fn device_node(root: &Root, device: &str) -> Reading<DeviceNode> {
    root.read_with(&device_node_file(device), |text| {
        match text.parse::<i64>().ok()? {
            -1 => Some(DeviceNode::Unknown),
            n => u32::try_from(n).ok().map(DeviceNode::Node),
        }
    })
}

/// The nodes sysfs lists (empty: a kernel without NUMA support).
pub fn nodes(root: &Root) -> Vec<u32> {
    let mut nodes: Vec<u32> = root
        .list(NODES)
        .iter()
        .filter_map(|name| name.strip_prefix("node")?.parse().ok())
        .collect();
    nodes.sort_unstable();
    nodes
}

/// The CPUs of node `node`.
pub fn node_cpus(root: &Root, node: u32) -> Reading<Vec<usize>> {
    root.read_with(&format!("{NODES}/node{node}/cpulist"), |t| {
        parse_cpu_list(t).ok()
    })
}

/// The node CPU `cpu` belongs to: its `nodeN` entry, as perftest finds it.
pub fn cpu_node(root: &Root, cpu: usize) -> Option<u32> {
    root.list(&format!("/sys/devices/system/cpu/cpu{cpu}"))
        .iter()
        .find_map(|name| name.strip_prefix("node")?.parse().ok())
}

/// The CPUs the kernel knows of (`present`), for range checks.
pub fn present_cpus(root: &Root) -> Reading<Vec<usize>> {
    root.read_with("/sys/devices/system/cpu/present", |t| {
        parse_cpu_list(t).ok()
    })
}

/// The CPUs online now (perftest compares the process's affinity with them).
pub fn online_cpus(root: &Root) -> Reading<Vec<usize>> {
    root.read_with("/sys/devices/system/cpu/online", |t| parse_cpu_list(t).ok())
}

/// A CPU list ("0", "0,1,2", "0-3", "0-3,8,12-15"), sorted, each CPU once;
/// the error says what is wrong, in perftest's words.
pub fn parse_cpu_list(text: &str) -> anyhow::Result<Vec<usize>> {
    let mut cpus = Vec::new();
    ensure!(!text.trim().is_empty(), "invalid CPU list format");
    for part in text.trim().split(',') {
        let number = |s: &str| -> anyhow::Result<usize> {
            s.trim()
                .parse()
                .map_err(|_| anyhow!("invalid CPU number '{}'", s.trim()))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (start, end) = (number(a)?, number(b)?);
                ensure!(
                    start <= end,
                    "invalid CPU range {start}-{end} (start > end)"
                );
                cpus.extend(start..=end);
            }
            None => cpus.push(number(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Runs this thread (the whole process, before it starts others) on `cpus`:
/// the one affinity setter.
pub fn set_affinity(cpus: &[usize]) -> nix::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    for &cpu in cpus {
        set.set(cpu)?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
}

/// A CPU list in the kernel's form ("0-3,8").
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        while i + 1 < cpus.len() && cpus[i + 1] == cpus[i] + 1 {
            i += 1;
        }
        parts.push(match cpus[i] {
            end if end == start => start.to_string(),
            end => format!("{start}-{end}"),
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{numa_host, Tree};
    use super::*;

    /// `parse_cpu_list` with its message as the user reads it.
    fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
        super::parse_cpu_list(text).map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn device_nodes_of_every_kind() {
        let t = Tree::temp("numa-device");
        numa_host(&t, &[("mlx5_0", Some("1")), ("vm_0", Some("-1"))]);
        numa_host(&t, &[("rxe0", None), ("odd_0", Some("two"))]);
        let root = t.root();
        assert_eq!(
            device_node(&root, "mlx5_0"),
            Reading::Value(DeviceNode::Node(1))
        );
        assert_eq!(
            device_node(&root, "vm_0"),
            Reading::Value(DeviceNode::Unknown)
        );
        assert_eq!(device_node(&root, "rxe0"), Reading::Absent);
        let odd = device_node(&root, "odd_0");
        assert!(odd
            .unreadable()
            .unwrap()
            .to_string()
            .ends_with("numa_node: 'two'"));
        assert_eq!(nodes(&root), vec![0, 1]);
        assert_eq!(node_cpus(&root, 1), Reading::Value(vec![2, 3]));
        assert_eq!(cpu_node(&root, 3), Some(1));
        assert_eq!(cpu_node(&root, 9), None);
        assert_eq!(present_cpus(&root), Reading::Value(vec![0, 1, 2, 3]));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,12-13"),
            Ok(vec![0, 1, 2, 3, 8, 12, 13])
        );
        assert_eq!(parse_cpu_list("3,1,1"), Ok(vec![1, 3]));
        assert_eq!(
            parse_cpu_list("4-2").unwrap_err(),
            "invalid CPU range 4-2 (start > end)"
        );
        assert_eq!(parse_cpu_list("1,x").unwrap_err(), "invalid CPU number 'x'");
        assert_eq!(parse_cpu_list("-1").unwrap_err(), "invalid CPU number ''");
        assert!(parse_cpu_list("").is_err());
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 12, 13]), "0-3,8,12-13");
        assert_eq!(format_cpu_list(&[5]), "5");
    }
}
