//! How a spec's steps are started: mpirun or srun, the layout of nodes and
//! ranks, and the command line of each step.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Launcher {
    /// Open MPI's mpirun: `-np`, `--map-by ppr:K:node`, `-H`.
    #[default]
    Mpirun,
    /// Slurm's srun inside an allocation: `--mpi=pmix -N --ntasks-per-node`.
    Srun,
}

fn one() -> usize {
    1
}

fn default_timeout() -> u64 {
    3600
}

/// The longest timeout_s taken: a week. Beyond it a hung step holds the rack
/// for ever, as no timeout would.
pub const MAX_TIMEOUT_S: u64 = 7 * 24 * 3600;

/// timeout_s: whole seconds from 1 to [`MAX_TIMEOUT_S`]; 0 would stop every step
/// at once, and TOML's own error for a negative or fractional number names no key.
fn seconds<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let s = f64::deserialize(d)?;
    if s >= 1.0 && s <= MAX_TIMEOUT_S as f64 && s.fract() == 0.0 {
        Ok(s as u64)
    } else {
        Err(D::Error::custom(format!(
            "timeout_s = {}: give the whole seconds each step may run, from 1 to {MAX_TIMEOUT_S} (e.g. 3600)",
            crate::cli::shown(s)
        )))
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [launch] table")]
pub struct LaunchSpec {
    #[serde(default)]
    pub launcher: Launcher,
    #[serde(default = "one")]
    pub nodes: usize,
    /// Ranks on each node for the tests (one per GPU); doctor always runs one.
    #[serde(default = "one")]
    pub ranks_per_node: usize,
    /// mpirun only: the nodes (`-H a:K,b:K`); leave out inside an allocation.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// More launcher arguments, before the binary (`--bind-to`, `-x VAR`, `--oversubscribe`).
    #[serde(default)]
    pub args: Vec<String>,
    /// Each test (and doctor) is stopped after this many seconds.
    #[serde(default = "default_timeout", deserialize_with = "seconds")]
    pub timeout_s: u64,
}

impl LaunchSpec {
    /// The nodes a step on `nodes` nodes is launched on, when the spec names
    /// them (mpirun's `hosts`; srun takes its nodes from the allocation).
    pub fn named_hosts(&self, nodes: usize) -> Option<Vec<String>> {
        (self.launcher == Launcher::Mpirun && !self.hosts.is_empty())
            .then(|| self.hosts.iter().take(nodes).cloned().collect())
    }

    /// The command line that starts `program args` on `nodes` x `per_node` ranks.
    /// A job of one rank under mpirun is started directly.
    pub fn argv(
        &self,
        program: &str,
        args: &[String],
        nodes: usize,
        per_node: usize,
    ) -> Vec<String> {
        let mut argv: Vec<String> = Vec::new();
        match self.launcher {
            Launcher::Mpirun if nodes * per_node == 1 && self.hosts.is_empty() => {}
            Launcher::Mpirun => {
                argv.extend([
                    "mpirun".to_string(),
                    "-np".into(),
                    (nodes * per_node).to_string(),
                    "--map-by".into(),
                    format!("ppr:{per_node}:node"),
                ]);
                if !self.hosts.is_empty() {
                    argv.push("-H".into());
                    argv.push(
                        self.hosts
                            .iter()
                            .take(nodes)
                            .map(|h| format!("{h}:{per_node}"))
                            .collect::<Vec<_>>()
                            .join(","),
                    );
                }
                argv.extend(self.args.iter().cloned());
            }
            Launcher::Srun => {
                argv.extend([
                    "srun".to_string(),
                    "--mpi=pmix".into(),
                    "-N".into(),
                    nodes.to_string(),
                    format!("--ntasks-per-node={per_node}"),
                ]);
                argv.extend(self.args.iter().cloned());
            }
        }
        argv.push(program.to_string());
        argv.extend(args.iter().cloned());
        argv
    }
}

/// A command line as a shell would take it back.
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.is_empty()
                || a.contains(|c: char| c.is_whitespace() || "'\"$;&|<>*?()".contains(c))
            {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_commands() {
        let mut launch = LaunchSpec {
            launcher: Launcher::Mpirun,
            nodes: 2,
            ranks_per_node: 8,
            hosts: vec!["a".into(), "b".into()],
            args: vec!["--bind-to".into(), "numa".into()],
            timeout_s: 3600,
        };
        assert_eq!(
            launch
                .argv("/x/all_reduce_perf", &["-b".into(), "8".into()], 2, 8)
                .join(" "),
            "mpirun -np 16 --map-by ppr:8:node -H a:8,b:8 --bind-to numa /x/all_reduce_perf -b 8"
        );
        launch.hosts.clear();
        assert_eq!(launch.argv("/x/doctor", &[], 1, 1), vec!["/x/doctor"]);
        launch.launcher = Launcher::Srun;
        assert_eq!(
            launch.argv("/x/doctor", &[], 2, 1).join(" "),
            "srun --mpi=pmix -N 2 --ntasks-per-node=1 --bind-to numa /x/doctor"
        );
    }
}
