//! Every binary in bin/ and the clap `Command` it parses its command line with:
//! the one list the reference pages, man pages, completions and the help tests
//! read, so none of them can describe a command line the binary does not take.

use crate::collective::Collective;
use crate::compare::cli::CompareArgs;
use crate::compare::figures::StatsArgs;
use crate::copy_bw::CopyArgs;
use crate::doctor::cli::DoctorArgs;
use crate::plot::cli::PlotArgs;
use crate::rack::cli::RackArgs;
use crate::verbs::Benchmark;
use clap::{ArgGroup, Command, CommandFactory};

/// One binary, by the family whose parser reads its command line.
#[derive(Clone, Copy)]
pub enum Binary {
    Collective(&'static dyn Collective),
    Verbs(Benchmark),
    CopyBw,
    Plot,
    Compare,
    Stats,
    Doctor,
    DoctorMpi,
    RackCheck,
    Docs,
}

/// Which part of the reference a binary belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    Collectives,
    Verbs,
    Gpu,
    Results,
    Rack,
    Maintenance,
}

impl Family {
    pub fn title(self) -> &'static str {
        match self {
            Family::Collectives => "Collectives (nccl-tests compatible)",
            Family::Verbs => "RDMA verbs (perftest compatible)",
            Family::Gpu => "GPU copies",
            Family::Results => "Results: plots and comparisons",
            Family::Rack => "Rack acceptance",
            Family::Maintenance => "Maintenance",
        }
    }
}

impl Binary {
    /// Every binary, collectives and verbs in their usual order, then the tools.
    pub fn all() -> Vec<Binary> {
        let collectives = crate::collective::all().map(Binary::Collective);
        let verbs = Benchmark::ALL.map(Binary::Verbs);
        let tools = [
            Binary::CopyBw,
            Binary::Plot,
            Binary::Compare,
            Binary::Stats,
            Binary::Doctor,
            Binary::DoctorMpi,
            Binary::RackCheck,
            Binary::Docs,
        ];
        collectives.into_iter().chain(verbs).chain(tools).collect()
    }

    /// The command line the binary parses, `--help` included.
    pub fn command(self) -> Command {
        match self {
            Binary::Collective(c) => crate::driver::args::command(c),
            Binary::Verbs(bench) => crate::verbs::flags::command(bench),
            Binary::CopyBw => CopyArgs::command(),
            Binary::Plot => PlotArgs::command(),
            Binary::Compare => CompareArgs::command(),
            Binary::Stats => StatsArgs::command(),
            Binary::Doctor => DoctorArgs::command(),
            Binary::DoctorMpi => crate::doctor::cli::mpi_command(),
            Binary::RackCheck => RackArgs::command(),
            Binary::Docs => super::args::DocsArgs::command(),
        }
    }

    /// The file name in bin/ (without `.rs`), and the command's name.
    pub fn name(self) -> String {
        self.command().get_name().to_string()
    }

    pub fn family(self) -> Family {
        match self {
            Binary::Collective(_) => Family::Collectives,
            Binary::Verbs(_) => Family::Verbs,
            Binary::CopyBw => Family::Gpu,
            Binary::Plot | Binary::Compare | Binary::Stats => Family::Results,
            Binary::Doctor | Binary::DoctorMpi | Binary::RackCheck => Family::Rack,
            Binary::Docs => Family::Maintenance,
        }
    }

    /// The command with only what it offers: hidden arguments (accepted for
    /// nccl-tests' and perftest's command lines, not offered) left out, for
    /// the shell completions, which would otherwise offer them. A hidden
    /// argument's id stays as an empty group, since visible arguments may name
    /// it in their conflicts.
    pub fn offered(self) -> Command {
        let mut full = self.command();
        full.build();
        let (shown, hidden): (Vec<_>, Vec<_>) =
            full.get_arguments().partition(|a| !a.is_hide_set());
        let placeholders = hidden
            .iter()
            .map(|a| a.get_id().clone())
            .chain(full.get_groups().map(|g| g.get_id().clone()))
            .map(ArgGroup::new);
        Command::new(full.get_name().to_string())
            .bin_name(full.get_name().to_string())
            .about(full.get_about().cloned().unwrap_or_default())
            .version(full.get_version().unwrap_or_default().to_string())
            .disable_help_flag(true)
            .disable_version_flag(true)
            .args(shown.into_iter().cloned())
            .groups(placeholders)
    }
}
