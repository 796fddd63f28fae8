//! Fault injection, for the tests that prove a fault is reported: every hook is an
//! environment variable, named here and parsed here into a typed value, read once
//! per process (`injected`). The places that act on a fault take its value from
//! here: the driver's sweep, the all-pairs exchange, the watchdog and the verbs
//! sender.

use crate::job::setup::{self, Step};
use crate::job::UsageError;
use nix::sys::signal::Signal;
use std::sync::OnceLock;
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
/// "RANK": the rank is slow in every all-pairs exchange (each pair with it then
/// measures slow), to prove that the suspect node is named.
pub const FAULT_SLOW_ENV: &str = "FABRICBENCH_FAULT_SLOW_RANK";
/// "RANK:SIZE:stop" or "RANK:SIZE:kill": the rank sends itself SIGSTOP or SIGKILL
/// a few calls into its first timed exchanges of SIZE bytes or more.
pub const FAULT_SIGNAL_ENV: &str = "FABRICBENCH_FAULT_SIGNAL";
/// "N": the verbs sender flips one byte of message N (0-based, of every size)
/// after filling it, which `--data_validation` must catch.
pub const FAULT_VERBS_CORRUPT_ENV: &str = "FABRICBENCH_FAULT_VERBS_CORRUPT";

/// What the slow rank adds to each all-pairs exchange: beyond what a loaded
/// 2-core host makes of a healthy pair's exchange (up to 5 ms seen in CI with
/// builds beside it), so the slowed pairs stay slow next to the typical pair.
pub const SLOW_DELAY: Duration = Duration::from_millis(30);

/// How a rank fails in the setup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupFault {
    /// SIGSTOP: the rank cannot speak.
    Stop,
    /// A sleep: the rank is late on its own, and knows it.
    Sleep,
}

/// A signal a rank sends itself at a size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalFault {
    pub rank: usize,
    pub size: u64,
    pub signal: Signal,
}

/// The verbs hook's value: only the verbs binaries read it, and refuse a bad one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum VerbsCorrupt {
    #[default]
    Unset,
    Message(u64),
    /// The text that is not a message index.
    Bad(String),
}

/// The faults a run injects (none unless the variables are set). A value that does
/// not parse injects nothing, except the verbs hook's, which is a usage error.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// The rank and element index that validation corrupts.
    pub corrupt: Option<(usize, usize)>,
    /// The rank that stalls, and the size from which it does.
    pub stall: Option<(usize, u64)>,
    /// The rank that fails in the setup, and how.
    pub setup: Option<(usize, SetupFault)>,
    /// The rank that is slow in every all-pairs exchange.
    pub slow_rank: Option<usize>,
    /// The signal a rank sends itself.
    pub signal: Option<SignalFault>,
    /// The verbs message to corrupt.
    pub verbs_corrupt: VerbsCorrupt,
}

/// This process's faults, from the environment the first time it is asked.
pub fn injected() -> &'static Faults {
    static FAULTS: OnceLock<Faults> = OnceLock::new();
    FAULTS.get_or_init(|| Faults::read(|name| std::env::var(name).ok()))
}

impl Faults {
    /// Every variable's value, as `var` gives it.
    pub fn read(var: impl Fn(&str) -> Option<String>) -> Faults {
        Faults {
            corrupt: var(FAULT_CORRUPT_ENV).as_deref().and_then(parse_corrupt),
            stall: var(FAULT_STALL_ENV).as_deref().and_then(parse_stall),
            setup: var(FAULT_SETUP_ENV).as_deref().and_then(parse_setup),
            slow_rank: var(FAULT_SLOW_ENV).and_then(|v| v.parse().ok()),
            signal: var(FAULT_SIGNAL_ENV).as_deref().and_then(parse_signal),
            verbs_corrupt: var(FAULT_VERBS_CORRUPT_ENV).map_or(VerbsCorrupt::Unset, |text| {
                match text.trim().parse() {
                    Ok(n) => VerbsCorrupt::Message(n),
                    Err(_) => VerbsCorrupt::Bad(text),
                }
            }),
        }
    }

    /// The setup hook: `rank` never arrives at the argument agreement.
    pub fn stall_in_setup(&self, rank: usize) {
        match self.setup {
            Some((r, SetupFault::Stop)) if r == rank => {
                let _ = nix::sys::signal::raise(Signal::SIGSTOP);
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

    /// The slow hook: the delay `rank` adds to each all-pairs exchange.
    pub fn delay_of(&self, rank: usize) -> Option<Duration> {
        (self.slow_rank == Some(rank)).then_some(SLOW_DELAY)
    }

    /// The verbs hook: the message the sender corrupts; a bad value is a usage error.
    pub fn verbs_corrupted_message(&self) -> Result<Option<u64>, UsageError> {
        match &self.verbs_corrupt {
            VerbsCorrupt::Unset => Ok(None),
            VerbsCorrupt::Message(n) => Ok(Some(*n)),
            VerbsCorrupt::Bad(text) => Err(UsageError(format!(
                "{FAULT_VERBS_CORRUPT_ENV}={text}: give the 0-based index of the message to corrupt, e.g. 3"
            ))),
        }
    }
}

/// "RANK:INDEX".
fn parse_corrupt(value: &str) -> Option<(usize, usize)> {
    let (rank, index) = value.split_once(':')?;
    Some((rank.parse().ok()?, index.parse().ok()?))
}

/// "RANK[:SIZE]".
fn parse_stall(value: &str) -> Option<(usize, u64)> {
    let (rank, size) = value.split_once(':').unwrap_or((value, "0"));
    Some((rank.parse().ok()?, size.parse().ok()?))
}

/// "RANK:stop" or "RANK:sleep".
fn parse_setup(value: &str) -> Option<(usize, SetupFault)> {
    let (rank, how) = value.split_once(':')?;
    let how = match how {
        "stop" => SetupFault::Stop,
        "sleep" => SetupFault::Sleep,
        _ => return None,
    };
    Some((rank.parse().ok()?, how))
}

/// "RANK:SIZE:stop" or "RANK:SIZE:kill".
fn parse_signal(value: &str) -> Option<SignalFault> {
    let mut parts = value.split(':');
    let fault = SignalFault {
        rank: parts.next()?.parse().ok()?,
        size: parts.next()?.parse().ok()?,
        signal: match parts.next()? {
            "stop" => Signal::SIGSTOP,
            "kill" => Signal::SIGKILL,
            _ => return None,
        },
    };
    parts.next().is_none().then_some(fault)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Faults {
        Faults::read(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn variables_parse_or_inject_nothing() {
        let f = read(&[(FAULT_CORRUPT_ENV, "1:5"), (FAULT_STALL_ENV, "2:4096")]);
        assert_eq!(f.corrupt, Some((1, 5)));
        assert_eq!(f.stall, Some((2, 4096)));
        assert_eq!(read(&[(FAULT_STALL_ENV, "3")]).stall, Some((3, 0)));
        assert_eq!(
            read(&[(FAULT_CORRUPT_ENV, "1"), (FAULT_STALL_ENV, "x:1")]),
            Faults::default()
        );
        assert_eq!(f.corrupted_element(1, 6), Some(5));
        assert_eq!(f.corrupted_element(1, 5), None);
        assert_eq!(f.corrupted_element(0, 6), None);
        assert_eq!(parse_setup("1:stop"), Some((1, SetupFault::Stop)));
        assert_eq!(parse_setup("0:sleep"), Some((0, SetupFault::Sleep)));
        for bad in ["1", "1:term", "x:stop", ""] {
            assert_eq!(parse_setup(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_the_named_rank_is_slowed() {
        let slow = read(&[(FAULT_SLOW_ENV, "3")]);
        assert_eq!(slow.delay_of(3), Some(SLOW_DELAY));
        assert_eq!(slow.delay_of(2), None);
        assert_eq!(read(&[(FAULT_SLOW_ENV, "three")]).delay_of(3), None);
        assert_eq!(Faults::default().delay_of(0), None);
    }

    #[test]
    fn the_signal_hook_parses_or_injects_nothing() {
        assert_eq!(
            parse_signal("2:8192:stop"),
            Some(SignalFault {
                rank: 2,
                size: 8192,
                signal: Signal::SIGSTOP
            })
        );
        assert_eq!(
            parse_signal("0:0:kill").map(|f| f.signal),
            Some(Signal::SIGKILL)
        );
        for bad in ["2:8192", "2:8192:term", "x:1:stop", "1:1:stop:9", ""] {
            assert_eq!(parse_signal(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_verbs_hook_takes_an_index_and_refuses_anything_else() {
        let at = |v: &str| read(&[(FAULT_VERBS_CORRUPT_ENV, v)]).verbs_corrupted_message();
        assert_eq!(Faults::default().verbs_corrupted_message().unwrap(), None);
        assert_eq!(at(" 7 ").unwrap(), Some(7));
        let e = at("seven").unwrap_err().0;
        assert_eq!(
            e,
            "FABRICBENCH_FAULT_VERBS_CORRUPT=seven: give the 0-based index of the message to corrupt, e.g. 3"
        );
    }
}
