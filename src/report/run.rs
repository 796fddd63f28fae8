//! Run metadata shared by every family's rows: the run's id, timestamps, and the
//! environment that shapes a result.

use super::RunInfo;
use crate::job::env_snapshot;
use chrono::{DateTime, Utc};

/// Open MPI's MCA parameters a user sets to choose or tune what carries the
/// data (`OMPI_MCA_<name>`): the component frameworks and their parameters, the
/// CUDA support switches, progress and binding. Everything else under
/// OMPI_MCA_ is the launcher's own (orte_*, ess_*, pmix, initial_wdir, the HNP
/// URI with host addresses, session directories, the per-job transport key).
pub const MCA_ALLOWED: &[&str] = &[
    "pml",
    "pml_*",
    "btl",
    "btl_*",
    "mtl",
    "mtl_*",
    "osc",
    "osc_*",
    "coll",
    "coll_*",
    "opal_cuda_support",
    "mpi_cuda_support",
    "mpi_yield_when_idle",
    "mpi_leave_pinned",
    "mpi_leave_pinned_pipeline",
    "hwloc_base_binding_policy",
    "rmaps_base_mapping_policy",
];

/// Parts of a variable's name that mark a secret, never recorded whatever the prefix.
const SECRET_MARKS: &[&str] = &["SECRET", "TOKEN", "PASSW", "CREDENTIAL", "PRIVATE", "_KEY"];

/// Whether a variable shapes results and may go in the CSV: NCCL_*, UCX_*, FI_*,
/// and the OMPI_MCA_ parameters of `MCA_ALLOWED`; never a name marking a secret.
pub fn shapes_results(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if SECRET_MARKS.iter().any(|m| upper.contains(m)) {
        return false;
    }
    if let Some(mca) = name.strip_prefix("OMPI_MCA_") {
        return MCA_ALLOWED.iter().any(|a| match a.strip_suffix('*') {
            Some(prefix) => mca.starts_with(prefix),
            None => mca == *a,
        });
    }
    ["NCCL_", "UCX_", "FI_"].iter().any(|p| name.starts_with(p))
}

/// Environment that shapes results (`shapes_results`), as sorted K=V: as the job
/// started, before MPI_Init set variables of its own (`job::env_snapshot`).
pub fn relevant_env() -> Vec<String> {
    sorted_vars(
        env_snapshot::vars()
            .into_iter()
            .filter(|(k, _)| shapes_results(k)),
    )
}

/// The variables whose names start with one of `prefixes`, as sorted K=V (from
/// the same snapshot).
pub fn env_with_prefixes(prefixes: &[&str]) -> Vec<String> {
    sorted_vars(
        env_snapshot::vars()
            .into_iter()
            .filter(|(k, _)| prefixes.iter().any(|p| k.starts_with(p))),
    )
}

fn sorted_vars(vars: impl Iterator<Item = (String, String)>) -> Vec<String> {
    let mut vars: Vec<String> = vars.map(|(k, v)| format!("{k}={v}")).collect();
    vars.sort();
    vars
}

pub fn now_utc() -> String {
    Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// nccl-tests' TIME_STRING_FORMAT, in local time (-S, -J).
pub fn local_time() -> String {
    chrono::Local::now().format("%Y-%m-%d %H:%M:%S").to_string()
}

/// A UTC time as it names files and runs: "20250102T030405Z".
pub fn compact_utc(stamp: DateTime<Utc>) -> String {
    stamp.format("%Y%m%dT%H%M%SZ").to_string()
}

/// A run's id: its UTC start time and this process's id.
pub fn new_run_id(stamp: DateTime<Utc>) -> String {
    format!("{}-{:05}", compact_utc(stamp), std::process::id() % 100_000)
}

impl RunInfo {
    /// A run of `program` starting at `stamp`: its id and this build's version;
    /// the family fills in what it ran on and how.
    pub fn new(program: &str, stamp: DateTime<Utc>) -> RunInfo {
        RunInfo {
            program: program.to_string(),
            run_id: new_run_id(stamp),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            ..RunInfo::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn only_what_a_user_sets_to_shape_a_result_is_recorded() {
        for kept in [
            "NCCL_IB_HCA",
            "NCCL_DEBUG",
            "UCX_TLS",
            "FI_PROVIDER",
            "OMPI_MCA_pml",
            "OMPI_MCA_btl",
            "OMPI_MCA_btl_tcp_if_include",
            "OMPI_MCA_btl_openib_allow_ib",
            "OMPI_MCA_coll_hcoll_enable",
            "OMPI_MCA_mpi_yield_when_idle",
            "OMPI_MCA_osc",
        ] {
            assert!(shapes_results(kept), "{kept}");
        }
        for dropped in [
            "OMPI_MCA_orte_precondition_transports",
            "OMPI_MCA_orte_hnp_uri",
            "OMPI_MCA_orte_local_daemon_uri",
            "OMPI_MCA_orte_top_session_dir",
            "OMPI_MCA_orte_jobfam_session_dir",
            "OMPI_MCA_ess_base_jobid",
            "OMPI_MCA_ess",
            "OMPI_MCA_pmix",
            "OMPI_MCA_initial_wdir",
            "OMPI_MCA_shmem_RUNTIME_QUERY_hint",
            "OMPI_MCA_mpi_oversubscribe",
            "OMPI_COMM_WORLD_RANK",
            "PMIX_SERVER_URI4",
            "NCCL_SECRET_TOKEN",
            "UCX_PASSWORD",
            "FI_API_KEY",
            "PATH",
            "HOME",
        ] {
            assert!(!shapes_results(dropped), "{dropped}");
        }
    }

    #[test]
    fn a_variable_set_after_the_job_started_is_not_the_users() {
        env_snapshot::take();
        let name = "NCCL_FABRICBENCH_SET_INSIDE_MPI_INIT";
        // As Open MPI's MPI_Init does under srun: after the snapshot, in this process.
        std::env::set_var(name, "1");
        assert!(std::env::var_os(name).is_some());
        assert!(
            !relevant_env().iter().any(|v| v.starts_with(name)),
            "{:?}",
            relevant_env()
        );
    }

    #[test]
    fn ids_and_stamps() {
        let stamp = Utc.with_ymd_and_hms(2025, 1, 2, 3, 4, 5).unwrap();
        assert_eq!(compact_utc(stamp), "20250102T030405Z");
        let id = new_run_id(stamp);
        assert_eq!(
            id,
            format!("20250102T030405Z-{:05}", std::process::id() % 100_000)
        );
        let run = RunInfo::new("copy_bw", stamp);
        assert_eq!(
            (run.program.as_str(), run.run_id, run.tool_version.as_str()),
            ("copy_bw", id, env!("CARGO_PKG_VERSION"))
        );
    }
}
