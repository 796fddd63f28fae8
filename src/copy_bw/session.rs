//! One copy_bw run: the GPUs opened, every copy of the plan measured through the
//! one copy loop, and each result handed to the table and the CSV as it comes.

use super::args::{CopyArgs, CopyPlan};
use super::copy::{measure, Route};
use super::gpus::{bind_near, driver_version, Gpu};
use super::limits::{peer_link, slow_link_note};
use crate::gpu::links::NvmlFacts;
use crate::gpu::{self, DeviceBuffer, PinnedBuffer};
use crate::job::ExitStatus;
use crate::report::copy::{CopyKind, CopyResult};
use crate::report::copy_table::CopyTable;
use crate::report::csv::CsvExport;
use crate::report::facts::{Average, Launch, RunBackend};
use crate::report::run::env_with_prefixes;
use crate::report::{Exporter, RunInfo, Summary};
use crate::sysfs::Root;
use anyhow::bail;
use cudarc::driver::{result, sys};

/// Where results go: every exporter, as each is measured, and the list of them.
struct Results {
    run: RunInfo,
    exporters: Vec<Box<dyn Exporter<CopyResult>>>,
    all: Vec<CopyResult>,
}

impl Results {
    fn record(&mut self, result: CopyResult) -> anyhow::Result<()> {
        for e in &mut self.exporters {
            e.record(&self.run, &result)?;
        }
        self.all.push(result);
        Ok(())
    }
}

struct Session {
    plan: CopyPlan,
    sysfs: Root,
    gpus: Vec<Gpu>,
    nvml: NvmlFacts,
    out: Results,
}

impl Session {
    /// Host to device or device to host between GPU `g` and pinned memory near it.
    fn host_copies(&mut self, g: usize, kind: CopyKind) -> anyhow::Result<()> {
        let gpu = &self.gpus[g];
        let host = PinnedBuffer::new(&gpu.ctx, self.plan.largest())?;
        let device = DeviceBuffer::zeroed(&gpu.ctx, self.plan.largest())?;
        let route = Route {
            kind,
            path: gpu.path(),
            device: gpu.device(),
            transport: "PCIe",
            limit: gpu.pcie.clone(),
        };
        let stream = gpu.stream.cu_stream();
        let out = &mut self.out;
        let record = &mut |r| out.record(r);
        // SAFETY (both calls): each range holds n bytes and outlives the synchronised loop.
        if kind == CopyKind::HostToDevice {
            let h2d = |n| {
                unsafe {
                    sys::cuMemcpyHtoDAsync_v2(device.at(0), host.as_ptr() as *const _, n, stream)
                }
                .result()
                .map_err(Into::into)
            };
            measure(&self.plan, gpu, &route, (&host, &device), h2d, record)?;
        } else {
            let d2h = |n| {
                unsafe {
                    sys::cuMemcpyDtoHAsync_v2(host.as_ptr() as *mut _, device.at(0), n, stream)
                }
                .result()
                .map_err(Into::into)
            };
            measure(&self.plan, gpu, &route, (&device, &host), d2h, record)?;
        }
        self.explain_slow_link(g, kind);
        Ok(())
    }

    /// A note in the run when GPU `g`'s host copies of `kind` fell short because
    /// its link trained low.
    fn explain_slow_link(&mut self, g: usize, kind: CopyKind) {
        let gpu = &self.gpus[g];
        let path = gpu.path();
        let efficiency = self
            .out
            .all
            .iter()
            .filter(|r| r.kind == kind && r.path == path)
            .filter_map(CopyResult::pct_of_limit)
            .fold(0.0, f64::max);
        if let Some(note) = slow_link_note(&self.sysfs, gpu, kind, efficiency) {
            eprintln!("copy_bw: WARNING: {note}");
            self.out.run.notes.push(note);
        }
    }

    /// Within GPU `g`'s memory.
    fn device_copies(&mut self, g: usize) -> anyhow::Result<()> {
        let gpu = &self.gpus[g];
        let src = DeviceBuffer::zeroed(&gpu.ctx, self.plan.largest())?;
        let dst = DeviceBuffer::zeroed(&gpu.ctx, self.plan.largest())?;
        let route = Route {
            kind: CopyKind::DeviceToDevice,
            path: gpu.path(),
            device: gpu.device(),
            transport: "memory",
            limit: gpu.memory.clone(),
        };
        let stream = gpu.stream.cu_stream();
        // SAFETY: both buffers hold n bytes and outlive the synchronised loop.
        let d2d = |n| {
            unsafe { result::memcpy_dtod_async(dst.at(0), src.at(0), n, stream) }
                .map_err(Into::into)
        };
        let out = &mut self.out;
        measure(&self.plan, gpu, &route, (&src, &dst), d2d, &mut |r| {
            out.record(r)
        })
    }

    /// Copies from GPU `a` to GPU `b`, issued on `a`'s stream: direct when the two
    /// can reach each other (NVLink or PCIe peer to peer), else staged by the driver.
    fn peer_copies(&mut self, a: usize, b: usize) -> anyhow::Result<()> {
        let (from, to) = (&self.gpus[a], &self.gpus[b]);
        let direct = from.enable_peer_access(to)? && to.enable_peer_access(from)?;
        let src = DeviceBuffer::zeroed(&from.ctx, self.plan.largest())?;
        let dst = DeviceBuffer::zeroed(&to.ctx, self.plan.largest())?;
        let (transport, limit) = peer_link(&self.nvml, &self.gpus, (from, to), direct);
        let route = Route {
            kind: CopyKind::Peer,
            path: format!("{}->{}", from.path(), to.path()),
            device: format!(
                "{} {} -> {} {}",
                from.info.name, from.info.bus_id, to.info.name, to.info.bus_id
            ),
            transport,
            limit,
        };
        let (src_ctx, dst_ctx, stream) =
            (from.ctx.cu_ctx(), to.ctx.cu_ctx(), from.stream.cu_stream());
        // SAFETY: both buffers hold n bytes and outlive the synchronised loop.
        let p2p = |n| {
            unsafe { result::memcpy_peer_async(dst_ctx, dst.at(0), src_ctx, src.at(0), n, stream) }
                .map_err(Into::into)
        };
        let out = &mut self.out;
        measure(&self.plan, from, &route, (&src, &dst), p2p, &mut |r| {
            out.record(r)
        })
    }
}

/// Measures every copy of `plan`; Failed when a copy's bytes came out wrong.
pub(super) fn run(args: &CopyArgs, plan: CopyPlan, host: &str) -> anyhow::Result<ExitStatus> {
    let visible = gpu::driver().map_err(|e| anyhow::anyhow!("{e}; copy_bw measures GPU copies"))?;
    let ordinals = plan.gpus.clone().unwrap_or_else(|| (0..visible).collect());
    if let Some(bad) = ordinals.iter().find(|&&o| o >= visible) {
        bail!("--gpus {bad}: only {visible} GPUs are visible (numbered from 0)");
    }
    let sysfs = Root::new("/");
    let nvml = NvmlFacts::open();
    let gpus = ordinals
        .iter()
        .map(|&o| Gpu::open(o, &nvml, &sysfs))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let csv = args
        .csv
        .csv
        .as_ref()
        .map(|p| CsvExport::open(p, args.csv.append))
        .transpose()?;
    let mut run = RunInfo {
        backend: Some(RunBackend::Cuda),
        library_version: driver_version(),
        hosts: vec![host.to_string()],
        nranks: 1,
        env: env_with_prefixes(&["CUDA_"]),
        iters: plan.iters,
        warmup_iters: plan.warmup_iters,
        average: Some(Average::Mean),
        checked: plan.check,
        backend_choice: "copy engines (cuMemcpyAsync)".into(),
        launch: Some(Launch::Stream),
        ..RunInfo::new("copy_bw", chrono::Utc::now())
    };
    if !nvml.available() {
        run.notes.push(
            "NVML (libnvidia-ml.so.1) not available: NVLink limits unknown, memory limits from CUDA".into(),
        );
    }
    let table = CopyTable::new(std::io::stdout(), gpus.iter().map(Gpu::facts).collect());
    let mut exporters: Vec<Box<dyn Exporter<CopyResult>>> = vec![Box::new(table)];
    exporters.extend(csv.map(|c| Box::new(c) as Box<dyn Exporter<CopyResult>>));
    for e in &mut exporters {
        e.start(&run)?;
    }
    let mut session = Session {
        plan,
        sysfs,
        gpus,
        nvml,
        out: Results {
            run,
            exporters,
            all: Vec::new(),
        },
    };
    let kinds = session.plan.kinds.clone();
    for g in 0..session.gpus.len() {
        // Host memory near the GPU, as a well-placed application would use it.
        bind_near(&session.sysfs, &session.gpus[g].info.bus_id);
        for kind in [CopyKind::HostToDevice, CopyKind::DeviceToHost] {
            if kinds.contains(&kind) {
                session.host_copies(g, kind)?;
            }
        }
        if kinds.contains(&CopyKind::DeviceToDevice) {
            session.device_copies(g)?;
        }
    }
    if kinds.contains(&CopyKind::Peer) && session.gpus.len() > 1 {
        for a in 0..session.gpus.len() {
            for b in 0..session.gpus.len() {
                if a != b {
                    session.peer_copies(a, b)?;
                }
            }
        }
    }
    let out = &mut session.out;
    let summary = Summary {
        wrong_total: out.all.iter().filter_map(|r| r.wrong).sum(),
        ..Summary::default()
    };
    for e in &mut out.exporters {
        e.finish(&out.run, &summary)?;
    }
    Ok(if summary.wrong_total > 0 {
        ExitStatus::Failed
    } else {
        ExitStatus::Ok
    })
}
