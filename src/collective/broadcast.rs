use super::{Collective, Counts, Layout};
use crate::backend::{Backend, OpArgs};

/// Every rank ends with the root's buffer.
pub struct Broadcast;

impl Collective for Broadcast {
    fn name(&self) -> &'static str {
        "Broadcast"
    }
    fn id(&self) -> &'static str {
        "broadcast"
    }
    fn rooted(&self) -> bool {
        true
    }
    fn counts(&self, count: usize, _elt_size: usize, _nranks: usize) -> Counts {
        Counts {
            send: count,
            recv: count,
            param: count,
            send_inplace_offset: 0,
            recv_inplace_offset: 0,
        }
    }
    fn algbw_bytes(&self, counts: &Counts, elt_size: usize, _nranks: usize) -> u64 {
        (counts.param * elt_size) as u64
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
