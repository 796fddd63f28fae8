//! The timed loops' clock.

use std::time::Instant;

/// CLOCK_MONOTONIC (std's `Instant`, a vDSO call), in nanoseconds since the run began.
pub struct Clock {
    origin: Instant,
}

impl Clock {
    pub fn new() -> Clock {
        Clock {
            origin: Instant::now(),
        }
    }

    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
