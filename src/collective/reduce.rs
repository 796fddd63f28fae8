use super::{Collective, CollectiveId, Counts, Layout};
use crate::backend::{Backend, OpArgs};

/// The root ends with the reduction of all ranks' buffers.
pub struct Reduce;

impl Collective for Reduce {
    fn name(&self) -> &'static str {
        "Reduce"
    }
    fn id(&self) -> CollectiveId {
        CollectiveId::Reduce
    }
    fn reduces(&self) -> bool {
        true
    }
    fn rooted(&self) -> bool {
        true
    }
    fn counts(&self, count: usize, _elt_size: usize, _nranks: usize) -> Counts {
        Counts::same(count)
    }
    fn busbw_factor(&self, _nranks: usize) -> f64 {
        1.0
    }
    fn expected(&self, layout: &Layout, index: usize) -> Option<f64> {
        (layout.rank == layout.root).then(|| layout.pattern.reduced(index))
    }
    fn launch(&self, backend: &mut dyn Backend, args: &OpArgs) -> anyhow::Result<()> {
        super::premultiply(backend, args, args.count)?;
        backend.reduce(args)
    }
}
