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
}

/// Values each rank sends per round and size: mean and median seconds (NaN on a
/// bye), wrong bytes (-1: not checked).
pub const SAMPLE_LEN: usize = 3;

impl PairSample {
    /// What a rank without a partner in the round sends.
    pub const BYE: PairSample = PairSample {
        seconds: f64::NAN,
        p50_seconds: f64::NAN,
        wrong: None,
    };

    /// The pair (a, b) from both ranks' samples at `at` of their encoded
    /// lists: as slow as its slower side, the wrong bytes of both sides added.
    pub fn of_pair(per_rank: &[&[f64]], a: usize, b: usize, at: usize) -> PairSample {
        let slower = |k: usize| per_rank[a][at + k].max(per_rank[b][at + k]);
        let wrong = [per_rank[a][at + 2], per_rank[b][at + 2]];
        PairSample {
            seconds: slower(0),
            p50_seconds: slower(1),
            wrong: wrong
                .iter()
                .any(|&w| w >= 0.0)
                .then(|| wrong.iter().map(|w| w.max(0.0)).sum::<f64>() as u64),
        }
    }

    pub fn encode(self) -> [f64; SAMPLE_LEN] {
        [
            self.seconds,
            self.p50_seconds,
            self.wrong.map_or(-1.0, |w| w as f64),
        ]
    }
}
