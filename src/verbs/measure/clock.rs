//! The timed loops' clock, in nanoseconds since the run began: the CPU's
//! time-stamp counter where the kernel itself keeps time by it (as perftest
//! times with `get_cycles`), else CLOCK_MONOTONIC. A stamp through the vDSO
//! was 133 instructions of the 1,139 of a 2-byte `ib_send_lat` iteration
//! (callgrind, Soft-RoCE); the counter is one.

use crate::backend::{TickSource, Ticks};
use std::time::{Duration, Instant};

/// How long the counter's rate is measured against CLOCK_MONOTONIC at start:
/// parts per million at CLOCK_MONOTONIC's resolution, as perftest's own
/// calibration (`sample_get_cpu_mhz`) takes.
const CALIBRATION: Duration = Duration::from_millis(5);

pub struct Clock {
    ticks: Ticks,
    /// Fixed at start, so that a stamp is one read and one multiply.
    ns_per_tick: f64,
}

impl Clock {
    pub fn new() -> Clock {
        Clock::with_source(TickSource::host())
    }

    pub fn with_source(source: TickSource) -> Clock {
        let ticks = Ticks::new(source);
        if source == TickSource::Tsc {
            let start = Instant::now();
            while start.elapsed() < CALIBRATION {
                std::hint::spin_loop();
            }
        }
        Clock {
            ticks,
            ns_per_tick: ticks.seconds_per_tick() * 1e9,
        }
    }

    #[inline]
    pub fn now_ns(&self) -> u64 {
        (self.ticks.now().saturating_sub(self.ticks.origin()) as f64 * self.ns_per_tick) as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sources_count_nanoseconds_as_the_monotonic_clock_does() {
        let sources = match TickSource::host() {
            TickSource::Tsc => vec![TickSource::Tsc, TickSource::Monotonic],
            TickSource::Monotonic => vec![TickSource::Monotonic],
        };
        for source in sources {
            let clock = Clock::with_source(source);
            let wall = Instant::now();
            let before = clock.now_ns();
            std::thread::sleep(Duration::from_millis(20));
            let span = clock.now_ns() - before;
            let wall = wall.elapsed().as_nanos() as f64;
            let ratio = span as f64 / wall;
            assert!(
                (0.98..1.02).contains(&ratio),
                "{source:?}: {span} ns against {wall} ns"
            );
        }
    }
}
