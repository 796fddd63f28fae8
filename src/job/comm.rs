//! The exchanges a benchmark makes outside its timed calls (barriers, sums,
//! gathered timings), behind a trait so that a sweep runs on MPI's world or, in
//! unit tests, on one rank alone.

use super::agree::Group;
use super::world::World;

/// A job's ranks as a benchmark sweep sees them.
pub trait Comm: Group {
    /// Rank among the ranks of this node.
    fn local_rank(&self) -> usize;
    fn barrier(&self);
    /// The sum over ranks, on every rank.
    fn sum_u64(&self, mine: u64) -> u64;
    /// Concatenation of every rank's equally long slice, on rank 0 only.
    fn gather_f64s(&self, mine: &[f64]) -> Option<Vec<f64>>;
}

impl Comm for World {
    fn local_rank(&self) -> usize {
        self.local_rank
    }

    fn barrier(&self) {
        World::barrier(self)
    }

    fn sum_u64(&self, mine: u64) -> u64 {
        World::sum_u64(self, mine)
    }

    fn gather_f64s(&self, mine: &[f64]) -> Option<Vec<f64>> {
        World::gather_f64s(self, mine)
    }
}

/// A job of one rank without MPI: every exchange returns this rank's own data.
#[cfg(test)]
pub struct Solo;

#[cfg(test)]
impl Group for Solo {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn host(&self, _rank: usize) -> &str {
        "solo"
    }
    fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        vec![mine.to_vec()]
    }
}

#[cfg(test)]
impl Comm for Solo {
    fn local_rank(&self) -> usize {
        0
    }
    fn barrier(&self) {}
    fn sum_u64(&self, mine: u64) -> u64 {
        mine
    }
    fn gather_f64s(&self, mine: &[f64]) -> Option<Vec<f64>> {
        Some(mine.to_vec())
    }
}
