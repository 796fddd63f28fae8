//! fabricbench: what a GPU cluster's fabric really does, measured the way
//! nccl-tests and perftest measure it.
//!
//! Layers, top to bottom (each uses only its own and those below; `tests/layers.rs`
//! checks it):
//! - documentation: `docgen` (the reference, man pages and completions, from
//!   every binary's command line, the CSV row and the exit statuses);
//! - families: `driver` (the collective binaries, flags in `driver::args`), `allpairs`,
//!   `verbs`, `copy_bw`, `doctor`, `rack`, `compare`;
//! - backends and transport: `backend`, `collective` (one file per collective),
//!   `gpu` (CUDA and NCCL loaded at run time), `watchdog` (`-T`);
//! - report: `report` (rows and the exporters), `limits`, `model` (the
//!   expected figure of every row), `plot`;
//! - foundation: `job` (the world, agreement, exit statuses and the one exit
//!   policy), `cli`, `input` (the one bounded reader of a file something names),
//!   `output` (where every output file goes and how it is made), `sysfs` (the one
//!   reader of /sys and /proc), `sizes`, `stats`,
//!   `datatype`, `pattern`, `faults` (the fault-injection hooks the tests set).

pub mod allpairs;
pub mod backend;
pub mod cli;
pub mod collective;
pub mod compare;
pub mod copy_bw;
pub mod datatype;
pub mod docgen;
pub mod doctor;
pub mod driver;
pub mod faults;
pub mod gpu;
pub mod input;
pub mod job;
pub mod limits;
pub mod model;
pub mod nccl_names;
pub mod output;
pub mod pattern;
pub mod plot;
pub mod rack;
pub mod report;
pub mod sizes;
pub mod stats;
pub mod sysfs;
pub mod verbs;
pub mod watchdog;
