//! The `doctor` binary: every rank reads its node, rank 0 gathers the facts over
//! MPI, checks, prints the table and writes the CSV and JSON.

use super::output::{write_csv, write_json, write_table, Report};
use super::ports::HcaFilter;
use super::{check, collect, count, one_per_node, NodeFacts, Selection, Severity};
use crate::args::parse_one_line;
use crate::job::world::World;
use crate::sysfs::Root;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit statuses: 1 when an error was found, 2 for a usage error.
const EXIT_ERRORS: u8 = 1;
const EXIT_USAGE: u8 = 2;

/// Checks that every node is configured alike and as RDMA needs it: RDMA ports,
/// RoCE GIDs, memlock, GPUDirect and PCIe links, NCCL's environment, and what
/// must match across nodes. Run one rank per node under mpirun, or alone.
#[derive(Parser, Debug)]
#[command(name = "doctor", version)]
pub struct DoctorArgs {
    /// Read /sys and /proc under this directory (a fixture tree, a mounted image)
    #[arg(long = "sysfs-root", default_value = "/")]
    pub sysfs_root: PathBuf,
    /// Name this node in the findings (default: its host name); lets one host act as several nodes
    #[arg(long = "node-name")]
    pub node_name: Option<String>,
    /// Check only these RDMA devices, as DEV or DEV:PORT, comma-separated (default: all)
    #[arg(long = "hca", value_delimiter = ',')]
    pub hca: Vec<HcaFilter>,
    /// The rate every checked port should run at, in Gb/s (e.g. 400): slower ports are errors
    #[arg(long = "port-rate")]
    pub port_rate: Option<f64>,
    /// Write the findings to this CSV (a new file)
    #[arg(long = "csv")]
    pub csv: Option<PathBuf>,
    /// Write the findings and every node's facts to this JSON file (a new file)
    #[arg(long = "json")]
    pub json: Option<PathBuf>,
}

pub fn main() -> ExitCode {
    let world = match World::init() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("doctor: error: {e:#}");
            return ExitCode::from(EXIT_ERRORS);
        }
    };
    let parsed: Result<DoctorArgs, _> = parse_one_line(std::env::args_os());
    let args = parsed.as_ref().ok();
    let mine = args.map(|a| {
        let selection = Selection {
            node_name: a.node_name.clone(),
            hcas: a.hca.clone(),
            port_rate_gbps: a.port_rate,
        };
        collect(&Root::new(&a.sysfs_root), &selection)
    });
    let problem = match (&parsed, args) {
        (Err(e), _) => Some(e.0.clone()),
        (_, Some(a)) if !a.sysfs_root.is_dir() => Some(format!(
            "--sysfs-root {}: not a directory; give the root that holds sys/ and proc/",
            a.sysfs_root.display()
        )),
        (_, Some(a)) if a.port_rate.is_some_and(|r| r.is_nan() || r <= 0.0) => {
            Some("--port-rate: give the expected rate in Gb/s, e.g. --port-rate 400".into())
        }
        _ => None,
    };
    // Every rank takes part in the gather, even one with bad flags (it sends null),
    // so none waits for ever.
    let payload: Option<&NodeFacts> = mine.as_ref().filter(|_| problem.is_none());
    let gathered: Vec<Option<NodeFacts>> = world
        .all_gather_bytes(&serde_json::to_vec(&payload).unwrap_or_default())
        .iter()
        .map(|p| serde_json::from_slice(p).ok().flatten())
        .collect();
    let code = if !world.is_root() {
        if let Some(msg) = &problem {
            eprintln!("doctor: rank {}: error: {msg}", world.rank);
        }
        0
    } else if let Some(msg) = problem {
        eprintln!("doctor: error: {msg}");
        EXIT_USAGE
    } else if let Some(bad) = gathered.iter().position(Option::is_none) {
        eprintln!("doctor: error: rank {bad} was started with bad flags (its error is above); start every rank with valid flags");
        EXIT_USAGE
    } else {
        let all: Vec<NodeFacts> = gathered.into_iter().flatten().collect();
        report(args.expect("flags parsed on rank 0"), one_per_node(all))
    };
    drop(world);
    ExitCode::from(code)
}

fn report(args: &DoctorArgs, nodes: Vec<NodeFacts>) -> u8 {
    let findings = check(&nodes);
    let mut stdout = std::io::stdout();
    if let Err(e) = write_table(&mut stdout, &nodes, &findings) {
        eprintln!("doctor: error: cannot print the table: {e}");
    }
    let mut failed_write = false;
    if let Some(path) = &args.csv {
        if let Err(e) = write_csv(path, &findings) {
            eprintln!("doctor: error: {e:#}");
            failed_write = true;
        }
    }
    if let Some(path) = &args.json {
        let report = Report {
            nodes,
            findings: findings.clone(),
        };
        if let Err(e) = write_json(path, &report) {
            eprintln!("doctor: error: {e:#}");
            failed_write = true;
        }
    }
    if failed_write {
        EXIT_USAGE
    } else if count(&findings, Severity::Error) > 0 {
        EXIT_ERRORS
    } else {
        0
    }
}
