//! A rank's children (rank 0's, and a relay's): the sockets they connect to, the
//! connections not yet proved, and the children's connections, in one epoll set
//! with the parent's connection (a relay's), so that one wait names what has
//! something to read and a tick costs one call plus one read per connection that
//! spoke.
//!
//! A connection is a stranger until its first line is a Hello with this job's
//! token from one of this rank's children; a stranger is dropped when it sends
//! anything else, more than one line's bytes, or nothing within `HELLO_BOUND`,
//! and when strangers pass `MAX_STRANGERS` the oldest of the address holding the
//! most goes first. Children that proved themselves are heard whenever they
//! send, whatever strangers do.

use super::protocol::{LineBuffer, Message, Token};
use super::tree::Tree;
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a new connection has to show the token.
const HELLO_BOUND: Duration = Duration::from_secs(2);
/// Connections not yet proved, all strangers together.
pub(super) const MAX_STRANGERS: usize = 64;
/// Connections accepted per listener per tick: a flood costs a bounded time each tick.
pub(super) const ACCEPT_BUDGET: usize = 256;
/// The epoll key of the parent's connection (children's are their slots).
const PARENT: u64 = u64::MAX;
/// Connections heard per wait at most; the rest are heard at the next
/// (level-triggered).
const EVENTS_PER_WAIT: usize = 256;

struct Stranger {
    stream: TcpStream,
    from: IpAddr,
    since: Instant,
    lines: LineBuffer,
}

pub(super) struct Connection {
    stream: TcpStream,
    lines: LineBuffer,
}

/// A child's connection, as its parent knows it.
pub(super) enum Link {
    /// Never proved itself.
    Never,
    Open(Connection),
    /// Its connection closed (or broke the protocol).
    Closed,
}

pub(super) struct Hub {
    listeners: Vec<TcpListener>,
    token: Token,
    tree: Arc<Tree>,
    strangers: Vec<Stranger>,
    /// By slot: the child's rank and its connection.
    children: Vec<(usize, Link)>,
    ready: Epoll,
    events: Vec<EpollEvent>,
}

impl Hub {
    /// The hub of `rank`'s children, heard on `listeners` (none for a leaf).
    pub fn new(
        listeners: Vec<TcpListener>,
        token: Token,
        tree: Arc<Tree>,
        rank: usize,
    ) -> std::io::Result<Hub> {
        for l in &listeners {
            l.set_nonblocking(true)?;
        }
        let children: Vec<(usize, Link)> = tree
            .children(rank)
            .into_iter()
            .map(|r| (r, Link::Never))
            .collect();
        Ok(Hub {
            listeners,
            token,
            tree,
            strangers: Vec::new(),
            events: vec![EpollEvent::empty(); EVENTS_PER_WAIT.min(children.len() + 1)],
            children,
            ready: Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?,
        })
    }

    pub fn slots(&self) -> std::ops::Range<usize> {
        0..self.children.len()
    }

    pub fn rank(&self, slot: usize) -> usize {
        self.children[slot].0
    }

    pub fn link(&self, slot: usize) -> &Link {
        &self.children[slot].1
    }

    /// Adds the parent's connection (non-blocking) to what a wait hears; a
    /// closed one leaves the set by itself.
    pub fn watch_parent(&self, stream: &TcpStream) -> std::io::Result<()> {
        self.ready
            .add(stream.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, PARENT))
            .map_err(std::io::Error::from)
    }

    /// The slots of the children with something to read (or closed), waiting
    /// up to `tick` for one of them or the parent.
    pub fn wait(&mut self, tick: Duration) -> Vec<usize> {
        let tick = tick.as_millis().min(u16::MAX as u128) as u16;
        let mut spoke = Vec::new();
        match self.ready.wait(&mut self.events, tick) {
            Ok(n) => {
                let slots = self.events[..n].iter().map(|e| e.data());
                spoke.extend(slots.filter(|&d| d != PARENT).map(|d| d as usize));
            }
            // A stopped and resumed process's epoll_wait fails with EINTR: wait
            // again at once, so that what was said meanwhile (a verdict: end
            // silently) is heard before this rank's main thread writes another row.
            Err(Errno::EINTR) => {}
            Err(_) => std::thread::sleep(Duration::from_millis(tick.into())),
        }
        spoke
    }

    pub fn send(&mut self, slot: usize, message: &Message) {
        if let Link::Open(c) = &mut self.children[slot].1 {
            // Non-blocking: a stopped child's full buffer never holds its parent.
            let _ = c.stream.write_all(message.encode(&self.token).as_bytes());
        }
    }

    pub fn send_all(&mut self, message: &Message) {
        for slot in self.slots() {
            self.send(slot, message);
        }
    }

    /// What child `slot` sent since the last time, its own and what it relays
    /// from below it (anything else it has no business sending is left out),
    /// and whether its connection is still open (closed once gone or unruly).
    pub fn hear(&mut self, slot: usize) -> (Vec<Message>, bool) {
        let (child, Link::Open(c)) = &mut self.children[slot] else {
            return (Vec::new(), false);
        };
        let (child, tree) = (*child, &self.tree);
        let mut lines = Vec::new();
        let open = read_lines(&mut c.stream, &mut c.lines, &mut lines);
        let messages = lines
            .iter()
            .filter_map(|l| Message::decode(l, &self.token).ok())
            .filter(|m| match m {
                Message::Stuck { rank, .. }
                | Message::State { rank, .. }
                | Message::Gone { rank }
                | Message::Unreached { rank } => tree.is_behind(*rank, child),
                Message::Ended => true,
                _ => false,
            })
            .collect();
        if !open {
            self.children[slot].1 = Link::Closed;
        }
        (messages, open)
    }

    /// Accepts new connections, and settles the strangers: proved, dropped, or
    /// waiting. The slots of the children that proved themselves now.
    pub fn screen(&mut self) -> Vec<usize> {
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
        let mut proved = Vec::new();
        let children = &self.children;
        let token = &self.token;
        self.strangers.retain_mut(|s| {
            let mut first = None;
            let open = read_first_line(&mut s.stream, &mut s.lines, &mut first);
            let hello = first.map(|l| Message::decode(&l, token));
            match hello {
                Some(Ok(Message::Hello { rank })) => {
                    let slot = children.iter().position(|(r, _)| *r == rank);
                    if let (Some(slot), Ok(stream)) = (slot, s.stream.try_clone()) {
                        proved.push((slot, stream, std::mem::take(&mut s.lines)));
                    }
                    false
                }
                Some(_) => false,
                None => open && s.since.elapsed() < HELLO_BOUND,
            }
        });
        // Read before evicting: a burst of children connecting at once (each
        // sends Hello at once) proves itself in the tick it arrives.
        while self.strangers.len() > MAX_STRANGERS {
            let oldest = oldest_of_the_busiest(&self.strangers);
            self.strangers.remove(oldest);
        }
        let mut slots = Vec::with_capacity(proved.len());
        for (slot, mut stream, lines) in proved {
            let _ = stream.write_all(Message::Welcome.encode(&self.token).as_bytes());
            let heard = EpollEvent::new(EpollFlags::EPOLLIN, slot as u64);
            if self.ready.add(stream.as_fd(), heard).is_ok() {
                // A reconnecting child replaces its old connection (closing it
                // takes the old one out of the set).
                self.children[slot].1 = Link::Open(Connection { stream, lines });
                slots.push(slot);
            }
        }
        slots
    }
}

/// What one read of a connection did.
enum Chunk {
    /// Bytes added to the connection's lines.
    Added,
    /// Nothing to read now.
    Idle,
    /// Closed, broken, or a line longer than `MAX_LINE`.
    Closed,
}

fn read_chunk(stream: &mut TcpStream, lines: &mut LineBuffer) -> Chunk {
    let mut buf = [0u8; 1024];
    loop {
        return match stream.read(&mut buf) {
            Ok(0) => Chunk::Closed,
            Ok(n) => match lines.push(&buf[..n]) {
                Ok(()) => Chunk::Added,
                Err(_) => Chunk::Closed,
            },
            Err(e) if e.kind() == ErrorKind::WouldBlock => Chunk::Idle,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => Chunk::Closed,
        };
    }
}

/// Reads what the socket holds now, and adds every complete line to `out`
/// (taken after every read, so that a relay's burst never fills `lines`, and
/// the lines left from before: a child's Hello came with more); false once the
/// connection is closed, broken or sends a line longer than `MAX_LINE`.
pub(super) fn read_lines(
    stream: &mut TcpStream,
    lines: &mut LineBuffer,
    out: &mut Vec<Vec<u8>>,
) -> bool {
    loop {
        out.extend(std::iter::from_fn(|| lines.next_line()));
        match read_chunk(stream, lines) {
            Chunk::Added => {}
            Chunk::Idle => return true,
            Chunk::Closed => return false,
        }
    }
}

/// A stranger's first line, once it came whole (nothing read past it); false
/// once the connection is closed, broken or sent more than a line's bytes.
fn read_first_line(
    stream: &mut TcpStream,
    lines: &mut LineBuffer,
    first: &mut Option<Vec<u8>>,
) -> bool {
    loop {
        if let Some(line) = lines.next_line() {
            *first = Some(line);
            return true;
        }
        match read_chunk(stream, lines) {
            Chunk::Added => {}
            Chunk::Idle => return true,
            Chunk::Closed => return false,
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
