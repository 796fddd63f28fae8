//! Where a rank is: what the main thread publishes (a counter bumped before each
//! watched call, whether it is inside one, and what the calls are), and the
//! watchdog thread's clock of how long nothing has moved.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Default)]
pub(super) struct State {
    /// Calls entered so far (incremented before each call).
    pub calls: AtomicU64,
    pub in_call: AtomicBool,
    /// What the current calls are: "AllReduce float sum out-of-place 1048576 B".
    pub label: Mutex<String>,
}

impl State {
    pub fn snapshot(&self) -> Where {
        Where {
            calls: self.calls.load(Ordering::Relaxed),
            in_call: self.in_call.load(Ordering::Relaxed),
            label: self.label.lock().map(|l| l.clone()).unwrap_or_default(),
        }
    }
}

/// Where one rank is, as it reports it over the side channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Where {
    /// Watched calls entered so far: the number of the current (or last) call.
    pub calls: u64,
    pub in_call: bool,
    pub label: String,
}

/// Tracks this rank's own progress; stuck once one call has lasted the timeout.
pub(super) struct LocalClock {
    last_calls: u64,
    since: Instant,
}

impl LocalClock {
    pub fn new() -> Self {
        LocalClock {
            last_calls: 0,
            since: Instant::now(),
        }
    }

    pub fn stuck(&mut self, state: &State, timeout: Duration) -> bool {
        let calls = state.calls.load(Ordering::Relaxed);
        if calls != self.last_calls || !state.in_call.load(Ordering::Relaxed) {
            self.last_calls = calls;
            self.since = Instant::now();
            return false;
        }
        self.since.elapsed() >= timeout
    }
}
