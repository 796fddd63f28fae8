//! `-T`: a hang becomes an error that names the call, the size and the ranks that
//! had not arrived.
//!
//! The main thread only bumps an atomic counter before each call (nothing else
//! in the timed loop). A watchdog thread per rank notices when its rank has sat in
//! one call for the timeout. Ranks talk over a TCP side channel to rank 0, not
//! over MPI: MPI is what may be stuck, and a rank that never arrived may be
//! outside MPI altogether. Rank 0 then asks every rank where it is, prints one
//! line, and ends the job.

use crate::job::{ExitStatus, Group};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const POLL: Duration = Duration::from_millis(100);

#[derive(Default)]
struct State {
    /// Calls entered so far (incremented before each call).
    calls: AtomicU64,
    in_call: AtomicBool,
    /// What the current calls are: "AllReduce float sum out-of-place 1048576 B".
    label: Mutex<String>,
}

impl State {
    fn snapshot(&self, rank: usize, host: &str) -> RankState {
        RankState {
            rank,
            host: host.to_string(),
            calls: self.calls.load(Ordering::Relaxed),
            in_call: self.in_call.load(Ordering::Relaxed),
            label: self.label.lock().map(|l| l.clone()).unwrap_or_default(),
        }
    }
}

/// Where one rank is, as reported over the side channel.
#[derive(Clone, Debug, PartialEq)]
pub struct RankState {
    pub rank: usize,
    pub host: String,
    pub calls: u64,
    pub in_call: bool,
    pub label: String,
}

impl RankState {
    fn encode(&self) -> String {
        format!(
            "STATE\t{}\t{}\t{}\t{}\t{}\n",
            self.rank, self.host, self.calls, self.in_call as u8, self.label
        )
    }

    fn decode(line: &str) -> Option<RankState> {
        let mut f = line.trim_end().split('\t');
        (f.next()? == "STATE").then_some(())?;
        Some(RankState {
            rank: f.next()?.parse().ok()?,
            host: f.next()?.to_string(),
            calls: f.next()?.parse().ok()?,
            in_call: f.next()? == "1",
            label: f.next().unwrap_or("").to_string(),
        })
    }
}

/// The one-line verdict from every rank's state (None: the rank did not answer).
pub fn verdict(program: &str, timeout_s: u64, states: &[Option<RankState>]) -> String {
    let stuck_at = states
        .iter()
        .flatten()
        .filter(|s| s.in_call)
        .map(|s| s.calls)
        .max()
        .unwrap_or(0);
    let label = states
        .iter()
        .flatten()
        .find(|s| s.in_call && s.calls == stuck_at)
        .map(|s| s.label.clone())
        .unwrap_or_default();
    let mut waiting = Vec::new();
    let mut missing = Vec::new();
    for (rank, state) in states.iter().enumerate() {
        match state {
            Some(s) if s.in_call && s.calls == stuck_at => waiting.push(rank.to_string()),
            Some(s) => missing.push(format!(
                "{rank} (on {}, {} call {})",
                s.host,
                if s.in_call {
                    "in an earlier call,"
                } else {
                    "outside any call after"
                },
                s.calls
            )),
            None => missing.push(format!("{rank} (no answer: process gone or unreachable)")),
        }
    }
    format!(
        "{program}: -T/--timeout {timeout_s}: call {stuck_at} ({label}) did not finish within {timeout_s} s; \
         ranks waiting in it: {}; ranks that had not arrived: {}; aborting the job",
        if waiting.is_empty() { "none".into() } else { waiting.join(",") },
        if missing.is_empty() { "none (all arrived: the library itself is stuck)".into() } else { missing.join(", ") },
    )
}

pub struct Watchdog {
    state: Arc<State>,
}

impl Watchdog {
    /// Sets up the side channel (a collective step: every rank calls it) and starts
    /// the thread. `timeout_s` 0 disables it.
    pub fn start(group: &dyn Group, program: &str, timeout_s: u64) -> anyhow::Result<Watchdog> {
        let state = Arc::new(State::default());
        if timeout_s == 0 {
            return Ok(Watchdog { state });
        }
        let (rank, nranks) = (group.rank(), group.size());
        let listener = if rank == 0 && nranks > 1 {
            Some(TcpListener::bind("0.0.0.0:0")?)
        } else {
            None
        };
        let address = listener
            .as_ref()
            .map(|l| {
                format!(
                    "{}:{}",
                    group.host(0),
                    l.local_addr().map(|a| a.port()).unwrap_or(0)
                )
            })
            .unwrap_or_default();
        let rank0_address =
            String::from_utf8_lossy(&group.all_gather_bytes(address.as_bytes())[0]).into_owned();
        let timeout = Duration::from_secs(timeout_s);
        let host = group.host(rank).to_string();
        let program = program.to_string();
        let thread_state = state.clone();
        thread::Builder::new()
            .name("fabricbench-watchdog".into())
            .spawn(move || {
                if rank == 0 {
                    rank0_loop(
                        &thread_state,
                        listener,
                        nranks,
                        &host,
                        &program,
                        timeout_s,
                        timeout,
                    )
                } else {
                    peer_loop(&thread_state, &rank0_address, rank, &host, timeout)
                }
            })?;
        Ok(Watchdog { state })
    }

    /// Marks the start of a series of watched calls.
    pub fn begin(&self, label: String) {
        if let Ok(mut l) = self.state.label.lock() {
            *l = label;
        }
        self.state.in_call.store(true, Ordering::Relaxed);
    }

    /// Before each call: one relaxed atomic add.
    #[inline]
    pub fn enter_call(&self) {
        self.state.calls.fetch_add(1, Ordering::Relaxed);
    }

    pub fn end(&self) {
        self.state.in_call.store(false, Ordering::Relaxed);
    }
}

/// Tracks this rank's own progress; true once one call has lasted `timeout`.
struct LocalClock {
    last_calls: u64,
    since: Instant,
}

impl LocalClock {
    fn new() -> Self {
        LocalClock {
            last_calls: 0,
            since: Instant::now(),
        }
    }
    fn stuck(&mut self, state: &State, timeout: Duration) -> bool {
        let calls = state.calls.load(Ordering::Relaxed);
        if calls != self.last_calls || !state.in_call.load(Ordering::Relaxed) {
            self.last_calls = calls;
            self.since = Instant::now();
            return false;
        }
        self.since.elapsed() >= timeout
    }
}

fn peer_loop(state: &State, rank0: &str, rank: usize, host: &str, timeout: Duration) {
    let mut clock = LocalClock::new();
    let mut stream = connect(rank0);
    let mut reader = stream
        .as_ref()
        .and_then(|s| s.try_clone().ok())
        .map(BufReader::new);
    let mut told = false;
    loop {
        if clock.stuck(state, timeout) && !told {
            told = true;
            match stream.as_mut() {
                Some(s) => {
                    let _ = s.write_all(b"STUCK\n");
                }
                None => {
                    // No side channel: say what this rank knows and end the job from here.
                    let me = state.snapshot(rank, host);
                    eprintln!(
                        "rank {rank}: -T/--timeout: call {} ({}) did not finish within {} s; aborting",
                        me.calls,
                        me.label,
                        timeout.as_secs()
                    );
                    std::process::exit(ExitStatus::Timeout.code().into());
                }
            }
        }
        let Some(r) = reader.as_mut() else {
            thread::sleep(POLL);
            continue;
        };
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) => reader = None, // rank 0 is gone; mpirun ends the job.
            Ok(_) if line.starts_with("QUERY") => {
                if let Some(s) = stream.as_mut() {
                    let _ = s.write_all(state.snapshot(rank, host).encode().as_bytes());
                }
            }
            Ok(_) if line.starts_with("ABORT") => {
                std::process::exit(ExitStatus::Timeout.code().into())
            }
            _ => {} // read timeout: poll again
        }
    }
}

fn connect(address: &str) -> Option<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        for addr in address.to_socket_addrs().into_iter().flatten() {
            if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                let _ = s.set_read_timeout(Some(POLL));
                let _ = s.set_nodelay(true);
                return Some(s);
            }
        }
        thread::sleep(POLL);
    }
    None
}

struct Peer {
    rank: usize,
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

fn rank0_loop(
    state: &State,
    listener: Option<TcpListener>,
    nranks: usize,
    host: &str,
    program: &str,
    timeout_s: u64,
    timeout: Duration,
) {
    let mut clock = LocalClock::new();
    let mut peers: Vec<Peer> = Vec::new();
    if let Some(l) = &listener {
        let _ = l.set_nonblocking(true);
    }
    loop {
        if let Some(l) = &listener {
            while let Ok((stream, _)) = l.accept() {
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_read_timeout(Some(Duration::from_millis(10)));
                if let Ok(clone) = stream.try_clone() {
                    peers.push(Peer {
                        rank: usize::MAX,
                        stream,
                        reader: BufReader::new(clone),
                    });
                }
            }
        }
        let mut triggered = clock.stuck(state, timeout);
        for p in peers.iter_mut() {
            let mut line = String::new();
            if let Ok(n) = p.reader.read_line(&mut line) {
                if n > 0 && line.starts_with("STUCK") {
                    triggered = true;
                }
            }
        }
        if triggered {
            let mut states: Vec<Option<RankState>> = vec![None; nranks];
            states[0] = Some(state.snapshot(0, host));
            for p in peers.iter_mut() {
                let _ = p.stream.write_all(b"QUERY\n");
            }
            let deadline = Instant::now() + Duration::from_secs(3);
            for p in peers.iter_mut() {
                let _ = p.stream.set_read_timeout(Some(Duration::from_millis(200)));
                while Instant::now() < deadline {
                    let mut line = String::new();
                    match p.reader.read_line(&mut line) {
                        Ok(0) => break,
                        Ok(_) => {
                            if let Some(s) = RankState::decode(&line) {
                                p.rank = s.rank;
                                let rank = s.rank;
                                if rank < nranks {
                                    states[rank] = Some(s);
                                }
                                break;
                            }
                        }
                        Err(_) => {}
                    }
                }
            }
            eprintln!("{}", verdict(program, timeout_s, &states));
            for p in peers.iter_mut() {
                let _ = p.stream.write_all(b"ABORT\n");
            }
            thread::sleep(Duration::from_millis(300));
            std::process::exit(ExitStatus::Timeout.code().into());
        }
        thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(rank: usize, calls: u64, in_call: bool) -> Option<RankState> {
        Some(RankState {
            rank,
            host: "node1".into(),
            calls,
            in_call,
            label: "AllReduce float sum 1024 B".into(),
        })
    }

    #[test]
    fn state_round_trips() {
        let s = state(3, 17, true).unwrap();
        assert_eq!(RankState::decode(&s.encode()), Some(s));
        assert_eq!(RankState::decode("STATE\tx"), None);
        assert_eq!(RankState::decode("garbage"), None);
    }

    #[test]
    fn verdict_names_the_missing_ranks() {
        let states = [
            state(0, 9, true),
            state(1, 9, true),
            state(2, 8, false),
            None,
        ];
        let v = verdict("all_reduce_perf", 5, &states);
        assert!(
            v.contains("call 9 (AllReduce float sum 1024 B) did not finish within 5 s"),
            "{v}"
        );
        assert!(v.contains("ranks waiting in it: 0,1;"), "{v}");
        assert!(
            v.contains("2 (on node1, outside any call after call 8)"),
            "{v}"
        );
        assert!(v.contains("3 (no answer"), "{v}");
        assert!(!v.contains('\n'));
    }
}
