//! What nccl-tests' reporting flags and variables add to a run: the groups of
//! NCCL_TESTS_SPLIT(_MASK), the `-J` document, the `-I`/`-S`/NCCL_TESTS_MIN_BW
//! facts the exporters print, and the verdict on the average busbw.

use crate::backend::BackendKind;
use crate::cli::{in_words, shown};
use crate::driver::args::{Launch, Plan, Rounds};
use crate::job::{agree, agree_each_rank, ExitStatus, Failure, World};
use crate::report::json::{JsonExport, Settings};
use crate::report::rounds::MinBusbwVerdict;
use crate::report::table::Header;
use crate::report::{below_min_busbw, Exporter, RunInfo, Summary};
use std::os::raw::c_int;

/// NCCL_TESTS_SPLIT(_MASK): each process's group, agreed by every rank.
pub(super) struct Groups {
    /// Each process's group number (nccl-tests' color); empty: no split.
    of_process: Vec<usize>,
}

impl Groups {
    /// Every rank's color, gathered: a split on any rank splits the job (a rank
    /// without the variable is in group 0, as in nccl-tests), so that every rank
    /// takes part in MPI_Comm_split.
    pub fn agree(world: &World, program: &str, plan: &Plan) -> Result<Groups, Failure> {
        let split = plan.tests_env.split.as_ref();
        let mine = split.map(|s| s.color(world.rank));
        let fits = match (split, mine) {
            (Some(s), Some(c)) if c > c_int::MAX as u64 => Err(format!(
                "{}: group {c} is more than MPI_Comm_split takes; use a smaller value",
                s.setting
            )),
            _ => Ok(()),
        };
        agree(world, program, ExitStatus::Usage, fits)?;
        // 0: no split on that rank; else its color + 1.
        let all = world.all_gather_u64(mine.map_or(0, |c| c + 1));
        if all.iter().all(|&c| c == 0) {
            return Ok(Groups {
                of_process: Vec::new(),
            });
        }
        Ok(Groups {
            of_process: all.iter().map(|&c| c.saturating_sub(1) as usize).collect(),
        })
    }

    /// This process's color for MPI_Comm_split; None without a split.
    pub fn color(&self, process: usize) -> Option<c_int> {
        self.of_process.get(process).map(|&c| c as c_int)
    }

    /// The process's place among its group's processes, and their number.
    pub fn place(&self, process: usize, processes: usize) -> (usize, usize) {
        match self.of_process.get(process) {
            None => (process, processes),
            Some(&mine) => {
                let same = |p: &&usize| **p == mine;
                let before = self.of_process[..process].iter().filter(same).count();
                (before, self.of_process.iter().filter(same).count())
            }
        }
    }

    /// Each group's ranks (`gpus` per process), by group number.
    pub fn listing(&self, gpus: usize) -> Vec<(usize, Vec<usize>)> {
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        for (process, &g) in self.of_process.iter().enumerate() {
            let ranks = (process * gpus..(process + 1) * gpus).collect::<Vec<_>>();
            match groups.iter_mut().find(|(n, _)| *n == g) {
                Some((_, r)) => r.extend(ranks),
                None => groups.push((g, ranks)),
            }
        }
        groups.sort();
        groups
    }

    /// The header's Group column and the run's facts of the split.
    pub fn describe(&self, plan: &Plan, header: &mut Header, run: &mut RunInfo) {
        let gpus = plan.gpus_per_process;
        for r in &mut header.ranks {
            r.group = self.of_process.get(r.rank / gpus).copied().unwrap_or(0);
        }
        run.groups = self.listing(gpus);
        if let (Some(split), false) = (&plan.tests_env.split, run.groups.is_empty()) {
            let each: Vec<String> = run
                .groups
                .iter()
                .map(|(g, ranks)| {
                    let ranks: Vec<String> = ranks.iter().map(usize::to_string).collect();
                    format!("group {g} = ranks {}", ranks.join(","))
                })
                .collect();
            run.details.push(format!(
                "Split: {} puts the {} ranks in {} groups that run side by side ({}); times are over every rank, busbw is rank 0's group's",
                split.setting,
                run.nranks,
                run.groups.len(),
                each.join("; ")
            ));
        }
    }
}

/// -I, -S and NCCL_TESTS_MIN_BW into the run's facts, and nccl-tests' header
/// line for -I.
pub(super) fn describe(plan: &Plan, kind: BackendKind, run: &mut RunInfo) {
    let r = &plan.reporting;
    run.per_iter_timing = r.per_iter;
    run.timed_whole = !r.percentiles;
    run.report_timestamps = r.timestamps;
    run.min_busbw_gbs = plan.tests_env.min_busbw_gbs;
    run.notes.extend(r.warnings.iter().cloned());
    run.rounds_many = plan.rounds.rounds.many();
    match plan.rounds.rounds {
        Rounds::Fixed(1) => {}
        Rounds::Fixed(n) => run.details.push(format!(
            "Rounds: {n}, interleaved (round 1 of every line, then round 2, ...); the table follows the last round"
        )),
        Rounds::Auto {
            tolerance,
            max_rounds,
            max_seconds,
        } => run.details.push(format!(
            "Rounds: auto, interleaved, until busbw's median is within ±{}% (95% interval), at most {max_rounds} rounds and {} s; the table follows the last round",
            shown(tolerance * 100.0),
            shown(max_seconds)
        )),
    }
    if r.per_iter {
        let clock = match kind {
            BackendKind::Nccl => "CUDA event timing".to_string(),
            BackendKind::Mpi => {
                let ticks = crate::backend::TickSource::host();
                format!("host clock timing ({})", ticks.name())
            }
        };
        let skip = match r.per_iter_skip {
            0 => String::new(),
            k => format!("; summary skips first {k} iterations"),
        };
        run.details.push(format!(
            "Per-Iteration Report: {clock}; i_* uses max over process rows{skip}"
        ));
    }
}

/// -J on rank 0: the document, its file claimed now and named in the header as
/// nccl-tests names it. A file that cannot be made stops every rank.
pub(super) fn open_json(
    world: &World,
    program: &str,
    plan: &Plan,
    groups: &Groups,
    header: &Header,
    run: &mut RunInfo,
) -> Result<Option<Box<dyn Exporter>>, Failure> {
    let (Some(path), true) = (&plan.reporting.json, world.is_root()) else {
        agree_each_rank(
            world,
            program,
            ExitStatus::Failed,
            Ok::<(), anyhow::Error>(()),
        )?;
        return Ok(None);
    };
    let settings = Settings {
        args: std::env::args().collect(),
        // nccl-tests' blocking_collectives: any -z but 0.
        blocking: !matches!(plan.launch, Launch::Stream | Launch::Graph(_)),
        agg_iters: plan.agg_iters,
        per_iter_timing: plan.reporting.per_iter,
        per_iter_skip: plan.reporting.per_iter_skip,
        group_of_rank: (0..header.ranks.len())
            .map(|r| {
                groups
                    .of_process
                    .get(r / plan.gpus_per_process)
                    .copied()
                    .unwrap_or(0)
            })
            .collect(),
    };
    let json =
        JsonExport::create(path, header, settings, run).map_err(|e| in_words(&format!("{e:#}")));
    let json = agree_each_rank(world, program, ExitStatus::Failed, json)?;
    run.details
        .push(format!("Writing JSON output to {}", json.path().display()));
    Ok(Some(Box::new(json)))
}

/// NCCL_TESTS_MIN_BW: whether the run's average busbw fails it, said once on rank 0.
pub(super) fn below_minimum(program: &str, run: &RunInfo, summary: &Summary, root: bool) -> bool {
    let Some(min) = run.min_busbw_gbs else {
        return false;
    };
    let avg = summary.avg_busbw_gbs;
    let below = root && below_min_busbw(avg, min);
    if below && !avg.is_finite() {
        eprintln!(
            "{program}: FAILED: the average bus bandwidth is {avg}: a row's busbw is not a number \
             (see the rows with NaN or inf), so NCCL_TESTS_MIN_BW={min} GB/s cannot be judged met"
        );
    } else if below {
        eprintln!(
            "{program}: FAILED: the average bus bandwidth {avg:.3} GB/s is below 90% of NCCL_TESTS_MIN_BW={min} GB/s"
        );
    }
    below
}

/// --min-busbw on rank 0: the verdict's exit status, said on stderr when it is
/// not a pass (the table's footer has it in every case).
pub(super) fn min_busbw_status(program: &str, summary: &Summary) -> ExitStatus {
    let Some(min) = &summary.min_busbw else {
        return ExitStatus::Ok;
    };
    let status = match min.verdict() {
        MinBusbwVerdict::Pass => ExitStatus::Ok,
        MinBusbwVerdict::Fail => ExitStatus::Failed,
        MinBusbwVerdict::Inconclusive => ExitStatus::Inconclusive,
    };
    if status != ExitStatus::Ok {
        eprintln!("{program}: {}", min.sentence());
    }
    status
}

/// --all-pairs reports its own matrix: nccl-tests' per-size outputs and groups do
/// not apply, and are refused rather than ignored.
pub(super) fn refuse_with_all_pairs(plan: &Plan) -> Result<(), Failure> {
    let r = &plan.reporting;
    let split = plan.tests_env.split.as_ref().map(|s| s.setting.clone());
    let flag = [
        r.json.as_ref().map(|_| "-J/--output_file".to_string()),
        r.per_iter.then(|| "-I/--per_iter_timing 1".to_string()),
        r.timestamps.then(|| "-S/--report_timestamps 1".to_string()),
        split,
    ]
    .into_iter()
    .flatten()
    .next();
    match flag {
        Some(flag) => Err(Failure::Usage(format!(
            "{flag} with --all-pairs: all-pairs writes its own matrix and heatmap; drop one of them"
        ))),
        None => Ok(()),
    }
}
