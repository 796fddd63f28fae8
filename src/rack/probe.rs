//! The path probe after a test that did not finish: a collective stuck behind
//! one node's switch port (an MTU below the node's drops every full-size frame,
//! while the small frames of the launch and the setup pass) hangs every rank
//! alike, so the hang names no node. The probe does: from each named node, a
//! ping of the full size of the interface toward each other node (`ping -M do
//! -s MTU-28`: no fragmenting), each node launched on its own through the
//! spec's launcher. A node whose every pair lost the frames, while pairs
//! without it carried them, is the suspect; a lost pair between two others
//! names both ends.

use super::launch::LaunchSpec;
use super::runner::{run_step, StepOutcome};
use super::steps::TestStep;
use std::path::Path;
use std::time::Duration;

/// Run on each node with the other nodes' names as arguments: one line per
/// other node, "probe HOST ok|lost|unknown DEV MTU". A host that a small ping
/// does not reach (ICMP filtered, no ping here) is unknown, never lost.
const SCRIPT: &str = r#"for h in "$@"; do
  a=$(getent ahostsv4 "$h" | awk '{print $1; exit}')
  d=$(ip -o route get "$a" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p')
  m=$(cat "/sys/class/net/$d/mtu" 2>/dev/null)
  if [ -z "$m" ] || ! command -v ping >/dev/null ||
     ! ping -n -q -c 1 -w 2 "$a" >/dev/null 2>&1; then echo "probe $h unknown - -"; continue; fi
  if ping -n -q -M do -s $((m - 28)) -c 3 -i 0.2 -w 3 "$a" >/dev/null 2>&1; then r=ok; else r=lost; fi
  echo "probe $h $r $d $m"
done"#;

/// How long one node's probe may take: 5 s per other node, and the launch.
fn probe_timeout(others: usize, spec_timeout: Duration) -> Duration {
    spec_timeout.min(Duration::from_secs(30 + 6 * others as u64))
}

/// What one direction of a pair showed.
#[derive(Clone, Debug, PartialEq)]
pub enum Direction {
    /// Full-size frames crossed: the interface and its MTU.
    Carried {
        dev: String,
        mtu: u32,
    },
    Lost {
        dev: String,
        mtu: u32,
    },
    /// The node's probe did not run or could not tell.
    Unknown,
}

/// The probe of every named node.
#[derive(Debug)]
pub struct PathProbe {
    pub hosts: Vec<String>,
    /// `seen[a][b]`: from `hosts[a]` toward `hosts[b]`.
    pub seen: Vec<Vec<Direction>>,
    /// Each node's launch (its log: probe-NODE.log).
    pub outcomes: Vec<StepOutcome>,
}

/// A pair whose full-size frames were lost in at least one direction, and how.
#[derive(Clone, Debug, PartialEq)]
pub struct LostPair {
    pub a: usize,
    pub b: usize,
    /// "ping -M do -s 1472 over eth0 (MTU 1500) from node1"
    pub how: String,
}

impl PathProbe {
    /// Probes every host (concurrently, one launch each), logs in `out`.
    pub fn run(
        launch: &LaunchSpec,
        hosts: &[String],
        out: &Path,
        spec_timeout: Duration,
    ) -> PathProbe {
        let outcomes: Vec<StepOutcome> = std::thread::scope(|s| {
            let handles: Vec<_> = hosts
                .iter()
                .map(|me| {
                    let others: Vec<String> = hosts.iter().filter(|h| *h != me).cloned().collect();
                    let one = LaunchSpec {
                        hosts: vec![me.clone()],
                        ..launch.clone()
                    };
                    let mut args = vec!["-c".to_string(), SCRIPT.into(), "sh".into()];
                    args.extend(others.iter().cloned());
                    let argv = one.argv("sh", &args, 1, 1);
                    let log = out.join(format!("probe-{me}.log"));
                    let timeout = probe_timeout(others.len(), spec_timeout);
                    s.spawn(move || run_step(&argv, &log, timeout))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a probe thread"))
                .collect()
        });
        let seen = hosts
            .iter()
            .zip(&outcomes)
            .map(|(_, o)| {
                let text = std::fs::read_to_string(&o.log).unwrap_or_default();
                parse(&text, hosts)
            })
            .collect();
        PathProbe {
            hosts: hosts.to_vec(),
            seen,
            outcomes,
        }
    }

    /// The pairs that lost full-size frames, each with one direction that lost them.
    pub fn lost(&self) -> Vec<LostPair> {
        let n = self.hosts.len();
        let mut lost = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                let how =
                    [(a, b), (b, a)]
                        .iter()
                        .find_map(|&(from, to)| match &self.seen[from][to] {
                            Direction::Lost { dev, mtu } => Some(format!(
                                "ping -M do -s {} over {dev} (MTU {mtu}) from {} to {}",
                                mtu.saturating_sub(28),
                                self.hosts[from],
                                self.hosts[to]
                            )),
                            _ => None,
                        });
                if let Some(how) = how {
                    lost.push(LostPair { a, b, how });
                }
            }
        }
        lost
    }

    /// Whether the pair carried full-size frames: both directions that could
    /// tell did, and at least one could.
    fn carried(&self, a: usize, b: usize) -> bool {
        let dirs = [&self.seen[a][b], &self.seen[b][a]];
        dirs.iter().any(|d| matches!(d, Direction::Carried { .. }))
            && !dirs.iter().any(|d| matches!(d, Direction::Lost { .. }))
    }

    /// The nodes every pair of which lost full-size frames, while at least one
    /// pair without them carried them (when all pairs lost them, no node is
    /// told from another: none is named).
    pub fn suspects(&self) -> Vec<usize> {
        let n = self.hosts.len();
        let lost = self.lost();
        let is_lost = |a: usize, b: usize| lost.iter().any(|p| (p.a, p.b) == (a.min(b), a.max(b)));
        let candidates: Vec<usize> = (0..n)
            .filter(|&x| n > 2 && (0..n).filter(|&y| y != x).all(|y| is_lost(x, y)))
            .collect();
        let without = (0..n).any(|a| {
            (a + 1..n)
                .any(|b| !candidates.contains(&a) && !candidates.contains(&b) && self.carried(a, b))
        });
        match without {
            true => candidates,
            false => Vec::new(),
        }
    }

    pub fn suspect_names(&self) -> Vec<String> {
        self.suspects()
            .into_iter()
            .map(|s| self.hosts[s].clone())
            .collect()
    }

    /// The probe named suspects, `node` is not one, and every pair of it that
    /// lost full-size frames has a suspect at its other end.
    pub fn clears(&self, node: &str) -> bool {
        let suspects = self.suspects();
        let Some(me) = self.hosts.iter().position(|h| h == node) else {
            return false;
        };
        !suspects.is_empty()
            && !suspects.contains(&me)
            && self
                .lost()
                .iter()
                .filter(|l| l.a == me || l.b == me)
                .all(|l| suspects.contains(&l.a) || suspects.contains(&l.b))
    }

    /// "node1 <-> node3" for each lost pair.
    pub fn pair_name(&self, p: &LostPair) -> String {
        format!("{} <-> {}", self.hosts[p.a], self.hosts[p.b])
    }
}

/// The probe, where a test did not finish by itself (timed out, crashed; not
/// one skipped for a node that did not answer) on three or more nodes the spec
/// names: what it found is printed as it is judged.
pub fn after_tests(
    launch: &LaunchSpec,
    tests: &[TestStep],
    unreachable: bool,
    out: &Path,
    spec_timeout: Duration,
) -> Option<PathProbe> {
    let stuck = tests
        .iter()
        .find(|t| !t.ran() && t.outcome.start_error.is_none())?;
    let hosts = launch.named_hosts(launch.nodes)?;
    if unreachable || hosts.len() < 3 {
        return None;
    }
    println!(
        "rack_check: probe: test {} did not finish: probing the path between every two nodes \
         with full-size frames (ping -M do, from each node; probe-NODE.log)",
        stuck.title()
    );
    let p = PathProbe::run(launch, &hosts, out, spec_timeout);
    let lost = p.lost();
    for l in &lost {
        println!("rack_check: probe: {}: lost ({})", p.pair_name(l), l.how);
    }
    let suspects = p.suspect_names();
    println!(
        "rack_check: probe: {} of {} pairs lost full-size frames; {}",
        lost.len(),
        hosts.len() * (hosts.len() - 1) / 2,
        match suspects.is_empty() {
            true => "no node is at one end of every lost pair alone".to_string(),
            false => format!("the suspect: {}", suspects.join(", ")),
        }
    );
    Some(p)
}

/// One node's lines: its view toward each host (itself: `Unknown`).
fn parse(text: &str, hosts: &[String]) -> Vec<Direction> {
    hosts
        .iter()
        .map(|h| {
            text.lines()
                .filter_map(|l| l.strip_prefix("probe "))
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .find(|w| w.len() == 4 && w[0] == h)
                .map_or(Direction::Unknown, |w| {
                    let mtu = w[3].parse().unwrap_or(0);
                    let dev = w[2].to_string();
                    match w[1] {
                        "ok" if mtu > 0 => Direction::Carried { dev, mtu },
                        "lost" if mtu > 0 => Direction::Lost { dev, mtu },
                        _ => Direction::Unknown,
                    }
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(lines: &[&str]) -> PathProbe {
        let hosts: Vec<String> = ["n1", "n2", "n3", "n4"].map(String::from).to_vec();
        PathProbe {
            seen: lines.iter().map(|t| parse(t, &hosts)).collect(),
            hosts,
            outcomes: Vec::new(),
        }
    }

    const N3_LOST: [&str; 4] = [
        "probe n2 ok eth0 1500\nprobe n3 lost eth0 1500\nprobe n4 ok eth0 1500\n",
        "probe n1 ok eth0 1500\nprobe n3 lost eth0 1500\nprobe n4 ok eth0 1500\n",
        "probe n1 lost eth0 1500\nprobe n2 lost eth0 1500\nprobe n4 lost eth0 1500\n",
        "probe n1 ok eth0 1500\nprobe n2 ok eth0 1500\nprobe n3 lost eth0 1500\n",
    ];

    /// node3's switch port drops full-size frames: its three pairs lose them,
    /// the other three carry them: node3 alone is the suspect.
    #[test]
    fn the_node_every_lost_pair_shares_is_the_suspect() {
        let p = probe(&N3_LOST);
        assert_eq!(p.suspects(), [2]);
        let lost = p.lost();
        assert_eq!(lost.len(), 3);
        assert_eq!(p.pair_name(&lost[0]), "n1 <-> n3");
        assert_eq!(
            lost[0].how,
            "ping -M do -s 1472 over eth0 (MTU 1500) from n1 to n3"
        );
    }

    /// Every pair lost (ping filtered everywhere): no node told from another.
    /// A node whose probe never ran (no lines) names nobody either.
    #[test]
    fn nothing_to_tell_names_no_one() {
        let all = "probe n1 lost eth0 1500\nprobe n2 lost eth0 1500\nprobe n3 lost eth0 1500\nprobe n4 lost eth0 1500\n";
        assert!(probe(&[all, all, all, all]).suspects().is_empty());
        let none = probe(&["", "", "", ""]);
        assert!(none.suspects().is_empty() && none.lost().is_empty());
        // One lost pair: both ends, no suspect.
        let mut one = N3_LOST.map(|t| t.replace("lost", "ok"));
        one[0] = one[0].replace("probe n2 ok", "probe n2 lost");
        let p = probe(&one.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(p.suspects().is_empty());
        assert_eq!(p.lost().len(), 1);
    }
}
