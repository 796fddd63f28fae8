//! One MPI collective call with every argument resolved: what the mpi backend's
//! methods issue, and what its timed loop repeats. Resolving once and issuing many
//! times keeps the timed loop at the library call, as a bare C loop of it is.

use super::mpi_ops::check;
use mpi::ffi;
use std::os::raw::{c_int, c_void};

type Datatype = ffi::MPI_Datatype;
type Op = ffi::MPI_Op;

/// A call's buffers, count and datatype. The pointers lie in the backend's buffers
/// (or are MPI_IN_PLACE) and the handle is the backend's: valid for as long as its
/// buffers are not reallocated.
#[derive(Clone, Copy)]
pub(super) struct Xfer {
    pub send: *const c_void,
    pub recv: *mut c_void,
    pub n: c_int,
    pub dt: Datatype,
}

/// One call: its buffers, and its op, root or peers.
#[derive(Clone, Copy)]
pub(super) enum MpiCall {
    Allreduce(Xfer, Op),
    Allgather(Xfer),
    /// The one buffer is `recv` (the root's send buffer out of place).
    Bcast(Xfer, c_int),
    Reduce(Xfer, Op, c_int),
    /// The count is one per rank: `counts` (the backend's `scatter_counts`).
    ReduceScatter(Xfer, *const c_int, Op),
    Alltoall(Xfer),
    Gather(Xfer, c_int),
    Scatter(Xfer, c_int),
    /// To and from: the next and the previous rank.
    Sendrecv(Xfer, c_int, c_int),
    /// In place: the one buffer is `recv`.
    SendrecvReplace(Xfer, c_int, c_int),
}

impl MpiCall {
    /// Issues the call on `comm`.
    ///
    /// # Safety
    /// The buffers the call names are still allocated and hold what its counts say.
    #[inline(always)]
    pub(super) unsafe fn issue(&self, comm: ffi::MPI_Comm) -> anyhow::Result<()> {
        let ignore = ffi::RSMPI_STATUS_IGNORE;
        match *self {
            MpiCall::Allreduce(Xfer { send, recv, n, dt }, op) => check(
                ffi::MPI_Allreduce(send, recv, n, dt, op, comm),
                "MPI_Allreduce",
            ),
            MpiCall::Allgather(Xfer { send, recv, n, dt }) => check(
                ffi::MPI_Allgather(send, n, dt, recv, n, dt, comm),
                "MPI_Allgather",
            ),
            MpiCall::Bcast(Xfer { recv, n, dt, .. }, root) => {
                check(ffi::MPI_Bcast(recv, n, dt, root, comm), "MPI_Bcast")
            }
            MpiCall::Reduce(Xfer { send, recv, n, dt }, op, root) => check(
                ffi::MPI_Reduce(send, recv, n, dt, op, root, comm),
                "MPI_Reduce",
            ),
            MpiCall::ReduceScatter(Xfer { send, recv, dt, .. }, counts, op) => check(
                ffi::MPI_Reduce_scatter(send, recv, counts, dt, op, comm),
                "MPI_Reduce_scatter",
            ),
            MpiCall::Alltoall(Xfer { send, recv, n, dt }) => check(
                ffi::MPI_Alltoall(send, n, dt, recv, n, dt, comm),
                "MPI_Alltoall",
            ),
            MpiCall::Gather(Xfer { send, recv, n, dt }, root) => check(
                ffi::MPI_Gather(send, n, dt, recv, n, dt, root, comm),
                "MPI_Gather",
            ),
            MpiCall::Scatter(Xfer { send, recv, n, dt }, root) => check(
                ffi::MPI_Scatter(send, n, dt, recv, n, dt, root, comm),
                "MPI_Scatter",
            ),
            MpiCall::Sendrecv(Xfer { send, recv, n, dt }, to, from) => check(
                ffi::MPI_Sendrecv(send, n, dt, to, 0, recv, n, dt, from, 0, comm, ignore),
                "MPI_Sendrecv",
            ),
            MpiCall::SendrecvReplace(Xfer { recv, n, dt, .. }, to, from) => check(
                ffi::MPI_Sendrecv_replace(recv, n, dt, to, 0, from, 0, comm, ignore),
                "MPI_Sendrecv_replace",
            ),
        }
    }
}

/// What the backend does with the calls its methods resolve.
#[derive(Clone, Copy, Default)]
pub(super) enum Binding {
    /// Issue them (every call outside `begin_bind`..`end_bind`).
    #[default]
    Off,
    /// Capture the next one instead of issuing it.
    Armed,
    /// One call captured, repeatable as it is.
    One(MpiCall),
    /// Nothing repeatable: several calls, or one with work around it (a copy, a
    /// division, a scaling) that the repeat would leave out.
    Refused,
}

impl Binding {
    /// A method's call while capturing: kept if it is the first and `bare` (nothing
    /// around it), else the capture is refused.
    pub(super) fn capture(&mut self, call: MpiCall, bare: bool) {
        *self = match self {
            Binding::Armed if bare => Binding::One(call),
            _ => Binding::Refused,
        };
    }

    pub(super) fn capturing(&self) -> bool {
        !matches!(self, Binding::Off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a_call() -> MpiCall {
        // Never issued: only the binding's bookkeeping is under test.
        let xfer = Xfer {
            send: std::ptr::null(),
            recv: std::ptr::null_mut(),
            n: 1,
            // SAFETY: reading rsmpi's exported handle (a constant).
            dt: unsafe { ffi::RSMPI_UINT8_T },
        };
        MpiCall::Bcast(xfer, 0)
    }

    #[test]
    fn only_one_bare_call_binds() {
        let mut binding = Binding::Armed;
        binding.capture(a_call(), true);
        assert!(matches!(binding, Binding::One(_)));
        // A second call: the loop would repeat only one of them.
        binding.capture(a_call(), true);
        assert!(matches!(binding, Binding::Refused));

        // Work around the call (a copy, a division) that a repeat would leave out.
        let mut binding = Binding::Armed;
        binding.capture(a_call(), false);
        assert!(matches!(binding, Binding::Refused));
        assert!(binding.capturing());
        assert!(!Binding::Off.capturing());
    }
}
