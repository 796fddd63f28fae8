//! The raw RDMA verbs benchmarks, perftest's ib_{write,read,send,atomic}_{bw,lat}
//! over RC, UC and UD queue pairs, connected over TCP, MPI or rdma_cm (`-R`, `-z`),
//! on the `sideway` crate.
//!
//! Every process is one endpoint of a pair. mpirun with 2k ranks makes k pairs
//! (rank i is the client of pair i, rank i + k its server) that exchange their
//! details over MPI; a plain start (no MPI launcher) is a job of one that does
//! not start MPI and finds its peer over TCP, perftest-style (without HOST the
//! server, with HOST the client).
//!
//! The code is grouped by concern:
//! - `flags`: perftest's flags into a `Plan` (`bench`: which binary; `offered`:
//!   which flags each binary offers in its `--help`; one file per flag group);
//! - `device`: the RDMA device, port, GID and rate; `memory`, `qp`, `ud`, `post`,
//!   `completion`, `cqe`, `events`: buffers, queue pairs, posting, completions;
//!   `path`, `numa`: the path and QoS flags on the address vectors, and where the
//!   process runs;
//! - `exchange`: what the two sides tell each other (`wire`, `peer`), a process's
//!   `seat` among the pairs, and the links it travels on (TCP, MPI);
//! - `cm`: rdma_cm (-R, -z), its link and its UD address exchange;
//! - `measure`: the clock, the timed loops (`bw`, `lat`, `duration`), `--rounds`,
//!   data validation, CPU utilisation and fabric counters;
//! - `results`: the result arithmetic, the verdicts, the header's facts;
//! - `session`: one side of a connected pair, measuring and printing;
//!   `pairs`: `--all-pairs` on the all-pairs runner.

pub mod cm;
pub mod device;
pub mod exchange;
pub mod flags;
pub mod measure;
pub mod pairs;
pub mod results;
pub mod session;

pub use flags::benchmark::{Benchmark, Test, Verb};

use crate::job::{self, agree, ExitStatus, Failure, Group, Job, Start, UsageError};
use crate::report::csv::CsvExport;
use device::{memory, numa};
use exchange::mpi::MpiLink;
use exchange::seat::seat;
use exchange::tcp::TcpLink;
use measure::clock::Clock;
use session::{open_side, Session, SideLink};
use std::process::ExitCode;

/// Entry point of the eight binaries. A plain start runs alone, without MPI's
/// runtime: no daemon or progress thread competes with the timed loops for the CPU.
pub fn main(bench: Benchmark) -> ExitCode {
    job::main(Start::MpiWhenLaunched, bench.program(), |job, _| {
        run(job, bench)
    })
}

fn run(job: &Job, bench: Benchmark) -> Result<ExitStatus, Failure> {
    let program = bench.program();
    let plan = usage_step(job, program, flags::parse(bench, std::env::args_os()))?;
    let local = job.world().map_or((0, 1), |w| (w.local_rank, w.local_size));
    let placed = numa::resolve(&crate::sysfs::Root::new("/"), &plan.path.numa, local);
    let numa = usage_step(job, program, placed)?;
    let plan = flags::Plan {
        path: flags::path::PathPlan { numa, ..plan.path },
        ..plan
    };
    let mpi_pairs = job.world().is_some_and(|w| w.size > 1);
    usage_step(job, program, flags::cm::check_launch(&plan.cm, mpi_pairs))?;
    let memory = memory::check_memory(plan.memory)
        .and_then(|()| memory::check_samples(&plan, crate::backend::host_memory(1)));
    failure_step(job, program, memory)?;
    if let Some(thresholds) = plan.all_pairs {
        let mpi = job.world().ok_or_else(|| {
            "--all-pairs: launch under mpirun with 2 or more ranks, one per node".to_string()
        });
        let world = agree(job, program, ExitStatus::Usage, mpi)?;
        return pairs::run(job, world, &plan, thresholds);
    }
    let seat = usage_step(
        job,
        program,
        seat(job.size(), job.rank(), plan.host.is_some()),
    )?;
    let (plan, port, mut endpoint) =
        failure_step(job, program, open_side(&plan, job.local_rank()))?;
    // The CSV is written by the side that prints the table: both sides of a
    // TCP pair when given --csv, rank 0 under mpirun.
    let printer = job.size() == 1 || job.rank() == 0;
    let csv = match (&plan.csv, printer) {
        (Some(path), true) => CsvExport::open(path, plan.append).map(Some),
        _ => Ok(None),
    };
    let csv = failure_step(job, program, csv)?;

    let mut link: Box<dyn SideLink + '_> = if let Some(world) = job.world().filter(|w| w.size > 1) {
        Box::new(MpiLink {
            world,
            peer: seat.peer(),
            timeout: plan.timeout,
        })
    } else if plan.cm.exchange {
        Box::new(failure_step(
            job,
            program,
            cm::open_link(&plan, &port, program),
        )?)
    } else {
        let source = plan.path.source_ip();
        let tcp = match &plan.host {
            Some(host) => TcpLink::connect(host, plan.tcp_port, plan.timeout, source),
            None => {
                println!(
                    "{program}: waiting up to {} s for a client on TCP port {} (start the same command with this host's address)",
                    plan.timeout.as_secs(),
                    plan.tcp_port
                );
                TcpLink::serve(plan.tcp_port, plan.timeout, source)
            }
        };
        Box::new(failure_step(job, program, tcp)?)
    };
    let mut session = Session {
        job,
        plan: &plan,
        seat,
        port: &port,
        endpoint: &mut endpoint,
        csv,
        printer,
        clock: Clock::new(),
    };
    if let Err(e) = session.run(&mut *link) {
        let msg = format!("{e:#}");
        let who = if job.size() > 1 {
            format!("rank {} ({}): ", job.rank(), job.host(job.rank()))
        } else {
            String::new()
        };
        eprintln!("{program}: {who}error: {msg}");
        link.abandon(&msg);
        return Err(Failure::Stopped(ExitStatus::Failed));
    }
    Ok(ExitStatus::Ok)
}

/// A step of the start that may fail on some ranks with a usage mistake: every
/// rank stops with exit 2, the mistake printed once (`job::agree`).
fn usage_step<T>(job: &Job, program: &str, step: Result<T, UsageError>) -> Result<T, Failure> {
    agree(job, program, ExitStatus::Usage, step)
}

/// A step of the start that may fail on some ranks: every rank stops with exit 1,
/// the error and its causes printed once as one line (`job::agree`).
pub(crate) fn failure_step<T>(
    job: &Job,
    program: &str,
    step: anyhow::Result<T>,
) -> Result<T, Failure> {
    agree(job, program, ExitStatus::Failed, step)
}
