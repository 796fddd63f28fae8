//! `--out_json` / `--out_json_file PATH`: perftest's JSON report
//! (write_test_info_to_file and the write_*_report_to_file functions, key for
//! key, numbers rounded as perftest prints them), with every size in one
//! document. perftest rewrites its file after each size, so only the last
//! remains; here `results` is still that last size's line (what perftest's own
//! file holds, so readers of it keep working), and `all_results` holds every
//! line of every size, in table order, with `pair` and `direction` where the
//! table has them.
//!
//! The document is replaced whole after each size (`output::write_whole`): a
//! run that stops midway leaves a valid document of its finished sizes, with
//! `fabricbench.complete` false. The first write takes only a new (or empty)
//! file; a link at the path is never followed.

use super::perftest::{shown_bw, PerftestHeader, ReadsOrInline};
use super::perftest_extra::{Direction, ExtraColumns};
use super::verbs::{Figures, Line, VerbsResult};
use super::{Exporter, RunInfo, Summary};
use crate::output::{write_whole, Replace};
use anyhow::Context;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// perftest's DEFAULT_JSON_FILE_NAME, in the working directory.
pub const DEFAULT_JSON_FILE: &str = "perftest_out.json";

/// perftest's printf rounding of a figure ("%.2lf" is `round(v, 2)`).
fn round(v: f64, decimals: usize) -> f64 {
    format!("{v:.decimals$}").parse().unwrap_or(v)
}

/// write_test_info_to_file's keys.
#[derive(Clone, Debug, Serialize)]
struct TestInfo {
    test: String,
    #[serde(rename = "Dual_port")]
    dual_port: &'static str,
    #[serde(rename = "Device")]
    device: String,
    #[serde(rename = "Number_of_qps")]
    qps: u32,
    #[serde(rename = "Transport_type")]
    transport: String,
    #[serde(rename = "Connection_type")]
    connection: String,
    #[serde(rename = "Using_SRQ")]
    srq: &'static str,
    #[serde(rename = "PCIe_relax_order")]
    relaxed_ordering: &'static str,
    #[serde(rename = "ibv_wr_API")]
    wr_api: &'static str,
    #[serde(rename = "TX_depth", skip_serializing_if = "Option::is_none")]
    tx_depth: Option<u32>,
    #[serde(rename = "RX_depth", skip_serializing_if = "Option::is_none")]
    rx_depth: Option<u32>,
    #[serde(rename = "CQ_Moderation", skip_serializing_if = "Option::is_none")]
    cq_mod: Option<u32>,
    #[serde(rename = "Mtu")]
    mtu: u32,
    #[serde(rename = "Link_type")]
    link_type: String,
    #[serde(rename = "GID_index", skip_serializing_if = "Option::is_none")]
    gid_index: Option<u32>,
    #[serde(rename = "Max_inline_data", skip_serializing_if = "Option::is_none")]
    max_inline: Option<u32>,
    #[serde(rename = "Outstand_reads", skip_serializing_if = "Option::is_none")]
    out_reads: Option<u8>,
    #[serde(rename = "rdma_cm_QPs")]
    rdma_cm: &'static str,
    #[serde(rename = "Use_ROCm_memory")]
    rocm: &'static str,
    #[serde(rename = "Use_MUSA_memory")]
    musa: &'static str,
    #[serde(rename = "Data_ex_method")]
    exchange: String,
}

/// perftest's spelling of a setting.
fn on_off(on: bool) -> &'static str {
    if on {
        "ON"
    } else {
        "OFF"
    }
}

impl TestInfo {
    fn of(h: &PerftestHeader) -> TestInfo {
        let (max_inline, out_reads) = match h.reads_or_inline {
            ReadsOrInline::MaxInline(n) => (Some(n), None),
            ReadsOrInline::OutstandReads(n) => (None, Some(n)),
        };
        TestInfo {
            // "RDMA_Write BW Test" -> "RDMA_Write_BW_Test", as perftest builds it.
            test: h.title.replace(' ', "_"),
            dual_port: "OFF",
            device: h.device.clone(),
            qps: h.qps,
            transport: h.transport.clone(),
            connection: h.connection.clone(),
            srq: "OFF",
            // Memory is registered without IBV_ACCESS_RELAXED_ORDERING.
            relaxed_ordering: "OFF",
            wr_api: on_off(h.post.wr_api),
            tx_depth: h.tx_depth,
            rx_depth: h.rx_depth,
            cq_mod: h.cq_mod,
            mtu: h.mtu,
            link_type: h.link_type.clone(),
            // The header's "3 (RoCE v2 ...)": its index.
            gid_index: h
                .gid
                .as_deref()
                .and_then(|g| g.split_whitespace().next()?.parse().ok()),
            max_inline,
            out_reads,
            rdma_cm: on_off(h.rdma_cm_qps),
            rocm: "OFF",
            musa: "OFF",
            exchange: h.exchange.clone(),
        }
    }
}

/// One line's figures: REPORT_FMT(_EXT)_JSON or REPORT_FMT_LAT_JSON, then
/// REPORT_EXT_CPU_UTIL_JSON, then what fabricbench adds.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
enum Figure {
    Bw {
        #[serde(rename = "MsgSize")]
        size: u64,
        n_iterations: u64,
        #[serde(rename = "BW_peak")]
        peak: f64,
        #[serde(rename = "BW_average")]
        average: f64,
        #[serde(rename = "MsgRate")]
        msg_rate: f64,
        #[serde(flatten)]
        extra: Extra,
    },
    Lat {
        #[serde(rename = "MsgSize")]
        size: u64,
        n_iterations: u64,
        t_min: f64,
        t_max: f64,
        t_typical: f64,
        t_avg: f64,
        t_stdev: f64,
        percentile_99: f64,
        #[serde(rename = "percentile_99.9")]
        percentile_999: f64,
        #[serde(flatten)]
        extra: Extra,
    },
}

#[derive(Clone, Debug, Serialize)]
struct Extra {
    #[serde(rename = "CPU_util", skip_serializing_if = "Option::is_none")]
    cpu_util: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pair: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    direction: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    wrong: Option<u64>,
}

#[derive(Serialize)]
struct RunExtra<'a> {
    program: &'a str,
    run_id: &'a str,
    tool_version: &'a str,
    /// MiB/sec, or Gb/sec with --report_gbits: the unit of BW_peak and BW_average.
    bw_unit: &'static str,
    /// False until the run finished.
    complete: bool,
}

#[derive(Serialize)]
struct Document<'a> {
    test_info: &'a TestInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    results: Option<&'a Figure>,
    all_results: &'a [Figure],
    fabricbench: RunExtra<'a>,
}

/// The JSON exporter of the verbs family.
pub struct PerftestJson {
    path: PathBuf,
    info: TestInfo,
    gbits: bool,
    extra: ExtraColumns,
    /// Every line so far, and the index of the last size's headline.
    lines: Vec<Figure>,
    headline: Option<usize>,
    /// Whether the file has been written yet (and may now be replaced).
    written: bool,
}

impl PerftestJson {
    /// Writes to `path` (checked beforehand by `output::check_file`).
    pub fn new(path: &Path, header: &PerftestHeader, extra: ExtraColumns) -> PerftestJson {
        PerftestJson {
            path: path.to_path_buf(),
            info: TestInfo::of(header),
            gbits: header.columns.gbits(),
            extra,
            lines: Vec::new(),
            headline: None,
            written: false,
        }
    }

    fn figure(&self, line: &Line, cpu_util: Option<f64>) -> Figure {
        let extra = Extra {
            cpu_util: cpu_util
                .filter(|_| self.extra.cpu_util)
                .map(|c| round(c, 2)),
            pair: line.label.clone(),
            direction: line.direction.map(Direction::name),
            wrong: line.wrong,
        };
        match &line.figures {
            Figures::Bw { .. } => {
                let b = shown_bw(&line.figures, self.gbits).expect("bandwidth figures");
                // REPORT_FMT_EXT_JSON's 6 decimals where the table has them.
                let decimals = if b.fine { 6 } else { 2 };
                Figure::Bw {
                    size: line.size,
                    n_iterations: b.iterations,
                    peak: round(b.peak, decimals),
                    average: round(b.average, decimals),
                    msg_rate: round(b.mpps, 6),
                    extra,
                }
            }
            Figures::Lat {
                iterations, stats, ..
            } => Figure::Lat {
                size: line.size,
                n_iterations: *iterations,
                t_min: round(stats.t_min_us, 2),
                t_max: round(stats.t_max_us, 2),
                t_typical: round(stats.t_typical_us, 2),
                t_avg: round(stats.t_avg_us, 2),
                t_stdev: round(stats.t_stdev_us, 2),
                percentile_99: round(stats.p99_us, 2),
                percentile_999: round(stats.p999_us, 2),
                extra,
            },
        }
    }

    fn write(&mut self, run: &RunInfo, complete: bool) -> anyhow::Result<()> {
        let doc = Document {
            test_info: &self.info,
            results: self.headline.map(|i| &self.lines[i]),
            all_results: &self.lines,
            fabricbench: RunExtra {
                program: &run.program,
                run_id: &run.run_id,
                tool_version: &run.tool_version,
                bw_unit: if self.gbits { "Gb/sec" } else { "MiB/sec" },
                complete,
            },
        };
        let mut bytes = serde_json::to_vec(&doc)?;
        bytes.push(b'\n');
        let replace = match self.written {
            true => Replace::Always,
            false => Replace::IfEmpty,
        };
        write_whole(&self.path, replace, &bytes)
            .with_context(|| format!("--out_json_file {}", self.path.display()))?;
        self.written = true;
        Ok(())
    }
}

impl Exporter<VerbsResult> for PerftestJson {
    fn start(&mut self, run: &RunInfo) -> anyhow::Result<()> {
        self.write(run, false)
    }

    fn record(&mut self, run: &RunInfo, result: &VerbsResult) -> anyhow::Result<()> {
        // The size's headline, as perftest's file holds it: the last line that
        // is not one direction of a pair (the pair, or with several pairs their sum).
        let single = |l: &Line| {
            matches!(
                l.direction,
                Some(Direction::ClientToServer | Direction::ServerToClient)
            )
        };
        let headline = result.lines.iter().rposition(|l| !single(l));
        let first = self.lines.len();
        for line in &result.lines {
            let figure = self.figure(line, result.cpu_util);
            self.lines.push(figure);
        }
        if let Some(h) = headline {
            self.headline = Some(first + h);
        }
        self.write(run, false)
    }

    fn finish(&mut self, run: &RunInfo, _summary: &Summary) -> anyhow::Result<()> {
        self.write(run, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::perftest::tests::header;
    use crate::report::verbs::tests::bw_line;

    fn result(size: u64, lines: Vec<Line>) -> VerbsResult {
        VerbsResult {
            collective: "ib_write".into(),
            bidirectional: true,
            timestamp: String::new(),
            lines: lines.into_iter().map(|l| Line { size, ..l }).collect(),
            counters: None,
            cpu_util: Some(12.345),
            round: 1,
            spread: None,
        }
    }

    #[test]
    fn test_info_keys_and_every_size_in_one_document() {
        let dir = crate::sysfs::fixture::Tree::temp("perftest-json");
        let path = dir.dir().join("out.json");
        let extra = ExtraColumns {
            cpu_util: true,
            directions: true,
            spread: false,
        };
        let mut json = PerftestJson::new(&path, &header(), extra);
        let run = RunInfo {
            program: "ib_write_bw".into(),
            ..RunInfo::default()
        };
        json.start(&run).unwrap();
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(doc["all_results"], serde_json::json!([]));
        assert_eq!(doc["fabricbench"]["complete"], false);
        let info = &doc["test_info"];
        assert_eq!(info["test"], "RDMA_Write_BW_Test");
        assert_eq!(info["ibv_wr_API"], "OFF");
        assert_eq!(info["rdma_cm_QPs"], "OFF");
        assert_eq!(info["GID_index"], 1);
        assert_eq!(info["Max_inline_data"], 0);
        assert_eq!(info["TX_depth"], 128);
        assert!(info.get("RX_depth").is_none() && info.get("Outstand_reads").is_none());
        assert_eq!(info["Data_ex_method"], "Ethernet");
        let directed = |d| Line {
            direction: Some(d),
            ..bw_line(None, None)
        };
        for size in [2, 4] {
            let lines = vec![
                directed(Direction::Both),
                directed(Direction::ClientToServer),
                directed(Direction::ServerToClient),
            ];
            json.record(&run, &result(size, lines)).unwrap();
        }
        json.finish(&run, &Summary::default()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let all = doc["all_results"].as_array().unwrap();
        assert_eq!(all.len(), 6);
        // perftest's key: the last size's pair line.
        assert_eq!(doc["results"], all[3]);
        assert_eq!(doc["results"]["MsgSize"], 4);
        assert_eq!(doc["results"]["direction"], "both");
        assert_eq!(all[1]["direction"], "client->server");
        // 3125 MiB/s, 3750 peak, 0.05 Mpps, %.2f CPU.
        assert_eq!(all[0]["BW_average"], 3125.0);
        assert_eq!(all[0]["BW_peak"], 3750.0);
        assert_eq!(all[0]["MsgRate"], 0.05);
        assert_eq!(all[0]["CPU_util"], 12.35);
        assert_eq!(all[0]["n_iterations"], 5000);
        assert_eq!(doc["fabricbench"]["complete"], true);
        // Keys in perftest's order.
        let keys = text.find("\"MsgSize\"").unwrap() < text.find("\"n_iterations\"").unwrap()
            && text.find("\"BW_peak\"").unwrap() < text.find("\"BW_average\"").unwrap();
        assert!(keys, "{text}");
    }

    #[test]
    fn latency_keys_as_perftest_names_them() {
        let line = crate::report::perftest::tests::lat_line(None);
        let json = PerftestJson::new(
            Path::new("unused.json"),
            &PerftestHeader {
                columns: crate::report::perftest::Columns::Latency,
                ..header()
            },
            ExtraColumns::default(),
        );
        let v = serde_json::to_value(json.figure(&line, Some(50.0))).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "MsgSize": 2, "n_iterations": 1000, "t_min": 1.5, "t_max": 9.25,
                "t_typical": 2.0, "t_avg": 2.25, "t_stdev": 0.5,
                "percentile_99": 5.0, "percentile_99.9": 9.0
            })
        );
    }
}
