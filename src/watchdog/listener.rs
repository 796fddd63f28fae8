//! Rank 0's side: one thread, one poll loop over non-blocking sockets, so that no
//! connection can hold it. A connection is a stranger until its first line is a
//! Hello with this job's token; a stranger is dropped when it sends anything
//! else, more than one line's bytes, or nothing within `HELLO_BOUND`, and when
//! strangers pass `MAX_STRANGERS` the oldest of the address holding the most
//! goes first. Peers that proved themselves are heard whenever they send,
//! whatever strangers do: an epoll set names the ones with something to read,
//! so a tick costs one call plus one read per peer that spoke, not one read per
//! rank (16,384 ranks would be 820,000 reads a second at one per 20 ms).

use super::protocol::{LineBuffer, Message, Token};
use super::state::{LocalClock, PauseWatch, State, Where, PAUSE_BOUND};
use super::verdict::{own_pause, verdict, Answer};
use super::{end_job, ANSWER_BOUND};
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_millis(20);
/// How long a new connection has to show the token.
const HELLO_BOUND: Duration = Duration::from_secs(2);
/// Connections not yet proved, all strangers together.
pub(super) const MAX_STRANGERS: usize = 64;
/// Connections accepted per listener per tick: a flood costs a bounded time each tick.
pub(super) const ACCEPT_BUDGET: usize = 256;

struct Stranger {
    stream: TcpStream,
    from: IpAddr,
    since: Instant,
    lines: LineBuffer,
}

struct Peer {
    stream: TcpStream,
    lines: LineBuffer,
}

/// A rank's connection, as rank 0 knows it.
enum RankConnection {
    /// Never proved itself.
    Never,
    Open(Peer),
    /// Its connection closed (or broke the protocol).
    Closed,
}

/// What a peer's connection brought this tick.
enum Heard {
    Nothing,
    At {
        stuck: bool,
        at: Where,
    },
    Gone,
    /// The peer printed the verdict itself and ends the job.
    Ended,
}

/// How the watch ended.
#[derive(Debug)]
enum Ending {
    /// Rank 0's verdict, to print.
    Verdict(String),
    /// A peer printed the verdict and ends the job.
    ByPeer,
}

/// What rank 0's watchdog needs to judge.
pub(super) struct Judge {
    pub program: String,
    pub timeout_s: u64,
    pub hosts: Vec<String>,
}

pub(super) struct Listener {
    listeners: Vec<TcpListener>,
    token: Token,
    strangers: Vec<Stranger>,
    /// By rank; rank 0 is this process.
    peers: Vec<RankConnection>,
    /// The open peers' sockets, each under its rank (a closed socket leaves it).
    ready: Epoll,
    /// What one wait returns, at most.
    events: Vec<EpollEvent>,
}

/// Peers heard per wait at most; the rest are heard at the next (level-triggered).
const EVENTS_PER_WAIT: usize = 1024;

impl Listener {
    pub fn new(
        listeners: Vec<TcpListener>,
        token: Token,
        nranks: usize,
    ) -> std::io::Result<Listener> {
        for l in &listeners {
            let _ = l.set_nonblocking(true);
        }
        Ok(Listener {
            listeners,
            token,
            strangers: Vec::new(),
            peers: (0..nranks).map(|_| RankConnection::Never).collect(),
            ready: Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?,
            events: vec![EpollEvent::empty(); EVENTS_PER_WAIT.min(nranks.max(1))],
        })
    }

    /// The ranks whose sockets have something to read (or closed), waiting up to
    /// `TICK` for one.
    fn spoke(&mut self) -> Vec<usize> {
        let tick = TICK.as_millis() as u16;
        match self.ready.wait(&mut self.events, tick) {
            Ok(n) => self.events[..n].iter().map(|e| e.data() as usize).collect(),
            // A stopped and resumed process's epoll_wait fails with EINTR: wait again at
            // once, so that what the peers said meanwhile (a verdict: end silently) is
            // heard before this rank's main thread, resumed too, writes another row.
            Err(Errno::EINTR) => Vec::new(),
            Err(_) => {
                std::thread::sleep(TICK);
                Vec::new()
            }
        }
    }

    /// Watches until the job must end, prints rank 0's verdict when it is this
    /// rank's to give, and ends the job.
    pub fn run(mut self, state: &State, judge: &Judge) -> ! {
        if let Ending::Verdict(line) = self.watch(state, judge) {
            eprintln!("{line}");
        }
        for rank in 1..self.peers.len() {
            self.send(rank, &Message::Abort);
        }
        end_job()
    }

    /// Watches this rank and hears the peers until a call lasts -T somewhere,
    /// then asks every rank where it is and gives the verdict. A peer that
    /// already printed one (`Ended`: this rank was silent) ends the job alone:
    /// no second verdict, and it is not blamed as gone.
    fn watch(&mut self, state: &State, judge: &Judge) -> Ending {
        let timeout = Duration::from_secs(judge.timeout_s);
        let mut clock = LocalClock::new();
        let mut pauses = PauseWatch::new(PAUSE_BOUND);
        loop {
            // The newly proved too: what they sent with Hello is read already.
            let mut spoke = self.screen();
            spoke.extend(self.spoke());
            let heard: Vec<Heard> = spoke.into_iter().map(|r| self.hear(r)).collect();
            if heard.iter().any(|h| matches!(h, Heard::Ended)) {
                return Ending::ByPeer;
            }
            if let Some(pause) = pauses.tick() {
                clock.discount(pause);
            }
            let peer_stuck = heard
                .iter()
                .any(|h| matches!(h, Heard::At { stuck: true, .. }));
            if peer_stuck || clock.stuck(state, timeout) {
                break;
            }
        }
        let Some(answers) = self.ask(state) else {
            return Ending::ByPeer;
        };
        // Its own recent pause, when long beside -T, may be the cause of what it saw: say so.
        let note = pauses
            .recent(timeout / 2, timeout + 2 * ANSWER_BOUND)
            .map_or(String::new(), |(length, since)| {
                own_pause(&judge.hosts[0], length, since)
            });
        Ending::Verdict(verdict(
            &judge.program,
            judge.timeout_s,
            ANSWER_BOUND.as_secs(),
            &judge.hosts,
            &answers,
            &note,
        ))
    }

    /// Every rank's answer: a Query to each peer, and what comes back within
    /// `ANSWER_BOUND`; None when a peer printed the verdict meanwhile.
    fn ask(&mut self, state: &State) -> Option<Vec<Answer>> {
        let mut answers = vec![Answer::Unreached; self.peers.len()];
        answers[0] = Answer::At(state.snapshot());
        let deadline = Instant::now() + ANSWER_BOUND;
        let mut asked = vec![false; self.peers.len()];
        loop {
            // A peer that proves itself late is asked too.
            self.screen();
            for rank in 1..self.peers.len() {
                match self.peers[rank] {
                    RankConnection::Open(_) if !asked[rank] => {
                        asked[rank] = true;
                        answers[rank] = Answer::Silent;
                        self.send(rank, &Message::Query);
                    }
                    RankConnection::Closed => answers[rank] = Answer::Gone,
                    _ => {}
                }
                match self.hear(rank) {
                    Heard::At { at, .. } if asked[rank] => answers[rank] = Answer::At(at),
                    Heard::Gone => answers[rank] = Answer::Gone,
                    Heard::Ended => return None,
                    _ => {}
                }
            }
            let waiting = answers.contains(&Answer::Silent);
            if !waiting || Instant::now() >= deadline {
                return Some(answers);
            }
            std::thread::sleep(TICK);
        }
    }

    fn send(&mut self, rank: usize, message: &Message) {
        if let RankConnection::Open(p) = &mut self.peers[rank] {
            // Non-blocking: a stopped peer's full buffer never holds rank 0.
            let _ = p.stream.write_all(message.encode(&self.token).as_bytes());
        }
    }

    /// The newest of what peer `rank` sent (its connection dropped when gone or unruly).
    fn hear(&mut self, rank: usize) -> Heard {
        let RankConnection::Open(p) = &mut self.peers[rank] else {
            return Heard::Nothing;
        };
        let mut heard = Heard::Nothing;
        let open = read_available(&mut p.stream, &mut p.lines);
        while let Some(line) = p.lines.next_line() {
            match Message::decode(&line, &self.token) {
                // Whatever came before or after, the job is ending without us.
                Ok(Message::Ended) => return Heard::Ended,
                Ok(Message::Stuck(at)) => heard = Heard::At { stuck: true, at },
                Ok(Message::State(at)) => {
                    let stuck = matches!(heard, Heard::At { stuck: true, .. });
                    heard = Heard::At { stuck, at }
                }
                _ => {} // nothing else is a peer's to send
            }
        }
        if !open {
            self.peers[rank] = RankConnection::Closed;
            // A claim it made before it left still stands.
            if !matches!(heard, Heard::At { stuck: true, .. }) {
                return Heard::Gone;
            }
        }
        heard
    }

    /// Accepts new connections, and settles the strangers: proved, dropped, or
    /// waiting. The ranks that proved themselves now.
    fn screen(&mut self) -> Vec<usize> {
        for l in &self.listeners {
            for _ in 0..ACCEPT_BUDGET {
                let Ok((stream, from)) = l.accept() else {
                    break;
                };
                if stream.set_nonblocking(true).is_ok() {
                    self.strangers.push(Stranger {
                        stream,
                        from: from.ip(),
                        since: Instant::now(),
                        lines: LineBuffer::default(),
                    });
                }
            }
        }
        let nranks = self.peers.len();
        let mut proved = Vec::new();
        self.strangers.retain_mut(|s| {
            let open = read_available(&mut s.stream, &mut s.lines);
            match s
                .lines
                .next_line()
                .map(|l| Message::decode(&l, &self.token))
            {
                Some(Ok(Message::Hello { rank })) if (1..nranks).contains(&rank) => {
                    if let Ok(stream) = s.stream.try_clone() {
                        proved.push((rank, stream, std::mem::take(&mut s.lines)));
                    }
                    false
                }
                Some(_) => false,
                None => open && s.since.elapsed() < HELLO_BOUND,
            }
        });
        // Read before evicting: a burst of ranks connecting at once (each sends
        // Hello at once) proves itself in the tick it arrives.
        while self.strangers.len() > MAX_STRANGERS {
            let oldest = oldest_of_the_busiest(&self.strangers);
            self.strangers.remove(oldest);
        }
        let mut ranks = Vec::with_capacity(proved.len());
        for (rank, stream, lines) in proved {
            let mut peer = Peer { stream, lines };
            let _ = peer
                .stream
                .write_all(Message::Welcome.encode(&self.token).as_bytes());
            let heard = EpollEvent::new(EpollFlags::EPOLLIN, rank as u64);
            if self.ready.add(&peer.stream, heard).is_ok() {
                // A reconnecting peer replaces its old connection (closing it
                // takes the old one out of the set).
                self.peers[rank] = RankConnection::Open(peer);
                ranks.push(rank);
            }
        }
        ranks
    }
}

/// Reads what the socket holds now into `lines`; false once it is closed, broken
/// or sends more than a line's bytes.
fn read_available(stream: &mut TcpStream, lines: &mut LineBuffer) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => {
                if lines.push(&buf[..n]).is_err() {
                    return false;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// The stranger to drop first: the oldest of the address holding the most
/// connections, so that a flood from one host evicts its own.
fn oldest_of_the_busiest(strangers: &[Stranger]) -> usize {
    let mut count: HashMap<IpAddr, usize> = HashMap::new();
    for s in strangers {
        *count.entry(s.from).or_default() += 1;
    }
    let busiest = count.iter().max_by_key(|(_, n)| **n).map(|(ip, _)| *ip);
    strangers
        .iter()
        .position(|s| Some(s.from) == busiest)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    fn judge() -> Judge {
        Judge {
            program: "all_reduce_perf".into(),
            // Rank 0's own call never lasts this long here: only the peers speak.
            timeout_s: 600,
            hosts: (0..3).map(|r| format!("node{r}")).collect(),
        }
    }

    fn listener(token: &Token) -> (Listener, std::net::SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        (Listener::new(vec![l], token.clone(), 3).unwrap(), addr)
    }

    fn at(calls: u64) -> Where {
        Where {
            calls,
            in_call: true,
            label: "AllReduce float sum 8 B".into(),
        }
    }

    /// A peer that proves itself, sends `lines` and, unless it closes, answers
    /// every Query with `at` until rank 0 aborts.
    fn peer(
        addr: std::net::SocketAddr,
        token: &Token,
        rank: usize,
        lines: Vec<Message>,
        close: bool,
    ) {
        let token = token.clone();
        let mut stream = TcpStream::connect(addr).unwrap();
        std::thread::spawn(move || {
            let mut out: String = Message::Hello { rank }.encode(&token);
            out.extend(lines.iter().map(|m| m.encode(&token)));
            stream.write_all(out.as_bytes()).unwrap();
            if close {
                return;
            }
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                match Message::decode(line.trim_end().as_bytes(), &token) {
                    Ok(Message::Query) => {
                        let state = Message::State(at(41)).encode(&token);
                        let _ = stream.write_all(state.as_bytes());
                    }
                    Ok(Message::Abort) => return,
                    _ => {}
                }
                line.clear();
            }
        });
    }

    #[test]
    fn a_peer_that_gave_the_verdict_is_neither_judged_again_nor_blamed() {
        let token = Token::generate().unwrap();
        let (mut rank0, addr) = listener(&token);
        peer(addr, &token, 2, Vec::new(), false);
        // Rank 1 told rank 0 it was stuck, printed the verdict itself and left.
        peer(
            addr,
            &token,
            1,
            vec![Message::Stuck(at(42)), Message::Ended],
            true,
        );
        let ending = rank0.watch(&State::default(), &judge());
        assert!(matches!(ending, Ending::ByPeer), "{ending:?}");
    }

    #[test]
    fn a_peer_that_left_without_a_verdict_is_gone() {
        let token = Token::generate().unwrap();
        let (mut rank0, addr) = listener(&token);
        peer(addr, &token, 2, Vec::new(), false);
        peer(addr, &token, 1, vec![Message::Stuck(at(42))], true);
        let Ending::Verdict(v) = rank0.watch(&State::default(), &judge()) else {
            panic!("rank 0 judges")
        };
        assert!(v.contains("call 41 (AllReduce float sum 8 B)"), "{v}");
        assert!(v.contains("1 (on node1: gone: its process ended)"), "{v}");
        assert!(
            v.contains("ranks between calls: 0 (on node0, after call 0)"),
            "{v}"
        );
        assert!(!v.contains("note:"), "rank 0 did not pause: {v}");
    }
}
