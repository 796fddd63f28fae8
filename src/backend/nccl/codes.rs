//! NCCL's type and op codes (nccl.h), and how far its avg may round.

use super::options::CTA_POLICY_NAMES;
use crate::datatype::{DataType, RedOp};
use crate::gpu::nccl_lib::abi::{self, AbiFact};
use cudarc::nccl::sys::{ncclDataType_t, ncclRedOp_t};

pub(super) fn nccl_type(dtype: DataType) -> ncclDataType_t {
    match dtype {
        DataType::Int8 => ncclDataType_t::ncclInt8,
        DataType::Uint8 => ncclDataType_t::ncclUint8,
        DataType::Int32 => ncclDataType_t::ncclInt32,
        DataType::Uint32 => ncclDataType_t::ncclUint32,
        DataType::Int64 => ncclDataType_t::ncclInt64,
        DataType::Uint64 => ncclDataType_t::ncclUint64,
        DataType::Half => ncclDataType_t::ncclFloat16,
        DataType::Float => ncclDataType_t::ncclFloat32,
        DataType::Double => ncclDataType_t::ncclFloat64,
        DataType::Bfloat16 => ncclDataType_t::ncclBfloat16,
        DataType::F8e4m3 => ncclDataType_t::ncclFloat8e4m3,
        DataType::F8e5m2 => ncclDataType_t::ncclFloat8e5m2,
    }
}

/// The op code; mulsum's PreMulSum op is created per communicator (`NcclBackend::op`).
pub(super) fn nccl_op(op: RedOp) -> ncclRedOp_t {
    match op {
        RedOp::Sum => ncclRedOp_t::ncclSum,
        RedOp::Prod => ncclRedOp_t::ncclProd,
        RedOp::Max => ncclRedOp_t::ncclMax,
        RedOp::Min => ncclRedOp_t::ncclMin,
        RedOp::Avg => ncclRedOp_t::ncclAvg,
        RedOp::Mulsum => ncclRedOp_t::ncclNumOps,
    }
}

/// Every fact fabricbench assumes of nccl.h (see `gpu::nccl_lib::abi`): those of
/// the library layer, then the type and op codes passed for each datatype and op
/// (cudarc's enumerators are spelled as nccl.h's), and the CTA policies -x sets.
pub fn abi_facts() -> Vec<AbiFact> {
    let mut facts = abi::facts();
    let enumerator = |code: &dyn std::fmt::Debug, value: u32| {
        AbiFact::constant(&format!("{code:?}"), value.into())
    };
    for t in DataType::ALL {
        facts.push(enumerator(&nccl_type(t), nccl_type(t) as u32));
    }
    for o in RedOp::ALL {
        facts.push(enumerator(&nccl_op(o), nccl_op(o) as u32));
    }
    for (value, name) in CTA_POLICY_NAMES.iter().enumerate() {
        facts.push(AbiFact::constant(
            &format!("NCCL_CTA_POLICY_{name}"),
            value as i64,
        ));
    }
    facts
}

/// Mantissa precision of a floating-point type: its unit roundoff is 2^-bits.
fn mantissa_bits(dtype: DataType) -> Option<i32> {
    match dtype {
        DataType::Half => Some(11),
        DataType::Bfloat16 => Some(8),
        DataType::Float => Some(24),
        DataType::Double => Some(53),
        DataType::F8e4m3 => Some(4),
        DataType::F8e5m2 => Some(3),
        _ => None,
    }
}

/// Relative tolerance of NCCL's avg on a floating-point type (0 for integers, which
/// NCCL divides exactly). NCCL multiplies each input by 1/n rounded to the type and
/// sums: at most n+1 roundings of the unit roundoff u. 2(n+1)u leaves a factor two
/// of margin; the cap of 1/16 keeps it below the gap between two distinct expected
/// values (integers of at most 8: 1/8 apart relatively), so a wrong value never
/// passes. The cap binds only for bfloat16 beyond 15 ranks.
pub fn float_avg_tolerance(dtype: DataType, nranks: usize) -> f64 {
    mantissa_bits(dtype).map_or(0.0, |bits| {
        (2.0 * (nranks as f64 + 1.0) * 2f64.powi(-bits)).min(1.0 / 16.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avg_tolerance_covers_nccl_rounding_and_rejects_neighbours() {
        assert_eq!(float_avg_tolerance(DataType::Int32, 8), 0.0);
        // bfloat16 at 8 ranks: NCCL's 9 roundings of 2^-9 fit, the 1/8 gap does not.
        let bf16 = float_avg_tolerance(DataType::Bfloat16, 8);
        assert!(bf16 >= 9.0 * 2f64.powi(-9) && bf16 < 1.0 / 8.0, "{bf16}");
        assert_eq!(float_avg_tolerance(DataType::Bfloat16, 1000), 1.0 / 16.0);
        assert!(float_avg_tolerance(DataType::Float, 1024) < 1e-3);
    }

    #[test]
    fn type_and_op_codes_match_nccl_h() {
        assert_eq!(nccl_type(DataType::Bfloat16) as u32, 9);
        assert_eq!(nccl_type(DataType::Half) as u32, 6);
        assert_eq!(nccl_type(DataType::Double) as u32, 8);
        assert_eq!(nccl_op(RedOp::Avg) as u32, 4);
        assert_eq!(nccl_op(RedOp::Min) as u32, 3);
    }
}
