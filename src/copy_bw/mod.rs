//! `copy_bw`: what a GPU's copy engines move, in each direction, against the limit
//! of the path they use (nvbandwidth's core): host to device and device to host
//! from pinned memory near the GPU (PCIe, sysfs), device to device within a GPU
//! (memory, NVML), and between every ordered pair of GPUs (NVLink from NVML, else
//! PCIe). Each copy is timed with CUDA events, per iteration, into the same
//! percentiles, CSV rows and table style as the collectives, and checked byte for
//! byte afterwards.

mod table;

use crate::gpu::links::NvmlFacts;
use crate::gpu::{self, DeviceBuffer, GpuInfo, PinnedBuffer};
use crate::limits::{self, Limit};
use crate::report::csv::CsvExport;
use crate::report::{Measurement, Placement, Row, RunInfo, SizeResult};
use crate::sizes::{parse_size, sweep, Step};
use crate::stats::{histogram, IterStats};
use anyhow::{bail, Context};
use clap::Parser;
use cudarc::driver::sys::{self, CUevent_flags};
use cudarc::driver::{result, CudaContext, CudaStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use table::CopyTable;

fn size_arg(text: &str) -> Result<u64, String> {
    parse_size(text)
}

#[derive(Parser, Debug, Clone)]
#[command(
    name = "copy_bw",
    version,
    about = "GPU copy bandwidth per direction (H2D, D2H, D2D, GPU to GPU) against the PCIe, NVLink and memory limits read from the machine"
)]
pub struct CopyArgs {
    /// Smallest copy in bytes (K, M, G suffixes: 1K = 1024)
    #[arg(short = 'b', long = "minbytes", default_value = "1M", value_parser = size_arg)]
    pub minbytes: u64,
    /// Largest copy in bytes
    #[arg(short = 'e', long = "maxbytes", default_value = "1G", value_parser = size_arg)]
    pub maxbytes: u64,
    /// Multiply the size by this factor at each step (an integer > 1)
    #[arg(short = 'f', long = "stepfactor", default_value_t = 4)]
    pub stepfactor: u64,
    /// Timed copies per size
    #[arg(short = 'n', long = "iters", default_value_t = 20)]
    pub iters: usize,
    /// Untimed copies before each timed loop
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 3)]
    pub warmup_iters: usize,
    /// Check the copied bytes after each size (0 = no check)
    #[arg(short = 'c', long = "check", default_value_t = 1)]
    pub check: usize,
    /// GPUs to measure, e.g. 0,1,3 (default: every visible GPU)
    #[arg(long = "gpus", value_delimiter = ',')]
    pub gpus: Vec<usize>,
    /// Copies to run: h2d, d2h, d2d, p2p (comma-separated)
    #[arg(
        long = "tests",
        value_delimiter = ',',
        default_value = "h2d,d2h,d2d,p2p"
    )]
    pub tests: Vec<String>,
    /// Append one row per copy and size to this CSV (never overwritten)
    #[arg(long = "csv")]
    pub csv: Option<PathBuf>,
    /// With --csv: add rows to an existing file of the same schema
    #[arg(long = "append", requires = "csv")]
    pub append: bool,
}

/// The copies copy_bw knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
    Peer,
}

impl Kind {
    const ALL: [Kind; 4] = [
        Kind::HostToDevice,
        Kind::DeviceToHost,
        Kind::DeviceToDevice,
        Kind::Peer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::HostToDevice => "h2d",
            Kind::DeviceToHost => "d2h",
            Kind::DeviceToDevice => "d2d",
            Kind::Peer => "p2p",
        }
    }

    /// Bytes of memory traffic per byte copied: a copy within one GPU's memory reads
    /// and writes each byte, as CUDA's bandwidthTest counts it.
    pub fn traffic_factor(self) -> f64 {
        if self == Kind::DeviceToDevice {
            2.0
        } else {
            1.0
        }
    }
}

/// The validated command line.
#[derive(Clone, Debug)]
pub struct CopyPlan {
    pub sizes: Vec<u64>,
    pub iters: usize,
    pub warmup_iters: usize,
    pub check: bool,
    pub gpus: Option<Vec<usize>>,
    pub kinds: Vec<Kind>,
}

impl CopyArgs {
    pub fn plan(&self) -> Result<CopyPlan, String> {
        if self.minbytes == 0 || self.minbytes > self.maxbytes {
            return Err(format!(
                "-b/--minbytes {} -e/--maxbytes {}: give 1 <= -b <= -e",
                self.minbytes, self.maxbytes
            ));
        }
        if self.stepfactor < 2 {
            return Err(format!(
                "-f/--stepfactor {}: must be an integer > 1 (e.g. -f 4)",
                self.stepfactor
            ));
        }
        if self.iters == 0 {
            return Err("-n/--iters 0: at least one timed copy is needed; use e.g. -n 20".into());
        }
        let kinds = self
            .tests
            .iter()
            .map(|t| {
                Kind::ALL
                    .into_iter()
                    .find(|k| k.name() == t.trim())
                    .ok_or_else(|| {
                        format!("--tests {t}: use h2d, d2h, d2d and/or p2p, comma-separated")
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(path) = &self.csv {
            if path.exists() && !self.append {
                return Err(format!(
                    "--csv {}: the file exists and runs are never overwritten; choose a new path or add --append",
                    path.display()
                ));
            }
        }
        Ok(CopyPlan {
            sizes: sweep(self.minbytes, self.maxbytes, Step::Factor(self.stepfactor)),
            iters: self.iters,
            warmup_iters: self.warmup_iters,
            check: self.check > 0,
            gpus: (!self.gpus.is_empty()).then(|| self.gpus.clone()),
            kinds,
        })
    }
}

/// One GPU and what bounds its copies.
struct Gpu {
    info: GpuInfo,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    pcie: Option<Limit>,
    memory: Option<Limit>,
    numa_node: Option<i32>,
}

/// One measured copy at one size.
#[derive(Clone, Debug)]
pub struct CopyResult {
    pub kind: Kind,
    /// "gpu0", "gpu0->gpu1".
    pub path: String,
    pub size: u64,
    pub seconds: f64,
    pub per_iteration: Vec<f64>,
    pub wrong: Option<u64>,
    pub limit: Option<Limit>,
    /// "PCIe", "memory", "NVLink", "PCIe P2P", "staged through host".
    pub transport: String,
    pub device: String,
}

impl CopyResult {
    /// Bytes moved per second (memory traffic for D2D).
    pub fn gbs(&self) -> f64 {
        self.size as f64 * self.kind.traffic_factor() / self.seconds / 1e9
    }

    /// The figure as a percentage of its limit, as the CSV's pct_of_limit.
    pub fn pct_of_limit(&self) -> Option<f64> {
        self.limit
            .as_ref()
            .map(|l| limits::percent_of(self.gbs(), l))
    }
}

/// Byte `i` of every copy's source: a prime period, so a shifted copy cannot match.
fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

/// 0xFF never occurs in `pattern`: a destination nothing was written to fails.
const POISON: u8 = 0xFF;

fn count_wrong_bytes(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .enumerate()
        .filter(|(i, b)| **b != pattern(*i))
        .count() as u64
}

/// Times `iters` copies issued by `issue` on `stream`, with an event after each.
fn time_copies(
    ctx: &Arc<CudaContext>,
    stream: &CudaStream,
    iters: usize,
    warmup: usize,
    mut issue: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<(f64, Vec<f64>)> {
    for _ in 0..warmup {
        issue()?;
    }
    stream.synchronize()?;
    let events = (0..=iters)
        .map(|_| ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)))
        .collect::<Result<Vec<_>, _>>()?;
    events[0].record(stream)?;
    for event in &events[1..] {
        issue()?;
        event.record(stream)?;
    }
    stream.synchronize()?;
    let per_iteration = events
        .windows(2)
        .map(|w| w[0].elapsed_ms(&w[1]).map(|ms| ms as f64 / 1e3))
        .collect::<Result<Vec<_>, _>>()?;
    let total = events[0].elapsed_ms(&events[iters])? as f64 / 1e3;
    Ok((total / iters as f64, per_iteration))
}

/// The root of the sysfs tree read for the GPUs' links, NUMA nodes and CPUs.
const SYSFS_ROOT: &str = "/";

fn pci_dir(bus_id: &str) -> PathBuf {
    limits::pci_device_dir(Path::new(SYSFS_ROOT), bus_id)
}

/// The NUMA node of a PCI device (none on single-node machines, where sysfs says -1).
fn numa_node(bus_id: &str) -> Option<i32> {
    let node: i32 = std::fs::read_to_string(pci_dir(bus_id).join("numa_node"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (node >= 0).then_some(node)
}

/// Runs the current thread on the CPUs next to `bus_id`'s PCIe root, so pinned
/// host memory is allocated (first touched) on the GPU's NUMA node.
fn bind_near(bus_id: &str) {
    let Ok(cpus) = std::fs::read_to_string(pci_dir(bus_id).join("local_cpulist")) else {
        return;
    };
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and sched_setaffinity act on it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for range in cpus.trim().split(',') {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) else {
                return;
            };
            for cpu in a..=b.min(libc::CPU_SETSIZE as usize - 1) {
                libc::CPU_SET(cpu, &mut set);
            }
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

struct Session {
    plan: CopyPlan,
    gpus: Vec<Gpu>,
    nvml: NvmlFacts,
    run: RunInfo,
    table: CopyTable<std::io::Stdout>,
    csv: Option<CsvExport>,
    results: Vec<CopyResult>,
}

impl Session {
    fn record(&mut self, result: CopyResult) -> anyhow::Result<()> {
        self.table.row(&result)?;
        if let Some(csv) = self.csv.as_mut() {
            csv.write_rows([row(&self.run, &result, &self.plan)])?;
        }
        self.results.push(result);
        Ok(())
    }

    fn host_copies(&mut self, g: usize, kind: Kind) -> anyhow::Result<()> {
        let max = *self.plan.sizes.last().unwrap_or(&1) as usize;
        let (ctx, stream) = (self.gpus[g].ctx.clone(), self.gpus[g].stream.clone());
        let host = PinnedBuffer::new(&ctx, max)?;
        let device = DeviceBuffer::zeroed(&ctx, max)?;
        for size in self.plan.sizes.clone() {
            let n = size as usize;
            let src_host = kind == Kind::HostToDevice;
            {
                // SAFETY: the pinned buffer holds `max` >= n bytes; no copy is in flight.
                let host_bytes = unsafe { std::slice::from_raw_parts_mut(host.as_ptr(), n) };
                if src_host {
                    host_bytes
                        .iter_mut()
                        .enumerate()
                        .for_each(|(i, b)| *b = pattern(i));
                    device.write(0, &vec![POISON; n])?;
                } else {
                    device.write(0, &(0..n).map(pattern).collect::<Vec<u8>>())?;
                    host_bytes.fill(POISON);
                }
            }
            let cu_stream = stream.cu_stream();
            let (seconds, per_iteration) = time_copies(
                &ctx,
                &stream,
                self.plan.iters,
                self.plan.warmup_iters,
                || {
                    // SAFETY: both ranges hold n bytes and outlive the synchronised loop.
                    unsafe {
                        if src_host {
                            sys::cuMemcpyHtoDAsync_v2(
                                device.at(0),
                                host.as_ptr() as *const _,
                                n,
                                cu_stream,
                            )
                        } else {
                            sys::cuMemcpyDtoHAsync_v2(
                                host.as_ptr() as *mut _,
                                device.at(0),
                                n,
                                cu_stream,
                            )
                        }
                    }
                    .result()?;
                    Ok(())
                },
            )?;
            let wrong = if !self.plan.check {
                None
            } else if src_host {
                self.read_check(&device, n)?
            } else {
                // SAFETY: the copies have completed (time_copies synchronised the stream).
                Some(count_wrong_bytes(unsafe {
                    std::slice::from_raw_parts(host.as_ptr(), n)
                }))
            };
            let gpu = &self.gpus[g];
            self.record(CopyResult {
                kind,
                path: format!("gpu{}", gpu.info.ordinal),
                size,
                seconds,
                per_iteration,
                wrong,
                limit: gpu.pcie.clone(),
                transport: "PCIe".into(),
                device: format!("{} {}", gpu.info.name, gpu.info.bus_id),
            })?;
        }
        self.explain_slow_link(g, kind);
        Ok(())
    }

    /// When host copies reach under 75% of the link's capability, reads the link
    /// right after them (it runs at its trained speed then; idle GPUs drop to
    /// lower speeds, so an idle reading proves nothing) and says when it trained
    /// below what both ends support: a Gen5 GPU at Gen4, or at x8.
    fn explain_slow_link(&mut self, g: usize, kind: Kind) {
        let info = &self.gpus[g].info;
        let path = format!("gpu{}", info.ordinal);
        let efficiency = self
            .results
            .iter()
            .filter(|r| r.kind == kind && r.path == path)
            .filter_map(CopyResult::pct_of_limit)
            .fold(0.0, f64::max);
        if efficiency >= 75.0 {
            return;
        }
        let Some(state) = limits::pcie_state(Path::new(SYSFS_ROOT), &info.bus_id) else {
            return;
        };
        let Some(current) = state.current else {
            return;
        };
        if current.below(&state.capable) {
            let note = format!(
                "{}: {} reached {efficiency:.0}% of {} and the link ran at {} right after, below what both ends support",
                info.describe(),
                kind.name(),
                state.capable.describe(),
                current.describe()
            );
            eprintln!("copy_bw: WARNING: {note}");
            self.run.notes.push(note);
        }
    }

    fn device_copies(&mut self, g: usize) -> anyhow::Result<()> {
        let max = *self.plan.sizes.last().unwrap_or(&1) as usize;
        let (ctx, stream) = (self.gpus[g].ctx.clone(), self.gpus[g].stream.clone());
        let src = DeviceBuffer::zeroed(&ctx, max)?;
        let dst = DeviceBuffer::zeroed(&ctx, max)?;
        src.write(0, &(0..max).map(pattern).collect::<Vec<u8>>())?;
        for size in self.plan.sizes.clone() {
            let n = size as usize;
            dst.write(0, &vec![POISON; n])?;
            let cu_stream = stream.cu_stream();
            let (seconds, per_iteration) = time_copies(
                &ctx,
                &stream,
                self.plan.iters,
                self.plan.warmup_iters,
                || {
                    // SAFETY: both buffers hold n bytes and outlive the synchronised loop.
                    unsafe { result::memcpy_dtod_async(dst.at(0), src.at(0), n, cu_stream) }?;
                    Ok(())
                },
            )?;
            let wrong = self.read_check(&dst, n)?;
            let gpu = &self.gpus[g];
            self.record(CopyResult {
                kind: Kind::DeviceToDevice,
                path: format!("gpu{}", gpu.info.ordinal),
                size,
                seconds,
                per_iteration,
                wrong,
                limit: gpu.memory.clone(),
                transport: "memory".into(),
                device: format!("{} {}", gpu.info.name, gpu.info.bus_id),
            })?;
        }
        Ok(())
    }

    fn read_check(&self, buffer: &DeviceBuffer, n: usize) -> anyhow::Result<Option<u64>> {
        if !self.plan.check {
            return Ok(None);
        }
        let mut back = vec![0u8; n];
        buffer.read(0, &mut back)?;
        Ok(Some(count_wrong_bytes(&back)))
    }

    /// Copies from GPU `a` to GPU `b`, issued on `a`'s stream: direct when the two
    /// can reach each other (NVLink or PCIe peer to peer), else staged by the driver.
    fn peer_copies(&mut self, a: usize, b: usize) -> anyhow::Result<()> {
        let max = *self.plan.sizes.last().unwrap_or(&1) as usize;
        let (src_gpu, dst_gpu) = (&self.gpus[a], &self.gpus[b]);
        let (ctx, stream) = (src_gpu.ctx.clone(), src_gpu.stream.clone());
        let direct = enable_peer_access(src_gpu, dst_gpu)? && enable_peer_access(dst_gpu, src_gpu)?;
        let src = DeviceBuffer::zeroed(&ctx, max)?;
        let dst = DeviceBuffer::zeroed(&dst_gpu.ctx, max)?;
        src.write(0, &(0..max).map(pattern).collect::<Vec<u8>>())?;
        let bus_ids: Vec<String> = self.gpus.iter().map(|g| g.info.bus_id.clone()).collect();
        let nvlink = self
            .nvml
            .peer_limit(&src_gpu.info.bus_id, &dst_gpu.info.bus_id, &bus_ids);
        let (transport, limit) = match (direct, nvlink) {
            (true, Some(l)) => ("NVLink", Some(l)),
            (true, None) => ("PCIe P2P", pcie_pair_limit(src_gpu, dst_gpu)),
            (false, _) => ("staged through host", pcie_pair_limit(src_gpu, dst_gpu)),
        };
        let (src_ctx, dst_ctx) = (ctx.cu_ctx(), dst_gpu.ctx.cu_ctx());
        let path = format!("gpu{}->gpu{}", src_gpu.info.ordinal, dst_gpu.info.ordinal);
        let device = format!(
            "{} {} -> {} {}",
            src_gpu.info.name, src_gpu.info.bus_id, dst_gpu.info.name, dst_gpu.info.bus_id
        );
        for size in self.plan.sizes.clone() {
            let n = size as usize;
            dst.write(0, &vec![POISON; n])?;
            let cu_stream = stream.cu_stream();
            let (seconds, per_iteration) = time_copies(
                &ctx,
                &stream,
                self.plan.iters,
                self.plan.warmup_iters,
                || {
                    // SAFETY: both buffers hold n bytes and outlive the synchronised loop.
                    unsafe {
                        result::memcpy_peer_async(
                            dst_ctx,
                            dst.at(0),
                            src_ctx,
                            src.at(0),
                            n,
                            cu_stream,
                        )
                    }?;
                    Ok(())
                },
            )?;
            let wrong = self.read_check(&dst, n)?;
            self.record(CopyResult {
                kind: Kind::Peer,
                path: path.clone(),
                size,
                seconds,
                per_iteration,
                wrong,
                limit: limit.clone(),
                transport: transport.into(),
                device: device.clone(),
            })?;
        }
        Ok(())
    }
}

/// PCIe peer copies cross both GPUs' links: the slower bounds them.
fn pcie_pair_limit(a: &Gpu, b: &Gpu) -> Option<Limit> {
    match (&a.pcie, &b.pcie) {
        (Some(x), Some(y)) => limits::binding(&[x.clone(), y.clone()]).cloned(),
        _ => None,
    }
}

/// Lets `from` address `to`'s memory directly; false where the hardware cannot.
fn enable_peer_access(from: &Gpu, to: &Gpu) -> anyhow::Result<bool> {
    let mut can: std::ffi::c_int = 0;
    // SAFETY: writes one int for two valid devices.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, from.ctx.cu_device(), to.ctx.cu_device()) }
        .result()?;
    if can == 0 {
        return Ok(false);
    }
    from.ctx.bind_to_thread()?;
    // SAFETY: both contexts are live primary contexts.
    match unsafe { sys::cuCtxEnablePeerAccess(to.ctx.cu_ctx(), 0) } {
        sys::cudaError_enum::CUDA_SUCCESS
        | sys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(true),
        other => Err(anyhow::anyhow!(cudarc::driver::DriverError(other))).with_context(|| {
            format!(
                "enabling peer access from {} to {}",
                from.info.describe(),
                to.info.describe()
            )
        }),
    }
}

/// One CSV row, in the collectives' schema: the copy kind as `collective`, its
/// direction as `placement`, the limit it is compared with in the limit columns.
fn row(run: &RunInfo, r: &CopyResult, plan: &CopyPlan) -> Row {
    let h = histogram(&r.per_iteration);
    let m = Measurement {
        placement: Placement::OutOfPlace,
        time_us: r.seconds * 1e6,
        algbw_gbs: r.size as f64 / r.seconds / 1e9,
        busbw_gbs: r.gbs(),
        wrong: r.wrong,
        latency: IterStats::from_seconds(&r.per_iteration, &h),
        histogram: h,
        slowest_rank: 0,
        timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        cpu_us: None,
    };
    let result = SizeResult {
        collective: format!("copy_{}", r.kind.name()),
        datatype: "uint8".into(),
        redop: "none".into(),
        root: -1,
        size_bytes: r.size,
        count: r.size,
        busbw_factor: r.kind.traffic_factor(),
        cycle: 0,
        measurements: Vec::new(),
    };
    let mut row = Row::new(run, &result, &m);
    row.placement = r.path.clone();
    row.transport = r.transport.clone();
    row.device = r.device.clone();
    row.iters = plan.iters;
    row.set_limit(r.limit.as_ref());
    row
}

fn open_gpu(ordinal: usize, nvml: &NvmlFacts) -> anyhow::Result<Gpu> {
    let ctx = gpu::open(ordinal)?;
    let info = GpuInfo::of(&ctx)?;
    let stream = ctx.new_stream()?;
    let pcie = limits::pcie_state(Path::new(SYSFS_ROOT), &info.bus_id).map(|s| s.limit());
    let memory = nvml.memory_limit(&ctx, &info.bus_id);
    let numa_node = numa_node(&info.bus_id);
    Ok(Gpu {
        info,
        ctx,
        stream,
        pcie,
        memory,
        numa_node,
    })
}

fn driver_version() -> String {
    let mut v: std::ffi::c_int = 0;
    // SAFETY: writes one int; the driver is loaded (gpu::driver succeeded).
    match unsafe { sys::cuDriverGetVersion(&mut v) }.result() {
        Ok(()) => format!("CUDA driver API {}.{}", v / 1000, v % 1000 / 10),
        Err(_) => "CUDA driver".into(),
    }
}

fn run(args: &CopyArgs, plan: CopyPlan) -> anyhow::Result<u8> {
    let visible = gpu::driver().map_err(|e| anyhow::anyhow!("{e}; copy_bw measures GPU copies"))?;
    let ordinals = plan.gpus.clone().unwrap_or_else(|| (0..visible).collect());
    if let Some(bad) = ordinals.iter().find(|&&o| o >= visible) {
        bail!("--gpus {bad}: only {visible} GPUs are visible (numbered from 0)");
    }
    let nvml = NvmlFacts::open();
    let gpus = ordinals
        .iter()
        .map(|&o| open_gpu(o, &nvml))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let csv = args
        .csv
        .as_ref()
        .map(|p| CsvExport::open(p, args.append))
        .transpose()?;
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into());
    let stamp = chrono::Utc::now();
    let mut run = RunInfo {
        program: "copy_bw".into(),
        run_id: format!(
            "{}-{:05}",
            stamp.format("%Y%m%dT%H%M%SZ"),
            std::process::id() % 100_000
        ),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        backend: "cuda".into(),
        transport: String::new(),
        library_version: driver_version(),
        device: String::new(),
        hosts: vec![host],
        nranks: 1,
        env: std::env::vars()
            .filter(|(k, _)| k.starts_with("CUDA_"))
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        iters: plan.iters,
        warmup_iters: plan.warmup_iters,
        average: "avg".into(),
        checked: plan.check,
        notes: Vec::new(),
        backend_choice: "copy engines (cuMemcpyAsync)".into(),
        details: Vec::new(),
        launch: "stream".into(),
        report_cputime: false,
        ..RunInfo::default()
    };
    if !nvml.available() {
        run.notes.push(
            "NVML (libnvidia-ml.so.1) not available: NVLink limits unknown, memory limits from CUDA".into(),
        );
    }
    let mut session = Session {
        plan,
        gpus,
        nvml,
        run,
        table: CopyTable::new(std::io::stdout()),
        csv,
        results: Vec::new(),
    };
    let facts: Vec<String> = session.gpus.iter().map(table::describe_gpu).collect();
    session.table.start(&session.run, &facts)?;
    let kinds = session.plan.kinds.clone();
    for g in 0..session.gpus.len() {
        // Host memory near the GPU, as a well-placed application would use it.
        bind_near(&session.gpus[g].info.bus_id);
        for kind in [Kind::HostToDevice, Kind::DeviceToHost] {
            if kinds.contains(&kind) {
                session.host_copies(g, kind)?;
            }
        }
        if kinds.contains(&Kind::DeviceToDevice) {
            session.device_copies(g)?;
        }
    }
    if kinds.contains(&Kind::Peer) && session.gpus.len() > 1 {
        for a in 0..session.gpus.len() {
            for b in 0..session.gpus.len() {
                if a != b {
                    session.peer_copies(a, b)?;
                }
            }
        }
    }
    let wrong: u64 = session.results.iter().filter_map(|r| r.wrong).sum();
    session.table.finish(
        &session.run,
        &session.results,
        &session
            .gpus
            .iter()
            .map(|g| g.info.ordinal)
            .collect::<Vec<_>>(),
    )?;
    Ok(if wrong > 0 { 1 } else { 0 })
}

/// The `copy_bw` binary.
pub fn main() -> ExitCode {
    let args = match CopyArgs::try_parse() {
        Ok(a) => a,
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                e.exit()
            }
            _ => {
                let text = e.render().to_string();
                let first = text.lines().next().unwrap_or("invalid arguments");
                eprintln!(
                    "copy_bw: error: {} (see --help)",
                    first.trim_start_matches("error: ")
                );
                return ExitCode::from(2);
            }
        },
    };
    let plan = match args.plan() {
        Ok(p) => p,
        Err(msg) => {
            eprintln!("copy_bw: error: {msg}");
            return ExitCode::from(2);
        }
    };
    match run(&args, plan) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("copy_bw: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(args: &[&str]) -> Result<CopyPlan, String> {
        let mut argv = vec!["copy_bw"];
        argv.extend_from_slice(args);
        CopyArgs::try_parse_from(argv)
            .map_err(|e| e.to_string())?
            .plan()
    }

    #[test]
    fn default_sweep_and_tests() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.sizes.first(), Some(&(1 << 20)));
        assert_eq!(p.sizes.last(), Some(&(1 << 30)));
        assert_eq!(p.sizes.len(), 6);
        assert_eq!(p.kinds, Kind::ALL.to_vec());
        assert_eq!(p.gpus, None);
    }

    #[test]
    fn bad_input_names_the_flag() {
        assert!(plan(&["--tests", "h2d,x2y"])
            .unwrap_err()
            .starts_with("--tests x2y"));
        assert!(plan(&["-b", "2G", "-e", "1G"])
            .unwrap_err()
            .starts_with("-b/--minbytes"));
        assert!(plan(&["-f", "1"])
            .unwrap_err()
            .starts_with("-f/--stepfactor 1"));
        assert!(plan(&["-n", "0"]).unwrap_err().starts_with("-n/--iters 0"));
        assert_eq!(plan(&["--gpus", "0,2"]).unwrap().gpus, Some(vec![0, 2]));
    }

    #[test]
    fn copies_are_checked_byte_for_byte() {
        let good: Vec<u8> = (0..1000).map(pattern).collect();
        assert_eq!(count_wrong_bytes(&good), 0);
        // A copy shifted by one byte, or not done at all, is caught.
        assert_eq!(count_wrong_bytes(&good[1..]), 999);
        assert_eq!(count_wrong_bytes(&[POISON; 10]), 10);
    }

    #[test]
    fn device_copies_count_read_and_write_traffic() {
        let r = CopyResult {
            kind: Kind::DeviceToDevice,
            path: "gpu0".into(),
            size: 1_000_000_000,
            seconds: 0.5,
            per_iteration: vec![0.5],
            wrong: Some(0),
            limit: Some(Limit {
                name: "memory".into(),
                gbs: 5000.0,
            }),
            transport: "memory".into(),
            device: "GPU".into(),
        };
        assert_eq!(r.gbs(), 4.0);
        assert_eq!(r.pct_of_limit(), Some(0.08));
        let h2d = CopyResult {
            kind: Kind::HostToDevice,
            limit: None,
            ..r
        };
        assert_eq!(h2d.gbs(), 2.0);
        assert_eq!(h2d.pct_of_limit(), None);
    }
}
