//! The node's PCI topology from sysfs alone: every NVIDIA GPU, every RDMA NIC
//! and every netdev on a PCI function of its own, with its NUMA node and local
//! CPU list, and for each pair the path class `nvidia-smi topo -m` and NCCL
//! name (X, PIX, PXB, PHB, NODE, SYS), derived from where the kernel puts each
//! function: `/sys/devices/pciDDDD:BB/<root port>/<switch ports>.../<function>`.
//!
//! A PCIe switch shows there as its upstream port with one downstream port per
//! slot, so two functions under one switch meet at its upstream port, one
//! downstream port each below it: one switch (nvidia-smi's "single PCIe
//! bridge"), PIX. Deeper below the meeting point is several switches, PXB; a
//! meeting at the host bridge itself is PHB; different host bridges are NODE
//! within one NUMA node and SYS across nodes.

use super::{pci_device, Reading, Root, PCI_DEVICES};
use serde::{Deserialize, Serialize};

/// NVIDIA's PCI vendor ID.
pub const NVIDIA_VENDOR: &str = "0x10de";

/// How far apart two PCI functions are, nearest first (NCCL's order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum PathClass {
    /// The same function.
    X,
    /// At most one PCIe switch (or bridge) between them.
    Pix,
    /// Several PCIe switches, without crossing the host bridge.
    Pxb,
    /// Through the PCIe host bridge (the root complex).
    Phb,
    /// Across host bridges within one NUMA node.
    Node,
    /// Across the SMP interconnect between NUMA nodes.
    Sys,
}

impl PathClass {
    pub fn name(self) -> &'static str {
        match self {
            PathClass::X => "X",
            PathClass::Pix => "PIX",
            PathClass::Pxb => "PXB",
            PathClass::Phb => "PHB",
            PathClass::Node => "NODE",
            PathClass::Sys => "SYS",
        }
    }

    /// NCCL_NET_GDR_LEVEL's names (LOC is X; numbers 0-5 are these in order).
    pub fn parse(text: &str) -> Option<PathClass> {
        let all = [
            PathClass::X,
            PathClass::Pix,
            PathClass::Pxb,
            PathClass::Phb,
            PathClass::Node,
            PathClass::Sys,
        ];
        let t = text.trim().to_ascii_uppercase();
        match t.as_str() {
            "LOC" => Some(PathClass::X),
            _ => all
                .into_iter()
                .find(|c| c.name() == t)
                .or_else(|| all.get(t.parse::<usize>().ok()?).copied()),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Gpu,
    Nic,
    Netdev,
}

/// One device of the matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Device {
    pub kind: Kind,
    /// "GPU0", "NIC0", "NET0": the matrix's label.
    pub label: String,
    /// The PCI address of a GPU, the RDMA device ("mlx5_0"), the interface ("eth0").
    pub name: String,
    /// Its PCI function ("0000:17:00.0").
    pub bdf: Option<String>,
    /// Its place below /sys/devices: host bridge first, the function last
    /// ("pci0000:16", "0000:16:01.0", "0000:17:00.0"); None where it is on no
    /// PCI bus (a software device) or its link could not be followed.
    pub path: Option<Vec<String>>,
    /// `numa_node`; None where the platform gives none (-1).
    pub numa: Reading<Option<u32>>,
    /// `local_cpulist` as the kernel writes it ("0-55,112-167").
    pub cpus: Reading<String>,
    /// What could not be read about it, each said once.
    pub problems: Vec<String>,
}

/// The devices of one node and the path class of each pair.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    pub devices: Vec<Device>,
    /// `classes[i][j]`: between devices i and j; None where either has no path.
    pub classes: Vec<Vec<Option<PathClass>>>,
}

impl Topology {
    pub fn of(&self, kind: Kind) -> impl Iterator<Item = (usize, &Device)> {
        self.devices
            .iter()
            .enumerate()
            .filter(move |(_, d)| d.kind == kind)
    }

    pub fn class(&self, i: usize, j: usize) -> Option<PathClass> {
        self.classes.get(i)?.get(j).copied().flatten()
    }
}

/// Reads the node's topology under `root`.
pub fn collect(root: &Root) -> Topology {
    let mut devices = Vec::new();
    for bdf in gpus(root) {
        devices.extend(device(root, Kind::Gpu, bdf.clone(), &pci_device(&bdf)));
    }
    let mut nic_functions = Vec::new();
    for name in root.list("/sys/class/infiniband") {
        let dir = format!("/sys/class/infiniband/{name}/device");
        if let Some(d) = device(root, Kind::Nic, name, &dir) {
            nic_functions.extend(d.bdf.clone());
            devices.push(d);
        }
    }
    for name in root.list("/sys/class/net") {
        let dir = format!("/sys/class/net/{name}/device");
        let Some(d) = device(root, Kind::Netdev, name, &dir) else {
            continue;
        };
        // An RDMA NIC's own interface is the same function: shown once, as the NIC.
        if !d.bdf.as_ref().is_some_and(|b| nic_functions.contains(b)) {
            devices.push(d);
        }
    }
    label(&mut devices);
    let classes = devices
        .iter()
        .map(|a| devices.iter().map(|b| class(a, b)).collect())
        .collect();
    Topology { devices, classes }
}

/// The NVIDIA display and 3D controllers (class 0x0300xx VGA, 0x0302xx 3D;
/// NVSwitches are 0x0680xx), by PCI address.
pub fn gpus(root: &Root) -> Vec<String> {
    root.list(PCI_DEVICES)
        .into_iter()
        .filter(|bdf| {
            let dir = pci_device(bdf);
            let class = root.read(&format!("{dir}/class")).unwrap_or_default();
            root.read(&format!("{dir}/vendor")).as_deref() == Some(NVIDIA_VENDOR)
                && (class.starts_with("0x0300") || class.starts_with("0x0302"))
        })
        .collect()
}

fn label(devices: &mut [Device]) {
    for (kind, prefix) in [
        (Kind::Gpu, "GPU"),
        (Kind::Nic, "NIC"),
        (Kind::Netdev, "NET"),
    ] {
        for (n, d) in devices.iter_mut().filter(|d| d.kind == kind).enumerate() {
            d.label = format!("{prefix}{n}");
        }
    }
}

/// The device whose PCI function is (a link to) `dir`; None where there is no
/// such link (loopback, bridges, Soft-RoCE) or it leads to no PCI function.
/// A link that leads nowhere is a device with a problem and no path.
fn device(root: &Root, kind: Kind, name: String, dir: &str) -> Option<Device> {
    let mut problems = Vec::new();
    let exists = std::fs::symlink_metadata(root.path(dir)).is_ok();
    let path = match root.resolve(dir) {
        None if exists => {
            problems.push(format!("could not follow {dir} to its PCI function"));
            None
        }
        None => return None,
        Some(real) => Some(pci_path(&real)?),
    };
    let numa = root.read_with(&format!("{dir}/numa_node"), |t| {
        match t.parse::<i64>().ok()? {
            -1 => Some(None),
            n => u32::try_from(n).ok().map(Some),
        }
    });
    let cpus = root.read_with(&format!("{dir}/local_cpulist"), |t| {
        super::numa::parse_cpu_list(t).ok().map(|_| t.to_string())
    });
    for u in [numa.unreadable(), cpus.unreadable()].into_iter().flatten() {
        problems.push(u.to_string());
    }
    Some(Device {
        kind,
        label: String::new(),
        bdf: path.as_ref().and_then(|p| p.last().cloned()),
        name,
        path,
        numa,
        cpus,
        problems,
    })
}

/// "/sys/devices/pci0000:16/0000:16:01.0/0000:17:00.0" as its components
/// below /sys/devices, down to the last PCI function (a virtio netdev's link
/// leads to "virtio0" below one); None for anything not below a host bridge.
fn pci_path(real: &str) -> Option<Vec<String>> {
    let below = real.strip_prefix("/sys/devices/")?;
    let mut parts = below.split('/');
    let bridge = parts.next().filter(|b| b.starts_with("pci"))?;
    let mut path = vec![bridge.to_string()];
    path.extend(parts.take_while(|p| is_bdf(p)).map(str::to_string));
    (path.len() >= 2).then_some(path)
}

/// "0000:17:00.0".
fn is_bdf(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.'
}

/// The path class between two devices; None where either has no PCI path.
pub fn class(a: &Device, b: &Device) -> Option<PathClass> {
    let (pa, pb) = (a.path.as_ref()?, b.path.as_ref()?);
    Some(path_class(
        pa,
        pb,
        a.numa.get().copied().flatten(),
        b.numa.get().copied().flatten(),
    ))
}

/// The class of two PCI paths (host bridge first), given their NUMA nodes.
pub fn path_class(
    a: &[String],
    b: &[String],
    numa_a: Option<u32>,
    numa_b: Option<u32>,
) -> PathClass {
    if a == b {
        return PathClass::X;
    }
    if a[0] != b[0] {
        // Different host bridges: NUMA nodes that differ are across sockets;
        // a platform that gives none is taken for one node.
        return match (numa_a, numa_b) {
            (Some(x), Some(y)) if x != y => PathClass::Sys,
            _ => PathClass::Node,
        };
    }
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    if common == 1 {
        return PathClass::Phb;
    }
    // Ports between the meeting point and each function: one downstream port
    // each side is one switch.
    let below = |p: &[String]| p.len().saturating_sub(common + 1);
    if below(a) <= 1 && below(b) <= 1 {
        PathClass::Pix
    } else {
        PathClass::Pxb
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Vec<String> {
        s.split('/').map(str::to_string).collect()
    }

    #[test]
    fn classes_follow_the_pci_tree() {
        let rp = "pci0000:16/0000:16:01.0";
        let gpu = p(&format!("{rp}/0000:17:00.0/0000:18:00.0/0000:19:00.0"));
        let nic = p(&format!("{rp}/0000:17:00.0/0000:18:01.0/0000:1a:00.0"));
        let nic_port2 = p(&format!("{rp}/0000:17:00.0/0000:18:01.0/0000:1a:00.1"));
        let cascaded = p(&format!(
            "{rp}/0000:17:00.0/0000:18:02.0/0000:1b:00.0/0000:1c:00.0/0000:1d:00.0"
        ));
        let other_root_port = p("pci0000:16/0000:16:02.0/0000:20:00.0");
        let other_bridge = p("pci0000:30/0000:30:01.0/0000:31:00.0");
        assert_eq!(path_class(&gpu, &gpu, Some(0), Some(0)), PathClass::X);
        assert_eq!(path_class(&gpu, &nic, Some(0), Some(0)), PathClass::Pix);
        assert_eq!(
            path_class(&nic, &nic_port2, Some(0), Some(0)),
            PathClass::Pix
        );
        assert_eq!(
            path_class(&gpu, &cascaded, Some(0), Some(0)),
            PathClass::Pxb
        );
        assert_eq!(
            path_class(&gpu, &other_root_port, None, None),
            PathClass::Phb
        );
        assert_eq!(
            path_class(&gpu, &other_bridge, Some(0), Some(0)),
            PathClass::Node
        );
        assert_eq!(path_class(&gpu, &other_bridge, None, None), PathClass::Node);
        assert_eq!(
            path_class(&gpu, &other_bridge, Some(0), Some(1)),
            PathClass::Sys
        );
    }

    #[test]
    fn gdr_levels_read_as_nccl_reads_them() {
        assert_eq!(PathClass::parse("pxb"), Some(PathClass::Pxb));
        assert_eq!(PathClass::parse("LOC"), Some(PathClass::X));
        assert_eq!(PathClass::parse("3"), Some(PathClass::Phb));
        assert_eq!(PathClass::parse("far"), None);
        assert!(PathClass::Pxb < PathClass::Phb && PathClass::Node < PathClass::Sys);
    }
}
