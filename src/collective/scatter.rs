use super::{all_but_own_share, chunk_count, Collective, CollectiveId, Counts, Layout};
use crate::backend::{Backend, OpArgs};

/// Rank k ends with chunk k of the root's buffer.
pub struct Scatter;

impl Collective for Scatter {
    fn name(&self) -> &'static str {
        "Scatter"
    }
    fn id(&self) -> CollectiveId {
        CollectiveId::Scatter
    }
    fn rooted(&self) -> bool {
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
                .input(layout.root, layout.rank * layout.counts.param + index),
        )
    }
    fn launch(&self, backend: &mut dyn Backend, args: &OpArgs) -> anyhow::Result<()> {
        backend.scatter(args)
    }
}
