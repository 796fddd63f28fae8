//! One pair measurement, as one rank of the pair timed it, and how the ranks
//! send it to each other (a few numbers a pair, round and size).

/// One pair measurement as one rank of the pair timed it.
#[derive(Clone, Copy, Debug)]
pub struct PairSample {
    /// Mean seconds per exchange.
    pub seconds: f64,
    /// Median seconds of one exchange: latency is judged on it, as perftest's
    /// t_typical, so one descheduled iteration does not make a pair slow.
    pub p50_seconds: f64,
    /// Bytes received wrong in validation; None when not validated.
    pub wrong: Option<u64>,
    /// Mean seconds per exchange the rank waited for a CPU while ready to run
    /// (`sysfs::cpu_wait`): time a busy host, not the network, took. None
    /// where it was not read.
    pub cpu_wait_seconds: Option<f64>,
}

/// Values each rank sends per round and size: mean and median seconds (NaN on a
/// bye), wrong bytes and CPU wait (-1: not known).
pub const SAMPLE_LEN: usize = 4;

impl PairSample {
    /// What a rank without a partner in the round sends.
    pub const BYE: PairSample = PairSample {
        seconds: f64::NAN,
        p50_seconds: f64::NAN,
        wrong: None,
        cpu_wait_seconds: None,
    };

    /// One rank's sample of a pair from its timed exchanges: each one's
    /// seconds (`per_iteration`, sorted here), all of them `total` seconds,
    /// the CPU wait over all of them, and the wrong bytes of validation.
    pub fn of_loop(
        per_iteration: &mut [f64],
        total: f64,
        cpu_wait: Option<f64>,
        wrong: Option<u64>,
    ) -> PairSample {
        let iters = per_iteration.len() as f64;
        per_iteration.sort_by(f64::total_cmp);
        PairSample {
            seconds: total / iters,
            p50_seconds: per_iteration[per_iteration.len() / 2],
            wrong,
            cpu_wait_seconds: cpu_wait.map(|s| s / iters),
        }
    }

    /// The pair (a, b) from both ranks' samples at `at` of their encoded
    /// lists: as slow as its slower side, the wrong bytes of both sides
    /// added, the shorter CPU wait of the two: a rank waiting for its partner
    /// spins, and on a busy host queues for a CPU while it spins, so only a
    /// wait both ranks had is the host's for sure (a partner that sleeps or
    /// is slowed by the network makes the other queue without the host's doing).
    pub fn of_pair(per_rank: &[&[f64]], a: usize, b: usize, at: usize) -> PairSample {
        let slower = |k: usize| per_rank[a][at + k].max(per_rank[b][at + k]);
        let known = |k: usize| {
            [per_rank[a][at + k], per_rank[b][at + k]]
                .into_iter()
                .filter(|&v| v >= 0.0)
        };
        PairSample {
            seconds: slower(0),
            p50_seconds: slower(1),
            wrong: known(2).reduce(|x, y| x + y).map(|w| w as u64),
            cpu_wait_seconds: known(3).reduce(f64::min),
        }
    }

    pub fn encode(self) -> [f64; SAMPLE_LEN] {
        [
            self.seconds,
            self.p50_seconds,
            self.wrong.map_or(-1.0, |w| w as f64),
            self.cpu_wait_seconds.map_or(-1.0, |s| s.max(0.0)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_is_its_slower_side_and_the_shorter_wait() {
        let a = PairSample {
            seconds: 2e-6,
            p50_seconds: 1e-6,
            wrong: Some(1),
            cpu_wait_seconds: Some(0.5e-6),
        }
        .encode();
        let b = PairSample {
            seconds: 3e-6,
            p50_seconds: 0.5e-6,
            wrong: None,
            cpu_wait_seconds: Some(0.1e-6),
        }
        .encode();
        let unread = PairSample {
            cpu_wait_seconds: None,
            ..PairSample::BYE
        }
        .encode();
        let pair = PairSample::of_pair(&[&a, &b, &unread], 0, 1, 0);
        assert_eq!(
            (pair.seconds, pair.p50_seconds, pair.wrong),
            (3e-6, 1e-6, Some(1))
        );
        assert_eq!(pair.cpu_wait_seconds, Some(0.1e-6));
        assert_eq!(
            PairSample::of_pair(&[&a, &b, &unread], 0, 2, 0).cpu_wait_seconds,
            Some(0.5e-6)
        );
        assert_eq!(
            PairSample::of_pair(&[&unread, &unread], 0, 1, 0).cpu_wait_seconds,
            None
        );
    }
}
