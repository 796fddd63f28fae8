//! mulsum on NCCL: a PreMulSum op of the rank's scalar (nccl-tests'
//! `ncclVerifiablePremulScalar`), one alive per communicator at a time.

use super::codes::{nccl_op, nccl_type};
use super::{nccl_error, NcclBackend, RankGpu};
use crate::backend::OpArgs;
use crate::datatype::{fill, premul_scalar, RedOp};
use cudarc::nccl::sys::ncclRedOp_t;

impl NcclBackend {
    /// NCCL's op for `args`: mulsum's PreMulSum op of this rank's scalar, created
    /// when the datatype changes (one user op alive per communicator).
    pub(super) fn op(&self, g: &RankGpu, args: &OpArgs) -> anyhow::Result<ncclRedOp_t> {
        if args.op != RedOp::Mulsum || g.premul.get() == Some(args.dtype) {
            return Ok(nccl_op(args.op));
        }
        if g.premul.take().is_some() {
            // SAFETY: the op alive on this live communicator; its calls are enqueued.
            unsafe { self.nccl.red_op_destroy(ncclRedOp_t::ncclNumOps, g.comm) }
                .map_err(nccl_error)?;
        }
        let mut scalar = [0u8; 8];
        fill(args.dtype, &mut scalar[..args.dtype.size()], |_| {
            premul_scalar(g.rank)
        });
        // SAFETY: a live communicator with no user op alive (destroyed above).
        let op = unsafe {
            self.nccl
                .premulsum(&mut scalar, nccl_type(args.dtype), g.comm)
        }
        .map_err(nccl_error)?;
        g.premul.set(Some(args.dtype));
        Ok(op)
    }
}
