//! The buffers the NIC reads and writes, and their registration: host memory,
//! or GPU memory with --use_cuda (registered through nvidia-peermem, or through
//! dma-buf with --use_cuda_dmabuf).

use crate::backend::MemoryBudget;
use crate::gpu::{GpuDirect, RdmaGpuBuffer};
use crate::sizes::human_bytes;
use crate::verbs::flags::benchmark::Test;
use crate::verbs::flags::{Length, Memory, Plan};
use anyhow::{anyhow, bail};
use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};
use sideway::ibverbs::memory_region::{MemoryRegion, RegisterMemoryRegionErrorKind};
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::AccessFlags;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::os::fd::AsRawFd;
use std::sync::Arc;

const PAGE: usize = 4096;

/// Page-aligned, zeroed host memory.
pub struct HostBuffer {
    ptr: *mut u8,
    layout: Layout,
}

// The buffer is plain memory owned by one side; the NIC is the only other user.
unsafe impl Send for HostBuffer {}

/// The memory of one queue pair.
pub enum Buffer {
    Host(HostBuffer),
    Gpu(RdmaGpuBuffer),
}

impl Buffer {
    /// The address work requests carry (a device address for GPU memory).
    #[inline]
    pub fn addr(&self) -> u64 {
        match self {
            Buffer::Host(h) => h.ptr as u64,
            Buffer::Gpu(g) => g.addr(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Buffer::Host(h) => h.layout.size(),
            Buffer::Gpu(g) => g.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The CPU's pointer to host memory, for the latency tests' flag bytes
    /// (args refuses --use_cuda for them: the CPU cannot poll GPU memory).
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        match self {
            Buffer::Host(h) => h.ptr,
            Buffer::Gpu(_) => unreachable!("the CPU never touches GPU buffers (bw tests only)"),
        }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `allocate` with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

/// Memory for `len` bytes of buffers where the plan says (--use_cuda or host).
pub fn allocate(memory: Memory, len: usize) -> anyhow::Result<Buffer> {
    match memory {
        Memory::Host => {
            let layout = Layout::from_size_align(len.max(1).next_multiple_of(PAGE), PAGE)
                .map_err(|e| anyhow!("cannot lay out a {len}-byte buffer: {e}"))?;
            // SAFETY: the layout has a non-zero size.
            let ptr = unsafe { alloc_zeroed(layout) };
            if ptr.is_null() {
                bail!(
                    "cannot allocate {} of host memory for the buffers; lower -s/-a or -q",
                    human_bytes(layout.size() as u64)
                );
            }
            Ok(Buffer::Host(HostBuffer { ptr, layout }))
        }
        Memory::Cuda { gpu, dmabuf } => {
            let path = if dmabuf {
                GpuDirect::DmaBuf
            } else {
                GpuDirect::PeerMem
            };
            RdmaGpuBuffer::alloc(gpu as usize, len, path)
                .map(Buffer::Gpu)
                .map_err(|e| {
                    anyhow!(
                        "--use_cuda={gpu}{}: {e:#}",
                        if dmabuf { " --use_cuda_dmabuf" } else { "" }
                    )
                })
        }
    }
}

/// Checks that --use_cuda's GPU can hold RDMA buffers (driver, GPU, the
/// peermem module or dma-buf export) before any RDMA device is opened, so
/// that a missing GPU is the error a GPU run reports.
pub fn check_memory(memory: Memory) -> anyhow::Result<()> {
    match memory {
        Memory::Host => Ok(()),
        Memory::Cuda { .. } => allocate(memory, 1).map(drop),
    }
}

/// Host bytes a latency test keeps per round trip: its post stamp, the sample
/// made of it and the sorted copy perftest's statistics take, 8 B each.
const LAT_BYTES_PER_ROUND_TRIP: u64 = 24;

/// Checks, before anything is allocated, that the latency samples of -n round
/// trips fit in host memory (a -D run keeps as many as the time allows).
pub fn check_samples(plan: &Plan, budget: Option<MemoryBudget>) -> anyhow::Result<()> {
    let (Test::Lat, Length::Iters(n)) = (plan.bench.test, plan.length) else {
        return Ok(());
    };
    let Some(need) = n.checked_mul(LAT_BYTES_PER_ROUND_TRIP) else {
        bail!("-n/--iters {n}: the samples of so many round trips exceed any memory; use e.g. -n 1000");
    };
    match budget {
        Some(budget) if need > budget.bytes => bail!(
            "-n/--iters {n}: the latency samples need {} of host memory ({LAT_BYTES_PER_ROUND_TRIP} B a round trip) \
             but only {} is available ({}); lower -n/--iters",
            human_bytes(need),
            human_bytes(budget.bytes),
            budget.what
        ),
        _ => Ok(()),
    }
}

/// The soft RLIMIT_MEMLOCK in bytes, None when unlimited or unknown.
pub fn memlock_limit() -> Option<u64> {
    getrlimit(Resource::RLIMIT_MEMLOCK)
        .ok()
        .and_then(|(soft, _)| (soft != RLIM_INFINITY).then_some(soft))
}

/// The message for a registration of `total` bytes that failed with `os`: the
/// memlock limit and its fix when the limit is what stopped it.
pub fn registration_failure(total: u64, os: &std::io::Error, limit: Option<u64>) -> String {
    match limit {
        Some(limit) if total > limit => format!(
            "registering {} of buffers failed ({os}): RLIMIT_MEMLOCK is {}; raise it with `ulimit -l unlimited` \
             (limits.conf memlock, systemd LimitMEMLOCK=infinity, docker --ulimit memlock=-1) or grant CAP_IPC_LOCK \
             (Kubernetes: securityContext capabilities add IPC_LOCK)",
            human_bytes(total),
            human_bytes(limit)
        ),
        _ => format!("registering {} of buffers failed: {os}", human_bytes(total)),
    }
}

/// Registers `buf` with `access`. `total` is every byte this side
/// registers (for the memlock message).
pub fn register(
    pd: &Arc<ProtectionDomain>,
    buf: &Buffer,
    total: u64,
    access: AccessFlags,
) -> anyhow::Result<Arc<MemoryRegion>> {
    let registered = match buf {
        Buffer::Gpu(gpu) if gpu.path() == GpuDirect::DmaBuf => {
            let fd = gpu.dmabuf_fd()?;
            // SAFETY: the dma-buf covers the whole allocation from offset 0,
            // which outlives the region as below; the region keeps its own
            // reference to the dma-buf, so `fd` may close after this call.
            unsafe { pd.reg_dmabuf_mr(0, gpu.len(), gpu.addr(), fd.as_raw_fd(), access) }
        }
        // SAFETY: `buf` is valid for its length and outlives the region (the
        // caller keeps both together and drops the region first); GPU memory
        // is registered through nvidia-peermem.
        _ => unsafe { pd.reg_mr(buf.addr() as usize, buf.len(), access) },
    };
    registered.map_err(|e| match e.0 {
        RegisterMemoryRegionErrorKind::Ibverbs(os) => {
            anyhow::Error::msg(registration_failure(total, &os, memlock_limit()))
        }
        other => anyhow!(
            "registering {} of buffers failed: {other}",
            human_bytes(total)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_buffers_are_aligned_and_zeroed() {
        let b = allocate(Memory::Host, 5000).unwrap();
        assert_eq!(b.addr() % PAGE as u64, 0);
        assert_eq!(b.len(), 8192);
        // SAFETY: the buffer is 8192 bytes long.
        let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr(), b.len()) };
        assert!(bytes.iter().all(|&x| x == 0));
    }

    #[test]
    fn gpu_memory_without_a_gpu_says_why_in_one_line() {
        let Err(e) = check_memory(Memory::Cuda {
            gpu: 0,
            dmabuf: true,
        }) else {
            eprintln!("skipped: this host has a GPU usable for RDMA");
            return;
        };
        let e = format!("{e:#}");
        assert!(e.starts_with("--use_cuda=0 --use_cuda_dmabuf: "), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(check_memory(Memory::Host).is_ok());
    }

    #[test]
    fn latency_samples_are_in_the_memory_check() {
        use crate::verbs::flags::benchmark::{Benchmark, Verb};
        let lat = Benchmark::new(Verb::Write, Test::Lat);
        let plan = |n: &str| crate::verbs::flags::parse(lat, ["ib_write_lat", "-n", n]).unwrap();
        let budget = Some(MemoryBudget {
            bytes: 1 << 30,
            what: "a test".into(),
        });
        check_samples(&plan("1000"), budget.clone()).unwrap();
        let e = check_samples(&plan("10000000000000"), budget.clone()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "-n/--iters 10000000000000: the latency samples need 218.3 TiB of host memory (24 B a round trip) \
             but only 1 GiB is available (a test); lower -n/--iters"
        );
        let e = check_samples(&plan("18446744073709551615"), budget.clone()).unwrap_err();
        assert!(e.to_string().contains("exceed any memory"), "{e}");
        // Bandwidth tests keep no sample per message.
        let bw = Benchmark::new(Verb::Write, crate::verbs::flags::benchmark::Test::Bw);
        let p = crate::verbs::flags::parse(bw, ["ib_write_bw", "-n", "10000000000000"]).unwrap();
        check_samples(&p, budget).unwrap();
    }

    #[test]
    fn memlock_failures_name_the_limit_and_the_fix() {
        let os = std::io::Error::from_raw_os_error(nix::errno::Errno::ENOMEM as i32);
        let e = registration_failure(16 << 20, &os, Some(8 << 20));
        assert!(e.contains("RLIMIT_MEMLOCK is 8 MiB"), "{e}");
        assert!(
            e.contains("ulimit -l unlimited") && e.contains("IPC_LOCK"),
            "{e}"
        );
        let e = registration_failure(4 << 20, &os, Some(8 << 20));
        assert!(!e.contains("RLIMIT_MEMLOCK"), "{e}");
        assert!(!registration_failure(16 << 20, &os, None).contains("RLIMIT_MEMLOCK"));
    }
}
