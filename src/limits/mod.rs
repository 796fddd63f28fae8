//! Theoretical limits that busbw is compared with. NVLink and memory limits come
//! from NVML, in `gpu::links`.
//!
//! - this file: [`Limit`], the `--limit` parser, the binding limit and the
//!   percent of it, the run's choice and its one-line description;
//! - `named`: the table of named links (`--limit ib-ndr`);
//! - `pcie`: the PCIe model (rates, generations, encoding, one device's link);
//! - `detect`: detection from sysfs (RDMA port rates, PCIe links of RDMA NICs
//!   and GPUs, the link a GPU's copies cross) and the merge across nodes.
//!
//! Every figure is per direction in GB/s (1 GB/s = 1e9 bytes/s): nccl-tests'
//! busbw of a bandwidth-bound collective approaches the per-direction rate of
//! the slowest link it crosses. Each is the link's data rate after line
//! encoding; packet headers (TLP, Ethernet/IB framing) lower what a payload can
//! reach, so 100% is an upper bound, not a target.

pub mod detect;
pub mod named;
pub mod pcie;

pub use detect::{detect, detect_rails, merge, pci_device_dir, pcie_state, Detection, Rails};
pub use named::{NamedLink, NAMED_LINKS};
pub use pcie::{pcie_gbs, PcieLink, PcieState};

use crate::cli::Rule;
use anyhow::{anyhow, bail};
use serde::{Deserialize, Serialize};

/// A bandwidth that busbw is compared with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    /// As given ("ib-ndr", "400 Gb/s"), as detected ("rdma-port 400 Gb/s"), or as
    /// read for a GPU's copies ("PCIe Gen5 x16 (sysfs)").
    pub name: String,
    /// Per direction, GB/s (1e9 bytes/s).
    pub gbs: f64,
}

impl Limit {
    /// "ib-ndr 50 GB/s"; a limit given as "50 GB/s" is said once.
    pub fn label(&self) -> String {
        let value = format!("{} GB/s", trim_number(self.gbs));
        match self.name == value {
            true => value,
            false => format!("{} {value}", self.name),
        }
    }
}

/// A data rate in Gb/s as the per-direction GB/s every limit is in.
pub fn gbs_of_gbits(gbit_per_s: f64) -> f64 {
    gbit_per_s / 8.0
}

/// Four significant digits, no trailing zeros: "15.75", "50", "0.3125" (limits,
/// and the figures of the table's lines under `--expected`).
pub fn trim_number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let decimals = (3 - x.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{x:.decimals$}");
    // Only decimals lose their trailing zeros: 1000 stays 1000.
    match s.contains('.') {
        true => s.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => s,
    }
}

fn known_names() -> String {
    NAMED_LINKS
        .iter()
        .flat_map(|l| l.names.iter().copied())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A limit given as a number, in GB/s: from 1 MB/s to 1 PB/s (the fastest link
/// named here is 1,800 GB/s); beyond it no measurement could be judged by it.
const LIMIT_GBS: Rule = Rule {
    least: 1e-3,
    above: false,
    most: 1e6,
    what: "a bandwidth in GB/s",
    example: "50GB/s or 400Gb/s",
};

/// Parses one `--limit`: a name of the table, or a number with an optional unit
/// (`50`, `50GB/s` and `50 GB/s` are bytes; `400Gb/s` is bits).
pub fn parse_limit(text: &str) -> anyhow::Result<Limit> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    if let Some(link) = NAMED_LINKS
        .iter()
        .find(|l| l.names.contains(&lower.as_str()))
    {
        return Ok(Limit {
            name: lower,
            gbs: link.gbs,
        });
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || ".eE+-".contains(c)))
        .unwrap_or(t.len());
    let (number, unit) = (&t[..split], t[split..].trim());
    let value: f64 = number.parse().map_err(|_| {
        anyhow!(
            "'{text}' is neither a link name ({}) nor a number like 50GB/s or 400Gb/s",
            known_names()
        )
    })?;
    let (gbs, unit_name) = match unit {
        "" | "GB/s" => (value, "GB/s"),
        "Gb/s" => (gbs_of_gbits(value), "Gb/s"),
        other => {
            bail!("'{text}': unit '{other}' is not GB/s (bytes) or Gb/s (bits)")
        }
    };
    // One message, not a context chain: clap prints only an error's outermost line.
    LIMIT_GBS.check(gbs).map_err(|e| anyhow!("'{text}': {e}"))?;
    Ok(Limit {
        name: format!("{} {unit_name}", trim_number(value)),
        gbs,
    })
}

/// The limit pct_of_limit is taken against: the lowest, since busbw cannot pass
/// the slowest link it crosses.
pub fn binding(limits: &[Limit]) -> Option<&Limit> {
    limits.iter().min_by(|a, b| a.gbs.total_cmp(&b.gbs))
}

/// busbw as a percentage of `limit`.
pub fn percent_of(busbw_gbs: f64, limit: &Limit) -> f64 {
    busbw_gbs / limit.gbs * 100.0
}

/// The limits of a run: those given with `--limit`, else those detected.
pub fn choose(given: &[Limit], detected: &Detection) -> Vec<Limit> {
    let mut limits = if given.is_empty() {
        detected.limits.clone()
    } else {
        given.to_vec()
    };
    limits.sort_by(|a, b| a.gbs.total_cmp(&b.gbs));
    limits
}

/// One line for headers and plots: "no limit (...)" or the limits and which
/// one pct_of_limit uses.
pub fn describe(limits: &[Limit], given: bool) -> String {
    match binding(limits) {
        None => "no limit (none given with --limit, none detected)".to_string(),
        Some(b) => {
            let all: Vec<String> = limits.iter().map(Limit::label).collect();
            format!(
                "{} ({}); pct_of_limit against {}",
                all.join(", "),
                if given { "given" } else { "detected" },
                b.label()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `parse_limit` with its message as the user reads it.
    fn parse_limit(text: &str) -> Result<Limit, String> {
        super::parse_limit(text).map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn named_links_per_direction() {
        let gbs = |n: &str| parse_limit(n).unwrap().gbs;
        assert_eq!(gbs("nvlink4"), 450.0);
        assert_eq!(gbs("NVLink3"), 300.0);
        assert_eq!(gbs("nvlink5"), 900.0);
        assert_eq!(gbs("ib-ndr"), 50.0);
        assert_eq!(gbs("400g"), 50.0);
        assert_eq!(gbs("200g"), gbs("ib-hdr"));
        assert_eq!(gbs("800g"), 100.0);
        assert_eq!(gbs("2.5g"), 0.3125);
        assert_eq!(gbs("1g"), 0.125);
        assert_eq!(parse_limit("400G").unwrap().name, "400g");
        // Bidirectional vendor totals are halved; per-direction ones are not.
        for link in NAMED_LINKS {
            assert_eq!(
                link.vendor_bidirectional,
                link.names[0].starts_with("nvlink"),
                "{}",
                link.names[0]
            );
        }
    }

    #[test]
    fn numbers_and_units() {
        assert_eq!(parse_limit("50").unwrap().gbs, 50.0);
        assert_eq!(parse_limit("50GB/s").unwrap().gbs, 50.0);
        assert_eq!(parse_limit("12.5 GB/s").unwrap().gbs, 12.5);
        let bits = parse_limit("400Gb/s").unwrap();
        assert_eq!(bits.gbs, 50.0);
        assert_eq!(bits.name, "400 Gb/s");
        assert_eq!(parse_limit("100 Gb/s").unwrap().gbs, 12.5);
        assert!(parse_limit("400gb/s")
            .unwrap_err()
            .contains("GB/s (bytes) or Gb/s (bits)"));
        assert!(parse_limit("nvlink9").unwrap_err().contains("nvlink4"));
        assert_eq!(
            parse_limit("0").unwrap_err(),
            "'0': too small; give a bandwidth in GB/s, from 0.001 to 1000000, e.g. 50GB/s or 400Gb/s"
        );
        assert!(parse_limit("-5")
            .unwrap_err()
            .starts_with("'-5': too small"));
        assert!(parse_limit("1e-300")
            .unwrap_err()
            .starts_with("'1e-300': too small"));
        assert!(parse_limit("1e300Gb/s")
            .unwrap_err()
            .starts_with("'1e300Gb/s': too large"));
        assert!(parse_limit("").is_err());
    }

    #[test]
    fn binding_is_the_lowest() {
        let limits = choose(
            &[
                parse_limit("nvlink4").unwrap(),
                parse_limit("400g").unwrap(),
            ],
            &Detection::default(),
        );
        assert_eq!(binding(&limits).unwrap().name, "400g");
        assert_eq!(percent_of(40.0, binding(&limits).unwrap()), 80.0);
        assert!(describe(&[], false).starts_with("no limit"));
        assert!(describe(&limits, true).ends_with("pct_of_limit against 400g 50 GB/s"));
        assert_eq!(
            parse_limit("pcie4x16").unwrap().label(),
            "pcie4x16 31.5 GB/s"
        );
        assert_eq!(parse_limit("2.5g").unwrap().label(), "2.5g 0.3125 GB/s");
        // Whole numbers keep their zeros (8000 Gb/s was once labelled "8 Gb/s 1 GB/s").
        assert_eq!(
            parse_limit("8000Gb/s").unwrap().label(),
            "8000 Gb/s 1000 GB/s"
        );
        assert_eq!(trim_number(50.0), "50");
        assert_eq!(parse_limit("10GB/s").unwrap().label(), "10 GB/s");
        assert_eq!(trim_number(120.0), "120");
        assert_eq!(
            Limit {
                name: "x".into(),
                gbs: pcie_gbs(16.0, 8)
            }
            .label(),
            "x 15.75 GB/s"
        );
    }
}
