//! A progress bar over the sweep on rank 0 (sizes done / planned, the size
//! being measured, elapsed time), shown only when rank 0's output ends on a
//! terminal, so that logs stay clean.
//!
//! The bar is drawn on stdout, the table's stream: under mpirun a rank's stdout
//! and stderr reach the terminal through separate relays, so a bar on stderr
//! lands in the middle of table lines. Table lines are printed with the bar
//! lifted (`BarStdout`).

use super::{Exporter, RunInfo, SizeResult, Summary};
use crate::sizes::human_bytes;
use crate::sysfs::Root;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// Launchers that relay a rank's output to their own (`comm` names).
const LAUNCHERS: [&str; 5] = ["mpirun", "mpiexec", "orterun", "prterun", "mpiexec.hydra"];

/// Redraws per second: the bar crosses the launcher's relay, so it stays light.
const REFRESH_HZ: u8 = 4;

fn parent_of(proc: &Root, pid: u32) -> Option<u32> {
    let stat = proc.read(&format!("/proc/{pid}/stat"))?;
    // "pid (comm) state ppid ...": comm may hold spaces, so split after its ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Whether rank 0's stdout ends on a terminal. Under a launcher that is the
/// launcher's stdout (Open MPI gives ranks a pseudo-terminal even when mpirun
/// writes to a file, so the rank's own says nothing): `mpirun ... > log` shows
/// no bar. Without one, the process's own stdout.
fn stdout_reaches_terminal() -> bool {
    let proc = Root::new("/");
    let mut pid = std::process::id();
    for _ in 0..4 {
        let Some(parent) = parent_of(&proc, pid).filter(|p| *p > 1) else {
            return false;
        };
        let comm = proc
            .read(&format!("/proc/{parent}/comm"))
            .unwrap_or_default();
        if LAUNCHERS.contains(&comm.trim()) {
            return std::fs::read_link(format!("/proc/{parent}/fd/1")).is_ok_and(|target| {
                target.starts_with("/dev/pts") || target.to_string_lossy().starts_with("/dev/tty")
            });
        }
        pid = parent;
    }
    std::io::stdout().is_terminal()
}

pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar over `planned` size results (None: until interrupted) when
    /// stdout ends on a terminal, else None.
    pub fn on_terminal(planned: Option<u64>) -> Option<Progress> {
        if !stdout_reaches_terminal() {
            return None;
        }
        // A terminal-like target draws even through the launcher's relay, which
        // indicatif's own stdout target would hide.
        let target =
            ProgressDrawTarget::term_like_with_hz(Box::new(console::Term::stdout()), REFRESH_HZ);
        let template = match planned {
            Some(_) => "{elapsed_precise} [{bar:40}] {pos}/{len} sizes  {msg}",
            None => "{elapsed_precise} {spinner} {pos} sizes  {msg}",
        };
        let bar = ProgressBar::with_draw_target(planned, target).with_style(
            ProgressStyle::with_template(template)
                .expect("valid progress template")
                .progress_chars("=> "),
        );
        Some(Progress { bar })
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
    fn start(&mut self, _run: &RunInfo) -> anyhow::Result<()> {
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
