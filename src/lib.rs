//! fabricbench: what a GPU cluster's fabric really does, measured the way
//! nccl-tests and perftest measure it.
//!
//! - `collective`: the nine collectives, one file each (byte counts, busbw factor,
//!   expected data, the call).
//! - `backend`: where they run (`mpi`: host memory through MPI).
//! - `driver`: the one sweep/timing/validation loop behind every binary.
//! - `report`: the result rows and their exporters (nccl-tests table, CSV).
//! - `verbs`: the perftest-compatible RDMA verbs benchmarks (ib_write_bw, ...).

pub mod args;
pub mod backend;
pub mod collective;
pub mod datatype;
pub mod driver;
pub mod pattern;
pub mod report;
pub mod sizes;
pub mod stats;
pub mod verbs;
pub mod watchdog;
pub mod world;
