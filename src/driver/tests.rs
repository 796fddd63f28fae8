//! The driver on one rank without MPI: the loopback backend (every call a copy)
//! and a job of one (`Solo`) run the real sweep, validation, faults and exporters.

use super::bench::Bench;
use super::header::{describe_run, Opened};
use super::open::{allocate, buffer_bytes, timing_bytes};
use super::planned_results;
use super::timing::Timing;
use crate::backend::loopback::Loopback;
use crate::backend::{Backend, BackendKind, MemoryBudget};
use crate::collective::{self, Collective};
use crate::datatype::DataType;
use crate::driver::args::{parse_args, Average, Plan};
use crate::faults::Faults;
use crate::job::comm::Solo;
use crate::job::{Comm, Group};
use crate::job::{ExitStatus, Failure};
use crate::report::{Exporter, Placement, RunInfo, SizeResult, Summary};
use crate::sizes::sweep;
use crate::watchdog::Watchdog;
use std::cell::RefCell;
use std::rc::Rc;

fn plan(flags: &[&str]) -> Plan {
    let argv = std::iter::once("all_reduce_perf").chain(flags.iter().copied());
    parse_args(&crate::collective::AllReduce, argv)
        .unwrap()
        .plan()
        .unwrap()
}

/// What the sweep handed its exporter.
#[derive(Default)]
struct Log {
    begun: Vec<u64>,
    results: Vec<SizeResult>,
    /// The calls the watchdog counted over the sweep.
    watched: u64,
}

struct Recorder(Rc<RefCell<Log>>);

impl Exporter for Recorder {
    fn start(&mut self, _run: &RunInfo) -> anyhow::Result<()> {
        Ok(())
    }
    fn record(&mut self, _run: &RunInfo, result: &SizeResult) -> anyhow::Result<()> {
        self.0.borrow_mut().results.push(result.clone());
        Ok(())
    }
    fn finish(&mut self, _run: &RunInfo, _summary: &Summary) -> anyhow::Result<()> {
        Ok(())
    }
    fn begin_size(&mut self, size_bytes: u64) {
        self.0.borrow_mut().begun.push(size_bytes);
    }
}

/// The sweep of `plan` on the loopback backend: the summary, what the exporter got,
/// and the backend, with the calls and writes it saw.
fn run_sweep(coll: &dyn Collective, plan: &Plan, faults: Faults) -> (Summary, Log, Loopback) {
    run_sweep_on(&Solo, coll, plan, faults)
}

fn run_sweep_on<C: Comm>(
    comm: &C,
    coll: &dyn Collective,
    plan: &Plan,
    faults: Faults,
) -> (Summary, Log, Loopback) {
    let mut backend = Loopback::default();
    allocate(
        comm,
        "test",
        &mut backend,
        BackendKind::Mpi,
        plan,
        coll,
        1,
        None,
    )
    .unwrap();
    let watchdog = Watchdog::start(comm, "test", 0).unwrap();
    let roots = plan.root_list(1, coll.rooted()).unwrap();
    let log = Rc::new(RefCell::new(Log::default()));
    let mut exporters: Vec<Box<dyn Exporter>> = vec![Box::new(Recorder(log.clone()))];
    let summary = Bench::new(comm, coll, &mut backend, plan, &watchdog, faults)
        .sweep(&roots, &RunInfo::default(), &mut exporters)
        .unwrap();
    drop(exporters);
    let mut log = Rc::try_unwrap(log).ok().unwrap().into_inner();
    log.watched = watchdog.calls().get();
    (summary, log, backend)
}

#[test]
fn every_collective_sweeps_its_planned_rows_with_right_data() {
    let p = plan(&[
        "-b", "8", "-e", "1K", "-f", "4", "-n", "3", "-w", "2", "-d", "all", "-o", "all",
    ]);
    let sizes = sweep(8, 1024, crate::sizes::Step::Factor(4));
    assert_eq!(sizes, [8, 32, 128, 512]);
    for coll in collective::all() {
        let (summary, log, backend) = run_sweep(coll, &p, Faults::default());
        let calls = backend.calls;
        let what = coll.name();
        let ops = if coll.reduces() { 6 } else { 1 };
        assert_eq!(planned_results(&p, coll, 1), Some(12 * ops * 4), "{what}");
        assert_eq!(log.results.len() as u64, 12 * ops * 4, "{what}");
        let every_size: Vec<u64> = sizes
            .iter()
            .copied()
            .cycle()
            .take(log.results.len())
            .collect();
        assert_eq!(log.begun, every_size, "{what}");
        // Per size: -n 3 timed and -c 1 validating calls in each placement; per
        // datatype and op a warm-up of -w 2 calls at 8, 16, ..., 1K bytes.
        let warm_up = 2 * 8;
        assert_eq!(calls, 12 * ops * (warm_up + 4 * 2 * (3 + 1)), "{what}");
        assert!(backend.writes > 0, "{what}: -c 1 writes inputs");
        for (i, r) in log.results.iter().enumerate() {
            let dtype: DataType = r.datatype.parse().unwrap();
            let counts = coll.counts(
                (sizes[i % 4] / dtype.size() as u64) as usize,
                dtype.size(),
                1,
            );
            assert_eq!(r.collective, coll.id().as_str());
            assert_eq!(
                r.size_bytes,
                counts.size_bytes(dtype.size()),
                "{what} row {i}"
            );
            assert_eq!(r.count, counts.param as u64, "{what} row {i}");
            assert_eq!(r.root, if coll.rooted() { 0 } else { -1 });
            let placements: Vec<Placement> = r.measurements.iter().map(|m| m.placement).collect();
            assert_eq!(placements, Placement::BOTH);
            for m in &r.measurements {
                assert_eq!(m.wrong, Some(0), "{what} {} {} B", r.datatype, r.size_bytes);
                assert!(m.time_us > 0.0 && m.latency.max_us > 0.0, "{what}");
            }
        }
        assert_eq!(summary.wrong_total, 0, "{what}");
    }
}

#[test]
fn rounds_are_interleaved_and_warm_up_once_per_line() {
    let one = plan(&["-b", "8", "-e", "128", "-f", "4", "-n", "2", "-d", "all"]);
    let three = plan(&[
        "-b", "8", "-e", "128", "-f", "4", "-n", "2", "-d", "all", "--rounds", "3",
    ]);
    let (_, log1, backend1) = run_sweep(&collective::AllReduce, &one, Faults::default());
    let (summary, log, backend) = run_sweep(&collective::AllReduce, &three, Faults::default());
    assert_eq!(
        planned_results(&three, &collective::AllReduce, 1),
        Some(3 * 12 * 3)
    );
    // Round 1 of every line (datatype and size), then round 2, then round 3.
    let order: Vec<(u32, String, u64)> = log
        .results
        .iter()
        .map(|r| (r.round, r.datatype.clone(), r.size_bytes))
        .collect();
    let first: Vec<(String, u64)> = log1
        .results
        .iter()
        .map(|r| (r.datatype.clone(), r.size_bytes))
        .collect();
    let expected: Vec<(u32, String, u64)> = (1..=3)
        .flat_map(|round| first.iter().map(move |(d, s)| (round, d.clone(), *s)))
        .collect();
    assert_eq!(order, expected);
    // Three times the timed and validating calls, one warm-up as before (-w 1
    // call at 8, 16, ..., 128 B per datatype).
    let warm_up = 12 * 5;
    assert_eq!(backend.calls - warm_up, 3 * (backend1.calls - warm_up));
    let medians = summary.rounds.expect("a summary of the rounds");
    assert_eq!(medians.lines.len(), 12 * 3);
    assert!(medians
        .lines
        .iter()
        .all(|l| l.rounds == 3 && l.settled.is_none()));
    assert!(summary.min_busbw.is_none());
}

#[test]
fn a_corrupted_element_is_counted_in_both_placements() {
    let p = plan(&["-b", "1K", "-e", "1K", "-n", "2"]);
    let faults = Faults {
        corrupt: Some((0, 5)),
        ..Faults::default()
    };
    let (summary, log, _) = run_sweep(&collective::AllReduce, &p, faults);
    let wrong: Vec<Option<u64>> = log.results[0]
        .measurements
        .iter()
        .map(|m| m.wrong)
        .collect();
    assert_eq!(wrong, [Some(1), Some(1)]);
    assert_eq!(summary.wrong_total, 2);
    // A fault on another rank touches nothing here.
    let (summary, _, _) = run_sweep(
        &collective::AllReduce,
        &p,
        Faults {
            corrupt: Some((1, 5)),
            ..Faults::default()
        },
    );
    assert_eq!(summary.wrong_total, 0);
}

#[test]
fn without_check_wrong_is_unknown_and_cycles_repeat() {
    let p = plan(&[
        "-b", "64", "-e", "256", "-f", "2", "-n", "2", "-c", "0", "-N", "3",
    ]);
    let (summary, log, backend) = run_sweep(&collective::Broadcast, &p, Faults::default());
    // As nccl-tests: no input is written where nothing checks it.
    assert_eq!(backend.writes, 0);
    assert_eq!(planned_results(&p, &collective::Broadcast, 1), Some(3 * 3));
    let cycles: Vec<u64> = log.results.iter().map(|r| r.cycle).collect();
    assert_eq!(cycles, [0, 0, 0, 1, 1, 1, 2, 2, 2]);
    assert!(log
        .results
        .iter()
        .flat_map(|r| &r.measurements)
        .all(|m| m.wrong.is_none()));
    assert_eq!(summary.wrong_total, 0);
    assert!(summary.avg_busbw_gbs > 0.0);
}

#[test]
fn planned_results_count_datatypes_ops_roots_sizes_and_cycles() {
    let p = plan(&[
        "-b", "8", "-e", "1K", "-f", "4", "-d", "all", "-o", "all", "-N", "2",
    ]);
    assert_eq!(
        planned_results(&p, &collective::AllReduce, 1),
        Some(12 * 6 * 4 * 2)
    );
    assert_eq!(
        planned_results(&p, &collective::Broadcast, 3),
        Some(12 * 3 * 4 * 2)
    );
    let forever = plan(&["-N", "0"]);
    assert_eq!(planned_results(&forever, &collective::AllReduce, 1), None);
}

#[test]
fn buffers_hold_the_largest_size_of_every_datatype() {
    let p = plan(&["-b", "8", "-e", "1M", "-d", "all"]);
    let mib = 1 << 20;
    assert_eq!(buffer_bytes(&p, &collective::AllReduce, 4), (mib, mib));
    assert_eq!(buffer_bytes(&p, &collective::AllGather, 4), (mib / 4, mib));
    // In place, the receive buffer also holds the send data.
    assert_eq!(buffer_bytes(&p, &collective::ReduceScatter, 4), (mib, mib));
    let odd = plan(&["-b", "8", "-e", "1000", "-d", "double"]);
    // 125 doubles over 3 ranks: chunks of 40 (16-byte multiples), 3 x 40 x 8 bytes.
    assert_eq!(buffer_bytes(&odd, &collective::Scatter, 3), (960, 960));
}

#[test]
fn buffers_that_do_not_fit_stop_before_allocating() {
    let p = plan(&["-b", "1K", "-e", "1K"]);
    let mut backend = Loopback::default();
    // Buffers of 2 KiB and host staging of 2 KiB do not fit in 3 KiB.
    backend.budget = Some(MemoryBudget {
        bytes: 3 << 10,
        what: "a test".into(),
    });
    let refused = allocate(
        &Solo,
        "test",
        &mut backend,
        BackendKind::Mpi,
        &p,
        &collective::AllReduce,
        1,
        None,
    );
    assert!(
        matches!(refused, Err(Failure::Stopped(ExitStatus::Failed))),
        "{refused:?}"
    );
    // GPU buffers do not share the host's budget.
    allocate(
        &Solo,
        "test",
        &mut backend,
        BackendKind::Nccl,
        &p,
        &collective::AllReduce,
        1,
        None,
    )
    .unwrap();
    let huge = plan(&["-b", "8", "-e", "3G", "-d", "int8"]);
    match allocate(
        &Solo,
        "test",
        &mut backend,
        BackendKind::Mpi,
        &huge,
        &collective::AllReduce,
        1,
        None,
    ) {
        Err(Failure::Usage(m)) => assert!(m.contains("exceed MPI's int count limit"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn per_iteration_times_are_in_the_memory_check() {
    let mut backend = Loopback::default();
    backend.budget = Some(MemoryBudget {
        bytes: 1 << 30,
        what: "a test".into(),
    });
    let fits = plan(&["-b", "8", "-e", "8", "-n", "1000"]);
    let huge = plan(&["-b", "8", "-e", "8", "-n", "10000000000000"]);
    for kind in [BackendKind::Mpi, BackendKind::Nccl] {
        let host = backend.budget.clone();
        let refused = allocate(
            &Solo,
            "t",
            &mut backend,
            kind,
            &huge,
            &collective::AllReduce,
            1,
            host,
        );
        assert!(
            matches!(refused, Err(Failure::Stopped(ExitStatus::Failed))),
            "{refused:?}"
        );
        let host = backend.budget.clone();
        allocate(
            &Solo,
            "t",
            &mut backend,
            kind,
            &fits,
            &collective::AllReduce,
            1,
            host,
        )
        .unwrap();
    }
    // A count whose bytes overflow is a usage mistake, refused alike on every rank.
    let overflow = plan(&["-b", "8", "-e", "8", "-n", "18446744073709551615"]);
    match allocate(
        &Solo,
        "t",
        &mut backend,
        BackendKind::Mpi,
        &overflow,
        &collective::AllReduce,
        1,
        None,
    ) {
        Err(Failure::Usage(m)) => {
            assert!(m.starts_with("-n/--iters 18446744073709551615: "), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(timing_bytes(10, 4, false), Some(12 * 32));
    assert_eq!(timing_bytes(10, 4, true), Some(12 * (4 * 16 + 40)));
    assert_eq!(timing_bytes(usize::MAX, 1, false), None);
}

#[test]
fn timings_combine_over_ranks() {
    // Two processes, two iterations: [per-call s, CPU s, iteration 1 s, iteration 2 s].
    let all = [1e-3, 2e-4, 1e-3, 1e-3, 3e-3, 4e-4, 2e-3, 4e-3];
    let mean = Timing::combine(&all, 2, Average::Mean);
    assert!((mean.seconds - 2e-3).abs() < 1e-15 && (mean.cpu_seconds - 3e-4).abs() < 1e-15);
    assert_eq!(mean.worst, [2e-3, 4e-3]);
    assert_eq!(mean.slowest_rank, 1);
    assert_eq!(Timing::combine(&all, 2, Average::Max).seconds, 3e-3);
    assert_eq!(Timing::combine(&all, 2, Average::Rank0).seconds, 1e-3);
    let m = mean.measurement(Placement::InPlace, 2_000_000, 1.5, Some(0));
    assert!((m.algbw_gbs - 1.0).abs() < 1e-12 && (m.busbw_gbs - 1.5).abs() < 1e-12);
    assert!((m.time_us - 2000.0).abs() < 1e-9);
    assert_eq!(m.cpu_us.map(|c| (c - 300.0).abs() < 1e-9), Some(true));
    assert!((m.latency.max_us - 4000.0).abs() < 4.0, "{:?}", m.latency);
}

#[test]
fn the_header_facts_of_a_run() {
    let p = plan(&["-b", "8", "-e", "64", "-G", "3", "-g", "1"]);
    let backend = Loopback::default();
    let opened = Opened {
        info: backend.info(),
        choice: "--backend mpi".into(),
    };
    let env = vec!["NCCL_DEBUG=INFO".to_string()];
    let (run, header) = describe_run(&Solo, "all_reduce_perf", &p, opened, env);
    assert_eq!(
        (run.backend_name(), run.device.to_string().as_str()),
        ("mpi", "host")
    );
    assert_eq!(run.hosts, ["solo"]);
    assert_eq!(run.nranks, 1);
    assert_eq!(run.launch_name(), "graph x3");
    assert!(run.notes.is_empty(), "{:?}", run.notes);
    assert_eq!(run.details.last().map(String::as_str), Some(
        "Launch: -G 3, the timed calls captured in a CUDA graph launched 3 times; validation runs uncaptured"
    ));
    assert_eq!(
        (header.min_bytes, header.max_bytes, header.graph_launches),
        (8, 64, 3)
    );
    assert_eq!(header.ranks.len(), 1);
    let rank = &header.ranks[0];
    assert_eq!(
        (rank.rank, rank.pid, rank.host.as_str()),
        (0, std::process::id(), "solo")
    );
    assert_eq!(
        (rank.location.name(), rank.name.as_str()),
        ("host", "loopback")
    );
}

/// One rank whose barrier takes 20 ms: what -z says about barriers shows in the time.
struct SlowBarrier;

impl Group for SlowBarrier {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn host(&self, _rank: usize) -> &str {
        "solo"
    }
    fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        vec![mine.to_vec()]
    }
}

impl Comm for SlowBarrier {
    fn local_rank(&self) -> usize {
        0
    }
    fn barrier(&self) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    fn sum_u64(&self, mine: u64) -> u64 {
        mine
    }
    fn gather_f64s(&self, mine: &[f64]) -> Option<Vec<f64>> {
        Some(mine.to_vec())
    }
}

#[test]
fn z1_times_the_barrier_and_z3_leaves_it_out() {
    let coll = &collective::AllReduce;
    let time_us = |z: &str| {
        let p = plan(&[
            "-b", "8", "-e", "8", "-n", "3", "-w", "0", "-c", "0", "-z", z,
        ]);
        let (_, log, _) = run_sweep_on(&SlowBarrier, coll, &p, Faults::default());
        log.results[0].measurements[0].time_us
    };
    let (blocking, outside) = (time_us("1"), time_us("3"));
    assert!(blocking >= 20_000.0, "-z 1 timed {blocking} us per call");
    // An 8-byte copy; 10 ms leaves room for a loaded machine's preemption.
    assert!(outside < 10_000.0, "-z 3 timed {outside} us per call");
    assert!(time_us("2") < 10_000.0, "-z 2 has no barrier");
}

#[test]
fn agg_iters_makes_m_calls_per_timed_iteration() {
    let coll = &collective::AllReduce;
    let calls = |m: &str| {
        let p = plan(&[
            "-b", "8", "-e", "64", "-f", "8", "-n", "3", "-w", "1", "-m", m,
        ]);
        run_sweep(coll, &p, Faults::default()).2.calls
    };
    // 2 sizes x 2 placements x 3 iterations, each iteration 4 calls instead of 1.
    assert_eq!(calls("4") - calls("1"), 2 * 2 * 3 * 3);
}

/// -T bounds one call: each of -m's aggregated calls is counted as the watchdog
/// sees progress, so a healthy iteration of many calls that outlasts -T is not
/// called stuck (it was counted once per iteration, and -m 4000000000 -T 5 ended
/// a healthy run blaming the library).
#[test]
fn the_watchdog_counts_each_aggregated_call() {
    let coll = &collective::AllReduce;
    let counted = |m: &str| {
        let p = plan(&[
            "-b", "8", "-e", "64", "-f", "8", "-n", "3", "-w", "1", "-m", m,
        ]);
        let (_, log, backend) = run_sweep(coll, &p, Faults::default());
        (log.watched, backend.calls)
    };
    let (one, four) = (counted("1"), counted("4"));
    // Every extra call the backend made was counted as it was entered.
    assert_eq!(four.0 - one.0, four.1 - one.1);
    assert_eq!(four.0 - one.0, 2 * 2 * 3 * 3);
}

/// --percentiles 0: the loop is timed whole (one mark before it, one after), so each
/// size still has its time, and no percentile: NaN, never a made-up figure.
#[test]
fn a_loop_timed_whole_has_its_time_and_no_percentiles() {
    for z in ["0", "1", "2"] {
        let flags = |p| {
            plan(&[
                "-b",
                "8",
                "-e",
                "64",
                "-n",
                "5",
                "-z",
                z,
                "--percentiles",
                p,
            ])
        };
        let p = flags("0");
        assert!(!p.reporting.percentiles);
        let (summary, log, backend) = run_sweep(&collective::AllReduce, &p, Faults::default());
        assert_eq!(summary.wrong_total, 0);
        let (_, _, each) = run_sweep(&collective::AllReduce, &flags("1"), Faults::default());
        assert_eq!(
            backend.calls, each.calls,
            "-z {z}: the calls of a sweep timing each"
        );
        for m in log.results.iter().flat_map(|r| &r.measurements) {
            assert!(m.time_us > 0.0 && m.algbw_gbs > 0.0, "-z {z}: {m:?}");
            let l = &m.latency;
            assert!([l.min_us, l.p50_us, l.p99_us, l.p999_us, l.max_us]
                .iter()
                .all(|v| v.is_nan()));
            assert_eq!(m.slowest_rank, 0);
        }
    }
    // Without per-iteration times, the slowest rank is the one whose loop took longest.
    let t = Timing::combine(&[1e-3, 2e-4, 3e-3, 4e-4, 2e-3, 1e-4], 0, Average::Mean);
    assert_eq!((t.worst.len(), t.slowest_rank), (0, 1));
    assert!(t
        .measurement(Placement::OutOfPlace, 8, 1.0, None)
        .latency
        .p99_us
        .is_nan());
}

/// NCCL_TESTS_MIN_BW is met only by an average that is a number at or above 90%
/// of it: NaN compares false with any minimum, and inf is no measurement.
#[test]
fn min_bw_is_met_only_by_a_measured_average() {
    let run = RunInfo {
        min_busbw_gbs: Some(10.0),
        ..RunInfo::default()
    };
    let below = |avg| {
        let summary = Summary {
            avg_busbw_gbs: avg,
            ..Summary::default()
        };
        super::outputs::below_minimum("test", &run, &summary, true)
    };
    assert!(!below(9.0) && !below(25.0));
    assert!(below(8.9) && below(0.0));
    assert!(below(f64::NAN) && below(f64::INFINITY));
    // Only rank 0 judges (and says it).
    let summary = Summary::default();
    assert!(!super::outputs::below_minimum(
        "test", &run, &summary, false
    ));
    let unset = RunInfo::default();
    assert!(!super::outputs::below_minimum(
        "test", &unset, &summary, true
    ));
}
