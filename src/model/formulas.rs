//! The latency-bandwidth (alpha-beta) cost of each algorithm the model knows,
//! as phases of messages and link loads: a phase takes `steps` message
//! latencies plus the time of its busiest link (links work at once within a
//! phase); phases follow one another. Sources: Thakur, Rabenseifner & Gropp
//! 2005 (ring, recursive halving/doubling, pairwise exchange), Patarasuk & Yuan
//! 2009 (ring all-reduce's bandwidth term is optimal), nccl-tests'
//! PERFORMANCE.md (the busbw factors the loads below reproduce).

/// Which link a load crosses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Between ranks of one node (NVLink, PCIe or shared memory), per rank.
    Intra,
    /// A node's way out (its NICs, every rail it uses summed), per node.
    Inter,
}

/// Bytes a link carries per direction, as a multiple of the row's size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    pub role: Role,
    pub per_byte: f64,
}

/// Messages on the critical path and the loads of one phase.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    pub steps: f64,
    pub loads: Vec<Load>,
}

/// Ranks per node and nodes: n = k x N ranks, placed by node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub per_node: usize,
    pub nodes: usize,
}

impl Shape {
    pub fn ranks(self) -> usize {
        self.per_node * self.nodes
    }
}

/// The loads of a ring over every rank that moves `per_byte` of the size over
/// each edge: a ring placed by node crosses each node's way out once per
/// direction, and its other edges are intra-node.
fn ring_loads(shape: Shape, per_byte: f64) -> Vec<Load> {
    let mut loads = Vec::new();
    if shape.per_node > 1 {
        loads.push(Load {
            role: Role::Intra,
            per_byte,
        });
    }
    if shape.nodes > 1 {
        loads.push(Load {
            role: Role::Inter,
            per_byte,
        });
    }
    loads
}

/// Ring all-reduce (reduce-scatter then all-gather around the ring):
/// 2(n-1) messages, 2(n-1)/n of the size over every edge.
pub fn ring_all_reduce(shape: Shape) -> Vec<Phase> {
    let n = shape.ranks() as f64;
    vec![Phase {
        steps: 2.0 * (n - 1.0),
        loads: ring_loads(shape, 2.0 * (n - 1.0) / n),
    }]
}

/// Ring all-gather or reduce-scatter: n-1 messages, (n-1)/n of the size
/// (nccl-tests' size: the whole gathered buffer) over every edge.
pub fn ring_gather_or_scatter(shape: Shape) -> Vec<Phase> {
    let n = shape.ranks() as f64;
    vec![Phase {
        steps: n - 1.0,
        loads: ring_loads(shape, (n - 1.0) / n),
    }]
}

/// Hierarchical all-reduce: reduce-scatter among a node's k ranks, k
/// all-reduces of size/k across the N nodes at once (sharing the node's way
/// out), all-gather within the node.
pub fn hierarchical_all_reduce(shape: Shape) -> Vec<Phase> {
    let (k, nodes) = (shape.per_node as f64, shape.nodes as f64);
    let within = Phase {
        steps: k - 1.0,
        loads: vec![Load {
            role: Role::Intra,
            per_byte: (k - 1.0) / k,
        }],
    };
    let across = Phase {
        steps: 2.0 * (nodes - 1.0),
        loads: vec![Load {
            role: Role::Inter,
            per_byte: 2.0 * (nodes - 1.0) / nodes,
        }],
    };
    vec![within.clone(), across, within]
}

/// Rabenseifner's all-reduce (recursive halving, then recursive doubling), one
/// of the algorithms Open MPI's tuned component runs large all-reduces with:
/// steps at distances of k ranks or more cross nodes with all k ranks of a
/// node at once.
pub fn rabenseifner_all_reduce(shape: Shape) -> Vec<Phase> {
    let (k, nodes) = (shape.per_node as f64, shape.nodes as f64);
    vec![
        Phase {
            steps: 2.0 * nodes.log2().ceil(),
            loads: vec![Load {
                role: Role::Inter,
                per_byte: 2.0 * k * (nodes - 1.0) / nodes,
            }],
        },
        Phase {
            steps: 2.0 * k.log2().ceil(),
            loads: vec![Load {
                role: Role::Intra,
                per_byte: 2.0 * (k - 1.0) / (k * nodes),
            }],
        },
    ]
}

/// Pairwise-exchange alltoall: n-1 messages; each rank sends 1/n of its
/// buffer to every other rank, so a node's way out carries k(N-1)/N of the
/// size and each rank's intra-node link (k-1)/n of it.
pub fn pairwise_alltoall(shape: Shape) -> Vec<Phase> {
    let (k, nodes) = (shape.per_node as f64, shape.nodes as f64);
    let n = k * nodes;
    let mut loads = Vec::new();
    if shape.per_node > 1 {
        loads.push(Load {
            role: Role::Intra,
            per_byte: (k - 1.0) / n,
        });
    }
    if shape.nodes > 1 {
        loads.push(Load {
            role: Role::Inter,
            per_byte: k * (nodes - 1.0) / nodes,
        });
    }
    vec![Phase {
        steps: n - 1.0,
        loads,
    }]
}

/// Node of rank `r`, placed by node.
fn node(shape: Shape, r: usize) -> usize {
    r / shape.per_node
}

/// One step in which every rank r sends `per_byte` of the size to
/// `partner(r)` (None: it sends nothing) and receives as much: the node with
/// the most ranks sending out of it at once loads its way out with all of
/// them; a rank sending within its node loads its intra-node link.
fn step(shape: Shape, per_byte: f64, partner: impl Fn(usize) -> Option<usize>) -> Phase {
    let mut out = vec![0usize; shape.nodes];
    let mut within = false;
    for r in 0..shape.ranks() {
        match partner(r) {
            Some(p) if node(shape, p) != node(shape, r) => out[node(shape, r)] += 1,
            Some(p) if p != r => within = true,
            _ => {}
        }
    }
    let mut loads = Vec::new();
    if within {
        loads.push(Load {
            role: Role::Intra,
            per_byte,
        });
    }
    let most = out.iter().copied().max().unwrap_or(0);
    if most > 0 {
        loads.push(Load {
            role: Role::Inter,
            per_byte: most as f64 * per_byte,
        });
    }
    Phase { steps: 1.0, loads }
}

/// Largest power of two not above n.
fn pof2(n: usize) -> usize {
    1 << (usize::BITS - 1 - n.max(1).leading_zeros())
}

/// Recursive-doubling all-gather (Open MPI's for 3 to 31 ranks, a power of
/// two): at distance d = 1, 2, 4, ... each rank exchanges the d blocks it has
/// with rank ^ d. One rank a node: (n-1)/n over log2 n messages, the ring's
/// load; k ranks a node: the steps at d >= k cross with all k ranks at once.
pub fn recursive_doubling_all_gather(shape: Shape) -> Vec<Phase> {
    let n = shape.ranks();
    let mut phases = Vec::new();
    let mut d = 1;
    while d < n {
        phases.push(step(shape, d as f64 / n as f64, |r| Some(r ^ d)));
        d <<= 1;
    }
    phases
}

/// Recursive-doubling all-reduce (Open MPI's at small sizes): the whole buffer
/// exchanged with rank ^ d, d = 1, 2, ... over the largest power of two of
/// ranks; ranks beyond it first hand their buffer to an even neighbour and get
/// the result back (coll_base_allreduce.c: two more messages of the size).
pub fn recursive_doubling_all_reduce(shape: Shape) -> Vec<Phase> {
    let n = shape.ranks();
    let (p, extra) = (pof2(n), n - pof2(n));
    // The ranks that stay: odd ones below 2 x extra, all from 2 x extra on.
    let real = |v: usize| if v < extra { 2 * v + 1 } else { v + extra };
    let virt = |r: usize| match r < 2 * extra {
        true => (r % 2 == 1).then_some(r / 2),
        false => Some(r - extra),
    };
    let fold = step(shape, 1.0, |r| (r < 2 * extra).then_some(r ^ 1));
    let mut phases = Vec::new();
    if extra > 0 {
        phases.push(fold.clone());
    }
    let mut d = 1;
    while d < p {
        phases.push(step(shape, 1.0, |r| virt(r).map(|v| real(v ^ d))));
        d <<= 1;
    }
    if extra > 0 {
        phases.push(fold);
    }
    phases
}

/// Bruck's all-gather (Open MPI's for a rank count not a power of two): at
/// distance d = 1, 2, 4, ... each rank sends min(d, n-d) blocks to rank - d.
/// One rank a node: (n-1)/n over ceil(log2 n) messages; its final local
/// rotation is a copy, not modelled.
pub fn bruck_all_gather(shape: Shape) -> Vec<Phase> {
    let n = shape.ranks();
    let mut phases = Vec::new();
    let mut d = 1;
    while d < n {
        let blocks = d.min(n - d) as f64;
        phases.push(step(shape, blocks / n as f64, |r| Some((r + n - d) % n)));
        d <<= 1;
    }
    phases
}

/// Neighbour-exchange all-gather (Open MPI's for 32 ranks and more at medium
/// sizes, an even count): one block with the neighbour of the first pair, then
/// n/2 - 1 steps of two blocks with the left and right neighbour in turn.
pub fn neighbour_exchange_all_gather(shape: Shape) -> Vec<Phase> {
    let n = shape.ranks();
    // Even ranks pair with the next one first, odd ones with the one before.
    let towards = |r: usize, i: usize| match (r % 2 == 0) == (i % 2 == 0) {
        true => (r + 1) % n,
        false => (r + n - 1) % n,
    };
    // Steps 1, 3, ... and 2, 4, ... repeat one pattern each: computed once.
    let two = |i: usize| step(shape, 2.0 / n as f64, |r| Some(towards(r, i)));
    let (odd, even) = (two(1), two(2));
    let mut phases = vec![step(shape, 1.0 / n as f64, |r| Some(towards(r, 0)))];
    for i in 1..n / 2 {
        phases.push(if i % 2 == 1 {
            odd.clone()
        } else {
            even.clone()
        });
    }
    phases
}

/// Recursive-halving reduce-scatter (Open MPI's at small sizes): at distance
/// d = p/2, ..., 1 over the largest power of two p of ranks, half the data
/// still held (d/p of the size) goes to rank ^ d; ranks beyond p first hand
/// their buffer to a neighbour, which sends their block back at the end.
pub fn recursive_halving_reduce_scatter(shape: Shape) -> Vec<Phase> {
    let n = shape.ranks();
    let (p, extra) = (pof2(n), n - pof2(n));
    let real = |v: usize| if v < extra { 2 * v + 1 } else { v + extra };
    let virt = |r: usize| match r < 2 * extra {
        true => (r % 2 == 1).then_some(r / 2),
        false => Some(r - extra),
    };
    let mut phases = Vec::new();
    if extra > 0 {
        phases.push(step(shape, 1.0, |r| (r < 2 * extra).then_some(r ^ 1)));
    }
    let mut d = p / 2;
    while d >= 1 {
        phases.push(step(shape, d as f64 / p as f64, |r| {
            virt(r).map(|v| real(v ^ d))
        }));
        d /= 2;
    }
    if extra > 0 {
        phases.push(step(shape, 1.0 / n as f64, |r| {
            (r < 2 * extra).then_some(r ^ 1)
        }));
    }
    phases
}

/// Linear alltoall (Open MPI's on 3 to 7 ranks for large blocks): every send
/// and receive posted at once, so the links carry pairwise exchange's loads in
/// one round of messages instead of n-1.
pub fn linear_alltoall(shape: Shape) -> Vec<Phase> {
    pairwise_alltoall(shape)
        .into_iter()
        .map(|p| Phase { steps: 1.0, ..p })
        .collect()
}

/// Seconds of `phases` for `bytes` with per-message latency `alpha_s` and
/// each role's rate in bytes/s (`rate`); a load on a link of no rate (not
/// modelled) takes no time.
pub fn seconds(
    phases: &[Phase],
    bytes: f64,
    alpha_s: f64,
    rate: impl Fn(Role) -> Option<f64>,
) -> f64 {
    phases
        .iter()
        .map(|p| p.steps * alpha_s + busiest(p, bytes, &rate).map_or(0.0, |(_, t)| t))
        .sum()
}

/// The load of `phase` that takes longest, and its seconds.
pub fn busiest(
    phase: &Phase,
    bytes: f64,
    rate: &impl Fn(Role) -> Option<f64>,
) -> Option<(Role, f64)> {
    phase
        .loads
        .iter()
        .filter_map(|l| rate(l.role).map(|r| (l.role, l.per_byte * bytes / r)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// Message latencies on the critical path of `phases`.
pub fn steps(phases: &[Phase]) -> f64 {
    phases.iter().map(|p| p.steps).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: f64 = 1e9;

    fn rates(intra: f64, inter: f64) -> impl Fn(Role) -> Option<f64> {
        move |r| match r {
            Role::Intra => Some(intra * GB),
            Role::Inter => Some(inter * GB),
        }
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} != {b}");
    }

    #[test]
    fn ring_all_reduce_on_one_link() {
        // 4 nodes of one rank on 10 GB/s: 2*3/4 * 1 GB / 10 GB/s = 0.15 s,
        // plus 2*3 = 6 latencies of 5 us; busbw (factor 2*3/4) = the link.
        let shape = Shape {
            per_node: 1,
            nodes: 4,
        };
        let phases = ring_all_reduce(shape);
        assert_eq!(steps(&phases), 6.0);
        close(seconds(&phases, GB, 0.0, rates(100.0, 10.0)), 0.15);
        close(seconds(&phases, GB, 5e-6, rates(100.0, 10.0)), 0.15 + 30e-6);
        let busbw = GB / 0.15 * 1.5 / GB;
        close(busbw, 10.0);
        // On one node of 8 ranks only the intra-node link counts: 2*7/8 / 100.
        let one = ring_all_reduce(Shape {
            per_node: 8,
            nodes: 1,
        });
        close(seconds(&one, GB, 0.0, rates(100.0, 10.0)), 0.0175);
    }

    #[test]
    fn ring_crosses_the_slower_link() {
        // 2 nodes of 4: the ring's 8 edges carry 2*7/8 each; the NIC (10) binds.
        let phases = ring_all_reduce(Shape {
            per_node: 4,
            nodes: 2,
        });
        close(seconds(&phases, GB, 0.0, rates(100.0, 10.0)), 0.175);
        let (role, _) = busiest(&phases[0], GB, &rates(100.0, 10.0)).unwrap();
        assert_eq!(role, Role::Inter);
    }

    #[test]
    fn hierarchical_all_reduce_over_nodes() {
        // 2 nodes of 4 ranks, 100 GB/s within, 10 GB/s out of a node, 1 GB:
        // reduce-scatter 3/4 / 100 = 7.5 ms, across 2*1/2 / 10 = 100 ms,
        // all-gather 7.5 ms: 115 ms; latencies 3 + 2 + 3 = 8.
        let phases = hierarchical_all_reduce(Shape {
            per_node: 4,
            nodes: 2,
        });
        assert_eq!(steps(&phases), 8.0);
        close(seconds(&phases, GB, 0.0, rates(100.0, 10.0)), 0.115);
    }

    #[test]
    fn rabenseifner_matches_the_ring_on_one_rank_a_node() {
        let shape = Shape {
            per_node: 1,
            nodes: 4,
        };
        let rate = rates(100.0, 10.0);
        close(
            seconds(&rabenseifner_all_reduce(shape), GB, 0.0, &rate),
            seconds(&ring_all_reduce(shape), GB, 0.0, &rate),
        );
        assert_eq!(steps(&rabenseifner_all_reduce(shape)), 4.0);
        // 2 nodes of 2: the halving step across nodes sends from both ranks at
        // once: 2*2*1/2 / 10 = 0.2 s, then 2*1/(2*2) / 100 = 5 ms.
        let two = rabenseifner_all_reduce(Shape {
            per_node: 2,
            nodes: 2,
        });
        close(seconds(&two, GB, 0.0, &rate), 0.205);
    }

    #[test]
    fn alltoall_pairwise() {
        // 4 nodes of one rank, 1 GB each: 3/4 GB leaves each node at 10 GB/s.
        let one = pairwise_alltoall(Shape {
            per_node: 1,
            nodes: 4,
        });
        close(seconds(&one, GB, 0.0, rates(100.0, 10.0)), 0.075);
        assert_eq!(steps(&one), 3.0);
        // 2 nodes of 4: a node sends 4 * 1/2 GB out (0.2 s); each rank 3/8 GB
        // within (3.75 ms): the NIC binds.
        let four = pairwise_alltoall(Shape {
            per_node: 4,
            nodes: 2,
        });
        close(seconds(&four, GB, 0.0, rates(100.0, 10.0)), 0.2);
        // busbw = size / time * (n-1)/n = 1/0.2 * 7/8 = 4.375 GB/s.
        close(GB / 0.2 * 7.0 / 8.0 / GB, 4.375);
    }

    #[test]
    fn gather_and_scatter_rings() {
        let phases = ring_gather_or_scatter(Shape {
            per_node: 1,
            nodes: 2,
        });
        close(seconds(&phases, GB, 1e-5, rates(100.0, 10.0)), 0.05 + 1e-5);
    }

    #[test]
    fn recursive_doubling_all_gather_loads() {
        // 4 nodes of one rank, 1 GB at 10 GB/s: 1/4 then 2/4 out of each node,
        // 75 ms in all, the ring's; 2 messages instead of 3.
        let one = recursive_doubling_all_gather(Shape {
            per_node: 1,
            nodes: 4,
        });
        assert_eq!(steps(&one), 2.0);
        close(seconds(&one, GB, 0.0, rates(100.0, 10.0)), 0.075);
        // 2 nodes of 2: d = 1 within (1/4 / 100 = 2.5 ms); d = 2 crosses with
        // both ranks at once: 2 x 2/4 / 10 = 100 ms; the ring needs 75 ms.
        let two = recursive_doubling_all_gather(Shape {
            per_node: 2,
            nodes: 2,
        });
        close(seconds(&two, GB, 0.0, rates(100.0, 10.0)), 0.1025);
    }

    #[test]
    fn recursive_doubling_all_reduce_loads() {
        // 4 nodes of one rank: 2 exchanges of the whole 1 GB, 0.2 s at 10 GB/s.
        let four = recursive_doubling_all_reduce(Shape {
            per_node: 1,
            nodes: 4,
        });
        assert_eq!(steps(&four), 2.0);
        close(seconds(&four, GB, 0.0, rates(100.0, 10.0)), 0.2);
        // 3 nodes: rank 0 hands its buffer to rank 1 and gets it back (2 x 0.1 s),
        // ranks 1 and 2 exchange once (0.1 s).
        let three = recursive_doubling_all_reduce(Shape {
            per_node: 1,
            nodes: 3,
        });
        assert_eq!(steps(&three), 3.0);
        close(seconds(&three, GB, 0.0, rates(100.0, 10.0)), 0.3);
    }

    #[test]
    fn bruck_all_gather_loads() {
        // 3 nodes of one rank: 1 block then 1 block (min(2, 1)) out of each
        // node: 2/3 GB at 10 GB/s, the ring's; 2 messages.
        let three = bruck_all_gather(Shape {
            per_node: 1,
            nodes: 3,
        });
        assert_eq!(steps(&three), 2.0);
        close(seconds(&three, GB, 0.0, rates(100.0, 10.0)), 2.0 / 30.0);
        // 3 nodes of 2 (n = 6): d = 1: one rank a node crosses (1/6 / 10);
        // d = 2, 4: both cross (2 x 2/6, 2 x 2/6 / 10): 1/60 + 2/15 = 0.15 s.
        let six = bruck_all_gather(Shape {
            per_node: 2,
            nodes: 3,
        });
        close(seconds(&six, GB, 0.0, rates(100.0, 10.0)), 0.15);
    }

    #[test]
    fn neighbour_exchange_loads() {
        // 4 nodes of one rank: 1/4, then 2/4 out of each node: 75 ms, 2 messages.
        let four = neighbour_exchange_all_gather(Shape {
            per_node: 1,
            nodes: 4,
        });
        assert_eq!(steps(&four), 2.0);
        close(seconds(&four, GB, 0.0, rates(100.0, 10.0)), 0.075);
        // 2 nodes of 2: the first pairs stay within (1/4 / 100 = 2.5 ms); then
        // 0 pairs with 3 and 1 with 2, both ranks of a node crossing at once
        // (2 x 2/4 / 10 = 100 ms), where the ring takes 75 ms.
        let two = neighbour_exchange_all_gather(Shape {
            per_node: 2,
            nodes: 2,
        });
        close(seconds(&two, GB, 0.0, rates(100.0, 10.0)), 0.1025);
    }

    #[test]
    fn recursive_halving_and_linear() {
        // 4 nodes of one rank: 1/2 then 1/4 of 1 GB out of each node, 75 ms.
        let four = Shape {
            per_node: 1,
            nodes: 4,
        };
        let halving = recursive_halving_reduce_scatter(four);
        assert_eq!(steps(&halving), 2.0);
        close(seconds(&halving, GB, 0.0, rates(100.0, 10.0)), 0.075);
        // Linear alltoall: pairwise's 75 ms in one round of messages.
        let linear = linear_alltoall(four);
        assert_eq!(steps(&linear), 1.0);
        close(seconds(&linear, GB, 0.0, rates(100.0, 10.0)), 0.075);
    }

    #[test]
    fn a_link_of_no_rate_takes_no_time() {
        let phases = ring_all_reduce(Shape {
            per_node: 2,
            nodes: 2,
        });
        let only_inter = |r| (r == Role::Inter).then_some(10.0 * GB);
        close(seconds(&phases, GB, 0.0, only_inter), 0.15);
    }
}
