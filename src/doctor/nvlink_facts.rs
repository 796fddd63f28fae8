//! NVLink between the node's GPUs as NVML reports it (libnvidia-ml.so.1,
//! opened at run time; absent without the NVIDIA driver), read only on the
//! live node (`--sysfs-root /`): a fixture tree's GPUs are not this process's.
//! The boundary is `gpu::links::NvLinkSource`, which unit tests fake. The
//! check on these facts is `nvlink.rs`.

use crate::gpu::links::{NvLinkSource, NvLinks, NvmlFacts};
use crate::sysfs::topology::{Kind, Topology};
use crate::sysfs::Root;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum NvLinkFacts {
    /// Not read: no GPU, or the facts come from another root than the live node.
    #[default]
    Unchecked,
    /// NVML did not open, and why.
    Absent { why: String },
    /// Each GPU's links, by its label ("GPU0").
    Read { gpus: BTreeMap<String, NvLinks> },
}

/// NVLink of the GPUs of `t`, on the live node only.
pub fn collect(root: &Root, t: &Topology) -> NvLinkFacts {
    if root.dir() != Path::new("/") || t.of(Kind::Gpu).next().is_none() {
        return NvLinkFacts::Unchecked;
    }
    let nvml = NvmlFacts::open();
    match nvml.absent_because() {
        Some(why) => NvLinkFacts::Absent { why },
        None => read(&nvml, t),
    }
}

/// Each GPU's links from `source`.
pub fn read(source: &dyn NvLinkSource, t: &Topology) -> NvLinkFacts {
    NvLinkFacts::Read {
        gpus: t
            .of(Kind::Gpu)
            .map(|(_, d)| (d.label.clone(), source.nvlinks(&d.name)))
            .collect(),
    }
}

/// The links between devices `i` and `j` of `t` when both are GPUs joined by
/// NVLink: those of each end that reach the other (directly or through an
/// NVSwitch), the fewer of the two.
pub fn links_between(f: &NvLinkFacts, t: &Topology, i: usize, j: usize) -> Option<usize> {
    let NvLinkFacts::Read { gpus } = f else {
        return None;
    };
    let (a, b) = (&t.devices[i], &t.devices[j]);
    if i == j || a.kind != Kind::Gpu || b.kind != Kind::Gpu {
        return None;
    }
    let all: Vec<String> = t.of(Kind::Gpu).map(|(_, d)| d.name.clone()).collect();
    let n = gpus
        .get(&a.label)?
        .links_towards(&b.name, &all)
        .min(gpus.get(&b.label)?.links_towards(&a.name, &all));
    (n > 0).then_some(n)
}
