//! Run metadata shared by every family's rows: the run's id, timestamps, and the
//! environment that shapes a result.

/// Environment that shapes results (NCCL_*, OMPI_MCA_*, UCX_*, FI_*), as sorted K=V.
pub fn relevant_env() -> Vec<String> {
    let mut vars: Vec<String> = std::env::vars()
        .filter(|(k, _)| {
            ["NCCL_", "OMPI_MCA_", "UCX_", "FI_"]
                .iter()
                .any(|p| k.starts_with(p))
        })
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    vars.sort();
    vars
}

pub fn now_utc() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A run's id: its UTC start time and this process's id.
pub fn new_run_id(stamp: chrono::DateTime<chrono::Utc>) -> String {
    format!(
        "{}-{:05}",
        stamp.format("%Y%m%dT%H%M%SZ"),
        std::process::id() % 100_000
    )
}
