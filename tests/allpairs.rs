//! sendrecv_perf --all-pairs under mpirun: every pair measured once, the matrix
//! CSV and heatmap written, and a rank made slow on purpose named as the suspect.

mod common;

use common::{log, mpirun, mpirun_env, scratch};
use fabricbench::allpairs::read_csv;
use std::process::Output;

const SENDRECV: &str = env!("CARGO_BIN_EXE_sendrecv_perf");

fn run(np: usize, args: &[&str], slow_rank: Option<&str>) -> Output {
    let mut all = vec!["--all-pairs", "-n", "5", "-w", "1"];
    all.extend_from_slice(args);
    let env: Vec<(&str, &str)> = slow_rank
        .map(|r| ("FABRICBENCH_FAULT_SLOW_RANK", r))
        .into_iter()
        .collect();
    mpirun_env(np, SENDRECV, &all, &env)
}

#[test]
fn slow_rank_is_named_the_suspect() {
    let dir = scratch("allpairs-slow");
    let csv = dir.join("pairs.csv");
    // Noise on a shared 2-core host moves small-message times a lot: only the
    // injected 10 ms per exchange should cross these thresholds.
    let out = run(
        4,
        &[
            "-b",
            "8",
            "-e",
            "64K",
            "-f",
            "8192",
            "--slow-fraction",
            "0.5",
            "--slow-latency",
            "50",
            "--csv",
            csv.to_str().unwrap(),
        ],
        Some("3"),
    );
    let log = log(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    let results = read_csv(&csv).unwrap();
    assert_eq!(results.labels.len(), 4);
    let suspect = format!(
        "# suspect node {}: all 3 of its pairs are slow",
        results.labels[3]
    );
    assert!(log.contains(&suspect), "{log}");
    assert_eq!(log.matches("# suspect node").count(), 1, "{log}");
    assert_eq!(
        results
            .sizes
            .iter()
            .map(|s| s.size_bytes)
            .collect::<Vec<_>>(),
        vec![8, 65536]
    );
    for s in &results.sizes {
        for a in 0..4 {
            assert_eq!(s.time_us.get(a, a), None);
            for b in 0..4 {
                assert_eq!(s.time_us.get(a, b), s.time_us.get(b, a));
                assert_eq!(
                    s.wrong_bytes.as_ref().unwrap().get(a, b),
                    (a != b).then_some(0.0),
                    "validation"
                );
            }
        }
        // The slow rank's pairs include its 10 ms delay per exchange.
        assert!(s.time_us.get(0, 3).unwrap() >= 10_000.0, "{log}");
    }
    let png = std::fs::read(dir.join("pairs.png")).expect("heatmap written");
    assert_eq!(&png[1..4], b"PNG");
}

#[test]
fn odd_rank_count_measures_every_pair() {
    let dir = scratch("allpairs-odd");
    let csv = dir.join("pairs.csv");
    // Thresholds too loose for anything but a broken run: this checks the schedule.
    let out = run(
        3,
        &[
            "-b",
            "1K",
            "-e",
            "1K",
            "-c",
            "0",
            "--slow-fraction",
            "0.001",
            // The loosest bound: 3 ranks on 2 busy cores can wait whole time slices.
            "--slow-latency",
            "1000000",
            "--csv",
            csv.to_str().unwrap(),
        ],
        None,
    );
    let log = log(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(log.contains("3 ranks, 3 rounds of disjoint pairs"), "{log}");
    assert!(log.contains("# all-pairs: no slow pair"), "{log}");
    let results = read_csv(&csv).unwrap();
    let m = &results.sizes[0];
    assert_eq!(m.algbw_gbs.pairs().len(), 3);
    assert!(m.algbw_gbs.pairs().iter().all(|p| p.2 > 0.0));
    assert!(m.wrong_bytes.is_none(), "-c 0 writes no wrong_bytes rows");
}

#[test]
fn all_pairs_usage_errors() {
    let out = mpirun(
        2,
        env!("CARGO_BIN_EXE_all_reduce_perf"),
        &["--all-pairs", "-b", "8", "-e", "8"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(log(&out)
        .contains("--all-pairs: all_reduce_perf has no pair mode; use sendrecv_perf --all-pairs"));
    let out = run(1, &["-b", "8", "-e", "8"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(log(&out).contains("--all-pairs needs 2 or more ranks"));
    let out = run(2, &["-b", "8", "-e", "8", "--slow-fraction", "1.5"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(log(&out).contains(
        "--slow-fraction 1.5: too large; give a fraction of the median, more than 0 and at most 1, e.g. 0.9"
    ));
}

#[test]
fn an_all_pairs_run_writes_a_matrix_file_of_its_own() {
    let dir = scratch("allpairs-append");
    let csv = dir.join("pairs.csv");
    let out = run(
        2,
        &[
            "-b",
            "8",
            "-e",
            "8",
            "--csv",
            csv.to_str().unwrap(),
            "--append",
        ],
        None,
    );
    let log = log(&out);
    assert_eq!(out.status.code(), Some(2), "{log}");
    let message = "--append: an all-pairs run writes one matrix file of its own; drop --append";
    assert_eq!(log.matches(message).count(), 1, "printed once: {log}");
    assert!(!csv.exists(), "nothing written");
}
