//! One placement's timings, combined over processes into what the table and the CSV
//! report: the time `-a` asks for, each iteration's worst rank, the slowest rank.

use crate::driver::args::Average;
use crate::report::run::now_utc;
use crate::report::{Measurement, PerIteration, Placement};
use crate::stats::{histogram, max_over_ranks, mean_per_rank, slowest, IterStats, SpreadStats};

/// One placement's timings combined over processes, from what each sent rank 0:
/// [seconds per call, CPU seconds per call, then each iteration's seconds].
#[derive(Debug)]
pub(super) struct Timing {
    /// Per-call seconds combined by -a.
    pub seconds: f64,
    /// CPU seconds to issue a call, combined by -a.
    pub cpu_seconds: f64,
    /// Each iteration's time, the max over ranks.
    pub worst: Vec<f64>,
    /// The rank with the largest mean per-iteration time.
    pub slowest_rank: usize,
    /// Each process's per-iteration times, process order.
    pub per_process: Vec<Vec<f64>>,
}

impl Timing {
    /// `iters`: the per-iteration times each process sent (0 with --percentiles 0).
    pub(super) fn combine(all: &[f64], iters: usize, average: Average) -> Timing {
        let per_process = all.chunks_exact(iters + 2);
        let per_rank_time: Vec<f64> = per_process.clone().map(|c| c[0]).collect();
        let per_rank_cpu: Vec<f64> = per_process.clone().map(|c| c[1]).collect();
        let rows: Vec<Vec<f64>> = per_process.map(|c| c[2..].to_vec()).collect();
        let per_iter = rows.concat();
        // Without per-iteration times, a rank's mean iteration is its loop's time a call.
        let (worst, slowest_rank) = match iters {
            0 => (Vec::new(), slowest(&per_rank_time)),
            _ => (
                max_over_ranks(&per_iter, iters),
                slowest(&mean_per_rank(&per_iter, iters)),
            ),
        };
        Timing {
            seconds: average.combine(&per_rank_time),
            cpu_seconds: average.combine(&per_rank_cpu),
            worst,
            slowest_rank,
            per_process: rows,
        }
    }

    /// -I: nccl-tests' per-iteration report, its summary without the first `skip`
    /// iterations (-K).
    pub(super) fn per_iteration(&self, skip: usize) -> Option<PerIteration> {
        Some(PerIteration {
            skipped: skip,
            stats: SpreadStats::of(self.worst.get(skip..)?)?,
            times: self.worst.clone(),
            per_process: self.per_process.clone(),
        })
    }

    /// `alg_bytes`: what algbw divides by the time (the size but for hypercube).
    pub(super) fn measurement(
        &self,
        placement: Placement,
        alg_bytes: u64,
        busbw_factor: f64,
        wrong: Option<u64>,
    ) -> Measurement {
        let algbw = alg_bytes as f64 / 1e9 / self.seconds;
        let h = histogram(&self.worst);
        Measurement {
            placement,
            time_us: self.seconds * 1e6,
            algbw_gbs: algbw,
            busbw_gbs: algbw * busbw_factor,
            wrong,
            latency: IterStats::from_seconds(&self.worst, &h),
            histogram: h,
            slowest_rank: self.slowest_rank,
            timestamp: now_utc(),
            cpu_us: Some(self.cpu_seconds * 1e6),
            wrong_ranks: Vec::new(),
            per_iter: None,
        }
    }
}
