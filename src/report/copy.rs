//! copy_bw's results: one copy direction on one path at one size, and its CSV
//! row in the collectives' schema (the copy kind as `collective`, the path as
//! `placement`, the limit it is compared with in the limit columns).

use super::{Row, RunInfo, ToRows};
use crate::limits::{self, Limit};
use crate::stats::{histogram, IterStats};

/// The copies copy_bw knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyKind {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
    Peer,
}

impl CopyKind {
    pub const ALL: [CopyKind; 4] = [
        CopyKind::HostToDevice,
        CopyKind::DeviceToHost,
        CopyKind::DeviceToDevice,
        CopyKind::Peer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CopyKind::HostToDevice => "h2d",
            CopyKind::DeviceToHost => "d2h",
            CopyKind::DeviceToDevice => "d2d",
            CopyKind::Peer => "p2p",
        }
    }

    /// What the copy is, for `--help` and the reference.
    pub fn meaning(self) -> &'static str {
        match self {
            CopyKind::HostToDevice => "host memory to GPU memory",
            CopyKind::DeviceToHost => "GPU memory to host memory",
            CopyKind::DeviceToDevice => "within one GPU's memory",
            CopyKind::Peer => "from one GPU's memory to another's",
        }
    }

    /// Bytes of memory traffic per byte copied: a copy within one GPU's memory reads
    /// and writes each byte, as CUDA's bandwidthTest counts it.
    pub fn traffic_factor(self) -> f64 {
        if self == CopyKind::DeviceToDevice {
            2.0
        } else {
            1.0
        }
    }
}

/// One measured copy at one size.
#[derive(Clone, Debug)]
pub struct CopyResult {
    pub kind: CopyKind,
    /// "gpu0", "gpu0->gpu1".
    pub path: String,
    pub size: u64,
    /// Mean time of one copy.
    pub seconds: f64,
    pub per_iteration: Vec<f64>,
    /// Bytes that differ from the source; None without -c.
    pub wrong: Option<u64>,
    pub limit: Option<Limit>,
    /// "PCIe", "memory", "NVLink", "PCIe P2P", "staged through host".
    pub transport: String,
    pub device: String,
    /// UTC time the measurement finished.
    pub timestamp: String,
}

impl CopyResult {
    /// Bytes moved per second (memory traffic for D2D).
    pub fn gbs(&self) -> f64 {
        self.size as f64 * self.kind.traffic_factor() / self.seconds / 1e9
    }

    /// The figure as a percentage of its limit, as the CSV's pct_of_limit.
    pub fn pct_of_limit(&self) -> Option<f64> {
        self.limit
            .as_ref()
            .map(|l| limits::percent_of(self.gbs(), l))
    }

    /// The percentiles of the per-iteration times.
    pub fn latency(&self) -> IterStats {
        IterStats::from_seconds(&self.per_iteration, &histogram(&self.per_iteration))
    }
}

impl Row {
    /// The row of one copy at one size.
    pub fn copy(run: &RunInfo, r: &CopyResult) -> Row {
        let latency = r.latency();
        let mut row = Row {
            timestamp: r.timestamp.clone(),
            transport: r.transport.clone(),
            device: r.device.clone(),
            collective: format!("copy_{}", r.kind.name()),
            datatype: "uint8".into(),
            redop: "none".into(),
            root: -1,
            placement: r.path.clone(),
            size_bytes: r.size,
            count: r.size,
            cycle: 0,
            time_us: r.seconds * 1e6,
            algbw_gbs: r.size as f64 / r.seconds / 1e9,
            busbw_gbs: r.gbs(),
            busbw_factor: r.kind.traffic_factor(),
            min_us: latency.min_us,
            p50_us: latency.p50_us,
            p99_us: latency.p99_us,
            p999_us: latency.p999_us,
            max_us: latency.max_us,
            wrong: r.wrong,
            slowest_rank: 0,
            cpu_us: None,
            ..Row::of_run(run)
        };
        row.set_limit(r.limit.as_ref());
        row
    }
}

impl ToRows for CopyResult {
    fn rows(&self, run: &RunInfo) -> Vec<Row> {
        vec![Row::copy(run, self)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::facts::{Average, Launch, RunBackend};
    use crate::report::SCHEMA_VERSION;

    fn d2d() -> CopyResult {
        CopyResult {
            kind: CopyKind::DeviceToDevice,
            path: "gpu0".into(),
            size: 1_000_000_000,
            seconds: 0.5,
            per_iteration: vec![0.25, 0.5, 0.75],
            wrong: Some(0),
            limit: Some(Limit {
                name: "memory".into(),
                gbs: 5000.0,
            }),
            transport: "memory".into(),
            device: "GPU".into(),
            timestamp: "2025-01-02T03:04:05.000Z".into(),
        }
    }

    #[test]
    fn device_copies_count_read_and_write_traffic() {
        let r = d2d();
        assert_eq!(r.gbs(), 4.0);
        assert_eq!(r.pct_of_limit(), Some(0.08));
        let h2d = CopyResult {
            kind: CopyKind::HostToDevice,
            limit: None,
            ..r
        };
        assert_eq!(h2d.gbs(), 2.0);
        assert_eq!(h2d.pct_of_limit(), None);
    }

    #[test]
    fn a_copy_row_field_by_field() {
        let run = RunInfo {
            run_id: "id".into(),
            tool_version: "9.9".into(),
            backend: Some(RunBackend::Cuda),
            library_version: "CUDA driver API 12.4".into(),
            hosts: vec!["h".into()],
            nranks: 1,
            env: vec!["CUDA_A=1".into(), "CUDA_B=2".into()],
            iters: 3,
            warmup_iters: 1,
            average: Some(Average::Mean),
            launch: Some(Launch::Stream),
            ..RunInfo::default()
        };
        let row = Row::copy(&run, &d2d());
        let expected = Row {
            schema_version: SCHEMA_VERSION,
            run_id: "id".into(),
            timestamp: "2025-01-02T03:04:05.000Z".into(),
            tool_version: "9.9".into(),
            backend: "cuda".into(),
            transport: "memory".into(),
            library_version: "CUDA driver API 12.4".into(),
            device: "GPU".into(),
            hosts: "h".into(),
            nranks: 1,
            nnodes: 1,
            collective: "copy_d2d".into(),
            datatype: "uint8".into(),
            redop: "none".into(),
            root: -1,
            placement: "gpu0".into(),
            size_bytes: 1_000_000_000,
            count: 1_000_000_000,
            iters: 3,
            warmup_iters: 1,
            avg_mode: "avg".into(),
            cycle: 0,
            time_us: 500_000.0,
            algbw_gbs: 2.0,
            busbw_gbs: 4.0,
            busbw_factor: 2.0,
            min_us: 250_000.0,
            p50_us: row.p50_us,
            p99_us: row.p99_us,
            p999_us: row.p999_us,
            max_us: 750_000.0,
            wrong: Some(0),
            slowest_rank: 0,
            limit_name: Some("memory".into()),
            limit_gbs: Some(5000.0),
            pct_of_limit: Some(0.08),
            env: "CUDA_A=1;CUDA_B=2".into(),
            cpu_us: None,
            launch: Some("stream".into()),
            round: Some(1),
            // The verbs columns stay empty.
            ..Row::default()
        };
        assert_eq!(row, expected);
        // The histogram's percentiles, within its 0.1% resolution.
        assert!((row.p50_us - 500_000.0).abs() < 500.0, "{}", row.p50_us);
        assert_eq!(row.p99_us, 750_000.0);
        assert_eq!(CopyResult::rows(&d2d(), &run), vec![row]);
    }
}
