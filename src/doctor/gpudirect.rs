//! GPUDirect RDMA and PCIe: the NIC can reach GPU memory only through
//! nvidia_peermem or the DMA-BUF path of NVIDIA's open kernel module, and a GPU
//! or NIC whose PCIe link trained narrower or slower than it can run caps every
//! transfer through it.

use super::facts::{GpuFacts, NodeFacts, PciDevice};
use super::{Finding, Severity};
use crate::limits;
use crate::sysfs::{Reading, Root, Unreadable, PCI_DEVICES};

/// The PCI device at `bdf` and its link.
pub fn read_pci_device(root: &Root, bdf: &str) -> PciDevice {
    PciDevice {
        bdf: bdf.to_string(),
        link: limits::pcie_state(root, bdf),
    }
}

pub fn collect(root: &Root) -> GpuFacts {
    let gpus = crate::sysfs::topology::gpus(root)
        .into_iter()
        .map(|bdf| read_pci_device(root, &bdf))
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
    // A PCI bus that could not be listed is an error of its own (`unlisted`).
    if g.gpus.is_empty() && node.unlisted(PCI_DEVICES) {
        return;
    }
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
                .map_or(hca.name.clone(), |p| hca.port_name(p));
            check_link(node, &format!("nic {name} {}", pci.bdf), pci, false, out);
        }
    }
}

fn check_link(
    node: &NodeFacts,
    component: &str,
    device: &PciDevice,
    gpu: bool,
    out: &mut Vec<Finding>,
) {
    let unreadable = |u: &Unreadable| {
        Finding::unreadable_file(
            &node.node,
            component,
            u,
            "a link speed such as '32.0 GT/s PCIe' and a width such as '16'",
            "doctor cannot judge this link: read it by hand (lspci -vv -s BDF: LnkCap and LnkSta); \
             'Unknown' is a speed the kernel cannot tell: reseat the card or riser, check the slot and BIOS",
        )
    };
    // No link maximum in sysfs (a virtual device): nothing to judge it against.
    let link = match &device.link {
        Reading::Absent => return,
        Reading::Unreadable(u) => return out.push(unreadable(u)),
        Reading::Value(link) => link,
    };
    let expected = format!(
        "{} (the most the device and its slot support)",
        link.capable.describe()
    );
    if let Some(u) = link.current.unreadable() {
        return out.push(unreadable(u));
    }
    let Some(&current) = link.current.get().filter(|c| c.width > 0) else {
        out.push(Finding::new(
            Severity::Error,
            &node.node,
            component,
            "pcie-width",
            "PCIe link not trained (no current speed and width)",
            expected,
            "the device has no link: reseat the card or riser, check the slot and BIOS bifurcation",
        ));
        return;
    };
    if link.device_max.gts > link.capable.gts || link.device_max.width > link.capable.width {
        // Not a fault of the link but of the placement: the card cannot reach its
        // own bandwidth in this slot, and every copy through it pays for that.
        out.push(Finding::new(
            Severity::Warning,
            &node.node,
            component,
            "pcie-slot",
            format!("{} slot", link.capable.describe()),
            format!("{} (what the device supports)", link.device_max.describe()),
            "the slot or riser is slower than the card: move it to a slot of its own PCIe generation and width",
        ));
    }
    let seen = current.describe();
    if current.width < link.capable.width {
        out.push(Finding::new(
            Severity::Error,
            &node.node,
            component,
            "pcie-width",
            seen,
            expected,
            "the link trained with fewer lanes: reseat the card or riser, check the slot and BIOS bifurcation",
        ));
    } else if current.gts < link.capable.gts {
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

#[cfg(test)]
mod tests {
    use super::super::testing::{facts, findings};
    use super::*;
    use crate::limits::PcieLink;
    use crate::sysfs::fixture::Tree;

    #[test]
    fn a_gen5_gpu_in_a_gen4_slot_is_a_placement_warning_not_a_link_fault() {
        let tree = Tree::named("sysfs-gen5-in-gen4");
        let mut node = NodeFacts {
            gpus: collect(&tree.root()),
            ..NodeFacts::default()
        };
        assert_eq!(node.gpus.gpus.len(), 1);
        let found = findings(&[node.clone()], "pcie");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].check, "pcie-slot");
        assert_eq!(found[0].severity, Severity::Warning);
        assert_eq!(found[0].seen, "PCIe Gen4 x16 slot");
        assert_eq!(
            found[0].expected,
            "PCIe Gen5 x16 (what the device supports)"
        );
        // Slower than even the slot allows is a link fault besides.
        let Reading::Value(link) = &mut node.gpus.gpus[0].link else {
            panic!("{:?}", node.gpus.gpus[0])
        };
        link.current = Reading::Value(PcieLink {
            gts: 8.0,
            width: 16,
        });
        let found = findings(&[node], "pcie");
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[1].check, "pcie-speed");
        assert_eq!(found[1].seen, "PCIe Gen3 x16");
        assert_eq!(
            found[1].expected,
            "PCIe Gen4 x16 (the most the device and its slot support)"
        );
    }

    #[test]
    fn reads_the_gpudirect_path() {
        let node = facts("doctor/no-gpudirect", |t| {
            t.put(
                "/proc/driver/nvidia/version",
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15",
            )
        });
        assert!(!node.gpus.peermem && node.gpus.open_module);
        let f = findings(&[node], "gpudirect-rdma");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Info);
        // NVSwitches (0x0680xx) and other vendors' devices are no GPUs.
        let node = facts("doctor/healthy", |t| {
            t.put("/sys/bus/pci/devices/0000:18:00.0/class", "0x068000")
        });
        assert!(node.gpus.gpus.is_empty());
    }

    /// A link value that does not read as one is an error naming the file and
    /// its text, never a device passed in silence or a link said to be untrained;
    /// the device's other values and the other devices are still checked.
    #[test]
    fn unreadable_link_values_are_findings() {
        let nic = "/sys/bus/pci/devices/0000:17:00.0";
        let node = facts("doctor/pcie-downgrade", |t| {
            t.put(&format!("{nic}/max_link_width"), "x16")
        });
        assert!(node.hcas[0]
            .pci
            .as_ref()
            .unwrap()
            .link
            .unreadable()
            .is_some());
        let f = findings(std::slice::from_ref(&node), "unreadable");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].component, "nic mlx5_0:1 0000:17:00.0");
        assert!(
            f[0].seen.starts_with("could not read ")
                && f[0].seen.ends_with("0000:17:00.0/max_link_width: 'x16'"),
            "{}",
            f[0].seen
        );
        let components: Vec<String> = findings(&[node], "pcie")
            .into_iter()
            .map(|f| f.component)
            .collect();
        assert_eq!(components, ["gpu 0000:18:00.0"]);
        // The kernel's "Unknown" is no speed, and no proof of an untrained link either.
        for (file, text) in [
            ("current_link_speed", "Unknown"),
            ("current_link_speed", "inf GT/s PCIe"),
            ("max_link_speed", "Unknown"),
        ] {
            let node = facts("doctor/healthy", |t| {
                t.put(&format!("/sys/bus/pci/devices/0000:18:00.0/{file}"), text)
            });
            let f = findings(std::slice::from_ref(&node), "unreadable");
            assert_eq!(f.len(), 1, "{file} {text}: {f:?}");
            assert_eq!(f[0].component, "gpu 0000:18:00.0");
            assert!(
                f[0].seen.ends_with(&format!("{file}: '{text}'")),
                "{}",
                f[0].seen
            );
            assert!(findings(&[node], "pcie").is_empty());
        }
        // A width of 0 is the kernel saying the link did not train.
        let node = facts("doctor/healthy", |t| {
            t.put("/sys/bus/pci/devices/0000:18:00.0/current_link_width", "0");
            t.put(
                "/sys/bus/pci/devices/0000:18:00.0/current_link_speed",
                "Unknown",
            );
        });
        let f = findings(&[node], "pcie");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].seen,
            "PCIe link not trained (no current speed and width)"
        );
    }
}
