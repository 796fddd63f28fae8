//! The acceptance report: summary.md in the report directory, with the verdict,
//! one row per check, the failing nodes and pairs, and links to every CSV, log
//! and plot beside it.

use super::check_result::{CheckResult, Verdict};
use super::markdown::{code, text};
use super::nodes::NodeVerdict;
use super::steps::{file_name, DoctorStep, TestStep};
use crate::doctor::output::{counts, plural};
use crate::doctor::{Finding, Severity};
use std::fmt::Write;
use std::path::Path;

/// One row of the verdict table: a step or a check.
pub struct VerdictRow {
    pub what: String,
    pub measured: String,
    pub threshold: String,
    pub verdict: Verdict,
    /// Why a check failed (nodes, pairs), or notes.
    pub details: Vec<String>,
}

pub struct RunReport {
    pub name: String,
    pub spec_file: String,
    pub started: String,
    pub doctor: Option<DoctorStep>,
    pub tests: Vec<TestStep>,
    pub checks: Vec<CheckResult>,
    /// Every node, with what failed on it.
    pub nodes: Vec<NodeVerdict>,
}

fn link(p: &Path) -> String {
    let f = file_name(p);
    format!("[{}]({f})", text(&f))
}

fn verdict_cell(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Pass => "PASS",
        Verdict::Fail => "**FAIL**",
        Verdict::Inconclusive => "*INCONCLUSIVE*",
    }
}

/// checks.json: each check's verdict and, for a check judged on rounds, its
/// median, 95% interval, rounds, re-measures and the rounds that would resolve it.
pub fn checks_json(checks: &[CheckResult]) -> String {
    let list: Vec<serde_json::Value> = checks
        .iter()
        .map(|c| {
            let rounds = c.rounds.as_ref().map(|r| {
                serde_json::json!({
                    "median": r.estimate.value,
                    "interval_lo": r.estimate.interval.map(|i| i.lo),
                    "interval_hi": r.estimate.interval.map(|i| i.hi),
                    "unit": r.unit,
                    "rounds": r.estimate.rounds,
                    "remeasured": r.remeasured,
                    "threshold": r.edge,
                    "rounds_to_resolve": match c.verdict {
                        Verdict::Inconclusive => r.to_resolve(),
                        _ => None,
                    },
                })
            });
            serde_json::json!({
                "check": c.label,
                "verdict": c.verdict,
                "measured": c.measured,
                "threshold": c.threshold,
                "details": c.details,
                "rounds": rounds,
            })
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&serde_json::json!({ "checks": list }))
        .expect("JSON of plain values");
    text.push('\n');
    text
}

impl RunReport {
    pub fn failed_steps(&self) -> usize {
        let doctor = self.doctor.as_ref().is_some_and(|d| !d.passed()) as usize;
        doctor + self.tests.iter().filter(|t| !t.ran()).count()
    }

    pub fn failed_checks(&self) -> usize {
        self.count(Verdict::Fail)
    }

    fn count(&self, v: Verdict) -> usize {
        self.checks.iter().filter(|c| c.verdict == v).count()
    }

    /// FAIL when a step or check failed; else INCONCLUSIVE when a check could
    /// not tell; else PASS.
    pub fn verdict(&self) -> Verdict {
        if self.failed_steps() + self.failed_checks() > 0 {
            Verdict::Fail
        } else if self.count(Verdict::Inconclusive) > 0 {
            Verdict::Inconclusive
        } else {
            Verdict::Pass
        }
    }

    /// The verdict line, also printed by rack_check.
    pub fn headline(&self) -> String {
        let total = self.checks.len() + self.tests.len() + self.doctor.is_some() as usize;
        let failed = self.failed_checks() + self.failed_steps();
        if failed == 0 && self.checks.is_empty() {
            // What passed is that every step ran: say that no figure was judged.
            format!("PASS: {total} of {total} steps passed; no [[check]]: no figure was judged")
        } else if failed == 0 && self.verdict() == Verdict::Inconclusive {
            format!(
                "INCONCLUSIVE: {} of {total} checks could not tell (their interval lies across the threshold); nothing failed",
                self.count(Verdict::Inconclusive)
            )
        } else if failed == 0 {
            format!("PASS: {total} of {total} steps and checks passed")
        } else {
            format!("FAIL: {failed} of {total} steps and checks failed")
        }
    }

    /// The verdict table: doctor, each test's run, then each check.
    pub fn verdict_rows(&self) -> Vec<VerdictRow> {
        let mut rows = Vec::new();
        if let Some(d) = &self.doctor {
            rows.push(VerdictRow {
                what: format!("doctor ({})", d.status()),
                measured: match &d.results_error {
                    None => format!(
                        "{} on {}",
                        counts(&d.findings),
                        plural(d.nodes.len(), "node")
                    ),
                    Some(_) => "no findings read".into(),
                },
                threshold: "no error".into(),
                verdict: Verdict::of(d.passed()),
                details: Vec::new(),
            });
        }
        for t in &self.tests {
            rows.push(VerdictRow {
                what: format!("test {} ran", t.title()),
                measured: format!("{} in {:.1} s", t.status(), t.outcome.seconds),
                threshold: "results written".into(),
                verdict: Verdict::of(t.ran()),
                details: Vec::new(),
            });
        }
        for c in &self.checks {
            rows.push(VerdictRow {
                what: c.label.clone(),
                measured: c.measured.clone(),
                threshold: c.threshold.clone(),
                verdict: c.verdict,
                details: c.details.clone(),
            });
        }
        rows
    }

    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "# Rack acceptance: {}\n", text(&self.name));
        let _ = writeln!(md, "**{}**\n", self.headline());
        let _ = writeln!(
            md,
            "Spec [{0}]({0}), started {1}, fabricbench {2}.\n",
            self.spec_file,
            self.started,
            env!("CARGO_PKG_VERSION")
        );
        md.push_str("| # | check | measured | threshold | result |\n|---|---|---|---|---|\n");
        for (i, r) in self.verdict_rows().iter().enumerate() {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                i + 1,
                text(&r.what),
                text(&r.measured),
                text(&r.threshold),
                verdict_cell(r.verdict)
            );
        }
        md.push('\n');
        self.failures(&mut md);
        self.inconclusive(&mut md);
        self.nodes(&mut md);
        self.steps(&mut md);
        if let Some(d) = &self.doctor {
            let shown: Vec<&Finding> = d
                .findings
                .iter()
                .filter(|f| f.severity != Severity::Info)
                .collect();
            if !shown.is_empty() {
                md.push_str("## Doctor findings\n\n| severity | node | component | check | seen | expected | fix |\n|---|---|---|---|---|---|---|\n");
                for f in shown {
                    let _ = writeln!(
                        md,
                        "| {} | {} | {} | {} | {} | {} | {} |",
                        f.severity.name(),
                        text(&f.node),
                        text(&f.component),
                        text(&f.check),
                        text(&f.seen),
                        text(&f.expected),
                        text(&f.fix)
                    );
                }
                md.push('\n');
            }
        }
        md
    }

    /// Every failing node, pair and step in one list.
    fn failures(&self, md: &mut String) {
        let mut lines = Vec::new();
        if let Some(d) = &self.doctor {
            for f in d.findings.iter().filter(|f| f.severity == Severity::Error) {
                lines.push(text(&format!(
                    "doctor: {} {}: {} ({}); fix: {}",
                    f.node, f.component, f.seen, f.check, f.fix
                )));
            }
            if !d.passed() && d.findings.is_empty() {
                lines.push(format!(
                    "doctor: {} (see {})",
                    text(&d.status()),
                    link(&d.outcome.log)
                ));
            }
        }
        for t in self.tests.iter().filter(|t| !t.ran()) {
            lines.push(format!(
                "test {}: {} (see {})",
                text(&t.name),
                text(&t.status()),
                link(&t.outcome.log)
            ));
        }
        for c in self.checks.iter().filter(|c| c.verdict == Verdict::Fail) {
            for d in &c.details {
                lines.push(text(&format!("{}: {d}", c.label)));
            }
        }
        if lines.is_empty() {
            return;
        }
        md.push_str("## Failing nodes, pairs and steps\n\n");
        for l in lines {
            let _ = writeln!(md, "- {l}");
        }
        md.push('\n');
    }

    /// The checks that could not tell, and what would.
    fn inconclusive(&self, md: &mut String) {
        let open: Vec<&CheckResult> = self
            .checks
            .iter()
            .filter(|c| c.verdict == Verdict::Inconclusive)
            .collect();
        if open.is_empty() {
            return;
        }
        md.push_str("## Inconclusive checks\n\n");
        for c in open {
            for d in &c.details {
                let _ = writeln!(md, "- {}", text(&format!("{}: {d}", c.label)));
            }
        }
        md.push('\n');
    }

    fn nodes(&self, md: &mut String) {
        md.push_str("## Nodes\n\n| node | result | findings and fixes |\n|---|---|---|\n");
        for n in &self.nodes {
            let found: Vec<String> = n
                .problems
                .iter()
                .map(|p| text(&format!("{}{}; fix: {}", p.effect.prefix(), p.what, p.fix)))
                .collect();
            let _ = writeln!(
                md,
                "| {} | {} | {} |",
                text(&n.node),
                verdict_cell(n.verdict()),
                if found.is_empty() {
                    "nothing found".to_string()
                } else {
                    found.join("<br>")
                }
            );
        }
        md.push('\n');
    }

    fn steps(&self, md: &mut String) {
        md.push_str(
            "## Steps\n\n| step | command | status | results | log |\n|---|---|---|---|---|\n",
        );
        if let Some(d) = &self.doctor {
            let _ = writeln!(
                md,
                "| doctor | {} | {} | {} | {} |",
                code(&d.outcome.command_line()),
                text(&d.status()),
                if d.results_error.is_some() {
                    "none".to_string()
                } else {
                    "[doctor.csv](doctor.csv), [doctor.json](doctor.json)".to_string()
                },
                link(&d.outcome.log)
            );
        }
        for t in &self.tests {
            let results = if t.results_error.is_none() {
                let files: Vec<String> = t.result_files().iter().map(|f| link(f)).collect();
                files.join(", ")
            } else {
                "none".into()
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                text(&t.title()),
                code(&t.outcome.command_line()),
                text(&t.status()),
                results,
                link(&t.outcome.log)
            );
        }
        md.push('\n');
        for t in &self.tests {
            for png in t.heatmaps() {
                let _ = writeln!(
                    md,
                    "### {}: all-pairs heatmap\n\n![{}]({})\n",
                    // A rail's: its file's name, NAME.railR.
                    text(&match t.rails {
                        0 => t.name.clone(),
                        _ => file_name(&png.with_extension("")),
                    }),
                    text(&t.name),
                    file_name(&png)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rack::nodes::NodeProblem;

    /// Text from a hostile node or spec reaches summary.md as text: no table
    /// row broken, no HTML, no markup, every line one line.
    #[test]
    fn hostile_node_text_is_escaped_in_summary_md() {
        let hostile = "evil|host*`x`\nnext <script>alert(1)</script> _em_";
        let report = RunReport {
            name: "rack # one <b>".into(),
            spec_file: "spec.toml".into(),
            started: "now".into(),
            doctor: None,
            tests: Vec::new(),
            checks: vec![CheckResult {
                label: format!("busbw on {hostile}"),
                measured: "1 GB/s".into(),
                threshold: ">= 2 GB/s".into(),
                verdict: Verdict::Fail,
                details: vec![format!("node {hostile} is slow")],
                rounds: None,
                suspects: Vec::new(),
            }],
            nodes: vec![NodeVerdict {
                node: hostile.into(),
                problems: vec![NodeProblem {
                    effect: crate::rack::nodes::Effect::Fails,
                    what: format!("port down on {hostile}"),
                    fix: "`rm -rf /` | *now*".into(),
                }],
            }],
        };
        let md = report.markdown();
        // Every `<` is escaped: no HTML.
        assert!(
            md.match_indices('<').all(|(i, _)| md[..i].ends_with('\\')),
            "{md}"
        );
        assert!(md.contains("\\<script>alert(1)\\</script>"), "{md}");
        assert!(md.contains("# Rack acceptance: rack # one \\<b>\n"), "{md}");
        let escaped = "evil\\|host\\*\\`x\\` next \\<script>alert(1)\\</script> \\_em\\_";
        // Each table row keeps its columns: only escaped pipes inside cells.
        let row = |start: &str| {
            md.lines()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no row {start}: {md}"))
                .to_string()
        };
        let cells = |line: &str| line.replace("\\|", "").matches('|').count();
        let node_row = row(&format!("| {escaped} |"));
        assert_eq!(cells(&node_row), 4, "{node_row}");
        assert!(
            node_row.contains("\\`rm -rf /\\` \\| \\*now\\*"),
            "{node_row}"
        );
        let check_row = row("| 1 | busbw on ");
        assert_eq!(cells(&check_row), 6, "{check_row}");
        assert!(md.contains(&format!("- busbw on {escaped}: node {escaped} is slow\n")));
        // No line of node text was split: the newline became a space.
        assert!(!md.lines().any(|l| l.starts_with("next ")), "{md}");
    }
}
