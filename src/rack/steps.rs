//! What each step of the acceptance run gave back: how it ended and the
//! results it wrote, read once. A step passes only when it ended well AND its
//! results are there with something in them: a node that never answered, a
//! step that timed out, crashed or was killed, and a missing or empty result
//! file are never a pass.

use super::runner::StepOutcome;
use crate::allpairs::rails::of_rail;
use crate::allpairs::read_csv as read_pairs;
use crate::doctor::output::{read_csv as read_findings, Report};
use crate::doctor::Finding;
use crate::report::csv::read_rows;
use std::io::Read;
use std::path::{Path, PathBuf};

pub struct DoctorStep {
    pub outcome: StepOutcome,
    /// The nodes it was launched on, when the spec names them.
    pub launched_on: Option<Vec<String>>,
    /// Read back from doctor.csv (empty when doctor did not write it).
    pub findings: Vec<Finding>,
    /// The nodes doctor read facts from (doctor.json): the nodes that answered.
    pub nodes: Vec<String>,
    /// Why the findings or the nodes could not be read back.
    pub results_error: Option<String>,
}

/// The most of doctor.json read: each node's facts are a few KiB.
const MAX_DOCTOR_JSON_BYTES: u64 = 256 << 20;

impl DoctorStep {
    /// Reads back what doctor wrote to `csv` and `json`.
    pub fn read(
        outcome: StepOutcome,
        launched_on: Option<Vec<String>>,
        csv: &Path,
        json: &Path,
    ) -> DoctorStep {
        let findings = read_findings(csv).map_err(|e| beside(e, csv));
        // doctor's own file in the report folder, bounded all the same.
        let nodes = crate::input::read_bounded(json, MAX_DOCTOR_JSON_BYTES)
            .map_err(|e| format!("{}: {e}", file_name(json)))
            .and_then(|bytes| {
                serde_json::from_slice::<Report>(&bytes)
                    .map_err(|e| format!("{}: not doctor's JSON: {e}", file_name(json)))
            })
            .map(|r| r.nodes.into_iter().map(|n| n.node).collect::<Vec<_>>())
            .and_then(|nodes| match nodes.is_empty() {
                true => Err(format!("{}: no node in it", file_name(json))),
                false => Ok(nodes),
            });
        let results_error = [findings.as_ref().err(), nodes.as_ref().err()]
            .into_iter()
            .flatten()
            .next()
            .cloned();
        DoctorStep {
            outcome,
            launched_on,
            findings: findings.unwrap_or_default(),
            nodes: nodes.unwrap_or_default(),
            results_error,
        }
    }

    /// doctor exits 0 when it found no error, 1 when it did; either way it
    /// must have written its findings and the nodes it read.
    pub fn passed(&self) -> bool {
        self.answered() && self.outcome.exit == Some(0)
    }

    /// doctor checked the nodes it reports: it ended with its verdict (0 no
    /// error, 1 errors found) and wrote it.
    pub fn answered(&self) -> bool {
        ended_with_a_verdict(&self.outcome) && self.results_error.is_none()
    }

    /// "exit 0", "exit 255", "exit 0, but doctor.json: no such file ...".
    pub fn status(&self) -> String {
        status(&self.outcome, &self.results_error)
    }

    /// The nodes it was launched on that its launcher could not reach, each with
    /// the log's line saying so: none where doctor answered.
    pub fn unreachable(&self) -> Vec<(String, String)> {
        if self.answered() {
            return Vec::new();
        }
        self.launched_on
            .iter()
            .flatten()
            .filter_map(|h| {
                let line = line_naming(&self.outcome.log, h, |l| {
                    UNREACHABLE.iter().any(|m| l.contains(m))
                })?;
                Some((h.clone(), line))
            })
            .collect()
    }
}

/// What ssh (Open MPI's and Slurm's way to a node) prints when a node does not
/// answer: powered off, not in DNS, no route, nothing listening.
const UNREACHABLE: [&str; 6] = [
    "No route to host",
    "Could not resolve hostname",
    "Connection timed out",
    "Connection refused",
    "Host is down",
    "Network is unreachable",
];

pub struct TestStep {
    pub name: String,
    /// Which round of the test (from 1): each round is a launch of its own.
    pub round: usize,
    pub outcome: StepOutcome,
    pub csv: PathBuf,
    pub all_pairs: bool,
    /// With --rails: how many rails, each with its own files (NAME.railR.csv).
    pub rails: usize,
    /// The nodes it was launched on, when the spec names them.
    pub launched_on: Option<Vec<String>>,
    /// The hosts its rows name (a sweep's `hosts` column).
    pub hosts: Vec<String>,
    /// Why its results could not be read back, or hold nothing.
    pub results_error: Option<String>,
}

impl TestStep {
    /// Reads back the results the test wrote to `csv` (to each rail's file of
    /// it with `rails`).
    pub fn read(
        name: &str,
        round: usize,
        outcome: StepOutcome,
        csv: PathBuf,
        (all_pairs, rails): (bool, usize),
        launched_on: Option<Vec<String>>,
    ) -> TestStep {
        let mut step = TestStep {
            name: name.to_string(),
            round,
            outcome,
            all_pairs,
            rails,
            launched_on,
            hosts: Vec::new(),
            results_error: None,
            csv,
        };
        let results = if all_pairs {
            step.result_files().iter().try_for_each(|file| {
                read_pairs(file)
                    .and_then(|r| match r.sizes.is_empty() {
                        true => Err(anyhow::anyhow!("{}: no pair measured", file_name(file))),
                        false => Ok(()),
                    })
                    .map_err(|e| beside(e, file))
            })
        } else {
            read_rows(&step.csv)
                .map(|rows| {
                    for h in rows.iter().flat_map(|r| r.hosts.split(';')) {
                        if !h.is_empty() && !step.hosts.iter().any(|k| k == h) {
                            step.hosts.push(h.to_string());
                        }
                    }
                })
                .map_err(|e| beside(e, &step.csv))
        };
        step.results_error = results.err();
        step
    }

    /// The results files: NAME.csv, or each rail's NAME.railR.csv.
    pub fn result_files(&self) -> Vec<PathBuf> {
        match self.rails {
            0 => vec![self.csv.clone()],
            n => (0..n).map(|r| of_rail(&self.csv, r)).collect(),
        }
    }

    /// "ar", "ar (round 2)": the step as the report names it.
    pub fn title(&self) -> String {
        match self.round {
            0 | 1 => self.name.clone(),
            r => format!("{} (round {r})", self.name),
        }
    }

    /// The files of a round: NAME.csv and NAME.log for the first, NAME.rK.csv
    /// and NAME.rK.log after it (a test's name has no '.', so none clash).
    pub fn file_stem(name: &str, round: usize) -> String {
        match round {
            0 | 1 => name.to_string(),
            r => format!("{name}.r{r}"),
        }
    }

    /// It ran to the end and wrote results. An all-pairs run exits 1 when it
    /// flags pairs by its own thresholds (4 when it cannot tell); its checks
    /// judge the matrix by the spec's.
    pub fn ran(&self) -> bool {
        self.results_error.is_none()
            && ended_with_a_verdict(&self.outcome)
            && (self.outcome.exit == Some(0) || self.all_pairs)
    }

    /// "exit 0", "timed out after 5 s ...", "exit 0, but ar.csv: no rows".
    pub fn status(&self) -> String {
        status(&self.outcome, &self.results_error)
    }

    /// The heatmaps the run drew beside its results files.
    pub fn heatmaps(&self) -> Vec<PathBuf> {
        self.result_files()
            .iter()
            .map(|csv| csv.with_extension("png"))
            .filter(|png| png.exists())
            .collect()
    }
}

/// How a step ended, and what was wrong with its results when it ended well.
fn status(outcome: &StepOutcome, results_error: &Option<String>) -> String {
    match results_error {
        Some(e) if ended_with_a_verdict(outcome) => format!("{}, but {e}", outcome.status()),
        _ => outcome.status(),
    }
}

/// It ended by itself (not stopped at the timeout), with 0, 1 or 4 (passed,
/// failed, could not tell): the exit statuses of a run that judged what it
/// measured (all-pairs exits 4 when a pair measured alone cannot be told).
fn ended_with_a_verdict(outcome: &StepOutcome) -> bool {
    !outcome.timed_out && outcome.start_error.is_none() && matches!(outcome.exit, Some(0 | 1 | 4))
}

/// A reader's error, naming `path` as the report does: by its file name, beside it.
fn beside(e: anyhow::Error, path: &Path) -> String {
    format!("{e:#}").replace(&path.display().to_string(), &file_name(path))
}

pub fn file_name(p: &Path) -> String {
    p.file_name()
        .map_or_else(String::new, |f| f.to_string_lossy().into_owned())
}

/// A host's name without its domain (Open MPI and the logs often drop it); an
/// IP address whole.
pub fn short_name(host: &str) -> &str {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return host;
    }
    host.split('.').next().unwrap_or(host)
}

/// The first line of `log` (its first 64 KiB) naming `host` as a whole word,
/// e.g. "ssh: Could not resolve hostname gpu09: Name or service not known".
pub fn log_line_naming(log: &Path, host: &str) -> Option<String> {
    line_naming(log, host, |_| true)
}

/// The first line of `log` (its first 64 KiB) naming `host` as a whole word
/// for which `pick` holds.
fn line_naming(log: &Path, host: &str, pick: impl Fn(&str) -> bool) -> Option<String> {
    let mut text = String::new();
    let file = std::fs::File::open(log).ok()?;
    // A log with invalid UTF-8 is read up to it: what comes before still helps.
    let _ = file.take(64 << 10).read_to_string(&mut text);
    let name = short_name(host);
    let is_name_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.lines()
        .find(|line| {
            pick(line)
                && line.match_indices(name).any(|(at, _)| {
                    let before = line[..at].chars().next_back();
                    let after = line[at + name.len()..].chars().next();
                    !before.is_some_and(is_name_char) && !after.is_some_and(is_name_char)
                })
        })
        .map(|line| line.trim().chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_line_names_a_host_as_a_word() {
        let dir = std::env::temp_dir().join(format!("rack-steps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("doctor.log");
        std::fs::write(
            &log,
            "starting on gpu010\nssh: Could not resolve hostname gpu01: Name or service not known\n",
        )
        .unwrap();
        assert_eq!(
            log_line_naming(&log, "gpu01.cluster.invalid").as_deref(),
            Some("ssh: Could not resolve hostname gpu01: Name or service not known")
        );
        assert_eq!(log_line_naming(&log, "gpu02"), None);
        assert_eq!(log_line_naming(&dir.join("none.log"), "gpu01"), None);
        assert_eq!(short_name("10.0.0.5"), "10.0.0.5");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
