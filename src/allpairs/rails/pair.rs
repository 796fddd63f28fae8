//! One rank's side of a rail's pairs: a TCP connection to each partner from
//! and to the rail's own addresses (`link`), made when the pair first meets and
//! agreed over MPI (both ranks learn whether it was made), then timed
//! exchanges as `BackendPair` times MPI_Sendrecv. A pair that cannot connect is
//! not measured (its cells stay empty) and is reported as unreachable.

use super::link::{self, RailListener};
use crate::allpairs::backend::{pattern, wrong_bytes};
use crate::allpairs::{PairMeasure, PairSample};
use crate::job::world::World;
use crate::sysfs::cpu_wait::CpuWait;
use crate::sysfs::Root;
use crate::watchdog::Watchdog;
use mpi::point_to_point::send_receive_into;
use mpi::topology::Communicator;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

/// The longest a pair's connection may take: an address no one answers ARP
/// for fails after the kernel's 3 s of tries.
const CONNECT_WAIT: Duration = Duration::from_secs(5);

/// One rail's netdev on this node: where its pairs are measured from.
#[derive(Clone, Debug)]
pub struct RailEnd {
    /// 0-based: the rank's rank on its node.
    pub rail: usize,
    pub netdev: String,
    /// The netdev's IPv4 address, or why there is none.
    pub address: Result<Ipv4Addr, String>,
}

/// What the pairs' loops take of the flags.
pub struct Loops {
    pub max_bytes: usize,
    pub iters: usize,
    pub warmup_iters: usize,
    pub check: bool,
}

pub struct RailPair<'w> {
    rail: &'w World,
    end: RailEnd,
    listener: Option<RailListener>,
    /// Every rank of the rail's listener, or why it has none.
    peers: Vec<Result<SocketAddrV4, String>>,
    token: u64,
    /// The connection of the pair being measured (one at a time: a rank holds
    /// one socket whatever the rack's size).
    open: Option<(usize, TcpStream)>,
    /// Partners this rank could not connect with, and what this side saw.
    pub unreached: BTreeMap<usize, String>,
    loops: Loops,
    send: Vec<u8>,
    recv: Vec<u8>,
    per_iteration: Vec<f64>,
}

impl<'w> RailPair<'w> {
    /// Listens on the rail's address and learns every rank's (collective on `rail`).
    pub fn open(rail: &'w World, end: RailEnd, loops: Loops) -> RailPair<'w> {
        let listener = end.address.clone().and_then(|ip| {
            RailListener::bind(ip).map_err(|e| format!("cannot listen on {ip}: {e}"))
        });
        let mine = match listener.as_ref().map(|l| l.addr()) {
            Ok(Ok(addr)) => format!("+{addr}"),
            Ok(Err(e)) => format!("-{e}"),
            Err(why) => format!("-{why}"),
        };
        let peers = rail
            .all_gather_bytes(mine.as_bytes())
            .iter()
            .map(|b| parse_peer(&String::from_utf8_lossy(b)))
            .collect();
        let token = rail.all_gather_u64(rand::random::<u64>())[0];
        let send = (0..loops.max_bytes)
            .map(|i| pattern(rail.rank, i))
            .collect();
        RailPair {
            rail,
            end,
            listener: listener.ok(),
            peers,
            token,
            open: None,
            unreached: BTreeMap::new(),
            recv: vec![0; loops.max_bytes],
            per_iteration: vec![0.0; loops.iters],
            send,
            loops,
        }
    }

    /// The rail, 1-based as the docs and the virtual rack name it.
    pub fn rail_number(&self) -> usize {
        self.end.rail + 1
    }

    pub fn netdev(&self) -> &str {
        &self.end.netdev
    }

    /// Every rank's address or why it has none, by rank of the rail.
    pub fn peers(&self) -> &[Result<SocketAddrV4, String>] {
        &self.peers
    }

    /// Whether the connection with `peer` is open, made now if it was not;
    /// false where either side could not make it. Each step is agreed with
    /// the peer over MPI: a rank keeps its last connection, and reuses it only
    /// where the peer kept the same (it may have connected elsewhere since,
    /// when the pairs are measured alone).
    fn connect(&mut self, peer: usize, watchdog: &Watchdog) -> bool {
        watchdog.enter_call();
        let kept = self.open.as_ref().is_some_and(|(p, _)| *p == peer);
        if self.both(peer, kept) {
            return true;
        }
        self.open = None;
        if self.unreached.contains_key(&peer) {
            return false;
        }
        let tried = self.try_connect(peer);
        match (self.both(peer, tried.is_ok()), tried) {
            (true, Ok(stream)) => self.open = Some((peer, stream)),
            (false, Ok(_)) => drop(self.unreached.insert(peer, "the other side failed".into())),
            (_, Err(why)) => drop(self.unreached.insert(peer, why)),
        }
        self.open.is_some()
    }

    /// Whether `mine` holds on both sides of the pair with `peer`.
    fn both(&self, peer: usize, mine: bool) -> bool {
        let mut theirs = [0u8];
        let other = self.rail.comm.process_at_rank(peer as i32);
        send_receive_into(&[u8::from(mine)][..], &other, &mut theirs[..], &other);
        mine && theirs[0] == 1
    }

    /// The lower rank of the pair listens, the higher connects.
    fn try_connect(&self, peer: usize) -> Result<TcpStream, String> {
        let deadline = Instant::now() + CONNECT_WAIT;
        let me = self.rail.rank;
        let theirs = self.peers[peer]
            .clone()
            .map_err(|_| "the peer has no address".to_string())?;
        let ip = self.end.address.clone()?;
        let made = match (&self.listener, me < peer) {
            (Some(l), true) => l.accept(self.token, peer as u64, deadline),
            (None, true) => return Err("not listening".into()),
            (_, false) => link::connect(
                ip,
                &self.end.netdev,
                theirs,
                self.token,
                me as u64,
                deadline,
            ),
        };
        made.map_err(|e| match me < peer {
            true => format!(
                "no connection from {} within {} s",
                theirs.ip(),
                CONNECT_WAIT.as_secs()
            ),
            false => format!(
                "connecting from {ip} to {theirs}: {}",
                crate::cli::io_reason(&e)
            ),
        })
    }
}

/// "+ADDR" or "-why", as `open` sends it.
fn parse_peer(text: &str) -> Result<SocketAddrV4, String> {
    match text.split_at_checked(1) {
        Some(("+", addr)) => addr
            .parse()
            .map_err(|_| format!("unreadable address {addr}")),
        Some(("-", why)) => Err(why.to_string()),
        _ => Err("no answer".into()),
    }
}

impl PairMeasure for RailPair<'_> {
    fn describe(&self) -> String {
        format!(
            "TCP over each node's {} (rail {}), both directions at once",
            self.end.netdev,
            self.end.rail + 1
        )
    }

    fn scope(&self) -> String {
        format!(
            "all-pairs on rail {} ({})",
            self.end.rail + 1,
            self.end.netdev
        )
    }

    fn measure(
        &mut self,
        peer: usize,
        bytes: usize,
        watchdog: &Watchdog,
    ) -> anyhow::Result<PairSample> {
        watchdog.fault_point(bytes as u64);
        if !self.connect(peer, watchdog) {
            return Ok(PairSample::BYE);
        }
        let Some((_, stream)) = self.open.as_mut() else {
            return Ok(PairSample::BYE);
        };
        let (send, recv) = (&self.send[..bytes], &mut self.recv[..bytes]);
        let rail = self.end.rail + 1;
        let what = |e: std::io::Error| {
            anyhow::anyhow!(
                "rail {rail} pair with rank {peer}: {}",
                crate::cli::io_reason(&e)
            )
        };
        for _ in 0..self.loops.warmup_iters {
            watchdog.enter_call();
            link::exchange(stream, send, recv).map_err(what)?;
        }
        let cpu_wait = CpuWait::start(Root::new("/"));
        for t in self.per_iteration.iter_mut() {
            watchdog.enter_call();
            let started = Instant::now();
            link::exchange(stream, send, recv).map_err(what)?;
            *t = started.elapsed().as_secs_f64();
        }
        let total = self.per_iteration.iter().sum();
        let cpu_wait = cpu_wait.stop();
        let wrong = match self.loops.check {
            false => None,
            true => {
                recv.fill(0xFF);
                watchdog.enter_call();
                link::exchange(stream, send, recv).map_err(what)?;
                Some(wrong_bytes(recv, peer))
            }
        };
        Ok(PairSample::of_loop(
            &mut self.per_iteration,
            total,
            cpu_wait,
            wrong,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_an_address_or_why_it_has_none() {
        assert_eq!(
            parse_peer("+198.18.1.2:4000"),
            Ok("198.18.1.2:4000".parse().unwrap())
        );
        assert_eq!(parse_peer("-no eth2"), Err("no eth2".to_string()));
        assert!(parse_peer("").is_err() && parse_peer("+x").is_err());
    }
}
