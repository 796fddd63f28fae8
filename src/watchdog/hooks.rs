//! The watchdog's test hooks, each an environment variable read once at start:
//! where the side channel listens, and a signal a rank sends itself mid-run (to
//! prove that `-T` ends the job and names that rank, whichever it is).

use super::state::State;
use crate::output::{write_whole, Replace};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A file rank 0 writes its watchdog's addresses to, one "IP:PORT" a line.
pub const ADDRESS_FILE_ENV: &str = "FABRICBENCH_WATCHDOG_ADDRESS_FILE";
/// "RANK:SIZE:stop" or "RANK:SIZE:kill": the rank sends itself SIGSTOP or SIGKILL
/// `CALLS_IN` calls into its first timed exchanges of SIZE bytes or more.
pub const FAULT_SIGNAL_ENV: &str = "FABRICBENCH_FAULT_SIGNAL";
/// Calls made at the size before the signal: it lands inside the timed calls
/// (given more iterations than this), not between two sizes.
const CALLS_IN: u64 = 10;

/// A signal a rank sends itself at a size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalFault {
    pub rank: usize,
    pub size: u64,
    pub signal: Signal,
}

impl SignalFault {
    pub fn from_env() -> Option<SignalFault> {
        SignalFault::parse(&std::env::var(FAULT_SIGNAL_ENV).ok()?)
    }

    /// The variable's value; one that does not parse injects nothing.
    pub fn parse(value: &str) -> Option<SignalFault> {
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

    /// From another thread, once the main thread is `CALLS_IN` calls further.
    pub(super) fn send_inside(self, state: Arc<State>) {
        let from = state.calls.get();
        std::thread::spawn(move || {
            while state.calls.get() < from + CALLS_IN {
                std::thread::sleep(Duration::from_millis(1));
            }
            let _ = kill(Pid::this(), self.signal);
        });
    }
}

/// Writes the addresses to the file `ADDRESS_FILE_ENV` names, if it names one.
pub fn publish_addresses(addresses: &[SocketAddr]) {
    let Some(path) = std::env::var_os(ADDRESS_FILE_ENV).map(PathBuf::from) else {
        return;
    };
    let text: String = addresses.iter().map(|a| format!("{a}\n")).collect();
    // Whole or nothing: the test reads the file as soon as it appears.
    if let Err(e) = write_whole(&path, Replace::Always, text.as_bytes()) {
        eprintln!("{ADDRESS_FILE_ENV}={}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signal_hook_parses_or_injects_nothing() {
        assert_eq!(
            SignalFault::parse("2:8192:stop"),
            Some(SignalFault {
                rank: 2,
                size: 8192,
                signal: Signal::SIGSTOP
            })
        );
        assert_eq!(
            SignalFault::parse("0:0:kill").map(|f| f.signal),
            Some(Signal::SIGKILL)
        );
        for bad in ["2:8192", "2:8192:term", "x:1:stop", "1:1:stop:9", ""] {
            assert_eq!(SignalFault::parse(bad), None, "{bad}");
        }
    }
}
