//! The mpi backend's pieces around MPI's calls: error codes and int counts, the
//! datatype and reduction handles, reductions of the narrow floats (half, bfloat16 and the two
//! 8-bit floats) as user-defined ops computed in f32, as GPUs compute them, and
//! alltoallv's count and displacement arrays.

use super::OpArgs;
use crate::datatype::{DataType, RedOp, F8E4M3, F8E5M2};
use crate::job::world::World;
use half::{bf16, f16};
use mpi::ffi;
use mpi::raw::AsRaw;
use std::os::raw::{c_int, c_void};

// The checks run around every timed call: the error is built out of line, so that the
// common path is a compare and a branch.
#[inline]
pub(super) fn check(code: c_int, call: &str) -> anyhow::Result<()> {
    if code != 0 {
        return Err(failed(call, code));
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn failed(call: &str, code: c_int) -> anyhow::Error {
    anyhow::anyhow!("{call} failed with MPI error {code}")
}

pub(super) fn mpi_datatype(dtype: DataType) -> ffi::MPI_Datatype {
    // SAFETY: reading rsmpi's exported handles, constant after MPI_Init.
    unsafe {
        match dtype {
            DataType::Int8 => ffi::RSMPI_INT8_T,
            // 8-bit floats travel as bytes; their reductions are user ops.
            DataType::Uint8 | DataType::F8e4m3 | DataType::F8e5m2 => ffi::RSMPI_UINT8_T,
            DataType::Int32 => ffi::RSMPI_INT32_T,
            DataType::Uint32 => ffi::RSMPI_UINT32_T,
            DataType::Int64 => ffi::RSMPI_INT64_T,
            DataType::Uint64 => ffi::RSMPI_UINT64_T,
            // 16-bit floats travel as 16-bit words; their reductions are user ops.
            DataType::Half | DataType::Bfloat16 => ffi::RSMPI_UINT16_T,
            DataType::Float => ffi::RSMPI_FLOAT,
            DataType::Double => ffi::RSMPI_DOUBLE,
        }
    }
}

#[inline]
pub(super) fn count(args: &OpArgs) -> anyhow::Result<c_int> {
    c_int::try_from(args.count).map_err(|_| too_many(args.count))
}

#[cold]
#[inline(never)]
fn too_many(count: usize) -> anyhow::Error {
    anyhow::anyhow!(
        "{count} elements exceed MPI's int count limit (2^31-1): lower -e/--maxbytes or use a wider -d/--datatype"
    )
}

/// 16- and 8-bit floats reduced in f32, as GPUs do.
pub(super) trait Float16: Copy {
    fn widen(self) -> f32;
    fn narrow(v: f32) -> Self;
}
impl Float16 for f16 {
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(v: f32) -> Self {
        f16::from_f32(v)
    }
}
impl Float16 for bf16 {
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(v: f32) -> Self {
        bf16::from_f32(v)
    }
}

impl Float16 for F8E4M3 {
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(v: f32) -> Self {
        F8E4M3::from_f32(v)
    }
}
impl Float16 for F8E5M2 {
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(v: f32) -> Self {
        F8E5M2::from_f32(v)
    }
}

const OP_SUM: u8 = 0;
const OP_PROD: u8 = 1;
const OP_MAX: u8 = 2;
const OP_MIN: u8 = 3;

unsafe extern "C" fn reduce_float16<T: Float16, const OP: u8>(
    invec: *mut c_void,
    inoutvec: *mut c_void,
    len: *mut c_int,
    _datatype: *mut ffi::MPI_Datatype,
) {
    let n = *len as usize;
    let input = std::slice::from_raw_parts(invec as *const T, n);
    let inout = std::slice::from_raw_parts_mut(inoutvec as *mut T, n);
    for (a, b) in input.iter().zip(inout.iter_mut()) {
        let (x, y) = (a.widen(), b.widen());
        *b = T::narrow(match OP {
            OP_SUM => x + y,
            OP_PROD => x * y,
            OP_MAX => x.max(y),
            _ => x.min(y),
        });
    }
}

fn create_op(f: ffi::MPI_User_function) -> anyhow::Result<ffi::MPI_Op> {
    let mut op = std::mem::MaybeUninit::<ffi::MPI_Op>::uninit();
    // SAFETY: MPI_Op_create writes the handle; the function is a valid reduction.
    check(
        unsafe { ffi::MPI_Op_create(f, 1, op.as_mut_ptr()) },
        "MPI_Op_create",
    )?;
    Ok(unsafe { op.assume_init() })
}

pub(super) fn float16_ops<T: Float16>() -> anyhow::Result<[ffi::MPI_Op; 4]> {
    Ok([
        create_op(Some(reduce_float16::<T, OP_SUM>))?,
        create_op(Some(reduce_float16::<T, OP_PROD>))?,
        create_op(Some(reduce_float16::<T, OP_MAX>))?,
        create_op(Some(reduce_float16::<T, OP_MIN>))?,
    ])
}

/// MPI_Comm_split of the world by `color`, keyed by world rank: the new
/// communicator, this rank in it, and its size.
pub(super) fn split(world: &World, color: c_int) -> anyhow::Result<(ffi::MPI_Comm, usize, usize)> {
    let (mut comm, mut rank, mut size) = (std::mem::MaybeUninit::uninit(), 0, 0);
    // SAFETY: the world is a valid communicator; every rank calls this at open.
    unsafe {
        let key = world.rank as c_int;
        check(
            ffi::MPI_Comm_split(world.comm.as_raw(), color, key, comm.as_mut_ptr()),
            "MPI_Comm_split",
        )?;
        let comm = comm.assume_init();
        check(ffi::MPI_Comm_rank(comm, &mut rank), "MPI_Comm_rank")?;
        check(ffi::MPI_Comm_size(comm, &mut size), "MPI_Comm_size")?;
        Ok((comm, rank as usize, size as usize))
    }
}

/// MPI_Alltoallv with the arrays `v_counts` filled.
///
/// # Safety
/// `v` describes regions inside the buffers at `send` and `recv`; `comm` is valid.
pub(super) unsafe fn alltoallv(
    send: *const c_void,
    recv: *mut c_void,
    v: &[c_int],
    dt: ffi::MPI_Datatype,
    comm: ffi::MPI_Comm,
) -> anyhow::Result<()> {
    let (p, n) = (v.as_ptr(), v.len() / 4);
    let code = ffi::MPI_Alltoallv(
        send,
        p,
        p.add(n),
        dt,
        recv,
        p.add(2 * n),
        p.add(3 * n),
        dt,
        comm,
    );
    check(code, "MPI_Alltoallv")
}

/// MPI_Sendrecv of `n` elements each way with `peer` (status ignored).
///
/// # Safety
/// Both regions hold `n` elements; `comm` is valid.
pub(super) unsafe fn sendrecv(
    send: *mut c_void,
    recv: *mut c_void,
    n: c_int,
    dt: ffi::MPI_Datatype,
    peer: usize,
    comm: ffi::MPI_Comm,
) -> anyhow::Result<()> {
    let peer = peer as c_int;
    let status = ffi::RSMPI_STATUS_IGNORE;
    let code = ffi::MPI_Sendrecv(send, n, dt, peer, 1, recv, n, dt, peer, 1, comm, status);
    check(code, "MPI_Sendrecv")
}

/// Fills `v` (send counts, send displacements, receive counts, receive
/// displacements, n each) for `rank`, where `peer(from, to)` elements go from rank
/// `from` to rank `to`; returns the elements this rank sends.
pub(super) fn v_counts(
    v: &mut [c_int],
    rank: usize,
    peer: &dyn Fn(usize, usize) -> usize,
) -> anyhow::Result<usize> {
    let n = v.len() / 4;
    let int = |v: usize| {
        c_int::try_from(v).map_err(|_| {
            anyhow::anyhow!("alltoallv: {v} elements exceed MPI's int count limit (2^31-1); lower -e/--maxbytes")
        })
    };
    let (mut sent, mut received) = (0usize, 0usize);
    for p in 0..n {
        let (s, r) = (peer(rank, p), peer(p, rank));
        v[p] = int(s)?;
        v[n + p] = int(sent)?;
        v[2 * n + p] = int(r)?;
        v[3 * n + p] = int(received)?;
        sent += s;
        received += r;
    }
    Ok(sent)
}

/// The MPI reduction of `op` on `dtype`: MPI's own, or for the narrow floats one of
/// `half_ops` ([half|bf16|f8e4m3|f8e5m2][sum|prod|max|min]).
pub(super) fn mpi_op(half_ops: &[[ffi::MPI_Op; 4]; 4], dtype: DataType, op: RedOp) -> ffi::MPI_Op {
    let index = match op {
        // mulsum: `premultiply` has scaled this rank's input; the rest is a sum.
        RedOp::Sum | RedOp::Avg | RedOp::Mulsum => OP_SUM,
        RedOp::Prod => OP_PROD,
        RedOp::Max => OP_MAX,
        RedOp::Min => OP_MIN,
    } as usize;
    match dtype {
        DataType::Half => half_ops[0][index],
        DataType::Bfloat16 => half_ops[1][index],
        DataType::F8e4m3 => half_ops[2][index],
        DataType::F8e5m2 => half_ops[3][index],
        // SAFETY: reading rsmpi's exported handles.
        _ => unsafe {
            [
                ffi::RSMPI_SUM,
                ffi::RSMPI_PROD,
                ffi::RSMPI_MAX,
                ffi::RSMPI_MIN,
            ][index]
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alltoallv_counts_and_displacements() {
        let mut v = vec![0; 12];
        // 3 ranks, from i to j: 10 * i + j elements; rank 1's view.
        let sent = v_counts(&mut v, 1, &|i, j| 10 * i + j).unwrap();
        assert_eq!(sent, 10 + 11 + 12);
        assert_eq!(v, [10, 11, 12, 0, 10, 21, 1, 11, 21, 0, 1, 12]);
    }
}
