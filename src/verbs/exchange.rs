//! What the two sides of a pair tell each other, and how: the messages (QP
//! numbers, PSNs, rkeys, addresses, GID/LID, settings; then per size a start
//! signal and the measurement), strictly validated because they come from
//! another process; the TCP server/client handshake of a plain start; and the
//! same messages over MPI when mpirun started the pairs.

use super::device::{show_gid, LinkLayer, PortRate};
use super::lat::LatStats;
use super::qp::CONTROL_BYTES;
use crate::job::world::World;
use nix::sys::socket::{setsockopt, sockopt};
use serde::{Deserialize, Serialize};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv6Addr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Bumped whenever a message changes: both sides must speak the same one.
pub const PROTOCOL: &str = "fabricbench-verbs/1";
/// Largest frame accepted (a Hello of 16384 QPs is about 1.5 MiB).
const MAX_FRAME: usize = 16 << 20;
const MAX_PSN: u32 = 0xff_ffff;
/// TCP keepalive: a peer host that vanished is noticed after about 25 s.
const KEEPALIVE_IDLE_S: u32 = 10;
const KEEPALIVE_INTERVAL_S: u32 = 5;
const KEEPALIVE_COUNT: u32 = 3;

/// How the peer reaches one of this side's QPs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QpInfo {
    pub qpn: u32,
    pub psn: u32,
    pub rkey: u32,
    /// Start of the target half; the control word follows its `len` bytes.
    pub addr: u64,
    pub len: u64,
}

/// Everything one side tells its peer before the QPs connect.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub protocol: String,
    pub program: String,
    /// The flags both sides must share, as (flag, value).
    pub settings: Vec<(String, String)>,
    pub host: String,
    pub device: String,
    pub port: u8,
    pub link: LinkLayer,
    pub lid: u16,
    pub gid: Ipv6Addr,
    /// None: no GRH (InfiniBand without -x).
    pub gid_index: Option<u32>,
    pub active_mtu: u32,
    pub max_rd_atomic: u32,
    pub rate: Option<PortRate>,
    pub qps: Vec<QpInfo>,
}

/// One endpoint's measurement of one size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub size: u64,
    pub bw: Option<BwReport>,
    pub lat: Option<LatReport>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BwReport {
    /// Messages completed (all QPs).
    pub messages: u64,
    /// From the first post to the last completion.
    pub elapsed_ns: u64,
    /// perftest's peak: the best message rate over any window; None with -N.
    pub peak_msgs_per_s: Option<f64>,
    /// Per-completion latency (post to completion, ns), HdrHistogram V2.
    pub histogram: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatReport {
    pub iterations: u64,
    pub stats: LatStats,
    /// Every sample (ns, halved for write/send), HdrHistogram V2.
    pub histogram: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum Message {
    Hello(Box<Hello>),
    /// This side is ready for `size` (receives posted).
    Ready {
        size: u64,
    },
    /// A measurement; None on a side that only served the peer.
    Report(Option<Report>),
    /// This side stopped; the peer should too.
    Abort {
        reason: String,
    },
}

impl Message {
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Hello(_) => "its connection details",
            Message::Ready { .. } => "a start signal",
            Message::Report(_) => "a measurement",
            Message::Abort { .. } => "a stop",
        }
    }
}

/// The frame of a message: 4-byte big-endian length, then JSON.
pub fn encode(msg: &Message) -> Vec<u8> {
    let body = serde_json::to_vec(msg).expect("messages serialise");
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// The message of a whole frame, checked for shape and plausibility.
pub fn decode(frame: &[u8]) -> Result<Message, String> {
    let (len, body) = frame
        .split_first_chunk::<4>()
        .ok_or_else(|| format!("a {}-byte message is too short for its length", frame.len()))?;
    let len = u32::from_be_bytes(*len) as usize;
    if len != body.len() {
        return Err(format!(
            "message length says {len} bytes but {} arrived",
            body.len()
        ));
    }
    decode_body(body)
}

fn decode_body(body: &[u8]) -> Result<Message, String> {
    let msg: Message =
        serde_json::from_slice(body).map_err(|e| format!("malformed message: {e}"))?;
    check_message(&msg)?;
    Ok(msg)
}

fn finite(name: &str, v: f64) -> Result<(), String> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(format!("{name} {v} is not a finite non-negative number"))
    }
}

/// Checks what a message can be checked for on its own.
fn check_message(msg: &Message) -> Result<(), String> {
    match msg {
        Message::Hello(h) => {
            if h.protocol != PROTOCOL {
                return Err(format!(
                    "the peer speaks {}, this side {PROTOCOL}: run the same fabricbench version on both sides",
                    h.protocol
                ));
            }
            if h.host.is_empty() || h.device.is_empty() || h.qps.is_empty() {
                return Err("the peer's connection details lack a host, device or QP".into());
            }
            if super::device::mtu_bytes(h.active_mtu.trailing_zeros().saturating_sub(7))
                != Some(h.active_mtu)
            {
                return Err(format!(
                    "the peer's active MTU {} is not an RDMA MTU",
                    h.active_mtu
                ));
            }
            if h.max_rd_atomic == 0 {
                return Err("the peer allows 0 outstanding reads".into());
            }
            if let Some(rate) = &h.rate {
                finite("the peer's port rate", rate.gbit_per_s)?;
            }
            for (i, q) in h.qps.iter().enumerate() {
                if q.qpn == 0 || q.qpn > MAX_PSN {
                    return Err(format!(
                        "the peer's QP {i} has number {} (valid: 1..0xffffff)",
                        q.qpn
                    ));
                }
                if q.psn > MAX_PSN {
                    return Err(format!(
                        "the peer's QP {i} has PSN 0x{:x} (24 bits at most)",
                        q.psn
                    ));
                }
                if q.addr.checked_add(q.len + CONTROL_BYTES as u64).is_none() {
                    return Err(format!("the peer's QP {i} buffer wraps the address space"));
                }
            }
            Ok(())
        }
        Message::Ready { .. } | Message::Abort { .. } => Ok(()),
        Message::Report(None) => Ok(()),
        Message::Report(Some(r)) => {
            if let Some(bw) = &r.bw {
                if bw.messages > 0 && bw.elapsed_ns == 0 {
                    return Err("the peer measured messages in no time".into());
                }
                if let Some(p) = bw.peak_msgs_per_s {
                    finite("the peer's peak rate", p)?;
                }
                histogram_from(&bw.histogram)?;
            }
            if let Some(lat) = &r.lat {
                let s = &lat.stats;
                for (name, v) in [
                    ("t_min", s.t_min_us),
                    ("t_max", s.t_max_us),
                    ("t_typical", s.t_typical_us),
                    ("t_avg", s.t_avg_us),
                    ("t_stdev", s.t_stdev_us),
                    ("99%", s.p99_us),
                    ("99.9%", s.p999_us),
                ] {
                    finite(name, v)?;
                }
                histogram_from(&lat.histogram)?;
            }
            Ok(())
        }
    }
}

/// HdrHistogram V2 bytes of `h`.
pub fn histogram_bytes(h: &hdrhistogram::Histogram<u64>) -> Vec<u8> {
    use hdrhistogram::serialization::Serializer;
    let mut out = Vec::new();
    hdrhistogram::serialization::V2Serializer::new()
        .serialize(h, &mut out)
        .expect("serialising a histogram to memory");
    out
}

pub fn histogram_from(bytes: &[u8]) -> Result<hdrhistogram::Histogram<u64>, String> {
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| format!("the peer's histogram does not decode: {e:?}"))
}

/// Checks the peer's details against this side's: same program and shared
/// flags, QPs that can hold the largest size, a compatible port and GID.
pub fn check_peer(mine: &Hello, peer: &Hello, max_size: u64) -> Result<(), String> {
    let who = format!(
        "the peer ({} {} port {})",
        peer.host, peer.device, peer.port
    );
    if peer.program != mine.program {
        return Err(format!(
            "{who} runs {}, this side {}: start the same benchmark on both sides",
            peer.program, mine.program
        ));
    }
    let differences: Vec<String> = mine
        .settings
        .iter()
        .filter_map(|(flag, value)| {
            let theirs = peer
                .settings
                .iter()
                .find(|(f, _)| f == flag)
                .map_or("(not given)", |(_, v)| v.as_str());
            (theirs != value).then(|| format!("{flag} is {theirs} there but {value} here"))
        })
        .collect();
    if !differences.is_empty() || peer.settings.len() != mine.settings.len() {
        return Err(format!(
            "{who} was started with other flags ({}): give both sides the same flags",
            differences.join("; ")
        ));
    }
    if peer.qps.len() != mine.qps.len() {
        return Err(format!(
            "{who} has {} QPs, this side {}",
            peer.qps.len(),
            mine.qps.len()
        ));
    }
    if let Some(q) = peer.qps.iter().find(|q| q.len < max_size) {
        return Err(format!(
            "{who} has a {}-byte buffer, too small for {max_size}-byte messages",
            q.len
        ));
    }
    if peer.link != mine.link {
        return Err(format!(
            "{who} is on {}, this side on {}: both ports need the same link layer",
            peer.link.name(),
            mine.link.name()
        ));
    }
    if mine.gid_index.is_some() != peer.gid_index.is_some() {
        return Err(format!(
            "one side routes by GID (-x) and the other by LID: give -x on both sides or on neither ({who})"
        ));
    }
    if mine.gid_index.is_some() {
        if peer.gid.is_unspecified() {
            return Err(format!("{who} sent an empty GID"));
        }
        if mine.gid.to_ipv4_mapped().is_some() != peer.gid.to_ipv4_mapped().is_some() {
            return Err(format!(
                "GID families differ: {} here, {} at {who}: pick GIDs of the same IP version (-x)",
                show_gid(&mine.gid),
                show_gid(&peer.gid)
            ));
        }
    } else if peer.lid == 0 {
        return Err(format!(
            "{who} has LID 0: its InfiniBand port has no LID (is a subnet manager running?)"
        ));
    }
    Ok(())
}

/// The path MTU of a pair: -m if both ports allow it, else the smaller active MTU.
pub fn path_mtu(
    requested: Option<u32>,
    mine: u32,
    peer: u32,
    my_name: &str,
    peer_name: &str,
) -> Result<u32, String> {
    let too_large = |m: u32, active: u32, name: &str| {
        format!(
            "-m/--mtu {m}: larger than the active MTU {active} of {name}; use -m {active} or less"
        )
    };
    match requested {
        Some(m) if m > mine => Err(too_large(m, mine, my_name)),
        Some(m) if m > peer => Err(too_large(m, peer, peer_name)),
        Some(m) => Ok(m),
        None => Ok(mine.min(peer)),
    }
}

/// How long to wait for the peer's next message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Patience {
    /// It should come at once: wait at most the --timeout.
    Prompt,
    /// The peer may be measuring for a long time: wait while the connection lives.
    WhileMeasuring,
}

/// The two sides' channel.
pub trait Link {
    /// Sends `mine` to the peer and returns the peer's message.
    fn swap(&mut self, mine: &Message, patience: Patience) -> Result<Message, String>;
    /// Every endpoint's message, by endpoint (MPI: rank; TCP: client 0, server 1).
    fn gather(&mut self, mine: &Message, patience: Patience) -> Result<Vec<Message>, String>;
    /// This side failed with `reason` (printed already): tell the peer, without
    /// waiting for it. Under MPI this ends the whole job.
    fn abandon(&mut self, reason: &str);
}

/// A plain start: one TCP connection between server and client.
pub struct TcpLink {
    stream: TcpStream,
    peer: String,
    client: bool,
    timeout: Duration,
}

fn keepalive(stream: &TcpStream) -> Result<(), String> {
    setsockopt(stream, sockopt::KeepAlive, &true)
        .and_then(|_| setsockopt(stream, sockopt::TcpKeepIdle, &KEEPALIVE_IDLE_S))
        .and_then(|_| setsockopt(stream, sockopt::TcpKeepInterval, &KEEPALIVE_INTERVAL_S))
        .and_then(|_| setsockopt(stream, sockopt::TcpKeepCount, &KEEPALIVE_COUNT))
        .map_err(|e| format!("cannot enable TCP keepalive: {e}"))
}

impl TcpLink {
    /// Waits at most `timeout` for one client on `port`.
    pub fn serve(port: u16, timeout: Duration) -> Result<TcpLink, String> {
        let listener = TcpListener::bind(("::", port))
            .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
            .map_err(|e| {
                format!("cannot listen on TCP port {port}: {e} (another server running? choose another with -p on both sides)")
            })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("cannot poll TCP port {port}: {e}"))?;
        let deadline = Instant::now() + timeout;
        loop {
            match listener.accept() {
                Ok((stream, addr)) => {
                    stream
                        .set_nonblocking(false)
                        .map_err(|e| format!("cannot use the connection from {addr}: {e}"))?;
                    return TcpLink::new(stream, addr.to_string(), false, timeout);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    return Err(format!(
                        "no client connected to TCP port {port} within {} s: start the client (same command plus this host's address), or raise --timeout",
                        timeout.as_secs()
                    ))
                }
                Err(e) => return Err(format!("accepting on TCP port {port} failed: {e}")),
            }
        }
    }

    /// Connects to the server at `host`, retrying for at most `timeout` (the
    /// server may start a little later).
    pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpLink, String> {
        let deadline = Instant::now() + timeout;
        let mut last = String::from("no address");
        loop {
            let addrs: Vec<_> = (host, port)
                .to_socket_addrs()
                .map_err(|e| format!("cannot resolve server address {host}: {e}"))?
                .collect();
            for addr in &addrs {
                match TcpStream::connect_timeout(addr, Duration::from_secs(1)) {
                    Ok(stream) => return TcpLink::new(stream, addr.to_string(), true, timeout),
                    Err(e) => last = e.to_string(),
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "no server answered at {host}:{port} within {} s ({last}): start the server first (the same command without the address), check -p and the address, or raise --timeout",
                    timeout.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn new(
        stream: TcpStream,
        peer: String,
        client: bool,
        timeout: Duration,
    ) -> Result<TcpLink, String> {
        stream
            .set_nodelay(true)
            .map_err(|e| format!("cannot configure the connection to {peer}: {e}"))?;
        keepalive(&stream)?;
        stream
            .set_write_timeout(Some(timeout))
            .map_err(|e| format!("cannot configure the connection to {peer}: {e}"))?;
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

    fn receive(&mut self, expected: &str, patience: Patience) -> Result<Message, String> {
        let wait = match patience {
            Patience::Prompt => Some(self.timeout),
            Patience::WhileMeasuring => None,
        };
        self.stream
            .set_read_timeout(wait)
            .map_err(|e| format!("cannot configure the connection to {}: {e}", self.peer))?;
        let failed = |e: std::io::Error| {
            match e.kind() {
            ErrorKind::UnexpectedEof => format!(
                "the peer at {} closed the connection while this side waited for {expected} (see the peer's output)",
                self.peer
            ),
            ErrorKind::WouldBlock | ErrorKind::TimedOut => format!(
                "the peer at {} sent nothing for {} s while this side waited for {expected} (raise --timeout if it is slow)",
                self.peer,
                self.timeout.as_secs()
            ),
            _ => format!("reading {expected} from the peer at {} failed: {e}", self.peer),
        }
        };
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).map_err(failed)?;
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_FRAME {
            return Err(format!(
                "the peer at {} announced a {len}-byte message (at most {MAX_FRAME}): it is not a fabricbench verbs benchmark of this version",
                self.peer
            ));
        }
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).map_err(failed)?;
        decode_body(&body).map_err(|e| format!("the peer at {} sent {e}", self.peer))
    }
}

/// The peer's message, or its stop as an error.
fn accept(peer: Message, who: &str) -> Result<Message, String> {
    match peer {
        Message::Abort { reason } => Err(format!("{who} stopped: {reason}")),
        other => Ok(other),
    }
}

impl Link for TcpLink {
    fn swap(&mut self, mine: &Message, patience: Patience) -> Result<Message, String> {
        self.stream.write_all(&encode(mine)).map_err(|e| {
            format!(
                "sending {} to the peer at {} failed: {e}",
                mine.kind(),
                self.peer
            )
        })?;
        let theirs = self.receive(mine.kind(), patience)?;
        accept(theirs, &format!("the peer at {}", self.peer))
    }

    fn gather(&mut self, mine: &Message, patience: Patience) -> Result<Vec<Message>, String> {
        let theirs = self.swap(mine, patience)?;
        Ok(if self.client {
            vec![mine.clone(), theirs]
        } else {
            vec![theirs, mine.clone()]
        })
    }

    fn abandon(&mut self, reason: &str) {
        let stop = Message::Abort {
            reason: reason.to_string(),
        };
        // Best effort: the peer may be gone already.
        let _ = self.stream.write_all(&encode(&stop));
    }
}

/// mpirun's pairs: every exchange is one all-gather over the job, so all pairs
/// move from size to size together.
pub struct MpiLink<'w> {
    pub world: &'w World,
    pub peer: usize,
    /// --timeout: the longest wait for a prompt answer.
    pub timeout: Duration,
}

/// A rank waiting for the others looks again after this, doubling up to
/// `ARRIVAL_POLL_MAX`: prompt for quick exchanges, nearly silent during a
/// peer's long measurement.
pub const ARRIVAL_POLL_MIN: Duration = Duration::from_micros(100);
pub const ARRIVAL_POLL_MAX: Duration = Duration::from_millis(20);

impl MpiLink<'_> {
    /// Waits until every rank has arrived, asleep between looks: a rank spinning
    /// in a blocking MPI call takes a CPU from the transfer it waits for (with
    /// Soft-RoCE, the kernel threads that move the data).
    fn arrive(&self, expected: &str, patience: Patience) -> Result<(), String> {
        use mpi::collective::CommunicatorCollectives;
        let deadline = match patience {
            Patience::Prompt => Some(Instant::now() + self.timeout),
            Patience::WhileMeasuring => None,
        };
        let mut request = self.world.comm.immediate_barrier();
        let mut pause = ARRIVAL_POLL_MIN;
        loop {
            match request.test() {
                Ok(_) => return Ok(()),
                Err(pending) => request = pending,
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                // Never completed: the job is ended next (`abandon`), and
                // dropping a pending request would panic.
                std::mem::forget(request);
                return Err(format!(
                    "not every rank sent {expected} within {} s: a rank is stuck or gone (see its output); raise --timeout if it is slow",
                    self.timeout.as_secs()
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(ARRIVAL_POLL_MAX);
        }
    }

    fn all(&self, mine: &Message, patience: Patience) -> Result<Vec<Message>, String> {
        self.arrive(mine.kind(), patience)?;
        self.world
            .all_gather_bytes(&encode(mine))
            .iter()
            .enumerate()
            .map(|(rank, frame)| decode(frame).map_err(|e| format!("rank {rank} sent {e}")))
            .collect()
    }
}

impl Link for MpiLink<'_> {
    fn swap(&mut self, mine: &Message, patience: Patience) -> Result<Message, String> {
        let peer = self.peer;
        let theirs = self.all(mine, patience)?.swap_remove(peer);
        accept(theirs, &format!("rank {peer}"))
    }

    fn gather(&mut self, mine: &Message, patience: Patience) -> Result<Vec<Message>, String> {
        self.all(mine, patience)
    }

    fn abandon(&mut self, _reason: &str) {
        use mpi::topology::Communicator;
        // The other ranks may be inside an all-gather: only ending the job frees them.
        self.world.comm.abort(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            protocol: PROTOCOL.into(),
            program: "ib_write_bw".into(),
            settings: vec![
                ("-s/--size".into(), "65536".into()),
                ("-q/--qp".into(), "1".into()),
            ],
            host: "node1".into(),
            device: "rxe0".into(),
            port: 1,
            link: LinkLayer::Ethernet,
            lid: 0,
            gid: "::ffff:10.0.0.1".parse().unwrap(),
            gid_index: Some(1),
            active_mtu: 1024,
            max_rd_atomic: 16,
            rate: Some(PortRate {
                gbit_per_s: 100.0,
                text: "100 Gb/sec (4X EDR)".into(),
            }),
            qps: vec![QpInfo {
                qpn: 0x11,
                psn: 0x3d4f2c,
                rkey: 0x203,
                addr: 0x7f00_0000_0000,
                len: 65536,
            }],
        }
    }

    fn round_trip(msg: &Message) -> Result<Message, String> {
        decode(&encode(msg))
    }

    #[test]
    fn messages_survive_a_round_trip() {
        let h = Message::Hello(Box::new(hello()));
        assert_eq!(round_trip(&h).unwrap(), h);
        let mut hist = crate::stats::histogram(&[1e-6, 2e-6]);
        hist.record(3000).unwrap();
        let r = Message::Report(Some(Report {
            size: 8,
            bw: Some(BwReport {
                messages: 100,
                elapsed_ns: 5000,
                peak_msgs_per_s: Some(2.5e7),
                histogram: histogram_bytes(&hist),
            }),
            lat: None,
        }));
        let back = round_trip(&r).unwrap();
        assert_eq!(back, r);
        let Message::Report(Some(report)) = back else {
            panic!()
        };
        let h2 = histogram_from(&report.bw.unwrap().histogram).unwrap();
        assert_eq!(h2.len(), 3);
        for m in [
            Message::Ready { size: 4 },
            Message::Report(None),
            Message::Abort { reason: "x".into() },
        ] {
            assert_eq!(round_trip(&m).unwrap(), m);
        }
    }

    #[test]
    fn malformed_frames_are_errors_not_crashes() {
        let good = encode(&Message::Hello(Box::new(hello())));
        assert!(decode(&good[..3]).unwrap_err().contains("too short"));
        assert!(decode(&good[..good.len() - 1])
            .unwrap_err()
            .contains("length says"));
        let mut garbage = good.clone();
        garbage[10] = 0xff;
        assert!(decode(&garbage)
            .unwrap_err()
            .starts_with("malformed message"));
        let text = |s: &str| {
            let mut f = (s.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(s.as_bytes());
            decode(&f)
        };
        assert!(text("").unwrap_err().starts_with("malformed"));
        assert!(text("{\"Ready\":{\"size\":-1}}")
            .unwrap_err()
            .starts_with("malformed"));
        assert!(text("{\"Ready\":{\"size\":1,\"extra\":2}}")
            .unwrap_err()
            .contains("unknown field"));
        assert!(text("{\"Shutdown\":null}")
            .unwrap_err()
            .contains("unknown variant"));
        let bad_hist = "{\"Report\":{\"size\":8,\"bw\":{\"messages\":1,\"elapsed_ns\":1,\"peak_msgs_per_s\":null,\"histogram\":[1,2,3]},\"lat\":null}}";
        assert!(text(bad_hist)
            .unwrap_err()
            .contains("histogram does not decode"));
    }

    #[test]
    fn implausible_hellos_are_refused() {
        let check = |f: &dyn Fn(&mut Hello)| {
            let mut h = hello();
            f(&mut h);
            round_trip(&Message::Hello(Box::new(h))).unwrap_err()
        };
        assert!(check(&|h| h.protocol = "fabricbench-verbs/0".into())
            .contains("same fabricbench version"));
        assert!(check(&|h| h.qps[0].qpn = 0).contains("number 0"));
        assert!(check(&|h| h.qps[0].qpn = 0x100_0000).contains("valid: 1..0xffffff"));
        assert!(check(&|h| h.qps[0].psn = 0x100_0000).contains("24 bits"));
        assert!(check(&|h| h.qps[0].addr = u64::MAX - 10).contains("wraps"));
        assert!(check(&|h| h.active_mtu = 1500).contains("not an RDMA MTU"));
        assert!(check(&|h| h.qps.clear()).contains("lack"));
        assert!(check(&|h| h.rate.as_mut().unwrap().gbit_per_s = -1.0).contains("port rate -1"));
        // JSON has no NaN: it travels as null and is refused as malformed.
        assert!(check(&|h| h.rate.as_mut().unwrap().gbit_per_s = f64::NAN).contains("malformed"));
    }

    #[test]
    fn peers_must_match() {
        let mine = hello();
        assert_eq!(check_peer(&mine, &hello(), 65536), Ok(()));
        let differ = |f: &dyn Fn(&mut Hello), max: u64| {
            let mut p = hello();
            f(&mut p);
            check_peer(&mine, &p, max).unwrap_err()
        };
        assert!(differ(&|p| p.program = "ib_read_bw".into(), 8).contains("runs ib_read_bw"));
        let e = differ(&|p| p.settings[0].1 = "8".into(), 8);
        assert!(e.contains("-s/--size is 8 there but 65536 here"), "{e}");
        assert!(differ(&|_| {}, 1 << 20).contains("too small"));
        assert!(differ(&|p| p.link = LinkLayer::InfiniBand, 8).contains("same link layer"));
        assert!(differ(&|p| p.gid = "fe80::1".parse().unwrap(), 8).contains("GID families differ"));
        assert!(differ(&|p| p.gid_index = None, 8).contains("-x on both sides"));
        assert!(differ(&|p| p.qps.push(p.qps[0].clone()), 8).contains("2 QPs"));
    }

    #[test]
    fn mtu_negotiation() {
        assert_eq!(path_mtu(None, 4096, 1024, "me", "peer"), Ok(1024));
        assert_eq!(path_mtu(Some(2048), 4096, 4096, "me", "peer"), Ok(2048));
        let e = path_mtu(Some(4096), 4096, 1024, "rxe0 port 1", "rxe1 port 1").unwrap_err();
        assert_eq!(
            e,
            "-m/--mtu 4096: larger than the active MTU 1024 of rxe1 port 1; use -m 1024 or less"
        );
        let e = path_mtu(Some(2048), 1024, 4096, "rxe0 port 1", "rxe1 port 1").unwrap_err();
        assert!(e.contains("active MTU 1024 of rxe0 port 1"), "{e}");
    }

    #[test]
    fn tcp_handshake_and_disconnect() {
        let port = 20000 + (std::process::id() % 20000) as u16;
        let server = std::thread::spawn(move || {
            let mut link = TcpLink::serve(port, Duration::from_secs(20)).unwrap();
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
                .unwrap_err();
            // The client is gone now: a clear error, not a hang.
            let gone = link
                .swap(&Message::Ready { size: 4 }, Patience::WhileMeasuring)
                .unwrap_err();
            (stopped, gone)
        });
        let mut client = TcpLink::connect("127.0.0.1", port, Duration::from_secs(20)).unwrap();
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
            let mut link = TcpLink::serve(port, Duration::from_secs(20)).unwrap();
            link.swap(&Message::Ready { size: 2 }, Patience::Prompt)
                .unwrap_err()
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
        let e = TcpLink::serve(port, Duration::from_millis(200))
            .err()
            .unwrap();
        assert!(
            e.starts_with(&format!(
                "no client connected to TCP port {port} within 0 s"
            )),
            "{e}"
        );
        let e = TcpLink::connect("127.0.0.1", port, Duration::from_millis(200))
            .err()
            .unwrap();
        assert!(e.contains("no server answered"), "{e}");
    }
}
