//! The GPU-specific limits copies are compared with, read from the machine: a
//! GPU's NVLink links and its memory (NVML, or CUDA's attributes when NVML is
//! absent). A number printed as a limit is a number read here, never a datasheet
//! figure. The PCIe link a GPU trained is read from sysfs by `crate::limits`.

use crate::limits::Limit;
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::CudaContext;
use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::Nvml;
use serde::{Deserialize, Serialize};

/// NVML, when the driver has it: NVLink and memory facts.
pub struct NvmlFacts {
    /// NVML, or why it did not open ("libnvidia-ml.so.1: cannot open ...").
    nvml: Result<Nvml, NvmlError>,
}

/// Where NVLink facts come from: NVML on a live node, a fake in unit tests.
pub trait NvLinkSource {
    /// The links of the GPU at `bus_id` ("0000:18:00.0"); none where NVML
    /// does not know the GPU.
    fn nvlinks(&self, bus_id: &str) -> NvLinks;
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NvLinks {
    pub remotes: Vec<String>,
    /// MB/s per direction of one link, as NVML reports it.
    pub link_mbps: Option<u64>,
    /// Links the GPU has whose state NVML reads as inactive.
    #[serde(default)]
    pub down: usize,
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
        NvmlFacts { nvml: Nvml::init() }
    }

    pub fn available(&self) -> bool {
        self.nvml.is_ok()
    }

    /// Why NVML is not available; None where it is.
    pub fn absent_because(&self) -> Option<String> {
        self.nvml.as_ref().err().map(NvmlError::to_string)
    }

    /// Peak memory bandwidth: 2 transfers per clock x bus width, at the maximum memory clock.
    pub fn memory_limit(&self, ctx: &CudaContext, bus_id: &str) -> Option<Limit> {
        let from_nvml = self.nvml.as_ref().ok().and_then(|nvml| {
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

impl NvLinkSource for NvmlFacts {
    fn nvlinks(&self, bus_id: &str) -> NvLinks {
        let Ok(nvml) = &self.nvml else {
            return NvLinks::default();
        };
        let Ok(device) = nvml.device_by_pci_bus_id(nvml_bus_id(bus_id)) else {
            return NvLinks::default();
        };
        let mut down = 0;
        let remotes = (0..NVLINK_MAX_LINKS)
            .filter_map(|l| {
                let link = device.link_wrapper_for(l);
                // nvmlDeviceGetNvLinkState: an error is a link number this GPU lacks.
                match link.is_active() {
                    Ok(true) => link.remote_pci_info().ok().map(|pci| pci.bus_id),
                    Ok(false) => {
                        down += 1;
                        None
                    }
                    Err(_) => None,
                }
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
        NvLinks {
            remotes,
            link_mbps,
            down,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            down: 0,
        };
        assert_eq!(direct.links_towards("0000:2a:00.0", &gpus), 2);
        // Links to NVSwitches (not a GPU of ours) all reach every peer.
        let switched = NvLinks {
            remotes: vec!["00000000:c1:00.0".into(); 18],
            link_mbps: Some(26_562),
            down: 0,
        };
        assert_eq!(switched.links_towards("0000:2a:00.0", &gpus), 18);
    }
}
