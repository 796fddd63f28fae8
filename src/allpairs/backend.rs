//! `sendrecv_perf --all-pairs` on any collective backend: each pair exchanges
//! messages both directions at once through `Backend::exchange` (MPI_Sendrecv in
//! host memory on the mpi backend, ncclSend/ncclRecv in one group in GPU memory on
//! the nccl backend), timed with the backend's own clock (host clock, or CUDA
//! events on the rank's stream), so one code path measures, validates and judges
//! both, and the mpi backend's tests cover what the nccl backend runs.

use super::judging::Thresholds;
use super::runner::{check_memory, run_pairs_watched, PairMeasure, PairRun, PairsOf, Participants};
use super::sample::PairSample;
use crate::backend::{Backend, BackendKind, BufRef, Marks, OpArgs, Slot};
use crate::cli::AllPairsArgs;
use crate::datatype::{DataType, RedOp};
use crate::faults;
use crate::job::world::World;
use crate::job::{agree_each_rank, ExitStatus, Failure};
use crate::report::counters::FabricPlan;
use crate::sizes::{sweep, sweep_len, Step};
use crate::sysfs::cpu_wait::CpuWait;
use crate::sysfs::Root;
use crate::watchdog::Watchdog;
use anyhow::Context;
use std::path::Path;
use std::time::Duration;

/// What an all-pairs run on a backend takes of the collectives' flags (the driver
/// fills it in): the pairs' own flags, the sweep and its loops, and its outputs.
pub struct PairFlags<'a> {
    pub pairs: &'a AllPairsArgs,
    /// --append: refused, the matrix is a file of its own.
    pub append: bool,
    pub csv: Option<&'a Path>,
    pub counters: Option<&'a Path>,
    pub sysfs_root: &'a Path,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub step: Step,
    pub iters: usize,
    pub warmup_iters: usize,
    /// -c: each pair's received data is validated.
    pub check: bool,
    pub timeout_s: u64,
    /// --rank-pairs: every rank with every rank, not node with node.
    pub rank_pairs: bool,
}

/// What rank `rank` sends at byte `i`; never 0xFF, the value validation poisons with.
pub(crate) fn pattern(rank: usize, i: usize) -> u8 {
    ((rank * 131 + i * 7) % 251) as u8
}

/// One rank's side of the pairs, in the backend's buffers (its rank 0 of `-g`).
pub struct BackendPair<'a> {
    backend: &'a mut dyn Backend,
    kind: BackendKind,
    warmup_iters: usize,
    check: bool,
    delay: Option<Duration>,
    /// Each timed exchange's seconds, reused for every pair: nothing is allocated in the loop.
    per_iteration: Vec<f64>,
}

impl<'a> BackendPair<'a> {
    /// Allocates `max_bytes` send and receive buffers and writes this rank's pattern.
    pub fn new(
        backend: &'a mut dyn Backend,
        max_bytes: usize,
        flags: &PairFlags,
    ) -> anyhow::Result<BackendPair<'a>> {
        let rank = backend.rank_of(0);
        backend.alloc(max_bytes, max_bytes)?;
        let mine: Vec<u8> = (0..max_bytes).map(|i| pattern(rank, i)).collect();
        backend.write(at(Slot::Send), &mine)?;
        Ok(BackendPair {
            kind: backend.info().kind,
            backend,
            warmup_iters: flags.warmup_iters,
            check: flags.check,
            delay: faults::injected().delay_of(rank),
            per_iteration: vec![0.0; flags.iters],
        })
    }

    fn exchange(&mut self, peer: usize, bytes: usize) -> anyhow::Result<()> {
        let args = OpArgs {
            send: at(Slot::Send),
            recv: at(Slot::Recv),
            count: bytes,
            dtype: DataType::Uint8,
            op: RedOp::Sum,
            root: 0,
            in_place: false,
        };
        self.backend.exchange(&args, peer)
    }
}

fn at(slot: Slot) -> BufRef {
    BufRef {
        device: 0,
        slot,
        offset: 0,
    }
}

impl PairMeasure for BackendPair<'_> {
    fn describe(&self) -> String {
        match self.kind {
            BackendKind::Mpi => "MPI_Sendrecv between the two ranks, both directions at once".into(),
            BackendKind::Nccl => {
                "ncclSend/ncclRecv in one group between the two ranks' GPUs, both directions at once"
                    .into()
            }
        }
    }

    fn measure(
        &mut self,
        peer: usize,
        bytes: usize,
        watchdog: &Watchdog,
    ) -> anyhow::Result<PairSample> {
        watchdog.fault_point(bytes as u64);
        for _ in 0..self.warmup_iters {
            watchdog.enter_call();
            self.exchange(peer, bytes)?;
        }
        watchdog.enter_call();
        self.backend.synchronize()?;
        let cpu_wait = CpuWait::start(Root::new("/"));
        self.backend
            .timer_start(self.per_iteration.len(), Marks::Chained)?;
        for _ in 0..self.per_iteration.len() {
            watchdog.enter_call();
            self.exchange(peer, bytes)?;
            if let Some(d) = self.delay {
                std::thread::sleep(d);
            }
            self.backend.mark();
        }
        watchdog.enter_call();
        self.backend.synchronize()?;
        let total = self.backend.timer_read(&mut self.per_iteration)?;
        let cpu_wait = cpu_wait.stop();
        let wrong = match self.check {
            false => None,
            true => {
                self.backend.write(at(Slot::Recv), &vec![0xFF; bytes])?;
                watchdog.enter_call();
                self.exchange(peer, bytes)?;
                self.backend.synchronize()?;
                let mut got = vec![0u8; bytes];
                self.backend.read(at(Slot::Recv), &mut got)?;
                Some(wrong_bytes(&got, peer))
            }
        };
        Ok(PairSample::of_loop(
            &mut self.per_iteration,
            total,
            cpu_wait,
            wrong,
        ))
    }
}

/// Bytes of `got` that are not what rank `peer` sends.
pub(crate) fn wrong_bytes(got: &[u8], peer: usize) -> u64 {
    let wrong = got
        .iter()
        .enumerate()
        .filter(|&(i, &b)| b != pattern(peer, i));
    wrong.count() as u64
}

/// What an all-pairs run needs before any backend opens, checked on every rank
/// alike (the driver's flags refused it already where the collective has no
/// pair mode): 2 or more ranks, and host memory that fits.
pub(crate) fn prepare<'a>(
    world: &World,
    flags: &PairFlags<'a>,
    program: &'a str,
) -> Result<PairRun<'a>, Failure> {
    if world.size < 2 {
        return Err(Failure::Usage(
            "--all-pairs needs 2 or more ranks: launch one rank per node, e.g. mpirun -np 8 --map-by ppr:1:node sendrecv_perf --all-pairs".into(),
        ));
    }
    let thresholds = Thresholds::from_args(flags.pairs, flags.append)?;
    if flags.max_bytes > i32::MAX as u64 {
        return Err(Failure::Usage(format!(
            "-e/--maxbytes {}: MPI counts stop at 2^31-1 bytes; lower -e",
            flags.max_bytes
        )));
    }
    let sizes = sweep_len(flags.min_bytes, flags.max_bytes, flags.step);
    let per_pair = (flags.iters as u64).saturating_mul(8);
    // The buffers (host memory on mpi), or the host staging of GPU buffers (nccl).
    let pairs_of = match flags.rank_pairs {
        true => PairsOf::Ranks,
        false => PairsOf::Nodes,
    };
    let pairing = Participants::of(world, pairs_of).ranks.len();
    check_memory(
        world,
        program,
        2 * flags.max_bytes,
        per_pair,
        (pairing, sizes),
    )?;
    Ok(PairRun {
        program,
        sizes: sweep(flags.min_bytes, flags.max_bytes, flags.step),
        iters: flags.iters,
        thresholds,
        pairs_of,
        csv: flags.csv,
        timeout_s: flags.timeout_s,
        fabric: Some(FabricPlan::collective(
            flags.sysfs_root,
            world.nodes().len(),
        )),
        counters: flags.counters,
    })
}

/// The all-pairs run on an opened backend, every rank together.
pub(crate) fn run(
    world: &World,
    backend: &mut dyn Backend,
    flags: &PairFlags,
    run: &PairRun,
    watchdog: &Watchdog,
) -> Result<ExitStatus, Failure> {
    let pair = BackendPair::new(backend, flags.max_bytes as usize, flags).context("--all-pairs");
    let mut pair = agree_each_rank(world, run.program, ExitStatus::Failed, pair)?;
    run_pairs_watched(world, &mut pair, run, watchdog, &mut std::io::stdout())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::loopback::Loopback;

    #[test]
    fn a_pair_is_timed_and_validated_through_the_backend() {
        let mut backend = Loopback::default();
        let pairs = AllPairsArgs {
            all_pairs: true,
            slow_fraction: 0.9,
            slow_latency: 2.0,
        };
        // -n 4 -w 2 -c 1.
        let flags = PairFlags {
            pairs: &pairs,
            append: false,
            csv: None,
            counters: None,
            sysfs_root: Path::new("/"),
            min_bytes: 64,
            max_bytes: 64,
            step: Step::Factor(2),
            iters: 4,
            warmup_iters: 2,
            check: true,
            timeout_s: 0,
            rank_pairs: false,
        };
        let watchdog = Watchdog::start(&crate::job::comm::Solo, "t", 0).unwrap();
        let mut pair = BackendPair::new(&mut backend, 64, &flags).unwrap();
        // The loopback "peer" is rank 0 itself: its own pattern comes back intact.
        let s = pair.measure(0, 64, &watchdog).unwrap();
        assert_eq!(s.wrong, Some(0));
        assert!(s.seconds > 0.0 && s.p50_seconds > 0.0);
        drop(pair);
        // Warm-up 2, timed 4, validation 1, each one exchange.
        assert_eq!(backend.calls, 7);
    }
}
