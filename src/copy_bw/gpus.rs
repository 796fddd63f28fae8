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

/// The CPUs of a cpulist ("0-3,8,10-11"), at most `max`; None when it does not parse.
fn parse_cpulist(list: &str, max: usize) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for range in list.split(',') {
        let (a, b) = range.split_once('-').unwrap_or((range, range));
        let (a, b) = (
            a.trim().parse::<usize>().ok()?,
            b.trim().parse::<usize>().ok()?,
        );
        cpus.extend(a..=b.min(max));
    }
    Some(cpus)
}

/// Runs the current thread on the CPUs next to `bus_id`'s PCIe root, so pinned
/// host memory is allocated (first touched) on the GPU's NUMA node.
pub(super) fn bind_near(sysfs: &Root, bus_id: &str) {
    let Some(list) = sysfs.read(&pci_file(bus_id, "local_cpulist")) else {
        return;
    };
    let Some(cpus) = parse_cpulist(&list, libc::CPU_SETSIZE as usize - 1) else {
        return;
    };
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and sched_setaffinity act on it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
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
    fn numa_nodes_and_cpus_from_a_sysfs_tree() {
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
        assert_eq!(
            parse_cpulist("0-3,8,10-11", 1023),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpulist("0-7", 3), Some(vec![0, 1, 2, 3]));
        assert_eq!(parse_cpulist("x", 3), None);
    }
}
