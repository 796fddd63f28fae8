//! A `metric = "counters"` check on an all-pairs test: each class summed over
//! the pairs of the matrix CSV (a pair's cell holds its two nodes' deltas over
//! its round), failing with the pairs whose round moved it.

use super::check::Check;
use super::evaluate::{counters_hint, counters_threshold, CheckResult};
use crate::allpairs::PairResults;
use crate::sysfs::counters::Class;

pub fn evaluate(check: &Check, max: &[(Class, u64)], results: &PairResults) -> CheckResult {
    let threshold = counters_threshold(max);
    let mut details = Vec::new();
    let mut measured = Vec::new();
    let mut passed = true;
    let mut pairs = 0;
    for &(class, limit) in max {
        let column = results
            .counters
            .iter()
            .find(|(c, _)| c.class() == Some(class));
        let Some((_, matrix)) = column else {
            passed = false;
            measured.push(format!("{} not read", class.name()));
            details.push(format!(
                "{}: the matrix CSV has no counter columns (the run read no fabric counters); \
                 rerun the test with this fabricbench",
                class.name()
            ));
            continue;
        };
        let moved = matrix.pairs();
        pairs = moved.len();
        let total: u64 = moved.iter().map(|&(_, _, v)| v as u64).sum();
        measured.push(format!("{} {total}", class.name()));
        if total > limit {
            passed = false;
            let named: Vec<String> = moved
                .iter()
                .filter(|&&(_, _, v)| v > 0.0)
                .take(8)
                .map(|&(a, b, v)| {
                    format!(
                        "{} <-> {} (+{})",
                        results.labels[a], results.labels[b], v as u64
                    )
                })
                .collect();
            details.push(format!(
                "{} {total} is above {limit}: moved during the rounds of pairs {}; {}",
                class.name(),
                named.join(", "),
                counters_hint(class)
            ));
        }
    }
    CheckResult {
        label: check.label.clone(),
        measured: format!("{} over {pairs} pairs", measured.join(", ")),
        threshold,
        passed,
        details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allpairs::Matrix;
    use crate::rack::check::CheckKind;
    use crate::report::counters::Column;

    fn check() -> Check {
        Check {
            label: "pairs fabric counters retransmits <= 0 over every pair's round".into(),
            test: "pairs".into(),
            kind: CheckKind::Counters {
                size: None,
                max: vec![(Class::Retransmits, 0), (Class::Errors, 0)],
            },
        }
    }

    #[test]
    fn the_pairs_whose_round_moved_a_class_fail_it() {
        let mut retransmits = Matrix::empty(3);
        retransmits.set(0, 1, 7.0);
        retransmits.set(0, 2, 0.0);
        retransmits.set(1, 2, 0.0);
        let mut errors = Matrix::empty(3);
        for (a, b) in [(0, 1), (0, 2), (1, 2)] {
            errors.set(a, b, 0.0);
        }
        let results = PairResults {
            labels: ["a", "b", "c"].map(String::from).to_vec(),
            sizes: Vec::new(),
            counters: vec![(Column::Errors, errors), (Column::Retransmits, retransmits)],
        };
        let CheckKind::Counters { max, .. } = check().kind else {
            unreachable!()
        };
        let r = evaluate(&check(), &max, &results);
        assert!(!r.passed);
        assert_eq!(r.measured, "retransmits 7, errors 0 over 3 pairs");
        assert_eq!(r.details.len(), 1, "{:?}", r.details);
        assert!(
            r.details[0].starts_with(
                "retransmits 7 is above 0: moved during the rounds of pairs a <-> b (+7); packets lost"
            ),
            "{}",
            r.details[0]
        );
        // An older matrix CSV, without the counters: never a pass.
        let bare = PairResults {
            counters: Vec::new(),
            ..results
        };
        let r = evaluate(&check(), &max, &bare);
        assert!(!r.passed && r.measured == "retransmits not read, errors not read over 0 pairs");
    }

    #[test]
    fn a_counters_check_on_an_all_pairs_test_spans_the_rounds() {
        let spec = |check: &str| {
            format!(
                "name = \"r\"\n[launch]\nnodes = 2\nranks_per_node = 1\n[[test]]\nname = \"pairs\"\n\
                 binary = \"sendrecv_perf\"\nargs = [\"--all-pairs\"]\n[[check]]\ntest = \"pairs\"\n\
                 metric = \"counters\"\nmax_retransmits = 0\n{check}"
            )
        };
        let s = crate::rack::spec::Spec::parse(&spec("")).unwrap();
        assert_eq!(
            s.checks[0].label,
            "pairs fabric counters retransmits <= 0 over every pair's round"
        );
        let e = crate::rack::spec::Spec::parse(&spec("size = \"1M\"")).unwrap_err();
        assert!(
            e.ends_with(
                "size with test 'pairs': an all-pairs test reads the counters around each \
                 pair's round, which spans every size; drop size"
            ),
            "{e}"
        );
    }
}
