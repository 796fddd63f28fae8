use super::{all_but_own_share, chunk_count, Collective, CollectiveId, Counts, Layout};
use crate::backend::{Backend, OpArgs};

/// Rank k ends with chunk k of every rank's buffer, in rank order.
pub struct AlltoAll;

impl Collective for AlltoAll {
    fn name(&self) -> &'static str {
        "AlltoAll"
    }
    fn id(&self) -> CollectiveId {
        CollectiveId::AlltoAll
    }
    fn counts(&self, count: usize, elt_size: usize, nranks: usize) -> Counts {
        let chunk = chunk_count(count, elt_size, nranks);
        Counts {
            send: chunk * nranks,
            recv: chunk * nranks,
            param: chunk,
            send_inplace_offset: 0,
            recv_inplace_offset: 0,
        }
    }
    fn busbw_factor(&self, nranks: usize) -> f64 {
        all_but_own_share(nranks)
    }
    fn expected(&self, layout: &Layout, index: usize) -> Option<f64> {
        let chunk = layout.counts.param;
        let (source, offset) = (index / chunk, index % chunk);
        Some(layout.pattern.input(source, layout.rank * chunk + offset))
    }
    fn launch(&self, backend: &mut dyn Backend, args: &OpArgs) -> anyhow::Result<()> {
        backend.alltoall(args)
    }
}
