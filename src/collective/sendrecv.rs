use super::{Collective, CollectiveId, Counts, Layout};
use crate::backend::{Backend, OpArgs};

/// Each rank sends its buffer to rank+1 and receives rank-1's (a ring shift).
pub struct SendRecv;

impl Collective for SendRecv {
    fn name(&self) -> &'static str {
        "SendRecv"
    }
    fn id(&self) -> CollectiveId {
        CollectiveId::SendRecv
    }
    fn pairs(&self) -> bool {
        true
    }
    fn counts(&self, count: usize, _elt_size: usize, _nranks: usize) -> Counts {
        Counts::same(count)
    }
    fn busbw_factor(&self, _nranks: usize) -> f64 {
        1.0
    }
    fn expected(&self, layout: &Layout, index: usize) -> Option<f64> {
        let from = (layout.rank + layout.nranks - 1) % layout.nranks;
        Some(layout.pattern.input(from, index))
    }
    fn launch(&self, backend: &mut dyn Backend, args: &OpArgs) -> anyhow::Result<()> {
        backend.sendrecv(args)
    }
}
