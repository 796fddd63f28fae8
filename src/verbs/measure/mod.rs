//! The timed loops and what they measure: `clock`, the loops' clock; `bw` and
//! `lat`, the bandwidth and latency tests; `duration`, -D and --run_infinitely;
//! `rounds`, --rounds' interleaved order; `validate`, `rdma_check` and `ring`,
//! --data_validation; `cpu_util`, --cpu_util; `counters`, the fabric counters
//! around each size.

pub mod bw;
pub mod clock;
pub mod counters;
pub mod cpu_util;
pub mod duration;
pub mod lat;
pub mod rdma_check;
pub mod ring;
pub mod rounds;
pub mod validate;
