//! What doctor knows about a node: read on its rank (by the `collect` of each
//! area), sent to rank 0 as JSON and checked there. Every check file imports
//! these types from here, never from another check file.

use crate::limits::PcieState;
use crate::sysfs::rdma::{KernelState, PortState};
use crate::sysfs::{Reading, Unreadable};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Everything doctor knows about one node: gathered on its rank, checked on rank 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeFacts {
    pub node: String,
    /// Which machine and network namespace answered (`sysfs::identity`); None
    /// where it cannot be read (a fixture tree) or --node-name names the node.
    #[serde(default)]
    pub identity: Option<String>,
    /// The root directory the facts were read from.
    pub root: String,
    /// Kernel release (`uname -r`).
    pub kernel: Option<String>,
    /// Every RDMA device on the node, selected or not (NCCL_IB_HCA is checked against these).
    pub rdma_devices: Vec<String>,
    /// The RDMA devices checked (all, or those named by --hca).
    pub hcas: Vec<Hca>,
    /// Network interfaces (NCCL_SOCKET_IFNAME is checked against these).
    pub netdevs: Vec<String>,
    /// The MTU of each interface that is up, loopback aside (compared across nodes).
    pub netdev_mtus: BTreeMap<String, u32>,
    pub memlock: Memlock,
    pub gpus: GpuFacts,
    pub nccl: NcclFacts,
    /// Expected rate of every port in Gb/s (--port-rate), when given.
    pub port_rate_gbps: Option<f64>,
    /// RDMA port error counters that are not zero.
    #[serde(default)]
    pub error_counters: Vec<ErrorCounter>,
    /// The directories doctor lists that were there but could not be listed:
    /// what they hold was not checked.
    #[serde(default)]
    pub unlisted: Vec<Unlisted>,
    /// GPUs, NICs and the paths between them.
    #[serde(default)]
    pub topology: super::topology_facts::TopologyFacts,
}

impl NodeFacts {
    /// Whether `dir` was there but could not be listed.
    pub fn unlisted(&self, dir: &str) -> bool {
        self.unlisted.iter().any(|u| u.dir == dir)
    }
}

/// A directory that could not be listed, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unlisted {
    /// "/sys/class/infiniband" (under the root).
    pub dir: String,
    /// "Permission denied (os error 13)".
    pub why: String,
}

/// One error counter that is not zero.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounter {
    /// "mlx5_0:1".
    pub port: String,
    /// "counters/symbol_error".
    pub counter: String,
    pub name: String,
    pub value: u64,
}

/// One RDMA device (HCA) and its ports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Hca {
    pub name: String,
    /// Adapter model ("MT4129"), or what stands for it on software devices.
    pub model: String,
    pub firmware: Option<String>,
    /// Kernel driver and, where the module publishes one, its version.
    pub driver: Option<String>,
    /// The PCIe link of the adapter; None for software devices (rxe).
    pub pci: Option<PciDevice>,
    pub ports: Vec<Port>,
    /// The ports folder, where it is there but could not be listed.
    #[serde(default)]
    pub ports_unreadable: Option<Unreadable>,
}

impl Hca {
    /// The component name of one of its ports: "mlx5_0:1".
    pub fn port_name(&self, port: &Port) -> String {
        format!("{}:{}", self.name, port.num)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Port {
    pub num: u32,
    /// "ACTIVE", "DOWN", "INIT", "ARMED".
    pub state: String,
    /// "LinkUp", "Polling", "Disabled", ...
    pub phys_state: String,
    /// As sysfs prints it: "400 Gb/sec (4X NDR)".
    pub rate: String,
    pub rate_gbps: Reading<f64>,
    /// Lanes: 4 for "4X".
    pub width: Option<u32>,
    /// "InfiniBand" or "Ethernet".
    pub link_layer: String,
    /// The network interface of a RoCE port and its MTU.
    pub netdev: Option<String>,
    pub netdev_mtu: Reading<u32>,
    /// RDMA MTU in bytes. For RoCE the kernel derives it from the netdev MTU, and
    /// so does doctor; an InfiniBand port's comes from the subnet manager and is
    /// not in sysfs (None).
    pub active_mtu: Option<u32>,
    pub gids: Vec<Gid>,
}

impl Port {
    pub fn is_ethernet(&self) -> bool {
        self.link_layer == "Ethernet"
    }
    pub fn is_active(&self) -> bool {
        self.state == PortState::Active.name()
    }
}

/// A non-empty entry of a port's GID table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Gid {
    pub index: u32,
    pub gid: String,
    /// "RoCE v2", "IB/RoCE v1".
    pub kind: String,
    pub netdev: Option<String>,
}

/// A PCI device and its link as sysfs reports it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PciDevice {
    /// Bus address: "0000:17:00.0".
    pub bdf: String,
    /// Absent where sysfs reports no link maximum.
    pub link: Reading<PcieState>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuFacts {
    /// NVIDIA GPUs on the PCI bus.
    pub gpus: Vec<PciDevice>,
    /// /sys/module/nvidia/version: the driver is loaded.
    pub driver_version: Option<String>,
    /// nvidia_peermem (or the older nv_peer_mem) is loaded.
    pub peermem: bool,
    /// NVIDIA's open kernel module is loaded: GPUDirect RDMA can use DMA-BUF.
    pub open_module: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Memlock {
    /// Why the limit is not known (/proc/self/limits could not be read, or
    /// holds no limit); None where it is.
    #[serde(default)]
    pub unknown: Option<Unreadable>,
    /// Soft limit in bytes; None = unlimited (where known).
    pub soft_bytes: Option<u64>,
    pub hard_bytes: Option<u64>,
    /// CAP_IPC_LOCK in the effective set: the limit does not apply.
    pub cap_ipc_lock: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NcclFacts {
    /// Every NCCL_* variable.
    pub env: BTreeMap<String, String>,
    /// Versions of the libnccl.so.X.Y.Z files found on the library path, sorted.
    pub versions: Vec<String>,
    /// The library the nccl backend would load on this node.
    #[serde(default)]
    pub library: NcclLibrary,
}

impl NcclFacts {
    /// The NCCL version the node runs: the loaded library's, else the versions of
    /// the files on the library path ("2.18.1 and 2.21.5"); None when neither is known.
    pub fn version_in_use(&self) -> Option<String> {
        match &self.library {
            NcclLibrary::Found { version, .. } => Some(version.clone()),
            _ => (!self.versions.is_empty()).then(|| self.versions.join(" and ")),
        }
    }
}

/// The NCCL library the collectives' nccl backend would load on the node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum NcclLibrary {
    /// Not looked for: the facts were read under another root than the live node's.
    #[default]
    Unchecked,
    Found {
        path: String,
        /// "2.32.3".
        version: String,
        /// Which entry points it has: "the 16 required and PreMulSum, ...".
        symbols: String,
    },
    /// FABRICBENCH_NCCL_LIB names something that is not a usable NCCL.
    Unusable { named: String, reason: String },
    /// The search found none usable; `unusable`: what it found but could not use.
    NotFound { unusable: String },
}
