//! The one exit policy of every binary: what each status means, and how a run
//! that ends early says why.

use std::process::ExitCode;

/// Every binary's exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// Everything asked for was done and nothing was wrong.
    Ok = 0,
    /// Wrong data, a failed check, a regression, or a failure during the run.
    Failed = 1,
    /// A mistake in the command line or the input files.
    Usage = 2,
    /// `-T`: a call did not finish in time.
    Timeout = 3,
    /// Nothing failed, but something asked to be judged could not be (compare:
    /// a row with no figure measured in both files): no verdict, not an ok.
    NotJudged = 4,
}

impl ExitStatus {
    pub fn code(self) -> u8 {
        self as u8
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
