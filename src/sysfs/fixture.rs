//! The one generator of every sysfs/procfs fixture tree: unit tests build the
//! trees they read from here, in a temporary folder, and the trees committed
//! under `tests/fixtures/` (read by the integration tests, the docs' examples
//! and rack specs) are checked to be exactly what it writes. To change one, edit
//! it here and rewrite them:
//!
//! ```sh
//! FABRICBENCH_WRITE_FIXTURES=1 cargo test --lib committed_trees
//! ```
//!
//! Trees are laid out as on a live node, symlinks included. Empty folders are
//! never written: git does not keep them (a driver link may dangle, as readers
//! only read its name).

mod counters;
mod numa;
mod topology;

use super::rdma::port_dir;
use super::{pci_device, Root, STEPS};
pub use counters::{advancing, PASSES};
use counters::{port_errors, rxe_bad_round, rxe_retransmits, two_rails, wrap_reset};
pub use numa::numa_host;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use topology::{hgx8, Shape};

/// A tree being written, and removed when dropped if it is a temporary one.
pub struct Tree {
    dir: PathBuf,
    temporary: bool,
}

impl Tree {
    /// An empty tree in a fresh temporary folder.
    pub fn temp(name: &str) -> Tree {
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        let n = CALLS.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "fabricbench-{}-{}-{n}",
            name.replace('/', "-"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Tree {
            dir,
            temporary: true,
        }
    }

    /// A fixture of [`TREES`], written in a temporary folder.
    pub fn named(name: &str) -> Tree {
        let tree = Tree::temp(name);
        write(name, &tree);
        tree
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn root(&self) -> Root {
        Root::new(&self.dir)
    }

    fn at(&self, abs: &str) -> PathBuf {
        let path = self.dir.join(abs.trim_start_matches('/'));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        path
    }

    /// A file holding one line, as sysfs prints values.
    pub fn put(&self, abs: &str, text: &str) {
        self.put_bytes(abs, format!("{text}\n").as_bytes());
    }

    pub fn put_bytes(&self, abs: &str, bytes: &[u8]) {
        std::fs::write(self.at(abs), bytes).unwrap();
    }

    pub fn link(&self, abs: &str, target: &str) {
        std::os::unix::fs::symlink(target, self.at(abs)).unwrap();
    }

    /// A file that reads as `values[n]` at read pass n, the last repeated (see
    /// `sysfs::STEPS`); its plain read is the first value that is a file.
    pub fn put_steps(&self, abs: &str, values: &[String]) {
        let first = values.iter().find(|v| *v != "absent").unwrap();
        self.put(abs, first);
        self.put(&format!("{STEPS}{abs}"), &values.join("\n"));
    }

    /// Removes a file, a link or a folder.
    pub fn remove(&self, abs: &str) {
        let path = self.dir.join(abs.trim_start_matches('/'));
        match std::fs::symlink_metadata(&path).unwrap().is_dir() {
            true => std::fs::remove_dir_all(path).unwrap(),
            false => std::fs::remove_file(path).unwrap(),
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// What writes one tree.
type Build = fn(&Tree);

/// Every committed tree, by its folder under `tests/fixtures/`.
pub const TREES: &[(&str, Build)] = &[
    // Limit detection (and the collectives' --sysfs-root):
    // two NDR NICs, one port down, an idle GPU at gen1, a BMC's VGA.
    ("sysfs-ndr", sysfs_ndr),
    // An HDR NIC whose x16 card trained at x8.
    ("sysfs-downgraded", sysfs_downgraded),
    // A Gen5 GPU behind a Gen4 root port.
    ("sysfs-gen5-in-gen4", sysfs_gen5_in_gen4),
    // Two rails: two NDR NICs, both ports active.
    ("sysfs-two-rails", sysfs_two_rails),
    // Only a BMC's VGA: no limit at all.
    ("sysfs-no-fabric", sysfs_no_fabric),
    // doctor: a RoCE GPU node with nothing to report, and one fault each.
    ("doctor/healthy", |t| doctor_node(t, "gpu-a")),
    ("doctor/downgraded-port", downgraded_port),
    ("doctor/port-down", port_down),
    ("doctor/pcie-downgrade", pcie_downgrade),
    // Two nodes: netdev MTU 9000 on node-a, 1500 on node-b.
    ("doctor/mtu-mismatch/node-a", |t| doctor_node(t, "node-a")),
    ("doctor/mtu-mismatch/node-b", mtu_node_b),
    ("doctor/no-roce-v2", no_roce_v2),
    ("doctor/memlock-low", memlock_low),
    ("doctor/nccl-env", nccl_env),
    ("doctor/no-gpudirect", no_gpudirect),
    // To pair with healthy: other firmware, kernel and NCCL, one HCA.
    ("doctor/skew", skew),
    // Error counters non-zero since boot on mlx5_1.
    ("doctor/port-errors", port_errors),
    // Fabric counters that move during each size of a run (see `advancing`):
    // two rails sharing the bytes, CNPs on one, PFC pauses on its netdev.
    ("counters/two-rails", |t| two_rails(t, 250_000)),
    // The same with mlx5_1 carrying a twenty-fifth of mlx5_0's bytes.
    ("counters/slow-rail", |t| two_rails(t, 10_000)),
    // Soft-RoCE: hw_counters only, retransmits and duplicate requests moving.
    ("counters/rxe-retransmits", rxe_retransmits),
    // A 32-bit counter that wraps, one that is reset, one that saturates,
    // one that vanishes, one the table does not know.
    ("counters/wrap-reset", wrap_reset),
    // Soft-RoCE, rxe1 and rxe2 on one host: packets during every read span,
    // duplicate requests and a retry only during the second (an all-pairs round).
    ("counters/rxe-bad-round", rxe_bad_round),
    // Topology: an 8-GPU, 8-NIC node, four PCIe switches of two GPUs and two
    // NICs each (see `topology`), and one fault each.
    ("topology/hgx8", |t| hgx8(t, Shape::default())),
    ("topology/nic-other-socket", |t| {
        hgx8(
            t,
            Shape {
                nic7_on_socket0: true,
                ..Shape::default()
            },
        )
    }),
    ("topology/acs", |t| {
        hgx8(
            t,
            Shape {
                acs_on_switch0: true,
                ..Shape::default()
            },
        )
    }),
    ("topology/shared-nic", |t| {
        hgx8(
            t,
            Shape {
                nic7_beside_switch: true,
                ..Shape::default()
            },
        )
    }),
    ("topology/iommu-translated", |t| {
        hgx8(
            t,
            Shape {
                iommu_translated: true,
                ..Shape::default()
            },
        )
    }),
];

/// Writes the tree called `name` (one of [`TREES`]).
pub fn write(name: &str, tree: &Tree) {
    let (_, build) = TREES
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no fixture tree {name}"));
    build(tree);
}

/// A PCI function under /sys/devices (`path` below it) with its link, listed
/// in /sys/bus/pci/devices as the kernel lists it: a link to that folder.
struct Pci<'a> {
    path: &'a str,
    class: &'a str,
    vendor: &'a str,
    current: (&'a str, u32),
    max: (&'a str, u32),
}

fn pci(t: &Tree, dev: Pci) {
    let dir = format!("/sys/devices/{}", dev.path);
    pci_files(t, &dir, &dev);
    let bdf = super::file_name(dev.path);
    t.link(&pci_device(bdf), &format!("../../../devices/{}", dev.path));
}

fn pci_files(t: &Tree, dir: &str, dev: &Pci) {
    t.put(&format!("{dir}/vendor"), dev.vendor);
    t.put(&format!("{dir}/class"), dev.class);
    t.put(
        &format!("{dir}/current_link_speed"),
        &format!("{} GT/s PCIe", dev.current.0),
    );
    t.put(
        &format!("{dir}/current_link_width"),
        &dev.current.1.to_string(),
    );
    t.put(
        &format!("{dir}/max_link_speed"),
        &format!("{} GT/s PCIe", dev.max.0),
    );
    t.put(&format!("{dir}/max_link_width"), &dev.max.1.to_string());
}

const BMC_VGA: Pci = Pci {
    path: "pci0000:00/0000:03:00.0",
    class: "0x030000",
    vendor: "0x1a03",
    current: ("2.5", 1),
    max: ("2.5", 1),
};

/// A ConnectX NIC on the PCI bus.
fn nic(path: &'static str, current: (&'static str, u32), max: (&'static str, u32)) -> Pci<'static> {
    Pci {
        path,
        class: "0x020700",
        vendor: "0x15b3",
        current,
        max,
    }
}

/// An NVIDIA GPU on the PCI bus.
fn gpu(path: &'static str, current: (&'static str, u32), max: (&'static str, u32)) -> Pci<'static> {
    Pci {
        path,
        class: "0x030200",
        vendor: "0x10de",
        current,
        max,
    }
}

/// An InfiniBand port of `dev`, whose PCI function is at /sys/devices/`pci_path`.
fn ib_port(t: &Tree, dev: &str, pci_path: &str, state: &str, rate: &str) {
    t.link(
        &format!("/sys/class/infiniband/{dev}/device"),
        &format!("../../../devices/{pci_path}"),
    );
    let p = port_dir(dev, 1);
    t.put(&format!("{p}/state"), state);
    t.put(&format!("{p}/rate"), rate);
    t.put(&format!("{p}/link_layer"), "InfiniBand");
}

fn sysfs_ndr(t: &Tree) {
    pci(t, BMC_VGA);
    for (dev, path, state, rate) in [
        (
            "mlx5_0",
            "pci0000:16/0000:17:00.0",
            "4: ACTIVE",
            "400 Gb/sec (4X NDR)",
        ),
        (
            "mlx5_1",
            "pci0000:16/0000:18:00.0",
            "1: DOWN",
            "10 Gb/sec (4X SDR)",
        ),
    ] {
        pci(t, nic(path, ("32.0", 16), ("32.0", 16)));
        ib_port(t, dev, path, state, rate);
    }
    // Idle: its link at gen1 speed.
    pci(t, gpu("pci0000:1a/0000:1b:00.0", ("2.5", 16), ("32.0", 16)));
}

fn sysfs_two_rails(t: &Tree) {
    sysfs_ndr(t);
    let p = port_dir("mlx5_1", 1);
    t.put(&format!("{p}/state"), "4: ACTIVE");
    t.put(&format!("{p}/rate"), "400 Gb/sec (4X NDR)");
}

fn sysfs_downgraded(t: &Tree) {
    let path = "pci0000:16/0000:17:00.0";
    pci(t, nic(path, ("16.0", 8), ("16.0", 16)));
    ib_port(t, "mlx5_0", path, "4: ACTIVE", "200 Gb/sec (4X HDR)");
}

fn sysfs_gen5_in_gen4(t: &Tree) {
    // The root port, an AMD bridge.
    pci(
        t,
        Pci {
            path: "pci0000:40/0000:40:01.1",
            class: "0x060400",
            vendor: "0x1022",
            current: ("16.0", 16),
            max: ("16.0", 16),
        },
    );
    let behind_it = "pci0000:40/0000:40:01.1/0000:41:00.0";
    pci(t, gpu(behind_it, ("16.0", 16), ("32.0", 16)));
}

fn sysfs_no_fabric(t: &Tree) {
    pci(t, BMC_VGA);
}

/// `/proc/self/environ`: NUL-terminated KEY=VALUE entries.
pub(crate) fn environ(t: &Tree, vars: &[&str]) {
    let bytes: Vec<u8> = vars
        .iter()
        .flat_map(|kv| kv.bytes().chain(std::iter::once(0)))
        .collect();
    t.put_bytes("/proc/self/environ", &bytes);
}

fn limits(t: &Tree, memlock_soft: &str, memlock_hard: &str) {
    t.put(
        "/proc/self/limits",
        &format!(
            "Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max locked memory         {memlock_soft}                   {memlock_hard}                   bytes
Max open files            1048576              1048576              files"
        ),
    );
}

/// A PCI device of a doctor node: a folder of its own in /sys/bus/pci/devices,
/// its link able to run at Gen5 x16.
fn doctor_pci(t: &Tree, bdf: &str, vendor: &str, class: &str) {
    let dev = Pci {
        path: bdf,
        class,
        vendor,
        current: ("32.0", 16),
        max: ("32.0", 16),
    };
    pci_files(t, &pci_device(bdf), &dev);
}

/// A ConnectX-7 RoCE port `dev` on `netdev` (MTU 9000), its GIDs on 10.0.0.`ip`.
fn hca(t: &Tree, dev: &str, bdf: &str, netdev: &str, ip: &str) {
    doctor_pci(t, bdf, "0x15b3", "0x020700");
    t.link(
        &format!("{}/driver", pci_device(bdf)),
        "../../drivers/mlx5_core",
    );
    let d = format!("/sys/class/infiniband/{dev}");
    t.link(
        &format!("{d}/device"),
        &format!("../../../bus/pci/devices/{bdf}"),
    );
    t.put(&format!("{d}/fw_ver"), "28.41.1000");
    t.put(&format!("{d}/hca_type"), "MT4129");
    t.put(&format!("{d}/node_type"), "1: CA");
    let p = port_dir(dev, 1);
    t.put(&format!("{p}/state"), "4: ACTIVE");
    t.put(&format!("{p}/phys_state"), "5: LinkUp");
    t.put(&format!("{p}/rate"), "400 Gb/sec (4X NDR)");
    t.put(&format!("{p}/link_layer"), "Ethernet");
    let link_local = format!("fe80:0000:0000:0000:0a00:00ff:fe00:00{ip}");
    let ipv4 = format!("0000:0000:0000:0000:0000:ffff:0a00:00{ip}");
    for (index, gid, kind) in [
        (0, &link_local, "IB/RoCE v1"),
        (1, &link_local, "RoCE v2"),
        (2, &ipv4, "IB/RoCE v1"),
        (3, &ipv4, "RoCE v2"),
    ] {
        t.put(&format!("{p}/gids/{index}"), gid);
        t.put(&format!("{p}/gid_attrs/types/{index}"), kind);
        t.put(&format!("{p}/gid_attrs/ndevs/{index}"), netdev);
    }
    // An unused entry: zeros, and no type (sysfs answers EINVAL).
    t.put(&format!("{p}/gids/4"), ZERO_GID);
    t.put(&format!("/sys/class/net/{netdev}/mtu"), "9000");
}

const ZERO_GID: &str = "0000:0000:0000:0000:0000:0000:0000:0000";

/// A healthy RoCE GPU node called `host`: two HCAs, a GPU, NCCL 2.21.5.
pub(super) fn doctor_node(t: &Tree, host: &str) {
    t.put("/proc/sys/kernel/hostname", host);
    t.put("/proc/sys/kernel/osrelease", "6.8.0-45-generic");
    limits(t, "unlimited", "unlimited");
    t.put(
        "/proc/self/status",
        "Name:\tdoctor\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000",
    );
    environ(
        t,
        &[
            "PATH=/usr/bin",
            "HOME=/home/user",
            "LD_LIBRARY_PATH=/opt/nccl/lib",
            "NCCL_SOCKET_IFNAME=eth0",
            "NCCL_IB_HCA=mlx5_0,mlx5_1",
        ],
    );
    t.put_bytes("/opt/nccl/lib/libnccl.so.2.21.5", b"");
    t.link("/opt/nccl/lib/libnccl.so.2", "libnccl.so.2.21.5");
    t.put(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024",
    );
    t.put("/sys/module/nvidia/version", "550.54.15");
    t.put("/sys/module/nvidia_peermem/refcnt", "0");
    t.put("/sys/module/mlx5_core/version", "24.04-0.6.6");
    t.put("/sys/class/net/lo/mtu", "65536");
    t.put("/sys/class/net/eth0/mtu", "1500");
    hca(t, "mlx5_0", "0000:17:00.0", "eth2", "11");
    hca(t, "mlx5_1", "0000:2a:00.0", "eth3", "12");
    doctor_pci(t, "0000:18:00.0", "0x10de", "0x030200");
}

fn downgraded_port(t: &Tree) {
    doctor_node(t, "gpu-a");
    t.put(
        &format!("{}/rate", port_dir("mlx5_1", 1)),
        "200 Gb/sec (4X HDR)",
    );
}

fn port_down(t: &Tree) {
    doctor_node(t, "gpu-a");
    let p = port_dir("mlx5_1", 1);
    t.put(&format!("{p}/state"), "1: DOWN");
    t.put(&format!("{p}/phys_state"), "2: Polling");
}

fn pcie_downgrade(t: &Tree) {
    doctor_node(t, "gpu-a");
    let nic = pci_device("0000:17:00.0");
    t.put(&format!("{nic}/current_link_width"), "8");
    let gpu = pci_device("0000:18:00.0");
    t.put(&format!("{gpu}/current_link_speed"), "16.0 GT/s PCIe");
}

fn mtu_node_b(t: &Tree) {
    doctor_node(t, "node-b");
    t.put("/sys/class/net/eth2/mtu", "1500");
    t.put("/sys/class/net/eth3/mtu", "1500");
}

fn no_roce_v2(t: &Tree) {
    doctor_node(t, "gpu-a");
    let p = port_dir("mlx5_0", 1);
    for index in [1, 3] {
        t.remove(&format!("{p}/gid_attrs/types/{index}"));
        t.remove(&format!("{p}/gid_attrs/ndevs/{index}"));
        t.put(&format!("{p}/gids/{index}"), ZERO_GID);
    }
}

fn memlock_low(t: &Tree) {
    doctor_node(t, "gpu-a");
    limits(t, "8388608", "8388608");
}

fn nccl_env(t: &Tree) {
    doctor_node(t, "gpu-a");
    environ(
        t,
        &[
            "PATH=/usr/bin",
            "LD_LIBRARY_PATH=/opt/nccl/lib",
            "NCCL_DEBUG=INFO",
            "NCCL_DEBUG_SUBSYS=INIT,NET",
            "NCCL_ALGO=Ring",
            "NCCL_PROTO=Simple",
            "NCCL_IB_GID_INDEX=0",
            "NCCL_SOCKET_IFNAME=ens",
            "NCCL_IB_HCA=mlx5_0,mlx5_7",
        ],
    );
}

fn no_gpudirect(t: &Tree) {
    doctor_node(t, "gpu-a");
    t.remove("/sys/module/nvidia_peermem");
}

fn skew(t: &Tree) {
    doctor_node(t, "gpu-b");
    t.put("/proc/sys/kernel/osrelease", "6.5.0-41-generic");
    t.remove("/sys/class/infiniband/mlx5_1");
    t.put("/sys/class/infiniband/mlx5_0/fw_ver", "28.39.1002");
    t.remove("/opt/nccl/lib/libnccl.so.2.21.5");
    t.remove("/opt/nccl/lib/libnccl.so.2");
    t.put_bytes("/opt/nccl/lib/libnccl.so.2.19.3", b"");
    environ(
        t,
        &[
            "PATH=/usr/bin",
            "LD_LIBRARY_PATH=/opt/nccl/lib",
            "NCCL_SOCKET_IFNAME=eth0",
            "NCCL_IB_HCA=mlx5_0",
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// What git keeps of a tree: each file's bytes and each link's target, by path.
    #[derive(Debug, PartialEq)]
    enum Entry {
        File(Vec<u8>),
        Link(PathBuf),
    }

    fn contents(dir: &Path) -> BTreeMap<PathBuf, Entry> {
        fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let path = e.path();
                let rel = path.strip_prefix(base).unwrap().to_path_buf();
                let kind = e.file_type().unwrap();
                if kind.is_symlink() {
                    out.insert(rel, Entry::Link(std::fs::read_link(&path).unwrap()));
                } else if kind.is_dir() {
                    walk(base, &path, out);
                } else {
                    out.insert(rel, Entry::File(std::fs::read(&path).unwrap()));
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(dir, dir, &mut out);
        out
    }

    /// Folders under `dir` that hold a node's tree (a `sys` or `proc` folder).
    fn tree_roots(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let path = e.path();
            if !e.file_type().unwrap().is_dir() {
                continue;
            }
            if path.join("sys").is_dir() || path.join("proc").is_dir() {
                out.push(path.strip_prefix(base).unwrap().display().to_string());
            } else {
                tree_roots(base, &path, out);
            }
        }
    }

    #[test]
    fn committed_trees_are_what_the_generator_writes() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        if std::env::var_os("FABRICBENCH_WRITE_FIXTURES").is_some() {
            for (name, build) in TREES {
                let dir = fixtures.join(name);
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir).unwrap();
                build(&Tree {
                    dir,
                    temporary: false,
                });
            }
        }
        let mut committed = Vec::new();
        tree_roots(&fixtures, &fixtures, &mut committed);
        committed.sort();
        let mut listed: Vec<String> = TREES.iter().map(|(n, _)| n.to_string()).collect();
        listed.sort();
        assert_eq!(
            committed, listed,
            "a tree under tests/fixtures not in TREES"
        );
        for (name, _) in TREES {
            let fresh = Tree::named(name);
            let (want, have) = (contents(fresh.dir()), contents(&fixtures.join(name)));
            let differ: Vec<String> = want
                .keys()
                .chain(have.keys())
                .filter(|path| want.get(*path) != have.get(*path))
                .map(|path| path.display().to_string())
                .collect();
            assert!(
                differ.is_empty(),
                "tests/fixtures/{name} differs from what sysfs::fixture writes in {differ:?}; \
                 rewrite with FABRICBENCH_WRITE_FIXTURES=1 cargo test --lib committed_trees"
            );
        }
    }

    #[test]
    fn trees_are_temporary() {
        let dir = {
            let t = Tree::named("sysfs-no-fabric");
            assert_eq!(
                t.root()
                    .resolve("/sys/bus/pci/devices/0000:03:00.0")
                    .as_deref(),
                Some("/sys/devices/pci0000:00/0000:03:00.0")
            );
            t.dir().to_path_buf()
        };
        assert!(!dir.exists());
    }
}
