//! Detection of a node's limits from sysfs: the rate of every active RDMA port,
//! the PCIe link of every RDMA NIC and GPU; and the merge of every node's
//! detection into the run's.

use super::pcie::{parse_link_speed, parse_link_width, PcieLink, PcieState};
use super::{gbs_of_gbits, trim_number, Limit};
use crate::sysfs::rdma::{self, KernelState, PortState, INFINIBAND};
use crate::sysfs::{self, Reading, Root, Unreadable, PCI_DEVICES};
use serde::{Deserialize, Serialize};
use std::path::Path;

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

/// Which kind of device a PCIe link belongs to: the limit it sets, and whether
/// its speed at rest says anything (GPUs lower their link speed when idle).
#[derive(Clone, Copy)]
enum PcieRole {
    Nic,
    Gpu,
}

/// The sysfs folder of the PCI device at `bus_id` ("0000:18:00.0") under
/// `root` (normally "/").
pub fn pci_device_dir(root: &Path, bus_id: &str) -> std::path::PathBuf {
    Root::new(root).path(&sysfs::pci_device(bus_id))
}

/// The "current" or "max" link of the PCI device whose sysfs folder is `dev`.
/// A width of 0 is a link that did not train, whatever its speed reads.
fn read_link(root: &Root, dev: &str, kind: &str) -> Reading<PcieLink> {
    let gts = root.read_with(&format!("{dev}/{kind}_link_speed"), parse_link_speed);
    let width = root.read_with(&format!("{dev}/{kind}_link_width"), parse_link_width);
    match (gts, width) {
        (gts, Reading::Value(0)) => Reading::Value(PcieLink {
            gts: gts.value().unwrap_or(0.0),
            width: 0,
        }),
        (Reading::Value(gts), Reading::Value(width)) => Reading::Value(PcieLink { gts, width }),
        (Reading::Unreadable(u), _) | (_, Reading::Unreadable(u)) => Reading::Unreadable(u),
        _ => Reading::Absent,
    }
}

/// Reads the link of the device at `bus_id` under `root` (normally "/").
pub fn pcie_state(root: &Root, bus_id: &str) -> Reading<PcieState> {
    pcie_state_at(root, &sysfs::pci_device(bus_id))
}

/// Reads the link of the PCI device whose sysfs folder is `device`: absent
/// where sysfs reports no maximum link, unreadable where the device's or its
/// upstream port's maximum does not read.
fn pcie_state_at(root: &Root, device: &str) -> Reading<PcieState> {
    read_link(root, device, "max").and_then(|device_max| {
        // The upstream port is the folder the device's real folder is in.
        let port = root.resolve(device);
        let port_max = port
            .as_deref()
            .and_then(sysfs::parent)
            .map_or(Reading::Absent, |p| read_link(root, p, "max"));
        let capable = match port_max {
            Reading::Unreadable(u) => return Reading::Unreadable(u),
            Reading::Absent => device_max,
            Reading::Value(port_max) => PcieLink {
                gts: device_max.gts.min(port_max.gts),
                width: device_max.width.min(port_max.width),
            },
        };
        Reading::Value(PcieState {
            capable,
            device_max,
            current: read_link(root, device, "current"),
        })
    })
}

/// Reads the link of one PCI device; `who` names it in messages.
fn detect_pcie(root: &Root, dev: &str, who: &str, role: PcieRole, found: &mut Detection) {
    let not_reported = || format!("{who}: PCIe link speed/width not reported");
    let unreadable = |u: Unreadable| format!("{who}: {u}; no PCIe limit from this link");
    let state = match pcie_state_at(root, dev) {
        Reading::Value(s) => s,
        Reading::Unreadable(u) => return found.found.push(unreadable(u)),
        Reading::Absent => return found.found.push(not_reported()),
    };
    let current = match state.current.clone() {
        Reading::Value(c) if c.width > 0 => c,
        Reading::Unreadable(u) => return found.found.push(unreadable(u)),
        _ => return found.found.push(not_reported()),
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
fn is_gpu(root: &Root, dev: &str) -> bool {
    let class = root.read(&format!("{dev}/class")).unwrap_or_default();
    let vendor = root.read(&format!("{dev}/vendor")).unwrap_or_default();
    class.starts_with("0x03") && matches!(vendor.as_str(), "0x10de" | "0x1002")
}

/// The RDMA ports a run's ranks on one node use: those `named` accepts
/// (NCCL_IB_HCA, -d; all where nothing names them), at most one per rank of
/// the node (one rank per rail).
pub struct Rails<'a> {
    pub named: &'a dyn Fn(&str, u32) -> bool,
    /// What named them, for the header ("NCCL_IB_HCA names mlx5_0,mlx5_1").
    pub by: Option<String>,
    pub ranks_on_node: usize,
}

impl Rails<'_> {
    /// One rank, every port: the slowest active port binds.
    pub const ONE: Rails<'static> = Rails {
        named: &|_, _| true,
        by: None,
        ranks_on_node: 1,
    };
}

/// One active port a rank may use, and its NIC's PCIe figure.
struct Rail {
    who: String,
    gbit: f64,
    pcie_gbs: Option<f64>,
}

/// Reads the links of this node under `root` (normally "/"): every active RDMA
/// port's rate, the PCIe link of every RDMA NIC and of every GPU.
pub fn detect(root: &Root) -> Detection {
    detect_rails(root, &Rails::ONE)
}

/// [`detect`] for a run whose ranks use `rails`: where they use two or more,
/// the NIC limit is the sum over those rails of each one's port rate (or its
/// NIC's PCIe link, where slower), and the header says which counted.
pub fn detect_rails(root: &Root, rails: &Rails) -> Detection {
    let mut found = Detection::default();
    let mut usable = Vec::new();
    for name in root.list(INFINIBAND) {
        let dev = format!("{INFINIBAND}/{name}");
        let mut nic = Detection::default();
        let pci = format!("{dev}/device");
        if root.exists(&pci) {
            let address = root.resolve(&pci).unwrap_or_default();
            let who = format!("{name} ({})", sysfs::file_name(&address));
            detect_pcie(root, &pci, &who, PcieRole::Nic, &mut nic);
        }
        let pcie_gbs = nic.limits.first().map(|l| l.gbs);
        for port in root.list(&format!("{dev}/ports")) {
            let who = format!("{name} port {port}");
            let link = rdma::read_port(root, &rdma::port_dir(&name, &port));
            if let Some(state) = link.state.filter(|s| s != PortState::Active.name()) {
                found.found.push(format!("{who}: {state}, not a limit"));
                continue;
            }
            let rate = match link.rate {
                Reading::Absent => continue,
                Reading::Unreadable(u) => {
                    found
                        .found
                        .push(format!("{who}: {u}; no limit from this port"));
                    continue;
                }
                Reading::Value(rate) => rate,
            };
            let layer = link.link_layer.unwrap_or_default();
            found.found.push(format!("{who}: {} {layer}", rate.text));
            let named = port.parse().is_ok_and(|p| (rails.named)(&name, p));
            if named {
                usable.push(Rail {
                    who: format!("{name}:{port}"),
                    gbit: rate.gbit_per_s,
                    pcie_gbs,
                });
                found.add_limit(Limit {
                    name: format!("rdma-port {} Gb/s", trim_number(rate.gbit_per_s)),
                    gbs: gbs_of_gbits(rate.gbit_per_s),
                });
            }
        }
        found.found.extend(nic.found);
        found.warnings.extend(nic.warnings);
        for l in nic.limits {
            found.add_limit(l);
        }
    }
    let counted = &usable[..usable.len().min(rails.ranks_on_node)];
    if counted.len() > 1 {
        sum_rails(&mut found, counted, rails);
    }
    for bdf in root.list(PCI_DEVICES) {
        let dev = sysfs::pci_device(&bdf);
        if is_gpu(root, &dev) {
            detect_pcie(root, &dev, &format!("GPU {bdf}"), PcieRole::Gpu, &mut found);
        }
    }
    found
}

/// Replaces the per-port and per-NIC limits with their sum over `counted`.
fn sum_rails(found: &mut Detection, counted: &[Rail], rails: &Rails) {
    found
        .limits
        .retain(|l| !(l.name.starts_with("rdma-port") || l.name.starts_with("nic-pcie")));
    let gbs: f64 = counted
        .iter()
        .map(|r| {
            r.pcie_gbs
                .map_or(gbs_of_gbits(r.gbit), |p| p.min(gbs_of_gbits(r.gbit)))
        })
        .sum();
    let gbits: Vec<String> = counted.iter().map(|r| trim_number(r.gbit)).collect();
    found.add_limit(Limit {
        name: format!("rdma-rails {}x ({} Gb/s)", counted.len(), gbits.join("+")),
        gbs,
    });
    let who: Vec<&str> = counted.iter().map(|r| r.who.as_str()).collect();
    let by = rails
        .by
        .as_deref()
        .map_or(String::new(), |b| format!("; {b}"));
    found.found.push(format!(
        "rails counted: {} ({} ranks on this node, one per rail{by})",
        who.join(" + "),
        rails.ranks_on_node
    ));
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

#[cfg(test)]
mod tests {
    use super::super::{binding, choose, describe};
    use super::*;
    use crate::sysfs::fixture::Tree;

    fn limit_names(d: &Detection) -> Vec<&str> {
        d.limits.iter().map(|l| l.name.as_str()).collect()
    }

    /// Detection on the fixture tree `name`.
    fn detect_on(tree: &Tree) -> Detection {
        detect(&tree.root())
    }

    fn named(name: &str) -> Detection {
        detect_on(&Tree::named(name))
    }

    #[test]
    fn detects_ports_and_links() {
        let d = named("sysfs-ndr");
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
    fn rails_in_use_add_up() {
        let tree = Tree::named("sysfs-two-rails");
        let rails = |ranks_on_node, named: &dyn Fn(&str, u32) -> bool| {
            detect_rails(
                &tree.root(),
                &Rails {
                    named,
                    by: Some("NCCL_IB_HCA names mlx5".into()),
                    ranks_on_node,
                },
            )
        };
        // Two ranks, one per rail: both ports count, 2 x 50 GB/s.
        let two = rails(2, &|_, _| true);
        assert_eq!(
            limit_names(&two),
            ["rdma-rails 2x (400+400 Gb/s)", "gpu-pcie gen5 x16"]
        );
        // Each GPU's own PCIe link is still a limit of its own.
        assert_eq!(
            binding(&choose(&[], &two)).unwrap().name,
            "gpu-pcie gen5 x16"
        );
        assert_eq!(two.limits[0].gbs, 100.0);
        assert!(two.found.contains(
            &"rails counted: mlx5_0:1 + mlx5_1:1 (2 ranks on this node, one per rail; NCCL_IB_HCA names mlx5)"
                .to_string()
        ));
        // One rank, or one port named: one rail, one port's 50 GB/s binds.
        for one in [rails(1, &|_, _| true), rails(8, &|d, _| d == "mlx5_1")] {
            assert_eq!(
                binding(&choose(&[], &one)).unwrap().name,
                "rdma-port 400 Gb/s"
            );
            assert!(!one.found.iter().any(|l| l.starts_with("rails counted")));
        }
        assert_eq!(detect(&tree.root()), rails(1, &|_, _| true));
    }

    #[test]
    fn detects_a_downgraded_link() {
        let d = named("sysfs-downgraded");
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
        let tree = Tree::named("sysfs-gen5-in-gen4");
        let d = detect_on(&tree);
        assert_eq!(d.limits.len(), 1, "{:?}", d.limits);
        assert_eq!(d.limits[0].name, "gpu-pcie gen4 x16");
        // The same figure copy_bw compares the GPU's copies with.
        let state = pcie_state(&tree.root(), "0000:41:00.0").value().unwrap();
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
        let d = named("sysfs-no-fabric");
        assert_eq!(d, Detection::default());
        assert!(describe(&choose(&[], &d), false).starts_with("no limit"));
    }

    #[test]
    fn merge_prefixes_hosts() {
        let one = named("sysfs-ndr");
        let two = named("sysfs-downgraded");
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
        let all = merge(&[
            ("a".into(), named("sysfs-ndr")),
            ("b".into(), named("sysfs-ndr")),
        ]);
        assert!(all.found[0].ends_with("[all 2 nodes]"), "{:?}", all.found);
        let many: Vec<&str> = vec!["h"; 10];
        assert_eq!(host_list(&many, 12), "h, h, h, h, h, h, h, h and 2 more");
    }

    #[test]
    fn capability_is_the_weaker_end() {
        let t = Tree::temp("limits-capability");
        let port = "/sys/devices/pci0000:00/0000:00:01.0";
        let gpu = format!("{port}/0000:18:00.0");
        t.put(&format!("{gpu}/max_link_speed"), "32.0 GT/s PCIe");
        t.put(&format!("{gpu}/max_link_width"), "16");
        t.put(&format!("{gpu}/current_link_speed"), "2.5 GT/s PCIe");
        t.put(&format!("{gpu}/current_link_width"), "16");
        t.put(&format!("{port}/max_link_speed"), "16.0 GT/s PCIe");
        t.put(&format!("{port}/max_link_width"), "16");
        t.link(
            "/sys/bus/pci/devices/0000:18:00.0",
            &format!("../../../..{gpu}"),
        );

        let state = pcie_state(&t.root(), "0000:18:00.0").value().unwrap();
        assert_eq!(
            state.capable,
            PcieLink {
                gts: 16.0,
                width: 16
            }
        );
        assert_eq!(
            state.current,
            Reading::Value(PcieLink {
                gts: 2.5,
                width: 16
            })
        );
        assert_eq!(pcie_state(&t.root(), "0000:99:00.0"), Reading::Absent);
        assert_eq!(
            pci_device_dir(t.dir(), "0000:18:00.0"),
            t.dir().join("sys/bus/pci/devices/0000:18:00.0")
        );
    }

    /// Values sysfs should never print: each skips only its own link, with a
    /// found line naming the file and its text, and every limit left is a finite
    /// figure (a detection crosses the ranks as JSON, where an endless figure
    /// would not decode and every limit of the node would be lost).
    #[test]
    fn a_bad_value_skips_only_its_own_link() {
        let t = Tree::named("sysfs-ndr");
        let at = |abs: &str| {
            t.dir()
                .join(abs.trim_start_matches('/'))
                .display()
                .to_string()
        };
        let survives_json = |d: &Detection| {
            let json = serde_json::to_vec(d).unwrap();
            assert_eq!(&serde_json::from_slice::<Detection>(&json).unwrap(), d);
        };
        let rate = format!("{}/rate", rdma::port_dir("mlx5_0", 1));
        for bad in [
            "fast",
            "0 Gb/sec (4X NDR)",
            "inf Gb/sec (4X NDR)",
            "NaN Gb/sec (4X NDR)",
            "8000000000000000000 Gb/sec (4X NDR)",
        ] {
            t.put(&rate, bad);
            let d = detect_on(&t);
            let line = format!(
                "mlx5_0 port 1: could not read {}: '{bad}'; no limit from this port",
                at(&rate)
            );
            assert!(d.found.contains(&line), "{bad}: {:?}", d.found);
            assert_eq!(
                limit_names(&d),
                ["nic-pcie gen5 x16", "gpu-pcie gen5 x16"],
                "{bad}"
            );
            survives_json(&d);
        }
        t.put(&rate, "400 Gb/sec (4X NDR)");
        // Files are named as read: through the device links of sysfs.
        let nic = "/sys/devices/pci0000:16/0000:17:00.0";
        let gpu = "/sys/devices/pci0000:1a/0000:1b:00.0";
        for (file, bad) in [
            ("current_link_width", "x16"),
            ("current_link_width", "4096"),
            ("current_link_speed", "inf GT/s PCIe"),
            ("current_link_speed", "NaN GT/s PCIe"),
            ("max_link_speed", "1e300 GT/s PCIe"),
        ] {
            let real = format!("{nic}/{file}");
            let good = std::fs::read_to_string(at(&real)).unwrap();
            t.put(&real, bad);
            let d = detect_on(&t);
            let line = format!(
                "mlx5_0 (0000:17:00.0): could not read {}: '{bad}'; no PCIe limit from this link",
                at(&format!("{INFINIBAND}/mlx5_0/device/{file}"))
            );
            assert!(d.found.contains(&line), "{bad}: {:?}", d.found);
            // mlx5_1's link is the same gen5 x16: its limit stays, and so do the others.
            assert_eq!(
                limit_names(&d),
                [
                    "rdma-port 400 Gb/s",
                    "nic-pcie gen5 x16",
                    "gpu-pcie gen5 x16"
                ],
                "{bad}"
            );
            survives_json(&d);
            t.put(&real, good.trim());
        }
        t.put(&format!("{gpu}/max_link_speed"), "Unknown");
        let d = detect_on(&t);
        let line = format!(
            "GPU 0000:1b:00.0: could not read {}: 'Unknown'; no PCIe limit from this link",
            at("/sys/bus/pci/devices/0000:1b:00.0/max_link_speed")
        );
        assert!(d.found.contains(&line), "{:?}", d.found);
        assert_eq!(limit_names(&d), ["rdma-port 400 Gb/s", "nic-pcie gen5 x16"]);
        // A link whose files are gone is "not reported", as before.
        t.remove(&format!("{gpu}/max_link_speed"));
        let d = detect_on(&t);
        assert!(d
            .found
            .contains(&"GPU 0000:1b:00.0: PCIe link speed/width not reported".to_string()));
    }
}
