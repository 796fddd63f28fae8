//! How the two sides of a pair exchange messages: `wire`, the validated messages;
//! `peer`, the peer's details checked against this side's; `seat`, a process's
//! place among the pairs; and the `Link` they travel on: `tcp`, one connection
//! between a server and a client (a plain start); `mpi`, all-gathers over the
//! job when mpirun started the pairs; `crate::verbs::cm::link`, an rdma_cm
//! connection (-R, -z).

pub mod mpi;
pub mod peer;
pub mod seat;
pub mod tcp;
pub mod wire;

use crate::verbs::exchange::wire::Message;
use anyhow::anyhow;
use std::time::Duration;

/// How long to wait for the peer's next message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Patience {
    /// It should come at once: wait at most the --timeout.
    Prompt,
    /// The peer may be measuring for a long time: wait while the connection lives.
    WhileMeasuring,
}

/// The two sides' channel.
pub trait Link {
    /// Sends `mine` to the peer and returns the peer's message.
    fn swap(&mut self, mine: &Message, patience: Patience) -> anyhow::Result<Message>;
    /// Every endpoint's message, by endpoint (MPI: rank; TCP: client 0, server 1).
    fn gather(&mut self, mine: &Message, patience: Patience) -> anyhow::Result<Vec<Message>>;
    /// This side failed with `reason` (printed already): tell the peer, without
    /// waiting for it. Under MPI this ends the whole job.
    fn abandon(&mut self, reason: &str);
}

/// A rank waiting for the others looks again after this, doubling up to
/// `ARRIVAL_POLL_MAX`: prompt for quick exchanges, nearly silent during a
/// peer's long measurement.
pub const ARRIVAL_POLL_MIN: Duration = Duration::from_micros(100);
pub const ARRIVAL_POLL_MAX: Duration = Duration::from_millis(20);

/// The peer's message, or its stop as an error.
pub fn accept(peer: Message, who: &str) -> anyhow::Result<Message> {
    match peer {
        Message::Abort { reason } => Err(anyhow!("{who} stopped: {reason}")),
        other => Ok(other),
    }
}

/// Both messages of a pair by endpoint: the client's first.
pub fn pair_order(client: bool, mine: &Message, theirs: Message) -> Vec<Message> {
    if client {
        vec![mine.clone(), theirs]
    } else {
        vec![theirs, mine.clone()]
    }
}
