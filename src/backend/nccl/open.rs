//! Opening the nccl backend in two steps, so that a missing library or GPU on any
//! rank stops every rank before NCCL's collective initialisation: `prepare` (local)
//! and `connect` (every rank together).

use super::{nccl_error, NcclBackend, RankGpu};
use crate::backend::Marks;
use crate::gpu::nccl_lib::{self, Nccl};
use crate::gpu::nccl_log::LogCapture;
use crate::gpu::{self, GpuInfo};
use crate::job::world::World;
use anyhow::{bail, Context};
use cudarc::driver::{CudaContext, CudaStream};
use cudarc::nccl::sys::ncclUniqueId;
use std::path::Path;
use std::sync::Arc;

/// Checks that this process could run NCCL: driver, a GPU, the library.
pub fn probe(nccl_lib: Option<&Path>) -> Result<&'static Nccl, String> {
    gpu::driver().map_err(|e| e.to_string())?;
    nccl_lib::load(nccl_lib)
}

/// One rank's GPU before NCCL is initialised.
struct PreparedGpu {
    rank: usize,
    info: GpuInfo,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
}

/// The local half of opening: libraries found, GPUs opened, streams created.
pub struct Prepared {
    nccl: &'static Nccl,
    gpus: Vec<PreparedGpu>,
    nranks: usize,
}

/// Opens this process's GPUs: ranks rank*g .. rank*g+g-1 of world.size*g, on GPUs
/// local_rank*g .. local_rank*g+g-1 of this node.
pub fn prepare(
    world: &World,
    nccl_lib: Option<&Path>,
    gpus_per_process: usize,
) -> anyhow::Result<Prepared> {
    let nccl = probe(nccl_lib).map_err(anyhow::Error::msg)?;
    let visible = gpu::driver()?;
    let needed = world.local_size * gpus_per_process;
    if needed > visible {
        bail!(
            "{} ranks on this node x -g {gpus_per_process} need {needed} GPUs but {visible} are visible; \
             start fewer ranks per node or lower -g/--ngpus",
            world.local_size
        );
    }
    let mut gpus = Vec::with_capacity(gpus_per_process);
    for j in 0..gpus_per_process {
        let ordinal = world.local_rank * gpus_per_process + j;
        let ctx = gpu::open(ordinal)?;
        let info = GpuInfo::of(&ctx)?;
        let stream = ctx
            .new_stream()
            .with_context(|| format!("{}: cannot create a stream", info.describe()))?;
        gpus.push(PreparedGpu {
            rank: world.rank * gpus_per_process + j,
            info,
            ctx,
            stream,
        });
    }
    Ok(Prepared {
        nccl,
        gpus,
        nranks: world.size * gpus_per_process,
    })
}

/// The collective half of opening, called by every rank together: NCCL's unique id
/// from rank 0, the communicators, and one small all-reduce so that NCCL (which
/// connects lazily since 2.22) has chosen and logged its transports.
pub fn connect(prepared: Prepared, world: &World) -> anyhow::Result<NcclBackend> {
    let Prepared { nccl, gpus, nranks } = prepared;
    let log = LogCapture::start();
    let mine: Vec<u8> = if world.is_root() {
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
    let from_root = world.all_gather_bytes(&mine).swap_remove(0);
    if from_root.len() != 128 {
        bail!("rank 0 could not create NCCL's unique id (ncclGetUniqueId failed there)");
    }
    let mut id = ncclUniqueId { internal: [0; 128] };
    for (dst, src) in id.internal.iter_mut().zip(&from_root) {
        *dst = *src as std::ffi::c_char;
    }

    let grouped = gpus.len() > 1;
    if grouped {
        nccl.group_start().map_err(nccl_error)?;
    }
    let mut comms = Vec::with_capacity(gpus.len());
    for g in &gpus {
        g.ctx.bind_to_thread()?;
        comms.push(nccl.comm_init_rank(nranks, id, g.rank).map_err(nccl_error));
    }
    if grouped {
        nccl.group_end().map_err(nccl_error)?;
    }
    let mut backend = NcclBackend {
        nccl,
        gpus: Vec::with_capacity(gpus.len()),
        nranks,
        nodes: world.nodes().len(),
        capturing: false,
        next_mark: 0,
        pattern: Marks::Chained,
        mark_error: None,
        log,
    };
    for (g, comm) in gpus.into_iter().zip(comms) {
        let comm = comm.with_context(|| format!("rank {} on {}", g.rank, g.info.describe()))?;
        backend.gpus.push(RankGpu {
            rank: g.rank,
            info: g.info,
            ctx: g.ctx,
            stream: g.stream,
            comm,
            send: None,
            recv: None,
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
