//! nccl-tests 2.19's newer binaries and types under mpirun (2, 3 and 4 ranks):
//! alltoallv_perf with its NCCL_TESTS_ALLTOALLV_* variables, hypercube_perf,
//! -o mulsum and -d f8e4m3/f8e5m2 validated exactly, and --all-pairs through the
//! backend trait. The expected sizes are written out here from nccl-tests' source,
//! independently of the library.

mod common;

use common::{log, mpirun, mpirun_env, one_error, read_rows, scratch, table_rows, text};
use std::path::Path;

const ALLTOALLV: &str = env!("CARGO_BIN_EXE_alltoallv_perf");
const HYPERCUBE: &str = env!("CARGO_BIN_EXE_hypercube_perf");
const ALL_REDUCE: &str = env!("CARGO_BIN_EXE_all_reduce_perf");
const REDUCE: &str = env!("CARGO_BIN_EXE_reduce_perf");
const REDUCE_SCATTER: &str = env!("CARGO_BIN_EXE_reduce_scatter_perf");
const SENDRECV: &str = env!("CARGO_BIN_EXE_sendrecv_perf");

/// alltoallv.cu's AlltoAllvGetPeerBytesDistanceWeighted.
fn peer_bytes(from: u64, to: u64, n: u64, total: u64, spread: f64) -> u64 {
    if n == 1 {
        return total & !15;
    }
    let distance = ((to + n - from) % n) as f64;
    let uniform = total as f64 / n as f64;
    let weighted = distance * total as f64 / (n * (n - 1) / 2) as f64;
    ((1.0 - spread) * uniform + spread * weighted) as u64 & !15
}

/// The size column of a generated alltoallv of `bytes` requested bytes of 4-byte floats.
fn generated_size(bytes: u64, n: u64, spread: f64) -> (u64, u64) {
    let param = (bytes / 4 / n) & !3;
    let total = param * n * 4;
    let sent: u64 = (0..n).map(|j| peer_bytes(0, j, n, total, spread)).sum();
    (sent, param)
}

/// Runs a sweep with -c 1 and a CSV; asserts exit 0 and no wrong element anywhere.
fn run_checked(
    np: usize,
    binary: &str,
    args: &[&str],
    env: &[(&str, &str)],
    name: &str,
) -> (String, Vec<fabricbench::report::Row>) {
    let dir = scratch(name);
    let csv = dir.join("rows.csv");
    let mut all = vec![
        "-n",
        "2",
        "-w",
        "1",
        "-c",
        "1",
        "--csv",
        csv.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let out = mpirun_env(np, binary, &all, env);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "{name}: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("# Out of bounds values : 0 OK"),
        "{name}:\n{stdout}"
    );
    let rows = read_rows(&csv);
    assert!(!rows.is_empty(), "{name}");
    for r in &rows {
        assert_eq!(
            r.wrong,
            Some(0),
            "{name}: {} {} B {}",
            r.datatype,
            r.size_bytes,
            r.placement
        );
    }
    (stdout, rows)
}

fn assert_factor(rows: &[fabricbench::report::Row], factor: f64, alg_over_size: f64, what: &str) {
    for r in rows {
        assert_eq!(r.busbw_factor, factor, "{what}");
        let algbw = r.size_bytes as f64 * alg_over_size / 1e9 / (r.time_us * 1e-6);
        assert!(
            (r.algbw_gbs - algbw).abs() <= 1e-9 * algbw.max(1.0),
            "{what}: algbw"
        );
        let busbw = r.algbw_gbs * factor;
        assert!(
            (r.busbw_gbs - busbw).abs() <= 1e-9 * busbw.max(1.0),
            "{what}: busbw"
        );
    }
}

#[test]
fn alltoallv_generated_pattern_on_2_3_4_ranks() {
    for (np, spread) in [(2, None), (3, Some("0.5")), (4, Some("0"))] {
        let env: Vec<(&str, &str)> = spread
            .map(|s| ("NCCL_TESTS_ALLTOALLV_SPREAD", s))
            .into_iter()
            .collect();
        let what = format!("alltoallv on {np} ranks, spread {spread:?}");
        let args = ["-b", "64", "-e", "256K", "-f", "16", "-d", "all"];
        let (_, rows) = run_checked(np, ALLTOALLV, &args, &env, &format!("a2av-{np}"));
        let s: f64 = spread.map_or(1.0, |v| v.parse().unwrap());
        for r in rows.iter().filter(|r| r.datatype == "float") {
            let requested = [64u64, 1024, 16384, 262144]
                .into_iter()
                .find(|&b| generated_size(b, np as u64, s).0 == r.size_bytes);
            assert!(
                requested.is_some(),
                "{what}: size {} is none of nccl-tests'",
                r.size_bytes
            );
            let (_, param) = generated_size(requested.unwrap(), np as u64, s);
            assert_eq!(
                r.count, param,
                "{what}: the count column is per-peer elements"
            );
        }
        assert_eq!(
            rows.len(),
            2 * 4 * 12,
            "{what}: 4 sizes x 12 datatypes x 2 placements"
        );
        assert_factor(&rows, (np as f64 - 1.0) / np as f64, 1.0, &what);
    }
}

#[test]
fn alltoallv_matrix_file_and_summary() {
    let dir = scratch("a2av-matrix");
    let matrix = dir.join("traffic.txt");
    std::fs::write(&matrix, "100  200  150\n50   100  75\n300  150  200\n").unwrap();
    let file = matrix.to_str().unwrap();
    let env = [
        ("NCCL_TESTS_ALLTOALLV_MATRIX_FILE", file),
        ("NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY", "1"),
    ];
    let (stdout, rows) = run_checked(
        3,
        ALLTOALLV,
        &["-b", "1K", "-e", "1K", "-d", "int8"],
        &env,
        "a2av-m",
    );
    // Rounded down to 16 bytes: rows send 432, 208 and 624; columns receive 432, 432, 400.
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].size_bytes, rows[0].count), (624, 0));
    let table = &table_rows(&stdout)[0];
    assert_eq!((table[0].as_str(), table[1].as_str()), ("624", "0"));
    for line in [
        "#   rank=0 send_bytes=432 recv_bytes=432 ",
        "#   rank=1 send_bytes=208 recv_bytes=432 ",
        "#   rank=2 send_bytes=624 recv_bytes=400 ",
    ] {
        assert_eq!(
            stdout.matches(line).count(),
            2,
            "{line} once per placement:\n{stdout}"
        );
    }
    assert_eq!(
        stdout.matches("# NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY: mode=matrix nranks=3 matrix_dim=3 scale=1.000 time_usec=").count(),
        2
    );
    // Scaled by 2: rank 2 sends 592 + 288 + 400.
    let scaled = [
        ("NCCL_TESTS_ALLTOALLV_MATRIX_FILE", file),
        ("NCCL_TESTS_ALLTOALLV_MATRIX_SCALE", "2"),
    ];
    let (_, rows) = run_checked(3, ALLTOALLV, &["-b", "2K", "-e", "2K"], &scaled, "a2av-s");
    assert_eq!(rows[0].size_bytes, 1280);
    // A 3x3 matrix runs 2 ranks (its first 2 rows and columns) and refuses 4.
    let (_, rows) = run_checked(2, ALLTOALLV, &["-b", "1K", "-e", "1K"], &env[..1], "a2av-2");
    assert_eq!(rows[0].size_bytes, 288);
    one_error(
        &mpirun_env(4, ALLTOALLV, &["-b", "1K", "-e", "1K"], &env[..1]),
        2,
        &format!("NCCL_TESTS_ALLTOALLV_MATRIX_FILE={file}: a 3x3 matrix for 4 ranks; give at least 4 rows and columns"),
    );
}

#[test]
fn alltoallv_bad_variables_are_one_line_each() {
    let dir = scratch("a2av-bad");
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "100 200\n50\n").unwrap();
    let good = dir.join("good.txt");
    std::fs::write(&good, "16 32\n48 64\n").unwrap();
    let (bad, good) = (bad.to_str().unwrap(), good.to_str().unwrap());
    let cases: [(&[(&str, &str)], &[&str], String); 5] = [
        (
            &[("NCCL_TESTS_ALLTOALLV_MATRIX_FILE", bad)],
            &["-b", "1K", "-e", "1K"],
            format!("NCCL_TESTS_ALLTOALLV_MATRIX_FILE={bad}: row 2 has 1 values, row 1 has 2; give a square matrix"),
        ),
        (
            &[("NCCL_TESTS_ALLTOALLV_SPREAD", "most")],
            &[],
            "NCCL_TESTS_ALLTOALLV_SPREAD=most: not a number; give a value from 0.0 (uniform) to 1.0".into(),
        ),
        (
            &[("NCCL_TESTS_ALLTOALLV_MATRIX_FILE", good), ("NCCL_TESTS_ALLTOALLV_MATRIX_SCALE", "-3")],
            &["-b", "1K", "-e", "1K"],
            "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE=-3: negative; give a factor >= 0".into(),
        ),
        (
            &[("NCCL_TESTS_ALLTOALLV_MATRIX_FILE", good)],
            &["-b", "8", "-e", "1K"],
            "-b/--minbytes 8 and -e/--maxbytes 1024 differ, but NCCL_TESTS_ALLTOALLV_MATRIX_FILE sets every size: give -b and -e equal".into(),
        ),
        (
            &[("NCCL_TESTS_ALLTOALLV_MATRIX_FILE", good)],
            &["-b", "64", "-e", "64"],
            format!("-e/--maxbytes 64: the matrix in {good} needs 112 bytes (the largest rank's send or receive total); give -b 112 -e 112 or more"),
        ),
    ];
    for (env, args, expected) in &cases {
        one_error(&mpirun_env(2, ALLTOALLV, args, env), 2, expected);
    }
}

#[test]
fn hypercube_on_2_and_4_ranks_and_refused_on_3() {
    for np in [2, 4] {
        let what = format!("hypercube on {np} ranks");
        let args = ["-b", "8", "-e", "1M", "-f", "32", "-d", "all"];
        let (stdout, rows) = run_checked(np, HYPERCUBE, &args, &[], &format!("hc-{np}"));
        assert!(
            stdout.contains("Collective test concluded: hypercube_perf"),
            "{what}"
        );
        for r in rows.iter().filter(|r| r.datatype == "float") {
            // size = nranks chunks of (count/nranks) rounded to 16 bytes; algbw counts n-1.
            assert_eq!(r.size_bytes, r.count * 4 * np as u64, "{what}");
        }
        assert_factor(&rows, 1.0, (np as f64 - 1.0) / np as f64, &what);
    }
    one_error(
        &mpirun(3, HYPERCUBE, &["-b", "8", "-e", "1K"]),
        2,
        "3 ranks: the hypercube exchanges with rank XOR 2^k and needs a power-of-two rank count; launch 2, 4, 8, ... ranks",
    );
}

#[test]
fn mulsum_and_8_bit_floats_are_exact_on_2_3_4_ranks() {
    for (np, binary) in [(2, ALL_REDUCE), (3, REDUCE), (4, REDUCE_SCATTER)] {
        let name = Path::new(binary).file_name().unwrap().to_str().unwrap();
        for (d, o) in [("all", "mulsum"), ("f8e4m3", "all"), ("f8e5m2", "all")] {
            let args = [
                "-b", "64", "-e", "64K", "-f", "32", "-d", d, "-o", o, "-r", "1",
            ];
            let (_, rows) = run_checked(np, binary, &args, &[], &format!("{name}-{np}-{d}-{o}"));
            let combos: std::collections::BTreeSet<(String, String)> = rows
                .iter()
                .map(|r| (r.datatype.clone(), r.redop.clone()))
                .collect();
            let expect = if d == "all" { 12 } else { 6 };
            assert_eq!(combos.len(), expect, "{name} -d {d} -o {o}: {combos:?}");
        }
    }
    // A wrong 8-bit float element is one wrong element, in each placement.
    let out = mpirun_env(
        2,
        ALL_REDUCE,
        &[
            "-b", "1K", "-e", "1K", "-n", "2", "-c", "1", "-d", "f8e5m2", "-o", "mulsum",
        ],
        &[("FABRICBENCH_FAULT_CORRUPT", "1:5")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", log(&out));
    let line = &table_rows(&text(&out).0)[0];
    assert_eq!(
        (line[8].as_str(), line[12].as_str()),
        ("1", "1"),
        "{line:?}"
    );
}

#[test]
fn all_pairs_goes_through_the_backend_trait() {
    let dir = scratch("pairs-backend");
    let csv = dir.join("pairs.csv");
    let args = [
        "--all-pairs",
        "--backend",
        "mpi",
        "-b",
        "1K",
        "-e",
        "64K",
        "-f",
        "64",
        "-n",
        "3",
        "-c",
        "1",
        "--slow-fraction",
        "0.001",
        // The loosest bound: 4 ranks on 2 busy cores can wait whole time slices.
        "--slow-latency",
        "1000000",
        "--csv",
        csv.to_str().unwrap(),
    ];
    let out = mpirun(4, SENDRECV, &args);
    let log = log(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(
        log.contains("MPI_Sendrecv between the two ranks, both directions at once"),
        "{log}"
    );
    let results = fabricbench::allpairs::read_csv(&csv).unwrap();
    for m in &results.sizes {
        assert_eq!(m.algbw_gbs.pairs().len(), 6);
        let wrong = m.wrong_bytes.as_ref().expect("-c 1 writes wrong_bytes");
        assert!(wrong.pairs().iter().all(|p| p.2 == 0.0), "{log}");
    }
}
