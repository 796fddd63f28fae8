//! mpirun's link: every exchange is one all-gather over the job, so all pairs
//! move from size to size together.

use crate::job::world::World;
use crate::job::ExitStatus;
use crate::verbs::exchange::wire::{decode, encode, Message};
use crate::verbs::exchange::{accept, Link, Patience, ARRIVAL_POLL_MAX, ARRIVAL_POLL_MIN};
use anyhow::{anyhow, bail};
use std::time::{Duration, Instant};

/// mpirun's pairs: every exchange is one all-gather over the job, so all pairs
/// move from size to size together.
pub struct MpiLink<'w> {
    pub world: &'w World,
    pub peer: usize,
    /// --timeout: the longest wait for a prompt answer.
    pub timeout: Duration,
}

impl MpiLink<'_> {
    /// Waits until every rank has arrived, asleep between looks: a rank spinning
    /// in a blocking MPI call takes a CPU from the transfer it waits for (with
    /// Soft-RoCE, the kernel threads that move the data).
    fn arrive(&self, expected: &str, patience: Patience) -> anyhow::Result<()> {
        use mpi::collective::CommunicatorCollectives;
        let deadline = match patience {
            Patience::Prompt => Some(Instant::now() + self.timeout),
            Patience::WhileMeasuring => None,
        };
        let mut request = self.world.comm.immediate_barrier();
        let mut pause = ARRIVAL_POLL_MIN;
        loop {
            match request.test() {
                Ok(_) => return Ok(()),
                Err(pending) => request = pending,
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                // Never completed: the job is ended next (`abandon`), and
                // dropping a pending request would panic.
                std::mem::forget(request);
                bail!(
                    "not every rank sent {expected} within {} s: a rank is stuck or gone (see its output); raise --timeout if it is slow",
                    self.timeout.as_secs()
                );
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(ARRIVAL_POLL_MAX);
        }
    }

    fn all(&self, mine: &Message, patience: Patience) -> anyhow::Result<Vec<Message>> {
        self.arrive(mine.kind(), patience)?;
        self.world
            .all_gather_bytes(&encode(mine))
            .iter()
            .enumerate()
            .map(|(rank, frame)| decode(frame).map_err(|e| anyhow!("rank {rank} sent {e:#}")))
            .collect()
    }
}

impl Link for MpiLink<'_> {
    fn swap(&mut self, mine: &Message, patience: Patience) -> anyhow::Result<Message> {
        let peer = self.peer;
        let theirs = self.all(mine, patience)?.swap_remove(peer);
        accept(theirs, &format!("rank {peer}"))
    }

    fn gather(&mut self, mine: &Message, patience: Patience) -> anyhow::Result<Vec<Message>> {
        self.all(mine, patience)
    }

    fn abandon(&mut self, _reason: &str) {
        use mpi::topology::Communicator;
        // The other ranks may be inside an all-gather: only ending the job frees them.
        self.world.comm.abort(ExitStatus::Failed.code() as i32)
    }
}
