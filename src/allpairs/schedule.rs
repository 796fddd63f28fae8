//! The round-robin schedule of all pairs (the circle method): participant 0 stays
//! put and the others rotate, so each round is a set of disjoint pairs and every
//! pair meets exactly once: n-1 rounds for even n; for odd n a phantom partner
//! gives one participant a bye in each of n rounds.

/// Rounds of disjoint pairs `(a, b)` with `a < b` covering every pair of `0..n` once.
pub fn round_robin(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 2 {
        return Vec::new();
    }
    // Slots 0..m; for odd n slot n is the phantom (a bye).
    let m = n + n % 2;
    (0..m - 1)
        .map(|round| {
            let slot = |i: usize| {
                if i == 0 {
                    0
                } else {
                    1 + (i - 1 + round) % (m - 1)
                }
            };
            (0..m / 2)
                .map(|i| (slot(i), slot(m - 1 - i)))
                .filter(|&(a, b)| a < n && b < n)
                .map(|(a, b)| (a.min(b), a.max(b)))
                .collect()
        })
        .collect()
}

/// Who `me` meets in this round, if anyone.
pub fn partner(round: &[(usize, usize)], me: usize) -> Option<usize> {
    round.iter().find_map(|&(a, b)| match me {
        _ if me == a => Some(b),
        _ if me == b => Some(a),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn check(n: usize) {
        let rounds = round_robin(n);
        let expected_rounds = if n < 2 {
            0
        } else if n % 2 == 0 {
            n - 1
        } else {
            n
        };
        assert_eq!(rounds.len(), expected_rounds, "n={n}");
        let mut seen = BTreeSet::new();
        for round in &rounds {
            let mut busy = BTreeSet::new();
            for &(a, b) in round {
                assert!(a < b && b < n, "n={n}: bad pair ({a}, {b})");
                assert!(
                    busy.insert(a) && busy.insert(b),
                    "n={n}: a node twice in {round:?}"
                );
                assert!(seen.insert((a, b)), "n={n}: pair ({a}, {b}) twice");
            }
            // Everyone plays, except one bye per round when n is odd.
            assert_eq!(busy.len(), n - n % 2, "n={n}: round {round:?}");
        }
        assert_eq!(seen.len(), n * (n.max(1) - 1) / 2, "n={n}: not every pair");
    }

    #[test]
    fn every_pair_once_no_node_twice_in_a_round() {
        for n in 0..=17 {
            check(n);
        }
        check(64);
        check(101);
    }

    #[test]
    fn small_schedules() {
        assert_eq!(round_robin(2), vec![vec![(0, 1)]]);
        assert_eq!(
            round_robin(4),
            vec![
                vec![(0, 3), (1, 2)],
                vec![(0, 1), (2, 3)],
                vec![(0, 2), (1, 3)]
            ]
        );
        // Three nodes: three rounds of one pair, each node sitting out once.
        assert_eq!(
            round_robin(3),
            vec![vec![(1, 2)], vec![(0, 1)], vec![(0, 2)]]
        );
        assert_eq!(partner(&[(0, 3), (1, 2)], 2), Some(1));
        assert_eq!(partner(&[(1, 2)], 0), None);
    }
}
