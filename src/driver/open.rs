//! The backend: which one runs (`--backend`, `auto` decided alike on every rank),
//! opening it, and its buffers, checked against the memory each rank may use
//! before they are allocated.

use crate::backend::mpi::MpiBackend;
use crate::backend::{nccl, Backend, BackendKind, MemoryBudget};
use crate::collective::Collective;
use crate::datatype::{DataType, RedOp};
use crate::driver::args::{BackendChoice, CollArgs, Launch, NamedOrAll, Plan};
use crate::job::{agree, agree_each_rank, ExitStatus, Failure, Group, World};
use crate::sizes::human_bytes;
use crate::watchdog::Watchdog;
use anyhow::Context;

/// Picks and opens the backend on every rank alike (`--backend auto` takes nccl only
/// when every rank has CUDA, NCCL and a GPU); returns it with the reason it was chosen.
pub(super) fn open_backend(
    world: &World,
    program: &str,
    args: &CollArgs,
    plan: &Plan,
    watchdog: &Watchdog,
    group: Option<std::os::raw::c_int>,
) -> Result<(Box<dyn Backend>, String), Failure> {
    let nccl_lib = args.nccl_lib.as_deref();
    if args.backend.kind() != Some(BackendKind::Mpi) {
        agree(
            world,
            program,
            ExitStatus::Usage,
            nccl::check_named(nccl_lib),
        )?;
    }
    let (kind, choice) = match args.backend.kind() {
        Some(kind) => (kind, format!("--backend {}", kind.name())),
        None => {
            let mine = nccl::probe(nccl_lib).map_or_else(|e| format!("{e:#}"), |_| String::new());
            let reasons = world.all_gather_bytes(mine.as_bytes());
            match reasons.iter().position(|r| !r.is_empty()) {
                None => (
                    BackendKind::Nccl,
                    "--backend auto: CUDA, NCCL and a GPU on every rank".into(),
                ),
                Some(r) => (
                    BackendKind::Mpi,
                    format!(
                        "--backend auto: rank {r} ({}) cannot run NCCL: {}",
                        world.hosts[r],
                        String::from_utf8_lossy(&reasons[r])
                    ),
                ),
            }
        }
    };
    if kind == BackendKind::Mpi {
        if world.is_root() && args.backend == BackendChoice::Auto && crate::gpu::driver().is_ok() {
            eprintln!("{program}: WARNING: GPUs are present but the mpi backend runs ({choice})");
        }
        let needs_nccl = match plan.launch {
            _ if plan.gpus_per_process > 1 => Some(format!("-g/--ngpus {}", plan.gpus_per_process)),
            Launch::Graph(n) => Some(format!("-G/--cudagraph {n}")),
            _ => plan.gpu.gpu_only_flag(),
        };
        if let Some(flag) = needs_nccl {
            return Err(Failure::Usage(format!(
                "{flag}: needs the nccl backend, but the mpi backend runs ({choice})"
            )));
        }
        return Ok((Box::new(MpiBackend::new(world, group)?), choice));
    }
    let first_device = plan.tests_env.first_device;
    let prepared = nccl::prepare(world, nccl_lib, plan.gpus_per_process, first_device)
        .map_err(|e| format!("--backend nccl: {e:#}; use --backend mpi for host memory"));
    let prepared = agree_each_rank(world, program, ExitStatus::Failed, prepared)?;
    // -R, -x, -D, -V against the NCCL that loaded: a refusal is a usage error.
    let options = plan
        .gpu
        .against(prepared.nccl_version(), &prepared.nccl_name());
    let (options, notes) = agree_each_rank(world, program, ExitStatus::Usage, options)?;
    watchdog.begin("NCCL communicator initialisation".into());
    watchdog.enter_call();
    let connected =
        nccl::connect(prepared, world, &options, notes, group).context("--backend nccl");
    watchdog.begin(super::OPENING.into());
    watchdog.enter_call();
    let backend = agree_each_rank(world, program, ExitStatus::Failed, connected)?;
    Ok((Box::new(backend), choice))
}

/// The plan the backend can run: `-d all` and `-o all` keep the datatypes and ops
/// every rank's backend supports (nccl-tests drops fp8 below NCCL 2.24 or sm90, and
/// mulsum below NCCL 2.11); one named that some rank cannot run stops the job.
pub(super) fn supported_plan(
    world: &World,
    program: &str,
    plan: &Plan,
    backend: &dyn Backend,
) -> Result<Plan, Failure> {
    let types: Vec<u8> = DataType::ALL
        .iter()
        .map(|&t| backend.supports_datatype(t).is_ok() as u8)
        .collect();
    let ops: Vec<u8> = RedOp::ALL
        .iter()
        .map(|&o| backend.supports_op(o).is_ok() as u8)
        .collect();
    let everywhere = |mine: &[u8]| -> Vec<bool> {
        let all = world.all_gather_bytes(mine);
        (0..mine.len())
            .map(|i| all.iter().all(|r| r[i] == 1))
            .collect()
    };
    let (types_ok, ops_ok) = (everywhere(&types), everywhere(&ops));
    let mut plan = plan.clone();
    let named = match plan.datatype_selection {
        NamedOrAll::All => Ok(()),
        NamedOrAll::Named => (plan.datatypes)
            .iter()
            .try_for_each(|&t| backend.supports_datatype(t)),
    };
    let named = named.and_then(|()| match plan.op_selection {
        NamedOrAll::All => Ok(()),
        NamedOrAll::Named => plan.ops.iter().try_for_each(|&o| backend.supports_op(o)),
    });
    agree_each_rank(world, program, ExitStatus::Usage, named)?;
    plan.datatypes
        .retain(|t| types_ok[DataType::ALL.iter().position(|x| x == t).unwrap_or(0)]);
    plan.ops
        .retain(|o| ops_ok[RedOp::ALL.iter().position(|x| x == o).unwrap_or(0)]);
    Ok(plan)
}

/// Bytes of the send and receive buffers at the largest size, over every datatype
/// of the plan. In place, the receive buffer also holds the send data.
pub(super) fn buffer_bytes(plan: &Plan, coll: &dyn Collective, nranks: usize) -> (usize, usize) {
    plan.datatypes.iter().fold((0, 0), |(s, r), &t| {
        let c = coll.counts(
            (plan.max_bytes / t.size() as u64) as usize,
            t.size(),
            nranks,
        );
        (
            s.max(c.send * t.size()),
            r.max(c.recv.max(c.send) * t.size()),
        )
    })
}

/// Host bytes the timed bench holds for `iters` per-iteration times: on every rank
/// the times, the copy it sends rank 0 and the clock's marks (8 + 8 + 16 B an
/// iteration); on rank 0 also every one of `processes` ranks' times gathered and
/// regrouped by iteration (16 B an iteration a rank) and the worst of each (8 B).
/// None: more bytes than a u64 counts.
pub(super) fn timing_bytes(iters: usize, processes: usize, root: bool) -> Option<u64> {
    let each = match root {
        false => 32,
        true => (processes as u64).checked_mul(16)?.checked_add(40)?,
    };
    (iters as u64).checked_add(2)?.checked_mul(each)
}

/// Allocates the backend's buffers for the plan's largest size on every rank, once
/// each rank has checked that they, the host staging and the per-iteration times
/// fit in the memory it may use. `processes`: those the collective runs among
/// (its group's under NCCL_TESTS_SPLIT). `host`: the host memory budget when the buffers
/// are not host memory (nccl).
pub(super) fn allocate(
    group: &dyn Group,
    program: &str,
    backend: &mut dyn Backend,
    kind: BackendKind,
    plan: &Plan,
    coll: &dyn Collective,
    processes: usize,
    host: Option<MemoryBudget>,
) -> Result<(), Failure> {
    if kind == BackendKind::Mpi {
        let max_elements = plan
            .datatypes
            .iter()
            .map(|t| plan.max_bytes / t.size() as u64)
            .max()
            .unwrap_or(0);
        if max_elements > i32::MAX as u64 {
            return Err(Failure::Usage(format!(
                "-e/--maxbytes {}: {max_elements} elements exceed MPI's int count limit (2^31-1); lower -e or use a wider -d",
                plan.max_bytes
            )));
        }
    }
    // Every rank tests rank 0's count, so that all refuse alike.
    let iters = plan.iters;
    let Some(root_timing) = timing_bytes(iters, group.size(), true) else {
        return Err(Failure::Usage(format!(
            "-n/--iters {iters}: the per-iteration times of so many iterations exceed any memory; use e.g. -n 20"
        )));
    };
    let nranks = processes * plan.gpus_per_process;
    let (send_bytes, recv_bytes) = buffer_bytes(plan, coll, nranks);
    // -u: nccl-tests pads each buffer by 8 bytes (the widest element) per element of misalignment.
    let (send_bytes, recv_bytes) = (send_bytes + 8 * plan.unalign, recv_bytes + 8 * plan.unalign);
    // Host staging: the input pattern is built in a host buffer, and -c reads the
    // result back into another.
    let staging = (send_bytes + if plan.check > 0 { recv_bytes } else { 0 }) as u64;
    let buffers = (send_bytes + recv_bytes) as u64;
    // The mpi backend's buffers are host memory too: they share the budget.
    let (need, host_rest, host) = match kind {
        BackendKind::Mpi => (
            buffers + staging,
            buffers + staging,
            backend.memory_available(),
        ),
        BackendKind::Nccl => (buffers, staging, host),
    };
    let memory = match backend.memory_available() {
        Some(budget) if need > budget.bytes => Err(format!(
            "-e/--maxbytes {}: each rank needs {} (buffers {}, host staging {}) but only {} is available to it ({}); \
             lower -e/--maxbytes",
            plan.max_bytes,
            human_bytes(need),
            human_bytes(buffers),
            human_bytes(staging),
            human_bytes(budget.bytes),
            budget.what
        )),
        _ => Ok(()),
    };
    agree_each_rank(group, program, ExitStatus::Failed, memory)?;
    let timing = timing_bytes(iters, group.size(), group.rank() == 0).unwrap_or(root_timing);
    let times = match host {
        Some(budget) if timing.saturating_add(host_rest) > budget.bytes => Err(format!(
            "-n/--iters {iters}: the per-iteration times need {} of host memory on each rank ({} on rank 0, \
             which gathers every rank's) beside {} of buffers and host staging, but only {} is available to each \
             rank ({}); lower -n/--iters",
            human_bytes(timing_bytes(iters, group.size(), false).unwrap_or(root_timing)),
            human_bytes(root_timing),
            human_bytes(host_rest),
            human_bytes(budget.bytes),
            budget.what
        )),
        _ => Ok(()),
    };
    // One line for the job when every rank of a node lacks the same memory.
    agree(group, program, ExitStatus::Failed, times)?;
    let alloc = backend.alloc(send_bytes, recv_bytes);
    agree_each_rank(group, program, ExitStatus::Failed, alloc)
}
