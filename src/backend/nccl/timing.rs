//! The timed loop's side of the nccl backend: CUDA graph capture and replay (-G),
//! and the CUDA events that time each iteration as `Marks` says.

use super::NcclBackend;
use crate::backend::Marks;
use anyhow::{bail, Context};
use cudarc::driver::sys::{self, CUstreamCaptureMode};

impl NcclBackend {
    pub(super) fn capture_begin(&mut self) -> anyhow::Result<()> {
        for g in &mut self.gpus {
            g.graph = None;
            // Thread-local mode, as nccl-tests: NCCL may allocate while being captured.
            g.stream
                .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                .with_context(|| {
                    format!("{}: cannot start a CUDA graph capture", g.info.describe())
                })?;
        }
        self.capturing = true;
        Ok(())
    }

    pub(super) fn capture_end(&mut self) -> anyhow::Result<()> {
        self.capturing = false;
        for g in &mut self.gpus {
            let graph = g
                .stream
                .end_capture(sys::CUgraphInstantiate_flags(0))
                .with_context(|| format!("{}: CUDA graph capture failed", g.info.describe()))?
                .ok_or_else(|| {
                    anyhow::anyhow!("{}: the captured graph is empty", g.info.describe())
                })?;
            graph.upload()?;
            g.graph = Some(graph);
        }
        Ok(())
    }

    pub(super) fn replay_graphs(&mut self, launches: usize) -> anyhow::Result<()> {
        for g in &mut self.gpus {
            let start = g.timing_event()?;
            let end = g.timing_event()?;
            g.replay = Some((start, end));
        }
        for g in &self.gpus {
            if let Some((start, _)) = &g.replay {
                g.record(start, false)?;
            }
        }
        for _ in 0..launches {
            for g in &self.gpus {
                g.graph
                    .as_ref()
                    .ok_or_else(|| anyhow::anyhow!("-G: replay before a capture"))?
                    .launch()?;
            }
        }
        for g in &self.gpus {
            if let Some((_, end)) = &g.replay {
                g.record(end, false)?;
            }
        }
        Ok(())
    }

    pub(super) fn events_start(&mut self, iterations: usize, marks: Marks) -> anyhow::Result<()> {
        if self.logs_tuning() {
            self.tuning_from = self.log.written();
        }
        for g in &mut self.gpus {
            while g.marks.len() < marks.count(iterations) {
                let event = g.timing_event()?;
                g.marks.push(event);
            }
            g.replay = None;
        }
        self.next_mark = 0;
        self.mark_error = None;
        self.pattern = marks;
        if marks != Marks::Paired {
            self.event_mark();
        }
        Ok(())
    }

    pub(super) fn event_mark(&mut self) {
        let capturing = self.capturing;
        for g in &self.gpus {
            let recorded = match g.marks.get(self.next_mark) {
                Some(event) => g.record(event, capturing),
                None => Err(anyhow::anyhow!(
                    "more timed calls than timer_start prepared"
                )),
            };
            if let Err(e) = recorded {
                self.mark_error.get_or_insert_with(|| format!("{e:#}"));
            }
        }
        self.next_mark += 1;
    }

    pub(super) fn events_read(&mut self, per_iteration: &mut [f64]) -> anyhow::Result<f64> {
        if let Some(e) = self.mark_error.take() {
            bail!("recording a timing event failed: {e}");
        }
        per_iteration.iter_mut().for_each(|t| *t = 0.0);
        let mut mine = vec![0.0; per_iteration.len()];
        let mut total = 0f64;
        for g in &mut self.gpus {
            let marks = &g.marks;
            let loop_s = self.pattern.read(self.next_mark, &mut mine, |i, j| {
                Ok(marks[i].elapsed_ms(&marks[j])? as f64 / 1e3)
            })?;
            for (slot, s) in per_iteration.iter_mut().zip(&mine) {
                *slot = slot.max(*s);
            }
            let seconds = match g.replay.take() {
                Some((start, end)) => start.elapsed_ms(&end)? as f64 / 1e3,
                None => loop_s,
            };
            total = total.max(seconds);
            g.graph = None;
        }
        if self.logs_tuning() {
            let seen = self.log.choices_since(self.tuning_from);
            self.tuning_seen.extend(seen);
        }
        Ok(total)
    }
}
