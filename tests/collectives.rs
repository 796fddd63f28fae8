//! Every collective binary under mpirun on 2, 3 and 4 ranks: correct data,
//! nccl-tests' sizes and busbw factors, one table line per size and a CSV row per
//! placement.

mod common;

use common::{mpirun, read_rows, scratch, table_rows, text};
use fabricbench::collective::{self, Collective};
use fabricbench::datatype::DataType;
use fabricbench::sizes::{sweep, Step};

fn binary(c: &dyn Collective) -> String {
    let path = match c.id().as_str() {
        "all_reduce" => env!("CARGO_BIN_EXE_all_reduce_perf"),
        "all_gather" => env!("CARGO_BIN_EXE_all_gather_perf"),
        "broadcast" => env!("CARGO_BIN_EXE_broadcast_perf"),
        "reduce" => env!("CARGO_BIN_EXE_reduce_perf"),
        "reduce_scatter" => env!("CARGO_BIN_EXE_reduce_scatter_perf"),
        "alltoall" => env!("CARGO_BIN_EXE_alltoall_perf"),
        "gather" => env!("CARGO_BIN_EXE_gather_perf"),
        "scatter" => env!("CARGO_BIN_EXE_scatter_perf"),
        "sendrecv" => env!("CARGO_BIN_EXE_sendrecv_perf"),
        other => panic!("no binary for {other}"),
    };
    path.to_string()
}

/// The busbw factor nccl-tests uses, written out independently of the library.
fn nccl_tests_factor(id: &str, n: f64) -> f64 {
    match id {
        "all_reduce" => 2.0 * (n - 1.0) / n,
        "reduce_scatter" | "all_gather" | "alltoall" | "gather" | "scatter" => (n - 1.0) / n,
        "broadcast" | "reduce" | "sendrecv" => 1.0,
        other => panic!("unknown collective {other}"),
    }
}

struct Case {
    np: usize,
    datatype: &'static str,
    op: &'static str,
}

const CASES: [Case; 3] = [
    Case {
        np: 2,
        datatype: "all",
        op: "sum",
    },
    Case {
        np: 3,
        datatype: "bfloat16",
        op: "all",
    },
    Case {
        np: 4,
        datatype: "int64",
        op: "all",
    },
];

fn run_case(c: &dyn Collective, case: &Case) {
    let dir = scratch(&format!("{}-{}", c.id().as_str(), case.np));
    let csv = dir.join("rows.csv");
    let root = (case.np - 1).to_string();
    let args = [
        "-b",
        "8",
        "-e",
        "64K",
        "-f",
        "32",
        "-n",
        "2",
        "-w",
        "1",
        "-c",
        "1",
        "-d",
        case.datatype,
        "-o",
        case.op,
        "-r",
        &root,
        "--csv",
        csv.to_str().unwrap(),
    ];
    let out = mpirun(case.np, &binary(c), &args);
    let (stdout, stderr) = text(&out);
    let what = format!(
        "{} on {} ranks, -d {} -o {}",
        c.name(),
        case.np,
        case.datatype,
        case.op
    );
    assert!(
        out.status.success(),
        "{what}: exit {:?}\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("# Out of bounds values : 0 OK"),
        "{what}:\n{stdout}"
    );
    assert!(
        stdout.lines().next().unwrap().starts_with("# fabricbench"),
        "{what}: first line names the tool"
    );

    let datatypes: Vec<DataType> = if case.datatype == "all" {
        DataType::ALL.to_vec()
    } else {
        vec![case.datatype.parse().unwrap()]
    };
    let ops = if !c.reduces() {
        1
    } else if case.op == "all" {
        fabricbench::datatype::RedOp::ALL.len()
    } else {
        1
    };
    let sizes = sweep(8, 64 << 10, Step::Factor(32));
    let lines = table_rows(&stdout);
    assert_eq!(
        lines.len(),
        datatypes.len() * ops * sizes.len(),
        "{what}: one table line per size\n{stdout}"
    );
    for line in &lines {
        assert_eq!(
            line.len(),
            21,
            "{what}: 13 nccl-tests columns + 8 percentile columns: {line:?}"
        );
        assert_eq!(line[8], "0", "{what}: out-of-place #wrong");
        assert_eq!(line[12], "0", "{what}: in-place #wrong");
        let expect_root = if c.rooted() { root.as_str() } else { "-1" };
        assert_eq!(line[4], expect_root, "{what}: root column");
        if !c.reduces() {
            assert_eq!(line[3], "none", "{what}: redop column");
        }
    }

    let rows = read_rows(&csv);
    assert_eq!(
        rows.len(),
        2 * lines.len(),
        "{what}: a CSV row per size and placement"
    );
    let factor = nccl_tests_factor(c.id().as_str(), case.np as f64);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.collective, c.id().as_str());
        assert_eq!(row.nranks, case.np);
        assert_eq!(row.nnodes, 1);
        assert_eq!(row.backend, "mpi");
        assert_eq!(row.wrong, Some(0), "{what}: row {i}");
        assert_eq!(
            row.placement,
            if i % 2 == 0 {
                "out-of-place"
            } else {
                "in-place"
            }
        );
        assert_eq!(row.busbw_factor, factor, "{what}");
        let rel = (row.busbw_gbs - row.algbw_gbs * factor).abs() / row.busbw_gbs.max(1e-30);
        assert!(
            rel < 1e-9,
            "{what}: busbw {} != algbw {} x {factor}",
            row.busbw_gbs,
            row.algbw_gbs
        );
        assert!(
            row.time_us > 0.0
                && row.p50_us > 0.0
                && row.p50_us <= row.max_us
                && row.min_us <= row.p50_us
        );
        // size = max(send, recv) bytes and count = the call's count, as nccl-tests prints them.
        let dtype: DataType = row.datatype.parse().unwrap();
        let requested = sizes[(i / 2) % sizes.len()];
        let counts = c.counts(
            (requested / dtype.size() as u64) as usize,
            dtype.size(),
            case.np,
        );
        assert_eq!(
            row.size_bytes,
            counts.size_bytes(dtype.size()),
            "{what}: size of row {i}"
        );
        assert_eq!(row.count, counts.param as u64, "{what}: count of row {i}");
        let algbw_bytes = counts.size_bytes(dtype.size()) as f64;
        let expect_algbw = algbw_bytes / 1e9 / (row.time_us * 1e-6);
        assert!(
            (row.algbw_gbs - expect_algbw).abs() <= 1e-9 * expect_algbw.max(1.0),
            "{what}: algbw = bytes / time"
        );
    }
}

macro_rules! collective_tests {
    ($($test:ident => $coll:expr),* $(,)?) => {$(
        #[test]
        fn $test() {
            for case in &CASES {
                run_case(&$coll, case);
            }
        }
    )*};
}

collective_tests! {
    all_reduce_on_2_3_4_ranks => collective::AllReduce,
    all_gather_on_2_3_4_ranks => collective::AllGather,
    broadcast_on_2_3_4_ranks => collective::Broadcast,
    reduce_on_2_3_4_ranks => collective::Reduce,
    reduce_scatter_on_2_3_4_ranks => collective::ReduceScatter,
    alltoall_on_2_3_4_ranks => collective::AlltoAll,
    gather_on_2_3_4_ranks => collective::Gather,
    scatter_on_2_3_4_ranks => collective::Scatter,
    sendrecv_on_2_3_4_ranks => collective::SendRecv,
}

#[test]
fn every_root_in_turn() {
    let out = mpirun(
        3,
        &binary(&collective::Broadcast),
        &["-b", "1K", "-e", "1K", "-n", "2", "-r", "-1"],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let roots: Vec<String> = table_rows(&stdout).iter().map(|l| l[4].clone()).collect();
    assert_eq!(roots, ["0", "1", "2"]);
}

#[test]
fn plain_start_is_one_rank() {
    let out = std::process::Command::new(binary(&collective::AllReduce))
        .args(["-b", "8", "-e", "1K", "-f", "4", "-n", "2"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(table_rows(&stdout).len(), 4);
    assert!(stdout.contains("#  Rank  0 Group  0"));
    assert!(!stdout.contains("#  Rank  1"));
}

#[test]
fn run_cycles_repeat_the_sweep() {
    let dir = scratch("cycles");
    let csv = dir.join("c.csv");
    let out = mpirun(
        2,
        &binary(&collective::AllReduce),
        &[
            "-b",
            "8",
            "-e",
            "64",
            "-f",
            "8",
            "-n",
            "2",
            "-N",
            "3",
            "--csv",
            csv.to_str().unwrap(),
        ],
    );
    assert!(out.status.success());
    let rows = read_rows(&csv);
    assert_eq!(rows.len(), 3 * 2 * 2);
    assert_eq!(rows.iter().map(|r| r.cycle).max(), Some(2));
}

#[test]
fn corrupted_element_is_counted() {
    // The fault-injection variable is read only by the validation path.
    let out = common::mpirun_env(
        3,
        &binary(&collective::AllReduce),
        &["-b", "1K", "-e", "1K", "-n", "2", "-c", "1"],
        &[("FABRICBENCH_FAULT_CORRUPT", "1:5")],
    );
    let (stdout, _) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "wrong data fails the run:\n{stdout}"
    );
    let line = &table_rows(&stdout)[0];
    assert_eq!(
        (line[8].as_str(), line[12].as_str()),
        ("1", "1"),
        "{line:?}"
    );
    assert!(
        stdout.contains("# Out of bounds values : 2 FAILED"),
        "{stdout}"
    );
}
