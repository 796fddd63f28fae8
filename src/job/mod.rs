//! The job every binary runs in, and its one exit policy.
//!
//! - `world`: MPI's ranks, nodes and the few exchanges outside the timed loops;
//! - `exit`: the exit statuses, the usage error and `Failure`, how a run ends early;
//! - `agree`: steps every rank takes together (each distinct error printed once);
//! - `comm`: the exchanges a benchmark sweep makes, on the world or one rank alone;
//! - `env_snapshot`: the environment as the user set it, before MPI_Init adds to it;
//! - `launcher`: the launcher that started the process, refused when it is not the binary's MPI;
//! - `oversubscription`: srun's tasks beyond a node's CPUs, and Open MPI told to yield;
//! - `provenance`: the commit, build date and MPI of this build, and the MPI it runs on;
//! - `setup`: -T over the collectives' setup, before the watchdog exists;
//! - `twin`: a tool that starts without libmpi hands a launched run to its MPI twin.
//!
//! A binary's family calls [`main`] with how it starts (`Start`) and its body;
//! the body gets a [`Job`] (MPI's world, or a process alone) and returns a status
//! or a `Failure`, which `main` turns into the printed line and the exit code.

pub mod agree;
pub mod comm;
pub mod env_snapshot;
pub mod exit;
pub mod launcher;
pub mod oversubscription;
pub mod provenance;
pub mod setup;
pub mod twin;
pub mod world;

pub use agree::{agree, agree_each_rank, agree_on_arguments, Group};
pub use comm::Comm;
pub use exit::{usage, ExitStatus, Failure, UsageError};
pub use launcher::launched_by_mpi;
pub use world::{hostname, World};

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

/// A tool that runs alone ends quietly when its reader goes away (`compare ... |
/// head -1`), as C tools do, instead of panicking in `println!` on EPIPE. Not
/// for MPI ranks: their sockets must see EPIPE as an error, not die of it.
fn quiet_on_a_closed_pipe() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: SIG_DFL installs no handler code; done before any thread starts.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}

/// A test's environment: the variables given, and no other (for the functions
/// that read the environment through a `var` closure).
#[cfg(test)]
pub(crate) fn fake_env(
    pairs: &'static [(&'static str, &'static str)],
) -> impl Fn(&str) -> Option<String> {
    move |k| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

/// The processes of a run: one started by hand, or the ranks of an MPI job.
pub enum Job {
    Alone(Alone),
    Mpi(World),
}

/// A process alone: a job of one rank on this host. Its exchanges name no MPI
/// symbol, so a tool that uses it and not [`Job`] links no libmpi (`doctor`).
pub struct Alone {
    host: String,
}

impl Alone {
    pub fn here() -> Alone {
        Alone { host: hostname() }
    }
}

impl Group for Alone {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn host(&self, _rank: usize) -> &str {
        &self.host
    }

    fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        vec![mine.to_vec()]
    }
}

impl Job {
    pub fn start(start: Start) -> anyhow::Result<Job> {
        env_snapshot::take();
        let mpi = match start {
            Start::Mpi => true,
            Start::MpiWhenLaunched => launched_by_mpi(),
            Start::Alone => {
                quiet_on_a_closed_pipe();
                false
            }
        };
        Ok(if mpi {
            oversubscription::yield_if_oversubscribed();
            Job::Mpi(World::init()?)
        } else {
            Job::Alone(Alone::here())
        })
    }

    pub fn world(&self) -> Option<&World> {
        match self {
            Job::Alone(_) => None,
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
        match self {
            Job::Alone(a) => a.rank(),
            Job::Mpi(w) => w.rank,
        }
    }

    fn size(&self) -> usize {
        match self {
            Job::Alone(a) => a.size(),
            Job::Mpi(w) => w.size,
        }
    }

    fn host(&self, rank: usize) -> &str {
        match self {
            Job::Alone(a) => a.host(rank),
            Job::Mpi(w) => &w.hosts[rank],
        }
    }

    fn identity(&self, rank: usize) -> &str {
        match self {
            Job::Alone(a) => a.identity(rank),
            Job::Mpi(w) => w.identity(rank),
        }
    }

    fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        match self {
            Job::Alone(a) => a.all_gather_bytes(mine),
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

/// Checks that every rank measures the same thing before any collective: an MPMD
/// job of two binaries (`mpirun -np 2 all_reduce_perf : -np 1 all_gather_perf`)
/// passes the flags' check and then deadlocks in mismatched calls. `runs` is what
/// this binary measures (its collective: with the flags, which every rank also
/// agrees on, it makes the datatype and op plan); the refusal names each binary
/// and its ranks.
pub fn agree_on_binary(group: &dyn Group, program: &str, runs: &str) -> Result<(), Failure> {
    let mine = format!("{runs}\t{program}");
    let all: Vec<(String, String)> = group
        .all_gather_bytes(mine.as_bytes())
        .iter()
        .map(|b| {
            let text = String::from_utf8_lossy(b);
            let (runs, program) = text.split_once('\t').unwrap_or((&text, ""));
            (runs.to_string(), program.to_string())
        })
        .collect();
    if all.iter().all(|(r, _)| *r == all[0].0) {
        return Ok(());
    }
    let mut binaries: Vec<(&(String, String), Vec<usize>)> = Vec::new();
    for (rank, binary) in all.iter().enumerate() {
        match binaries.iter_mut().find(|(b, _)| *b == binary) {
            Some((_, ranks)) => ranks.push(rank),
            None => binaries.push((binary, vec![rank])),
        }
    }
    // The name says which binary, unless two that measure different things share it.
    let shared = |p: &str| binaries.iter().filter(|((_, q), _)| q == p).count() > 1;
    let list: Vec<String> = binaries
        .iter()
        .map(|((runs, program), ranks)| {
            let name = match shared(program) {
                true => format!("{program} ({runs})"),
                false => program.clone(),
            };
            let s = if ranks.len() > 1 { "s" } else { "" };
            format!("{name} on rank{s} {}", rank_ranges(ranks))
        })
        .collect();
    Err(Failure::Usage(format!(
        "the ranks run different collectives ({}): a job measures one; start every rank with the same binary",
        list.join(", ")
    )))
}

/// "0-3,5": ascending ranks as runs.
fn rank_ranges(ranks: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &r in ranks {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == r => *end = r,
            _ => runs.push((r, r)),
        }
    }
    runs.iter()
        .map(|&(a, b)| match a == b {
            true => a.to_string(),
            false => format!("{a}-{b}"),
        })
        .collect::<Vec<_>>()
        .join(",")
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
    if let Some(world) = job.world() {
        // Every process is a world of one here, so each says it, before any output exists.
        let var = |name: &str| std::env::var(name).ok();
        if let Some(msg) = launcher::mismatch(world.size, &var) {
            eprintln!("{program}: error: {msg}");
            return ExitStatus::Usage.into();
        }
        abort_job_on_panic();
    }
    let status = match (body(&job, program), job.world()) {
        (Ok(status), _) => status,
        (Err(Failure::Usage(msg)), Some(_)) => {
            if job.is_root() {
                eprintln!("{program}: error: {msg}");
            }
            ExitStatus::Usage
        }
        (Err(Failure::Fatal(e)), Some(world)) => {
            eprintln!(
                "{program}: rank {} ({}): error: {e:#}",
                world.rank, world.hosts[world.rank]
            );
            world.comm.abort(ExitStatus::Failed.code() as i32);
        }
        (Err(failure), _) => alone_failure(program, failure),
    };
    drop(job);
    status.into()
}

/// The entry of a tool that never starts MPI (plot, compare): the same exit policy
/// as [`main`] for a process alone, and no path into MPI, so the linker (rustc
/// links with --as-needed) leaves libmpi out and the tool starts on a host without it.
pub fn tool_main(program: &str, body: impl FnOnce() -> Result<ExitStatus, Failure>) -> ExitCode {
    quiet_on_a_closed_pipe();
    env_snapshot::take();
    match body() {
        Ok(status) => status,
        Err(failure) => alone_failure(program, failure),
    }
    .into()
}

/// How a process alone ends on a failure: its line, then its status.
fn alone_failure(program: &str, failure: Failure) -> ExitStatus {
    match failure {
        Failure::Usage(msg) => {
            eprintln!("{program}: error: {msg}");
            ExitStatus::Usage
        }
        Failure::Stopped(status) => status,
        Failure::Fatal(e) => {
            eprintln!("{program}: error: {e:#}");
            ExitStatus::Failed
        }
    }
}

/// A panic on one rank would leave the others waiting in a collective for ever:
/// after the usual message, end the whole job.
fn abort_job_on_panic() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        exit::abort_job(ExitStatus::Failed);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rank 0 of a job whose ranks run these (collective, program) binaries.
    struct Ranks(Vec<(&'static str, &'static str)>);

    impl Group for Ranks {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            self.0.len()
        }
        fn host(&self, _rank: usize) -> &str {
            "vm"
        }
        fn all_gather_bytes(&self, _mine: &[u8]) -> Vec<Vec<u8>> {
            self.0
                .iter()
                .map(|(runs, program)| format!("{runs}\t{program}").into_bytes())
                .collect()
        }
    }

    fn refusal(ranks: Vec<(&'static str, &'static str)>) -> String {
        match agree_on_binary(&Ranks(ranks), "all_reduce_perf", "all_reduce") {
            Err(Failure::Usage(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ranks_of_different_collectives_are_refused_naming_each_binary() {
        let ar = ("all_reduce", "all_reduce_perf");
        let ag = ("all_gather", "all_gather_perf");
        assert_eq!(
            refusal(vec![ar, ar, ag]),
            "the ranks run different collectives (all_reduce_perf on ranks 0-1, all_gather_perf \
             on rank 2): a job measures one; start every rank with the same binary"
        );
        let m = refusal(vec![ar, ag, ar, ar, ("all_gather", "all_reduce_perf")]);
        assert!(m.contains("all_reduce_perf (all_reduce) on ranks 0,2-3, all_gather_perf on rank 1, all_reduce_perf (all_gather) on rank 4"), "{m}");
        let renamed = Ranks(vec![ar, ("all_reduce", "my_allreduce")]);
        assert!(agree_on_binary(&renamed, "all_reduce_perf", "all_reduce").is_ok());
    }
}
