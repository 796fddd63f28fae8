//! Which launcher started this process, read from the variables it sets, and the
//! refusal when that launcher is not this binary's MPI: under another MPI's
//! launcher every process initialises a world of one, and N one-rank jobs would
//! measure nothing together and race for the same output files.

use super::provenance;

/// The launchers' variables, with the process count each names.
const SIZE_VARS: &[(&str, Launcher)] = &[
    ("OMPI_COMM_WORLD_SIZE", Launcher::OpenMpi),
    ("PMIX_SIZE", Launcher::Pmix),
    ("PMI_SIZE", Launcher::Pmi),
    ("MPI_LOCALNRANKS", Launcher::Hydra),
    // srun's own count of the step's tasks; sbatch's script does not have it.
    ("SLURM_STEP_NUM_TASKS", Launcher::Srun),
];

/// Whether an MPI launcher (mpirun, mpiexec, srun with PMI/PMIx) started this
/// process, from the variables the launchers set.
pub fn launched_by_mpi() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|var| std::env::var_os(var).is_some())
}

/// Whether any launcher started this process: an MPI launcher, or one that names
/// a process count (srun without PMI), whose processes would each be a world of
/// one that [`mismatch`] refuses. A tool with an MPI twin hands such a run to it.
pub fn launched() -> bool {
    launched_by_mpi()
        || SIZE_VARS
            .iter()
            .any(|(var, _)| std::env::var_os(var).is_some())
}

/// Whose launcher set a size variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Launcher {
    OpenMpi,
    Pmix,
    Pmi,
    Hydra,
    Srun,
}

impl Launcher {
    /// The launcher in words. PMI_SIZE is Hydra's (MPICH, Intel MPI, MVAPICH:
    /// it also sets MPI_LOCALNRANKS) unless srun set it (`srun --mpi=pmi2`).
    fn describe(self, var: &dyn Fn(&str) -> Option<String>) -> &'static str {
        let srun = var("SLURM_STEP_NUM_TASKS").is_some();
        match self {
            Launcher::OpenMpi => "Open MPI's mpirun",
            Launcher::Pmix if srun => "srun --mpi=pmix",
            Launcher::Pmix => "a PMIx launcher (Open MPI 5's mpirun or prterun)",
            Launcher::Pmi if srun => "srun --mpi=pmi2",
            Launcher::Pmi | Launcher::Hydra => "MPICH's mpiexec (Hydra: MPICH, Intel MPI, MVAPICH)",
            Launcher::Srun => "srun",
        }
    }
}

/// The refusal when a launcher started several processes but MPI gives this one
/// a world of one; None when they agree. `var` reads the environment.
pub fn mismatch(world_size: usize, var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if world_size != 1 {
        return None;
    }
    let (name, n, launcher) = SIZE_VARS.iter().find_map(|&(name, launcher)| {
        let n: usize = var(name)?.trim().parse().ok()?;
        (n > 1).then_some((name, n, launcher))
    })?;
    // Open MPI's mpicc is the default `mpicc`; any other MPI builds in a folder of its own.
    let rebuild = match launcher {
        Launcher::OpenMpi => "Open MPI's (cargo build with Open MPI's mpicc)",
        _ => "the launcher's (MPICH: MPICC=mpicc.mpich cargo build --target-dir target/mpich)",
    };
    let launcher = launcher.describe(var);
    let mpi = provenance::mpi_running();
    Some(format!(
        "{launcher} started {n} processes ({name}={n}) but this binary's MPI, {mpi}, gives \
         each a world of 1: the launcher is not the binary's MPI; start it with {}, or build \
         fabricbench against {rebuild}; see docs/launching.md",
        own_launcher(provenance::MPI_BUILT)
    ))
}

/// The launcher that goes with the MPI this binary was built against.
fn own_launcher(built: &str) -> String {
    match built.split(' ').next() {
        Some("Open") => format!("{built}'s mpirun"),
        Some("MPICH") => format!("{built}'s mpiexec (mpiexec.mpich on Debian and Ubuntu)"),
        _ => format!("{built}'s mpiexec"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::fake_env as env;

    #[test]
    fn a_launcher_of_several_processes_and_a_world_of_one_is_refused() {
        let hydra = env(&[
            ("PMI_SIZE", "2"),
            ("MPI_LOCALNRANKS", "2"),
            ("PMI_RANK", "1"),
        ]);
        let m = mismatch(1, &hydra).unwrap();
        assert!(m.starts_with("MPICH's mpiexec (Hydra"), "{m}");
        assert!(
            m.contains("(PMI_SIZE=2)") && m.contains("world of 1"),
            "{m}"
        );
        assert!(
            m.contains(provenance::MPI_BUILT) && m.contains("MPICC=mpicc.mpich"),
            "{m}"
        );
        assert_eq!(mismatch(2, &hydra), None, "the worlds agree");
        let ompi = env(&[("OMPI_COMM_WORLD_SIZE", "3")]);
        assert!(mismatch(1, &ompi)
            .unwrap()
            .starts_with("Open MPI's mpirun started 3"));
        let srun = env(&[("PMIX_SIZE", "4"), ("SLURM_STEP_NUM_TASKS", "4")]);
        assert!(mismatch(1, &srun)
            .unwrap()
            .starts_with("srun --mpi=pmix started 4"));
    }

    #[test]
    fn one_process_or_no_launcher_is_no_mismatch() {
        assert_eq!(mismatch(1, &env(&[])), None);
        assert_eq!(mismatch(1, &env(&[("PMI_SIZE", "1")])), None);
        // sbatch's script: the job's task count, but no step of several tasks.
        assert_eq!(mismatch(1, &env(&[("SLURM_NTASKS", "4")])), None);
        assert_eq!(mismatch(1, &env(&[("PMI_SIZE", "x")])), None);
    }
}
