//! GPUDirect RDMA and PCIe: the NIC can reach GPU memory only through
//! nvidia_peermem or the DMA-BUF path of NVIDIA's open kernel module, and a GPU
//! or NIC whose PCIe link trained narrower or slower than it can run caps every
//! transfer through it.

use super::ports::port_name;
use super::{Finding, NodeFacts, Root, Severity};
use serde::{Deserialize, Serialize};

const NVIDIA_VENDOR: &str = "0x10de";

/// A PCIe device's link as sysfs reports it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PciLink {
    /// Bus address: "0000:17:00.0".
    pub bdf: String,
    /// "32.0 GT/s PCIe".
    pub speed: Option<String>,
    pub max_speed: Option<String>,
    pub width: Option<u32>,
    pub max_width: Option<u32>,
}

/// "32.0 GT/s PCIe" -> 32.0; "Unknown" -> None.
fn gts(speed: &Option<String>) -> Option<f64> {
    speed.as_deref()?.split_whitespace().next()?.parse().ok()
}

impl PciLink {
    pub fn read(root: &Root, bdf: &str) -> PciLink {
        let dir = format!("/sys/bus/pci/devices/{bdf}");
        let read = |f: &str| root.read(&format!("{dir}/{f}"));
        let number = |f: &str| read(f).and_then(|w| w.parse().ok());
        PciLink {
            bdf: bdf.to_string(),
            speed: read("current_link_speed"),
            max_speed: read("max_link_speed"),
            width: number("current_link_width"),
            max_width: number("max_link_width"),
        }
    }

    fn describe(&self) -> String {
        format!(
            "x{} at {}",
            self.width.map_or("?".into(), |w| w.to_string()),
            self.speed.as_deref().unwrap_or("?")
        )
    }

    fn describe_max(&self) -> String {
        format!(
            "x{} at {}",
            self.max_width.map_or("?".into(), |w| w.to_string()),
            self.max_speed.as_deref().unwrap_or("?")
        )
    }

    fn narrower(&self) -> bool {
        matches!((self.width, self.max_width), (Some(w), Some(m)) if w < m)
    }

    fn slower(&self) -> bool {
        matches!((gts(&self.speed), gts(&self.max_speed)), (Some(s), Some(m)) if s < m)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuFacts {
    /// NVIDIA GPUs on the PCI bus.
    pub gpus: Vec<PciLink>,
    /// /sys/module/nvidia/version: the driver is loaded.
    pub driver_version: Option<String>,
    /// nvidia_peermem (or the older nv_peer_mem) is loaded.
    pub peermem: bool,
    /// NVIDIA's open kernel module is loaded: GPUDirect RDMA can use DMA-BUF.
    pub open_module: bool,
}

pub fn collect(root: &Root) -> GpuFacts {
    let gpus = root
        .list("/sys/bus/pci/devices")
        .into_iter()
        .filter(|bdf| {
            let dir = format!("/sys/bus/pci/devices/{bdf}");
            let class = root.read(&format!("{dir}/class")).unwrap_or_default();
            root.read(&format!("{dir}/vendor")).as_deref() == Some(NVIDIA_VENDOR)
                // 0x0300xx VGA and 0x0302xx 3D controllers; NVSwitches are 0x0680xx.
                && (class.starts_with("0x0300") || class.starts_with("0x0302"))
        })
        .map(|bdf| PciLink::read(root, &bdf))
        .collect();
    GpuFacts {
        gpus,
        driver_version: root.read("/sys/module/nvidia/version"),
        peermem: root.exists("/sys/module/nvidia_peermem")
            || root.exists("/sys/module/nv_peer_mem"),
        open_module: root
            .read("/proc/driver/nvidia/version")
            .is_some_and(|v| v.contains("Open Kernel Module")),
    }
}

pub fn check(node: &NodeFacts, out: &mut Vec<Finding>) {
    let g = &node.gpus;
    if g.gpus.is_empty() {
        out.push(Finding::new(
            Severity::Info,
            &node.node,
            "gpudirect",
            "no-gpu",
            "no NVIDIA GPU on the PCI bus",
            "GPUs on a GPU node",
            "none on a host-only node: GPUDirect and GPU PCIe checks skipped",
        ));
    } else if g.driver_version.is_none() {
        out.push(Finding::new(
            Severity::Error,
            &node.node,
            "gpudirect",
            "gpu-driver",
            format!("{} NVIDIA GPUs, no nvidia module loaded", g.gpus.len()),
            "the NVIDIA driver loaded (/sys/module/nvidia)",
            "install or load the NVIDIA driver (nvidia-smi must list the GPUs)",
        ));
    } else if !node.hcas.is_empty() {
        if !g.peermem && !g.open_module {
            out.push(Finding::new(
                Severity::Error,
                &node.node,
                "gpudirect",
                "gpudirect-rdma",
                "nvidia_peermem not loaded, and the NVIDIA driver is not the open kernel module (no DMA-BUF path)",
                "nvidia_peermem loaded, or the open kernel module for DMA-BUF",
                "modprobe nvidia-peermem (and load it at boot; the GPU Operator can), or install the open kernel module (r515+, kernel 5.12+) for DMA-BUF; without either NCCL copies through host memory",
            ));
        } else if !g.peermem {
            out.push(Finding::new(
                Severity::Info,
                &node.node,
                "gpudirect",
                "gpudirect-rdma",
                "nvidia_peermem not loaded; open kernel module loaded",
                "nvidia_peermem or DMA-BUF",
                "none: NCCL uses the DMA-BUF path (NCCL_DMABUF_ENABLE=1, its default on recent releases)",
            ));
        }
    }
    for gpu in &g.gpus {
        check_link(node, &format!("gpu {}", gpu.bdf), gpu, true, out);
    }
    for hca in &node.hcas {
        if let Some(pci) = &hca.pci {
            let name = hca
                .ports
                .first()
                .map_or(hca.name.clone(), |p| port_name(hca, p));
            check_link(node, &format!("nic {name} {}", pci.bdf), pci, false, out);
        }
    }
}

fn check_link(
    node: &NodeFacts,
    component: &str,
    link: &PciLink,
    gpu: bool,
    out: &mut Vec<Finding>,
) {
    let seen = format!("PCIe {}", link.describe());
    let expected = format!("PCIe {} (the device's maximum)", link.describe_max());
    if link.narrower() {
        out.push(Finding::new(
            Severity::Error,
            &node.node,
            component,
            "pcie-width",
            seen.as_str(),
            expected.as_str(),
            "the link trained with fewer lanes: reseat the card or riser, check the slot and BIOS bifurcation",
        ));
    } else if link.slower() {
        // GPUs drop their link speed when idle to save power; NICs do not.
        let (severity, fix) = if gpu {
            (
                Severity::Warning,
                "GPUs lower the link speed when idle: check again with the GPU busy (nvidia-smi -q -d PCIE); if it stays low, check the slot, riser and BIOS PCIe generation",
            )
        } else {
            (
                Severity::Error,
                "the link trained at a lower PCIe generation: check the slot, riser, retimer and BIOS PCIe generation",
            )
        };
        out.push(Finding::new(
            severity,
            &node.node,
            component,
            "pcie-speed",
            seen,
            expected,
            fix,
        ));
    }
}
