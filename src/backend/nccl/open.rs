//! Opening the nccl backend in two steps, so that a missing library or GPU on any
//! rank stops every rank before NCCL's collective initialisation: `prepare` (local)
//! and `connect` (every rank together).

use super::options::NcclOptions;
use super::{nccl_error, NcclBackend, RankGpu};
use crate::backend::Marks;
use crate::gpu::nccl_lib::{self, Comm, Nccl};
use crate::gpu::nccl_log::LogCapture;
use crate::gpu::{self, GpuInfo};
use crate::job::world::World;
use anyhow::{bail, Context};
use cudarc::driver::CudaContext;
use cudarc::nccl::sys::ncclUniqueId;
use std::path::Path;
use std::sync::Arc;

/// Checks that this process could run NCCL: the library (named or searched for)
/// first, then the driver and a GPU; a failure says what was found of NCCL.
pub fn probe(nccl_lib: Option<&Path>) -> anyhow::Result<&'static Nccl> {
    match (nccl_lib::load(nccl_lib), gpu::driver()) {
        (Ok(nccl), Ok(_)) => Ok(nccl),
        (Ok(nccl), Err(absent)) => bail!(
            "{} found at {}; {absent}",
            nccl.version_string(),
            nccl.path()
        ),
        (Err(e), Ok(_)) => Err(e.into()),
        (Err(e), Err(absent)) => bail!("{e}; {absent}"),
    }
}

/// Opens the library `--nccl-lib` (or FABRICBENCH_NCCL_LIB) names, if any: one
/// that cannot be used is the user's mistake, whether or not this host has a GPU.
pub fn check_named(nccl_lib: Option<&Path>) -> Result<(), nccl_lib::NcclAbsent> {
    match nccl_lib {
        Some(named) => nccl_lib::load(Some(named)).map(|_| ()),
        None => Ok(()),
    }
}

/// One rank's GPU before NCCL is initialised.
struct PreparedGpu {
    rank: usize,
    info: GpuInfo,
    ctx: Arc<CudaContext>,
}

/// The local half of opening: libraries found, GPUs opened.
pub struct Prepared {
    nccl: &'static Nccl,
    gpus: Vec<PreparedGpu>,
}

impl Prepared {
    /// NCCL_VERSION_CODE of the library that loaded.
    pub fn nccl_version(&self) -> i32 {
        self.nccl.version()
    }

    /// "NCCL 2.21.5".
    pub fn nccl_name(&self) -> String {
        self.nccl.version_string()
    }
}

/// Opens this process's GPUs: ranks rank*g .. rank*g+g-1 of world.size*g, on GPUs
/// local_rank*g .. local_rank*g+g-1 of this node (from NCCL_TESTS_DEVICE when set).
/// `first`: NCCL_TESTS_DEVICE, GPUs first..first+g-1 instead.
pub fn prepare(
    world: &World,
    nccl_lib: Option<&Path>,
    gpus_per_process: usize,
    first: Option<usize>,
) -> anyhow::Result<Prepared> {
    let nccl = probe(nccl_lib)?;
    let visible = gpu::driver()?;
    let base = first.unwrap_or(world.local_rank * gpus_per_process);
    let needed = base + gpus_per_process;
    if needed > visible {
        match first {
            Some(f) => bail!(
                "NCCL_TESTS_DEVICE={f} with -g {gpus_per_process} needs GPUs {f}..{} but {visible} are visible; \
                 lower NCCL_TESTS_DEVICE or -g/--ngpus",
                needed - 1
            ),
            None => bail!(
                "{} ranks on this node x -g {gpus_per_process} need {} GPUs but {visible} are visible; \
                 start fewer ranks per node or lower -g/--ngpus",
                world.local_size,
                world.local_size * gpus_per_process
            ),
        }
    }
    let mut gpus = Vec::with_capacity(gpus_per_process);
    for j in 0..gpus_per_process {
        let ctx = gpu::open(base + j)?;
        let info = GpuInfo::of(&ctx)?;
        gpus.push(PreparedGpu {
            rank: world.rank * gpus_per_process + j,
            info,
            ctx,
        });
    }
    Ok(Prepared { nccl, gpus })
}

/// The world ranks whose colour (each rank's 4 little-endian bytes) is `rank`'s, in
/// world-rank order; a malformed entry belongs to no group.
fn same_group(colors: &[Vec<u8>], rank: usize) -> Vec<usize> {
    let color = |b: &Vec<u8>| <[u8; 4]>::try_from(b.as_slice()).ok();
    let mine = colors.get(rank).and_then(color);
    (0..colors.len())
        .filter(|&r| mine.is_some() && colors.get(r).and_then(color) == mine)
        .collect()
}

/// A communicator handle crossing into an initialisation thread (-p 1).
struct SendComm(Comm);
// SAFETY: NCCL communicators may be created and used from any thread.
unsafe impl Send for SendComm {}

/// The communicators of `gpus`, as nccl-tests' initComms: ncclCommInitRankConfig
/// with its config, in one group; with -p 1 each from its own thread, concurrently.
fn init_comms(
    nccl: &'static Nccl,
    gpus: &[PreparedGpu],
    nranks: usize,
    id: ncclUniqueId,
    options: &NcclOptions,
) -> anyhow::Result<Vec<Result<Comm, nccl_lib::NcclError>>> {
    let cta = options.cta_policy;
    if options.parallel_init {
        let threads: Vec<_> = gpus
            .iter()
            .map(|g| {
                let (ctx, rank) = (g.ctx.clone(), g.rank);
                std::thread::spawn(move || -> anyhow::Result<Result<SendComm, _>> {
                    ctx.bind_to_thread()?;
                    Ok(nccl
                        .comm_init_rank_config(nranks, id, rank, cta)
                        .map(SendComm))
                })
            })
            .collect();
        let mut comms = Vec::with_capacity(threads.len());
        for t in threads {
            let made = t
                .join()
                .map_err(|_| anyhow::anyhow!("an initialisation thread (-p 1) panicked"))??;
            comms.push(made.map(|c| c.0));
        }
        return Ok(comms);
    }
    let grouped = gpus.len() > 1;
    if grouped {
        nccl.group_start().map_err(nccl_error)?;
    }
    let mut comms = Vec::with_capacity(gpus.len());
    for g in gpus {
        g.ctx.bind_to_thread()?;
        comms.push(nccl.comm_init_rank_config(nranks, id, g.rank, cta));
    }
    if grouped {
        nccl.group_end().map_err(nccl_error)?;
    }
    Ok(comms)
}

/// The collective half of opening, called by every rank together: NCCL's unique id
/// from rank 0, the streams (-y), the communicators, and one small all-reduce so
/// that NCCL (which connects lazily since 2.22) has chosen and logged its transports.
/// `notes`: what checking the options against the library found, for the header.
pub fn connect(
    prepared: Prepared,
    world: &World,
    options: &NcclOptions,
    notes: Vec<String>,
    group: Option<std::os::raw::c_int>,
) -> anyhow::Result<NcclBackend> {
    let Prepared { nccl, mut gpus, .. } = prepared;
    let log = LogCapture::start();
    // NCCL_TESTS_SPLIT: one communicator per group, over its ranks in world-rank order
    // (as MPI_Comm_split keys them), each from its first rank's unique id.
    let members = match group {
        None => (0..world.size).collect(),
        Some(color) => {
            let colors: Vec<Vec<u8>> = world.all_gather_bytes(&color.to_le_bytes());
            same_group(&colors, world.rank)
        }
    };
    let in_group = members.iter().position(|&r| r == world.rank).unwrap_or(0);
    let group_root = members.first().copied().unwrap_or(0);
    let nranks = members.len() * gpus.len();
    let per_process = gpus.len();
    for (j, g) in gpus.iter_mut().enumerate() {
        g.rank = in_group * per_process + j;
    }
    let mine: Vec<u8> = if world.rank == group_root {
        match nccl.unique_id() {
            // SAFETY: ncclUniqueId is 128 plain bytes.
            Ok(id) => unsafe { std::slice::from_raw_parts(id.internal.as_ptr() as *const u8, 128) }
                .to_vec(),
            Err(e) => {
                eprintln!("rank 0: {e}");
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    let from_root = world.all_gather_bytes(&mine).swap_remove(group_root);
    if from_root.len() != 128 {
        bail!("rank {group_root} could not create NCCL's unique id (ncclGetUniqueId failed there)");
    }
    let mut id = ncclUniqueId { internal: [0; 128] };
    for (dst, src) in id.internal.iter_mut().zip(&from_root) {
        *dst = *src as std::ffi::c_char;
    }

    let memory_before_init = gpus
        .iter()
        .map(|g| gpu::used_bytes(&g.ctx).unwrap_or(0))
        .collect();
    let comms = init_comms(nccl, &gpus, nranks, id, options)?;
    let mut backend = NcclBackend {
        nccl,
        gpus: Vec::with_capacity(gpus.len()),
        nranks,
        nodes: world.nodes().len(),
        capturing: false,
        next_mark: 0,
        pattern: Marks::Chained,
        mark_error: None,
        options: options.clone(),
        notes,
        tuning_from: 0,
        tuning_seen: Vec::new(),
        memory_before_init,
        log,
    };
    for (g, comm) in gpus.into_iter().zip(comms) {
        let at = || format!("rank {} on {}", g.rank, g.info.describe());
        let comm = comm.map_err(nccl_error).with_context(at)?;
        // SAFETY: a communicator just created (non-blocking ones may still be working).
        unsafe { nccl.wait_ready(comm) }
            .map_err(nccl_error)
            .with_context(at)?;
        g.ctx.bind_to_thread()?;
        // -y 1: the legacy NULL stream, as nccl-tests' streamnull; else a non-blocking one.
        let stream = match options.stream_null {
            true => g.ctx.default_stream(),
            false => g
                .ctx
                .new_stream()
                .with_context(|| format!("{}: cannot create a stream", g.info.describe()))?,
        };
        backend.gpus.push(RankGpu {
            rank: g.rank,
            info: g.info,
            ctx: g.ctx,
            stream,
            comm,
            send: None,
            recv: None,
            registrations: Vec::new(),
            marks: Vec::new(),
            replay: None,
            graph: None,
            premul: std::cell::Cell::new(None),
        });
    }
    backend.first_connection()?;
    backend.gpus[0].ctx.bind_to_thread()?;
    Ok(backend)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_group_is_its_colours_ranks_in_world_order() {
        let colors: Vec<Vec<u8>> = [0i32, 1, 0, 1, 7]
            .iter()
            .map(|c| c.to_le_bytes().to_vec())
            .collect();
        assert_eq!(super::same_group(&colors, 2), vec![0, 2]);
        assert_eq!(super::same_group(&colors, 3), vec![1, 3]);
        assert_eq!(super::same_group(&colors, 4), vec![4]);
        let mut broken = colors.clone();
        broken[1] = vec![1];
        assert_eq!(super::same_group(&broken, 3), vec![3]);
    }
}
