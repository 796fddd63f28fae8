//! Element types and reduction operations, spelled as nccl-tests spells them.

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
}

impl DataType {
    pub const ALL: [DataType; 10] = [
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
        }
    }

    pub fn size(self) -> usize {
        match self {
            DataType::Int8 | DataType::Uint8 => 1,
            DataType::Half | DataType::Bfloat16 => 2,
            DataType::Int32 | DataType::Uint32 | DataType::Float => 4,
            DataType::Int64 | DataType::Uint64 | DataType::Double => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            DataType::Half | DataType::Float | DataType::Double | DataType::Bfloat16
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
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DataType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        // nccl-tests also accepts these aliases.
        let canonical = match s {
            "char" => "int8",
            "int" => "int32",
            "fp16" | "float16" => "half",
            "fp32" | "float32" => "float",
            "fp64" | "float64" => "double",
            "bf16" => "bfloat16",
            other => other,
        };
        DataType::ALL
            .into_iter()
            .find(|t| t.name() == canonical)
            .ok_or_else(|| {
                format!(
                    "unknown datatype '{s}'; use one of: {}, all",
                    DataType::ALL.map(|t| t.name()).join(", ")
                )
            })
    }
}

/// The reduction operations of `-o/--op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
    Avg,
}

impl RedOp {
    pub const ALL: [RedOp; 5] = [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg];

    pub fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Max => "max",
            RedOp::Min => "min",
            RedOp::Avg => "avg",
        }
    }

    /// Combines two exact values as the operation does (avg combines as sum; the
    /// division by the rank count happens once at the end).
    pub fn combine(self, a: f64, b: f64) -> f64 {
        match self {
            RedOp::Sum | RedOp::Avg => a + b,
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
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        RedOp::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| format!("unknown op '{s}'; use one of: sum, prod, min, max, avg, all"))
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
    with_element_type!(dtype, T => {
        let mut wrong = 0u64;
        for (i, chunk) in bytes.chunks_exact(std::mem::size_of::<T>()).enumerate() {
            // SAFETY: chunk has exactly size_of::<T>() bytes; unaligned read.
            let got = unsafe { std::ptr::read_unaligned(chunk.as_ptr() as *const T) }.to_f64();
            let want = T::from_f64(expected(i)).to_f64();
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
            .contains("unknown datatype"));
        assert!("xor".parse::<RedOp>().is_err());
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
