//! Fault injection, for the tests that prove a fault is reported: each hook is an
//! environment variable, read once here.

use crate::job::setup::{self, Step};
use std::time::Duration;

/// "RANK:INDEX": validation corrupts that element of the rank's result, to prove
/// that `#wrong` counts it.
pub const FAULT_CORRUPT_ENV: &str = "FABRICBENCH_FAULT_CORRUPT";
/// "RANK[:SIZE]": the rank sleeps before its timed loop at SIZE bytes (default:
/// the first size), to prove that `-T` names it.
pub const FAULT_STALL_ENV: &str = "FABRICBENCH_FAULT_STALL_RANK";

/// "RANK:stop" or "RANK:sleep": the rank stops itself (SIGSTOP) or sleeps before
/// the setup's argument agreement, to prove that `-T` watches the setup.
pub const FAULT_SETUP_ENV: &str = "FABRICBENCH_FAULT_SETUP";

/// How a rank fails in the setup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupFault {
    /// SIGSTOP: the rank cannot speak.
    Stop,
    /// A sleep: the rank is late on its own, and knows it.
    Sleep,
}

/// The faults a run injects (none unless the variables are set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// The rank and element index that validation corrupts.
    pub corrupt: Option<(usize, usize)>,
    /// The rank that stalls, and the size from which it does.
    pub stall: Option<(usize, u64)>,
    /// The rank that fails in the setup, and how.
    pub setup: Option<(usize, SetupFault)>,
}

impl Faults {
    pub fn from_env() -> Faults {
        let var = |name| std::env::var(name).ok();
        Faults {
            setup: var(FAULT_SETUP_ENV).as_deref().and_then(parse_setup),
            ..Faults::parse(
                var(FAULT_CORRUPT_ENV).as_deref(),
                var(FAULT_STALL_ENV).as_deref(),
            )
        }
    }

    /// The variables' values; a value that does not parse injects nothing.
    pub fn parse(corrupt: Option<&str>, stall: Option<&str>) -> Faults {
        Faults {
            corrupt: corrupt.and_then(|v| {
                let (rank, index) = v.split_once(':')?;
                Some((rank.parse().ok()?, index.parse().ok()?))
            }),
            stall: stall.and_then(|v| {
                let (rank, size) = v.split_once(':').unwrap_or((v, "0"));
                Some((rank.parse().ok()?, size.parse().ok()?))
            }),
            setup: None,
        }
    }

    /// The setup hook: `rank` never arrives at the argument agreement.
    pub fn stall_in_setup(&self, rank: usize) {
        match self.setup {
            Some((r, SetupFault::Stop)) if r == rank => {
                let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
            }
            Some((r, SetupFault::Sleep)) if r == rank => {
                setup::step(Step::Alone("the stall FABRICBENCH_FAULT_SETUP injects"));
                std::thread::sleep(Duration::from_secs(3600));
            }
            _ => {}
        }
    }

    /// The stall hook: `rank` never arrives at the timed loop of `size`.
    pub fn stall_before(&self, rank: usize, size: u64) {
        if self.stall.is_some_and(|(r, at)| r == rank && size >= at) {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }

    /// The corrupt hook: the element of `rank`'s result (of `len` elements) to corrupt.
    pub fn corrupted_element(&self, rank: usize, len: usize) -> Option<usize> {
        self.corrupt
            .filter(|&(r, index)| r == rank && index < len)
            .map(|(_, index)| index)
    }
}

/// "RANK:stop" or "RANK:sleep"; anything else injects nothing.
fn parse_setup(value: &str) -> Option<(usize, SetupFault)> {
    let (rank, how) = value.split_once(':')?;
    let how = match how {
        "stop" => SetupFault::Stop,
        "sleep" => SetupFault::Sleep,
        _ => return None,
    };
    Some((rank.parse().ok()?, how))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_parse_or_inject_nothing() {
        let f = Faults::parse(Some("1:5"), Some("2:4096"));
        assert_eq!(f.corrupt, Some((1, 5)));
        assert_eq!(f.stall, Some((2, 4096)));
        assert_eq!(Faults::parse(None, Some("3")).stall, Some((3, 0)));
        assert_eq!(Faults::parse(Some("1"), Some("x:1")), Faults::default());
        assert_eq!(f.corrupted_element(1, 6), Some(5));
        assert_eq!(f.corrupted_element(1, 5), None);
        assert_eq!(f.corrupted_element(0, 6), None);
        assert_eq!(parse_setup("1:stop"), Some((1, SetupFault::Stop)));
        assert_eq!(parse_setup("0:sleep"), Some((0, SetupFault::Sleep)));
        for bad in ["1", "1:term", "x:stop", ""] {
            assert_eq!(parse_setup(bad), None, "{bad}");
        }
    }
}
