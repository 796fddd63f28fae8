//! How many completions one `ibv_poll_cq` of the bandwidth loops asks for:
//! --cqe_poll's fixed batch, or perftest's dynamic one (perftest_resources.c:
//! init_dyn_poll_ctx, poll_cq_adaptive, poll_completions), rule for rule:
//! start at 1024; while fewer than the stabilization count of completions have
//! come, a poll that filled the batch keeps it, one that returned under 85 %
//! of it halves the distance to what came (never under 16), and ten polls in
//! a row returning the same number end the adaptation for the rest of the run
//! (later sizes then poll 16, as perftest's flag stays off).

use crate::verbs::device::completion::{poll_into, Wc};
use crate::verbs::flags::post::{CqeBatch, POLL_BATCH};
use crate::verbs::flags::{Length, Plan};
use rdma_mummy_sys::ibv_wc;
use sideway::ibverbs::completion::GenericCompletionQueue;
use std::mem::MaybeUninit;

const DYN_MIN: usize = 16;
const DYN_MAX: usize = 1024;
const STABILIZE: u32 = 10;
const THRESHOLD: f64 = 0.85;
/// perftest's MAX_QP_NUM caps the adaptation of a run of iterations.
const MAX_STABILIZATION: u64 = 16384;
const DURATION_STABILIZATION: u64 = 1000;

/// One CQ's poller for one size.
pub struct CqePoller {
    size: usize,
    stable: u32,
    last: usize,
    /// Adapts while fewer completions than this have been counted.
    stabilization: u64,
    wcs: Vec<MaybeUninit<ibv_wc>>,
}

impl CqePoller {
    /// `dynamic`: this side's adaptation is still on.
    pub fn new(plan: &Plan, dynamic: bool) -> CqePoller {
        let dynamic = dynamic && plan.post.cqe_batch == CqeBatch::Dynamic;
        let size = match plan.post.cqe_batch {
            _ if dynamic => DYN_MAX,
            CqeBatch::Fixed(n) => n as usize,
            CqeBatch::Dynamic => POLL_BATCH as usize,
        };
        let stabilization = match plan.length {
            Length::Iters(n) => (n / 4).min(MAX_STABILIZATION),
            Length::Duration(_) => (plan.qps as u64 * 3).max(DURATION_STABILIZATION),
        };
        CqePoller {
            size,
            stable: 0,
            last: 0,
            stabilization,
            wcs: vec![MaybeUninit::uninit(); size.max(DYN_MAX)],
        }
    }

    /// Replaces `out` with the completions waiting on `cq`; `counted`: the
    /// completions this loop counted so far; `dynamic` is turned off once the
    /// batch is stable.
    pub fn poll(
        &mut self,
        cq: &GenericCompletionQueue,
        out: &mut Vec<Wc>,
        counted: u64,
        dynamic: &mut bool,
    ) -> anyhow::Result<()> {
        let ne = poll_into(cq, &mut self.wcs[..self.size], out)?;
        if *dynamic && counted < self.stabilization {
            *dynamic = self.adapt(ne);
        }
        Ok(())
    }

    /// poll_cq_adaptive's step after a poll that returned `ne`; false once stable.
    fn adapt(&mut self, ne: usize) -> bool {
        let mut on = true;
        if ne == self.size && self.size < DYN_MAX {
            self.size = ((self.size + ne) / 2).min(DYN_MAX);
            self.stable = 0;
        } else if (ne as f64) < self.size as f64 * THRESHOLD {
            if self.size > DYN_MIN {
                self.size = ((self.size + ne) / 2).max(DYN_MIN);
                self.stable = 0;
            }
        } else if ne == self.last {
            self.stable += 1;
            on = self.stable < STABILIZE;
        } else {
            self.stable = 0;
        }
        self.last = ne;
        on
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
    use crate::verbs::flags::parse;

    fn poller(args: &[&str], dynamic: bool) -> CqePoller {
        let bench = Benchmark::new(Verb::Write, Test::Bw);
        let mut argv = vec!["ib_write_bw"];
        argv.extend_from_slice(args);
        CqePoller::new(&parse(bench, argv).unwrap(), dynamic)
    }

    #[test]
    fn the_dynamic_batch_follows_perftests_steps() {
        let mut p = poller(&[], true);
        assert_eq!((p.size, p.stabilization), (1024, 1250));
        // Empty polls halve the batch down to 16, then leave it there.
        for want in [512, 256, 128, 64, 32, 16, 16] {
            assert!(p.adapt(0));
            assert_eq!(p.size, want);
        }
        // A full batch keeps its size ((16 + 16) / 2, as perftest computes).
        assert!(p.adapt(16));
        assert_eq!(p.size, 16);
        // 15 of 16 is above 85 %: the same count ten times in a row is stable.
        let on: Vec<bool> = (0..11).map(|_| p.adapt(15)).collect();
        assert_eq!(on.iter().filter(|&&b| b).count(), 10, "{on:?}");
        assert!(!on[10]);
        // -D: at least 1000 completions adapt; short runs and a disabled side poll 16.
        assert_eq!(poller(&["-D", "2"], true).stabilization, 1000);
        assert_eq!(poller(&["-n", "100"], true).size, 16);
        assert_eq!(poller(&[], false).size, 16);
        assert_eq!(poller(&["--cqe_poll", "300"], true).size, 300);
    }
}
