//! What sysfs says about an RDMA port (`/sys/class/infiniband/DEV/ports/N`): its
//! state and physical state, its rate and its link layer. Limit detection,
//! doctor and the verbs tests read ports here and parse rates and states only here.

use super::{Reading, Root};
use serde::{Deserialize, Serialize};
use std::fmt::Display;

/// Where sysfs lists the RDMA devices.
pub const INFINIBAND: &str = "/sys/class/infiniband";

/// The sysfs folder of port `port` of RDMA device `device`.
pub fn port_dir(device: &str, port: impl Display) -> String {
    format!("{INFINIBAND}/{device}/ports/{port}")
}

/// The states sysfs prints as "N: NAME" and verbs reports by number.
pub trait KernelState: Copy + 'static {
    const ALL: &'static [Self];
    /// The number: `ibv_port_state`, `ibv_port_attr.phys_state`, sysfs's "N:".
    fn code(self) -> u32;
    /// The kernel's name, as sysfs prints it.
    fn name(self) -> &'static str;

    fn from_code(code: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| s.code() == code)
    }
}

/// A port's logical state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    Down = 1,
    Init = 2,
    Armed = 3,
    Active = 4,
    ActiveDefer = 5,
}

impl KernelState for PortState {
    const ALL: &'static [Self] = &[
        PortState::Down,
        PortState::Init,
        PortState::Armed,
        PortState::Active,
        PortState::ActiveDefer,
    ];

    fn code(self) -> u32 {
        self as u32
    }

    fn name(self) -> &'static str {
        match self {
            PortState::Down => "DOWN",
            PortState::Init => "INIT",
            PortState::Armed => "ARMED",
            PortState::Active => "ACTIVE",
            PortState::ActiveDefer => "ACTIVE_DEFER",
        }
    }
}

/// A port's physical state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhysState {
    Sleep = 1,
    Polling = 2,
    Disabled = 3,
    PortConfigurationTraining = 4,
    LinkUp = 5,
    LinkErrorRecovery = 6,
    PhyTest = 7,
}

impl KernelState for PhysState {
    const ALL: &'static [Self] = &[
        PhysState::Sleep,
        PhysState::Polling,
        PhysState::Disabled,
        PhysState::PortConfigurationTraining,
        PhysState::LinkUp,
        PhysState::LinkErrorRecovery,
        PhysState::PhyTest,
    ];

    fn code(self) -> u32 {
        self as u32
    }

    fn name(self) -> &'static str {
        match self {
            PhysState::Sleep => "Sleep",
            PhysState::Polling => "Polling",
            PhysState::Disabled => "Disabled",
            PhysState::PortConfigurationTraining => "PortConfigurationTraining",
            PhysState::LinkUp => "LinkUp",
            PhysState::LinkErrorRecovery => "LinkErrorRecovery",
            PhysState::PhyTest => "Phy Test",
        }
    }
}

/// The name of a state as sysfs prints it ("4: ACTIVE" -> "ACTIVE"): the name of
/// a number `S` knows, else the text after the number as the kernel wrote it.
pub fn state_name<S: KernelState>(text: &str) -> String {
    match text.split_once(':') {
        Some((code, name)) => code
            .trim()
            .parse()
            .ok()
            .and_then(S::from_code)
            .map_or_else(|| name.trim().to_string(), |s| s.name().to_string()),
        None => text.to_string(),
    }
}

/// A port's rate as sysfs prints it: "400 Gb/sec (4X NDR)".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PortRate {
    pub gbit_per_s: f64,
    pub text: String,
}

/// The fastest port rate believed: 10 Tb/s, well beyond any port sold (800 Gb/s
/// today). A rate above it is a driver's or a fixture's garbage, and as a limit
/// it would make every result a fraction of a percent.
pub const MAX_PORT_GBIT_PER_S: f64 = 10_000.0;

impl PortRate {
    /// "400 Gb/sec (4X NDR)" -> 400 Gb/s; None for text of another form and for
    /// a rate that is no rate (zero, negative, not finite, above
    /// [`MAX_PORT_GBIT_PER_S`]).
    pub fn parse(text: &str) -> Option<PortRate> {
        let text = text.trim();
        let (number, unit) = text.split_once(' ')?;
        let gbit_per_s: f64 = unit
            .starts_with("Gb/sec")
            .then(|| number.parse().ok())
            .flatten()?;
        (gbit_per_s > 0.0 && gbit_per_s <= MAX_PORT_GBIT_PER_S).then(|| PortRate {
            gbit_per_s,
            text: text.to_string(),
        })
    }
}

/// Lanes of a rate's text: 4 for "400 Gb/sec (4X NDR)".
fn lanes(rate: &str) -> Option<u32> {
    rate.split_once('(')
        .and_then(|(_, rest)| rest.split_once('X'))
        .and_then(|(n, _)| n.trim().parse().ok())
}

/// One RDMA port as sysfs reports it; None where a file is absent.
#[derive(Clone, Debug, PartialEq)]
pub struct RdmaPort {
    /// "ACTIVE", "DOWN", "INIT", "ARMED" (sysfs "4: ACTIVE" without its number).
    pub state: Option<String>,
    /// "LinkUp", "Polling", "Disabled", ...
    pub phys_state: Option<String>,
    /// The rate file as it reads: "400 Gb/sec (4X NDR)".
    pub rate_text: Option<String>,
    /// That text parsed.
    pub rate: Reading<PortRate>,
    /// Lanes: 4 for "4X".
    pub lanes: Option<u32>,
    /// "InfiniBand" or "Ethernet".
    pub link_layer: Option<String>,
}

/// Reads the port whose sysfs folder is `dir` (see [`port_dir`]).
pub fn read_port(root: &Root, dir: &str) -> RdmaPort {
    let rate_text = root.read(&format!("{dir}/rate"));
    RdmaPort {
        state: root
            .read(&format!("{dir}/state"))
            .filter(|s| !s.is_empty())
            .map(|s| state_name::<PortState>(&s)),
        phys_state: root
            .read(&format!("{dir}/phys_state"))
            .map(|s| state_name::<PhysState>(&s)),
        rate: read_rate(root, dir),
        lanes: rate_text.as_deref().and_then(lanes),
        rate_text,
        link_layer: root.read(&format!("{dir}/link_layer")),
    }
}

/// The rate of the port whose sysfs folder is `dir`.
pub fn read_rate(root: &Root, dir: &str) -> Reading<PortRate> {
    root.read_with(&format!("{dir}/rate"), PortRate::parse)
}

#[cfg(test)]
mod tests {
    use super::super::fixture::Tree;
    use super::*;

    #[test]
    fn rates_parse() {
        let r = PortRate::parse("100 Gb/sec (4X EDR)\n").unwrap();
        assert_eq!(
            (r.gbit_per_s, r.text.as_str()),
            (100.0, "100 Gb/sec (4X EDR)")
        );
        assert_eq!(
            PortRate::parse("2.5 Gb/sec (1X SDR)").unwrap().gbit_per_s,
            2.5
        );
        assert_eq!(lanes("2.5 Gb/sec (1X SDR)"), Some(1));
        assert_eq!(lanes("400 Gb/sec (4X NDR)"), Some(4));
        assert_eq!(lanes("400 Gb/sec"), None);
        // Text of another form, and rates that are no rate (no limit can be one).
        for bad in [
            "fast",
            "",
            "400 GB/sec",
            "x Gb/sec (4X NDR)",
            "400",
            "0 Gb/sec",
            "-5 Gb/sec",
            "inf Gb/sec",
            "NaN Gb/sec",
            "8000000000000000000 Gb/sec (4X NDR)",
            "10001 Gb/sec",
        ] {
            assert_eq!(PortRate::parse(bad), None, "{bad}");
        }
        assert_eq!(PortRate::parse("1e3 Gb/sec").unwrap().gbit_per_s, 1000.0);
        assert!(PortRate::parse("10000 Gb/sec").is_some());
    }

    #[test]
    fn states_are_named_once() {
        let port = state_name::<PortState>;
        let phys = state_name::<PhysState>;
        assert_eq!(port("4: ACTIVE"), "ACTIVE");
        assert_eq!(port("1: DOWN"), "DOWN");
        assert_eq!(port("5: ACTIVE_DEFER"), "ACTIVE_DEFER");
        assert_eq!(phys("5: LinkUp"), "LinkUp");
        assert_eq!(phys("7: Phy Test"), "Phy Test");
        // What the table does not know is kept as the kernel wrote it.
        assert_eq!(port("0: NOP"), "NOP");
        assert_eq!(port("ACTIVE"), "ACTIVE");
        assert_eq!(PortState::from_code(4), Some(PortState::Active));
        assert_eq!(PortState::from_code(0), None);
        assert_eq!(
            PhysState::from_code(2).map(PhysState::name),
            Some("Polling")
        );
        assert_eq!(PhysState::from_code(8), None);
    }

    #[test]
    fn reads_a_port_and_an_unparsable_rate() {
        let t = Tree::temp("sysfs-rdma");
        let ok = port_dir("mlx5_0", 1);
        t.put(&format!("{ok}/state"), "4: ACTIVE");
        t.put(&format!("{ok}/phys_state"), "5: LinkUp");
        t.put(&format!("{ok}/rate"), "400 Gb/sec (4X NDR)");
        t.put(&format!("{ok}/link_layer"), "InfiniBand");
        let bad = port_dir("mlx5_1", 1);
        t.put(&format!("{bad}/state"), "");
        t.put(&format!("{bad}/rate"), "fast (4X NDR)");
        let root = t.root();
        let p = read_port(&root, &ok);
        assert_eq!(p.state.as_deref(), Some("ACTIVE"));
        assert_eq!(p.phys_state.as_deref(), Some("LinkUp"));
        assert_eq!(p.rate.clone().value().map(|r| r.gbit_per_s), Some(400.0));
        assert_eq!(p.lanes, Some(4));
        assert_eq!(p.link_layer.as_deref(), Some("InfiniBand"));
        assert_eq!(read_rate(&root, &ok), p.rate);
        // The text of a rate that does not parse is kept, and said unreadable.
        let q = read_port(&root, &bad);
        assert_eq!(q.rate_text.as_deref(), Some("fast (4X NDR)"));
        assert_eq!(
            q.rate.unreadable().and_then(|u| u.text.as_deref()),
            Some("fast (4X NDR)")
        );
        assert_eq!(q.lanes, Some(4));
        assert_eq!((q.state.as_deref(), q.phys_state), (None, None));
        let none = read_port(&root, &port_dir("mlx5_9", 1));
        assert_eq!((none.rate, none.rate_text), (Reading::Absent, None));
    }
}
