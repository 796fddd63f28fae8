//! Every output of every binary (#30): two flags on one file are refused by what
//! the file is, not by how it was typed; nothing is written through a link
//! planted at an output path or at a temporary path the old code predicted; a
//! file written whole is never left partial or empty (a full disk, SIGTERM);
//! and the rows streamed before a failure still load.

mod common;

use common::{
    alone, assert_rows_load, fixture, log, mpirun, mpirun_command, one_error, scratch, sweep_row,
    text, Tmpfs,
};
use std::os::unix::fs::symlink;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

const ALL_REDUCE: &str = env!("CARGO_BIN_EXE_all_reduce_perf");
const SENDRECV: &str = env!("CARGO_BIN_EXE_sendrecv_perf");
const WRITE_BW: &str = env!("CARGO_BIN_EXE_ib_write_bw");
const COPY_BW: &str = env!("CARGO_BIN_EXE_copy_bw");
const DOCTOR: &str = env!("CARGO_BIN_EXE_doctor");
const PLOT: &str = env!("CARGO_BIN_EXE_plot");
const COMPARE: &str = env!("CARGO_BIN_EXE_compare");
const RACK_CHECK: &str = env!("CARGO_BIN_EXE_rack_check");

/// A short sweep: 8 to 64 bytes, 4 sizes of 2 iterations.
const SWEEP: [&str; 8] = ["-b", "8", "-e", "64", "-f", "2", "-n", "2"];

/// `binary` on 2 ranks: `SWEEP`, then `extra`.
fn sweep(binary: &str, extra: &[&str]) -> Output {
    mpirun(2, binary, &[&SWEEP[..], extra].concat())
}

/// How a binary is started: the collectives under mpirun on 2 ranks.
fn launch(binary: &str, args: &[&str]) -> Output {
    match binary {
        ALL_REDUCE | SENDRECV => mpirun(2, binary, args),
        _ => alone(binary, args),
    }
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

#[test]
fn two_outputs_on_one_file_are_refused_before_anything_is_made() {
    let dir = scratch("one-file").canonicalize().unwrap();
    std::fs::create_dir(dir.join("x")).unwrap();
    // Two names of one empty file: each flag alone would take it.
    std::fs::write(dir.join("h.csv"), "").unwrap();
    std::fs::hard_link(dir.join("h.csv"), dir.join("h2.csv")).unwrap();
    let before = listing(&dir);
    let at = |rel: &str| s(&dir.join(rel));
    let healthy = s(&fixture("doctor/healthy"));
    let cases: Vec<(&str, Vec<String>, String)> = vec![
        (
            ALL_REDUCE,
            vec!["--csv".into(), at("x/../r.json"), "-J".into(), at("r.json")],
            format!(
                "--csv {} and -J/--output_file {} both name one file, {}: give each its own path",
                at("x/../r.json"),
                at("r.json"),
                at("r.json")
            ),
        ),
        (
            ALL_REDUCE,
            vec![
                "--csv".into(),
                at("./c.csv"),
                "--counters".into(),
                at("x/../c.csv"),
            ],
            format!("both name one file, {}", at("c.csv")),
        ),
        (
            ALL_REDUCE,
            vec![
                "--csv".into(),
                at("h.csv"),
                "--counters".into(),
                at("h2.csv"),
            ],
            format!(
                "--csv {} and --counters {} both name one file",
                at("h.csv"),
                at("h2.csv")
            ),
        ),
        (
            ALL_REDUCE,
            vec!["--plot".into(), at("x/../p"), "--csv".into(), at("p")],
            format!(
                "--csv {} and --plot {} both name one file",
                at("p"),
                at("x/../p")
            ),
        ),
        (
            SENDRECV,
            vec![
                "--all-pairs".into(),
                "--csv".into(),
                at("m.csv"),
                "--counters".into(),
                at("x/../m.png"),
            ],
            format!(
                "--counters {} and the --all-pairs heatmap {} both name one file",
                at("x/../m.png"),
                at("m.png")
            ),
        ),
        (
            WRITE_BW,
            vec![
                "--csv".into(),
                at("x/../v.csv"),
                "--counters".into(),
                at("v.csv"),
            ],
            format!(
                "--csv {} and --counters {} both name one file",
                at("x/../v.csv"),
                at("v.csv")
            ),
        ),
        (
            WRITE_BW,
            vec![
                "--csv".into(),
                at("v.json"),
                "--out_json_file".into(),
                at("x/./../v.json"),
            ],
            format!(
                "--csv {} and --out_json_file {}",
                at("v.json"),
                at("x/./../v.json")
            ),
        ),
        (
            DOCTOR,
            vec![
                "--sysfs-root".into(),
                healthy,
                "--csv".into(),
                at("x/../f.csv"),
                "--json".into(),
                at("f.csv"),
            ],
            format!(
                "--csv {} and --json {} both name one file",
                at("x/../f.csv"),
                at("f.csv")
            ),
        ),
    ];
    for (binary, args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = launch(binary, &args);
        let line = one_error(&out, 2, &expected);
        assert!(line.ends_with(": give each its own path"), "{line}");
        // Refused before anything was measured or made.
        assert_eq!(listing(&dir), before, "{binary} {args:?}");
        assert_eq!(text(&out).0.matches("# ").count(), 0, "{}", log(&out));
    }
}

/// A file outside the scratch folder that a planted link points at: what it
/// holds and when it was written, to find any write through the link.
struct Victim {
    path: PathBuf,
    modified: SystemTime,
}

impl Victim {
    fn new() -> Victim {
        let path = scratch("victim").join("precious");
        std::fs::write(&path, "precious\n").unwrap();
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        Victim { path, modified }
    }

    /// A link to the victim at `at`.
    fn plant(&self, at: &Path) -> String {
        symlink(&self.path, at).unwrap();
        s(at)
    }

    fn assert_untouched(&self, what: &str) {
        assert_eq!(
            std::fs::read_to_string(&self.path).unwrap(),
            "precious\n",
            "{what} wrote through a link"
        );
        let meta = std::fs::metadata(&self.path).unwrap();
        assert_eq!(meta.modified().unwrap(), self.modified, "{what}");
        assert_eq!(listing(self.path.parent().unwrap()), ["precious"], "{what}");
    }
}

#[test]
fn a_link_at_an_output_file_is_refused_and_nothing_is_written_through_it() {
    let victim = Victim::new();
    let dir = scratch("links-refused");
    let healthy = s(&fixture("doctor/healthy"));
    let refused: Vec<(&str, &str, &str, Vec<&str>)> = vec![
        (ALL_REDUCE, "--csv", "r.csv", vec![]),
        (ALL_REDUCE, "--csv", "a.csv", vec!["--append"]),
        (ALL_REDUCE, "--counters", "c.csv", vec![]),
        (WRITE_BW, "--csv", "v.csv", vec![]),
        (WRITE_BW, "--csv", "va.csv", vec!["--append"]),
        (WRITE_BW, "--counters", "vc.csv", vec![]),
        (WRITE_BW, "--out_json_file", "v.json", vec![]),
        (COPY_BW, "--csv", "b.csv", vec![]),
        (DOCTOR, "--csv", "d.csv", vec!["--sysfs-root", &healthy]),
        (DOCTOR, "--json", "d.json", vec!["--sysfs-root", &healthy]),
    ];
    for (binary, flag, name, extra) in refused {
        let link = victim.plant(&dir.join(name));
        let mut args = vec![flag, link.as_str()];
        args.extend(extra);
        let out = launch(binary, &args);
        one_error(
            &out,
            2,
            &format!(
                "{flag} {link}: is a symbolic link (to {}), and outputs are never written through one",
                victim.path.display()
            ),
        );
        victim.assert_untouched(&format!("{binary} {args:?}"));
    }
    // rack_check's report folder: a link there is a folder that exists.
    let report = dir.join("report");
    symlink(victim.path.parent().unwrap(), &report).unwrap();
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/rack-local.toml");
    let out = alone(RACK_CHECK, &["--spec", &s(&spec), "--out", &s(&report)]);
    one_error(
        &out,
        2,
        &format!(
            "--out {}: exists, and reports are never overwritten; choose a new directory",
            report.display()
        ),
    );
    victim.assert_untouched("rack_check --out");
}

/// Rows of a sweep of `collectives`, 2 placements and `sizes` sizes, for plot.
fn sweep_csv(path: &Path, collectives: &[&str], sizes: u32) {
    let mut csv = fabricbench::report::csv::CsvExport::open(path, false).unwrap();
    for coll in collectives {
        for placement in ["out_of_place", "in_place"] {
            let rows = (0..sizes).map(|i| fabricbench::report::Row {
                collective: coll.to_string(),
                ..sweep_row(placement, 8 << i, 1.0 + i as f64, 10.0 + i as f64)
            });
            csv.write_rows(rows).unwrap();
        }
    }
}

#[test]
fn charts_json_and_heatmaps_take_the_place_of_a_link_never_its_target() {
    let victim = Victim::new();
    let dir = scratch("links-replaced");
    let csv = dir.join("runs.csv");
    sweep_csv(&csv, &["all_reduce"], 4);
    // The charts' names, from a first run.
    let first = dir.join("first");
    let out = alone(PLOT, &[&s(&csv), "-o", &s(&first)]);
    assert!(out.status.success(), "{}", log(&out));
    let charts = listing(&first);
    assert!(charts.len() >= 4, "{charts:?}");
    for (binary, out_flag) in [(PLOT, "-o"), (COMPARE, "--plot")] {
        let folder = dir.join(format!("{}-charts", out_flag.trim_start_matches('-')));
        std::fs::create_dir(&folder).unwrap();
        for name in &charts {
            victim.plant(&folder.join(name));
        }
        let mut args = vec![s(&csv)];
        if binary == COMPARE {
            args.push(s(&csv));
        }
        args.extend([out_flag.to_string(), s(&folder)]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = alone(binary, &args);
        assert!(out.status.success(), "{}", log(&out));
        victim.assert_untouched(binary);
        for name in &charts {
            let meta = std::fs::symlink_metadata(folder.join(name)).unwrap();
            assert!(meta.is_file() && meta.len() > 0, "{binary}: {name}");
        }
        assert_eq!(listing(&folder), charts, "no temporary file left");
    }
    // The all-pairs heatmap beside the CSV: a link there is left alone, said so.
    let matrix = dir.join("m.csv");
    let png = victim.plant(&dir.join("m.png"));
    let out = sweep(SENDRECV, &["--all-pairs", "--csv", &s(&matrix)]);
    assert!(
        text(&out).1.contains(&format!(
            "{png} exists and is never overwritten: no heatmap drawn"
        )),
        "{}",
        log(&out)
    );
    victim.assert_untouched("--all-pairs heatmap");
    assert!(std::fs::metadata(&matrix).unwrap().len() > 0);
    assert_eq!(
        listing(&dir),
        [
            "first",
            "m.csv",
            "m.png",
            "o-charts",
            "plot-charts",
            "runs.csv"
        ],
        "no temporary file left"
    );
}

#[test]
fn json_is_never_written_through_a_link_at_its_name_or_a_predicted_temporary_name() {
    let victim = Victim::new();
    let dir = scratch("links-json");
    // A link at the name is refused, as at every output's name.
    let json = dir.join("r.json");
    let link = victim.plant(&json);
    let path = s(&json);
    let args = ["-J", path.as_str()];
    one_error(
        &sweep(ALL_REDUCE, &args),
        2,
        &format!("-J/--output_file {link}: is a symbolic link"),
    );
    std::fs::remove_file(&json).unwrap();
    // An existing document is kept and the next goes to NAME.0, as nccl-tests
    // probes; links wait at every temporary name the old code used
    // (.NAME.<pid>.tmp) for every pid a rank could have.
    std::fs::write(&json, "{}").unwrap();
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .map_or(32768, |t| t.trim().parse().unwrap_or(32768))
        .min(1 << 16);
    for name in ["r.json", "r.json.0"] {
        for pid in 1..=pid_max {
            symlink(&victim.path, dir.join(format!(".{name}.{pid}.tmp"))).unwrap();
        }
    }
    let planted = listing(&dir);
    let out = sweep(ALL_REDUCE, &args);
    assert!(out.status.success(), "{}", log(&out));
    victim.assert_untouched("-J");
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "{}");
    let written = dir.join("r.json.0");
    assert!(std::fs::symlink_metadata(&written).unwrap().is_file());
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&written).unwrap()).unwrap();
    assert_eq!(doc["results"].as_array().unwrap().len(), 4);
    assert_eq!(doc["fabricbench"]["complete"], true);
    let mut expected = planted;
    expected.push("r.json.0".into());
    expected.sort();
    assert_eq!(
        listing(&dir),
        expected,
        "every link left as it was, no temporary file"
    );
}

/// Whether a chart file is whole: a PNG ends with its IEND chunk, an SVG with
/// its closing tag.
fn whole_chart(path: &Path) -> bool {
    let bytes = std::fs::read(path).unwrap();
    match path.extension().and_then(|e| e.to_str()) {
        Some("png") => bytes.ends_with(&[0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82]),
        Some("svg") => String::from_utf8_lossy(&bytes)
            .trim_end()
            .ends_with("</svg>"),
        _ => panic!("not a chart: {}", path.display()),
    }
}

#[test]
#[ignore = "needs root (mounts a tmpfs): scripts/test.sh runs it as root"]
fn a_full_disk_leaves_no_partial_or_empty_file_and_every_row_loads() {
    // -J on a disk with no room: no 0-byte .json, none at a retry either.
    {
        let disk = Tmpfs::mount("full-json", "size=16k");
        let filler = disk.0.join("filler");
        let mut f = std::fs::File::create(&filler).unwrap();
        while std::io::Write::write_all(&mut f, &[0u8; 512]).is_ok() {}
        while std::io::Write::write_all(&mut f, &[0]).is_ok() {}
        let json = disk.0.join("r.json");
        for _ in 0..2 {
            let out = sweep(ALL_REDUCE, &["-J", &s(&json)]);
            one_error(
                &out,
                1,
                &format!(
                    "-J/--output_file {}: No space left on device",
                    json.display()
                ),
            );
            assert_eq!(listing(&disk.0), ["filler"]);
        }
        // doctor's findings: none written, none left.
        let out = alone(
            DOCTOR,
            &[
                "--sysfs-root",
                &s(&fixture("doctor/healthy")),
                "--json",
                &s(&disk.0.join("d.json")),
            ],
        );
        assert_eq!(out.status.code(), Some(1), "{}", log(&out));
        assert!(
            text(&out).1.contains("No space left on device"),
            "{}",
            log(&out)
        );
        assert_eq!(listing(&disk.0), ["filler"]);
    }
    // --plot: the rows are streamed and kept; the charts, too big for the disk,
    // are written whole or not at all.
    {
        let disk = Tmpfs::mount("full-plot", "size=64k");
        let csv = disk.0.join("r.csv");
        let plots = disk.0.join("plots");
        let out = sweep(ALL_REDUCE, &["--csv", &s(&csv), "--plot", &s(&plots)]);
        let line = one_error(&out, 1, "--plot ");
        assert!(line.contains(": No space left on device"), "{line}");
        assert_rows_load(&csv, 8);
        let run = plots.join(&listing(&plots)[0]);
        for name in listing(&run) {
            assert!(!name.starts_with('.'), "a temporary file left: {name}");
            assert!(whole_chart(&run.join(&name)), "{name} is partial");
        }
    }
}

#[test]
fn sigterm_during_plot_leaves_no_partial_chart() {
    let dir = scratch("plot-sigterm");
    let csv = dir.join("runs.csv");
    sweep_csv(
        &csv,
        &["all_reduce", "all_gather", "broadcast", "reduce"],
        20,
    );
    let mut stopped = 0;
    for (i, delay_ms) in [100u64, 300, 600, 1000, 1500, 2500, 4000, 6000]
        .into_iter()
        .enumerate()
    {
        let out_dir = dir.join(format!("p{i}"));
        let mut child = Command::new(PLOT)
            .args([s(&csv), "-o".into(), s(&out_dir)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let status = child.wait().unwrap();
        stopped += (status.signal() == Some(15)) as usize;
        for name in listing(&out_dir).iter().filter(|n| !n.starts_with('.')) {
            assert!(whole_chart(&out_dir.join(name)), "{name} is partial");
        }
        // What a kill may leave: a hidden temporary file, never a chart's name.
        for name in listing(&out_dir).iter().filter(|n| n.starts_with('.')) {
            assert!(name.ends_with(".tmp"), "{name}");
        }
    }
    assert!(
        stopped > 0,
        "plot always ended before SIGTERM: nothing was tried"
    );
}

#[test]
fn an_endless_json_is_valid_when_the_run_is_stopped() {
    let dir = scratch("json-endless");
    let json = dir.join("r.json");
    let csv = dir.join("r.csv");
    let mut child = mpirun_command()
        .args([
            "-np", "2", ALL_REDUCE, "-b", "8", "-e", "8", "-n", "1", "-w", "0", "-N", "0",
        ])
        .args(["-J", &s(&json), "--csv", &s(&csv)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let results = |p: &Path| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .map_or(0, |d| d["results"].as_array().map_or(0, Vec::len))
    };
    let start = Instant::now();
    while results(&json) < 300 {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no 300 sizes in 300 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&json).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not a valid document after SIGTERM: {e}: ...{}",
            &text[text.len().saturating_sub(200)..]
        )
    });
    let sizes = doc["results"].as_array().unwrap();
    assert!(sizes.len() >= 300);
    assert!(sizes.iter().all(|r| r["size"] == 8));
    assert_eq!(doc["fabricbench"]["complete"], false);
    // Every finished CSV row loads too: the CSV is written before the JSON.
    let rows = common::read_rows(&csv).len();
    assert_rows_load(&csv, rows);
    assert!(
        rows >= 2 * sizes.len(),
        "{rows} rows, {} sizes",
        sizes.len()
    );
}

/// A reader that goes away (`compare ... | head -1`) ends a tool that runs alone
/// quietly, as it ends C tools: by SIGPIPE, with no panic on stderr. Once,
/// `println!` panicked on the EPIPE and compare exited 101.
#[test]
fn a_reader_that_goes_away_ends_a_tool_quietly() {
    let dir = scratch("closed-pipe");
    let csv = dir.join("run.csv");
    let mut w = csv::Writer::from_path(&csv).unwrap();
    for size in [1u64 << 10, 1 << 20] {
        w.serialize(common::sweep_row("out-of-place", size, 10.0, 5.0))
            .unwrap();
    }
    w.flush().unwrap();
    // A pipe whose read end is closed before the tool starts: its first write fails.
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let out = Command::new(COMPARE)
        .args([&csv, &csv])
        .stdout(Stdio::from(write))
        .output()
        .unwrap();
    let stderr = text(&out).1;
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{stderr}");
}

/// What a CI rehearsal's mpirun printed after a rank's one error line (cut).
const SEEN: &str = "all_reduce_perf: rank 0 (vm): error: --plot x: No space left on device (os error 28)
[vm:30765] [[5331,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file ../../../orte/util/show_help.c at line 513
[vm:30765] *** Process received signal ***
[vm:30765] Signal: Segmentation fault (11)
[vm:30765] [ 1] /lib/x86_64-linux-gnu/libpmix.so.2(PMIx_server_finalize+0xb08)[0x7fd07527d118]
[vm:30765] [ 6] mpirun(+0x13ea)[0x55bdd297a3ea]
[vm:30765] *** End of error message ***
";

/// `one_error` leaves out mpirun's own crash report, never a rank's.
#[test]
fn mpirun_s_own_crash_is_left_out_and_a_rank_s_is_kept() {
    assert_eq!(
        common::without_launcher_crash(SEEN),
        "all_reduce_perf: rank 0 (vm): error: --plot x: No space left on device (os error 28)\n"
    );
    let rank =
        "[vm:4242] Signal: Segmentation fault (11)\n[vm:4242] [ 3] all_reduce_perf(+0x13ea)[0x1]\n";
    assert_eq!(common::without_launcher_crash(rank), rank);
}
