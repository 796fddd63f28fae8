//! The run's facts, gathered once before the sweep: every process's pid, host and
//! devices, the plan, the backend and why it runs, the limits busbw is compared
//! with. They become the `RunInfo` every exporter gets and the table's `Header`.

use crate::backend::BackendInfo;
use crate::driver::args::{CollArgs, Launch, Plan};
use crate::job::Comm;
use crate::limits::{self, Detection};
use crate::model::{Library, Model, RunShape};
use crate::report::counters::Meant;
use crate::report::facts::{DeviceName, Devices, RunBackend};
use crate::report::run::new_run_id;
use crate::report::table::{Header, RankFacts};
use crate::report::RunInfo;
use serde::{Deserialize, Serialize};

/// What one process tells the others for the header.
#[derive(Serialize, Deserialize)]
struct ProcessFacts {
    pid: u32,
    info: BackendInfo,
    /// srun's tasks beyond this node's CPUs (`job::oversubscription`).
    #[serde(default)]
    oversubscribed: Option<String>,
}

/// Distinct values in order of first appearance.
fn distinct<T: PartialEq + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// Why the backend runs and what this process's says about itself.
pub(super) struct Opened {
    pub info: BackendInfo,
    /// "--backend auto: rank 0 (host) cannot run NCCL: ...".
    pub choice: String,
}

/// The run's facts and the table's header (a collective step: every rank calls it).
pub(super) fn describe_run(
    comm: &dyn Comm,
    program: &str,
    plan: &Plan,
    opened: Opened,
    env: Vec<String>,
) -> (RunInfo, Header) {
    let mine = ProcessFacts {
        pid: std::process::id(),
        info: opened.info.clone(),
        oversubscribed: crate::job::oversubscription::note(),
    };
    let all: Vec<ProcessFacts> = comm
        .all_gather_bytes(&serde_json::to_vec(&mine).unwrap_or_default())
        .iter()
        .map(|b| {
            serde_json::from_slice(b).unwrap_or_else(|_| ProcessFacts {
                pid: 0,
                info: BackendInfo::default(),
                oversubscribed: None,
            })
        })
        .collect();
    let mut ranks = Vec::new();
    for (process, facts) in all.iter().enumerate() {
        for (j, d) in facts.info.devices.iter().enumerate() {
            ranks.push(RankFacts {
                rank: process * facts.info.devices.len() + j,
                pid: facts.pid,
                host: comm.host(process).to_string(),
                ordinal: d.ordinal,
                location: d.location.clone(),
                name: d.name.clone(),
                group: 0,
            });
        }
    }
    let device = Devices::of(
        ranks
            .iter()
            .map(|r| (r.rank, DeviceName::at(&r.location, &r.name)))
            .collect(),
    );
    let transport = distinct(all.iter().map(|f| f.info.transport.clone())).join(" | ");
    let notes = distinct(all.iter().flat_map(|f| {
        f.info
            .warnings
            .iter()
            .chain(&f.oversubscribed)
            .cloned()
            .collect::<Vec<_>>()
    }));
    let mut details = opened.info.notes.clone();
    details.push(launch_detail(plan.launch, plan.agg_iters));
    let run = RunInfo {
        program: program.to_string(),
        run_id: new_run_id(chrono::Utc::now()),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        backend: Some(opened.info.kind.into()),
        transport,
        library_version: opened.info.library_version.clone(),
        device,
        // One name per machine (by identity): two nodes of one name count as two.
        hosts: distinct((0..comm.size()).map(|r| (comm.host(r), comm.identity(r))))
            .into_iter()
            .map(|(h, _)| h.to_string())
            .collect(),
        nranks: ranks.len(),
        env,
        iters: plan.iters,
        warmup_iters: plan.warmup_iters,
        average: Some(plan.average),
        checked: plan.check > 0,
        notes,
        backend_choice: opened.choice,
        details,
        launch: Some(plan.launch),
        report_cputime: plan.report_cputime,
        ..RunInfo::default()
    };
    let header = Header {
        gpus_per_process: plan.gpus_per_process,
        min_bytes: plan.min_bytes,
        max_bytes: plan.max_bytes,
        step: plan.step,
        warmup_iters: plan.warmup_iters,
        iters: plan.iters,
        check: plan.check,
        graph_launches: plan.launch.graph_launches(),
        unalign: plan.unalign,
        agg_iters: plan.agg_iters,
        blocking: match plan.launch {
            Launch::Blocking => 1,
            Launch::Synced => 2,
            Launch::BarrierOutside => 3,
            Launch::Stream | Launch::Graph(_) => 0,
        },
        parallel_init: plan.gpu.parallel_init,
        ranks,
    };
    (run, header)
}

/// The header line that says how the timed calls were issued.
fn launch_detail(launch: Launch, agg_iters: usize) -> String {
    let how = match launch {
        Launch::Stream => "calls issued back to back, completion awaited once per loop".to_string(),
        Launch::Blocking => {
            "-z 1, each call completed and a barrier on every rank before the next (timed)".to_string()
        }
        Launch::Synced => "-z 2, each call completed before the next, no barrier".to_string(),
        Launch::BarrierOutside => {
            "-z 3, each iteration completed and timed alone, a barrier between iterations outside the timed time (OSU's method)".to_string()
        }
        Launch::Graph(n) => format!(
            "-G {n}, the timed calls captured in a CUDA graph launched {n} times; validation runs uncaptured"
        ),
    };
    match agg_iters {
        1 => format!("Launch: {how}"),
        m => format!("Launch: {how}; -m {m}: {m} calls per iteration, grouped"),
    }
}

/// The run's limits: --limit, else what the nodes' sysfs tells (read by one
/// rank per node, so that a downgraded link on any node is reported).
pub(super) fn find_limits(comm: &dyn Comm, args: &CollArgs, run: &mut RunInfo) {
    let mine = if comm.local_rank() == 0 {
        let here = comm.host(comm.rank());
        let meant = Meant::from_env(|v| std::env::var(v).ok());
        let named = |dev: &str, port: u32| meant.as_ref().is_none_or(|m| m.names(dev, port));
        let rails = limits::Rails {
            named: &named,
            by: meant.as_ref().map(Meant::text),
            ranks_on_node: (0..comm.size()).filter(|&r| comm.host(r) == here).count(),
        };
        limits::detect_rails(&crate::sysfs::Root::new(&args.sysfs_root), &rails)
    } else {
        Detection::default()
    };
    let encoded = serde_json::to_vec(&mine).expect("a detection serialises");
    let mut per_host: Vec<(String, Detection)> = Vec::new();
    for (rank, bytes) in comm.all_gather_bytes(&encoded).iter().enumerate() {
        let host = comm.host(rank).to_string();
        match serde_json::from_slice::<Detection>(bytes) {
            Ok(d) if d == Detection::default() => {}
            Ok(d) => per_host.push((host, d)),
            // Said, never dropped in silence: that node's limits are unknown.
            Err(e) => run.notes.push(format!(
                "rank {rank} ({host}): its detected limits do not decode ({e}); none from that node"
            )),
        }
    }
    let detected = limits::merge(&per_host);
    run.limits = limits::choose(&args.limit, &detected);
    run.limits_lines = vec![limits::describe(&run.limits, !args.limit.is_empty())];
    run.limits_lines.extend(detected.found);
    run.notes.extend(detected.warnings);
}

/// The run's performance model, from its shape and limits (so after
/// `find_limits`), and --expected.
pub(super) fn model(args: &CollArgs, run: &mut RunInfo) {
    let library = match run.backend {
        Some(RunBackend::Nccl) => Library::Nccl,
        // Open MPI's forced algorithms reach the ranks as OMPI_MCA_* variables
        // (mpirun --mca or the user's environment).
        _ => Library::mpi(&run.library_version, |k| std::env::var(k).ok()),
    };
    let built = Model::new(&RunShape {
        library,
        nranks: run.nranks,
        nnodes: run.hosts.len(),
        limits: &run.limits,
        split: !run.groups.is_empty(),
        latency_us: args.model_latency,
    });
    run.expected_column = args.expected;
    match built {
        Ok(model) => {
            run.model_line = model.describe();
            run.model = Some(model);
        }
        Err(why) => run.model_line = format!("Expected: {why}"),
    }
}
