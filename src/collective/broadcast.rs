use super::{Collective, CollectiveId, Counts, Layout};
use crate::backend::{Backend, OpArgs};

/// Every rank ends with the root's buffer.
pub struct Broadcast;

impl Collective for Broadcast {
    fn name(&self) -> &'static str {
        "Broadcast"
    }
    fn id(&self) -> CollectiveId {
        CollectiveId::Broadcast
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
        Some(layout.pattern.input(layout.root, index))
    }
    fn launch(&self, backend: &mut dyn Backend, args: &OpArgs) -> anyhow::Result<()> {
        backend.broadcast(args)
    }
}
