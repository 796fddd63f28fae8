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

/// One CSV row: one measurement with its run facts. The README documents each
/// column; pandas reads the file with a plain `pd.read_csv(path)`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Row {
    pub schema_version: u32,
    pub run_id: String,
    pub timestamp: String,
    pub tool_version: String,
    pub backend: String,
    pub transport: String,
    pub library_version: String,
    pub device: String,
    pub hosts: String,
    pub nranks: usize,
    pub nnodes: usize,
    pub collective: String,
    pub datatype: String,
    pub redop: String,
    pub root: i64,
    pub placement: String,
    pub size_bytes: u64,
    pub count: u64,
    pub iters: usize,
    pub warmup_iters: usize,
    pub avg_mode: String,
    pub cycle: u64,
    pub time_us: f64,
    pub algbw_gbs: f64,
    pub busbw_gbs: f64,
    pub busbw_factor: f64,
    pub min_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub wrong: Option<u64>,
    pub slowest_rank: usize,
    /// The lowest limit of the run (the one busbw cannot pass); empty: no limit.
    pub limit_name: Option<String>,
    /// That limit per direction, GB/s.
    pub limit_gbs: Option<f64>,
    /// busbw / limit_gbs in percent (100 = the link's data rate).
    pub pct_of_limit: Option<f64>,
    pub env: String,
    pub cpu_us: Option<f64>,
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
    /// nccl backend: NCCL's algorithm (RING, TREE, NVLS, ...) and protocol (LL,
    /// LL128, SIMPLE) for the timed calls, from its TUNING log; empty on mpi.
    pub nccl_algo: Option<String>,
    pub nccl_proto: Option<String>,
    // The fabric counters over the row's size (both placements of a size
    // share them), summed over every node; empty where none were read.
    /// Bytes sent + received on RDMA ports; empty where no port counts bytes (rxe).
    pub rdma_bytes: Option<u64>,
    /// Packets sent + received on RDMA ports.
    pub rdma_packets: Option<u64>,
    pub counter_errors: Option<u64>,
    pub counter_retransmits: Option<u64>,
    pub counter_congestion: Option<u64>,
    pub counter_pauses: Option<u64>,
    /// Verbs --report-both: `client->server`, `server->client` or `both`; empty without it.
    pub direction: Option<String>,
    /// Verbs --cpu_util: perftest's CPU_Util[%] of the printing side's host over the size.
    pub cpu_util_pct: Option<f64>,
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
            backend: run.backend.clone(),
            transport: run.transport.clone(),
            library_version: run.library_version.clone(),
            device: run.device.clone(),
            hosts: run.hosts.join(";"),
            nranks: run.nranks,
            nnodes: run.hosts.len(),
            iters: run.iters,
            warmup_iters: run.warmup_iters,
            avg_mode: run.average.clone(),
            env: run.env.join(";"),
            launch: Some(run.launch.clone()),
            groups: (!run.groups.is_empty()).then(|| groups_column(&run.groups)),
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
    use crate::report::Placement;
    use crate::stats::{histogram, IterStats};

    fn run() -> RunInfo {
        RunInfo {
            program: "all_reduce_perf".into(),
            run_id: "id".into(),
            tool_version: "9.9".into(),
            backend: "mpi".into(),
            transport: "shared memory".into(),
            library_version: "Open MPI 4.1".into(),
            device: "host".into(),
            hosts: vec!["a".into(), "b".into()],
            nranks: 4,
            env: vec!["NCCL_A=1".into(), "UCX_B=2".into()],
            iters: 20,
            warmup_iters: 5,
            average: "avg".into(),
            launch: "stream".into(),
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
            measurements: vec![m.clone()],
            nccl_algo: Some("RING".into()),
            nccl_proto: Some("LL128".into()),
            counters: None,
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
            // The verbs columns stay empty.
            ..Row::default()
        };
        assert_eq!(row, expected);
        assert_eq!((row.min_us, row.max_us), (1.0, 4.0));
        assert_eq!(result.rows(&run()), vec![expected]);
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
