//! The limits GPU copies are compared with, read from the machine: the PCIe link a
//! GPU trained (sysfs), its NVLink links and its memory (NVML, or CUDA's attributes
//! when NVML is absent). A number printed as a limit is a number read here, never
//! a datasheet figure.

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::CudaContext;
use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::Nvml;
use std::path::{Path, PathBuf};

/// A ceiling for one direction of a copy.
#[derive(Clone, Debug, PartialEq)]
pub struct Limit {
    /// What it is and where it came from: "PCIe Gen5 x16 (sysfs)".
    pub name: String,
    /// GB/s (1e9 bytes/s) per direction.
    pub gbs: f64,
}

/// A PCIe link: transfer rate per lane and lane count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PcieLink {
    pub gts: f64,
    pub width: u32,
}

impl PcieLink {
    pub fn generation(&self) -> u32 {
        match self.gts {
            g if g >= 64.0 => 6,
            g if g >= 32.0 => 5,
            g if g >= 16.0 => 4,
            g if g >= 8.0 => 3,
            g if g >= 5.0 => 2,
            _ => 1,
        }
    }

    /// Payload rate after line encoding: 8b/10b up to Gen2, 128b/130b for Gen3-5,
    /// 242B/256B FLITs for Gen6. Packet headers cost a further 5-15% that no copy
    /// escapes, which is why 85-90% of this is a healthy result.
    pub fn gbs_per_direction(&self) -> f64 {
        let encoding = match self.generation() {
            1 | 2 => 8.0 / 10.0,
            6 => 242.0 / 256.0,
            _ => 128.0 / 130.0,
        };
        self.gts * self.width as f64 * encoding / 8.0
    }

    pub fn describe(&self) -> String {
        format!("PCIe Gen{} x{}", self.generation(), self.width)
    }
}

/// "32.0 GT/s PCIe" -> 32.0
fn parse_gts(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

fn read_link(dir: &Path, kind: &str) -> Option<PcieLink> {
    let read = |f: String| std::fs::read_to_string(dir.join(f)).ok();
    Some(PcieLink {
        gts: parse_gts(&read(format!("{kind}_link_speed"))?)?,
        width: read(format!("{kind}_link_width"))?.trim().parse().ok()?,
    })
}

/// What sysfs says about the PCIe link of the device at `bus_id`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PcieState {
    /// The best both ends support: min of the device's and its upstream port's maxima.
    pub capable: PcieLink,
    /// What the link runs at now (GPUs drop to lower speeds when idle).
    pub current: Option<PcieLink>,
}

/// Reads the link of `bus_id` ("0000:18:00.0") under `sysfs` (normally "/sys").
pub fn pcie_state(sysfs: &Path, bus_id: &str) -> Option<PcieState> {
    let device: PathBuf = sysfs.join("bus/pci/devices").join(bus_id);
    let mut capable = read_link(&device, "max")?;
    let port = device.canonicalize().ok()?.parent().map(Path::to_path_buf);
    if let Some(port_max) = port.as_deref().and_then(|p| read_link(p, "max")) {
        capable.gts = capable.gts.min(port_max.gts);
        capable.width = capable.width.min(port_max.width);
    }
    Some(PcieState {
        capable,
        current: read_link(&device, "current"),
    })
}

/// The PCIe limit of a GPU, per direction.
pub fn pcie_limit(bus_id: &str) -> Option<(Limit, PcieState)> {
    let state = pcie_state(Path::new("/sys"), bus_id)?;
    Some((
        Limit {
            name: format!("{} (sysfs)", state.capable.describe()),
            gbs: state.capable.gbs_per_direction(),
        },
        state,
    ))
}

/// NVML, when the driver has it: NVLink and memory facts.
pub struct NvmlFacts {
    nvml: Option<Nvml>,
}

/// NVML's field NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON: per-link speed, MB/s per direction.
const NVLINK_SPEED_COMMON: u32 =
    nvml_wrapper::sys_exports::field_id::NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON;
/// nvml.h's NVML_NVLINK_MAX_LINKS (not re-exported by nvml-wrapper).
const NVLINK_MAX_LINKS: u32 = 18;

/// NVML spells the domain with 8 digits.
fn nvml_bus_id(bus_id: &str) -> String {
    format!("0000{bus_id}")
}

/// The active NVLink links of one GPU: for each, the PCI bus id at the far end.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NvLinks {
    pub remotes: Vec<String>,
    /// MB/s per direction of one link, as NVML reports it.
    pub link_mbps: Option<u64>,
}

impl NvLinks {
    /// Links from this GPU usable towards the GPU at `peer`: those wired to it
    /// directly, plus those to an NVSwitch (any end that is not one of `gpus`).
    pub fn links_towards(&self, peer: &str, gpus: &[String]) -> usize {
        let same = |a: &str, b: &str| a.to_ascii_lowercase().ends_with(&b.to_ascii_lowercase());
        self.remotes
            .iter()
            .filter(|r| same(r, peer) || !gpus.iter().any(|g| same(r, g)))
            .count()
    }
}

impl NvmlFacts {
    pub fn open() -> NvmlFacts {
        NvmlFacts {
            nvml: Nvml::init().ok(),
        }
    }

    pub fn available(&self) -> bool {
        self.nvml.is_some()
    }

    /// Peak memory bandwidth: 2 transfers per clock x bus width, at the maximum memory clock.
    pub fn memory_limit(&self, ctx: &CudaContext, bus_id: &str) -> Option<Limit> {
        let from_nvml = self.nvml.as_ref().and_then(|nvml| {
            let d = nvml.device_by_pci_bus_id(nvml_bus_id(bus_id)).ok()?;
            Some((
                d.max_clock_info(Clock::Memory).ok()? as f64,
                d.memory_bus_width().ok()?,
                "NVML",
            ))
        });
        let from_cuda = || {
            let khz = ctx
                .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)
                .ok()?;
            let bits = ctx
                .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)
                .ok()?;
            (khz > 0 && bits > 0).then_some((khz as f64 / 1e3, bits as u32, "CUDA"))
        };
        let (mhz, bits, source) = from_nvml.or_else(from_cuda)?;
        Some(Limit {
            name: format!("memory {bits}-bit @ {mhz:.0} MHz ({source})"),
            gbs: 2.0 * mhz * 1e6 * (bits as f64 / 8.0) / 1e9,
        })
    }

    pub fn nvlinks(&self, bus_id: &str) -> NvLinks {
        let Some(nvml) = &self.nvml else {
            return NvLinks::default();
        };
        let Ok(device) = nvml.device_by_pci_bus_id(nvml_bus_id(bus_id)) else {
            return NvLinks::default();
        };
        let remotes = (0..NVLINK_MAX_LINKS)
            .filter_map(|l| {
                let link = device.link_wrapper_for(l);
                link.is_active()
                    .ok()
                    .filter(|a| *a)
                    .and_then(|_| link.remote_pci_info().ok())
                    .map(|pci| pci.bus_id)
            })
            .collect();
        let link_mbps = device
            .field_values_for(&[FieldId(NVLINK_SPEED_COMMON)])
            .ok()
            .and_then(|mut v| v.pop())
            .and_then(|s: Result<FieldValueSample, _>| s.ok()?.value.ok())
            .and_then(|v| match v {
                nvml_wrapper::enums::device::SampleValue::U32(x) => Some(x as u64),
                nvml_wrapper::enums::device::SampleValue::U64(x) => Some(x),
                nvml_wrapper::enums::device::SampleValue::I64(x) => u64::try_from(x).ok(),
                nvml_wrapper::enums::device::SampleValue::F64(x) => Some(x as u64),
            })
            .filter(|&x| x > 0);
        NvLinks { remotes, link_mbps }
    }

    /// The NVLink ceiling from GPU `from` to GPU `to` (bus ids), over `gpus`: the
    /// smaller of the two ends' usable links times the link speed.
    pub fn peer_limit(&self, from: &str, to: &str, gpus: &[String]) -> Option<Limit> {
        let (a, b) = (self.nvlinks(from), self.nvlinks(to));
        let links = a.links_towards(to, gpus).min(b.links_towards(from, gpus));
        let mbps = a.link_mbps.or(b.link_mbps)?;
        (links > 0).then(|| Limit {
            name: format!("NVLink x{links} @ {:.1} GB/s (NVML)", mbps as f64 / 1e3),
            gbs: links as f64 * mbps as f64 / 1e3,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_rates_per_generation() {
        let gen5 = PcieLink {
            gts: 32.0,
            width: 16,
        };
        assert_eq!(gen5.generation(), 5);
        assert!((gen5.gbs_per_direction() - 63.015).abs() < 0.01);
        assert_eq!(gen5.describe(), "PCIe Gen5 x16");
        let gen4 = PcieLink {
            gts: 16.0,
            width: 16,
        };
        assert!((gen4.gbs_per_direction() - 31.51).abs() < 0.01);
        let gen2 = PcieLink { gts: 5.0, width: 8 };
        assert!((gen2.gbs_per_direction() - 4.0).abs() < 1e-9);
        assert_eq!(parse_gts("32.0 GT/s PCIe\n"), Some(32.0));
        assert_eq!(parse_gts("8 GT/s"), Some(8.0));
        assert_eq!(parse_gts("Unknown"), None);
    }

    #[test]
    fn capability_is_the_weaker_end() {
        let root = std::env::temp_dir().join(format!("fabricbench-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let port = root.join("devices/pci0000:00/0000:00:01.0");
        let gpu = port.join("0000:18:00.0");
        std::fs::create_dir_all(&gpu).unwrap();
        let write = |dir: &Path, f: &str, v: &str| std::fs::write(dir.join(f), v).unwrap();
        write(&gpu, "max_link_speed", "32.0 GT/s PCIe\n");
        write(&gpu, "max_link_width", "16\n");
        write(&gpu, "current_link_speed", "2.5 GT/s PCIe\n");
        write(&gpu, "current_link_width", "16\n");
        write(&port, "max_link_speed", "16.0 GT/s PCIe\n");
        write(&port, "max_link_width", "16\n");
        let devices = root.join("bus/pci/devices");
        std::fs::create_dir_all(&devices).unwrap();
        std::os::unix::fs::symlink(&gpu, devices.join("0000:18:00.0")).unwrap();

        let state = pcie_state(&root, "0000:18:00.0").unwrap();
        assert_eq!(
            state.capable,
            PcieLink {
                gts: 16.0,
                width: 16
            }
        );
        assert_eq!(
            state.current,
            Some(PcieLink {
                gts: 2.5,
                width: 16
            })
        );
        assert_eq!(pcie_state(&root, "0000:99:00.0"), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn nvlink_links_towards_a_peer() {
        let gpus = vec!["0000:18:00.0".to_string(), "0000:2a:00.0".to_string()];
        // Two links straight to the peer, one to a third GPU's bus id is not ours.
        let direct = NvLinks {
            remotes: vec![
                "00000000:2A:00.0".into(),
                "00000000:2a:00.0".into(),
                "00000000:18:00.0".into(),
            ],
            link_mbps: Some(25_000),
        };
        assert_eq!(direct.links_towards("0000:2a:00.0", &gpus), 2);
        // Links to NVSwitches (not a GPU of ours) all reach every peer.
        let switched = NvLinks {
            remotes: vec!["00000000:c1:00.0".into(); 18],
            link_mbps: Some(26_562),
        };
        assert_eq!(switched.links_towards("0000:2a:00.0", &gpus), 18);
    }
}
