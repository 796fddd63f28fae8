//! The eight verbs binaries on a host without RDMA (this one, CI's): each says so
//! in one line and exits 1; bad flags and launches are one line naming the flag,
//! exit 2. Real runs need an RDMA device: scripts/softroce-test.sh.

mod common;

use common::{mpirun, scratch, text};
use std::process::{Command, Output};

const BINARIES: [&str; 8] = [
    env!("CARGO_BIN_EXE_ib_write_bw"),
    env!("CARGO_BIN_EXE_ib_read_bw"),
    env!("CARGO_BIN_EXE_ib_send_bw"),
    env!("CARGO_BIN_EXE_ib_write_lat"),
    env!("CARGO_BIN_EXE_ib_read_lat"),
    env!("CARGO_BIN_EXE_ib_send_lat"),
    env!("CARGO_BIN_EXE_ib_atomic_bw"),
    env!("CARGO_BIN_EXE_ib_atomic_lat"),
];
const WRITE_BW: &str = BINARIES[0];

fn plain(binary: &str, args: &[&str]) -> Output {
    Command::new(binary)
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("binary runs")
}

/// The lines of stderr that carry an error, after checking that nothing panicked.
fn errors(out: &Output) -> Vec<String> {
    let (stdout, stderr) = text(out);
    assert!(!stderr.contains("panicked"), "no panic trace:\n{stderr}");
    assert!(
        !stdout.contains("#bytes"),
        "nothing was measured, so no table:\n{stdout}"
    );
    stderr
        .lines()
        .filter(|l| l.contains("error:"))
        .map(str::to_string)
        .collect()
}

fn one_error(out: &Output, code: i32, expected: &str) {
    let lines = errors(out);
    assert_eq!(out.status.code(), Some(code), "{lines:?}");
    assert_eq!(lines.len(), 1, "one line, printed once: {lines:?}");
    assert!(
        lines[0].contains(expected),
        "{:?} lacks {expected:?}",
        lines[0]
    );
}

#[test]
fn bad_flags_name_the_flag() {
    for (args, expected) in [
        (
            &["-s", "0"][..],
            "-s/--size 0: messages must be at least 1 byte",
        ),
        (&["-n", "2"], "-n/--iters 2: at least 5 iterations"),
        (&["-m", "1500"], "-m/--mtu 1500: RDMA path MTUs are 256"),
        (&["-u", "40"], "-u/--qp-timeout 40: the exponent is 0 to 31"),
        (&["-q", "0"], "-q/--qp 0"),
        (&["-x", "abc"], "'abc'"),
        (&["--use_cuda_dmabuf"], "--use_cuda"),
        (&["-a", "-s", "64"], "--all"),
        (
            &["--rounds", "0"],
            "--rounds 0: use a whole number from 1 to 10000",
        ),
        (
            &["--rounds", "-1"],
            "--rounds -1: use a whole number from 1 to 10000",
        ),
        (
            &["--rounds", "abc"],
            "'abc' is not a whole number in digits; use a whole number from 1 to 10000",
        ),
        (
            &["--rounds", "1e9"],
            "'1e9' is not a whole number in digits; use a whole number from 1 to 10000",
        ),
        (
            &["--rounds", "20000"],
            "--rounds 20000: too many rounds; use a whole number from 1 to 10000",
        ),
        (
            &["-D", "2", "--run_infinitely", "--rounds", "3"],
            "--rounds 3: --run_infinitely measures one size until it is stopped",
        ),
    ] {
        one_error(&plain(WRITE_BW, args), 2, expected);
    }
    one_error(
        &plain(BINARIES[4], &["-I", "64"]),
        2,
        "-I/--inline_size 64: RDMA reads carry no inline data",
    );
    one_error(
        &plain(BINARIES[3], &["-q", "2"]),
        2,
        "-q/--qp 2: latency tests run one QP",
    );
}

#[test]
fn perftest_parity_flags_are_checked_before_the_device() {
    for (binary, args, expected) in [
        (
            BINARIES[6],
            &["-s", "64"][..],
            "-s/--size 64: ib_atomic_bw moves one 8-byte word",
        ),
        (
            BINARIES[7],
            &["-A", "SWAP"],
            "-A/--atomic_type SWAP: use FETCH_AND_ADD or CMP_AND_SWAP",
        ),
        (
            WRITE_BW,
            &["-A", "CMP_AND_SWAP"],
            "ib_write_bw runs no atomics",
        ),
        (
            BINARIES[1],
            &["-c", "UC"],
            "-c/--connection UC: ib_read_bw needs RC",
        ),
        (
            BINARIES[3],
            &["-c", "UD"],
            "-c/--connection UD: ib_write_lat needs a connection",
        ),
        (
            WRITE_BW,
            &["-o", "8"],
            "-o/--outs 8: only read and atomic tests",
        ),
        (
            BINARIES[3],
            &["-w", "10"],
            "-w/--limit_bw: latency tests have no",
        ),
        (
            WRITE_BW,
            &["-y", "-1"],
            "-y/--limit_msgrate -1: too small; give the least MsgRate in Mpps a line must reach, more than 0, e.g. 0.5",
        ),
        (
            BINARIES[4],
            &["--data_validation"],
            "--data_validation: ib_read_lat checks nothing",
        ),
        (
            WRITE_BW,
            &["-f", "2"],
            "-f/--margin 2: margins belong to timed runs",
        ),
        (
            WRITE_BW,
            &["-D", "4", "-f", "2"],
            "-f/--margin 2: -D 4 must be longer than both margins",
        ),
        (
            WRITE_BW,
            &["--run_infinitely"],
            "--run_infinitely: give the reporting period with -D SECS",
        ),
    ] {
        one_error(&plain(binary, args), 2, expected);
    }
}

#[test]
fn an_existing_csv_is_never_overwritten() {
    let dir = scratch("verbs_csv");
    let path = dir.join("runs.csv");
    std::fs::write(&path, "keep me\n").unwrap();
    let out = plain(WRITE_BW, &["--csv", path.to_str().unwrap()]);
    one_error(&out, 2, "the file exists and runs are never overwritten");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me\n");
}

#[test]
fn mpirun_launches_pairs() {
    let out = mpirun(3, WRITE_BW, &[]);
    let lines = errors(&out);
    assert!(!out.status.success());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("mpirun -np 3: the ranks form pairs") && lines[0].contains("even"),
        "{lines:?}"
    );
    let out = mpirun(2, WRITE_BW, &["10.0.0.1"]);
    let lines = errors(&out);
    assert!(!out.status.success());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("drop the server address"), "{lines:?}");
}

#[test]
fn help_lists_perftests_flags() {
    let out = plain(WRITE_BW, &["--help"]);
    assert!(out.status.success());
    let (stdout, _) = text(&out);
    for flag in [
        "--ib-dev",
        "--ib-port",
        "--gid-index",
        "--size",
        "--all",
        "--iters",
        "--duration",
        "--qp",
        "--tx-depth",
        "--mtu",
        "--qp-timeout",
        "--inline_size",
        "--bidirectional",
        "--noPeak",
        "--CPU-freq",
        "--report_gbits",
        "--port",
        "--use_cuda",
        "--use_cuda_dmabuf",
        "--connection",
        "--data_validation",
        "--limit_bw",
        "--limit_msgrate",
        "--margin",
        "--run_infinitely",
        "--write_with_imm",
    ] {
        assert!(stdout.contains(flag), "--help lacks {flag}:\n{stdout}");
    }
    // Offered only where they apply (tests/help.rs checks every binary's).
    let atomic = text(&plain(BINARIES[6], &["--help"])).0;
    for flag in ["--atomic_type", "--outs"] {
        assert!(
            !stdout.contains(flag),
            "ib_write_bw offers {flag}:\n{stdout}"
        );
        assert!(
            atomic.contains(flag),
            "ib_atomic_bw lacks {flag}:\n{atomic}"
        );
    }
}

#[test]
fn all_pairs_bad_launches_name_the_flag() {
    for (binary, args, expected) in [
        (
            BINARIES[1],
            &["--all-pairs"][..],
            "--all-pairs: ib_read_bw has no pair mode; use ib_write_bw or ib_write_lat",
        ),
        (WRITE_BW, &["--all-pairs", "10.0.0.1"], "drop HOST"),
        (
            WRITE_BW,
            &["--all-pairs", "--slow-fraction", "0"],
            "--slow-fraction 0",
        ),
        (
            WRITE_BW,
            &["--all-pairs", "--csv", "x.csv", "--append"],
            "--append",
        ),
        (WRITE_BW, &["--slow-latency", "3"], "--all-pairs"),
    ] {
        one_error(&plain(binary, args), 2, expected);
    }
    // One rank has no pair: said before the device is looked at.
    one_error(
        &mpirun(1, WRITE_BW, &["--all-pairs"]),
        2,
        "--all-pairs needs 2 or more ranks",
    );
}

/// Tests of a host without an RDMA device (the no_rdma tier: scripts/test.sh leaves it out where one is).
mod no_rdma {
    use super::*;

    #[test]
    fn every_binary_says_there_is_no_rdma_device() {
        common::require_no_rdma();
        for binary in BINARIES {
            // Server side, client side, a named device: the device is looked at first.
            for args in [&[][..], &["10.0.0.1"], &["-d", "mlx5_0", "-x", "3"]] {
                let out = plain(binary, args);
                one_error(&out, 1, "no RDMA device on this host");
                let line = &errors(&out)[0];
                assert!(
                    line.contains("apt install rdma-core ibverbs-providers")
                        && line.contains("scripts/softroce-test.sh"),
                    "{binary} {args:?}: says what to install: {line}"
                );
            }
        }
    }

    #[test]
    fn under_mpirun_the_missing_device_is_reported_once() {
        common::require_no_rdma();
        let out = mpirun(4, BINARIES[5], &["-n", "10"]);
        assert!(!out.status.success());
        let lines = errors(&out);
        assert_eq!(
            lines.len(),
            1,
            "rank 0 prints the common cause once: {lines:?}"
        );
        assert!(
            lines[0].starts_with("ib_send_lat: error: no RDMA device on this host"),
            "{lines:?}"
        );
    }

    #[test]
    fn all_pairs_without_a_device_stops_every_rank_with_one_line() {
        common::require_no_rdma();
        // An odd rank count: all-pairs has byes, so it is no pair-count error.
        for binary in [WRITE_BW, BINARIES[3]] {
            let out = mpirun(3, binary, &["--all-pairs", "-n", "10"]);
            one_error(&out, 1, "no RDMA device on this host");
        }
    }
}

/// Tests of a host without a CUDA driver (the no_gpu tier: scripts/test.sh leaves it out where a driver is).
mod no_gpu {
    use super::*;

    #[test]
    fn gpu_memory_without_a_driver_says_why_before_the_device() {
        common::require_no_gpu();
        // The GPU is checked before the RDMA device, so its reason is the one shown.
        one_error(
            &plain(WRITE_BW, &["--use_cuda=0"]),
            1,
            "--use_cuda=0: libcuda.so.1 not found",
        );
        one_error(
            &mpirun(2, BINARIES[1], &["--use_cuda=1", "--use_cuda_dmabuf"]),
            1,
            "--use_cuda=1 --use_cuda_dmabuf: libcuda.so.1 not found",
        );
        one_error(
            &plain(BINARIES[3], &["--use_cuda=0"]),
            2,
            "--use_cuda=0: ib_write_lat polls its buffer from the CPU",
        );
    }

    #[test]
    fn gpu_memory_on_the_write_latency_test_without_a_gpu_is_one_line() {
        common::require_no_gpu();
        // With --write_with_imm the CPU never polls the buffer, so the flag is
        // taken, and the missing GPU is the one error (before any RDMA device).
        let out = plain(BINARIES[3], &["--write_with_imm", "--use_cuda=0"]);
        one_error(&out, 1, "--use_cuda=0: ");
    }
}
