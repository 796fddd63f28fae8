//! The `nccl` backend: buffers in GPU memory and NCCL's own calls, one GPU per rank
//! (chosen from the node-local rank) or, with `-g N`, N GPUs driven by one process
//! through grouped calls, as nccl-tests does.
//!
//! Timing follows nccl-tests' stream semantics with CUDA events: one event on each
//! rank's stream before the loop and one after every call, recorded without a host
//! synchronisation, so consecutive events bracket each iteration. `-G` captures the
//! loop (events included, as external event-record nodes) into a CUDA graph and
//! replays it. Opening is two steps so that a missing library or GPU on any rank
//! stops every rank before NCCL's collective initialisation: `prepare` (local) and
//! `connect` (every rank together).
//!
//! - `open`: the two steps of opening;
//! - `codes`: NCCL's type and op codes, and the tolerance of its avg;
//! - `options`: nccl-tests' GPU-only flags (-t -p -y -R -x -D -V) and their checks;
//! - `rank`: one rank's GPU, stream, communicator, buffers and events;
//! - `p2p`: the calls made of grouped ncclSend/ncclRecv (alltoallv, a pair's
//!   exchange) and the stream copy; `premul`: mulsum's PreMulSum op.

mod codes;
mod open;
pub mod options;
mod p2p;
mod premul;
mod rank;
mod timing;

pub use codes::abi_facts;
pub use open::{check_named, connect, prepare, probe, Prepared};

use super::{
    Backend, BackendInfo, BackendKind, BufRef, CollectiveId, Marks, MemoryBudget, OpArgs,
    RankDevice, Slot,
};
use crate::datatype::{DataType, RedOp};
use crate::gpu::nccl_lib::{self, Call, Nccl};
use crate::gpu::nccl_log::{most_frequent, Choice, LogCapture};
use crate::gpu::{self, DeviceBuffer};
use crate::job::UsageError;
use crate::report::facts::Location;
use anyhow::Context;
use codes::{float_avg_tolerance, nccl_type};
use cudarc::driver::sys;
use cudarc::nccl::sys::{ncclDataType_t, ncclRedOp_t};
use options::{NcclOptions, Register};
use rank::RankGpu;

pub struct NcclBackend {
    nccl: &'static Nccl,
    gpus: Vec<RankGpu>,
    nranks: usize,
    nodes: usize,
    capturing: bool,
    next_mark: usize,
    /// How `timer_start` asked the timed loop to be marked.
    pattern: Marks,
    /// The first error of `mark` (which cannot return one), reported by `timer_read`.
    mark_error: Option<String>,
    /// -t -p -y -R -x -D -V as used with this library, and what opening noted.
    options: NcclOptions,
    notes: Vec<String>,
    /// Where the log stood when the timed loop began, and NCCL's choices in the
    /// timed loops since `tuning` was last asked (rank 0 of the job only).
    tuning_from: u64,
    tuning_seen: Vec<Choice>,
    /// -M: GPU memory in use on each GPU before the communicators were made.
    memory_before_init: Vec<u64>,
    /// Dropped after the communicators: it echoes NCCL's WARN lines at exit.
    log: LogCapture,
}

pub(super) fn nccl_error(e: nccl_lib::NcclError) -> anyhow::Error {
    anyhow::anyhow!(e)
}

/// The header line on where the nccl_algo and nccl_proto columns come from.
fn tuning_note(version: i32) -> String {
    let subsys = std::env::var("NCCL_DEBUG_SUBSYS").unwrap_or_default();
    if version < 2_22_00 {
        "NCCL algorithm/protocol: not logged by NCCL < 2.22 (columns empty)".into()
    } else if !subsys.to_ascii_uppercase().contains("TUNING") && !subsys.eq_ignore_ascii_case("ALL")
    {
        format!("NCCL algorithm/protocol: not logged (NCCL_DEBUG_SUBSYS={subsys} has no TUNING)")
    } else {
        "NCCL algorithm/protocol: from NCCL's TUNING log, one line per call on rank 0 (a host-side write          each call; NCCL_DEBUG_SUBSYS=INIT,NET,ENV turns it off)"
            .into()
    }
}

impl NcclBackend {
    /// A one-element all-reduce on a scratch buffer of each GPU.
    fn first_connection(&mut self) -> anyhow::Result<()> {
        let mut scratch = Vec::with_capacity(self.gpus.len());
        for g in &self.gpus {
            scratch.push(DeviceBuffer::zeroed(&g.ctx, 4)?);
        }
        self.group_start()?;
        for (g, buffer) in self.gpus.iter().zip(&scratch) {
            let call = Call {
                send: buffer.at(0),
                recv: buffer.at(0),
                count: 1,
                dtype: ncclDataType_t::ncclFloat32,
                op: ncclRedOp_t::ncclSum,
                root: 0,
                comm: g.comm,
                stream: g.stream.cu_stream(),
            };
            // SAFETY: a 4-byte buffer of this GPU, in place.
            unsafe { self.nccl.all_reduce(&call) }.map_err(nccl_error)?;
        }
        self.group_end()?;
        self.synchronize()
    }

    fn gpu(&self, args: &OpArgs) -> &RankGpu {
        debug_assert_eq!(args.send.device, args.recv.device);
        &self.gpus[args.send.device]
    }

    pub(super) fn call(&self, args: &OpArgs) -> anyhow::Result<(Call, usize)> {
        let g = self.gpu(args);
        let op = self.op(g, args)?;
        Ok((
            Call {
                send: g.addr(args.send)?,
                recv: g.addr(args.recv)?,
                count: args.count,
                dtype: nccl_type(args.dtype),
                op,
                root: args.root,
                comm: g.comm,
                stream: g.stream.cu_stream(),
            },
            g.rank,
        ))
    }

    fn chunk_bytes(args: &OpArgs) -> u64 {
        (args.count * args.dtype.size()) as u64
    }

    pub(super) fn grouped(&self, issue: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
        self.nccl.group_start().map_err(nccl_error)?;
        let issued = issue();
        let ended = self.nccl.group_end().map_err(nccl_error);
        issued.and(ended)
    }
}

impl Backend for NcclBackend {
    fn info(&self) -> BackendInfo {
        let report = self.log.read();
        let alltoall = if self.nccl.has_native_alltoall() {
            "AlltoAll, Gather, Scatter: ncclAlltoAll, ncclGather, ncclScatter (NCCL >= 2.28)"
        } else {
            "AlltoAll, Gather, Scatter: grouped ncclSend/ncclRecv, as nccl-tests (NCCL < 2.28)"
        };
        BackendInfo {
            kind: BackendKind::Nccl,
            transport: report.summary(),
            library_version: self.nccl.version_string(),
            devices: self
                .gpus
                .iter()
                .map(|g| RankDevice {
                    ordinal: g.info.ordinal,
                    location: Location::Gpu(g.info.bus_id.clone()),
                    name: g.info.name.clone(),
                })
                .collect(),
            notes: [
                vec![
                    format!("NCCL library: {}", self.nccl.describe()),
                    alltoall.to_string(),
                ],
                self.options.describe(self.nccl.version()),
                vec![tuning_note(self.nccl.version())],
            ]
            .concat(),
            warnings: [report.misconfigurations(self.nodes), self.notes.clone()].concat(),
        }
    }

    fn devices(&self) -> usize {
        self.gpus.len()
    }

    fn memory_available(&self) -> Option<MemoryBudget> {
        self.gpus
            .iter()
            .filter_map(|g| Some((gpu::free_bytes(&g.ctx).ok()?, &g.info)))
            .min_by_key(|(free, _)| *free)
            .map(|(bytes, info)| MemoryBudget {
                bytes,
                what: format!("free memory of {}", info.describe()),
            })
    }

    fn alloc(&mut self, send_bytes: usize, recv_bytes: usize) -> anyhow::Result<()> {
        self.deregister();
        let nccl = self.nccl;
        let register = self.options.register;
        for g in &mut self.gpus {
            g.send = None;
            g.recv = None;
            let buffer = |len| match register {
                // As nccl-tests (2.19+): ncclMemAlloc, which registration and windows want.
                Register::Local | Register::Symmetric => DeviceBuffer::from_nccl(&g.ctx, nccl, len),
                Register::Off => DeviceBuffer::zeroed(&g.ctx, len),
            };
            g.send = Some(buffer(send_bytes)?);
            g.recv = Some(buffer(recv_bytes)?);
        }
        if register == Register::Off {
            return Ok(());
        }
        // As nccl-tests: every GPU's registrations in one group (windows are collective).
        let window = register == Register::Symmetric;
        let mut made = Vec::new();
        let grouped = self.grouped(|| {
            for (i, g) in self.gpus.iter().enumerate() {
                g.ctx.bind_to_thread()?;
                for slot in [Slot::Send, Slot::Recv] {
                    let b = g.buffer(slot)?;
                    // SAFETY: the whole of a live allocation of this communicator's GPU.
                    let r = unsafe { self.nccl.register(g.comm, b.at(0), b.len().max(1), window) }
                        .map_err(nccl_error)
                        .with_context(|| format!("rank {} on {}", g.rank, g.info.describe()))?;
                    made.push((i, r));
                }
            }
            Ok(())
        });
        for (i, r) in made {
            self.gpus[i].registrations.push(r);
        }
        grouped
    }

    fn write(&mut self, at: BufRef, data: &[u8]) -> anyhow::Result<()> {
        self.gpus[at.device].buffer(at.slot)?.write(at.offset, data)
    }

    fn read(&mut self, at: BufRef, out: &mut [u8]) -> anyhow::Result<()> {
        self.gpus[at.device].buffer(at.slot)?.read(at.offset, out)
    }

    fn all_reduce(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let (c, _) = self.call(args)?;
        // SAFETY: addresses inside this rank's buffers, sized by alloc for the sweep.
        unsafe { self.nccl.all_reduce(&c) }.map_err(nccl_error)
    }

    fn all_gather(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let (c, _) = self.call(args)?;
        // SAFETY: as above.
        unsafe { self.nccl.all_gather(&c) }.map_err(nccl_error)
    }

    fn broadcast(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let (c, _) = self.call(args)?;
        // SAFETY: as above.
        unsafe { self.nccl.broadcast(&c) }.map_err(nccl_error)
    }

    fn reduce(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let (c, _) = self.call(args)?;
        // SAFETY: as above.
        unsafe { self.nccl.reduce(&c) }.map_err(nccl_error)
    }

    fn reduce_scatter(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let (c, _) = self.call(args)?;
        // SAFETY: as above.
        unsafe { self.nccl.reduce_scatter(&c) }.map_err(nccl_error)
    }

    fn alltoall(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let (c, _) = self.call(args)?;
        // SAFETY: as above; the buffers hold nranks chunks.
        if let Some(done) = unsafe { self.nccl.alltoall(&c) } {
            return done.map_err(nccl_error);
        }
        let chunk = Self::chunk_bytes(args);
        self.grouped(|| {
            for peer in 0..self.nranks {
                let at = peer as u64 * chunk;
                // SAFETY: chunk `peer` of each buffer.
                unsafe {
                    self.nccl.send(&c, c.send + at, peer).map_err(nccl_error)?;
                    self.nccl.recv(&c, c.recv + at, peer).map_err(nccl_error)?;
                }
            }
            Ok(())
        })
    }

    fn gather(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let (c, rank) = self.call(args)?;
        // SAFETY: as above; the root's receive buffer holds nranks chunks.
        if let Some(done) = unsafe { self.nccl.gather(&c) } {
            return done.map_err(nccl_error);
        }
        let chunk = Self::chunk_bytes(args);
        self.grouped(|| {
            // SAFETY: as above.
            unsafe {
                self.nccl.send(&c, c.send, c.root).map_err(nccl_error)?;
                if rank == c.root {
                    for peer in 0..self.nranks {
                        let at = c.recv + peer as u64 * chunk;
                        self.nccl.recv(&c, at, peer).map_err(nccl_error)?;
                    }
                }
            }
            Ok(())
        })
    }

    fn scatter(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let (c, rank) = self.call(args)?;
        // SAFETY: as above; the root's send buffer holds nranks chunks.
        if let Some(done) = unsafe { self.nccl.scatter(&c) } {
            return done.map_err(nccl_error);
        }
        let chunk = Self::chunk_bytes(args);
        self.grouped(|| {
            // SAFETY: as above.
            unsafe {
                if rank == c.root {
                    for peer in 0..self.nranks {
                        let at = c.send + peer as u64 * chunk;
                        self.nccl.send(&c, at, peer).map_err(nccl_error)?;
                    }
                }
                self.nccl.recv(&c, c.recv, c.root).map_err(nccl_error)?;
            }
            Ok(())
        })
    }

    fn sendrecv(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let (c, rank) = self.call(args)?;
        let (to, from) = (
            (rank + 1) % self.nranks,
            (rank + self.nranks - 1) % self.nranks,
        );
        self.grouped(|| {
            // SAFETY: as above.
            unsafe {
                self.nccl.send(&c, c.send, to).map_err(nccl_error)?;
                self.nccl.recv(&c, c.recv, from).map_err(nccl_error)?;
            }
            Ok(())
        })
    }

    fn alltoallv(
        &mut self,
        args: &OpArgs,
        peer: &dyn Fn(usize, usize) -> usize,
    ) -> anyhow::Result<()> {
        self.grouped_alltoallv(args, peer)
    }

    fn exchange(&mut self, args: &OpArgs, peer: usize) -> anyhow::Result<()> {
        self.grouped_exchange(args, peer)
    }

    fn copy(&mut self, from: BufRef, to: BufRef, bytes: usize) -> anyhow::Result<()> {
        self.stream_copy(from, to, bytes)
    }

    fn rank_of(&self, device: usize) -> usize {
        self.gpus[device].rank
    }

    fn nranks(&self) -> usize {
        self.nranks
    }

    /// fp8 needs NCCL 2.24 and sm90 on every GPU, mulsum NCCL 2.11, as nccl-tests.
    fn supports_datatype(&self, dtype: DataType) -> Result<(), UsageError> {
        if !matches!(dtype, DataType::F8e4m3 | DataType::F8e5m2) {
            return Ok(());
        }
        if self.nccl.version() < 22400 {
            return Err(UsageError(format!(
                "-d/--datatype {dtype}: {} has no 8-bit floats (NCCL 2.24+); load a newer NCCL with --nccl-lib, or use -d half",
                self.nccl.version_string()
            )));
        }
        let major = sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR;
        for g in &self.gpus {
            match g.ctx.attribute(major) {
                Ok(m) if m >= 9 => {}
                _ => {
                    return Err(UsageError(format!(
                        "-d/--datatype {dtype}: {} is older than sm90, where NCCL has no 8-bit floats; use -d half or bfloat16",
                        g.info.describe()
                    )))
                }
            }
        }
        Ok(())
    }

    fn supports_op(&self, op: RedOp) -> Result<(), UsageError> {
        match op == RedOp::Mulsum && !self.nccl.has_premulsum() {
            true => Err(UsageError(format!(
                "-o/--op mulsum: {} has no PreMulSum op (NCCL 2.11+); load a newer NCCL with --nccl-lib",
                self.nccl.version_string()
            ))),
            false => Ok(()),
        }
    }

    fn group_start(&mut self) -> anyhow::Result<()> {
        self.nccl.group_start().map_err(nccl_error)
    }

    fn group_end(&mut self) -> anyhow::Result<()> {
        self.nccl.group_end().map_err(nccl_error)
    }

    fn checks_in_place(&self, collective: CollectiveId) -> bool {
        !matches!(
            collective,
            CollectiveId::AlltoAll | CollectiveId::SendRecv | CollectiveId::AlltoAllv
        )
    }

    fn tolerance(&self, dtype: DataType, op: RedOp, nranks: usize) -> f64 {
        match op {
            RedOp::Avg => float_avg_tolerance(dtype, nranks),
            _ => 0.0,
        }
    }

    /// Polls every stream, checking NCCL's asynchronous errors as nccl-tests does, so
    /// that a failed peer surfaces as an error rather than a wait for ever.
    fn synchronize(&mut self) -> anyhow::Result<()> {
        let mut pending: Vec<usize> = (0..self.gpus.len()).collect();
        while !pending.is_empty() {
            let mut still = Vec::with_capacity(pending.len());
            for &i in &pending {
                let g = &self.gpus[i];
                g.ctx.bind_to_thread()?;
                // SAFETY: a live stream of this context.
                match unsafe { sys::cuStreamQuery(g.stream.cu_stream()) } {
                    sys::cudaError_enum::CUDA_SUCCESS => {}
                    sys::cudaError_enum::CUDA_ERROR_NOT_READY => {
                        // SAFETY: a live communicator.
                        if let Err(e) = unsafe { self.nccl.async_error(g.comm) } {
                            return Err(anyhow::anyhow!(e).context(format!(
                                "rank {} on {}",
                                g.rank,
                                g.info.describe()
                            )));
                        }
                        still.push(i);
                    }
                    other => {
                        return Err(anyhow::anyhow!(cudarc::driver::DriverError(other))
                            .context(format!("rank {} on {}", g.rank, g.info.describe())))
                    }
                }
            }
            pending = still;
            if !pending.is_empty() {
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    fn begin_capture(&mut self) -> anyhow::Result<()> {
        self.capture_begin()
    }

    fn end_capture(&mut self) -> anyhow::Result<()> {
        self.capture_end()
    }

    fn replay(&mut self, launches: usize) -> anyhow::Result<()> {
        self.replay_graphs(launches)
    }

    fn timer_start(&mut self, iterations: usize, marks: Marks) -> anyhow::Result<()> {
        self.events_start(iterations, marks)
    }

    fn mark(&mut self) {
        self.event_mark();
    }

    fn timer_read(&mut self, per_iteration: &mut [f64]) -> anyhow::Result<f64> {
        self.events_read(per_iteration)
    }

    fn tuning(&mut self) -> Option<(String, String)> {
        most_frequent(&std::mem::take(&mut self.tuning_seen)).map(|c| (c.algo, c.proto))
    }

    fn memory_in_use(&self) -> Vec<u64> {
        self.gpus
            .iter()
            .map(|g| gpu::used_bytes(&g.ctx).unwrap_or(0))
            .collect()
    }

    fn memory_before_init(&self) -> Option<Vec<u64>> {
        Some(self.memory_before_init.clone())
    }
}

impl NcclBackend {
    /// Undoes -R's registrations (before the buffers or communicators go).
    fn deregister(&mut self) {
        for g in &mut self.gpus {
            let _ = g.ctx.bind_to_thread();
            let _ = g.stream.synchronize();
            for r in g.registrations.drain(..) {
                // SAFETY: made by `register` on this live communicator, undone once.
                if let Err(e) = unsafe { self.nccl.deregister(g.comm, &r) } {
                    eprintln!("rank {}: {e}", g.rank);
                }
            }
        }
    }

    /// Whether this process holds rank 0 of the job, the one NCCL logs its choices on.
    fn logs_tuning(&self) -> bool {
        self.gpus.first().is_some_and(|g| g.rank == 0)
    }
}

impl Drop for NcclBackend {
    fn drop(&mut self) {
        self.deregister();
        for g in &self.gpus {
            let _ = g.ctx.bind_to_thread();
            let _ = g.stream.synchronize();
            if g.premul.get().is_some() {
                // SAFETY: the op alive on this communicator, its calls completed.
                let _ = unsafe { self.nccl.red_op_destroy(ncclRedOp_t::ncclNumOps, g.comm) };
            }
            // SAFETY: each communicator is destroyed once, after its work completed.
            if let Err(e) = unsafe { self.nccl.comm_destroy(g.comm) } {
                eprintln!("rank {}: {e}", g.rank);
            }
        }
    }
}
