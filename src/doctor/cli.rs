//! The `doctor` and `doctor-mpi` binaries: every rank reads its node, rank 0
//! gathers the facts, checks, prints the table and writes the CSV and JSON.
//! `doctor` alone is one rank without MPI (it starts where no libmpi is
//! installed); started by a launcher it becomes `doctor-mpi`, which gathers over MPI.

use super::facts::NodeFacts;
use super::output::{write_csv, write_json, write_table, Report};
use super::ports::HcaFilter;
use super::{check_with, collect, count, one_per_node, Finding, Selection, Severity};
use crate::cli::{parse_with, real, Rule};
use crate::job::{self, provenance, Alone, ExitStatus, Failure, Group, Start, UsageError};
use crate::output::{check_file, Existing, FileFlag, Outputs};
use crate::sysfs::rdma::MAX_PORT_GBIT_PER_S;
use crate::sysfs::Root;
use clap::{Command, CommandFactory, Parser};
use std::path::PathBuf;
use std::process::ExitCode;

/// Checks that every node is configured alike and as RDMA needs it: RDMA ports,
/// RoCE GIDs, memlock, GPUDirect and PCIe links, NCCL's environment, and what
/// must match across nodes. Run one rank per node under mpirun (or srun), or
/// alone: alone it needs no MPI library; under a launcher it runs doctor-mpi.
#[derive(Parser, Debug)]
#[command(name = "doctor", version = provenance::version_without_mpi())]
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
    #[arg(long = "port-rate", value_parser = real(PORT_RATE), allow_hyphen_values = true)]
    pub port_rate: Option<f64>,
    /// Write the findings to this CSV (a new file)
    #[arg(long = "csv")]
    pub csv: Option<PathBuf>,
    /// Write the findings and every node's facts to this JSON file (a new file)
    #[arg(long = "json")]
    pub json: Option<PathBuf>,
}

/// The twin that gathers over MPI.
pub const MPI_TWIN: &str = "doctor-mpi";

/// `doctor`: one node without MPI, or, started by a launcher, `doctor-mpi`.
pub fn main() -> ExitCode {
    if job::launcher::launched() {
        return job::twin::become_twin("doctor", MPI_TWIN);
    }
    job::tool_main("doctor", || {
        run(&Alone::here(), "doctor", DoctorArgs::command())
    })
}

/// `doctor-mpi`: every rank of an MPI job (a plain start is a world of one).
pub fn main_mpi() -> ExitCode {
    let program = job::program_name(MPI_TWIN);
    job::main(Start::Mpi, &program, |job, program| {
        run(job, program, mpi_command())
    })
}

/// `doctor-mpi`'s command line: doctor's, with the MPI it runs on in --version.
pub fn mpi_command() -> Command {
    DoctorArgs::command()
        .name(MPI_TWIN)
        .version(provenance::version())
        .about("doctor across nodes, gathering every node's facts over MPI: doctor runs it when a launcher (mpirun, srun) starts doctor")
}

/// Every rank checks its flags (all stop together on a mistake), reads its node
/// and sends the facts to rank 0, which checks them and writes the outputs.
fn run(job: &dyn Group, program: &str, command: Command) -> Result<ExitStatus, Failure> {
    let parsed: Result<DoctorArgs, UsageError> = parse_with(command, std::env::args_os());
    let root = job.rank() == 0;
    // Rank 0 writes the outputs, so it alone checks where they go.
    let mine = parsed.and_then(valid).and_then(|args| match root {
        true => outputs_writable(args),
        false => Ok(args),
    });
    let args = job::agree(job, program, ExitStatus::Usage, mine)?;
    let selection = Selection {
        node_name: args.node_name.clone(),
        hcas: args.hca.clone(),
        port_rate_gbps: args.port_rate,
    };
    let facts = collect(&Root::new(&args.sysfs_root), &selection);
    let gathered = job.all_gather_bytes(&serde_json::to_vec(&facts).unwrap_or_default());
    if !root {
        return Ok(ExitStatus::Ok);
    }
    let mut all = Vec::new();
    for (rank, bytes) in gathered.iter().enumerate() {
        match serde_json::from_slice::<NodeFacts>(bytes) {
            Ok(node) => all.push(node),
            Err(e) => {
                eprintln!("{program}: error: the facts of rank {rank} do not decode: {e}");
                return Ok(ExitStatus::Failed);
            }
        }
    }
    let mut named = Vec::new();
    let nodes = one_per_node(all, &mut named);
    Ok(report(&args, nodes, named))
}

/// --port-rate: a rate sysfs can report (1X SDR, the slowest, is 2.5 Gb/s).
const PORT_RATE: Rule = Rule {
    least: 1.0,
    above: false,
    most: MAX_PORT_GBIT_PER_S,
    what: "the expected rate in Gb/s",
    example: "400",
};

/// The flags' values that clap cannot check.
fn valid(args: DoctorArgs) -> Result<DoctorArgs, UsageError> {
    if !args.sysfs_root.is_dir() {
        return Err(UsageError(format!(
            "--sysfs-root {}: not a directory; give the root that holds sys/ and proc/",
            args.sysfs_root.display()
        )));
    }
    Ok(args)
}

/// --csv and --json name new files that can be created, and not one file.
fn outputs_writable(args: DoctorArgs) -> Result<DoctorArgs, UsageError> {
    for (flag, example, path) in [
        ("--csv", "doctor.csv", &args.csv),
        ("--json", "doctor.json", &args.json),
    ] {
        let output = FileFlag {
            flag,
            example,
            existing: Existing::Refused { what: "findings" },
        };
        check_file(&output, path.as_deref())?;
    }
    Outputs::new()
        .file("--csv", args.csv.as_deref())
        .file("--json", args.json.as_deref())
        .distinct()?;
    Ok(args)
}

/// `named`: the findings about the nodes' names (`one_per_node`).
fn report(args: &DoctorArgs, nodes: Vec<NodeFacts>, named: Vec<Finding>) -> ExitStatus {
    let findings = check_with(&nodes, named);
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
    // A file that could not be written (a full disk) is a failure of the run,
    // as it is for the benchmarks, not a mistake in the command line.
    if failed_write || count(&findings, Severity::Error) > 0 {
        ExitStatus::Failed
    } else {
        ExitStatus::Ok
    }
}
