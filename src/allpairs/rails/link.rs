//! A TCP connection between the two ranks of a pair on one rail: made from and
//! to the rails' own addresses (so the kernel sends it out of the rail's
//! netdev, never the management network MPI uses), proven by the job's token
//! (a stranger on the port is dropped), and an exchange both directions at once.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// What the connecting rank sends first: the job's token and its rank.
const HELLO_LEN: usize = 16;
/// The most a connection may take to say who it is before it is dropped.
const HELLO_WAIT: Duration = Duration::from_secs(1);

/// This rank's listening socket on its rail address.
pub struct RailListener {
    listener: TcpListener,
}

impl RailListener {
    pub fn bind(ip: Ipv4Addr) -> io::Result<RailListener> {
        let listener = TcpListener::bind(SocketAddrV4::new(ip, 0))?;
        listener.set_nonblocking(true)?;
        Ok(RailListener { listener })
    }

    pub fn addr(&self) -> io::Result<SocketAddrV4> {
        match self.listener.local_addr()? {
            std::net::SocketAddr::V4(a) => Ok(a),
            other => Err(io::Error::other(format!("{other} is not IPv4"))),
        }
    }

    /// The connection of rank `from` of this job, waited for until `deadline`;
    /// any other connection (a stranger, a late try of an earlier pair) is dropped.
    pub fn accept(&self, token: u64, from: u64, deadline: Instant) -> io::Result<TcpStream> {
        loop {
            left(deadline)?;
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    if let Ok(true) = says_hello(&mut stream, token, from) {
                        stream.write_all(&[1])?;
                        return ready(stream);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    wait(self.listener.as_raw_fd(), libc::POLLIN, Some(deadline)).map(drop)?
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Whether `stream` sends `token` and `from` within `HELLO_WAIT`.
fn says_hello(stream: &mut TcpStream, token: u64, from: u64) -> io::Result<bool> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(HELLO_WAIT))?;
    let mut hello = [0u8; HELLO_LEN];
    stream.read_exact(&mut hello)?;
    Ok(hello == hello_of(token, from))
}

fn hello_of(token: u64, rank: u64) -> [u8; HELLO_LEN] {
    let mut hello = [0u8; HELLO_LEN];
    hello[..8].copy_from_slice(&token.to_le_bytes());
    hello[8..].copy_from_slice(&rank.to_le_bytes());
    hello
}

/// Connects from `from` (this rank's rail address, and its netdev where the
/// process may bind to one) to a peer's listener, says who it is and waits for
/// the answer, all before `deadline`.
pub fn connect(
    from: Ipv4Addr,
    netdev: &str,
    to: SocketAddrV4,
    token: u64,
    me: u64,
    deadline: Instant,
) -> io::Result<TcpStream> {
    let mut stream = connect_bound(from, netdev, to, deadline)?;
    stream.set_nonblocking(false)?;
    stream.write_all(&hello_of(token, me))?;
    stream.set_read_timeout(Some(left(deadline)?))?;
    let mut answer = [0u8; 1];
    stream.read_exact(&mut answer)?;
    ready(stream)
}

/// A connected stream ready for `exchange`: non-blocking, no Nagle delay.
fn ready(stream: TcpStream) -> io::Result<TcpStream> {
    stream.set_read_timeout(None)?;
    stream.set_nodelay(true)?;
    stream.set_nonblocking(true)?;
    Ok(stream)
}

/// Time left before `deadline`, or a timeout error.
fn left(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    match left.is_zero() {
        true => Err(io::Error::new(ErrorKind::TimedOut, "no answer in time")),
        false => Ok(left),
    }
}

/// Waits until `fd` is ready for `events` (true) or `deadline` passes or a
/// signal comes (false); past the deadline, a timeout error. No deadline: as
/// long as it takes.
fn wait(fd: i32, events: libc::c_short, deadline: Option<Instant>) -> io::Result<bool> {
    let ms = match deadline {
        Some(d) => left(d)?.as_millis().clamp(1, i32::MAX as u128) as i32,
        None => -1,
    };
    let mut pfd = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one pollfd that lives across the call.
    match unsafe { libc::poll(&mut pfd, 1, ms) } {
        n if n < 0 => match io::Error::last_os_error() {
            e if e.kind() == ErrorKind::Interrupted => Ok(false),
            e => Err(e),
        },
        n => Ok(n > 0),
    }
}

/// A non-blocking socket bound to `from` (and to `netdev` where allowed: with
/// rails on one subnet the address alone would not choose the interface),
/// connected to `to` before `deadline`.
fn connect_bound(
    from: Ipv4Addr,
    netdev: &str,
    to: SocketAddrV4,
    deadline: Instant,
) -> io::Result<TcpStream> {
    // SAFETY: socket(2) with constant arguments; the descriptor is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SO_BINDTODEVICE needs CAP_NET_RAW: without it the source address binds alone.
    // SAFETY: the name's bytes live across the call and its length is passed.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            netdev.as_ptr().cast(),
            netdev.len() as libc::socklen_t,
        )
    };
    let source = sockaddr(SocketAddrV4::new(from, 0));
    // SAFETY: source is a sockaddr_in of the length given.
    let bound = unsafe {
        libc::bind(
            fd,
            (&source as *const libc::sockaddr_in).cast(),
            SOCKADDR_LEN,
        )
    };
    if bound < 0 {
        return Err(io::Error::last_os_error());
    }
    let addr = sockaddr(to);
    // SAFETY: as bind.
    let started =
        unsafe { libc::connect(fd, (&addr as *const libc::sockaddr_in).cast(), SOCKADDR_LEN) };
    if started < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
        while !wait(fd, libc::POLLOUT, Some(deadline))? {}
        let stream = TcpStream::from(owned);
        return match stream.take_error()? {
            Some(e) => Err(e),
            None => Ok(stream),
        };
    }
    Ok(TcpStream::from(owned))
}

const SOCKADDR_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// Sends `send` and receives `recv.len()` bytes on `stream` at once (each
/// side's kernel buffers fill while the other's drain), as MPI_Sendrecv does.
pub fn exchange(stream: &mut TcpStream, send: &[u8], recv: &mut [u8]) -> io::Result<()> {
    let (mut sent, mut got) = (0, 0);
    while sent < send.len() || got < recv.len() {
        let mut moved = false;
        if sent < send.len() {
            match stream.write(&send[sent..]) {
                Ok(n) => (sent, moved) = (sent + n, true),
                Err(e) if would_block(&e) => {}
                Err(e) => return Err(e),
            }
        }
        if got < recv.len() {
            match stream.read(&mut recv[got..]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        ErrorKind::UnexpectedEof,
                        "the peer closed the connection",
                    ))
                }
                Ok(n) => (got, moved) = (got + n, true),
                Err(e) if would_block(&e) => {}
                Err(e) => return Err(e),
            }
        }
        if !moved {
            let mut events = 0;
            if sent < send.len() {
                events |= libc::POLLOUT;
            }
            if got < recv.len() {
                events |= libc::POLLIN;
            }
            // No deadline of its own: -T ends a pair that hangs, as it does an MPI call.
            wait(stream.as_raw_fd(), events, None)?;
        }
    }
    Ok(())
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: u64 = 0x5eed;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    /// Two ends on loopback: the connector is rank 1, the listener rank 0.
    fn pair() -> (TcpStream, TcpStream) {
        let listener = RailListener::bind(Ipv4Addr::LOCALHOST).unwrap();
        let to = listener.addr().unwrap();
        let dialer = std::thread::spawn(move || {
            connect(Ipv4Addr::LOCALHOST, "lo", to, TOKEN, 1, soon()).unwrap()
        });
        let accepted = listener.accept(TOKEN, 1, soon()).unwrap();
        (accepted, dialer.join().unwrap())
    }

    #[test]
    fn both_directions_at_once_move_every_byte() {
        let (mut a, mut b) = pair();
        // Larger than any socket buffer: each side must read while it writes.
        let len = 16 << 20;
        let from_a: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let from_b: Vec<u8> = (0..len).map(|i| (i % 241) as u8).collect();
        let expect_a = from_a.clone();
        let other = std::thread::spawn(move || {
            let mut got = vec![0u8; len];
            exchange(&mut b, &from_b, &mut got).unwrap();
            got
        });
        let mut got = vec![0u8; len];
        exchange(&mut a, &from_a, &mut got).unwrap();
        assert_eq!(other.join().unwrap(), expect_a);
        assert!(got.iter().enumerate().all(|(i, &v)| v == (i % 241) as u8));
    }

    #[test]
    fn a_stranger_is_dropped_and_the_peer_still_accepted() {
        let listener = RailListener::bind(Ipv4Addr::LOCALHOST).unwrap();
        let to = listener.addr().unwrap();
        // A stranger that says nothing, one with the wrong token, one claiming another rank.
        let _silent = TcpStream::connect(to).unwrap();
        let wrong = std::thread::spawn(move || {
            let bad = connect(Ipv4Addr::LOCALHOST, "lo", to, TOKEN + 1, 1, soon());
            let other = connect(Ipv4Addr::LOCALHOST, "lo", to, TOKEN, 7, soon());
            (bad.is_err(), other.is_err())
        });
        let peer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            connect(Ipv4Addr::LOCALHOST, "lo", to, TOKEN, 1, soon()).map(drop)
        });
        let accepted = listener.accept(TOKEN, 1, soon());
        assert!(accepted.is_ok(), "{accepted:?}");
        assert!(peer.join().unwrap().is_ok());
        assert_eq!(wrong.join().unwrap(), (true, true));
    }

    #[test]
    fn nobody_there_ends_at_the_deadline() {
        let listener = RailListener::bind(Ipv4Addr::LOCALHOST).unwrap();
        let started = Instant::now();
        let e = listener
            .accept(TOKEN, 1, started + Duration::from_millis(200))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(2));
        // A port nothing listens on refuses at once.
        let closed = listener.addr().unwrap();
        drop(listener);
        assert!(connect(Ipv4Addr::LOCALHOST, "lo", closed, TOKEN, 1, soon()).is_err());
    }

    #[test]
    fn a_peer_that_leaves_is_an_error_not_a_hang() {
        let (mut a, b) = pair();
        drop(b);
        let mut got = [0u8; 8];
        assert!(exchange(&mut a, &[1; 8], &mut got).is_err());
    }
}
