//! A progress bar over the sweep on rank 0's stderr (sizes done / planned, the
//! size being measured, elapsed time), shown only when stderr is a terminal so
//! that logs stay clean.

use super::{Exporter, RunInfo, SizeResult, Summary};
use crate::sizes::human_bytes;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::time::Duration;

pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar when stderr is a terminal, else None.
    pub fn on_terminal() -> Option<Progress> {
        std::io::stderr().is_terminal().then(|| Progress {
            bar: ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
        })
    }

    /// Stdout that lifts the bar while a line is printed, so table lines and
    /// the bar do not overwrite each other on a shared terminal.
    pub fn stdout(&self) -> BarStdout {
        BarStdout {
            bar: self.bar.clone(),
            pending: Vec::new(),
        }
    }
}

impl Exporter for Progress {
    fn start(&mut self, run: &RunInfo) -> anyhow::Result<()> {
        let style = match run.planned_results {
            Some(total) => {
                self.bar.set_length(total);
                "{elapsed_precise} [{bar:40}] {pos}/{len} sizes  {msg}"
            }
            // -N 0 runs until interrupted: no total to fill a bar with.
            None => "{elapsed_precise} {spinner} {pos} sizes  {msg}",
        };
        self.bar.set_style(
            ProgressStyle::with_template(style)
                .expect("valid progress template")
                .progress_chars("=> "),
        );
        self.bar.enable_steady_tick(Duration::from_millis(250));
        Ok(())
    }

    fn begin_size(&mut self, size_bytes: u64) {
        self.bar
            .set_message(format!("measuring {}", human_bytes(size_bytes)));
    }

    fn record(&mut self, _run: &RunInfo, _result: &SizeResult) -> anyhow::Result<()> {
        self.bar.inc(1);
        Ok(())
    }

    fn finish(&mut self, _run: &RunInfo, _summary: &Summary) -> anyhow::Result<()> {
        self.bar.finish_and_clear();
        Ok(())
    }
}

/// Buffers writes until flush, then prints them with the bar lifted.
pub struct BarStdout {
    bar: ProgressBar,
    pending: Vec<u8>,
}

impl Write for BarStdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let pending = std::mem::take(&mut self.pending);
        self.bar.suspend(|| {
            let mut out = std::io::stdout().lock();
            out.write_all(&pending)?;
            out.flush()
        })
    }
}

impl Drop for BarStdout {
    fn drop(&mut self) {
        // Nothing to report to at this point: a failed last flush loses only unflushed table text.
        let _ = self.flush();
    }
}
