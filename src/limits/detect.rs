//! Detection of a node's limits from sysfs: the rate of every active RDMA port,
//! the PCIe link of every RDMA NIC and GPU; and the merge of every node's
//! detection into the run's.

use super::pcie::{parse_link_speed, PcieLink, PcieState};
use super::{gbs_of_gbits, trim_number, Limit};
use crate::sysfs::rdma::{self, KernelState, PortState, INFINIBAND};
use crate::sysfs::{self, Root, PCI_DEVICES};
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
fn read_link(root: &Root, dev: &str, kind: &str) -> Option<PcieLink> {
    Some(PcieLink {
        gts: root.read_with(&format!("{dev}/{kind}_link_speed"), parse_link_speed)?,
        width: root.read_parsed(&format!("{dev}/{kind}_link_width"))?,
    })
}

/// Reads the link of the device at `bus_id` under `root` (normally "/").
pub fn pcie_state(root: &Root, bus_id: &str) -> Option<PcieState> {
    pcie_state_at(root, &sysfs::pci_device(bus_id))
}

/// Reads the link of the PCI device whose sysfs folder is `device`; None
/// where sysfs reports no maximum link.
fn pcie_state_at(root: &Root, device: &str) -> Option<PcieState> {
    let device_max = read_link(root, device, "max")?;
    // The upstream port is the folder the device's real folder is in.
    let port = root.resolve(device);
    let mut capable = device_max;
    if let Some(port_max) = port
        .as_deref()
        .and_then(sysfs::parent)
        .and_then(|p| read_link(root, p, "max"))
    {
        capable.gts = capable.gts.min(port_max.gts);
        capable.width = capable.width.min(port_max.width);
    }
    Some(PcieState {
        capable,
        device_max,
        current: read_link(root, device, "current"),
    })
}

/// Reads the link of one PCI device; `who` names it in messages.
fn detect_pcie(root: &Root, dev: &str, who: &str, role: PcieRole, found: &mut Detection) {
    let Some((state, current)) =
        pcie_state_at(root, dev).and_then(|s| Some((s, s.current.filter(|l| l.width > 0)?)))
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
fn is_gpu(root: &Root, dev: &str) -> bool {
    let class = root.read(&format!("{dev}/class")).unwrap_or_default();
    let vendor = root.read(&format!("{dev}/vendor")).unwrap_or_default();
    class.starts_with("0x03") && matches!(vendor.as_str(), "0x10de" | "0x1002")
}

/// Reads the links of this node under `root` (normally "/"): every active RDMA
/// port's rate, the PCIe link of every RDMA NIC and of every GPU.
pub fn detect(root: &Root) -> Detection {
    let mut found = Detection::default();
    for name in root.list(INFINIBAND) {
        let dev = format!("{INFINIBAND}/{name}");
        for port in root.list(&format!("{dev}/ports")) {
            let who = format!("{name} port {port}");
            let link = rdma::read_port(&root, &rdma::port_dir(&name, &port));
            if let Some(state) = link.state.filter(|s| s != PortState::Active.name()) {
                found.found.push(format!("{who}: {state}, not a limit"));
                continue;
            }
            let Some(rate_text) = link.rate_text else {
                continue;
            };
            let Some(rate) = link.rate.filter(rdma::PortRate::is_usable) else {
                found
                    .found
                    .push(format!("{who}: unreadable rate '{rate_text}'"));
                continue;
            };
            let layer = link.link_layer.unwrap_or_default();
            found.found.push(format!("{who}: {rate_text} {layer}"));
            found.add_limit(Limit {
                name: format!("rdma-port {} Gb/s", trim_number(rate.gbit_per_s)),
                gbs: gbs_of_gbits(rate.gbit_per_s),
            });
        }
        let pci = format!("{dev}/device");
        if root.exists(&pci) {
            let address = root.resolve(&pci).unwrap_or_default();
            let who = format!("{name} ({})", sysfs::file_name(&address));
            detect_pcie(&root, &pci, &who, PcieRole::Nic, &mut found);
        }
    }
    for bdf in root.list(PCI_DEVICES) {
        let dev = sysfs::pci_device(&bdf);
        if is_gpu(&root, &dev) {
            detect_pcie(
                &root,
                &dev,
                &format!("GPU {bdf}"),
                PcieRole::Gpu,
                &mut found,
            );
        }
    }
    found
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
        let state = pcie_state(&tree.root(), "0000:41:00.0").unwrap();
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

        let state = pcie_state(&t.root(), "0000:18:00.0").unwrap();
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
        assert_eq!(pcie_state(&t.root(), "0000:99:00.0"), None);
        assert_eq!(
            pci_device_dir(t.dir(), "0000:18:00.0"),
            t.dir().join("sys/bus/pci/devices/0000:18:00.0")
        );
    }

    /// Today's behaviour with values sysfs should never print (issue #10 makes
    /// each a finding; see `sysfs::Root::read_with`): a port rate that does not
    /// parse is a found line and no limit, a link width or speed that does not
    /// parse makes the link "not reported", and the node keeps its other limits.
    #[test]
    fn unparsable_values_drop_only_their_own_limit() {
        let t = Tree::named("sysfs-ndr");
        let mlx5_0 = rdma::port_dir("mlx5_0", 1);
        let rates = [
            ("fast", "unreadable rate 'fast'"),
            ("0 Gb/sec (4X NDR)", "unreadable rate '0 Gb/sec (4X NDR)'"),
            (
                "inf Gb/sec (4X NDR)",
                "unreadable rate 'inf Gb/sec (4X NDR)'",
            ),
        ];
        for (rate, line) in rates {
            t.put(&format!("{mlx5_0}/rate"), rate);
            let d = detect_on(&t);
            assert!(
                d.found.contains(&format!("mlx5_0 port 1: {line}")),
                "{rate}: {:?}",
                d.found
            );
            let names: Vec<&str> = d.limits.iter().map(|l| l.name.as_str()).collect();
            assert_eq!(names, ["nic-pcie gen5 x16", "gpu-pcie gen5 x16"], "{rate}");
            // A detection crosses the ranks as JSON: every figure must survive it.
            let json = serde_json::to_vec(&d).unwrap();
            assert_eq!(serde_json::from_slice::<Detection>(&json).unwrap(), d);
        }
        let nic = "/sys/devices/pci0000:16/0000:17:00.0";
        t.put(&format!("{nic}/current_link_width"), "x16");
        t.put(
            "/sys/devices/pci0000:1a/0000:1b:00.0/max_link_speed",
            "Unknown",
        );
        let d = detect_on(&t);
        for who in ["mlx5_0 (0000:17:00.0)", "GPU 0000:1b:00.0"] {
            let line = format!("{who}: PCIe link speed/width not reported");
            assert!(d.found.contains(&line), "{:?}", d.found);
        }
        let names: Vec<&str> = d.limits.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["nic-pcie gen5 x16"], "mlx5_1's link is still read");
    }
}
