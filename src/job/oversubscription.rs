//! srun's oversubscribed node: more tasks than CPUs (`srun -O`). mpirun tells
//! Open MPI when it places more ranks than slots, and Open MPI then yields the
//! CPU while it waits; under srun it is not told, busy-polls, and each rank
//! waits for the others' time slices: 70-125 ms per 8-byte allreduce of 4
//! tasks on 2 CPUs, against well under 1 ms yielding. So the job, before
//! MPI_Init reads its parameters, sets what mpirun would have, and says so.

use std::sync::OnceLock;

/// Open MPI's parameter: yield the CPU in its progress loop when nothing progressed.
pub const YIELD_VAR: &str = "OMPI_MCA_mpi_yield_when_idle";

static NOTE: OnceLock<String> = OnceLock::new();

/// The tasks srun placed on this node and the CPUs they have, when the tasks
/// are more: None outside srun or with enough CPUs. `var` reads the
/// environment; `usable` is the CPUs this process may run on (its affinity:
/// a node without CPU confinement lends every core to a step whatever it was
/// allocated, and then more tasks than allocated CPUs is no oversubscription).
pub fn oversubscribed(
    var: &dyn Fn(&str) -> Option<String>,
    usable: usize,
) -> Option<(usize, usize)> {
    let node: usize = var("SLURM_NODEID")?.trim().parse().ok()?;
    let tasks = tasks_on_node(&var("SLURM_STEP_TASKS_PER_NODE")?, node)?;
    let allocated: usize = var("SLURM_CPUS_ON_NODE")?.trim().parse().ok()?;
    let cpus = allocated.max(usable);
    (tasks > cpus).then_some((tasks, cpus))
}

/// Slurm's per-node counts, "2(x3),1": the count of node `node` (0-based).
fn tasks_on_node(list: &str, node: usize) -> Option<usize> {
    let mut first = 0;
    for item in list.split(',') {
        let (count, repeat) = match item.trim().split_once("(x") {
            Some((count, rest)) => (count, rest.strip_suffix(')')?.parse().ok()?),
            None => (item.trim(), 1),
        };
        let count: usize = count.parse().ok()?;
        if node < first + repeat {
            return Some(count);
        }
        first += repeat;
    }
    None
}

/// What to do for `tasks` on `cpus`: the header's line, and whether to set
/// [`YIELD_VAR`] (an Open MPI build where the user did not set it).
fn decide(tasks: usize, cpus: usize, open_mpi: bool, user_set: Option<&str>) -> (String, bool) {
    let what = format!("srun placed {tasks} tasks on a node where they have {cpus} CPU(s)");
    match (open_mpi, user_set) {
        (true, None) => (
            format!(
                "{what}: Open MPI told to yield while it waits ({YIELD_VAR}=1, as mpirun does \
                 when oversubscribed); times include the scheduler's"
            ),
            true,
        ),
        (true, Some(v)) => (
            format!(
                "{what}: {YIELD_VAR}={v} as given; with 0 the ranks busy-poll and wait for each \
                 other's time slices (about 100 ms per small call)"
            ),
            false,
        ),
        (false, _) => (
            format!("{what}: the ranks may busy-poll and wait for each other's time slices"),
            false,
        ),
    }
}

/// Before MPI_Init, in the job's one thread: under an oversubscribed srun,
/// tell Open MPI to yield (unless the user chose) and keep the header's line.
pub fn yield_if_oversubscribed() {
    let var = |name: &str| std::env::var(name).ok();
    let usable = std::thread::available_parallelism().map_or(1, |n| n.get());
    let Some((tasks, cpus)) = oversubscribed(&var, usable) else {
        return;
    };
    let open_mpi = super::provenance::MPI_BUILT.starts_with("Open MPI");
    let (note, set) = decide(tasks, cpus, open_mpi, var(YIELD_VAR).as_deref());
    if set {
        // Read by Open MPI inside MPI_Init; after env_snapshot, so the CSV's
        // env column does not attribute it to the user (the header's line does).
        std::env::set_var(YIELD_VAR, "1");
    }
    let _ = NOTE.set(note);
}

/// The header's line when this process's node is oversubscribed.
pub fn note() -> Option<String> {
    NOTE.get().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::fake_env as env;

    #[test]
    fn per_node_counts_expand() {
        assert_eq!(tasks_on_node("4", 0), Some(4));
        assert_eq!(tasks_on_node("2(x3),1", 2), Some(2));
        assert_eq!(tasks_on_node("2(x3),1", 3), Some(1));
        assert_eq!(tasks_on_node("2(x3),1", 4), None);
        assert_eq!(tasks_on_node("x", 0), None);
    }

    #[test]
    fn more_tasks_than_cpus_under_srun_is_oversubscribed() {
        // srun -O -N 1 -n 4 on a node of 2 CPUs, as seen inside a task: CR_CPU
        // allocates 1 CPU; without confinement the task may run on both.
        let srun_o = env(&[
            ("SLURM_NODEID", "0"),
            ("SLURM_STEP_TASKS_PER_NODE", "4"),
            ("SLURM_CPUS_ON_NODE", "1"),
        ]);
        assert_eq!(oversubscribed(&srun_o, 2), Some((4, 2)));
        // The same step on a 64-core node without confinement: room for all.
        assert_eq!(oversubscribed(&srun_o, 64), None);
        // Second node of "1(x2)": one task on one allocated CPU.
        let one_each = env(&[
            ("SLURM_NODEID", "1"),
            ("SLURM_STEP_TASKS_PER_NODE", "1(x2)"),
            ("SLURM_CPUS_ON_NODE", "1"),
        ]);
        assert_eq!(oversubscribed(&one_each, 1), None);
        // Tasks bound one CPU each (task/affinity): the allocation counts.
        let bound = env(&[
            ("SLURM_NODEID", "0"),
            ("SLURM_STEP_TASKS_PER_NODE", "8"),
            ("SLURM_CPUS_ON_NODE", "8"),
        ]);
        assert_eq!(oversubscribed(&bound, 1), None);
    }

    #[test]
    fn outside_a_step_nothing_is_oversubscribed() {
        assert_eq!(oversubscribed(&env(&[]), 1), None);
        // sbatch's script: the job's variables, no step's.
        let batch = env(&[("SLURM_NODEID", "0"), ("SLURM_CPUS_ON_NODE", "1")]);
        assert_eq!(oversubscribed(&batch, 1), None);
    }

    #[test]
    fn open_mpi_is_told_to_yield_unless_the_user_chose() {
        let (note, set) = decide(4, 2, true, None);
        assert!(set);
        assert!(
            note.starts_with("srun placed 4 tasks on a node where they have 2 CPU(s)")
                && note.contains("OMPI_MCA_mpi_yield_when_idle=1"),
            "{note}"
        );
        let (note, set) = decide(4, 2, true, Some("0"));
        assert!(!set);
        assert!(
            note.contains("OMPI_MCA_mpi_yield_when_idle=0 as given"),
            "{note}"
        );
        let (note, set) = decide(4, 2, false, None);
        assert!(!set);
        assert!(!note.contains(YIELD_VAR), "{note}");
    }
}
