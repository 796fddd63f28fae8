//! `-T`: a hang becomes an error that names the call, the size and the rank at
//! fault, and no job outlives -T by more than a few seconds, whichever rank fails.
//!
//! The main thread only bumps an atomic counter before each call (nothing else
//! in the timed loop). A watchdog thread per rank notices when its rank has sat in
//! one call for the timeout. Ranks talk over a TCP side channel, not over MPI:
//! MPI is what may be stuck, and a rank that never arrived may be outside MPI
//! altogether. Each rank reports to its parent in a tree (`tree`: a host's ranks
//! to its first rank, hosts' first ranks to rank 0, at most `FANOUT` children of
//! each kind), so no process holds more than a few dozen connections at any N.
//! Rank 0 then asks every rank where it is, through the tree, prints one line,
//! and ends the job; a rank that cannot hear its parent ends it itself.
//!
//! The channel: each parent listens on the address its children use (loopback
//! when they are on its host), and a connection counts only once it shows the
//! job's secret, made on rank 0 and shared over MPI at start (`protocol`).
//!
//! - `state`: what the main thread publishes, and the clock of a rank's own call;
//! - `protocol`: the messages, the token, and lines cut from a connection;
//! - `tree`: who reports to whom;
//! - `hub`: a parent's side of its children's connections (strangers, proofs);
//! - `root`: rank 0's loop (the question, the verdict);
//! - `peer`: every other rank's side, relaying its children's, with its fallback
//!   when its parent is silent;
//! - `verdict`: the lines printed; `hooks`: the test hooks.

mod hooks;
mod hub;
mod peer;
mod protocol;
mod root;
mod state;
mod tree;
mod verdict;

pub use crate::faults::FAULT_SIGNAL_ENV;
pub use hooks::{ADDRESS_FILE_ENV, FANOUT_ENV};

use crate::faults::{self, SignalFault};
use crate::job::setup::{self, Step};
use crate::job::{agree, ExitStatus, Failure, Group};
use anyhow::{anyhow, bail, ensure, Context};
use hub::Hub;
use protocol::Token;
use root::{Judge, Root};
pub use state::CallCount;
use state::State;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tree::Tree;

/// How long rank 0 waits for the peers' answers before it judges without them.
const ANSWER_BOUND: Duration = Duration::from_secs(3);

pub struct Watchdog {
    state: Arc<State>,
    rank: usize,
    fault: Option<SignalFault>,
    fired: AtomicBool,
}

/// What each rank's watchdog thread does.
enum Role {
    Rank0(Root, Judge),
    Peer(peer::Peer),
}

impl Watchdog {
    /// Sets up the side channel (a collective step: every rank calls it) and starts
    /// the thread. `timeout_s` 0 disables it.
    pub fn start(group: &dyn Group, program: &str, timeout_s: u64) -> Result<Watchdog, Failure> {
        let (rank, nranks) = (group.rank(), group.size());
        let watchdog = Watchdog {
            state: Arc::new(State::default()),
            rank,
            fault: faults::injected().signal,
            fired: AtomicBool::new(false),
        };
        if timeout_s == 0 {
            return Ok(watchdog);
        }
        let hosts: Vec<String> = (0..nranks).map(|r| group.host(r).to_string()).collect();
        let opened = hooks::fanout().map(|fanout| {
            let tree = Arc::new(Tree::new(&hosts, fanout));
            let channel = open_for_children(rank, &hosts, &tree);
            (tree, channel)
        });
        setup::step(Step::Exchange("exchanging the watchdog's addresses"));
        let card = match &opened {
            Ok((_, Ok(Some(channel)))) => card(channel),
            Ok((_, Ok(None))) => String::new(),
            Ok((_, Err(e))) | Err(e) => format!("error\t{e:#}"),
        };
        // Every rank reads rank 0's card and its parent's: a failure there stops
        // it, and every rank agrees below.
        let cards = group.all_gather_bytes(card.as_bytes());
        let role = opened.and_then(|(tree, channel)| {
            let judge = Judge {
                program: program.to_string(),
                timeout_s,
                hosts,
                tree,
            };
            role(rank, judge, channel?, &cards)
        });
        let role = agree(
            group,
            program,
            ExitStatus::Failed,
            role.context("-T/--timeout: the watchdog could not start"),
        )?;
        let state = watchdog.state.clone();
        std::thread::Builder::new()
            .name("fabricbench-watchdog".into())
            .spawn(move || match role {
                Role::Rank0(root, judge) => root.run(&state, &judge),
                Role::Peer(peer) => peer.run(&state),
            })
            .map_err(anyhow::Error::from)?;
        // The watchdog watches from here; the setup's own timer stops.
        setup::done();
        Ok(watchdog)
    }

    /// Marks the start of a series of watched calls.
    pub fn begin(&self, label: String) {
        if let Ok(mut l) = self.state.label.lock() {
            *l = label;
        }
        self.state.in_call.store(true, Ordering::Relaxed);
    }

    /// Before each call (`CallCount::bump`).
    #[inline]
    pub fn enter_call(&self) {
        self.state.calls.bump();
    }

    /// The count `enter_call` bumps, for a loop that bumps it itself (a backend's
    /// bound call).
    pub fn calls(&self) -> &CallCount {
        &self.state.calls
    }

    pub fn end(&self) {
        self.state.in_call.store(false, Ordering::Relaxed);
    }

    /// Before the timed calls of each size: the signal hook (`FAULT_SIGNAL_ENV`)
    /// fires once, at the first size it names or above.
    pub fn fault_point(&self, size: u64) {
        let due = self.fault.filter(|f| f.rank == self.rank && size >= f.size);
        if let Some(fault) = due {
            if !self.fired.swap(true, Ordering::Relaxed) {
                hooks::send_inside(fault, self.state.clone());
            }
        }
    }
}

/// Rank `rank`'s listeners for its children (on loopback, or the addresses
/// that route to their hosts), when it has any; rank 0 always opens, as it
/// makes the job's token.
fn open_for_children(
    rank: usize,
    hosts: &[String],
    tree: &Tree,
) -> anyhow::Result<Option<Channel>> {
    let children = tree.children(rank);
    if rank != 0 && children.is_empty() {
        return Ok(None);
    }
    setup::step(Step::Alone(
        "finding the watchdog's addresses (resolving the hosts)",
    ));
    raise_open_files(children.len())?;
    let token = match rank {
        0 => Some(Token::generate()?),
        _ => None,
    };
    let child_hosts: Vec<&str> = children.iter().map(|&c| hosts[c].as_str()).collect();
    let listeners: Vec<TcpListener> = match child_hosts.is_empty() {
        true => Vec::new(),
        false => listen_addresses(&hosts[rank], &child_hosts)
            .into_iter()
            .map(|ip| TcpListener::bind((ip, 0)))
            .collect::<Result<_, _>>()?,
    };
    let addresses = listeners
        .iter()
        .map(TcpListener::local_addr)
        .collect::<Result<Vec<_>, _>>()?;
    if rank == 0 {
        hooks::publish_addresses(&addresses);
    }
    Ok(Some(Channel {
        listeners,
        addresses,
        token,
    }))
}

/// What this rank's watchdog thread will do, from the cards every rank sent:
/// rank 0's token, and its parent's addresses. `judge` carries what every rank
/// knows of the job.
fn role(
    rank: usize,
    judge: Judge,
    channel: Option<Channel>,
    cards: &[Vec<u8>],
) -> anyhow::Result<Role> {
    let token = read_card(&cards[0])?.0.context("rank 0 sent no token")?;
    let listeners = channel.map_or(Vec::new(), |c| c.listeners);
    let hub = Hub::new(listeners, token.clone(), judge.tree.clone(), rank)?;
    let Some(parent) = judge.tree.parent(rank) else {
        return Ok(Role::Rank0(Root { hub }, judge));
    };
    let parent_addresses = read_card(&cards[parent])
        .with_context(|| format!("rank {parent}, which this rank reports to"))?
        .1;
    Ok(Role::Peer(peer::Peer {
        rank,
        parent,
        parent_addresses,
        depth: judge.tree.ancestors(rank).count(),
        turn: judge.tree.turn(rank),
        token,
        program: judge.program,
        timeout_s: judge.timeout_s,
        hub,
        hosts: judge.hosts,
    }))
}

/// A parent's listeners and their addresses, and rank 0's token.
struct Channel {
    listeners: Vec<TcpListener>,
    addresses: Vec<SocketAddr>,
    token: Option<Token>,
}

/// Descriptors a parent's watchdog may hold beyond one per child: strangers, a
/// tick's accepts, and the MPI library's and the program's own files.
const SPARE_FILES: u64 = (hub::MAX_STRANGERS + hub::ACCEPT_BUDGET + 256) as u64;

/// A parent holds one connection per child (2 x FANOUT at most, unless the
/// hook widens the tree): raises its open-file limit (soft) to the hard limit
/// when that needs more than the soft one allows (1,024 by default), and says
/// what to raise when even the hard limit is too low.
fn raise_open_files(children: usize) -> anyhow::Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(|e| anyhow!(e.desc()))?;
    match open_files_to_set(children, soft, hard)? {
        Some(to) => setrlimit(Resource::RLIMIT_NOFILE, to, hard).map_err(|e| {
            anyhow!(
                "raising the open-file limit from {soft} to {to}: {}",
                e.desc()
            )
        }),
        None => Ok(()),
    }
}

/// The soft open-file limit a parent needs set for `children` (None: the
/// current one is enough), or why no limit allowed can be.
fn open_files_to_set(children: usize, soft: u64, hard: u64) -> anyhow::Result<Option<u64>> {
    use nix::sys::resource::RLIM_INFINITY;
    let needed = children as u64 + SPARE_FILES;
    if soft == RLIM_INFINITY || soft >= needed {
        return Ok(None);
    }
    ensure!(
        hard == RLIM_INFINITY || hard >= needed,
        "the watchdog's {children} children of a rank need {needed} open files (a connection per child), and the hard limit is {hard}: raise it (ulimit -Hn, or LimitNOFILE / nofile in limits.conf), or run without -T"
    );
    Ok(Some(hard))
}

/// What a parent tells every rank at start: "ok", the token (rank 0's; "-"
/// from a relay), its addresses.
fn card(channel: &Channel) -> String {
    let list: Vec<String> = channel
        .addresses
        .iter()
        .map(SocketAddr::to_string)
        .collect();
    let token = channel.token.as_ref().map_or("-", Token::as_str);
    format!("ok\t{token}\t{}", list.join(","))
}

fn read_card(bytes: &[u8]) -> anyhow::Result<(Option<Token>, Vec<SocketAddr>)> {
    let text = String::from_utf8_lossy(bytes);
    let mut fields = text.splitn(3, '\t');
    match (fields.next(), fields.next(), fields.next()) {
        (Some("ok"), Some(token), Some(list)) => {
            let token = match token {
                "-" => None,
                _ => Some(Token::parse(token).context("its token did not arrive whole")?),
            };
            let addresses = list.split(',').filter_map(|a| a.parse().ok()).collect();
            Ok((token, addresses))
        }
        (Some("error"), Some(e), _) => bail!("{e}"),
        _ => bail!("its address did not arrive whole"),
    }
}

/// Where a parent listens for its children on `child_hosts`: loopback when they
/// are all on its host; else, for each other host, the address of this host's
/// interface that routes to it (the address the children see); every interface
/// only when a host's name does not resolve here (the token still guards it).
fn listen_addresses(here: &str, child_hosts: &[&str]) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = Vec::new();
    // Each host once: a node's ranks share its name (8 a node on a GPU rack).
    let others: std::collections::BTreeSet<&str> =
        child_hosts.iter().copied().filter(|h| *h != here).collect();
    for host in others {
        match route_to(host) {
            Some(ip) if !ips.contains(&ip) => ips.push(ip),
            Some(_) => {}
            None => return vec![Ipv4Addr::UNSPECIFIED.into()],
        }
    }
    if ips.is_empty() {
        ips.push(Ipv4Addr::LOCALHOST.into());
    }
    ips
}

/// The local address the kernel would send from to reach `host` (a UDP
/// "connect" sends nothing).
fn route_to(host: &str) -> Option<IpAddr> {
    (host, 9).to_socket_addrs().ok()?.find_map(|to| {
        let any: IpAddr = match to {
            SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
            SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
        };
        let socket = UdpSocket::bind((any, 0)).ok()?;
        socket.connect(to).ok()?;
        Some(socket.local_addr().ok()?.ip()).filter(|ip| !ip.is_unspecified())
    })
}

/// Ends the job once a verdict is printed (status 3).
fn end_job() -> ! {
    crate::job::exit::end_job(ExitStatus::Timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `super::open_files_to_set` with its message as the user reads it.
    fn open_files_to_set(nranks: usize, soft: u64, hard: u64) -> Result<Option<u64>, String> {
        super::open_files_to_set(nranks, soft, hard).map_err(|e| format!("{e:#}"))
    }

    /// `super::read_card` with its message as the user reads it.
    fn read_card(bytes: &[u8]) -> Result<(Option<Token>, Vec<SocketAddr>), String> {
        super::read_card(bytes).map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn one_host_listens_on_loopback_only() {
        assert_eq!(
            listen_addresses("vm", &["vm", "vm"]),
            [IpAddr::from(Ipv4Addr::LOCALHOST)]
        );
        assert!(listen_addresses("vm", &["localhost"])
            .iter()
            .all(IpAddr::is_loopback));
        assert_eq!(
            listen_addresses("vm", &["vm", "no-such-host.invalid"]),
            [IpAddr::from(Ipv4Addr::UNSPECIFIED)]
        );
    }

    #[test]
    fn the_open_file_limit_is_raised_to_the_hard_one_only_when_needed() {
        let needed = 16_384 + SPARE_FILES;
        assert_eq!(open_files_to_set(4, 1024, 4096), Ok(None));
        assert_eq!(open_files_to_set(16_384, 1024, 1 << 20), Ok(Some(1 << 20)));
        assert_eq!(open_files_to_set(16_384, needed, needed), Ok(None));
        let refused = open_files_to_set(16_384, 1024, 4096).unwrap_err();
        assert!(
            refused.starts_with(&format!(
                "the watchdog's 16384 children of a rank need {needed} open files (a connection per child), and the hard limit is 4096: raise it"
            )),
            "{refused}"
        );
    }

    #[test]
    fn the_card_carries_the_token_and_addresses() {
        let token = Token::generate().unwrap();
        let addresses: Vec<SocketAddr> = vec!["127.0.0.1:4000".parse().unwrap()];
        let mut channel = Channel {
            listeners: Vec::new(),
            addresses: addresses.clone(),
            token: Some(token.clone()),
        };
        let (t, a) = read_card(card(&channel).as_bytes()).unwrap();
        assert_eq!((t, a), (Some(token), addresses.clone()));
        channel.token = None;
        assert_eq!(read_card(card(&channel).as_bytes()), Ok((None, addresses)));
        assert_eq!(
            read_card(b"error\tno /dev/urandom"),
            Err("no /dev/urandom".into())
        );
        assert!(read_card(b"ok\tshort\t").is_err());
        assert!(read_card(b"").is_err());
    }
}
