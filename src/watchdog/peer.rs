//! A peer's side: it proves itself to rank 0 (Hello with the token, answered by
//! Welcome), answers rank 0's Query, and tells rank 0 when its own call has
//! lasted -T. When rank 0 then says nothing for `RANK0_BOUND` (stopped, frozen or
//! cut off), or its connection is gone, this rank gives the verdict itself.

use super::protocol::{LineBuffer, Message, Token};
use super::state::{LocalClock, PauseWatch, State, PAUSE_BOUND};
use super::verdict::{rank0_lost, Rank0Lost};
use super::{end_job, ANSWER_BOUND};
use crate::job::ExitStatus;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const POLL: Duration = Duration::from_millis(50);
/// How long a peer waits for Welcome before it connects again.
const REGISTER_BOUND: Duration = Duration::from_secs(3);
/// How long rank 0 may stay silent once told: its Query and verdict come within
/// `ANSWER_BOUND` when it is alive.
const RANK0_BOUND: Duration = Duration::from_secs(ANSWER_BOUND.as_secs() + 3);
/// Peers that all lose rank 0 give up one after another, by rank: the first
/// verdict ends the job, so one line is printed, not one per rank (unless the
/// launcher takes longer than `STAGGER` to end the job).
const STAGGER: Duration = Duration::from_secs(1);
const STAGGERED_RANKS: usize = 4;

pub(super) struct Peer {
    pub rank: usize,
    pub host: String,
    pub host0: String,
    pub rank0: Vec<SocketAddr>,
    pub token: Token,
    pub program: String,
    pub timeout_s: u64,
}

/// The connection to rank 0.
struct Rank0Connection {
    stream: TcpStream,
    lines: LineBuffer,
    since: Instant,
    welcomed: bool,
    /// Whether this connection carried Stuck.
    told: bool,
}

impl Peer {
    pub fn run(self, state: &State) -> ! {
        let timeout = Duration::from_secs(self.timeout_s);
        let turn = STAGGER * (self.rank - 1).min(STAGGERED_RANKS) as u32;
        let mut clock = LocalClock::new();
        let mut pauses = PauseWatch::new(PAUSE_BOUND);
        let mut link = self.connect();
        let mut reached = link.is_some();
        let mut gone = false;
        // When this rank told rank 0 it is stuck, or last heard from it since.
        let mut told: Option<Instant> = None;
        loop {
            let stale = link
                .as_ref()
                .is_some_and(|l| !l.welcomed && l.since.elapsed() > REGISTER_BOUND);
            if (link.is_none() && !gone) || stale {
                link = self.connect();
                reached |= link.is_some();
                pauses.waited();
            }
            match &mut link {
                // Waits up to POLL for rank 0's next line.
                Some(l) => match self.hear(l, state) {
                    Ok(true) => told = told.map(|_| Instant::now()),
                    Ok(false) => {}
                    Err(()) => {
                        gone = l.welcomed;
                        link = None;
                    }
                },
                None => std::thread::sleep(POLL),
            }
            // This rank did not run for a while (stopped or starved): neither its
            // call nor rank 0's silence is to be judged by that time.
            if let Some(pause) = pauses.tick() {
                clock.discount(pause);
                told = told.map(|t| (t + pause).min(Instant::now()));
            }
            if told.is_none() && clock.stuck(state, timeout) {
                told = Some(Instant::now());
            }
            // Told on every connection: one made again after this rank got stuck too.
            if let Some(l) = link.as_mut().filter(|l| told.is_some() && !l.told) {
                l.told = l
                    .send(&Message::Stuck(state.snapshot()), &self.token)
                    .is_ok();
            }
            let why = match (told, &link) {
                (None, _) => None,
                (Some(since), _) if since.elapsed() < turn => None,
                (Some(_), None) if gone => Some(Rank0Lost::Gone),
                (Some(_), None) if !reached => Some(Rank0Lost::Unreached),
                (Some(since), _) if since.elapsed() > RANK0_BOUND + turn => {
                    Some(Rank0Lost::Silent {
                        bound_s: RANK0_BOUND.as_secs(),
                    })
                }
                _ => None,
            };
            if let Some(why) = why {
                let line = rank0_lost(
                    &self.program,
                    self.timeout_s,
                    (self.rank, &self.host),
                    &self.host0,
                    &state.snapshot(),
                    why,
                );
                eprintln!("{line}");
                // Rank 0, should it wake, ends the job without judging again.
                if let Some(l) = link.as_mut() {
                    let _ = l.send(&Message::Ended, &self.token);
                }
                end_job();
            }
        }
    }

    /// Reads what rank 0 sent: Ok(true) when it said anything, Err when the
    /// connection is closed or unusable.
    fn hear(&self, link: &mut Rank0Connection, state: &State) -> Result<bool, ()> {
        let mut buf = [0u8; 1024];
        match link.stream.read(&mut buf) {
            Ok(0) => return Err(()),
            Ok(n) => link.lines.push(&buf[..n]).map_err(|_| ())?,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Err(()),
        }
        let mut heard = false;
        while let Some(line) = link.lines.next_line() {
            match Message::decode(&line, &self.token) {
                Ok(Message::Welcome) => link.welcomed = true,
                Ok(Message::Query) => {
                    let _ = link.send(&Message::State(state.snapshot()), &self.token);
                }
                // Rank 0 printed the verdict and ends the job.
                Ok(Message::Abort) => std::process::exit(ExitStatus::Timeout.code().into()),
                _ => continue,
            }
            heard = true;
        }
        Ok(heard)
    }

    /// A fresh connection to rank 0's watchdog, Hello sent; None when no address answers.
    fn connect(&self) -> Option<Rank0Connection> {
        for addr in &self.rank0 {
            let Ok(stream) = TcpStream::connect_timeout(addr, Duration::from_secs(1)) else {
                continue;
            };
            let _ = stream.set_read_timeout(Some(POLL));
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = stream.set_nodelay(true);
            let mut link = Rank0Connection {
                stream,
                lines: LineBuffer::default(),
                since: Instant::now(),
                welcomed: false,
                told: false,
            };
            if link
                .send(&Message::Hello { rank: self.rank }, &self.token)
                .is_ok()
            {
                return Some(link);
            }
        }
        std::thread::sleep(POLL);
        None
    }
}

impl Rank0Connection {
    fn send(&mut self, message: &Message, token: &Token) -> std::io::Result<()> {
        self.stream.write_all(message.encode(token).as_bytes())
    }
}
