//! `-T` before the watchdog exists: the exchanges of a collective binary's setup
//! (MPI's start, the host names, the argument agreement, the watchdog's own
//! start) each run under a deadline of -T, kept by a plain timer thread on every
//! rank. There is no side channel yet, so no rank can ask the others where they
//! are: a rank stuck in a step of its own says so itself (it is the one that did
//! not arrive); of the ranks waiting in an exchange, rank 0 speaks at the
//! deadline and the others only `PEER_GRACE` later, if rank 0 has not ended the
//! job by then (it may be the one stopped). The speaker prints one line naming
//! the phase and ends the job with status 3.

use super::exit::{end_job, ExitStatus};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long past the deadline a rank other than 0 waits for rank 0's verdict.
const PEER_GRACE: Duration = Duration::from_secs(3);
const TICK: Duration = Duration::from_millis(50);

/// Where a rank is in its setup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// In an exchange with every rank: a rank that did not arrive holds it.
    Exchange(&'static str),
    /// Working alone (resolving host names): if it lasts, this rank is the one late.
    Alone(&'static str),
}

struct Armed {
    program: String,
    host: String,
    timeout_s: u64,
    step: Step,
    since: Instant,
    /// None until MPI has started (then the launcher's variable, if any, names it).
    rank: Option<usize>,
}

static SETUP: Mutex<Option<Armed>> = Mutex::new(None);

fn setup() -> MutexGuard<'static, Option<Armed>> {
    SETUP.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the watch of this process on `host`, in the phase "starting MPI";
/// `timeout_s` 0 watches nothing.
pub fn arm(program: &str, host: String, timeout_s: u64) {
    if timeout_s == 0 {
        return;
    }
    *setup() = Some(Armed {
        program: program.to_string(),
        host,
        timeout_s,
        step: Step::Exchange("starting MPI (MPI_Init)"),
        since: Instant::now(),
        rank: launcher_rank(),
    });
    let _ = std::thread::Builder::new()
        .name("fabricbench-setup-timer".into())
        .spawn(watch);
}

/// This rank's step from now on (nothing when not armed); its deadline starts now.
pub fn step(step: Step) {
    if let Some(armed) = setup().as_mut() {
        armed.step = step;
        armed.since = Instant::now();
    }
}

/// This process's rank in MPI's world, once known.
pub fn rank_is(rank: usize) {
    if let Some(armed) = setup().as_mut() {
        armed.rank = Some(rank);
    }
}

/// The setup is over (the watchdog watches from here): the timer stops.
pub fn done() {
    *setup() = None;
}

/// The rank the launcher gave this process, before MPI says it.
fn launcher_rank() -> Option<usize> {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

/// A gap between two ticks longer than this is time the process did not run
/// (stopped, then continued): it does not count against the deadline, so that a
/// rank woken as the job is ended does not judge a wait it never saw.
const PAUSED: Duration = Duration::from_secs(1);

fn watch() {
    let mut last = Instant::now();
    loop {
        std::thread::sleep(TICK);
        let gap = last.elapsed();
        last = Instant::now();
        let line = {
            let mut guard = setup();
            let Some(armed) = guard.as_mut() else {
                return;
            };
            if gap > PAUSED {
                armed.since += gap;
                continue;
            }
            match armed.since.elapsed() >= due(armed.step, armed.rank, armed.timeout_s) {
                true => verdict(armed),
                false => continue,
            }
        };
        // One write: the line never interleaves with another rank's.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        end_job(ExitStatus::Timeout);
    }
}

/// When a rank in `step` speaks: at -T, unless it only waits in an exchange and
/// rank 0 may speak for the job.
fn due(step: Step, rank: Option<usize>, timeout_s: u64) -> Duration {
    let timeout = Duration::from_secs(timeout_s);
    match (step, rank) {
        (Step::Alone(_), _) | (Step::Exchange(_), Some(0)) => timeout,
        (Step::Exchange(_), _) => timeout + PEER_GRACE,
    }
}

/// The one line a rank prints when its setup step outlived -T.
fn verdict(armed: &Armed) -> String {
    let (program, host, t) = (&armed.program, &armed.host, armed.timeout_s);
    let who = match armed.rank {
        Some(r) => format!("rank {r} ({host})"),
        None => format!("a rank ({host})"),
    };
    match armed.step {
        Step::Alone(what) => format!(
            "{program}: -T/--timeout {t}: setup: {what} did not finish within {t} s on {who}: \
             it is the rank that did not arrive; the job is ended\n"
        ),
        Step::Exchange(what) => {
            let waited = due(armed.step, armed.rank, t).as_secs();
            let peer = match armed.rank {
                Some(0) => "",
                _ => " (rank 0 did not end the job: it may be stopped)",
            };
            format!(
                "{program}: -T/--timeout {t}: setup: {what} did not finish: {who} waited {waited} s \
                 in it{peer}; a rank did not arrive or the network does not carry the exchange \
                 (which ranks cannot be known before the watchdog starts: check that every node \
                 runs, and its MTU end to end); the job is ended\n"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn armed(step: Step, rank: Option<usize>, host: &str) -> Armed {
        Armed {
            program: "all_reduce_perf".into(),
            host: host.into(),
            timeout_s: 10,
            step,
            since: Instant::now(),
            rank,
        }
    }

    #[test]
    fn rank_0_speaks_for_an_exchange_the_others_later() {
        let agree = Step::Exchange("agreeing on the arguments");
        assert_eq!(due(agree, Some(0), 10), Duration::from_secs(10));
        assert_eq!(due(agree, Some(2), 10), Duration::from_secs(13));
        assert_eq!(due(agree, None, 10), Duration::from_secs(13));
        assert_eq!(due(Step::Alone("x"), Some(2), 10), Duration::from_secs(10));
        let line = verdict(&armed(agree, Some(0), "node1"));
        assert!(
            line.starts_with(
                "all_reduce_perf: -T/--timeout 10: setup: agreeing on the arguments did not finish: \
                 rank 0 (node1) waited 10 s in it; a rank did not arrive"
            ),
            "{line}"
        );
        let line = verdict(&armed(agree, Some(2), "node3"));
        assert!(
            line.contains("rank 2 (node3) waited 13 s in it (rank 0 did not end"),
            "{line}"
        );
    }

    #[test]
    fn a_rank_late_on_its_own_names_itself() {
        let line = verdict(&armed(Step::Alone("resolving the hosts"), Some(1), "node2"));
        assert_eq!(
            line,
            "all_reduce_perf: -T/--timeout 10: setup: resolving the hosts did not finish within \
             10 s on rank 1 (node2): it is the rank that did not arrive; the job is ended\n"
        );
        assert!(verdict(&armed(Step::Alone("x"), None, "vm")).contains("on a rank (vm)"));
    }

    #[test]
    fn unarmed_steps_change_nothing() {
        step(Step::Exchange("x"));
        rank_is(3);
        done();
        assert!(setup().is_none());
    }
}
