//! NVLink checked: links down beside active ones. The links themselves (read
//! through NVML, shown as NV# cells of the topology matrix as `nvidia-smi
//! topo -m` shows them) are `nvlink_facts.rs`; no test here has a GPU.

use super::nvlink_facts::NvLinkFacts;
use super::{Finding, NodeFacts, Severity};
use crate::sysfs::topology::Kind;

pub fn check(node: &NodeFacts, out: &mut Vec<Finding>) {
    let t = &node.topology.topology;
    match &node.topology.nvlink {
        NvLinkFacts::Unchecked => {}
        NvLinkFacts::Absent { why } => out.push(Finding::new(
            Severity::Info,
            &node.node,
            "NVML",
            "topology-nvlink",
            format!("NVML not found ({why}): NVLink not read"),
            "libnvidia-ml.so.1 of the NVIDIA driver",
            "the matrix shows PCIe paths only; install or load the NVIDIA driver to see NV# cells",
        )),
        NvLinkFacts::Read { gpus } => {
            let any_active = gpus.values().any(|l| !l.remotes.is_empty());
            for (_, d) in t.of(Kind::Gpu) {
                let Some(l) = gpus.get(&d.label).filter(|l| l.down > 0 && any_active) else {
                    continue;
                };
                out.push(Finding::new(
                    Severity::Warning,
                    &node.node,
                    format!("{} ({})", d.label, d.name),
                    "topology-nvlink-down",
                    format!(
                        "{} of {} NVLink links inactive",
                        l.down,
                        l.down + l.remotes.len()
                    ),
                    "every NVLink link active",
                    "traffic between this GPU and its peers runs on fewer links (or over PCIe): check `nvidia-smi nvlink -s` and `-e`, then the GPU's seating or the NVSwitch tray",
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::nvlink_facts::{collect, read};
    use crate::doctor::testing::{facts, findings};
    use crate::doctor::topology::matrix;
    use crate::gpu::links::{NvLinkSource, NvLinks, NvmlFacts};
    use crate::sysfs::Root;
    use std::collections::BTreeMap;

    /// NVML as a test writes it: each GPU's far ends by bus id, links down.
    struct FakeNvml(BTreeMap<&'static str, (Vec<&'static str>, usize)>);

    impl NvLinkSource for FakeNvml {
        fn nvlinks(&self, bus_id: &str) -> NvLinks {
            self.0
                .get(bus_id)
                .map(|(r, down)| NvLinks {
                    remotes: r.iter().map(|b| format!("0000{b}")).collect(),
                    link_mbps: Some(26_562),
                    down: *down,
                })
                .unwrap_or_default()
        }
    }

    /// The HGX tree's facts with NVLink from `fake`.
    fn with(fake: FakeNvml) -> NodeFacts {
        let mut node = facts("topology/hgx8", |_| {});
        node.topology.nvlink = read(&fake, &node.topology.topology);
        node
    }

    fn row(node: &NodeFacts, label: &str) -> Vec<String> {
        matrix(&node.topology)
            .iter()
            .skip(1)
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .find(|r| r[0] == label)
            .unwrap()
    }

    #[test]
    fn nvswitch_links_show_as_nv18_between_every_pair() {
        let switch = vec!["0000:c1:00.0"; 18];
        let gpus = [
            "0000:13:00.0",
            "0000:14:00.0",
            "0000:33:00.0",
            "0000:34:00.0",
            "0000:93:00.0",
            "0000:94:00.0",
            "0000:b3:00.0",
            "0000:b4:00.0",
        ];
        let node = with(FakeNvml(
            gpus.iter().map(|g| (*g, (switch.clone(), 0))).collect(),
        ));
        let r = row(&node, "GPU0");
        assert_eq!(
            r[1..9],
            ["X", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18"]
        );
        // GPU-NIC cells keep their PCIe class.
        assert_eq!(r[9..11], ["PIX", "PIX"]);
        assert_eq!(findings(&[node], "topology-nvlink"), vec![]);
    }

    #[test]
    fn direct_links_a_link_down_and_a_gpu_nvml_does_not_know() {
        let node = with(FakeNvml(BTreeMap::from([
            ("0000:13:00.0", (vec!["0000:14:00.0", "0000:14:00.0"], 0)),
            ("0000:14:00.0", (vec!["0000:13:00.0", "0000:13:00.0"], 1)),
        ])));
        assert_eq!(row(&node, "GPU0")[1..4], ["X", "NV2", "NODE"]);
        assert_eq!(row(&node, "GPU1")[1..4], ["NV2", "X", "NODE"]);
        let f = findings(&[node], "topology-nvlink");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].component, "GPU1 (0000:14:00.0)");
        assert_eq!(f[0].seen, "1 of 3 NVLink links inactive");
    }

    #[test]
    fn no_nvml_is_said_once_and_breaks_nothing() {
        let mut node = facts("topology/hgx8", |_| {});
        node.topology.nvlink = NvLinkFacts::Absent {
            why: "libnvidia-ml.so.1: cannot open shared object file".into(),
        };
        assert_eq!(row(&node, "GPU0")[1..3], ["X", "PIX"]);
        let f = findings(&[node], "topology");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].severity, Severity::Info);
        assert!(f[0].seen.starts_with("NVML not found (libnvidia-ml.so.1"));
        // A fixture tree is not the live node: NVML is not even opened.
        let node = facts("topology/hgx8", |_| {});
        assert_eq!(node.topology.nvlink, NvLinkFacts::Unchecked);
    }

    /// On this machine: no GPU, so nothing is read; with a GPU and its driver
    /// (a lent GPU machine), NVML opens and every GPU is listed.
    #[test]
    fn the_live_node() {
        let root = Root::new("/");
        let t = crate::sysfs::topology::collect(&root);
        match collect(&root, &t) {
            NvLinkFacts::Unchecked => assert_eq!(t.of(Kind::Gpu).count(), 0),
            NvLinkFacts::Absent { why } => assert!(!why.is_empty()),
            NvLinkFacts::Read { gpus } => assert_eq!(gpus.len(), t.of(Kind::Gpu).count()),
        }
        // Where libnvidia-ml.so.1 does not load, the reason names it.
        let nvml = NvmlFacts::open();
        if let Some(why) = nvml.absent_because() {
            eprintln!("NVML absent here: {why}");
            assert!(why.contains("libnvidia-ml.so.1"), "{why}");
        }
    }
}
