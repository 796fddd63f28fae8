//! The PCIe model: what a link of a given rate and width carries per direction,
//! the generations that define the rates, and the state of one device's link.

use super::{trim_number, Limit};
use crate::sysfs::Reading;
use serde::{Deserialize, Serialize};

/// Per-direction bandwidth of a PCIe link in GB/s: transfer rate times lanes
/// times the payload fraction of its encoding (8b/10b up to 5 GT/s, 128b/130b
/// for 8-32 GT/s, 242 of every 256 FLIT bytes at 64 GT/s), over 8 bits. Packet
/// headers cost a further 5-15% that no transfer escapes, which is why 85-90%
/// of this is a healthy result.
pub fn pcie_gbs(gt_per_s: f64, lanes: u32) -> f64 {
    let efficiency = if gt_per_s <= 5.0 {
        8.0 / 10.0
    } else if gt_per_s <= 32.0 {
        128.0 / 130.0
    } else {
        242.0 / 256.0
    };
    gt_per_s * lanes as f64 * efficiency / 8.0
}

/// PCI-SIG's transfer rates (GT/s) and the generations that introduced them.
const PCIE_GENERATIONS: [(f64, u32); 6] = [
    (2.5, 1),
    (5.0, 2),
    (8.0, 3),
    (16.0, 4),
    (32.0, 5),
    (64.0, 6),
];

/// A PCIe link: transfer rate per lane and lane count.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PcieLink {
    pub gts: f64,
    pub width: u32,
}

impl PcieLink {
    /// The generation whose rate this is (5 for 32 GT/s); None for a rate no
    /// generation defines.
    pub fn generation(&self) -> Option<u32> {
        PCIE_GENERATIONS
            .iter()
            .find(|(rate, _)| (rate - self.gts).abs() < 0.01)
            .map(|(_, generation)| *generation)
    }

    /// `{prefix}5` for 32 GT/s; the rate itself ("6 GT/s") where no generation has it.
    pub(super) fn generation_or_rate(&self, prefix: &str) -> String {
        self.generation().map_or_else(
            || format!("{} GT/s", trim_number(self.gts)),
            |g| format!("{prefix}{g}"),
        )
    }

    /// Per direction, GB/s (see [`pcie_gbs`]).
    pub fn gbs_per_direction(&self) -> f64 {
        pcie_gbs(self.gts, self.width)
    }

    /// "PCIe Gen5 x16".
    pub fn describe(&self) -> String {
        format!("PCIe {} x{}", self.generation_or_rate("Gen"), self.width)
    }

    /// Whether this link runs slower than `other` in rate or in width.
    pub fn below(&self, other: &PcieLink) -> bool {
        self.gts < other.gts || self.width < other.width
    }
}

/// The fastest lane believed: 256 GT/s, two generations beyond PCIe 7's 128.
/// A speed above it (or zero, or not finite) is no speed, and as a limit it
/// would make every result a fraction of a percent.
pub const MAX_GT_PER_S: f64 = 256.0;
/// The widest link PCIe defines.
pub const MAX_WIDTH: u32 = 32;

/// sysfs's link speed: "16.0 GT/s PCIe" or "8 GT/s" -> 16.0, 8.0; "Unknown" and
/// speeds no link runs at -> None.
pub fn parse_link_speed(speed: &str) -> Option<f64> {
    let (number, rest) = speed.trim().split_once(' ')?;
    let gts: f64 = rest
        .starts_with("GT/s")
        .then(|| number.parse().ok())
        .flatten()?;
    (gts > 0.0 && gts <= MAX_GT_PER_S).then_some(gts)
}

/// sysfs's link width: "16" -> 16; 0 is a link that did not train. Wider than
/// x32 -> None.
pub fn parse_link_width(width: &str) -> Option<u32> {
    width.parse().ok().filter(|w| *w <= MAX_WIDTH)
}

/// What sysfs says about the PCIe link of one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PcieState {
    /// The best both ends support: min of the device's and its upstream port's maxima.
    pub capable: PcieLink,
    /// The device's own maximum (above `capable` for a Gen5 card in a Gen4 slot).
    pub device_max: PcieLink,
    /// What the link runs at now (GPUs drop to lower speeds when idle).
    pub current: Reading<PcieLink>,
}

impl PcieState {
    /// The limit the device's copies to and from host memory are compared with.
    pub fn limit(&self) -> Limit {
        Limit {
            name: format!("{} (sysfs)", self.capable.describe()),
            gbs: self.capable.gbs_per_direction(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse_limit;
    use super::*;

    #[test]
    fn pcie_table_matches_the_formula() {
        for (name, gt) in [
            ("pcie3x16", 8.0),
            ("pcie4x16", 16.0),
            ("pcie5x16", 32.0),
            ("pcie6x16", 64.0),
        ] {
            let table = parse_limit(name).unwrap().gbs;
            let formula = pcie_gbs(gt, 16);
            assert!(
                (table - formula).abs() / formula < 0.001,
                "{name}: {table} vs {formula}"
            );
        }
        assert!((pcie_gbs(2.5, 1) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn link_rates_per_generation() {
        let gen5 = PcieLink {
            gts: 32.0,
            width: 16,
        };
        assert_eq!(gen5.generation(), Some(5));
        assert!((gen5.gbs_per_direction() - 63.015).abs() < 0.01);
        assert_eq!(gen5.describe(), "PCIe Gen5 x16");
        let gen4 = PcieLink {
            gts: 16.0,
            width: 16,
        };
        assert!((gen4.gbs_per_direction() - 31.51).abs() < 0.01);
        let gen2 = PcieLink { gts: 5.0, width: 8 };
        assert!((gen2.gbs_per_direction() - 4.0).abs() < 1e-9);
        let odd = PcieLink { gts: 6.0, width: 4 };
        assert_eq!(
            (odd.generation(), odd.describe()),
            (None, "PCIe 6 GT/s x4".into())
        );
        assert!(odd.below(&gen2) && !gen5.below(&gen4));
        assert_eq!(parse_link_speed("32.0 GT/s PCIe\n"), Some(32.0));
        assert_eq!(parse_link_speed("8 GT/s"), Some(8.0));
        assert_eq!(parse_link_speed("Unknown"), None);
        assert_eq!(parse_link_speed("fast GT/s"), None);
        assert_eq!(parse_link_speed("16.0 MT/s"), None);
        for garbage in [
            "inf GT/s",
            "NaN GT/s",
            "0 GT/s",
            "-8 GT/s",
            "1e300 GT/s",
            "257 GT/s",
        ] {
            assert_eq!(parse_link_speed(garbage), None, "{garbage}");
        }
        assert_eq!(parse_link_speed("256 GT/s"), Some(256.0));
        assert_eq!(
            ["16", "0", "32", "33", "x16", "-1", ""].map(parse_link_width),
            [Some(16), Some(0), Some(32), None, None, None, None]
        );
    }
}
