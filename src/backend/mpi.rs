//! The `mpi` backend: host memory and the MPI library's own collectives.
//!
//! Calls go through `mpi::ffi` because the driver is type-erased (a datatype chosen
//! at run time, as nccl-tests passes ncclDataType_t) and needs MPI_IN_PLACE, which
//! rsmpi's safe collectives do not offer.

use super::mpi_call::{Binding, MpiCall, Xfer};
use super::mpi_ops::{
    alltoallv, count, float16_ops, mpi_datatype, mpi_op, sendrecv, split, v_counts,
};
use super::{
    Backend, BackendInfo, BackendKind, BufRef, HostClock, Marks, MemoryBudget, OpArgs, RankDevice,
    Slot,
};
use crate::datatype::{
    divide_in_place, premul_scalar, scale_in_place, DataType, RedOp, F8E4M3, F8E5M2,
};
use crate::job::world::World;
use crate::report::facts::Location;
use crate::watchdog::CallCount;
use anyhow::{bail, Context};
use half::{bf16, f16};
use mpi::ffi;
use mpi::raw::AsRaw;
use std::os::raw::{c_int, c_void};

extern "C" {
    fn fabricbench_mpi_in_place() -> *mut c_void;
}

/// A host buffer, page-aligned as OSU allocates its buffers (and as GPU memory
/// is), so that the same call on the same sizes moves the same cache lines.
struct HostBuffer {
    start: std::ptr::NonNull<u8>,
    len: usize,
}

const PAGE: usize = 4096;

impl HostBuffer {
    fn layout(len: usize) -> std::alloc::Layout {
        // A page-multiple size and alignment: valid for any len that fits in memory.
        std::alloc::Layout::from_size_align(len.max(1).next_multiple_of(PAGE), PAGE)
            .expect("a page-aligned layout")
    }

    fn new(len: usize) -> anyhow::Result<HostBuffer> {
        if len > isize::MAX as usize - PAGE {
            bail!("cannot allocate {len} bytes of host memory");
        }
        // SAFETY: a layout of non-zero size.
        let start = unsafe { std::alloc::alloc_zeroed(Self::layout(len)) };
        let start = std::ptr::NonNull::new(start)
            .with_context(|| format!("cannot allocate {len} bytes of host memory"))?;
        Ok(HostBuffer { start, len })
    }
    fn empty() -> HostBuffer {
        HostBuffer::new(0).expect("one page of host memory")
    }
    fn as_ptr(&self) -> *mut u8 {
        self.start.as_ptr()
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: allocated for len bytes, zeroed, owned by self.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.len) }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, unique borrow.
        unsafe { std::slice::from_raw_parts_mut(self.start.as_ptr(), self.len) }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.start.as_ptr(), Self::layout(self.len)) }
    }
}

pub struct MpiBackend {
    comm: ffi::MPI_Comm,
    rank: usize,
    nranks: usize,
    nnodes: usize,
    local_rank: usize,
    local_size: usize,
    send: HostBuffer,
    recv: HostBuffer,
    clock: HostClock,
    /// MPI_Reduce_scatter's receive counts: the same count for every rank.
    scatter_counts: Vec<c_int>,
    /// Every datatype's and (datatype, op)'s MPI handle, indexed by the enums:
    /// resolved once, so a timed call only loads its two handles.
    datatypes: [ffi::MPI_Datatype; DataType::ALL.len()],
    ops: [[ffi::MPI_Op; RedOp::ALL.len()]; DataType::ALL.len()],
    /// alltoallv's send counts, send displacements, receive counts and receive
    /// displacements (elements), rank after rank: filled per call, never reallocated.
    v_counts: Vec<c_int>,
    /// The timed loop's bound call (`begin_bind`..`run_bound`).
    binding: Binding,
}

impl MpiBackend {
    /// Over the job's ranks, or (NCCL_TESTS_SPLIT) those of this rank's `group`;
    /// the world stays for every exchange outside the collective calls.
    pub fn new(world: &World, group: Option<c_int>) -> anyhow::Result<MpiBackend> {
        let (comm, rank, nranks) = match group {
            None => (world.comm.as_raw(), world.rank, world.size),
            Some(color) => split(world, color)?,
        };
        // Reductions MPI lacks for the narrow floats, [half|bf16|f8e4m3|f8e5m2][sum|prod|max|min].
        let half_ops = [
            float16_ops::<f16>()?,
            float16_ops::<bf16>()?,
            float16_ops::<F8E4M3>()?,
            float16_ops::<F8E5M2>()?,
        ];
        Ok(MpiBackend {
            comm,
            rank,
            nranks,
            nnodes: world.nodes().len(),
            local_rank: world.local_rank,
            local_size: world.local_size,
            send: HostBuffer::empty(),
            recv: HostBuffer::empty(),
            clock: HostClock::default(),
            scatter_counts: vec![0; world.size],
            datatypes: DataType::ALL.map(mpi_datatype),
            ops: DataType::ALL.map(|d| RedOp::ALL.map(|o| mpi_op(&half_ops, d, o))),
            v_counts: vec![0; 4 * nranks],
            binding: Binding::Off,
        })
    }

    /// Issues `call`, or while binding captures it (`bare`: no work around it that a
    /// repeat would leave out). Ok(false) when captured: the caller skips that work.
    fn issue(&mut self, call: MpiCall, bare: bool) -> anyhow::Result<bool> {
        if self.binding.capturing() {
            self.binding.capture(call, bare);
            return Ok(false);
        }
        // SAFETY: resolved just now from this backend's buffers and handles.
        unsafe { call.issue(self.comm) }?;
        Ok(true)
    }

    /// Whether a call made now is only being captured, and, if so, that it cannot be
    /// repeated as a bound call (its steps are not one resolved MPI call).
    fn refuses_binding(&mut self) -> bool {
        let capturing = self.binding.capturing();
        if capturing {
            self.binding = Binding::Refused;
        }
        capturing
    }

    fn datatype(&self, args: &OpArgs) -> ffi::MPI_Datatype {
        self.datatypes[args.dtype as usize]
    }

    fn op(&self, args: &OpArgs) -> ffi::MPI_Op {
        self.ops[args.dtype as usize][args.op as usize]
    }

    /// The call's buffers, count and datatype; the send buffer is MPI_IN_PLACE where
    /// the call is in place and `in_place_here` (this rank's side of it takes it).
    fn xfer(&mut self, args: &OpArgs, in_place_here: bool) -> anyhow::Result<Xfer> {
        let send = if args.in_place && in_place_here {
            // SAFETY: the shim returns the MPI_IN_PLACE constant.
            unsafe { fabricbench_mpi_in_place() }
        } else {
            self.ptr(args.send)
        };
        Ok(Xfer {
            send,
            recv: self.ptr(args.recv),
            n: count(args)?,
            dt: self.datatype(args),
        })
    }

    fn ptr(&mut self, at: BufRef) -> *mut c_void {
        let buffer = match at.slot {
            Slot::Send => &mut self.send,
            Slot::Recv => &mut self.recv,
        };
        // SAFETY: the driver keeps offsets inside the buffers it sized with alloc.
        unsafe { buffer.as_ptr().add(at.offset) as *mut c_void }
    }

    /// avg = sum, then a division by the rank count on the ranks that hold a result.
    fn finish_avg(&mut self, args: &OpArgs, result_count: usize) {
        if args.op == RedOp::Avg {
            let bytes = result_count * args.dtype.size();
            let start = self.ptr(args.recv) as *mut u8;
            // SAFETY: the result region lies inside the receive buffer.
            let result = unsafe { std::slice::from_raw_parts_mut(start, bytes) };
            divide_in_place(args.dtype, result, self.nranks);
        }
    }
}

impl Backend for MpiBackend {
    fn info(&self) -> BackendInfo {
        let library = crate::job::provenance::mpi_running();
        let transport = if self.nnodes <= 1 {
            "mpi/intra-node".to_string()
        } else {
            let maps = crate::sysfs::Root::new("/").read("/proc/self/maps");
            super::mpi_transport::inter_node_transport(maps.as_deref().unwrap_or(""))
        };
        BackendInfo {
            kind: BackendKind::Mpi,
            transport,
            devices: vec![RankDevice {
                ordinal: self.local_rank,
                location: Location::Host,
                name: library.clone(),
            }],
            library_version: library,
            notes: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn memory_available(&self) -> Option<MemoryBudget> {
        super::host_memory(self.local_size)
    }

    /// -M: the resident set; `alloc` writes its buffers, so they count from there.
    fn memory_in_use(&self) -> Vec<u64> {
        super::resident_bytes().into_iter().collect()
    }

    fn alloc(&mut self, send_bytes: usize, recv_bytes: usize) -> anyhow::Result<()> {
        self.send = HostBuffer::new(send_bytes)?;
        self.recv = HostBuffer::new(recv_bytes)?;
        Ok(())
    }

    fn write(&mut self, at: BufRef, data: &[u8]) -> anyhow::Result<()> {
        let buffer = if at.slot == Slot::Send {
            &mut self.send
        } else {
            &mut self.recv
        };
        buffer.bytes_mut()[at.offset..at.offset + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn read(&mut self, at: BufRef, out: &mut [u8]) -> anyhow::Result<()> {
        let buffer = if at.slot == Slot::Send {
            &self.send
        } else {
            &self.recv
        };
        out.copy_from_slice(&buffer.bytes()[at.offset..at.offset + out.len()]);
        Ok(())
    }

    fn all_reduce(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let (xfer, op) = (self.xfer(args, true)?, self.op(args));
        if self.issue(MpiCall::Allreduce(xfer, op), args.op != RedOp::Avg)? {
            self.finish_avg(args, args.count);
        }
        Ok(())
    }

    fn all_gather(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let xfer = self.xfer(args, true)?;
        self.issue(MpiCall::Allgather(xfer), true).map(drop)
    }

    fn broadcast(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let is_root = self.rank == args.root;
        // Out of place, the root sends from its send buffer and, as NCCL does, also
        // leaves the data in its receive buffer.
        let copies = is_root && !args.in_place;
        let mut xfer = self.xfer(args, false)?;
        if copies {
            xfer.recv = self.ptr(args.send);
        }
        let call = MpiCall::Bcast(xfer, args.root as c_int);
        if self.issue(call, !copies)? && copies {
            let bytes = args.count * args.dtype.size();
            let recv = self.ptr(args.recv);
            // SAFETY: distinct buffers, both at least `bytes` long.
            unsafe {
                std::ptr::copy_nonoverlapping(xfer.recv as *const u8, recv as *mut u8, bytes)
            };
        }
        Ok(())
    }

    fn reduce(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let is_root = self.rank == args.root;
        let (xfer, op) = (self.xfer(args, is_root)?, self.op(args));
        let call = MpiCall::Reduce(xfer, op, args.root as c_int);
        let divides = is_root && args.op == RedOp::Avg;
        if self.issue(call, !divides)? && divides {
            self.finish_avg(args, args.count);
        }
        Ok(())
    }

    fn reduce_scatter(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let (mut xfer, op) = (self.xfer(args, false)?, self.op(args));
        // MPI_Reduce_scatter with equal counts, not MPI_Reduce_scatter_block: the call
        // OSU's osu_reduce_scatter makes (Open MPI picks other algorithms for the two).
        self.scatter_counts.fill(xfer.n);
        let recv = xfer.recv;
        // In place the send data is the whole buffer (from -u's offset on).
        let whole = self.ptr(args.send);
        if args.in_place {
            // SAFETY: the shim returns the MPI_IN_PLACE constant.
            xfer.send = unsafe { fabricbench_mpi_in_place() };
            xfer.recv = whole;
        }
        let call = MpiCall::ReduceScatter(xfer, self.scatter_counts.as_ptr(), op);
        let moves = args.in_place && whole != recv;
        if !self.issue(call, !moves && args.op != RedOp::Avg)? {
            return Ok(());
        }
        if moves {
            // MPI leaves an in-place result at the start of the buffer; nccl-tests'
            // layout wants it at rank * count, so it moves there (part of the call).
            // SAFETY: both regions lie in the receive buffer; copy handles overlap.
            unsafe {
                std::ptr::copy(
                    whole as *const u8,
                    recv as *mut u8,
                    args.count * args.dtype.size(),
                )
            };
        }
        self.finish_avg(args, args.count);
        Ok(())
    }

    fn alltoall(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let xfer = self.xfer(args, true)?;
        self.issue(MpiCall::Alltoall(xfer), true).map(drop)
    }

    fn gather(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let xfer = self.xfer(args, self.rank == args.root)?;
        let call = MpiCall::Gather(xfer, args.root as c_int);
        self.issue(call, true).map(drop)
    }

    fn scatter(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let mut xfer = self.xfer(args, false)?;
        if args.in_place && self.rank == args.root {
            // SAFETY: the shim returns the MPI_IN_PLACE constant.
            xfer.recv = unsafe { fabricbench_mpi_in_place() };
        }
        let call = MpiCall::Scatter(xfer, args.root as c_int);
        self.issue(call, true).map(drop)
    }

    fn sendrecv(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let xfer = self.xfer(args, false)?;
        let to = ((self.rank + 1) % self.nranks) as c_int;
        let from = ((self.rank + self.nranks - 1) % self.nranks) as c_int;
        let call = if args.in_place {
            MpiCall::SendrecvReplace(xfer, to, from)
        } else {
            MpiCall::Sendrecv(xfer, to, from)
        };
        self.issue(call, true).map(drop)
    }

    fn alltoallv(
        &mut self,
        args: &OpArgs,
        peer: &dyn Fn(usize, usize) -> usize,
    ) -> anyhow::Result<()> {
        if self.refuses_binding() {
            return Ok(());
        }
        let sent = v_counts(&mut self.v_counts, self.rank, peer)?;
        let dt = self.datatype(args);
        let recv = self.ptr(args.recv);
        let send = if args.in_place {
            // MPI forbids aliased buffers: in place, the send stream is copied to the
            // send buffer (unused in place, and sized for the largest rank's stream).
            let staging = BufRef {
                slot: Slot::Send,
                offset: 0,
                ..args.send
            };
            self.copy(args.send, staging, sent * args.dtype.size())?;
            self.ptr(staging) as *const c_void
        } else {
            self.ptr(args.send) as *const c_void
        };
        // SAFETY: the counts and displacements describe regions inside the buffers
        // that alloc sized for the largest rank's totals.
        unsafe { alltoallv(send, recv, &self.v_counts, dt, self.comm) }
    }

    fn exchange(&mut self, args: &OpArgs, peer: usize) -> anyhow::Result<()> {
        if self.refuses_binding() {
            return Ok(());
        }
        let n = count(args)?;
        let dt = self.datatype(args);
        let (send, recv) = (self.ptr(args.send), self.ptr(args.recv));
        // SAFETY: both regions hold `n` elements inside the buffers.
        unsafe { sendrecv(send, recv, n, dt, peer, self.comm) }
    }

    fn copy(&mut self, from: BufRef, to: BufRef, bytes: usize) -> anyhow::Result<()> {
        if self.refuses_binding() {
            return Ok(());
        }
        let (src, dst) = (self.ptr(from) as *const u8, self.ptr(to) as *mut u8);
        // SAFETY: both regions lie inside the buffers; copy handles overlap.
        unsafe { std::ptr::copy(src, dst, bytes) };
        Ok(())
    }

    fn rank_of(&self, _device: usize) -> usize {
        self.rank
    }

    fn nranks(&self) -> usize {
        self.nranks
    }

    fn premultiply(&mut self, args: &OpArgs, elements: usize) -> anyhow::Result<()> {
        if self.refuses_binding() {
            return Ok(());
        }
        let scalar = premul_scalar(self.rank);
        if args.op == RedOp::Mulsum && scalar != 1.0 {
            let start = self.ptr(args.send) as *mut u8;
            // SAFETY: this rank's send region lies inside its buffers.
            let data =
                unsafe { std::slice::from_raw_parts_mut(start, elements * args.dtype.size()) };
            scale_in_place(args.dtype, data, scalar);
        }
        Ok(())
    }

    fn synchronize(&mut self) -> anyhow::Result<()> {
        // MPI's blocking calls have completed when they return.
        Ok(())
    }

    fn timer_start(&mut self, iterations: usize, marks: Marks) -> anyhow::Result<()> {
        self.clock.start(iterations, marks);
        Ok(())
    }

    fn mark(&mut self) {
        self.clock.mark();
    }

    fn marks_host_time(&self) -> bool {
        true
    }

    fn timer_read(&mut self, per_iteration: &mut [f64]) -> anyhow::Result<f64> {
        Ok(self.clock.read(per_iteration))
    }

    fn begin_bind(&mut self) -> bool {
        self.binding = Binding::Armed;
        true
    }

    fn end_bind(&mut self) -> bool {
        if matches!(self.binding, Binding::One(_)) {
            return true;
        }
        self.binding = Binding::Off;
        false
    }

    fn run_bound(
        &mut self,
        iterations: usize,
        calls: &CallCount,
        between: Option<&dyn Fn()>,
    ) -> anyhow::Result<()> {
        let Binding::One(call) = std::mem::take(&mut self.binding) else {
            bail!("run_bound without a bound call");
        };
        // A bare loop of the library call: the count the watchdog reads, the call,
        // the marks; nothing dispatched or resolved per call. (Binding the call is
        // what `unsafe` relies on: resolved by end_bind from these buffers, which
        // nothing has reallocated since.)
        match between {
            // --percentiles 0 (Marks::Whole): no mark between calls; the driver marks the end.
            None if !self.clock.marks_each_call() => {
                for _ in 0..iterations {
                    calls.bump();
                    // SAFETY: as above.
                    unsafe { call.issue(self.comm) }?;
                }
            }
            None => {
                for _ in 0..iterations {
                    calls.bump();
                    // SAFETY: as above.
                    unsafe { call.issue(self.comm) }?;
                    self.clock.mark();
                }
            }
            Some(between) => {
                for _ in 0..iterations {
                    self.clock.mark();
                    calls.bump();
                    // SAFETY: as above.
                    unsafe { call.issue(self.comm) }?;
                    self.clock.mark();
                    between();
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handle_tables_are_indexed_by_the_enums_discriminants() {
        assert!(DataType::ALL
            .iter()
            .enumerate()
            .all(|(i, &d)| d as usize == i));
        assert!(RedOp::ALL.iter().enumerate().all(|(i, &o)| o as usize == i));
    }
}
