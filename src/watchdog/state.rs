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

    /// Leaves out `pause`, a time this process did not run: it says nothing of
    /// the call. (Left out rather than starting again, so that a host starved in
    /// bursts slows the clock down but never stops it.)
    pub fn discount(&mut self, pause: Duration) {
        self.since = (self.since + pause).min(Instant::now());
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

/// How long the watchdog thread may go without running before this process
/// counts as paused (stopped, or starved by a loaded host): its ticks are 20 to
/// 50 ms apart.
pub(super) const PAUSE_BOUND: Duration = Duration::from_secs(1);

/// Notices when this process itself did not run: a rank that was stopped or
/// starved must not count its own pause as others' delay when it wakes.
pub(super) struct PauseWatch {
    bound: Duration,
    last_tick: Instant,
    /// The last pause: when it ended and how long it lasted.
    last_pause: Option<(Instant, Duration)>,
}

impl PauseWatch {
    pub fn new(bound: Duration) -> Self {
        PauseWatch {
            bound,
            last_tick: Instant::now(),
            last_pause: None,
        }
    }

    /// Called every tick: the length of the pause that just ended, if there was one.
    pub fn tick(&mut self) -> Option<Duration> {
        let now = Instant::now();
        let gap = now.duration_since(self.last_tick);
        self.last_tick = now;
        (gap >= self.bound).then(|| {
            self.last_pause = Some((now, gap));
            gap
        })
    }

    /// The time since the last tick was spent waiting on purpose (a connection
    /// attempt with its own bound), not paused.
    pub fn waited(&mut self) {
        self.last_tick = Instant::now();
    }

    /// The last pause of at least `at_least`, when it ended less than `within`
    /// ago: (its length, since when it ended).
    pub fn recent(&self, at_least: Duration, within: Duration) -> Option<(Duration, Duration)> {
        let (ended, length) = self.last_pause?;
        let since = ended.elapsed();
        (length >= at_least && since < within).then_some((length, since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_between_ticks_is_a_pause_and_is_forgotten_later() {
        let mut watch = PauseWatch::new(Duration::from_millis(30));
        assert_eq!(watch.tick(), None);
        assert_eq!(watch.recent(Duration::ZERO, Duration::from_secs(60)), None);
        std::thread::sleep(Duration::from_millis(60));
        let gap = watch.tick().expect("60 ms without a tick is a pause");
        assert!(gap >= Duration::from_millis(60), "{gap:?}");
        let (length, _) = watch
            .recent(Duration::ZERO, Duration::from_secs(60))
            .unwrap();
        assert_eq!(length, gap);
        assert_eq!(watch.tick(), None, "the next prompt tick is no pause");
        assert_eq!(
            watch.recent(Duration::ZERO, Duration::ZERO),
            None,
            "older than the window"
        );
        assert_eq!(
            watch.recent(Duration::from_secs(60), Duration::from_secs(60)),
            None,
            "too short"
        );
    }

    #[test]
    fn a_clock_leaves_out_the_pause_and_goes_on() {
        let state = State::default();
        state.in_call.store(true, Ordering::Relaxed);
        let mut clock = LocalClock::new();
        let timeout = Duration::from_millis(60);
        assert!(!clock.stuck(&state, timeout));
        std::thread::sleep(Duration::from_millis(80));
        clock.discount(Duration::from_millis(50));
        assert!(
            !clock.stuck(&state, timeout),
            "80 ms less a 50 ms pause is 30"
        );
        std::thread::sleep(Duration::from_millis(40));
        assert!(clock.stuck(&state, timeout), "then 70 ms of it ran");
    }
}
