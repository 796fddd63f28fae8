//! RDMA ports: state and physical state, rate and width against the rack's best
//! port of the same adapter model (a downgraded link), and the active MTU.

use super::facts::{Hca, NodeFacts, Port};
use super::gpudirect::read_pci_device;
use super::roce::collect_gids;
use super::{Finding, Severity};
use crate::input::InputError;
use crate::sysfs::rdma::{self, INFINIBAND};
use crate::sysfs::{Reading, Root, Unreadable};
use anyhow::{anyhow, bail};

/// One entry of --hca: a device, optionally one port of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HcaFilter {
    pub device: String,
    pub port: Option<u32>,
}

impl std::str::FromStr for HcaFilter {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        let (device, port) = match s.split_once(':') {
            Some((d, p)) => (
                d,
                Some(
                    p.parse()
                        .map_err(|_| anyhow!("'{s}': the port after ':' must be a number"))?,
                ),
            ),
            None => (s, None),
        };
        if device.is_empty() {
            bail!("'{s}': give a device name such as mlx5_0");
        }
        Ok(HcaFilter {
            device: device.to_string(),
            port,
        })
    }
}

/// Bytes the kernel takes off the netdev MTU before picking the RDMA MTU: rxe's
/// RXE_MAX_HDR_LENGTH, and iboe_get_mtu's headers for hardware RoCE (mlx5).
const RXE_HEADER_BYTES: u32 = 80;
const ROCE_HEADER_BYTES: u32 = 96;

/// The RDMA MTU a RoCE port runs at over a netdev of this MTU: the largest IB
/// MTU that fits after the headers.
pub fn roce_active_mtu(netdev_mtu: u32, header_bytes: u32) -> u32 {
    [4096, 2048, 1024, 512, 256]
        .into_iter()
        .find(|&m| netdev_mtu.saturating_sub(header_bytes) >= m)
        .unwrap_or(256)
}

pub fn collect(root: &Root, devices: &[String], filter: &[HcaFilter]) -> Vec<Hca> {
    let wanted = |dev: &str| filter.is_empty() || filter.iter().any(|f| f.device == dev);
    devices
        .iter()
        .filter(|d| wanted(d))
        .map(|dev| {
            let port_wanted = |num: u32| {
                filter.is_empty()
                    || filter
                        .iter()
                        .any(|f| f.device == *dev && f.port.is_none_or(|p| p == num))
            };
            collect_hca(root, dev, &port_wanted)
        })
        .collect()
}

fn collect_hca(root: &Root, dev: &str, port_wanted: &dyn Fn(u32) -> bool) -> Hca {
    let base = format!("{INFINIBAND}/{dev}");
    // Software devices (rxe, siw) name their netdev in `parent` and have no PCI device.
    let software_parent = root.read(&format!("{base}/parent"));
    let pci_driver = root.link_name(&format!("{base}/device/driver"));
    let driver_module = pci_driver.clone().or_else(|| {
        software_parent.as_ref().map(|_| {
            if dev.starts_with("siw") {
                "siw"
            } else {
                "rdma_rxe"
            }
            .to_string()
        })
    });
    let driver = driver_module.map(|m| {
        match root
            .read(&format!("/sys/module/{m}/version"))
            .filter(|v| !v.is_empty())
        {
            Some(v) => format!("{m} {v}"),
            None => m,
        }
    });
    let model = root
        .read(&format!("{base}/hca_type"))
        .filter(|m| !m.is_empty())
        .or_else(|| software_parent.as_ref().map(|_| "soft-RoCE".to_string()))
        .unwrap_or_else(|| {
            dev.trim_end_matches(|c: char| c.is_ascii_digit())
                .to_string()
        });
    let pci = pci_driver
        .is_some()
        .then(|| {
            let bdf = root.link_name(&format!("{base}/device"))?;
            Some(read_pci_device(root, &bdf))
        })
        .flatten();
    let ports_dir = format!("{base}/ports");
    let (numbers, ports_unreadable) = match root.read_dir_parsed::<u32>(&ports_dir) {
        Ok(numbers) => (numbers, None),
        Err(InputError::Missing) => (Vec::new(), None),
        Err(why) => {
            let path = root.path(&ports_dir).display().to_string();
            (
                Vec::new(),
                Some(Unreadable {
                    path,
                    text: None,
                    why: Some(why),
                }),
            )
        }
    };
    let ports: Vec<Port> = numbers
        .into_iter()
        .filter(|&n| port_wanted(n))
        .map(|n| collect_port(root, dev, n, software_parent.is_some()))
        .collect();
    Hca {
        name: dev.to_string(),
        model,
        firmware: root
            .read(&format!("{base}/fw_ver"))
            .filter(|f| !f.is_empty()),
        driver,
        pci,
        ports,
        ports_unreadable,
    }
}

fn collect_port(root: &Root, dev: &str, num: u32, software: bool) -> Port {
    let dir = rdma::port_dir(dev, num);
    let link = rdma::read_port(root, &dir);
    let unknown = || "unknown".to_string();
    let gids = collect_gids(root, &dir);
    let link_layer = link.link_layer.unwrap_or_else(unknown);
    let netdev = gids.iter().find_map(|g| g.netdev.clone());
    let netdev_mtu = netdev.as_ref().map_or(Reading::Absent, |n| {
        root.read_parsed(&format!("/sys/class/net/{n}/mtu"))
    });
    let header = if software {
        RXE_HEADER_BYTES
    } else {
        ROCE_HEADER_BYTES
    };
    let active_mtu = (link_layer == "Ethernet")
        .then(|| netdev_mtu.get().map(|&m| roce_active_mtu(m, header)))
        .flatten();
    Port {
        num,
        state: link.state.unwrap_or_else(unknown),
        phys_state: link.phys_state.unwrap_or_else(unknown),
        rate: link.rate_text.unwrap_or_else(unknown),
        rate_gbps: link.rate.map(|r| r.gbit_per_s),
        width: link.lanes,
        link_layer,
        netdev,
        netdev_mtu,
        active_mtu,
        gids,
    }
}

const RATE_FIX: &str = "doctor cannot judge this port's speed: read it by hand (ibstat DEV, mlxlink -d DEV) and check the driver (a rate sysfs cannot print is a driver or firmware fault)";

const DOWNGRADE_FIX: &str = "the link trained below its speed or width: reseat or replace the cable/transceiver, check the switch port (mlxlink -d DEV -m)";

/// The fastest active port of this model anywhere in the rack, with where it is.
fn rack_best(all: &[NodeFacts], model: &str) -> Option<(f64, String, String)> {
    all.iter()
        .flat_map(|n| n.hcas.iter().map(move |h| (n, h)))
        .filter(|(_, h)| h.model == model)
        .flat_map(|(n, h)| h.ports.iter().map(move |p| (n, h, p)))
        .filter(|(_, _, p)| p.is_active())
        .filter_map(|(n, h, p)| {
            p.rate_gbps
                .get()
                .map(|&r| (r, p.rate.clone(), format!("{} {}", n.node, h.port_name(p))))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

pub fn check(node: &NodeFacts, all: &[NodeFacts], out: &mut Vec<Finding>) {
    // An RDMA class that could not be listed is an error of its own (`unlisted`).
    if node.rdma_devices.is_empty() && node.unlisted(INFINIBAND) {
        return;
    }
    if node.rdma_devices.is_empty() {
        out.push(Finding::new(
            Severity::Info,
            &node.node,
            "rdma",
            "no-rdma-device",
            "no RDMA device in /sys/class/infiniband",
            "RDMA devices on a GPU node of an RDMA fabric",
            "none needed where the fabric is TCP; otherwise install the NIC driver (MOFED/rdma-core) and check `ibv_devices`",
        ));
        return;
    }
    if node.hcas.is_empty() {
        out.push(Finding::new(
            Severity::Error,
            &node.node,
            "rdma",
            "hca-missing",
            format!(
                "--hca selects no device; this node has {}",
                node.rdma_devices.join(", ")
            ),
            "the devices named by --hca",
            "name devices that exist on this node in --hca",
        ));
    }
    for hca in &node.hcas {
        if let Some(u) = &hca.ports_unreadable {
            out.push(Finding::unreadable_file(
                &node.node,
                &hca.name,
                u,
                "the device's port folders (/sys/class/infiniband/DEV/ports)",
                "doctor cannot list this device's ports: check the driver (ls /sys/class/infiniband/DEV/ports)",
            ));
        } else if hca.ports.is_empty() {
            out.push(Finding::new(
                Severity::Error,
                &node.node,
                hca.name.as_str(),
                "hca-missing",
                "no such port",
                "the port named by --hca",
                "name a port that exists (see /sys/class/infiniband/DEV/ports)",
            ));
        }
        for port in &hca.ports {
            check_port(node, all, hca, port, out);
        }
    }
}

fn check_port(node: &NodeFacts, all: &[NodeFacts], hca: &Hca, port: &Port, out: &mut Vec<Finding>) {
    let component = hca.port_name(port);
    if !port.is_active() || port.phys_state != "LinkUp" {
        let fix = match (port.state.as_str(), port.phys_state.as_str()) {
            ("INIT", "LinkUp") if !port.is_ethernet() => {
                "the link is up but no subnet manager configured the port: check that opensm/UFM runs on the fabric"
            }
            (_, "Disabled") => "the port is administratively disabled: enable it on the switch or with ibportstate",
            (_, "Polling") => "no link partner: check the cable, the transceiver and the switch port (ibstat, mlxlink)",
            _ => "bring the link up: check the cable and the switch port (ibstat, mlxlink, ip link)",
        };
        out.push(Finding::new(
            Severity::Error,
            &node.node,
            component.as_str(),
            "port-state",
            format!("state {}, physical state {}", port.state, port.phys_state),
            "state ACTIVE, physical state LinkUp",
            fix,
        ));
        return;
    }
    let rate = match &port.rate_gbps {
        Reading::Value(rate) => Some(*rate),
        other => {
            let expected = "a rate such as '400 Gb/sec (4X NDR)' (at most 10000 Gb/sec)";
            out.push(match other.unreadable() {
                Some(u) => Finding::unreadable_file(&node.node, &component, u, expected, RATE_FIX),
                None => {
                    let path = Root::new(&node.root)
                        .path(&format!("{}/rate", rdma::port_dir(&hca.name, port.num)));
                    let seen = format!("could not read {}: no such file", path.display());
                    Finding::unreadable(&node.node, &component, seen, expected, RATE_FIX)
                }
            });
            None
        }
    };
    if let Some(rate) = rate {
        if let Some(want) = node.port_rate_gbps.filter(|&w| rate < w) {
            out.push(Finding::new(
                Severity::Error,
                &node.node,
                component.as_str(),
                "link-downgrade",
                format!("rate {}", port.rate),
                format!("{want} Gb/sec (--port-rate)"),
                DOWNGRADE_FIX,
            ));
        } else if let Some((best, best_text, best_where)) = rack_best(all, &hca.model) {
            if rate < best {
                out.push(Finding::new(
                    Severity::Error,
                    &node.node,
                    component.as_str(),
                    "link-downgrade",
                    format!("rate {}", port.rate),
                    format!("{best_text}, as on {best_where} (same model {})", hca.model),
                    DOWNGRADE_FIX,
                ));
            }
        }
    }
    if let (true, Some(u)) = (port.is_ethernet(), port.netdev_mtu.unreadable()) {
        out.push(Finding::unreadable_file(
            &node.node,
            &component,
            u,
            "the netdev's MTU in bytes, such as '9000'",
            "doctor cannot judge the RoCE MTU: read it by hand (ip link show DEV) and check the netdev",
        ));
    }
    if let (Some(mtu), Some(netdev_mtu)) = (port.active_mtu, port.netdev_mtu.get()) {
        if mtu < 4096 {
            out.push(Finding::new(
                Severity::Warning,
                &node.node,
                component.as_str(),
                "roce-mtu",
                format!(
                    "active MTU {mtu} (netdev {} MTU {netdev_mtu})",
                    port.netdev.as_deref().unwrap_or("?")
                ),
                "active MTU 4096 (netdev MTU 4200 or more; 9000 is usual)",
                "raise the MTU of the netdev and of the switch ports alike on every node (ip link set DEV mtu 9000)",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{facts, findings};
    use super::super::{collect, Selection};
    use super::*;
    use crate::sysfs::fixture::Tree;

    /// A rate that does not read as one (garbage, zero, or beyond any port) is
    /// an error naming the file and its text, never a port passed in silence;
    /// so is an active port with no rate file.
    #[test]
    fn an_unreadable_rate_is_a_finding() {
        let rate = "/sys/class/infiniband/mlx5_0/ports/1/rate";
        for bad in ["fast (4X NDR)", "0 Gb/sec (4X NDR)", "1e30 Gb/sec (4X NDR)"] {
            let tree = Tree::named("doctor/downgraded-port");
            tree.put(rate, bad);
            let node = collect(&tree.root(), &Selection::default());
            let port = &node.hcas[0].ports[0];
            assert_eq!((port.rate.as_str(), port.width), (bad, Some(4)));
            assert_eq!(port.rate_gbps.get(), None);
            let f = findings(&[node], "unreadable");
            assert_eq!(f.len(), 1, "{f:?}");
            assert_eq!(
                (f[0].severity, f[0].component.as_str()),
                (Severity::Error, "mlx5_0:1")
            );
            let path = tree.dir().join(rate.trim_start_matches('/'));
            assert_eq!(
                f[0].seen,
                format!("could not read {}: '{bad}'", path.display())
            );
            assert!(f[0].fix.contains("ibstat"), "{}", f[0].fix);
        }
        let node = facts("doctor/healthy", |t| t.remove(rate));
        let f = findings(&[node], "unreadable");
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].seen.ends_with("ports/1/rate: no such file"),
            "{}",
            f[0].seen
        );
    }

    #[test]
    fn an_unreadable_netdev_mtu_is_a_finding() {
        let node = facts("doctor/healthy", |t| {
            t.put("/sys/class/net/eth2/mtu", "jumbo")
        });
        let f = findings(&[node], "unreadable");
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].seen.ends_with("sys/class/net/eth2/mtu: 'jumbo'"),
            "{}",
            f[0].seen
        );
    }

    #[test]
    fn absent_port_files_read_as_unknown() {
        let node = facts("doctor/healthy", |t| {
            let p = "/sys/class/infiniband/mlx5_1/ports/1";
            for f in ["state", "phys_state", "rate", "link_layer"] {
                t.remove(&format!("{p}/{f}"));
            }
        });
        let port = &node.hcas[1].ports[0];
        assert_eq!(
            [&port.state, &port.phys_state, &port.rate, &port.link_layer],
            ["unknown"; 4]
        );
        assert_eq!((port.rate_gbps.get(), port.active_mtu), (None, None));
        let f = findings(&[node], "port-state");
        assert_eq!(f[0].seen, "state unknown, physical state unknown");
    }

    #[test]
    fn ports_down_and_disabled_name_their_fix() {
        let node = facts("doctor/port-down", |t| {
            t.put(
                "/sys/class/infiniband/mlx5_0/ports/1/phys_state",
                "3: Disabled",
            )
        });
        let f = findings(&[node], "port-state");
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(
            f[0].fix.contains("administratively disabled"),
            "{}",
            f[0].fix
        );
        assert!(f[1].fix.contains("no link partner"), "{}", f[1].fix);
    }

    #[test]
    fn roce_mtu_follows_the_kernel() {
        // rxe over veth at 1500 is 1024 and at 4200 is 4096 (seen in the Soft-RoCE VM).
        assert_eq!(roce_active_mtu(1500, RXE_HEADER_BYTES), 1024);
        assert_eq!(roce_active_mtu(4200, RXE_HEADER_BYTES), 4096);
        assert_eq!(roce_active_mtu(9000, ROCE_HEADER_BYTES), 4096);
        assert_eq!(roce_active_mtu(4150, ROCE_HEADER_BYTES), 2048);
        assert_eq!(roce_active_mtu(100, ROCE_HEADER_BYTES), 256);
    }

    #[test]
    fn hca_filter_parses() {
        assert_eq!(
            "mlx5_0:2".parse::<HcaFilter>().unwrap(),
            HcaFilter {
                device: "mlx5_0".into(),
                port: Some(2)
            }
        );
        assert_eq!("rxe1".parse::<HcaFilter>().unwrap().port, None);
        assert!("mlx5_0:x".parse::<HcaFilter>().is_err());
        assert!(":1".parse::<HcaFilter>().is_err());
    }
}
