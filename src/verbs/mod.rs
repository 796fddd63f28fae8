//! The raw RDMA verbs benchmarks, perftest's ib_{write,read,send}_{bw,lat} over
//! RC queue pairs, on the `sideway` crate.
//!
//! Every process is one endpoint of a pair. mpirun with 2k ranks makes k pairs
//! (rank i is the client of pair i, rank i + k its server) that exchange their
//! details over MPI; a plain start (no MPI launcher) is a job of one that does
//! not start MPI and finds its peer over TCP, perftest-style (without HOST the
//! server, with HOST the client).
//!
//! - `args`: perftest's flags into a `Plan`; `device`: device, port, GID, rate;
//! - `memory`, `qp`, `completion`: buffers, queue pairs, completions;
//! - `exchange`: the validated messages and the TCP/MPI links;
//! - `bw`, `lat`: the timed loops; `output`: perftest's header, table, CSV rows.

pub mod args;
pub mod bw;
pub mod completion;
pub mod device;
pub mod exchange;
pub mod lat;
pub mod memory;
pub mod output;
pub mod pairs;
pub mod qp;

use crate::job::world::{hostname, launched_by_mpi, World};
use crate::report::csv::CsvExport;
use crate::report::run::{new_run_id, now_utc, relevant_env};
use args::{Length, Plan};
use device::{device_name_for, open_port, Port};
use exchange::{
    check_peer, histogram_bytes, histogram_from, path_mtu, BwReport, Hello, LatReport, Link,
    Message, MpiLink, Patience, Report, TcpLink, PROTOCOL,
};
use output::{
    all_lat, bw_figures, connection_lines, csv_row, header_block, sum_bw, table_header, table_row,
    CsvContext, Figures, Header, Limit, Line, RESULT_LINE,
};
use qp::Endpoint;
use std::process::ExitCode;
use std::time::Instant;

/// Exit statuses: 1 a failed run, 2 a usage error (as the collectives).
const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Write,
    Read,
    Send,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    Bw,
    Lat,
}

/// One of the six binaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Benchmark {
    pub verb: Verb,
    pub test: Test,
}

impl Benchmark {
    pub const fn new(verb: Verb, test: Test) -> Benchmark {
        Benchmark { verb, test }
    }

    pub fn program(self) -> &'static str {
        match (self.verb, self.test) {
            (Verb::Write, Test::Bw) => "ib_write_bw",
            (Verb::Read, Test::Bw) => "ib_read_bw",
            (Verb::Send, Test::Bw) => "ib_send_bw",
            (Verb::Write, Test::Lat) => "ib_write_lat",
            (Verb::Read, Test::Lat) => "ib_read_lat",
            (Verb::Send, Test::Lat) => "ib_send_lat",
        }
    }

    /// The CSV `collective` column.
    pub fn collective(self) -> &'static str {
        match self.verb {
            Verb::Write => "ib_write",
            Verb::Read => "ib_read",
            Verb::Send => "ib_send",
        }
    }
}

/// The timed loops' clock: CLOCK_MONOTONIC (std's `Instant`, a vDSO call), in
/// nanoseconds since the run began.
pub struct Clock {
    origin: Instant,
}

impl Clock {
    pub fn new() -> Clock {
        Clock {
            origin: Instant::now(),
        }
    }

    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// Where this process sits among the 2k endpoints of k pairs: endpoint p < k is
/// the client of pair p, endpoint p + k its server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seat {
    pub endpoint: usize,
    pub pairs: usize,
}

impl Seat {
    pub fn client(self) -> bool {
        self.endpoint < self.pairs
    }

    pub fn pair(self) -> usize {
        self.endpoint % self.pairs
    }

    pub fn peer(self) -> usize {
        (self.endpoint + self.pairs) % (2 * self.pairs)
    }
}

/// The seat of this rank: under mpirun from the rank, else from HOST.
pub fn seat(ranks: usize, rank: usize, host_given: bool) -> Result<Seat, String> {
    match ranks {
        1 => Ok(Seat {
            endpoint: if host_given { 0 } else { 1 },
            pairs: 1,
        }),
        n if n % 2 == 1 => Err(format!(
            "mpirun -np {n}: the ranks form pairs (rank i with rank i + np/2); start an even number"
        )),
        _ if host_given => Err(
            "HOST: under mpirun the pairs find each other through MPI; drop the server address"
                .into(),
        ),
        n => Ok(Seat {
            endpoint: rank,
            pairs: n / 2,
        }),
    }
}

/// How a run ends early: the message is printed already.
struct Stop(u8);

/// The processes of a run: one started by hand, or the ranks of an MPI job.
/// A plain start is a job of one rank without MPI's runtime: no daemon or
/// progress thread competes with the timed loops for the CPU.
pub enum Job {
    Alone { host: String },
    Mpi(World),
}

impl Job {
    fn start() -> anyhow::Result<Job> {
        Ok(if launched_by_mpi() {
            Job::Mpi(World::init()?)
        } else {
            Job::Alone { host: hostname() }
        })
    }

    fn world(&self) -> Option<&World> {
        match self {
            Job::Alone { .. } => None,
            Job::Mpi(w) => Some(w),
        }
    }

    fn rank(&self) -> usize {
        self.world().map_or(0, |w| w.rank)
    }

    fn size(&self) -> usize {
        self.world().map_or(1, |w| w.size)
    }

    fn local_rank(&self) -> usize {
        self.world().map_or(0, |w| w.local_rank)
    }

    fn host(&self, rank: usize) -> &str {
        match self {
            Job::Alone { host } => host,
            Job::Mpi(w) => &w.hosts[rank],
        }
    }

    fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        match self {
            Job::Alone { .. } => vec![mine.to_vec()],
            Job::Mpi(w) => w.all_gather_bytes(mine),
        }
    }
}

/// Entry point of the six binaries.
pub fn main(bench: Benchmark) -> ExitCode {
    let job = match Job::start() {
        Ok(job) => job,
        Err(e) => {
            eprintln!("{}: error: {e:#}", bench.program());
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let code = match run(&job, bench) {
        Ok(()) => 0,
        Err(Stop(code)) => code,
    };
    drop(job);
    ExitCode::from(code)
}

/// A step every rank takes that may fail on some: when any failed, rank 0
/// prints each distinct message (naming the ranks under mpirun) and all stop.
fn agree<T>(job: &Job, program: &str, code: u8, mine: Result<T, String>) -> Result<T, Stop> {
    let text = mine.as_ref().err().cloned().unwrap_or_default();
    let all = job.all_gather_bytes(text.as_bytes());
    if all.iter().all(Vec::is_empty) {
        return mine.map_err(|_| Stop(code));
    }
    if job.rank() == 0 {
        let failed: Vec<(usize, String)> = all
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.is_empty())
            .map(|(rank, m)| (rank, String::from_utf8_lossy(m).into_owned()))
            .collect();
        if failed.len() == job.size() && failed.iter().all(|(_, m)| *m == failed[0].1) {
            eprintln!("{program}: error: {}", failed[0].1);
        } else {
            for (rank, msg) in failed {
                eprintln!("{program}: rank {rank} ({}): error: {msg}", job.host(rank));
            }
        }
    }
    Err(Stop(code))
}

/// Opens the device and port of this side and creates its queue pairs; the
/// plan as it applies to that device.
fn open_side(plan: &Plan, local_rank: usize) -> Result<(Plan, Port, Endpoint), String> {
    let (plan, port) = open_device(plan, local_rank)?;
    let endpoint = Endpoint::create(&port, &plan)?;
    Ok((plan, port, endpoint))
}

/// Opens the device and port of this side; the plan as it applies to that device.
fn open_device(plan: &Plan, local_rank: usize) -> Result<(Plan, Port), String> {
    let port = open_port(
        device_name_for(&plan.devices, local_rank),
        plan.ib_port,
        plan.gid_index,
    )?;
    let plan = plan.on_device(port.software);
    let max = plan.max_size();
    if max > port.max_msg_size {
        let flag = if plan.sizes.len() > 1 {
            "-a/--all"
        } else {
            "-s/--size"
        };
        return Err(format!(
            "{flag}: {max}-byte messages exceed the largest message of {} port {} ({} bytes); use -s {} or less",
            port.device, port.port, port.max_msg_size, port.max_msg_size
        ));
    }
    Ok((plan, port))
}

/// perftest's -F check: a CPU frequency governor other than `performance`.
fn cpu_governor_warning() -> Option<String> {
    let governor =
        std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").ok()?;
    let governor = governor.trim();
    (governor != "performance").then(|| {
        format!(
            "the CPU frequency governor is '{governor}', not 'performance': results may vary \
             (cpupower frequency-set -g performance; -F hides this warning)"
        )
    })
}

fn run(job: &Job, bench: Benchmark) -> Result<(), Stop> {
    let program = bench.program();
    let parsed = args::parse(bench, std::env::args_os()).map_err(|e| e.0);
    let plan = agree(job, program, EXIT_USAGE, parsed)?;
    let launcher = job
        .world()
        .and_then(World::launcher_mismatch)
        .map_or(Ok(()), Err);
    agree(job, program, EXIT_USAGE, launcher)?;
    agree(job, program, EXIT_FAILED, memory::check_memory(plan.memory))?;
    if let Some(thresholds) = plan.all_pairs {
        let mpi = job.world().ok_or_else(|| {
            "--all-pairs: launch under mpirun with 2 or more ranks, one per node".to_string()
        });
        let world = agree(job, program, EXIT_USAGE, mpi)?;
        return pairs::run(job, world, &plan, thresholds);
    }
    let seat = agree(
        job,
        program,
        EXIT_USAGE,
        seat(job.size(), job.rank(), plan.host.is_some()),
    )?;
    let (plan, port, mut endpoint) = agree(
        job,
        program,
        EXIT_FAILED,
        open_side(&plan, job.local_rank()),
    )?;
    // The CSV is written by the side that prints the table: both sides of a
    // TCP pair when given --csv, rank 0 under mpirun.
    let printer = job.size() == 1 || job.rank() == 0;
    let csv = match (&plan.csv, printer) {
        (Some(path), true) => CsvExport::open(path, plan.append)
            .map(Some)
            .map_err(|e| format!("{e:#}")),
        _ => Ok(None),
    };
    let csv = agree(job, program, EXIT_FAILED, csv)?;

    let mut link: Box<dyn Link + '_> = if let Some(world) = job.world().filter(|w| w.size > 1) {
        Box::new(MpiLink {
            world,
            peer: seat.peer(),
            timeout: plan.timeout,
        })
    } else {
        let tcp = match &plan.host {
            Some(host) => TcpLink::connect(host, plan.tcp_port, plan.timeout),
            None => {
                println!(
                    "{program}: waiting up to {} s for a client on TCP port {} (start the same command with this host's address)",
                    plan.timeout.as_secs(),
                    plan.tcp_port
                );
                TcpLink::serve(plan.tcp_port, plan.timeout)
            }
        };
        Box::new(agree(job, program, EXIT_FAILED, tcp)?)
    };
    let mut session = Session {
        job,
        plan: &plan,
        seat,
        port: &port,
        endpoint: &mut endpoint,
        csv,
        printer,
        clock: Clock::new(),
    };
    if let Err(msg) = session.run(&mut *link) {
        let who = if job.size() > 1 {
            format!("rank {} ({}): ", job.rank(), job.host(job.rank()))
        } else {
            String::new()
        };
        eprintln!("{program}: {who}error: {msg}");
        link.abandon(&msg);
        return Err(Stop(EXIT_FAILED));
    }
    Ok(())
}

/// One side of a connected pair and what it prints.
struct Session<'a> {
    job: &'a Job,
    plan: &'a Plan,
    seat: Seat,
    port: &'a Port,
    endpoint: &'a mut Endpoint,
    csv: Option<CsvExport>,
    printer: bool,
    clock: Clock,
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
    fn connect(&mut self, link: &mut dyn Link) -> Result<(Vec<Hello>, u32, u8), String> {
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
        let out_reads = self
            .port
            .max_rd_atomic
            .min(peer.max_rd_atomic)
            .min(u8::MAX as u32) as u8;
        self.endpoint
            .connect(self.port, plan, peer, mtu, out_reads)?;
        Ok((hellos, mtu, out_reads))
    }

    fn run(&mut self, link: &mut dyn Link) -> Result<(), String> {
        let plan = self.plan;
        let (hellos, mtu, out_reads) = self.connect(link)?;
        let peer = &hellos[self.seat.peer()];
        if self.printer {
            self.print_header(&hellos, mtu, out_reads);
        }
        let mut ctx = self.csv_context();
        for &size in &plan.sizes {
            let report = self.measure(link, &peer.qps, size)?;
            let reports: Vec<Option<Report>> = link
                .gather(&Message::Report(report), Patience::WhileMeasuring)?
                .into_iter()
                .map(|m| match m {
                    Message::Report(r) if r.as_ref().map_or(true, |r| r.size == size) => Ok(r),
                    other => Err(out_of_step(&other, &format!("the measurement of {size} B"))),
                })
                .collect::<Result<_, _>>()?;
            if self.printer {
                let lines = lines_of(plan, size, &reports, &hellos, self.seat.pairs)?;
                for line in &lines {
                    println!("{}", table_row(line, plan.report_gbits));
                }
                if let Some(csv) = &mut self.csv {
                    ctx.timestamp = now_utc();
                    csv.write_rows(lines.iter().map(|l| csv_row(&ctx, l)))
                        .map_err(|e| format!("{e:#}"))?;
                }
            }
        }
        if self.printer {
            println!("{RESULT_LINE}");
        }
        Ok(())
    }

    /// One size on this side: prepare, start together, run; the measurement
    /// where this side made one.
    fn measure(
        &mut self,
        link: &mut dyn Link,
        remote: &[exchange::QpInfo],
        size: u64,
    ) -> Result<Option<Report>, String> {
        let plan = self.plan;
        let verb = plan.bench.verb;
        let client = self.seat.client();
        let len = size as u32;
        match plan.bench.test {
            Test::Bw => {
                let roles = bw::Roles {
                    sending: client || plan.bidirectional,
                    receiving: verb == Verb::Send && (!client || plan.bidirectional),
                };
                if roles.receiving {
                    bw::post_receives(self.endpoint, len, plan)?;
                }
                start_together(link, size)?;
                if roles.sending && verb != Verb::Send {
                    bw::warm_up(self.endpoint, remote, verb, len, plan)?;
                }
                let measured = bw::run(self.endpoint, remote, verb, len, plan, roles, &self.clock)?;
                Ok(measured.map(|m| Report {
                    size,
                    bw: Some(BwReport {
                        messages: m.messages,
                        elapsed_ns: m.elapsed_ns,
                        peak_msgs_per_s: m.peak_msgs_per_s,
                        histogram: histogram_bytes(&m.histogram),
                    }),
                    lat: None,
                }))
            }
            Test::Lat => {
                match verb {
                    Verb::Send => lat::post_receives(self.endpoint, len, plan)?,
                    Verb::Write => lat::clear_flags(self.endpoint, len),
                    Verb::Read => {}
                }
                start_together(link, size)?;
                let stamps = lat::run(
                    self.endpoint,
                    &remote[0],
                    verb,
                    len,
                    plan,
                    client,
                    &self.clock,
                )?;
                let Some(stamps) = stamps else {
                    return Ok(None);
                };
                let samples = lat::samples(&stamps, lat::rtt_factor(verb));
                let stats = lat::perftest_stats(&samples).ok_or_else(|| {
                    format!(
                        "{size} B: {} round trips are too few for statistics; raise -n or -D",
                        samples.len()
                    )
                })?;
                Ok(Some(Report {
                    size,
                    bw: None,
                    lat: Some(LatReport {
                        iterations: stamps.len() as u64,
                        stats,
                        histogram: histogram_bytes(&lat::histogram_of(&samples)),
                    }),
                }))
            }
        }
    }
}

/// Both sides ready for `size` (receives posted, flags cleared): go.
fn start_together(link: &mut dyn Link, size: u64) -> Result<(), String> {
    match link.swap(&Message::Ready { size }, Patience::Prompt)? {
        Message::Ready { size: theirs } if theirs == size => Ok(()),
        other => Err(out_of_step(
            &other,
            &format!("the start signal of {size} B"),
        )),
    }
}

fn out_of_step(got: &Message, expected: &str) -> String {
    format!(
        "the peer is out of step: it sent {} while this side expected {expected}",
        got.kind()
    )
}

impl Session<'_> {
    fn print_header(&self, hellos: &[Hello], mtu: u32, out_reads: u8) {
        let plan = self.plan;
        let pairs = self.seat.pairs;
        let mine = &hellos[self.seat.endpoint];
        let peer = &hellos[self.seat.peer()];
        let exchange = if self.job.size() > 1 {
            format!("MPI ({} ranks, {pairs} pairs)", self.job.size())
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
        let warnings = if plan.cpu_freq_warning {
            cpu_governor_warning().into_iter().collect()
        } else {
            Vec::new()
        };
        let header = Header {
            plan,
            mine,
            transport: &self.port.transport,
            gid: self.port.gid.as_ref().map(|g| g.describe()),
            mtu,
            out_reads,
            sending: self.seat.client(),
            exchange,
            pairs: pair_lines,
            warnings,
        };
        let mut lines = header_block(&header);
        lines.extend(connection_lines("local", mine));
        lines.extend(connection_lines("remote", peer));
        lines.push(RESULT_LINE.to_string());
        lines.push(table_header(plan.bench.test, plan.report_gbits, pairs > 1));
        for line in lines {
            println!("{line}");
        }
    }

    fn csv_context(&self) -> CsvContext {
        let plan = self.plan;
        let transport = match &self.port.gid {
            Some(g) => format!("RC over {}", g.entry.kind),
            None => "RC over IB".to_string(),
        };
        let warms_up = plan.bench.test == Test::Bw && plan.bench.verb != Verb::Send;
        CsvContext {
            run_id: new_run_id(chrono::Utc::now()),
            timestamp: now_utc(),
            bench: plan.bench,
            bidirectional: plan.bidirectional,
            transport,
            library_version: "libibverbs.so.1".into(),
            nranks: 2 * self.seat.pairs,
            iters: match plan.length {
                Length::Iters(n) => n as usize,
                Length::Duration(_) => 0,
            },
            warmup_iters: if warms_up { plan.tx_depth as usize } else { 0 },
            env: relevant_env().join(";"),
        }
    }
}

/// The printed lines of one size: one per pair, and with several pairs their
/// sum (bandwidth) or their merged samples (latency).
pub fn lines_of(
    plan: &Plan,
    size: u64,
    reports: &[Option<Report>],
    hellos: &[Hello],
    pairs: usize,
) -> Result<Vec<Line>, String> {
    let mut lines = Vec::with_capacity(pairs + 1);
    for p in 0..pairs {
        let ends = [p, p + pairs];
        let figures = pair_figures(plan, size, p, &ends.map(|e| reports[e].as_ref()))?;
        lines.push(Line {
            size,
            label: (pairs > 1).then(|| p.to_string()),
            figures,
            limit: port_limit(&[&hellos[p]], &[&hellos[p + pairs]], plan.bidirectional),
            devices: ends
                .iter()
                .map(|&e| format!("{}:{}", hellos[e].device, hellos[e].port))
                .collect::<Vec<_>>()
                .join(","),
            hosts: ends.iter().map(|&e| hellos[e].host.clone()).collect(),
        });
    }
    if pairs > 1 {
        let parts: Vec<Figures> = lines.iter().map(|l| l.figures.clone()).collect();
        let (label, figures) = match plan.bench.test {
            Test::Bw => ("sum", sum_bw(&parts)),
            Test::Lat => ("all", all_lat(&parts)),
        };
        let clients: Vec<&Hello> = hellos[..pairs].iter().collect();
        let servers: Vec<&Hello> = hellos[pairs..].iter().collect();
        lines.push(Line {
            size,
            label: Some(label.into()),
            figures,
            limit: port_limit(&clients, &servers, plan.bidirectional),
            devices: lines
                .iter()
                .map(|l| l.devices.clone())
                .collect::<Vec<_>>()
                .join(","),
            hosts: lines.iter().flat_map(|l| l.hosts.clone()).collect(),
        });
    }
    Ok(lines)
}

/// A pair's figures: the client's measurement, plus the server's with -b
/// (perftest adds both directions; #iterations stays one side's).
fn pair_figures(
    plan: &Plan,
    size: u64,
    pair: usize,
    ends: &[Option<&Report>; 2],
) -> Result<Figures, String> {
    let missing = || format!("pair {pair} sent no measurement of {size} B");
    match plan.bench.test {
        Test::Bw => {
            let parts = ends
                .iter()
                .flatten()
                .filter_map(|r| r.bw.as_ref())
                .map(|b| {
                    Ok(bw_figures(
                        size,
                        b.messages,
                        b.elapsed_ns,
                        b.peak_msgs_per_s,
                        histogram_from(&b.histogram)?,
                    ))
                })
                .collect::<Result<Vec<_>, String>>()?;
            let mut figures = match parts.as_slice() {
                [] => return Err(missing()),
                [one] => one.clone(),
                _ => sum_bw(&parts),
            };
            if let (
                Figures::Bw { iterations, .. },
                Figures::Bw {
                    iterations: one, ..
                },
            ) = (&mut figures, &parts[0])
            {
                *iterations = *one;
            }
            Ok(figures)
        }
        Test::Lat => {
            let lat = ends[0].and_then(|r| r.lat.as_ref()).ok_or_else(missing)?;
            Ok(Figures::Lat {
                iterations: lat.iterations,
                stats: lat.stats.clone(),
                histogram: histogram_from(&lat.histogram)?,
            })
        }
    }
}

/// The port-rate bound of traffic from `clients` to `servers` (each port
/// counted once, however many pairs share it): the smaller of the two sides'
/// total rates; twice that with -b. None when a rate is unknown.
pub fn port_limit(clients: &[&Hello], servers: &[&Hello], bidirectional: bool) -> Option<Limit> {
    let side = |ends: &[&Hello]| -> Option<(f64, String)> {
        let mut seen: Vec<(String, f64, String)> = Vec::new();
        for h in ends {
            let id = format!("{}/{}:{}", h.host, h.device, h.port);
            let rate = h.rate.as_ref()?;
            if !seen.iter().any(|(s, _, _)| *s == id) {
                seen.push((
                    id,
                    rate.gbit_per_s,
                    format!("{}:{} {}", h.device, h.port, rate.text),
                ));
            }
        }
        let total = seen.iter().map(|(_, r, _)| r).sum();
        let names = seen
            .into_iter()
            .map(|(_, _, n)| n)
            .collect::<Vec<_>>()
            .join(" + ");
        Some((total, names))
    };
    let (c, s) = (side(clients)?, side(servers)?);
    let (gbit, names) = if s.0 < c.0 { s } else { c };
    let factor = if bidirectional { 2.0 } else { 1.0 };
    Some(Limit {
        name: format!(
            "port rate {names}{}",
            if bidirectional {
                ", both directions"
            } else {
                ""
            }
        ),
        gbs: gbit / 8.0 * factor,
    })
}
