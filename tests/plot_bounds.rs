//! `plot` on CSVs of any length: memory by the points drawn, not by the rows
//! read (a long `-N 0` run's CSV plots under a small address-space limit),
//! more points or lines than a chart can show refused with the fix, and a
//! legend of many lines in a panel of its own under the chart, never over the
//! title or the data.

mod common;

use common::{assert_rows_load, one_error, output_within, scratch, sweep_row};
use fabricbench::report::csv::CsvExport;
use fabricbench::report::Row;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

const PLOT: &str = env!("CARGO_BIN_EXE_plot");

/// The address space `plot` may take here: a tenth of what it took to plot a
/// 64 MB CSV when it held every row (about 11 times the file).
const ADDRESS_SPACE: u64 = 256 << 20;

/// Writes `rows` to a new CSV at `path`, as a benchmark's --csv does.
fn write_csv(path: &Path, rows: impl IntoIterator<Item = Row>) {
    let mut csv = CsvExport::open(path, false).unwrap();
    csv.write_rows(rows).unwrap();
}

/// `plot CSV -o OUT` under [`ADDRESS_SPACE`], within 5 minutes.
fn plot(csv: &Path, out: &Path) -> Output {
    let mut cmd = Command::new(PLOT);
    cmd.arg(csv).arg("-o").arg(out);
    let limit = libc::rlimit {
        rlim_cur: ADDRESS_SPACE,
        rlim_max: ADDRESS_SPACE,
    };
    // SAFETY: setrlimit is async-signal-safe and touches only the child's limits.
    unsafe {
        cmd.pre_exec(move || match libc::setrlimit(libc::RLIMIT_AS, &limit) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        });
    }
    output_within(cmd, Duration::from_secs(300))
}

/// [`plot`], which must succeed.
fn plot_ok(csv: &Path, out: &Path) -> Output {
    let run = plot(csv, out);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    run
}

/// A row of `run` at `size`, cycle `cycle`, of `datatype` and `op`, its run
/// facts as long as a real run's (about 350 bytes a row).
fn row(run: &str, cycle: u64, size: u64, datatype: &str, op: &str, placement: &str) -> Row {
    Row {
        run_id: run.into(),
        cycle,
        datatype: datatype.into(),
        redop: op.into(),
        timestamp: "2026-12-04T04:34:38.594Z".into(),
        tool_version: "0.1.0".into(),
        transport: "mpi/inter-node".into(),
        library_version: "Open MPI v4.1.4".into(),
        hosts: "gpu-node-001,gpu-node-002".into(),
        env: "NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_2,mlx5_3 NCCL_SOCKET_IFNAME=eth0".into(),
        ..sweep_row(
            placement,
            size,
            1.0 + (size as f64).log2() + cycle as f64 % 3.0,
            10.0,
        )
    }
}

#[test]
fn a_long_run_plots_in_memory_bounded_by_its_points() {
    let dir = scratch("plot-long-run");
    let csv = dir.join("long.csv");
    // 8 sizes x 2 placements a cycle, 12,000 cycles: 192,000 rows, about 60 MB.
    let cycles = 12_000;
    write_csv(
        &csv,
        (0..cycles).flat_map(|c| {
            (3..11).flat_map(move |p| {
                ["in-place", "out-of-place"].map(|pl| row("r", c, 1 << p, "float", "sum", pl))
            })
        }),
    );
    assert!(std::fs::metadata(&csv).unwrap().len() > 50 << 20);
    let out_dir = dir.join("plots");
    let out = plot_ok(&csv, &out_dir);
    let files: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(files.len(), 6, "{files:?}");
    for file in &files {
        let len = std::fs::metadata(file).unwrap().len();
        assert!(len < 1 << 20, "{file}: {len} bytes for 16 points");
    }
    // The cycles are averaged: busbw at 1 KiB is 11 + the mean of cycle % 3, 1.
    let svg = std::fs::read_to_string(out_dir.join("all_reduce_busbw.svg")).unwrap();
    assert!(svg.contains("best: 12.000 GB/s at 1 KiB"), "{svg}");
    assert_rows_load(&csv, 192_000);
}

#[test]
fn more_points_or_lines_than_a_chart_shows_are_refused_with_the_fix() {
    let dir = scratch("plot-too-many");
    let csv = dir.join("sizes.csv");
    write_csv(
        &csv,
        (1..=50_001).map(|s| row("r", 0, s, "float", "sum", "in-place")),
    );
    one_error(
        &plot(&csv, &dir.join("a")),
        2,
        &format!(
            "plot: error: {}: more than 50000 points to draw (one per run, collective, datatype, op, \
             root, rank count, placement and size; -N cycles are averaged into one): plot a part at a \
             time, e.g. the rows of one run_id (pandas: df[df.run_id == ID].to_csv(PATH))",
            csv.display()
        ),
    );
    let csv = dir.join("runs.csv");
    write_csv(
        &csv,
        (0..401).map(|r| row(&format!("run{r}"), 0, 8, "float", "sum", "in-place")),
    );
    let out_dir = dir.join("b");
    one_error(
        &plot(&csv, &out_dir),
        2,
        &format!(
            "plot: error: -o {}: all_reduce: 401 lines in one chart, more than the 400 a legend can \
             name; plot fewer runs, datatypes or ops at a time",
            out_dir.display()
        ),
    );
    assert_rows_load(&csv, 401);
}

/// Every `<text>` of an SVG as plotters writes it: (y, the text).
fn svg_texts(svg: &str) -> Vec<(f64, String)> {
    svg.split("<text ")
        .skip(1)
        .map(|t| {
            let y = t.split(" y=\"").nth(1).unwrap().split('"').next().unwrap();
            let text = t
                .split_once('>')
                .unwrap()
                .1
                .split("</text>")
                .next()
                .unwrap();
            (y.parse().unwrap(), text.trim().to_string())
        })
        .collect()
}

#[test]
fn a_legend_of_every_datatype_and_op_sits_under_the_chart() {
    let dir = scratch("plot-legend");
    let csv = dir.join("all.csv");
    let types = [
        "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
        "bfloat16", "f8e4m3", "f8e5m2",
    ];
    let ops = ["sum", "prod", "max", "min", "avg", "mulsum"];
    let rows: Vec<Row> = types
        .iter()
        .flat_map(|t| ops.iter().map(move |o| (t, o)))
        .flat_map(|(t, o)| {
            [8u64, 1024, 1 << 20]
                .into_iter()
                .flat_map(move |s| ["in-place", "out-of-place"].map(|pl| row("r", 0, s, t, o, pl)))
        })
        .collect();
    write_csv(&csv, rows);
    let out_dir = dir.join("plots");
    plot_ok(&csv, &out_dir);
    for chart in ["busbw", "latency"] {
        let svg = std::fs::read_to_string(out_dir.join(format!("all_reduce_{chart}.svg"))).unwrap();
        let height: f64 = svg
            .split("height=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            height > 800.0,
            "{chart}: the picture grows for its legend: {height}"
        );
        let texts = svg_texts(&svg);
        let y_of = |label: &str| texts.iter().find(|(_, t)| t == label).map(|(y, _)| *y);
        let axis = y_of("message size (bytes, log2 scale)").expect("the x axis title");
        let title = texts[0].0;
        // 144 lines, each named below the x axis's title, the last within the picture.
        let legend: Vec<f64> = types
            .iter()
            .flat_map(|t| ops.iter().map(move |o| (t, o)))
            .flat_map(|(t, o)| ["in-place", "out-of-place"].map(|pl| format!("{t} {o} {pl}")))
            .map(|label| y_of(&label).unwrap_or_else(|| panic!("{chart}: no legend entry {label}")))
            .collect();
        assert_eq!(legend.len(), 144);
        for y in &legend {
            assert!(
                *y > axis && *y < height && *y > title,
                "{chart}: legend at {y}, axis title at {axis}"
            );
        }
    }
}
