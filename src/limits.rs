//! Theoretical limits that busbw is compared with: a table of named links, the
//! `--limit` parser, PCIe link arithmetic, and detection from sysfs (RDMA port
//! rates, PCIe links of RDMA NICs and GPUs, the link a GPU's copies cross).
//! NVLink and memory limits come from NVML, in `gpu::links`.
//!
//! Every figure is per direction in GB/s (1 GB/s = 1e9 bytes/s): nccl-tests'
//! busbw of a bandwidth-bound collective approaches the per-direction rate of
//! the slowest link it crosses. Each is the link's data rate after line
//! encoding; packet headers (TLP, Ethernet/IB framing) lower what a payload can
//! reach, so 100% is an upper bound, not a target.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
    /// "ib-ndr 50 GB/s".
    pub fn label(&self) -> String {
        format!("{} {} GB/s", self.name, trim_number(self.gbs))
    }
}

/// One row of the table of named links.
#[derive(Clone, Copy, Debug)]
pub struct NamedLink {
    /// Names accepted by `--limit` (case-insensitive); the first is canonical.
    pub names: &'static [&'static str],
    /// Per direction, GB/s.
    pub gbs: f64,
    /// Whether the vendor's headline figure is a bidirectional total (then
    /// `gbs` is half of it).
    pub vendor_bidirectional: bool,
    /// Where the figure comes from and how it was converted.
    pub source: &'static str,
}

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
    fn generation_or_rate(&self, prefix: &str) -> String {
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

/// The named links of `--limit`. PCIe figures are the x16 link after encoding
/// (rounded as PCI-SIG's tables round them); network figures are the data rate
/// in Gb/s over 8.
pub const NAMED_LINKS: &[NamedLink] = &[
    NamedLink {
        names: &["nvlink3"],
        gbs: 300.0,
        vendor_bidirectional: true,
        source: "NVIDIA A100 datasheet: 600 GB/s NVLink per GPU (12 links), a bidirectional total; halved",
    },
    NamedLink {
        names: &["nvlink4"],
        gbs: 450.0,
        vendor_bidirectional: true,
        source: "NVIDIA H100 SXM datasheet: 900 GB/s NVLink per GPU (18 links), a bidirectional total; halved",
    },
    NamedLink {
        names: &["nvlink5"],
        gbs: 900.0,
        vendor_bidirectional: true,
        source: "NVIDIA Blackwell (B200/GB200) datasheet: 1.8 TB/s NVLink per GPU (18 links), a bidirectional total; halved",
    },
    NamedLink {
        names: &["pcie3x16"],
        gbs: 15.75,
        vendor_bidirectional: false,
        source: "PCI-SIG PCIe 3.0: 8 GT/s x16, 128b/130b encoding = 15.75 GB/s per direction",
    },
    NamedLink {
        names: &["pcie4x16"],
        gbs: 31.5,
        vendor_bidirectional: false,
        source: "PCI-SIG PCIe 4.0: 16 GT/s x16, 128b/130b encoding = 31.5 GB/s per direction",
    },
    NamedLink {
        names: &["pcie5x16"],
        gbs: 63.0,
        vendor_bidirectional: false,
        source: "PCI-SIG PCIe 5.0: 32 GT/s x16, 128b/130b encoding = 63 GB/s per direction",
    },
    NamedLink {
        names: &["pcie6x16"],
        gbs: 121.0,
        vendor_bidirectional: false,
        source: "PCI-SIG PCIe 6.0: 64 GT/s x16 = 128 GB/s raw per direction (PCI-SIG quotes 256 GB/s bidirectional); \
                 FLIT mode carries 242 data bytes per 256 (CRC and FEC), so 121 GB/s",
    },
    NamedLink {
        names: &["ib-xdr", "800g"],
        gbs: 100.0,
        vendor_bidirectional: false,
        source: "IBTA XDR 4x / IEEE 802.3df 800GbE: 800 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["ib-ndr", "400g"],
        gbs: 50.0,
        vendor_bidirectional: false,
        source: "IBTA NDR 4x / IEEE 802.3bs 400GbE: 400 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["ib-hdr", "200g"],
        gbs: 25.0,
        vendor_bidirectional: false,
        source: "IBTA HDR 4x / IEEE 802.3bs 200GbE: 200 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["100g", "ib-edr"],
        gbs: 12.5,
        vendor_bidirectional: false,
        source: "IEEE 802.3 100GbE / IBTA EDR 4x: 100 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["25g"],
        gbs: 3.125,
        vendor_bidirectional: false,
        source: "IEEE 802.3by 25GbE: 25 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["10g"],
        gbs: 1.25,
        vendor_bidirectional: false,
        source: "IEEE 802.3ae 10GbE: 10 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["2.5g"],
        gbs: 0.3125,
        vendor_bidirectional: false,
        source: "IEEE 802.3bz 2.5GBASE-T: 2.5 Gb/s data rate per direction, /8",
    },
    NamedLink {
        names: &["1g"],
        gbs: 0.125,
        vendor_bidirectional: false,
        source: "IEEE 802.3ab 1000BASE-T: 1 Gb/s data rate per direction, /8",
    },
];

/// Four significant digits, no trailing zeros: "15.75", "50", "0.3125".
fn trim_number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let decimals = (3 - x.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{x:.decimals$}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn known_names() -> String {
    NAMED_LINKS
        .iter()
        .flat_map(|l| l.names.iter().copied())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses one `--limit`: a name of the table, or a number with an optional unit
/// (`50`, `50GB/s` and `50 GB/s` are bytes; `400Gb/s` is bits).
pub fn parse_limit(text: &str) -> Result<Limit, String> {
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
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E'))
        .unwrap_or(t.len());
    let (number, unit) = (&t[..split], t[split..].trim());
    let value: f64 = number.parse().map_err(|_| {
        format!(
            "'{text}' is neither a link name ({}) nor a number like 50GB/s or 400Gb/s",
            known_names()
        )
    })?;
    let (gbs, unit_name) = match unit {
        "" | "GB/s" => (value, "GB/s"),
        "Gb/s" => (value / 8.0, "Gb/s"),
        other => {
            return Err(format!(
                "'{text}': unit '{other}' is not GB/s (bytes) or Gb/s (bits)"
            ))
        }
    };
    if !(gbs.is_finite() && gbs > 0.0) {
        return Err(format!("'{text}': a limit must be a positive bandwidth"));
    }
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

/// What one node's sysfs tells about its links.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    /// Distinct limits (one per distinct link kind and rate).
    pub limits: Vec<Limit>,
    /// What was found, one line per device ("mlx5_0 port 1: 400 Gb/sec (4X NDR)").
    pub found: Vec<String>,
    /// Problems an operator must see: downgraded PCIe links.
    pub warnings: Vec<String>,
}

impl Detection {
    fn add_limit(&mut self, limit: Limit) {
        if !self.limits.iter().any(|l| l.name == limit.name) {
            self.limits.push(limit);
        }
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Sorted entries of a directory (none when it is absent).
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// An RDMA port's link as sysfs reports it (`/sys/class/infiniband/DEV/ports/N`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RdmaPortLink {
    /// "ACTIVE", "DOWN", "INIT", "ARMED" (sysfs "4: ACTIVE" without its number).
    pub state: Option<String>,
    /// As sysfs prints it: "400 Gb/sec (4X NDR)".
    pub rate: Option<String>,
    /// 400 for that rate.
    pub gbps: Option<f64>,
    /// Lanes: 4 for "4X".
    pub width: Option<u32>,
    /// "InfiniBand" or "Ethernet".
    pub link_layer: Option<String>,
}

/// Reads the RDMA port whose sysfs directory is `dir`.
pub fn read_rdma_port(dir: &Path) -> RdmaPortLink {
    let rate = read_trimmed(&dir.join("rate"));
    let (gbps, width) = rate.as_deref().map_or((None, None), parse_port_rate);
    RdmaPortLink {
        state: read_trimmed(&dir.join("state"))
            .filter(|s| !s.is_empty())
            .map(|s| port_state_name(&s)),
        rate,
        gbps,
        width,
        link_layer: read_trimmed(&dir.join("link_layer")),
    }
}

/// sysfs "4: ACTIVE" -> "ACTIVE" (port states and physical states alike).
pub fn port_state_name(text: &str) -> String {
    match text.split_once(':') {
        Some((_, name)) => name.trim().to_string(),
        None => text.to_string(),
    }
}

/// "400 Gb/sec (4X NDR)" -> (400, 4).
pub fn parse_port_rate(rate: &str) -> (Option<f64>, Option<u32>) {
    let gbps = rate
        .split_once(' ')
        .filter(|(_, unit)| unit.starts_with("Gb/sec"))
        .and_then(|(number, _)| number.parse().ok());
    let width = rate
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once('X'))
        .and_then(|(n, _)| n.trim().parse().ok());
    (gbps, width)
}

/// "16.0 GT/s PCIe" or "8 GT/s" -> 16.0, 8.0; "Unknown" -> None.
fn parse_link_speed(speed: &str) -> Option<f64> {
    let (number, rest) = speed.split_once(' ')?;
    rest.starts_with("GT/s")
        .then(|| number.parse().ok())
        .flatten()
}

/// Which kind of device a PCIe link belongs to: the limit it sets, and whether
/// its speed at rest says anything (GPUs lower their link speed when idle).
#[derive(Clone, Copy)]
enum PcieRole {
    Nic,
    Gpu,
}

/// Where sysfs lists the PCI devices, below its root.
const PCI_DEVICES: &str = "sys/bus/pci/devices";

/// The sysfs directory of the PCI device at `bus_id` ("0000:18:00.0") under
/// `root` (normally "/").
pub fn pci_device_dir(root: &Path, bus_id: &str) -> PathBuf {
    root.join(PCI_DEVICES).join(bus_id)
}

/// The "current" or "max" link speed of the PCI device at `dev`, in GT/s.
fn link_speed(dev: &Path, kind: &str) -> Option<f64> {
    read_trimmed(&dev.join(format!("{kind}_link_speed"))).and_then(|s| parse_link_speed(&s))
}

/// The "current" or "max" link width of the PCI device at `dev`, in lanes.
fn link_width(dev: &Path, kind: &str) -> Option<u32> {
    read_trimmed(&dev.join(format!("{kind}_link_width"))).and_then(|s| s.parse().ok())
}

/// The "current" or "max" link of the PCI device at `dev`.
fn read_link(dev: &Path, kind: &str) -> Option<PcieLink> {
    Some(PcieLink {
        gts: link_speed(dev, kind)?,
        width: link_width(dev, kind)?,
    })
}

/// Reads the link of one PCI device; `who` names it in messages.
fn detect_pcie(dev: &Path, who: &str, role: PcieRole, found: &mut Detection) {
    let Some((state, current)) =
        pcie_state_at(dev).and_then(|s| Some((s, s.current.filter(|l| l.width > 0)?)))
    else {
        found
            .found
            .push(format!("{who}: PCIe link speed/width not reported"));
        return;
    };
    let max = state.capable;
    // An idle GPU drops its link to a lower speed to save power and raises it
    // under load, so its speed at rest is no limit; its width is.
    let effective = match role {
        PcieRole::Nic => current,
        PcieRole::Gpu => PcieLink {
            gts: max.gts,
            ..current
        },
    };
    let gbs = effective.gbs_per_direction();
    let kind = match role {
        PcieRole::Nic => "nic-pcie",
        PcieRole::Gpu => "gpu-pcie",
    };
    let slot_note = if max.below(&state.device_max) {
        format!(
            ", its slot's; the device's own {} GT/s x{}",
            trim_number(state.device_max.gts),
            state.device_max.width
        )
    } else {
        String::new()
    };
    found.found.push(format!(
        "{who}: PCIe {} GT/s x{} (max {} GT/s x{}{slot_note}) = {gbs:.2} GB/s",
        trim_number(current.gts),
        current.width,
        trim_number(max.gts),
        max.width,
    ));
    if effective.below(&max) {
        found.warnings.push(format!(
            "{who}: PCIe link runs at {} GT/s x{} but the link supports {} GT/s x{}: \
             {gbs:.2} GB/s instead of {:.2} GB/s per direction (reseat the card or check the slot and BIOS)",
            trim_number(current.gts),
            current.width,
            trim_number(max.gts),
            max.width,
            max.gbs_per_direction()
        ));
    }
    found.add_limit(Limit {
        name: format!(
            "{kind} {} x{}",
            effective.generation_or_rate("gen"),
            effective.width
        ),
        gbs,
    });
}

/// NVIDIA and AMD display/3D controllers: the GPUs (a BMC's VGA is neither).
fn is_gpu(dev: &Path) -> bool {
    let class = read_trimmed(&dev.join("class")).unwrap_or_default();
    let vendor = read_trimmed(&dev.join("vendor")).unwrap_or_default();
    class.starts_with("0x03") && matches!(vendor.as_str(), "0x10de" | "0x1002")
}

/// Reads the links of this node under `root` (normally "/"): every active RDMA
/// port's rate, the PCIe link of every RDMA NIC and of every GPU.
pub fn detect(root: &Path) -> Detection {
    let mut found = Detection::default();
    for dev in entries(&root.join("sys/class/infiniband")) {
        let name = file_name(&dev);
        for port in entries(&dev.join("ports")) {
            let who = format!("{name} port {}", file_name(&port));
            let link = read_rdma_port(&port);
            if let Some(state) = link.state.filter(|s| s != "ACTIVE") {
                found.found.push(format!("{who}: {state}, not a limit"));
                continue;
            }
            let Some(rate_text) = link.rate else {
                continue;
            };
            let Some(gbits) = link.gbps.filter(|g| *g > 0.0) else {
                found
                    .found
                    .push(format!("{who}: unreadable rate '{rate_text}'"));
                continue;
            };
            let layer = link.link_layer.unwrap_or_default();
            found.found.push(format!("{who}: {rate_text} {layer}"));
            found.add_limit(Limit {
                name: format!("rdma-port {} Gb/s", trim_number(gbits)),
                gbs: gbits / 8.0,
            });
        }
        let pci = dev.join("device");
        if pci.exists() {
            let address = std::fs::canonicalize(&pci)
                .map(|p| file_name(&p))
                .unwrap_or_default();
            detect_pcie(
                &pci,
                &format!("{name} ({address})"),
                PcieRole::Nic,
                &mut found,
            );
        }
    }
    for dev in entries(&root.join(PCI_DEVICES)) {
        if is_gpu(&dev) {
            detect_pcie(
                &dev,
                &format!("GPU {}", file_name(&dev)),
                PcieRole::Gpu,
                &mut found,
            );
        }
    }
    found
}

/// What sysfs says about the PCIe link of one device.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PcieState {
    /// The best both ends support: min of the device's and its upstream port's maxima.
    pub capable: PcieLink,
    /// The device's own maximum (above `capable` for a Gen5 card in a Gen4 slot).
    pub device_max: PcieLink,
    /// What the link runs at now (GPUs drop to lower speeds when idle).
    pub current: Option<PcieLink>,
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

/// Reads the link of the device at `bus_id` under `root` (normally "/").
pub fn pcie_state(root: &Path, bus_id: &str) -> Option<PcieState> {
    pcie_state_at(&pci_device_dir(root, bus_id))
}

/// Reads the link of the PCI device whose sysfs directory is `device`; None
/// where sysfs reports no maximum link.
pub fn pcie_state_at(device: &Path) -> Option<PcieState> {
    let device_max = read_link(device, "max")?;
    let port = device.canonicalize().ok()?.parent().map(Path::to_path_buf);
    let mut capable = device_max;
    if let Some(port_max) = port.as_deref().and_then(|p| read_link(p, "max")) {
        capable.gts = capable.gts.min(port_max.gts);
        capable.width = capable.width.min(port_max.width);
    }
    Some(PcieState {
        capable,
        device_max,
        current: read_link(device, "current"),
    })
}

/// Combines the detections of several nodes: limits deduplicated by name, and
/// each distinct line once, followed by the hosts that reported it ("all 16
/// nodes" when every node did), so that the odd node stands out.
pub fn merge(per_host: &[(String, Detection)]) -> Detection {
    let mut all = Detection::default();
    for (_, d) in per_host {
        for l in &d.limits {
            all.add_limit(l.clone());
        }
    }
    let by_line = |pick: fn(&Detection) -> &Vec<String>| {
        let mut lines: Vec<(String, Vec<&str>)> = Vec::new();
        for (host, d) in per_host {
            for line in pick(d) {
                match lines.iter_mut().find(|(l, _)| l == line) {
                    Some((_, hosts)) => hosts.push(host),
                    None => lines.push((line.clone(), vec![host])),
                }
            }
        }
        lines
            .into_iter()
            .map(|(line, hosts)| format!("{line} [{}]", host_list(&hosts, per_host.len())))
            .collect()
    };
    all.found = by_line(|d| &d.found);
    all.warnings = by_line(|d| &d.warnings);
    all
}

/// "node1, node2", "all 16 nodes", or the first eight and a count.
fn host_list(hosts: &[&str], nodes: usize) -> String {
    const SHOWN: usize = 8;
    if hosts.len() == nodes && nodes > 1 {
        format!("all {nodes} nodes")
    } else if hosts.len() > SHOWN {
        format!(
            "{} and {} more",
            hosts[..SHOWN].join(", "),
            hosts.len() - SHOWN
        )
    } else {
        hosts.join(", ")
    }
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

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name)
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
        assert!(parse_limit("0").unwrap_err().contains("positive"));
        assert!(parse_limit("-5").is_err());
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
        assert_eq!(
            Limit {
                name: "x".into(),
                gbs: pcie_gbs(16.0, 8)
            }
            .label(),
            "x 15.75 GB/s"
        );
    }

    #[test]
    fn detects_ports_and_links() {
        let d = detect(&fixture("sysfs-ndr"));
        let names: Vec<&str> = d.limits.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "rdma-port 400 Gb/s",
                "nic-pcie gen5 x16",
                "gpu-pcie gen5 x16"
            ]
        );
        assert_eq!(d.limits[0].gbs, 50.0);
        assert!((d.limits[1].gbs - 63.0).abs() < 0.1);
        // The down port is reported but sets no limit; the idle GPU's gen1 speed neither.
        assert!(d
            .found
            .contains(&"mlx5_1 port 1: DOWN, not a limit".to_string()));
        assert!(d.warnings.is_empty(), "{:?}", d.warnings);
        assert!(choose(&[], &d).first().unwrap().gbs == 50.0);
    }

    #[test]
    fn detects_a_downgraded_link() {
        let d = detect(&fixture("sysfs-downgraded"));
        assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
        let w = &d.warnings[0];
        assert!(
            w.starts_with("mlx5_0 (0000:17:00.0): PCIe link runs at 16 GT/s x8"),
            "{w}"
        );
        assert!(w.contains("supports 16 GT/s x16"), "{w}");
        let nic = d
            .limits
            .iter()
            .find(|l| l.name.starts_with("nic-pcie"))
            .unwrap();
        assert_eq!(nic.name, "nic-pcie gen4 x8");
        assert!((nic.gbs - 15.75).abs() < 0.01);
        // The x8 link, not the 200 Gb/s port, is what busbw is measured against.
        assert_eq!(binding(&choose(&[], &d)).unwrap().name, "nic-pcie gen4 x8");
    }

    #[test]
    fn a_gen5_gpu_in_a_gen4_slot_is_a_gen4_limit() {
        let root = fixture("sysfs-gen5-in-gen4");
        let d = detect(&root);
        assert_eq!(d.limits.len(), 1, "{:?}", d.limits);
        assert_eq!(d.limits[0].name, "gpu-pcie gen4 x16");
        // The same figure copy_bw compares the GPU's copies with.
        let state = pcie_state(&root, "0000:41:00.0").unwrap();
        assert_eq!(d.limits[0].gbs, state.limit().gbs);
        assert!((state.limit().gbs - 31.51).abs() < 0.01);
        assert_eq!(state.device_max.generation(), Some(5));
        // Running at what the slot allows is no downgrade; the found line says why gen4.
        assert!(d.warnings.is_empty(), "{:?}", d.warnings);
        assert_eq!(
            d.found,
            [
                "GPU 0000:41:00.0: PCIe 16 GT/s x16 (max 16 GT/s x16, its slot's; \
              the device's own 32 GT/s x16) = 31.51 GB/s"
            ]
        );
    }

    #[test]
    fn a_bmc_vga_is_no_gpu() {
        let d = detect(&fixture("sysfs-no-fabric"));
        assert_eq!(d, Detection::default());
        assert!(describe(&choose(&[], &d), false).starts_with("no limit"));
    }

    #[test]
    fn merge_prefixes_hosts() {
        let one = detect(&fixture("sysfs-ndr"));
        let two = detect(&fixture("sysfs-downgraded"));
        let m = merge(&[
            ("a".into(), one.clone()),
            ("b".into(), two),
            ("c".into(), one),
        ]);
        assert!(m.warnings[0].starts_with("mlx5_0 (0000:17:00.0): PCIe link runs at 16 GT/s x8"));
        assert!(m.warnings[0].ends_with("[b]"), "{}", m.warnings[0]);
        assert!(m
            .found
            .contains(&"mlx5_0 port 1: 400 Gb/sec (4X NDR) InfiniBand [a, c]".to_string()));
        assert_eq!(
            m.limits
                .iter()
                .filter(|l| l.name.starts_with("rdma-port"))
                .count(),
            2
        );
    }

    #[test]
    fn port_rates_and_states_parse() {
        assert_eq!(
            parse_port_rate("400 Gb/sec (4X NDR)"),
            (Some(400.0), Some(4))
        );
        assert_eq!(parse_port_rate("2.5 Gb/sec (1X SDR)"), (Some(2.5), Some(1)));
        assert_eq!(parse_port_rate("unknown"), (None, None));
        assert_eq!(port_state_name("4: ACTIVE"), "ACTIVE");
        assert_eq!(port_state_name("5: LinkUp"), "LinkUp");
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
        assert_eq!(parse_link_speed("32.0 GT/s PCIe\n"), Some(32.0));
        assert_eq!(parse_link_speed("8 GT/s"), Some(8.0));
        assert_eq!(parse_link_speed("Unknown"), None);
    }

    #[test]
    fn capability_is_the_weaker_end() {
        let root = std::env::temp_dir().join(format!("fabricbench-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let port = root.join("sys/devices/pci0000:00/0000:00:01.0");
        let gpu = port.join("0000:18:00.0");
        std::fs::create_dir_all(&gpu).unwrap();
        let write = |dir: &Path, f: &str, v: &str| std::fs::write(dir.join(f), v).unwrap();
        write(&gpu, "max_link_speed", "32.0 GT/s PCIe\n");
        write(&gpu, "max_link_width", "16\n");
        write(&gpu, "current_link_speed", "2.5 GT/s PCIe\n");
        write(&gpu, "current_link_width", "16\n");
        write(&port, "max_link_speed", "16.0 GT/s PCIe\n");
        write(&port, "max_link_width", "16\n");
        let devices = root.join(PCI_DEVICES);
        std::fs::create_dir_all(&devices).unwrap();
        std::os::unix::fs::symlink(&gpu, devices.join("0000:18:00.0")).unwrap();

        let state = pcie_state(&root, "0000:18:00.0").unwrap();
        assert_eq!(
            state.capable,
            PcieLink {
                gts: 16.0,
                width: 16
            }
        );
        assert_eq!(
            state.current,
            Some(PcieLink {
                gts: 2.5,
                width: 16
            })
        );
        assert_eq!(pcie_state(&root, "0000:99:00.0"), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
