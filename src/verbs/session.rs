//! One side of a connected pair: its device and queue pairs, connecting them
//! to the peer's, measuring each size, and on the side that prints, the
//! perftest table and the CSV rows of every size.

use crate::job::{Group, Job};
use crate::report::csv::CsvExport;
use crate::report::facts::RunBackend;
use crate::report::perftest::{PerftestHeader, PerftestTable};
use crate::report::perftest_extra::ExtraColumns;
use crate::report::perftest_json::PerftestJson;
use crate::report::run::{new_run_id, now_utc, relevant_env};
use crate::report::verbs::VerbsResult;
use crate::report::{Exporter, RunInfo, Summary};
use crate::sysfs::Root;
use crate::verbs::cm::link::CmLink;
use crate::verbs::device::qp::Endpoint;
use crate::verbs::device::{device_name_for, open_port, GidKind, Port};
use crate::verbs::exchange::mpi::MpiLink;
use crate::verbs::exchange::peer::{check_peer, path_mtu};
use crate::verbs::exchange::seat::Seat;
use crate::verbs::exchange::tcp::TcpLink;
use crate::verbs::exchange::wire::{
    histogram_bytes, BwReport, Hello, LatReport, Message, QpInfo, Report, PROTOCOL,
};
use crate::verbs::exchange::{Link, Patience};
use crate::verbs::flags::benchmark::{Test, Verb};
use crate::verbs::flags::parity::{check_device, ud_sizes, Connection};
use crate::verbs::flags::takes_receives;
use crate::verbs::flags::{Length, Plan};
use crate::verbs::measure::clock::Clock;
use crate::verbs::measure::counters::Fabric;
use crate::verbs::measure::cpu_util::CpuWatch;
use crate::verbs::measure::duration::Periods;
use crate::verbs::measure::validate::{wrong_summary, Checked};
use crate::verbs::results::figures::lines_of;
use crate::verbs::results::header::VerbsHeader;
use crate::verbs::{measure::bw, measure::lat, measure::rdma_check, measure::rounds};
use anyhow::{anyhow, bail};

/// Exporters of the results.
type Exporters = Vec<Box<dyn Exporter<VerbsResult>>>;

/// The link a side's session runs over and, for rdma_cm's, the connection that
/// -R connects the queue pairs through: named here, above both, because the
/// exchange cannot name rdma_cm, which builds on it.
pub trait SideLink: Link {
    /// This link as the exchange's (trait upcasting needs Rust 1.86).
    fn as_link(&mut self) -> &mut dyn Link;
    fn rdma_cm(&mut self) -> Option<&mut CmLink> {
        None
    }
}

impl SideLink for TcpLink {
    fn as_link(&mut self) -> &mut dyn Link {
        self
    }
}

impl SideLink for MpiLink<'_> {
    fn as_link(&mut self) -> &mut dyn Link {
        self
    }
}

impl SideLink for CmLink {
    fn as_link(&mut self) -> &mut dyn Link {
        self
    }
    fn rdma_cm(&mut self) -> Option<&mut CmLink> {
        Some(self)
    }
}

/// Opens the device and port of this side and creates its queue pairs; the
/// plan as it applies to that device.
pub fn open_side(plan: &Plan, local_rank: usize) -> anyhow::Result<(Plan, Port, Endpoint)> {
    let (plan, port) = open_device(plan, local_rank)?;
    let endpoint = Endpoint::create(&port, &plan)?;
    Ok((plan, port, endpoint))
}

/// Opens the device and port of this side; the plan as it applies to that device.
pub fn open_device(plan: &Plan, local_rank: usize) -> anyhow::Result<(Plan, Port)> {
    let port = open_port(
        device_name_for(&plan.devices, local_rank),
        plan.ib_port,
        plan.gid_index,
        &plan.path.gid,
    )?;
    check_device(plan.bench, &plan.options, &port)?;
    let mut plan = plan.on_device(port.software);
    // The P_Key index checked, and NUMA binding before any buffer is allocated.
    plan.path
        .on_device(&Root::new("/"), &port.device, port.port)?;
    let max = plan.max_size();
    if max > port.max_msg_size {
        let flag = if plan.sizes.len() > 1 {
            "-a/--all"
        } else {
            "-s/--size"
        };
        bail!(
            "{flag}: {max}-byte messages exceed the largest message of {} port {} ({} bytes); use -s {} or less",
            port.device, port.port, port.max_msg_size, port.max_msg_size
        );
    }
    Ok((plan, port))
}

/// perftest's -F check: a CPU frequency governor other than `performance`.
fn cpu_governor_warning(root: &Root) -> Option<String> {
    let governor = root.read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")?;
    (governor != "performance").then(|| {
        format!(
            "the CPU frequency governor is '{governor}', not 'performance': results may vary \
             (cpupower frequency-set -g performance; -F hides this warning)"
        )
    })
}

/// The run's facts shared by its CSV rows.
pub fn run_info(plan: &Plan, pairs: usize, gid: Option<GidKind>) -> RunInfo {
    let connection = plan.options.connection.name();
    let transport = match gid {
        Some(kind) => format!("{connection} over {kind}"),
        None => format!("{connection} over IB"),
    };
    let warms_up = plan.options.warm_up;
    RunInfo {
        program: plan.bench.program().into(),
        run_id: new_run_id(chrono::Utc::now()),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        backend: Some(RunBackend::Verbs),
        transport,
        library_version: "libibverbs.so.1".into(),
        nranks: 2 * pairs,
        env: relevant_env(),
        iters: match plan.length {
            Length::Iters(n) => n as usize,
            Length::Duration(_) => 0,
        },
        warmup_iters: if warms_up { plan.tx_depth as usize } else { 0 },
        ..RunInfo::default()
    }
}

/// One side of a connected pair and what it prints.
pub struct Session<'a> {
    pub job: &'a Job,
    pub plan: &'a Plan,
    pub seat: Seat,
    pub port: &'a Port,
    pub endpoint: &'a mut Endpoint,
    /// --csv, on the side that prints.
    pub csv: Option<CsvExport>,
    /// This side prints the table (and writes the CSV).
    pub printer: bool,
    pub clock: Clock,
}

impl Session<'_> {
    fn hello(&self) -> Hello {
        Hello {
            protocol: PROTOCOL.into(),
            program: self.plan.bench.program().into(),
            settings: self.plan.symmetric_settings(),
            host: self.job.host(self.job.rank()).to_string(),
            device: self.port.device.clone(),
            port: self.port.port,
            link: self.port.link,
            lid: self.port.lid,
            gid: self.port.shown_gid,
            gid_index: self.port.gid.as_ref().map(|g| g.entry.index),
            active_mtu: self.port.active_mtu,
            max_rd_atomic: self.port.max_rd_atomic,
            rate: self.port.rate.clone(),
            qps: self.endpoint.qps.iter().map(|q| q.info()).collect(),
        }
    }

    /// Exchanges connection details with the peer and connects the queue
    /// pairs: every endpoint's details, the path MTU and the reads in flight.
    pub fn connect(&mut self, link: &mut dyn SideLink) -> anyhow::Result<(Vec<Hello>, u32, u8)> {
        let plan = self.plan;
        let mine = self.hello();
        let hellos: Vec<Hello> = link
            .gather(&Message::Hello(Box::new(mine.clone())), Patience::Prompt)?
            .into_iter()
            .map(|m| match m {
                Message::Hello(h) => Ok(*h),
                other => Err(out_of_step(&other, "connection details")),
            })
            .collect::<Result<_, _>>()?;
        let peer = &hellos[self.seat.peer()];
        check_peer(&mine, peer, plan.max_size())?;
        let peer_name = format!("{} {} port {}", peer.host, peer.device, peer.port);
        let mtu = path_mtu(
            plan.mtu,
            self.port.active_mtu,
            peer.active_mtu,
            &format!("{} port {}", self.port.device, self.port.port),
            &peer_name,
        )?;
        // Reads in flight: what both devices allow (the responder must hold them).
        let out_reads = plan
            .options
            .out_reads(self.port.max_rd_atomic.min(peer.max_rd_atomic));
        let cm = link.rdma_cm();
        match cm.filter(|_| plan.cm.connect_qps) {
            // -R: the QPs are connected through rdma_cm, as perftest (UD: its UDP port space).
            Some(cm) if plan.options.connection == Connection::Ud => {
                crate::verbs::cm::ud::connect_qps(cm.cm(), self.port, self.endpoint, plan, peer)?
            }
            Some(cm) => {
                crate::verbs::cm::connect_qps(cm, self.port, self.endpoint, plan, peer, out_reads)?
            }
            None => self
                .endpoint
                .connect(self.port, plan, peer, mtu, out_reads)?,
        }
        Ok((hellos, mtu, out_reads))
    }

    /// Where the results go. The table first, then the CSV: a size's rows are
    /// printed before they are written. With --rounds R > 1 the table (and JSON)
    /// get each size's medians at the end (the first list), the CSV and counter
    /// views every round as measured (the second).
    fn exporters(&mut self, hellos: &[Hello], mtu: u32, out_reads: u8) -> (Exporters, Exporters) {
        let plan = self.plan;
        let mut summaries: Exporters = Vec::new();
        let mut raw: Exporters = Vec::new();
        if self.printer {
            let header = self.header(hellos, mtu, out_reads);
            // --out_json: written by the side that prints, as the CSV.
            if let Some(path) = &plan.report.json {
                let json = PerftestJson::new(path, &header, plan.report.extra_columns());
                summaries.push(Box::new(json));
            }
            let extra = ExtraColumns {
                spread: plan.rounds > 1,
                ..plan.report.extra_columns()
            };
            let table = PerftestTable::new(std::io::stdout(), header).with_extra(extra);
            summaries.insert(0, Box::new(table));
        }
        if let Some(csv) = self.csv.take() {
            raw.push(Box::new(csv));
        }
        (summaries, raw)
    }

    /// The sizes this pair runs: the plan's, within the path MTU under UD.
    fn sizes(&self, peer: &Hello, mtu: u32) -> anyhow::Result<Vec<u64>> {
        let plan = self.plan;
        if plan.options.connection != Connection::Ud {
            return Ok(plan.sizes.clone());
        }
        let path = format!(
            "{} port {} to {} {} port {}",
            self.port.device, self.port.port, peer.host, peer.device, peer.port
        );
        ud_sizes(&plan.sizes, plan.sizes.len() > 1, mtu, &path)
    }

    /// Connects, then measures every size; the side that prints writes each
    /// size's lines to the perftest table and the CSV.
    pub fn run(&mut self, link: &mut dyn SideLink) -> anyhow::Result<()> {
        let plan = self.plan;
        let (hellos, mtu, out_reads) = self.connect(link)?;
        let peer = &hellos[self.seat.peer()];
        let run = run_info(
            plan,
            self.seat.pairs,
            self.port.gid.as_ref().map(|g| g.entry.kind),
        );
        let (mut summaries, mut raw) = self.exporters(&hellos, mtu, out_reads);
        let sizes = self.sizes(peer, mtu)?;
        let host = self.job.host(self.job.rank()).to_string();
        let port = (&self.port.device, self.port.port);
        let (mut fabric, views) =
            Fabric::open(&plan.counters, port.0, port.1, &host, self.printer)?;
        raw.extend(views);
        for exporter in summaries.iter_mut().chain(&mut raw) {
            exporter.start(&run)?;
        }
        let mut checked = Checked::default();
        let mut below_limit = None;
        let order = rounds::schedule(&sizes, plan.rounds);
        let order_sizes: Vec<u64> = order.iter().map(|&(_, size)| size).collect();
        // --rounds R > 1: each size's results, by its place in `sizes`.
        let mut by_size: Vec<Vec<VerbsResult>> = vec![Vec::new(); sizes.len()];
        let mut periods = Periods::new(plan, &order_sizes)?;
        while let Some(size) = periods.next(link.as_link())? {
            let step = periods.count() - 1;
            // --run_infinitely runs one round (its periods are not rounds).
            let round = order.get(step).map_or(1, |&(round, _)| round);
            let cpu = CpuWatch::start(plan.report.cpu_util, Root::new("/"));
            // The reports are gathered inside the counters' window: the passive side of
            // a write or read bandwidth test returns from `measure` at the start, and its
            // peer's report comes when the transfer is over.
            let (reports, counters) = fabric.around(|| {
                let report = self.measure(link.as_link(), &peer.qps, size)?;
                link.gather(&Message::Report(report), Patience::WhileMeasuring)?
                    .into_iter()
                    .map(|m| match m {
                        Message::Report(r) if r.as_ref().is_none_or(|r| r.size == size) => Ok(r),
                        other => Err(out_of_step(&other, &format!("the measurement of {size} B"))),
                    })
                    .collect::<anyhow::Result<Vec<Option<Report>>>>()
            })?;
            let cpu_util = cpu.and_then(CpuWatch::finish);
            for c in reports.iter().flatten().filter_map(|r| r.validation) {
                checked = checked.add(c);
            }
            if self.printer {
                let result = VerbsResult {
                    collective: plan.bench.collective().into(),
                    bidirectional: plan.bidirectional,
                    timestamp: now_utc(),
                    lines: lines_of(plan, size, &reports, &hellos, self.seat.pairs)?,
                    counters,
                    cpu_util,
                    round,
                    spread: None,
                };
                if plan.rounds == 1 {
                    if below_limit.is_none() {
                        below_limit = plan.options.limits.judge(&result.lines);
                    }
                    for exporter in &mut summaries {
                        exporter.record(&run, &result)?;
                    }
                } else {
                    by_size[step % sizes.len()].push(result.clone());
                }
                for exporter in &mut raw {
                    exporter.record(&run, &result)?;
                }
            }
        }
        for rounds in by_size.iter().filter(|r| !r.is_empty()) {
            let result = rounds::median_result(rounds)?;
            if below_limit.is_none() {
                below_limit = plan.options.limits.judge(&result.lines);
            }
            for exporter in &mut summaries {
                exporter.record(&run, &result)?;
            }
        }
        for exporter in summaries.iter_mut().chain(&mut raw) {
            exporter.finish(&run, &Summary::default())?;
        }
        if let (Some(signal), true) = (&periods.stopped_by, self.printer) {
            eprintln!(
                "{}: --run_infinitely: stopped by {signal} after {} periods",
                plan.bench.program(),
                periods.count()
            );
        }
        // The side that prints says it (once per job under mpirun).
        if self.printer && checked.wrong > 0 {
            bail!(wrong_summary(
                plan.bench.program(),
                checked.wrong,
                checked.messages
            ));
        }
        if let Some(below) = below_limit {
            bail!(below);
        }
        Ok(())
    }

    /// One size on this side: prepare, start together, run; the measurement
    /// where this side made one.
    pub fn measure(
        &mut self,
        link: &mut dyn Link,
        remote: &[QpInfo],
        size: u64,
    ) -> anyhow::Result<Option<Report>> {
        let plan = self.plan;
        let verb = plan.bench.verb;
        let client = self.seat.client();
        let len = size as u32;
        let (bw, lat, checked) = match plan.bench.test {
            Test::Bw => {
                let roles = bw::Roles {
                    sending: client || plan.bidirectional,
                    receiving: takes_receives(plan) && (!client || plan.bidirectional),
                };
                if roles.receiving {
                    bw::post_receives(self.endpoint, len, plan)?;
                }
                rdma_check::prepare(self.endpoint, len, plan, client);
                start_together(link, size)?;
                if roles.sending && plan.options.warm_up {
                    bw::warm_up(self.endpoint, remote, verb, len, plan)?;
                }
                let (measured, checked) = if rdma_check::watches(plan, roles.sending) {
                    let checked = rdma_check::watch_writes(self.endpoint, remote, len, plan)?;
                    (None, checked)
                } else {
                    bw::run(self.endpoint, remote, verb, len, plan, roles, &self.clock)?
                };
                let bw = measured.map(|m| BwReport {
                    messages: m.messages,
                    elapsed_ns: m.elapsed_ns,
                    peak_msgs_per_s: m.peak_msgs_per_s,
                    histogram: histogram_bytes(&m.histogram),
                });
                (bw, None, checked)
            }
            Test::Lat => {
                match verb {
                    Verb::Send => lat::post_receives(self.endpoint, len, plan)?,
                    Verb::Write if plan.timing.write_imm => {
                        lat::post_receives(self.endpoint, len, plan)?
                    }
                    Verb::Write => lat::clear_flags(self.endpoint, len),
                    Verb::Read | Verb::Atomic => {}
                }
                start_together(link, size)?;
                let (stamps, checked) = lat::run(
                    self.endpoint,
                    &remote[0],
                    verb,
                    len,
                    plan,
                    client,
                    &self.clock,
                )?;
                let lat = match stamps {
                    None => None,
                    Some(stamps) => {
                        let samples = lat::samples(&stamps, lat::rtt_factor(verb));
                        if self.printer {
                            let labelled = self.seat.pairs > 1;
                            plan.report
                                .print_dump(&samples, labelled, plan.options.validate);
                        }
                        let stats = lat::perftest_stats(&samples).ok_or_else(|| {
                            anyhow!(
                                "{size} B: {} round trips are too few for statistics; raise -n or -D",
                                samples.len()
                            )
                        })?;
                        Some(LatReport {
                            iterations: stamps.len() as u64,
                            stats,
                            histogram: histogram_bytes(&lat::histogram_of(&samples)),
                        })
                    }
                };
                (None, lat, checked)
            }
        };
        // --data_validation: a side that only received still reports what it checked.
        let validation = plan.options.validate.then_some(checked);
        let made = bw.is_some() || lat.is_some() || validation.is_some();
        Ok(made.then_some(Report {
            size,
            bw,
            lat,
            validation,
        }))
    }
}

impl Session<'_> {
    /// The perftest header of this side.
    fn header(&self, hellos: &[Hello], mtu: u32, out_reads: u8) -> PerftestHeader {
        let plan = self.plan;
        let pairs = self.seat.pairs;
        let mine = &hellos[self.seat.endpoint];
        let peer = &hellos[self.seat.peer()];
        let exchange = if self.job.size() > 1 {
            format!("MPI ({} ranks, {pairs} pairs)", self.job.size())
        } else if plan.cm.exchange {
            "rdma_cm".to_string()
        } else {
            // perftest's name for its TCP exchange.
            "Ethernet".to_string()
        };
        let pair_lines = if self.job.size() > 1 {
            (0..pairs)
                .map(|p| {
                    let (c, s) = (&hellos[p], &hellos[p + pairs]);
                    format!(
                        "pair {p}: rank {p} {} {}:{} -> rank {} {} {}:{}",
                        c.host,
                        c.device,
                        c.port,
                        p + pairs,
                        s.host,
                        s.device,
                        s.port
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut warnings: Vec<String> = if plan.cpu_freq_warning {
            cpu_governor_warning(&Root::new("/")).into_iter().collect()
        } else {
            Vec::new()
        };
        if plan.bench.verb.fetches() {
            warnings.extend(plan.options.outs_warning(out_reads));
        }
        // The device refused extended QPs: say it, as the ibv_wr* API line is OFF.
        warnings.extend(self.endpoint.post.api.warning(&self.port.device));
        VerbsHeader {
            plan,
            mine,
            peer,
            transport: &self.port.transport,
            gid: self.port.gid.as_ref().map(|g| g.describe()),
            mtu,
            out_reads,
            sending: self.seat.client(),
            exchange,
            pair_count: pairs,
            pairs: pair_lines,
            warnings,
            post: crate::verbs::device::post::header_lines(plan, &self.endpoint.post),
        }
        .facts()
    }
}

/// Both sides ready for `size` (receives posted, flags cleared): go.
fn start_together(link: &mut dyn Link, size: u64) -> anyhow::Result<()> {
    match link.swap(&Message::Ready { size }, Patience::Prompt)? {
        Message::Ready { size: theirs } if theirs == size => Ok(()),
        other => Err(out_of_step(
            &other,
            &format!("the start signal of {size} B"),
        )),
    }
}

/// The peer sent `got` where this side expected something else.
pub fn out_of_step(got: &Message, expected: &str) -> anyhow::Error {
    anyhow!(
        "the peer is out of step: it sent {} while this side expected {expected}",
        got.kind()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::verbs::{Figures, Line};
    use crate::report::ToRows;
    use crate::verbs::flags::benchmark::Benchmark;
    use crate::verbs::flags::parse;
    use crate::verbs::results::figures::bw_figures;

    /// The CSV of these lines as `csv_row` wrote it before the rows moved to
    /// `report::verbs`: the same run and lines give the same bytes.
    // Then the collectives' wrong_ranks and groups columns, empty here.
    const ROWS_BEFORE: &str = "\
1,20250101T000000Z-00042,2025-01-01T00:00:00.123Z,0.1.0,verbs,RC over RoCE v2,libibverbs.so.1,\"rxe0:1,rxe1:1\",a;b,4,2,ib_write,none,none,-1,bw,65536,5000,5000,128,none,0,20.0,3.2768,3.2768,1.0,1.0,3.001,7.503,7.503,7.503,,0,port rate rxe0:1 10 Gb/sec (1X QDR),1.25,262.144,NCCL_X=1;UCX_Y=2,,,3.93216,0.05,,0,,,,,,,,,,,,\n\
1,20250101T000000Z-00042,2025-01-01T00:00:00.123Z,0.1.0,verbs,RC over RoCE v2,libibverbs.so.1,\"rxe0:1,rxe1:1\",a;b,4,2,ib_send,none,none,-1,bw_bidir,65536,5000,5000,128,none,0,20.0,3.2768,3.2768,1.0,1.0,3.001,7.503,7.503,7.503,,0,port rate rxe0:1 10 Gb/sec (1X QDR),1.25,262.144,NCCL_X=1;UCX_Y=2,,,,0.05,,sum,,,,,,,,,,,,\n\
1,20250101T000000Z-00042,2025-01-01T00:00:00.123Z,0.1.0,verbs,RC over RoCE v2,libibverbs.so.1,\"rxe0:1,rxe1:1\",a;b,4,2,ib_write,none,none,-1,bw,65536,5000,5000,128,none,0,20.0,3.2768,3.2768,1.0,1.0,3.001,7.503,7.503,7.503,,0,,,,NCCL_X=1;UCX_Y=2,,,8.0908582912,0.05,,1,,,,,,,,,,,,\n\
1,20250101T000000Z-00042,2025-01-01T00:00:00.123Z,0.1.0,verbs,RC over RoCE v2,libibverbs.so.1,\"rxe0:1,rxe0:1\",a;a,4,1,ib_read,none,none,-1,lat,2,1000,5000,128,none,0,1.7666666666666668,0.0011320754716981133,0.0011320754716981133,1.0,1.5,2.0,9.007,9.007,9.007,,0,,,,NCCL_X=1;UCX_Y=2,,,,,0.20548046676563256,all,,,,,,,,,,,,\n\
";

    #[test]
    fn csv_rows_are_byte_for_byte_those_of_before() {
        let write_bw = Benchmark::new(Verb::Write, Test::Bw);
        let plan = parse(write_bw, ["ib_write_bw", "--perform_warm_up"]).unwrap();
        let run = RunInfo {
            run_id: "20250101T000000Z-00042".into(),
            tool_version: "0.1.0".into(),
            env: vec!["NCCL_X=1".into(), "UCX_Y=2".into()],
            ..run_info(&plan, 2, Some(GidKind::RoceV2))
        };
        let limit = Some(crate::limits::Limit {
            name: "port rate rxe0:1 10 Gb/sec (1X QDR)".into(),
            gbs: 1.25,
        });
        let bw = |label: Option<&str>, peak: Option<f64>, limit| Line {
            size: 65536,
            label: label.map(str::to_string),
            figures: bw_figures(
                65536,
                5000,
                100_000_000,
                peak,
                crate::stats::histogram(&[1e-6, 3e-6, 7.5e-6]),
            ),
            limit,
            devices: "rxe0:1,rxe1:1".into(),
            hosts: vec!["a".into(), "b".into()],
            wrong: None,
            direction: None,
        };
        let samples = [1500.0, 2000.0, 2250.0, 9000.0, 1800.0];
        let lat = Line {
            size: 2,
            label: Some("all".into()),
            figures: Figures::Lat {
                iterations: 1000,
                stats: lat::perftest_stats(&samples).unwrap(),
                histogram: lat::histogram_of(&samples),
            },
            limit: limit.clone(),
            devices: "rxe0:1,rxe0:1".into(),
            hosts: vec!["a".into(), "a".into()],
            wrong: None,
            direction: None,
        };
        let result = |collective: &str, bidirectional, lines| VerbsResult {
            collective: collective.into(),
            bidirectional,
            timestamp: "2025-01-01T00:00:00.123Z".into(),
            lines,
            counters: None,
            cpu_util: None,
            round: 1,
            spread: None,
        };
        let results = [
            result(
                "ib_write",
                false,
                vec![bw(None, Some(60_000.0), limit.clone())],
            ),
            result("ib_send", true, vec![bw(Some("sum"), None, limit.clone())]),
            result(
                "ib_write",
                false,
                vec![bw(Some("1"), Some(123_456.7), None)],
            ),
            result("ib_read", false, vec![lat]),
        ];
        let mut w = ::csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        for row in results.iter().flat_map(|r| r.rows(&run)) {
            w.serialize(row).unwrap();
        }
        // Byte for byte, with the columns added since at the end (round, then
        // expected_busbw_gbs and pct_of_expected, empty: no model for verbs).
        let now: String = ROWS_BEFORE.lines().map(|l| format!("{l},1,,\n")).collect();
        assert_eq!(String::from_utf8(w.into_inner().unwrap()).unwrap(), now);
    }

    #[test]
    fn run_facts_of_the_rows() {
        let send_lat = Benchmark::new(Verb::Send, Test::Lat);
        let plan = parse(send_lat, ["ib_send_lat", "-D", "2"]).unwrap();
        let run = run_info(&plan, 1, None);
        assert_eq!((run.transport.as_str(), run.nranks), ("RC over IB", 2));
        // -D has no iteration count; latency tests do not warm up.
        assert_eq!((run.iters, run.warmup_iters), (0, 0));
        assert_eq!((run.backend_name(), run.average_name()), ("verbs", "none"));
        let read_bw = Benchmark::new(Verb::Read, Test::Bw);
        let plan = parse(read_bw, ["ib_read_bw", "-n", "50", "--perform_warm_up"]).unwrap();
        let run = run_info(&plan, 3, Some(GidKind::RoceV1));
        assert_eq!((run.transport.as_str(), run.nranks), ("RC over RoCE v1", 6));
        assert_eq!((run.iters, run.warmup_iters), (50, 50));
        // perftest's default now: no warm-up unless asked for.
        let plan = parse(read_bw, ["ib_read_bw", "-n", "50"]).unwrap();
        assert_eq!(run_info(&plan, 1, None).warmup_iters, 0);
    }

    #[test]
    fn a_governor_other_than_performance_is_a_warning() {
        let dir = std::env::temp_dir().join(format!("verbs-governor-{}", std::process::id()));
        let file = dir.join("sys/devices/system/cpu/cpu0/cpufreq");
        std::fs::create_dir_all(&file).unwrap();
        let root = Root::new(&dir);
        assert_eq!(cpu_governor_warning(&root), None, "no cpufreq: no warning");
        std::fs::write(file.join("scaling_governor"), "performance\n").unwrap();
        assert_eq!(cpu_governor_warning(&root), None);
        std::fs::write(file.join("scaling_governor"), "powersave\n").unwrap();
        let w = cpu_governor_warning(&root).unwrap();
        assert!(
            w.starts_with("the CPU frequency governor is 'powersave', not 'performance'"),
            "{w}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
