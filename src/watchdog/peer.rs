//! Every rank but 0: its connection to its parent (rank 0, or the rank it
//! reports through, `tree`) and, for a relay, its children's. What the children
//! say goes up whole (each line names its rank); rank 0's Query and Abort go
//! down. A rank whose parent cannot be heard ends the job itself, naming it.

use super::hub::{read_lines, Hub, Link};
use super::protocol::{LineBuffer, Message, Token};
use super::state::{LocalClock, PauseWatch, State, Where, PAUSE_BOUND};
use super::verdict::{parent_lost, ParentLost};
use super::{end_job, ANSWER_BOUND};
use crate::job::ExitStatus;
use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const POLL: Duration = Duration::from_millis(50);
/// How long a rank waits for Welcome before it connects again.
const REGISTER_BOUND: Duration = Duration::from_secs(3);
/// How long rank 0 may stay silent once told: its Query and verdict come within
/// `ANSWER_BOUND` when it is alive.
const RANK0_BOUND: Duration = Duration::from_secs(ANSWER_BOUND.as_secs() + 3);
/// Ranks that all lose their parent give up one after another, by their place
/// among its children: the first verdict ends the job, so one line is printed,
/// not one per rank (unless the launcher takes longer than `STAGGER` to end it).
const STAGGER: Duration = Duration::from_secs(1);
const STAGGERED_RANKS: usize = 4;
/// What each level below rank 0's children adds to the wait for a silent
/// parent: a relay that lost its own parent ends the job (and tells its
/// children) first, and rank 0, alive, names a stopped relay itself within
/// `ANSWER_BOUND`, so neither the relay nor its children speak out of turn.
const LEVEL: Duration =
    Duration::from_secs(STAGGER.as_secs() * STAGGERED_RANKS as u64 + ANSWER_BOUND.as_secs());
/// Bytes a rank holds for a parent slow to read, at most: a relay's answers for
/// every rank behind it (100 B each).
const MAX_OUTBOX: usize = 16 << 20;

pub(super) struct Peer {
    pub rank: usize,
    /// The host of every rank (for the line naming a rank behind this one).
    pub hosts: Vec<String>,
    pub parent: usize,
    pub parent_addresses: Vec<SocketAddr>,
    /// Levels from rank 0 (1: rank 0 is its parent).
    pub depth: usize,
    /// Its place among its parent's children.
    pub turn: usize,
    pub token: Token,
    pub program: String,
    pub timeout_s: u64,
    /// Its children (none for most ranks).
    pub hub: Hub,
}

/// The connection to the parent.
struct Uplink {
    stream: TcpStream,
    lines: LineBuffer,
    /// Written as the socket takes it: a relay's burst never blocks, nor is cut.
    outbox: Vec<u8>,
    since: Instant,
    welcomed: bool,
    /// Whether this connection carried this rank's own Stuck.
    told: bool,
}

/// What a rank knows while it watches.
struct Watch {
    link: Option<Uplink>,
    reached: bool,
    gone: bool,
    /// When a Stuck went up (this rank's or a child's), or the parent last
    /// spoke since.
    told: Option<Instant>,
    /// The rank seen stuck, and where: this one, or else the first behind it.
    stuck: Option<(usize, Where)>,
    own_stuck: bool,
    /// Rank 0 asked: children that prove themselves late are asked too.
    asked: bool,
}

impl Peer {
    pub fn run(mut self, state: &State) -> ! {
        let timeout = Duration::from_secs(self.timeout_s);
        let turn = STAGGER * self.turn.min(STAGGERED_RANKS) as u32;
        let bound = RANK0_BOUND + LEVEL * (self.depth - 1) as u32;
        let mut clock = LocalClock::new();
        let mut pauses = PauseWatch::new(PAUSE_BOUND);
        let link = self.connect();
        let mut w = Watch {
            reached: link.is_some(),
            link,
            gone: false,
            told: None,
            stuck: None,
            own_stuck: false,
            asked: false,
        };
        loop {
            let stale = w
                .link
                .as_ref()
                .is_some_and(|l| !l.welcomed && l.since.elapsed() > REGISTER_BOUND);
            if (w.link.is_none() && !w.gone) || stale {
                w.link = self.connect();
                w.reached |= w.link.is_some();
                pauses.waited();
            }
            let proved = self.hub.screen();
            // The wait also ends when the parent speaks; its socket is read anyway.
            let spoke = self.hub.wait(POLL);
            self.hear_parent(&mut w, state);
            for slot in proved {
                if w.asked {
                    self.hub.send(slot, &Message::Query);
                }
                self.hear_child(&mut w, slot);
            }
            for slot in spoke {
                self.hear_child(&mut w, slot);
            }
            // This rank did not run for a while (stopped or starved): neither its
            // call nor its parent's silence is to be judged by that time.
            if let Some(pause) = pauses.tick() {
                clock.discount(pause);
                w.told = w.told.map(|t| (t + pause).min(Instant::now()));
            }
            if !w.own_stuck && clock.stuck(state, timeout) {
                w.own_stuck = true;
                w.stuck = Some((self.rank, state.snapshot()));
                w.told.get_or_insert_with(Instant::now);
            }
            // Told on every connection: one made again after this rank got stuck too.
            if let Some(l) = w.link.as_mut().filter(|l| w.own_stuck && !l.told) {
                l.told = true;
                let at = state.snapshot();
                l.send(
                    &Message::Stuck {
                        rank: self.rank,
                        at,
                    },
                    &self.token,
                );
            }
            if let Some(l) = w.link.as_mut() {
                l.flush();
            }
            let why = match (w.told, &w.link) {
                (None, _) => None,
                (Some(since), _) if since.elapsed() < turn => None,
                // Rank 0 itself is gone or out of reach: nobody else will judge.
                (Some(_), None) if self.parent == 0 && w.gone => Some(ParentLost::Gone),
                (Some(_), None) if self.parent == 0 && !w.reached => Some(ParentLost::Unreached),
                (Some(since), link) if since.elapsed() > bound + turn => Some(match link {
                    None if w.gone => ParentLost::Gone,
                    None if !w.reached => ParentLost::Unreached,
                    _ => ParentLost::Silent {
                        bound_s: bound.as_secs(),
                    },
                }),
                _ => None,
            };
            if let Some(why) = why {
                self.give_verdict(&mut w, state, why);
            }
        }
    }

    /// The line naming the parent, then the job's end: rank 0, should it wake,
    /// ends the job without judging again, and the ranks behind this one end
    /// without a word.
    fn give_verdict(&mut self, w: &mut Watch, state: &State, why: ParentLost) -> ! {
        let (rank, at) = w.stuck.clone().unwrap_or((self.rank, state.snapshot()));
        let line = parent_lost(
            &self.program,
            self.timeout_s,
            (rank, &self.hosts[rank]),
            (self.parent, &self.hosts[self.parent]),
            &at,
            why,
        );
        eprintln!("{line}");
        if let Some(l) = w.link.as_mut() {
            l.send(&Message::Ended, &self.token);
        }
        self.hub.send_all(&Message::Abort);
        end_job();
    }

    /// Reads what the parent sent, and does it: Welcome, Query (answered, and
    /// passed on to the children), Abort (passed on; the job ends).
    fn hear_parent(&mut self, w: &mut Watch, state: &State) {
        let Some(l) = w.link.as_mut() else {
            return;
        };
        let mut lines = Vec::new();
        let open = read_lines(&mut l.stream, &mut l.lines, &mut lines);
        let token = &self.token;
        for message in lines.iter().filter_map(|l| Message::decode(l, token).ok()) {
            match message {
                Message::Welcome => l.welcomed = true,
                Message::Query => {
                    w.asked = true;
                    let at = state.snapshot();
                    l.send(
                        &Message::State {
                            rank: self.rank,
                            at,
                        },
                        token,
                    );
                    for slot in self.hub.slots() {
                        let rank = self.hub.rank(slot);
                        match self.hub.link(slot) {
                            Link::Open(_) => self.hub.send(slot, &Message::Query),
                            Link::Closed => l.send(&Message::Gone { rank }, token),
                            Link::Never => l.send(&Message::Unreached { rank }, token),
                        }
                    }
                }
                // Rank 0 printed the verdict and ends the job.
                Message::Abort => {
                    self.hub.send_all(&Message::Abort);
                    std::process::exit(ExitStatus::Timeout.code().into())
                }
                _ => continue,
            }
            w.told = w.told.map(|_| Instant::now());
        }
        if !open {
            w.gone = l.welcomed;
            w.link = None;
        }
    }

    /// Passes up what a child said. A child that printed the verdict itself
    /// (`Ended`) ends the job: rank 0 hears it, the others end without a word.
    fn hear_child(&mut self, w: &mut Watch, slot: usize) {
        let (messages, open) = self.hub.hear(slot);
        for message in messages {
            match &message {
                Message::Ended => {
                    if let Some(l) = w.link.as_mut() {
                        l.send(&Message::Ended, &self.token);
                        l.flush();
                    }
                    self.hub.send_all(&Message::Abort);
                    std::process::exit(ExitStatus::Timeout.code().into())
                }
                Message::Stuck { rank, at } => {
                    w.stuck.get_or_insert_with(|| (*rank, at.clone()));
                    w.told.get_or_insert_with(Instant::now);
                }
                _ => {}
            }
            if let Some(l) = w.link.as_mut() {
                l.send(&message, &self.token);
            }
        }
        if let (false, true, Some(l)) = (open, w.asked, w.link.as_mut()) {
            let rank = self.hub.rank(slot);
            l.send(&Message::Gone { rank }, &self.token);
        }
    }

    /// A fresh connection to the parent's watchdog, Hello sent; None when no
    /// address answers.
    fn connect(&self) -> Option<Uplink> {
        for addr in &self.parent_addresses {
            let Ok(stream) = TcpStream::connect_timeout(addr, Duration::from_secs(1)) else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            if stream.set_nonblocking(true).is_err() || self.hub.watch_parent(&stream).is_err() {
                continue;
            }
            let mut link = Uplink {
                stream,
                lines: LineBuffer::default(),
                outbox: Vec::new(),
                since: Instant::now(),
                welcomed: false,
                told: false,
            };
            link.send(&Message::Hello { rank: self.rank }, &self.token);
            return Some(link);
        }
        std::thread::sleep(POLL);
        None
    }
}

impl Uplink {
    fn send(&mut self, message: &Message, token: &Token) {
        if self.outbox.len() < MAX_OUTBOX {
            self.outbox
                .extend_from_slice(message.encode(token).as_bytes());
        }
        self.flush();
    }

    /// Writes what the socket takes now; the rest waits for the next tick.
    fn flush(&mut self) {
        while !self.outbox.is_empty() {
            match self.stream.write(&self.outbox) {
                Ok(0) => return,
                Ok(n) => {
                    self.outbox.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}
