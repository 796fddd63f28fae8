//! The rack spec (TOML): how to launch, what doctor gets, the tests to run and
//! the checks on their results. Loading validates everything up front, so a typo
//! is one line naming the field before anything runs. See docs/rack-acceptance.md
//! ("rack_check") and scripts/rack-*.toml for the format.

use super::check::{metric_of, parse_bound, Bound, Check, CheckKind, RowMetric, Side};
use super::launch::LaunchSpec;
use crate::allpairs::Thresholds;
use crate::cli::shown;
use crate::input::read_text;
use crate::report::Placement;
use crate::sizes::{human_bytes, parse_size};
use crate::sysfs::counters::Class;
use anyhow::{anyhow, bail, Context};
use serde::Deserialize;
use std::path::Path;

/// The most of a spec file read: a rack spec is a few KiB of TOML.
pub const MAX_SPEC_BYTES: u64 = 1 << 20;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DoctorSpec {
    #[serde(default)]
    pub skip: bool,
    /// doctor's flags: `--port-rate 400`, `--hca mlx5_0,mlx5_1`, `--sysfs-root DIR`.
    #[serde(default)]
    pub args: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestSpec {
    /// Names its files in the report: NAME.csv, NAME.log.
    pub name: String,
    /// One of fabricbench's binaries: all_reduce_perf, sendrecv_perf, ...
    pub binary: String,
    #[serde(default)]
    pub args: Vec<String>,
    pub nodes: Option<usize>,
    pub ranks_per_node: Option<usize>,
}

impl TestSpec {
    pub fn all_pairs(&self) -> bool {
        self.args.iter().any(|a| a == "--all-pairs")
    }

    /// The netdevs of `--rails A,B` (or `--rails=A,B`) in its args; none without.
    pub fn rails(&self) -> Vec<String> {
        let list =
            self.args
                .iter()
                .enumerate()
                .find_map(|(i, a)| match a.strip_prefix("--rails") {
                    Some("") => self.args.get(i + 1).cloned(),
                    Some(v) => v.strip_prefix('=').map(str::to_string),
                    None => None,
                });
        list.map_or_else(Vec::new, |l| l.split(',').map(str::to_string).collect())
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    test: String,
    metric: String,
    size: Option<String>,
    placement: Option<Placement>,
    min: Option<Bound>,
    max: Option<Bound>,
    slow_fraction: Option<f64>,
    slow_latency: Option<f64>,
    /// A test with --rails: the rail (from 1) an all-pairs check judges; every rail without.
    rail: Option<usize>,
    max_errors: Option<u64>,
    max_retransmits: Option<u64>,
    max_congestion: Option<u64>,
    max_pauses: Option<u64>,
}

impl RawCheck {
    /// The counter thresholds given, by class.
    fn counter_limits(&self) -> Vec<(Class, u64)> {
        [
            (Class::Errors, self.max_errors),
            (Class::Retransmits, self.max_retransmits),
            (Class::Congestion, self.max_congestion),
            (Class::Pauses, self.max_pauses),
        ]
        .into_iter()
        .filter_map(|(c, v)| Some((c, v?)))
        .collect()
    }
}

/// `[rounds]`: how many times each test with a threshold check runs (its
/// launches are the samples of each check's interval), and the budget for
/// re-measuring the checks that came out inconclusive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundsSpec {
    /// Rounds of every test before judging.
    pub count: usize,
    /// The most rounds a test gets, re-measures included.
    pub max: usize,
    /// The most seconds spent re-measuring, all tests together; no round starts
    /// that would end past it (judged by the test's rounds so far).
    pub max_seconds: u64,
}

impl Default for RoundsSpec {
    fn default() -> Self {
        RoundsSpec {
            count: 3,
            max: 10,
            max_seconds: 300,
        }
    }
}

/// `[rounds]` as written: numbers, checked whole and in range by `resolve`
/// (serde's own words would name neither the key nor the fix).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRounds {
    count: Option<f64>,
    max: Option<f64>,
    max_seconds: Option<f64>,
}

impl RawRounds {
    fn resolve(&self) -> anyhow::Result<RoundsSpec> {
        const MOST_ROUNDS: f64 = 1000.0;
        let d = RoundsSpec::default();
        let whole = |key: &str, v: Option<f64>, least: f64, most: f64, what: &str| match v {
            None => Ok(None),
            Some(v) if v.fract() == 0.0 && (least..=most).contains(&v) => Ok(Some(v)),
            Some(v) => Err(anyhow!(
                "[rounds] {key} = {}: give {what}, {} to {}",
                shown(v),
                shown(least),
                shown(most)
            )),
        };
        let count = whole(
            "count",
            self.count,
            1.0,
            MOST_ROUNDS,
            "the rounds of each test (3 or more to judge on an interval)",
        )?
        .map_or(d.count, |v| v as usize);
        let max = whole(
            "max",
            self.max,
            count as f64,
            MOST_ROUNDS,
            "the most rounds of a test with re-measures, from count",
        )?
        .map_or(d.max.max(count), |v| v as usize);
        let max_seconds = whole(
            "max_seconds",
            self.max_seconds,
            0.0,
            MAX_TIMEOUT_S as f64,
            "the whole seconds re-measuring may take",
        )?
        .map_or(d.max_seconds, |v| v as u64);
        Ok(RoundsSpec {
            count,
            max,
            max_seconds,
        })
    }
}

/// A week: the longest re-measuring budget taken (as the longest step timeout).
const MAX_TIMEOUT_S: u64 = 604_800;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: String,
    launch: LaunchSpec,
    #[serde(default)]
    doctor: DoctorSpec,
    #[serde(default)]
    rounds: RawRounds,
    #[serde(default, rename = "test")]
    tests: Vec<TestSpec>,
    #[serde(default, rename = "check")]
    checks: Vec<RawCheck>,
}

#[derive(Clone, Debug)]
pub struct Spec {
    pub name: String,
    pub launch: LaunchSpec,
    pub doctor: DoctorSpec,
    pub rounds: RoundsSpec,
    pub tests: Vec<TestSpec>,
    pub checks: Vec<Check>,
}

/// A TOML error as one line: "line 12: unknown field `nodez`, expected ...".
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let line = e
        .span()
        .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    let message = readable_numbers(&e.message().replace('\n', " "));
    match line {
        Some(l) => format!("line {l}: {message}"),
        None => message,
    }
}

/// serde's and toml's words for numbers, as a person writes them: "floating
/// point `1e300`" (serde writes 301 digits), and TOML's integer bound named
/// ("number too large to fit in target type" says neither which nor how large).
fn readable_numbers(message: &str) -> String {
    let mut text = message
        .replace(
            "number too large to fit in target type",
            "a number too large for a TOML integer (at most 9223372036854775807)",
        )
        .replace(
            "number too small to fit in target type",
            "a number too small for a TOML integer (at least -9223372036854775808)",
        );
    const FLOAT: &str = "floating point `";
    if let Some(start) = text.find(FLOAT).map(|i| i + FLOAT.len()) {
        let end = text[start..].find('`').map_or(text.len(), |e| start + e);
        if let Ok(v) = text[start..end].parse::<f64>() {
            text.replace_range(start..end, &shown(v));
        }
    }
    text
}

impl Spec {
    pub fn load(path: &Path) -> anyhow::Result<Spec> {
        let text = read_text(path, MAX_SPEC_BYTES).map_err(|e| {
            anyhow!(
                "--spec {}: {e}; give the path of a rack spec (.toml, see scripts/rack-*.toml)",
                path.display()
            )
        })?;
        Spec::parse(&text).with_context(|| format!("--spec {}", path.display()))
    }

    pub fn parse(text: &str) -> anyhow::Result<Spec> {
        let raw: RawSpec = toml::from_str(text).map_err(|e| anyhow!(toml_error(text, &e)))?;
        layout(
            "[launch]",
            Some(raw.launch.nodes),
            Some(raw.launch.ranks_per_node),
        )?;
        if !raw.launch.hosts.is_empty() && raw.launch.hosts.len() < raw.launch.nodes {
            bail!(
                "[launch] hosts lists {} hosts for nodes = {}: list one per node or leave hosts out",
                raw.launch.hosts.len(),
                raw.launch.nodes
            );
        }
        let rounds = raw.rounds.resolve()?;
        if raw.tests.is_empty() {
            // An acceptance that measured nothing is no acceptance: a PASS of doctor
            // alone would read as a rack accepted. doctor itself is the config check.
            bail!(
                "no [[test]]: rack_check accepts a rack by measuring it; add a [[test]] \
                 (e.g. name = \"all_reduce\", binary = \"all_reduce_perf\"), or run doctor \
                 alone to check the configuration (mpirun -np NODES --map-by ppr:1:node doctor)"
            );
        }
        for (i, t) in raw.tests.iter().enumerate() {
            let at = format!("[[test]] {} ({})", i + 1, t.name);
            if t.name.is_empty()
                || !t
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                bail!(
                    "{at}: name must be letters, digits, '_' or '-' (it names the report's files)"
                );
            }
            if t.name == "doctor" {
                bail!(
                    "{at}: the name 'doctor' is doctor's in the report (doctor.csv, doctor.log); choose another"
                );
            }
            if raw.tests[..i].iter().any(|o| o.name == t.name) {
                bail!("{at}: another test has this name");
            }
            if t.binary.contains('/') || t.binary.is_empty() {
                bail!(
                    "{at}: binary '{}': give the name of a fabricbench binary, e.g. all_reduce_perf",
                    t.binary
                );
            }
            if t.args.iter().any(|a| a == "--csv" || a == "--append") {
                bail!(
                    "{at}: drop --csv/--append from args: rack_check writes each test's CSV into the report"
                );
            }
            layout(&at, t.nodes, t.ranks_per_node)?;
            let rails = t.rails().len();
            let per_node = t.ranks_per_node.unwrap_or(raw.launch.ranks_per_node);
            if rails > 0 && per_node != rails {
                bail!(
                    "{at}: --rails {} needs one rank a rail on each node: set ranks_per_node = {rails} (it is {per_node})",
                    t.rails().join(",")
                );
            }
        }
        let checks = raw
            .checks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let at = format!("[[check]] {} ({} {})", i + 1, c.test, c.metric);
                resolve_check(c, &raw.tests).context(at)
            })
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect();
        Ok(Spec {
            name: raw.name,
            launch: raw.launch,
            doctor: raw.doctor,
            rounds,
            tests: raw.tests,
            checks,
        })
    }

    pub fn test(&self, name: &str) -> Option<&TestSpec> {
        self.tests.iter().find(|t| t.name == name)
    }

    /// Whether `test` has a threshold check on its rows: those are judged on
    /// the interval of several rounds; a test without one runs once.
    pub fn judged_on_rounds(&self, test: &str) -> bool {
        self.checks
            .iter()
            .any(|c| c.test == test && matches!(c.kind, CheckKind::Row { .. }))
    }
}

/// The most nodes and ranks per node taken: far beyond any rack, and small
/// enough that their product (the -np of a step) cannot overflow.
const MAX_NODES: usize = 100_000;
const MAX_RANKS_PER_NODE: usize = 4096;

/// nodes and ranks_per_node of `at`, where given: at least 1, at most the bounds.
fn layout(at: &str, nodes: Option<usize>, per_node: Option<usize>) -> anyhow::Result<()> {
    for (key, value, most) in [
        ("nodes", nodes, MAX_NODES),
        ("ranks_per_node", per_node, MAX_RANKS_PER_NODE),
    ] {
        if let Some(v) = value.filter(|v| !(1..=most).contains(v)) {
            bail!("{at}: {key} = {v}: give 1 to {most}");
        }
    }
    Ok(())
}

/// A check as written; an all-pairs check of a test with --rails is one check a rail.
fn resolve_check(c: &RawCheck, tests: &[TestSpec]) -> anyhow::Result<Vec<Check>> {
    let test = tests.iter().find(|t| t.name == c.test).ok_or_else(|| {
        anyhow!(
            "test '{}' is not a [[test]] name (tests: {})",
            c.test,
            tests
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    let rails = test.rails();
    if c.rail.is_some() && (rails.is_empty() || c.metric != "all-pairs") {
        bail!("rail belongs to all-pairs checks of a test run with --rails");
    }
    if c.metric == "counters" {
        if !rails.is_empty() {
            bail!(
                "test '{}' runs --rails, which reads no fabric counters (a node's TCP counters \
                 are every rail's); check its pairs with metric = \"all-pairs\"",
                test.name
            );
        }
        return counters_check(c, test.all_pairs()).map(|c| vec![c]);
    }
    if !c.counter_limits().is_empty() {
        bail!(
            "max_errors, max_retransmits, max_congestion and max_pauses belong to \
                    metric = \"counters\" checks"
        );
    }
    if c.metric == "all-pairs" {
        if !test.all_pairs() {
            bail!(
                "metric all-pairs needs a test run with --all-pairs; add it to test '{}' args",
                test.name
            );
        }
        if c.size.is_some() || c.min.is_some() || c.max.is_some() || c.placement.is_some() {
            bail!("an all-pairs check takes slow_fraction and slow_latency, not size/min/max/placement");
        }
        // Thresholds::new takes an endless factor, which passes every pair.
        if let Some(v) = c.slow_latency.filter(|v| !v.is_finite()) {
            bail!("slow_latency {v}: give a multiple of the lowest latency >= 1, e.g. 2");
        }
        let defaults = Thresholds::default();
        let t = Thresholds::new(
            c.slow_fraction.unwrap_or(defaults.bw_fraction),
            c.slow_latency.unwrap_or(defaults.latency_factor),
        )
        .map_err(|e| {
            anyhow!(format!("{e:#}")
                .replace("--slow-fraction", "slow_fraction")
                .replace("--slow-latency", "slow_latency"))
        })?;
        let check = |rail: Option<usize>| Check {
            label: match rail {
                Some(r) => format!("{} all pairs, rail {} ({})", c.test, r + 1, rails[r]),
                None => format!("{} all pairs", c.test),
            },
            test: c.test.clone(),
            kind: CheckKind::AllPairs(t),
            rail,
        };
        return match (rails.len(), c.rail) {
            (0, _) => Ok(vec![check(None)]),
            (n, Some(r)) if (1..=n).contains(&r) => Ok(vec![check(Some(r - 1))]),
            (n, Some(r)) => bail!("rail = {r}: test '{}' has rails 1 to {n}", test.name),
            (n, None) => Ok((0..n).map(|r| check(Some(r))).collect()),
        };
    }
    let metric = RowMetric::ALL
        .iter()
        .find(|(n, _)| *n == c.metric)
        .map(|(_, m)| *m)
        .ok_or_else(|| {
            anyhow!(
                "metric '{}': use busbw, algbw, time, p50, p99, p999, max, pct_of_expected, all-pairs or counters",
                c.metric
            )
        })?;
    if test.all_pairs() {
        bail!(
            "test '{}' runs --all-pairs: check it with metric = \"all-pairs\"",
            test.name
        );
    }
    if c.slow_fraction.is_some() || c.slow_latency.is_some() {
        bail!("slow_fraction and slow_latency belong to all-pairs checks");
    }
    let size_text = c
        .size
        .as_deref()
        .context("size is missing: give the message size the check reads, e.g. size = \"1G\"")?;
    // "size '8Q' is not a size": the reason quotes the value, so no colon.
    let size = parse_size(size_text).map_err(|e| anyhow!("size {e}"))?;
    let placement = c.placement.unwrap_or(Placement::OutOfPlace);
    let metric = metric_of(metric, c.min.as_ref(), c.max.as_ref())?;
    let min = c
        .min
        .as_ref()
        .map(|b| parse_bound(b, metric, Side::Min))
        .transpose()?;
    let max = c
        .max
        .as_ref()
        .map(|b| parse_bound(b, metric, Side::Max))
        .transpose()?;
    match (&min, &max) {
        (None, None) => bail!("give min or max (or both)"),
        (Some(lo), Some(hi)) if lo.value > hi.value => {
            bail!(
                "min {} is above max {}: no value can pass; swap them or fix one",
                lo.text,
                hi.text
            )
        }
        _ => {}
    }
    Ok(vec![Check {
        label: format!(
            "{} {} at {} ({})",
            c.test,
            metric.name(),
            human_bytes(size),
            placement.name()
        ),
        test: c.test.clone(),
        kind: CheckKind::Row {
            metric,
            size,
            placement,
            min,
            max,
        },
        rail: None,
    }])
}

/// `metric = "counters"`: thresholds on the fabric counters' classes,
/// optionally at one size.
/// `all_pairs`: the test's counters span each pair's round, every size.
fn counters_check(c: &RawCheck, all_pairs: bool) -> anyhow::Result<Check> {
    let max = c.counter_limits();
    if max.is_empty() {
        bail!(
            "give max_errors, max_retransmits, max_congestion or max_pauses \
                    (e.g. max_retransmits = 0)"
        );
    }
    if c.min.is_some() || c.max.is_some() || c.placement.is_some() {
        bail!(
            "a counters check takes max_errors, max_retransmits, max_congestion, \
                    max_pauses and size, not min/max/placement"
        );
    }
    if c.slow_fraction.is_some() || c.slow_latency.is_some() {
        bail!("slow_fraction and slow_latency belong to all-pairs checks");
    }
    let size = c
        .size
        .as_deref()
        .map(|s| parse_size(s).map_err(|e| anyhow!("size {e}")))
        .transpose()?;
    if all_pairs && size.is_some() {
        bail!(
            "size with test '{}': an all-pairs test reads the counters around each pair's round, \
             which spans every size; drop size",
            c.test
        );
    }
    let over = match (size, all_pairs) {
        (Some(s), _) => format!(" at {}", human_bytes(s)),
        (None, true) => " over every pair's round".to_string(),
        (None, false) => " over every size".to_string(),
    };
    let limits: Vec<String> = max
        .iter()
        .map(|(class, v)| format!("{} <= {v}", class.name()))
        .collect();
    Ok(Check {
        label: format!("{} fabric counters {}{over}", c.test, limits.join(", ")),
        test: c.test.clone(),
        kind: CheckKind::Counters { size, max },
        rail: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"
name = "two nodes"
[launch]
nodes = 2
ranks_per_node = 8
hosts = ["a", "b"]
args = ["--bind-to", "numa"]
[doctor]
args = ["--port-rate", "400"]
[[test]]
name = "ar"
binary = "all_reduce_perf"
args = ["-b", "8", "-e", "1G", "-f", "2"]
[[test]]
name = "pairs"
binary = "sendrecv_perf"
args = ["--all-pairs"]
ranks_per_node = 1
[[check]]
test = "ar"
metric = "busbw"
size = "1G"
min = "85% of ib-ndr x 8"
[[check]]
test = "ar"
metric = "time"
size = "8"
max = 30
[[check]]
test = "pairs"
metric = "all-pairs"
slow_fraction = 0.8
"#;

    #[test]
    fn a_spec_parses_and_resolves() {
        let s = Spec::parse(SPEC).unwrap();
        assert_eq!(s.checks.len(), 3);
        let CheckKind::Row {
            min: Some(t), size, ..
        } = &s.checks[0].kind
        else {
            panic!("{:?}", s.checks[0])
        };
        assert_eq!(*size, 1 << 30);
        assert_eq!(t.value, 340.0);
        assert_eq!(
            t.text,
            "340.000 GB/s (85% of ib-ndr x 8: ib-ndr 50 GB/s, x 8)"
        );
        assert_eq!(s.checks[0].label, "ar busbw at 1 GiB (out-of-place)");
        let CheckKind::Row { max: Some(t), .. } = &s.checks[1].kind else {
            panic!()
        };
        assert_eq!((t.value, t.text.as_str()), (30.0, "30 us"));
        assert_eq!(
            s.checks[2].kind,
            CheckKind::AllPairs(Thresholds::new(0.8, 2.0).unwrap())
        );
    }

    #[test]
    fn thresholds_as_a_percentage_of_expected() {
        let spec = |bounds: &str| parsed(&SPEC.replacen("min = \"85% of ib-ndr x 8\"", bounds, 1));
        let s = spec("min = \"80% of expected\"").unwrap();
        let CheckKind::Row {
            metric,
            min: Some(t),
            ..
        } = &s.checks[0].kind
        else {
            panic!("{:?}", s.checks[0])
        };
        assert_eq!(*metric, RowMetric::PctOfExpected);
        assert_eq!(t.value, 80.0);
        assert_eq!(
            t.text,
            "80 % (80% of expected: the model's busbw at the size)"
        );
        assert_eq!(
            s.checks[0].label,
            "ar pct_of_expected at 1 GiB (out-of-place)"
        );
        let row = crate::report::Row {
            pct_of_expected: Some(72.5),
            ..Default::default()
        };
        assert_eq!(metric.value(&row), 72.5);
        assert!(metric.value(&crate::report::Row::default()).is_nan());
        assert!(spec("min = \"80% of expected\"\nmax = 40")
            .unwrap_err()
            .contains("give both as \"P% of expected\", or neither"));
        assert!(spec("min = \"0% of expected\"").unwrap_err().contains(
            "min '0% of expected': give a percentage above 0 and at most 100% of expected"
        ));
        assert!(
            parsed(&SPEC.replacen("max = 30", "max = \"120% of expected\"", 1))
                .unwrap_err()
                .contains("metric time has no expected figure")
        );
    }

    /// A test with --rails: one all-pairs check a rail (or the rail named),
    /// one rank a rail on each node, and no counters check.
    #[test]
    fn a_rails_test_is_judged_rail_by_rail() {
        let rails = |args: &str, per_node: &str, check: &str| {
            parsed(
                &SPEC
                    .replacen("args = [\"--all-pairs\"]", args, 1)
                    .replacen("ranks_per_node = 1", per_node, 1)
                    .replacen("slow_fraction = 0.8", check, 1),
            )
        };
        let two = "args = [\"--all-pairs\", \"--rails\", \"eth1,eth2\"]";
        let s = rails(two, "ranks_per_node = 2", "slow_fraction = 0.8").unwrap();
        let pairs: Vec<(&str, Option<usize>)> = s.checks[2..]
            .iter()
            .map(|c| (c.label.as_str(), c.rail))
            .collect();
        assert_eq!(
            pairs,
            [
                ("pairs all pairs, rail 1 (eth1)", Some(0)),
                ("pairs all pairs, rail 2 (eth2)", Some(1))
            ]
        );
        assert_eq!(
            s.checks[3].results_of(Path::new("out/pairs.r2.csv")),
            Path::new("out/pairs.r2.rail2.csv")
        );
        let one = rails(
            "args = [\"--all-pairs\", \"--rails=eth1,eth2\"]",
            "ranks_per_node = 2",
            "rail = 2",
        )
        .unwrap();
        assert_eq!(one.checks.len(), 3);
        assert_eq!(one.checks[2].rail, Some(1));
        assert!(rails(two, "ranks_per_node = 2", "rail = 3")
            .unwrap_err()
            .contains("rail = 3: test 'pairs' has rails 1 to 2"));
        assert!(rails(two, "ranks_per_node = 1", "slow_fraction = 0.8")
            .unwrap_err()
            .contains("--rails eth1,eth2 needs one rank a rail on each node: set ranks_per_node = 2 (it is 1)"));
        assert!(
            rails("args = [\"--all-pairs\"]", "ranks_per_node = 1", "rail = 1")
                .unwrap_err()
                .contains("rail belongs to all-pairs checks of a test run with --rails")
        );
        let counters = SPEC.replacen("args = [\"--all-pairs\"]", two, 1).replacen(
            "ranks_per_node = 1",
            "ranks_per_node = 2",
            1,
        )
            + "[[check]]\ntest = \"pairs\"\nmetric = \"counters\"\nmax_retransmits = 0\n";
        assert!(parsed(&counters)
            .unwrap_err()
            .contains("runs --rails, which reads no fabric counters"));
    }

    /// `Spec::parse` with its message as the user reads it.
    fn parsed(text: &str) -> Result<Spec, String> {
        Spec::parse(text).map_err(|e| format!("{e:#}"))
    }

    fn err(edit: (&str, &str)) -> String {
        assert!(SPEC.contains(edit.0), "{}", edit.0);
        parsed(&SPEC.replacen(edit.0, edit.1, 1)).unwrap_err()
    }

    #[test]
    fn mistakes_are_one_line_naming_the_field() {
        assert_eq!(
            err(("min = \"85% of ib-ndr x 8\"", "min = \"85% of ib-qdr\""))
                .lines()
                .count(),
            1
        );
        assert!(
            err(("min = \"85% of ib-ndr x 8\"", "min = \"85% of ib-qdr\"")).starts_with(
                "[[check]] 1 (ar busbw): min '85% of ib-qdr': 'ib-qdr' is neither a link name"
            )
        );
        assert!(
            err(("max = 30", "max = \"50% of ib-ndr\"")).contains("metric time takes microseconds")
        );
        assert!(
            err(("metric = \"busbw\"", "metric = \"bandwidth\"")).contains("metric 'bandwidth'")
        );
        assert!(err((
            "test = \"ar\"\nmetric = \"time\"",
            "test = \"nope\"\nmetric = \"time\""
        ))
        .contains("test 'nope' is not a [[test]] name (tests: ar, pairs)"));
        assert!(
            err(("size = \"8\"", "size = \"8Q\"")).starts_with("[[check]] 2 (ar time): size '8Q'")
        );
        let e = err(("nodes = 2", "nodez = 2"));
        assert!(e.starts_with("line 4: unknown field `nodez`"), "{e}");
        assert!(err(("args = [\"--all-pairs\"]", "args = []"))
            .contains("needs a test run with --all-pairs"));
        assert!(err(("slow_fraction = 0.8", "slow_fraction = 3.0")).contains("slow_fraction 3"));
        assert!(err(("name = \"pairs\"", "name = \"ar\"")).contains("another test has this name"));
        assert!(err(("name = \"pairs\"", "name = \"doctor\""))
            .contains("the name 'doctor' is doctor's"));
        assert!(err(("args = [\"-b\", \"8\"", "args = [\"--csv\", \"x\"")).contains("drop --csv"));
        assert!(err(("hosts = [\"a\", \"b\"]", "hosts = [\"a\"]"))
            .contains("hosts lists 1 hosts for nodes = 2"));
    }

    #[test]
    fn rounds_default_and_bad_values_name_the_key() {
        let s = Spec::parse(SPEC).unwrap();
        assert_eq!(s.rounds, RoundsSpec::default());
        assert_eq!(
            (s.rounds.count, s.rounds.max, s.rounds.max_seconds),
            (3, 10, 300)
        );
        assert!(s.judged_on_rounds("ar") && !s.judged_on_rounds("pairs"));
        let with = |r: &str| parsed(&format!("{SPEC}\n[rounds]\n{r}\n"));
        let s = with("count = 5\nmax = 5\nmax_seconds = 0").unwrap();
        assert_eq!(
            (s.rounds.count, s.rounds.max, s.rounds.max_seconds),
            (5, 5, 0)
        );
        for (bad, want) in [
            ("count = 0", "[rounds] count = 0: give the rounds of each test (3 or more to judge on an interval), 1 to 1000"),
            ("count = 2.5", "[rounds] count = 2.5: give the rounds"),
            ("count = nan", "[rounds] count = NaN: give the rounds"),
            ("count = 5\nmax = 4", "[rounds] max = 4: give the most rounds of a test with re-measures, from count, 5 to 1000"),
            ("max = 2", "[rounds] max = 2: give the most rounds"),
            ("max_seconds = 1000000", "[rounds] max_seconds = 1000000: give the whole seconds re-measuring may take, 0 to 604800"),
            ("max_seconds = -1", "[rounds] max_seconds = -1: give the whole seconds"),
            ("rounds = 3", "unknown field `rounds`"),
        ] {
            let e = with(bad).unwrap_err();
            assert_eq!(e.lines().count(), 1, "{e}");
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn placements_are_named_as_the_csv_names_them() {
        let spec = SPEC.replacen("size = \"8\"", "size = \"8\"\nplacement = \"in-place\"", 1);
        let s = Spec::parse(&spec).unwrap();
        let CheckKind::Row { placement, .. } = &s.checks[1].kind else {
            panic!("{:?}", s.checks[1])
        };
        assert_eq!(*placement, Placement::InPlace);
        assert_eq!(s.checks[1].label, "ar time at 8 B (in-place)");
        let e = err(("size = \"8\"", "size = \"8\"\nplacement = \"sideways\""));
        assert!(
            e.contains("placement 'sideways': use out-of-place or in-place"),
            "{e}"
        );
    }

    /// Thresholds that would pass (or fail) every value, and a layout or a
    /// timeout no run can have: each refused in one line naming the check and
    /// the key.
    #[test]
    fn degenerate_bounds_are_refused() {
        let min = "min = \"85% of ib-ndr x 8\"";
        let cases: &[((&str, &str), &str)] = &[
            ((min, "min = nan"), "[[check]] 1 (ar busbw): min NaN: a threshold is a number of GB/s above 0"),
            ((min, "min = -inf"), "[[check]] 1 (ar busbw): min -inf: a threshold"),
            ((min, "min = -5"), "[[check]] 1 (ar busbw): min -5: a threshold"),
            ((min, "min = 0"), "[[check]] 1 (ar busbw): min 0: a threshold"),
            ((min, "min = \"NaN\""), "[[check]] 1 (ar busbw): min NaN: a threshold"),
            (("max = 30", "max = nan"), "[[check]] 2 (ar time): max NaN: a threshold is a number of us above 0"),
            ((min, "min = \"85% of ib-ndr x 0\""), "x N counts links: give N of at least 1"),
            ((min, "min = \"0% of ib-ndr\""), "min '0% of ib-ndr': give a percentage above 0 and at most 100%"),
            ((min, "min = \"-5% of ib-ndr\""), "min '-5% of ib-ndr': give a percentage"),
            ((min, "min = \"150% of ib-ndr\""), "min '150% of ib-ndr': give a percentage above 0 and at most 100%"),
            ((min, "min = \"NaN% of ib-ndr\""), "min 'NaN% of ib-ndr': give a percentage"),
            ((min, "min = \"inf% of ib-ndr\""), "min 'inf% of ib-ndr': give a percentage"),
            ((min, "max = \"2000% of ib-ndr\""), "max '2000% of ib-ndr': give a percentage above 0 and at most 1000%"),
            ((min, "min = \"85% of ib-ndr x 8\"\nmax = 100"), "[[check]] 1 (ar busbw): min 340.000 GB/s (85% of ib-ndr x 8: ib-ndr 50 GB/s, x 8) is above max 100 GB/s: no value can pass"),
            (("nodes = 2", "nodes = 2\ntimeout_s = 0"), "line 5: timeout_s = 0: give the whole seconds each step may run, from 1 to 604800"),
            (("nodes = 2", "nodes = 2\ntimeout_s = -1"), "timeout_s = -1: give the whole seconds"),
            (("nodes = 2", "nodes = 2\ntimeout_s = 1.5"), "timeout_s = 1.5: give the whole seconds"),
            (("nodes = 2", "nodes = 2\ntimeout_s = nan"), "timeout_s = NaN: give the whole seconds"),
            (("nodes = 2", "nodes = 2\ntimeout_s = 1e12"), "timeout_s = 1000000000000: give the whole seconds"),
            (("nodes = 2", "nodes = 2\ntimeout_s = 1e15"), "timeout_s = 1e15: give the whole seconds"),
            (("nodes = 2", "nodes = 0"), "[launch]: nodes = 0: give 1 to 100000"),
            (("ranks_per_node = 8", "ranks_per_node = 100000000"), "[launch]: ranks_per_node = 100000000: give 1 to 4096"),
            (("ranks_per_node = 1", "ranks_per_node = 0"), "[[test]] 2 (pairs): ranks_per_node = 0: give 1 to 4096"),
            (("slow_fraction = 0.8", "slow_fraction = nan"), "[[check]] 3 (pairs all-pairs): slow_fraction NaN"),
            (("slow_fraction = 0.8", "slow_latency = inf"), "[[check]] 3 (pairs all-pairs): slow_latency inf: give a multiple"),
            // Numbers as written, never in 301 digits; TOML's integer bound named.
            (("nodes = 2", "nodes = 2\ntimeout_s = 1e300"), "line 5: timeout_s = 1e300: give the whole seconds"),
            (("nodes = 2", "nodes = 1e23"), "invalid type: floating point `1e23`, expected usize"),
            (("nodes = 2", "nodes = 99999999999999999999999"), "a number too large for a TOML integer (at most 9223372036854775807)"),
            ((min, "min = 1e300"), "[[check]] 1 (ar busbw): min 1e300: a threshold is a number of GB/s above 0 and at most 1000000000"),
            (("slow_fraction = 0.8", "slow_fraction = 1e300"), "slow_fraction 1e300: too large; give a fraction of the median, more than 0 and at most 1"),
        ];
        for (edit, want) in cases {
            let e = err(*edit);
            assert_eq!(e.lines().count(), 1, "{e}");
            assert!(e.contains(want), "{edit:?}: {e}");
        }
        // What stays accepted: 100% of a limit as a minimum, whole-second timeouts.
        let spec = SPEC
            .replacen(min, "min = \"100% of ib-ndr\"\nmax = 1000", 1)
            .replacen("nodes = 2", "nodes = 2\ntimeout_s = 60", 1);
        let s = Spec::parse(&spec).unwrap();
        assert_eq!(s.launch.timeout_s, 60);
        let CheckKind::Row { min: Some(t), .. } = &s.checks[0].kind else {
            panic!("{:?}", s.checks[0])
        };
        assert_eq!(t.value, 50.0);
    }

    #[test]
    fn counter_checks_parse_and_refuse_what_they_do_not_take() {
        let with = |check: &str| {
            SPEC.replacen(
                "[[check]]\ntest = \"ar\"\nmetric = \"time\"",
                &format!("[[check]]\ntest = \"ar\"\nmetric = \"counters\"\n{check}\n[[check]]\ntest = \"ar\"\nmetric = \"time\""),
                1,
            )
        };
        let s = Spec::parse(&with("max_retransmits = 0\nmax_pauses = 10\nsize = \"1M\"")).unwrap();
        assert_eq!(
            s.checks[1].kind,
            CheckKind::Counters {
                size: Some(1 << 20),
                max: vec![(Class::Retransmits, 0), (Class::Pauses, 10)]
            }
        );
        assert_eq!(
            s.checks[1].label,
            "ar fabric counters retransmits <= 0, pauses <= 10 at 1 MiB"
        );
        let e = parsed(&with("")).unwrap_err();
        assert!(e.ends_with("give max_errors, max_retransmits, max_congestion or max_pauses (e.g. max_retransmits = 0)"), "{e}");
        let e = parsed(&with("max_errors = 0\nmin = 3")).unwrap_err();
        assert!(e.contains("a counters check takes max_errors"), "{e}");
        let e = parsed(&SPEC.replacen("max = 30", "max = 30\nmax_errors = 0", 1)).unwrap_err();
        assert!(e.contains("belong to metric = \"counters\" checks"), "{e}");
        let e = parsed(&with("max_errors = -1")).unwrap_err();
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}
