use super::{all_but_own_share, chunk_count, Collective, CollectiveId, Counts, Layout};
use crate::backend::{Backend, OpArgs};

/// Rank k ends with chunk k of the reduction of all ranks' buffers.
pub struct ReduceScatter;

impl Collective for ReduceScatter {
    fn name(&self) -> &'static str {
        "ReduceScatter"
    }
    fn id(&self) -> CollectiveId {
        CollectiveId::ReduceScatter
    }
    fn reduces(&self) -> bool {
        true
    }
    fn counts(&self, count: usize, elt_size: usize, nranks: usize) -> Counts {
        Counts::scattered(chunk_count(count, elt_size, nranks), nranks)
    }
    fn busbw_factor(&self, nranks: usize) -> f64 {
        all_but_own_share(nranks)
    }
    fn expected(&self, layout: &Layout, index: usize) -> Option<f64> {
        Some(
            layout
                .pattern
                .reduced(layout.rank * layout.counts.param + index),
        )
    }
    fn launch(&self, backend: &mut dyn Backend, args: &OpArgs) -> anyhow::Result<()> {
        let elements = args.count * backend.nranks();
        super::premultiply(backend, args, elements)?;
        backend.reduce_scatter(args)
    }
}
