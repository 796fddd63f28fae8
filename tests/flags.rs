//! nccl-tests 2.19's flags added for issue #12 on the mpi backend, under mpirun
//! on 2, 3 and 4 ranks: -u (misaligned buffers, still validated exactly), -M (the
//! host memory report), the GPU-only flags (-t -p -y -R -x -D -V: one line naming
//! --backend nccl or -g), their values checked as nccl-tests reads them, and the
//! header and footer as nccl-tests' parsers read them.

mod common;

use common::{assert_rows_load, mpirun, one_error, read_rows, scratch, table_rows, text};

const ALL_REDUCE: &str = env!("CARGO_BIN_EXE_all_reduce_perf");

/// The nine collectives, each with the rank count its -u run uses.
const NINE: [(usize, &str); 9] = [
    (2, ALL_REDUCE),
    (3, env!("CARGO_BIN_EXE_all_gather_perf")),
    (4, env!("CARGO_BIN_EXE_reduce_scatter_perf")),
    (3, env!("CARGO_BIN_EXE_alltoall_perf")),
    (4, env!("CARGO_BIN_EXE_broadcast_perf")),
    (3, env!("CARGO_BIN_EXE_reduce_perf")),
    (2, env!("CARGO_BIN_EXE_gather_perf")),
    (4, env!("CARGO_BIN_EXE_scatter_perf")),
    (3, env!("CARGO_BIN_EXE_sendrecv_perf")),
];

fn ok(np: usize, binary: &str, args: &[&str]) -> String {
    let out = mpirun(np, binary, args);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "{args:?} on {np} ranks:\n{stdout}\n{stderr}"
    );
    stdout
}

#[test]
fn unalign_misaligns_every_datatype_and_the_data_stays_right() {
    for (np, binary) in NINE {
        let dir = scratch("flags-unalign");
        let csv = dir.join("u.csv");
        let stdout = ok(
            np,
            binary,
            &[
                "-b",
                "8",
                "-e",
                "64K",
                "-f",
                "8",
                "-u",
                "3",
                "-d",
                "all",
                "-n",
                "2",
                "--csv",
                csv.to_str().unwrap(),
            ],
        );
        assert!(stdout.contains(" graph: 0 unalign: 3\n"), "{stdout}");
        assert!(
            stdout.contains("# Out of bounds values : 0 OK\n"),
            "{np} ranks, {binary}: {stdout}"
        );
        // Every datatype at every size, in both placements, was checked.
        let rows = table_rows(&stdout);
        assert!(rows.len() >= 10 * 4, "{stdout}");
        assert!(rows.iter().all(|r| r[8] == "0"), "{stdout}");
        assert_rows_load(&csv, rows.len() * 2);
    }
}

/// "Initialization 12.3 MB" -> bytes.
fn amount(line: &str, what: &str) -> f64 {
    let rest = line
        .split(what)
        .nth(1)
        .unwrap_or_else(|| panic!("{what} in {line}"));
    let mut words = rest.split_whitespace();
    let value: f64 = words.next().unwrap().parse().unwrap();
    let unit = match words.next().unwrap() {
        "B" => 1.0,
        "KB" => 1024.0,
        "MB" => 1024.0 * 1024.0,
        "GB" => 1024.0 * 1024.0 * 1024.0,
        u => panic!("unit {u} in {line}"),
    };
    value * unit
}

#[test]
fn memory_report_on_mpi_is_the_host_memory_measured() {
    for np in [2, 3, 4] {
        // all_reduce at 8 MiB: 8 MiB send + 8 MiB receive buffer on each rank.
        let stdout = ok(
            np,
            ALL_REDUCE,
            &["-b", "8M", "-e", "8M", "-n", "2", "-M", "1"],
        );
        let lines: Vec<&str> = stdout.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("# Host memory usage    : Initialization "))
            .unwrap_or_else(|| panic!("{stdout}"));
        // As nccl-tests: after the conclusion, then "#".
        assert!(
            lines[at - 1].starts_with("# Collective test concluded: "),
            "{stdout}"
        );
        assert_eq!(lines[at + 1], "#", "{stdout}");
        let line = lines[at];
        let user = amount(line, "User-Allocated");
        assert!(user >= 16.0 * 1024.0 * 1024.0 * 0.99, "{line}");
        assert!(user < 64.0 * 1024.0 * 1024.0, "{line}");
        assert!(amount(line, "Initialization") > 1024.0 * 1024.0, "{line}");
        let total = amount(line, "Total");
        let parts = amount(line, "Initialization") + user + amount(line, "Collective");
        assert!((total - parts).abs() <= total * 0.02 + 1024.0, "{line}");
    }
    let stdout = ok(2, ALL_REDUCE, &["-b", "8", "-e", "8", "-n", "1"]);
    assert!(
        !stdout.contains("memory usage"),
        "-M 0 prints none: {stdout}"
    );
}

#[test]
fn gpu_only_flags_on_mpi_name_the_nccl_backend() {
    for (np, args, expected) in [
        (2, &["-p", "1"][..], "-p/--parallel_init 1: needs the nccl backend, but the mpi backend runs (--backend mpi)"),
        (3, &["-y", "1"], "-y/--stream_null 1: needs the nccl backend"),
        (4, &["-R", "1"], "-R/--local_register 1: needs the nccl backend"),
        (2, &["-R", "2"], "-R/--local_register 2: needs the nccl backend"),
        (3, &["-x", "0"], "-x/--cta_policy 0: needs the nccl backend"),
        (4, &["-D", "0"], "-D/--device_implementation 0: needs the nccl backend"),
        (2, &["-V", "16"], "-V/--device_cta_count 16: needs the nccl backend"),
    ] {
        let mut argv = vec!["--backend", "mpi", "-b", "8", "-e", "8"];
        argv.extend_from_slice(args);
        one_error(&mpirun(np, ALL_REDUCE, &argv), 2, expected);
    }
    // auto falls back to mpi here and says why.
    let line = one_error(
        &mpirun(2, ALL_REDUCE, &["-b", "8", "-e", "8", "-R", "1"]),
        2,
        "-R/--local_register 1: needs the nccl backend, but the mpi backend runs (--backend auto: rank 0",
    );
    assert!(!line.contains('\n'));
}

#[test]
fn nthreads_is_refused_naming_ngpus_as_the_way() {
    for np in [2, 3, 4] {
        one_error(
            &mpirun(np, ALL_REDUCE, &["-t", "4", "-b", "8", "-e", "8"]),
            2,
            "-t/--nthreads 4: fabricbench drives a process's GPUs from one thread with grouped calls; use -g 4 (--backend nccl) for 4 GPUs per process",
        );
    }
    // -t 1 is nccl-tests' default and runs.
    let stdout = ok(2, ALL_REDUCE, &["-t", "1", "-b", "8", "-e", "8", "-n", "1"]);
    assert!(stdout.contains("# nThread 1 nGpus 1 "), "{stdout}");
}

#[test]
fn values_are_checked_as_nccl_tests_reads_them() {
    for (args, expected) in [
        (&["-u", "-1"][..], "-u/--unalign -1: use a whole number >= 0"),
        (&["-u", "x"], "-u/--unalign: 'x' is not a number"),
        (&["-u", "2000000"], "-u/--unalign 2000000: misalign by at most 1048576 elements"),
        (&["-M", "2"], "-M/--memory 2: use 0 or 1"),
        (&["-t", "0"], "-t/--nthreads 0: use a whole number >= 1"),
        (&["-p", "2"], "-p/--parallel_init 2: use 0 or 1"),
        (&["-y", "2"], "-y/--stream_null 2: use 0 or 1"),
        (&["-R", "3"], "-R/--local_register 3: use 0 (none), 1 (local, ncclCommRegister) or 2 (symmetric windows)"),
        (&["-x", "3"], "-x/--cta_policy 3: use 0 (NCCL_CTA_POLICY_DEFAULT), 1 (EFFICIENCY) or 2 (ZERO)"),
        (&["-V", "0"], "-V/--device_cta_count 0: use 1 to 128"),
        (&["-V", "200"], "-V/--device_cta_count 200: use 1 to 128"),
        (&["-D", "1"], "-D/--device_implementation 1: a device implementation needs symmetric registration; add -R 2"),
        (&["-D", "2", "-R", "2"], "-D/--device_implementation 2: nccl-tests' device-API kernels are CUDA code"),
        (&["-y", "1", "-G", "2"], "-y/--stream_null 1 and -G/--cudagraph: CUDA cannot capture the NULL stream"),
    ] {
        let mut argv = vec!["-b", "8", "-e", "8"];
        argv.extend_from_slice(args);
        one_error(&mpirun(3, ALL_REDUCE, &argv), 2, expected);
    }
}

#[test]
fn header_and_footer_as_nccl_tests_parsers_read_them() {
    let dir = scratch("flags-footer");
    let csv = dir.join("f.csv");
    let stdout = ok(
        4,
        ALL_REDUCE,
        &[
            "-b",
            "8",
            "-e",
            "1K",
            "-f",
            "4",
            "-n",
            "2",
            "-C",
            "1",
            "-c",
            "0",
            "--csv",
            csv.to_str().unwrap(),
        ],
    );
    let labels = stdout
        .lines()
        .find(|l| l.starts_with("#       size"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let words: Vec<&str> = labels.split_whitespace().collect();
    assert_eq!(
        &words[..14],
        [
            "#", "size", "count", "type", "redop", "root", "cputime", "algbw", "busbw", "#wrong",
            "cputime", "algbw", "busbw", "#wrong"
        ],
        "{labels}"
    );
    // nccl-tests says "0 OK" without validation too; the note says none ran.
    assert!(
        stdout.contains("\n# Out of bounds values : 0 OK (-c 0: nothing validated)\n"),
        "{stdout}"
    );
    assert!(stdout.contains("\n# Avg bus bandwidth    : "), "{stdout}");
    // Device lines in nccl-tests' layout; host memory has no bus id.
    let device = stdout
        .lines()
        .find(|l| l.starts_with("#  Rank  3 Group  0 Pid "))
        .unwrap();
    assert!(device.contains(" device  3 [host] "), "{device}");
    // The NCCL columns exist and stay empty on mpi; no NCCL footer line.
    assert!(!stdout.contains("NCCL algo/proto"), "{stdout}");
    let header = std::fs::read_to_string(&csv).unwrap();
    let columns: Vec<&str> = header.lines().next().unwrap().split(',').collect();
    assert!(
        columns.contains(&"nccl_algo") && columns.contains(&"nccl_proto"),
        "{columns:?}"
    );
    let rows = read_rows(&csv);
    assert_eq!(rows.len(), 2 * 4, "8, 32, 128 and 512 B in both placements");
    for row in rows {
        assert_eq!((row.nccl_algo, row.nccl_proto), (None, None));
    }
    assert_rows_load(&csv, 2 * 4);
}

#[test]
fn version_keeps_its_long_flag() {
    let out = std::process::Command::new(ALL_REDUCE)
        .arg("--version")
        .env("OMPI_MCA_ess_singleton_isolated", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("fabricbench ") || stdout.contains(env!("CARGO_PKG_VERSION")),
        "{stdout}"
    );
}
