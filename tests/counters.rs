//! The fabric counters of a collective run, end to end: mpirun over fixture
//! trees whose counters step between snapshots (`--sysfs-root`), the footer,
//! the CSV's counter columns and `--counters FILE`.

mod common;

use common::{fixture, mpirun_env, one_error, pandas_rows, read_rows, scratch, text};
use std::path::Path;

const ALL_REDUCE: &str = env!("CARGO_BIN_EXE_all_reduce_perf");

fn run(tree: &str, extra: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let root = fixture(tree);
    let mut args = vec!["-b", "8", "-e", "32", "-f", "2", "-n", "2", "-w", "1"];
    args.extend_from_slice(&["--sysfs-root", root.to_str().unwrap()]);
    args.extend_from_slice(extra);
    mpirun_env(2, ALL_REDUCE, &args, env)
}

fn footer(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("# Fabric counters:"))
        .collect()
}

fn has(lines: &[&str], suffix: &str) -> bool {
    lines
        .iter()
        .any(|l| l.starts_with("#   ") && l.ends_with(suffix))
}

#[test]
fn a_run_names_its_rails_and_what_moved_in_the_footer_csv_and_counters_file() {
    let dir = scratch("counters-two-rails");
    let (csv, counters) = (dir.join("run.csv"), dir.join("counters.csv"));
    let out = run(
        "counters/two-rails",
        &[
            "--csv",
            csv.to_str().unwrap(),
            "--counters",
            counters.to_str().unwrap(),
        ],
        &[("NCCL_IB_HCA", "mlx5_0,mlx5_1")],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let lines = footer(&stdout);
    assert_eq!(
        lines[0],
        "# Fabric counters: deltas over 3 size(s), read before and after each"
    );
    // One node (both ranks here): read once, by its local rank 0.
    assert!(has(&lines, ": data on RDMA ports (sent + received): mlx5_0:1 5.7 MiB (50.0%), mlx5_1:1 5.7 MiB (50.0%)"), "{stdout}");
    assert!(
        has(
            &lines,
            ": congestion mlx5_1:1 hw_counters/np_cnp_sent +21 during 8 B, 16 B, 32 B"
        ),
        "{stdout}"
    );
    assert!(
        has(
            &lines,
            ": pauses eth3 ethtool/rx_prio3_pause +6 during 8 B, 16 B, 32 B"
        ),
        "{stdout}"
    );
    assert!(lines.iter().all(|l| !l.contains("WARNING")), "{stdout}");

    let rows = read_rows(&csv);
    assert_eq!(rows.len(), 6);
    for r in &rows {
        assert_eq!(
            (
                r.rdma_bytes,
                r.rdma_packets,
                r.counter_errors,
                r.counter_retransmits,
                r.counter_congestion,
                r.counter_pauses
            ),
            (
                Some(4_000_000),
                Some(3904),
                Some(0),
                Some(0),
                Some(14),
                Some(2)
            ),
            "{} B {}",
            r.size_bytes,
            r.placement
        );
    }
    let long = counter_rows(&counters);
    assert_eq!(pandas_rows(&counters), long.len());
    let cnp: Vec<&Vec<String>> = long.iter().filter(|r| r[8] == "np_cnp_sent").collect();
    assert_eq!(cnp.len(), 3);
    assert_eq!(
        cnp[2][2..],
        [
            "2",
            "32",
            &cnp[2][4],
            "mlx5_1",
            "1",
            "hw_counters",
            "np_cnp_sent",
            "congestion",
            "7",
            "",
            "",
            ""
        ]
    );
}

/// The data lines of a --counters file, split (no field has a comma).
fn counter_rows(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("run_id,program,seq,size_bytes,host,device,port,family,counter,class,delta,unknown,round,pairs")
    );
    lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn a_slow_rail_a_wrong_hca_and_a_reset_are_said() {
    let out = run(
        "counters/slow-rail",
        &[],
        &[("NCCL_IB_HCA", "mlx5_0,mlx5_1")],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let warnings: Vec<&str> = footer(&stdout)
        .into_iter()
        .filter(|l| l.starts_with("# WARNING: "))
        .collect();
    assert_eq!(warnings.len(), 1, "{stdout}");
    assert!(
        warnings[0]
            .contains(": mlx5_1:1 carried 3.8% of the node's RDMA data, an even share is 50.0%"),
        "{}",
        warnings[0]
    );

    let out = run("counters/two-rails", &[], &[("NCCL_IB_HCA", "=mlx5_2")]);
    let (stdout, _) = text(&out);
    assert!(stdout.contains(": NCCL_IB_HCA names mlx5_2 but the bytes crossed mlx5_0:1, mlx5_1:1 and none crossed a port it names"), "{stdout}");

    let out = run("counters/wrap-reset", &[], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let lines = footer(&stdout);
    assert!(
        has(
            &lines,
            ": mlx5_0:1 counters/port_rcv_data: reset during 16 B, its delta unknown"
        ),
        "{stdout}"
    );
    assert!(
        has(
            &lines,
            ": data on RDMA ports (sent + received): mlx5_0:1 4.8 MiB (100.0%)"
        ),
        "{stdout}"
    );
}

#[test]
fn a_counters_file_that_cannot_be_written_is_one_line() {
    let dir = scratch("counters-bad");
    let csv = dir.join("run.csv");
    let same = run(
        "counters/two-rails",
        &[
            "--csv",
            csv.to_str().unwrap(),
            "--counters",
            csv.to_str().unwrap(),
        ],
        &[],
    );
    one_error(&same, 2, "--counters");
    let taken = dir.join("taken.csv");
    std::fs::write(&taken, "x\n").unwrap();
    let out = run(
        "counters/two-rails",
        &["--counters", taken.to_str().unwrap()],
        &[],
    );
    let e = one_error(&out, 2, "--counters");
    assert!(
        e.ends_with("the file exists and runs are never overwritten; choose a new path"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "x\n");
}
