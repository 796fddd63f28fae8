//! Deterministic per-rank input data whose reductions are exact in every element
//! type, so `-c` can compare each received element with its one right value.
//!
//! Inputs are small non-negative integers (and, for prod, powers of two), kept
//! small enough that any order of reduction stays inside the type's exact range.

use crate::datatype::{premul_scalar, DataType, RedOp};

/// Everything the input pattern depends on.
#[derive(Clone, Copy, Debug)]
pub struct Pattern {
    pub dtype: DataType,
    pub op: RedOp,
    pub nranks: usize,
}

/// Ranks whose prod input holds at most this many twos: 2^6 fits int8.
const MAX_PROD_TWOS: usize = 6;

impl Pattern {
    pub fn new(dtype: DataType, op: RedOp, nranks: usize) -> Self {
        Pattern {
            dtype,
            op,
            nranks: nranks.max(1),
        }
    }

    fn exact_limit(&self) -> u64 {
        self.dtype.max_exact_integer().min(1 << 20)
    }

    /// The input element `index` of `rank`'s send buffer.
    pub fn input(&self, rank: usize, index: usize) -> f64 {
        let n = self.nranks;
        match self.op {
            RedOp::Prod => {
                // Element i holds 2 on exactly (i mod 7) capped at n ranks: product 2^k
                // (fewer twos where the type's exact range is smaller: 8-bit floats).
                let max_twos = MAX_PROD_TWOS.min(self.exact_limit().ilog2() as usize);
                let twos = (index % (max_twos + 1)).min(n);
                if (rank + index) % n < twos {
                    2.0
                } else {
                    1.0
                }
            }
            RedOp::Avg => {
                // base_i on every rank, +1 on one rank and -1 on another: the sum is
                // n * base_i, so the average is exact whatever the division.
                let bases = (self.exact_limit() / n as u64).clamp(1, 8);
                let base = 1.0 + (index as u64 % bases) as f64;
                if n < 2 {
                    base
                } else if rank == index % n {
                    base + 1.0
                } else if rank == (index + 1) % n {
                    base - 1.0
                } else {
                    base
                }
            }
            RedOp::Sum | RedOp::Max | RedOp::Min | RedOp::Mulsum => {
                // Values 0..m-1 with (m-1) * (ranks that contribute) inside the exact
                // range (half of it for mulsum, whose scalars double odd ranks' inputs).
                let limit = match self.op {
                    RedOp::Mulsum => self.exact_limit() / 2,
                    _ => self.exact_limit(),
                };
                let m = (limit / n as u64 + 1).clamp(2, 8);
                let contributing = (limit / (m - 1)).min(n as u64) as usize;
                if (rank + index) % n < contributing {
                    ((rank * 3 + index * 7 + 1) as u64 % m) as f64
                } else {
                    0.0
                }
            }
        }
    }

    /// The reduction over all ranks of input element `index`, as `op` defines it.
    pub fn reduced(&self, index: usize) -> f64 {
        if self.op == RedOp::Mulsum {
            return (0..self.nranks)
                .map(|r| premul_scalar(r) * self.input(r, index))
                .sum();
        }
        let total = (1..self.nranks).fold(self.input(0, index), |acc, r| {
            self.op.combine(acc, self.input(r, index))
        });
        match self.op {
            RedOp::Avg => total / self.nranks as f64,
            _ => total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reductions_stay_exact_in_every_type() {
        for dtype in DataType::ALL {
            for op in RedOp::ALL {
                for nranks in [1, 2, 3, 4, 7, 64, 300] {
                    let p = Pattern::new(dtype, op, nranks);
                    for i in 0..64 {
                        let v = p.reduced(i);
                        assert!(
                            v >= 0.0 && v.fract() == 0.0,
                            "{dtype} {op} n={nranks} i={i}: {v}"
                        );
                        assert!(
                            v <= dtype.max_exact_integer() as f64,
                            "{dtype} {op} n={nranks} i={i}: {v} not exact"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn data_varies_across_ranks_and_elements() {
        let p = Pattern::new(DataType::Float, RedOp::Sum, 4);
        let row0: Vec<f64> = (0..8).map(|i| p.input(0, i)).collect();
        let row1: Vec<f64> = (0..8).map(|i| p.input(1, i)).collect();
        assert_ne!(row0, row1);
        assert!(row0.windows(2).any(|w| w[0] != w[1]));
    }

    #[test]
    fn avg_is_the_base_value() {
        let p = Pattern::new(DataType::Int32, RedOp::Avg, 3);
        for i in 0..20 {
            let sum: f64 = (0..3).map(|r| p.input(r, i)).sum();
            assert_eq!(p.reduced(i) * 3.0, sum);
        }
    }

    #[test]
    fn mulsum_weights_odd_ranks_twice() {
        let p = Pattern::new(DataType::Float, RedOp::Mulsum, 3);
        for i in 0..20 {
            let want = p.input(0, i) + 2.0 * p.input(1, i) + p.input(2, i);
            assert_eq!(p.reduced(i), want);
        }
        assert!((0..20).any(|i| p.input(1, i) > 0.0));
    }

    #[test]
    fn prod_is_a_power_of_two() {
        let p = Pattern::new(DataType::Int8, RedOp::Prod, 5);
        assert_eq!(p.reduced(0), 1.0);
        assert_eq!(p.reduced(3), 8.0);
        assert_eq!(p.reduced(6), 32.0); // capped at 5 ranks
    }
}
