//! The `rack_check` binary: doctor, then the spec's tests, then its checks, into
//! one report directory.

use super::check::{Check, CheckKind};
use super::evaluate::{evaluate, not_run, CheckResult, Verdict};
use super::launch::shell_line;
use super::nodes::{node_verdicts, pairs_outcomes, Evidence};
use super::probe::after_tests;
use super::report::checks_json;
use super::report::RunReport;
use super::rounds::{remeasure, Budget};
use super::runner::{run_step, skip_step};
use super::spec::Spec;
use super::steps::{DoctorStep, TestStep};
use crate::cli::{io_reason, parse_one_line, shown};
use crate::job::{self, ExitStatus, Failure, Start};
use crate::output::{check_new_folder, create_new_folder, write_whole, Replace};
use crate::report::run::compact_utc;
use anyhow::{anyhow, ensure, Context};
use clap::Parser;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Rack acceptance: runs doctor and the spec's tests (through mpirun or srun),
/// judges every threshold on the 95% interval of several rounds, and writes a report
/// directory (summary.md, report.html, checks.json, CSVs, logs). Exits 0 only when
/// everything passed, 1 when anything failed, 4 when a check stayed inconclusive.
#[derive(Parser, Debug)]
#[command(name = "rack_check", version = crate::job::provenance::version())]
pub struct RackArgs {
    /// The rack spec (TOML): launch layout, doctor flags, tests and checks
    #[arg(long = "spec")]
    pub spec: PathBuf,
    /// The report directory to create (it must not exist); default rack-report-<UTC time>
    #[arg(long = "out")]
    pub out: Option<PathBuf>,
    /// Where doctor and the benchmark binaries are (default: beside rack_check)
    #[arg(long = "bin-dir")]
    pub bin_dir: Option<PathBuf>,
}

/// Exit status: 0 when everything passed, 1 when anything failed, 4 when nothing
/// failed but a check's interval stayed across its threshold, 2 for a usage or
/// spec error (and a report directory that cannot be written).
pub fn main() -> ExitCode {
    job::main(Start::Alone, "rack_check", |_job, _program| {
        run().map_err(Failure::usage)
    })
}

fn run() -> anyhow::Result<ExitStatus> {
    let args: RackArgs = parse_one_line(std::env::args_os())?;
    let spec = Spec::load(&args.spec)?;
    let bin_dir = match &args.bin_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf))
            .context("cannot tell where rack_check is: give --bin-dir")?,
    };
    let binary = |name: &str| -> anyhow::Result<String> {
        let path = bin_dir.join(name);
        ensure!(
            path.is_file(),
            "{name} is not in {} (build it, or point --bin-dir at the fabricbench binaries)",
            bin_dir.display()
        );
        Ok(path.display().to_string())
    };
    let doctor_bin = if spec.doctor.skip {
        None
    } else {
        Some(binary("doctor")?)
    };
    let test_bins = spec
        .tests
        .iter()
        .map(|t| binary(&t.binary))
        .collect::<Result<Vec<_>, _>>()?;
    let started = chrono::Utc::now();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("rack-report-{}", compact_utc(started))));
    check_new_folder("--out", &out, "reports")?;
    // mkdir, not mkdir -p: a folder (or link) that appeared since is refused.
    create_new_folder(&out).map_err(|e| anyhow!("--out {}: {}", out.display(), io_reason(&e)))?;
    let spec_text = std::fs::read(&args.spec)
        .map_err(|e| anyhow!("--spec {}: {}", args.spec.display(), io_reason(&e)))?;
    write_report_file(&out.join("spec.toml"), &spec_text)?;

    let timeout = Duration::from_secs(spec.launch.timeout_s);
    let launch = &spec.launch;
    let doctor = doctor_bin.map(|bin| {
        let mut flags: Vec<String> = vec![
            "--csv".into(),
            out.join("doctor.csv").display().to_string(),
            "--json".into(),
            out.join("doctor.json").display().to_string(),
        ];
        flags.extend(spec.doctor.args.iter().cloned());
        // One rank per node is enough: doctor reads the node, not the GPUs.
        let argv = launch.argv(&bin, &flags, launch.nodes, 1);
        println!("rack_check: doctor: {}", shell_line(&argv));
        let outcome = run_step(&argv, &out.join("doctor.log"), timeout);
        let step = DoctorStep::read(
            outcome,
            launch.named_hosts(launch.nodes),
            &out.join("doctor.csv"),
            &out.join("doctor.json"),
        );
        println!(
            "rack_check: doctor: {} ({})",
            if step.passed() { "PASS" } else { "FAIL" },
            step.status()
        );
        step
    });

    // A node the launcher could not reach for doctor fails every step launched
    // on it, after the ssh timeout each time: those steps are not started.
    let unreachable = doctor
        .as_ref()
        .map_or_else(Vec::new, DoctorStep::unreachable);
    for (host, line) in &unreachable {
        println!("rack_check: {host} did not answer: {line}");
    }
    // Each test's command, all but the file names of a round.
    let commands: Vec<(Vec<String>, usize)> = spec
        .tests
        .iter()
        .map(|t| {
            let mut flags = t.args.clone();
            // The binary flags pairs by the spec's thresholds too, so its exit status
            // and table agree with the check.
            let pair_check = spec.checks.iter().find_map(|c| match &c.kind {
                CheckKind::AllPairs(th) if c.test == t.name => Some(th),
                _ => None,
            });
            if let Some(th) = pair_check.filter(|_| !flags.iter().any(|f| f.starts_with("--slow-")))
            {
                flags.extend([
                    "--slow-fraction".into(),
                    shown(th.bw_fraction),
                    "--slow-latency".into(),
                    shown(th.latency_factor),
                ]);
            }
            (flags, t.nodes.unwrap_or(launch.nodes))
        })
        .collect();
    let run_round = |i: usize, round: usize| -> TestStep {
        let t = &spec.tests[i];
        let (flags, nodes) = &commands[i];
        let stem = TestStep::file_stem(&t.name, round);
        let csv = out.join(format!("{stem}.csv"));
        let mut flags = flags.clone();
        flags.push("--csv".into());
        flags.push(csv.display().to_string());
        let argv = launch.argv(
            &test_bins[i],
            &flags,
            *nodes,
            t.ranks_per_node.unwrap_or(launch.ranks_per_node),
        );
        println!("rack_check: test {}: {}", t.name, shell_line(&argv));
        let log = out.join(format!("{stem}.log"));
        let hosts = launch.named_hosts(*nodes).unwrap_or_default();
        let outcome = match unreachable.iter().find(|(h, _)| hosts.contains(h)) {
            Some((host, _)) => skip_step(
                &argv,
                &log,
                format!("{host} did not answer when doctor was launched (doctor.log)"),
            ),
            None => run_step(&argv, &log, timeout),
        };
        let step = TestStep::read(
            &t.name,
            round,
            outcome,
            csv,
            (t.all_pairs(), t.rails().len()),
            launch.named_hosts(*nodes),
        );
        println!(
            "rack_check: test {}: {} in {:.1} s",
            step.title(),
            step.status(),
            step.outcome.seconds
        );
        step
    };
    // Rounds interleaved (round 1 of every test, then round 2, ...), so that a
    // slow spell of the machine touches every test instead of ruining one.
    let wanted: Vec<usize> = spec
        .tests
        .iter()
        .map(|t| match spec.judged_on_rounds(&t.name) {
            true => spec.rounds.count,
            false => 1,
        })
        .collect();
    let steps: RefCell<Vec<Vec<TestStep>>> =
        RefCell::new(spec.tests.iter().map(|_| Vec::new()).collect());
    for round in 1..=spec.rounds.count {
        // A test whose round did not finish is not judged: running it again
        // would only repeat the failure (a hang, once per round).
        let more = |i: usize| wanted[i] >= round && steps.borrow()[i].iter().all(TestStep::ran);
        for i in (0..spec.tests.len()).filter(|&i| more(i)) {
            let step = run_round(i, round);
            steps.borrow_mut()[i].push(step);
        }
    }
    let judge = |steps: &[Vec<TestStep>]| -> Vec<CheckResult> {
        spec.checks
            .iter()
            .map(|c| {
                let i = spec
                    .tests
                    .iter()
                    .position(|t| t.name == c.test)
                    .expect("resolved");
                judge_check(c, &steps[i], wanted[i])
            })
            .collect()
    };
    let mut seconds: Vec<Vec<f64>> = steps
        .borrow()
        .iter()
        .map(|s| s.iter().map(|t| t.outcome.seconds).collect())
        .collect();
    let budget = Budget {
        max_rounds: spec.rounds.max,
        max_seconds: spec.rounds.max_seconds as f64,
    };
    let unsettled = remeasure(
        budget,
        &mut seconds,
        || {
            let results = judge(&steps.borrow());
            let mut tests: Vec<usize> = Vec::new();
            for (c, r) in spec.checks.iter().zip(&results) {
                let i = spec
                    .tests
                    .iter()
                    .position(|t| t.name == c.test)
                    .expect("resolved");
                if r.verdict == Verdict::Inconclusive && !tests.contains(&i) {
                    println!(
                        "rack_check: {}: INCONCLUSIVE {}: re-measuring",
                        r.label, r.measured
                    );
                    tests.push(i);
                }
            }
            tests
        },
        |i| {
            let round = steps.borrow()[i].len() + 1;
            let step = run_round(i, round);
            let took = step.outcome.seconds;
            steps.borrow_mut()[i].push(step);
            took
        },
    );
    let steps = steps.into_inner();
    let checks = judge(&steps);
    for result in &checks {
        println!(
            "rack_check: {}: {} {} (threshold {})",
            result.label,
            result.verdict.name(),
            result.measured,
            result.threshold
        );
        for d in result.details.iter().filter(|_| !result.passed()) {
            println!("rack_check:     {d}");
        }
    }
    if let Some(why) =
        unsettled.filter(|_| checks.iter().any(|c| c.verdict == Verdict::Inconclusive))
    {
        println!("rack_check: re-measuring stopped: {why}");
    }
    let tests: Vec<TestStep> = steps.into_iter().flatten().collect();
    let probe = after_tests(launch, &tests, !unreachable.is_empty(), &out, timeout);
    let pairs = pairs_outcomes(&spec.checks, &tests);
    let nodes = node_verdicts(&Evidence {
        hosts: &launch.hosts,
        launched_nodes: launch.nodes,
        doctor: doctor.as_ref(),
        tests: &tests,
        pairs: &pairs,
        checks: &checks,
        probe: probe.as_ref(),
    });
    for n in &nodes {
        let deciding = n.deciding();
        println!(
            "rack_check: node {}: {}{}{}",
            n.node,
            n.verdict().name(),
            if deciding.is_empty() { "" } else { ": " },
            deciding.join("; ")
        );
    }
    let report = RunReport {
        name: spec.name.clone(),
        spec_file: "spec.toml".into(),
        started: started.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        doctor,
        tests,
        checks,
        nodes,
    };
    let summary = out.join("summary.md");
    write_report_file(&summary, report.markdown().as_bytes())?;
    let page = super::html::render(&report, &pairs, &spec.checks);
    write_report_file(&out.join("report.html"), page.as_bytes())?;
    println!(
        "rack_check: {}; report: {}",
        report.headline(),
        summary.display()
    );
    let json = checks_json(&report.checks);
    write_report_file(&out.join("checks.json"), json.as_bytes())?;
    Ok(match report.verdict() {
        Verdict::Pass => ExitStatus::Ok,
        Verdict::Fail => ExitStatus::Failed,
        Verdict::Inconclusive => ExitStatus::Inconclusive,
    })
}

/// A check judged on a test's rounds: a round that did not finish with its
/// results is never judged (the check fails naming it); otherwise every
/// round's CSV counts, the re-measures being those past `first` rounds.
fn judge_check(check: &Check, rounds: &[TestStep], first: usize) -> CheckResult {
    if let Some(t) = rounds.iter().find(|t| !t.ran()) {
        return not_run(check, t);
    }
    let csvs: Vec<PathBuf> = rounds.iter().map(|t| check.results_of(&t.csv)).collect();
    evaluate(check, &csvs, rounds.len().saturating_sub(first))
}

/// A file of the report, written whole into the new report folder.
fn write_report_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_whole(path, Replace::Never, bytes)
        .map(drop)
        .map_err(|e| anyhow!("cannot write {}: {}", path.display(), io_reason(&e)))
}
