//! `sendrecv_perf --all-pairs`: each pair exchanges messages with MPI_Sendrecv
//! (both directions at once, as sendrecv_perf's ring does), timed with MPI_Wtime.

use super::judging::Thresholds;
use super::runner::{check_memory, run_pairs, PairMeasure, PairRun, PairSample};
use crate::args::{CollArgs, Plan};
use crate::collective::{Collective, CollectiveId};
use crate::job::world::World;
use crate::job::{ExitStatus, Failure};
use crate::sizes::{sweep, sweep_len};
use crate::watchdog::Watchdog;
use mpi::point_to_point::send_receive_into;
use mpi::topology::Communicator;
use std::time::Duration;

/// Environment variable that makes rank N slow in every exchange (each pair
/// with it then measures slow), to prove that the suspect node is named.
pub const FAULT_SLOW_ENV: &str = "FABRICBENCH_FAULT_SLOW_RANK";
const FAULT_DELAY: Duration = Duration::from_millis(10);

/// The delay `rank` adds to each exchange: FAULT_DELAY when `FAULT_SLOW_ENV` (its
/// value `slow_rank`) names it. Read once, when the pair is set up.
fn injected_delay(slow_rank: Option<&str>, rank: usize) -> Option<Duration> {
    let slow: Option<usize> = slow_rank.and_then(|v| v.parse().ok());
    (slow == Some(rank)).then_some(FAULT_DELAY)
}

/// What rank `rank` sends at byte `i`; never 0xFF, the value validation poisons with.
fn pattern(rank: usize, i: usize) -> u8 {
    ((rank * 131 + i * 7) % 251) as u8
}

pub struct MpiPair<'a> {
    world: &'a World,
    send: Vec<u8>,
    recv: Vec<u8>,
    warmup_iters: usize,
    check: bool,
    delay: Option<Duration>,
    /// Each timed exchange's seconds, reused for every pair: nothing is allocated in the loop.
    per_iteration: Vec<f64>,
}

impl<'a> MpiPair<'a> {
    pub fn new(world: &'a World, max_bytes: usize, plan: &Plan) -> MpiPair<'a> {
        let slow_rank = std::env::var(FAULT_SLOW_ENV).ok();
        MpiPair {
            world,
            send: (0..max_bytes).map(|i| pattern(world.rank, i)).collect(),
            recv: vec![0; max_bytes],
            warmup_iters: plan.warmup_iters,
            check: plan.check > 0,
            delay: injected_delay(slow_rank.as_deref(), world.rank),
            per_iteration: vec![0.0; plan.iters],
        }
    }
}

impl PairMeasure for MpiPair<'_> {
    fn describe(&self) -> String {
        "MPI_Sendrecv between the two ranks, both directions at once".into()
    }

    fn measure(
        &mut self,
        peer: usize,
        bytes: usize,
        watchdog: &Watchdog,
    ) -> anyhow::Result<PairSample> {
        let other = self.world.comm.process_at_rank(peer as i32);
        let (send, recv) = (&self.send[..bytes], &mut self.recv[..bytes]);
        watchdog.fault_point(bytes as u64);
        for _ in 0..self.warmup_iters {
            watchdog.enter_call();
            send_receive_into(send, &other, recv, &other);
        }
        let start = mpi::time();
        let mut last = start;
        for t in self.per_iteration.iter_mut() {
            watchdog.enter_call();
            send_receive_into(send, &other, recv, &other);
            if let Some(d) = self.delay {
                std::thread::sleep(d);
            }
            let now = mpi::time();
            *t = now - last;
            last = now;
        }
        let seconds = (last - start) / self.per_iteration.len() as f64;
        self.per_iteration.sort_by(f64::total_cmp);
        let p50_seconds = self.per_iteration[self.per_iteration.len() / 2];
        let wrong = self.check.then(|| {
            recv.fill(0xFF);
            watchdog.enter_call();
            send_receive_into(send, &other, recv, &other);
            recv.iter()
                .enumerate()
                .filter(|&(i, &b)| b != pattern(peer, i))
                .count() as u64
        });
        Ok(PairSample {
            seconds,
            p50_seconds,
            wrong,
        })
    }
}

/// The all-pairs run of a collective binary; only sendrecv_perf has one.
pub(crate) fn run(
    world: &World,
    coll: &dyn Collective,
    args: &CollArgs,
    plan: &Plan,
    program: &str,
) -> Result<ExitStatus, Failure> {
    if coll.id() != CollectiveId::SendRecv {
        return Err(Failure::Usage(format!(
            "--all-pairs: {program} has no pair mode; use sendrecv_perf --all-pairs (or ib_write_bw/ib_write_lat)"
        )));
    }
    if world.size < 2 {
        return Err(Failure::Usage(
            "--all-pairs needs 2 or more ranks: launch one rank per node, e.g. mpirun -np 8 --map-by ppr:1:node sendrecv_perf --all-pairs".into(),
        ));
    }
    let thresholds = Thresholds::from_args(&args.pairs, args.output.append)?;
    if plan.max_bytes > i32::MAX as u64 {
        return Err(Failure::Usage(format!(
            "-e/--maxbytes {}: MPI counts stop at 2^31-1 bytes; lower -e",
            plan.max_bytes
        )));
    }
    let sizes = sweep_len(plan.min_bytes, plan.max_bytes, plan.step);
    let per_pair = (plan.iters as u64).saturating_mul(8);
    check_memory(world, program, 2 * plan.max_bytes, per_pair, sizes)?;
    let mut pair = MpiPair::new(world, plan.max_bytes as usize, plan);
    let setup = PairRun {
        program,
        sizes: sweep(plan.min_bytes, plan.max_bytes, plan.step),
        iters: plan.iters,
        thresholds,
        csv: args.output.csv.as_deref(),
        timeout_s: plan.timeout_s,
    };
    run_pairs(world, &mut pair, &setup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_rank_is_slowed() {
        assert_eq!(injected_delay(Some("3"), 3), Some(FAULT_DELAY));
        assert_eq!(injected_delay(Some("3"), 2), None);
        assert_eq!(injected_delay(Some("three"), 3), None);
        assert_eq!(injected_delay(None, 0), None);
    }
}
