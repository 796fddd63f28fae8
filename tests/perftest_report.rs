//! perftest's reporting flags of the verbs binaries: `--out_json`'s document
//! loads with Python's json module with every size in it, also when the run
//! stops midway; the flags' bad combinations are one line and exit 2, before
//! any device is opened.

mod common;

use common::{one_error, python_with, scratch};
use fabricbench::report::perftest::{
    Columns, Connection, PerftestHeader, PostLines, QpAddress, ReadsOrInline,
};
use fabricbench::report::perftest_extra::ExtraColumns;
use fabricbench::report::perftest_json::PerftestJson;
use fabricbench::report::verbs::{Figures, Line, VerbsResult};
use fabricbench::report::{Exporter, RunInfo, Summary};
use std::path::Path;
use std::process::Command;

fn header() -> PerftestHeader {
    let connection = Connection {
        lid: 0,
        gid: Some("::ffff:127.0.0.1".into()),
        qps: vec![QpAddress {
            qpn: 0x11,
            psn: 1,
            rkey: 2,
            vaddr: 3,
        }],
    };
    PerftestHeader {
        title: "RDMA_Write BW Test".into(),
        device: "rxe0".into(),
        qps: 1,
        transport: "IB".into(),
        connection: "RC".into(),
        tx_depth: Some(128),
        rx_depth: None,
        cq_mod: Some(100),
        mtu: 4096,
        link_type: "Ethernet".into(),
        gid: Some("1 (RoCE v2 ::ffff:127.0.0.1 on lo, chosen automatically; -x overrides)".into()),
        reads_or_inline: ReadsOrInline::MaxInline(0),
        exchange: "Ethernet".into(),
        qp_timeout: 18,
        port_rate: None,
        timing: "t".into(),
        pairs: vec![],
        warnings: vec![],
        local: connection.clone(),
        remote: connection,
        columns: Columns::Bandwidth { gbits: false },
        labelled: false,
        validation: false,
        rdma_cm_qps: false,
        numa_node: None,
        path: "SL 0, P_Key index 0".into(),
        post: PostLines::default(),
    }
}

/// One size: `size`-byte messages at 1000 per ms.
fn result(size: u64) -> VerbsResult {
    VerbsResult {
        collective: "ib_write".into(),
        bidirectional: false,
        timestamp: String::new(),
        lines: vec![Line {
            size,
            label: None,
            figures: Figures::Bw {
                iterations: 1000,
                peak: Some(2e6 * size as f64),
                average: 1e6 * size as f64,
                msgs_per_s: 1e6,
                histogram: fabricbench::stats::histogram(&[1e-6]),
            },
            limit: None,
            devices: "rxe0:1,rxe0:1".into(),
            hosts: vec!["a".into(), "a".into()],
            wrong: None,
            direction: None,
        }],
        counters: None,
        cpu_util: None,
        round: 1,
        spread: None,
    }
}

/// The sizes of `all_results`, `results`' size and `complete`, as Python's json reads them.
fn python_reads(path: &Path) -> String {
    let out = Command::new(python_with("json"))
        .args([
            "-c",
            "import json, sys; d = json.load(open(sys.argv[1])); \
             print([r['MsgSize'] for r in d['all_results']], d['results']['MsgSize'], \
             d['fabricbench']['complete'], d['test_info']['test'])",
        ])
        .arg(path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "json.load: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn every_size_is_in_one_document_even_when_the_run_stops_midway() {
    let dir = scratch("perftest-json");
    let path = dir.join("out.json");
    let run = RunInfo {
        program: "ib_write_bw".into(),
        ..RunInfo::default()
    };
    let mut json = PerftestJson::new(&path, &header(), ExtraColumns::default());
    json.start(&run).unwrap();
    for size in [2, 4, 8] {
        json.record(&run, &result(size)).unwrap();
    }
    // A run that failed here: the finished sizes, complete false.
    assert_eq!(python_reads(&path), "[2, 4, 8] 8 False RDMA_Write_BW_Test");
    json.record(&run, &result(16)).unwrap();
    json.finish(&run, &Summary::default()).unwrap();
    assert_eq!(
        python_reads(&path),
        "[2, 4, 8, 16] 16 True RDMA_Write_BW_Test"
    );
    // No temporary file is left next to it.
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn bad_combinations_are_one_line_and_exit_2() {
    let write_bw = env!("CARGO_BIN_EXE_ib_write_bw");
    let write_lat = env!("CARGO_BIN_EXE_ib_write_lat");
    let dir = scratch("perftest-flags");
    std::fs::write(dir.join("taken.json"), "{}\n").unwrap();
    let taken = dir.join("taken.json").display().to_string();
    for (binary, args, expected) in [
        (
            write_bw,
            &["-H"][..],
            "-H/--report-histogram: ib_write_bw is a bandwidth test",
        ),
        (write_bw, &["-U"], "perftest refuses it too"),
        (
            write_bw,
            &["--report-both"],
            "--report-both: reports each direction of a bidirectional run; add -b",
        ),
        (
            write_lat,
            &["--report-both"],
            "--report-both: ib_write_lat is a latency test",
        ),
        (
            write_lat,
            &["--cpu_util"],
            "--cpu_util: perftest measures it over a -D run only; add -D SECONDS",
        ),
        (
            write_bw,
            &["--out_json_file", "/dev/null"],
            "--out_json_file /dev/null: is a character device",
        ),
        (
            write_bw,
            &["--out_json_file", &taken],
            "runs are never overwritten",
        ),
    ] {
        let out = Command::new(binary).args(args).output().unwrap();
        one_error(&out, 2, expected);
    }
}
