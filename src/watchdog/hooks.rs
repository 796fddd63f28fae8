//! The watchdog's test hooks: where the side channel listens and how wide its
//! tree is (environment variables read once at start), and sending the signal `FABRICBENCH_FAULT_SIGNAL`
//! asks for (parsed in `crate::faults`) mid-run, to prove that `-T` ends the job
//! and names that rank, whichever it is.

use super::state::State;
use crate::faults::SignalFault;
use crate::output::{write_whole, Replace};
use nix::sys::signal::kill;
use nix::unistd::Pid;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A file rank 0 writes its watchdog's addresses to, one "IP:PORT" a line.
pub const ADDRESS_FILE_ENV: &str = "FABRICBENCH_WATCHDOG_ADDRESS_FILE";
/// The children of each kind per rank in the watchdog's tree (`tree::FANOUT`
/// unless set; every rank must see the same): 1 or 2 puts relays in a job of a
/// few ranks, so that tests reach them.
pub const FANOUT_ENV: &str = "FABRICBENCH_WATCHDOG_FANOUT";

/// The tree's fanout: `FANOUT_ENV`, or `tree::FANOUT`.
pub(super) fn fanout() -> anyhow::Result<usize> {
    match std::env::var(FANOUT_ENV) {
        Err(_) => Ok(super::tree::FANOUT),
        Ok(text) => match text.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => anyhow::bail!(
                "{FANOUT_ENV}={text:?}: give a whole number of 1 or more, or unset it"
            ),
        },
    }
}

/// Calls made at the size before the signal: it lands inside the timed calls
/// (given more iterations than this), not between two sizes.
const CALLS_IN: u64 = 10;

/// Sends `fault`'s signal from another thread, once the main thread is `CALLS_IN`
/// calls further.
pub(super) fn send_inside(fault: SignalFault, state: Arc<State>) {
    let from = state.calls.get();
    std::thread::spawn(move || {
        while state.calls.get() < from + CALLS_IN {
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = kill(Pid::this(), fault.signal);
    });
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
