//! nccl-tests 2.19's outputs under mpirun on 2, 3 and 4 ranks: the -J document
//! key for key (as its util.cu writes it) and read the way its
//! tools/analyze_perf_json.py reads it, the document a killed run leaves, -I/-K/-S
//! columns, per-rank #wrong under fault injection, NCCL_TESTS_MIN_BW, and
//! NCCL_TESTS_SPLIT(_MASK) groups.

mod common;

use common::{
    log, mpirun, mpirun_command, mpirun_env, one_error, read_rows, scratch, table_rows, text,
};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

const ALL_REDUCE: &str = env!("CARGO_BIN_EXE_all_reduce_perf");
const ALL_GATHER: &str = env!("CARGO_BIN_EXE_all_gather_perf");

/// The keys nccl-tests 2.19.6 writes (src/util.cu), object by object.
const TOP: &[&str] = &[
    "version",
    "start_time",
    "args",
    "env",
    "nccl_version",
    "config",
    "results",
    "out_of_bounds",
    "average_bus_bandwidth",
    "errors",
    "end_time",
];
const CONFIG: &[&str] = &[
    "nthreads",
    "ngpus",
    "minimum_bytes",
    "maximum_bytes",
    "step_factor",
    "warmup_iters",
    "iterations",
    "aggregated_iterations",
    "validation",
    "graph",
    "blocking_collectives",
    "per_iter_timing",
    "per_iter_skip",
    "parallel_init",
    "devices",
];
const DEVICE: &[&str] = &[
    "rank",
    "group",
    "pid",
    "hostname",
    "device",
    "device_hex",
    "device_info",
];
const RESULT: &[&str] = &[
    "size",
    "count",
    "type",
    "redop",
    "root",
    "out_of_place",
    "in_place",
    "actual_iterations",
    "experiment_name",
];
const PER_ITER_RESULT: &[&str] = &["out_of_place_per_iter", "in_place_per_iter"];
const BODY: &[&str] = &["time", "alg_bw", "bus_bw", "nwrong"];
const PER_ITER: &[&str] = &[
    "skipped_iterations",
    "min_us",
    "max_us",
    "avg_us",
    "p50_us",
    "p95_us",
    "p99_us",
    "stdev_us",
    "cv_pct",
    "times_us",
    "per_process_max_times_us",
];
const OUR_KEY: &str = "fabricbench";

/// One size (1 KiB), two iterations, then `extra`.
fn one_size<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["-b", "1K", "-e", "1K", "-n", "2"];
    args.extend_from_slice(extra);
    args
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().expect("an object").keys().cloned().collect()
}

fn set(names: &[&str], ours: bool) -> BTreeSet<String> {
    let mut s: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
    if ours {
        s.insert(OUR_KEY.into());
    }
    s
}

fn load(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}: {text}", path.display()))
}

/// Reads the document as analyze_perf_json.py does (its keys, its consistency
/// check, its node grouping by config.devices hostnames), with python3 and json
/// only; prints one line per size and "consistent" when times_us is the max over
/// the process rows.
const CONSUMER: &str = r#"
import json, sys
data = json.load(open(sys.argv[1]))
cfg = data.get('config', {})
print('version', data.get('version'), 'iterations', cfg.get('iterations'), 'agg', cfg.get('aggregated_iterations', 1))
hosts = [d['hostname'] for d in cfg.get('devices', [])]
ok = True
for r in data['results']:
    for key in ('out_of_place_per_iter', 'in_place_per_iter'):
        p = r.get(key, {})
        rows = p.get('per_process_max_times_us', [])
        n = min(len(t) for t in rows)
        expected = [max(t[i] for t in rows) for i in range(n)]
        ok = ok and len(p['times_us']) == len(expected) and all(abs(a - b) < 0.001 for a, b in zip(p['times_us'], expected))
        spike = p['max_us'] / p['avg_us'] if p['avg_us'] > 0 else 0
        print(r['size'], key, len(rows), 'rows', len(hosts), 'hosts', '%.1f' % p['cv_pct'], '%.1f' % spike)
print('consistent' if ok else 'INCONSISTENT')
"#;

#[test]
fn json_document_is_nccl_tests_key_for_key_and_reads_as_its_analyzer_reads_it() {
    let dir = scratch("json-keys");
    for np in [2, 3, 4] {
        let path = dir.join(format!("run{np}.json"));
        let args = [
            "-b",
            "1K",
            "-e",
            "4K",
            "-f",
            "2",
            "-n",
            "4",
            "-I",
            "1",
            "-K",
            "1",
            "-J",
            path.to_str().unwrap(),
        ];
        let out = mpirun(np, ALL_REDUCE, &args);
        assert!(out.status.success(), "{}", log(&out));
        let (stdout, _) = text(&out);
        assert!(
            stdout.contains(&format!("# Writing JSON output to {}", path.display())),
            "{stdout}"
        );
        let doc = load(&path);
        assert_eq!(keys(&doc), set(TOP, true), "np {np}");
        assert_eq!(keys(&doc["config"]), set(CONFIG, false));
        assert_eq!(doc["version"], 3);
        assert_eq!(doc["config"]["per_iter_timing"], "true");
        assert_eq!(doc["config"]["per_iter_skip"], 1);
        let devices = doc["config"]["devices"].as_array().unwrap();
        assert_eq!(devices.len(), np);
        for (rank, d) in devices.iter().enumerate() {
            assert_eq!(keys(d), set(DEVICE, false));
            assert_eq!(d["rank"], rank);
        }
        let results = doc["results"].as_array().unwrap();
        assert_eq!(results.len(), 3, "1K, 2K, 4K");
        for r in results {
            let mut expected = set(RESULT, true);
            expected.extend(PER_ITER_RESULT.iter().map(|k| k.to_string()));
            assert_eq!(keys(r), expected);
            assert_eq!(r["root"], "    -1", "nccl-tests writes root with %6i");
            for placement in ["out_of_place", "in_place"] {
                assert_eq!(keys(&r[placement]), set(BODY, false));
                assert_eq!(r[placement]["nwrong"], 0.0);
                let p = &r[format!("{placement}_per_iter")];
                assert_eq!(keys(p), set(PER_ITER, false));
                let rows = p["per_process_max_times_us"].as_array().unwrap();
                assert_eq!(rows.len(), np, "one row per process");
                assert_eq!(p["times_us"].as_array().unwrap().len(), 4);
            }
        }
        assert_eq!(doc["out_of_bounds"]["okay"], "true");
        assert_eq!(doc["average_bus_bandwidth"]["okay"], "unchecked");
        assert_eq!(doc[OUR_KEY]["complete"], true);

        let consumer = std::process::Command::new(common::python_with("json"))
            .args(["-c", CONSUMER])
            .arg(&path)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&consumer.stdout);
        assert!(
            consumer.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&consumer.stderr)
        );
        assert!(said.starts_with("version 3 iterations 4 agg 1\n"), "{said}");
        assert!(
            said.contains(&format!("1024 out_of_place_per_iter {np} rows {np} hosts")),
            "{said}"
        );
        assert!(said.ends_with("consistent\n"), "{said}");
    }
    // Without -I: no per-iteration objects, as nccl-tests.
    let path = dir.join("plain.json");
    let plain = || mpirun(2, ALL_REDUCE, &one_size(&["-J", path.to_str().unwrap()]));
    let out = plain();
    assert!(out.status.success(), "{}", log(&out));
    let doc = load(&path);
    assert_eq!(keys(&doc["results"][0]), set(RESULT, true));
    assert_eq!(doc["config"]["per_iter_timing"], "false");
    // An existing document is kept: the next goes to NAME.0, as nccl-tests probes.
    let out = plain();
    assert!(out.status.success(), "{}", log(&out));
    assert!(text(&out)
        .0
        .contains(&format!("# Writing JSON output to {}.0", path.display())));
    assert_eq!(
        load(&dir.join("plain.json.0"))["results"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_rank_killed_mid_run_leaves_a_document_of_the_finished_sizes() {
    let dir = scratch("json-killed");
    let path = dir.join("killed.json");
    // Rank 1 stalls before 8K; the sizes before it are finished and written.
    let mut cmd = mpirun_command();
    cmd.args(["-x", "FABRICBENCH_FAULT_STALL_RANK"])
        .env("FABRICBENCH_FAULT_STALL_RANK", "1:8192")
        .args(["-np", "3", ALL_REDUCE])
        .args([
            "-b", "1K", "-e", "64K", "-f", "2", "-n", "3", "-T", "0", "-I", "1", "-J",
        ])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    let finished = |p: &Path| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .map_or(0, |d| d["results"].as_array().map_or(0, Vec::len))
    };
    while finished(&path) < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no 3 sizes in 120 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let doc = load(&path);
    let pid = doc["config"]["devices"][1]["pid"].as_i64().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the job did not end after rank 1 was killed");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let doc = load(&path);
    let sizes: Vec<u64> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["size"].as_u64().unwrap())
        .collect();
    assert_eq!(
        sizes,
        [1024, 2048, 4096],
        "the finished sizes, nothing after"
    );
    assert_eq!(doc[OUR_KEY]["complete"], false);
    assert!(doc.get("end_time").is_none() && doc.get("out_of_bounds").is_none());
    assert_eq!(
        keys(&doc["results"][2]["in_place_per_iter"]),
        set(PER_ITER, false)
    );
    // No temporary file is left beside it.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["killed.json"]);
}

#[test]
fn per_iteration_columns_in_nccl_tests_positions() {
    let out = mpirun(
        3,
        ALL_REDUCE,
        &["-b", "1K", "-e", "2K", "-n", "5", "-I", "1", "-S", "1"],
    );
    assert!(out.status.success(), "{}", log(&out));
    let (stdout, _) = text(&out);
    let header: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with("#       size"))
        .unwrap()
        .split_whitespace()
        .collect();
    // nccl-tests' -I header: each placement's four columns, then its i_* four.
    let placement = "time algbw busbw #wrong i_min i_max i_p99 i_cv%";
    let expected = format!("# size count type redop root {placement} {placement} timestamp");
    assert_eq!(header.join(" "), expected);
    // The host clock names its source: the time-stamp counter or CLOCK_MONOTONIC.
    let named = ["TSC", "CLOCK_MONOTONIC"].iter().any(|source| {
        stdout.contains(&format!(
            "# Per-Iteration Report: host clock timing ({source}); i_* uses max over process rows"
        ))
    });
    assert!(named, "{stdout}");
    for row in table_rows(&stdout) {
        // 5 + 2 x 8 columns, then the date and the time of -S.
        assert_eq!(row.len(), 23, "{row:?}");
        let (min, max, p99): (f64, f64, f64) = (
            row[9].parse().unwrap(),
            row[10].parse().unwrap(),
            row[11].parse().unwrap(),
        );
        assert!(min <= p99 && p99 <= max, "{row:?}");
        assert_eq!(row[21].len(), 10, "YYYY-MM-DD: {row:?}");
        assert_eq!(row[22].len(), 8, "HH:MM:SS: {row:?}");
    }
    // Without -I our percentiles stay; -S puts the time after the in-place #wrong.
    let out = mpirun(
        2,
        ALL_REDUCE,
        &["-b", "1K", "-e", "1K", "-n", "3", "-S", "1"],
    );
    let (stdout, _) = text(&out);
    let row = &table_rows(&stdout)[0];
    assert_eq!(row.len(), 13 + 2 + 8, "{row:?}");
    assert_eq!(
        row[14].len(),
        8,
        "HH:MM:SS after the in-place #wrong: {row:?}"
    );
}

#[test]
fn per_iteration_flags_are_disabled_as_nccl_tests_disables_them() {
    for (flags, said) in [
        (
            &["-I", "2"][..],
            "per-iteration timing (-I) only supports 0=off or 1=on. Disabling.",
        ),
        (
            &["-I", "1", "-K", "5"],
            "per-iteration skip (-K) must be between 0 and 4. Disabling.",
        ),
        (
            &["-K", "2"],
            "per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.",
        ),
    ] {
        let mut args = vec!["-b", "1K", "-e", "1K", "-n", "5"];
        args.extend_from_slice(flags);
        let out = mpirun(2, ALL_REDUCE, &args);
        assert!(out.status.success(), "{}", log(&out));
        let (stdout, stderr) = text(&out);
        assert_eq!(stderr.matches(said).count(), 1, "said once: {stderr}");
        assert!(stdout.contains(&format!("# WARNING: {said}")), "{stdout}");
    }
    let out = mpirun(2, ALL_REDUCE, &["-S", "3"]);
    one_error(&out, 2, "-S/--report_timestamps 3: use 0 or 1");
}

/// A validated run of `binary` on `np` ranks from 1K to `max` by factor 2 with
/// `env`: its output, CSV rows and JSON document.
fn with_outputs(
    np: usize,
    binary: &str,
    max: &str,
    env: &[(&str, &str)],
) -> (Output, Vec<fabricbench::report::Row>, Value) {
    let dir = scratch("outputs");
    let (csv, json) = (dir.join("r.csv"), dir.join("r.json"));
    let (c, j) = (csv.to_str().unwrap(), json.to_str().unwrap());
    let args = [
        "-b", "1K", "-e", max, "-f", "2", "-n", "2", "-c", "1", "--csv", c, "-J", j,
    ];
    let out = mpirun_env(np, binary, &args, env);
    (out, read_rows(&csv), load(&json))
}

#[test]
fn wrong_data_names_its_rank_and_host() {
    for (np, rank) in [(3, 2), (4, 1), (4, 3)] {
        let fault = format!("{rank}:3");
        let corrupt = [("FABRICBENCH_FAULT_CORRUPT", fault.as_str())];
        let (out, rows, doc) = with_outputs(np, ALL_REDUCE, "2K", &corrupt);
        let (stdout, _) = text(&out);
        assert_eq!(
            out.status.code(),
            Some(1),
            "wrong data fails the run: {stdout}"
        );
        let host = doc["config"]["devices"][rank]["hostname"]
            .as_str()
            .unwrap()
            .to_string();
        // Two sizes, both placements, one element each.
        let line = format!("# Wrong data on        : rank {rank} on {host} (4 elements)");
        assert!(
            stdout.contains(&format!("{line}\n# Out of bounds values : 4 FAILED")),
            "{stdout}"
        );
        assert_eq!(rows.len(), 4);
        for row in &rows {
            assert_eq!(row.wrong, Some(1));
            assert_eq!(
                row.wrong_ranks.as_deref(),
                Some(format!("{rank}:1").as_str())
            );
        }
        for r in doc["results"].as_array().unwrap() {
            let named = &r[OUR_KEY]["in_place"]["wrong_ranks"];
            assert_eq!(
                named,
                &serde_json::json!([{"rank": rank, "hostname": host, "count": 1}])
            );
        }
    }
    // A clean run: the column is empty, and pandas loads it.
    let dir = scratch("wrong-none");
    let csv = dir.join("ok.csv");
    let out = mpirun(2, ALL_REDUCE, &one_size(&["--csv", csv.to_str().unwrap()]));
    assert!(out.status.success());
    assert!(!text(&out).0.contains("Wrong data on"));
    assert_eq!(read_rows(&csv)[0].wrong_ranks, None);
    common::assert_rows_load(&csv, 2);
}

#[test]
fn min_bw_fails_a_slow_run_as_nccl_tests_does() {
    let args = ["-b", "1K", "-e", "1K", "-n", "2"];
    let out = mpirun_env(2, ALL_REDUCE, &args, &[("NCCL_TESTS_MIN_BW", "1000000")]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let avg = stdout
        .lines()
        .find(|l| l.starts_with("# Avg bus bandwidth"))
        .unwrap();
    assert!(avg.ends_with(" FAILED"), "{avg}");
    assert_eq!(
        stderr
            .matches("is below 90% of NCCL_TESTS_MIN_BW=1000000 GB/s")
            .count(),
        1,
        "{stderr}"
    );
    let out = mpirun_env(2, ALL_REDUCE, &args, &[("NCCL_TESTS_MIN_BW", "0")]);
    assert!(out.status.success());
    assert!(text(&out)
        .0
        .lines()
        .any(|l| l.starts_with("# Avg bus bandwidth") && l.ends_with(" OK")));
    let out = mpirun_env(2, ALL_REDUCE, &args, &[("NCCL_TESTS_MIN_BW", "fast")]);
    one_error(&out, 2, "NCCL_TESTS_MIN_BW=fast: not a bandwidth");
}

#[test]
fn split_runs_two_groups_side_by_side() {
    for (var, value, groups) in [
        ("NCCL_TESTS_SPLIT_MASK", "0x1", "0:0,2;1:1,3"),
        ("NCCL_TESTS_SPLIT", "DIV 2", "0:0,1;1:2,3"),
    ] {
        let (out, rows, doc) = with_outputs(4, ALL_GATHER, "4K", &[(var, value)]);
        let (stdout, _) = text(&out);
        // Validated against a 2-rank all_gather: a 4-rank call would be wrong.
        assert!(out.status.success(), "{}", log(&out));
        let color: Vec<usize> = groups
            .split(';')
            .flat_map(|g| {
                let (n, ranks) = g.split_once(':').unwrap();
                ranks
                    .split(',')
                    .map(move |r| (r.parse::<usize>().unwrap(), n.parse().unwrap()))
            })
            .collect::<std::collections::BTreeMap<usize, usize>>()
            .into_values()
            .collect();
        for (rank, g) in color.iter().enumerate() {
            assert!(
                stdout.contains(&format!("#  Rank  {rank} Group  {g} Pid")),
                "{stdout}"
            );
        }
        assert!(
            stdout.contains(&format!(
                "# Split: {var}={value} puts the 4 ranks in 2 groups"
            )),
            "{stdout}"
        );
        assert_eq!(rows.len(), 6);
        for row in &rows {
            assert_eq!(row.groups.as_deref(), Some(groups));
            assert_eq!(
                row.busbw_factor, 0.5,
                "all_gather's (n-1)/n of a 2-rank group"
            );
            assert_eq!(row.wrong, Some(0));
        }
        // nccl-tests' per-rank count of a 2-rank group: 1K / 4 B / 2.
        assert_eq!(rows[0].count, 128);
        let json_groups: Vec<u64> = doc["config"]["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["group"].as_u64().unwrap())
            .collect();
        assert_eq!(
            json_groups,
            color.iter().map(|&g| g as u64).collect::<Vec<_>>()
        );
    }
    let out = mpirun_env(
        2,
        ALL_REDUCE,
        &["-n", "1"],
        &[("NCCL_TESTS_SPLIT", "MOD 0")],
    );
    one_error(&out, 2, "NCCL_TESTS_SPLIT=MOD 0: a divisor of 0");
}

#[test]
fn json_targets_refused_in_one_line() {
    let dir = scratch("json-bad");
    let out = mpirun(2, ALL_REDUCE, &["-n", "1", "-J", dir.to_str().unwrap()]);
    one_error(
        &out,
        2,
        &format!(
            "-J/--output_file {0}: is a directory; give a file in it, e.g. -J {0}/results.json",
            dir.display()
        ),
    );
    let txt = dir.join("out.txt");
    let out = mpirun(2, ALL_REDUCE, &["-n", "1", "-J", txt.to_str().unwrap()]);
    one_error(
        &out,
        2,
        "nccl-tests' document is written only to a .json file",
    );
    let out = mpirun(2, ALL_REDUCE, &["-n", "1", "-J", "/dev/null"]);
    one_error(&out, 2, "-J/--output_file /dev/null: is a character device");
    let json = dir.join("pairs.json");
    let pairs = ["--all-pairs", "-n", "1", "-J", json.to_str().unwrap()];
    let out = mpirun(2, env!("CARGO_BIN_EXE_sendrecv_perf"), &pairs);
    one_error(
        &out,
        2,
        "-J/--output_file with --all-pairs: all-pairs writes its own matrix",
    );
}
