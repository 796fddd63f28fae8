//! Nothing lost: every finished row of a results file loads (in pandas and in
//! fabricbench) whatever stops the run (a full disk, a timeout, an unwritable
//! folder, mismatched ranks, bad flags), a run that wrote no rows can be rerun as
//! it was typed, `--append` repairs a torn last row and refuses another schema,
//! and the CSV records no launcher internals or secrets.

mod common;

use common::{
    assert_rows_load, mpirun, mpirun_command, mpirun_env, one_error, pandas_rows, scratch, text,
    Tmpfs,
};
use std::path::Path;
use std::process::{Command, Output};

const ALL_REDUCE: &str = env!("CARGO_BIN_EXE_all_reduce_perf");
const SMALL: [&str; 6] = ["-b", "8", "-e", "8", "-n", "2"];

fn with(extra: &[&str]) -> Vec<String> {
    SMALL.iter().chain(extra).map(|s| s.to_string()).collect()
}

fn run(np: usize, args: &[String]) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    mpirun(np, ALL_REDUCE, &args)
}

/// A file holding only this version's header: pandas loads no rows from it and
/// fabricbench's reader says so.
fn assert_header_only(path: &Path) {
    assert_eq!(pandas_rows(path), 0, "{}", path.display());
    let e = fabricbench::report::csv::read_rows(path).unwrap_err();
    assert_eq!(format!("{e:#}"), format!("{}: no rows", path.display()));
}

#[test]
#[ignore = "needs root (mounts a tmpfs): scripts/test.sh runs it as root"]
fn a_full_disk_ends_the_run_and_every_earlier_row_loads() {
    let disk = Tmpfs::mount("full-disk", "size=64k");
    let csv = disk.0.join("run.csv");
    let path = csv.to_str().unwrap();
    // 400 cycles of 2 rows of about 300 bytes: far more than 64 KiB.
    let out = run(2, &with(&["-N", "400", "--csv", path]));
    let line = one_error(
        &out,
        1,
        &format!("--csv {path}: No space left on device: row "),
    );
    let kept: usize = line
        .split("the ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(kept > 10, "{line}");
    assert!(
        line.ends_with(&format!("the {kept} rows before it are kept")),
        "{line}"
    );
    assert!(std::fs::read(&csv).unwrap().ends_with(b"\n"));
    assert_rows_load(&csv, kept);
}

#[test]
#[ignore = "needs root (mounts a tmpfs): scripts/test.sh runs it as root"]
fn a_disk_with_no_room_for_the_header_leaves_no_file() {
    let disk = Tmpfs::mount("no-room", "size=16k");
    // Fill the disk to the last byte.
    let filler = disk.0.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let block = vec![0u8; 512];
    while std::io::Write::write_all(&mut f, &block).is_ok() {}
    while std::io::Write::write_all(&mut f, &[0]).is_ok() {}
    let csv = disk.0.join("run.csv");
    let path = csv.to_str().unwrap();
    let out = run(2, &with(&["--csv", path]));
    one_error(
        &out,
        1,
        &format!("--csv {path}: cannot write the header: No space left on device"),
    );
    assert!(!csv.exists(), "no 0-byte file is left behind");
}

#[test]
fn a_run_that_times_out_before_its_first_row_can_be_run_again() {
    let dir = scratch("first-size-timeout");
    let csv = dir.join("run.csv");
    let args = with(&["-T", "3", "--csv", csv.to_str().unwrap()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = std::time::Instant::now();
    let out = mpirun_env(
        2,
        ALL_REDUCE,
        &argv,
        &[("FABRICBENCH_FAULT_STALL_RANK", "1:8")],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out).1);
    assert!(started.elapsed().as_secs() < 3 + 30, "ended by -T");
    assert_header_only(&csv);
    // The same command again: the header-only file is taken as empty.
    let out = run(2, &args);
    assert!(out.status.success(), "{}", text(&out).1);
    assert_rows_load(&csv, 2);
}

#[test]
fn an_unwritable_folder_is_refused_before_the_csv_is_made() {
    let dir = scratch("unwritable-plot");
    let csv = dir.join("run.csv");
    let path = csv.to_str().unwrap();
    // /proc takes no new file or folder, even from root (whom access(2) lets
    // pass): found by trying, before the run.
    let out = run(
        2,
        &with(&["--csv", path, "--plot", "/proc/fabricbench-plots"]),
    );
    one_error(
        &out,
        2,
        "--plot /proc/fabricbench-plots: cannot create files in /proc (No such file or directory); choose a folder you can write",
    );
    assert!(
        !csv.exists(),
        "nothing was created before the folder was refused"
    );
    assert!(!text(&out).1.contains("os error"));
    let out = run(2, &with(&["--csv", path]));
    assert!(out.status.success(), "{}", text(&out).1);
    assert_rows_load(&csv, 2);
}

#[test]
#[ignore = "needs root (mounts a tmpfs): scripts/test.sh runs it as root"]
fn a_read_only_folder_is_refused_before_the_csv_is_made() {
    let dir = scratch("read-only-hist");
    let csv = dir.join("run.csv");
    let path = csv.to_str().unwrap();
    let ro = Tmpfs::mount("read-only", "ro,size=16k");
    let hist = ro.0.join("hist");
    let out = run(2, &with(&["--csv", path, "--hist", hist.to_str().unwrap()]));
    one_error(
        &out,
        2,
        &format!(
            "--hist {}: cannot create files in {} (Read-only file system); choose a folder you can write",
            hist.display(),
            ro.0.display()
        ),
    );
    assert!(!csv.exists());
}

#[test]
fn mismatched_ranks_and_bad_flags_create_no_csv() {
    let dir = scratch("no-csv");
    let csv = dir.join("run.csv");
    let path = csv.to_str().unwrap();
    let out = mpirun_command()
        .args(["-np", "1", ALL_REDUCE, "-e", "1M", "--csv", path])
        .args([":", "-np", "1", ALL_REDUCE, "-e", "2M", "--csv", path])
        .output()
        .unwrap();
    one_error(&out, 2, "ranks were started with different arguments");
    assert!(!csv.exists());
    let out = run(2, &with(&["-w", "-1", "--csv", path]));
    one_error(&out, 2, "-w/--warmup_iters -1: use a whole number >= 0");
    assert!(!csv.exists());
}

#[test]
fn append_cuts_a_torn_last_row_and_says_so() {
    let dir = scratch("torn");
    let csv = dir.join("runs.csv");
    let path = csv.to_str().unwrap();
    let args = with(&["--csv", path, "--append"]);
    assert!(run(2, &args).status.success());
    // A crash in the middle of a row: the first 37 bytes of another one.
    let mut bytes = std::fs::read(&csv).unwrap();
    let first_row = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    let torn = bytes[first_row..first_row + 37].to_vec();
    bytes.extend(torn);
    std::fs::write(&csv, &bytes).unwrap();
    let out = run(2, &args);
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let notes: Vec<&str> = stderr.lines().filter(|l| l.contains("partial")).collect();
    assert_eq!(
        notes,
        [format!("fabricbench: --csv {path}: removed a partial last row (37 bytes) left by an interrupted run")]
    );
    assert_rows_load(&csv, 4);
}

#[test]
fn append_refuses_rows_of_another_schema_under_the_same_header() {
    let dir = scratch("other-schema");
    let csv = dir.join("runs.csv");
    let path = csv.to_str().unwrap();
    assert!(run(2, &with(&["--csv", path])).status.success());
    let text_now = std::fs::read_to_string(&csv).unwrap();
    let (header, rows) = text_now.split_once('\n').unwrap();
    let future: String = rows.lines().map(|l| format!("2{}\n", &l[1..])).collect();
    std::fs::write(&csv, format!("{header}\n{future}")).unwrap();
    let before = std::fs::read(&csv).unwrap();
    let out = run(2, &with(&["--csv", path, "--append"]));
    one_error(
        &out,
        1,
        &format!(
            "--csv {path} --append: {path}:2: schema_version 2, but this fabricbench reads schema_version 1"
        ),
    );
    assert_eq!(
        std::fs::read(&csv).unwrap(),
        before,
        "the file is untouched"
    );
}

#[test]
fn paths_that_are_not_files_are_refused_without_reading_them() {
    let dir = scratch("not-files");
    let fifo = dir.join("fifo.csv");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let fifo = fifo.to_str().unwrap();
    let dir_path = dir.to_str().unwrap();
    for (target, append, expected) in [
        (dir_path, false, format!("--csv {dir_path}: is a directory; give a file in it, e.g. --csv {dir_path}/results.csv")),
        ("/dev/null", false, "--csv /dev/null: is a character device, not a regular file; give the path of a .csv file".into()),
        (fifo, true, format!("--csv {fifo}: is a FIFO, not a regular file; give the path of a .csv file")),
    ] {
        let mut extra = vec!["--csv", target];
        if append {
            extra.push("--append");
        }
        one_error(&run(2, &with(&extra)), 2, &expected);
    }
    // compare and plot read through the same reader: a FIFO or a device is never opened.
    let compare = env!("CARGO_BIN_EXE_compare");
    let started = std::time::Instant::now();
    let out = Command::new(compare)
        .args([fifo, "/dev/zero"])
        .output()
        .unwrap();
    assert!(started.elapsed().as_secs() < 30, "nothing blocked");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out)
            .1
            .contains(&format!("{fifo}: is a FIFO, not a regular file")),
        "{}",
        text(&out).1
    );
}

#[test]
fn the_env_column_keeps_what_shapes_a_result_and_no_launcher_internals() {
    let dir = scratch("env");
    let csv = dir.join("run.csv");
    let out = mpirun_env(
        2,
        ALL_REDUCE,
        &with(&["--csv", csv.to_str().unwrap()])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &[
            ("OMPI_MCA_btl_tcp_if_include", "lo"),
            ("NCCL_DEBUG", "WARN"),
            ("NCCL_SECRET_TOKEN", "hunter2"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out).1);
    assert_rows_load(&csv, 2);
    for row in common::read_rows(&csv) {
        assert!(
            row.env.contains("OMPI_MCA_btl_tcp_if_include=lo"),
            "{}",
            row.env
        );
        assert!(row.env.contains("NCCL_DEBUG=WARN"), "{}", row.env);
        for internal in [
            "orte_",
            "precondition",
            "hnp_uri",
            "ess_",
            "pmix",
            "initial_wdir",
            "hunter2",
        ] {
            assert!(!row.env.contains(internal), "{internal} in {}", row.env);
        }
    }
}
