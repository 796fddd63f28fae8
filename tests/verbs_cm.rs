//! -R/--rdma_cm, -z/--comm_rdma_cm and --retry_count on any host: the flags
//! are checked before the device, refusals are one line with exit 2, and
//! mpirun is refused with the reason (the runs themselves are in
//! scripts/softroce-test.sh, on Soft-RoCE).

mod common;

use common::{mpirun, one_error};
use std::process::Command;

const WRITE_BW: &str = env!("CARGO_BIN_EXE_ib_write_bw");
const SEND_BW: &str = env!("CARGO_BIN_EXE_ib_send_bw");
const READ_LAT: &str = env!("CARGO_BIN_EXE_ib_read_lat");

fn plain(binary: &str, args: &[&str]) -> std::process::Output {
    Command::new(binary)
        .args(args)
        .output()
        .expect("the binary runs")
}

#[test]
fn rdma_cm_refusals_are_one_line_before_the_device() {
    let cases: [(&str, &[&str], &str); 5] = [
        (
            WRITE_BW,
            &["-R", "-c", "UC"],
            "-R/--rdma_cm: UC is not supported in librdmacm",
        ),
        (
            WRITE_BW,
            &["--rdma_cm", "-c", "XRC"],
            "-R/--rdma_cm: XRC does not support rdma_cm",
        ),
        (
            READ_LAT,
            &["-R", "--retry_count", "9"],
            "--retry_count 9: the QP retry count is a 3-bit field, 0 to 7",
        ),
        (
            WRITE_BW,
            &["--retry_count", "3"],
            "--retry_count: only QPs connected through rdma_cm use it",
        ),
        (
            WRITE_BW,
            &["-z", "--all-pairs"],
            "-z/--comm_rdma_cm: --all-pairs connects its pairs through MPI",
        ),
    ];
    for (binary, args, expected) in cases {
        one_error(&plain(binary, args), 2, expected);
    }
}

#[test]
fn rdma_cm_with_ud_goes_on_to_the_device() {
    // perftest connects UD QPs through rdma_cm's UDP port space: -R -c UD is
    // no usage error; the run stops at the device (none of this name here).
    let out = plain(SEND_BW, &["-R", "-c", "UD", "-d", "no_such_rdma_dev"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    // "no RDMA device on this host" here, "RDMA device ... not found" on one with devices.
    assert!(err.contains("RDMA device"), "{err}");
    // UD carries sends only, with -R too.
    one_error(
        &plain(WRITE_BW, &["-R", "-c", "UD"]),
        2,
        "-c/--connection UD: ib_write_bw needs a connection",
    );
}

#[test]
fn rdma_cm_under_mpirun_is_refused_with_the_reason() {
    let out = mpirun(2, WRITE_BW, &["-R", "-n", "20"]);
    one_error(
        &out,
        2,
        "-R/--rdma_cm: under mpirun the pairs exchange their details over MPI; start the server and the client without mpirun",
    );
    let out = mpirun(2, SEND_BW, &["-z", "-n", "20"]);
    one_error(&out, 2, "-z/--comm_rdma_cm: under mpirun");
}

#[test]
fn help_lists_the_rdma_cm_flags() {
    let out = plain(WRITE_BW, &["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "-R, --rdma_cm",
        "-z, --comm_rdma_cm",
        "--retry_count <RETRY_COUNT>",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help:\n{help}");
    }
}
