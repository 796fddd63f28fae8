//! `-J FILE.json`: nccl-tests' JSON document (its `util.cu` writer, version 3), key
//! for key, so that its `tools/analyze_perf_json.py` reads ours: the run's
//! arguments, environment and config with its devices, one object per size with
//! `out_of_place`/`in_place` (and, with -I, `*_per_iter` with every iteration's time
//! and every process's), then `out_of_bounds`, `average_bus_bandwidth`, `errors` and
//! `end_time`. What only fabricbench measures is under the key `fabricbench`, at
//! the top and in each result.
//!
//! The document grows in place (`json_file`): each size adds its record and
//! nothing else, so a size costs the same however many came before it; a run
//! killed between sizes leaves a valid document of its finished sizes (without
//! the closing keys, and with `fabricbench.complete` false).

use super::json_file::GrowingDocument;
use super::run::local_time;
use super::table::Header;
use super::{Exporter, Measurement, PerIteration, Placement, RunInfo, SizeResult, Summary};
use crate::model::Expected;
use crate::sizes::Step;
use anyhow::Context;
use serde::Serialize;
use std::path::Path;

/// nccl-tests' JSON_FILE_VERSION.
pub const JSON_FILE_VERSION: u32 = 3;

/// nccl-tests writes booleans as the strings "true" and "false".
fn flag(on: bool) -> &'static str {
    if on {
        "true"
    } else {
        "false"
    }
}

/// What the document says about how the run was made, beyond the header's facts.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// argv, as nccl-tests records it.
    pub args: Vec<String>,
    /// -z other than 0.
    pub blocking: bool,
    /// -m (1 when not given).
    pub agg_iters: usize,
    pub per_iter_timing: bool,
    pub per_iter_skip: usize,
    /// NCCL_TESTS_SPLIT(_MASK): the group of each rank, by rank.
    pub group_of_rank: Vec<usize>,
}

#[derive(Serialize)]
struct Device {
    rank: usize,
    group: usize,
    pid: u32,
    hostname: String,
    device: usize,
    device_hex: String,
    device_info: String,
}

#[derive(Serialize)]
struct Config {
    nthreads: usize,
    ngpus: usize,
    minimum_bytes: u64,
    maximum_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    step_factor: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    step_bytes: Option<u64>,
    warmup_iters: usize,
    iterations: usize,
    aggregated_iterations: usize,
    validation: usize,
    graph: usize,
    blocking_collectives: &'static str,
    per_iter_timing: &'static str,
    per_iter_skip: usize,
    parallel_init: &'static str,
    devices: Vec<Device>,
}

/// nccl-tests' `writeBenchmarkLineBody` object.
#[derive(Serialize)]
struct Body {
    #[serde(skip_serializing_if = "Option::is_none")]
    time: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_time: Option<f64>,
    alg_bw: f64,
    bus_bw: f64,
    nwrong: Option<f64>,
}

/// nccl-tests' `writePerIterReport` object.
#[derive(Serialize)]
struct PerIter {
    skipped_iterations: usize,
    min_us: f64,
    max_us: f64,
    avg_us: f64,
    p50_us: f64,
    p95_us: f64,
    p99_us: f64,
    stdev_us: f64,
    cv_pct: f64,
    times_us: Vec<f64>,
    /// Only with more than one process, as nccl-tests writes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    per_process_max_times_us: Option<Vec<Vec<f64>>>,
}

#[derive(Serialize)]
struct WrongRank {
    rank: usize,
    hostname: String,
    count: u64,
}

/// Our figures of one placement.
#[derive(Serialize)]
struct Extra {
    min_us: f64,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    max_us: f64,
    slowest_rank: usize,
    slowest_hostname: String,
    wrong_ranks: Vec<WrongRank>,
    timestamp: String,
    /// busbw as a percentage of the model's expected busbw; absent: no model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pct_of_expected: Option<f64>,
}

#[derive(Serialize)]
struct ResultExtra {
    collective: String,
    cycle: u64,
    /// --rounds above 1 or auto: the round of this entry (one entry per round).
    #[serde(skip_serializing_if = "Option::is_none")]
    round: Option<u32>,
    busbw_factor: f64,
    out_of_place: Option<Extra>,
    in_place: Option<Extra>,
    /// The performance model's figures for this size (docs/model.md); absent: no model.
    #[serde(skip_serializing_if = "Option::is_none")]
    expected: Option<Expected>,
}

/// One size, as nccl-tests' preamble, bodies and terminator write it.
#[derive(Serialize)]
struct Record {
    size: u64,
    count: u64,
    #[serde(rename = "type")]
    datatype: String,
    redop: String,
    /// "%6i", as nccl-tests writes it.
    root: String,
    out_of_place: Option<Body>,
    #[serde(skip_serializing_if = "Option::is_none")]
    out_of_place_per_iter: Option<PerIter>,
    in_place: Option<Body>,
    #[serde(skip_serializing_if = "Option::is_none")]
    in_place_per_iter: Option<PerIter>,
    actual_iterations: usize,
    experiment_name: &'static str,
    fabricbench: ResultExtra,
}

#[derive(Serialize)]
struct OutOfBounds {
    count: u64,
    okay: &'static str,
}

#[derive(Serialize)]
struct AverageBusBandwidth {
    bandwidth: f64,
    /// "unchecked" without NCCL_TESTS_MIN_BW.
    okay: &'static str,
}

#[derive(Serialize)]
struct RunExtra {
    program: String,
    run_id: String,
    tool_version: String,
    backend: String,
    transport: String,
    library_version: String,
    hosts: Vec<String>,
    nranks: usize,
    env_note: &'static str,
    /// NCCL_TESTS_SPLIT(_MASK): each group's ranks; empty for one group.
    groups: Vec<(usize, Vec<usize>)>,
    min_busbw_gbs: Option<f64>,
    /// False until the run finished: the sizes so far, without the closing keys.
    complete: bool,
}

impl RunExtra {
    /// The run's facts, not yet complete (`json_file` marks it at the end).
    fn of(run: &RunInfo) -> RunExtra {
        RunExtra {
            program: run.program.clone(),
            run_id: run.run_id.clone(),
            tool_version: run.tool_version.clone(),
            backend: run.backend_name().to_string(),
            transport: run.transport.clone(),
            library_version: run.library_version.clone(),
            hosts: run.hosts.clone(),
            nranks: run.nranks,
            env_note: "env lists only the variables that shape results (NCCL_*, UCX_*, FI_*, chosen OMPI_MCA_*)",
            groups: run.groups.clone(),
            min_busbw_gbs: run.min_busbw_gbs,
            complete: false,
        }
    }
}

#[derive(Serialize)]
struct Document<'a> {
    version: u32,
    start_time: &'a str,
    args: &'a [String],
    env: &'a [String],
    nccl_version: Option<u64>,
    config: &'a Config,
    fabricbench: RunExtra,
    /// Empty when written: the records are added in place (`json_file`).
    results: [Record; 0],
}

/// The keys after `results`, written when the run ends.
#[derive(Serialize)]
struct Closing {
    out_of_bounds: OutOfBounds,
    average_bus_bandwidth: AverageBusBandwidth,
    errors: Vec<String>,
    end_time: String,
}

pub struct JsonExport {
    file: GrowingDocument,
    /// Host of each rank, by rank.
    hosts: Vec<String>,
    iters: usize,
}

/// NCCL's version code (22703) from "NCCL 2.27.3"; None for another library.
fn nccl_version(library: &str) -> Option<u64> {
    let mut parts = library.strip_prefix("NCCL ")?.split('.');
    let mut next = || parts.next()?.parse::<u64>().ok();
    Some(next()? * 10000 + next()? * 100 + next()?)
}

impl JsonExport {
    /// Writes the document, its results to come, to `path` or the first free
    /// `path.N` (see `json_file`); `path()` says which one was taken.
    pub fn create(
        path: &Path,
        header: &Header,
        settings: Settings,
        run: &RunInfo,
    ) -> anyhow::Result<JsonExport> {
        let devices = header
            .ranks
            .iter()
            .map(|r| Device {
                rank: r.rank,
                group: settings.group_of_rank.get(r.rank).copied().unwrap_or(0),
                pid: r.pid,
                hostname: r.host.clone(),
                device: r.ordinal,
                device_hex: r.location.name().to_string(),
                device_info: r.name.clone(),
            })
            .collect();
        let (step_factor, step_bytes) = match header.step {
            Step::Factor(f) => (Some(f), None),
            Step::Bytes(b) => (None, Some(b)),
        };
        let config = Config {
            nthreads: 1,
            ngpus: header.gpus_per_process,
            minimum_bytes: header.min_bytes,
            maximum_bytes: header.max_bytes,
            step_factor,
            step_bytes,
            warmup_iters: header.warmup_iters,
            iterations: header.iters,
            aggregated_iterations: settings.agg_iters.max(1),
            validation: header.check,
            graph: header.graph_launches,
            blocking_collectives: flag(settings.blocking),
            per_iter_timing: flag(settings.per_iter_timing),
            per_iter_skip: settings.per_iter_skip,
            parallel_init: flag(false),
            devices,
        };
        let doc = Document {
            version: JSON_FILE_VERSION,
            start_time: &local_time(),
            args: &settings.args,
            env: &run.env,
            nccl_version: nccl_version(&run.library_version),
            config: &config,
            fabricbench: RunExtra::of(run),
            results: [],
        };
        let text = serde_json::to_string(&doc)?;
        let file = GrowingDocument::create(path, &text)
            .with_context(|| format!("-J/--output_file {}", path.display()))?;
        Ok(JsonExport {
            file,
            hosts: header.ranks.iter().map(|r| r.host.clone()).collect(),
            iters: header.iters,
        })
    }

    /// The file the document goes to.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// "-J/--output_file PATH", for messages.
    fn named(&self) -> String {
        format!("-J/--output_file {}", self.path().display())
    }

    fn host(&self, rank: usize) -> String {
        self.hosts.get(rank).cloned().unwrap_or_default()
    }

    fn body(&self, run: &RunInfo, m: &Measurement) -> Body {
        Body {
            time: (!run.report_cputime).then_some(m.time_us),
            cpu_time: run.report_cputime.then(|| m.cpu_us.unwrap_or(m.time_us)),
            alg_bw: m.algbw_gbs,
            bus_bw: m.busbw_gbs,
            nwrong: m.wrong.map(|w| w as f64),
        }
    }

    fn extra(&self, m: &Measurement, expected: Option<&Expected>) -> Extra {
        let l = &m.latency;
        Extra {
            min_us: l.min_us,
            p50_us: l.p50_us,
            p99_us: l.p99_us,
            p999_us: l.p999_us,
            max_us: l.max_us,
            slowest_rank: m.slowest_rank,
            slowest_hostname: self.host(m.slowest_rank),
            wrong_ranks: m
                .wrong_ranks
                .iter()
                .map(|&(rank, count)| WrongRank {
                    rank,
                    hostname: self.host(rank),
                    count,
                })
                .collect(),
            timestamp: m.timestamp.clone(),
            pct_of_expected: expected.and_then(|e| e.percent(m.busbw_gbs)),
        }
    }

    /// The closing keys, as nccl-tests writes them after the results.
    fn closing(run: &RunInfo, s: &Summary) -> Closing {
        Closing {
            out_of_bounds: OutOfBounds {
                count: s.wrong_total,
                okay: flag(s.wrong_total == 0),
            },
            average_bus_bandwidth: AverageBusBandwidth {
                bandwidth: s.avg_busbw_gbs,
                okay: match run.min_busbw_gbs {
                    None => "unchecked",
                    Some(min) => flag(!super::below_min_busbw(s.avg_busbw_gbs, min)),
                },
            },
            errors: Vec::new(),
            end_time: local_time(),
        }
    }

    fn per_iter(&self, p: &PerIteration) -> PerIter {
        let us = |v: &[f64]| v.iter().map(|t| t * 1e6).collect::<Vec<f64>>();
        PerIter {
            skipped_iterations: p.skipped,
            min_us: p.stats.min * 1e6,
            max_us: p.stats.max * 1e6,
            avg_us: p.stats.avg * 1e6,
            p50_us: p.stats.p50 * 1e6,
            p95_us: p.stats.p95 * 1e6,
            p99_us: p.stats.p99 * 1e6,
            stdev_us: p.stats.stdev * 1e6,
            cv_pct: p.stats.cv_pct(),
            times_us: us(&p.times),
            per_process_max_times_us: (p.per_process.len() > 1)
                .then(|| p.per_process.iter().map(|row| us(row)).collect()),
        }
    }
}

impl Exporter for JsonExport {
    fn start(&mut self, _run: &RunInfo) -> anyhow::Result<()> {
        Ok(())
    }

    fn record(&mut self, run: &RunInfo, r: &SizeResult) -> anyhow::Result<()> {
        let find = |p: Placement| r.measurements.iter().find(|m| m.placement == p);
        let (oop, ip) = (find(Placement::OutOfPlace), find(Placement::InPlace));
        let per_iter = |m: Option<&Measurement>| {
            m.and_then(|m| m.per_iter.as_ref())
                .map(|p| self.per_iter(p))
        };
        let record = Record {
            size: r.size_bytes,
            count: r.count,
            datatype: r.datatype.clone(),
            redop: r.redop.clone(),
            root: format!("{:>6}", r.root),
            out_of_place: oop.map(|m| self.body(run, m)),
            out_of_place_per_iter: per_iter(oop),
            in_place: ip.map(|m| self.body(run, m)),
            in_place_per_iter: per_iter(ip),
            actual_iterations: self.iters,
            experiment_name: "",
            fabricbench: ResultExtra {
                collective: r.collective.clone(),
                cycle: r.cycle,
                round: run.rounds_many.then_some(r.round),
                busbw_factor: r.busbw_factor,
                out_of_place: oop.map(|m| self.extra(m, r.expected.as_ref())),
                in_place: ip.map(|m| self.extra(m, r.expected.as_ref())),
                expected: r.expected.clone(),
            },
        };
        let bytes = serde_json::to_vec(&record)?;
        self.file.append(&bytes).with_context(|| self.named())
    }

    fn finish(&mut self, run: &RunInfo, summary: &Summary) -> anyhow::Result<()> {
        let closing = serde_json::to_string(&JsonExport::closing(run, summary))?;
        // `{"a":..,"b":..}` without its braces: the keys after `results`.
        let keys = &closing[1..closing.len() - 1];
        self.file.close(keys).with_context(|| self.named())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_codes() {
        assert_eq!(nccl_version("NCCL 2.27.3"), Some(22703));
        assert_eq!(nccl_version("Open MPI v4.1.4"), None);
    }
}
