//! The clock of the backends whose calls have completed when they return (mpi and the
//! test loopback): a timestamp before the timed loop and after each call.
//!
//! A timestamp is the CPU's time-stamp counter where the kernel itself keeps time by
//! it (clocksource "tsc": the kernel checked at boot that every CPU's counter runs in
//! step, and drops it for another clock where it halts in idle, changes rate with the
//! frequency or drifts): about 10 ns a read here against 24 ns for CLOCK_MONOTONIC
//! through the vDSO, which alone was 5% of an 8-byte allreduce on shared memory.
//! Anywhere else (kvm-clock, another architecture) it is CLOCK_MONOTONIC.

use super::Marks;
use crate::sysfs::Root;
use std::time::Instant;

/// What the host clock's timestamps count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickSource {
    /// The time-stamp counter, scaled to seconds by CLOCK_MONOTONIC over the clock's life.
    Tsc,
    /// CLOCK_MONOTONIC (`Instant`), in nanoseconds.
    Monotonic,
}

impl TickSource {
    /// The counter where the kernel keeps time by it, else CLOCK_MONOTONIC. The kernel's
    /// choice, not CPUID's invariant-TSC bit, decides: the kernel watches the counter
    /// for the faults that bit rules out and more, and a guest told `tsc=reliable` (as
    /// the Soft-RoCE VM, whose emulated CPU lacks the bit) keeps its own time by it.
    pub fn detect(root: &Root) -> TickSource {
        let kernel = root.read("/sys/devices/system/clocksource/clocksource0/current_clocksource");
        if cfg!(target_arch = "x86_64") && kernel.as_deref().map(str::trim) == Some("tsc") {
            TickSource::Tsc
        } else {
            TickSource::Monotonic
        }
    }

    /// This host's source, detected once: the clock and the header's name of it agree.
    pub fn host() -> TickSource {
        static HOST: std::sync::OnceLock<TickSource> = std::sync::OnceLock::new();
        *HOST.get_or_init(|| TickSource::detect(&Root::new("/")))
    }

    /// How the header names it.
    pub fn name(self) -> &'static str {
        match self {
            TickSource::Tsc => "TSC",
            TickSource::Monotonic => "CLOCK_MONOTONIC",
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn read_tsc() -> u64 {
    // Not serialised (no lfence): the read may start a few cycles before the call's last
    // instructions retire, the same few cycles at every mark, so differences stay unbiased.
    // SAFETY: RDTSC exists on every x86_64 CPU; TickSource::Tsc is chosen only where the
    // kernel uses it as its own clock.
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn read_tsc() -> u64 {
    unreachable!("TickSource::Tsc is detected only on x86_64")
}

/// Raw readings of one source and their rate: the counter, or CLOCK_MONOTONIC's
/// nanoseconds since the reader was made.
#[derive(Clone, Copy)]
pub struct Ticks {
    source: TickSource,
    /// When the reader was made, on both scales: the counter's rate is measured over the
    /// reader's whole life, so it is exact to parts per million after a millisecond.
    origin: Instant,
    origin_ticks: u64,
}

impl Ticks {
    pub fn new(source: TickSource) -> Ticks {
        let mut ticks = Ticks {
            source,
            origin: Instant::now(),
            origin_ticks: 0,
        };
        ticks.origin_ticks = ticks.now();
        ticks
    }

    pub fn source(&self) -> TickSource {
        self.source
    }

    #[inline(always)]
    pub fn now(&self) -> u64 {
        match self.source {
            TickSource::Tsc => read_tsc(),
            TickSource::Monotonic => self.origin.elapsed().as_nanos() as u64,
        }
    }

    /// The reading when the reader was made.
    pub fn origin(&self) -> u64 {
        self.origin_ticks
    }

    /// Seconds a tick lasts, measured now.
    pub fn seconds_per_tick(&self) -> f64 {
        match self.source {
            TickSource::Monotonic => 1e-9,
            TickSource::Tsc => {
                let seconds = self.origin.elapsed().as_secs_f64();
                let ticks = read_tsc().saturating_sub(self.origin_ticks);
                if ticks == 0 {
                    0.0
                } else {
                    seconds / ticks as f64
                }
            }
        }
    }
}

/// Timestamps of one timed loop, in ticks of its source.
pub struct HostClock {
    ticks: Ticks,
    /// Room for every planned mark, and how many were taken.
    marks: Vec<u64>,
    taken: usize,
    pattern: Option<Marks>,
}

/// The best source this host has.
impl Default for HostClock {
    fn default() -> HostClock {
        HostClock::new(TickSource::host())
    }
}

impl HostClock {
    pub fn new(source: TickSource) -> HostClock {
        HostClock {
            ticks: Ticks::new(source),
            marks: Vec::new(),
            taken: 0,
            pattern: None,
        }
    }

    pub fn source(&self) -> TickSource {
        self.ticks.source()
    }

    /// Whether the loop started last marks every call (`Marks::each_call`).
    pub fn marks_each_call(&self) -> bool {
        self.pattern.is_none_or(Marks::each_call)
    }

    /// `Backend::timer_start`: room for every mark, so that `mark` never allocates.
    pub fn start(&mut self, iterations: usize, marks: Marks) {
        // Written once here, so that the timed loop's marks never fault a fresh page
        // in (a fault every 512 marks cost an 8-byte allreduce about 4%).
        self.marks.clear();
        self.marks.resize(marks.count(iterations), 0);
        self.taken = 0;
        self.pattern = Some(marks);
        if marks != Marks::Paired {
            self.mark();
        }
    }

    #[inline]
    pub fn mark(&mut self) {
        // A store into the planned room, never a push: no growth path, so the mark
        // needs no stack frame. A mark past the plan is dropped (and `read` ignores it).
        let now = self.ticks.now();
        if let Some(slot) = self.marks.get_mut(self.taken) {
            *slot = now;
        }
        self.taken += 1;
    }

    /// `Backend::timer_read`: each iteration's seconds, and the whole loop's.
    pub fn read(&self, per_iteration: &mut [f64]) -> f64 {
        let marks = &self.marks[..self.taken.min(self.marks.len())];
        let scale = self.ticks.seconds_per_tick();
        let pattern = self.pattern.unwrap_or(Marks::Chained);
        let seconds = pattern.read(marks.len(), per_iteration, |i, j| {
            Ok(marks[j].saturating_sub(marks[i]) as f64 * scale)
        });
        seconds.unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn timed_sleeps(source: TickSource) -> (f64, Vec<f64>, f64) {
        let mut clock = HostClock::new(source);
        let wall = Instant::now();
        clock.start(3, Marks::Chained);
        for ms in [2, 4, 6] {
            std::thread::sleep(Duration::from_millis(ms));
            clock.mark();
        }
        let wall = wall.elapsed().as_secs_f64();
        let mut each = vec![0.0; 3];
        let total = clock.read(&mut each);
        (total, each, wall)
    }

    #[test]
    fn both_sources_measure_what_the_monotonic_clock_does() {
        let mut sources = vec![TickSource::Monotonic];
        if TickSource::detect(&Root::new("/")) == TickSource::Tsc {
            sources.push(TickSource::Tsc);
        }
        for source in sources {
            let (total, each, wall) = timed_sleeps(source);
            // Each sleep lasts at least what was asked, and the loop no longer than the wall.
            for (got, ms) in each.iter().zip([2.0, 4.0, 6.0]) {
                assert!(
                    *got >= ms * 1e-3 * 0.99,
                    "{source:?}: {got} s for a {ms} ms sleep"
                );
            }
            assert!(
                total <= wall * 1.01,
                "{source:?}: {total} s in a {wall} s loop"
            );
            let sum: f64 = each.iter().sum();
            assert!(
                (sum - total).abs() <= total * 1e-9,
                "{source:?}: {sum} against {total}"
            );
        }
    }

    #[test]
    fn the_counter_needs_the_kernel_to_keep_time_by_it() {
        let tree = crate::sysfs::fixture::Tree::temp("clocksource");
        let file = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
        tree.put(file, "kvm-clock");
        assert_eq!(TickSource::detect(&tree.root()), TickSource::Monotonic);
        tree.put(file, "tsc\n");
        let want = match cfg!(target_arch = "x86_64") {
            true => TickSource::Tsc,
            false => TickSource::Monotonic,
        };
        assert_eq!(TickSource::detect(&tree.root()), want);
        tree.remove(file);
        assert_eq!(TickSource::detect(&tree.root()), TickSource::Monotonic);
    }
}
