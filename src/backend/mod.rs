//! Where the collectives run. A backend owns one send and one receive buffer per
//! rank (allocated once for the largest size, as nccl-tests does), issues the
//! collective calls on them (one per `CollectiveId` but hypercube, which is built,
//! like all-pairs, from the pairwise `exchange`), and times loops of calls with its
//! own clock (host clock for MPI, stream events for NCCL). A process drives one
//! rank, or with `-g N` (nccl) N ranks on N GPUs, whose calls the driver brackets
//! with `group_start`/`group_end`.
//! The `loopback` backend (unit tests only) is one rank in host memory.

mod host_clock;
#[cfg(test)]
pub mod loopback;
pub mod mpi;
mod mpi_call;
mod mpi_ops;
mod mpi_transport;
pub mod nccl;

use crate::datatype::{DataType, RedOp};
use crate::job::UsageError;
use crate::report::facts::{Location, RunBackend};
use crate::watchdog::CallCount;
use serde::{Deserialize, Serialize};

pub use host_clock::{HostClock, TickSource, Ticks};

/// Which backend runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Host memory and the MPI library's collectives.
    #[default]
    Mpi,
    /// GPU memory and NCCL's collectives.
    Nccl,
}

impl BackendKind {
    /// The name in the header and the CSV `backend` column.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Mpi => "mpi",
            BackendKind::Nccl => "nccl",
        }
    }
}

impl From<BackendKind> for RunBackend {
    fn from(kind: BackendKind) -> RunBackend {
        match kind {
            BackendKind::Mpi => RunBackend::Mpi,
            BackendKind::Nccl => RunBackend::Nccl,
        }
    }
}

/// The collective calls a backend offers (one collective binary each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectiveId {
    AllReduce,
    AllGather,
    Broadcast,
    Reduce,
    ReduceScatter,
    AlltoAll,
    Gather,
    Scatter,
    SendRecv,
    AlltoAllv,
    HyperCube,
}

impl CollectiveId {
    /// The CSV `collective` column and the binary's stem: "all_reduce".
    pub fn as_str(self) -> &'static str {
        match self {
            CollectiveId::AllReduce => "all_reduce",
            CollectiveId::AllGather => "all_gather",
            CollectiveId::Broadcast => "broadcast",
            CollectiveId::Reduce => "reduce",
            CollectiveId::ReduceScatter => "reduce_scatter",
            CollectiveId::AlltoAll => "alltoall",
            CollectiveId::Gather => "gather",
            CollectiveId::Scatter => "scatter",
            CollectiveId::SendRecv => "sendrecv",
            CollectiveId::AlltoAllv => "alltoallv",
            CollectiveId::HyperCube => "hypercube",
        }
    }
}

/// One of the two buffers a backend holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Send,
    Recv,
}

/// A place in a backend buffer: which of this process's ranks (0 unless `-g`),
/// which buffer, and a byte offset into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufRef {
    pub device: usize,
    pub slot: Slot,
    pub offset: usize,
}

/// The arguments of one collective call, in the library's terms (counts in elements).
#[derive(Clone, Copy, Debug)]
pub struct OpArgs {
    pub send: BufRef,
    pub recv: BufRef,
    pub count: usize,
    pub dtype: DataType,
    pub op: RedOp,
    pub root: usize,
    /// Send and receive data share the receive buffer, laid out as nccl-tests lays them.
    pub in_place: bool,
}

/// What holds one rank's buffers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RankDevice {
    /// GPU number (the node-local rank for host memory), as nccl-tests prints it.
    pub ordinal: usize,
    pub location: Location,
    /// "NVIDIA H200", or the MPI library for host memory.
    pub name: String,
}

/// What a backend says about itself on one process, for the header and the CSV.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BackendInfo {
    pub kind: BackendKind,
    /// The transport actually used, as far as the backend can tell.
    pub transport: String,
    /// MPI or NCCL library version.
    pub library_version: String,
    /// One entry per rank this process drives.
    pub devices: Vec<RankDevice>,
    /// How the calls are made, for the header: "AlltoAll, Gather, Scatter: ncclAlltoAll...".
    pub notes: Vec<String>,
    /// Misconfigurations found (a multi-node run on TCP sockets): printed loudly.
    pub warnings: Vec<String>,
}

/// Memory a rank may use for its two buffers.
#[derive(Clone, Debug)]
pub struct MemoryBudget {
    pub bytes: u64,
    /// What it is: "host memory shared by 4 ranks", "free memory of GPU 0".
    pub what: String,
}

/// The host memory each of `sharers` processes of this node may use: an equal
/// share of MemAvailable (None when /proc/meminfo cannot tell).
pub fn host_memory(sharers: usize) -> Option<MemoryBudget> {
    let meminfo = crate::sysfs::Root::new("/").read("/proc/meminfo")?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    let sharers = sharers.max(1);
    Some(MemoryBudget {
        bytes: kib * 1024 / sharers as u64,
        what: match sharers {
            1 => "this host's MemAvailable".to_string(),
            _ => format!(
                "{} of available host memory shared by {sharers} ranks on this node",
                crate::sizes::human_bytes(kib * 1024)
            ),
        },
    })
}

/// -M on host memory: this process's resident set now (VmRSS), None when
/// /proc/self/status cannot tell.
pub fn resident_bytes() -> Option<u64> {
    let status = crate::sysfs::Root::new("/").read("/proc/self/status")?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub trait Backend {
    fn info(&self) -> BackendInfo;
    /// Ranks this process drives (`-g`); buffer references name them 0..devices().
    fn devices(&self) -> usize {
        1
    }
    /// Memory each of this process's ranks may still allocate, when the backend can tell.
    fn memory_available(&self) -> Option<MemoryBudget>;
    /// Allocates the two buffers of every rank; called once with the largest sizes.
    fn alloc(&mut self, send_bytes: usize, recv_bytes: usize) -> anyhow::Result<()>;
    fn write(&mut self, at: BufRef, data: &[u8]) -> anyhow::Result<()>;
    fn read(&mut self, at: BufRef, out: &mut [u8]) -> anyhow::Result<()>;

    fn all_reduce(&mut self, args: &OpArgs) -> anyhow::Result<()>;
    fn all_gather(&mut self, args: &OpArgs) -> anyhow::Result<()>;
    fn broadcast(&mut self, args: &OpArgs) -> anyhow::Result<()>;
    fn reduce(&mut self, args: &OpArgs) -> anyhow::Result<()>;
    fn reduce_scatter(&mut self, args: &OpArgs) -> anyhow::Result<()>;
    fn alltoall(&mut self, args: &OpArgs) -> anyhow::Result<()>;
    fn gather(&mut self, args: &OpArgs) -> anyhow::Result<()>;
    fn scatter(&mut self, args: &OpArgs) -> anyhow::Result<()>;
    fn sendrecv(&mut self, args: &OpArgs) -> anyhow::Result<()>;
    /// nccl-tests' alltoallv: `peer(from, to)` elements go from rank `from` to rank
    /// `to`; each rank's send and receive segments lie back to back in rank order
    /// from `args.send` and `args.recv` (`args.count` is unused).
    fn alltoallv(
        &mut self,
        args: &OpArgs,
        peer: &dyn Fn(usize, usize) -> usize,
    ) -> anyhow::Result<()>;
    /// Sends `args.count` elements at `args.send` to `peer` and receives as many from
    /// it into `args.recv`, both at once (hypercube steps, all-pairs exchanges).
    fn exchange(&mut self, args: &OpArgs, peer: usize) -> anyhow::Result<()>;
    /// Copies `bytes` within one rank's buffers (ordered with its calls).
    fn copy(&mut self, from: BufRef, to: BufRef, bytes: usize) -> anyhow::Result<()>;
    /// The job-wide rank of this process's rank `device`, and the job's rank count.
    fn rank_of(&self, device: usize) -> usize;
    fn nranks(&self) -> usize;

    /// The timed loop's fast path for one call back to back: the calls that follow
    /// are captured, not issued, until `end_bind`. False where the backend has none.
    fn begin_bind(&mut self) -> bool {
        false
    }
    /// Ends the capture: true when it holds one call `run_bound` can repeat as it is
    /// (nothing else to do around it), false otherwise (nothing was issued).
    fn end_bind(&mut self) -> bool {
        false
    }
    /// `iterations` issues of the bound call, each after a bump of `calls` (the
    /// watchdog's view): back to back, each followed by a mark (`Marks::Chained`) or
    /// none (`Marks::Whole`: the caller marks the end), or with `between` each marked
    /// before and after and `between` run outside the marks (`Marks::Paired`: -z 3's
    /// barrier).
    fn run_bound(
        &mut self,
        _iterations: usize,
        _calls: &CallCount,
        _between: Option<&dyn Fn()>,
    ) -> anyhow::Result<()> {
        anyhow::bail!("this backend binds no call")
    }
    /// mulsum where the library has no PreMulSum (called for mulsum only): multiplies
    /// this rank's `elements` send elements by its scalar before the sum (NCCL's op
    /// does it itself).
    fn premultiply(&mut self, _args: &OpArgs, _elements: usize) -> anyhow::Result<()> {
        Ok(())
    }
    /// Whether this backend runs `dtype` (NCCL: by library version and GPU); Err is
    /// the one line saying why not and what to use instead.
    fn supports_datatype(&self, _dtype: DataType) -> Result<(), UsageError> {
        Ok(())
    }
    /// As `supports_datatype`, for `op`.
    fn supports_op(&self, _op: RedOp) -> Result<(), UsageError> {
        Ok(())
    }

    /// Brackets the calls of one collective over this process's ranks (`-g`).
    fn group_start(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
    fn group_end(&mut self) -> anyhow::Result<()> {
        Ok(())
    }

    /// Whether the in-place form of `collective` has defined results that `-c` can
    /// check (nccl-tests does not check in-place alltoall and sendrecv on NCCL,
    /// where send and receive regions overlap).
    fn checks_in_place(&self, _collective: CollectiveId) -> bool {
        true
    }
    /// Relative error the library's arithmetic may leave on exact data (NCCL's avg
    /// of floating-point types multiplies by a rounded 1/n); 0 means exact.
    fn tolerance(&self, _dtype: DataType, _op: RedOp, _nranks: usize) -> f64 {
        0.0
    }

    /// NCCL's algorithm and protocol for the timed calls since the last ask (the
    /// most frequent), where the library logs them; None elsewhere.
    fn tuning(&mut self) -> Option<(String, String)> {
        None
    }
    /// -M: bytes in use now on each of this process's devices (GPU memory; for
    /// host memory, the process's resident set).
    fn memory_in_use(&self) -> Vec<u64> {
        Vec::new()
    }
    /// -M: the same before the library initialised (NCCL's communicators); None
    /// where it was initialised before the backend opened (MPI).
    fn memory_before_init(&self) -> Option<Vec<u64>> {
        None
    }

    /// Waits until every issued call has completed on this rank.
    fn synchronize(&mut self) -> anyhow::Result<()>;

    /// `-G`: the calls that follow, with their `mark`s, are captured (not run) until
    /// `end_capture`; `replay` then runs them `launches` times.
    fn begin_capture(&mut self) -> anyhow::Result<()> {
        anyhow::bail!("-G/--cudagraph: CUDA graphs need --backend nccl")
    }
    fn end_capture(&mut self) -> anyhow::Result<()> {
        anyhow::bail!("-G/--cudagraph: CUDA graphs need --backend nccl")
    }
    fn replay(&mut self, _launches: usize) -> anyhow::Result<()> {
        anyhow::bail!("-G/--cudagraph: CUDA graphs need --backend nccl")
    }

    /// Prepares `iterations` timed iterations marked as `marks` says, and takes the
    /// starting timestamp of `Marks::Chained` and `Marks::Whole`. Must not allocate
    /// later: `mark` runs inside the timed loop.
    fn timer_start(&mut self, iterations: usize, marks: Marks) -> anyhow::Result<()>;
    /// Takes a timestamp after the work just issued.
    fn mark(&mut self);
    /// Whether `mark` reads the host's clock after calls that have completed (so the
    /// timed time is CPU time too), not a device's.
    fn marks_host_time(&self) -> bool {
        false
    }
    /// After `synchronize`: seconds of each timed iteration into `per_iteration`, and
    /// the timed seconds of the whole loop as the return value (with `-G`: of all
    /// replays, and per-iteration times from the last replay).
    fn timer_read(&mut self, per_iteration: &mut [f64]) -> anyhow::Result<f64>;
}

/// Where the timed loop takes its timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marks {
    /// One before the loop and one after each iteration: the loop is timed whole.
    Chained,
    /// One before and one after each iteration: what runs between iterations (the
    /// barrier of `-z 3`) is not timed.
    Paired,
    /// One before the loop and one after it, none between calls (`--percentiles 0`,
    /// nccl-tests' own way): no per-iteration times, no clock read in the loop.
    Whole,
}

impl Marks {
    /// Timestamps `iterations` iterations take.
    pub fn count(self, iterations: usize) -> usize {
        match self {
            Marks::Chained => iterations + 1,
            Marks::Paired => 2 * iterations,
            Marks::Whole => 2,
        }
    }

    /// Whether a mark follows every call (else only the loop's end is marked).
    pub fn each_call(self) -> bool {
        self != Marks::Whole
    }

    /// Each iteration's seconds into `per_iteration` and the timed seconds of the
    /// loop, from `taken` timestamps and the seconds `elapsed(i, j)` between two.
    pub fn read(
        self,
        taken: usize,
        per_iteration: &mut [f64],
        mut elapsed: impl FnMut(usize, usize) -> anyhow::Result<f64>,
    ) -> anyhow::Result<f64> {
        let (iterations, bounds): (usize, fn(usize) -> (usize, usize)) = match self {
            Marks::Chained => (taken.saturating_sub(1), |k| (k, k + 1)),
            Marks::Paired => (taken / 2, |k| (2 * k, 2 * k + 1)),
            Marks::Whole => (0, |k| (k, k + 1)),
        };
        let mut sum = 0.0;
        for (k, slot) in per_iteration.iter_mut().enumerate().take(iterations) {
            let (from, to) = bounds(k);
            *slot = elapsed(from, to)?;
            sum += *slot;
        }
        match self {
            Marks::Chained | Marks::Whole if taken > 0 => elapsed(0, taken - 1),
            Marks::Chained | Marks::Whole => Ok(0.0),
            Marks::Paired => Ok(sum),
        }
    }
}
