//! Which GPU talks through which NIC, and how far apart they are: the path
//! matrix of `sysfs::topology`, the ACS control of every bridge port on the
//! GPUs' and NICs' paths, and the IOMMU mode of each, checked for what slows
//! or disables GPUDirect RDMA. A GPU's NIC is its nearest one (NCCL's choice);
//! rail i is GPU i with NIC i (one rank per rail).

use super::topology_facts::{Acs, TopologyFacts};
use super::{nvlink, nvlink_facts};
use super::{Finding, NodeFacts, Severity};
use crate::nccl_names::NameList;
use crate::sysfs::rdma::INFINIBAND;
use crate::sysfs::topology::{Device, Kind, PathClass, Topology};
use std::collections::BTreeMap;

/// ACS P2P Request Redirect and Completion Redirect: peer traffic goes up to
/// the root complex instead of across the switch.
const ACS_REDIRECT: u16 = 0x0004 | 0x0008;

/// Each GPU's nearest NICs, nearest class first; empty where no class is known.
fn nearest(t: &Topology, gpu: usize) -> (Option<PathClass>, Vec<usize>) {
    nearest_of(t, gpu, &t.of(Kind::Nic).map(|(j, _)| j).collect::<Vec<_>>())
}

/// A GPU's nearest NICs among `nics` and their class.
fn nearest_of(t: &Topology, gpu: usize, nics: &[usize]) -> (Option<PathClass>, Vec<usize>) {
    let nics: Vec<(usize, PathClass)> = nics
        .iter()
        .filter_map(|&j| Some((j, t.class(gpu, j)?)))
        .collect();
    let best = nics.iter().map(|(_, c)| *c).min();
    let near = nics
        .iter()
        .filter(|(_, c)| Some(*c) == best)
        .map(|(j, _)| *j)
        .collect();
    (best, near)
}

/// Each GPU's NIC, as NCCL picks it: the nearest, the least used of equally
/// near ones (in order of their label).
fn assign(t: &Topology) -> Vec<(usize, Option<usize>)> {
    let mut users: BTreeMap<usize, usize> = BTreeMap::new();
    t.of(Kind::Gpu)
        .map(|(g, _)| {
            let (_, near) = nearest(t, g);
            let pick = near
                .into_iter()
                .min_by_key(|j| (users.get(j).copied().unwrap_or(0), *j));
            if let Some(j) = pick {
                *users.entry(j).or_default() += 1;
            }
            (g, pick)
        })
        .collect()
}

fn names(t: &Topology, ids: &[usize]) -> String {
    ids.iter()
        .map(|&i| who(&t.devices[i]))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "GPU0 (0000:13:00.0)", "NIC3 (mlx5_3)".
fn who(d: &Device) -> String {
    format!("{} ({})", d.label, d.name)
}

pub fn check(node: &NodeFacts, out: &mut Vec<Finding>) {
    let f = &node.topology;
    let t = &f.topology;
    let finding =
        |severity, component: String, check: &str, seen: String, expected: &str, fix: &str| {
            Finding::new(severity, &node.node, component, check, seen, expected, fix)
        };
    // A PCI folder that could not be listed is its own error: what lies behind
    // it is unknown, not a device doctor failed to place.
    let pci_listed = !node.unlisted(crate::sysfs::PCI_DEVICES);
    for d in t.devices.iter().filter(|_| pci_listed) {
        for p in &d.problems {
            out.push(finding(
                Severity::Warning,
                who(d),
                "topology-unreadable",
                p.clone(),
                "its PCI path, numa_node and local_cpulist",
                "its place in the matrix is unknown ('?'); check that sysfs is mounted and readable",
            ));
        }
    }
    let has_nic = t.of(Kind::Nic).next().is_some();
    let assigned = assign(t);
    for &(g, _) in &assigned {
        let (best, near) = nearest(t, g);
        if let Some(c) = best.filter(|c| *c > PathClass::Pxb) {
            out.push(finding(
                Severity::Warning,
                who(&t.devices[g]),
                "topology-gdr-far",
                format!("nearest NIC {} at {}", names(t, &near), c.name()),
                "a NIC at PIX or PXB (behind the GPU's PCIe switch)",
                "GPUDirect RDMA through the host bridge or CPU interconnect is slow, and NCCL turns it off beyond PXB (copies through host memory): put a NIC behind this GPU's switch, or raise NCCL_NET_GDR_LEVEL only after measuring",
            ));
        }
    }
    shared(node, t, &assigned, out);
    rails(node, t, out);
    nvlink::check(node, out);
    if has_nic {
        acs(node, f, &assigned, out);
        iommu(node, f, out);
        let used = ib_hca(node, t, out);
        gdr_level(node, t, &used, out);
    }
}

/// The NICs NCCL may use: all, or those NCCL_IB_HCA selects (any of whose
/// ports it selects; a NIC whose ports doctor did not read counts as port 1).
fn used_nics(node: &NodeFacts, t: &Topology) -> Vec<usize> {
    let all = t.of(Kind::Nic).map(|(j, _)| j);
    let Some(value) = node.nccl.env.get("NCCL_IB_HCA") else {
        return all.collect();
    };
    let list = NameList::parse(value);
    all.filter(|&j| {
        let name = &t.devices[j].name;
        let ports: Vec<u32> = node
            .hcas
            .iter()
            .filter(|h| &h.name == name)
            .flat_map(|h| h.ports.iter().map(|p| p.num))
            .collect();
        list.selects(name, if ports.is_empty() { &[1] } else { &ports })
    })
    .collect()
}

/// NCCL_IB_HCA against the topology: a GPU whose nearest NIC it leaves out
/// (NCCL then takes the nearest it allows), worse when that one is across
/// the CPU interconnect. A name that matches no NIC is `nccl-env`'s finding.
/// Returns the NICs NCCL may use.
fn ib_hca(node: &NodeFacts, t: &Topology, out: &mut Vec<Finding>) -> Vec<usize> {
    let used = used_nics(node, t);
    let Some(value) = node.nccl.env.get("NCCL_IB_HCA") else {
        return used;
    };
    if node.unlisted(INFINIBAND) {
        return used;
    }
    let var = format!("NCCL_IB_HCA={value}");
    if used.is_empty() && NameList::parse(value).exclude {
        let all: Vec<usize> = t.of(Kind::Nic).map(|(j, _)| j).collect();
        out.push(Finding::new(
            Severity::Error,
            &node.node,
            "NCCL_IB_HCA",
            "topology-hca-excluded",
            format!("{var} excludes every RDMA NIC ({})", names(t, &all)),
            "at least the nearest NIC of each GPU left in",
            "NCCL finds no RDMA NIC and falls back to TCP sockets: shorten the exclusion list or unset NCCL_IB_HCA",
        ));
    }
    if used.is_empty() {
        return used;
    }
    for (g, gpu) in t.of(Kind::Gpu) {
        let (best, near) = nearest(t, g);
        let (Some(best), (Some(got), took)) = (best, nearest_of(t, g, &used)) else {
            continue;
        };
        if got <= best {
            continue;
        }
        let seen = format!(
            "{var} leaves out {}'s nearest NIC {} ({}); it uses {} at {}",
            gpu.label,
            names(t, &near),
            best.name(),
            names(t, &took),
            got.name()
        );
        let finding = if got == PathClass::Sys {
            Finding::new(
                Severity::Warning,
                &node.node,
                who(gpu),
                "topology-hca-socket",
                seen,
                "a NIC of the GPU's own socket",
                "every transfer of this GPU crosses the CPU interconnect (and NCCL turns GPUDirect RDMA off): add its nearest NIC to NCCL_IB_HCA, or take it off the exclusion list",
            )
        } else {
            Finding::new(
                Severity::Warning,
                &node.node,
                who(gpu),
                "topology-hca-excluded",
                seen,
                "each GPU's nearest NIC selected",
                "this GPU's traffic takes a longer path and shares another GPU's NIC: add its nearest NIC to NCCL_IB_HCA, or take it off the exclusion list",
            )
        };
        out.push(finding);
    }
    used
}

/// Two GPUs or more on one NIC while another NIC serves none.
fn shared(
    node: &NodeFacts,
    t: &Topology,
    assigned: &[(usize, Option<usize>)],
    out: &mut Vec<Finding>,
) {
    let mut users: BTreeMap<usize, Vec<usize>> =
        t.of(Kind::Nic).map(|(j, _)| (j, Vec::new())).collect();
    for &(g, nic) in assigned {
        if let Some(j) = nic {
            users.entry(j).or_default().push(g);
        }
    }
    let idle: Vec<usize> = users
        .iter()
        .filter(|(_, g)| g.is_empty())
        .map(|(j, _)| *j)
        .collect();
    if idle.is_empty() {
        return;
    }
    for (&j, gpus) in users.iter().filter(|(_, g)| g.len() > 1) {
        out.push(Finding::new(
            Severity::Warning,
            &node.node,
            who(&t.devices[j]),
            "topology-nic-shared",
            format!("nearest NIC of {}; {} nearest to no GPU", names(t, gpus), names(t, &idle)),
            "one NIC per GPU (or per pair of GPUs on every switch alike)",
            "these GPUs split one NIC's bandwidth while another NIC idles: move the idle NIC behind these GPUs' PCIe switch",
        ));
    }
}

/// Rail i (GPU i with NIC i) across NUMA nodes.
fn rails(node: &NodeFacts, t: &Topology, out: &mut Vec<Finding>) {
    let numa = |d: &Device| d.numa.get().copied().flatten();
    for ((g, gpu), (j, nic)) in t.of(Kind::Gpu).zip(t.of(Kind::Nic)) {
        if let (Some(a), Some(b)) = (numa(gpu), numa(nic)) {
            if a != b {
                out.push(Finding::new(
                    Severity::Warning,
                    &node.node,
                    who(nic),
                    "topology-nic-numa",
                    format!("{} on NUMA node {a}, {} on NUMA node {b} ({})", who(gpu), who(nic), t.class(g, j).map_or("?", PathClass::name)),
                    "each rail's GPU and NIC on one NUMA node",
                    "a rank on this rail crosses the CPU interconnect for every transfer: move the NIC to a slot of its GPU's socket, or pair the GPU with a NIC of its own socket (NCCL_IB_HCA per rank)",
                ));
            }
        }
    }
}

/// ACS redirect on a bridge port between a GPU and its NIC.
fn acs(
    node: &NodeFacts,
    f: &TopologyFacts,
    assigned: &[(usize, Option<usize>)],
    out: &mut Vec<Finding>,
) {
    let t = &f.topology;
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for &(g, nic) in assigned {
        let Some(j) = nic else { continue };
        let (Some(a), Some(b)) = (&t.devices[g].path, &t.devices[j].path) else {
            continue;
        };
        let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let ports = a[common.max(2) - 1..a.len() - 1]
            .iter()
            .chain(&b[common.max(1)..b.len() - 1]);
        for port in ports {
            let pair = format!("{}-{}", t.devices[g].label, t.devices[j].label);
            let list = seen.entry(port.clone()).or_default();
            if !list.contains(&pair) {
                list.push(pair);
            }
        }
    }
    for (port, pairs) in seen {
        let pairs = pairs.join(", ");
        match f.acs.get(&port) {
            Some(Acs::Control(c)) if c & ACS_REDIRECT != 0 => out.push(Finding::new(
                Severity::Warning,
                &node.node,
                format!("bridge {port}"),
                "topology-acs",
                format!("ACS control 0x{c:04x}: P2P request/completion redirect on, between {pairs}"),
                "ACS redirect off on switch ports between a GPU and its NIC",
                "GPU-NIC traffic is sent up to the root complex instead of across the switch (GPUDirect RDMA slow or failing): disable ACS in the BIOS, or clear it at boot (setpci -s PORT ECAP_ACS+6.w=0) where the IOMMU is in passthrough",
            )),
            Some(Acs::Unchecked(why)) => out.push(Finding::new(
                Severity::Info,
                &node.node,
                format!("bridge {port}"),
                "topology-acs",
                format!("not checked: {why}"),
                format!("ACS redirect off between {pairs}"),
                "run doctor as root to read the ACS control register",
            )),
            _ => {}
        }
    }
}

/// A GPU or NIC whose DMA the IOMMU translates.
fn iommu(node: &NodeFacts, f: &TopologyFacts, out: &mut Vec<Finding>) {
    let translated: Vec<String> = f
        .iommu
        .iter()
        .filter(|(_, kind)| kind.starts_with("DMA"))
        .map(|(label, kind)| format!("{label} {kind}"))
        .collect();
    if !translated.is_empty() {
        out.push(Finding::new(
            Severity::Warning,
            &node.node,
            "iommu",
            "topology-iommu",
            format!("IOMMU translating DMA for {}", translated.join(", ")),
            "IOMMU groups of type identity (passthrough) for GPUs and NICs",
            "peer-to-peer DMA between GPU and NIC goes through the root complex's IOMMU, slower or blocked: boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on iommu=pt)",
        ));
    }
}

/// NCCL_NET_GDR_LEVEL nearer than some GPU's nearest NIC (of those
/// NCCL_IB_HCA leaves it): GPUDirect RDMA off there.
fn gdr_level(node: &NodeFacts, t: &Topology, used: &[usize], out: &mut Vec<Finding>) {
    let Some(text) = node.nccl.env.get("NCCL_NET_GDR_LEVEL") else {
        return;
    };
    let Some(level) = PathClass::parse(text) else {
        return;
    };
    let off: Vec<usize> = t
        .of(Kind::Gpu)
        .filter(|(g, _)| nearest_of(t, *g, used).0.is_some_and(|c| c > level))
        .map(|(g, _)| g)
        .collect();
    if !off.is_empty() {
        out.push(Finding::new(
            Severity::Warning,
            &node.node,
            "NCCL_NET_GDR_LEVEL",
            "topology-gdr-level",
            format!(
                "NCCL_NET_GDR_LEVEL={text}: GPUDirect RDMA off for {}",
                names(t, &off)
            ),
            "a level at least as far as each GPU's nearest NIC",
            "unset it, or fix the topology (see topology-gdr-far) rather than lowering the level",
        ));
    }
}

/// The matrix as `nvidia-smi topo -m` prints it (NV# where two GPUs share
/// NVLink links), then the legend of NICs and netdevs.
pub fn matrix(f: &TopologyFacts) -> Vec<String> {
    let t = &f.topology;
    let w = 7;
    let cell = |s: &str| format!("{s:<w$}");
    let mut lines = Vec::new();
    let mut head = cell("");
    for d in &t.devices {
        head += &cell(&d.label);
    }
    lines.push(
        format!("{head}CPU Affinity       NUMA Affinity")
            .trim_end()
            .to_string(),
    );
    for (i, d) in t.devices.iter().enumerate() {
        let mut row = cell(&d.label);
        for j in 0..t.devices.len() {
            row += &match nvlink_facts::links_between(&f.nvlink, t, i, j) {
                Some(n) => cell(&format!("NV{n}")),
                None => cell(t.class(i, j).map_or("?", PathClass::name)),
            };
        }
        let cpus = d.cpus.get().map_or("?", String::as_str);
        let numa = match d.numa.get() {
            Some(Some(n)) => n.to_string(),
            Some(None) => "N/A".into(),
            None => "?".into(),
        };
        lines.push(format!("{row}{cpus:<19}{numa}"));
    }
    for d in t.devices.iter().filter(|d| d.kind != Kind::Gpu) {
        lines.push(format!("  {}: {}", d.label, d.name));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::testing::{facts, findings};

    /// Each finding as "check component: seen".
    fn said(name: &str) -> Vec<String> {
        let node = facts(name, |_| {});
        findings(&[node], "topology")
            .into_iter()
            .map(|f| format!("{} {}: {}", f.check, f.component, f.seen))
            .collect()
    }

    /// The matrix of a fixture, each row as its cells.
    fn cells(name: &str) -> Vec<Vec<String>> {
        let node = facts(name, |_| {});
        matrix(&node.topology)
            .iter()
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    }

    /// The expected class row of device `i` of the HGX tree (8 GPUs, 8 NICs,
    /// the management netdev): GPUs and NICs 2s, 2s+1 under switch s, switches
    /// 0 and 1 on socket 0, 2 and 3 on socket 1, the netdev on socket 0.
    fn hgx_row(i: usize, moved_nic7: bool) -> Vec<&'static str> {
        let switch = |k: usize| {
            if k < 8 {
                k / 2
            } else if k < 16 {
                (k - 8) / 2
            } else {
                9
            }
        };
        let socket = |k: usize| match (k, moved_nic7) {
            (15, true) | (16, _) => 0,
            _ => switch(k) / 2,
        };
        let alone = |k: usize| k == 16 || (k == 15 && moved_nic7);
        (0..17)
            .map(|j| {
                if i == j {
                    "X"
                } else if alone(i) || alone(j) {
                    match (socket(i) == socket(j), i == 16 || j == 16) {
                        (false, _) => "SYS",
                        // NIC7 moved sits on switch 0's host bridge.
                        (true, false) if switch(i.min(j)) == 0 && !(i == 16 || j == 16) => "PHB",
                        (true, _) => "NODE",
                    }
                } else if switch(i) == switch(j) {
                    "PIX"
                } else if socket(i) == socket(j) {
                    "NODE"
                } else {
                    "SYS"
                }
            })
            .collect()
    }

    fn check_matrix(name: &str, moved_nic7: bool) {
        let rows = cells(name);
        let labels: Vec<String> = (0..8)
            .map(|n| format!("GPU{n}"))
            .chain((0..8).map(|n| format!("NIC{n}")))
            .chain(["NET0".to_string()])
            .collect();
        assert_eq!(rows[0][..17], labels[..], "{name} header");
        for (i, label) in labels.iter().enumerate() {
            let row = &rows[i + 1];
            assert_eq!(&row[0], label);
            assert_eq!(row[1..18], hgx_row(i, moved_nic7)[..], "{name} row {label}");
            let socket = if i == 16 || (i == 15 && moved_nic7) {
                0
            } else {
                i % 8 / 4
            };
            let cpus = ["0-55,112-167", "56-111,168-223"][socket];
            assert_eq!(
                row[18..],
                [cpus.to_string(), socket.to_string()],
                "{name} {label}"
            );
        }
        assert_eq!(rows[18], ["NIC0:", "mlx5_0"]);
        assert_eq!(rows[26], ["NET0:", "eno1"]);
    }

    #[test]
    fn the_hgx_node_prints_its_matrix_and_nothing_is_wrong() {
        check_matrix("topology/hgx8", false);
        assert_eq!(said("topology/hgx8"), Vec::<String>::new());
        // Every finding of doctor on it, not only the topology ones.
        let node = facts("topology/hgx8", |_| {});
        assert_eq!(
            node.topology.acs.len(),
            4 + 4 + 16 + 1,
            "root, upstream, downstream ports"
        );
        assert_eq!(node.topology.iommu.len(), 16);
    }

    #[test]
    fn a_nic_on_the_other_socket() {
        check_matrix("topology/nic-other-socket", true);
        assert_eq!(
            said("topology/nic-other-socket"),
            [
                "topology-nic-shared NIC6 (mlx5_6): nearest NIC of GPU6 (0000:b3:00.0), GPU7 (0000:b4:00.0); NIC7 (mlx5_7) nearest to no GPU",
                "topology-nic-numa NIC7 (mlx5_7): GPU7 (0000:b4:00.0) on NUMA node 1, NIC7 (mlx5_7) on NUMA node 0 (SYS)",
            ]
        );
    }

    #[test]
    fn two_gpus_behind_one_nic() {
        assert_eq!(
            said("topology/shared-nic"),
            ["topology-nic-shared NIC6 (mlx5_6): nearest NIC of GPU6 (0000:b3:00.0), GPU7 (0000:b4:00.0); NIC7 (mlx5_7) nearest to no GPU"]
        );
    }

    #[test]
    fn acs_redirect_between_a_gpu_and_its_nic() {
        let said = said("topology/acs");
        assert_eq!(said.len(), 4, "{said:#?}");
        assert_eq!(
            said[0],
            "topology-acs bridge 0000:12:00.0: ACS control 0x001d: P2P request/completion redirect on, between GPU0-NIC0"
        );
        assert!(
            said[2].starts_with("topology-acs bridge 0000:12:02.0:")
                && said[2].ends_with("GPU0-NIC0")
        );
        assert!(
            said[3].starts_with("topology-acs bridge 0000:12:03.0:")
                && said[3].ends_with("GPU1-NIC1")
        );
    }

    #[test]
    fn acs_unreadable_without_root() {
        let node = facts("topology/hgx8", |t| {
            t.put_bytes(
                "/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:00.0/config",
                &[0; 64],
            );
        });
        let f = findings(&[node], "topology-acs");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(
            f[0].seen,
            "not checked: config space unreadable (run as root)"
        );
        assert_eq!(f[0].severity, Severity::Info);
    }

    #[test]
    fn iommu_translating() {
        let said = said("topology/iommu-translated");
        assert_eq!(said.len(), 1);
        assert!(said[0].starts_with(
            "topology-iommu iommu: IOMMU translating DMA for GPU0 DMA-FQ, GPU1 DMA-FQ"
        ));
    }

    #[test]
    fn a_gpu_with_no_near_nic_and_a_gdr_level_below_it() {
        let node = facts("topology/nic-other-socket", |t| {
            t.remove("/sys/class/infiniband/mlx5_6");
            crate::sysfs::fixture::environ(t, &["NCCL_NET_GDR_LEVEL=PHB"]);
        });
        let f: Vec<String> = findings(&[node], "topology-gdr")
            .into_iter()
            .map(|f| format!("{} {}: {}", f.check, f.component, f.seen))
            .collect();
        assert_eq!(
            f,
            [
                "topology-gdr-far GPU6 (0000:b3:00.0): nearest NIC NIC4 (mlx5_4), NIC5 (mlx5_5) at NODE",
                "topology-gdr-far GPU7 (0000:b4:00.0): nearest NIC NIC4 (mlx5_4), NIC5 (mlx5_5) at NODE",
                "topology-gdr-level NCCL_NET_GDR_LEVEL: NCCL_NET_GDR_LEVEL=PHB: GPUDirect RDMA off for GPU6 (0000:b3:00.0), GPU7 (0000:b4:00.0)",
            ]
        );
    }

    /// The topology and nccl-env findings on the HGX tree with NCCL_IB_HCA set.
    fn with_ib_hca(value: &str) -> Vec<String> {
        let node = facts("topology/hgx8", |t| {
            crate::sysfs::fixture::environ(t, &[&format!("NCCL_IB_HCA={value}")]);
        });
        let mut all = findings(std::slice::from_ref(&node), "topology");
        all.extend(findings(&[node], "nccl-env"));
        all.into_iter()
            .map(|f| format!("{} {}: {}", f.check, f.component, f.seen))
            .collect()
    }

    #[test]
    fn ib_hca_that_keeps_every_nearest_nic_says_nothing() {
        for value in [
            "mlx5",
            "=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7",
            "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1",
            // GPU6 and GPU7 keep NIC7 at PIX.
            "^=mlx5_6",
        ] {
            assert_eq!(with_ib_hca(value), Vec::<String>::new(), "{value}");
        }
    }

    #[test]
    fn ib_hca_leaving_out_a_gpus_nearest_nic() {
        assert_eq!(
            with_ib_hca("^mlx5_6,mlx5_7"),
            [
                "topology-hca-excluded GPU6 (0000:b3:00.0): NCCL_IB_HCA=^mlx5_6,mlx5_7 leaves out GPU6's nearest NIC NIC6 (mlx5_6), NIC7 (mlx5_7) (PIX); it uses NIC4 (mlx5_4), NIC5 (mlx5_5) at NODE",
                "topology-hca-excluded GPU7 (0000:b4:00.0): NCCL_IB_HCA=^mlx5_6,mlx5_7 leaves out GPU7's nearest NIC NIC6 (mlx5_6), NIC7 (mlx5_7) (PIX); it uses NIC4 (mlx5_4), NIC5 (mlx5_5) at NODE",
            ]
        );
    }

    #[test]
    fn ib_hca_sending_gpus_to_the_other_socket() {
        let said = with_ib_hca("=mlx5_0:1,mlx5_1:1");
        assert_eq!(said.len(), 6, "{said:#?}");
        assert_eq!(said[0], "topology-hca-excluded GPU2 (0000:33:00.0): NCCL_IB_HCA==mlx5_0:1,mlx5_1:1 leaves out GPU2's nearest NIC NIC2 (mlx5_2), NIC3 (mlx5_3) (PIX); it uses NIC0 (mlx5_0), NIC1 (mlx5_1) at NODE");
        assert_eq!(said[2], "topology-hca-socket GPU4 (0000:93:00.0): NCCL_IB_HCA==mlx5_0:1,mlx5_1:1 leaves out GPU4's nearest NIC NIC4 (mlx5_4), NIC5 (mlx5_5) (PIX); it uses NIC0 (mlx5_0), NIC1 (mlx5_1) at SYS");
        assert!(said[3..]
            .iter()
            .all(|s| s.starts_with("topology-hca-socket GPU")));
    }

    #[test]
    fn ib_hca_naming_no_nic_or_excluding_all() {
        assert_eq!(
            with_ib_hca("mlx5_9"),
            ["nccl-env NCCL_IB_HCA: NCCL_IB_HCA=mlx5_9: mlx5_9 matches no RDMA device here (have: mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7)"]
        );
        let said = with_ib_hca("^mlx5");
        assert_eq!(said, ["topology-hca-excluded NCCL_IB_HCA: NCCL_IB_HCA=^mlx5 excludes every RDMA NIC (NIC0 (mlx5_0), NIC1 (mlx5_1), NIC2 (mlx5_2), NIC3 (mlx5_3), NIC4 (mlx5_4), NIC5 (mlx5_5), NIC6 (mlx5_6), NIC7 (mlx5_7))"]);
    }

    #[test]
    fn gdr_level_judged_on_the_nics_ib_hca_leaves() {
        let node = facts("topology/hgx8", |t| {
            crate::sysfs::fixture::environ(
                t,
                &["NCCL_IB_HCA=^mlx5_6,mlx5_7", "NCCL_NET_GDR_LEVEL=PXB"],
            );
        });
        let f = findings(&[node], "topology-gdr-level");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].seen
                .ends_with("GPUDirect RDMA off for GPU6 (0000:b3:00.0), GPU7 (0000:b4:00.0)"),
            "{}",
            f[0].seen
        );
    }

    #[test]
    fn malformed_values_are_said_per_device() {
        let node = facts("topology/hgx8", |t| {
            let gpu = "/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:00.0/0000:13:00.0";
            t.put(&format!("{gpu}/numa_node"), "zero");
            t.put(&format!("{gpu}/local_cpulist"), "0-");
        });
        let f = findings(&[node], "topology-unreadable");
        assert_eq!(f.len(), 2, "{f:#?}");
        assert!(f.iter().all(|f| f.component == "GPU0 (0000:13:00.0)"));
        assert!(f[0].seen.ends_with("numa_node: 'zero'"));
    }
}
