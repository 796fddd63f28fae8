//! CUDA through the driver API (libcuda.so.1, opened at run time by cudarc): finding
//! the driver and the GPUs, the facts about a GPU that headers and CSV rows carry,
//! and the device and pinned host buffers of the nccl backend, `copy_bw` and the
//! verbs binaries' `--use_cuda`.
//!
//! cudarc panics on its first call when libcuda is missing, so every entry point
//! here goes through [`driver`] first, which turns absence into an error.
//!
//! - `nccl_lib`: finding and opening libnccl.so.2 (cudarc never looks for that name).
//! - `nccl_log`: what NCCL's INFO log says about the transports it chose.
//! - `links`: the NVLink and memory (NVML) limits copies are compared with.

pub mod links;
pub mod nccl_lib;
pub mod nccl_log;
pub mod nccl_search;

use anyhow::{bail, Context};
use cudarc::driver::sys::{self, cudaError_enum, CUdevice_attribute};
use cudarc::driver::{result, CudaContext};
use serde::{Deserialize, Serialize};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::{Arc, OnceLock};

/// Why no GPU can be used on this host, in one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GpuAbsent {
    #[error("libcuda.so.1 not found: no NVIDIA driver on this host (nvidia-smi lists the GPUs where there is one)")]
    NoDriver,
    #[error("the NVIDIA driver did not initialise (cuInit: {0}); check that its kernel module is loaded (nvidia-smi)")]
    InitFailed(String),
    #[error("no CUDA device visible{0}")]
    NoDevice(String),
}

fn visible_devices_note() -> String {
    std::env::var("CUDA_VISIBLE_DEVICES")
        .map(|v| format!(" (CUDA_VISIBLE_DEVICES={v})"))
        .unwrap_or_default()
}

/// Loads and initialises the driver once; the number of visible GPUs, or why none.
pub fn driver() -> Result<usize, GpuAbsent> {
    static STATE: OnceLock<Result<usize, GpuAbsent>> = OnceLock::new();
    STATE
        .get_or_init(|| {
            // SAFETY: only tries to open libcuda under cudarc's names; calls nothing.
            if !unsafe { sys::is_culib_present() } {
                return Err(GpuAbsent::NoDriver);
            }
            result::init().map_err(|e| match e.0 {
                cudaError_enum::CUDA_ERROR_NO_DEVICE => GpuAbsent::NoDevice(visible_devices_note()),
                _ => GpuAbsent::InitFailed(e.to_string()),
            })?;
            match result::device::get_count() {
                Ok(n) if n > 0 => Ok(n as usize),
                Ok(_) => Err(GpuAbsent::NoDevice(visible_devices_note())),
                Err(e) => Err(GpuAbsent::InitFailed(e.to_string())),
            }
        })
        .clone()
}

/// Opens GPU `ordinal` (its primary context, which NCCL's runtime shares) and makes
/// it current on this thread.
pub fn open(ordinal: usize) -> anyhow::Result<Arc<CudaContext>> {
    let count = driver()?;
    if ordinal >= count {
        bail!(
            "GPU {ordinal} does not exist: {count} visible{} (GPUs are numbered from 0)",
            visible_devices_note()
        );
    }
    CudaContext::new(ordinal).with_context(|| format!("cannot open GPU {ordinal}"))
}

/// What the header and the CSV `device` column say about a GPU.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    /// sysfs spelling: "0000:18:00.0".
    pub bus_id: String,
    pub total_bytes: u64,
}

impl GpuInfo {
    pub fn of(ctx: &CudaContext) -> anyhow::Result<GpuInfo> {
        let attr = |a| ctx.attribute(a).map(|v| v as u32);
        let bus_id = format!(
            "{:04x}:{:02x}:{:02x}.0",
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
        );
        Ok(GpuInfo {
            ordinal: ctx.ordinal(),
            name: ctx.name()?,
            bus_id,
            total_bytes: ctx.total_mem()? as u64,
        })
    }

    /// "GPU 0 NVIDIA H200 (0000:18:00.0)"
    pub fn describe(&self) -> String {
        format!("GPU {} {} ({})", self.ordinal, self.name, self.bus_id)
    }
}

/// Bytes in use on the GPU of `ctx` now (total - free), by every process on it.
pub fn used_bytes(ctx: &CudaContext) -> anyhow::Result<u64> {
    let (free, total) = ctx.mem_get_info()?;
    Ok(total.saturating_sub(free) as u64)
}

/// Free bytes on the GPU of `ctx` now.
pub fn free_bytes(ctx: &CudaContext) -> anyhow::Result<u64> {
    Ok(ctx.mem_get_info()?.0 as u64)
}

/// Device memory from cuMemAlloc: plain allocations that NCCL, peer copies and
/// GPUDirect RDMA (nvidia-peermem or dma-buf) all accept, unlike pool memory.
pub struct DeviceBuffer {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
    len: usize,
    /// Some: from ncclMemAlloc (-R), freed with ncclMemFree.
    nccl: Option<&'static nccl_lib::Nccl>,
}

impl DeviceBuffer {
    /// `len` zeroed bytes on the GPU of `ctx` (at least one, so every buffer has an address).
    pub fn zeroed(ctx: &Arc<CudaContext>, len: usize) -> anyhow::Result<DeviceBuffer> {
        ctx.bind_to_thread()?;
        let bytes = len.max(1);
        // SAFETY: a plain allocation, freed in Drop; zeroed before use.
        let ptr = unsafe { result::malloc_sync(bytes) }.with_context(|| {
            format!(
                "cannot allocate {bytes} bytes on GPU {} ({} free)",
                ctx.ordinal(),
                ctx.mem_get_info()
                    .map(|(free, _)| crate::sizes::human_bytes(free as u64))
                    .unwrap_or_else(|_| "unknown".into())
            )
        })?;
        DeviceBuffer {
            ctx: ctx.clone(),
            ptr,
            len,
            nccl: None,
        }
        .cleared()
    }

    /// `len` zeroed bytes from ncclMemAlloc (NCCL 2.19+: memory NCCL can register
    /// and map into symmetric windows), as nccl-tests allocates its buffers.
    pub fn from_nccl(
        ctx: &Arc<CudaContext>,
        nccl: &'static nccl_lib::Nccl,
        len: usize,
    ) -> anyhow::Result<DeviceBuffer> {
        ctx.bind_to_thread()?;
        let ptr = nccl
            .mem_alloc(len)
            .with_context(|| format!("cannot allocate {len} bytes on GPU {}", ctx.ordinal()))?;
        DeviceBuffer {
            ctx: ctx.clone(),
            ptr,
            len,
            nccl: Some(nccl),
        }
        .cleared()
    }

    fn cleared(self) -> anyhow::Result<DeviceBuffer> {
        // SAFETY: the range was just allocated (at least one byte).
        unsafe { result::memset_d8_sync(self.ptr, 0, self.len.max(1)) }?;
        // A memset of device memory may return before it is done.
        self.ctx.synchronize()?;
        Ok(self)
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The device address of byte `offset`.
    pub fn at(&self, offset: usize) -> sys::CUdeviceptr {
        debug_assert!(offset <= self.len, "offset {offset} beyond {}", self.len);
        self.ptr + offset as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check_range(&self, offset: usize, bytes: usize) -> anyhow::Result<()> {
        if offset.checked_add(bytes).is_none_or(|end| end > self.len) {
            bail!(
                "bytes {offset}..{} lie outside the {}-byte GPU buffer",
                offset.saturating_add(bytes),
                self.len
            );
        }
        Ok(())
    }

    /// Copies `data` to byte `offset` and waits until the device holds it.
    pub fn write(&self, offset: usize, data: &[u8]) -> anyhow::Result<()> {
        self.check_range(offset, data.len())?;
        self.ctx.bind_to_thread()?;
        // SAFETY: the range lies inside the allocation (checked above).
        unsafe { result::memcpy_htod_sync(self.at(offset), data) }?;
        // From pageable memory the copy returns once staged, before its DMA lands;
        // work on other streams must not read the old bytes.
        self.ctx.synchronize()?;
        Ok(())
    }

    /// Copies the bytes at `offset` into `out` and waits for the copy.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> anyhow::Result<()> {
        self.check_range(offset, out.len())?;
        self.ctx.bind_to_thread()?;
        // SAFETY: as above.
        unsafe { result::memcpy_dtoh_sync(out, self.at(offset)) }?;
        Ok(())
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // Errors at exit (a GPU already in an error state) are not worth a panic.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by malloc_sync (or ncclMemAlloc) and freed once.
        let _freed = match self.nccl {
            Some(nccl) => unsafe { nccl.mem_free(self.ptr) }.is_ok(),
            None => unsafe { result::free_sync(self.ptr) }.is_ok(),
        };
    }
}

/// Page-locked host memory (cuMemHostAlloc, portable to every context): what
/// host-device copies need to run at the link's speed.
pub struct PinnedBuffer {
    ctx: Arc<CudaContext>,
    ptr: *mut u8,
    len: usize,
}

impl PinnedBuffer {
    pub fn new(ctx: &Arc<CudaContext>, len: usize) -> anyhow::Result<PinnedBuffer> {
        ctx.bind_to_thread()?;
        // SAFETY: freed in Drop; filled before it is read.
        let ptr = unsafe { result::malloc_host(len.max(1), sys::CU_MEMHOSTALLOC_PORTABLE) }
            .with_context(|| format!("cannot allocate {len} bytes of pinned host memory"))?
            as *mut u8;
        // SAFETY: ptr holds len writable bytes.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(PinnedBuffer {
            ctx: ctx.clone(),
            ptr,
            len,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by malloc_host and freed once.
        let _ = unsafe { result::free_host(self.ptr as *mut std::ffi::c_void) };
    }
}

/// How a NIC can reach GPU memory for the verbs binaries' `--use_cuda`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuDirect {
    /// ibv_reg_mr on the device address, through the nvidia-peermem kernel module.
    PeerMem,
    /// ibv_reg_dmabuf_mr on a dma-buf file descriptor exported by the driver.
    DmaBuf,
}

/// Whether nvidia-peermem (or the older nv_peer_mem) is loaded.
pub fn peermem_loaded() -> bool {
    [
        "/sys/module/nvidia_peermem",
        "/sys/kernel/mm/memory_peers/nv_mem",
    ]
    .iter()
    .any(|p| std::path::Path::new(p).exists())
}

/// GPU memory for RDMA (`--use_cuda=<gpu>`, `--use_cuda_dmabuf`): a device buffer
/// whose size is rounded up to 2 MiB, so its start and end are page aligned as
/// dma-buf export and GPUDirect pinning require.
pub struct RdmaGpuBuffer {
    buffer: DeviceBuffer,
    info: GpuInfo,
    path: GpuDirect,
}

const RDMA_GRANULE: usize = 2 << 20;

impl RdmaGpuBuffer {
    /// Allocates `len` bytes on GPU `ordinal` and checks that `path` can register
    /// them; errors name what is missing (no GPU, peermem not loaded, no dma-buf).
    pub fn alloc(ordinal: usize, len: usize, path: GpuDirect) -> anyhow::Result<RdmaGpuBuffer> {
        let ctx = open(ordinal)?;
        let info = GpuInfo::of(&ctx)?;
        match path {
            GpuDirect::PeerMem if !peermem_loaded() => bail!(
                "{}: GPUDirect RDMA through ibv_reg_mr needs the nvidia_peermem kernel module, which is not loaded \
                 (modprobe nvidia_peermem), or use --use_cuda_dmabuf",
                info.describe()
            ),
            GpuDirect::DmaBuf
                if ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)? == 0 =>
            {
                bail!(
                    "{}: this driver cannot export GPU memory as dma-buf (needs the open GPU kernel module, \
                     driver >= 515 and Linux >= 5.12); load nvidia_peermem and use --use_cuda instead",
                    info.describe()
                )
            }
            _ => {}
        }
        let bytes = len.max(1).div_ceil(RDMA_GRANULE) * RDMA_GRANULE;
        let buffer = DeviceBuffer::zeroed(&ctx, bytes)?;
        // NVIDIA's GPUDirect RDMA guide: synchronous memory operations on this range, so
        // that a NIC's view is never behind a copy that has returned.
        let sync_memops: u32 = 1;
        // SAFETY: a valid attribute on a live allocation.
        unsafe {
            sys::cuPointerSetAttribute(
                &sync_memops as *const u32 as *const std::ffi::c_void,
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                buffer.at(0),
            )
        }
        .result()
        .context("cuPointerSetAttribute(SYNC_MEMOPS)")?;
        Ok(RdmaGpuBuffer { buffer, info, path })
    }

    /// The device address to register (ibv_reg_mr) or to post in work requests.
    pub fn addr(&self) -> u64 {
        self.buffer.at(0)
    }

    /// Usable bytes (the allocation's size, a multiple of 2 MiB).
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    pub fn path(&self) -> GpuDirect {
        self.path
    }

    pub fn write(&self, offset: usize, data: &[u8]) -> anyhow::Result<()> {
        self.buffer.write(offset, data)
    }

    pub fn read(&self, offset: usize, out: &mut [u8]) -> anyhow::Result<()> {
        self.buffer.read(offset, out)
    }

    /// A dma-buf file descriptor for the whole buffer (offset 0, `len()` bytes), for
    /// ibv_reg_dmabuf_mr(pd, 0, len, addr, fd, access).
    pub fn dmabuf_fd(&self) -> anyhow::Result<OwnedFd> {
        let mut fd: std::os::raw::c_int = -1;
        self.buffer.context().bind_to_thread()?;
        // SAFETY: the range is the whole, page-aligned allocation; fd is written on success.
        unsafe {
            sys::cuMemGetHandleForAddressRange(
                &mut fd as *mut _ as *mut std::ffi::c_void,
                self.addr(),
                self.len(),
                sys::CUmemRangeHandleType::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                0,
            )
        }
        .result()
        .with_context(|| format!("{}: dma-buf export failed", self.info.describe()))?;
        // SAFETY: the driver returned a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}
