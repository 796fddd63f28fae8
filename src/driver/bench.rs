//! The timed bench, as nccl-tests runs it: for every datatype, op and root a
//! warm-up, then every size of every cycle laid out, timed out of place and in
//! place, validated, and combined over ranks into one table line.

use super::rounds::{self, Next, RoundLines};
use super::timing::Timing;
use crate::backend::{Backend, BufRef, Marks, OpArgs, Slot};
use crate::collective::{Collective, Counts, Layout};
use crate::datatype::{count_wrong_where, fill, DataType, RedOp};
use crate::driver::args::{Launch, Plan};
use crate::faults::Faults;
use crate::job::{Comm, Failure};
use crate::pattern::Pattern;
use crate::report::counters::Watch;
use crate::report::rounds::Ledger;
use crate::report::{Exporter, Placement, RunInfo, SizeResult, Summary};
use crate::sizes::{sizes, Step};
use crate::watchdog::Watchdog;
use std::time::Instant;

/// One line of the table: a size of one datatype, op, root and -N cycle.
#[derive(Clone, Copy)]
struct LineKey {
    size: u64,
    dtype: DataType,
    op: Option<RedOp>,
    root: usize,
    cycle: u64,
}

/// The state of one run's measurements. Generic over the ranks' exchanges so that
/// the timed loop calls them without dynamic dispatch.
pub(super) struct Bench<'a, C: Comm> {
    comm: &'a C,
    coll: &'a dyn Collective,
    backend: &'a mut dyn Backend,
    plan: &'a Plan,
    watchdog: &'a Watchdog,
    faults: Faults,
    /// Ranks this process drives (-g), and ranks in the collective (its group's).
    local_ranks: usize,
    nranks: usize,
    /// This process's place among the processes of its group (NCCL_TESTS_SPLIT).
    group_process: usize,
    /// Whether -c checks the in-place form on this backend.
    checks_in_place: bool,
    /// Reused for every loop: nothing is allocated around the timed calls.
    per_iteration: Vec<f64>,
    /// The run's performance model, calibrated as sizes are measured.
    model: Option<crate::model::Model>,
}

impl<'a, C: Comm> Bench<'a, C> {
    pub(super) fn new(
        comm: &'a C,
        coll: &'a dyn Collective,
        backend: &'a mut dyn Backend,
        plan: &'a Plan,
        watchdog: &'a Watchdog,
        faults: Faults,
    ) -> Self {
        let local_ranks = backend.devices();
        // --percentiles 0: no iteration is timed on its own.
        let timed_iterations = if plan.reporting.percentiles {
            plan.iters
        } else {
            0
        };
        Bench {
            comm,
            coll,
            local_ranks,
            nranks: comm.size() * local_ranks,
            group_process: comm.rank(),
            checks_in_place: backend.checks_in_place(coll.id()),
            backend,
            plan,
            watchdog,
            faults,
            per_iteration: vec![0.0; timed_iterations],
            model: None,
        }
    }

    /// NCCL_TESTS_SPLIT: the collective runs among the `processes` of this
    /// process's group, where it is the `rank`th; every exchange of timings and
    /// wrong counts stays over the whole job.
    pub(super) fn in_group(mut self, rank: usize, processes: usize) -> Self {
        self.group_process = rank;
        self.nranks = processes * self.local_ranks;
        self
    }

    /// Every datatype, op and root: a warm-up, then every size of every cycle,
    /// each result handed to every exporter as soon as it is measured; all of it
    /// once per round (--rounds), each round after the first measuring the lines
    /// rank 0 asks for (all of them, or with `auto` those not yet settled).
    pub(super) fn sweep(
        &mut self,
        roots: &[usize],
        run: &RunInfo,
        exporters: &mut [Box<dyn Exporter>],
    ) -> Result<Summary, Failure> {
        let plan = self.plan;
        self.model = run.model.clone();
        let rounds = plan.rounds.rounds;
        // Kept for medians only where asked for: -N 0 runs until interrupted.
        let keep = rounds.many() || plan.rounds.min_busbw_gbs.is_some();
        let mut ledger = Ledger::default();
        let mut summary = Summary::default();
        let mut busbw = Vec::new();
        let mut fabric = Watch::new(&run.fabric, self.comm.local_rank());
        let ops: Vec<Option<RedOp>> = if self.coll.reduces() {
            plan.ops.iter().copied().map(Some).collect()
        } else {
            vec![None]
        };
        let started = Instant::now();
        let mut wanted = RoundLines::Every;
        let mut round = 1;
        let stopped_by = loop {
            let mut line = 0;
            for &dtype in &plan.datatypes {
                for &op in &ops {
                    for &root in roots {
                        // Once per line, as nccl-tests: later rounds follow at once.
                        if round == 1 {
                            self.warm_up(dtype, op, root)?;
                        }
                        let mut cycle = 0;
                        while plan.run_cycles == 0 || cycle < plan.run_cycles {
                            for size in sizes(plan.min_bytes, plan.max_bytes, plan.step) {
                                line += 1;
                                if !wanted.has(line - 1) {
                                    continue;
                                }
                                let key = LineKey {
                                    size,
                                    dtype,
                                    op,
                                    root,
                                    cycle,
                                };
                                let result =
                                    self.measure_line(key, round, &mut fabric, run, exporters)?;
                                for m in &result.measurements {
                                    summary.wrong_total += m.wrong.unwrap_or(0);
                                    if !keep {
                                        busbw.push(m.busbw_gbs);
                                    }
                                }
                                if keep {
                                    ledger.add(line - 1, &result);
                                }
                            }
                            cycle += 1;
                        }
                    }
                }
            }
            match rounds::next(self.comm, self.watchdog, plan, round, &ledger, started) {
                Next::Measure(lines) => wanted = lines,
                Next::Stop(why) => break why,
            }
            round += 1;
        };
        if keep {
            busbw = rounds::close(plan, &ledger, stopped_by, &mut summary);
        }
        summary.avg_busbw_gbs = match busbw.len() {
            0 => 0.0,
            n => busbw.iter().sum::<f64>() / n as f64,
        };
        Ok(summary)
    }

    /// One line of one round: measured, its fabric counters read, and handed to
    /// every exporter.
    fn measure_line(
        &mut self,
        key: LineKey,
        round: u32,
        fabric: &mut Watch,
        run: &RunInfo,
        exporters: &mut [Box<dyn Exporter>],
    ) -> Result<SizeResult, Failure> {
        let LineKey { size, .. } = key;
        for e in exporters.iter_mut() {
            e.begin_size(size);
        }
        let before = fabric.before();
        let mut result = self.measure_size(key)?;
        result.round = round;
        self.watchdog
            .begin(format!("fabric counters after {size} B"));
        self.watchdog.enter_call();
        result.counters = fabric.after(self.comm, before);
        self.watchdog.end();
        result.expected = self.model.as_mut().and_then(|m| result.expect(m));
        for e in exporters.iter_mut() {
            e.record(run, &result)?;
        }
        Ok(result)
    }

    /// One layout per rank this process drives.
    fn layouts(&self, size: u64, dtype: DataType, op: Option<RedOp>, root: usize) -> Vec<Layout> {
        let counts = self.coll.counts(
            (size / dtype.size() as u64) as usize,
            dtype.size(),
            self.nranks,
        );
        (0..self.local_ranks)
            .map(|local| Layout {
                rank: self.group_process * self.local_ranks + local,
                nranks: self.nranks,
                root,
                counts,
                pattern: Pattern::new(dtype, op.unwrap_or(RedOp::Sum), self.nranks),
            })
            .collect()
    }

    /// Where the send data and the result live, as nccl-tests lays them out.
    fn op_args(&self, layout: &Layout, placement: Placement) -> OpArgs {
        let Layout {
            rank,
            counts,
            pattern,
            root,
            ..
        } = *layout;
        let elt = pattern.dtype.size();
        let device = rank % self.local_ranks;
        let at = |slot, offset| BufRef {
            device,
            slot,
            offset: offset + self.plan.unalign * elt, // -u, as nccl-tests' TimeTest
        };
        let (send, recv) = match placement {
            Placement::OutOfPlace => (at(Slot::Send, 0), at(Slot::Recv, 0)),
            Placement::InPlace => (
                at(Slot::Recv, rank * counts.send_inplace_offset * elt),
                at(Slot::Recv, rank * counts.recv_inplace_offset * elt),
            ),
        };
        OpArgs {
            send,
            recv,
            count: counts.param,
            dtype: pattern.dtype,
            op: pattern.op,
            root,
            in_place: placement == Placement::InPlace,
        }
    }

    /// `times` calls of the collective over this process's ranks: grouped when they
    /// are several (`-g`, `-m`), as nccl-tests groups them.
    /// `times` calls of the collective on each of `args` (one group when more
    /// than one), each counted for the watchdog as it is entered: -T is a bound on
    /// one call, so `-m` calls of an iteration are `-m` calls, not one.
    fn launch(&mut self, args: &[OpArgs], times: usize) -> anyhow::Result<()> {
        if let ([one], 1) = (args, times) {
            self.watchdog.enter_call();
            return self.coll.launch(self.backend, one);
        }
        self.backend.group_start()?;
        for _ in 0..times {
            for a in args {
                self.watchdog.enter_call();
                self.coll.launch(self.backend, a)?;
            }
        }
        self.backend.group_end()
    }

    fn write_inputs(&mut self, layouts: &[Layout], args: &[OpArgs]) -> anyhow::Result<()> {
        for (layout, a) in layouts.iter().zip(args) {
            let mut bytes = vec![0u8; layout.counts.send * a.dtype.size()];
            fill(a.dtype, &mut bytes, |i| {
                layout.pattern.input(layout.rank, i)
            });
            self.backend.write(a.send, &bytes)?;
        }
        Ok(())
    }

    fn label(&self, layout: &Layout, placement: Placement, what: &str) -> String {
        format!(
            "{} {} {} {} root {} {} B {what}",
            self.coll.name(),
            layout.pattern.dtype,
            if self.coll.reduces() {
                layout.pattern.op.name()
            } else {
                "none"
            },
            placement.name(),
            layout.root,
            layout.counts.size_bytes(layout.pattern.dtype.size())
        )
    }

    /// nccl-tests' warm-up: every size from min to max by factor 2, -w calls each.
    fn warm_up(&mut self, dtype: DataType, op: Option<RedOp>, root: usize) -> Result<(), Failure> {
        self.watchdog
            .begin(format!("{} {dtype} warm-up", self.coll.name()));
        self.watchdog.enter_call();
        self.comm.barrier();
        for size in sizes(self.plan.min_bytes, self.plan.max_bytes, Step::Factor(2)) {
            let layouts = self.layouts(size, dtype, op, root);
            let args: Vec<OpArgs> = layouts
                .iter()
                .map(|l| self.op_args(l, Placement::OutOfPlace))
                .collect();
            for _ in 0..self.plan.warmup_iters {
                self.launch(&args, 1)?;
            }
        }
        self.backend.synchronize()?;
        self.watchdog.end();
        Ok(())
    }

    /// The timed loop of one placement: seconds per call (from the backend's clock),
    /// CPU seconds to issue one call, and each iteration's seconds (of `-m` calls)
    /// in `per_iteration`. Between the clock's marks only the calls run, and what
    /// `-z` asks for.
    fn time_loop(&mut self, args: &[OpArgs]) -> anyhow::Result<(f64, f64)> {
        let plan = self.plan;
        let (iters, agg, launch) = (plan.iters, plan.agg_iters, plan.launch);
        let graph = launch.graph_launches();
        let marks = match launch {
            Launch::BarrierOutside => Marks::Paired,
            _ if !plan.reporting.percentiles => Marks::Whole,
            _ => Marks::Chained,
        };
        if graph > 0 {
            self.backend.begin_capture()?;
        }
        // -z 3: the CPU time of the iterations alone, as nccl-tests counts it. Where the
        // marks are host time (calls complete on return) that is the timed time itself,
        // and a second clock read around each call would only delay the ranks waiting
        // for this one (two reads were 15% of an 8-byte allreduce after a barrier).
        let time_issuing = marks == Marks::Paired && !self.backend.marks_host_time();
        self.backend.timer_start(iters, marks)?;
        let mut issued = Instant::now();
        let mut issuing = 0.0;
        // One call per iteration, back to back (nccl-tests' default) or OSU's way
        // (-z 3), the loops of every small-message run: where the backend can bind the
        // call (resolved once, then repeated as a bare loop of the library call is),
        // its own loop runs.
        let bound = match (launch, args, agg) {
            (Launch::Stream | Launch::BarrierOutside, [one], 1)
                if !time_issuing && self.backend.begin_bind() =>
            {
                let captured = self.coll.launch(self.backend, one);
                let bound = self.backend.end_bind();
                captured?;
                bound
            }
            _ => false,
        };
        if bound {
            let comm = self.comm;
            let barrier = || comm.barrier();
            let between: Option<&dyn Fn()> = (launch == Launch::BarrierOutside).then_some(&barrier);
            self.backend
                .run_bound(iters, self.watchdog.calls(), between)?;
        } else {
            for _ in 0..iters {
                if time_issuing {
                    issued = Instant::now();
                }
                if marks == Marks::Paired {
                    self.backend.mark();
                }
                self.launch(args, agg)?;
                match launch {
                    Launch::Stream | Launch::Graph(_) => {}
                    Launch::Blocking => {
                        self.backend.synchronize()?;
                        self.comm.barrier();
                    }
                    Launch::Synced | Launch::BarrierOutside => self.backend.synchronize()?,
                }
                if marks.each_call() {
                    self.backend.mark();
                }
                if launch == Launch::BarrierOutside {
                    if time_issuing {
                        issuing += issued.elapsed().as_secs_f64();
                    }
                    self.comm.barrier();
                }
            }
        }
        if !marks.each_call() {
            self.backend.mark();
        }
        let mut calls = iters * agg;
        if graph > 0 {
            self.backend.end_capture()?;
            // As nccl-tests: every rank has its graph before any replay starts.
            self.comm.barrier();
            issued = Instant::now();
            self.backend.replay(graph)?;
            calls *= graph;
        }
        if marks != Marks::Paired {
            issuing = issued.elapsed().as_secs_f64();
        }
        self.backend.synchronize()?;
        let total = self.backend.timer_read(&mut self.per_iteration)?;
        if marks == Marks::Paired && !time_issuing {
            issuing = total;
        }
        // Each iteration's seconds per call, as the loop's are.
        self.per_iteration.iter_mut().for_each(|t| *t /= agg as f64);
        Ok((total / calls as f64, issuing / calls as f64))
    }

    fn measure_size(&mut self, key: LineKey) -> Result<SizeResult, Failure> {
        let LineKey {
            size,
            dtype,
            op,
            root,
            cycle,
        } = key;
        let layouts = self.layouts(size, dtype, op, root);
        let layout = layouts[0];
        let n = self.nranks;
        let size_bytes = layout.counts.size_bytes(dtype.size());
        let mut measurements = Vec::new();
        for placement in Placement::BOTH {
            let args: Vec<OpArgs> = layouts.iter().map(|l| self.op_args(l, placement)).collect();
            // As nccl-tests, inputs only where -c checks them; else the zeros every backend
            // writes at allocation, which every op keeps zero (no NaN to slow a reduction).
            if self.plan.check > 0 {
                self.write_inputs(&layouts, &args)?;
            }
            self.faults.stall_before(self.comm.rank(), size);
            self.watchdog.fault_point(size);
            self.watchdog
                .begin(self.label(&layout, placement, "(barrier before timing)"));
            self.watchdog.enter_call();
            self.comm.barrier();
            self.watchdog
                .begin(self.label(&layout, placement, "(timed loop)"));
            let (seconds_per_call, cpu_per_call) = self.time_loop(&args)?;
            self.watchdog.end();

            let wrong = match placement {
                _ if self.plan.check == 0 => None,
                Placement::InPlace if !self.checks_in_place => None,
                _ => Some(self.validate(&layouts, &args, placement)?),
            };
            let total = wrong.as_ref().map(|w| w.iter().sum());

            let mut mine = Vec::with_capacity(self.plan.iters + 2);
            mine.push(seconds_per_call);
            mine.push(cpu_per_call);
            mine.extend_from_slice(&self.per_iteration);
            // Every exchange is watched: a rank stuck here is waiting, not absent.
            self.watchdog
                .begin(self.label(&layout, placement, "(gathering timings)"));
            self.watchdog.enter_call();
            let gathered = self.comm.gather_f64s(&mine);
            self.watchdog.end();
            if let Some(all) = gathered {
                let timing = Timing::combine(&all, self.per_iteration.len(), self.plan.average);
                let elt = dtype.size();
                for line in self
                    .coll
                    .report_lines(&layout.counts, elt, n, timing.seconds)
                {
                    println!("{line}");
                }
                let alg_bytes = self.coll.alg_bytes(&layout.counts, elt, n);
                let mut m =
                    timing.measurement(placement, alg_bytes, self.coll.busbw_factor(n), total);
                m.wrong_ranks = wrong_ranks(wrong.as_deref().unwrap_or_default());
                let reporting = &self.plan.reporting;
                if reporting.per_iter {
                    m.per_iter = timing.per_iteration(reporting.per_iter_skip);
                }
                measurements.push(m);
            }
        }
        let tuning = self.backend.tuning();
        Ok(SizeResult {
            collective: self.coll.id().as_str().to_string(),
            datatype: dtype.name().to_string(),
            redop: op.map_or("none".to_string(), |o| o.name().to_string()),
            root: if self.coll.rooted() { root as i64 } else { -1 },
            size_bytes,
            count: layout.counts.param as u64,
            busbw_factor: self.coll.busbw_factor(n),
            cycle,
            round: 1,
            measurements,
            // The timed loops' choice, where the backend's library logs it (nccl).
            nccl_algo: tuning.as_ref().map(|t| t.0.clone()),
            nccl_proto: tuning.map(|t| t.1),
            counters: None,
            expected: None,
        })
    }

    /// -c: fresh inputs, a poisoned result region, one call, and every element
    /// compared with its exact value; returns on rank 0 each rank's wrong
    /// elements (job rank order), elsewhere nothing.
    fn validate(
        &mut self,
        layouts: &[Layout],
        args: &[OpArgs],
        placement: Placement,
    ) -> Result<Vec<u64>, Failure> {
        let layout = layouts[0];
        let elt = layout.pattern.dtype.size();
        let Counts { recv, .. } = layout.counts;
        let tolerance =
            self.backend
                .tolerance(layout.pattern.dtype, layout.pattern.op, self.nranks);
        let mut wrong: Vec<u64> = Vec::new();
        for _ in 0..self.plan.check {
            if placement == Placement::OutOfPlace {
                // 0xFF bytes: NaN or -1 or a large unsigned value, never an expected one
                // at these rank counts, so a call that wrote nothing cannot pass.
                for a in args {
                    self.backend.write(a.recv, &vec![0xFF; recv * elt])?;
                }
            }
            self.write_inputs(layouts, args)?;
            self.watchdog
                .begin(self.label(&layout, placement, "(validation)"));
            self.launch(args, 1)?;
            self.backend.synchronize()?;
            self.watchdog.end();
            let mut mine = Vec::with_capacity(layouts.len());
            for (local, (l, a)) in layouts.iter().zip(args).enumerate() {
                let mut result = vec![0u8; recv * elt];
                self.backend.read(a.recv, &mut result)?;
                let job_rank = self.comm.rank() * self.local_ranks + local;
                if let Some(index) = self.faults.corrupted_element(job_rank, recv) {
                    let bad = self.coll.expected(l, index).unwrap_or(0.0) + 1.0;
                    fill(a.dtype, &mut result[index * elt..(index + 1) * elt], |_| {
                        bad
                    });
                }
                // Counts travel as f64, exact below 2^53 elements.
                mine.push(count_wrong_defined(self.coll, l, a.dtype, &result, tolerance) as f64);
            }
            self.watchdog
                .begin(self.label(&layout, placement, "(gathering wrong counts)"));
            self.watchdog.enter_call();
            let gathered = self.comm.gather_f64s(&mine);
            self.watchdog.end();
            if let Some(all) = gathered {
                wrong.resize(all.len(), 0);
                for (w, n) in wrong.iter_mut().zip(all) {
                    *w += n as u64;
                }
            }
        }
        Ok(wrong)
    }
}

/// Wrong elements among those the collective defines on this rank (none on the
/// non-root ranks of Reduce and Gather).
fn count_wrong_defined(
    coll: &dyn Collective,
    layout: &Layout,
    dtype: DataType,
    result: &[u8],
    tolerance: f64,
) -> u64 {
    if result.is_empty() {
        return 0;
    }
    let expected = coll.expected_of(layout);
    match expected(0) {
        None => 0,
        Some(_) => count_wrong_where(dtype, result, tolerance, expected),
    }
}

/// The ranks with wrong elements and how many, from every rank's count.
fn wrong_ranks(per_rank: &[u64]) -> Vec<(usize, u64)> {
    per_rank
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(r, &n)| (r, n))
        .collect()
}
