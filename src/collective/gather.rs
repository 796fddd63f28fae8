use super::{all_but_own_share, chunk_count, Collective, CollectiveId, Counts, Layout};
use crate::backend::{Backend, OpArgs};

/// The root ends with every rank's chunk, in rank order.
pub struct Gather;

impl Collective for Gather {
    fn name(&self) -> &'static str {
        "Gather"
    }
    fn id(&self) -> CollectiveId {
        CollectiveId::Gather
    }
    fn rooted(&self) -> bool {
        true
    }
    fn counts(&self, count: usize, elt_size: usize, nranks: usize) -> Counts {
        Counts::gathered(chunk_count(count, elt_size, nranks), nranks)
    }
    fn busbw_factor(&self, nranks: usize) -> f64 {
        all_but_own_share(nranks)
    }
    fn expected(&self, layout: &Layout, index: usize) -> Option<f64> {
        let base = layout.counts.param;
        (layout.rank == layout.root).then(|| layout.pattern.input(index / base, index % base))
    }
    fn launch(&self, backend: &mut dyn Backend, args: &OpArgs) -> anyhow::Result<()> {
        backend.gather(args)
    }
}
