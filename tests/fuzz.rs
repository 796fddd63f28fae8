//! Fuzz tests of every parser fed from outside the process, bounded so that
//! they run in `cargo test` (proptest's 256 cases, fewer where each case
//! writes files): size strings, the rack spec, sysfs values, CSV rows and the
//! verbs handshake messages. (The watchdog protocol has its own, beside it.)
//! Each parser must never panic, and what it accepts must be sane.

mod common;

use common::{fixture, scratch};
use fabricbench::doctor::{self, Selection, Severity};
use fabricbench::limits::pcie::{parse_link_speed, parse_link_width, MAX_GT_PER_S};
use fabricbench::limits::{detect, parse_limit, Detection};
use fabricbench::rack::check::CheckKind;
use fabricbench::rack::launch::MAX_TIMEOUT_S;
use fabricbench::rack::spec::Spec;
use fabricbench::report::csv::read_rows;
use fabricbench::sizes::parse_size;
use fabricbench::sysfs::rdma::{state_name, PhysState, PortRate, PortState, MAX_PORT_GBIT_PER_S};
use fabricbench::sysfs::{Reading, Root};
use fabricbench::verbs::device::LinkLayer;
use fabricbench::verbs::exchange::peer::check_peer;
use fabricbench::verbs::exchange::wire::{decode, encode, Hello, Message, QpInfo, PROTOCOL};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

/// A text as a hostile file or flag might hold it: anything, or something
/// close to a valid value.
fn text(near: &'static [&'static str]) -> impl Strategy<Value = String> {
    let near: Vec<String> = near.iter().map(|s| s.to_string()).collect();
    prop_oneof![
        any::<String>(),
        proptest::sample::select(near),
        "[ -~]{0,40}",
    ]
}

/// A float as TOML writes it, NaN and the infinities included.
fn toml_float(v: f64) -> String {
    match v {
        _ if v.is_nan() => "nan".into(),
        f64::INFINITY => "inf".into(),
        f64::NEG_INFINITY => "-inf".into(),
        _ => format!("{v:?}"),
    }
}

/// Any float, with the ones that break comparisons often.
fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        proptest::sample::select(vec![
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            -1.0,
            1e300,
            f64::MIN_POSITIVE,
        ]),
        -1e4f64..1e4,
    ]
}

proptest! {
    #[test]
    fn sizes_never_panic(t in text(&["1.9", "8", "1K", "-1", "1e30G", "nan", "inf", "1.5M", "18446744073709551616"])) {
        let _ = parse_size(&t);
    }

    /// Whole byte counts, with or without a suffix, read back as written.
    #[test]
    fn sizes_round_trip(n in 0u64..(1 << 23), suffix in 0usize..4, lower in any::<bool>()) {
        let (unit, mult) = [("", 1u64), ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)][suffix];
        let unit = if lower { unit.to_lowercase() } else { unit.to_string() };
        prop_assert_eq!(parse_size(&format!("{n}{unit}")).ok(), Some(n * mult));
        prop_assert_eq!(parse_size(&(n * mult).to_string()).ok(), Some(n * mult));
    }

    /// A limit that parses is a bandwidth: finite and above 0.
    #[test]
    fn limits_are_bandwidths(t in text(&["ib-ndr", "400Gb/s", "50 GB/s", "nan", "1e400", "0", "-5GB/s", "8e18Gb/s"])) {
        if let Ok(l) = parse_limit(&t) {
            prop_assert!(l.gbs.is_finite() && l.gbs > 0.0, "{t}: {l:?}");
        }
    }

    #[test]
    fn spec_text_never_panics(t in text(&["name = \"x\"\n[launch]\n", "[[check]]\nmin = nan\n", "[launch]\ntimeout_s = -1\n"])) {
        let _ = Spec::parse(&t);
    }

    /// Arbitrary values in a valid skeleton: refused in one line, or accepted
    /// with thresholds and a layout a run can have.
    #[test]
    fn accepted_specs_are_sane(
        nodes in prop_oneof![any::<i64>(), 0i64..4],
        per_node in prop_oneof![any::<i64>(), 0i64..9],
        timeout in prop_oneof![
            float().prop_map(toml_float),
            any::<i64>().prop_map(|i| i.to_string()),
            (-2i64..700_000).prop_map(|i| i.to_string()),
        ],
        metric in proptest::sample::select(vec!["busbw", "algbw", "time", "p99"]),
        size in text(&["1G", "8", "0", "1.9"]),
        min in prop_oneof![
            float().prop_map(toml_float),
            (float(), proptest::sample::select(vec!["ib-ndr", "400Gb/s", "nvlink5", "nope"]), any::<u32>())
                .prop_map(|(p, l, n)| format!("\"{p}% of {l} x {}\"", n % 4)),
            (-10.0f64..200.0).prop_map(|p| format!("\"{p}% of ib-ndr\"")),
        ],
        max in prop_oneof![Just(None), float().prop_map(|v| Some(toml_float(v)))],
        fraction in prop_oneof![float(), 0.0f64..1.5],
        latency in float(),
    ) {
        let text = spec(&Values {
            nodes: nodes.to_string(),
            per_node: per_node.to_string(),
            timeout,
            metric,
            size,
            min,
            max,
            fraction: toml_float(fraction),
            latency: toml_float(latency),
        });
        match Spec::parse(&text).map_err(|e| format!("{e:#}")) {
            Err(e) => prop_assert_eq!(e.lines().count(), 1, "{}", e),
            Ok(spec) => {
                prop_assert!((1..=MAX_TIMEOUT_S).contains(&spec.launch.timeout_s));
                prop_assert!(spec.launch.nodes >= 1 && spec.launch.ranks_per_node >= 1);
                for check in &spec.checks {
                    match &check.kind {
                        CheckKind::Row { min, max, .. } => {
                            for t in min.iter().chain(max) {
                                prop_assert!(t.value.is_finite() && t.value > 0.0, "{text}\n{t:?}");
                            }
                            if let (Some(lo), Some(hi)) = (min, max) {
                                prop_assert!(lo.value <= hi.value, "{text}");
                            }
                        }
                        CheckKind::AllPairs(t) => {
                            prop_assert!(t.bw_fraction > 0.0 && t.bw_fraction <= 1.0);
                            prop_assert!(t.latency_factor.is_finite() && t.latency_factor >= 1.0);
                        }
                        CheckKind::Counters { max, .. } => prop_assert!(!max.is_empty()),
                    }
                }
            }
        }
    }

    /// The one port-rate parser and the PCIe parsers: never a panic, and a value
    /// only where it is one a link can have.
    #[test]
    fn sysfs_value_parsers(t in text(&["400 Gb/sec (4X NDR)", "inf Gb/sec", "0 Gb/sec", "1e30 Gb/sec (4X NDR)",
                                       "32.0 GT/s PCIe", "Unknown", "NaN GT/s", "16", "x16", "4: ACTIVE", "9: ?"])) {
        if let Some(r) = PortRate::parse(&t) {
            prop_assert!(r.gbit_per_s > 0.0 && r.gbit_per_s <= MAX_PORT_GBIT_PER_S, "{t}");
        }
        if let Some(s) = parse_link_speed(&t) {
            prop_assert!(s > 0.0 && s <= MAX_GT_PER_S, "{t}");
        }
        if let Some(w) = parse_link_width(&t) {
            prop_assert!(w <= 32);
        }
        let _ = state_name::<PortState>(&t);
        let _ = state_name::<PhysState>(&t);
    }

    /// read_rows on any bytes: rows or an error, never a panic.
    #[test]
    fn csv_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1500), after_header in any::<bool>()) {
        let dir = scratch("fuzz-csv");
        let path = dir.join("x.csv");
        let mut content = Vec::new();
        if after_header {
            content.extend_from_slice(HEADER.as_bytes());
        }
        content.extend_from_slice(&bytes);
        std::fs::write(&path, &content).unwrap();
        if let Ok(rows) = read_rows(&path) {
            prop_assert!(!rows.is_empty());
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A valid row with one field replaced by anything.
    #[test]
    fn csv_fields_never_panic(field in 0usize..43, value in text(&["NaN", "inf", "-1", "", "\"", "1e999", "18446744073709551616"])) {
        let dir = scratch("fuzz-field");
        let path = dir.join("x.csv");
        let mut cells: Vec<String> = ROW.split(',').map(str::to_string).collect();
        let last = cells.len() - 1;
        cells[field.min(last)] = value;
        let mut w = csv::Writer::from_path(&path).unwrap();
        w.write_record(HEADER.trim_end().split(',')).unwrap();
        w.write_record(&cells).unwrap();
        w.flush().unwrap();
        let _ = read_rows(&path);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn wire_frames_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = decode(&bytes);
        let mut framed = (bytes.len() as u32).to_be_bytes().to_vec();
        framed.extend_from_slice(&bytes);
        let _ = decode(&framed);
    }

    /// A real message with one byte of its JSON changed, and a Hello of any
    /// numbers: decoded or refused, never a panic; what decodes goes through
    /// the peer checks without one either.
    #[test]
    fn wire_messages_never_panic(h in hello(), at in any::<prop::sample::Index>(), byte in any::<u8>(), max in any::<u64>()) {
        let mut frame = encode(&Message::Hello(Box::new(h.clone())));
        let i = 4 + at.index(frame.len() - 4);
        frame[i] = byte;
        if let Ok(Message::Hello(peer)) = decode(&frame) {
            let _ = check_peer(&h, &peer, max);
        }
        if let Ok(Message::Hello(peer)) = decode(&encode(&Message::Hello(Box::new(h.clone())))) {
            let _ = check_peer(&h, &peer, max);
        }
    }

    /// What one side encodes, the other decodes as it was (or refuses as implausible).
    #[test]
    fn wire_round_trip(h in hello(), size in any::<u64>(), reason in any::<String>()) {
        for msg in [
            Message::Ready { size },
            Message::Abort { reason },
            Message::Report(None),
        ] {
            prop_assert_eq!(decode(&encode(&msg)).unwrap(), msg);
        }
        let msg = Message::Hello(Box::new(h));
        match decode(&encode(&msg)) {
            Ok(back) => prop_assert_eq!(back, msg),
            Err(e) => prop_assert!(!e.to_string().starts_with("malformed"), "{e:#}"),
        }
    }
}

/// The values `accepted_specs_are_sane` puts in its spec, as TOML text.
struct Values {
    nodes: String,
    per_node: String,
    timeout: String,
    metric: &'static str,
    size: String,
    min: String,
    max: Option<String>,
    fraction: String,
    latency: String,
}

fn spec(v: &Values) -> String {
    let max = v
        .max
        .as_ref()
        .map_or(String::new(), |m| format!("max = {m}\n"));
    format!(
        "name = \"f\"\n[launch]\nnodes = {}\nranks_per_node = {}\ntimeout_s = {}\n\
         [[test]]\nname = \"ar\"\nbinary = \"all_reduce_perf\"\n\
         [[test]]\nname = \"pairs\"\nbinary = \"sendrecv_perf\"\nargs = [\"--all-pairs\"]\n\
         [[check]]\ntest = \"ar\"\nmetric = \"{}\"\nsize = {:?}\nmin = {}\n{max}\
         [[check]]\ntest = \"pairs\"\nmetric = \"all-pairs\"\nslow_fraction = {}\nslow_latency = {}\n",
        v.nodes, v.per_node, v.timeout, v.metric, v.size, v.min, v.fraction, v.latency
    )
}

/// The fuzz tests' fixed inputs are what they should be: the skeleton spec
/// parses with sane values, and the CSV row reads.
#[test]
fn the_fuzzed_skeletons_are_valid() {
    let good = Values {
        nodes: "2".into(),
        per_node: "8".into(),
        timeout: "60".into(),
        metric: "busbw",
        size: "1G".into(),
        min: "\"85% of ib-ndr x 2\"".into(),
        max: Some("1000".into()),
        fraction: "0.9".into(),
        latency: "2.0".into(),
    };
    let s = Spec::parse(&spec(&good)).unwrap();
    assert_eq!((s.checks.len(), s.launch.timeout_s), (2, 60));
    let dir = scratch("fuzz-row");
    let path = dir.join("x.csv");
    std::fs::write(&path, format!("{HEADER}{ROW}\n")).unwrap();
    assert_eq!(read_rows(&path).unwrap().len(), 1);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A Hello of any numbers and names, plausible or not.
fn hello() -> impl Strategy<Value = Hello> {
    let qp = (
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(qpn, psn, rkey, addr, len)| QpInfo {
            qpn,
            psn,
            rkey,
            addr,
            len,
        });
    (
        proptest::collection::vec(qp, 0..3),
        any::<String>(),
        proptest::sample::select(vec![256u32, 1024, 4096, 0, 1500]),
        any::<u32>(),
        prop_oneof![Just(None), (1.0f64..1e4).prop_map(Some)],
        any::<bool>(),
        any::<u16>(),
    )
        .prop_map(
            |(qps, host, active_mtu, max_rd_atomic, rate, ib, lid)| Hello {
                protocol: PROTOCOL.into(),
                program: "ib_write_bw".into(),
                settings: vec![("-s/--size".into(), "65536".into())],
                host,
                device: "rxe0".into(),
                port: 1,
                link: if ib {
                    LinkLayer::InfiniBand
                } else {
                    LinkLayer::Ethernet
                },
                lid,
                gid: "::ffff:10.0.0.1".parse().unwrap(),
                gid_index: (!ib).then_some(1),
                active_mtu,
                max_rd_atomic,
                rate: rate.map(|gbit_per_s| PortRate {
                    gbit_per_s,
                    text: format!("{gbit_per_s} Gb/sec (4X NDR)"),
                }),
                qps,
            },
        )
}

/// A fabricbench CSV header and one row of it (schema_version 1).
const HEADER: &str = "schema_version,run_id,timestamp,tool_version,backend,transport,library_version,device,hosts,nranks,nnodes,collective,datatype,redop,root,placement,size_bytes,count,iters,warmup_iters,avg_mode,cycle,time_us,algbw_gbs,busbw_gbs,busbw_factor,min_us,p50_us,p99_us,p999_us,max_us,wrong,slowest_rank,limit_name,limit_gbs,pct_of_limit,env,cpu_us,launch,peak_gbs,msg_rate_mpps,stdev_us,pair\n";
const ROW: &str = "1,r,t,0.1.0,mpi,shm,ompi,host,a,2,1,all_reduce,float,sum,-1,out-of-place,8,2,20,1,avg,0,0.5,0.01,0.02,1,0.4,0.5,0.9,1,1,0,0,ib-ndr,50,0.04,,0.1,stream,,,,";

/// A copy of the fixture tree `name` (links kept) in a scratch folder.
fn copy_tree(name: &str) -> PathBuf {
    let dir = scratch("fuzz-sysfs");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(fixture(name))
        .arg(dir.join("root"))
        .status()
        .unwrap();
    assert!(copied.success());
    dir.join("root")
}

fn put(root: &Path, abs: &str, text: &str) {
    std::fs::write(root.join(abs.trim_start_matches('/')), text).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any text in the files doctor and limit detection judge by: no panic; an
    /// unreadable rate of an active port is an error finding, never silence;
    /// every limit detected is a finite bandwidth; and the facts and the
    /// detection survive the JSON they cross the ranks in.
    #[test]
    fn sysfs_trees_never_panic(
        rate in text(&["400 Gb/sec (4X NDR)", "fast", "inf Gb/sec (4X NDR)", "8000000000000000000 Gb/sec (4X NDR)"]),
        speed in text(&["32.0 GT/s PCIe", "Unknown", "inf GT/s PCIe", "1e300 GT/s PCIe"]),
        width in text(&["16", "0", "x16", "4096"]),
        state in text(&["4: ACTIVE", "1: DOWN", "", "9: WHAT"]),
        mtu in text(&["9000", "jumbo", "-1", "99999999999"]),
    ) {
        let root = copy_tree("doctor/healthy");
        let port = "/sys/class/infiniband/mlx5_0/ports/1";
        put(&root, &format!("{port}/rate"), &rate);
        put(&root, "/sys/class/infiniband/mlx5_1/ports/1/state", &state);
        put(&root, "/sys/bus/pci/devices/0000:17:00.0/current_link_speed", &speed);
        put(&root, "/sys/bus/pci/devices/0000:18:00.0/max_link_width", &width);
        put(&root, "/sys/class/net/eth2/mtu", &mtu);
        let sysfs = Root::new(&root);
        let facts = doctor::collect(&sysfs, &Selection::default());
        let findings = doctor::check(std::slice::from_ref(&facts));
        let json = serde_json::to_vec(&facts).unwrap();
        prop_assert_eq!(&serde_json::from_slice::<doctor::NodeFacts>(&json).unwrap(), &facts);
        let judged = facts.hcas[0].ports[0].rate_gbps.clone();
        if PortRate::parse(rate.trim()).is_none() {
            prop_assert!(matches!(judged, Reading::Unreadable(_)));
            prop_assert!(
                findings.iter().any(|f| f.check == "unreadable"
                    && f.component == "mlx5_0:1"
                    && f.severity == Severity::Error),
                "{rate:?}: {findings:?}"
            );
        }
        let d = detect(&sysfs);
        for l in &d.limits {
            prop_assert!(l.gbs.is_finite() && l.gbs > 0.0, "{l:?}");
        }
        let json = serde_json::to_vec(&d).unwrap();
        prop_assert_eq!(serde_json::from_slice::<Detection>(&json).unwrap(), d);
        std::fs::remove_dir_all(root.parent().unwrap()).unwrap();
    }
}
