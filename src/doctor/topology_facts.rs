//! What doctor reads of the node's topology, before anything is judged: the
//! path matrix of `sysfs::topology`, the ACS control of every bridge port on
//! the GPUs' and NICs' paths, the IOMMU mode of each, and NVLink. The checks
//! live in `topology.rs` and `nvlink.rs`; the facts live here so that
//! `NodeFacts` holds them without depending on the checks.

use super::nvlink_facts::{self, NvLinkFacts};
use crate::sysfs::topology::{self, Kind, Topology};
use crate::sysfs::Root;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The ACS extended capability's ID and its control register's offset in it.
const ACS_ID: u16 = 0x000d;
const ACS_CONTROL: usize = 6;

/// A bridge port's ACS, as its config space says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Acs {
    /// The ACS control register's value.
    Control(u16),
    /// No ACS capability.
    Absent,
    /// Not checked, and why ("config space unreadable (run as root)").
    Unchecked(String),
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TopologyFacts {
    pub topology: Topology,
    /// Every bridge port on a GPU's or NIC's path, by PCI address.
    pub acs: BTreeMap<String, Acs>,
    /// The IOMMU domain type of each GPU and NIC by label ("identity", "DMA-FQ");
    /// a device in no IOMMU group is not listed (no IOMMU).
    pub iommu: BTreeMap<String, String>,
    /// NVLink between the GPUs (NVML, on the live node).
    #[serde(default)]
    pub nvlink: NvLinkFacts,
}

pub fn collect(root: &Root) -> TopologyFacts {
    let topology = topology::collect(root);
    let mut acs = BTreeMap::new();
    let mut iommu = BTreeMap::new();
    for d in &topology.devices {
        let Some(path) = &d.path else { continue };
        for depth in 2..path.len() {
            let port = &path[depth - 1];
            let dir = format!("/sys/devices/{}", path[..depth].join("/"));
            acs.entry(port.clone())
                .or_insert_with(|| read_acs(root, &dir));
        }
        if d.kind != Kind::Netdev {
            let dir = format!("/sys/devices/{}", path.join("/"));
            if let Some(group) = root.resolve(&format!("{dir}/iommu_group")) {
                let kind = root.read(&format!("{group}/type"));
                iommu.insert(d.label.clone(), kind.unwrap_or_else(|| "unreadable".into()));
            }
        }
    }
    TopologyFacts {
        nvlink: nvlink_facts::collect(root, &topology),
        topology,
        acs,
        iommu,
    }
}

/// The ACS control register of the bridge at `dir`, walking the extended
/// capabilities from 0x100. Unprivileged reads of `config` stop at 64 bytes.
fn read_acs(root: &Root, dir: &str) -> Acs {
    let unreadable = || Acs::Unchecked("config space unreadable (run as root)".into());
    let Ok(c) = root.read_bytes(&format!("{dir}/config")) else {
        return unreadable();
    };
    if c.len() <= 0x100 {
        return unreadable();
    }
    let u16_at = |o: usize| c.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let mut at = 0x100;
    for _ in 0..64 {
        let Some(b) = c.get(at..at + 4) else { break };
        let header = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if header == 0 || header == u32::MAX {
            break;
        }
        if header & 0xffff == u32::from(ACS_ID) {
            return u16_at(at + ACS_CONTROL).map_or_else(unreadable, Acs::Control);
        }
        at = (header >> 20) as usize;
        if at < 0x100 {
            break;
        }
    }
    Acs::Absent
}
