//! The GPUs copy_bw measures: each one's context and stream, where it sits (its
//! NUMA node and nearby CPUs, from sysfs), and the peer access between two.

use crate::gpu::links::NvmlFacts;
use crate::gpu::{self, GpuInfo};
use crate::limits::Limit;
use crate::report::copy_table::CopyGpu;
use crate::sysfs::Root;
use anyhow::Context;
use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaStream};
use std::sync::Arc;

/// One GPU and what bounds its copies.
pub(super) struct Gpu {
    pub info: GpuInfo,
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub pcie: Option<Limit>,
    pub memory: Option<Limit>,
    pub numa_node: Option<i32>,
}

/// A file of the PCI device `bus_id` in sysfs.
fn pci_file(bus_id: &str, name: &str) -> String {
    format!("{}/{name}", crate::sysfs::pci_device(bus_id))
}

/// The NUMA node of a PCI device (none on single-node machines, where sysfs says -1).
fn numa_node(sysfs: &Root, bus_id: &str) -> Option<i32> {
    let node: i32 = sysfs.read_parsed(&pci_file(bus_id, "numa_node")).value()?;
    (node >= 0).then_some(node)
}

/// Runs the current thread on the CPUs next to `bus_id`'s PCIe root, so pinned
/// host memory is allocated (first touched) on the GPU's NUMA node. Best
/// effort: a list that does not parse, or CPUs beyond what the process may
/// use, leave it where it is.
pub(super) fn bind_near(sysfs: &Root, bus_id: &str) {
    let Some(list) = sysfs.read(&pci_file(bus_id, "local_cpulist")) else {
        return;
    };
    if let Ok(mut cpus) = crate::sysfs::numa::parse_cpu_list(&list) {
        cpus.retain(|&c| c < nix::sched::CpuSet::count());
        let _ = crate::sysfs::numa::set_affinity(&cpus);
    }
}

impl Gpu {
    pub fn open(ordinal: usize, nvml: &NvmlFacts, sysfs: &Root) -> anyhow::Result<Gpu> {
        let ctx = gpu::open(ordinal)?;
        let info = GpuInfo::of(&ctx)?;
        let stream = ctx.new_stream()?;
        let pcie = crate::limits::pcie_state(sysfs, &info.bus_id)
            .value()
            .map(|s| s.limit());
        let memory = nvml.memory_limit(&ctx, &info.bus_id);
        let numa_node = numa_node(sysfs, &info.bus_id);
        Ok(Gpu {
            info,
            ctx,
            stream,
            pcie,
            memory,
            numa_node,
        })
    }

    /// The path of its own copies: "gpu0".
    pub fn path(&self) -> String {
        format!("gpu{}", self.info.ordinal)
    }

    /// The CSV's device: "NVIDIA H200 0000:18:00.0".
    pub fn device(&self) -> String {
        format!("{} {}", self.info.name, self.info.bus_id)
    }

    /// What the table's header says about it.
    pub fn facts(&self) -> CopyGpu {
        CopyGpu {
            ordinal: self.info.ordinal,
            described: self.info.describe(),
            pcie: self.pcie.clone(),
            memory: self.memory.clone(),
            numa_node: self.numa_node,
        }
    }

    /// Lets this GPU address `to`'s memory directly; false where the hardware cannot.
    pub fn enable_peer_access(&self, to: &Gpu) -> anyhow::Result<bool> {
        let mut can: std::ffi::c_int = 0;
        // SAFETY: writes one int for two valid devices.
        unsafe { sys::cuDeviceCanAccessPeer(&mut can, self.ctx.cu_device(), to.ctx.cu_device()) }
            .result()?;
        if can == 0 {
            return Ok(false);
        }
        self.ctx.bind_to_thread()?;
        // SAFETY: both contexts are live primary contexts.
        match unsafe { sys::cuCtxEnablePeerAccess(to.ctx.cu_ctx(), 0) } {
            sys::cudaError_enum::CUDA_SUCCESS
            | sys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(true),
            other => Err(anyhow::anyhow!(cudarc::driver::DriverError(other))).with_context(|| {
                format!(
                    "enabling peer access from {} to {}",
                    self.info.describe(),
                    to.info.describe()
                )
            }),
        }
    }
}

/// "CUDA driver API 12.4", for the run's library_version.
pub(super) fn driver_version() -> String {
    let mut v: std::ffi::c_int = 0;
    // SAFETY: writes one int; the driver is loaded (gpu::driver succeeded).
    match unsafe { sys::cuDriverGetVersion(&mut v) }.result() {
        Ok(()) => format!("CUDA driver API {}.{}", v / 1000, v % 1000 / 10),
        Err(_) => "CUDA driver".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numa_nodes_from_a_sysfs_tree() {
        let dir = std::env::temp_dir().join(format!("copy-bw-sysfs-{}", std::process::id()));
        let dev = dir.join("sys/bus/pci/devices/0000:18:00.0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("numa_node"), "1\n").unwrap();
        let root = Root::new(&dir);
        assert_eq!(numa_node(&root, "0000:18:00.0"), Some(1));
        std::fs::write(dev.join("numa_node"), "-1\n").unwrap();
        assert_eq!(numa_node(&root, "0000:18:00.0"), None);
        assert_eq!(numa_node(&root, "0000:99:00.0"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
