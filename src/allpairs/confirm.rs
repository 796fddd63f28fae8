//! Whether a slow pair is really slow: every pair is measured in `ROUNDS`
//! interleaved rounds of the schedule, each pair whose median crosses a
//! threshold is judged on its 95% interval (`stats::interval`), then measured
//! again alone (no other pair running) before it is named. Beside the
//! suspects, in the same rounds, the typical pair of each criterion is
//! measured alone too (the pair its limit was set by): a suspect is named only
//! where the ratio of its figures alone to the typical pair's lies wholly
//! beyond the threshold. A host that is slow for every pair alike (its CPUs
//! busy with other work) slows both and names neither. One whose ratio lies
//! across the threshold cannot be told, and says how many rounds would tell.

#[cfg(test)]
use super::judging::LINES_EACH;
use super::judging::{capped, PairsVerdict, SlowPair};
use super::matrix::PairResults;
use super::sample::PairSample;
use crate::sizes::human_bytes;
use crate::stats::interval::{Estimate, Side};

/// Rounds of the whole schedule, and of each re-measurement alone: the fewest
/// that give an interval (`MIN_SAMPLES`).
pub const ROUNDS: usize = crate::stats::interval::MIN_SAMPLES;

/// A share of a pair's time alone its ranks waited for a CPU from which the
/// line says the host was busy.
const BUSY_SHARE: f64 = 0.1;

/// A share of waiting from which a pair is starved: its latency cannot be
/// judged (one wait for a CPU costs a scheduler slice, milliseconds, hundreds
/// of network latencies, and the placement of ranks on cores decides which
/// pairs pay it), nor anything of two ranks of one node, whose shared memory
/// moves data only while both run (measured: 135 times slower alone on a busy
/// host, more than a 5 Mbit/s link's 100; docs/rack-acceptance.md).
const STARVED_SHARE: f64 = 0.25;

/// What a pair was slow on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Criterion {
    /// algbw below the limit, at the largest size.
    Bandwidth,
    /// Median time above the limit, at the smallest size.
    Latency,
}

impl Criterion {
    /// The pair's figure from one sample (slower side's seconds), in the
    /// criterion's unit: GB/s or us.
    fn figure(self, sample: &PairSample, size: u64) -> f64 {
        match self {
            Criterion::Bandwidth => size as f64 / sample.seconds / 1e9,
            Criterion::Latency => sample.p50_seconds * 1e6,
        }
    }

    /// Where an estimate lies against `limit`: Beyond it (slow), within it, or across.
    fn side(self, e: &Estimate, limit: f64) -> Side {
        match self {
            Criterion::Bandwidth => e.against(limit, f64::INFINITY),
            Criterion::Latency => e.against(0.0, limit),
        }
    }

    /// The threshold as a ratio to the typical pair: the fraction of the
    /// median (bandwidth) or the multiple of the lowest (latency) the limit is.
    fn ratio_limit(self, limit: f64, v: &PairsVerdict) -> f64 {
        match self {
            Criterion::Bandwidth => limit / v.median_gbs,
            Criterion::Latency => limit / v.min_us,
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Criterion::Bandwidth => "GB/s algbw",
            Criterion::Latency => "us median time",
        }
    }
}

/// A pair to measure again alone, at the size it is judged at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remeasure {
    pub a: usize,
    pub b: usize,
    pub size: u64,
}

/// The typical pair of a criterion: the one its limit was set by (the lowest
/// latency; the bandwidth nearest the median), never a slow pair. None where
/// the criterion has no slow pair, or every pair is slow.
pub fn reference(v: &PairsVerdict, results: &PairResults, c: Criterion) -> Option<Remeasure> {
    let (slow, size) = match c {
        Criterion::Bandwidth => (&v.slow_bw, v.bw_size),
        Criterion::Latency => (&v.slow_latency, v.latency_size),
    };
    if slow.is_empty() {
        return None;
    }
    let at = results.at(size)?;
    let (matrix, target) = match c {
        Criterion::Bandwidth => (&at.algbw_gbs, v.median_gbs),
        Criterion::Latency => (&at.p50_us, v.min_us),
    };
    let distance = |value: f64| (value - target).abs();
    matrix
        .pairs()
        .into_iter()
        .filter(|p| p.2.is_finite() && !slow.iter().any(|s| (s.a, s.b) == (p.0, p.1)))
        .min_by(|x, y| distance(x.2).total_cmp(&distance(y.2)))
        .map(|(a, b, _)| Remeasure { a, b, size })
}

/// Suspect pairs measured again alone at most, the furthest past their limit
/// first: each takes `ROUNDS` turns while every other rank waits, so a fabric
/// with thousands of slow pairs would take hours. The others are judged on
/// their concurrent rounds (slow only where the whole interval is).
pub const MAX_ALONE: usize = 32;

/// The pairs whose median crossed a threshold (`MAX_ALONE` of them at most,
/// the furthest past their limit first), then each criterion's typical pair:
/// each is measured again alone, in the same rounds.
pub fn to_remeasure(v: &PairsVerdict, results: &PairResults) -> Vec<Remeasure> {
    // How far inside its limit a pair is: under 1 for every suspect, least the worst.
    let mut slow: Vec<(f64, &SlowPair, u64)> = (v.slow_bw.iter())
        .map(|p| (p.value / p.limit, p, v.bw_size))
        .chain((v.slow_latency.iter()).map(|p| (p.limit / p.value, p, v.latency_size)))
        .collect();
    slow.sort_by(|x, y| x.0.total_cmp(&y.0));
    let slow = slow
        .into_iter()
        .take(MAX_ALONE)
        .map(|(_, p, size)| Remeasure {
            a: p.a,
            b: p.b,
            size,
        });
    let typical = [Criterion::Bandwidth, Criterion::Latency]
        .into_iter()
        .filter_map(|c| reference(v, results, c));
    let mut out: Vec<Remeasure> = Vec::new();
    for s in slow.chain(typical) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// A list as bytes, for rank 0 to send every rank (and back).
pub fn encode(list: &[Remeasure]) -> Vec<u8> {
    list.iter()
        .flat_map(|s| [s.a as u64, s.b as u64, s.size])
        .flat_map(u64::to_le_bytes)
        .collect()
}

pub fn decode(bytes: &[u8]) -> Vec<Remeasure> {
    let words: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    words
        .chunks_exact(3)
        .map(|w| Remeasure {
            a: w[0] as usize,
            b: w[1] as usize,
            size: w[2],
        })
        .collect()
}

/// What measuring a suspect alone said.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Finding {
    /// Its alone interval lies wholly beyond the limit too.
    Confirmed,
    /// Alone it is within the limit: slow only while other pairs ran.
    NotConfirmed,
    /// Its alone interval lies across the limit; about this many rounds would tell.
    CannotTell(Option<usize>),
    /// Slow alone, but its ranks waited for a CPU for this share of the time,
    /// which may account for it: the host, not the network, may be what is slow.
    HostBusy(f64),
    /// Not measured alone and slow over its concurrent rounds, while `fast` of
    /// the `of` suspects of its criterion measured alone were within the limit
    /// alone: other pairs running may be all that made it slow.
    Unchecked { fast: usize, of: usize },
}

/// The figures of one pair measured alone, in a criterion's unit, with the
/// share of each round's time its ranks waited for a CPU (empty: not read).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measured {
    pub a: usize,
    pub b: usize,
    pub figures: Vec<f64>,
    pub cpu_wait: Vec<f64>,
}

impl Measured {
    fn of(a: usize, b: usize, samples: &[PairSample], c: Criterion, size: u64) -> Measured {
        let shares: Option<Vec<f64>> = samples
            .iter()
            .map(|s| Some((s.cpu_wait_seconds? / s.seconds).clamp(0.0, 1.0)))
            .collect();
        Measured {
            a,
            b,
            figures: samples.iter().map(|s| c.figure(s, size)).collect(),
            cpu_wait: shares.unwrap_or_default(),
        }
    }

    fn estimate(&self) -> Estimate {
        Estimate::median_of(&self.figures)
    }

    fn all_finite(&self) -> bool {
        !self.figures.is_empty() && self.figures.iter().all(|f| f.is_finite())
    }

    /// Its figures had its ranks not waited for a CPU: a round whose time
    /// was T, of which a share s waited, took at least (1 - s) T on the
    /// network. The shorter wait of the two ranks is taken (`PairSample::of_pair`).
    fn without_wait(&self, c: Criterion) -> Measured {
        let figures = self
            .figures
            .iter()
            .zip(&self.cpu_wait)
            .map(|(f, s)| match c {
                Criterion::Bandwidth => f / (1.0 - s),
                Criterion::Latency => f * (1.0 - s),
            });
        Measured {
            figures: figures.collect(),
            ..self.clone()
        }
    }

    /// The median share of the time its ranks waited for a CPU, where read.
    fn cpu_wait(&self) -> Option<f64> {
        let e = Estimate::median_of(&self.cpu_wait);
        (e.rounds > 0 && e.value.is_finite()).then_some(e.value)
    }
}

/// Whose figures alone: a pair's, or the criterion's typical pair's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whose {
    Pair(usize, usize),
    Typical,
}

/// The figures measured alone at a size on a criterion, where there are any.
pub type LookupAlone<'a> = dyn Fn(Criterion, u64, Whose) -> Option<Measured> + 'a;

/// A suspect against the typical pair, both measured alone in the same rounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Compared {
    pub typical: Measured,
    /// The suspect's figure over the typical pair's (ratio of medians).
    pub ratio: Estimate,
    /// The threshold as such a ratio (0.9 of the median, 2 x the lowest).
    pub ratio_limit: f64,
}

/// One suspect pair, judged in the concurrent rounds and alone.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub pair: SlowPair,
    pub criterion: Criterion,
    pub size: u64,
    /// Over the concurrent rounds.
    pub together: Estimate,
    /// Over the rounds alone (no rounds: not measured alone).
    pub alone: Estimate,
    /// The figures alone (none: not measured alone).
    pub measured: Measured,
    /// Against the typical pair alone, where it was measured.
    pub compared: Option<Compared>,
    pub finding: Finding,
}

/// Every suspect's re-measurement; the verdict keeps only the confirmed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Confirmation {
    pub checked: Vec<Checked>,
}

/// The finite figures of a pair in each concurrent round.
fn together(rounds: &[PairResults], c: Criterion, size: u64, a: usize, b: usize) -> Vec<f64> {
    rounds
        .iter()
        .filter_map(|r| r.at(size))
        .filter_map(|s| match c {
            Criterion::Bandwidth => s.algbw_gbs.get(a, b),
            Criterion::Latency => s.p50_us.get(a, b),
        })
        .collect()
}

/// Where an estimate lies against a limit, as a finding.
fn finding_of(c: Criterion, e: &Estimate, limit: f64) -> Finding {
    if !e.value.is_finite() {
        // Not a measurement: never a pass.
        return Finding::Confirmed;
    }
    match c.side(e, limit) {
        Side::Inside => Finding::NotConfirmed,
        Side::Straddles => Finding::CannotTell(e.rounds_to_clear(limit)),
        Side::Below | Side::Above => Finding::Confirmed,
    }
}

/// A suspect measured alone: against the typical pair measured beside it
/// where that pair's figures are whole, else against the limit itself; then,
/// where its ranks waited for a CPU, slow only if it would be without the
/// wait, and never where they starved (`STARVED_SHARE`) on latency or as two
/// ranks of one node (`one_node`).
fn judge_alone(
    c: Criterion,
    mine: &Measured,
    one_node: bool,
    typical: Option<Measured>,
    limit: f64,
    v: &PairsVerdict,
) -> (Option<Compared>, Finding) {
    if !mine.all_finite() {
        // A round that measured nothing: never a pass.
        return (None, Finding::Confirmed);
    }
    let (compared, finding) = against_typical(c, mine, typical.clone(), limit, v);
    let Some(share) = mine.cpu_wait().filter(|_| finding == Finding::Confirmed) else {
        return (compared, finding);
    };
    // Slow even had the host given its ranks back every moment they waited?
    // Against the typical pair where it was measured: the limit itself was
    // set in rounds the same waits slowed.
    let unwaited = match against_typical(c, &mine.without_wait(c), typical, limit, v) {
        (Some(compared), _) => finding_of(c, &compared.ratio, compared.ratio_limit),
        (None, absolute) => absolute,
    };
    let starved = share >= STARVED_SHARE && (c == Criterion::Latency || one_node);
    match unwaited == Finding::Confirmed && !starved {
        true => (compared, finding),
        false => (compared, Finding::HostBusy(share)),
    }
}

/// A suspect alone against its limit, and against the typical pair measured
/// beside it where that pair's figures are whole: cleared where either says
/// it is within (alone within the limit of the concurrent rounds, or no slower
/// than a typical pair alone), else as its figures alone say.
fn against_typical(
    c: Criterion,
    mine: &Measured,
    typical: Option<Measured>,
    limit: f64,
    v: &PairsVerdict,
) -> (Option<Compared>, Finding) {
    let absolute = finding_of(c, &mine.estimate(), limit);
    let ratio_limit = c.ratio_limit(limit, v);
    let Some(typical) = typical.filter(|t| t.all_finite() && ratio_limit.is_finite()) else {
        return (None, absolute);
    };
    let ratio = Estimate::ratio_of_medians(&mine.figures, &typical.figures);
    let relative = finding_of(c, &ratio, ratio_limit);
    // The typical pair vetoes only where it tells: a busy host's scheduler
    // makes its rounds bimodal (microseconds, or a slice of milliseconds), and
    // a ratio to such rounds lies across any threshold.
    let finding = match (absolute, relative) {
        (Finding::NotConfirmed, _) | (_, Finding::NotConfirmed) => Finding::NotConfirmed,
        (other, _) => other,
    };
    let compared = Compared {
        typical,
        ratio,
        ratio_limit,
    };
    (Some(compared), finding)
}

impl Confirmation {
    /// Judges each suspect's samples alone (`alone[i]` for `list[i]`, the
    /// typical pairs among them; `results`: the medians of `rounds`) and keeps
    /// in `verdict` only the confirmed pairs (its suspect nodes recomputed).
    pub fn judge(
        verdict: &mut PairsVerdict,
        results: &PairResults,
        rounds: &[PairResults],
        list: &[Remeasure],
        alone: &[Vec<PairSample>],
    ) -> Confirmation {
        for (s, samples) in list.iter().zip(alone) {
            let wrong: u64 = samples.iter().filter_map(|x| x.wrong).sum();
            if wrong > 0 && !verdict.wrong.iter().any(|w| (w.0, w.1) == (s.a, s.b)) {
                verdict.wrong.push((s.a, s.b, wrong));
            }
        }
        let typical =
            [Criterion::Bandwidth, Criterion::Latency].map(|c| (c, reference(verdict, results, c)));
        let lookup = |c: Criterion, size: u64, whose: Whose| {
            let (a, b) = match whose {
                Whose::Pair(a, b) => (a, b),
                Whose::Typical => typical
                    .iter()
                    .find(|t| t.0 == c)
                    .and_then(|t| t.1)
                    .map(|r| (r.a, r.b))?,
            };
            let i = list
                .iter()
                .position(|s| (s.a, s.b, s.size) == (a, b, size))?;
            Some(Measured::of(a, b, &alone[i], c, size))
        };
        Confirmation::judge_with(verdict, results, rounds, &lookup)
    }

    /// Judges each pair of `verdict` that crossed a limit: on its figures alone
    /// where `alone` has them (against its criterion's typical pair alone where
    /// that was measured), else on the interval of its concurrent `rounds`
    /// (slow only when the whole interval is); keeps in `verdict` only the
    /// confirmed pairs, its suspect nodes recomputed. rack_check judges the
    /// launches of an all-pairs test with it, their re-measures alone pooled.
    pub fn judge_with(
        verdict: &mut PairsVerdict,
        results: &PairResults,
        rounds: &[PairResults],
        alone: &LookupAlone,
    ) -> Confirmation {
        let mut checked = Vec::new();
        let kinds = [
            (Criterion::Bandwidth, &verdict.slow_bw, verdict.bw_size),
            (
                Criterion::Latency,
                &verdict.slow_latency,
                verdict.latency_size,
            ),
        ];
        for (criterion, slow, size) in kinds {
            for p in slow {
                let together = Estimate::median_of(&together(rounds, criterion, size, p.a, p.b));
                let measured = alone(criterion, size, Whose::Pair(p.a, p.b)).unwrap_or_default();
                let (compared, finding) = match measured.figures.is_empty() {
                    false => {
                        let typical = alone(criterion, size, Whose::Typical);
                        let one_node =
                            host_of(&results.labels[p.a]) == host_of(&results.labels[p.b]);
                        judge_alone(criterion, &measured, one_node, typical, p.limit, verdict)
                    }
                    true => (None, finding_of(criterion, &together, p.limit)),
                };
                checked.push(Checked {
                    pair: p.clone(),
                    criterion,
                    size,
                    together,
                    alone: measured.estimate(),
                    measured,
                    compared,
                    finding,
                });
            }
        }
        doubt_the_unchecked(&mut checked);
        let confirmed = |c: Criterion, p: &SlowPair| {
            checked.iter().any(|k| {
                k.criterion == c
                    && (k.pair.a, k.pair.b) == (p.a, p.b)
                    && k.finding == Finding::Confirmed
            })
        };
        verdict
            .slow_bw
            .retain(|p| confirmed(Criterion::Bandwidth, p));
        verdict
            .slow_latency
            .retain(|p| confirmed(Criterion::Latency, p));
        verdict.find_suspects(results);
        Confirmation { checked }
    }

    /// A suspect measured alone lay across its limit, or was slow on latency
    /// while its host kept its ranks waiting for a CPU, or was not measured
    /// alone where others were fast alone: the run cannot tell.
    pub fn inconclusive(&self) -> bool {
        self.checked.iter().any(|c| {
            matches!(
                c.finding,
                Finding::CannotTell(_) | Finding::HostBusy(_) | Finding::Unchecked { .. }
            )
        })
    }

    /// One line per suspect pair, naming the nodes (`LINES_EACH` at most).
    pub fn lines(&self, labels: &[String]) -> Vec<String> {
        capped(&self.checked, "suspect pairs checked", |c| c.line(labels))
    }
}

impl Checked {
    fn line(&self, labels: &[String]) -> String {
        let unit = self.criterion.unit();
        let pair = format!(
            "pair {} <-> {} at {}: {} with the other pairs running, limit {}",
            labels[self.pair.a],
            labels[self.pair.b],
            human_bytes(self.size),
            shown_estimate(&self.together, unit),
            fig(self.pair.limit),
        );
        if self.alone.rounds == 0 {
            return format!(
                "{pair}; not measured alone: {}",
                together_finding(self.finding)
            );
        }
        let against = match &self.compared {
            Some(c) => format!(
                ", {} x the typical pair {} <-> {} alone in the same rounds ({}), limit {} x",
                shown_ratio(&c.ratio),
                labels[c.typical.a],
                labels[c.typical.b],
                shown_estimate(&c.typical.estimate(), unit),
                fig(c.ratio_limit),
            ),
            None => String::new(),
        };
        // The host's part goes inside the parentheses, so that the line
        // still ends with the finding.
        let busy = match self.busy_host() {
            Some(share) => format!(
                "; its ranks waited for a CPU {:.0}% of the time: the host ran other work",
                share * 100.0
            ),
            None => String::new(),
        };
        let what = format!(
            "{pair}; alone {}{against} (re-measured alone {} times{busy})",
            shown_estimate(&self.alone, unit),
            self.alone.rounds,
        );
        match (self.finding, &self.compared) {
            (Finding::Confirmed, _) => format!("{what}: slow, confirmed alone"),
            (Finding::NotConfirmed, None) => {
                format!("{what}: not confirmed (slow only while other pairs ran)")
            }
            (Finding::NotConfirmed, Some(_)) => format!(
                "{what}: not confirmed (alone it is within the limit, or within that of the typical \
                 pair beside it)"
            ),
            (Finding::CannotTell(Some(n)), _) => format!(
                "{what}: cannot tell (its interval lies across the limit); about {n} rounds would tell"
            ),
            (Finding::CannotTell(None), _) => format!(
                "{what}: cannot tell (its median lies on the limit; no number of rounds would tell)"
            ),
            (Finding::HostBusy(_), _) => format!(
                "{what}: cannot tell (its ranks' wait for a CPU may be all that made it slow); rerun \
                 on an idle host"
            ),
            // Only a pair not measured alone is unchecked.
            (Finding::Unchecked { .. }, _) => format!("{what}: {}", together_finding(self.finding)),
        }
    }

    /// The share of its time alone the suspect's ranks waited for a CPU, where
    /// it is enough to say the host was busy.
    fn busy_host(&self) -> Option<f64> {
        self.measured.cpu_wait().filter(|&s| s >= BUSY_SHARE)
    }
}

/// The host of a label: ranks that share one are labelled `host/rank`.
fn host_of(label: &str) -> &str {
    label.split('/').next().unwrap_or(label)
}

/// A pair judged on its rounds with the other pairs running only.
fn together_finding(f: Finding) -> String {
    match f {
        Finding::Confirmed => "slow over the whole interval".into(),
        Finding::NotConfirmed => "within the limit over the whole interval".into(),
        Finding::CannotTell(Some(n)) => {
            format!("cannot tell (its interval lies across the limit); about {n} rounds would tell")
        }
        Finding::CannotTell(None) => {
            "cannot tell (its median lies on the limit; no number of rounds would tell)".into()
        }
        // Only a pair measured alone has its wait for a CPU read.
        Finding::HostBusy(share) => format!(
            "cannot tell (its ranks waited for a CPU {:.0}% of the time)",
            share * 100.0
        ),
        Finding::Unchecked { fast, of } => format!(
            "cannot tell (slow over the whole interval, but {fast} of the {of} suspects measured \
             alone were within the limit alone: slow only while other pairs ran)"
        ),
    }
}

/// A suspect not measured alone (beyond `MAX_ALONE`, or in no launch's
/// re-measure) is slow on its concurrent rounds alone; where suspects of its
/// criterion that were measured alone turned out within the limit alone, the
/// other pairs running may be all that made it slow too: it cannot be told.
fn doubt_the_unchecked(checked: &mut [Checked]) {
    for criterion in [Criterion::Bandwidth, Criterion::Latency] {
        let alone = || {
            (checked.iter()).filter(|k| k.criterion == criterion && !k.measured.figures.is_empty())
        };
        let of = alone().count();
        let fast = alone()
            .filter(|k| k.finding == Finding::NotConfirmed)
            .count();
        if fast == 0 {
            continue;
        }
        for k in checked.iter_mut().filter(|k| {
            k.criterion == criterion
                && k.measured.figures.is_empty()
                && k.finding == Finding::Confirmed
                && k.together.value.is_finite()
        }) {
            k.finding = Finding::Unchecked { fast, of };
        }
    }
}

/// Three significant digits, whatever the scale.
fn fig(v: f64) -> String {
    if v.is_finite() && v != 0.0 {
        let digits = (2 - v.abs().log10().floor() as i64).max(0) as usize;
        format!("{v:.digits$}")
    } else {
        format!("{v}")
    }
}

/// "20.1 [19.8, 20.4] us median time over 3 rounds", or "... (no interval)".
fn shown_estimate(e: &Estimate, unit: &str) -> String {
    match e.interval {
        Some(i) => format!(
            "{} [{}, {}] {unit} over {} rounds",
            fig(e.value),
            fig(i.lo),
            fig(i.hi),
            e.rounds
        ),
        None => format!(
            "{} {unit} over {} rounds (no interval)",
            fig(e.value),
            e.rounds
        ),
    }
}

/// "1.05 [0.93, 1.20]", or "1.05" without an interval.
fn shown_ratio(e: &Estimate) -> String {
    match e.interval {
        Some(i) => format!("{} [{}, {}]", fig(e.value), fig(i.lo), fig(i.hi)),
        None => fig(e.value),
    }
}

#[cfg(test)]
mod tests {
    use super::super::judging::Thresholds;
    use super::super::matrix::tests::results;
    use super::*;

    /// What a pair does alone in each of the `ROUNDS`: median time at 8 B,
    /// algbw at 1 MiB, and the share of its time its ranks waited for a CPU.
    #[derive(Clone, Copy)]
    struct Alone<'a> {
        us: &'a [f64],
        gbs: &'a [f64],
        wait: Option<f64>,
    }

    const HEALTHY: Alone = Alone {
        us: &[5.0, 5.2, 4.9],
        gbs: &[45.0, 46.0, 44.0],
        wait: None,
    };

    fn samples(s: &Remeasure, a: Alone) -> Vec<PairSample> {
        let seconds = |k: usize| match s.size {
            8 => a.us[k] * 1e-6,
            _ => s.size as f64 / a.gbs[k] / 1e9,
        };
        (0..ROUNDS)
            .map(|k| PairSample {
                seconds: seconds(k),
                p50_seconds: seconds(k),
                wrong: None,
                cpu_wait_seconds: a.wait.map(|w| w * seconds(k)),
            })
            .collect()
    }

    /// A slow node among 40: 39 pairs slow on each criterion. The worst
    /// `MAX_ALONE` are measured again alone, the worst first, then the
    /// typical pairs; the lines stop at `LINES_EACH` a kind and count the rest.
    #[test]
    fn a_slow_node_of_many_re_measures_its_worst_pairs_and_counts_the_rest() {
        let mut r = results(40, Some(3), 45.0, 20.0);
        r.sizes[1].algbw_gbs.set(3, 7, 1.0);
        r.sizes[0].p50_us.set(3, 9, 5000.0);
        let verdict = r.judge(&Thresholds::default());
        assert_eq!(
            (verdict.slow_bw.len(), verdict.slow_latency.len()),
            (39, 39)
        );
        let list = to_remeasure(&verdict, &r);
        assert_eq!(list.len(), MAX_ALONE + 2);
        let first: Vec<(usize, usize, u64)> =
            list[..2].iter().map(|s| (s.a, s.b, s.size)).collect();
        // 1 GB/s against a 40.5 limit, 5000 us against 10: the latency one is further out.
        assert_eq!(first, [(3, 9, 8), (3, 7, 1 << 20)]);
        let lines = verdict.lines(&r.labels, &Thresholds::default());
        let more = |what: &str| {
            lines
                .iter()
                .filter(|l| l.starts_with(&format!("... and 19 more slow pairs by {what} (")))
                .count()
        };
        assert_eq!((more("bandwidth"), more("latency")), (1, 1), "{lines:#?}");
        // 20 + 1 a criterion, and the suspect node.
        assert_eq!(lines.len(), 2 * (LINES_EACH + 1) + 1, "{lines:#?}");
        assert_eq!(
            lines.last().unwrap(),
            "suspect node node3: all 39 of its pairs are slow"
        );
    }

    /// Node 2 of 5 slow (20 GB/s against 45, 50 us against 5) in three rounds;
    /// its pairs measured alone as `slow`, the typical pairs as `typical`.
    fn judged_beside(slow: Alone, typical: Option<Alone>) -> (PairsVerdict, Confirmation) {
        judged_on(slow, typical, false)
    }

    /// As `judged_beside`, the five ranks on one host where `one_host`.
    fn judged_on(
        slow: Alone,
        typical: Option<Alone>,
        one_host: bool,
    ) -> (PairsVerdict, Confirmation) {
        let mut one = results(5, Some(2), 45.0, 20.0);
        if one_host {
            one.labels = (0..5).map(|r| format!("vm/{r}")).collect();
        }
        let rounds = vec![one; ROUNDS];
        let medians = PairResults::median_over(&rounds).unwrap();
        let mut verdict = medians.judge(&Thresholds::default());
        let mut list = to_remeasure(&verdict, &medians);
        assert_eq!(
            list.len(),
            10,
            "4 pairs on each criterion, then (0, 1) at each size: {list:?}"
        );
        assert_eq!(
            list[8..],
            [
                Remeasure {
                    a: 0,
                    b: 1,
                    size: 1 << 20
                },
                Remeasure {
                    a: 0,
                    b: 1,
                    size: 8
                }
            ]
        );
        assert_eq!(decode(&encode(&list)), list);
        if typical.is_none() {
            list.truncate(8);
        }
        let alone: Vec<Vec<PairSample>> = list
            .iter()
            .map(|s| match s.b == 2 || s.a == 2 {
                true => samples(s, slow),
                false => samples(s, typical.expect("measured")),
            })
            .collect();
        let c = Confirmation::judge(&mut verdict, &medians, &rounds, &list, &alone);
        (verdict, c)
    }

    /// Node 2 of 5 slow in three rounds; every suspect but its first on
    /// bandwidth measured alone as `slow` (as beyond `MAX_ALONE`), the typical
    /// pairs as healthy.
    fn judged_but_one(slow: Alone) -> (PairsVerdict, Confirmation) {
        let rounds = vec![results(5, Some(2), 45.0, 20.0); ROUNDS];
        let medians = PairResults::median_over(&rounds).unwrap();
        let mut verdict = medians.judge(&Thresholds::default());
        let mut list = to_remeasure(&verdict, &medians);
        let skipped = list.iter().position(|s| s.size == 1 << 20).unwrap();
        list.remove(skipped);
        let alone: Vec<Vec<PairSample>> = (list.iter())
            .map(|s| match s.b == 2 || s.a == 2 {
                true => samples(s, slow),
                false => samples(s, HEALTHY),
            })
            .collect();
        let c = Confirmation::judge(&mut verdict, &medians, &rounds, &list, &alone);
        (verdict, c)
    }

    /// A suspect not measured alone is slow on its concurrent rounds alone:
    /// confirmed where the suspects measured alone were slow alone too, and
    /// not told where they were within the limit alone.
    #[test]
    fn a_suspect_not_measured_alone_is_doubted_when_the_others_were_fast_alone() {
        let unchecked = |c: &Confirmation| {
            let k = c.checked.iter().find(|k| k.measured.figures.is_empty());
            k.expect("one not measured alone").finding
        };
        let slow = Alone {
            us: &[50.0, 52.0, 49.0],
            gbs: &[20.0, 21.0, 19.0],
            wait: None,
        };
        let (v, c) = judged_but_one(slow);
        assert_eq!(unchecked(&c), Finding::Confirmed);
        assert_eq!((v.slow_bw.len(), v.suspects.len()), (4, 1));
        assert!(!c.inconclusive());
        let (v, c) = judged_but_one(HEALTHY);
        assert_eq!(unchecked(&c), Finding::Unchecked { fast: 3, of: 3 });
        assert!(v.slow_bw.is_empty() && v.passed() && c.inconclusive());
        let line = c.lines(&labels())[0].clone();
        assert!(
            line.ends_with(
                "not measured alone: cannot tell (slow over the whole interval, but 3 of the 3 \
                 suspects measured alone were within the limit alone: slow only while other pairs ran)"
            ),
            "{line}"
        );
    }

    fn judged(us: &[f64], gbs: &[f64]) -> (PairsVerdict, Confirmation) {
        let slow = Alone {
            us,
            gbs,
            wait: None,
        };
        judged_beside(slow, Some(HEALTHY))
    }

    fn labels() -> Vec<String> {
        results(5, None, 1.0, 1.0).labels
    }

    #[test]
    fn a_pair_slow_alone_too_is_confirmed_and_its_node_named() {
        let (v, c) = judged(&[50.0, 52.0, 49.0], &[20.0, 21.0, 19.0]);
        assert!(c.checked.iter().all(|k| k.finding == Finding::Confirmed));
        assert_eq!((v.slow_bw.len(), v.slow_latency.len()), (4, 4));
        assert_eq!(v.suspects, [2]);
        assert!(!v.passed() && !c.inconclusive());
        let lines = c.lines(&labels());
        assert_eq!(
            lines[0],
            "pair node0 <-> node2 at 1 MiB: 20.0 [20.0, 20.0] GB/s algbw over 3 rounds with the \
             other pairs running, limit 40.5; alone 20.0 [19.0, 21.0] GB/s algbw over 3 rounds, \
             0.444 [0.413, 0.477] x the typical pair node0 <-> node1 alone in the same rounds \
             (45.0 [44.0, 46.0] GB/s algbw over 3 rounds), limit 0.900 x (re-measured alone 3 \
             times): slow, confirmed alone"
        );
        let rows = super::super::alone::rows(&c, &labels());
        assert_eq!(
            rows.len(),
            10,
            "8 suspects, a typical pair on each criterion"
        );
    }

    #[test]
    fn a_pair_healthy_alone_is_not_confirmed() {
        let (v, c) = judged(&[5.0, 5.5, 6.0], &[44.0, 45.0, 46.0]);
        assert!(c.checked.iter().all(|k| k.finding == Finding::NotConfirmed));
        assert!(
            v.passed() && v.suspects.is_empty() && !c.inconclusive(),
            "{v:?}"
        );
        let lines = c.lines(&labels());
        assert!(
            lines[4].ends_with(
                ": not confirmed (alone it is within the limit, or within that of the typical pair beside it)"
            ),
            "{lines:?}"
        );
    }

    #[test]
    fn a_pair_across_the_limit_alone_cannot_be_told() {
        // Latency 2 x the typical pair's: 8, 11, 12 against 4.9 to 5.2 lie
        // across it; bandwidth 45 clears.
        let (v, c) = judged(&[8.0, 11.0, 12.0], &[44.0, 45.0, 46.0]);
        let unsure: Vec<&Checked> = c
            .checked
            .iter()
            .filter(|k| matches!(k.finding, Finding::CannotTell(Some(n)) if n > ROUNDS))
            .collect();
        assert_eq!(unsure.len(), 4, "{c:?}");
        assert!(unsure.iter().all(|k| k.criterion == Criterion::Latency));
        // Not confirmed slow, so no failure, but the run cannot tell: exit 4.
        assert!(v.passed() && c.inconclusive() && v.suspects.is_empty());
        let lines = c.lines(&labels());
        assert!(
            lines[4].contains(": cannot tell (its interval lies across the limit); about "),
            "{lines:?}"
        );
    }

    /// A busy host slows every pair alone: the suspects and the typical pair
    /// alike, both far beyond the limits the concurrent rounds set.
    #[test]
    fn a_host_slow_for_every_pair_names_none() {
        let busy = Alone {
            us: &[2900.0, 2450.0, 3250.0],
            gbs: &[0.26, 0.25, 0.32],
            wait: Some(0.52),
        };
        let (v, c) = judged_beside(busy, Some(busy));
        assert!(
            c.checked.iter().all(|k| k.finding == Finding::NotConfirmed),
            "{c:?}"
        );
        assert!(v.passed() && v.suspects.is_empty() && !c.inconclusive());
        let lines = c.lines(&labels());
        assert!(
            lines[4].ends_with(
                "(re-measured alone 3 times; its ranks waited for a CPU 52% of the time: the host \
                 ran other work): not confirmed (alone it is within the limit, or within that of \
                 the typical pair beside it)"
            ),
            "{lines:?}"
        );
        let rows = super::super::alone::rows(&c, &labels());
        let shares: Vec<f64> = rows[4]
            .cpu_wait_shares
            .split(';')
            .map(|x| x.parse().unwrap())
            .collect();
        assert!((shares[0] - 0.52).abs() < 1e-9, "{shares:?}");
        // Judged against its limit alone, as without a typical pair, each
        // would be named on bandwidth; on latency its wait for a CPU leaves it
        // untold.
        let (v, c) = judged_beside(busy, None);
        let (bw, lat) = c.checked.split_at(4);
        assert!(bw
            .iter()
            .all(|k| k.finding == Finding::Confirmed && k.compared.is_none()));
        assert!(lat
            .iter()
            .all(|k| matches!(k.finding, Finding::HostBusy(s) if (s - 0.52).abs() < 1e-9)));
        assert_eq!(v.suspects, [2]);
        assert!(c.inconclusive());
        assert!(
            c.lines(&labels())[4].ends_with(
                "(re-measured alone 3 times; its ranks waited for a CPU 52% of the time: the host \
                 ran other work): cannot tell (its ranks' wait for a CPU may be all that made it \
                 slow); rerun on an idle host"
            ),
            "{:?}",
            c.lines(&labels())
        );
    }

    /// Latency slow beside a fast typical pair while its ranks waited for a
    /// CPU (the placement of ranks on a busy host's cores): not named.
    #[test]
    fn latency_slow_while_waiting_for_a_cpu_cannot_be_told() {
        let starved = Alone {
            us: &[2760.0, 2740.0, 2840.0],
            gbs: &[44.0, 45.0, 46.0],
            wait: Some(0.6),
        };
        let (v, c) = judged_beside(starved, Some(HEALTHY));
        let lat: Vec<&Checked> = c
            .checked
            .iter()
            .filter(|k| k.criterion == Criterion::Latency)
            .collect();
        assert!(
            lat.iter()
                .all(|k| matches!(k.finding, Finding::HostBusy(_))),
            "{c:?}"
        );
        assert!(v.passed() && v.suspects.is_empty() && c.inconclusive());
        // A little waiting (10%) leaves a slow pair confirmed.
        let slowed = Alone {
            wait: Some(0.1),
            ..starved
        };
        let (v, c) = judged_beside(slowed, Some(HEALTHY));
        assert!(c
            .checked
            .iter()
            .filter(|k| k.criterion == Criterion::Latency)
            .all(|k| k.finding == Finding::Confirmed));
        assert_eq!(v.suspects, [2]);
    }

    /// Bandwidth 0.6 of the typical pair's while its ranks waited for a CPU
    /// 60% of the time: had they not waited it could have been 1.5 of it,
    /// so it cannot be told; 0.02 of it (a slowed link on a busy host) stays slow.
    #[test]
    fn bandwidth_slow_by_less_than_its_wait_for_a_cpu_cannot_be_told() {
        let starved = Alone {
            us: &[5.0, 5.1, 4.9],
            gbs: &[27.0, 28.0, 26.0],
            wait: Some(0.6),
        };
        let (v, c) = judged_beside(starved, Some(HEALTHY));
        let bw: Vec<&Checked> = c
            .checked
            .iter()
            .filter(|k| k.criterion == Criterion::Bandwidth)
            .collect();
        assert!(
            bw.iter().all(|k| k.finding == Finding::HostBusy(0.6)),
            "{c:?}"
        );
        assert!(v.passed() && c.inconclusive());
        let slowed = Alone {
            gbs: &[0.9, 0.95, 0.85],
            ..starved
        };
        let (v, c) = judged_beside(slowed, Some(HEALTHY));
        assert!(c
            .checked
            .iter()
            .filter(|k| k.criterion == Criterion::Bandwidth)
            .all(|k| k.finding == Finding::Confirmed));
        assert_eq!(v.suspects, [2]);
    }

    /// Two ranks of one node move data through shared memory only while both
    /// run: starved, even a pair 100 times slower cannot be told.
    #[test]
    fn a_starved_pair_of_one_node_cannot_be_told() {
        let starved = Alone {
            us: &[5.0, 5.1, 4.9],
            gbs: &[0.4, 0.45, 0.42],
            wait: Some(0.5),
        };
        let (v, c) = judged_on(starved, Some(HEALTHY), true);
        let bw: Vec<&Checked> = c
            .checked
            .iter()
            .filter(|k| k.criterion == Criterion::Bandwidth)
            .collect();
        assert!(
            bw.iter().all(|k| k.finding == Finding::HostBusy(0.5)),
            "{c:?}"
        );
        assert!(v.passed() && v.suspects.is_empty() && c.inconclusive());
        // Across nodes the network moves data while a rank waits: named.
        let (v, c) = judged_on(starved, Some(HEALTHY), false);
        assert!(c
            .checked
            .iter()
            .filter(|k| k.criterion == Criterion::Bandwidth)
            .all(|k| k.finding == Finding::Confirmed));
        assert_eq!(v.suspects, [2]);
        // Below the share, one node's pair too.
        let (v, _) = judged_on(
            Alone {
                wait: Some(0.2),
                ..starved
            },
            Some(HEALTHY),
            true,
        );
        assert_eq!(v.suspects, [2]);
    }

    #[test]
    fn the_medians_of_rounds_and_their_wrong_bytes_added() {
        let mut rounds = vec![results(3, None, 45.0, 0.0); 3];
        for (r, v) in rounds.iter_mut().zip([10.0, 40.0, 30.0]) {
            r.sizes[1].algbw_gbs.set(0, 1, v);
            let mut w = super::super::matrix::Matrix::empty(3);
            w.set(0, 1, 2.0);
            w.set(1, 2, 0.0);
            r.sizes[1].wrong_bytes = Some(w);
        }
        let m = PairResults::median_over(&rounds).unwrap();
        assert_eq!(m.sizes[1].algbw_gbs.get(0, 1), Some(30.0));
        assert_eq!(m.sizes[1].algbw_gbs.get(1, 2), Some(45.0));
        let w = m.sizes[1].wrong_bytes.as_ref().unwrap();
        assert_eq!(
            (w.get(0, 1), w.get(1, 2), w.get(0, 2)),
            (Some(6.0), Some(0.0), None)
        );
        assert!(PairResults::median_over(&[]).is_none());
    }
}
