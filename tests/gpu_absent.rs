//! On a host without an NVIDIA driver: `--backend nccl` and `copy_bw` fail with one
//! clear line naming the ranks (once per job: what was found of NCCL, then the
//! driver; tests/nccl_library.rs has the same with a real NCCL) and no panic, and
//! `--backend auto` runs on MPI and says so in the header and in every CSV row.
//! On a GPU host these paths do not exist: the tests (the no_gpu tier) fail
//! saying so, scripts/test.sh leaves them out there, and scripts/gpu-check.sh
//! covers that side.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

fn mpirun(np: usize, program: &str, args: &[&str]) -> Output {
    common::keep_mpi_session_folder();
    Command::new("mpirun")
        .args(["-np", &np.to_string(), program])
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .output()
        .expect("mpirun runs")
}

fn alone(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .env("OMPI_MCA_ess_singleton_isolated", "1")
        .output()
        .expect("binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn assert_no_panic(stderr: &str) {
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "a panic reached the user:\n{stderr}"
    );
}

fn scratch(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "fabricbench-gpu-absent-{name}-{}.csv",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn copy_bw_bad_flags_name_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_copy_bw"))
        .args(["--tests", "h2d,sideways"])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("copy_bw: error: --tests sideways"),
        "{stderr}"
    );
}

/// Tests of a host without a CUDA driver (the no_gpu tier: scripts/test.sh leaves it out where a driver is).
mod no_gpu {
    use super::*;

    #[test]
    fn nccl_backend_without_a_driver_is_one_line_and_exit_1() {
        common::require_no_gpu();
        let out = alone(
            env!("CARGO_BIN_EXE_all_reduce_perf"),
            &["--backend", "nccl", "-b", "8", "-e", "1K"],
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_no_panic(&stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line expected:\n{stderr}");
        // NCCL is looked for first: the line says what was found of it, then the driver.
        assert!(
            lines[0].starts_with("all_reduce_perf: rank 0 (")
                && lines[0].contains("error: --backend nccl: NCCL ")
                && lines[0].contains("; libcuda.so.1 not found: no NVIDIA driver"),
            "{stderr}"
        );
        assert!(
            text(&out.stdout).is_empty(),
            "no table for a run that did not start"
        );
    }

    #[test]
    fn nccl_backend_without_a_driver_fails_on_every_rank() {
        common::require_no_gpu();
        let out = mpirun(
            2,
            env!("CARGO_BIN_EXE_reduce_scatter_perf"),
            &["--backend", "nccl", "-b", "8", "-e", "1K"],
        );
        let stderr = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{stderr}");
        assert_no_panic(&stderr);
        // Both ranks lack it alike: one line names them and their host, once.
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("error:")).collect();
        assert_eq!(lines.len(), 1, "{stderr}");
        assert!(
            lines[0].starts_with("reduce_scatter_perf: ranks 0-1 (")
                && lines[0].contains("): error: --backend nccl: NCCL ")
                && lines[0].contains("; libcuda.so.1 not found"),
            "{stderr}"
        );
        assert!(
            !stderr.contains("MPI_ABORT"),
            "ranks agree to stop; nobody aborts the job:\n{stderr}"
        );
    }

    #[test]
    fn auto_runs_on_mpi_and_says_so_in_header_and_csv() {
        common::require_no_gpu();
        let csv = scratch("auto");
        let out = mpirun(
            2,
            env!("CARGO_BIN_EXE_all_gather_perf"),
            &[
                "-b",
                "64",
                "-e",
                "4K",
                "-f",
                "4",
                "--csv",
                csv.to_str().unwrap(),
            ],
        );
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(stdout.contains("(mpi backend)"), "{stdout}");
        let choice = stdout
            .lines()
            .find(|l| l.starts_with("# Backend: "))
            .expect("a # Backend: line");
        assert!(
            choice.contains("--backend auto: rank 0 (")
                && choice.contains("libcuda.so.1 not found"),
            "{choice}"
        );
        let mut reader = csv::Reader::from_path(&csv).unwrap();
        let header = reader.headers().unwrap().clone();
        let backend = header.iter().position(|h| h == "backend").unwrap();
        let launch = header.iter().position(|h| h == "launch").unwrap();
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 2 * 4, "4 sizes x 2 placements");
        for row in &rows {
            assert_eq!(&row[backend], "mpi");
            assert_eq!(&row[launch], "stream");
        }
        std::fs::remove_file(&csv).unwrap();
    }

    #[test]
    fn gpu_only_flags_on_mpi_are_usage_errors() {
        common::require_no_gpu();
        for (flags, expected) in [
            (["-g", "2"], "-g/--ngpus 2: needs the nccl backend"),
            (["-G", "5"], "-G/--cudagraph 5: needs the nccl backend"),
        ] {
            let out = alone(env!("CARGO_BIN_EXE_all_reduce_perf"), &flags);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{stderr}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(stderr.contains(expected), "{stderr}");
        }
    }

    #[test]
    fn copy_bw_without_a_driver_is_a_clear_error() {
        common::require_no_gpu();
        let csv = scratch("copy");
        let out = Command::new(env!("CARGO_BIN_EXE_copy_bw"))
            .args(["--csv", csv.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_no_panic(&stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("copy_bw: error: libcuda.so.1 not found"),
            "{stderr}"
        );
        assert!(!csv.exists(), "no CSV for a run that measured nothing");
    }
}
