//! All-pairs: every pair of ranks measured on its own, in rounds of disjoint pairs
//! (`schedule`), so one slow link or node stands out instead of slowing a
//! collective.
//!
//! - `runner`: the rounds on every rank and the gathering on rank 0, independent
//!   of what a pair measurement is (`PairMeasure`): `backend` measures any
//!   collective backend's `exchange` for `sendrecv_perf --all-pairs` (MPI host
//!   memory or NCCL GPU memory), and the RDMA verbs pair (ib_write_bw/ib_write_lat)
//!   plugs in from `verbs::pairs`;
//! - `matrix`: the N x N results per size (time, algbw, wrong bytes when
//!   validated) and their CSV, which rack_check reads back;
//! - `counters`: the fabric counters around each round, attributed to its pairs;
//! - `judging`: the thresholds, the pairs that cross them and the suspect node;
//! - `confirm`: each pair over `confirm::ROUNDS` rounds with its interval, and the
//!   suspects measured again alone before they are named; `alone`: those
//!   re-measurements as a CSV beside the matrices, for rack_check;
//! - `table` and `heatmap`: what rank 0 prints and draws;
//! - `rails`: `--rails`, all-pairs once a rail over TCP on each rail's netdev.

pub mod alone;
pub mod backend;
pub mod confirm;
pub mod counters;
pub mod heatmap;
pub mod judging;
pub mod matrix;
pub mod rails;
pub mod runner;
pub mod sample;
pub mod schedule;
pub mod table;

pub use judging::{gbs, PairsVerdict, SlowPair, Thresholds, JUDGE_SIZE};
pub use matrix::{labels, read_csv, write_csv, Matrix, Metric, PairResults, SizeMatrices};
pub(crate) use runner::run_pairs;
pub use runner::{measure_all_pairs, PairMeasure, PairRun, PairsOf};
pub use sample::PairSample;
pub use table::write_table;
