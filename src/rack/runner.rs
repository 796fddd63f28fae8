//! Runs one step of the acceptance run (doctor or a test) as a child process with
//! its output in a log file, and stops it when it outlives the spec's timeout: a
//! hang becomes a failed step, never a rack_check that waits for ever.

use crate::output::create_new;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const POLL: Duration = Duration::from_millis(50);
/// After SIGTERM, how long mpirun gets to take its ranks down before SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub struct StepOutcome {
    pub argv: Vec<String>,
    /// The variables of its environment that steer the launcher and the
    /// benchmarks (see [`LAUNCH_ENV`]): a command line without them does not
    /// rerun the step.
    pub env: Vec<(String, String)>,
    /// Exit status; None when it was killed or never started.
    pub exit: Option<i32>,
    pub timed_out: bool,
    /// SIGTERM was not enough: its process group was killed (SIGKILL) after the grace.
    pub killed: bool,
    /// The limit it ran under.
    pub timeout: Duration,
    /// Why it did not start, if it did not.
    pub start_error: Option<String>,
    pub seconds: f64,
    pub log: PathBuf,
}

/// The prefixes of the variables that change what a launched step does: Open
/// MPI's MCA settings and its launcher's, PMIx, UCX, NCCL and fabricbench's own.
pub const LAUNCH_ENV: [&str; 6] = ["OMPI_", "PRTE_", "PMIX_", "UCX_", "NCCL_", "FABRICBENCH_"];

/// Those variables of this process's environment, sorted, as a step inherits them.
fn launch_env() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| LAUNCH_ENV.iter().any(|p| k.starts_with(p)))
        .collect();
    env.sort();
    env
}

impl StepOutcome {
    /// The command line that reruns it: `env K=V ... ARGV` where the launch
    /// variables were set, shell-quoted.
    pub fn command_line(&self) -> String {
        let mut words: Vec<String> = Vec::new();
        if !self.env.is_empty() {
            words.push("env".into());
            words.extend(self.env.iter().map(|(k, v)| format!("{k}={v}")));
        }
        words.extend(self.argv.iter().cloned());
        super::launch::shell_line(&words)
    }

    /// "exit 0", "timed out after 60 s", "did not start: ...".
    pub fn status(&self) -> String {
        if let Some(e) = &self.start_error {
            format!("did not start: {e}")
        } else if self.timed_out {
            let how = match self.killed {
                true => format!("SIGTERM, then SIGKILL after {} s", GRACE.as_secs()),
                false => "SIGTERM".into(),
            };
            format!(
                "timed out after {} s (timeout_s) and was killed with its process group ({how})",
                self.timeout.as_secs()
            )
        } else {
            match self.exit {
                Some(code) => format!("exit {code}"),
                None => "killed by a signal".into(),
            }
        }
    }
}

/// Runs `argv` with stdout and stderr in `log`, stopping its process group after `timeout`.
pub fn run_step(argv: &[String], log: &Path, timeout: Duration) -> StepOutcome {
    let started = Instant::now();
    let mut outcome = StepOutcome {
        argv: argv.to_vec(),
        env: launch_env(),
        exit: None,
        timed_out: false,
        killed: false,
        timeout,
        start_error: None,
        seconds: 0.0,
        log: log.to_path_buf(),
    };
    // A new file in the new report folder: never through a link.
    let spawned = create_new(log).and_then(|out| {
        let err = out.try_clone()?;
        Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own process group, so a timeout stops mpirun and every rank it started.
            .process_group(0)
            .spawn()
    });
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            outcome.start_error = Some(format!("{}: {e}", argv[0]));
            return outcome;
        }
    };
    let group = Pid::from_raw(child.id() as i32);
    let mut terminated_at: Option<Instant> = None;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                outcome.exit = status.code();
                stop_leftovers(group);
                break;
            }
            Ok(None) => {}
            Err(e) => {
                outcome.start_error = Some(format!("waiting for {}: {e}", argv[0]));
                break;
            }
        }
        if started.elapsed() >= timeout {
            match terminated_at {
                None => {
                    outcome.timed_out = true;
                    let _ = killpg(group, Signal::SIGTERM);
                    terminated_at = Some(Instant::now());
                }
                Some(t) if t.elapsed() >= GRACE => {
                    outcome.killed = true;
                    let _ = killpg(group, Signal::SIGKILL);
                }
                Some(_) => {}
            }
        }
        std::thread::sleep(POLL);
    }
    outcome.seconds = started.elapsed().as_secs_f64();
    outcome
}

/// What a launcher that ended by itself left in its process group (the
/// daemons of a launch it gave up on: mpirun exits 255 when one node's ssh
/// fails, while the others' daemons are starting) is stopped as at a timeout:
/// SIGTERM, then SIGKILL after the grace.
fn stop_leftovers(group: Pid) {
    if killpg(group, Signal::SIGTERM).is_err() {
        return;
    }
    let since = Instant::now();
    while since.elapsed() < GRACE {
        if killpg(group, None).is_err() {
            return;
        }
        std::thread::sleep(POLL);
    }
    let _ = killpg(group, Signal::SIGKILL);
}

/// A step not started, because `why` (a node it needs did not answer): its
/// log says so, and it never passes.
pub fn skip_step(argv: &[String], log: &Path, why: String) -> StepOutcome {
    let _ = create_new(log)
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{why}\n").as_bytes()));
    StepOutcome {
        argv: argv.to_vec(),
        env: launch_env(),
        exit: None,
        timed_out: false,
        killed: false,
        timeout: Duration::ZERO,
        start_error: Some(why),
        seconds: 0.0,
        log: log.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn output_goes_to_the_log_and_the_status_is_kept() {
        let dir = std::env::temp_dir().join(format!("rack-runner-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("a.log");
        let o = run_step(
            &sh("echo out; echo err >&2; exit 3"),
            &log,
            Duration::from_secs(60),
        );
        assert_eq!((o.exit, o.timed_out), (Some(3), false));
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "out\nerr\n");
        assert_eq!(o.status(), "exit 3");
        let rerun = StepOutcome {
            env: vec![("OMPI_MCA_btl".into(), "tcp,self".into())],
            ..o.clone()
        };
        assert_eq!(
            rerun.command_line(),
            "env OMPI_MCA_btl=tcp,self sh -c 'echo out; echo err >&2; exit 3'"
        );
        // What the step left running when it ended is stopped.
        let left = dir.join("left");
        let script = format!("sleep 600 & echo $! > {}; exit 255", left.display());
        let o = run_step(&sh(&script), &dir.join("e.log"), Duration::from_secs(60));
        assert_eq!(o.exit, Some(255));
        let pid = std::fs::read_to_string(&left).unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
        assert!(
            stat.map_or(true, |s| s.contains(") Z ")),
            "{pid} left running"
        );
        // A child of the step is stopped with it.
        let pid_file = dir.join("pid");
        let script = format!("sleep 600 & echo $! > {}; sleep 600", pid_file.display());
        let o = run_step(&sh(&script), &dir.join("b.log"), Duration::from_millis(300));
        assert!(o.timed_out && o.exit.is_none(), "{o:?}");
        assert!(o.seconds < 30.0);
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
                .map_or(true, |stat| stat.contains(") Z "))
        });
        assert!(gone, "the step's background child {pid} survived");
        assert!(
            !o.killed && o.status().ends_with("process group (SIGTERM)"),
            "{o:?}"
        );
        // A step that ignores SIGTERM is killed after the grace.
        let o = run_step(
            &sh("trap '' TERM; while :; do sleep 0.1; done"),
            &dir.join("d.log"),
            Duration::from_secs(1),
        );
        assert!(o.timed_out && o.killed && o.exit.is_none(), "{o:?}");
        assert_eq!(
            o.status(),
            "timed out after 1 s (timeout_s) and was killed with its process group (SIGTERM, then SIGKILL after 5 s)"
        );
        let o = run_step(
            &["/no/such/binary".to_string()],
            &dir.join("c.log"),
            Duration::from_secs(1),
        );
        assert!(o.status().starts_with("did not start: /no/such/binary"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
