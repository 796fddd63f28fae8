//! How long this thread waited for a CPU while it was ready to run: the
//! kernel's run-queue delay, the second field of /proc/thread-self/schedstat
//! (nanoseconds; kept by every distribution kernel, CONFIG_SCHED_INFO). A rank
//! that waits here is delayed by the host, not by the network: all-pairs
//! takes it off a pair's time before naming the pair slow.

use super::Root;

/// "cpu_ns run_delay_ns timeslices": the run delay.
fn parse(text: &str) -> Option<u64> {
    let mut words = text.split_whitespace();
    let run_delay = words.nth(1)?.parse().ok()?;
    words.next()?.parse::<u64>().ok()?;
    Some(run_delay)
}

/// The calling thread's run-queue delay so far, in nanoseconds; None where the
/// kernel does not keep it.
pub fn waited_ns(root: &Root) -> Option<u64> {
    root.read_with("/proc/thread-self/schedstat", parse).value()
}

/// The seconds the calling thread waited for a CPU between `start` and `stop`.
pub struct CpuWait {
    root: Root,
    before: Option<u64>,
}

impl CpuWait {
    pub fn start(root: Root) -> CpuWait {
        CpuWait {
            before: waited_ns(&root),
            root,
        }
    }

    /// Seconds waited since `start`; None where either reading failed.
    pub fn stop(self) -> Option<f64> {
        let after = waited_ns(&self.root)?;
        Some(after.saturating_sub(self.before?) as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_field_is_the_wait() {
        assert_eq!(parse("123456 7890 12\n"), Some(7890));
        for bad in ["", "1", "1 2", "1 x 3", "1 -2 3", "1 2 x"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_fixture_without_the_file_reads_none_and_this_host_reads_a_count() {
        let empty = std::env::temp_dir().join(format!("fb-cpuwait-{}", std::process::id()));
        assert_eq!(CpuWait::start(Root::new(&empty)).stop(), None);
        // Every Linux kernel this runs on keeps it: a count, not a guess.
        let live = CpuWait::start(Root::new("/")).stop();
        assert!(live.is_some_and(|s| s >= 0.0), "{live:?}");
    }
}
