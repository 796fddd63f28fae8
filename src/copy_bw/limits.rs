//! What bounds each copy: PCIe from sysfs for host copies, memory for copies
//! within a GPU, NVLink (NVML) or both GPUs' PCIe links between two GPUs; and
//! why host copies fell short when their link trained below its capability.

use super::gpus::Gpu;
use crate::gpu::links::NvmlFacts;
use crate::limits::{self, Limit};
use crate::report::copy::CopyKind;
use crate::sysfs::Root;

/// PCIe peer copies cross both GPUs' links: the slower bounds them.
fn pcie_pair_limit(a: &Gpu, b: &Gpu) -> Option<Limit> {
    match (&a.pcie, &b.pcie) {
        (Some(x), Some(y)) => limits::binding(&[x.clone(), y.clone()]).cloned(),
        _ => None,
    }
}

/// How copies from `a` to `b` travel and what bounds them: NVLink where NVML
/// counts links between them and they can address each other, else PCIe (peer
/// to peer, or staged through host memory by the driver).
pub(super) fn peer_link(
    nvml: &NvmlFacts,
    gpus: &[Gpu],
    (a, b): (&Gpu, &Gpu),
    direct: bool,
) -> (&'static str, Option<Limit>) {
    let bus_ids: Vec<String> = gpus.iter().map(|g| g.info.bus_id.clone()).collect();
    let nvlink = nvml.peer_limit(&a.info.bus_id, &b.info.bus_id, &bus_ids);
    match (direct, nvlink) {
        (true, Some(l)) => ("NVLink", Some(l)),
        (true, None) => ("PCIe P2P", pcie_pair_limit(a, b)),
        (false, _) => ("staged through host", pcie_pair_limit(a, b)),
    }
}

/// When host copies reach under 75% of the link's capability (`efficiency`, the
/// best % of limit), reads the link right after them (it runs at its trained
/// speed then; idle GPUs drop to lower speeds, so an idle reading proves
/// nothing) and says when it trained below what both ends support: a Gen5 GPU
/// at Gen4, or at x8.
pub(super) fn slow_link_note(
    sysfs: &Root,
    gpu: &Gpu,
    kind: CopyKind,
    efficiency: f64,
) -> Option<String> {
    if efficiency >= 75.0 {
        return None;
    }
    let state = limits::pcie_state(sysfs, &gpu.info.bus_id).value()?;
    let current = state.current.value()?;
    current.below(&state.capable).then(|| {
        format!(
            "{}: {} reached {efficiency:.0}% of {} and the link ran at {} right after, below what both ends support",
            gpu.info.describe(),
            kind.name(),
            state.capable.describe(),
            current.describe()
        )
    })
}
