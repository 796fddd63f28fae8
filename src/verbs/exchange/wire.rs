//! What the two sides of a pair tell each other: the messages (QP numbers,
//! PSNs, rkeys, addresses, GID/LID, settings; then per size a start signal and
//! the measurement) and their frames, strictly validated because they come
//! from another process.

use crate::report::verbs::LatStats;
use crate::verbs::device::{mtu_bytes, LinkLayer, PortRate};
use crate::verbs::measure::validate::Checked;
use anyhow::{anyhow, bail};
use serde::{Deserialize, Serialize};
use std::net::Ipv6Addr;

/// Bumped whenever a message changes: both sides must speak the same one.
pub const PROTOCOL: &str = "fabricbench-verbs/2";
/// Largest frame accepted (a Hello of 16384 QPs is about 1.5 MiB).
pub const MAX_FRAME: usize = 16 << 20;
const MAX_PSN: u32 = 0xff_ffff;
/// Bytes of the control area after a QP's target half (the word that ends a
/// -D latency run): the peer may address them too.
pub const CONTROL_BYTES: usize = 64;

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
    /// --data_validation: what this side's receiver checked.
    pub validation: Option<Checked>,
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
    /// --run_infinitely: this side caught `signal`; every side stops after this period.
    Stop {
        signal: String,
    },
}

impl Message {
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Hello(_) => "its connection details",
            Message::Ready { .. } => "a start signal",
            Message::Report(_) => "a measurement",
            Message::Abort { .. } => "a stop",
            Message::Stop { .. } => "its stop at a signal",
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
pub fn decode(frame: &[u8]) -> anyhow::Result<Message> {
    let (len, body) = frame
        .split_first_chunk::<4>()
        .ok_or_else(|| anyhow!("a {}-byte message is too short for its length", frame.len()))?;
    let len = u32::from_be_bytes(*len) as usize;
    if len != body.len() {
        bail!("message length says {len} bytes but {} arrived", body.len());
    }
    decode_body(body)
}

pub fn decode_body(body: &[u8]) -> anyhow::Result<Message> {
    let msg: Message =
        serde_json::from_slice(body).map_err(|e| anyhow!("malformed message: {e}"))?;
    check_message(&msg)?;
    Ok(msg)
}

fn finite(name: &str, v: f64) -> anyhow::Result<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(anyhow!("{name} {v} is not a finite non-negative number"))
    }
}

/// Checks what a message can be checked for on its own.
fn check_message(msg: &Message) -> anyhow::Result<()> {
    match msg {
        Message::Hello(h) => {
            if h.protocol != PROTOCOL {
                bail!(
                    "the peer speaks {}, this side {PROTOCOL}: run the same fabricbench version on both sides",
                    h.protocol
                );
            }
            if h.host.is_empty() || h.device.is_empty() || h.qps.is_empty() {
                bail!("the peer's connection details lack a host, device or QP");
            }
            if mtu_bytes(h.active_mtu.trailing_zeros().saturating_sub(7)) != Some(h.active_mtu) {
                bail!("the peer's active MTU {} is not an RDMA MTU", h.active_mtu);
            }
            if h.max_rd_atomic == 0 {
                bail!("the peer allows 0 outstanding reads");
            }
            if let Some(rate) = &h.rate {
                finite("the peer's port rate", rate.gbit_per_s)?;
            }
            for (i, q) in h.qps.iter().enumerate() {
                if q.qpn == 0 || q.qpn > MAX_PSN {
                    bail!(
                        "the peer's QP {i} has number {} (valid: 1..0xffffff)",
                        q.qpn
                    );
                }
                if q.psn > MAX_PSN {
                    bail!("the peer's QP {i} has PSN 0x{:x} (24 bits at most)", q.psn);
                }
                let span = q.len.checked_add(CONTROL_BYTES as u64);
                if span.and_then(|s| q.addr.checked_add(s)).is_none() {
                    bail!("the peer's QP {i} buffer wraps the address space");
                }
            }
            Ok(())
        }
        Message::Ready { .. } | Message::Abort { .. } | Message::Stop { .. } => Ok(()),
        Message::Report(None) => Ok(()),
        Message::Report(Some(r)) => {
            if let Some(bw) = &r.bw {
                if bw.messages > 0 && bw.elapsed_ns == 0 {
                    bail!("the peer measured messages in no time");
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

/// The uncompressed V2 cookie (hdrhistogram's base 0x1c849303 with 0x10), the
/// one `histogram_bytes` writes.
const V2_COOKIE: u32 = 0x1c84_9313;
/// Cookie, payload length, normalizing offset, digits, low, high, ratio.
const V2_HEADER_BYTES: usize = 40;

pub fn histogram_from(bytes: &[u8]) -> anyhow::Result<hdrhistogram::Histogram<u64>> {
    // The decoder allocates what the header's payload length says (up to 4 GiB)
    // before reading it: a peer's header must say what really follows.
    let word = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    };
    let payload = bytes.len().checked_sub(V2_HEADER_BYTES);
    if word(0) != Some(V2_COOKIE) || word(4).map(|n| n as usize) != payload {
        bail!(
            "the peer's histogram does not decode: not an uncompressed V2 histogram of its length"
        );
    }
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| anyhow!("the peer's histogram does not decode: {e:?}"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A plausible Hello of an Ethernet port.
    pub(crate) fn hello() -> Hello {
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

    /// The decoded message, or its error's text.
    fn decode(frame: &[u8]) -> Result<Message, String> {
        super::decode(frame).map_err(|e| format!("{e:#}"))
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
            validation: None,
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

    /// A header that claims more than follows is refused before the decoder
    /// allocates it; a buffer at the top of the address space is no panic.
    #[test]
    fn hostile_sizes_are_errors() {
        let mut h = crate::stats::histogram(&[1e-6]);
        h.record(5).unwrap();
        let good = histogram_bytes(&h);
        assert_eq!(histogram_from(&good).unwrap().len(), 2);
        let mut claims = good.clone();
        claims[4..8].copy_from_slice(&0xffff_fff0u32.to_be_bytes());
        assert!(histogram_from(&claims).is_err());
        assert!(histogram_from(&good[..good.len() - 1]).is_err());
        let mut hello = hello();
        hello.qps[0].len = u64::MAX;
        let e = round_trip(&Message::Hello(Box::new(hello))).unwrap_err();
        assert!(e.contains("wraps"), "{e}");
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
}
