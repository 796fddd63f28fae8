//! The collectives. Each file says only what nccl-tests' file for it says:
//! its byte counts, its bus-bandwidth factor, the data it must leave behind, and
//! which backend call runs it. The shared driver (`crate::driver`) does the rest.

mod all_gather;
mod all_reduce;
mod alltoall;
mod alltoallv;
mod broadcast;
mod gather;
mod hypercube;
mod reduce;
mod reduce_scatter;
mod scatter;
mod sendrecv;

pub use all_gather::AllGather;
pub use all_reduce::AllReduce;
pub use alltoall::AlltoAll;
pub use alltoallv::{AlltoAllv, ALLTOALLV};
pub use broadcast::Broadcast;
pub use gather::Gather;
pub use hypercube::HyperCube;
pub use reduce::Reduce;
pub use reduce_scatter::ReduceScatter;
pub use scatter::Scatter;
pub use sendrecv::SendRecv;

pub use crate::backend::CollectiveId;

use crate::backend::{Backend, OpArgs};
use crate::datatype::RedOp;
use crate::job::UsageError;
use crate::pattern::Pattern;

/// mulsum on a library without PreMulSum: this rank's input scaled before the sum. The
/// op is checked here, inline, so that the other reductions' timed calls skip the call.
#[inline]
fn premultiply(backend: &mut dyn Backend, args: &OpArgs, elements: usize) -> anyhow::Result<()> {
    if args.op == RedOp::Mulsum {
        backend.premultiply(args, elements)?;
    }
    Ok(())
}

/// Element counts of one call, as nccl-tests' `GetCollByteCount` defines them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    /// Elements in each rank's send buffer.
    pub send: usize,
    /// Elements in each rank's receive buffer.
    pub recv: usize,
    /// The count passed to the library call (the table's `count` column).
    pub param: usize,
    /// In-place: the send data sits at recv + rank * this many elements.
    pub send_inplace_offset: usize,
    /// In-place: the result lands at recv + rank * this many elements.
    pub recv_inplace_offset: usize,
}

impl Counts {
    /// Send and receive the same `count` elements (AllReduce, Broadcast, Reduce, SendRecv).
    pub fn same(count: usize) -> Counts {
        Counts {
            send: count,
            recv: count,
            param: count,
            send_inplace_offset: 0,
            recv_inplace_offset: 0,
        }
    }

    /// Send a `chunk`, receive every rank's (AllGather, Gather); in place, a rank's
    /// chunk already sits at its slot of the receive buffer.
    pub fn gathered(chunk: usize, nranks: usize) -> Counts {
        Counts {
            send: chunk,
            recv: chunk * nranks,
            param: chunk,
            send_inplace_offset: chunk,
            recv_inplace_offset: 0,
        }
    }

    /// Send a chunk per rank, receive one (ReduceScatter, Scatter); in place, the
    /// result lands at the rank's slot.
    pub fn scattered(chunk: usize, nranks: usize) -> Counts {
        Counts {
            send: chunk * nranks,
            recv: chunk,
            param: chunk,
            send_inplace_offset: 0,
            recv_inplace_offset: chunk,
        }
    }

    /// The table's `size` column, max(send, recv) bytes. It is also the byte count
    /// algbw divides by the time: nccl-tests' per-collective `GetBw` numerators
    /// (count x typesize, x nranks for the chunked collectives) all equal it.
    pub fn size_bytes(&self, elt_size: usize) -> u64 {
        (self.send.max(self.recv) * elt_size) as u64
    }
}

/// A rank's view of one call, for computing the data it must hold afterwards.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub rank: usize,
    pub nranks: usize,
    pub root: usize,
    pub counts: Counts,
    pub pattern: Pattern,
}

/// Per-rank chunk of the collectives that split a buffer across ranks: count/nranks
/// rounded down to a 16-byte multiple of elements, exactly as nccl-tests does.
pub fn chunk_count(count: usize, elt_size: usize, nranks: usize) -> usize {
    let per_16_bytes = (16 / elt_size).max(1);
    (count / nranks.max(1)) & !(per_16_bytes - 1)
}

pub trait Collective: Sync {
    /// The nccl-tests name: "AllReduce".
    fn name(&self) -> &'static str;
    /// Which one it is; `id().as_str()` is the CSV name, "all_reduce".
    fn id(&self) -> CollectiveId;
    /// Whether `-o` applies (the table prints "none" otherwise).
    fn reduces(&self) -> bool {
        false
    }
    /// Whether `-r` applies (the table prints -1 otherwise).
    fn rooted(&self) -> bool {
        false
    }
    /// Whether `--all-pairs` runs: measures every pair of ranks with this collective.
    fn pairs(&self) -> bool {
        false
    }
    fn counts(&self, count: usize, elt_size: usize, nranks: usize) -> Counts;
    /// busbw = algbw x this: comparable with the link's speed whatever the rank count.
    fn busbw_factor(&self, nranks: usize) -> f64;
    /// The value of receive-buffer element `index` after the call on `layout.rank`,
    /// or None where the call leaves it undefined (non-root ranks of Reduce, Gather).
    fn expected(&self, layout: &Layout, index: usize) -> Option<f64>;
    /// `expected` of each element of `layout`'s receive buffer: validation asks
    /// element after element, so what a collective works out per layout (alltoallv's
    /// segments) it works out once, here.
    fn expected_of<'a>(&'a self, layout: &'a Layout) -> Box<dyn Fn(usize) -> Option<f64> + 'a> {
        Box::new(move |index| self.expected(layout, index))
    }
    /// Issues the call.
    fn launch(&self, backend: &mut dyn Backend, args: &OpArgs) -> anyhow::Result<()>;
    /// This run's form of the collective, set up from the job's environment (`vars`,
    /// read once where the driver opens the job) for `nranks` ranks: alltoallv's
    /// traffic pattern. None: this one, as it is. Err is the one usage line.
    fn for_run(
        &self,
        _nranks: usize,
        _vars: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Option<Box<dyn Collective>>> {
        Ok(None)
    }
    /// What the collective needs of the run before anything opens (alltoallv's
    /// traffic matrix, hypercube's power-of-two ranks): Err is the one usage line.
    fn check(&self, _nranks: usize, _min_bytes: u64, _max_bytes: u64) -> Result<(), UsageError> {
        Ok(())
    }
    /// The bytes algbw divides by the time: the size column for all but hypercube.
    fn alg_bytes(&self, counts: &Counts, elt_size: usize, _nranks: usize) -> u64 {
        counts.size_bytes(elt_size)
    }
    /// Lines rank 0 prints after a placement's time is known (alltoallv's summary).
    fn report_lines(
        &self,
        _counts: &Counts,
        _elt_size: usize,
        _nranks: usize,
        _seconds: f64,
    ) -> Vec<String> {
        Vec::new()
    }
}

/// (n-1)/n: the factor of the collectives where each rank sends all but its own share.
pub fn all_but_own_share(nranks: usize) -> f64 {
    (nranks as f64 - 1.0) / nranks as f64
}

/// Every collective, by CSV name: the binaries and `compare`/`plot` look them up here.
pub fn all() -> [&'static dyn Collective; 11] {
    [
        &AllReduce,
        &AllGather,
        &Broadcast,
        &Reduce,
        &ReduceScatter,
        &AlltoAll,
        &Gather,
        &Scatter,
        &SendRecv,
        &ALLTOALLV,
        &HyperCube,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::{DataType, RedOp};

    #[test]
    fn chunk_rounds_down_to_16_bytes() {
        assert_eq!(chunk_count(1000, 4, 3), 332);
        assert_eq!(chunk_count(1000, 1, 3), 320);
        assert_eq!(chunk_count(8, 8, 4), 2);
        assert_eq!(chunk_count(2, 4, 4), 0);
    }

    #[test]
    fn busbw_factors_match_nccl_tests() {
        let n = 4;
        let f = |c: &dyn Collective| c.busbw_factor(n);
        assert_eq!(f(&AllReduce), 1.5);
        for c in [
            &ReduceScatter as &dyn Collective,
            &AllGather,
            &AlltoAll,
            &Gather,
            &Scatter,
        ] {
            assert_eq!(f(c), 0.75, "{}", c.name());
        }
        for c in [&Broadcast as &dyn Collective, &Reduce, &SendRecv] {
            assert_eq!(f(c), 1.0, "{}", c.name());
        }
        assert_eq!(AllReduce.busbw_factor(3), 4.0 / 3.0);
    }

    #[test]
    fn sizes_match_nccl_tests() {
        // 1 MiB of float on 3 ranks: nccl-tests prints these size/count pairs.
        let elt = 4;
        let count = (1 << 20) / elt;
        let table = |c: &dyn Collective| {
            let k = c.counts(count, elt, 3);
            (k.size_bytes(elt), k.param)
        };
        assert_eq!(table(&AllReduce), (1 << 20, 262144));
        assert_eq!(table(&AllGather), (1048560, 87380));
        assert_eq!(table(&ReduceScatter), (1048560, 87380));
        assert_eq!(table(&AlltoAll), (1048560, 87380));
        assert_eq!(table(&Gather), (1048560, 87380));
        assert_eq!(table(&Scatter), (1048560, 87380));
        assert_eq!(table(&Broadcast), (1 << 20, 262144));
        assert_eq!(table(&SendRecv), (1 << 20, 262144));
    }

    #[test]
    fn expected_data_of_every_collective() {
        let pattern = Pattern::new(DataType::Int32, RedOp::Sum, 3);
        let layout = |c: &dyn Collective, rank| Layout {
            rank,
            nranks: 3,
            root: 1,
            counts: c.counts(24, 4, 3),
            pattern,
        };
        // rank 2 of an AllGather holds rank 1's element 3 at 1*8+3.
        assert_eq!(
            AllGather.expected(&layout(&AllGather, 2), 11),
            Some(pattern.input(1, 3))
        );
        // ReduceScatter: rank 2's element 1 is the reduction of global element 2*8+1.
        assert_eq!(
            ReduceScatter.expected(&layout(&ReduceScatter, 2), 1),
            Some(pattern.reduced(17))
        );
        // AlltoAll: rank 0 receives at 2*8+5 what rank 2 sent to it: rank 2's element 0*8+5.
        assert_eq!(
            AlltoAll.expected(&layout(&AlltoAll, 0), 21),
            Some(pattern.input(2, 5))
        );
        assert_eq!(Gather.expected(&layout(&Gather, 0), 0), None);
        assert_eq!(
            Gather.expected(&layout(&Gather, 1), 17),
            Some(pattern.input(2, 1))
        );
        assert_eq!(
            Scatter.expected(&layout(&Scatter, 2), 1),
            Some(pattern.input(1, 17))
        );
        assert_eq!(
            Broadcast.expected(&layout(&Broadcast, 0), 4),
            Some(pattern.input(1, 4))
        );
        assert_eq!(Reduce.expected(&layout(&Reduce, 0), 4), None);
        assert_eq!(
            Reduce.expected(&layout(&Reduce, 1), 4),
            Some(pattern.reduced(4))
        );
        assert_eq!(
            SendRecv.expected(&layout(&SendRecv, 0), 4),
            Some(pattern.input(2, 4))
        );
        assert_eq!(
            AllReduce.expected(&layout(&AllReduce, 0), 4),
            Some(pattern.reduced(4))
        );
    }
}
