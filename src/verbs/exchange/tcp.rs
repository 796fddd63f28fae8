//! A plain start's link: one TCP connection between server and client, with
//! the server/client handshake and keepalive. --bind_source_ip binds both
//! ends to that address, as perftest's ethernet_client_connect and
//! ethernet_server_connect do.

use crate::verbs::exchange::wire::{decode_body, encode, Message, MAX_FRAME};
use crate::verbs::exchange::{accept, pair_order, Link, Patience};
use anyhow::{anyhow, bail};
use nix::sys::socket::{
    bind, connect, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrStorage,
};
use nix::sys::time::{TimeVal, TimeValLike};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// TCP keepalive: a peer host that vanished is noticed after about 25 s.
const KEEPALIVE_IDLE_S: u32 = 10;
const KEEPALIVE_INTERVAL_S: u32 = 5;
const KEEPALIVE_COUNT: u32 = 3;
/// One connection attempt's wait.
const ATTEMPT_WAIT: Duration = Duration::from_secs(1);

/// A plain start: one TCP connection between server and client.
pub struct TcpLink {
    stream: TcpStream,
    peer: String,
    client: bool,
    timeout: Duration,
}

fn keepalive(stream: &TcpStream) -> anyhow::Result<()> {
    setsockopt(stream, sockopt::KeepAlive, &true)
        .and_then(|_| setsockopt(stream, sockopt::TcpKeepIdle, &KEEPALIVE_IDLE_S))
        .and_then(|_| setsockopt(stream, sockopt::TcpKeepInterval, &KEEPALIVE_INTERVAL_S))
        .and_then(|_| setsockopt(stream, sockopt::TcpKeepCount, &KEEPALIVE_COUNT))
        .map_err(|e| anyhow!("cannot enable TCP keepalive: {e}"))
}

/// A connection attempt to `addr` from `source` (port 0: any), of at most
/// ATTEMPT_WAIT (Linux bounds a blocking connect by SO_SNDTIMEO). The outer
/// error ends the tries: an address this host does not have stays so.
fn dial(addr: &SocketAddr, source: IpAddr) -> anyhow::Result<std::io::Result<TcpStream>> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let fd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)
        .map_err(|e| anyhow!("cannot open a TCP socket: {e}"))?;
    bind(
        fd.as_raw_fd(),
        &SockaddrStorage::from(SocketAddr::new(source, 0)),
    )
    .map_err(|e| {
        anyhow!("--bind_source_ip {source}: cannot bind to it ({e}); give an address of this host")
    })?;
    let wait = TimeVal::milliseconds(ATTEMPT_WAIT.as_millis() as i64);
    setsockopt(&fd, sockopt::SendTimeout, &wait)
        .map_err(|e| anyhow!("cannot bound the TCP connection attempt: {e}"))?;
    Ok(connect(fd.as_raw_fd(), &SockaddrStorage::from(*addr))
        .map(|()| TcpStream::from(fd))
        .map_err(std::io::Error::from))
}

impl TcpLink {
    /// Waits at most `timeout` for one client on `port` (of `source` only,
    /// with --bind_source_ip).
    pub fn serve(port: u16, timeout: Duration, source: Option<IpAddr>) -> anyhow::Result<TcpLink> {
        let listener = match source {
            Some(ip) => TcpListener::bind((ip, port)),
            None => {
                TcpListener::bind(("::", port)).or_else(|_| TcpListener::bind(("0.0.0.0", port)))
            }
        };
        let at = source.map_or(String::new(), |ip| format!(" of {ip} (--bind_source_ip)"));
        let listener = listener.map_err(|e| {
                anyhow!("cannot listen on TCP port {port}{at}: {e} (another server running? choose another with -p on both sides)")
            })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| anyhow!("cannot poll TCP port {port}: {e}"))?;
        let deadline = Instant::now() + timeout;
        loop {
            match listener.accept() {
                Ok((stream, addr)) => {
                    stream
                        .set_nonblocking(false)
                        .map_err(|e| anyhow!("cannot use the connection from {addr}: {e}"))?;
                    return TcpLink::new(stream, addr.to_string(), false, timeout);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    bail!(
                        "no client connected to TCP port {port} within {} s: start the client (same command plus this host's address), or raise --timeout",
                        timeout.as_secs()
                    )
                }
                Err(e) => bail!("accepting on TCP port {port} failed: {e}"),
            }
        }
    }

    /// Connects to the server at `host` (from `source`, with
    /// --bind_source_ip), retrying for at most `timeout` (the server may
    /// start a little later).
    pub fn connect(
        host: &str,
        port: u16,
        timeout: Duration,
        source: Option<IpAddr>,
    ) -> anyhow::Result<TcpLink> {
        let deadline = Instant::now() + timeout;
        let mut last = String::from("no address");
        loop {
            let addrs: Vec<_> = (host, port)
                .to_socket_addrs()
                .map_err(|e| anyhow!("cannot resolve server address {host}: {e}"))?
                .filter(|a| source.is_none_or(|ip| ip.is_ipv4() == a.is_ipv4()))
                .collect();
            if addrs.is_empty() {
                let ip = source.expect("only a source filters addresses out");
                bail!(
                    "--bind_source_ip {ip}: server address {host} has no address of the same IP family; give an address of the other family"
                );
            }
            for addr in &addrs {
                let stream = match source {
                    Some(ip) => dial(addr, ip)?,
                    None => TcpStream::connect_timeout(addr, ATTEMPT_WAIT),
                };
                match stream {
                    Ok(stream) => return TcpLink::new(stream, addr.to_string(), true, timeout),
                    Err(e) => last = e.to_string(),
                }
            }
            if Instant::now() >= deadline {
                bail!(
                    "no server answered at {host}:{port} within {} s ({last}): start the server first (the same command without the address), check -p and the address, or raise --timeout",
                    timeout.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn new(
        stream: TcpStream,
        peer: String,
        client: bool,
        timeout: Duration,
    ) -> anyhow::Result<TcpLink> {
        stream
            .set_nodelay(true)
            .map_err(|e| anyhow!("cannot configure the connection to {peer}: {e}"))?;
        keepalive(&stream)?;
        stream
            .set_write_timeout(Some(timeout))
            .map_err(|e| anyhow!("cannot configure the connection to {peer}: {e}"))?;
        Ok(TcpLink {
            stream,
            peer,
            client,
            timeout,
        })
    }

    pub fn peer_address(&self) -> &str {
        &self.peer
    }

    fn receive(&mut self, expected: &str, patience: Patience) -> anyhow::Result<Message> {
        let wait = match patience {
            Patience::Prompt => Some(self.timeout),
            Patience::WhileMeasuring => None,
        };
        self.stream
            .set_read_timeout(wait)
            .map_err(|e| anyhow!("cannot configure the connection to {}: {e}", self.peer))?;
        let failed = |e: std::io::Error| {
            match e.kind() {
            ErrorKind::UnexpectedEof => anyhow!(
                "the peer at {} closed the connection while this side waited for {expected} (see the peer's output)",
                self.peer
            ),
            ErrorKind::WouldBlock | ErrorKind::TimedOut => anyhow!(
                "the peer at {} sent nothing for {} s while this side waited for {expected} (raise --timeout if it is slow)",
                self.peer,
                self.timeout.as_secs()
            ),
            _ => anyhow!("reading {expected} from the peer at {} failed: {e}", self.peer),
        }
        };
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).map_err(failed)?;
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_FRAME {
            bail!(
                "the peer at {} announced a {len}-byte message (at most {MAX_FRAME}): it is not a fabricbench verbs benchmark of this version",
                self.peer
            );
        }
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).map_err(failed)?;
        decode_body(&body).map_err(|e| anyhow!("the peer at {} sent {e:#}", self.peer))
    }
}

impl Link for TcpLink {
    fn swap(&mut self, mine: &Message, patience: Patience) -> anyhow::Result<Message> {
        self.stream.write_all(&encode(mine)).map_err(|e| {
            anyhow!(
                "sending {} to the peer at {} failed: {e}",
                mine.kind(),
                self.peer
            )
        })?;
        let theirs = self.receive(mine.kind(), patience)?;
        accept(theirs, &format!("the peer at {}", self.peer))
    }

    fn gather(&mut self, mine: &Message, patience: Patience) -> anyhow::Result<Vec<Message>> {
        let theirs = self.swap(mine, patience)?;
        Ok(pair_order(self.client, mine, theirs))
    }

    fn abandon(&mut self, reason: &str) {
        let stop = Message::Abort {
            reason: reason.to_string(),
        };
        // Best effort: the peer may be gone already.
        let _ = self.stream.write_all(&encode(&stop));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::exchange::wire::tests::hello;

    #[test]
    fn tcp_handshake_and_disconnect() {
        let port = 20000 + (std::process::id() % 20000) as u16;
        let server = std::thread::spawn(move || {
            let mut link = TcpLink::serve(port, Duration::from_secs(20), None).unwrap();
            let got = link
                .swap(&Message::Ready { size: 2 }, Patience::Prompt)
                .unwrap();
            assert_eq!(got, Message::Hello(Box::new(hello())));
            // Client first, then server.
            let all = link
                .gather(&Message::Report(None), Patience::WhileMeasuring)
                .unwrap();
            assert_eq!(all, vec![Message::Ready { size: 8 }, Message::Report(None)]);
            let stopped = link
                .swap(&Message::Ready { size: 4 }, Patience::WhileMeasuring)
                .unwrap_err()
                .to_string();
            // The client is gone now: a clear error, not a hang.
            let gone = link
                .swap(&Message::Ready { size: 4 }, Patience::WhileMeasuring)
                .unwrap_err()
                .to_string();
            (stopped, gone)
        });
        let mut client =
            TcpLink::connect("127.0.0.1", port, Duration::from_secs(20), None).unwrap();
        let got = client
            .swap(&Message::Hello(Box::new(hello())), Patience::Prompt)
            .unwrap();
        assert_eq!(got, Message::Ready { size: 2 });
        let all = client
            .gather(&Message::Ready { size: 8 }, Patience::Prompt)
            .unwrap();
        assert_eq!(all, vec![Message::Ready { size: 8 }, Message::Report(None)]);
        client.abandon("test ends");
        drop(client);
        let (stopped, gone) = server.join().unwrap();
        assert!(stopped.ends_with("stopped: test ends"), "{stopped}");
        assert!(
            gone.contains("closed the connection") || gone.contains("failed"),
            "{gone}"
        );
    }

    #[test]
    fn tcp_peer_sending_garbage_is_refused() {
        let port = 20001 + (std::process::id() % 20000) as u16;
        let server = std::thread::spawn(move || {
            let mut link = TcpLink::serve(port, Duration::from_secs(20), None).unwrap();
            link.swap(&Message::Ready { size: 2 }, Patience::Prompt)
                .unwrap_err()
                .to_string()
        });
        let mut raw = loop {
            if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
                break s;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        raw.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let e = server.join().unwrap();
        assert!(e.contains("not a fabricbench verbs benchmark"), "{e}");
    }

    #[test]
    fn nobody_connecting_times_out() {
        let port = 20002 + (std::process::id() % 20000) as u16;
        let e = TcpLink::serve(port, Duration::from_millis(200), None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with(&format!(
                "no client connected to TCP port {port} within 0 s"
            )),
            "{e}"
        );
        let e = TcpLink::connect("127.0.0.1", port, Duration::from_millis(200), None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no server answered"), "{e}");
    }

    #[test]
    fn bind_source_ip_binds_both_ends() {
        // perftest: the server listens on the address only, the client connects from it.
        let port = 20003 + (std::process::id() % 20000) as u16;
        let (server_ip, client_ip): (IpAddr, IpAddr) =
            ("127.0.0.3".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let server = std::thread::spawn(move || {
            let link = TcpLink::serve(port, Duration::from_secs(20), Some(server_ip)).unwrap();
            link.peer_address().to_string()
        });
        // Not on 127.0.0.1: the listener holds 127.0.0.3 alone.
        let e = TcpLink::connect("127.0.0.1", port, Duration::from_millis(300), None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no server answered"), "{e}");
        let client =
            TcpLink::connect("127.0.0.3", port, Duration::from_secs(20), Some(client_ip)).unwrap();
        assert_eq!(client.stream.local_addr().unwrap().ip(), client_ip);
        let seen = server.join().unwrap();
        assert!(seen.starts_with("127.0.0.2:"), "{seen}");
    }

    #[test]
    fn bind_source_ip_of_another_host_is_one_line() {
        let port = 20004 + (std::process::id() % 20000) as u16;
        let foreign: IpAddr = "192.0.2.7".parse().unwrap();
        let started = Instant::now();
        let e = TcpLink::connect("127.0.0.1", port, Duration::from_secs(20), Some(foreign))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("--bind_source_ip 192.0.2.7: cannot bind to it (")
                && e.ends_with("give an address of this host")
                && e.lines().count() == 1,
            "{e}"
        );
        // Refused at once, not retried for the --timeout.
        assert!(started.elapsed() < Duration::from_secs(10));
        let e = TcpLink::connect("::1", port, Duration::from_secs(20), Some(foreign))
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("--bind_source_ip 192.0.2.7: server address ::1 has no address of the same IP family"), "{e}");
    }
}
