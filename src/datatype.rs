//! Element types and reduction operations, spelled as nccl-tests spells them.

use anyhow::anyhow;
use clap::builder::PossibleValue;
use half::{bf16, f16};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// The element types of `-d/--datatype`, in nccl-tests' order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum DataType {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Half,
    Float,
    Double,
    Bfloat16,
    /// 8-bit floats (NCCL 2.24+ on sm90+): 4 exponent and 3 mantissa bits.
    F8e4m3,
    /// 8-bit floats: 5 exponent and 2 mantissa bits.
    F8e5m2,
}

impl DataType {
    pub const ALL: [DataType; 12] = [
        DataType::Int8,
        DataType::Uint8,
        DataType::Int32,
        DataType::Uint32,
        DataType::Int64,
        DataType::Uint64,
        DataType::Half,
        DataType::Float,
        DataType::Double,
        DataType::Bfloat16,
        DataType::F8e4m3,
        DataType::F8e5m2,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DataType::Int8 => "int8",
            DataType::Uint8 => "uint8",
            DataType::Int32 => "int32",
            DataType::Uint32 => "uint32",
            DataType::Int64 => "int64",
            DataType::Uint64 => "uint64",
            DataType::Half => "half",
            DataType::Float => "float",
            DataType::Double => "double",
            DataType::Bfloat16 => "bfloat16",
            DataType::F8e4m3 => "f8e4m3",
            DataType::F8e5m2 => "f8e5m2",
        }
    }

    /// What the type is, for `--help` and the reference.
    pub fn meaning(self) -> &'static str {
        match self {
            DataType::Int8 => "8-bit signed integer",
            DataType::Uint8 => "8-bit unsigned integer",
            DataType::Int32 => "32-bit signed integer",
            DataType::Uint32 => "32-bit unsigned integer",
            DataType::Int64 => "64-bit signed integer",
            DataType::Uint64 => "64-bit unsigned integer",
            DataType::Half => "16-bit IEEE float",
            DataType::Float => "32-bit IEEE float",
            DataType::Double => "64-bit IEEE float",
            DataType::Bfloat16 => "16-bit brain float",
            DataType::F8e4m3 => {
                "8-bit float, 4 exponent and 3 mantissa bits (nccl backend: NCCL 2.24+ on sm90+)"
            }
            DataType::F8e5m2 => {
                "8-bit float, 5 exponent and 2 mantissa bits (nccl backend: NCCL 2.24+ on sm90+)"
            }
        }
    }

    /// nccl-tests' other spellings of this type.
    pub fn aliases(self) -> impl Iterator<Item = &'static str> {
        DATATYPE_ALIASES
            .into_iter()
            .filter(move |(_, t)| *t == self)
            .map(|(alias, _)| alias)
    }

    pub fn size(self) -> usize {
        match self {
            DataType::Int8 | DataType::Uint8 | DataType::F8e4m3 | DataType::F8e5m2 => 1,
            DataType::Half | DataType::Bfloat16 => 2,
            DataType::Int32 | DataType::Uint32 | DataType::Float => 4,
            DataType::Int64 | DataType::Uint64 | DataType::Double => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            DataType::Half
                | DataType::Float
                | DataType::Double
                | DataType::Bfloat16
                | DataType::F8e4m3
                | DataType::F8e5m2
        )
    }

    /// Largest integer n such that every integer in [-n, n] (or [0, n] for unsigned
    /// types) is exactly representable: the validation data stays inside it.
    pub fn max_exact_integer(self) -> u64 {
        match self {
            DataType::Int8 => i8::MAX as u64,
            DataType::Uint8 => u8::MAX as u64,
            DataType::Int32 => i32::MAX as u64,
            DataType::Uint32 => u32::MAX as u64,
            DataType::Int64 => i64::MAX as u64,
            DataType::Uint64 => u64::MAX,
            DataType::Half => 1 << 11,
            DataType::Bfloat16 => 1 << 8,
            DataType::Float => 1 << 24,
            DataType::Double => 1 << 53,
            DataType::F8e4m3 => 1 << 4,
            DataType::F8e5m2 => 1 << 3,
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The other names nccl-tests accepts for `-d` types.
const DATATYPE_ALIASES: [(&str, DataType); 9] = [
    ("char", DataType::Int8),
    ("int", DataType::Int32),
    ("fp16", DataType::Half),
    ("float16", DataType::Half),
    ("fp32", DataType::Float),
    ("float32", DataType::Float),
    ("fp64", DataType::Double),
    ("float64", DataType::Double),
    ("bf16", DataType::Bfloat16),
];

/// `-d/--datatype` and `-o/--op`'s value meaning every type or op in turn.
pub const ALL_VALUE: &str = "all";

impl FromStr for DataType {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        let canonical = DATATYPE_ALIASES
            .into_iter()
            .find(|(alias, _)| *alias == s)
            .map_or(s, |(_, t)| t.name());
        DataType::ALL
            .into_iter()
            .find(|t| t.name() == canonical)
            .ok_or_else(|| {
                anyhow!(
                    "unknown datatype '{s}'; use one of: {}, {ALL_VALUE}",
                    DataType::ALL.map(|t| t.name()).join(", ")
                )
            })
    }
}

/// `-d/--datatype`'s values as clap lists and checks them: every type (with
/// its aliases) and `all`, from the tables the parser reads.
pub fn datatype_values() -> Vec<PossibleValue> {
    DataType::ALL
        .into_iter()
        .map(|t| {
            let aliases: Vec<&str> = t.aliases().collect();
            let help = match aliases.is_empty() {
                true => t.meaning().to_string(),
                false => format!("{} (also: {})", t.meaning(), aliases.join(", ")),
            };
            PossibleValue::new(t.name()).aliases(aliases).help(help)
        })
        .chain([PossibleValue::new(ALL_VALUE).help("every type in turn")])
        .collect()
}

/// `-o/--op`'s values as clap lists and checks them: every op and `all`.
pub fn op_values() -> Vec<PossibleValue> {
    RedOp::ALL
        .into_iter()
        .map(|o| PossibleValue::new(o.name()).help(o.meaning()))
        .chain([PossibleValue::new(ALL_VALUE).help("every op in turn")])
        .collect()
}

/// The reduction operations of `-o/--op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
    Avg,
    /// NCCL's PreMulSum (`ncclRedOpCreatePreMulSum`): each rank's input times its
    /// own scalar (`premul_scalar`), then summed.
    Mulsum,
}

impl RedOp {
    pub const ALL: [RedOp; 6] = [
        RedOp::Sum,
        RedOp::Prod,
        RedOp::Max,
        RedOp::Min,
        RedOp::Avg,
        RedOp::Mulsum,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Max => "max",
            RedOp::Min => "min",
            RedOp::Avg => "avg",
            RedOp::Mulsum => "mulsum",
        }
    }

    /// What the op computes, for `--help` and the reference.
    pub fn meaning(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "product",
            RedOp::Max => "maximum",
            RedOp::Min => "minimum",
            RedOp::Avg => "average over the ranks",
            RedOp::Mulsum => "each rank's input times its own scalar (1 on even ranks, 2 on odd), summed (NCCL's PreMulSum)",
        }
    }

    /// Combines two exact values as the operation does (avg and mulsum combine as
    /// sum; the division by the rank count, the multiplication by each rank's
    /// scalar, happen apart).
    pub fn combine(self, a: f64, b: f64) -> f64 {
        match self {
            RedOp::Sum | RedOp::Avg | RedOp::Mulsum => a + b,
            RedOp::Prod => a * b,
            RedOp::Max => a.max(b),
            RedOp::Min => a.min(b),
        }
    }
}

impl fmt::Display for RedOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RedOp {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        RedOp::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| {
                anyhow!(
                    "unknown op '{s}'; use one of: {}, {ALL_VALUE}",
                    RedOp::ALL.map(|o| o.name()).join(", ")
                )
            })
    }
}

/// The scalar `rank` multiplies its input by under mulsum, as nccl-tests'
/// `ncclVerifiablePremulScalar`: 1 on even ranks, 2 on odd ones.
pub fn premul_scalar(rank: usize) -> f64 {
    if rank % 2 == 0 {
        1.0
    } else {
        2.0
    }
}

/// A value of one of the element types, converted to and from f64. The validation
/// data are small integers (and powers of two), exact in every type, so f64 holds
/// them and their reductions without rounding.
pub trait Element: Copy + 'static {
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    /// self / n in the type's own arithmetic (integer division truncates, as NCCL's avg).
    fn div_count(self, n: usize) -> Self;
}

macro_rules! element_via_as {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn from_f64(v: f64) -> Self { v as $t }
            fn to_f64(self) -> f64 { self as f64 }
            fn div_count(self, n: usize) -> Self { self / n as $t }
        }
    )*};
}
element_via_as!(i8, u8, i32, u32, i64, u64, f32, f64);

macro_rules! element_16bit_float {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn from_f64(v: f64) -> Self { <$t>::from_f64(v) }
            fn to_f64(self) -> f64 { <$t>::to_f64(self) }
            fn div_count(self, n: usize) -> Self { <$t>::from_f32(self.to_f32() / n as f32) }
        }
    )*};
}
element_16bit_float!(f16, bf16);

/// The two 8-bit float formats (OCP FP8 as CUDA's `__nv_fp8_e4m3`/`__nv_fp8_e5m2`):
/// stored as their bit patterns, converted with round-to-nearest-even and
/// saturation to the largest finite value, as CUDA's conversions do.
macro_rules! float8 {
    ($($name:ident: $mant:expr, $bias:expr, $max_code:expr, $ieee_inf:expr);*) => {$(
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[repr(transparent)]
        pub struct $name(pub u8);
        impl $name {
            pub fn to_f32(self) -> f32 {
                f8_decode(self.0, $mant, $bias, $ieee_inf)
            }
            pub fn from_f32(v: f32) -> Self {
                $name(f8_encode(v, $mant, $bias, $max_code))
            }
        }
        impl Element for $name {
            fn from_f64(v: f64) -> Self { Self::from_f32(v as f32) }
            fn to_f64(self) -> f64 { self.to_f32() as f64 }
            fn div_count(self, n: usize) -> Self { Self::from_f32(self.to_f32() / n as f32) }
        }
    )*};
}
// e4m3 has no infinity (S.1111.111 is NaN, 448 the largest); e5m2 is IEEE-like.
float8!(F8E4M3: 3, 7, 0x7E, false; F8E5M2: 2, 15, 0x7B, true);

fn f8_decode(code: u8, mant_bits: u32, bias: i32, ieee_inf: bool) -> f32 {
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = ((code & 0x7F) >> mant_bits) as i32;
    let mant = (code & ((1 << mant_bits) - 1)) as i32;
    let top = (1 << (7 - mant_bits)) - 1;
    if exp == top && (ieee_inf || mant == (1 << mant_bits) - 1) {
        return match (ieee_inf && mant == 0, sign > 0.0) {
            (true, true) => f32::INFINITY,
            (true, false) => f32::NEG_INFINITY,
            _ => f32::NAN,
        };
    }
    let m = mant_bits as i32;
    let magnitude = match exp {
        0 => mant as f32 * 2f32.powi(1 - bias - m),
        _ => ((1 << m) + mant) as f32 * 2f32.powi(exp - bias - m),
    };
    sign * magnitude
}

fn f8_encode(v: f32, mant_bits: u32, bias: i32, max_code: u8) -> u8 {
    if v.is_nan() {
        return 0x7F;
    }
    let sign = if v.is_sign_negative() { 0x80 } else { 0 };
    if v.is_infinite() {
        return sign | max_code;
    }
    let m = mant_bits as i32;
    // a's binade from the f32 exponent bits (the subnormals' below the smallest normal).
    let binade = ((v.to_bits() >> 23) & 0xFF) as i32 - 127;
    let e = binade.max(1 - bias);
    let n = (v.abs() as f64 / 2f64.powi(e - m)).round_ties_even() as u32;
    // n quanta of binade e: in the lowest binade the code is n itself (subnormal
    // below 2^m); a carry to 2^(m+1) lands on the next binade's first code.
    let code = (((e + bias) as u32) << m) + n - (1 << m);
    sign | code.min(max_code as u32) as u8
}

/// Runs `$body` with `$T` bound to the Rust type of a `DataType`.
#[macro_export]
macro_rules! with_element_type {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::datatype::DataType::Int8 => {
                type $T = i8;
                $body
            }
            $crate::datatype::DataType::Uint8 => {
                type $T = u8;
                $body
            }
            $crate::datatype::DataType::Int32 => {
                type $T = i32;
                $body
            }
            $crate::datatype::DataType::Uint32 => {
                type $T = u32;
                $body
            }
            $crate::datatype::DataType::Int64 => {
                type $T = i64;
                $body
            }
            $crate::datatype::DataType::Uint64 => {
                type $T = u64;
                $body
            }
            $crate::datatype::DataType::Half => {
                type $T = half::f16;
                $body
            }
            $crate::datatype::DataType::Float => {
                type $T = f32;
                $body
            }
            $crate::datatype::DataType::Double => {
                type $T = f64;
                $body
            }
            $crate::datatype::DataType::Bfloat16 => {
                type $T = half::bf16;
                $body
            }
            $crate::datatype::DataType::F8e4m3 => {
                type $T = $crate::datatype::F8E4M3;
                $body
            }
            $crate::datatype::DataType::F8e5m2 => {
                type $T = $crate::datatype::F8E5M2;
                $body
            }
        }
    };
}

/// Writes `value(i)` for every element of a byte buffer holding `dtype` elements.
pub fn fill(dtype: DataType, bytes: &mut [u8], value: impl Fn(usize) -> f64) {
    with_element_type!(dtype, T => {
        for (i, chunk) in bytes.chunks_exact_mut(std::mem::size_of::<T>()).enumerate() {
            let v = T::from_f64(value(i));
            // SAFETY: chunk has exactly size_of::<T>() bytes; unaligned write.
            unsafe { std::ptr::write_unaligned(chunk.as_mut_ptr() as *mut T, v) };
        }
    })
}

/// Divides every element by `n` in place: the second half of avg where the library
/// has only sum.
pub fn divide_in_place(dtype: DataType, bytes: &mut [u8], n: usize) {
    with_element_type!(dtype, T => {
        for chunk in bytes.chunks_exact_mut(std::mem::size_of::<T>()) {
            let p = chunk.as_mut_ptr() as *mut T;
            // SAFETY: chunk has exactly size_of::<T>() bytes; unaligned access.
            unsafe { std::ptr::write_unaligned(p, std::ptr::read_unaligned(p).div_count(n)) };
        }
    })
}

/// Multiplies every element by `factor` in place, in the type's own rounding:
/// mulsum's pre-multiplication where the library has no PreMulSum.
pub fn scale_in_place(dtype: DataType, bytes: &mut [u8], factor: f64) {
    with_element_type!(dtype, T => {
        for chunk in bytes.chunks_exact_mut(std::mem::size_of::<T>()) {
            let p = chunk.as_mut_ptr() as *mut T;
            // SAFETY: chunk has exactly size_of::<T>() bytes; unaligned access.
            unsafe {
                let v = std::ptr::read_unaligned(p).to_f64() * factor;
                std::ptr::write_unaligned(p, T::from_f64(v))
            };
        }
    })
}

/// Counts the elements of a byte buffer that differ from `expected(i)`.
pub fn count_wrong(dtype: DataType, bytes: &[u8], expected: impl Fn(usize) -> f64) -> u64 {
    count_wrong_within(dtype, bytes, 0.0, expected)
}

/// Counts the elements further than `relative` x |expected(i)| from `expected(i)`
/// (0: exact). NaN is always wrong.
pub fn count_wrong_within(
    dtype: DataType,
    bytes: &[u8],
    relative: f64,
    expected: impl Fn(usize) -> f64,
) -> u64 {
    count_wrong_where(dtype, bytes, relative, |i| Some(expected(i)))
}

/// As `count_wrong_within`, among the elements whose `expected(i)` is Some: None is
/// an element the call leaves undefined (the tail beyond a rank's alltoallv data).
pub fn count_wrong_where(
    dtype: DataType,
    bytes: &[u8],
    relative: f64,
    expected: impl Fn(usize) -> Option<f64>,
) -> u64 {
    with_element_type!(dtype, T => {
        let mut wrong = 0u64;
        for (i, chunk) in bytes.chunks_exact(std::mem::size_of::<T>()).enumerate() {
            let Some(want) = expected(i) else { continue };
            // SAFETY: chunk has exactly size_of::<T>() bytes; unaligned read.
            let got = unsafe { std::ptr::read_unaligned(chunk.as_ptr() as *const T) }.to_f64();
            let want = T::from_f64(want).to_f64();
            // False for NaN, so NaN counts as wrong.
            let close = (got - want).abs() <= relative * want.abs();
            if !close {
                wrong += 1;
            }
        }
        wrong
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in DataType::ALL {
            assert_eq!(t.name().parse::<DataType>().unwrap(), t);
        }
        for o in RedOp::ALL {
            assert_eq!(o.name().parse::<RedOp>().unwrap(), o);
        }
        assert_eq!("bf16".parse::<DataType>().unwrap(), DataType::Bfloat16);
        assert!("int7"
            .parse::<DataType>()
            .unwrap_err()
            .to_string()
            .contains("unknown datatype"));
        assert!("xor".parse::<RedOp>().is_err());
    }

    #[test]
    fn float8_matches_cuda_conversions() {
        // Every finite code decodes and encodes back to itself.
        for code in 0..=255u8 {
            for (back, v) in [
                (
                    F8E4M3::from_f32(F8E4M3(code).to_f32()).0,
                    F8E4M3(code).to_f32(),
                ),
                (
                    F8E5M2::from_f32(F8E5M2(code).to_f32()).0,
                    F8E5M2(code).to_f32(),
                ),
            ] {
                if v.is_finite() && v != 0.0 {
                    assert_eq!(back, code, "{code:#x} = {v}");
                }
            }
        }
        assert_eq!(F8E4M3(0x7E).to_f32(), 448.0);
        assert!(F8E4M3(0xFF).to_f32().is_nan());
        assert_eq!(F8E5M2(0x7B).to_f32(), 57344.0);
        assert_eq!(F8E5M2(0x7C).to_f32(), f32::INFINITY);
        assert!(F8E5M2(0xFF).to_f32().is_nan());
        assert_eq!(F8E4M3(0x01).to_f32(), 2f32.powi(-9));
        assert_eq!(F8E5M2(0x01).to_f32(), 2f32.powi(-16));
        // Round to nearest even, saturate to the largest finite value.
        assert_eq!(F8E4M3::from_f32(17.0).to_f32(), 16.0);
        assert_eq!(F8E4M3::from_f32(19.0).to_f32(), 20.0);
        assert_eq!(F8E5M2::from_f32(9.0).to_f32(), 8.0);
        assert_eq!(F8E4M3::from_f32(1e6).to_f32(), 448.0);
        assert_eq!(F8E5M2::from_f32(-1e9).to_f32(), -57344.0);
        // Every integer up to max_exact_integer is exact; the next is not.
        let n = DataType::F8e4m3.max_exact_integer() as u8;
        assert!((0..=n).all(|i| F8E4M3::from_f32(i as f32).to_f32() == i as f32));
        let n = DataType::F8e5m2.max_exact_integer() as u8;
        assert!((0..=n).all(|i| F8E5M2::from_f32(i as f32).to_f32() == i as f32));
    }

    #[test]
    fn tolerance_is_relative_and_nan_is_wrong() {
        let mut buf = vec![0u8; 3 * 4];
        fill(DataType::Float, &mut buf, |i| [8.03, 7.0, f64::NAN][i]);
        let eight = |_| 8.0;
        assert_eq!(count_wrong(DataType::Float, &buf, eight), 3);
        // 8.03 is within 1/16 of 8; 7 (a neighbouring value) and NaN are not.
        assert_eq!(
            count_wrong_within(DataType::Float, &buf, 1.0 / 16.0, eight),
            2
        );
    }

    #[test]
    fn fill_and_count_wrong_every_type() {
        for t in DataType::ALL {
            let mut buf = vec![0u8; 16 * t.size()];
            fill(t, &mut buf, |i| (i % 5) as f64);
            assert_eq!(count_wrong(t, &buf, |i| (i % 5) as f64), 0, "{t}");
            assert_eq!(
                count_wrong(t, &buf, |i| if i == 3 { 9.0 } else { (i % 5) as f64 }),
                1
            );
        }
    }
}
