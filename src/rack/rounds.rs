//! Re-measuring: after every test judged on rounds has run its `[rounds]
//! count`, only the tests whose checks came out inconclusive run again, one
//! round each at a time, then are judged again, until nothing is
//! inconclusive or the spec's budget (rounds per test, seconds in all) is spent.

/// The spec's budget for re-measuring.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// The most rounds of one test, the first ones included.
    pub max_rounds: usize,
    /// The most seconds re-measuring may take, all tests together.
    pub max_seconds: f64,
}

/// Runs more rounds of the tests `inconclusive` names (indices into
/// `seconds`, which holds how long each test's rounds so far took) through
/// `run`, which returns how long the round took. No round starts that the
/// budget cannot hold: past a test's max_rounds, or when the mean of its rounds
/// so far would end past max_seconds. Returns None when nothing is left
/// inconclusive, or why re-measuring stopped with checks still inconclusive.
pub fn remeasure(
    budget: Budget,
    seconds: &mut [Vec<f64>],
    mut inconclusive: impl FnMut() -> Vec<usize>,
    mut run: impl FnMut(usize) -> f64,
) -> Option<String> {
    let mut spent = 0.0;
    loop {
        let wanted = inconclusive();
        if wanted.is_empty() {
            return None;
        }
        let mut why = None;
        let mut ran = false;
        for t in wanted {
            let done = &seconds[t];
            if done.len() >= budget.max_rounds {
                why = Some(format!(
                    "[rounds] max = {} rounds reached",
                    budget.max_rounds
                ));
                continue;
            }
            let expected = done.iter().sum::<f64>() / done.len().max(1) as f64;
            if spent + expected > budget.max_seconds {
                why = Some(format!(
                    "[rounds] max_seconds = {} would be passed (re-measuring took {spent:.0} s; \
                     a round takes about {expected:.0} s)",
                    budget.max_seconds
                ));
                continue;
            }
            let took = run(t);
            spent += took;
            seconds[t].push(took);
            ran = true;
        }
        if !ran {
            return why;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Two tests: test 0 stays inconclusive until it has `settles` rounds,
    /// test 1 is decided; `run` records which test ran.
    fn simulate(budget: Budget, settles: usize, round_s: f64) -> (Vec<usize>, Option<String>) {
        let ran = RefCell::new(Vec::new());
        let mut seconds = vec![vec![round_s; 3], vec![round_s; 3]];
        let counts = RefCell::new([3usize, 3]);
        let why = remeasure(
            budget,
            &mut seconds,
            || match counts.borrow()[0] < settles {
                true => vec![0],
                false => vec![],
            },
            |t| {
                ran.borrow_mut().push(t);
                counts.borrow_mut()[t] += 1;
                round_s
            },
        );
        assert_eq!(seconds[0].len(), counts.borrow()[0]);
        (ran.into_inner(), why)
    }

    #[test]
    fn only_the_inconclusive_test_runs_until_it_settles() {
        let budget = Budget {
            max_rounds: 10,
            max_seconds: 300.0,
        };
        let (ran, why) = simulate(budget, 6, 1.0);
        assert_eq!(ran, [0, 0, 0]);
        assert_eq!(why, None);
        // Nothing inconclusive: nothing runs.
        assert_eq!(simulate(budget, 3, 1.0), (vec![], None));
    }

    #[test]
    fn the_budget_is_respected() {
        let rounds = Budget {
            max_rounds: 5,
            max_seconds: 300.0,
        };
        let (ran, why) = simulate(rounds, 100, 1.0);
        assert_eq!(ran, [0, 0], "3 rounds done, 5 at most");
        assert_eq!(why.unwrap(), "[rounds] max = 5 rounds reached");
        // 10 s rounds in 25 s: two fit, the third would end at 30 s.
        let seconds = Budget {
            max_rounds: 100,
            max_seconds: 25.0,
        };
        let (ran, why) = simulate(seconds, 100, 10.0);
        assert_eq!(ran.len(), 2);
        assert!(why
            .unwrap()
            .starts_with("[rounds] max_seconds = 25 would be passed"));
        // A zero budget re-measures nothing.
        let none = Budget {
            max_rounds: 100,
            max_seconds: 0.0,
        };
        assert!(simulate(none, 100, 1.0).0.is_empty());
    }

    /// The judging and the re-measuring together, on constructed figures: a
    /// check that passes is never re-measured; one across its threshold is,
    /// until its interval clears it or the rounds run out.
    #[test]
    fn only_inconclusive_checks_are_remeasured_until_judged() {
        use crate::rack::evaluate::{evaluate_rows, Verdict};
        use crate::rack::spec::Spec;
        use crate::report::Row;
        let check = &Spec::parse(
            "name = \"t\"\n[launch]\n[[test]]\nname = \"ar\"\nbinary = \"all_reduce_perf\"\n\
             [[check]]\ntest = \"ar\"\nmetric = \"busbw\"\nsize = \"1M\"\nmin = 40\n",
        )
        .unwrap()
        .checks[0];
        let rows = |b: &f64| {
            vec![Row {
                size_bytes: 1 << 20,
                placement: "out-of-place".into(),
                busbw_gbs: *b,
                wrong: Some(0),
                ..Row::default()
            }]
        };
        let judge = |figures: &[f64]| {
            let rounds: Vec<Vec<Row>> = figures.iter().map(rows).collect();
            evaluate_rows(check, &rounds, 0).verdict
        };
        // Test 0 passes at once; test 1 starts across 40 GB/s, then its
        // launches settle near 44.
        let next = [44.0, 45.0, 44.5, 43.8, 44.2, 44.1, 44.3, 43.9];
        let taken = RefCell::new(vec![vec![45.0, 46.0, 44.0], vec![36.0, 44.0, 41.0]]);
        let mut seconds = vec![vec![1.0; 3], vec![1.0; 3]];
        let budget = Budget {
            max_rounds: 10,
            max_seconds: 100.0,
        };
        let why = remeasure(
            budget,
            &mut seconds,
            || {
                (0..2)
                    .filter(|&t| judge(&taken.borrow()[t]) == Verdict::Inconclusive)
                    .collect()
            },
            |t| {
                assert_eq!(t, 1, "only the inconclusive test is re-measured");
                let n = taken.borrow()[1].len() - 3;
                taken.borrow_mut()[1].push(next[n]);
                1.0
            },
        );
        let taken = taken.into_inner();
        assert_eq!(why, None, "{taken:?}");
        assert_eq!(taken[0].len(), 3);
        assert!((4..=10).contains(&taken[1].len()), "{taken:?}");
        assert_eq!(judge(&taken[1]), Verdict::Pass);
        // Figures that stay across the threshold stop at max rounds, inconclusive.
        let stuck = RefCell::new(vec![36.0, 44.0, 41.0]);
        let mut seconds = vec![vec![1.0; 3]];
        let why = remeasure(
            budget,
            &mut seconds,
            || match judge(&stuck.borrow()) {
                Verdict::Inconclusive => vec![0],
                _ => vec![],
            },
            |_| {
                let n = stuck.borrow().len();
                stuck
                    .borrow_mut()
                    .push(if n % 2 == 0 { 36.0 } else { 44.0 });
                1.0
            },
        );
        let stuck = stuck.into_inner();
        assert_eq!(stuck.len(), 10);
        assert_eq!(why.as_deref(), Some("[rounds] max = 10 rounds reached"));
        assert_eq!(judge(&stuck), Verdict::Inconclusive);
    }
}
