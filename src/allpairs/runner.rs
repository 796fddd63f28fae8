//! The runner: every rank meets its partner of each round of the schedule and
//! measures the pair at every size; rank 0 gathers the samples into matrices,
//! prints the table, the fabric counters of each round (`counters`) and writes the
//! CSV and heatmap. It does not know what a pair
//! measurement is (`PairMeasure`).

use super::alone;
use super::confirm::{self, Confirmation, Remeasure, ROUNDS};
use super::counters::{RoundTally, RoundWatch, Schedule};
use super::heatmap;
use super::judging::Thresholds;
use super::matrix::{labels, write_csv, PairResults, SizeMatrices};
use super::sample::{PairSample, SAMPLE_LEN};
use super::schedule::{partner, rounds as schedule_rounds, Repeated};
use super::table::{write_header, write_table, PairsHeader};
use crate::cli::io_reason;
use crate::job::world::World;
use crate::job::{agree, ExitStatus, Failure};
use crate::output::{heatmap_of, Replace, WholeFile};
use crate::report::counters::{Column, CounterCsv, FabricPlan};
use crate::report::csv::new_file;
use crate::report::RunInfo;
use crate::sizes::human_bytes;
use crate::watchdog::Watchdog;
use std::path::Path;
use std::time::Instant;

/// A way of measuring one pair, driven by `measure_all_pairs` on both ranks of
/// the pair at the same time.
pub trait PairMeasure {
    /// What one exchange is, for the header: "MPI_Sendrecv, both directions at once".
    fn describe(&self) -> String;
    /// What the watchdog calls the run: "all-pairs", "all-pairs on rail 2 (eth2)".
    fn scope(&self) -> String {
        "all-pairs".into()
    }
    /// Warm-up, then timed exchanges of `bytes` with `peer`, calling
    /// `watchdog.enter_call()` before each so a hang is reported.
    fn measure(
        &mut self,
        peer: usize,
        bytes: usize,
        watchdog: &Watchdog,
    ) -> anyhow::Result<PairSample>;
}

/// Who pairs up in an all-pairs run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairsOf {
    /// Every rank with every rank.
    Ranks,
    /// The first rank of each node with that of every other node (on one node:
    /// every rank, there being no node pair).
    Nodes,
}

/// The participants: their world ranks (matrix index i is participant i)
/// and host names.
pub struct Participants {
    pub ranks: Vec<usize>,
    pub hosts: Vec<String>,
}

impl Participants {
    pub fn of(world: &World, pairs: PairsOf) -> Participants {
        let leaders = world.node_leaders();
        let ranks = match pairs {
            PairsOf::Nodes if leaders.len() >= 2 => leaders,
            _ => (0..world.size).collect(),
        };
        Participants::among(ranks, &world.hosts)
    }

    fn among(ranks: Vec<usize>, hosts: &[String]) -> Participants {
        let hosts = ranks.iter().map(|&r| hosts[r].clone()).collect();
        Participants { ranks, hosts }
    }

    /// Each participant's label in the matrices.
    pub fn labels(&self) -> Vec<String> {
        labels(&self.hosts)
    }
}

/// The partial matrices rank 0 writes after a round cost N x N each time: they
/// are written again only once the run went on this many times as long as the
/// last writing took (every round on a small job, a bounded share of a large one).
const PARTIAL_SHARE: u32 = 10;

/// Every rank at the barrier that starts a round, watched.
fn meet(world: &World, watchdog: &Watchdog, what: &str) {
    watchdog.begin(format!("{what} (barrier)"));
    watchdog.enter_call();
    world.barrier();
    watchdog.end();
}

/// This rank's sample of `size` bytes with `peer`, a bye without one; `names`:
/// the ranks' labels, for what the watchdog says.
fn measure_with(
    (world, names): (&World, &[String]),
    measure: &mut dyn PairMeasure,
    peer: Option<usize>,
    size: u64,
    what: &str,
    watchdog: &Watchdog,
) -> anyhow::Result<PairSample> {
    let Some(p) = peer else {
        return Ok(PairSample::BYE);
    };
    watchdog.begin(format!(
        "{what}: {} and {}, {size} B",
        names[world.rank], names[p]
    ));
    let sample = measure.measure(p, size as usize, watchdog)?;
    watchdog.end();
    Ok(sample)
}

/// Runs every round on every rank; rank 0 returns the matrices of each
/// repetition of the schedule. Each round's samples are gathered when it ends
/// and folded into its repetition's matrices at once (rank 0 keeps no round's
/// samples: they were 32 B a pair, size and round, N^2 x 3 in all), and rank 0
/// hands `measured` the medians of every pair measured so far: a job ended in
/// a later round (a cut link, -T) keeps the pairs before it.
pub fn measure_all_pairs(
    (world, who): (&World, &Participants),
    measure: &mut dyn PairMeasure,
    sizes: &[u64],
    watchdog: &Watchdog,
    fabric: &mut RoundWatch,
    measured: &mut dyn FnMut(&PairResults),
) -> anyhow::Result<Option<Vec<PairResults>>> {
    let rounds = Repeated::new(who.ranks.len());
    let me = who.ranks.iter().position(|&r| r == world.rank);
    let mut repetitions = world.is_root().then(Vec::new);
    let mut next_partial = Instant::now();
    let (scope, names) = (measure.scope(), labels(&world.hosts));
    for r in 0..rounds.total() {
        let what = format!("{scope} round {} of {}", r + 1, rounds.total());
        meet(world, watchdog, &what);
        fabric.before(world, watchdog, &what);
        let peer = me.and_then(|i| rounds.partner(r, i)).map(|p| who.ranks[p]);
        let mut mine = Vec::with_capacity(sizes.len() * SAMPLE_LEN);
        for &size in sizes {
            let sample = measure_with((world, &names), measure, peer, size, &what, watchdog)?;
            mine.extend(sample.encode());
        }
        fabric.after(world, watchdog, &what, r);
        watchdog.begin(format!("{what} (gathering its results)"));
        watchdog.enter_call();
        let gathered = world.gather_f64s(&mine);
        watchdog.end();
        if let (Some(reps), Some(round_samples)) = (&mut repetitions, gathered) {
            let per_rank: Vec<&[f64]> = round_samples.chunks_exact(mine.len().max(1)).collect();
            fold_round(reps, who, sizes, rounds, r, &per_rank);
            let last = r + 1 == rounds.total();
            if !last && Instant::now() >= next_partial {
                let started = Instant::now();
                if let Some(so_far) = PairResults::median_over(reps) {
                    measured(&so_far);
                }
                next_partial = Instant::now() + started.elapsed() * PARTIAL_SHARE;
            }
        }
    }
    Ok(repetitions)
}

/// Round `r`'s samples (`per_rank`: every world rank's, size after size) into
/// the matrices of its repetition of the schedule, begun at its first round.
fn fold_round(
    repetitions: &mut Vec<PairResults>,
    who: &Participants,
    sizes: &[u64],
    rounds: Repeated,
    r: usize,
    per_rank: &[&[f64]],
) {
    if r % rounds.once.max(1) == 0 {
        repetitions.push(PairResults {
            labels: who.labels(),
            sizes: (sizes.iter())
                .map(|&size_bytes| SizeMatrices::empty(size_bytes, who.ranks.len(), false))
                .collect(),
            counters: Vec::new(),
        });
    }
    let Some(repetition) = repetitions.last_mut() else {
        return;
    };
    for (a, b) in rounds.pairs(r) {
        for (s, m) in repetition.sizes.iter_mut().enumerate() {
            let at = s * SAMPLE_LEN;
            m.add_pair(
                a,
                b,
                PairSample::of_pair(per_rank, who.ranks[a], who.ranks[b], at),
            );
        }
    }
}

/// Each pair of the list (the suspects and the typical pairs) measured again
/// alone, `ROUNDS` times over (interleaved: every pair once, then again, so a
/// busy spell of the host touches the suspects and the typical pairs alike):
/// the two ranks of the pair measure, every other rank waits at the barrier
/// before the next. Rank 0 returns, per pair, the samples of its rounds (the
/// slower side's of each).
fn measure_alone(
    (world, who): (&World, &Participants),
    measure: &mut dyn PairMeasure,
    list: &[Remeasure],
    watchdog: &Watchdog,
) -> anyhow::Result<Option<Vec<Vec<PairSample>>>> {
    let mut mine = Vec::with_capacity(ROUNDS * list.len() * SAMPLE_LEN);
    let (scope, names) = (measure.scope(), labels(&world.hosts));
    for round in 0..ROUNDS {
        for (i, s) in list.iter().enumerate() {
            let what = format!(
                "{scope}, pair {} of {} measured alone, round {} of {ROUNDS}",
                i + 1,
                list.len(),
                round + 1
            );
            meet(world, watchdog, &what);
            let (a, b) = (who.ranks[s.a], who.ranks[s.b]);
            let peer = partner(&[(a, b)], world.rank);
            let sample = measure_with((world, &names), measure, peer, s.size, &what, watchdog)?;
            mine.extend(sample.encode());
        }
    }
    watchdog.begin(format!("{scope} (gathering the pairs measured alone)"));
    watchdog.enter_call();
    let gathered = world.gather_f64s(&mine);
    watchdog.end();
    Ok(gathered.map(|all| {
        let per_rank: Vec<&[f64]> = all.chunks_exact(mine.len().max(1)).collect();
        list.iter()
            .enumerate()
            .map(|(i, s)| {
                (0..ROUNDS)
                    .map(|round| {
                        let at = (round * list.len() + i) * SAMPLE_LEN;
                        PairSample::of_pair(&per_rank, who.ranks[s.a], who.ranks[s.b], at)
                    })
                    .collect()
            })
            .collect()
    }))
}

/// Host bytes the results of an all-pairs run of `sizes` sizes take, with
/// `pairing` of the job's `nranks` ranks measuring: on each rank the list of
/// sizes and one round's samples (8 B a size, 32 B a size); on rank 0 also each
/// round's gathered samples (32 B a rank and size), the matrices of 4 metrics
/// for each repetition of the schedule and their medians plus 6 counter
/// columns (8 B a pair and its diagonal cell); the matrix CSV is streamed to
/// its file. None: more than a u64 counts.
pub fn results_bytes(nranks: usize, pairing: usize, sizes: u64, root: bool) -> Option<u64> {
    let sample = sizes.checked_mul(SAMPLE_LEN as u64 * 8)?;
    let mine = sizes.checked_mul(8)?.checked_add(sample)?;
    if !root {
        return Some(mine);
    }
    let p = pairing as u64;
    let cells = p.checked_mul(p + 1)? / 2;
    let matrices = (ROUNDS as u64 + 1)
        .checked_mul(4)?
        .checked_mul(sizes)?
        .checked_add(Column::ALL.len() as u64)?;
    cells
        .checked_mul(matrices)?
        .checked_mul(8)?
        .checked_add(sample.checked_mul(nranks as u64)?)?
        .checked_add(mine)
}

/// Checks, on every rank alike, that a pair run's buffers, per-iteration times
/// (`per_pair` bytes) and results fit in the host memory a rank may use, before
/// any is allocated; one line when they do not.
pub fn check_memory(
    world: &World,
    program: &str,
    buffers: u64,
    per_pair: u64,
    (pairing, sizes): (usize, u64),
) -> Result<(), Failure> {
    let own = |root| {
        results_bytes(world.size, pairing, sizes, root)
            .and_then(|r| r.checked_add(buffers)?.checked_add(per_pair))
    };
    let (Some(each), Some(root)) = (own(false), own(true)) else {
        return Err(Failure::Usage(format!(
            "--all-pairs: the buffers, per-iteration times and results of {sizes} sizes on {} ranks \
             are more bytes than memory can address; lower -e/--maxbytes or -n/--iters, or sweep fewer sizes",
            world.size
        )));
    };
    let need = if world.is_root() { root } else { each };
    let fits = match crate::backend::host_memory(world.local_size) {
        Some(budget) if need > budget.bytes => Err(format!(
            "--all-pairs: each rank needs {} of host memory ({} on rank 0, which gathers the results): \
             buffers {}, per-iteration times {}, results of {sizes} sizes; only {} is available to each rank ({}); \
             lower -e/--maxbytes or -n/--iters, or sweep fewer sizes",
            human_bytes(each),
            human_bytes(root),
            human_bytes(buffers),
            human_bytes(per_pair),
            human_bytes(budget.bytes),
            budget.what
        )),
        _ => Ok(()),
    };
    agree(world, program, ExitStatus::Failed, fits)
}

/// One all-pairs run, whatever measures the pairs.
pub struct PairRun<'a> {
    /// The binary's name, for messages.
    pub program: &'a str,
    pub sizes: Vec<u64>,
    /// Timed exchanges per pair and size (for the header).
    pub iters: usize,
    pub thresholds: Thresholds,
    /// Who pairs up.
    pub pairs_of: PairsOf,
    /// The matrix CSV (a new file; the heatmap goes beside it as .png).
    pub csv: Option<&'a Path>,
    /// -T: a pair that hangs this long ends the job (0 = never).
    pub timeout_s: u64,
    /// Where the fabric counters are read around each round; None: not read
    /// (a rail's pairs: the node's TCP counters are every rail's at once).
    pub fabric: Option<FabricPlan>,
    /// --counters FILE: every round's raw deltas (a new file).
    pub counters: Option<&'a Path>,
}

/// Measures every pair with `measure` and, on rank 0, prints the table and
/// writes the CSV and heatmap. Exit status 1 when a pair is slow or received
/// wrong data. Every rank calls it.
pub(crate) fn run_pairs(
    world: &World,
    measure: &mut dyn PairMeasure,
    run: &PairRun,
) -> Result<ExitStatus, Failure> {
    let watchdog = Watchdog::start(world, run.program, run.timeout_s)?;
    run_pairs_watched(world, measure, run, &watchdog, &mut std::io::stdout())
}

/// As `run_pairs`, under a watchdog already started (before a backend opened),
/// rank 0 printing to `out`.
pub(crate) fn run_pairs_watched(
    world: &World,
    measure: &mut dyn PairMeasure,
    run: &PairRun,
    watchdog: &Watchdog,
    out: &mut dyn std::io::Write,
) -> Result<ExitStatus, Failure> {
    let program = run.program;
    // Every rank has checked that the CSV does not exist yet before rank 0 creates it.
    world.barrier();
    let csv = match (run.csv, world.is_root()) {
        (Some(path), true) => new_file(path, &format!("--csv {}", path.display())).map(Some),
        _ => Ok(None),
    };
    let csv = agree(world, program, ExitStatus::Failed, csv)?;
    let counters = match (run.counters, world.is_root()) {
        (Some(path), true) => CounterCsv::create(path).map(Some),
        _ => Ok(None),
    };
    let counters = agree(world, program, ExitStatus::Failed, counters)?;
    let who = Participants::of(world, run.pairs_of);
    if world.is_root() {
        let header = PairsHeader {
            program,
            participants: match who.ranks.len() == world.size {
                true => format!("{} ranks", world.size),
                false => format!(
                    "{} nodes (the first rank of each, of {} ranks; --rank-pairs pairs every rank)",
                    who.ranks.len(),
                    world.size
                ),
            },
            rounds: schedule_rounds(who.ranks.len()),
            repeats: ROUNDS,
            sizes: &run.sizes,
            iters: run.iters,
            each_pair: &measure.describe(),
        };
        write_header(out, &header).map_err(|e| Failure::Fatal(e.into()))?;
    }
    // Rank 0 tallies the counters round by round, --counters FILE written as they come.
    let tally = (world.is_root() && run.fabric.is_some()).then(|| {
        let schedule = Schedule {
            hosts: who.hosts.clone(),
            labels: who.labels(),
            rounds: Repeated::new(who.ranks.len()),
        };
        let file = counters.map(|file| (file, RunInfo::new(program, chrono::Utc::now())));
        RoundTally::new(schedule, file)
    });
    let mut fabric = RoundWatch::new(run.fabric.as_ref(), world.local_rank, tally);
    // The matrices so far, after every round: a job ended later keeps them.
    // Said once: a full disk fails every round's writing alike.
    let mut warned = false;
    let mut partial = |so_far: &PairResults| {
        if let (Some(_claimed), Some(path)) = (&csv, run.csv) {
            match write_matrices(path, so_far) {
                Err(e) if !warned => {
                    warned = true;
                    eprintln!(
                        "{program}: warning: --csv {}: writing the pairs measured so far failed \
                         ({e:#}); tried again after each round",
                        path.display()
                    );
                }
                _ => {}
            }
        }
    };
    let measured = measure_all_pairs(
        (world, &who),
        measure,
        &run.sizes,
        watchdog,
        &mut fabric,
        &mut partial,
    )?;
    // Rank 0 judges the medians and names the pairs to measure again alone;
    // every rank learns them, so that all call the same MPI operations.
    let judged = measured.as_ref().and_then(|each| {
        let results = PairResults::median_over(each)?;
        let verdict = results.judge(&run.thresholds);
        Some((results, verdict))
    });
    let list = judged
        .as_ref()
        .map_or_else(Vec::new, |(r, v)| confirm::to_remeasure(v, r));
    let list = confirm::decode(&world.all_gather_bytes(&confirm::encode(&list))[0]);
    let alone = measure_alone((world, &who), measure, &list, watchdog)?;
    let (Some(each), Some((mut results, mut verdict)), Some(alone)) = (measured, judged, alone)
    else {
        return Ok(ExitStatus::Ok);
    };
    let confirmation = Confirmation::judge(&mut verdict, &results, &each, &list, &alone);
    let labels = results.labels.clone();
    let (footer, counters_written) = match (&run.fabric, fabric.into_tally()) {
        (Some(plan), Some(tally)) => tally.finish(plan, &mut results),
        _ => (Vec::new(), Ok(())),
    };
    write_table(out, &results, &verdict, &confirmation, &run.thresholds)
        .map_err(|e| Failure::Fatal(e.into()))?;
    for line in footer {
        writeln!(out, "# {line}").map_err(|e| Failure::Fatal(e.into()))?;
    }
    let mut status = if !verdict.passed() {
        ExitStatus::Failed
    } else if confirmation.inconclusive() {
        ExitStatus::Inconclusive
    } else {
        ExitStatus::Ok
    };
    if let Err(e) = counters_written {
        eprintln!("{program}: error: {e:#}");
        status = ExitStatus::Failed;
    }
    if let (Some(_claimed), Some(path)) = (csv, run.csv) {
        if let Err(e) = write_matrices(path, &results) {
            eprintln!(
                "{program}: error: --csv {}: writing the matrices failed ({e:#}); the file holds \
                 the pairs measured before",
                path.display(),
            );
            return Ok(ExitStatus::Failed);
        }
        let png = heatmap_of(path);
        let drawn = if png.symlink_metadata().is_ok() {
            Err(anyhow::anyhow!(
                "{} exists and is never overwritten: no heatmap drawn",
                png.display()
            ))
        } else {
            heatmap::write_png(&png, &results, &verdict, program)
        };
        match drawn {
            Ok(()) => {
                let files = format!("# matrix: {}  heatmap: {}", path.display(), png.display());
                writeln!(out, "{files}").map_err(|e| Failure::Fatal(e.into()))?;
            }
            Err(e) => eprintln!("{program}: warning: {e:#}"),
        }
        let remeasured = alone::rows(&confirmation, &labels);
        if !remeasured.is_empty() {
            let file = alone::alone_csv_of(path);
            match alone::write(&file, &remeasured) {
                Ok(()) => writeln!(out, "# measured alone: {}", file.display())
                    .map_err(|e| Failure::Fatal(e.into()))?,
                // rack_check reads them to judge the suspects: without them it would judge
                // on the concurrent rounds alone.
                Err(e) => {
                    eprintln!("{program}: error: {e:#}");
                    status = ExitStatus::Failed;
                }
            }
        }
    }
    Ok(status)
}

/// The matrices written whole over the file this run claimed (empty at first,
/// then each round's): a write that fails leaves the one before. Streamed to
/// a temporary file beside it: the text (gigabytes at thousands of nodes) is
/// never held.
fn write_matrices(path: &Path, results: &PairResults) -> anyhow::Result<()> {
    let reason = |e: std::io::Error| anyhow::anyhow!("{}", io_reason(&e));
    let mut whole = WholeFile::beside(path).map_err(reason)?;
    write_csv(whole.file(), results)?;
    whole
        .persist(path, Replace::Always)
        .map(drop)
        .map_err(|(e, _)| reason(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(seconds: f64, p50_seconds: f64, wrong: Option<u64>) -> [f64; SAMPLE_LEN] {
        PairSample {
            seconds,
            p50_seconds,
            wrong,
            cpu_wait_seconds: None,
        }
        .encode()
    }

    fn hosts(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    /// Every rank of `names` pairs.
    fn every(names: &[&str]) -> Participants {
        Participants::among((0..names.len()).collect(), &hosts(names))
    }

    /// Rank 0's results of node pairs at 16,384 ranks (2,048 nodes of 8) and 3
    /// sizes fit in 1 GiB; every other rank's are a few bytes a size, whatever N.
    #[test]
    fn results_grow_with_the_pairing_not_the_rounds() {
        let root = results_bytes(16_384, 2_048, 3, true).unwrap();
        assert!(root < 1 << 30, "{}", human_bytes(root));
        assert!(root > 2_048 * 2_049 / 2 * 54 * 8, "{}", human_bytes(root));
        let every_rank = results_bytes(16_384, 16_384, 3, true).unwrap();
        assert!(every_rank > 50 * root, "{}", human_bytes(every_rank));
        assert_eq!(
            results_bytes(4, 4, 3, false),
            results_bytes(16_384, 16_384, 3, false)
        );
        assert_eq!(results_bytes(4, 4, 3, false), Some(3 * 8 + 3 * 32));
        assert_eq!(results_bytes(1 << 40, 1 << 40, 3, true), None);
    }

    /// Rank 0's matrices after rounds `0..upto`, every world rank sending
    /// `samples(rank, round)` (its samples of each size, one after another).
    fn folded(
        who: &Participants,
        world_size: usize,
        sizes: &[u64],
        upto: usize,
        samples: impl Fn(usize, usize) -> Vec<f64>,
    ) -> Vec<PairResults> {
        let rounds = Repeated::new(who.ranks.len());
        let mut repetitions = Vec::new();
        for r in 0..upto {
            let sent: Vec<Vec<f64>> = (0..world_size).map(|rank| samples(rank, r)).collect();
            let per_rank: Vec<&[f64]> = sent.iter().map(Vec::as_slice).collect();
            fold_round(&mut repetitions, who, sizes, rounds, r, &per_rank);
        }
        repetitions
    }

    /// After the first rounds, the pairs they measured are in the matrices and
    /// the others are not: what a job ended there writes, and what the verdict
    /// names as not measured.
    #[test]
    fn the_rounds_so_far_give_the_pairs_they_measured() {
        let names = every(&["a", "b", "c", "d"]);
        let rounds = Repeated::new(4);
        let once = rounds.once;
        // Every rank's sample, 1 us, in every round at one size.
        let us = |_, _| sample(1e-6, 1e-6, None).to_vec();
        let so_far = PairResults::median_over(&folded(&names, 4, &[8], 1, us)).unwrap();
        let measured: Vec<(usize, usize)> = so_far.sizes[0]
            .time_us
            .pairs()
            .iter()
            .map(|p| (p.0, p.1))
            .collect();
        let mut first = rounds.pairs(0);
        first
            .iter_mut()
            .for_each(|p| *p = (p.0.min(p.1), p.0.max(p.1)));
        first.sort();
        assert_eq!(measured, first);
        let verdict = so_far.judge(&Thresholds::default());
        assert_eq!(verdict.unmeasured.len(), 6 - first.len(), "{verdict:?}");
        // The whole schedule: every pair, each repetition its own matrices.
        let whole = folded(&names, 4, &[8], rounds.total(), us);
        assert_eq!(whole.len(), ROUNDS);
        assert!(whole.iter().all(|r| r.sizes[0].time_us.pairs().len() == 6));
        // Part of the second repetition: two repetitions, the second partial.
        let part = folded(&names, 4, &[8], once + 1, us);
        assert_eq!(part.len(), 2);
        assert_eq!(part[1].sizes[0].time_us.pairs().len(), first.len());
    }

    /// Node pairs: the first rank of each node measures; the matrices are the
    /// nodes', from those ranks' samples (the others' byes are never read).
    #[test]
    fn node_pairs_are_the_first_ranks_of_each_node() {
        let who = Participants::among(vec![0, 2], &hosts(&["a", "a", "b", "b"]));
        let sent = |rank, _| match rank {
            0 => sample(1e-6, 1e-6, None).to_vec(),
            2 => sample(3e-6, 2e-6, None).to_vec(),
            _ => PairSample::BYE.encode().to_vec(),
        };
        let r = &folded(&who, 4, &[1000], 1, sent)[0];
        assert_eq!(r.labels, hosts(&["a", "b"]));
        assert_eq!(r.sizes[0].time_us.pairs(), vec![(0, 1, 3.0)]);
        assert_eq!(r.sizes[0].p50_us.get(0, 1), Some(2.0));
    }

    #[test]
    fn a_pair_is_as_slow_as_its_slower_side() {
        // Two ranks, one round, sizes 1000 and 2000 B.
        let rank0 = [sample(1e-6, 1e-6, None), sample(2e-6, 1.5e-6, None)].concat();
        let rank1 = [sample(2e-6, 0.5e-6, None), sample(1e-6, 3e-6, None)].concat();
        let sent = |rank: usize, _| [&rank0, &rank1][rank].clone();
        let r = &folded(&every(&["a", "b"]), 2, &[1000, 2000], 1, sent)[0];
        assert_eq!(r.labels, hosts(&["a", "b"]));
        assert_eq!(r.sizes[0].time_us.get(0, 1), Some(2.0));
        assert_eq!(r.sizes[0].time_us.get(1, 0), Some(2.0));
        assert_eq!(r.sizes[0].p50_us.get(0, 1), Some(1.0));
        assert_eq!(r.sizes[0].algbw_gbs.get(0, 1), Some(0.5));
        assert_eq!(r.sizes[1].time_us.get(0, 1), Some(2.0));
        assert_eq!(r.sizes[1].p50_us.get(0, 1), Some(3.0));
        assert_eq!(r.sizes[1].algbw_gbs.get(0, 1), Some(1.0));
        assert!(r.sizes.iter().all(|s| s.wrong_bytes.is_none()));
    }

    #[test]
    fn a_bye_leaves_no_mark_and_wrong_bytes_add_up() {
        // Three ranks, three rounds of one pair: (1, 2), (0, 1), (0, 2); one size.
        let bye = PairSample::BYE.encode();
        let rank0 = [
            bye,
            sample(1e-6, 1e-6, Some(0)),
            sample(4e-6, 4e-6, Some(3)),
        ];
        let rank1 = [
            sample(2e-6, 2e-6, Some(1)),
            sample(1e-6, 1e-6, Some(0)),
            bye,
        ];
        let rank2 = [
            sample(2e-6, 2e-6, Some(2)),
            bye,
            sample(4e-6, 4e-6, Some(0)),
        ];
        let sent = |rank: usize, r: usize| [rank0, rank1, rank2][rank][r].to_vec();
        let r = &folded(&every(&["n", "n", "m"]), 3, &[8], 3, sent)[0];
        assert_eq!(r.labels, hosts(&["n/0", "n/1", "m/2"]));
        let s = &r.sizes[0];
        assert_eq!(
            s.time_us.pairs(),
            vec![(0, 1, 1.0), (0, 2, 4.0), (1, 2, 2.0)]
        );
        let wrong = s.wrong_bytes.as_ref().expect("validated");
        assert_eq!(wrong.pairs(), vec![(0, 1, 0.0), (0, 2, 3.0), (1, 2, 3.0)]);
        assert_eq!(wrong.get(1, 1), None);
    }
}
