//! The one driver behind every collective binary, shaped like nccl-tests' common
//! code: agree on arguments, allocate once, then for every datatype, op and root
//! warm up, sweep the sizes, time out-of-place and in-place loops, validate, and
//! hand each size's results to the exporters.
//!
//! - this file: the entry (the job, the arguments every rank agrees on, then
//!   `--all-pairs` or the sweep) and the outline of a run;
//! - `open`: which backend runs, opening it, and the memory budget of its buffers;
//! - `header`: the run's facts for the header, the CSV and the exporters;
//! - `bench`: the timed sweep (layouts, warm-up, timed loop, validation);
//! - `rounds`: --rounds: which lines each round measures, and the closing medians;
//! - `args`: the collectives' flags (nccl-tests' spelling) and their `Plan`.
//!
//! The fault-injection hooks it acts on are `crate::faults` (re-exported as `faults`).

pub mod args;
mod bench;
mod header;
mod memory;
mod open;
mod outputs;
mod rounds;
#[cfg(test)]
mod tests;
mod timing;

use crate::allpairs::backend::{self as allpairs, PairFlags};
use crate::allpairs::rails;
use crate::backend::{host_memory, BackendKind};
use crate::cli::in_words;
use crate::collective::Collective;
pub use crate::faults;
use crate::job::setup::{self, Step};
use crate::job::{self, agree_each_rank, agree_on_arguments, ExitStatus, Failure, Start, World};
use crate::plot::export::PlotExport;
use crate::report::counters::{CounterCsv, FabricPlan, Footer};
use crate::report::csv::CsvExport;
use crate::report::hist::HistExport;
use crate::report::progress::Progress;
use crate::report::run::relevant_env;
use crate::report::table::{Header, Table};
use crate::report::{Exporter, RunInfo};
use crate::sizes::sweep_len;
use crate::watchdog::Watchdog;
use args::{parse_args, CollArgs, Plan, Rounds};
use bench::Bench;
use header::Opened;
use std::process::ExitCode;

/// Entry point of each collective binary.
pub fn collective_main(collective: &dyn Collective) -> ExitCode {
    let program = job::program_name(&format!("{}_perf", collective.id().as_str()));
    // Parsed before MPI starts, so that -T watches every exchange of the setup.
    let parsed = parse_args(collective, std::env::args_os());
    if let Ok(args) = &parsed {
        setup::arm(&program, job::hostname(), args.timeout);
    }
    job::main(Start::Mpi, &program, |job, program| {
        let world = job
            .world()
            .ok_or_else(|| anyhow::anyhow!("the collectives run inside MPI"))?;
        setup::step(Step::Exchange("agreeing on the binary and the arguments"));
        faults::injected().stall_in_setup(world.rank);
        job::agree_on_binary(world, program, collective.id().as_str())?;
        agree_on_arguments(world, &parsed)?;
        let args = parsed?;
        let plan = args.plan()?;
        if args.pairs.all_pairs {
            outputs::refuse_with_all_pairs(&plan)?;
            return all_pairs(world, &args, &plan, program);
        }
        run(world, collective, &args, &plan, program)
    })
}

/// What the watchdog names while the backend opens (the nccl backend's
/// communicator initialisation says so itself).
pub(super) const OPENING: &str = "setup: opening the backend and agreeing on what it runs";

/// `--all-pairs` on the backend `--backend` picks (watched from before it opens:
/// NCCL's initialisation is a collective that can hang).
fn all_pairs(
    world: &World,
    args: &CollArgs,
    plan: &Plan,
    program: &str,
) -> Result<ExitStatus, Failure> {
    setup::step(Step::Exchange("preparing the pairs"));
    let flags = PairFlags {
        pairs: &args.pairs,
        append: args.output.append,
        csv: args.output.csv.as_deref(),
        counters: args.counters.counters.as_deref(),
        sysfs_root: &args.sysfs_root,
        min_bytes: plan.min_bytes,
        max_bytes: plan.max_bytes,
        step: plan.step,
        iters: plan.iters,
        warmup_iters: plan.warmup_iters,
        check: plan.check > 0,
        timeout_s: plan.timeout_s,
        rank_pairs: args.rank_pairs,
    };
    let setup = allpairs::prepare(world, &flags, program)?;
    let watchdog = Watchdog::start(world, program, plan.timeout_s)?;
    if !args.rails.is_empty() {
        // Each rail's pairs are TCP on its netdev: no backend opens.
        return rails::run(world, &flags, &setup, &args.rails, &watchdog);
    }
    watchdog.begin(OPENING.into());
    watchdog.enter_call();
    let (mut backend, _) = open::open_backend(world, program, args, plan, &watchdog, None)?;
    watchdog.end();
    allpairs::run(world, &mut *backend, &flags, &setup, &watchdog)
}

/// One run of the sweep on every rank.
fn run(
    world: &World,
    coll: &dyn Collective,
    args: &CollArgs,
    plan: &Plan,
    program: &str,
) -> Result<ExitStatus, Failure> {
    // Before the backend opens: the nccl backend sets NCCL_DEBUG* for its log.
    let env = relevant_env();
    // NCCL_TESTS_SPLIT: the collective runs among the ranks of each group.
    setup::step(Step::Exchange(
        "agreeing on the groups and the collective's files",
    ));
    let groups = outputs::Groups::agree(world, program, plan)?;
    let (in_group, group_size) = groups.place(world.rank, world.size);
    let nranks = group_size * plan.gpus_per_process;
    let roots = plan.root_list(nranks, coll.rooted())?;
    // The collective's variables (alltoallv's), read here once for the run. Agreed: a
    // file one host lacks (the alltoallv matrix) stops every rank, said once.
    let vars = |name: &str| std::env::var(name).ok();
    let for_run = coll.for_run(nranks, &vars).and_then(|own| {
        let checked = own.as_deref().unwrap_or(coll);
        checked
            .check(nranks, plan.min_bytes, plan.max_bytes)
            .map_err(anyhow::Error::msg)?;
        Ok(own)
    });
    let own = job::agree(world, program, ExitStatus::Usage, for_run)?;
    let coll = own.as_deref().unwrap_or(coll);
    // Started before the backend: NCCL's initialisation is a collective that can hang.
    let watchdog = Watchdog::start(world, program, plan.timeout_s)?;
    watchdog.begin(OPENING.into());
    watchdog.enter_call();
    let (mut backend, choice) = open::open_backend(
        world,
        program,
        args,
        plan,
        &watchdog,
        groups.color(world.rank),
    )?;
    let plan = &open::supported_plan(world, program, plan, &*backend)?;
    // The exchanges of the setup (memory, header facts, limits, output files) are
    // watched as one call: a rank stopped here ends the job within -T too.
    watchdog.begin("setup: buffers, header facts, limits and output files".into());
    watchdog.enter_call();
    let mut memory = plan
        .memory_report
        .then(|| memory::MemorySamples::opened(&*backend));
    let info = backend.info();
    // The nccl backend's buffers are GPU memory; the host's budget is then its own.
    let host = match info.kind {
        BackendKind::Nccl => host_memory(world.local_size),
        BackendKind::Mpi => None,
    };
    let kind = info.kind;
    open::allocate(
        world,
        program,
        &mut *backend,
        kind,
        plan,
        coll,
        group_size,
        host,
    )?;
    if let Some(m) = memory.as_mut() {
        m.allocated(&*backend);
    }

    let opened = Opened { info, choice };
    let (mut run_info, mut header) = header::describe_run(world, program, plan, opened, env);
    if let Some(shared) = world.shared_host_names() {
        run_info.notes.push(shared);
    }
    groups.describe(plan, &mut header, &mut run_info);
    outputs::describe(plan, kind, &mut run_info);
    header::find_limits(world, args, &mut run_info);
    header::model(args, &mut run_info);
    run_info.fabric = FabricPlan::collective(&args.sysfs_root, run_info.hosts.len());
    run_info.planned_results = planned_results(plan, coll, roots.len());
    let json = outputs::open_json(world, program, plan, &groups, &header, &mut run_info)?;
    if world.is_root() {
        for warning in &run_info.notes {
            eprintln!("{program}: WARNING: {warning}");
        }
    }
    let mut exporters = open_exporters(world, program, args, &run_info, header)?;
    exporters.extend(json);
    for e in exporters.iter_mut() {
        e.start(&run_info)?;
    }
    watchdog.end();
    let mut bench = Bench::new(
        world,
        coll,
        &mut *backend,
        plan,
        &watchdog,
        faults::injected().clone(),
    )
    .in_group(in_group, group_size);
    let summary = bench.sweep(&roots, &run_info, &mut exporters)?;
    drop(bench);
    if let Some(m) = &memory {
        run_info.memory_usage = m.report(world, &*backend, kind);
    }
    for e in exporters.iter_mut() {
        e.finish(&run_info, &summary)?;
    }
    let below = outputs::below_minimum(program, &run_info, &summary, world.is_root());
    // Only rank 0 holds the figures, and says the job's status (as for -c).
    let min = match world.is_root() {
        true => outputs::min_busbw_status(program, &summary),
        false => ExitStatus::Ok,
    };
    Ok(if summary.wrong_total > 0 || below {
        ExitStatus::Failed
    } else {
        min
    })
}

/// Size results the sweep will hand the exporters; None when -N 0 runs until
/// interrupted, or --rounds auto decides as it goes.
pub(super) fn planned_results(plan: &Plan, coll: &dyn Collective, roots: usize) -> Option<u64> {
    let ops = if coll.reduces() { plan.ops.len() } else { 1 };
    let sizes = sweep_len(plan.min_bytes, plan.max_bytes, plan.step);
    let per_cycle = (plan.datatypes.len() * ops * roots) as u64;
    // --rounds auto: as many rounds of as many lines as settle them, unknown.
    let rounds = match plan.rounds.rounds {
        Rounds::Fixed(n) => u64::from(n),
        Rounds::Auto { .. } => return None,
    };
    (plan.run_cycles > 0).then(|| {
        per_cycle
            .saturating_mul(sizes)
            .saturating_mul(plan.run_cycles)
            .saturating_mul(rounds)
    })
}

/// Rank 0's exporters: the table (under a progress bar on a terminal), --csv,
/// --hist and --plot. A CSV or folder that cannot be opened stops every rank.
fn open_exporters(
    world: &World,
    program: &str,
    args: &CollArgs,
    run: &RunInfo,
    header: Header,
) -> Result<Vec<Box<dyn Exporter>>, Failure> {
    let mut exporters: Vec<Box<dyn Exporter>> = Vec::new();
    if world.is_root() {
        match Progress::on_terminal(run.planned_results) {
            Some(bar) => {
                exporters.push(Box::new(Table::new(bar.stdout(), header)));
                exporters.push(Box::new(bar));
            }
            None => exporters.push(Box::new(Table::new(std::io::stdout(), header))),
        }
    }
    // The folders first: a folder that cannot be made leaves no CSV behind.
    let views = match world.is_root() {
        true => view_exporters(args).map(|v| exporters.extend(v)),
        false => Ok(()),
    };
    agree_each_rank(
        world,
        program,
        ExitStatus::Failed,
        views.map_err(|e| in_words(&format!("{e:#}"))),
    )?;
    let csv = match (&args.output.csv, world.is_root()) {
        (Some(path), true) => {
            CsvExport::open(path, args.output.append).map(|c| exporters.push(Box::new(c)))
        }
        _ => Ok(()),
    };
    agree_each_rank(world, program, ExitStatus::Failed, csv)?;
    let counters = match (&args.counters.counters, world.is_root()) {
        (Some(path), true) => CounterCsv::create(path).map(|c| exporters.push(Box::new(c))),
        _ => Ok(()),
    };
    agree_each_rank(world, program, ExitStatus::Failed, counters)?;
    if world.is_root() {
        exporters.push(Box::new(Footer::new(std::io::stdout(), run.fabric.clone())));
    }
    Ok(exporters)
}

/// The --hist and --plot exporters (rank 0).
fn view_exporters(args: &CollArgs) -> anyhow::Result<Vec<Box<dyn Exporter>>> {
    let mut views: Vec<Box<dyn Exporter>> = Vec::new();
    if let Some(dir) = &args.hist {
        views.push(Box::new(HistExport::new(dir)?));
    }
    if let Some(dir) = &args.plot {
        views.push(Box::new(PlotExport::new(dir)?));
    }
    Ok(views)
}
