//! `copy_bw`: what a GPU's copy engines move, in each direction, against the limit
//! of the path they use (nvbandwidth's core): host to device and device to host
//! from pinned memory near the GPU (PCIe, sysfs), device to device within a GPU
//! (memory, NVML), and between every ordered pair of GPUs (NVLink from NVML, else
//! PCIe). Each copy is timed with CUDA events, per iteration, into the same
//! percentiles, CSV rows and table style as the collectives, and checked byte for
//! byte afterwards.
//!
//! - `args`: the command line and its plan;
//! - `gpus`: the GPUs, where they sit (sysfs) and peer access;
//! - `limits`: what bounds each copy;
//! - `copy`: the one copy loop;
//! - `session`: one run, its results handed to `report`'s exporters.

mod args;
mod copy;
mod gpus;
mod limits;
mod session;

pub use args::{CopyArgs, CopyPlan};

use crate::cli::parse_one_line;
use crate::job::{self, Group, Start};
use std::process::ExitCode;

/// The `copy_bw` binary.
pub fn main() -> ExitCode {
    job::main(Start::Alone, "copy_bw", |job, _program| {
        let args: CopyArgs = parse_one_line(std::env::args_os())?;
        let plan = args.plan()?;
        plan.check_memory(crate::backend::host_memory(1))?;
        Ok(session::run(&args, plan, job.host(0))?)
    })
}
