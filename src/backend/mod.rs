//! Where the collectives run. A backend owns one send and one receive buffer per
//! rank (allocated once for the largest size, as nccl-tests does), issues the nine
//! calls on them, and times loops of calls with its own clock (host clock for MPI,
//! stream events for NCCL).

pub mod mpi;

use crate::datatype::{DataType, RedOp};

/// One of the two buffers a backend holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Send,
    Recv,
}

/// A place in a backend buffer: which buffer and a byte offset into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufRef {
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

/// What a backend says about itself, for the header and the CSV.
#[derive(Clone, Debug, Default)]
pub struct BackendInfo {
    /// "mpi" or "nccl".
    pub name: String,
    /// The transport actually used, as far as the backend can tell.
    pub transport: String,
    /// MPI or NCCL library version.
    pub library_version: String,
    /// What holds the buffers on this rank: "host" or a GPU's name and bus id.
    pub device: String,
}

pub trait Backend {
    fn info(&self) -> BackendInfo;
    /// Bytes this rank may still allocate for buffers, when the backend can tell.
    fn memory_available(&self) -> Option<u64>;
    /// Allocates the two buffers; called once with the largest sizes of the sweep.
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

    /// Waits until every issued call has completed on this rank.
    fn synchronize(&mut self) -> anyhow::Result<()>;
    /// Prepares `iterations` timed calls and takes the starting timestamp. Must not
    /// allocate later: `mark` runs inside the timed loop.
    fn timer_start(&mut self, iterations: usize) -> anyhow::Result<()>;
    /// Takes a timestamp after the call just issued.
    fn mark(&mut self);
    /// After `synchronize`: seconds of each timed call into `per_iteration`, and
    /// the seconds of the whole loop as the return value.
    fn timer_read(&mut self, per_iteration: &mut [f64]) -> anyhow::Result<f64>;
}
