//! The CSV row every family writes, and its named constructors: each family's
//! result becomes rows here (`Row::collective` below, `Row::copy` in `copy`), so
//! a row is never assembled by hand elsewhere.

use super::counters::{Column, SizeCounters};
use super::{Measurement, RunInfo, SizeResult};
use crate::limits::{self, Limit};
use serde::{Deserialize, Serialize};

/// Version of the CSV columns below; bumped whenever a column changes meaning or
/// goes away (new columns at the end keep the version).
pub const SCHEMA_VERSION: u32 = 1;

/// A family's result as CSV rows: implemented in `report` for each result type,
/// so every `Row` is built here and the CSV exporter serves every family.
pub trait ToRows {
    fn rows(&self, run: &RunInfo) -> Vec<Row>;
}

/// A CSV column as the reference documents it: its name, its Rust type and
/// its meaning (the field's doc comment).
#[derive(Clone, Copy, Debug)]
pub struct ColumnDoc {
    pub name: &'static str,
    pub rust_type: &'static str,
    pub doc: &'static str,
}

impl ColumnDoc {
    /// The doc comment as one line.
    pub fn meaning(&self) -> String {
        let lines: Vec<&str> = self.doc.lines().map(str::trim).collect();
        lines.join(" ").trim().to_string()
    }

    /// The type as pandas sees it: integer, float or text, and whether a field
    /// may be empty (a missing value).
    pub fn kind(&self) -> String {
        let compact: String = self.rust_type.split_whitespace().collect();
        let (base, optional) = match compact.strip_prefix("Option<") {
            Some(inner) => (inner.trim_end_matches('>'), true),
            None => (compact.as_str(), false),
        };
        let kind = match base {
            "u32" | "u64" | "usize" | "i64" => "integer",
            "f64" => "float",
            "String" => "text",
            other => panic!("column {}: no CSV kind for Rust type {other}", self.name),
        };
        match optional {
            true => format!("{kind}, may be empty"),
            false => kind.to_string(),
        }
    }
}

/// Declares `Row` and `Row::COLUMNS` from one list: each field is a CSV column,
/// in order, and its doc comment is the column's meaning in
/// docs/reference/csv-columns.md, so no column goes without one.
macro_rules! csv_row {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[doc = $doc:literal])+ pub $field:ident: $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[doc = $doc])+ pub $field: $ty, )*
        }

        impl $name {
            /// The columns, in the order the CSV has them.
            pub const COLUMNS: &'static [ColumnDoc] = &[$(ColumnDoc {
                name: stringify!($field),
                rust_type: stringify!($ty),
                doc: concat!($($doc, "\n"),+),
            }),*];
        }
    };
}

csv_row! {
    /// One CSV row: one measurement with its run facts; pandas reads the file
    /// with a plain `pd.read_csv(path)`.
    #[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
    pub struct Row {
        /// Version of the columns (`SCHEMA_VERSION`): bumped when a column changes
        /// meaning or goes away; new columns are only ever added at the end.
        pub schema_version: u32,
        /// One id per run: its UTC start time and rank 0's process id
        /// (`20250102T030405Z-01234`).
        pub run_id: String,
        /// UTC time (RFC 3339) at which the row's measurement finished.
        pub timestamp: String,
        /// The fabricbench version that wrote the row.
        pub tool_version: String,
        /// `mpi` or `nccl` (collectives), `verbs` (the ib_* binaries), `cuda` (copy_bw).
        pub backend: String,
        /// The transport actually used, as far as it can be known (MPI's or NCCL's
        /// own report; the queue pair type and link layer for verbs).
        pub transport: String,
        /// The MPI, NCCL, libibverbs or CUDA driver version.
        pub library_version: String,
        /// Where the buffers live: `host`, or the GPUs' (or RDMA devices') names.
        pub device: String,
        /// The host name of each node, `;`-separated, in rank order: one per
        /// machine, so a name two machines answer as appears twice.
        pub hosts: String,
        /// Ranks in the job (with `-g`, processes x GPUs each).
        pub nranks: usize,
        /// Nodes in the job, counted by machine identity (machine-id, boot id,
        /// network namespace), not by host name.
        pub nnodes: usize,
        /// What was measured: the collective (`all_reduce`, `all_gather`, `broadcast`,
        /// `reduce`, `reduce_scatter`, `alltoall`, `alltoallv`, `gather`, `scatter`,
        /// `sendrecv`, `hypercube`), the verb (`ib_write`, `ib_read`, `ib_send`,
        /// `ib_atomic`) or the copy (`copy_h2d`, `copy_d2h`, `copy_d2d`, `copy_p2p`).
        pub collective: String,
        /// The `-d` element type; `none` for verbs, `uint8` for copies.
        pub datatype: String,
        /// The `-o` reduction; `none` where nothing is reduced.
        pub redop: String,
        /// The root rank; -1 where there is none.
        pub root: i64,
        /// Collectives: `out-of-place` or `in-place`; verbs: `bw`, `bw_bidir` or
        /// `lat`; copies: the path (`gpu0`, `gpu0->gpu1`).
        pub placement: String,
        /// nccl-tests' size: max(send, receive) bytes per rank; verbs and copies:
        /// the message or copy size.
        pub size_bytes: u64,
        /// Elements passed to the call; verbs: messages (bw) or round trips (lat)
        /// measured; copies: bytes.
        pub count: u64,
        /// Timed iterations (`-n`).
        pub iters: usize,
        /// Untimed warm-up iterations (`-w`).
        pub warmup_iters: usize,
        /// How ranks' times are combined (`-a`): `rank0`, `avg`, `min` or `max`;
        /// `none` for verbs.
        pub avg_mode: String,
        /// The pass of `-N` (run cycles), from 0.
        pub cycle: u64,
        /// Time per call in microseconds, combined across ranks by `-a`; verbs
        /// latency: t_avg; verbs bandwidth: 1 / message rate.
        pub time_us: f64,
        /// Algorithm bandwidth in GB/s (1e9 bytes per second): bytes over time.
        pub algbw_gbs: f64,
        /// Bus bandwidth in GB/s: algbw x busbw_factor, comparable with the link's speed.
        pub busbw_gbs: f64,
        /// busbw / algbw for this collective and rank count (1 for verbs; 2 for
        /// d2d copies, which read and write each byte).
        pub busbw_factor: f64,
        /// Fastest iteration, us (each iteration the max over ranks); NaN with
        /// `--percentiles 0` (the loop timed whole).
        pub min_us: f64,
        /// Median iteration, us (HdrHistogram); NaN with `--percentiles 0`.
        pub p50_us: f64,
        /// 99th percentile iteration, us; NaN with `--percentiles 0`.
        pub p99_us: f64,
        /// 99.9th percentile iteration, us; NaN with `--percentiles 0`.
        pub p999_us: f64,
        /// Slowest iteration, us; NaN with `--percentiles 0`.
        pub max_us: f64,
        /// Wrong elements over all ranks (verbs: wrong messages; copies: wrong
        /// bytes); empty when nothing was checked (`-c 0`).
        pub wrong: Option<u64>,
        /// The rank with the largest mean per-iteration time.
        pub slowest_rank: usize,
        /// The lowest limit of the run (the one busbw cannot pass); empty: no limit.
        pub limit_name: Option<String>,
        /// That limit per direction, GB/s.
        pub limit_gbs: Option<f64>,
        /// busbw / limit_gbs in percent (100 = the link's data rate).
        pub pct_of_limit: Option<f64>,
        /// `;`-separated `K=V` of the variables set to shape the result (`NCCL_*`,
        /// `UCX_*`, `FI_*`, Open MPI's selection parameters); never a secret.
        pub env: String,
        /// Collectives (both backends): CPU time to issue one call, us, combined
        /// by `-a`; empty for verbs and copies.
        pub cpu_us: Option<f64>,
        /// How the timed calls were issued: `stream` (`-z 0`), `blocking` (`-z 1`),
        /// `synced` (`-z 2`), `barrier-outside` (`-z 3`) or `graph xN` (`-G N`).
        pub launch: Option<String>,
        /// Verbs bandwidth rows: perftest's BW peak, GB/s.
        pub peak_gbs: Option<f64>,
        /// Verbs bandwidth rows: perftest's MsgRate, million messages per second.
        pub msg_rate_mpps: Option<f64>,
        /// Verbs latency rows: perftest's t_stdev, us.
        pub stdev_us: Option<f64>,
        /// Verbs rows: the pair ("0", "1", ...) or "sum"/"all" over every pair.
        pub pair: Option<String>,
        /// -c: the ranks whose result held wrong elements, "rank:count;..."; empty
        /// when none did or nothing was checked.
        pub wrong_ranks: Option<String>,
        /// NCCL_TESTS_SPLIT(_MASK): the groups that ran side by side,
        /// "group:rank,rank;..."; empty for one group.
        pub groups: Option<String>,
        /// nccl backend: NCCL's algorithm (RING, TREE, NVLS, ...) for the timed
        /// calls, from its TUNING log; empty on mpi.
        pub nccl_algo: Option<String>,
        /// nccl backend: NCCL's protocol (LL, LL128, SIMPLE) for the timed calls;
        /// empty on mpi.
        pub nccl_proto: Option<String>,
        // The fabric counters over the row's size (both placements of a size
        // share them), summed over every node; empty where none were read.
        /// Fabric counters: bytes sent + received on every node's RDMA ports over
        /// the size; empty where no port counts bytes (Soft-RoCE) or none were read.
        pub rdma_bytes: Option<u64>,
        /// Fabric counters: packets sent + received on every node's RDMA ports.
        pub rdma_packets: Option<u64>,
        /// Fabric counters: link, symbol and receive errors, discards, drops and
        /// fatal QP errors over the size, summed over every node.
        pub counter_errors: Option<u64>,
        /// Fabric counters: retransmissions and their causes (NAKs, timeouts,
        /// duplicates, out of sequence) over the size.
        pub counter_retransmits: Option<u64>,
        /// Fabric counters: ECN marks, congestion notifications (CNP) and time
        /// waiting for credits over the size.
        pub counter_congestion: Option<u64>,
        /// Fabric counters: link-level (802.3x) and per-priority (PFC) pause frames
        /// over the size.
        pub counter_pauses: Option<u64>,
        /// Verbs --report-both: `client->server`, `server->client` or `both`; empty without it.
        pub direction: Option<String>,
        /// Verbs --cpu_util: perftest's CPU_Util[%] of the printing side's host over the size.
        pub cpu_util_pct: Option<f64>,
        /// The round (from 1) of `--rounds` that measured the row: a size has one
        /// row per round (with `auto`, rounds after the third measure only the
        /// sizes not yet settled), round 1 of every size first; 1 without `--rounds`.
        pub round: Option<u32>,
        /// Collectives: the busbw the performance model expects at this size, GB/s
        /// (docs/model.md); empty where there is no model.
        pub expected_busbw_gbs: Option<f64>,
        /// busbw / expected_busbw_gbs in percent; empty where there is no model.
        pub pct_of_expected: Option<f64>,
    }
}

impl ToRows for SizeResult {
    fn rows(&self, run: &RunInfo) -> Vec<Row> {
        self.measurements
            .iter()
            .map(|m| Row::collective(run, self, m))
            .collect()
    }
}

impl Row {
    /// The columns that come from the run, the same in each of its rows; a
    /// family's constructor fills in the rest.
    pub fn of_run(run: &RunInfo) -> Row {
        Row {
            schema_version: SCHEMA_VERSION,
            run_id: run.run_id.clone(),
            tool_version: run.tool_version.clone(),
            backend: run.backend_name().to_string(),
            transport: run.transport.clone(),
            library_version: run.library_version.clone(),
            device: run.device.to_string(),
            hosts: run.hosts.join(";"),
            nranks: run.nranks,
            nnodes: run.hosts.len(),
            iters: run.iters,
            warmup_iters: run.warmup_iters,
            avg_mode: run.average_name().to_string(),
            env: run.env.join(";"),
            launch: Some(run.launch_name()),
            groups: (!run.groups.is_empty()).then(|| groups_column(&run.groups)),
            round: Some(1),
            ..Row::default()
        }
    }

    /// One placement of one size of a collective, against the run's binding limit.
    pub fn collective(run: &RunInfo, result: &SizeResult, m: &Measurement) -> Row {
        let mut row = Row {
            timestamp: m.timestamp.clone(),
            collective: result.collective.clone(),
            datatype: result.datatype.clone(),
            redop: result.redop.clone(),
            root: result.root,
            placement: m.placement.name().to_string(),
            size_bytes: result.size_bytes,
            count: result.count,
            cycle: result.cycle,
            time_us: m.time_us,
            algbw_gbs: m.algbw_gbs,
            busbw_gbs: m.busbw_gbs,
            busbw_factor: result.busbw_factor,
            min_us: m.latency.min_us,
            p50_us: m.latency.p50_us,
            p99_us: m.latency.p99_us,
            p999_us: m.latency.p999_us,
            max_us: m.latency.max_us,
            wrong: m.wrong,
            slowest_rank: m.slowest_rank,
            cpu_us: m.cpu_us,
            wrong_ranks: (!m.wrong_ranks.is_empty()).then(|| {
                let ranks: Vec<String> = m
                    .wrong_ranks
                    .iter()
                    .map(|(r, n)| format!("{r}:{n}"))
                    .collect();
                ranks.join(";")
            }),
            nccl_algo: result.nccl_algo.clone(),
            nccl_proto: result.nccl_proto.clone(),
            round: Some(result.round),
            expected_busbw_gbs: result.expected.as_ref().map(|e| e.busbw_gbs),
            pct_of_expected: result
                .expected
                .as_ref()
                .and_then(|e| e.percent(m.busbw_gbs)),
            ..Row::of_run(run)
        };
        row.set_limit(limits::binding(&run.limits));
        row.set_counters(result.counters.as_ref());
        row
    }

    /// Whether the row's loop was timed whole (`--percentiles 0`): every per-iteration
    /// figure NaN, none measured.
    pub fn timed_whole(&self) -> bool {
        [
            self.min_us,
            self.p50_us,
            self.p99_us,
            self.p999_us,
            self.max_us,
        ]
        .iter()
        .all(|v| v.is_nan())
    }

    /// Fills the counter columns from a size's deltas (all empty without them).
    pub fn set_counters(&mut self, counters: Option<&SizeCounters>) {
        let Some(c) = counters else { return };
        [
            self.rdma_bytes,
            self.rdma_packets,
            self.counter_errors,
            self.counter_retransmits,
            self.counter_congestion,
            self.counter_pauses,
        ] = Column::ALL.map(|column| column.of(c));
    }

    /// Fills limit_name, limit_gbs and pct_of_limit: busbw against `limit`, or
    /// all three empty without one.
    pub fn set_limit(&mut self, limit: Option<&Limit>) {
        self.limit_name = limit.map(|l| l.name.clone());
        self.limit_gbs = limit.map(|l| l.gbs);
        self.pct_of_limit = limit.map(|l| limits::percent_of(self.busbw_gbs, l));
    }
}

/// The `groups` column: "0:0,2;1:1,3".
fn groups_column(groups: &[(usize, Vec<usize>)]) -> String {
    let each: Vec<String> = groups
        .iter()
        .map(|(g, ranks)| {
            let ranks: Vec<String> = ranks.iter().map(usize::to_string).collect();
            format!("{g}:{}", ranks.join(","))
        })
        .collect();
    each.join(";")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::facts::{Average, DeviceName, Devices, Launch, RunBackend};
    use crate::report::Placement;
    use crate::stats::{histogram, IterStats};

    fn run() -> RunInfo {
        RunInfo {
            program: "all_reduce_perf".into(),
            run_id: "id".into(),
            tool_version: "9.9".into(),
            backend: Some(RunBackend::Mpi),
            transport: "shared memory".into(),
            library_version: "Open MPI 4.1".into(),
            device: Devices::Alike(DeviceName::Host),
            hosts: vec!["a".into(), "b".into()],
            nranks: 4,
            env: vec!["NCCL_A=1".into(), "UCX_B=2".into()],
            iters: 20,
            warmup_iters: 5,
            average: Some(Average::Mean),
            launch: Some(Launch::Stream),
            groups: vec![(0, vec![0, 2]), (1, vec![1, 3])],
            limits: vec![
                Limit {
                    name: "fast".into(),
                    gbs: 100.0,
                },
                Limit {
                    name: "slow".into(),
                    gbs: 10.0,
                },
            ],
            ..RunInfo::default()
        }
    }

    #[test]
    fn a_collective_row_field_by_field() {
        let seconds = [1e-6, 2e-6, 4e-6];
        let h = histogram(&seconds);
        let latency = IterStats::from_seconds(&seconds, &h);
        let m = Measurement {
            placement: Placement::InPlace,
            time_us: 2.5,
            algbw_gbs: 4.0,
            busbw_gbs: 5.0,
            wrong: Some(0),
            latency: latency.clone(),
            histogram: h,
            slowest_rank: 3,
            timestamp: "2025-01-02T03:04:05.000Z".into(),
            cpu_us: Some(1.5),
            wrong_ranks: vec![(1, 2), (3, 7)],
            per_iter: None,
        };
        let result = SizeResult {
            collective: "all_reduce".into(),
            datatype: "float".into(),
            redop: "sum".into(),
            root: -1,
            size_bytes: 1024,
            count: 256,
            busbw_factor: 1.5,
            cycle: 2,
            round: 1,
            measurements: vec![m.clone()],
            nccl_algo: Some("RING".into()),
            nccl_proto: Some("LL128".into()),
            counters: None,
            expected: None,
        };
        let row = Row::collective(&run(), &result, &m);
        let expected = Row {
            schema_version: SCHEMA_VERSION,
            run_id: "id".into(),
            timestamp: "2025-01-02T03:04:05.000Z".into(),
            tool_version: "9.9".into(),
            backend: "mpi".into(),
            transport: "shared memory".into(),
            library_version: "Open MPI 4.1".into(),
            device: "host".into(),
            hosts: "a;b".into(),
            nranks: 4,
            nnodes: 2,
            collective: "all_reduce".into(),
            datatype: "float".into(),
            redop: "sum".into(),
            root: -1,
            placement: "in-place".into(),
            size_bytes: 1024,
            count: 256,
            iters: 20,
            warmup_iters: 5,
            avg_mode: "avg".into(),
            cycle: 2,
            time_us: 2.5,
            algbw_gbs: 4.0,
            busbw_gbs: 5.0,
            busbw_factor: 1.5,
            min_us: latency.min_us,
            p50_us: latency.p50_us,
            p99_us: latency.p99_us,
            p999_us: latency.p999_us,
            max_us: latency.max_us,
            wrong: Some(0),
            slowest_rank: 3,
            // The lowest limit binds.
            limit_name: Some("slow".into()),
            limit_gbs: Some(10.0),
            pct_of_limit: Some(50.0),
            env: "NCCL_A=1;UCX_B=2".into(),
            cpu_us: Some(1.5),
            launch: Some("stream".into()),
            wrong_ranks: Some("1:2;3:7".into()),
            groups: Some("0:0,2;1:1,3".into()),
            nccl_algo: Some("RING".into()),
            nccl_proto: Some("LL128".into()),
            round: Some(1),
            // The verbs columns stay empty.
            ..Row::default()
        };
        assert_eq!(row, expected);
        assert_eq!((row.min_us, row.max_us), (1.0, 4.0));
        assert_eq!(result.rows(&run()), vec![expected]);
    }

    #[test]
    fn the_documented_columns_are_the_header_in_order() {
        let names: Vec<&str> = Row::COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(names, crate::report::csv::header());
        for column in Row::COLUMNS {
            assert!(column.meaning().len() > 10, "{}", column.name);
            assert!(!column.meaning().contains('\n'));
        }
        let kind = |name: &str| Row::COLUMNS.iter().find(|c| c.name == name).unwrap().kind();
        assert_eq!(kind("root"), "integer");
        assert_eq!(kind("cpu_us"), "float, may be empty");
        assert_eq!(kind("pair"), "text, may be empty");
    }

    #[test]
    fn no_limit_leaves_the_limit_columns_empty() {
        let mut row = Row {
            busbw_gbs: 5.0,
            ..Row::of_run(&RunInfo::default())
        };
        row.set_limit(None);
        assert_eq!(
            (row.limit_name, row.limit_gbs, row.pct_of_limit),
            (None, None, None)
        );
        assert_eq!(Row::of_run(&run()).launch.as_deref(), Some("stream"));
    }
}
