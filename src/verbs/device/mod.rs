//! The RDMA device and port a side runs on: which device (-d), whether its port
//! (-i) is usable, which GID (-x, or the RoCE v2 GID of the port's IPv4 address
//! as NCCL picks it since 2.21), and the port's rate for the limit column.

pub mod completion;
pub mod cqe;
pub mod events;
pub mod memory;
pub mod numa;
pub mod path;
pub mod post;
pub mod qp;
pub mod ud;

pub use crate::sysfs::rdma::PortRate;

use crate::sysfs::rdma::{self, KernelState, PhysState, PortState};
use crate::sysfs::Root;
use crate::verbs::flags::path::GidPreference;
use anyhow::{anyhow, bail};
use serde::{Deserialize, Serialize};
use sideway::ibverbs::device::{DeviceInfo, DeviceList, GetDeviceListErrorKind, TransportType};
use sideway::ibverbs::device_context::DeviceContext;
use std::fmt;
use std::net::Ipv6Addr;
use std::sync::Arc;

/// Vendor ids of the software RDMA providers: Soft-RoCE (rxe) and siw.
const SOFTWARE_VENDOR_IDS: [u32; 2] = [0xff_ffff, 0x62_6d74];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinkLayer {
    InfiniBand,
    Ethernet,
}

impl LinkLayer {
    /// perftest's "Link type" word.
    pub fn name(self) -> &'static str {
        match self {
            LinkLayer::InfiniBand => "IB",
            LinkLayer::Ethernet => "Ethernet",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GidKind {
    InfiniBand,
    RoceV1,
    RoceV2,
}

impl fmt::Display for GidKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GidKind::InfiniBand => "IB",
            GidKind::RoceV1 => "RoCE v1",
            GidKind::RoceV2 => "RoCE v2",
        })
    }
}

/// One non-empty entry of a port's GID table.
#[derive(Clone, Debug, PartialEq)]
pub struct GidEntry {
    pub index: u32,
    pub gid: Ipv6Addr,
    pub kind: GidKind,
    pub netdev: Option<String>,
}

impl fmt::Display for GidEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.index, show_gid(&self.gid), self.kind)?;
        if let Some(dev) = &self.netdev {
            write!(f, " on {dev}")?;
        }
        Ok(())
    }
}

/// A GID as an operator reads it: the IPv4 address of an IPv4-mapped GID.
pub fn show_gid(gid: &Ipv6Addr) -> String {
    match gid.to_ipv4_mapped() {
        Some(v4) => format!("::ffff:{v4}"),
        None => gid.to_string(),
    }
}

/// The GID a side uses, and how it was chosen.
#[derive(Clone, Debug, PartialEq)]
pub struct GidChoice {
    pub entry: GidEntry,
    /// None: given with -x. Some: chosen automatically; the other candidates.
    pub automatic: Option<Vec<u32>>,
    /// The flag that chose it (--ipv6, --bind_source_ip); None: the default rule or -x.
    pub by_flag: Option<&'static str>,
}

impl GidChoice {
    /// The header line's value: "1 (RoCE v2 ::ffff:10.0.0.1 on eth0, chosen automatically; -x overrides)".
    pub fn describe(&self) -> String {
        let e = &self.entry;
        let mut text = format!("{} ({} {}", e.index, e.kind, show_gid(&e.gid));
        if let Some(dev) = &e.netdev {
            text.push_str(&format!(" on {dev}"));
        }
        let how = self
            .by_flag
            .map_or("chosen automatically".to_string(), |f| {
                format!("chosen by {f}")
            });
        match &self.automatic {
            None => text.push_str(", from -x)"),
            Some(others) if others.is_empty() => text.push_str(&format!(", {how}; -x overrides)")),
            Some(others) => text.push_str(&format!(
                ", {how}; -x overrides; other candidates: {})",
                others
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
        text
    }
}

fn list_gids(table: &[GidEntry]) -> String {
    if table.is_empty() {
        return "none".into();
    }
    table
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One port's GID table, as the GID choice reads it.
#[derive(Clone, Copy)]
pub struct PortGids<'a> {
    pub device: &'a str,
    pub port: u8,
    pub link: LinkLayer,
    /// The entries in use.
    pub entries: &'a [GidEntry],
    /// The table's size (`-x` may name any index below it).
    pub len: u32,
}

impl<'a> PortGids<'a> {
    pub fn new(
        device: &'a str,
        port: u8,
        link: LinkLayer,
        entries: &'a [GidEntry],
        len: u32,
    ) -> PortGids<'a> {
        PortGids {
            device,
            port,
            link,
            entries,
            len,
        }
    }

    /// Picks the GID of `port` on `device`: the -x entry after checking it, none on
    /// InfiniBand (LID routing, as perftest), else the RoCE v2 GID of an IPv4 address
    /// (then of a global IPv6 address), lowest index first, as NCCL >= 2.21 does.
    pub fn choose(&self, requested: Option<u32>) -> anyhow::Result<Option<GidChoice>> {
        let PortGids {
            device,
            port,
            link,
            entries: table,
            len: table_len,
        } = *self;
        if let Some(index) = requested {
            if index >= table_len {
                bail!(
                    "-x/--gid-index {index}: out of range: {device} port {port} has {table_len} GID entries (in use: {}); pass one of those",
                    list_gids(table)
                );
            }
            let Some(entry) = table.iter().find(|e| e.index == index) else {
                bail!(
                    "-x/--gid-index {index}: entry {index} of {device} port {port} is empty (in use: {}); pass one of those",
                    list_gids(table)
                );
            };
            if link == LinkLayer::Ethernet && entry.kind != GidKind::RoceV2 {
                bail!(
                    "-x/--gid-index {index}: GID {index} of {device} port {port} is {}, not RoCE v2 (GIDs: {}); pass a RoCE v2 index or drop -x to choose automatically",
                    entry.kind,
                    list_gids(table)
                );
            }
            return Ok(Some(GidChoice {
                entry: entry.clone(),
                automatic: None,
                by_flag: None,
            }));
        }
        if link == LinkLayer::InfiniBand {
            return Ok(None);
        }
        let v2: Vec<&GidEntry> = table
            .iter()
            .filter(|e| e.kind == GidKind::RoceV2 && !e.gid.is_unspecified())
            .collect();
        let ipv4: Vec<&GidEntry> = v2
            .iter()
            .copied()
            .filter(|e| e.gid.to_ipv4_mapped().is_some())
            .collect();
        let global_v6: Vec<&GidEntry> = v2
            .iter()
            .copied()
            .filter(|e| e.gid.to_ipv4_mapped().is_none() && !is_link_local(&e.gid))
            .collect();
        let candidates = if ipv4.is_empty() { global_v6 } else { ipv4 };
        let mut sorted = candidates;
        sorted.sort_by_key(|e| e.index);
        match sorted.split_first() {
            Some((first, rest)) => Ok(Some(GidChoice {
                entry: (*first).clone(),
                automatic: Some(rest.iter().map(|e| e.index).collect()),
                by_flag: None,
            })),
            None => Err(anyhow!(
                "{device} port {port} has no RoCE v2 GID with an IPv4 or global IPv6 address (GIDs: {}): give the port's network interface an IP address, or pass -x",
                list_gids(table)
            )),
        }
    }

    /// `choose` as --ipv6 and --bind_source_ip ask: a RoCE v2 GID of an
    /// IPv6 address (global before link-local, as perftest scores them), or the
    /// GID whose address is the given one. -x still wins (clap refuses both).
    pub fn choose_for(
        &self,
        prefer: &GidPreference,
        requested: Option<u32>,
    ) -> anyhow::Result<Option<GidChoice>> {
        let PortGids {
            device,
            port,
            link,
            entries: table,
            ..
        } = *self;
        let flag = match prefer {
            GidPreference::Ipv4 => "",
            GidPreference::Ipv6 => "--ipv6",
            GidPreference::Source(_) => "--bind_source_ip",
        };
        if flag.is_empty() || requested.is_some() {
            return self.choose(requested);
        }
        if link == LinkLayer::InfiniBand {
            bail!(
                "{flag}: {device} port {port} is InfiniBand, whose GIDs carry no IP address; drop {flag} (or pass -x)"
            );
        }
        let mut found: Vec<&GidEntry> = table
            .iter()
            .filter(|e| e.kind == GidKind::RoceV2)
            .filter(|e| match prefer {
                GidPreference::Source(ip) => e.gid.to_canonical() == *ip,
                _ => e.gid.to_ipv4_mapped().is_none() && !e.gid.is_unspecified(),
            })
            .collect();
        found.sort_by_key(|e| (is_link_local(&e.gid), e.index));
        let Some((first, rest)) = found.split_first() else {
            let what = match prefer {
                GidPreference::Source(ip) => {
                    format!(
                        "{flag} {ip}: no RoCE v2 GID of {device} port {port} carries this address"
                    )
                }
                _ => {
                    format!("{flag}: {device} port {port} has no RoCE v2 GID with an IPv6 address")
                }
            };
            bail!(
                "{what} (GIDs: {}); give the port's interface that address, or choose another with -x",
                list_gids(table)
            );
        };
        Ok(Some(GidChoice {
            entry: (*first).clone(),
            automatic: Some(rest.iter().map(|e| e.index).collect()),
            by_flag: Some(flag),
        }))
    }
}

/// fe80::/10 (`Ipv6Addr::is_unicast_link_local` needs Rust 1.84).
fn is_link_local(gid: &Ipv6Addr) -> bool {
    gid.segments()[0] & 0xffc0 == 0xfe80
}

/// The port's rate for the limit column; None where sysfs has none to compare with.
fn read_port_rate(device: &str, port: u8) -> Option<PortRate> {
    rdma::read_rate(&Root::new("/"), &rdma::port_dir(device, port)).value()
}

/// An opened device and the checked port of one side.
pub struct Port {
    pub ctx: Arc<DeviceContext>,
    pub device: String,
    pub port: u8,
    /// perftest's "Transport type": IB, iWARP, ...
    pub transport: String,
    pub link: LinkLayer,
    pub lid: u16,
    pub active_mtu: u32,
    pub max_msg_size: u64,
    /// Outstanding RDMA reads a QP of this device may have (max_qp_rd_atom).
    pub max_rd_atomic: u32,
    pub gid: Option<GidChoice>,
    /// The GID shown in the connection lines: the chosen one, else entry 0.
    pub shown_gid: Ipv6Addr,
    pub rate: Option<PortRate>,
    /// A software device (Soft-RoCE, siw) rather than a NIC.
    pub software: bool,
}

/// Why there is no usable device: printed as one line.
pub fn no_device_message(errno: Option<i32>) -> String {
    let why = match errno {
        Some(e) if e == nix::errno::Errno::EOPNOTSUPP as i32 => {
            "libibverbs.so.1 could not be loaded or has no provider"
        }
        _ => "/sys/class/infiniband is empty",
    };
    format!(
        "no RDMA device on this host ({why}): install the NIC's driver and rdma-core \
         (Debian/Ubuntu: apt install rdma-core ibverbs-providers), or try Soft-RoCE in a VM: scripts/softroce-test.sh"
    )
}

/// Which device a side opens: -d's entry for this node-local rank, else the first.
pub fn device_name_for(devices: &[String], local_rank: usize) -> Option<&str> {
    (!devices.is_empty()).then(|| devices[local_rank % devices.len()].as_str())
}

/// Opens `wanted` (or the first device) and checks `port`.
pub fn open_port(
    wanted: Option<&str>,
    port: u8,
    gid_index: Option<u32>,
    prefer: &GidPreference,
) -> anyhow::Result<Port> {
    let list = DeviceList::new().map_err(|e| {
        let GetDeviceListErrorKind::Ibverbs(io) = &e.0 else {
            return anyhow!("cannot list RDMA devices: {e}");
        };
        anyhow!(match io.raw_os_error() {
            Some(code)
                if code == nix::errno::Errno::ENOSYS as i32
                    || code == nix::errno::Errno::EOPNOTSUPP as i32 =>
            {
                no_device_message(Some(code))
            }
            _ => format!("cannot list RDMA devices: {io}"),
        })
    })?;
    let names: Vec<String> = list.iter().map(|d| d.name()).collect();
    if names.is_empty() {
        bail!(no_device_message(None));
    }
    let index = match wanted {
        None => 0,
        Some(name) => names.iter().position(|n| n == name).ok_or_else(|| {
            anyhow!(
                "RDMA device {name} not found; available: {}",
                names.join(", ")
            )
        })?,
    };
    let device = list
        .get(index)
        .ok_or_else(|| anyhow!("RDMA device {} vanished while opening it", names[index]))?;
    let name = names[index].clone();
    let transport = match device.transport_type() {
        TransportType::InfiniBand => "IB".to_string(),
        other => other.to_string(),
    };
    let ctx = device
        .open()
        .map_err(|e| anyhow!("cannot open RDMA device {name}: {}", source_text(&e)))?;
    let attr = ctx
        .query_device()
        .map_err(|e| anyhow!("cannot query RDMA device {name}: {}", source_text(&e)))?;
    let ports = attr.phys_port_cnt();
    if port > ports {
        bail!(
            "-i/--ib-port {port}: {name} has {ports} port{}; use -i 1{}",
            if ports == 1 { "" } else { "s" },
            if ports > 1 {
                format!("..{ports}")
            } else {
                String::new()
            }
        );
    }
    let pattr = ctx
        .query_port(port)
        .map_err(|e| anyhow!("cannot query port {port} of {name}: {}", source_text(&e)))?
        .attr;
    if pattr.state != PortState::Active.code() {
        bail!(port_not_active(&name, port, pattr.state, pattr.phys_state));
    }
    let link = if pattr.link_layer == 2 {
        LinkLayer::Ethernet
    } else {
        LinkLayer::InfiniBand
    };
    let table = gid_table(&ctx, port);
    let gid = PortGids::new(&name, port, link, &table, pattr.gid_tbl_len.max(0) as u32)
        .choose_for(prefer, gid_index)?;
    let shown_gid = gid
        .as_ref()
        .map(|g| g.entry.gid)
        .or_else(|| table.first().map(|e| e.gid))
        .unwrap_or(Ipv6Addr::UNSPECIFIED);
    Ok(Port {
        rate: read_port_rate(&name, port),
        device: name,
        port,
        transport,
        link,
        lid: pattr.lid,
        active_mtu: mtu_bytes(pattr.active_mtu).unwrap_or(256),
        max_msg_size: pattr.max_msg_sz as u64,
        max_rd_atomic: attr.max_qp_rd_atom().max(1) as u32,
        software: SOFTWARE_VENDOR_IDS.contains(&attr.vendor_id()),
        gid,
        shown_gid,
        ctx,
    })
}

/// The innermost cause of a sideway error (its own text is only "failed to ...").
pub fn source_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

fn port_not_active(device: &str, port: u8, state: u32, phys_state: u8) -> String {
    let state_name = PortState::from_code(state).map_or("in an unknown state", PortState::name);
    let phys = PhysState::from_code(phys_state.into()).map_or("unknown", PhysState::name);
    let fix = if state == PortState::Init.code() {
        "no subnet manager has configured it: start opensm or check the fabric's SM"
    } else {
        "bring the link up (check ibstat / ip link, cable and switch port)"
    };
    format!(
        "port {port} of {device} is {state_name} (physical state {phys}), not ACTIVE: {fix}, or choose another port (-i) or device (-d)"
    )
}

/// Path MTU in bytes of an `ibv_mtu` value.
pub fn mtu_bytes(raw: u32) -> Option<u32> {
    (1..=5).contains(&raw).then(|| 128u32 << raw)
}

/// The non-empty GID entries of `port` (empty when the table cannot be read).
fn gid_table(ctx: &Arc<DeviceContext>, port: u8) -> Vec<GidEntry> {
    let Ok(entries) = ctx.query_gid_table() else {
        return Vec::new();
    };
    entries
        .iter()
        .filter(|e| e.port_num() == port as u32)
        .map(|e| GidEntry {
            index: e.gid_index(),
            gid: Ipv6Addr::from(e.gid()),
            kind: match e.gid_type() {
                sideway::ibverbs::address::GidType::InfiniBand => GidKind::InfiniBand,
                sideway::ibverbs::address::GidType::RoceV1 => GidKind::RoceV1,
                sideway::ibverbs::address::GidType::RoceV2 => GidKind::RoceV2,
            },
            netdev: e.netdev_name().ok(),
        })
        .filter(|e| !e.gid.is_unspecified())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u32, gid: &str, kind: GidKind) -> GidEntry {
        GidEntry {
            index,
            gid: gid.parse().unwrap(),
            kind,
            netdev: Some("eth0".into()),
        }
    }

    /// A typical RoCE port: link-local v1/v2, IPv4 v1/v2, a global IPv6 v2, and an
    /// overlay's IPv4 registered on the same device (as flannel's VXLAN is).
    fn roce_table() -> Vec<GidEntry> {
        vec![
            entry(0, "fe80::ba3f:d2ff:fe12:3456", GidKind::RoceV1),
            entry(1, "fe80::ba3f:d2ff:fe12:3456", GidKind::RoceV2),
            entry(2, "::ffff:10.0.0.5", GidKind::RoceV1),
            entry(3, "::ffff:10.0.0.5", GidKind::RoceV2),
            entry(4, "2001:db8::5", GidKind::RoceV2),
            entry(7, "::ffff:10.244.1.0", GidKind::RoceV2),
        ]
    }

    #[test]
    fn picks_the_ipv4_roce_v2_gid() {
        let c = PortGids::new("mlx5_0", 1, LinkLayer::Ethernet, &roce_table(), 255)
            .choose(None)
            .unwrap()
            .unwrap();
        assert_eq!(c.entry.index, 3);
        assert_eq!(c.automatic, Some(vec![7]));
        assert_eq!(
            c.describe(),
            "3 (RoCE v2 ::ffff:10.0.0.5 on eth0, chosen automatically; -x overrides; other candidates: 7)"
        );
    }

    #[test]
    fn falls_back_to_global_ipv6_never_link_local() {
        let table: Vec<GidEntry> = roce_table()
            .into_iter()
            .filter(|e| e.gid.to_ipv4_mapped().is_none())
            .collect();
        let c = PortGids::new("mlx5_0", 1, LinkLayer::Ethernet, &table, 255)
            .choose(None)
            .unwrap()
            .unwrap();
        assert_eq!(c.entry.index, 4);
        let link_local_only = vec![entry(1, "fe80::1", GidKind::RoceV2)];
        let e = PortGids::new("rxe0", 1, LinkLayer::Ethernet, &link_local_only, 16)
            .choose(None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no RoCE v2 GID") && e.contains("1 fe80::1 RoCE v2 on eth0"),
            "{e}"
        );
    }

    #[test]
    fn softroce_on_loopback() {
        // rxe0 on lo, as the Soft-RoCE VM shows it.
        let table = vec![
            entry(0, "fe80::200:ff:fe00:0", GidKind::RoceV2),
            entry(1, "::ffff:127.0.0.1", GidKind::RoceV2),
            entry(2, "::1", GidKind::RoceV2),
        ];
        let c = PortGids::new("rxe0", 1, LinkLayer::Ethernet, &table, 1024)
            .choose(None)
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.entry.index, show_gid(&c.entry.gid)),
            (1, "::ffff:127.0.0.1".into())
        );
    }

    #[test]
    fn requested_index_is_checked() {
        let t = roce_table();
        let ok = PortGids::new("mlx5_0", 1, LinkLayer::Ethernet, &t, 255)
            .choose(Some(4))
            .unwrap()
            .unwrap();
        assert_eq!((ok.entry.index, ok.automatic.clone()), (4, None));
        assert!(ok.describe().ends_with(", from -x)"));
        let e = PortGids::new("mlx5_0", 1, LinkLayer::Ethernet, &t, 255)
            .choose(Some(300))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("-x/--gid-index 300: out of range: mlx5_0 port 1 has 255"),
            "{e}"
        );
        let e = PortGids::new("mlx5_0", 1, LinkLayer::Ethernet, &t, 255)
            .choose(Some(5))
            .unwrap_err()
            .to_string();
        assert!(e.contains("entry 5 of mlx5_0 port 1 is empty"), "{e}");
        let e = PortGids::new("mlx5_0", 1, LinkLayer::Ethernet, &t, 255)
            .choose(Some(2))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is RoCE v1, not RoCE v2"), "{e}");
    }

    #[test]
    fn infiniband_uses_lid_routing_unless_asked() {
        let t = vec![entry(0, "fe80::2:c903:1:2", GidKind::InfiniBand)];
        assert_eq!(
            PortGids::new("mlx5_0", 1, LinkLayer::InfiniBand, &t, 128)
                .choose(None)
                .unwrap(),
            None
        );
        let c = PortGids::new("mlx5_0", 1, LinkLayer::InfiniBand, &t, 128)
            .choose(Some(0))
            .unwrap();
        assert_eq!(c.unwrap().entry.kind, GidKind::InfiniBand);
    }

    #[test]
    fn ports_not_active_are_named() {
        let m = port_not_active("mlx5_0", 1, 1, 2);
        assert!(
            m.starts_with(
                "port 1 of mlx5_0 is DOWN (physical state Polling), not ACTIVE: bring the link up"
            ),
            "{m}"
        );
        let m = port_not_active("mlx5_0", 2, 2, 5);
        assert!(
            m.contains("is INIT (physical state LinkUp)") && m.contains("subnet manager"),
            "{m}"
        );
        let m = port_not_active("rxe0", 1, 9, 0);
        assert!(
            m.contains("is in an unknown state (physical state unknown)"),
            "{m}"
        );
    }

    #[test]
    fn device_by_local_rank() {
        let d = vec!["rxe1".to_string(), "rxe2".to_string()];
        assert_eq!(device_name_for(&d, 0), Some("rxe1"));
        assert_eq!(device_name_for(&d, 3), Some("rxe2"));
        assert_eq!(device_name_for(&[], 3), None);
    }

    #[test]
    fn mtu_values() {
        assert_eq!(mtu_bytes(1), Some(256));
        assert_eq!(mtu_bytes(5), Some(4096));
        assert_eq!(mtu_bytes(0), None);
        assert_eq!(mtu_bytes(6), None);
    }
}
