//! The expected figure of every row: a latency-bandwidth (alpha-beta) model of
//! the algorithm the backend is assumed to run, over the run's topology (ranks
//! per node, nodes) and links (the run's limits: `limits`, rails summed).
//!
//! - `formulas`: each algorithm's phases, messages and link loads, and their time;
//! - `openmpi`: which algorithm Open MPI 4.1's tuned component runs (its fixed
//!   rules, or one forced through its MCA parameters);
//! - this file: which algorithm each backend is assumed to run for each
//!   collective (the one registry), which limit is which link, the per-message
//!   latency (given, or calibrated from the run's latency-bound sizes), and the
//!   expected time and busbw of a row, with the link the model says binds.
//!
//! The formulas and their sources are in docs/model.md.

pub mod formulas;
pub mod openmpi;

use crate::limits::{self, Limit};
use crate::stats::interval::median;
use anyhow::bail;
use formulas::{Phase, Role, Shape};
use serde::Serialize;

/// A size is latency-bound, and calibrates the latency, when the model's
/// bandwidth time is at most this fraction of the latency term: the one the
/// smaller sizes calibrated, or the measured time for the first sample.
const LATENCY_BOUND: f64 = 0.1;
/// A row is bandwidth-bound, and may earn an explanation line, when the
/// bandwidth time is at least this fraction of the expected time.
const BANDWIDTH_BOUND: f64 = 0.9;
/// A bandwidth-bound row below this fraction of expected earns an explanation.
pub const SHORT_OF: f64 = 0.8;

/// The algorithm the model assumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    Ring,
    Hierarchical,
    Rabenseifner,
    Pairwise,
    /// All-gather or all-reduce by exchanges with rank ^ 1, ^ 2, ^ 4, ...
    RecursiveDoubling,
    /// All-gather by sends to rank - 1, - 2, - 4, ...
    Bruck,
    /// All-gather by exchanges with the left and right neighbour in turn.
    NeighbourExchange,
    /// Reduce-scatter by exchanges of half the data with rank ^ n/2, ..., ^ 1.
    RecursiveHalving,
    /// Alltoall with every message posted at once.
    Linear,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::Hierarchical => "hierarchical",
            Algorithm::Rabenseifner => "rabenseifner",
            Algorithm::Pairwise => "pairwise",
            Algorithm::RecursiveDoubling => "recursive-doubling",
            Algorithm::Bruck => "bruck",
            Algorithm::NeighbourExchange => "neighbour-exchange",
            Algorithm::RecursiveHalving => "recursive-halving",
            Algorithm::Linear => "linear",
        }
    }

    /// Whether a rank takes its data from more than one other node, in turn
    /// or all at once: then, with calls back to back, a rank that runs ahead
    /// sends into a peer still receiving the step before, which the model does
    /// not simulate. The ring takes it from one neighbour; NCCL's hierarchical
    /// form moves data only into buffers its receiver granted; the steps by
    /// distance cross nodes at distances of a node or more, one peer on 2 nodes.
    pub fn several_remote_peers(self, shape: Shape) -> bool {
        match self {
            Algorithm::Ring | Algorithm::Hierarchical => false,
            Algorithm::Pairwise | Algorithm::Linear => {
                shape.nodes > 2 || (shape.nodes == 2 && shape.per_node > 1)
            }
            _ => shape.nodes > 2,
        }
    }

    fn phases(self, collective: &str, shape: Shape) -> Vec<Phase> {
        match (self, collective) {
            (Algorithm::Ring, "all_reduce") => formulas::ring_all_reduce(shape),
            (Algorithm::Ring, _) => formulas::ring_gather_or_scatter(shape),
            (Algorithm::Hierarchical, _) => formulas::hierarchical_all_reduce(shape),
            (Algorithm::Rabenseifner, _) => formulas::rabenseifner_all_reduce(shape),
            (Algorithm::Pairwise, _) => formulas::pairwise_alltoall(shape),
            (Algorithm::RecursiveDoubling, "all_reduce") => {
                formulas::recursive_doubling_all_reduce(shape)
            }
            (Algorithm::RecursiveDoubling, _) => formulas::recursive_doubling_all_gather(shape),
            (Algorithm::Bruck, _) => formulas::bruck_all_gather(shape),
            (Algorithm::NeighbourExchange, _) => formulas::neighbour_exchange_all_gather(shape),
            (Algorithm::RecursiveHalving, _) => formulas::recursive_halving_reduce_scatter(shape),
            (Algorithm::Linear, _) => formulas::linear_alltoall(shape),
        }
    }
}

/// Which library runs the collectives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Library {
    Nccl,
    /// An MPI whose choice of algorithm is not modelled (MPICH, Open MPI 5).
    Mpi,
    /// Open MPI 4.1, with what the environment tells of its tuned component.
    OpenMpi(openmpi::Tuned),
}

impl Library {
    /// The mpi backend's library from its version string ("Open MPI v4.1.4")
    /// and the environment: Open MPI 4.1's rules are known, others' are not.
    pub fn mpi(version: &str, var: impl Fn(&str) -> Option<String>) -> Library {
        match version.starts_with("Open MPI v4.1.") {
            true => Library::OpenMpi(openmpi::Tuned::from_env(var)),
            false => Library::Mpi,
        }
    }
}

/// The algorithm assumed for `collective` at `size_bytes`, with Open MPI's
/// choice where it is known, or None: no model for it.
/// NCCL: rings (its default for bandwidth-bound sizes), and for an all-reduce
/// whose TUNING log says TREE across nodes of several GPUs, the hierarchical
/// form (a chain within the node, a tree across nodes). Open MPI 4.1: the
/// algorithm its tuned component runs at this rank count and size (its fixed
/// rules, or the one forced), where the model has it. Other MPIs, and Open
/// MPI's choices the model has not: the bandwidth-optimal algorithm,
/// Rabenseifner for all-reduce, the ring for all-gather and reduce-scatter,
/// pairwise exchange for alltoall, which tells what the links allow.
pub fn algorithm(
    library: Library,
    collective: &str,
    shape: Shape,
    size_bytes: u64,
    nccl_algo: Option<&str>,
) -> Option<(Algorithm, Option<openmpi::Choice>)> {
    let tree = nccl_algo.is_some_and(|a| a.eq_ignore_ascii_case("tree"));
    let optimal = match (library, collective) {
        (Library::Nccl, "all_reduce") if tree && shape.per_node > 1 && shape.nodes > 1 => {
            Algorithm::Hierarchical
        }
        (Library::Nccl, "all_reduce") => Algorithm::Ring,
        (_, "all_reduce") => Algorithm::Rabenseifner,
        (_, "all_gather" | "reduce_scatter") => Algorithm::Ring,
        (_, "alltoall") => Algorithm::Pairwise,
        _ => return None,
    };
    let choice = match library {
        Library::OpenMpi(tuned) => tuned.choose(collective, shape.ranks(), size_bytes),
        _ => None,
    };
    let assumed = choice.and_then(|c| c.algorithm).unwrap_or(optimal);
    Some((assumed, choice))
}

/// Where the per-message latency comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Latency {
    /// --model-latency, microseconds.
    Given(f64),
    /// The median over the run's latency-bound measurements so far, each
    /// (time - bandwidth time) / messages; none yet: 0.
    Calibrated(Vec<f64>),
}

impl Latency {
    fn us(&self) -> Option<f64> {
        match self {
            Latency::Given(us) => Some(*us),
            Latency::Calibrated(v) if v.is_empty() => None,
            Latency::Calibrated(v) => Some(median(v)),
        }
    }
}

/// A run's model: its shape, its links and its latency.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    library: Library,
    shape: Shape,
    /// Per rank; None: shared memory, not modelled (taken as never binding).
    intra: Option<Limit>,
    /// Per node, every rail summed; None on one node.
    inter: Option<Limit>,
    latency: Latency,
}

/// A row's expected figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Expected {
    pub algorithm: Algorithm,
    /// Open MPI's choice for this row where it is known (its name, whether
    /// forced); the model's `algorithm` is it, or the bandwidth-optimal one
    /// where the model does not have it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_mpi: Option<openmpi::Choice>,
    pub time_us: f64,
    pub busbw_gbs: f64,
    /// The per-message latency used, us; None: not yet calibrated (0 used).
    pub latency_us: Option<f64>,
    /// The bandwidth time's share of the expected time (1: bandwidth-bound).
    pub bandwidth_share: f64,
    /// The link the model says binds at this size: "inter-node rdma-port 100 Gb/s 12.5 GB/s".
    pub bottleneck: Option<String>,
}

impl Expected {
    /// The algorithm the model assumed, in words: "ring", "rabenseifner (Open
    /// MPI's rabenseifner)", "ring (Open MPI's butterfly is not modelled)".
    pub fn assumed(&self) -> String {
        let name = self.algorithm.name();
        let Some(c) = self.open_mpi else {
            return name.to_string();
        };
        let how = if c.forced { "forced" } else { "fixed rule" };
        match c.algorithm {
            Some(_) => format!("{name}: Open MPI's {} ({how})", c.name),
            None => format!("{name}: Open MPI's {} ({how}) is not modelled", c.name),
        }
    }

    /// busbw as a percentage of the expected busbw.
    /// None where nothing is expected: a row of 0 bytes (nccl-tests prints
    /// such rows when the count rounds down to 0) expects 0 GB/s.
    pub fn percent(&self, busbw_gbs: f64) -> Option<f64> {
        (self.busbw_gbs > 0.0).then(|| busbw_gbs / self.busbw_gbs * 100.0)
    }

    /// Whether a row of `busbw_gbs` at this size falls short enough to explain.
    pub fn short(&self, busbw_gbs: f64) -> bool {
        self.bandwidth_share >= BANDWIDTH_BOUND && busbw_gbs < SHORT_OF * self.busbw_gbs
    }
}

/// The facts of a run the model is built from.
pub struct RunShape<'a> {
    pub library: Library,
    pub nranks: usize,
    pub nnodes: usize,
    /// The run's limits (given or detected), lowest first.
    pub limits: &'a [Limit],
    /// NCCL_TESTS_SPLIT groups: the ranks do not form one collective.
    pub split: bool,
    pub latency_us: Option<f64>,
}

fn is_nvlink(l: &Limit) -> bool {
    l.name.to_ascii_lowercase().starts_with("nvlink")
}

impl Model {
    /// The run's model, or why there is none.
    pub fn new(run: &RunShape) -> anyhow::Result<Model> {
        if run.split {
            bail!("no model: NCCL_TESTS_SPLIT runs several groups side by side");
        }
        if run.nnodes == 0 || run.nranks % run.nnodes != 0 {
            bail!(
                "no model: {} ranks on {} nodes are not the same count on every node",
                run.nranks,
                run.nnodes
            );
        }
        let shape = Shape {
            per_node: run.nranks / run.nnodes,
            nodes: run.nnodes,
        };
        let nvlink = run.limits.iter().find(|l| is_nvlink(l)).cloned();
        let others: Vec<Limit> = run
            .limits
            .iter()
            .filter(|l| !is_nvlink(l))
            .cloned()
            .collect();
        let lowest = limits::binding(&others).cloned();
        let (intra, inter) = match (run.library, shape.nodes > 1) {
            (Library::Nccl, true) => (nvlink.or_else(|| lowest.clone()), lowest),
            (Library::Nccl, false) => (nvlink.or(lowest), None),
            // Host buffers within a node: shared memory, not a limit of the run.
            (_, true) => (None, lowest),
            (_, false) => (lowest, None),
        };
        if shape.nodes > 1 && inter.is_none() {
            bail!("no model: no limit for the links between nodes (give --limit)");
        }
        if shape.nodes == 1 && intra.is_none() {
            bail!("no model: one node and no limit for its links (shared memory has none; give --limit)");
        }
        Ok(Model {
            library: run.library,
            shape,
            intra,
            inter,
            latency: match run.latency_us {
                Some(us) => Latency::Given(us),
                None => Latency::Calibrated(Vec::new()),
            },
        })
    }

    fn link(&self, role: Role) -> Option<&Limit> {
        match role {
            Role::Intra => self.intra.as_ref(),
            Role::Inter => self.inter.as_ref(),
        }
    }

    fn rate(&self, role: Role) -> Option<f64> {
        self.link(role).map(|l| l.gbs * 1e9)
    }

    /// One header line: the shape, the links and where the latency comes from.
    pub fn describe(&self) -> String {
        let link = |l: &Option<Limit>, what: &str| match l {
            Some(l) => format!("{what} {}", l.label()),
            None => format!("{what} not modelled (shared memory)"),
        };
        let latency = match &self.latency {
            Latency::Given(us) => format!("latency {us} us (--model-latency)"),
            Latency::Calibrated(_) => {
                "latency calibrated from the run's latency-bound sizes".to_string()
            }
        };
        let mut parts = vec![format!(
            "{} node(s) x {} rank(s)",
            self.shape.nodes, self.shape.per_node
        )];
        parts.push(link(&self.intra, "within a node:"));
        if self.shape.nodes > 1 {
            parts.push(link(&self.inter, "out of a node:"));
        }
        parts.push(latency);
        match self.library {
            Library::Nccl => {}
            Library::Mpi => parts.push(
                "MPI algorithm: bandwidth-optimal (this MPI's choice is not modelled)".into(),
            ),
            Library::OpenMpi(tuned) => parts.push(tuned.describe()),
        }
        format!("Expected (alpha-beta model): {}", parts.join("; "))
    }

    /// Takes a row's measured times (us, each placement's) into the latency
    /// calibration, then returns its expected figures; None: no model for
    /// `collective`.
    pub fn expect(
        &mut self,
        collective: &str,
        size_bytes: u64,
        busbw_factor: f64,
        measured_us: &[f64],
        nccl_algo: Option<&str>,
    ) -> Option<Expected> {
        let (algorithm, open_mpi) =
            algorithm(self.library, collective, self.shape, size_bytes, nccl_algo)?;
        let phases = algorithm.phases(collective, self.shape);
        let bytes = size_bytes as f64;
        let bandwidth_s = formulas::seconds(&phases, bytes, 0.0, |r| self.rate(r));
        let steps = formulas::steps(&phases);
        if let Latency::Calibrated(samples) = &mut self.latency {
            // Judged against the smaller sizes' latency once there is one, not
            // against the row's own time: a large size that ran slow would
            // otherwise pass as latency-bound and excuse itself.
            let so_far = (!samples.is_empty()).then(|| steps * median(samples));
            for &t in measured_us.iter().filter(|t| t.is_finite() && **t > 0.0) {
                if bandwidth_s * 1e6 <= LATENCY_BOUND * so_far.unwrap_or(t) && steps > 0.0 {
                    samples.push((t - bandwidth_s * 1e6) / steps);
                }
            }
        }
        let latency_us = self.latency.us();
        let time_s = bandwidth_s + steps * latency_us.unwrap_or(0.0) * 1e-6;
        let bottleneck = phases
            .iter()
            .filter_map(|p| formulas::busiest(p, bytes, &|r| self.rate(r)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .and_then(|(role, _)| {
                let what = match role {
                    Role::Intra => "within a node",
                    Role::Inter => "out of a node",
                };
                self.link(role).map(|l| format!("{what}: {}", l.label()))
            });
        (time_s > 0.0).then(|| Expected {
            algorithm,
            open_mpi,
            time_us: time_s * 1e6,
            busbw_gbs: bytes / time_s * busbw_factor / 1e9,
            latency_us,
            bandwidth_share: bandwidth_s / time_s,
            bottleneck,
        })
    }

    /// What to check, in the guide's order, for a row of `collective` short of
    /// `expected`. An MPI algorithm that changes peer, across nodes, first gets
    /// the run that tells its steps' collisions from the links: the ring forced.
    pub fn checks(&self, collective: &str, expected: &Expected) -> String {
        let guide = match self.library {
            Library::Nccl => {
                "check the NIC alone (ib_write_bw), the GPU-NIC distance (doctor), \
                 the transport NCCL chose (transport column, NCCL_DEBUG=INFO), then NCCL's \
                 settings (NCCL_IB_HCA, NCCL_ALGO, NCCL_PROTO)"
            }
            Library::Mpi | Library::OpenMpi(_) => {
                "check the NIC alone (ib_write_bw), the NIC's PCIe link and NUMA \
                 node (doctor), the transport MPI chose (transport column), then MPI's \
                 settings (the env column)"
            }
        };
        let collides =
            self.library != Library::Nccl && expected.algorithm.several_remote_peers(self.shape);
        match collides {
            true => format!(
                "{} takes its data from a different rank at each step, and with calls back \
                 to back a rank that runs ahead sends into a peer still receiving the step \
                 before (docs/model.md); to tell that from the links, {}: if it reaches \
                 expected, the links are fine; if not, {guide}",
                expected.algorithm.name(),
                self.ring_run(collective)
            ),
            false => guide.to_string(),
        }
    }

    /// The run whose ring loads the same links: this collective's ring where
    /// the MPI has one, else all_gather's.
    fn ring_run(&self, collective: &str) -> String {
        match self.library {
            Library::OpenMpi(_) => match openmpi::ring_forced(collective) {
                Some(mca) => format!("rerun with the ring forced ({mca})"),
                None => format!(
                    "run all_gather_perf on the same nodes with the ring forced ({})",
                    openmpi::ring_forced("all_gather").unwrap_or_default()
                ),
            },
            _ => "run all_gather_perf on the same nodes with the ring forced \
                  (MPICH: MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM=ring)"
                .to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(name: &str, gbs: f64) -> Limit {
        Limit {
            name: name.into(),
            gbs,
        }
    }

    fn shape(library: Library, nranks: usize, nnodes: usize, limits: &[Limit]) -> RunShape<'_> {
        RunShape {
            library,
            nranks,
            nnodes,
            limits,
            split: false,
            latency_us: None,
        }
    }

    fn run(library: Library, nranks: usize, nnodes: usize, limits: &[Limit]) -> Model {
        Model::new(&shape(library, nranks, nnodes, limits)).unwrap()
    }

    #[test]
    fn ring_all_reduce_expected_busbw_is_the_link() {
        let limits = [limit("rdma-port 100 Gb/s", 12.5)];
        let mut m = run(Library::Nccl, 4, 4, &limits);
        // Large sizes measured only: no latency sample, so none is used.
        let e = m.expect("all_reduce", 1 << 30, 1.5, &[1e5], None).unwrap();
        assert_eq!(e.algorithm, Algorithm::Ring);
        assert!((e.busbw_gbs - 12.5).abs() < 1e-9);
        assert_eq!(e.latency_us, None);
        assert_eq!(
            e.bottleneck.as_deref(),
            Some("out of a node: rdma-port 100 Gb/s 12.5 GB/s")
        );
        assert!(e.short(8.0) && !e.short(11.0));
        assert!((e.percent(10.0).unwrap() - 80.0).abs() < 1e-9);
        // A row of 0 bytes expects 0 GB/s: no percentage, not NaN.
        let none = Expected {
            busbw_gbs: 0.0,
            ..e.clone()
        };
        assert_eq!(none.percent(0.0), None);
    }

    #[test]
    fn latency_calibrated_from_latency_bound_sizes() {
        let limits = [limit("1 Gb/s", 0.125)];
        let mut m = run(Library::Mpi, 2, 2, &limits);
        // 8 bytes: bandwidth 2*1/2*8/0.125e9 s = 0.064 us; 2 messages; 20.064 us
        // measured -> 10 us a message.
        let small = m.expect("all_reduce", 8, 1.0, &[20.064], None).unwrap();
        assert!((small.latency_us.unwrap() - 10.0).abs() < 1e-9);
        // 4 MiB: bandwidth-bound, so not a sample; 2 x 10 us added.
        let big = m
            .expect("all_reduce", 4 << 20, 1.0, &[40_000.0], None)
            .unwrap();
        assert!((big.time_us - (4194304.0 / 0.125e3 + 20.0)).abs() < 1e-6);
        assert_eq!(big.latency_us, Some(10.0));
    }

    #[test]
    fn a_slow_large_size_does_not_calibrate_the_latency() {
        let limits = [limit("10 GB/s", 10.0)];
        let mut m = run(Library::Mpi, 2, 1, &limits);
        m.expect("all_reduce", 8, 1.0, &[20.0], None).unwrap();
        // 2 MiB ran 100x slower than its bandwidth time: its bandwidth time is under
        // 10% of its own time, but not of the small size's latency term, so it is no
        // sample, and its expected time stays far below what it measured.
        let measured = 100.0 * (2 << 20) as f64 / 10e3;
        let slow = m
            .expect("all_reduce", 2 << 20, 1.0, &[measured], None)
            .unwrap();
        assert!((slow.latency_us.unwrap() - 10.0).abs() < 1e-3, "{slow:?}");
        assert!(slow.time_us < 0.1 * measured, "{slow:?}");
    }

    #[test]
    fn algorithms_by_library() {
        let s = Shape {
            per_node: 4,
            nodes: 2,
        };
        let assumed = |library, collective, size, nccl| {
            algorithm(library, collective, s, size, nccl).map(|(a, _)| a)
        };
        assert_eq!(
            assumed(Library::Mpi, "all_reduce", 1 << 20, None),
            Some(Algorithm::Rabenseifner)
        );
        assert_eq!(
            assumed(Library::Nccl, "all_reduce", 1 << 20, Some("TREE")),
            Some(Algorithm::Hierarchical)
        );
        assert_eq!(
            assumed(Library::Nccl, "all_reduce", 1 << 20, Some("RING")),
            Some(Algorithm::Ring)
        );
        assert_eq!(
            assumed(Library::Nccl, "alltoall", 1 << 20, None),
            Some(Algorithm::Pairwise)
        );
        assert_eq!(assumed(Library::Mpi, "broadcast", 1 << 20, None), None);
        // Open MPI 4.1 on 8 ranks: recursive doubling below 8 KiB, then
        // Rabenseifner; all-gather by recursive doubling; MPICH keeps the ring.
        let ompi = Library::mpi("Open MPI v4.1.4", |_| None);
        assert_eq!(
            assumed(ompi, "all_reduce", 4096, None),
            Some(Algorithm::RecursiveDoubling)
        );
        assert_eq!(
            assumed(ompi, "all_reduce", 1 << 20, None),
            Some(Algorithm::Rabenseifner)
        );
        assert_eq!(
            assumed(ompi, "all_gather", 1 << 20, None),
            Some(Algorithm::RecursiveDoubling)
        );
        let mpich = Library::mpi("MPICH 4.0.2", |_| None);
        assert_eq!(mpich, Library::Mpi);
        assert_eq!(
            assumed(mpich, "all_gather", 1 << 20, None),
            Some(Algorithm::Ring)
        );
    }

    #[test]
    fn the_assumed_algorithm_is_said() {
        let limits = [limit("0.5 Gb/s", 0.0625)];
        let ompi = Library::mpi("Open MPI v4.1.4", |_| None);
        let mut m = run(ompi, 4, 4, &limits);
        assert!(m
            .describe()
            .ends_with("; MPI algorithm: Open MPI 4.1's fixed rules (coll tuned)"));
        let e = m
            .expect("all_gather", 16 << 20, 0.75, &[3e5], None)
            .unwrap();
        assert_eq!(e.algorithm, Algorithm::RecursiveDoubling);
        assert_eq!(
            e.assumed(),
            "recursive-doubling: Open MPI's recursive_doubling (fixed rule)"
        );
        // One rank a node: the ring's load, so the link's rate.
        assert!((e.busbw_gbs - 0.0625).abs() < 1e-9, "{e:?}");
        // 64 ranks, a 128 KiB reduce-scatter: butterfly, not modelled: the ring.
        let mut big = run(ompi, 64, 64, &limits);
        let e = big
            .expect("reduce_scatter", 128 << 10, 63.0 / 64.0, &[1e5], None)
            .unwrap();
        assert_eq!(e.algorithm, Algorithm::Ring);
        assert_eq!(
            e.assumed(),
            "ring: Open MPI's butterfly (fixed rule) is not modelled"
        );
        let mpich = run(Library::Mpi, 4, 4, &limits);
        assert!(mpich
            .describe()
            .contains("MPI algorithm: bandwidth-optimal"));
    }

    #[test]
    fn an_algorithm_that_changes_peer_is_told_from_the_links_by_the_ring() {
        let limits = [limit("0.5 Gb/s", 0.0625)];
        let ompi = Library::mpi("Open MPI v4.1.4", |_| None);
        let mut m = run(ompi, 4, 4, &limits);
        let mut checks = |collective: &str, factor| {
            let e = m
                .expect(collective, 16 << 20, factor, &[1e6], None)
                .unwrap();
            m.checks(collective, &e)
        };
        // Open MPI's recursive doubling on 4 nodes: its own ring, forced, first.
        let all_gather = checks("all_gather", 0.75);
        assert!(
            all_gather.starts_with(
                "recursive-doubling takes its data from a different rank at each step"
            ),
            "{all_gather}"
        );
        assert!(
            all_gather.contains(
                "to tell that from the links, rerun with the ring forced (--mca \
             coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allgather_algorithm 4): if it \
             reaches expected, the links are fine; if not, check the NIC alone (ib_write_bw)"
            ),
            "{all_gather}"
        );
        assert!(checks("all_reduce", 1.5).contains("coll_tuned_allreduce_algorithm 4)"));
        // Reduce-scatter runs the ring here: the guide alone.
        assert!(checks("reduce_scatter", 0.75).starts_with("check the NIC alone"));
        // Alltoall has no ring in Open MPI: all_gather's on the same nodes.
        assert!(checks("alltoall", 0.75).contains(
            "run all_gather_perf on the same nodes with the ring forced (--mca \
             coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allgather_algorithm 4)"
        ));
        // Forced to the ring: the guide alone.
        let ring = Library::mpi("Open MPI v4.1.4", |v| match v {
            "OMPI_MCA_coll_tuned_use_dynamic_rules" => Some("1".into()),
            "OMPI_MCA_coll_tuned_allgather_algorithm" => Some("ring".into()),
            _ => None,
        });
        let mut m = run(ring, 4, 4, &limits);
        let e = m
            .expect("all_gather", 16 << 20, 0.75, &[1e6], None)
            .unwrap();
        assert!(m
            .checks("all_gather", &e)
            .starts_with("check the NIC alone"));
        // 2 nodes of one rank: one peer across, whatever the algorithm.
        let mut m = run(ompi, 2, 2, &limits);
        let e = m.expect("all_reduce", 16 << 20, 1.0, &[1e6], None).unwrap();
        assert_eq!(e.algorithm, Algorithm::Rabenseifner);
        assert!(m
            .checks("all_reduce", &e)
            .starts_with("check the NIC alone"));
        // Other MPIs: MPICH's setting; NCCL: its guide, whatever the algorithm.
        let mut m = run(Library::Mpi, 4, 4, &limits);
        let e = m.expect("all_reduce", 16 << 20, 1.5, &[1e6], None).unwrap();
        assert!(m
            .checks("all_reduce", &e)
            .contains("(MPICH: MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM=ring)"));
        let mut m = run(Library::Nccl, 4, 4, &limits);
        let e = m.expect("alltoall", 16 << 20, 0.75, &[1e6], None).unwrap();
        assert_eq!(e.algorithm, Algorithm::Pairwise);
        assert!(m.checks("alltoall", &e).starts_with("check the NIC alone"));
    }

    #[test]
    fn several_remote_peers_by_shape() {
        let shape = |per_node, nodes| Shape { per_node, nodes };
        for a in [Algorithm::Ring, Algorithm::Hierarchical] {
            assert!(!a.several_remote_peers(shape(8, 64)));
        }
        assert!(!Algorithm::RecursiveDoubling.several_remote_peers(shape(8, 2)));
        assert!(Algorithm::RecursiveDoubling.several_remote_peers(shape(1, 4)));
        assert!(!Algorithm::Pairwise.several_remote_peers(shape(1, 2)));
        assert!(Algorithm::Pairwise.several_remote_peers(shape(2, 2)));
        assert!(!Algorithm::Linear.several_remote_peers(shape(4, 1)));
    }

    #[test]
    fn no_model_without_links() {
        let none = |library, nranks, nnodes, limits: &[Limit]| {
            Model::new(&shape(library, nranks, nnodes, limits))
                .unwrap_err()
                .to_string()
        };
        assert!(none(Library::Mpi, 4, 1, &[]).contains("shared memory"));
        assert!(none(Library::Mpi, 4, 2, &[]).contains("give --limit"));
        assert!(none(Library::Mpi, 3, 2, &[limit("x", 1.0)]).contains("not the same count"));
        // NVLink within, the NIC across.
        let m = run(
            Library::Nccl,
            16,
            2,
            &[
                limit("rdma-port 400 Gb/s", 50.0),
                limit("NVLink x18 @ 25.0 GB/s (NVML)", 450.0),
            ],
        );
        assert!(m.describe().contains("within a node: NVLink"));
        assert!(m
            .describe()
            .contains("out of a node: rdma-port 400 Gb/s 50 GB/s"));
    }
}
