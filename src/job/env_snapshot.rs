//! The environment as the user gave it: taken when the job starts, before
//! MPI_Init, because MPI libraries set variables of their own inside it (Open MPI
//! under srun sets OMPI_MCA_hwloc_base_binding_policy=none), and a result must
//! not be attributed to a setting nobody made.

use std::sync::OnceLock;

static AT_START: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// Takes the snapshot (once; later calls keep the first). `Job::start` calls it
/// before MPI starts.
pub fn take() {
    AT_START.get_or_init(|| std::env::vars().collect());
}

/// The variables as they were at the snapshot; the environment now where none was
/// taken (a unit test, a tool that never starts a job).
pub fn vars() -> Vec<(String, String)> {
    match AT_START.get() {
        Some(vars) => vars.clone(),
        None => std::env::vars().collect(),
    }
}
