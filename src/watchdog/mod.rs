//! `-T`: a hang becomes an error that names the call, the size and the rank at
//! fault, and no job outlives -T by more than a few seconds, whichever rank fails.
//!
//! The main thread only bumps an atomic counter before each call (nothing else
//! in the timed loop). A watchdog thread per rank notices when its rank has sat in
//! one call for the timeout. Ranks talk over a TCP side channel to rank 0, not
//! over MPI: MPI is what may be stuck, and a rank that never arrived may be
//! outside MPI altogether. Rank 0 then asks every rank where it is, prints one
//! line, and ends the job; a peer that cannot hear rank 0 ends it itself.
//!
//! The channel: rank 0 listens on the address the job uses (loopback when every
//! rank is on its host), and a connection counts only once it shows the job's
//! secret, made on rank 0 and shared over MPI at start (`protocol`).
//!
//! - `state`: what the main thread publishes, and the clock of a rank's own call;
//! - `protocol`: the messages, the token, and lines cut from a connection;
//! - `listener`: rank 0's poll loop (strangers, peers, the question, the verdict);
//! - `peer`: every other rank's side, with its fallback when rank 0 is silent;
//! - `verdict`: the lines printed; `hooks`: the test hooks.

mod hooks;
mod listener;
mod peer;
mod protocol;
mod state;
mod verdict;

pub use crate::faults::FAULT_SIGNAL_ENV;
pub use hooks::ADDRESS_FILE_ENV;

use crate::faults::{self, SignalFault};
use crate::job::setup::{self, Step};
use crate::job::{agree, ExitStatus, Failure, Group};
use anyhow::{anyhow, bail, ensure, Context};
use listener::{Judge, Listener};
use protocol::Token;
pub use state::CallCount;
use state::State;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    Rank0(Listener, Judge),
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
        let opened = match rank {
            0 => {
                setup::step(Step::Alone(
                    "finding the watchdog's addresses (resolving the hosts)",
                ));
                open(&hosts).map(Some)
            }
            _ => Ok(None),
        };
        setup::step(Step::Exchange("exchanging the watchdog's addresses"));
        let card = match &opened {
            Ok(Some(channel)) => card(&channel.token, &channel.addresses),
            Ok(None) => String::new(),
            Err(e) => format!("error\t{e:#}"),
        };
        // Every rank reads rank 0's card: a failure on rank 0 stops all alike.
        let card0 = group.all_gather_bytes(card.as_bytes()).swap_remove(0);
        let role = match opened {
            Ok(Some(Channel {
                listeners, token, ..
            })) => Listener::new(listeners, token, nranks)
                .map(|listener| {
                    let judge = Judge {
                        program: program.to_string(),
                        timeout_s,
                        hosts,
                    };
                    Role::Rank0(listener, judge)
                })
                .map_err(anyhow::Error::from),
            _ => read_card(&card0).map(|(token, rank0)| {
                Role::Peer(peer::Peer {
                    rank,
                    host: hosts[rank].clone(),
                    host0: hosts[0].clone(),
                    rank0,
                    token,
                    program: program.to_string(),
                    timeout_s,
                })
            }),
        };
        let role = agree(
            group,
            program,
            ExitStatus::Failed,
            role.context("-T/--timeout: the watchdog could not start on rank 0"),
        )?;
        let state = watchdog.state.clone();
        std::thread::Builder::new()
            .name("fabricbench-watchdog".into())
            .spawn(move || match role {
                Role::Rank0(listener, judge) => listener.run(&state, &judge),
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

/// Rank 0's listeners, their addresses and the job's token.
struct Channel {
    listeners: Vec<TcpListener>,
    addresses: Vec<SocketAddr>,
    token: Token,
}

fn open(hosts: &[String]) -> anyhow::Result<Channel> {
    raise_open_files(hosts.len())?;
    let token = Token::generate()?;
    let listeners: Vec<TcpListener> = match hosts.len() {
        1 => Vec::new(),
        _ => listen_addresses(hosts)
            .into_iter()
            .map(|ip| TcpListener::bind((ip, 0)))
            .collect::<Result<_, _>>()?,
    };
    let addresses = listeners
        .iter()
        .map(TcpListener::local_addr)
        .collect::<Result<Vec<_>, _>>()?;
    hooks::publish_addresses(&addresses);
    Ok(Channel {
        listeners,
        addresses,
        token,
    })
}

/// Descriptors rank 0's watchdog may hold beyond one per peer: strangers, a
/// tick's accepts, and the MPI library's and the program's own files.
const SPARE_FILES: u64 = (listener::MAX_STRANGERS + listener::ACCEPT_BUDGET + 256) as u64;

/// Rank 0 holds one connection per peer: raises its open-file limit (soft) to
/// the hard limit when the job needs more than the soft one allows (1,024 by
/// default), and says what to raise when even the hard limit is too low.
fn raise_open_files(nranks: usize) -> anyhow::Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(|e| anyhow!(e.desc()))?;
    match open_files_to_set(nranks, soft, hard)? {
        Some(to) => setrlimit(Resource::RLIMIT_NOFILE, to, hard).map_err(|e| {
            anyhow!(
                "raising the open-file limit from {soft} to {to}: {}",
                e.desc()
            )
        }),
        None => Ok(()),
    }
}

/// The soft open-file limit rank 0 needs set for `nranks` ranks (None: the
/// current one is enough), or why no limit allowed can be.
fn open_files_to_set(nranks: usize, soft: u64, hard: u64) -> anyhow::Result<Option<u64>> {
    use nix::sys::resource::RLIM_INFINITY;
    let needed = nranks as u64 + SPARE_FILES;
    if soft == RLIM_INFINITY || soft >= needed {
        return Ok(None);
    }
    ensure!(
        hard == RLIM_INFINITY || hard >= needed,
        "{nranks} ranks need {needed} open files on rank 0 (a connection per rank), and its hard limit is {hard}: raise it (ulimit -Hn, or LimitNOFILE / nofile in limits.conf), or run without -T"
    );
    Ok(Some(hard))
}

/// What rank 0 tells every rank at start: "ok", the token, its addresses.
fn card(token: &Token, addresses: &[SocketAddr]) -> String {
    let list: Vec<String> = addresses.iter().map(SocketAddr::to_string).collect();
    format!("ok\t{}\t{}", token.as_str(), list.join(","))
}

fn read_card(bytes: &[u8]) -> anyhow::Result<(Token, Vec<SocketAddr>)> {
    let text = String::from_utf8_lossy(bytes);
    let mut fields = text.splitn(3, '\t');
    match (fields.next(), fields.next(), fields.next()) {
        (Some("ok"), Some(token), Some(list)) => {
            let token = Token::parse(token).context("its token did not arrive whole")?;
            let addresses = list.split(',').filter_map(|a| a.parse().ok()).collect();
            Ok((token, addresses))
        }
        (Some("error"), Some(e), _) => bail!("{e}"),
        _ => bail!("its address did not arrive whole"),
    }
}

/// Where rank 0 listens: loopback when every rank is on its host; else, for
/// each other host, the address of this host's interface that routes to it (the
/// address the peers see); every interface only when a host's name does not
/// resolve here (the token still guards it).
fn listen_addresses(hosts: &[String]) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = Vec::new();
    // Each host once: a node's ranks share its name (8 a node on a GPU rack).
    let others: std::collections::BTreeSet<&String> =
        hosts.iter().filter(|h| **h != hosts[0]).collect();
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
    fn read_card(bytes: &[u8]) -> Result<(Token, Vec<SocketAddr>), String> {
        super::read_card(bytes).map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn one_host_listens_on_loopback_only() {
        let hosts = vec!["vm".to_string(); 3];
        assert_eq!(
            listen_addresses(&hosts),
            [IpAddr::from(Ipv4Addr::LOCALHOST)]
        );
        let hosts = ["vm".to_string(), "localhost".to_string()];
        assert!(listen_addresses(&hosts).iter().all(IpAddr::is_loopback));
        let unknown = ["vm".to_string(), "no-such-host.invalid".to_string()];
        assert_eq!(
            listen_addresses(&unknown),
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
                "16384 ranks need {needed} open files on rank 0 (a connection per rank), and its hard limit is 4096: raise it"
            )),
            "{refused}"
        );
    }

    #[test]
    fn the_card_carries_the_token_and_addresses() {
        let token = Token::generate().unwrap();
        let addresses: Vec<SocketAddr> = vec!["127.0.0.1:4000".parse().unwrap()];
        let (t, a) = read_card(card(&token, &addresses).as_bytes()).unwrap();
        assert_eq!((t, a), (token, addresses));
        assert_eq!(
            read_card(b"error\tno /dev/urandom"),
            Err("no /dev/urandom".into())
        );
        assert!(read_card(b"ok\tshort\t").is_err());
        assert!(read_card(b"").is_err());
    }
}
