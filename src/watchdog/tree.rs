//! Who reports to whom. Each host's ranks form a tree rooted at its first rank
//! (its leader), and the leaders form a tree rooted at rank 0, each node with at
//! most `FANOUT` children of each kind. So every process holds at most
//! 2 x FANOUT + 1 connections whatever N (16,384 ranks on 2,048 hosts of 8: at most
//! 23 connections and 4 hops from rank 0), and a question from rank 0 crosses a host's link once, not once per
//! rank. Every rank builds the same tree from the host names (O(N) memory).

/// Children of each kind (ranks of the host, leaders of other hosts) per rank.
pub const FANOUT: usize = 16;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// By rank; rank 0's is itself.
    parent: Vec<usize>,
}

impl Tree {
    /// The tree for ranks on `hosts` (by rank), with `fanout` (1 or more).
    pub fn new(hosts: &[String], fanout: usize) -> Tree {
        let fanout = fanout.max(1);
        let mut parent: Vec<usize> = (0..hosts.len()).collect();
        // Each host's ranks in rank order, hosts in the order of their first rank.
        let mut slot: std::collections::HashMap<&str, usize> = Default::default();
        let mut by_host: Vec<Vec<usize>> = Vec::new();
        for (rank, host) in hosts.iter().enumerate() {
            let i = *slot.entry(host.as_str()).or_insert_with(|| {
                by_host.push(Vec::new());
                by_host.len() - 1
            });
            by_host[i].push(rank);
        }
        let mut link = |ranks: &[usize]| {
            for (i, &rank) in ranks.iter().enumerate().skip(1) {
                parent[rank] = ranks[(i - 1) / fanout];
            }
        };
        for ranks in &by_host {
            link(ranks);
        }
        let leaders: Vec<usize> = by_host.iter().map(|r| r[0]).collect();
        link(&leaders);
        Tree { parent }
    }

    pub fn len(&self) -> usize {
        self.parent.len()
    }

    /// None for rank 0.
    pub fn parent(&self, rank: usize) -> Option<usize> {
        (rank != 0).then(|| self.parent[rank])
    }

    /// The ranks that report to `rank` directly, in rank order (O(N)).
    pub fn children(&self, rank: usize) -> Vec<usize> {
        (1..self.len())
            .filter(|&r| self.parent[r] == rank)
            .collect()
    }

    /// `rank`'s parent, its parent's, and so on up to rank 0.
    pub fn ancestors(&self, rank: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(self.parent(rank), move |&r| self.parent(r))
    }

    /// Whether `rank` reports through `child` (is it, or below it).
    pub fn is_behind(&self, rank: usize, child: usize) -> bool {
        rank < self.len() && (rank == child || self.ancestors(rank).any(|a| a == child))
    }

    /// Where `rank` stands among its parent's children (0 for the first).
    pub fn turn(&self, rank: usize) -> usize {
        match self.parent(rank) {
            Some(p) => (1..rank).filter(|&r| self.parent[r] == p).count(),
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(nodes: usize, each: usize) -> Vec<String> {
        (0..nodes * each)
            .map(|r| format!("node{}", r / each))
            .collect()
    }

    #[test]
    fn one_host_of_few_ranks_is_a_star() {
        let tree = Tree::new(&hosts(1, 4), FANOUT);
        assert_eq!(tree.children(0), [1, 2, 3]);
        assert_eq!(tree.parent(0), None);
        assert_eq!(tree.turn(3), 2);
    }

    #[test]
    fn ranks_report_to_their_host_and_hosts_to_rank_0() {
        let tree = Tree::new(&hosts(3, 4), 2);
        // node0: 0 <- 1, 2; 1 <- 3. Leaders 0, 4, 8: 0 <- 4, 8.
        assert_eq!(tree.children(0), [1, 2, 4, 8]);
        assert_eq!(tree.children(1), [3]);
        assert_eq!(tree.children(4), [5, 6]);
        assert_eq!(tree.ancestors(7).collect::<Vec<_>>(), [5, 4, 0]);
        assert!(tree.is_behind(7, 4) && tree.is_behind(4, 4));
        assert!(!tree.is_behind(7, 8) && !tree.is_behind(99, 4));
    }

    #[test]
    fn a_host_split_across_ranks_still_has_one_leader() {
        // Ranks placed round-robin: node0 holds 0 and 2.
        let hosts: Vec<String> = ["a", "b", "a", "b"].map(String::from).to_vec();
        let tree = Tree::new(&hosts, 2);
        assert_eq!(tree.children(0), [1, 2]);
        assert_eq!(tree.children(1), [3]);
    }

    #[test]
    fn no_rank_holds_more_than_twice_the_fanout_at_16384_ranks() {
        let tree = Tree::new(&hosts(2048, 8), FANOUT);
        let mut children = vec![0usize; tree.len()];
        for r in 1..tree.len() {
            children[tree.parent(r).unwrap()] += 1;
        }
        assert!(children.iter().all(|&c| c <= 2 * FANOUT));
        let depth = (0..tree.len()).map(|r| tree.ancestors(r).count()).max();
        assert_eq!(
            depth,
            Some(4),
            "3 leader levels below rank 0, 1 within a host"
        );
    }
}
