//! Where a process sits among the endpoints of the pairs.

use crate::job::UsageError;

/// Where this process sits among the 2k endpoints of k pairs: endpoint p < k is
/// the client of pair p, endpoint p + k its server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seat {
    pub endpoint: usize,
    pub pairs: usize,
}

impl Seat {
    pub fn client(self) -> bool {
        self.endpoint < self.pairs
    }

    pub fn pair(self) -> usize {
        self.endpoint % self.pairs
    }

    pub fn peer(self) -> usize {
        (self.endpoint + self.pairs) % (2 * self.pairs)
    }
}

/// The seat of this rank: under mpirun from the rank, else from HOST.
pub fn seat(ranks: usize, rank: usize, host_given: bool) -> Result<Seat, UsageError> {
    match ranks {
        1 => Ok(Seat {
            endpoint: if host_given { 0 } else { 1 },
            pairs: 1,
        }),
        n if n % 2 == 1 => Err(UsageError(format!(
            "mpirun -np {n}: the ranks form pairs (rank i with rank i + np/2); start an even number"
        ))),
        _ if host_given => Err(UsageError(
            "HOST: under mpirun the pairs find each other through MPI; drop the server address"
                .into(),
        )),
        n => Ok(Seat {
            endpoint: rank,
            pairs: n / 2,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_start_is_one_pair_chosen_by_host() {
        let client = seat(1, 0, true).unwrap();
        let server = seat(1, 0, false).unwrap();
        assert_eq!((client.endpoint, client.pairs), (0, 1));
        assert!(client.client() && !server.client());
        assert_eq!((client.peer(), server.peer()), (1, 0));
        assert_eq!((client.pair(), server.pair()), (0, 0));
    }

    #[test]
    fn under_mpirun_rank_i_pairs_with_rank_i_plus_half() {
        // 6 ranks, 3 pairs: 0-3, 1-4, 2-5.
        let seats: Vec<Seat> = (0..6).map(|r| seat(6, r, false).unwrap()).collect();
        assert!(seats.iter().all(|s| s.pairs == 3));
        assert_eq!(
            seats.iter().map(|s| s.peer()).collect::<Vec<_>>(),
            [3, 4, 5, 0, 1, 2]
        );
        assert_eq!(
            seats.iter().map(|s| s.pair()).collect::<Vec<_>>(),
            [0, 1, 2, 0, 1, 2]
        );
        assert_eq!(
            seats.iter().map(|s| s.client()).collect::<Vec<_>>(),
            [true, true, true, false, false, false]
        );
    }

    #[test]
    fn odd_launches_and_a_host_under_mpirun_are_usage_errors() {
        let e = seat(3, 0, false).unwrap_err().0;
        assert!(e.starts_with("mpirun -np 3: the ranks form pairs") && e.contains("even"));
        let e = seat(2, 1, true).unwrap_err().0;
        assert!(e.contains("drop the server address"), "{e}");
    }
}
