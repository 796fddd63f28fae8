//! Where a rank is: what the main thread publishes (a counter bumped before each
//! watched call, whether it is inside one, and what the calls are), and the
//! watchdog thread's clock of how long nothing has moved.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Calls entered so far, bumped before each call by the one thread that makes them
/// and read by the watchdog thread, which only looks for a change.
#[derive(Default)]
pub struct CallCount(AtomicU64);

impl CallCount {
    /// A plain load and store, not a locked add: with one writer no count that
    /// matters is lost, and a locked instruction would drain the store buffer inside
    /// the timed loop, next to the stores the call just made.
    #[inline]
    pub fn bump(&self) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Default)]
pub(super) struct State {
    pub calls: CallCount,
    pub in_call: AtomicBool,
    /// What the current calls are: "AllReduce float sum out-of-place 1048576 B".
    pub label: Mutex<String>,
}

impl State {
    pub fn snapshot(&self) -> Where {
        Where {
            calls: self.calls.get(),
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
        let calls = state.calls.get();
        if calls != self.last_calls || !state.in_call.load(Ordering::Relaxed) {
            self.last_calls = calls;
            self.since = Instant::now();
            return false;
        }
        self.since.elapsed() >= timeout
    }
}
