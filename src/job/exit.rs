//! The one exit policy of every binary: what each status means, and how a run
//! that ends early says why, and ends the job (`abort_job`, `end_job`).

use std::process::ExitCode;

/// Every binary's exit status; `meaning` says what each one means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Ok = 0,
    Failed = 1,
    Usage = 2,
    Timeout = 3,
    /// No verdict could be reached, and nothing was found wrong: a figure's
    /// interval lies across its threshold (more rounds would tell), or something
    /// asked to be judged had no figure to judge.
    Inconclusive = 4,
}

impl ExitStatus {
    pub const ALL: [ExitStatus; 5] = [
        ExitStatus::Ok,
        ExitStatus::Failed,
        ExitStatus::Usage,
        ExitStatus::Timeout,
        ExitStatus::Inconclusive,
    ];

    pub fn code(self) -> u8 {
        self as u8
    }

    /// What the status means, for the reference (docs/reference/exit-status.md).
    pub fn meaning(self) -> &'static str {
        match self {
            ExitStatus::Ok => "Everything asked for was done and nothing was wrong.",
            ExitStatus::Failed => {
                "Wrong data, a failed check or threshold, a regression (compare), a failed rack \
                 (rack_check), or a failure during the run."
            }
            ExitStatus::Usage => {
                "A mistake in the command line or the input files (one line names the flag or \
                 file and the fix), or ranks started with different arguments or binaries."
            }
            ExitStatus::Timeout => {
                "The collectives' watchdog (`-T`/`--timeout`): a call, or an exchange of the \
                 setup, did not finish in time and the job was ended. (A verbs binary's `--timeout` exits 1.)"
            }
            ExitStatus::Inconclusive => {
                "No verdict could be reached and nothing was found wrong: a figure's 95% \
                 interval lies across its threshold (more rounds would tell), or a row or check \
                 asked to be judged had no figure to judge (compare)."
            }
        }
    }
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> ExitCode {
        ExitCode::from(status.code())
    }
}

/// A mistake in the command line: printed as one line, exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A usage mistake: one line naming the flag, what was typed and the fix (exit 2).
pub fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

/// How a run ends early.
#[derive(Debug)]
pub enum Failure {
    /// The same mistake on every rank: rank 0 prints it, exit 2.
    Usage(String),
    /// Already printed (by `agree` or the rank concerned); every rank stops with this status.
    Stopped(ExitStatus),
    /// A failure in the middle of the run: printed by the rank that met it, and
    /// the job is aborted (other ranks may be inside a collective).
    Fatal(anyhow::Error),
}

impl Failure {
    /// A usage mistake met as an error: its message with its causes (`{:#}`), exit 2.
    pub fn usage(e: anyhow::Error) -> Failure {
        Failure::Usage(format!("{e:#}"))
    }
}

/// An error met while checking the command line or an input file is a usage
/// mistake: its message with its causes (`{:#}`).
impl From<anyhow::Error> for UsageError {
    fn from(e: anyhow::Error) -> Self {
        UsageError(format!("{e:#}"))
    }
}

impl From<UsageError> for Failure {
    fn from(e: UsageError) -> Self {
        Failure::Usage(e.0)
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Fatal(e)
    }
}

/// Asks the launcher to end every rank of the job (MPI_Abort), from any thread;
/// returns at once when MPI is not running (a process alone, a unit test, or
/// after MPI_Finalize).
pub fn abort_job(status: ExitStatus) {
    let (mut started, mut finished) = (0, 0);
    // SAFETY: MPI_Initialized and MPI_Finalized may be called at any time, from any thread.
    unsafe {
        mpi::ffi::MPI_Initialized(&mut started);
        mpi::ffi::MPI_Finalized(&mut finished);
    }
    if started != 0 && finished == 0 {
        // SAFETY: MPI is initialised; MPI_Abort does not return.
        unsafe { mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, status.code() as i32) };
    }
}

/// How long a verdict has to reach the launcher's output before MPI_Abort's banner.
const VERDICT_FIRST: std::time::Duration = std::time::Duration::from_millis(300);
/// How long a rank that gave a verdict waits for MPI_Abort before it exits.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Ends the job once a verdict is printed: MPI_Abort from another thread (it may
/// never return when a rank is stopped), and this process's own exit after
/// `EXIT_GRACE` whatever it does.
pub fn end_job(status: ExitStatus) -> ! {
    std::thread::sleep(VERDICT_FIRST);
    std::thread::spawn(move || abort_job(status));
    std::thread::sleep(EXIT_GRACE);
    std::process::exit(status.code().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_status_in_order() {
        // Exhaustive: a new status does not compile until it is placed here and in ALL.
        let place = |s: ExitStatus| match s {
            ExitStatus::Ok => 0,
            ExitStatus::Failed => 1,
            ExitStatus::Usage => 2,
            ExitStatus::Timeout => 3,
            ExitStatus::Inconclusive => 4,
        };
        for (i, s) in ExitStatus::ALL.iter().enumerate() {
            assert_eq!((place(*s), s.code() as usize), (i, i));
        }
    }
}
