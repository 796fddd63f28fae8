use super::{Collective, CollectiveId, Counts, Layout};
use crate::backend::{Backend, OpArgs};

/// Every rank ends with the reduction of all ranks' buffers.
pub struct AllReduce;

impl Collective for AllReduce {
    fn name(&self) -> &'static str {
        "AllReduce"
    }
    fn id(&self) -> CollectiveId {
        CollectiveId::AllReduce
    }
    fn reduces(&self) -> bool {
        true
    }
    fn counts(&self, count: usize, _elt_size: usize, _nranks: usize) -> Counts {
        Counts::same(count)
    }
    /// A ring moves 2(n-1)/n of the buffer over each link: reduce-scatter then all-gather.
    fn busbw_factor(&self, nranks: usize) -> f64 {
        2.0 * (nranks as f64 - 1.0) / nranks as f64
    }
    fn expected(&self, layout: &Layout, index: usize) -> Option<f64> {
        Some(layout.pattern.reduced(index))
    }
    fn launch(&self, backend: &mut dyn Backend, args: &OpArgs) -> anyhow::Result<()> {
        super::premultiply(backend, args, args.count)?;
        backend.all_reduce(args)
    }
}
