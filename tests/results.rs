//! Real runs of a benchmark under mpirun with --limit, limit detection on
//! fixture sysfs trees, --hist and --plot; then the plot binary on their CSV.

mod common;

use fabricbench::report::csv::read_rows;
use fabricbench::report::hist::read_hgrm;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ITERS: usize = 30;
/// -b 1K -e 64K -f 4: 1K, 4K, 16K, 64K.
const SIZES: usize = 4;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fb-results-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// all_reduce_perf on 2 ranks over 1K..64K with `extra` flags.
fn all_reduce(extra: &[&str]) -> Output {
    common::keep_mpi_session_folder();
    let out = Command::new("mpirun")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .args(["-np", "2", env!("CARGO_BIN_EXE_all_reduce_perf")])
        .args(["-b", "1K", "-e", "64K", "-f", "4", "-n", &ITERS.to_string()])
        .args(extra)
        .output()
        .expect("mpirun runs");
    assert!(
        out.status.success(),
        "all_reduce_perf failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The only subdirectory of `dir` (the run id).
fn run_dir(dir: &Path) -> PathBuf {
    let entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries[0].clone()
}

/// Checks that `png` is a 1200x800 PNG with real content, and its SVG twin.
fn assert_picture(png: &Path) {
    let bytes = std::fs::read(png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", png.display());
    let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((width, height), (1200, 800), "{}", png.display());
    // A blank 1200x800 PNG compresses to a few KB; axes, text and lines do not.
    assert!(
        bytes.len() > 20_000,
        "{}: {} bytes",
        png.display(),
        bytes.len()
    );
    let svg = std::fs::read_to_string(png.with_extension("svg")).unwrap();
    assert!(svg.starts_with("<svg width=\"1200\" height=\"800\""));
    assert!(svg.matches("<polyline").count() + svg.matches("<path").count() >= 2);
    assert!(svg.contains("message size") || svg.contains("percentile"));
}

#[test]
fn detected_limit_histograms_and_plots() {
    let dir = scratch("detected");
    let csv = dir.join("run.csv");
    let (hist, plot) = (dir.join("hist"), dir.join("plot"));
    let out = all_reduce(&[
        "--sysfs-root",
        fixture("sysfs-downgraded").to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--hist",
        hist.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
    ]);
    let stdout = text(&out);
    assert!(
        stdout.contains(
            "# Limits: nic-pcie gen4 x8 15.75 GB/s, rdma-port 200 Gb/s 25 GB/s (detected); \
             pct_of_limit against nic-pcie gen4 x8 15.75 GB/s"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("# WARNING: mlx5_0 (0000:17:00.0): PCIe link runs at 16 GT/s x8"),
        "{stdout}"
    );
    assert!(
        stdout.contains("% of nic-pcie gen4 x8 15.75 GB/s"),
        "{stdout}"
    );
    // Output to a pipe: no progress bar, no terminal control codes.
    assert!(
        !stdout.contains('\x1b') && !stdout.contains(" sizes "),
        "{stdout}"
    );

    // CSV: the binding limit and busbw as a percentage of it.
    let rows = read_rows(&csv).unwrap();
    assert_eq!(rows.len(), SIZES * 2);
    for r in &rows {
        assert_eq!(r.limit_name.as_deref(), Some("nic-pcie gen4 x8"));
        let gbs = r.limit_gbs.unwrap();
        assert!((gbs - 15.7538).abs() < 1e-3, "{gbs}");
        let pct = r.pct_of_limit.unwrap();
        assert!((pct - r.busbw_gbs / gbs * 100.0).abs() < 1e-9);
    }

    // One .hgrm per size and placement, each counting every iteration.
    let hist_run = run_dir(&hist);
    assert_eq!(std::fs::read_dir(&hist_run).unwrap().count(), SIZES * 2);
    for r in &rows {
        let path = hist_run.join(fabricbench::report::hist::file_name(r));
        let ladder = read_hgrm(&path).unwrap();
        let last = ladder.last().unwrap();
        assert_eq!((last.quantile, last.total_count), (1.0, ITERS as u64));
        // The CSV's max is exact, the histogram's within its 3 significant digits.
        assert!((last.value_us - r.max_us).abs() <= r.max_us * 2e-3 + 1e-3);
    }

    // --plot: three charts, PNG and SVG.
    let plot_run = run_dir(&plot);
    for stem in [
        "all_reduce_busbw",
        "all_reduce_latency",
        "all_reduce_latency_dist_65536B",
    ] {
        assert_picture(&plot_run.join(format!("{stem}.png")));
    }

    // The plot binary on the CSV, with the histograms found through --hist.
    let out_dir = dir.join("from-csv");
    let plotted = Command::new(env!("CARGO_BIN_EXE_plot"))
        .args([csv.to_str().unwrap(), "--hist", hist.to_str().unwrap()])
        .args(["--size", "4K", "-o", out_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(plotted.status.success(), "{plotted:?}");
    let listed = text(&plotted);
    assert_eq!(listed.lines().count(), 6, "{listed}");
    assert_picture(&out_dir.join("all_reduce_latency_dist_4096B.png"));
    let svg = std::fs::read_to_string(out_dir.join("all_reduce_latency_dist_4096B.svg")).unwrap();
    assert!(svg.contains("full distributions from the HdrHistogram"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn given_limits_replace_detection_and_no_limit_says_so() {
    let dir = scratch("given");
    let csv = dir.join("given.csv");
    let out = all_reduce(&[
        "--sysfs-root",
        fixture("sysfs-ndr").to_str().unwrap(),
        "--limit",
        "nvlink4",
        "--limit",
        "400Gb/s",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let stdout = text(&out);
    assert!(
        stdout.contains("# Limits: 400 Gb/s 50 GB/s, nvlink4 450 GB/s (given); pct_of_limit against 400 Gb/s 50 GB/s"),
        "{stdout}"
    );
    // What detection found is still shown.
    assert!(
        stdout.contains("#   detected: mlx5_0 port 1: 400 Gb/sec (4X NDR) InfiniBand"),
        "{stdout}"
    );
    let rows = read_rows(&csv).unwrap();
    assert!(rows.iter().all(|r| r.limit_gbs == Some(50.0)));

    let bare = dir.join("bare.csv");
    let out = all_reduce(&[
        "--sysfs-root",
        fixture("sysfs-no-fabric").to_str().unwrap(),
        "--csv",
        bare.to_str().unwrap(),
        "--plot",
        dir.join("plot").to_str().unwrap(),
    ]);
    let stdout = text(&out);
    assert!(
        stdout.contains("# Limits: no limit (none given with --limit, none detected)"),
        "{stdout}"
    );
    assert!(stdout.contains("(no limit: none given with --limit, none detected)"));
    let rows = read_rows(&bare).unwrap();
    assert!(rows
        .iter()
        .all(|r| r.limit_name.is_none() && r.limit_gbs.is_none() && r.pct_of_limit.is_none()));
    let svg =
        std::fs::read_to_string(run_dir(&dir.join("plot")).join("all_reduce_busbw.svg")).unwrap();
    assert!(svg.contains("no limit (none given with --limit, none detected)"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_limit_is_one_line_naming_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_all_reduce_perf"))
        .args(["--limit", "nvlink9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--limit") && err.contains("nvlink4"), "{err}");
}

#[test]
fn plot_rejects_bad_input() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_plot"))
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["/nonexistent/run.csv"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        "plot: error: /nonexistent/run.csv: no such file"
    );
    let (code, err) = run(&["Cargo.toml"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("not a fabricbench CSV"), "{err}");
}

#[test]
fn progress_bar_on_a_terminal() {
    // `script` gives mpirun a terminal; the bar then shares stdout with the table.
    let command = format!(
        "mpirun -np 2 {} -b 1K -e 4K -f 2 -n 5",
        env!("CARGO_BIN_EXE_all_reduce_perf")
    );
    let out = Command::new("script")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .args(["-qec", &command, "/dev/null"])
        .output()
        .expect("script (util-linux) runs");
    assert!(out.status.success(), "{out:?}");
    let screen = text(&out);
    assert!(screen.contains("3/3 sizes"), "{screen}");
    assert!(screen.contains("measuring 4 KiB"), "{screen}");
    // Every table row starts its own line: the bar is cleared before it is printed.
    let rows: Vec<&str> = screen
        .split(['\n', '\r'])
        .flat_map(|line| line.split("\x1b[2K"))
        .filter(|piece| piece.contains(" float "))
        .collect();
    assert_eq!(rows.len(), 3, "{screen}");
    for row in rows {
        assert!(!row.contains("sizes"), "bar text in a table row: {row:?}");
        assert!(
            row.trim_start().starts_with(|c: char| c.is_ascii_digit()),
            "{row:?}"
        );
    }
}
