//! `sendrecv_perf --all-pairs --rails eth1,eth2`: all-pairs once a rail, every
//! rail at once. Rank i of each node measures rail i: its pairs are the rank i
//! of every other node, over TCP from and to the rail netdevs' own addresses
//! (`link`), never MPI, whose traffic stays on the management network (with
//! MPI over the rails a crossed cable stops the job in setup: docs/topology.md).
//!
//! Each rail is an all-pairs run of its own (`runner`, on the rail's part of
//! the world), with its own matrices, verdict and files (NAME.railR.csv); a
//! pair that cannot connect is a finding of its own (`reach`), named by node
//! and rail. Rank 0 prints the rails in order.

pub mod link;
pub mod pair;
pub mod reach;

use super::backend::PairFlags;
use super::runner::{run_pairs_watched, PairRun, PairsOf};
use crate::job::world::World;
use crate::job::{agree, ExitStatus, Failure};
use crate::watchdog::Watchdog;
use pair::{Loops, RailEnd, RailPair};
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// Every rank: its rail's all-pairs run; rank 0 prints every rail's.
pub(crate) fn run(
    world: &World,
    flags: &PairFlags,
    setup: &PairRun,
    rails: &[String],
    watchdog: &Watchdog,
) -> Result<ExitStatus, Failure> {
    let program = setup.program;
    let placed = placement(world.local_size, world.nodes().len(), rails);
    agree(world, program, ExitStatus::Usage, placed)?;
    let files = match world.is_root() {
        true => free_paths(setup, rails),
        false => Ok(()),
    };
    agree(world, program, ExitStatus::Usage, files)?;
    let rail = world.local_rank;
    let end = RailEnd {
        rail,
        netdev: rails[rail].clone(),
        address: address_of(&rails[rail]),
    };
    let part = world.split(rail);
    let loops = Loops {
        max_bytes: flags.max_bytes as usize,
        iters: flags.iters,
        warmup_iters: flags.warmup_iters,
        check: flags.check,
    };
    let mut pair = RailPair::open(&part, end, loops);
    let csv = setup.csv.map(|p| of_rail(p, rail));
    let run = PairRun {
        program,
        sizes: setup.sizes.clone(),
        iters: setup.iters,
        thresholds: setup.thresholds,
        // The rail's part of the world is one rank a node.
        pairs_of: PairsOf::Ranks,
        csv: csv.as_deref(),
        timeout_s: setup.timeout_s,
        // A node's TCP counters are every rail's at once: a rail's pairs cannot own them.
        fabric: None,
        counters: None,
    };
    let mut out = Vec::new();
    let status = rail_verdict(&part, &mut pair, &run, watchdog, &mut out)?;
    Ok(print_rails(
        world,
        rails,
        part.is_root().then_some(&out[..]),
        status,
    ))
}

/// One rail's run on its part of the world, its first rank writing the
/// rail's text to `out` (the table, then what could not connect): the status
/// to exit with. A failure already printed, or a usage mistake, is a status,
/// so that every rail still meets the others at the end.
fn rail_verdict(
    part: &World,
    pair: &mut RailPair,
    run: &PairRun,
    watchdog: &Watchdog,
    out: &mut Vec<u8>,
) -> Result<ExitStatus, Failure> {
    let status = match run_pairs_watched(part, pair, run, watchdog, out) {
        Ok(status) | Err(Failure::Stopped(status)) => status,
        Err(Failure::Usage(line)) => {
            if part.is_root() {
                eprintln!("{}: {line}", run.program);
            }
            ExitStatus::Usage
        }
        Err(fatal) => return Err(fatal),
    };
    let findings = reach::findings(part, pair);
    if part.is_root() {
        for line in &findings {
            let _ = writeln!(out, "# {line}");
        }
    }
    Ok(match findings.is_empty() {
        true => status,
        false => worse(status, ExitStatus::Failed),
    })
}

/// Why this job cannot run `rails`: one rank a rail on every node, and two
/// nodes or more (a rail's pairs are between nodes).
fn placement(local_size: usize, nodes: usize, rails: &[String]) -> Result<(), String> {
    let (list, n) = (rails.join(","), rails.len());
    if local_size != n {
        return Err(format!(
            "--rails {list}: every node needs one rank a rail ({n}), rank i of a node on rail i; \
             a node has {local_size}: launch with mpirun --map-by ppr:{n}:node"
        ));
    }
    if nodes < 2 {
        return Err(format!(
            "--rails {list}: a rail's pairs are between nodes, and this job has {nodes}: \
             launch on 2 or more nodes (mpirun --host a,b --map-by ppr:{n}:node)"
        ));
    }
    Ok(())
}

/// The rails' files must all be new before any rail starts (a rail refused
/// later would leave the others' runs for nothing), and no --counters.
fn free_paths(setup: &PairRun, rails: &[String]) -> Result<(), String> {
    if let Some(path) = setup.counters {
        return Err(format!(
            "--counters {} with --rails: a node's TCP counters count every rail at once, so no \
             rail's pairs own them; drop --counters (run without --rails to read them)",
            path.display()
        ));
    }
    let Some(path) = setup.csv else {
        return Ok(());
    };
    for rail in 0..rails.len() {
        let file = of_rail(path, rail);
        if file.symlink_metadata().is_ok() {
            return Err(format!(
                "--csv {}: rail {}'s file {} exists and is never overwritten; give another --csv",
                path.display(),
                rail + 1,
                file.display()
            ));
        }
    }
    Ok(())
}

/// `pairs.csv` of rail 0 is `pairs.rail1.csv` (its heatmap `pairs.rail1.png`).
pub fn of_rail(path: &Path, rail: usize) -> PathBuf {
    let ext = path
        .extension()
        .map_or("csv".into(), |e| e.to_string_lossy());
    path.with_extension(format!("rail{}.{ext}", rail + 1))
}

/// The IPv4 address of `netdev` on this node, or why it has none.
fn address_of(netdev: &str) -> Result<Ipv4Addr, String> {
    let addrs = nix::ifaddrs::getifaddrs().map_err(|e| format!("reading the addresses: {e}"))?;
    let mut found = false;
    for a in addrs.filter(|a| a.interface_name == netdev) {
        found = true;
        if let Some(ip) = a.address.and_then(|s| s.as_sockaddr_in().map(|i| i.ip())) {
            return Ok(ip);
        }
    }
    Err(match found {
        true => format!("{netdev} has no IPv4 address"),
        false => format!("no netdev {netdev}"),
    })
}

/// Of two rails' statuses, the one to exit with: a usage mistake or a
/// timeout first, then a failure, then a verdict that cannot tell.
fn worse(a: ExitStatus, b: ExitStatus) -> ExitStatus {
    let rank = |s| {
        [
            ExitStatus::Ok,
            ExitStatus::Inconclusive,
            ExitStatus::Failed,
            ExitStatus::Timeout,
            ExitStatus::Usage,
        ]
        .iter()
        .position(|&x| x == s)
    };
    if rank(a) >= rank(b) {
        a
    } else {
        b
    }
}

/// Rank 0 prints each rail's text (sent by the rail's first rank, `text`) in
/// rail order; every rank returns the worst status of all rails.
fn print_rails(
    world: &World,
    rails: &[String],
    text: Option<&[u8]>,
    status: ExitStatus,
) -> ExitStatus {
    let mine = text.map_or_else(Vec::new, |t| [&[world.local_rank as u8][..], t].concat());
    let texts = world.all_gather_bytes(&mine);
    let statuses = world.all_gather_u64(status.code() as u64);
    if world.is_root() {
        let mut blocks: Vec<&Vec<u8>> = texts.iter().filter(|t| !t.is_empty()).collect();
        blocks.sort_by_key(|t| t[0]);
        let mut stdout = std::io::stdout().lock();
        for block in blocks {
            let rail = block[0] as usize;
            let _ = writeln!(
                stdout,
                "# rail {} of {}: {}",
                rail + 1,
                rails.len(),
                rails[rail]
            );
            let _ = stdout.write_all(&block[1..]);
        }
        let _ = stdout.flush();
    }
    statuses
        .into_iter()
        .filter_map(|c| ExitStatus::ALL.into_iter().find(|s| s.code() as u64 == c))
        .fold(ExitStatus::Ok, worse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rail_has_its_files() {
        assert_eq!(
            of_rail(Path::new("out/pairs.csv"), 0),
            Path::new("out/pairs.rail1.csv")
        );
        assert_eq!(of_rail(Path::new("pairs"), 1), Path::new("pairs.rail2.csv"));
    }

    #[test]
    fn one_rank_a_rail_on_two_nodes_or_more() {
        let rails = ["eth1".to_string(), "eth2".to_string()];
        assert!(placement(2, 2, &rails).is_ok());
        let e = placement(3, 2, &rails).unwrap_err();
        assert!(
            e.contains("one rank a rail (2)") && e.contains("a node has 3"),
            "{e}"
        );
        assert!(placement(2, 1, &rails)
            .unwrap_err()
            .contains("this job has 1"));
    }

    #[test]
    fn the_worst_rail_decides() {
        use ExitStatus::*;
        assert_eq!(worse(Ok, Inconclusive), Inconclusive);
        assert_eq!(worse(Failed, Inconclusive), Failed);
        assert_eq!(worse(Failed, Usage), Usage);
        assert_eq!(worse(Ok, Ok), Ok);
    }

    #[test]
    fn a_netdev_that_is_not_there_is_said_so() {
        assert_eq!(address_of("nosuchdev0"), Err("no netdev nosuchdev0".into()));
        assert_eq!(address_of("lo"), Ok(Ipv4Addr::LOCALHOST));
    }
}
