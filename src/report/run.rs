//! Run metadata shared by every family's rows: the run's id, timestamps, and the
//! environment that shapes a result.

use super::RunInfo;
use chrono::{DateTime, Utc};

/// Environment that shapes results (NCCL_*, OMPI_MCA_*, UCX_*, FI_*), as sorted K=V.
pub fn relevant_env() -> Vec<String> {
    env_with_prefixes(&["NCCL_", "OMPI_MCA_", "UCX_", "FI_"])
}

/// The variables whose names start with one of `prefixes`, as sorted K=V.
pub fn env_with_prefixes(prefixes: &[&str]) -> Vec<String> {
    let mut vars: Vec<String> = std::env::vars()
        .filter(|(k, _)| prefixes.iter().any(|p| k.starts_with(p)))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    vars.sort();
    vars
}

pub fn now_utc() -> String {
    Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
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
