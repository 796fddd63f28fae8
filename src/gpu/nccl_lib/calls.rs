//! The collective calls, each a thin checked wrapper of its NCCL entry point.

use super::{setup, Comm, DevIn, DevOut, Nccl, NcclError, ReducingFn, RootedFn, SymmetricFn};
use cudarc::driver::sys::CUstream;
use cudarc::nccl::sys::{ncclDataType_t, ncclRedOp_t};
use std::ffi::{c_int, c_void};

/// One collective call's operands: device addresses and NCCL's arguments.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    pub send: u64,
    pub recv: u64,
    pub count: usize,
    pub dtype: ncclDataType_t,
    pub op: ncclRedOp_t,
    pub root: usize,
    pub comm: Comm,
    pub stream: CUstream,
}

impl Call {
    fn send(&self) -> DevIn {
        self.send as DevIn
    }
    fn recv(&self) -> DevOut {
        self.recv as DevOut
    }
    fn root(&self) -> c_int {
        self.root as c_int
    }
}

/// The calls. Each is unsafe: addresses must lie in live device buffers of the
/// comm's GPU, large enough for the call, and `comm` and `stream` must be live.
impl Nccl {
    /// Whether the library has PreMulSum ops (2.11+): mulsum.
    pub fn has_premulsum(&self) -> bool {
        self.fns.premulsum.is_some() && self.fns.red_op_destroy.is_some()
    }

    /// A PreMulSum op of `dtype` on `comm`, multiplying by the host value whose bytes
    /// are `scalar` (read at creation: ncclScalarHostImmediate). The communicator's
    /// first user op is ncclNumOps, the one handle this backend keeps alive at a
    /// time, as nccl-tests does; any other handle is refused.
    ///
    /// # Safety
    /// `comm` is a live communicator with no other user op alive.
    pub unsafe fn premulsum(
        &self,
        scalar: &mut [u8; 8],
        dtype: ncclDataType_t,
        comm: Comm,
    ) -> Result<ncclRedOp_t, NcclError> {
        let create = self.fns.premulsum.ok_or_else(|| NcclError {
            call: "ncclRedOpCreatePreMulSum",
            code: setup::INVALID_USAGE,
            text: "missing before NCCL 2.11".into(),
            detail: String::new(),
        })?;
        let mut op: u32 = 0;
        let code = create(&mut op, scalar.as_mut_ptr() as *mut c_void, dtype, 1, comm);
        self.check("ncclRedOpCreatePreMulSum", code, Some(comm))?;
        match op == ncclRedOp_t::ncclNumOps as u32 {
            true => Ok(ncclRedOp_t::ncclNumOps),
            false => Err(NcclError {
                call: "ncclRedOpCreatePreMulSum",
                code: setup::INVALID_USAGE,
                text: format!("returned op {op}, not the communicator's first user op"),
                detail: String::new(),
            }),
        }
    }

    /// # Safety
    /// `op` came from `premulsum` on the live `comm`.
    pub unsafe fn red_op_destroy(&self, op: ncclRedOp_t, comm: Comm) -> Result<(), NcclError> {
        match self.fns.red_op_destroy {
            Some(f) => self.check("ncclRedOpDestroy", f(op, comm), Some(comm)),
            None => Ok(()),
        }
    }

    /// Calls `f`, NCCL's `name`, with `c`'s operands and op.
    ///
    /// # Safety
    /// See the impl block.
    unsafe fn reducing(
        &self,
        name: &'static str,
        f: ReducingFn,
        c: &Call,
    ) -> Result<(), NcclError> {
        let code = f(c.send(), c.recv(), c.count, c.dtype, c.op, c.comm, c.stream);
        self.check(name, code, Some(c.comm))
    }

    /// Calls `f`, NCCL's `name`, with `c`'s operands and root.
    ///
    /// # Safety
    /// See the impl block.
    unsafe fn rooted(&self, name: &'static str, f: RootedFn, c: &Call) -> Result<(), NcclError> {
        let code = f(
            c.send(),
            c.recv(),
            c.count,
            c.dtype,
            c.root(),
            c.comm,
            c.stream,
        );
        self.check(name, code, Some(c.comm))
    }

    /// Calls `f`, NCCL's `name`, with `c`'s operands.
    ///
    /// # Safety
    /// See the impl block.
    unsafe fn symmetric(
        &self,
        name: &'static str,
        f: SymmetricFn,
        c: &Call,
    ) -> Result<(), NcclError> {
        let code = f(c.send(), c.recv(), c.count, c.dtype, c.comm, c.stream);
        self.check(name, code, Some(c.comm))
    }

    /// # Safety
    /// See the impl block.
    pub unsafe fn all_reduce(&self, c: &Call) -> Result<(), NcclError> {
        self.reducing("ncclAllReduce", self.fns.all_reduce, c)
    }

    /// # Safety
    /// See the impl block.
    pub unsafe fn broadcast(&self, c: &Call) -> Result<(), NcclError> {
        self.rooted("ncclBroadcast", self.fns.broadcast, c)
    }

    /// # Safety
    /// See the impl block.
    pub unsafe fn reduce(&self, c: &Call) -> Result<(), NcclError> {
        let f = self.fns.reduce;
        let code = f(
            c.send(),
            c.recv(),
            c.count,
            c.dtype,
            c.op,
            c.root(),
            c.comm,
            c.stream,
        );
        self.check("ncclReduce", code, Some(c.comm))
    }

    /// # Safety
    /// See the impl block.
    pub unsafe fn all_gather(&self, c: &Call) -> Result<(), NcclError> {
        self.symmetric("ncclAllGather", self.fns.all_gather, c)
    }

    /// # Safety
    /// See the impl block.
    pub unsafe fn reduce_scatter(&self, c: &Call) -> Result<(), NcclError> {
        self.reducing("ncclReduceScatter", self.fns.reduce_scatter, c)
    }

    /// Sends `count` elements at `addr` to `peer`.
    ///
    /// # Safety
    /// See the impl block.
    pub unsafe fn send(&self, c: &Call, addr: u64, peer: usize) -> Result<(), NcclError> {
        let code = (self.fns.send)(
            addr as DevIn,
            c.count,
            c.dtype,
            peer as c_int,
            c.comm,
            c.stream,
        );
        self.check("ncclSend", code, Some(c.comm))
    }

    /// Receives `count` elements from `peer` into `addr`.
    ///
    /// # Safety
    /// See the impl block.
    pub unsafe fn recv(&self, c: &Call, addr: u64, peer: usize) -> Result<(), NcclError> {
        let code = (self.fns.recv)(
            addr as DevOut,
            c.count,
            c.dtype,
            peer as c_int,
            c.comm,
            c.stream,
        );
        self.check("ncclRecv", code, Some(c.comm))
    }

    /// ncclAlltoAll (NCCL 2.28+); None where the library lacks it.
    ///
    /// # Safety
    /// See the impl block.
    pub unsafe fn alltoall(&self, c: &Call) -> Option<Result<(), NcclError>> {
        Some(self.symmetric("ncclAlltoAll", self.fns.alltoall?, c))
    }

    /// ncclGather (NCCL 2.28+); None where the library lacks it.
    ///
    /// # Safety
    /// See the impl block.
    pub unsafe fn gather(&self, c: &Call) -> Option<Result<(), NcclError>> {
        Some(self.rooted("ncclGather", self.fns.gather?, c))
    }

    /// ncclScatter (NCCL 2.28+); None where the library lacks it.
    ///
    /// # Safety
    /// See the impl block.
    pub unsafe fn scatter(&self, c: &Call) -> Option<Result<(), NcclError>> {
        Some(self.rooted("ncclScatter", self.fns.scatter?, c))
    }
}
