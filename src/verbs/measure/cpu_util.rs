//! `--cpu_util`: perftest's CPU utilisation of a size (get_cpu_stats and
//! calc_cpu_util): the host's aggregate `cpu` line of /proc/stat read before
//! and after, and the user time's share of user + idle time in between, in
//! percent (perftest leaves system, nice, iowait and the rest out; so does this).

use crate::sysfs::Root;

/// The two counters perftest reads from /proc/stat's first line, in ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub idle: u64,
}

/// "cpu  user nice system idle ..." as perftest reads it: the 2nd and 5th words.
fn parse_stat(text: &str) -> Option<CpuTimes> {
    let mut words = text.lines().next()?.split_whitespace();
    if words.next()? != "cpu" {
        return None;
    }
    let user = words.next()?.parse().ok()?;
    let idle = words.nth(2)?.parse().ok()?;
    Some(CpuTimes { user, idle })
}

/// This host's times now; None where /proc/stat does not read.
pub fn read_times(root: &Root) -> Option<CpuTimes> {
    root.read_with("/proc/stat", parse_stat).value()
}

/// calc_cpu_util: user ticks over user + idle ticks, percent; 0 without ticks.
pub fn utilisation(before: CpuTimes, after: CpuTimes) -> f64 {
    let user = after.user.saturating_sub(before.user) as f64;
    let idle = after.idle.saturating_sub(before.idle) as f64;
    if user + idle == 0.0 {
        0.0
    } else {
        user / (user + idle) * 100.0
    }
}

/// One size's reading: started before the size, finished after it.
pub struct CpuWatch {
    root: Root,
    before: Option<CpuTimes>,
}

impl CpuWatch {
    /// Reads the times now when `enabled`; None otherwise.
    pub fn start(enabled: bool, root: Root) -> Option<CpuWatch> {
        enabled.then(|| CpuWatch {
            before: read_times(&root),
            root,
        })
    }

    /// The utilisation since `start`; None where either reading failed.
    pub fn finish(self) -> Option<f64> {
        let after = read_times(&self.root)?;
        Some(utilisation(self.before?, after))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::fixture::Tree;

    const STAT: &str = "cpu  100 5 30 900 7 0 2 0 0 0\ncpu0 50 2 15 450 3 0 1 0 0 0\nintr 1 2\n";

    #[test]
    fn perftest_reads_user_and_idle_of_the_first_line() {
        assert_eq!(
            parse_stat(STAT),
            Some(CpuTimes {
                user: 100,
                idle: 900
            })
        );
        assert_eq!(parse_stat("intr 1 2\n"), None);
        assert_eq!(parse_stat("cpu  1 2\n"), None);
    }

    #[test]
    fn user_share_of_user_and_idle() {
        let before = CpuTimes {
            user: 100,
            idle: 900,
        };
        let after = CpuTimes {
            user: 125,
            idle: 975,
        };
        assert_eq!(utilisation(before, after), 25.0);
        assert_eq!(utilisation(before, before), 0.0);
    }

    #[test]
    fn a_watch_reads_the_tree_twice() {
        let tree = Tree::temp("cpu-util");
        tree.put("/proc/stat", STAT);
        let watch = CpuWatch::start(true, tree.root()).unwrap();
        tree.put("/proc/stat", "cpu  160 5 30 940 7 0 2 0 0 0\n");
        assert_eq!(watch.finish(), Some(60.0));
        assert!(CpuWatch::start(false, tree.root()).is_none());
        tree.put("/proc/stat", "garbage\n");
        let watch = CpuWatch::start(true, tree.root()).unwrap();
        assert_eq!(watch.finish(), None, "an unreadable first reading");
    }
}
