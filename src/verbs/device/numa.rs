//! Where the process runs, as perftest's `set_process_affinity` decides it:
//! --pin_cores sets the CPU affinity; --numa_node binds CPUs and memory to a
//! node; by default the device's node (sysfs `device/numa_node`), unless
//! --disable_numa, the process is bound already (mpirun, taskset, numactl) or
//! the device has no node (-1 in VMs, absent for Soft-RoCE), which binds
//! nothing. Under mpirun every rank decides for itself, as perftest would;
//! a --pin_cores list is split among the node's ranks, never shared.

use crate::job::UsageError;
use crate::sysfs::numa::{self, format_cpu_list, set_affinity, DeviceNode};
use crate::sysfs::{Reading, Root};
use nix::sched::{sched_getaffinity, sched_getcpu, CpuSet};
use nix::unistd::Pid;

/// Linux's MPOL_BIND (numaif.h) and MPOL_MF_MOVE: what numa_set_membind and
/// numa_migrate_pages do, through the system calls (no libnuma needed).
const MPOL_BIND: libc::c_int = 2;

/// Where the process is asked to run.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum NumaRequest {
    /// The device's node, unless the process is bound already (perftest's default).
    #[default]
    Auto,
    /// --disable_numa.
    Disabled,
    /// --numa_node.
    Node(u32),
    /// --pin_cores as given, then (`resolve`) this rank's share of the
    /// node's `ranks`.
    Cores {
        list: String,
        cpus: Vec<usize>,
        ranks: usize,
    },
}

/// Why nothing was bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unbound {
    Disabled,
    /// The affinity was set before the start (CPUs allowed, CPUs online).
    AlreadyBound {
        allowed: usize,
        online: usize,
    },
    /// `numa_node` reads -1.
    NoNode {
        device: String,
    },
    /// No `numa_node` file: a device without a parent device.
    NoFile {
        device: String,
    },
    /// `numa_node` holds something else.
    Unreadable {
        device: String,
        what: String,
    },
    /// Binding to the device's node failed (perftest continues without it).
    Failed {
        node: u32,
        why: String,
    },
}

/// What was bound, for the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuBinding {
    /// --pin_cores: this rank's CPUs (its share of the list under mpirun).
    Pinned {
        list: String,
        cpus: Vec<usize>,
        ranks: usize,
    },
    /// A node's CPUs (and memory, where the kernel took the policy).
    Node {
        node: u32,
        cpus: Vec<usize>,
        requested: bool,
        memory: Result<(), Refused>,
    },
    Unbound(Unbound),
}

/// Checks an explicit request on this host, before any device is opened:
/// CPUs that exist, a node that exists, and under mpirun with --pin_cores one
/// share of the list per node-local rank (`local` is rank and size). The
/// request as this rank applies it.
pub fn resolve(
    root: &Root,
    request: &NumaRequest,
    local: (usize, usize),
) -> Result<NumaRequest, UsageError> {
    let fail = |m: String| Err(UsageError(m));
    match request {
        NumaRequest::Cores { list, cpus, .. } => {
            if let Reading::Value(present) = numa::present_cpus(root) {
                if let Some(cpu) = cpus.iter().find(|c| !present.contains(c)) {
                    return fail(format!(
                        "--pin_cores '{list}': CPU {cpu} out of range; this system has {} CPUs ({}); pick from those",
                        present.len(),
                        format_cpu_list(&present)
                    ));
                }
            }
            let (rank, size) = local;
            if size > 1 && cpus.len() < size {
                return fail(format!(
                    "--pin_cores '{list}': {size} ranks run on this node and would share CPUs; give at least {size} CPUs (one per rank), e.g. --pin_cores 0-{}",
                    size - 1
                ));
            }
            Ok(NumaRequest::Cores {
                list: list.clone(),
                cpus: share(cpus, rank, size),
                ranks: size,
            })
        }
        NumaRequest::Node(node) => {
            let nodes = numa::nodes(root);
            if nodes.is_empty() {
                return fail(format!(
                    "--numa_node {node}: kernel support for NUMA is not available ({} is absent); drop --numa_node",
                    numa::NODES
                ));
            }
            if !nodes.contains(node) {
                return fail(format!(
                    "--numa_node {node}: NUMA node {node} does not exist (available: {}); pick one of those",
                    format_cpu_list(&nodes.iter().map(|&n| n as usize).collect::<Vec<_>>())
                ));
            }
            Ok(request.clone())
        }
        other => Ok(other.clone()),
    }
}

/// Rank `rank`'s part of `cpus` split among `size` ranks: contiguous, the
/// first ones one CPU longer where it does not divide.
fn share(cpus: &[usize], rank: usize, size: usize) -> Vec<usize> {
    let size = size.max(1);
    let (each, extra) = (cpus.len() / size, cpus.len() % size);
    let start = rank * each + rank.min(extra);
    let len = each + usize::from(rank < extra);
    cpus[start.min(cpus.len())..(start + len).min(cpus.len())].to_vec()
}

/// What binding `request` (resolved) would do for `device`, given the
/// CPUs the process may run on now and those online.
pub fn decide(root: &Root, request: &NumaRequest, device: &str, allowed: usize) -> CpuBinding {
    match request {
        NumaRequest::Cores { list, cpus, ranks } => CpuBinding::Pinned {
            list: list.clone(),
            cpus: cpus.clone(),
            ranks: *ranks,
        },
        NumaRequest::Node(node) => node_placement(root, *node, true),
        NumaRequest::Disabled => CpuBinding::Unbound(Unbound::Disabled),
        NumaRequest::Auto => {
            let online = numa::online_cpus(root).value().map_or(0, |c| c.len());
            if allowed > 0 && allowed < online {
                return CpuBinding::Unbound(Unbound::AlreadyBound { allowed, online });
            }
            let device = device.to_string();
            match numa::device_node(root, &device) {
                Reading::Value(DeviceNode::Node(node)) => node_placement(root, node, false),
                Reading::Value(DeviceNode::Unknown) => {
                    CpuBinding::Unbound(Unbound::NoNode { device })
                }
                Reading::Absent => CpuBinding::Unbound(Unbound::NoFile { device }),
                Reading::Unreadable(u) => CpuBinding::Unbound(Unbound::Unreadable {
                    device,
                    what: u.to_string(),
                }),
            }
        }
    }
}

fn node_placement(root: &Root, node: u32, requested: bool) -> CpuBinding {
    match numa::node_cpus(root, node) {
        Reading::Value(cpus) if !cpus.is_empty() => CpuBinding::Node {
            node,
            cpus,
            requested,
            memory: Ok(()),
        },
        other => CpuBinding::Unbound(Unbound::Failed {
            node,
            why: other
                .unreadable()
                .map_or(format!("node {node} lists no CPUs"), ToString::to_string),
        }),
    }
}

/// Binds this process as `request` asks for `device`: the placement done.
/// An explicit request that cannot be applied is an error; the automatic
/// binding falls back to none (perftest: "Continuing without NUMA binding").
pub fn bind(root: &Root, request: &NumaRequest, device: &str) -> anyhow::Result<CpuBinding> {
    let allowed = sched_getaffinity(Pid::from_raw(0)).map_or(0, |set| cpus_of(&set).len());
    let placement = decide(root, request, device, allowed);
    match placement {
        CpuBinding::Pinned { list, cpus, ranks } => {
            set_affinity(&cpus).map_err(|e| {
                anyhow::anyhow!(
                    "--pin_cores '{list}': setting the CPU affinity to {} failed: {e}",
                    format_cpu_list(&cpus)
                )
            })?;
            Ok(CpuBinding::Pinned { list, cpus, ranks })
        }
        CpuBinding::Node {
            node,
            cpus,
            requested,
            ..
        } => {
            if let Err(e) = set_affinity(&cpus) {
                if requested {
                    anyhow::bail!(
                        "--numa_node {node}: running on its CPUs {} failed: {e}",
                        format_cpu_list(&cpus)
                    );
                }
                return Ok(CpuBinding::Unbound(Unbound::Failed {
                    node,
                    why: e.to_string(),
                }));
            }
            let memory = bind_memory(node);
            Ok(CpuBinding::Node {
                node,
                cpus,
                requested,
                memory,
            })
        }
        other => Ok(other),
    }
}

fn cpus_of(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect()
}

/// Future allocations on `node` (set_mempolicy MPOL_BIND) and the pages
/// already there moved to it (migrate_pages), as perftest's run_on_node.
fn bind_memory(node: u32) -> Result<(), Refused> {
    let bits = libc::c_ulong::BITS as usize;
    let words = node as usize / bits + 1;
    let mut to = vec![0 as libc::c_ulong; words];
    to[node as usize / bits] |= 1 << (node as usize % bits);
    let all = vec![libc::c_ulong::MAX; words];
    let maxnode = (words * bits) as libc::c_ulong;
    // SAFETY: the masks live across the calls and hold `maxnode` bits.
    let set = unsafe { libc::syscall(libc::SYS_set_mempolicy, MPOL_BIND, to.as_ptr(), maxnode) };
    if set != 0 {
        return Err(Refused::now("set_mempolicy"));
    }
    // SAFETY: as above; pid 0 is this process.
    let moved = unsafe {
        libc::syscall(
            libc::SYS_migrate_pages,
            0,
            maxnode,
            all.as_ptr(),
            to.as_ptr(),
        )
    };
    if moved < 0 {
        return Err(Refused::now("migrate_pages"));
    }
    Ok(())
}

/// A system call the kernel refused, and its errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    call: &'static str,
    errno: i32,
}

impl Refused {
    /// `call` failed just now: errno as it stands.
    fn now(call: &'static str) -> Refused {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        Refused { call, errno }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let why = std::io::Error::from_raw_os_error(self.errno);
        write!(f, "{}: {why}", self.call)
    }
}

/// The header's " NUMA node" value: the node of the CPU this runs on (as
/// perftest prints it), then what was bound and why.
pub fn header_value(placement: &CpuBinding, cpu_node: Option<u32>) -> String {
    let node = cpu_node.map_or("unknown".to_string(), |n| n.to_string());
    let how = match placement {
        CpuBinding::Pinned { list, cpus, ranks } if *ranks > 1 => format!(
            "--pin_cores {list}: CPUs {}, this rank's share of the {ranks} ranks on the node",
            format_cpu_list(cpus)
        ),
        CpuBinding::Pinned { list, .. } => format!("--pin_cores {list}"),
        CpuBinding::Node { node, cpus, requested, memory } => {
            let whose = if *requested { format!("--numa_node {node}") } else { format!("the device's node {node}") };
            let memory = match memory {
                Ok(()) => "memory bound".to_string(),
                Err(e) => format!("memory not bound: {e}"),
            };
            format!("bound to {whose}: CPUs {}, {memory}", format_cpu_list(cpus))
        }
        CpuBinding::Unbound(why) => format!(
            "not bound: {}",
            match why {
                Unbound::Disabled => "--disable_numa".to_string(),
                Unbound::AlreadyBound { allowed, online } => format!(
                    "the process was bound before it started ({allowed} of {online} CPUs: mpirun, taskset or numactl)"
                ),
                Unbound::NoNode { device } => format!("{device} reports no NUMA node (numa_node -1, as in VMs)"),
                Unbound::NoFile { device } => format!("{device} has no numa_node (no parent device, as Soft-RoCE)"),
                Unbound::Unreadable { device, what } => format!("{device}'s NUMA node is unknown ({what})"),
                Unbound::Failed { node, why } => format!("binding to node {node} failed ({why}); continuing without"),
            }
        ),
    };
    format!("{node} ({how})")
}

/// The node of the CPU this process runs on now.
pub fn current_node(root: &Root) -> Option<u32> {
    numa::cpu_node(root, sched_getcpu().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::fixture::{numa_host, Tree};

    fn host() -> Tree {
        let t = Tree::temp("numa-bind");
        numa_host(
            &t,
            &[
                ("mlx5_1", Some("1")),
                ("vm_0", Some("-1")),
                ("rxe0", None),
                ("odd_0", Some("x")),
            ],
        );
        t
    }

    fn cores(list: &str, cpus: &[usize]) -> NumaRequest {
        NumaRequest::Cores {
            list: list.into(),
            cpus: cpus.to_vec(),
            ranks: 1,
        }
    }

    #[test]
    fn the_default_follows_the_devices_node() {
        let t = host();
        let root = t.root();
        let auto = |dev| decide(&root, &NumaRequest::Auto, dev, 4);
        assert_eq!(
            auto("mlx5_1"),
            CpuBinding::Node {
                node: 1,
                cpus: vec![2, 3],
                requested: false,
                memory: Ok(())
            }
        );
        let vm = auto("vm_0");
        assert_eq!(
            vm,
            CpuBinding::Unbound(Unbound::NoNode {
                device: "vm_0".into()
            })
        );
        assert_eq!(
            header_value(&vm, Some(0)),
            "0 (not bound: vm_0 reports no NUMA node (numa_node -1, as in VMs))"
        );
        assert_eq!(
            auto("rxe0"),
            CpuBinding::Unbound(Unbound::NoFile {
                device: "rxe0".into()
            })
        );
        let odd = auto("odd_0");
        assert!(
            header_value(&odd, None)
                .starts_with("unknown (not bound: odd_0's NUMA node is unknown (could not read"),
            "{odd:?}"
        );
        // Bound before the start (2 of 4 CPUs): left as it is, as perftest.
        assert_eq!(
            decide(&root, &NumaRequest::Auto, "mlx5_1", 2),
            CpuBinding::Unbound(Unbound::AlreadyBound {
                allowed: 2,
                online: 4
            })
        );
        assert_eq!(
            decide(&root, &NumaRequest::Disabled, "mlx5_1", 4),
            CpuBinding::Unbound(Unbound::Disabled)
        );
        assert_eq!(
            decide(&root, &NumaRequest::Node(0), "vm_0", 2),
            CpuBinding::Node {
                node: 0,
                cpus: vec![0, 1],
                requested: true,
                memory: Ok(())
            }
        );
    }

    #[test]
    fn explicit_requests_are_checked_on_the_host() {
        let t = host();
        let root = t.root();
        assert_eq!(
            resolve(&root, &NumaRequest::Node(1), (0, 1)).unwrap(),
            NumaRequest::Node(1)
        );
        assert_eq!(
            resolve(&root, &NumaRequest::Node(2), (0, 1)).unwrap_err().0,
            "--numa_node 2: NUMA node 2 does not exist (available: 0-1); pick one of those"
        );
        assert_eq!(
            resolve(&root, &cores("0-9", &(0..10).collect::<Vec<_>>()), (0, 1))
                .unwrap_err()
                .0,
            "--pin_cores '0-9': CPU 4 out of range; this system has 4 CPUs (0-3); pick from those"
        );
        let bare = Tree::temp("numa-none");
        assert!(resolve(&bare.root(), &NumaRequest::Node(0), (0, 1))
            .unwrap_err()
            .0
            .contains("kernel support for NUMA is not available"));
    }

    #[test]
    fn ranks_of_a_node_never_share_a_core() {
        let t = host();
        let root = t.root();
        let list = cores("0-3", &[0, 1, 2, 3]);
        let mine = |rank, size| match resolve(&root, &list, (rank, size)).unwrap() {
            NumaRequest::Cores { cpus, .. } => cpus,
            other => panic!("{other:?}"),
        };
        assert_eq!(mine(0, 1), vec![0, 1, 2, 3]);
        assert_eq!((mine(0, 2), mine(1, 2)), (vec![0, 1], vec![2, 3]));
        assert_eq!(
            (mine(0, 3), mine(1, 3), mine(2, 3)),
            (vec![0, 1], vec![2], vec![3])
        );
        let e = resolve(&root, &cores("1", &[1]), (1, 2)).unwrap_err().0;
        assert_eq!(
            e,
            "--pin_cores '1': 2 ranks run on this node and would share CPUs; give at least 2 CPUs (one per rank), e.g. --pin_cores 0-1"
        );
    }

    #[test]
    fn header_values_say_what_was_bound() {
        let pinned = CpuBinding::Pinned {
            list: "0-3".into(),
            cpus: vec![2, 3],
            ranks: 2,
        };
        assert_eq!(
            header_value(&pinned, Some(1)),
            "1 (--pin_cores 0-3: CPUs 2-3, this rank's share of the 2 ranks on the node)"
        );
        let node = CpuBinding::Node {
            node: 1,
            cpus: vec![2, 3],
            requested: false,
            memory: Ok(()),
        };
        assert_eq!(
            header_value(&node, Some(1)),
            "1 (bound to the device's node 1: CPUs 2-3, memory bound)"
        );
    }

    #[test]
    fn binding_this_process_to_the_cpus_it_has() {
        // Live: pin to the CPUs already allowed (changes nothing), as --pin_cores does.
        let allowed = cpus_of(&sched_getaffinity(Pid::from_raw(0)).unwrap());
        let list = format_cpu_list(&allowed);
        let p = bind(&Root::new("/"), &cores(&list, &allowed), "none").unwrap();
        assert_eq!(
            p,
            CpuBinding::Pinned {
                list,
                cpus: allowed,
                ranks: 1
            }
        );
    }
}
