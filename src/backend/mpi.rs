//! The `mpi` backend: host memory and the MPI library's own collectives.
//!
//! Calls go through `mpi::ffi` because the driver is type-erased (a datatype chosen
//! at run time, as nccl-tests passes ncclDataType_t) and needs MPI_IN_PLACE, which
//! rsmpi's safe collectives do not offer.

use super::mpi_ops::{
    alltoallv, check, count, float16_ops, mpi_datatype, sendrecv, split, v_counts, OP_MAX, OP_MIN,
    OP_PROD, OP_SUM,
};
use super::{
    Backend, BackendInfo, BackendKind, BufRef, HostClock, Marks, MemoryBudget, OpArgs, RankDevice,
    Slot,
};
use crate::datatype::{
    divide_in_place, premul_scalar, scale_in_place, DataType, RedOp, F8E4M3, F8E5M2,
};
use crate::job::world::World;
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
        })
    }

    fn datatype(&self, args: &OpArgs) -> ffi::MPI_Datatype {
        self.datatypes[args.dtype as usize]
    }

    fn datatype_and_op(&self, args: &OpArgs) -> (ffi::MPI_Datatype, ffi::MPI_Op) {
        (
            self.datatype(args),
            self.ops[args.dtype as usize][args.op as usize],
        )
    }

    fn ptr(&mut self, at: BufRef) -> *mut c_void {
        let buffer = match at.slot {
            Slot::Send => &mut self.send,
            Slot::Recv => &mut self.recv,
        };
        // SAFETY: the driver keeps offsets inside the buffers it sized with alloc.
        unsafe { buffer.as_ptr().add(at.offset) as *mut c_void }
    }

    /// The send pointer, or MPI_IN_PLACE where this rank's call is in place.
    fn send_ptr(&mut self, args: &OpArgs, in_place_here: bool) -> *const c_void {
        if args.in_place && in_place_here {
            // SAFETY: the shim returns the MPI_IN_PLACE constant.
            unsafe { fabricbench_mpi_in_place() }
        } else {
            self.ptr(args.send)
        }
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

/// The MPI reduction of `op` on `dtype`: MPI's own, or for the narrow floats one of
/// `half_ops` ([half|bf16|f8e4m3|f8e5m2][sum|prod|max|min]).
fn mpi_op(half_ops: &[[ffi::MPI_Op; 4]; 4], dtype: DataType, op: RedOp) -> ffi::MPI_Op {
    let index = match op {
        // mulsum: `premultiply` has scaled this rank's input; the rest is a sum.
        RedOp::Sum | RedOp::Avg | RedOp::Mulsum => OP_SUM,
        RedOp::Prod => OP_PROD,
        RedOp::Max => OP_MAX,
        RedOp::Min => OP_MIN,
    } as usize;
    match dtype {
        DataType::Half => half_ops[0][index],
        DataType::Bfloat16 => half_ops[1][index],
        DataType::F8e4m3 => half_ops[2][index],
        DataType::F8e5m2 => half_ops[3][index],
        // SAFETY: reading rsmpi's exported handles.
        _ => unsafe {
            [
                ffi::RSMPI_SUM,
                ffi::RSMPI_PROD,
                ffi::RSMPI_MAX,
                ffi::RSMPI_MIN,
            ][index]
        },
    }
}

/// Open MPI's components of `framework` this process has loaded, from
/// /proc/self/maps ("/usr/lib/.../openmpi3/mca_btl_tcp.so" is "tcp"). Open MPI
/// unloads the components it did not select, so these are what it uses.
fn loaded_components(maps: &str, framework: &str) -> Vec<String> {
    let prefix = format!("mca_{framework}_");
    let mut names: Vec<String> = maps
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .filter_map(|f| f.strip_prefix(prefix.as_str())?.strip_suffix(".so"))
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// What carries the traffic between nodes: the network BTL under Open MPI's
/// ob1, or UCX, or an MTL, as loaded. MPI itself does not say; where the
/// components are not to be seen (another MPI, a static build), what pins them.
fn inter_node_transport(maps: &str) -> String {
    let pml = loaded_components(maps, "pml");
    let network = |framework: &str, local: &[&str]| -> Vec<String> {
        let all = loaded_components(maps, framework);
        all.into_iter()
            .filter(|c| !local.contains(&c.as_str()))
            .collect()
    };
    match pml.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["ob1"] => {
            let btls = network("btl", &["self", "vader", "sm", "smcuda"]);
            if !btls.is_empty() {
                let names: Vec<String> = btls
                    .iter()
                    .map(|b| format!("{} BTL", b.to_uppercase()))
                    .collect();
                return format!(
                    "mpi/inter-node: Open MPI {} between nodes (pml ob1; btl {})",
                    names.join(" + "),
                    loaded_components(maps, "btl").join(",")
                );
            }
        }
        ["ucx"] => {
            let tls = std::env::var("UCX_TLS").map_or(String::new(), |t| format!(", UCX_TLS={t}"));
            return format!("mpi/inter-node: Open MPI UCX between nodes (pml ucx{tls})");
        }
        ["cm"] => {
            let mtls = network("mtl", &[]);
            if !mtls.is_empty() {
                return format!(
                    "mpi/inter-node: Open MPI {} MTL between nodes (pml cm)",
                    mtls.join(" + ")
                );
            }
        }
        _ => {}
    }
    let pinned: Vec<String> = [
        "OMPI_MCA_pml",
        "OMPI_MCA_btl",
        "OMPI_MCA_mtl",
        "UCX_TLS",
        "FI_PROVIDER",
    ]
    .iter()
    .filter_map(|v| std::env::var(v).ok().map(|val| format!("{v}={val}")))
    .collect();
    if pinned.is_empty() {
        "mpi/inter-node (library's choice; set OMPI_MCA_pml or UCX_TLS to pin it)".to_string()
    } else {
        format!("mpi/inter-node ({})", pinned.join(" "))
    }
}

impl Backend for MpiBackend {
    fn info(&self) -> BackendInfo {
        let library = mpi::environment::library_version()
            // "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"
            .map(|v| v.split([',', '\n']).next().unwrap_or("").trim().to_string())
            .unwrap_or_else(|_| "unknown MPI".into());
        let transport = if self.nnodes <= 1 {
            "mpi/intra-node".to_string()
        } else {
            let maps = crate::sysfs::Root::new("/").read("/proc/self/maps");
            inter_node_transport(maps.as_deref().unwrap_or(""))
        };
        BackendInfo {
            kind: BackendKind::Mpi,
            transport,
            devices: vec![RankDevice {
                ordinal: self.local_rank,
                location: "host".into(),
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
        let n = count(args)?;
        let (send, recv) = (self.send_ptr(args, true), self.ptr(args.recv));
        let (dt, op) = self.datatype_and_op(args);
        // SAFETY: buffers sized by alloc for this count; handles valid.
        check(
            unsafe { ffi::MPI_Allreduce(send, recv, n, dt, op, self.comm) },
            "MPI_Allreduce",
        )?;
        self.finish_avg(args, args.count);
        Ok(())
    }

    fn all_gather(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let n = count(args)?;
        let (send, recv) = (self.send_ptr(args, true), self.ptr(args.recv));
        let dt = self.datatype(args);
        // SAFETY: as above; the receive buffer holds nranks chunks.
        check(
            unsafe { ffi::MPI_Allgather(send, n, dt, recv, n, dt, self.comm) },
            "MPI_Allgather",
        )
    }

    fn broadcast(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let n = count(args)?;
        let is_root = self.rank == args.root;
        // Out of place, the root sends from its send buffer and, as NCCL does, also
        // leaves the data in its receive buffer.
        let buf = if is_root && !args.in_place {
            self.ptr(args.send)
        } else {
            self.ptr(args.recv)
        };
        let dt = self.datatype(args);
        // SAFETY: as above.
        check(
            unsafe { ffi::MPI_Bcast(buf, n, dt, args.root as c_int, self.comm) },
            "MPI_Bcast",
        )?;
        if is_root && !args.in_place {
            let bytes = args.count * args.dtype.size();
            let recv = self.ptr(args.recv);
            // SAFETY: distinct buffers, both at least `bytes` long.
            unsafe { std::ptr::copy_nonoverlapping(buf as *const u8, recv as *mut u8, bytes) };
        }
        Ok(())
    }

    fn reduce(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let n = count(args)?;
        let is_root = self.rank == args.root;
        let (send, recv) = (self.send_ptr(args, is_root), self.ptr(args.recv));
        let (dt, op) = self.datatype_and_op(args);
        // SAFETY: as above.
        check(
            unsafe { ffi::MPI_Reduce(send, recv, n, dt, op, args.root as c_int, self.comm) },
            "MPI_Reduce",
        )?;
        if is_root {
            self.finish_avg(args, args.count);
        }
        Ok(())
    }

    fn reduce_scatter(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let n = count(args)?;
        let (dt, op) = self.datatype_and_op(args);
        // MPI_Reduce_scatter with equal counts, not MPI_Reduce_scatter_block: the call
        // OSU's osu_reduce_scatter makes (Open MPI picks other algorithms for the two).
        self.scatter_counts.fill(n);
        let recv = self.ptr(args.recv);
        // In place the send data is the whole buffer (from -u's offset on).
        let whole = self.ptr(args.send);
        let (send, into) = if args.in_place {
            // SAFETY: the shim returns the MPI_IN_PLACE constant.
            (
                unsafe { fabricbench_mpi_in_place() } as *const c_void,
                whole,
            )
        } else {
            (self.ptr(args.send) as *const c_void, recv)
        };
        let counts = self.scatter_counts.as_ptr();
        // SAFETY: buffers sized by alloc for this count; one count per rank.
        check(
            unsafe { ffi::MPI_Reduce_scatter(send, into, counts, dt, op, self.comm) },
            "MPI_Reduce_scatter",
        )?;
        if args.in_place && whole != recv {
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
        let n = count(args)?;
        let (send, recv) = (self.send_ptr(args, true), self.ptr(args.recv));
        let dt = self.datatype(args);
        // SAFETY: as above.
        check(
            unsafe { ffi::MPI_Alltoall(send, n, dt, recv, n, dt, self.comm) },
            "MPI_Alltoall",
        )
    }

    fn gather(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let n = count(args)?;
        let is_root = self.rank == args.root;
        let (send, recv) = (self.send_ptr(args, is_root), self.ptr(args.recv));
        let dt = self.datatype(args);
        // SAFETY: as above.
        check(
            unsafe { ffi::MPI_Gather(send, n, dt, recv, n, dt, args.root as c_int, self.comm) },
            "MPI_Gather",
        )
    }

    fn scatter(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let n = count(args)?;
        let is_root = self.rank == args.root;
        let send = self.ptr(args.send);
        let recv = if args.in_place && is_root {
            // SAFETY: the shim returns the MPI_IN_PLACE constant.
            unsafe { fabricbench_mpi_in_place() }
        } else {
            self.ptr(args.recv)
        };
        let dt = self.datatype(args);
        // SAFETY: as above.
        check(
            unsafe { ffi::MPI_Scatter(send, n, dt, recv, n, dt, args.root as c_int, self.comm) },
            "MPI_Scatter",
        )
    }

    fn sendrecv(&mut self, args: &OpArgs) -> anyhow::Result<()> {
        let n = count(args)?;
        let dt = self.datatype(args);
        let to = ((self.rank + 1) % self.nranks) as c_int;
        let from = ((self.rank + self.nranks - 1) % self.nranks) as c_int;
        let recv = self.ptr(args.recv);
        // SAFETY: as above; the status is ignored.
        let code = unsafe {
            if args.in_place {
                ffi::MPI_Sendrecv_replace(
                    recv,
                    n,
                    dt,
                    to,
                    0,
                    from,
                    0,
                    self.comm,
                    ffi::RSMPI_STATUS_IGNORE,
                )
            } else {
                let send = self.ptr(args.send);
                ffi::MPI_Sendrecv(
                    send,
                    n,
                    dt,
                    to,
                    0,
                    recv,
                    n,
                    dt,
                    from,
                    0,
                    self.comm,
                    ffi::RSMPI_STATUS_IGNORE,
                )
            }
        };
        check(code, "MPI_Sendrecv")
    }

    fn alltoallv(
        &mut self,
        args: &OpArgs,
        peer: &dyn Fn(usize, usize) -> usize,
    ) -> anyhow::Result<()> {
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
        let n = count(args)?;
        let dt = self.datatype(args);
        let (send, recv) = (self.ptr(args.send), self.ptr(args.recv));
        // SAFETY: both regions hold `n` elements inside the buffers.
        unsafe { sendrecv(send, recv, n, dt, peer, self.comm) }
    }

    fn copy(&mut self, from: BufRef, to: BufRef, bytes: usize) -> anyhow::Result<()> {
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

    fn maps(libs: &[&str]) -> String {
        libs.iter()
            .map(|l| {
                format!("7f00-7f01 r-xp 00000000 08:01 42 /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/{l}\n")
            })
            .collect()
    }

    #[test]
    fn the_loaded_components_name_the_transport() {
        let tcp = maps(&[
            "mca_pml_ob1.so",
            "mca_btl_self.so",
            "mca_btl_tcp.so",
            "mca_btl_tcp.so",
            "mca_bml_r2.so",
        ]);
        assert_eq!(loaded_components(&tcp, "btl"), ["self", "tcp"]);
        assert_eq!(
            inter_node_transport(&tcp),
            "mpi/inter-node: Open MPI TCP BTL between nodes (pml ob1; btl self,tcp)"
        );
        let ofi = maps(&["mca_pml_cm.so", "mca_mtl_ofi.so", "mca_btl_vader.so"]);
        assert_eq!(
            inter_node_transport(&ofi),
            "mpi/inter-node: Open MPI ofi MTL between nodes (pml cm)"
        );
        // No component to be seen: what the environment pins, or that nothing does.
        assert!(inter_node_transport("").starts_with("mpi/inter-node ("));
    }
}
