//! Every node of the run and what failed on it: doctor's findings about the
//! node, a step that did not check it (doctor had no answer from it, a test did
//! not finish), and the all-pairs checks' suspects, slow pairs, pairs not
//! measured and wrong data, each with its fix. A node nothing checked never
//! passes: it fails, or is INCONCLUSIVE where the path probe laid the hang that
//! kept it from being checked on another node. The summary and the HTML report
//! list every node, failing or not.

use super::check::{Check, CheckKind};
use super::check_result::{CheckResult, Verdict as NodeState};
use super::probe::PathProbe;
use super::steps::{file_name, log_line_naming, short_name, DoctorStep, TestStep};
use crate::allpairs::alone::judge_launches;
use crate::allpairs::judging::suspects;
use crate::allpairs::{gbs, PairResults, PairsVerdict, Thresholds};
use crate::doctor::{claimed_name, Finding, Severity, DUPLICATE_HOST};
use crate::sizes::human_bytes;
use std::path::{Path, PathBuf};

/// An all-pairs check's matrices and their verdict by the spec's thresholds.
pub struct PairsOutcome {
    pub label: String,
    pub test: String,
    pub thresholds: Thresholds,
    pub results: PairResults,
    pub verdict: PairsVerdict,
}

/// The all-pairs checks whose test's launches all wrote their matrices, each
/// judged on them together (`judge_launches`: pairs named only when confirmed).
pub fn pairs_outcomes(checks: &[Check], tests: &[TestStep]) -> Vec<PairsOutcome> {
    checks
        .iter()
        .filter_map(|c| {
            let CheckKind::AllPairs(t) = &c.kind else {
                return None;
            };
            let launches: Vec<&TestStep> = tests.iter().filter(|s| s.name == c.test).collect();
            if launches.iter().any(|s| !s.ran()) {
                return None;
            }
            let csvs: Vec<PathBuf> = launches.iter().map(|s| c.results_of(&s.csv)).collect();
            let judged = judge_launches(&csvs, t).ok()?;
            Some(PairsOutcome {
                label: c.label.clone(),
                test: c.test.clone(),
                thresholds: *t,
                verdict: judged.verdict,
                results: judged.results,
            })
        })
        .collect()
}

/// What a problem does to its node's verdict.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Effect {
    Fails,
    /// The node was not checked, for a cause laid on another node: it neither
    /// passes nor fails (INCONCLUSIVE).
    Unchecked,
    Warns,
}

impl Effect {
    /// What the summary and the report put before the problem.
    pub fn prefix(self) -> &'static str {
        match self {
            Effect::Fails | Effect::Unchecked => "",
            Effect::Warns => "warning: ",
        }
    }
}

/// One thing found on a node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeProblem {
    pub effect: Effect,
    pub what: String,
    pub fix: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeVerdict {
    pub node: String,
    pub problems: Vec<NodeProblem>,
}

impl NodeVerdict {
    pub fn verdict(&self) -> NodeState {
        let has = |e| self.problems.iter().any(|p| p.effect == e);
        if has(Effect::Fails) {
            NodeState::Fail
        } else if has(Effect::Unchecked) {
            NodeState::Inconclusive
        } else {
            NodeState::Pass
        }
    }

    pub fn passed(&self) -> bool {
        self.verdict() == NodeState::Pass
    }

    /// The problems that decide the verdict: the failing ones, or else the
    /// checks missed.
    pub fn deciding(&self) -> Vec<&str> {
        let effect = match self.verdict() {
            NodeState::Fail => Effect::Fails,
            _ => Effect::Unchecked,
        };
        self.problems
            .iter()
            .filter(|p| p.effect == effect)
            .map(|p| p.what.as_str())
            .collect()
    }
}

/// A pair matrix's label is the host, or "host/rank" where ranks share a host.
fn host_of(label: &str) -> &str {
    label.rsplit_once('/').map_or(label, |(h, _)| h)
}

const LINK_FIX: &str = "check this node's link: the NIC and cable, the switch port's speed and error counters (ethtool -S, ip -s link), and any traffic shaping (tc qdisc show)";

const REACH_FIX: &str = "check that its link is up and its cable lands on the right switch \
(on rails: rail R's cable on leaf R: ip -br link, LLDP with lldpctl), its address is on the same network \
as the other nodes' (ip -br addr), and the test's log for the connection errors";

/// Stands for the nodes of a run that named none and heard from none.
pub const UNNAMED: &str = "(nodes not named: no [launch] hosts, and no node answered)";

const STEP_FIX: &str = "read the step's log for why; a node that cannot be reached: check that it is up \
(ssh NODE hostname), its name in [launch] hosts, and that fabricbench and MPI are at the same paths there; \
a step that timed out: raise timeout_s, or find the stuck rank with the benchmark's -T";

/// What the run says of its nodes: the steps that had to check each, and what
/// their results found.
pub struct Evidence<'a> {
    /// The spec's hosts, in order.
    pub hosts: &'a [String],
    /// How many nodes doctor was launched on.
    pub launched_nodes: usize,
    pub doctor: Option<&'a DoctorStep>,
    pub tests: &'a [TestStep],
    pub pairs: &'a [PairsOutcome],
    /// The checks' results: a failed one's suspects fail their nodes.
    pub checks: &'a [CheckResult],
    /// The path probe run after a test that did not finish, if one was.
    pub probe: Option<&'a PathProbe>,
}

/// The nodes in the order first seen, each with its problems in the order
/// found; and the nodes the path probe cleared of a step that missed them.
#[derive(Default)]
struct NodeList(Vec<NodeVerdict>, Vec<String>);

impl NodeList {
    fn at(&mut self, node: &str) -> &mut NodeVerdict {
        let i = match self.0.iter().position(|n| n.node == node) {
            Some(i) => i,
            None => {
                self.0.push(NodeVerdict {
                    node: node.to_string(),
                    problems: Vec::new(),
                });
                self.0.len() - 1
            }
        };
        &mut self.0[i]
    }

    fn fail(&mut self, node: &str, what: String, fix: String) {
        self.add(node, Effect::Fails, what, fix);
    }

    fn add(&mut self, node: &str, effect: Effect, what: String, fix: String) {
        self.at(node)
            .problems
            .push(NodeProblem { effect, what, fix });
    }
}

/// Every node, in the order first seen (the spec's hosts, doctor's, the tests'
/// rows', the pair matrices'), with its problems.
pub fn node_verdicts(e: &Evidence) -> Vec<NodeVerdict> {
    let mut nodes = NodeList::default();
    let named = e
        .hosts
        .iter()
        .chain(e.doctor.iter().flat_map(|d| &d.nodes))
        .chain(e.tests.iter().flat_map(|t| &t.hosts))
        .map(String::as_str)
        .chain(
            e.pairs
                .iter()
                .flat_map(|p| p.results.labels.iter().map(|l| host_of(l))),
        );
    for node in named {
        nodes.at(node);
    }
    let missed = e.doctor.is_some_and(|d| !d.passed()) || e.tests.iter().any(|t| !t.ran());
    if nodes.0.is_empty() && missed {
        nodes.at(UNNAMED);
    }
    if let Some(d) = e.doctor {
        doctor_findings(&mut nodes, &d.findings);
        not_checked_by_doctor(&mut nodes, d, e.launched_nodes, e.probe);
    }
    let finished_on: Vec<String> = e
        .tests
        .iter()
        .filter(|t| t.ran())
        .flat_map(|t| match &t.launched_on {
            Some(hosts) => hosts.clone(),
            None => nodes.0.iter().map(|n| n.node.clone()).collect(),
        })
        .collect();
    for t in e.tests.iter().filter(|t| !t.ran()) {
        not_finished(&mut nodes, t, e.probe, &finished_on);
    }
    if let Some(p) = e.probe {
        laid_elsewhere(&mut nodes, p);
        probe_problems(&mut nodes, p);
    }
    for p in e.pairs {
        pair_problems(&mut nodes, p);
    }
    for c in e.checks.iter().filter(|c| !c.passed()) {
        for (label, why) in &c.suspects {
            nodes.fail(
                host_of(label),
                format!("{}: {why}", c.label),
                LINK_FIX.into(),
            );
        }
    }
    nodes.0
}

/// "; doctor.log: ssh: Could not resolve hostname gpu09 ...": the log's first
/// line that names the node, if any.
fn log_says(log: &Path, node: &str) -> String {
    match node {
        UNNAMED => None,
        _ => log_line_naming(log, node),
    }
    .map_or_else(String::new, |line| format!("; {}: {line}", file_name(log)))
}

fn doctor_findings(nodes: &mut NodeList, findings: &[Finding]) {
    for f in findings {
        let node = nodes.at(&f.node);
        if f.severity == Severity::Info {
            continue;
        }
        node.problems.push(NodeProblem {
            effect: if f.severity == Severity::Error {
                Effect::Fails
            } else {
                Effect::Warns
            },
            what: format!(
                "doctor {} ({}): {}; expected {}",
                f.check, f.component, f.seen, f.expected
            ),
            fix: f.fix.clone(),
        });
    }
}

/// The nodes doctor did not report: never checked, so failed; but when doctor
/// answered from as many nodes as it was launched on, each under a name of its
/// own, a name it did not report is another name of one of them (the spec's
/// `localhost` for `gpu01`). Nodes are counted by identity: two machines
/// answering as one name fail both, and a spec host no machine answered as
/// fails naming them. A node the launcher could not reach is named so.
fn not_checked_by_doctor(
    nodes: &mut NodeList,
    d: &DoctorStep,
    launched: usize,
    probe: Option<&PathProbe>,
) {
    let claimed = |a: &str| claimed_name(a).0.to_string();
    let reported = |name: &str| {
        d.nodes
            .iter()
            .map(|a| claimed(a))
            .any(|a| a == name || short_name(&a) == short_name(name))
    };
    // doctor's error naming each host name several machines answered as.
    let duplicates: Vec<&Finding> = d
        .findings
        .iter()
        .filter(|f| f.check == DUPLICATE_HOST)
        .collect();
    let every_node_answered = d.answered() && d.nodes.len() >= launched && duplicates.is_empty();
    let unreachable = d.unreachable();
    let log = file_name(&d.outcome.log);
    let mut unchecked_by_doctor = Vec::new();
    for n in nodes.0.iter_mut() {
        let (name, shared) = claimed_name(&n.node);
        if shared {
            n.problems.push(NodeProblem {
                effect: Effect::Fails,
                what: format!(
                    "one of several machines answering as {name} (doctor {DUPLICATE_HOST}): \
                     which results are this machine's cannot be told"
                ),
                fix: DUPLICATE_FIX.into(),
            });
            continue;
        }
        if reported(&n.node) {
            continue;
        }
        let problem = if let Some((_, line)) = unreachable.iter().find(|(h, _)| *h == n.node) {
            NodeProblem {
                effect: Effect::Fails,
                what: format!("did not answer the launch: {log}: {line}"),
                fix: format!(
                    "check that {} is up and reachable from the launch node (ping, ssh {} \
                     hostname, its power and BMC); no step ran while the launch needs it",
                    n.node, n.node
                ),
            }
        } else if !duplicates.is_empty() {
            let seen: Vec<&str> = duplicates.iter().map(|f| f.seen.as_str()).collect();
            NodeProblem {
                effect: Effect::Fails,
                what: format!(
                    "no machine answered as {}, while {}: {} is likely one of them, \
                     under another node's name",
                    n.node,
                    seen.join("; "),
                    n.node
                ),
                fix: DUPLICATE_FIX.into(),
            }
        } else if every_node_answered {
            NodeProblem {
                effect: Effect::Warns,
                what: format!(
                    "doctor reported no node of this name, but answered from every node it was \
                     launched on ({}): this is another name of one of them",
                    d.nodes.join(", ")
                ),
                fix: "name the nodes in [launch] hosts as they name themselves (hostname)".into(),
            }
        } else {
            let why = match unreachable.first() {
                Some((h, _)) => format!("; the launch stopped at {h}, which did not answer"),
                None => log_says(&d.outcome.log, &n.node),
            };
            let what = format!(
                "doctor did not check this node ({}; see {log}){why}",
                d.status()
            );
            unchecked_by_doctor.push((n.node.clone(), what));
            continue;
        };
        n.problems.push(problem);
    }
    for (node, what) in unchecked_by_doctor {
        unchecked(nodes, &node, what, probe, false);
    }
}

const DUPLICATE_FIX: &str = "give every node its own host name (hostnamectl set-hostname) and \
check the launcher's host list: until then their results cannot be told apart";

/// A step that did not check `node`: it fails the node, unless the path probe
/// laid the hang on other nodes and this node's own paths carried full-size
/// frames; then the node is INCONCLUSIVE where nothing else checked it (`other`
/// false), and the step's miss is a warning where something did.
/// `laid_elsewhere` says why once.
fn unchecked(
    nodes: &mut NodeList,
    node: &str,
    what: String,
    probe: Option<&PathProbe>,
    other: bool,
) {
    let effect = match probe.is_some_and(|p| p.clears(node)) {
        false => Effect::Fails,
        true if other => Effect::Warns,
        true => Effect::Unchecked,
    };
    if effect != Effect::Fails && !nodes.1.iter().any(|n| n == node) {
        nodes.1.push(node.to_string());
    }
    nodes.add(node, effect, what, STEP_FIX.into());
}

/// On each node a hang the path probe laid on others left unchecked: whom it
/// laid it on.
fn laid_elsewhere(nodes: &mut NodeList, p: &PathProbe) {
    let suspects = p.suspect_names().join(", ");
    for n in nodes.0.iter_mut().filter(|n| nodes.1.contains(&n.node)) {
        let effect = match n.problems.iter().any(|x| x.effect == Effect::Unchecked) {
            true => Effect::Unchecked,
            false => Effect::Warns,
        };
        n.problems.push(NodeProblem {
            effect,
            what: format!(
                "the path probe lays the hang on {suspects}: this node's paths to the others carried full-size frames"
            ),
            fix: format!("fix {suspects} first, then run rack_check again to check this node"),
        });
    }
}

/// A test that did not finish with its results checked nothing on the nodes it
/// ran on (every node, where the spec names none). `finished_on`: the nodes
/// some other test finished on.
fn not_finished(
    nodes: &mut NodeList,
    t: &TestStep,
    probe: Option<&PathProbe>,
    finished_on: &[String],
) {
    let on: Vec<String> = match &t.launched_on {
        Some(hosts) => hosts.clone(),
        None => nodes.0.iter().map(|n| n.node.clone()).collect(),
    };
    let log = file_name(&t.outcome.log);
    for node in on {
        let what = format!(
            "test {} did not finish with its results ({}; see {log}): not judged on this node{}",
            t.title(),
            t.status(),
            log_says(&t.outcome.log, &node)
        );
        // Doctor left it unchecked (INCONCLUSIVE already), or no test checked it.
        let other = finished_on.contains(&node)
            && !nodes
                .at(&node)
                .problems
                .iter()
                .any(|p| p.effect == Effect::Unchecked);
        unchecked(nodes, &node, what, probe, other);
    }
}

const PATH_FIX: &str = "compare the MTU of the node's interface (ip link) with its switch port's and every \
port on the path (show interface, jumbo frames on the VLAN): a port below the node's MTU drops every \
full-size frame, while the launch's small ones pass; then check the cable and the port's error counters";

/// The path probe's suspects, and each lost pair no suspect explains at both ends.
fn probe_problems(nodes: &mut NodeList, p: &PathProbe) {
    let suspects = p.suspects();
    let lost = p.lost();
    for &s in &suspects {
        let pairs: Vec<String> = lost
            .iter()
            .filter(|l| l.a == s || l.b == s)
            .map(|l| l.how.clone())
            .collect();
        let what = format!(
            "path probe: full-size frames were lost between {} and every other node ({}), \
             while the pairs without it carried them: the suspect",
            p.hosts[s],
            pairs.join("; ")
        );
        nodes.fail(&p.hosts[s], what, PATH_FIX.into());
    }
    for l in lost
        .iter()
        .filter(|l| !suspects.contains(&l.a) && !suspects.contains(&l.b))
    {
        for (me, other) in [(l.a, l.b), (l.b, l.a)] {
            let what = format!(
                "path probe: full-size frames lost between {} and {} ({})",
                p.hosts[me], p.hosts[other], l.how
            );
            nodes.fail(&p.hosts[me], what, PATH_FIX.into());
        }
    }
}

/// An all-pairs check's suspects, slow pairs, pairs not measured and wrong data.
fn pair_problems(nodes: &mut NodeList, p: &PairsOutcome) {
    let labels = &p.results.labels;
    let v = &p.verdict;
    // A node measured with none of the others while they were measured together
    // (a rail's node that reaches no other: a crossed cable, a link down) explains
    // its pairs not measured, as a suspect explains its slow pairs.
    let missing = |a: usize, b: usize| {
        v.unmeasured
            .iter()
            .any(|&(x, y, _)| (x, y) == (a.min(b), a.max(b)))
    };
    let cut_off = suspects(labels.len(), missing, |a, b| !missing(a, b));
    let others = labels.len() - 1;
    let named = v
        .suspects
        .iter()
        .map(|&s| (s, format!("is the suspect: all {others} of its pairs are slow"), LINK_FIX))
        .chain(cut_off.iter().map(|&s| {
            let what = format!(
                "was measured with none of the other {others} nodes, which were measured together: it reaches none of them"
            );
            (s, what, REACH_FIX)
        }));
    for (s, what, fix) in named {
        let what = format!("{}: {} {what}", p.label, labels[s]);
        nodes.fail(host_of(&labels[s]), what, fix.into());
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
    let both_ends = unexplained
        .map(|(s, why)| (s.a, s.b, PairIssue::Slow(why)))
        .chain(
            v.unmeasured
                .iter()
                .filter(|&&(a, b, _)| !cut_off.contains(&a) && !cut_off.contains(&b))
                .map(|&(a, b, size)| (a, b, PairIssue::NotMeasured(size))),
        )
        .chain(
            v.wrong
                .iter()
                .map(|&(a, b, bytes)| (a, b, PairIssue::Wrong(bytes))),
        );
    for (a, b, issue) in both_ends {
        for (me, other) in [(a, b), (b, a)] {
            let (what, fix) = issue.describe(&labels[me], &labels[other]);
            nodes.fail(host_of(&labels[me]), format!("{}: {what}", p.label), fix);
        }
    }
}

/// What is wrong with a pair, told at each of its ends.
enum PairIssue {
    /// Why it is slow: "algbw 0.003 GB/s at 256 KiB < 0.008".
    Slow(String),
    /// No figure at this size.
    NotMeasured(u64),
    /// Wrong bytes received.
    Wrong(u64),
}

impl PairIssue {
    /// What it is and the fix, at the end `me`.
    fn describe(&self, me: &str, other: &str) -> (String, String) {
        match self {
            PairIssue::Slow(why) => (
                format!("slow pair with {other}: {why}"),
                format!("check the path between {me} and {other}: both links and the switch between them"),
            ),
            PairIssue::NotMeasured(size) => (
                format!("pair with {other} not measured at {}: not judged", human_bytes(*size)),
                "the pair's round left no figure: see the test's log for why".into(),
            ),
            PairIssue::Wrong(bytes) => (
                format!("{bytes} wrong bytes from {other}"),
                "the data was corrupted on the way: check memory (edac-util) and the NIC's error \
                 counters on both nodes"
                    .into(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allpairs::SlowPair;
    use crate::rack::runner::StepOutcome;
    use std::path::PathBuf;
    use std::time::Duration;

    fn finding(severity: Severity, node: &str, check: &str) -> Finding {
        Finding::new(
            severity, node, "eth0", check, "MTU 9000", "MTU 1500", "fix it",
        )
    }

    fn outcome(exit: i32, log: PathBuf) -> StepOutcome {
        StepOutcome {
            argv: vec!["mpirun".into()],
            env: Vec::new(),
            exit: Some(exit),
            timed_out: false,
            killed: false,
            timeout: Duration::from_secs(60),
            start_error: None,
            seconds: 1.0,
            log,
        }
    }

    fn doctor(exit: i32, nodes: &[&str], findings: Vec<Finding>, log: PathBuf) -> DoctorStep {
        DoctorStep {
            outcome: outcome(exit, log),
            launched_on: None,
            findings,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            results_error: (nodes.is_empty())
                .then(|| "doctor.csv: no such file or directory".into()),
        }
    }

    fn evidence<'a>(
        hosts: &'a [String],
        doctor: Option<&'a DoctorStep>,
        tests: &'a [TestStep],
        pairs: &'a [PairsOutcome],
    ) -> Vec<NodeVerdict> {
        node_verdicts(&Evidence {
            hosts,
            launched_nodes: hosts.len().max(1),
            doctor,
            tests,
            pairs,
            checks: &[],
            probe: None,
        })
    }

    fn whats(n: &NodeVerdict) -> Vec<&str> {
        n.problems.iter().map(|p| p.what.as_str()).collect()
    }

    /// The nodes that did not pass, in the order listed.
    fn failing_nodes(nodes: &[NodeVerdict]) -> Vec<&str> {
        let failed = nodes.iter().filter(|n| !n.passed());
        failed.map(|n| n.node.as_str()).collect()
    }

    /// A rail's node that reaches no other (its pairs not measured, the
    /// others' measured together) fails alone; its partners do not.
    #[test]
    fn a_node_measured_with_none_fails_alone() {
        let labels: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let verdict = |unmeasured: Vec<(usize, usize, u64)>| PairsVerdict {
            bw_judged: true,
            bw_size: 64 << 10,
            median_gbs: 0.3,
            slow_bw: Vec::new(),
            latency_judged: false,
            latency_size: 0,
            min_us: f64::NAN,
            slow_latency: Vec::new(),
            unmeasured,
            wrong: Vec::new(),
            suspects: Vec::new(),
        };
        let outcome = |unmeasured| PairsOutcome {
            label: "pairs all pairs, rail 1 (eth1)".into(),
            test: "pairs".into(),
            thresholds: Thresholds::default(),
            results: PairResults {
                labels: labels.clone(),
                sizes: Vec::new(),
                counters: Vec::new(),
            },
            verdict: verdict(unmeasured),
        };
        let size = 64 << 10;
        let pairs = [outcome(vec![(0, 1, size), (1, 2, size), (1, 3, size)])];
        let nodes = evidence(&labels, None, &[], &pairs);
        let failing = failing_nodes(&nodes);
        assert_eq!(failing, ["b"], "{nodes:?}");
        let b = nodes.iter().find(|n| n.node == "b").unwrap();
        assert_eq!(
            whats(b),
            ["pairs all pairs, rail 1 (eth1): b was measured with none of the other 3 nodes, which were measured together: it reaches none of them"]
        );
        // A lone pair not measured still names both ends.
        let pairs = [outcome(vec![(0, 3, size)])];
        let nodes = evidence(&labels, None, &[], &pairs);
        let failing = failing_nodes(&nodes);
        assert_eq!(failing, ["a", "d"], "{nodes:?}");
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
        let verdict = PairsVerdict {
            bw_judged: true,
            bw_size: 256 << 10,
            median_gbs: 0.08,
            // c is slow with everyone; a <-> b is slow on its own; d <-> a was not measured.
            slow_bw: vec![slow(0, 1), slow(0, 2), slow(1, 2), slow(2, 3)],
            latency_judged: false,
            latency_size: 0,
            min_us: f64::NAN,
            slow_latency: Vec::new(),
            unmeasured: vec![(0, 3, 256 << 10)],
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
        let findings = vec![
            finding(Severity::Error, "a", "netdev-mtu"),
            finding(Severity::Warning, "d", "nccl-env"),
            finding(Severity::Info, "e", "no-gpu"),
        ];
        let d = doctor(
            1,
            &["a", "e", "b", "c", "d"],
            findings,
            PathBuf::from("x.log"),
        );
        let nodes = evidence(&["d".to_string()], Some(&d), &[], &pairs);
        let names: Vec<&str> = nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(names, ["d", "a", "e", "b", "c"]);
        let passed: Vec<bool> = nodes.iter().map(NodeVerdict::passed).collect();
        assert_eq!(passed, [false, false, true, false, false]);
        let c = &nodes[4];
        assert_eq!(
            whats(c),
            ["pairs all pairs: c is the suspect: all 3 of its pairs are slow"]
        );
        assert_eq!(
            whats(&nodes[1]),
            [
                "doctor netdev-mtu (eth0): MTU 9000; expected MTU 1500",
                "pairs all pairs: slow pair with b: algbw 0.00300 GB/s at 256 KiB < 0.00800",
                "pairs all pairs: pair with d not measured at 256 KiB: not judged",
            ]
        );
        assert_eq!(nodes[0].problems[0].effect, Effect::Warns);
        assert_eq!(
            whats(&nodes[0])[1],
            "pairs all pairs: pair with a not measured at 256 KiB: not judged"
        );
        assert_eq!(host_of("vm/3"), "vm");
    }

    /// An unknown host: mpirun never started doctor or the test (exit 255). No
    /// node passes; the one the log names is named with the log's line.
    #[test]
    fn a_node_that_never_answered_fails_and_is_named() {
        let dir = std::env::temp_dir().join(format!("rack-nodes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("doctor.log");
        std::fs::write(
            &log,
            "ssh: Could not resolve hostname gpu02: Name or service not known\n",
        )
        .unwrap();
        let hosts = ["gpu01".to_string(), "gpu02.invalid".to_string()];
        let d = doctor(255, &[], Vec::new(), log.clone());
        let test = TestStep {
            name: "ar".into(),
            round: 1,
            outcome: outcome(255, dir.join("ar.log")),
            csv: dir.join("ar.csv"),
            all_pairs: false,
            rails: 0,
            launched_on: Some(hosts.to_vec()),
            hosts: Vec::new(),
            results_error: Some("ar.csv: no such file".into()),
        };
        let nodes = evidence(&hosts, Some(&d), std::slice::from_ref(&test), &[]);
        assert!(nodes.iter().all(|n| !n.passed()), "{nodes:?}");
        assert_eq!(
            whats(&nodes[1]),
            [
                "doctor did not check this node (exit 255; see doctor.log); doctor.log: ssh: Could \
                 not resolve hostname gpu02: Name or service not known",
                "test ar did not finish with its results (exit 255; see ar.log): not judged on this node",
            ]
        );
        assert_eq!(
            whats(&nodes[0])[0],
            "doctor did not check this node (exit 255; see doctor.log)"
        );
        // No host named and nothing answered: the run's nodes still fail, unnamed.
        let nodes = evidence(&[], Some(&d), &[], &[]);
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].node, UNNAMED);
        assert!(!nodes[0].passed());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A node powered off: the launcher's ssh says so, and that node is named
    /// as not answering; the others were not checked, for it.
    #[test]
    fn a_node_the_launcher_could_not_reach_is_named() {
        let dir = std::env::temp_dir().join(format!("rack-down-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("doctor.log");
        std::fs::write(
            &log,
            "ssh: connect to host node3 port 22: No route to host\n  target node:  node1\n",
        )
        .unwrap();
        let hosts: Vec<String> = ["node1", "node3"].map(String::from).to_vec();
        let mut d = doctor(255, &[], Vec::new(), log);
        d.launched_on = Some(hosts.clone());
        assert_eq!(
            d.unreachable(),
            [(
                "node3".to_string(),
                "ssh: connect to host node3 port 22: No route to host".to_string()
            )]
        );
        let nodes = evidence(&hosts, Some(&d), &[], &[]);
        assert_eq!(
            whats(&nodes[1]),
            ["did not answer the launch: doctor.log: ssh: connect to host node3 port 22: No route to host"]
        );
        assert_eq!(
            whats(&nodes[0]),
            ["doctor did not check this node (exit 255; see doctor.log); the launch stopped at node3, which did not answer"]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// node4 answers as node3: both claimants fail, and the spec's node4, which
    /// no machine answered as, fails naming them.
    #[test]
    fn nodes_are_counted_by_identity() {
        let mut dup = finding(Severity::Error, "node3", DUPLICATE_HOST);
        dup.seen =
            "2 nodes answer as node3: rank 2 from m-b-net:[1]; rank 3 from m-b-net:[2]".into();
        let d = doctor(
            1,
            &["node1", "node3 (rank 1)", "node3 (rank 2)"],
            vec![dup],
            PathBuf::from("doctor.log"),
        );
        let hosts: Vec<String> = ["node1", "node3", "node4"].map(String::from).to_vec();
        let nodes = evidence(&hosts, Some(&d), &[], &[]);
        let failing = failing_nodes(&nodes);
        assert_eq!(
            failing,
            ["node3", "node4", "node3 (rank 1)", "node3 (rank 2)"],
            "{nodes:?}"
        );
        assert_eq!(
            whats(&nodes[2]),
            ["no machine answered as node4, while 2 nodes answer as node3: rank 2 from \
              m-b-net:[1]; rank 3 from m-b-net:[2]: node4 is likely one of them, under another node's name"]
        );
        assert!(whats(&nodes[3])[0].starts_with("one of several machines answering as node3"));
    }

    /// A test hung on every node; the path probe found node3's full-size frames
    /// lost with everyone: node3 fails, the others were not checked because of it:
    /// INCONCLUSIVE, with a note.
    #[test]
    fn the_path_probe_lays_a_hung_test_on_its_suspect() {
        use crate::rack::probe::{Direction, PathProbe};
        let hosts: Vec<String> = ["node1", "node2", "node3"].map(String::from).to_vec();
        let ok = || Direction::Carried {
            dev: "eth0".into(),
            mtu: 1500,
        };
        let lost = || Direction::Lost {
            dev: "eth0".into(),
            mtu: 1500,
        };
        let u = || Direction::Unknown;
        let probe = PathProbe {
            hosts: hosts.clone(),
            seen: vec![
                vec![u(), ok(), lost()],
                vec![ok(), u(), lost()],
                vec![lost(), lost(), u()],
            ],
            outcomes: Vec::new(),
        };
        let mut hung = outcome(0, PathBuf::from("pairs.log"));
        hung.exit = None;
        hung.timed_out = true;
        let test = TestStep {
            name: "pairs".into(),
            round: 1,
            outcome: hung,
            csv: PathBuf::from("pairs.csv"),
            all_pairs: true,
            rails: 0,
            launched_on: Some(hosts.clone()),
            hosts: Vec::new(),
            results_error: Some("pairs.csv: no pair measured".into()),
        };
        let nodes = node_verdicts(&Evidence {
            hosts: &hosts,
            launched_nodes: 3,
            doctor: None,
            tests: std::slice::from_ref(&test),
            pairs: &[],
            checks: &[],
            probe: Some(&probe),
        });
        let verdicts: Vec<NodeState> = nodes.iter().map(NodeVerdict::verdict).collect();
        use NodeState::{Fail, Inconclusive};
        assert_eq!(verdicts, [Inconclusive, Inconclusive, Fail], "{nodes:?}");
        assert_eq!(
            whats(&nodes[0])[1],
            "the path probe lays the hang on node3: this node's paths to the others carried full-size frames"
        );
        assert!(whats(&nodes[2])[1].starts_with(
            "path probe: full-size frames were lost between node3 and every other node (ping -M do \
             -s 1472 over eth0 (MTU 1500) from node1 to node3; "
        ));
    }

    /// Doctor answered from every node launched, under names the spec does not
    /// use: the spec's name is another name of one of them, not a missing node.
    #[test]
    fn another_name_of_a_node_that_answered_is_no_failure() {
        let d = doctor(0, &["vm"], Vec::new(), PathBuf::from("doctor.log"));
        let nodes = evidence(&["localhost".to_string()], Some(&d), &[], &[]);
        assert!(nodes.iter().all(NodeVerdict::passed), "{nodes:?}");
        assert!(whats(&nodes[0])[0].starts_with("doctor reported no node of this name, but"));
        // gpu01 and gpu01.cluster are one node.
        let d = doctor(0, &["gpu01"], Vec::new(), PathBuf::from("doctor.log"));
        let nodes = evidence(&["gpu01.cluster".to_string()], Some(&d), &[], &[]);
        assert!(nodes[0].problems.is_empty(), "{nodes:?}");
    }
}
