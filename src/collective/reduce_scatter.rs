use super::{all_but_own_share, chunk_count, Collective, Counts, Layout};
use crate::backend::{Backend, OpArgs};

/// Rank k ends with chunk k of the reduction of all ranks' buffers.
pub struct ReduceScatter;

impl Collective for ReduceScatter {
    fn name(&self) -> &'static str {
        "ReduceScatter"
    }
    fn id(&self) -> &'static str {
        "reduce_scatter"
    }
    fn reduces(&self) -> bool {
        true
    }
    fn counts(&self, count: usize, elt_size: usize, nranks: usize) -> Counts {
        let base = chunk_count(count, elt_size, nranks);
        Counts {
            send: base * nranks,
            recv: base,
            param: base,
            send_inplace_offset: 0,
            recv_inplace_offset: base,
        }
    }
    fn algbw_bytes(&self, counts: &Counts, elt_size: usize, nranks: usize) -> u64 {
        (counts.param * elt_size * nranks) as u64
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
        backend.reduce_scatter(args)
    }
}
