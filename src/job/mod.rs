//! The job every binary runs in, and its one exit policy.
//!
//! - `world`: MPI's ranks, nodes and the few exchanges outside the timed loops;
//! - `exit`: the exit statuses, the usage error and `Failure`, how a run ends early;
//! - `agree`: steps every rank takes together (each distinct error printed once);
//! - `comm`: the exchanges a benchmark sweep makes, on the world or one rank alone.
//!
//! A binary's family calls [`main`] with how it starts (`Start`) and its body;
//! the body gets a [`Job`] (MPI's world, or a process alone) and returns a status
//! or a `Failure`, which `main` turns into the printed line and the exit code.

pub mod agree;
pub mod comm;
pub mod exit;
pub mod world;

pub use agree::{agree, agree_each_rank, agree_on_arguments, Group};
pub use comm::Comm;
pub use exit::{ExitStatus, Failure, UsageError};
pub use world::{hostname, launched_by_mpi, World};

use mpi::topology::Communicator;
use std::process::ExitCode;

/// How a binary starts its job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Always inside MPI: a plain start is a world of one rank (the collectives, doctor).
    Mpi,
    /// Inside MPI only when a launcher started it; a plain start runs alone,
    /// with no MPI daemon or progress thread beside the timed loops (the verbs tests).
    MpiWhenLaunched,
    /// Never MPI (plot, compare, rack_check, copy_bw).
    Alone,
}

/// The processes of a run: one started by hand, or the ranks of an MPI job.
pub enum Job {
    Alone { host: String },
    Mpi(World),
}

impl Job {
    pub fn start(start: Start) -> anyhow::Result<Job> {
        let mpi = match start {
            Start::Mpi => true,
            Start::MpiWhenLaunched => launched_by_mpi(),
            Start::Alone => false,
        };
        Ok(if mpi {
            Job::Mpi(World::init()?)
        } else {
            Job::Alone { host: hostname() }
        })
    }

    pub fn world(&self) -> Option<&World> {
        match self {
            Job::Alone { .. } => None,
            Job::Mpi(w) => Some(w),
        }
    }

    pub fn local_rank(&self) -> usize {
        self.world().map_or(0, |w| w.local_rank)
    }

    pub fn is_root(&self) -> bool {
        self.rank() == 0
    }
}

impl Group for Job {
    fn rank(&self) -> usize {
        self.world().map_or(0, |w| w.rank)
    }

    fn size(&self) -> usize {
        self.world().map_or(1, |w| w.size)
    }

    fn host(&self, rank: usize) -> &str {
        match self {
            Job::Alone { host } => host,
            Job::Mpi(w) => &w.hosts[rank],
        }
    }

    fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        match self {
            Job::Alone { .. } => vec![mine.to_vec()],
            Job::Mpi(w) => w.all_gather_bytes(mine),
        }
    }
}

/// This binary's name as started (argv[0]'s file name), else `fallback`.
pub fn program_name(fallback: &str) -> String {
    std::env::args_os()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| fallback.to_string())
}

/// Every binary's entry: starts the job, runs `body`, and applies the one exit
/// policy: a usage error is printed once (by rank 0) with status 2; a failure
/// already printed keeps its status; a fatal error is printed by its rank and,
/// under MPI, aborts the whole job (other ranks may be waiting in a collective).
pub fn main(
    start: Start,
    program: &str,
    body: impl FnOnce(&Job, &str) -> Result<ExitStatus, Failure>,
) -> ExitCode {
    let job = match Job::start(start) {
        Ok(job) => job,
        Err(e) => {
            eprintln!("{program}: error: {e:#}");
            return ExitStatus::Failed.into();
        }
    };
    if job.world().is_some() {
        abort_job_on_panic();
    }
    let status = match body(&job, program) {
        Ok(status) => status,
        Err(Failure::Usage(msg)) => {
            if job.is_root() {
                eprintln!("{program}: error: {msg}");
            }
            ExitStatus::Usage
        }
        Err(Failure::Stopped(status)) => status,
        Err(Failure::Fatal(e)) => match job.world() {
            Some(world) => {
                eprintln!(
                    "{program}: rank {} ({}): error: {e:#}",
                    world.rank, world.hosts[world.rank]
                );
                world.comm.abort(ExitStatus::Failed.code() as i32);
            }
            _ => {
                eprintln!("{program}: error: {e:#}");
                ExitStatus::Failed
            }
        },
    };
    drop(job);
    status.into()
}

/// A panic on one rank would leave the others waiting in a collective for ever:
/// after the usual message, end the whole job.
fn abort_job_on_panic() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        // SAFETY: MPI is initialised (the hook is set after World::init).
        unsafe {
            mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, ExitStatus::Failed.code() as i32)
        };
    }));
}
