//! Whether a slow pair is really slow: every pair is measured in `ROUNDS`
//! interleaved rounds of the schedule, each pair whose median crosses a
//! threshold is judged on its 95% interval (`stats::interval`), then measured
//! again alone (no other pair running) before it is named. A pair slow only
//! while others ran is not confirmed; one whose alone interval lies across the
//! limit cannot be told, and says how many rounds would tell.

use super::judging::{PairsVerdict, SlowPair};
use super::matrix::PairResults;
use super::sample::PairSample;
use crate::sizes::human_bytes;
use crate::stats::interval::{Estimate, Side};

/// Rounds of the whole schedule, and of each re-measurement alone: the fewest
/// that give an interval (`MIN_SAMPLES`).
pub const ROUNDS: usize = crate::stats::interval::MIN_SAMPLES;

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

    pub fn unit(self) -> &'static str {
        match self {
            Criterion::Bandwidth => "GB/s algbw",
            Criterion::Latency => "us median time",
        }
    }
}

/// A pair to measure again alone, at the size it was judged at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Suspect {
    pub a: usize,
    pub b: usize,
    pub size: u64,
}

/// The pairs whose median crossed a threshold: each is measured again alone.
pub fn suspects(v: &PairsVerdict) -> Vec<Suspect> {
    let mut out: Vec<Suspect> = Vec::new();
    let at = |p: &SlowPair, size| Suspect {
        a: p.a,
        b: p.b,
        size,
    };
    let all = v.slow_bw.iter().map(|p| at(p, v.bw_size));
    for s in all.chain(v.slow_latency.iter().map(|p| at(p, v.latency_size))) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// A suspect list as bytes, for rank 0 to send every rank (and back).
pub fn encode(list: &[Suspect]) -> Vec<u8> {
    list.iter()
        .flat_map(|s| [s.a as u64, s.b as u64, s.size])
        .flat_map(u64::to_le_bytes)
        .collect()
}

pub fn decode(bytes: &[u8]) -> Vec<Suspect> {
    let words: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    words
        .chunks_exact(3)
        .map(|w| Suspect {
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
    /// The figures alone, in the criterion's unit.
    pub figures: Vec<f64>,
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

fn judge_alone(c: Criterion, figures: &[f64], limit: f64) -> (Estimate, Finding) {
    let alone = Estimate::median_of(figures);
    let finding = if figures.iter().any(|f| !f.is_finite()) {
        // Not a measurement: never a pass.
        Finding::Confirmed
    } else {
        match c.side(&alone, limit) {
            Side::Inside => Finding::NotConfirmed,
            Side::Straddles => Finding::CannotTell(alone.rounds_to_clear(limit)),
            Side::Below | Side::Above => Finding::Confirmed,
        }
    };
    (alone, finding)
}

/// A slow pair not measured alone, on its concurrent rounds: slow only when
/// its whole interval lies beyond the limit.
fn judge_together(c: Criterion, together: &Estimate, limit: f64) -> Finding {
    if !together.value.is_finite() {
        return Finding::Confirmed;
    }
    match c.side(together, limit) {
        Side::Inside => Finding::NotConfirmed,
        Side::Straddles => Finding::CannotTell(together.rounds_to_clear(limit)),
        Side::Below | Side::Above => Finding::Confirmed,
    }
}

/// The figures of a slow pair measured alone, in its criterion's unit, where
/// there are any: `(criterion, size, a, b)`.
pub type AloneFigures<'a> = dyn Fn(Criterion, u64, usize, usize) -> Option<Vec<f64>> + 'a;

impl Confirmation {
    /// Judges each suspect's samples alone (`alone[i]` for `list[i]`; `results`:
    /// the medians of `rounds`) against the limit it crossed in the concurrent
    /// rounds, and keeps in `verdict` only the confirmed pairs (its suspect
    /// nodes recomputed from them).
    pub fn judge(
        verdict: &mut PairsVerdict,
        results: &PairResults,
        rounds: &[PairResults],
        list: &[Suspect],
        alone: &[Vec<PairSample>],
    ) -> Confirmation {
        for (s, samples) in list.iter().zip(alone) {
            let wrong: u64 = samples.iter().filter_map(|x| x.wrong).sum();
            if wrong > 0 && !verdict.wrong.iter().any(|w| (w.0, w.1) == (s.a, s.b)) {
                verdict.wrong.push((s.a, s.b, wrong));
            }
        }
        let figures = |c: Criterion, size: u64, a: usize, b: usize| {
            let i = list
                .iter()
                .position(|s| (s.a, s.b, s.size) == (a, b, size))?;
            Some(alone[i].iter().map(|s| c.figure(s, size)).collect())
        };
        Confirmation::judge_with(verdict, results, rounds, &figures)
    }

    /// Judges each pair of `verdict` that crossed a limit: on its figures alone
    /// where `alone` has them, else on the interval of its concurrent `rounds`
    /// (slow only when the whole interval is); keeps in `verdict` only the
    /// confirmed pairs, its suspect nodes recomputed. rack_check judges the
    /// launches of an all-pairs test with it, their re-measures alone pooled.
    pub fn judge_with(
        verdict: &mut PairsVerdict,
        results: &PairResults,
        rounds: &[PairResults],
        alone: &AloneFigures,
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
                let figures = alone(criterion, size, p.a, p.b).unwrap_or_default();
                let (alone, finding) = match figures.is_empty() {
                    false => judge_alone(criterion, &figures, p.limit),
                    true => (
                        Estimate::median_of(&[]),
                        judge_together(criterion, &together, p.limit),
                    ),
                };
                checked.push(Checked {
                    pair: p.clone(),
                    criterion,
                    size,
                    together,
                    alone,
                    figures,
                    finding,
                });
            }
        }
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

    /// A suspect measured alone lay across its limit: the run cannot tell.
    pub fn inconclusive(&self) -> bool {
        self.checked
            .iter()
            .any(|c| matches!(c.finding, Finding::CannotTell(_)))
    }

    /// One line per suspect pair re-measured alone, naming the nodes.
    pub fn lines(&self, labels: &[String]) -> Vec<String> {
        self.checked
            .iter()
            .map(|c| {
                let unit = c.criterion.unit();
                let pair = format!(
                    "pair {} <-> {} at {}: {} with the other pairs running, limit {}",
                    labels[c.pair.a],
                    labels[c.pair.b],
                    human_bytes(c.size),
                    shown_estimate(&c.together, unit),
                    fig(c.pair.limit),
                );
                if c.alone.rounds == 0 {
                    return format!("{pair}; not measured alone: {}", together_finding(c.finding));
                }
                let what = format!(
                    "{pair}; alone {} (re-measured alone {} times)",
                    shown_estimate(&c.alone, unit),
                    c.alone.rounds,
                );
                match c.finding {
                    Finding::Confirmed => format!("{what}: slow, confirmed alone"),
                    Finding::NotConfirmed => {
                        format!("{what}: not confirmed (slow only while other pairs ran)")
                    }
                    Finding::CannotTell(Some(n)) => format!(
                        "{what}: cannot tell (its interval lies across the limit); about {n} rounds would tell"
                    ),
                    Finding::CannotTell(None) => format!(
                        "{what}: cannot tell (its median lies on the limit; no number of rounds would tell)"
                    ),
                }
            })
            .collect()
    }
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

#[cfg(test)]
mod tests {
    use super::super::judging::Thresholds;
    use super::super::matrix::tests::results;
    use super::*;

    /// `ROUNDS` samples alone of a pair: `us` median time at 8 B, `gbs` at 1 MiB.
    fn alone(list: &[Suspect], us: &[f64], gbs: &[f64]) -> Vec<Vec<PairSample>> {
        list.iter()
            .map(|s| {
                (0..ROUNDS)
                    .map(|k| PairSample {
                        seconds: s.size as f64 / gbs[k] / 1e9,
                        p50_seconds: us[k] * 1e-6,
                        wrong: None,
                    })
                    .collect()
            })
            .collect()
    }

    /// Node 2 of 5 slow (20 GB/s against 45, 50 us against 5) in three rounds;
    /// its pairs measured alone as `us` and `gbs`.
    fn judged(us: &[f64], gbs: &[f64]) -> (PairsVerdict, Confirmation) {
        let rounds = vec![results(5, Some(2), 45.0, 20.0); ROUNDS];
        let medians = PairResults::median_over(&rounds).unwrap();
        let mut verdict = medians.judge(&Thresholds::default());
        let list = suspects(&verdict);
        assert_eq!(list.len(), 8, "4 pairs on each criterion: {list:?}");
        assert_eq!(decode(&encode(&list)), list);
        let samples = alone(&list, us, gbs);
        let c = Confirmation::judge(&mut verdict, &medians, &rounds, &list, &samples);
        (verdict, c)
    }

    #[test]
    fn a_pair_slow_alone_too_is_confirmed_and_its_node_named() {
        let (v, c) = judged(&[50.0, 52.0, 49.0], &[20.0, 21.0, 19.0]);
        assert!(c.checked.iter().all(|k| k.finding == Finding::Confirmed));
        assert_eq!((v.slow_bw.len(), v.slow_latency.len()), (4, 4));
        assert_eq!(v.suspects, [2]);
        assert!(!v.passed() && !c.inconclusive());
        let lines = c.lines(&results(5, None, 1.0, 1.0).labels);
        assert_eq!(
            lines[0],
            "pair node0 <-> node2 at 1 MiB: 20.0 [20.0, 20.0] GB/s algbw over 3 rounds with the \
             other pairs running, limit 40.5; alone 20.0 [19.0, 21.0] GB/s algbw over 3 rounds \
             (re-measured alone 3 times): slow, confirmed alone"
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
        let lines = c.lines(&results(5, None, 1.0, 1.0).labels);
        assert!(
            lines[4].ends_with(": not confirmed (slow only while other pairs ran)"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_pair_across_the_limit_alone_cannot_be_told() {
        // Latency limit 10 us: 8, 11, 12 lie across it; bandwidth 45 clears.
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
        let lines = c.lines(&results(5, None, 1.0, 1.0).labels);
        assert!(
            lines[4].contains(": cannot tell (its interval lies across the limit); about "),
            "{lines:?}"
        );
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
