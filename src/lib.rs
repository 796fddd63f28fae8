//! fabricbench: what a GPU cluster's fabric really does, measured the way
//! nccl-tests and perftest measure it.
//!
//! - `collective`: the nine collectives, one file each (byte counts, busbw factor,
//!   expected data, the call).
//! - `backend`: where they run (`mpi`: host memory through MPI; `nccl`: GPU memory
//!   through NCCL).
//! - `gpu`: CUDA (driver API, loaded at run time), NCCL discovery, link limits.
//! - `driver`: the one sweep/timing/validation loop behind every binary.
//! - `report`: the result rows and their exporters (nccl-tests table, CSV,
//!   histograms, plots, progress bar).
//! - `limits`: theoretical link limits (named, given, detected from sysfs).
//! - `plot`: the charts of `plot`, `compare` and `--plot`.
//! - `compare`: matching runs and their deltas.
//! - `gpu`: CUDA and NCCL found and loaded at run time; GPU buffers.
//! - `copy_bw`: GPU copy bandwidth per direction against the link limits.
//! - `doctor`: per-node and cross-node configuration checks (the `doctor` binary).
//! - `allpairs`: every pair of ranks measured in rounds of disjoint pairs.
//! - `rack`: the acceptance run of a rack from a TOML spec (the `rack_check` binary).
//! - `verbs`: the perftest-compatible RDMA verbs benchmarks (ib_write_bw, ...).

pub mod allpairs;
pub mod args;
pub mod backend;
pub mod cli;
pub mod collective;
pub mod compare;
pub mod copy_bw;
pub mod datatype;
pub mod doctor;
pub mod driver;
pub mod gpu;
pub mod job;
pub mod limits;
pub mod pattern;
pub mod plot;
pub mod rack;
pub mod report;
pub mod sizes;
pub mod stats;
pub mod sysfs;
pub mod verbs;
pub mod watchdog;
