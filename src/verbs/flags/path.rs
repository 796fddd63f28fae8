//! perftest's path, QoS and NUMA flags of the verbs tests, as a flattened
//! group of the command line, and their checks into a `PathPlan`: the service
//! level, the GRH's traffic class, flow labels and hop limit, the P_Key index,
//! which GID (--ipv6, --bind_source_ip) and where the process runs
//! (--pin_cores, --numa_node, --disable_numa). What needs the device (the
//! P_Key table, the GID table, the NUMA node) is checked in `path` and `numa`.

use crate::cli::whole;
use crate::job::usage;
use crate::job::UsageError;
use crate::sysfs::numa::parse_cpu_list;
use crate::verbs::device::numa::CpuBinding;
pub use crate::verbs::device::numa::NumaRequest;
use std::net::IpAddr;

/// perftest's highest service level (MAX_SL).
const MAX_SL: u8 = 15;
/// A flow label has 20 bits.
pub const MAX_FLOW_LABEL: u32 = (1 << 20) - 1;
/// The GRH hop limit perftest sets (0xFF).
pub const DEFAULT_HOP_LIMIT: u8 = 0xff;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct PathArgs {
    /// Service level of the QP's address vector, 0-15 (default 0)
    #[arg(short = 'S', long = "sl", value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub sl: Option<u8>,
    /// Type of service, 0-255: the GRH traffic class (on RoCE v2 the IP DS field), as rdma_cm sets it for -R
    #[arg(short = 'T', long = "tos", value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub tos: Option<u8>,
    /// Traffic class of the GRH, 0-255 (if GRH is in use; default 0)
    #[arg(long = "tclass", value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub tclass: Option<u8>,
    /// Flow label of the GRH for each QP in turn, 20 bits each (if GRH is in use)
    #[arg(
        long = "flow_label",
        value_name = "FL0,FL1,...",
        allow_hyphen_values = true
    )]
    pub flow_label: Option<String>,
    /// Hop limit of the GRH, 0-255 (default 255, as perftest sets it)
    #[arg(short = 'L', long = "hop_limit", value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub hop_limit: Option<u8>,
    /// P_Key index of the QPs, within the port's P_Key table (default 0)
    #[arg(long = "pkey_index", value_parser = whole::<u16>(0), allow_hyphen_values = true)]
    pub pkey_index: Option<u16>,
    /// Use the port's IPv6 RoCE v2 GID (default: IPv4)
    #[arg(long = "ipv6", conflicts_with = "gid_index")]
    pub ipv6: bool,
    /// Use the GID that carries this IP address of the port's interface
    #[arg(long = "bind_source_ip", value_name = "IP", conflicts_with_all = ["gid_index", "ipv6"])]
    pub bind_source_ip: Option<String>,
    /// Run on these CPUs: 0, 0,1,2, 0-3 or 0-3,8,12-15 (under mpirun split among the node's ranks)
    #[arg(long = "pin_cores", value_name = "LIST", allow_hyphen_values = true)]
    pub pin_cores: Option<String>,
    /// Run on the CPUs and memory of this NUMA node (default: the device's node)
    #[arg(long = "numa_node", value_parser = whole::<u32>(0), allow_hyphen_values = true)]
    pub numa_node: Option<u32>,
    /// Disable NUMA auto-detection and binding
    #[arg(long = "disable_numa", conflicts_with_all = ["pin_cores", "numa_node"])]
    pub disable_numa: bool,
}

/// Which GID an Ethernet port uses when -x does not say.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum GidPreference {
    /// The RoCE v2 GID of an IPv4 address (then of a global IPv6 one).
    #[default]
    Ipv4,
    /// --ipv6: a RoCE v2 GID of an IPv6 address, global before link-local.
    Ipv6,
    /// --bind_source_ip: the GID of this address.
    Source(IpAddr),
}

/// The checked path flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathPlan {
    pub sl: u8,
    /// The GRH traffic class (-T or --tclass).
    pub traffic_class: u8,
    /// The flag that set it, for the header.
    pub traffic_class_flag: Option<&'static str>,
    /// --flow_label: QP i takes label i mod n (none: 0).
    pub flow_labels: Vec<u32>,
    pub hop_limit: u8,
    pub pkey_index: u16,
    pub gid: GidPreference,
    pub numa: NumaRequest,
    /// Set on the device (`path::on_device`): the P_Key of the index, and
    /// what NUMA binding did.
    pub pkey: Option<u16>,
    pub placement: Option<CpuBinding>,
}

impl Default for PathPlan {
    fn default() -> Self {
        PathPlan {
            sl: 0,
            traffic_class: 0,
            traffic_class_flag: None,
            flow_labels: Vec::new(),
            hop_limit: DEFAULT_HOP_LIMIT,
            pkey_index: 0,
            gid: GidPreference::Ipv4,
            numa: NumaRequest::Auto,
            pkey: None,
            placement: None,
        }
    }
}

impl PathPlan {
    /// The flow label of QP `qp`.
    pub fn flow_label(&self, qp: usize) -> u32 {
        match self.flow_labels.len() {
            0 => 0,
            n => self.flow_labels[qp % n],
        }
    }

    /// --bind_source_ip: the address the TCP exchange binds to, as perftest.
    pub fn source_ip(&self) -> Option<IpAddr> {
        match self.gid {
            GidPreference::Source(ip) => Some(ip),
            _ => None,
        }
    }
}

impl PathArgs {
    pub fn plan(&self) -> Result<PathPlan, UsageError> {
        if let Some(sl) = self.sl.filter(|&sl| sl > MAX_SL) {
            return Err(usage(format!(
                "-S/--sl {sl}: there are only {} service levels; use 0 to {MAX_SL}",
                MAX_SL + 1
            )));
        }
        let (traffic_class, traffic_class_flag) = match (self.tos, self.tclass) {
            (Some(tos), Some(tclass)) if tos != tclass => {
                return Err(usage(format!(
                    "-T/--tos {tos} and --tclass {tclass}: both set the GRH traffic class; give one of them"
                )))
            }
            (Some(tos), _) => (tos, Some("-T/--tos")),
            (None, Some(tclass)) => (tclass, Some("--tclass")),
            (None, None) => (0, None),
        };
        let flow_labels = match &self.flow_label {
            Some(list) => parse_flow_labels(list)?,
            None => Vec::new(),
        };
        let gid = match (&self.bind_source_ip, self.ipv6) {
            (Some(ip), _) => GidPreference::Source(ip.trim().parse().map_err(|_| {
                usage(format!(
                    "--bind_source_ip '{ip}': not an IP address; give an address of the port's interface, e.g. 10.0.0.1 or fd00::1"
                ))
            })?),
            (None, true) => GidPreference::Ipv6,
            (None, false) => GidPreference::Ipv4,
        };
        let numa = match (&self.pin_cores, self.numa_node, self.disable_numa) {
            (Some(_), Some(node), _) => {
                // clap refuses the pair first; kept for a plan built in code.
                return Err(usage(format!(
                    "--numa_node {node}: --numa_node and --pin_cores cannot be used together; give one"
                )));
            }
            (Some(list), None, _) => NumaRequest::Cores {
                cpus: parse_cpu_list(list).map_err(|e| {
                    usage(format!(
                        "--pin_cores '{list}': {e}; give CPUs as 0, 0,1,2, 0-3 or 0-3,8,12-15"
                    ))
                })?,
                list: list.clone(),
                ranks: 1,
            },
            (None, Some(node), _) => NumaRequest::Node(node),
            (None, None, true) => NumaRequest::Disabled,
            (None, None, false) => NumaRequest::Auto,
        };
        Ok(PathPlan {
            sl: self.sl.unwrap_or(0),
            traffic_class,
            traffic_class_flag,
            flow_labels,
            hop_limit: self.hop_limit.unwrap_or(DEFAULT_HOP_LIMIT),
            pkey_index: self.pkey_index.unwrap_or(0),
            gid,
            numa,
            pkey: None,
            placement: None,
        })
    }
}

/// "--flow_label 5,0x10": one label per QP in turn, each of 20 bits
/// (decimal or 0x hex, as perftest's strtol reads them).
fn parse_flow_labels(list: &str) -> Result<Vec<u32>, UsageError> {
    list.split(',')
        .map(|item| {
            let t = item.trim();
            let value = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(hex) => u32::from_str_radix(hex, 16).ok(),
                None => t.parse::<u32>().ok(),
            };
            value.filter(|&v| v <= MAX_FLOW_LABEL).ok_or_else(|| {
                usage(format!(
                    "--flow_label '{list}': '{t}' is not a flow label; each is 0 to {MAX_FLOW_LABEL} (0xfffff, 20 bits), e.g. --flow_label 1,2"
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
    use crate::verbs::flags::path::{GidPreference, NumaRequest, PathPlan};
    use crate::verbs::flags::{parse, Plan};

    const WRITE_BW: Benchmark = Benchmark::new(Verb::Write, Test::Bw);

    fn plan(args: &[&str]) -> Result<Plan, String> {
        parse(
            WRITE_BW,
            std::iter::once("ib_write_bw").chain(args.iter().copied()),
        )
        .map_err(|e| e.0)
    }

    #[test]
    fn defaults_are_perftests() {
        let p = plan(&[]).unwrap().path;
        assert_eq!(p, PathPlan::default());
        assert_eq!(
            (p.sl, p.traffic_class, p.hop_limit, p.pkey_index),
            (0, 0, 255, 0)
        );
        assert_eq!(p.flow_label(3), 0);
        assert_eq!((p.gid, p.numa), (GidPreference::Ipv4, NumaRequest::Auto));
    }

    #[test]
    fn values_reach_the_plan() {
        let p = plan(&[
            "-S",
            "3",
            "-T",
            "96",
            "--flow_label",
            "1,0x10",
            "-L",
            "7",
            "--pkey_index",
            "2",
            "--bind_source_ip",
            "10.99.0.1",
            "--pin_cores",
            "0-1,3",
        ])
        .unwrap()
        .path;
        assert_eq!(
            (p.sl, p.traffic_class, p.hop_limit, p.pkey_index),
            (3, 96, 7, 2)
        );
        assert_eq!(p.traffic_class_flag, Some("-T/--tos"));
        assert_eq!(
            (p.flow_label(0), p.flow_label(1), p.flow_label(2)),
            (1, 16, 1)
        );
        assert_eq!(p.gid, GidPreference::Source("10.99.0.1".parse().unwrap()));
        assert_eq!(
            p.numa,
            NumaRequest::Cores {
                list: "0-1,3".into(),
                cpus: vec![0, 1, 3],
                ranks: 1
            }
        );
        let p = plan(&["--tclass", "32", "--ipv6", "--numa_node", "1"])
            .unwrap()
            .path;
        assert_eq!(
            (p.traffic_class, p.traffic_class_flag),
            (32, Some("--tclass"))
        );
        assert_eq!((p.gid, p.numa), (GidPreference::Ipv6, NumaRequest::Node(1)));
        assert_eq!(
            plan(&["--disable_numa"]).unwrap().path.numa,
            NumaRequest::Disabled
        );
        // The same value twice is no contradiction.
        assert_eq!(
            plan(&["-T", "8", "--tclass", "8"])
                .unwrap()
                .path
                .traffic_class,
            8
        );
    }

    #[test]
    fn bad_values_are_one_line_naming_the_flag() {
        for (args, want) in [
            (
                vec!["-S", "16"],
                "-S/--sl 16: there are only 16 service levels; use 0 to 15",
            ),
            (
                vec!["-S", "-1"],
                "-S/--sl -1: use a whole number from 0 to 255",
            ),
            (
                vec!["-T", "256"],
                "-T/--tos 256: too large; use a whole number from 0 to 255",
            ),
            (
                vec!["--tclass", "300"],
                "--tclass 300: too large; use a whole number from 0 to 255",
            ),
            (
                vec!["-T", "8", "--tclass", "16"],
                "-T/--tos 8 and --tclass 16: both set the GRH traffic class",
            ),
            (
                vec!["--flow_label", "1048576"],
                "--flow_label '1048576': '1048576' is not a flow label; each is 0 to 1048575",
            ),
            (
                vec!["--flow_label", "1,,2"],
                "--flow_label '1,,2': '' is not a flow label",
            ),
            (
                vec!["--flow_label", "-3"],
                "--flow_label '-3': '-3' is not a flow label",
            ),
            (
                vec!["-L", "256"],
                "-L/--hop_limit 256: too large; use a whole number from 0 to 255",
            ),
            (
                vec!["--pkey_index", "70000"],
                "--pkey_index 70000: too large; use a whole number from 0 to 65535",
            ),
            (
                vec!["--bind_source_ip", "10.0.0"],
                "--bind_source_ip '10.0.0': not an IP address",
            ),
            (vec!["--ipv6", "-x", "1"], "--ipv6"),
            (
                vec!["--bind_source_ip", "::1", "--ipv6"],
                "--bind_source_ip",
            ),
            (
                vec!["--pin_cores", "3-1"],
                "--pin_cores '3-1': invalid CPU range 3-1 (start > end)",
            ),
            (
                vec!["--pin_cores", "a"],
                "--pin_cores 'a': invalid CPU number 'a'",
            ),
            (vec!["--pin_cores", "0", "--numa_node", "0"], "--numa_node"),
            (
                vec!["--numa_node", "-1"],
                "--numa_node -1: use a whole number from 0",
            ),
            (vec!["--disable_numa", "--numa_node", "0"], "--disable_numa"),
        ] {
            let e = plan(&args).unwrap_err();
            assert!(e.contains(want), "{args:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
