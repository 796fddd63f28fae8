//! The round-robin schedule of all pairs (the circle method): participant 0 stays
//! put and the others rotate, so each round is a set of disjoint pairs and every
//! pair meets exactly once: n-1 rounds for even n; for odd n a phantom partner
//! gives one participant a bye in each of n rounds.
//!
//! Computed by formula, one round or one partner at a time: no rank holds the
//! whole table (n^2/2 pairs, gigabytes at 16,384 ranks).

use super::confirm::ROUNDS;

/// Rounds of the schedule: every pair of `0..n` once.
pub fn rounds(n: usize) -> usize {
    match n {
        0 | 1 => 0,
        _ => n + n % 2 - 1,
    }
}

/// Slots `0..m` (m even; for odd n slot n is the phantom): who sits in slot `i`
/// in `round`.
fn slot(m: usize, round: usize, i: usize) -> usize {
    match i {
        0 => 0,
        _ => 1 + (i - 1 + round) % (m - 1),
    }
}

/// The disjoint pairs `(a, b)`, `a < b`, of `round` (`0..rounds(n)`).
pub fn pairs_in(n: usize, round: usize) -> Vec<(usize, usize)> {
    let m = n + n % 2;
    (0..m / 2)
        .map(|i| (slot(m, round, i), slot(m, round, m - 1 - i)))
        .filter(|&(a, b)| a < n && b < n)
        .map(|(a, b)| (a.min(b), a.max(b)))
        .collect()
}

/// Who `me` meets in `round` of the schedule of `n`, if anyone: the inverse
/// of `slot`, in constant time.
pub fn partner_in(n: usize, round: usize, me: usize) -> Option<usize> {
    if n < 2 || me >= n {
        return None;
    }
    let m = n + n % 2;
    let i = match me {
        0 => 0,
        _ => (me - 1 + (m - 1) - round % (m - 1)) % (m - 1) + 1,
    };
    Some(slot(m, round, m - 1 - i)).filter(|&p| p < n)
}

/// The schedule run `ROUNDS` times over, interleaved: every pair once, then
/// every pair again, so that a slow spell of the machine touches every pair.
/// Round `r` of it is round `r % once` of the schedule, computed when needed.
#[derive(Clone, Copy, Debug)]
pub struct Repeated {
    pub n: usize,
    /// Rounds of one pass over every pair.
    pub once: usize,
}

impl Repeated {
    pub fn new(n: usize) -> Repeated {
        Repeated { n, once: rounds(n) }
    }

    pub fn total(&self) -> usize {
        ROUNDS * self.once
    }

    pub fn pairs(&self, r: usize) -> Vec<(usize, usize)> {
        pairs_in(self.n, r % self.once.max(1))
    }

    pub fn partner(&self, r: usize, me: usize) -> Option<usize> {
        partner_in(self.n, r % self.once.max(1), me)
    }
}

/// Every round's pairs (tests: the whole table, n^2/2 pairs).
#[cfg(test)]
pub fn round_robin(n: usize) -> Vec<Vec<(usize, usize)>> {
    (0..rounds(n)).map(|r| pairs_in(n, r)).collect()
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
        for (r, round) in rounds.iter().enumerate() {
            for me in 0..n {
                assert_eq!(
                    partner_in(n, r, me),
                    partner(round, me),
                    "n={n} r={r} me={me}"
                );
            }
        }
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
