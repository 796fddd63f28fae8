//! `ib_write_bw --all-pairs` and `ib_write_lat --all-pairs`: the verbs pair of
//! the all-pairs runner (`crate::allpairs`). In each round a rank connects a
//! fresh RC queue pair to its partner of that round (connection details
//! exchanged by MPI point-to-point between just the two ranks) and runs the
//! binary's timed loop at every size, as a plain pair would.

use crate::allpairs::{run_pairs, PairMeasure, PairRun, PairSample, PairsOf, Thresholds};
use crate::job::{agree, ExitStatus, Failure, Job, World};
use crate::report::counters::{FabricPlan, Meant};
use crate::verbs::device::qp::Endpoint;
use crate::verbs::device::Port;
use crate::verbs::exchange::seat::Seat;
use crate::verbs::exchange::wire::{decode, encode, Message, QpInfo, Report};
use crate::verbs::exchange::{
    accept, pair_order, Link, Patience, ARRIVAL_POLL_MAX, ARRIVAL_POLL_MIN,
};
use crate::verbs::failure_step;
use crate::verbs::flags::benchmark::Test;
use crate::verbs::flags::{Length, Plan};
use crate::verbs::measure::clock::Clock;
use crate::verbs::session::{open_device, out_of_step, Session, SideLink};
use crate::watchdog::Watchdog;
use anyhow::anyhow;
use mpi::point_to_point::{Destination, Source};
use mpi::topology::Communicator;

/// The messages of one pair, sent point-to-point between its two ranks (the
/// other pairs of the round are busy with their own). A hang is the
/// watchdog's (-T is --timeout here) to report.
struct PairLink<'w> {
    world: &'w World,
    peer: usize,
}

impl PairLink<'_> {
    /// This side's place in the pair: the lower rank is the client.
    fn seat(&self) -> Seat {
        Seat {
            endpoint: usize::from(self.world.rank > self.peer),
            pairs: 1,
        }
    }
}

impl PairLink<'_> {
    /// The peer's next frame, asleep between looks: a rank spinning in a
    /// blocking receive takes a CPU from the transfer it waits for (with
    /// Soft-RoCE, the kernel threads that move the data).
    fn receive(&self) -> Vec<u8> {
        let other = self.world.comm.process_at_rank(self.peer as i32);
        let mut pause = ARRIVAL_POLL_MIN;
        while other.immediate_probe().is_none() {
            std::thread::sleep(pause);
            pause = (pause * 2).min(ARRIVAL_POLL_MAX);
        }
        other.receive_vec().0
    }
}

impl SideLink for PairLink<'_> {
    fn as_link(&mut self) -> &mut dyn Link {
        self
    }
}

impl Link for PairLink<'_> {
    fn swap(&mut self, mine: &Message, _patience: Patience) -> anyhow::Result<Message> {
        let other = self.world.comm.process_at_rank(self.peer as i32);
        let frame = encode(mine);
        // The lower rank sends first: two blocking sends never meet.
        let theirs: Vec<u8> = if self.world.rank < self.peer {
            other.send(&frame[..]);
            self.receive()
        } else {
            let theirs = self.receive();
            other.send(&frame[..]);
            theirs
        };
        let theirs = decode(&theirs).map_err(|e| anyhow!("rank {} sent {e:#}", self.peer))?;
        accept(theirs, &format!("rank {}", self.peer))
    }

    fn gather(&mut self, mine: &Message, patience: Patience) -> anyhow::Result<Vec<Message>> {
        let theirs = self.swap(mine, patience)?;
        Ok(pair_order(self.seat().client(), mine, theirs))
    }

    fn abandon(&mut self, _reason: &str) {
        // The other ranks may wait in a barrier of the runner: only ending the job frees them.
        self.world.comm.abort(ExitStatus::Failed.code() as i32)
    }
}

/// The queue pairs of this round, connected to `peer`.
struct Connected {
    peer: usize,
    endpoint: Endpoint,
    remote: Vec<QpInfo>,
}

/// One rank's side of the verbs pairs.
pub struct VerbsPair<'a> {
    job: &'a Job,
    world: &'a World,
    plan: &'a Plan,
    port: &'a Port,
    connected: Option<Connected>,
}

impl VerbsPair<'_> {
    fn session<'s>(&'s self, endpoint: &'s mut Endpoint, seat: Seat) -> Session<'s> {
        Session {
            job: self.job,
            plan: self.plan,
            seat,
            port: self.port,
            endpoint,
            csv: None,
            printer: false,
            clock: Clock::new(),
        }
    }

    /// New queue pairs connected to the peer of `link` (an RC queue pair is
    /// connected to one peer for its life, so each round makes its own).
    fn connect(&mut self, link: &mut PairLink) -> anyhow::Result<Connected> {
        let mut endpoint = Endpoint::create(self.port, self.plan)?;
        let (hellos, _, _) = self.session(&mut endpoint, link.seat()).connect(link)?;
        let remote = hellos[link.seat().peer()].qps.clone();
        Ok(Connected {
            peer: link.peer,
            endpoint,
            remote,
        })
    }
}

/// A pair's sample from this side's report: the client's (and with -b the
/// server's) figures; NaN where this side measured nothing, so the runner
/// takes the other side's. Bandwidth tests time messages, not exchanges: their
/// mean and median are both the mean time of one message.
fn sample_of(report: Option<Report>) -> PairSample {
    let (seconds, p50_seconds) = match report {
        Some(Report { bw: Some(b), .. }) if b.messages > 0 => {
            let s = b.elapsed_ns as f64 / 1e9 / b.messages as f64;
            (s, s)
        }
        Some(Report { lat: Some(l), .. }) => (l.stats.t_avg_us * 1e-6, l.stats.t_typical_us * 1e-6),
        _ => (f64::NAN, f64::NAN),
    };
    PairSample {
        seconds,
        p50_seconds,
        wrong: None,
        // The timed loop runs inside the verbs session, beside its setup:
        // not read, so no wait is taken off.
        cpu_wait_seconds: None,
    }
}

impl PairMeasure for VerbsPair<'_> {
    fn describe(&self) -> String {
        let plan = self.plan;
        let what = match plan.bench.test {
            Test::Bw if plan.bidirectional => {
                "RDMA writes both ways at once (-b), time per message of the slower side"
            }
            Test::Bw => "RDMA writes from the lower rank to the higher, time per message",
            Test::Lat => "RDMA write ping-pong, half the round trip (perftest's latency)",
        };
        format!(
            "{} over RC, {} QP(s) on {} port {}: {what}",
            plan.bench.program(),
            plan.qps,
            self.port.device,
            self.port.port
        )
    }

    fn measure(
        &mut self,
        peer: usize,
        bytes: usize,
        watchdog: &Watchdog,
    ) -> anyhow::Result<PairSample> {
        let mut link = PairLink {
            world: self.world,
            peer,
        };
        watchdog.enter_call();
        if self.connected.as_ref().is_none_or(|c| c.peer != peer) {
            self.connected = None;
            self.connected = Some(self.connect(&mut link)?);
        }
        let mut connected = self.connected.take().expect("connected above");
        watchdog.enter_call();
        let size = bytes as u64;
        let report = self
            .session(&mut connected.endpoint, link.seat())
            .measure(&mut link, &connected.remote, size)
            .and_then(|report| {
                // The pair ends together: the side that only serves keeps its
                // queue pair until the other side's last completion.
                match link.swap(&Message::Report(report.clone()), Patience::WhileMeasuring)? {
                    Message::Report(r) if r.as_ref().is_none_or(|r| r.size == size) => Ok(report),
                    other => Err(out_of_step(&other, &format!("the measurement of {size} B"))),
                }
            });
        self.connected = Some(connected);
        Ok(sample_of(report?))
    }
}

/// The all-pairs run of ib_write_bw/ib_write_lat: every rank opens its port,
/// then the runner measures each pair in turn.
pub(super) fn run(
    job: &Job,
    world: &World,
    plan: &Plan,
    thresholds: Thresholds,
) -> Result<ExitStatus, Failure> {
    let program = plan.bench.program();
    let enough = (world.size >= 2).then_some(()).ok_or_else(|| {
        format!("--all-pairs needs 2 or more ranks: launch one rank per node, e.g. mpirun -np 8 --map-by ppr:1:node {program} --all-pairs")
    });
    agree(job, program, ExitStatus::Usage, enough)?;
    let no_report = plan
        .counters
        .report
        .is_empty()
        .then_some(())
        .ok_or_else(|| {
            format!(
            "-W/--report-counters with --all-pairs: {program} --all-pairs prints no line per size; \
             drop -W (the footer names every counter that moved in each pair's round, and \
             --counters FILE keeps every delta)"
        )
        });
    agree(job, program, ExitStatus::Usage, no_report)?;
    let (plan, port) = failure_step(job, program, open_device(plan, world.local_rank))?;
    let mut pair = VerbsPair {
        job,
        world,
        plan: &plan,
        port: &port,
        connected: None,
    };
    let setup = PairRun {
        program,
        sizes: plan.sizes.clone(),
        iters: match plan.length {
            Length::Iters(n) => n as usize,
            Length::Duration(_) => 0,
        },
        thresholds,
        // Each rank may have its own device (-d by node-local rank): every rank pairs.
        pairs_of: PairsOf::Ranks,
        csv: plan.csv.as_deref(),
        timeout_s: plan.timeout.as_secs(),
        fabric: Some(fabric_plan(&plan, &port)),
        counters: plan.counters.file.as_deref(),
    };
    // A slow pair or wrong data is the runner's status; a fatal error on one
    // rank ends the job (its partner waits on it, the others in the runner's barrier).
    run_pairs(world, &mut pair, &setup)
}

/// The counters of every node are read around each round; the bytes should
/// cross the ports -d names (each rank's of the list), else the one this rank opened.
fn fabric_plan(plan: &Plan, port: &Port) -> FabricPlan {
    let meant = match plan.devices.is_empty() {
        true => Meant::device(&port.device, port.port.into()),
        false => Meant {
            by: "-d".into(),
            ports: plan
                .devices
                .iter()
                .map(|d| (d.clone(), Some(plan.ib_port.into())))
                .collect(),
            prefix: false,
        },
    };
    FabricPlan {
        meant: Some(meant),
        expects_rdma: true,
        ..FabricPlan::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::verbs::LatStats;
    use crate::verbs::exchange::wire::{BwReport, LatReport};

    #[test]
    fn bandwidth_sample_is_the_time_of_one_message() {
        let s = sample_of(Some(Report {
            validation: None,
            size: 65536,
            bw: Some(BwReport {
                messages: 4000,
                elapsed_ns: 2_000_000,
                peak_msgs_per_s: None,
                histogram: Vec::new(),
            }),
            lat: None,
        }));
        // 2 ms for 4000 messages: 500 ns each.
        assert!((s.seconds - 500e-9).abs() < 1e-18 && s.p50_seconds == s.seconds);
        assert_eq!(s.wrong, None);
    }

    #[test]
    fn latency_sample_is_judged_on_the_typical_time() {
        let stats = LatStats {
            t_min_us: 1.0,
            t_max_us: 9.0,
            t_typical_us: 2.0,
            t_avg_us: 3.0,
            t_stdev_us: 0.5,
            p99_us: 8.0,
            p999_us: 9.0,
        };
        let s = sample_of(Some(Report {
            validation: None,
            size: 2,
            bw: None,
            lat: Some(LatReport {
                iterations: 1000,
                stats,
                histogram: Vec::new(),
            }),
        }));
        assert!((s.seconds - 3e-6).abs() < 1e-15 && (s.p50_seconds - 2e-6).abs() < 1e-15);
    }

    #[test]
    fn a_side_without_a_measurement_leaves_it_to_the_other() {
        let s = sample_of(None);
        assert!(s.seconds.is_nan() && s.p50_seconds.is_nan());
        // The runner keeps the measured side: max ignores NaN.
        assert_eq!(s.seconds.max(2e-6), 2e-6);
    }
}
