use super::{chunk_count, Collective, CollectiveId, Counts, Layout};
use crate::backend::{Backend, BufRef, OpArgs};
use crate::job::UsageError;

/// nccl-tests' hypercube_perf: an all-gather in log2(n) steps, step k exchanging
/// the 2^k chunks gathered so far with rank XOR 2^k. Power-of-two rank counts only.
pub struct HyperCube;

impl Collective for HyperCube {
    fn name(&self) -> &'static str {
        "HyperCube"
    }
    fn id(&self) -> CollectiveId {
        CollectiveId::HyperCube
    }
    fn counts(&self, count: usize, elt_size: usize, nranks: usize) -> Counts {
        Counts::gathered(chunk_count(count, elt_size, nranks), nranks)
    }
    /// Each rank receives (n-1) chunks and algbw already counts just those.
    fn busbw_factor(&self, _nranks: usize) -> f64 {
        1.0
    }
    fn alg_bytes(&self, counts: &Counts, elt_size: usize, nranks: usize) -> u64 {
        (counts.param * elt_size * nranks.saturating_sub(1)) as u64
    }
    fn expected(&self, layout: &Layout, index: usize) -> Option<f64> {
        let base = layout.counts.param.max(1);
        Some(layout.pattern.input(index / base, index % base))
    }
    fn launch(&self, backend: &mut dyn Backend, args: &OpArgs) -> anyhow::Result<()> {
        let (n, rank) = (backend.nranks(), backend.rank_of(args.recv.device));
        let chunk = args.count * args.dtype.size();
        let at = |k: usize| BufRef {
            offset: args.recv.offset + k * chunk,
            ..args.recv
        };
        // Own chunk into place (nothing to move in place, where it already is).
        backend.copy(args.send, at(rank), chunk)?;
        let mut mask = 1;
        while mask < n {
            let have = rank & !(mask - 1);
            let step = OpArgs {
                send: at(have),
                recv: at(have ^ mask),
                count: args.count * mask,
                ..*args
            };
            backend.exchange(&step, rank ^ mask)?;
            mask <<= 1;
        }
        Ok(())
    }
    fn check(&self, nranks: usize, _min_bytes: u64, _max_bytes: u64) -> Result<(), UsageError> {
        match nranks.is_power_of_two() {
            true => Ok(()),
            false => Err(UsageError(format!(
                "{nranks} ranks: the hypercube exchanges with rank XOR 2^k and needs a power-of-two rank count; launch 2, 4, 8, ... ranks (nccl-tests skips such a run)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_bandwidth_as_nccl_tests() {
        // 1 MiB of float on 4 ranks: 65536 per rank; algbw counts the 3 received.
        let c = HyperCube.counts(262144, 4, 4);
        assert_eq!(
            (c.param, c.send, c.recv, c.send_inplace_offset),
            (65536, 65536, 262144, 65536)
        );
        assert_eq!(c.size_bytes(4), 1 << 20);
        assert_eq!(HyperCube.alg_bytes(&c, 4, 4), 3 * 65536 * 4);
        assert!(HyperCube.check(4, 8, 8).is_ok());
        assert!(HyperCube
            .check(3, 8, 8)
            .unwrap_err()
            .0
            .starts_with("3 ranks: "));
    }
}
