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

    /// The pair (a, b) from both ranks' samples at `at` of their encoded
    /// lists: as slow as its slower side, the wrong bytes of both sides
    /// added, the longer CPU wait of the two (an exchange waits for both).
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
            cpu_wait_seconds: known(3).reduce(f64::max),
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
