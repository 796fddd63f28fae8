//! The MPI job every binary runs in: ranks, nodes, and the few small exchanges the
//! driver needs outside the timed loops (agreeing on arguments, gathering timings).
//! Started without mpirun, a binary is a job of one rank.

use super::setup::{self, Step};
use crate::sysfs::identity::machine_identity;
use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::datatype::PartitionMut;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Count;
use mpi::Threading;

/// This host's name ("unknown" when it cannot be read).
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

pub struct World {
    // Dropping the universe finalizes MPI, so it lives as long as the world
    // (a part of the world, `split`, holds none).
    _universe: Option<mpi::environment::Universe>,
    pub comm: SimpleCommunicator,
    pub rank: usize,
    pub size: usize,
    /// Rank among the ranks of this node, and how many share the node.
    pub local_rank: usize,
    pub local_size: usize,
    /// Host name of every rank, by rank.
    pub hosts: Vec<String>,
    /// Machine identity of every rank, by rank (`sysfs::identity`; "" where
    /// none could be read): a host name claimed from two identities is two nodes.
    pub identities: Vec<String>,
}

impl World {
    pub fn init() -> anyhow::Result<World> {
        // Single, as MPI_Init (what nccl-tests and OSU call): only the main thread calls
        // MPI, the watchdog's never does. Asking for Funneled made Open MPI 4.1 take
        // its thread-safe wait path (locks on every request): about 0.1 us more per
        // 8-byte allreduce (scripts/compare-osu.sh).
        let (universe, _) = mpi::initialize_with_threading(Threading::Single)
            .ok_or_else(|| anyhow::anyhow!("MPI was already initialised"))?;
        let comm = universe.world();
        let rank = comm.rank() as usize;
        let size = comm.size() as usize;
        setup::rank_is(rank);
        let identity = machine_identity(&crate::sysfs::Root::new("/")).unwrap_or_default();
        let mut world = World {
            _universe: Some(universe),
            comm,
            rank,
            size,
            local_rank: 0,
            local_size: 1,
            hosts: Vec::new(),
            identities: Vec::new(),
        };
        setup::step(Step::Exchange(
            "exchanging host names and machine identities",
        ));
        let mine = format!("{}\t{identity}", hostname());
        (world.hosts, world.identities) = world
            .all_gather_bytes(mine.as_bytes())
            .into_iter()
            .map(|b| {
                let text = String::from_utf8_lossy(&b).into_owned();
                let (host, id) = text.split_once('\t').unwrap_or((&text, ""));
                (host.to_string(), id.to_string())
            })
            .unzip();
        // A node is a host name and a machine identity (nccl-tests counts names alone,
        // and two machines of one name would share local ranks). Not MPI_Comm_split_type:
        // making any communicator leaves Open MPI 4.1's libnbc progress hook running for
        // good, a cost on every later call of the timed loop (1% of an 8-byte allreduce's cycles).
        (world.local_rank, world.local_size) = world.place_on_node();
        Ok(world)
    }

    /// The ranks that give the same `color`, as a world of their own, in the
    /// order of their ranks here (every rank calls it). Made only where a run
    /// needs one: any communicator leaves Open MPI 4.1's progress hook running
    /// (see `init`).
    pub fn split(&self, color: usize) -> World {
        use mpi::topology::Color;
        let comm = self
            .comm
            .split_by_color(Color::with_value(color as i32))
            .expect("a rank with a color is in its part");
        let colors = self.all_gather_u64(color as u64);
        let members: Vec<usize> = (0..self.size)
            .filter(|&r| colors[r] == color as u64)
            .collect();
        let mut part = World {
            _universe: None,
            rank: comm.rank() as usize,
            size: comm.size() as usize,
            comm,
            local_rank: 0,
            local_size: 1,
            hosts: members.iter().map(|&r| self.hosts[r].clone()).collect(),
            identities: members
                .iter()
                .map(|&r| self.identities[r].clone())
                .collect(),
        };
        (part.local_rank, part.local_size) = part.place_on_node();
        part
    }

    /// The first rank of each machine, in rank order.
    pub fn node_leaders(&self) -> Vec<usize> {
        let mut seen: Vec<(&str, &str)> = Vec::new();
        (0..self.size)
            .filter(|&r| match seen.contains(&self.machine(r)) {
                true => false,
                false => {
                    seen.push(self.machine(r));
                    true
                }
            })
            .collect()
    }

    /// This rank's rank among the ranks of its machine, and how many they are.
    fn place_on_node(&self) -> (usize, usize) {
        let mine = self.machine(self.rank);
        let local_rank = (0..self.rank).filter(|&r| self.machine(r) == mine).count();
        let local_size = (0..self.size).filter(|&r| self.machine(r) == mine).count();
        (local_rank, local_size)
    }

    /// The machine of `rank`: its host name and identity.
    fn machine(&self, rank: usize) -> (&str, &str) {
        (&self.hosts[rank], &self.identities[rank])
    }

    pub fn is_root(&self) -> bool {
        self.rank == 0
    }

    /// One host name per machine, in order of first rank: machines are told
    /// apart by identity, so two nodes answering as one name are two entries.
    pub fn nodes(&self) -> Vec<String> {
        let leaders = self.node_leaders().into_iter();
        leaders.map(|r| self.hosts[r].clone()).collect()
    }

    /// A host name that ranks of different machine identities claim (a node
    /// renamed, a cloned image): per-host figures of that name mix two nodes.
    pub fn shared_host_names(&self) -> Option<String> {
        shared_host_names(&self.hosts, &self.identities)
    }

    pub fn barrier(&self) {
        self.comm.barrier();
    }

    pub fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let len = mine.len() as Count;
        let mut lens = vec![0 as Count; self.size];
        self.comm.all_gather_into(&len, &mut lens[..]);
        let displs: Vec<Count> = lens
            .iter()
            .scan(0, |acc, &l| {
                let d = *acc;
                *acc += l;
                Some(d)
            })
            .collect();
        let mut all = vec![0u8; lens.iter().sum::<Count>() as usize];
        // An empty Vec's pointer is 1, which is Open MPI's MPI_IN_PLACE: with nothing
        // to receive skip the call (every rank knows), and never send from it.
        if !all.is_empty() {
            let anchor = [0u8; 1];
            let send = if mine.is_empty() { &anchor[..0] } else { mine };
            let mut partition = PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
            self.comm.all_gather_varcount_into(send, &mut partition);
        }
        lens.iter()
            .zip(&displs)
            .map(|(&l, &d)| all[d as usize..(d + l) as usize].to_vec())
            .collect()
    }

    /// Every rank's value, on every rank.
    pub fn all_gather_u64(&self, mine: u64) -> Vec<u64> {
        let mut all = vec![0u64; self.size];
        self.comm.all_gather_into(&mine, &mut all[..]);
        all
    }

    pub fn sum_u64(&self, mine: u64) -> u64 {
        let mut total = 0u64;
        self.comm
            .all_reduce_into(&mine, &mut total, SystemOperation::sum());
        total
    }

    /// Concatenation of every rank's equally long slice, on rank 0 only.
    pub fn gather_f64s(&self, mine: &[f64]) -> Option<Vec<f64>> {
        let root = self.comm.process_at_rank(0);
        if self.is_root() {
            let mut all = vec![0f64; mine.len() * self.size];
            root.gather_into_root(mine, &mut all[..]);
            Some(all)
        } else {
            root.gather_into(mine);
            None
        }
    }
}

/// The warning of `World::shared_host_names`, from every rank's host name and
/// identity (an empty identity tells nothing).
fn shared_host_names(hosts: &[String], identities: &[String]) -> Option<String> {
    let mut shared: Vec<String> = Vec::new();
    for (rank, host) in hosts.iter().enumerate() {
        let other = (0..rank).find(|&r| {
            hosts[r] == *host && !identities[r].is_empty() && identities[r] != identities[rank]
        });
        if let Some(first) = other {
            if !shared.iter().any(|s| s.starts_with(&format!("{host}:"))) {
                shared.push(format!(
                    "{host}: rank {first} from {}, rank {rank} from {}",
                    identities[first], identities[rank]
                ));
            }
        }
    }
    (!shared.is_empty()).then(|| {
        format!(
            "one host name answered from different machines ({}): give every node its own host \
             name; doctor names them",
            shared.join("; ")
        )
    })
}

impl super::Group for World {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn host(&self, rank: usize) -> &str {
        &self.hosts[rank]
    }

    fn identity(&self, rank: usize) -> &str {
        &self.identities[rank]
    }

    fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        World::all_gather_bytes(self, mine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_name_of_two_identities_is_named() {
        let hosts: Vec<String> = ["n1", "n3", "n3", "n3"].map(String::from).to_vec();
        let ids: Vec<String> = ["a", "c", "c", "d"].map(String::from).to_vec();
        assert_eq!(
            shared_host_names(&hosts, &ids).as_deref(),
            Some(
                "one host name answered from different machines (n3: rank 1 from c, rank 3 from d): \
                 give every node its own host name; doctor names them"
            )
        );
        let same: Vec<String> = ["a", "c", "c", "c"].map(String::from).to_vec();
        assert_eq!(shared_host_names(&hosts, &same), None);
        let unknown = vec![String::new(); 4];
        assert_eq!(shared_host_names(&hosts, &unknown), None);
    }
}
