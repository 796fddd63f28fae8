//! The nccl backend's calls made of grouped ncclSend/ncclRecv, as nccl-tests
//! makes them (alltoallv, and one pair's exchange for hypercube and --all-pairs),
//! and a copy within a GPU's buffers ordered on its stream.

use super::{nccl_error, NcclBackend};
use crate::backend::{BufRef, OpArgs};
use crate::gpu::nccl_lib::Call;
use cudarc::driver::sys;

impl NcclBackend {
    pub(super) fn grouped_alltoallv(
        &mut self,
        args: &OpArgs,
        peer: &dyn Fn(usize, usize) -> usize,
    ) -> anyhow::Result<()> {
        let (c, rank) = self.call(args)?;
        let elt = args.dtype.size() as u64;
        let (mut send_at, mut recv_at) = (c.send, c.recv);
        // As nccl-tests: one group, a send and a receive per peer with data.
        self.grouped(|| {
            for p in 0..self.nranks {
                let (s, r) = (peer(rank, p), peer(p, rank));
                // SAFETY: consecutive segments inside buffers sized for the largest totals.
                unsafe {
                    if s > 0 {
                        let sc = Call { count: s, ..c };
                        self.nccl.send(&sc, send_at, p).map_err(nccl_error)?;
                    }
                    if r > 0 {
                        let rc = Call { count: r, ..c };
                        self.nccl.recv(&rc, recv_at, p).map_err(nccl_error)?;
                    }
                }
                send_at += s as u64 * elt;
                recv_at += r as u64 * elt;
            }
            Ok(())
        })
    }

    pub(super) fn grouped_exchange(&mut self, args: &OpArgs, peer: usize) -> anyhow::Result<()> {
        let (c, _) = self.call(args)?;
        self.grouped(|| {
            // SAFETY: as above.
            unsafe {
                self.nccl.send(&c, c.send, peer).map_err(nccl_error)?;
                self.nccl.recv(&c, c.recv, peer).map_err(nccl_error)?;
            }
            Ok(())
        })
    }

    pub(super) fn stream_copy(
        &mut self,
        from: BufRef,
        to: BufRef,
        bytes: usize,
    ) -> anyhow::Result<()> {
        let g = &self.gpus[from.device];
        let (src, dst) = (g.addr(from)?, g.addr(to)?);
        if src == dst || bytes == 0 {
            return Ok(());
        }
        g.ctx.bind_to_thread()?;
        // SAFETY: both regions lie in this GPU's buffers; ordered on its stream.
        unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, g.stream.cu_stream()) }.result()?;
        Ok(())
    }
}
