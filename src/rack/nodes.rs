//! Every node of the run and what failed on it: doctor's findings about the
//! node, and the all-pairs checks' suspects, slow pairs and wrong data, each with
//! its fix. The summary and the HTML report list every node, failing or not.

use super::check::{Check, CheckKind};
use crate::allpairs::{gbs, read_csv as read_pairs, PairResults, Thresholds, Verdict};
use crate::doctor::output::Report;
use crate::doctor::{Finding, Severity};
use crate::sizes::human_bytes;
use std::path::Path;

/// An all-pairs check's matrices and their verdict by the spec's thresholds.
pub struct PairsOutcome {
    pub label: String,
    pub test: String,
    pub thresholds: Thresholds,
    pub results: PairResults,
    pub verdict: Verdict,
}

/// The all-pairs checks whose test wrote its matrices (`TEST.csv` in `dir`).
pub fn pairs_outcomes(checks: &[Check], dir: &Path) -> Vec<PairsOutcome> {
    checks
        .iter()
        .filter_map(|c| {
            let CheckKind::AllPairs(t) = &c.kind else {
                return None;
            };
            let results = read_pairs(&dir.join(format!("{}.csv", c.test))).ok()?;
            Some(PairsOutcome {
                label: c.label.clone(),
                test: c.test.clone(),
                thresholds: *t,
                verdict: results.judge(t),
                results,
            })
        })
        .collect()
}

/// The most of doctor.json read: each node's facts are a few KiB.
const MAX_DOCTOR_JSON_BYTES: u64 = 256 << 20;

/// The nodes doctor read facts from (doctor.json), findings or not.
pub fn doctor_nodes(json: &Path) -> Vec<String> {
    // doctor's own file in the report folder, bounded all the same.
    crate::input::read_bounded(json, MAX_DOCTOR_JSON_BYTES)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Report>(&bytes).ok())
        .map(|r| r.nodes.into_iter().map(|n| n.node).collect())
        .unwrap_or_default()
}

/// One thing found on a node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeProblem {
    /// It fails the node (a warning does not).
    pub fails: bool,
    pub what: String,
    pub fix: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeVerdict {
    pub node: String,
    pub problems: Vec<NodeProblem>,
}

impl NodeVerdict {
    pub fn passed(&self) -> bool {
        !self.problems.iter().any(|p| p.fails)
    }
}

/// A pair matrix's label is the host, or "host/rank" where ranks share a host.
fn host_of(label: &str) -> &str {
    label.rsplit_once('/').map_or(label, |(h, _)| h)
}

const LINK_FIX: &str = "check this node's link: the NIC and cable, the switch port's speed and error counters (ethtool -S, ip -s link), and any traffic shaping (tc qdisc show)";

/// Every node, in the order first seen in `hosts` (the spec's, then doctor's,
/// then the pair matrices'), with its problems.
pub fn node_verdicts(
    hosts: &[String],
    findings: &[Finding],
    pairs: &[PairsOutcome],
) -> Vec<NodeVerdict> {
    let mut nodes: Vec<NodeVerdict> = Vec::new();
    let mut at = |node: &str| -> usize {
        match nodes.iter().position(|n| n.node == node) {
            Some(i) => i,
            None => {
                nodes.push(NodeVerdict {
                    node: node.to_string(),
                    problems: Vec::new(),
                });
                nodes.len() - 1
            }
        }
    };
    let mut found: Vec<(usize, NodeProblem)> = Vec::new();
    for h in hosts {
        at(h);
    }
    for f in findings {
        let i = at(&f.node);
        if f.severity == Severity::Info {
            continue;
        }
        found.push((
            i,
            NodeProblem {
                fails: f.severity == Severity::Error,
                what: format!(
                    "doctor {} ({}): {}; expected {}",
                    f.check, f.component, f.seen, f.expected
                ),
                fix: f.fix.clone(),
            },
        ));
    }
    for p in pairs {
        let labels = &p.results.labels;
        for l in labels {
            at(host_of(l));
        }
        let v = &p.verdict;
        for &s in &v.suspects {
            found.push((
                at(host_of(&labels[s])),
                NodeProblem {
                    fails: true,
                    what: format!(
                        "{}: {} is the suspect: all {} of its pairs are slow",
                        p.label,
                        labels[s],
                        labels.len() - 1
                    ),
                    fix: LINK_FIX.into(),
                },
            ));
        }
        // A slow pair a suspect explains is that suspect's; any other names both ends.
        let unexplained = v
            .slow_bw
            .iter()
            .map(|s| {
                (
                    s,
                    format!(
                        "algbw {} GB/s at {} < {}",
                        gbs(s.value),
                        human_bytes(v.bw_size),
                        gbs(s.limit)
                    ),
                )
            })
            .chain(v.slow_latency.iter().map(|s| {
                (
                    s,
                    format!(
                        "median time {:.2} us at {} > {:.2}",
                        s.value,
                        human_bytes(v.latency_size),
                        s.limit
                    ),
                )
            }))
            .filter(|(s, _)| !v.suspects.contains(&s.a) && !v.suspects.contains(&s.b));
        let mut pair_problems = Vec::new();
        for (s, why) in unexplained {
            for (me, other) in [(s.a, s.b), (s.b, s.a)] {
                pair_problems.push((
                    me,
                    format!("{}: slow pair with {}: {why}", p.label, labels[other]),
                    format!(
                        "check the path between {} and {}: both links and the switch between them",
                        labels[me], labels[other]
                    ),
                ));
            }
        }
        for &(a, b, bytes) in &v.wrong {
            for (me, other) in [(a, b), (b, a)] {
                pair_problems.push((
                    me,
                    format!("{}: {bytes} wrong bytes from {}", p.label, labels[other]),
                    "the data was corrupted on the way: check memory (edac-util) and the NIC's error counters on both nodes".into(),
                ));
            }
        }
        for (me, what, fix) in pair_problems {
            found.push((
                at(host_of(&labels[me])),
                NodeProblem {
                    fails: true,
                    what,
                    fix,
                },
            ));
        }
    }
    for (i, problem) in found {
        nodes[i].problems.push(problem);
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allpairs::SlowPair;

    fn finding(severity: Severity, node: &str, check: &str) -> Finding {
        Finding::new(
            severity, node, "eth0", check, "MTU 9000", "MTU 1500", "fix it",
        )
    }

    #[test]
    fn every_node_is_listed_and_only_the_faulty_fail() {
        let labels: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let results = PairResults {
            labels,
            sizes: Vec::new(),
            counters: Vec::new(),
        };
        let slow = |a, b| SlowPair {
            a,
            b,
            value: 0.003,
            limit: 0.008,
        };
        let verdict = Verdict {
            bw_size: 256 << 10,
            median_gbs: 0.08,
            // c is slow with everyone; a <-> b is slow on its own.
            slow_bw: vec![slow(0, 1), slow(0, 2), slow(1, 2), slow(2, 3)],
            latency_size: 0,
            min_us: f64::NAN,
            slow_latency: Vec::new(),
            wrong: Vec::new(),
            suspects: vec![2],
        };
        let pairs = [PairsOutcome {
            label: "pairs all pairs".into(),
            test: "pairs".into(),
            thresholds: Thresholds::default(),
            results,
            verdict,
        }];
        let findings = [
            finding(Severity::Error, "a", "netdev-mtu"),
            finding(Severity::Warning, "d", "nccl-env"),
            finding(Severity::Info, "e", "no-gpu"),
        ];
        let nodes = node_verdicts(&["d".to_string()], &findings, &pairs);
        let names: Vec<&str> = nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(names, ["d", "a", "e", "b", "c"]);
        let passed: Vec<bool> = nodes.iter().map(NodeVerdict::passed).collect();
        assert_eq!(passed, [true, false, true, false, false]);
        let c = &nodes[4];
        assert_eq!(c.problems.len(), 1, "{c:?}");
        assert_eq!(
            c.problems[0].what,
            "pairs all pairs: c is the suspect: all 3 of its pairs are slow"
        );
        let a: Vec<&str> = nodes[1].problems.iter().map(|p| p.what.as_str()).collect();
        assert_eq!(
            a,
            [
                "doctor netdev-mtu (eth0): MTU 9000; expected MTU 1500",
                "pairs all pairs: slow pair with b: algbw 0.00300 GB/s at 256 KiB < 0.00800"
            ]
        );
        assert!(!nodes[0].problems[0].fails);
        assert_eq!(host_of("vm/3"), "vm");
    }
}
