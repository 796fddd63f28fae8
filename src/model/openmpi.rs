//! Which algorithm Open MPI 4.1's tuned component runs for a collective: its
//! fixed decision rules (ompi/mca/coll/tuned/coll_tuned_decision_fixed.c at
//! v4.1.4, commit ffb0adc), or the algorithm a user forced with
//! `coll_tuned_use_dynamic_rules` and `coll_tuned_<coll>_algorithm`, which
//! Open MPI reads only with the dynamic rules on
//! (coll_tuned_decision_dynamic.c). mpirun's `--mca NAME VALUE` reaches the
//! ranks as `OMPI_MCA_NAME`, so the environment tells both; MCA parameter files
//! are not read.
//!
//! Sizes are the ones each rule compares: all-reduce and reduce-scatter the
//! whole buffer (nccl-tests' size), all-gather and alltoall one rank's block
//! (size / n). The tables are for commutative operations, the only ones the
//! benchmarks reduce with (sum, prod, min, max; avg is a sum).

use super::Algorithm;
use serde::Serialize;

/// One communicator-size row of a rule: below `ranks`, the first
/// (bytes below, algorithm) that matches, else `otherwise`.
type Row = (usize, &'static [(u64, u8)], u8);

/// allreduce, commutative (coll_tuned_decision_fixed.c lines 120-214).
const ALL_REDUCE: &[Row] = &[
    (
        4,
        &[
            (8, 4),
            (4096, 3),
            (8192, 4),
            (16384, 3),
            (65536, 4),
            (262144, 5),
        ],
        6,
    ),
    (8, &[(16, 4), (8192, 3)], 6),
    (16, &[(8192, 3)], 6),
    (32, &[(64, 5), (4096, 3)], 6),
    (64, &[(128, 5)], 6),
    (128, &[(262144, 3)], 6),
    (256, &[(131072, 2), (262144, 3)], 6),
    (512, &[(4096, 2)], 6),
    (2048, &[(2048, 2), (16384, 3)], 6),
    (4096, &[(2048, 2), (4096, 5), (16384, 3)], 6),
    (usize::MAX, &[(2048, 2), (16384, 5), (32768, 3)], 6),
];

/// allgather (lines 1118-1223); 2 ranks: two_proc.
const ALL_GATHER: &[Row] = &[
    (3, &[], 6),
    (32, &[], 3),
    (64, &[(1024, 3), (65536, 5)], 4),
    (128, &[(512, 3), (65536, 5)], 4),
    (256, &[(512, 3), (131072, 5), (524288, 4), (1048576, 5)], 4),
    (
        512,
        &[
            (32, 3),
            (128, 2),
            (1024, 3),
            (131072, 5),
            (524288, 4),
            (1048576, 5),
        ],
        4,
    ),
    (1024, &[(64, 3), (256, 2), (2048, 3)], 5),
    (
        2048,
        &[
            (4, 3),
            (8, 2),
            (16, 3),
            (32, 2),
            (256, 3),
            (512, 2),
            (4096, 3),
        ],
        5,
    ),
    (4096, &[(32, 2), (128, 3), (512, 2), (4096, 3)], 5),
    (
        usize::MAX,
        &[(2, 3), (8, 2), (16, 3), (512, 2), (4096, 3)],
        5,
    ),
];

/// reduce_scatter (MPI_Reduce_scatter, the call the benchmark makes),
/// commutative (lines 853-957).
const REDUCE_SCATTER: &[Row] = &[
    (4, &[(65536, 3), (131072, 4)], 3),
    (8, &[(8, 1), (262144, 2)], 3),
    (32, &[(262144, 2)], 3),
    (64, &[(64, 1), (2048, 2), (524288, 4)], 3),
    (128, &[(256, 1), (512, 2), (2048, 4), (4096, 2)], 4),
    (256, &[(256, 1), (512, 2)], 4),
    (512, &[(256, 1), (1024, 2)], 4),
    (1024, &[(512, 1), (2048, 2), (8192, 4), (16384, 2)], 4),
    (2048, &[(512, 1), (4096, 2), (16384, 4), (32768, 2)], 4),
    (4096, &[(512, 1), (4096, 2)], 4),
    (usize::MAX, &[(1024, 1), (8192, 2)], 4),
];

/// alltoall (lines 253-405).
const ALLTOALL: &[Row] = &[
    (
        3,
        &[
            (2, 2),
            (4, 5),
            (16, 2),
            (64, 5),
            (256, 2),
            (4096, 5),
            (32768, 2),
            (262144, 4),
            (1048576, 5),
        ],
        2,
    ),
    (
        8,
        &[(8192, 4), (16384, 1), (65536, 4), (524288, 1), (1048576, 2)],
        1,
    ),
    (16, &[(262144, 4)], 1),
    (
        32,
        &[
            (4, 4),
            (512, 3),
            (8192, 4),
            (32768, 1),
            (262144, 4),
            (524288, 1),
        ],
        4,
    ),
    (64, &[(512, 3), (524288, 1)], 4),
    (128, &[(1024, 3), (2048, 1), (4096, 4), (262144, 1)], 2),
    (256, &[(1024, 3), (2048, 4), (262144, 1)], 2),
    (512, &[(1024, 3), (8192, 4), (32768, 1)], 2),
    (
        1024,
        &[(512, 3), (8192, 4), (16384, 1), (131072, 4), (262144, 1)],
        2,
    ),
    (
        2048,
        &[(512, 3), (1024, 4), (2048, 1), (16384, 4), (262144, 1)],
        4,
    ),
    (4096, &[(1024, 3), (4096, 4), (8192, 1), (131072, 4)], 1),
    (
        usize::MAX,
        &[(2048, 3), (8192, 4), (16384, 1), (32768, 4), (65536, 1)],
        4,
    ),
];

/// Open MPI's algorithm names by number, as its MCA enums list them
/// (coll_tuned_<coll>_decision.c), and the MCA parameter that forces one.
fn names(collective: &str) -> Option<(&'static str, &'static [&'static str])> {
    Some(match collective {
        "all_reduce" => (
            "allreduce",
            &[
                "basic_linear",
                "nonoverlapping",
                "recursive_doubling",
                "ring",
                "segmented_ring",
                "rabenseifner",
            ],
        ),
        "all_gather" => (
            "allgather",
            &[
                "linear",
                "bruck",
                "recursive_doubling",
                "ring",
                "neighbor",
                "two_proc",
            ],
        ),
        "reduce_scatter" => (
            "reduce_scatter",
            &["non-overlapping", "recursive_halving", "ring", "butterfly"],
        ),
        "alltoall" => (
            "alltoall",
            &[
                "linear",
                "pairwise",
                "modified_bruck",
                "linear_sync",
                "two_proc",
            ],
        ),
        _ => return None,
    })
}

/// The MCA settings that force Open MPI's ring for `collective`; None: it has
/// no ring (alltoall).
pub fn ring_forced(collective: &str) -> Option<String> {
    let (mca_name, list) = names(collective)?;
    let number = list.iter().position(|name| *name == "ring")? + 1;
    Some(format!(
        "--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_{mca_name}_algorithm {number}"
    ))
}

/// The algorithm Open MPI's fixed rules pick for `collective` on `n` ranks at
/// nccl-tests' size `size_bytes`; None: a collective without rules here.
pub fn fixed(collective: &str, n: usize, size_bytes: u64) -> Option<u8> {
    let (rows, bytes) = match collective {
        "all_reduce" => (ALL_REDUCE, size_bytes),
        "reduce_scatter" => (REDUCE_SCATTER, size_bytes),
        // The rules compare one rank's block (scount x its type's size).
        "all_gather" => (ALL_GATHER, size_bytes / n.max(1) as u64),
        "alltoall" => (ALLTOALL, size_bytes / n.max(1) as u64),
        _ => return None,
    };
    let (_, below, otherwise) = rows.iter().find(|(ranks, ..)| n < *ranks)?;
    Some(
        below
            .iter()
            .find(|(limit, _)| bytes < *limit)
            .map_or(*otherwise, |(_, alg)| *alg),
    )
}

/// What the environment tells of Open MPI's choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Tuned {
    /// coll_tuned_use_dynamic_rules: forced algorithms and rules files count.
    dynamic: bool,
    /// coll_tuned_dynamic_rules_filename with the dynamic rules on: unknown.
    rules_file: bool,
    /// The coll framework told without tuned (`--mca coll ^tuned`).
    no_tuned: bool,
    /// Forced algorithm numbers: all_reduce, all_gather, reduce_scatter, alltoall.
    forced: [u8; 4],
    /// coll_tuned_allreduce_algorithm_segmentsize (0: the segmented ring is the ring).
    segsize: bool,
    /// coll_tuned_alltoall_algorithm_max_requests (0: linear_sync posts all at once).
    max_requests: bool,
}

const COLLECTIVES: [&str; 4] = ["all_reduce", "all_gather", "reduce_scatter", "alltoall"];

fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "enabled" | "on"
    )
}

/// A parameter set to anything but 0 (one that does not parse counts as set).
fn nonzero(v: Option<String>) -> bool {
    v.is_some_and(|v| v.trim().parse::<i64>() != Ok(0))
}

impl Tuned {
    /// From the environment (`var`: `std::env::var(..).ok()` in a run).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Tuned {
        let mca = |name: &str| var(&format!("OMPI_MCA_{name}"));
        let dynamic = mca("coll_tuned_use_dynamic_rules").is_some_and(|v| truthy(&v));
        let mut forced = [0; 4];
        for (slot, coll) in forced.iter_mut().zip(COLLECTIVES) {
            let (mca_name, list) = names(coll).expect("a collective with names");
            *slot = mca(&format!("coll_tuned_{mca_name}_algorithm"))
                .and_then(|v| number(list, &v))
                .unwrap_or(0);
        }
        Tuned {
            dynamic,
            rules_file: dynamic
                && mca("coll_tuned_dynamic_rules_filename").is_some_and(|f| !f.trim().is_empty()),
            no_tuned: mca("coll").is_some_and(|c| excludes_tuned(&c)),
            forced,
            segsize: nonzero(mca("coll_tuned_allreduce_algorithm_segmentsize")),
            max_requests: nonzero(mca("coll_tuned_alltoall_algorithm_max_requests")),
        }
    }

    /// The header's words for where the model's MPI algorithms come from.
    pub fn describe(&self) -> String {
        if self.no_tuned {
            return "MPI algorithm: bandwidth-optimal (Open MPI's tuned component is off)".into();
        }
        if self.rules_file {
            return "MPI algorithm: bandwidth-optimal (Open MPI's dynamic rules file is not read)"
                .into();
        }
        let forced: Vec<String> = COLLECTIVES
            .iter()
            .zip(self.forced)
            .filter(|(_, alg)| self.dynamic && *alg > 0)
            .filter_map(|(coll, alg)| {
                let (mca_name, list) = names(coll)?;
                Some(format!("{mca_name} {}", list[alg as usize - 1]))
            })
            .collect();
        let mut line = "MPI algorithm: Open MPI 4.1's fixed rules (coll tuned)".to_string();
        if !forced.is_empty() {
            line += &format!(", forced: {}", forced.join(", "));
        }
        line
    }

    /// Open MPI's choice for a row; None: not known (tuned off, a rules file,
    /// a collective without rules).
    pub fn choose(&self, collective: &str, n: usize, size_bytes: u64) -> Option<Choice> {
        // One rank: Open MPI's self component runs it, not tuned.
        if self.no_tuned || self.rules_file || n < 2 {
            return None;
        }
        let slot = COLLECTIVES.iter().position(|c| *c == collective)?;
        let forced = self.dynamic && self.forced[slot] > 0;
        let number = match forced {
            true => self.forced[slot],
            false => fixed(collective, n, size_bytes)?,
        };
        let (_, list) = names(collective)?;
        Some(Choice {
            name: list.get(number as usize - 1)?,
            forced,
            algorithm: self.modelled(collective, number, n),
        })
    }

    /// The model's algorithm for Open MPI's `number`, where the model has one
    /// of the same cost; None: not modelled.
    fn modelled(&self, collective: &str, number: u8, n: usize) -> Option<Algorithm> {
        use Algorithm::*;
        Some(match (collective, number) {
            ("all_reduce", 3) => RecursiveDoubling,
            ("all_reduce", 4) => Ring,
            // Segment size 0 (the fixed rules' and the default) runs the plain ring
            // (coll_base_allreduce.c, allreduce_intra_ring_segmented).
            ("all_reduce", 5) if !self.segsize => Ring,
            ("all_reduce", 6) => Rabenseifner,
            ("all_gather", 2) => Bruck,
            // Recursive doubling on a rank count not a power of two runs Bruck
            // (coll_base_allgather.c, allgather_intra_recursivedoubling).
            ("all_gather", 3) if n.is_power_of_two() => RecursiveDoubling,
            ("all_gather", 3) => Bruck,
            ("all_gather", 4) => Ring,
            // Neighbour exchange on an odd count runs the ring (same file).
            ("all_gather", 5) if n % 2 == 0 => NeighbourExchange,
            ("all_gather", 5) => Ring,
            // Two ranks: one exchange of half the buffer, the ring's cost at n = 2.
            ("all_gather", 6) if n == 2 => Ring,
            ("reduce_scatter", 2) => RecursiveHalving,
            ("reduce_scatter", 3) => Ring,
            ("alltoall", 1) => Linear,
            ("alltoall", 2) => Pairwise,
            // max_requests 0 (the default): every request posted at once, as linear.
            ("alltoall", 4) if !self.max_requests => Linear,
            // Two ranks: one exchange, pairwise's cost at n = 2.
            ("alltoall", 5) if n == 2 => Pairwise,
            _ => return None,
        })
    }
}

/// Open MPI's choice for one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Choice {
    /// Open MPI's name for it: "recursive_doubling".
    pub name: &'static str,
    /// Forced by coll_tuned_<coll>_algorithm, not the fixed rules.
    pub forced: bool,
    /// The model's algorithm of the same cost; None: not modelled.
    #[serde(skip)]
    pub algorithm: Option<Algorithm>,
}

/// An MCA enum value: its number, or its name.
fn number(list: &[&str], value: &str) -> Option<u8> {
    let v = value.trim();
    match v.parse::<u8>() {
        Ok(n) if (n as usize) <= list.len() => Some(n),
        Ok(_) => None,
        Err(_) if v == "ignore" => Some(0),
        Err(_) => list.iter().position(|n| *n == v).map(|i| i as u8 + 1),
    }
}

/// `--mca coll LIST`: "^tuned,..." excludes it; a plain list without it too.
fn excludes_tuned(list: &str) -> bool {
    let list = list.trim();
    let has = |l: &str| l.split(',').any(|c| c.trim() == "tuned");
    match list.strip_prefix('^') {
        Some(rest) => has(rest),
        None => !list.is_empty() && !has(list),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_virtual_racks_choices() {
        // What the LD_PRELOAD probe saw on Open MPI 4.1.4 (docs/model.md).
        for s in [4 * MIB, 8 * MIB, 16 * MIB] {
            assert_eq!(fixed("all_reduce", 4, s), Some(6));
            assert_eq!(fixed("all_gather", 4, s), Some(3));
            assert_eq!(fixed("reduce_scatter", 4, s), Some(3));
            assert_eq!(fixed("alltoall", 4, s), Some(1));
            assert_eq!(fixed("all_reduce", 2, s), Some(6));
            assert_eq!(fixed("all_gather", 2, s), Some(6));
            assert_eq!(fixed("reduce_scatter", 2, s), Some(3));
            assert_eq!(fixed("alltoall", 2, s), Some(2));
        }
        assert_eq!(fixed("broadcast", 4, MIB), None);
    }

    #[test]
    fn boundaries_are_below_not_at() {
        // all_reduce, 4 to 7 ranks: below 8192 B recursive doubling, from it Rabenseifner.
        assert_eq!(fixed("all_reduce", 4, 8191), Some(3));
        assert_eq!(fixed("all_reduce", 4, 8192), Some(6));
        // alltoall on 4 ranks compares one block: 2 MiB buffers are 512 KiB
        // blocks (pairwise), 4 MiB are 1 MiB blocks (linear).
        assert_eq!(fixed("alltoall", 4, 2 * MIB), Some(2));
        assert_eq!(fixed("alltoall", 4, 4 * MIB), Some(1));
        // all_gather, 32 to 63 ranks: blocks from 64 KiB on the ring.
        assert_eq!(fixed("all_gather", 32, 32 * 65535), Some(5));
        assert_eq!(fixed("all_gather", 32, 32 * 65536), Some(4));
        assert_eq!(fixed("all_gather", 5000, 5000 * 4096), Some(5));
    }

    fn env(pairs: &[(&str, &str)]) -> Tuned {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (format!("OMPI_MCA_{k}"), v.to_string()))
            .collect();
        Tuned::from_env(|k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn modelled_choices() {
        let t = Tuned::default();
        let c = t.choose("all_gather", 4, 16 * MIB).unwrap();
        assert_eq!(
            (c.name, c.forced, c.algorithm),
            (
                "recursive_doubling",
                false,
                Some(Algorithm::RecursiveDoubling)
            )
        );
        // 6 ranks: recursive doubling runs Bruck.
        let c = t.choose("all_gather", 6, 16 * MIB).unwrap();
        assert_eq!(c.algorithm, Some(Algorithm::Bruck));
        // 64 ranks, a 128 KiB buffer: butterfly, not modelled.
        let c = t.choose("reduce_scatter", 64, 128 << 10).unwrap();
        assert_eq!((c.name, c.algorithm), ("butterfly", None));
        assert_eq!(t.choose("broadcast", 4, MIB), None);
        assert_eq!(t.choose("all_gather", 1, MIB), None);
    }

    #[test]
    fn the_ring_forced_by_its_number() {
        assert_eq!(
            ring_forced("all_gather").as_deref(),
            Some("--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allgather_algorithm 4")
        );
        assert_eq!(
            ring_forced("reduce_scatter").as_deref(),
            Some(
                "--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_reduce_scatter_algorithm 3"
            )
        );
        assert_eq!(ring_forced("alltoall"), None);
        // Forcing it is read back as the ring.
        let tuned = env(&[
            ("coll_tuned_use_dynamic_rules", "1"),
            ("coll_tuned_allreduce_algorithm", "4"),
        ]);
        let c = tuned.choose("all_reduce", 4, 16 << 20).unwrap();
        assert_eq!(
            (c.name, c.forced, c.algorithm),
            ("ring", true, Some(Algorithm::Ring))
        );
    }

    #[test]
    fn forced_only_with_the_dynamic_rules() {
        let without = env(&[("coll_tuned_allgather_algorithm", "4")]);
        assert_eq!(
            without.choose("all_gather", 4, MIB).unwrap().name,
            "recursive_doubling"
        );
        let with = env(&[
            ("coll_tuned_use_dynamic_rules", "1"),
            ("coll_tuned_allgather_algorithm", "ring"),
            ("coll_tuned_allreduce_algorithm", "4"),
        ]);
        let c = with.choose("all_gather", 4, MIB).unwrap();
        assert_eq!(
            (c.name, c.forced, c.algorithm),
            ("ring", true, Some(Algorithm::Ring))
        );
        assert!(!with.choose("alltoall", 4, MIB).unwrap().forced);
        assert_eq!(
            with.describe(),
            "MPI algorithm: Open MPI 4.1's fixed rules (coll tuned), forced: allreduce ring, allgather ring"
        );
        let file = env(&[
            ("coll_tuned_use_dynamic_rules", "true"),
            ("coll_tuned_dynamic_rules_filename", "/etc/rules.conf"),
        ]);
        assert_eq!(file.choose("all_reduce", 4, MIB), None);
        assert!(file.describe().contains("rules file"));
        assert_eq!(
            env(&[("coll", "^tuned")]).choose("all_reduce", 4, MIB),
            None
        );
        assert!(env(&[("coll", "tuned,self,basic")])
            .choose("all_reduce", 4, MIB)
            .is_some());
    }
}
