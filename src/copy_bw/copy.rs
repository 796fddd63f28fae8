//! The one copy loop: every size of the plan, the source set to a pattern and the
//! destination poisoned, `iters` copies timed with a CUDA event after each, then
//! the destination checked byte for byte. H2D, D2H, D2D and peer copies differ
//! only in their buffers and the call that issues one copy, which they pass in.

use super::args::CopyPlan;
use super::gpus::Gpu;
use crate::gpu::{DeviceBuffer, PinnedBuffer};
use crate::limits::Limit;
use crate::report::copy::{CopyKind, CopyResult};
use crate::report::run::now_utc;
use cudarc::driver::sys::CUevent_flags;

/// Byte `i` of every copy's source: a prime period, so a shifted copy cannot match.
pub(super) fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

/// 0xFF never occurs in `pattern`: a destination nothing was written to fails.
const POISON: u8 = 0xFF;

fn count_wrong_bytes(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .enumerate()
        .filter(|(i, b)| **b != pattern(*i))
        .count() as u64
}

/// A buffer a copy reads or writes: pinned host memory or a GPU's.
pub(super) trait Endpoint {
    /// Sets the first `n` bytes, byte `i` to `byte(i)`; no copy is in flight.
    fn fill(&self, n: usize, byte: fn(usize) -> u8) -> anyhow::Result<()>;
    /// The first `n` bytes that differ from `pattern`; the copies have completed.
    fn wrong_bytes(&self, n: usize) -> anyhow::Result<u64>;
}

impl Endpoint for PinnedBuffer {
    fn fill(&self, n: usize, byte: fn(usize) -> u8) -> anyhow::Result<()> {
        assert!(
            n <= self.len(),
            "{n} bytes into a {}-byte buffer",
            self.len()
        );
        // SAFETY: the pinned buffer holds >= n bytes; no copy is in flight.
        let bytes = unsafe { std::slice::from_raw_parts_mut(self.as_ptr(), n) };
        bytes.iter_mut().enumerate().for_each(|(i, b)| *b = byte(i));
        Ok(())
    }

    fn wrong_bytes(&self, n: usize) -> anyhow::Result<u64> {
        assert!(n <= self.len(), "{n} bytes of a {}-byte buffer", self.len());
        // SAFETY: the buffer holds >= n bytes and the stream was synchronised.
        Ok(count_wrong_bytes(unsafe {
            std::slice::from_raw_parts(self.as_ptr(), n)
        }))
    }
}

impl Endpoint for DeviceBuffer {
    fn fill(&self, n: usize, byte: fn(usize) -> u8) -> anyhow::Result<()> {
        self.write(0, &(0..n).map(byte).collect::<Vec<u8>>())
    }

    fn wrong_bytes(&self, n: usize) -> anyhow::Result<u64> {
        let mut back = vec![0u8; n];
        self.read(0, &mut back)?;
        Ok(count_wrong_bytes(&back))
    }
}

/// What a series of copies is, as its results name it.
#[derive(Clone, Debug)]
pub(super) struct Route {
    pub kind: CopyKind,
    /// "gpu0", "gpu0->gpu1".
    pub path: String,
    pub device: String,
    pub transport: &'static str,
    pub limit: Option<Limit>,
}

/// The mean time of one copy and each copy's time, in seconds, from the event
/// timings in milliseconds: `total_ms` from the first event to the last, and
/// `each_ms` between consecutive events.
fn seconds(total_ms: f32, each_ms: &[f32]) -> (f64, Vec<f64>) {
    let per_iteration = each_ms.iter().map(|&ms| ms as f64 / 1e3).collect();
    (total_ms as f64 / 1e3 / each_ms.len() as f64, per_iteration)
}

/// Times `iters` copies issued by `issue` on `gpu`'s stream, with an event after each.
fn time_copies(
    gpu: &Gpu,
    iters: usize,
    warmup: usize,
    mut issue: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<(f64, Vec<f64>)> {
    for _ in 0..warmup {
        issue()?;
    }
    gpu.stream.synchronize()?;
    let events = (0..=iters)
        .map(|_| gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)))
        .collect::<Result<Vec<_>, _>>()?;
    events[0].record(&gpu.stream)?;
    for event in &events[1..] {
        issue()?;
        event.record(&gpu.stream)?;
    }
    gpu.stream.synchronize()?;
    let each_ms = events
        .windows(2)
        .map(|w| w[0].elapsed_ms(&w[1]))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(seconds(events[0].elapsed_ms(&events[iters])?, &each_ms))
}

/// Copies `src` to `dst` at every size of `plan` with `issue` (given the byte
/// count; it runs on `gpu`'s stream), and hands each result to `record` as soon
/// as it is measured.
pub(super) fn measure(
    plan: &CopyPlan,
    gpu: &Gpu,
    route: &Route,
    (src, dst): (&dyn Endpoint, &dyn Endpoint),
    mut issue: impl FnMut(usize) -> anyhow::Result<()>,
    record: &mut dyn FnMut(CopyResult) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    for &size in &plan.sizes {
        let n = size as usize;
        src.fill(n, pattern)?;
        dst.fill(n, |_| POISON)?;
        let (seconds, per_iteration) =
            time_copies(gpu, plan.iters, plan.warmup_iters, || issue(n))?;
        let wrong = if plan.check {
            Some(dst.wrong_bytes(n)?)
        } else {
            None
        };
        record(CopyResult {
            kind: route.kind,
            path: route.path.clone(),
            size,
            seconds,
            per_iteration,
            wrong,
            limit: route.limit.clone(),
            transport: route.transport.into(),
            device: route.device.clone(),
            timestamp: now_utc(),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_checked_byte_for_byte() {
        let good: Vec<u8> = (0..1000).map(pattern).collect();
        assert_eq!(count_wrong_bytes(&good), 0);
        // A copy shifted by one byte, or not done at all, is caught.
        assert_eq!(count_wrong_bytes(&good[1..]), 999);
        assert_eq!(count_wrong_bytes(&[POISON; 10]), 10);
        assert!((0..251).all(|i| pattern(i) != POISON));
    }

    #[test]
    fn event_times_become_seconds() {
        let (mean, each) = seconds(6.0, &[1.0, 2.0, 3.0]);
        assert!((mean - 0.002).abs() < 1e-15, "{mean}");
        assert_eq!(each, [0.001, 0.002, 0.003]);
    }
}
