//! `-M 1`: nccl-tests' memory report. The memory in use on each device is sampled
//! before the library initialised, after it did, after the buffers were allocated
//! (and registered), and after the sweep; the report is the largest increase of
//! each phase over every device of every rank, as nccl-tests takes the maximum
//! over GPUs and processes. GPU memory on the nccl backend (total - free); the
//! resident set on the mpi backend, whose library initialised before the backend
//! opened, so that its "Initialization" is the whole process's memory by then.

use crate::backend::{Backend, BackendKind};
use crate::job::Comm;

/// The samples of one process, one entry per device.
pub(super) struct MemorySamples {
    before_init: Vec<u64>,
    opened: Vec<u64>,
    allocated: Vec<u64>,
}

/// The largest increase between two samples over the devices (0 when none grew).
fn growth(before: &[u64], after: &[u64]) -> u64 {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| a.saturating_sub(*b))
        .max()
        .unwrap_or(0)
}

impl MemorySamples {
    /// Right after the backend opened.
    pub(super) fn opened(backend: &dyn Backend) -> MemorySamples {
        let opened = backend.memory_in_use();
        MemorySamples {
            before_init: backend
                .memory_before_init()
                .unwrap_or_else(|| vec![0; opened.len()]),
            opened,
            allocated: Vec::new(),
        }
    }

    /// After the buffers were allocated.
    pub(super) fn allocated(&mut self, backend: &dyn Backend) {
        self.allocated = backend.memory_in_use();
    }

    /// After the sweep (a collective step: every rank calls it): the footer line
    /// on rank 0, None elsewhere.
    pub(super) fn report(
        &self,
        comm: &dyn Comm,
        backend: &dyn Backend,
        kind: BackendKind,
    ) -> Option<String> {
        let done = backend.memory_in_use();
        let mine = [
            growth(&self.before_init, &self.opened),
            growth(&self.opened, &self.allocated),
            growth(&self.allocated, &done),
        ];
        let bytes: Vec<u8> = mine.iter().flat_map(|v| v.to_le_bytes()).collect();
        let all = comm.all_gather_bytes(&bytes);
        let mut max = [0u64; 3];
        for rank in &all {
            for (i, chunk) in rank.chunks_exact(8).take(3).enumerate() {
                let v = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
                max[i] = max[i].max(v);
            }
        }
        (comm.rank() == 0).then(|| memory_line(kind, max))
    }
}

/// nccl-tests' getMemString: binary units, 2 decimals below 10, 1 below 100, else 0.
fn mem_string(bytes: u64) -> String {
    let mut amount = bytes as f64;
    let mut unit = "B";
    for (scale, name) in [(1u64 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")] {
        if bytes >= scale {
            amount /= scale as f64;
            unit = name;
            break;
        }
    }
    let decimals = match amount {
        a if a < 10.0 => 2,
        a if a < 100.0 => 1,
        _ => 0,
    };
    format!("{amount:.decimals$} {unit}")
}

/// "# GPU memory usage     : Initialization 1.02 GB | User-Allocated ... | Total  1.27 GB",
/// as nccl-tests' writeMemInfo; "Host memory usage" on the mpi backend.
fn memory_line(kind: BackendKind, [init, user, collective]: [u64; 3]) -> String {
    let what = match kind {
        BackendKind::Nccl => "GPU memory usage",
        BackendKind::Mpi => "Host memory usage",
    };
    format!(
        "# {what:<20} : Initialization {} | User-Allocated {} | Collective {} | Total  {}",
        mem_string(init),
        mem_string(user),
        mem_string(collective),
        mem_string(init + user + collective)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_strings_as_nccl_tests_writes_them() {
        assert_eq!(mem_string(0), "0.00 B");
        assert_eq!(mem_string(512), "512 B");
        assert_eq!(mem_string(1536), "1.50 KB");
        assert_eq!(mem_string(64 << 20), "64.0 MB");
        assert_eq!(mem_string(3 << 30), "3.00 GB");
        assert_eq!(
            memory_line(BackendKind::Nccl, [1 << 30, 64 << 20, 0]),
            "# GPU memory usage     : Initialization 1.00 GB | User-Allocated 64.0 MB | Collective 0.00 B | Total  1.06 GB"
        );
        assert!(memory_line(BackendKind::Mpi, [0; 3]).starts_with("# Host memory usage    : "));
    }

    #[test]
    fn growth_is_the_largest_increase_over_devices() {
        assert_eq!(growth(&[10, 20], &[15, 40]), 20);
        assert_eq!(growth(&[10], &[5]), 0);
        assert_eq!(growth(&[], &[]), 0);
    }
}
