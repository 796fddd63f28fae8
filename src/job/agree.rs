//! Steps that every rank takes and that may fail on some: when any failed, each
//! distinct message is printed once and every rank stops together.

use super::exit::{ExitStatus, Failure};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;

/// The processes of a job as the agreement sees them: MPI's world, a job of one,
/// or a test's stand-in.
pub trait Group {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// Host name of `rank`.
    fn host(&self, rank: usize) -> &str;
    /// Machine identity of `rank` ("" where unknown): two ranks of one host
    /// name and different identities are on two nodes.
    fn identity(&self, _rank: usize) -> &str {
        ""
    }
    /// Every rank's bytes, on every rank (a collective step).
    fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>>;
}

/// Every rank's result of one step: when any rank failed, rank 0 prints each
/// distinct message (one line when every rank failed alike, else one per failed
/// rank, naming it and its host) and every rank stops with `status`. The error
/// is anything printable: an `anyhow::Error` is printed with its causes
/// (`{:#}`), a message as it is.
pub fn agree<T, E: Display>(
    group: &dyn Group,
    program: &str,
    status: ExitStatus,
    mine: Result<T, E>,
) -> Result<T, Failure> {
    agree_printing(group, program, status, mine, failure_lines)
}

/// `agree` for a step whose failure is a fact of each rank's host (a library, a
/// GPU, memory): each distinct message is one line naming the ranks that met it
/// and their hosts, even when all failed alike, so that the user sees which
/// hosts lack it.
pub fn agree_each_rank<T, E: Display>(
    group: &dyn Group,
    program: &str,
    status: ExitStatus,
    mine: Result<T, E>,
) -> Result<T, Failure> {
    agree_printing(group, program, status, mine, rank_lines)
}

/// The gathered messages of a step, as printed lines.
type Lines = fn(&dyn Group, &str, &[Vec<u8>]) -> String;

fn agree_printing<T, E: Display>(
    group: &dyn Group,
    program: &str,
    status: ExitStatus,
    mine: Result<T, E>,
    lines: Lines,
) -> Result<T, Failure> {
    let text = mine
        .as_ref()
        .err()
        .map_or_else(String::new, |e| format!("{e:#}"));
    let all = group.all_gather_bytes(text.as_bytes());
    if all.iter().all(Vec::is_empty) {
        return mine.map_err(|_| Failure::Stopped(status));
    }
    if group.rank() == 0 {
        let lines = lines(group, program, &all);
        // One write: lines never interleave with another process's on a shared stderr.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), lines.as_bytes());
    }
    Err(Failure::Stopped(status))
}

/// Every failed rank's message, by rank (empty: that rank succeeded).
fn failed_ranks(all: &[Vec<u8>]) -> Vec<(usize, String)> {
    all.iter()
        .enumerate()
        .filter(|(_, m)| !m.is_empty())
        .map(|(rank, m)| (rank, String::from_utf8_lossy(m).into_owned()))
        .collect()
}

/// What `agree` prints for the gathered messages: one line when every rank failed alike.
fn failure_lines(group: &dyn Group, program: &str, all: &[Vec<u8>]) -> String {
    let failed = failed_ranks(all);
    if failed.len() == group.size() && failed.iter().all(|(_, m)| *m == failed[0].1) {
        return format!("{program}: error: {}\n", failed[0].1);
    }
    rank_lines(group, program, all)
}

/// Hosts named in one line before the rest are counted.
const HOSTS_NAMED: usize = 4;

/// One line per distinct message, naming the ranks that met it and their hosts:
/// "PROGRAM: rank R (HOST): error: MESSAGE", "PROGRAM: ranks 0-3 (node1,
/// node2): error: MESSAGE". A job of many ranks that lack the same memory says
/// so once, not once per rank.
fn rank_lines(group: &dyn Group, program: &str, all: &[Vec<u8>]) -> String {
    let mut by_message: Vec<(String, Vec<usize>)> = Vec::new();
    for (rank, msg) in failed_ranks(all) {
        match by_message.iter_mut().find(|(m, _)| *m == msg) {
            Some((_, ranks)) => ranks.push(rank),
            None => by_message.push((msg, vec![rank])),
        }
    }
    by_message
        .iter()
        .map(|(msg, ranks)| {
            let mut hosts: Vec<&str> = Vec::new();
            for &r in ranks {
                if !hosts.contains(&group.host(r)) {
                    hosts.push(group.host(r));
                }
            }
            let mut named = hosts[..hosts.len().min(HOSTS_NAMED)].join(", ");
            if hosts.len() > HOSTS_NAMED {
                named += &format!(" and {} more hosts", hosts.len() - HOSTS_NAMED);
            }
            let who = match ranks.len() {
                1 => format!("rank {}", ranks[0]),
                _ => format!("ranks {}", super::rank_ranges(ranks)),
            };
            format!("{program}: {who} ({named}): error: {msg}\n")
        })
        .collect()
}

/// Checks that every rank parsed the same arguments (or made the same mistake)
/// before any collective that depends on them: mismatched counts are undefined
/// behaviour in MPI and NCCL. When some ranks could not parse theirs, the message
/// is that mistake, once, with the ranks that made it; else it names each flag
/// that differs.
pub fn agree_on_arguments<A: Serialize>(
    group: &dyn Group,
    parsed: &Result<A, super::UsageError>,
) -> Result<(), Failure> {
    let canonical = match parsed {
        Ok(args) => serde_json::to_string(args).unwrap_or_default(),
        Err(e) => format!("{{\"error\":{}}}", serde_json::Value::String(e.0.clone())),
    };
    let all = group.all_gather_bytes(canonical.as_bytes());
    let mistakes = parse_errors(&all);
    if !mistakes.is_empty() && all.iter().any(|a| *a != all[0]) {
        let lines: Vec<String> = mistakes
            .iter()
            .map(|(msg, ranks)| format!("{msg} (on {})", rank_list(ranks)))
            .collect();
        return Err(Failure::Usage(format!(
            "{}; start every rank with the same flags",
            lines.join("; ")
        )));
    }
    match all.iter().position(|a| *a != all[0]) {
        None => Ok(()),
        Some(odd) => Err(Failure::Usage(format!(
            "ranks were started with different arguments ({}); start every rank with the same flags",
            differences(&all[0], &all[odd], odd).join("; ")
        ))),
    }
}

/// Each distinct parse error among the ranks' arguments, with the ranks that made it.
fn parse_errors(all: &[Vec<u8>]) -> BTreeMap<String, Vec<usize>> {
    let mut mistakes: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (rank, canonical) in all.iter().enumerate() {
        let decoded: BTreeMap<String, serde_json::Value> =
            serde_json::from_slice(canonical).unwrap_or_default();
        if let (1, Some(serde_json::Value::String(msg))) = (decoded.len(), decoded.get("error")) {
            mistakes.entry(msg.clone()).or_default().push(rank);
        }
    }
    mistakes
}

/// "rank 3", "ranks 1, 2".
fn rank_list(ranks: &[usize]) -> String {
    let list: Vec<String> = ranks.iter().map(usize::to_string).collect();
    match list.len() {
        1 => format!("rank {}", list[0]),
        _ => format!("ranks {}", list.join(", ")),
    }
}

/// "--FLAG is X on rank R but Y on rank 0" for every key whose values differ.
fn differences(first: &[u8], other: &[u8], odd: usize) -> Vec<String> {
    let decode = |b: &[u8]| -> BTreeMap<String, serde_json::Value> {
        serde_json::from_slice(b).unwrap_or_default()
    };
    let (first, other) = (decode(first), decode(other));
    let show = |m: &BTreeMap<String, serde_json::Value>, k: &str| {
        m.get(k).map_or("(none)".into(), |v| v.to_string())
    };
    first
        .keys()
        .chain(other.keys())
        .filter(|k| first.get(*k) != other.get(*k))
        .map(|k| {
            format!(
                "--{k} is {} on rank {odd} but {} on rank 0",
                show(&other, k),
                show(&first, k)
            )
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job of `n` ranks seen from rank 0, whose peers sent `others`.
    struct Fake {
        n: usize,
        others: Vec<Vec<u8>>,
    }

    impl Group for Fake {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            self.n
        }
        fn host(&self, rank: usize) -> &str {
            ["a", "b", "c", "d", "e", "f"][rank]
        }
        fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>> {
            std::iter::once(mine.to_vec())
                .chain(self.others.clone())
                .collect()
        }
    }

    #[test]
    fn all_succeed() {
        let g = Fake {
            n: 2,
            others: vec![vec![]],
        };
        assert_eq!(
            agree(&g, "p", ExitStatus::Failed, Ok::<_, anyhow::Error>(7)).unwrap(),
            7
        );
    }

    #[test]
    fn one_rank_fails_so_all_stop() {
        let g = Fake {
            n: 2,
            others: vec![b"bad".to_vec()],
        };
        let r = agree(&g, "p", ExitStatus::Usage, Ok::<_, anyhow::Error>(()));
        assert!(matches!(r, Err(Failure::Stopped(ExitStatus::Usage))));
        let lines = failure_lines(&g, "p", &[vec![], b"bad".to_vec()]);
        assert_eq!(lines, "p: rank 1 (b): error: bad\n");
    }

    #[test]
    fn the_same_mistake_everywhere_is_one_line() {
        let g = Fake {
            n: 3,
            others: vec![],
        };
        let all = vec![b"x".to_vec(), b"x".to_vec(), b"x".to_vec()];
        assert_eq!(failure_lines(&g, "p", &all), "p: error: x\n");
        let mixed = vec![b"x".to_vec(), b"y".to_vec(), b"x".to_vec()];
        assert_eq!(
            failure_lines(&g, "p", &mixed),
            "p: ranks 0,2 (a, c): error: x\np: rank 1 (b): error: y\n"
        );
    }

    #[test]
    fn host_facts_name_every_rank_even_alike() {
        let g = Fake {
            n: 2,
            others: vec![b"no GPU".to_vec()],
        };
        let r = agree_each_rank(
            &g,
            "p",
            ExitStatus::Failed,
            Err::<(), _>(anyhow::anyhow!("no GPU")),
        );
        assert!(matches!(r, Err(Failure::Stopped(ExitStatus::Failed))));
        let all = [b"no GPU".to_vec(), b"no GPU".to_vec()];
        assert_eq!(
            rank_lines(&g, "p", &all),
            "p: ranks 0-1 (a, b): error: no GPU\n"
        );
        let six = Fake {
            n: 6,
            others: vec![],
        };
        assert_eq!(
            rank_lines(&six, "p", &vec![b"x".to_vec(); 6]),
            "p: ranks 0-5 (a, b, c, d and 2 more hosts): error: x\n"
        );
    }

    #[derive(Serialize)]
    struct Flags {
        iters: usize,
    }

    #[test]
    fn different_arguments_name_the_flag() {
        let g = Fake {
            n: 2,
            others: vec![br#"{"iters":5}"#.to_vec()],
        };
        match agree_on_arguments(&g, &Ok(Flags { iters: 20 })) {
            Err(Failure::Usage(m)) => {
                assert!(m.contains("--iters is 5 on rank 1 but 20 on rank 0"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        let same = Fake {
            n: 2,
            others: vec![br#"{"iters":20}"#.to_vec()],
        };
        assert!(agree_on_arguments(&same, &Ok(Flags { iters: 20 })).is_ok());
    }

    #[test]
    fn a_parse_error_on_some_ranks_is_that_error_once() {
        let error = |msg: &str| format!("{{\"error\":\"{msg}\"}}").into_bytes();
        let g = Fake {
            n: 3,
            others: vec![error("-n/--iters x: use a whole number >= 1"); 2],
        };
        match agree_on_arguments(&g, &Ok(Flags { iters: 20 })) {
            Err(Failure::Usage(m)) => assert_eq!(
                m,
                "-n/--iters x: use a whole number >= 1 (on ranks 1, 2); start every rank with the same flags"
            ),
            other => panic!("{other:?}"),
        }
        // The same mistake everywhere is left to each rank's own usage error.
        let alike = Fake {
            n: 2,
            others: vec![error("bad")],
        };
        let parsed: Result<Flags, _> = Err(super::super::UsageError("bad".into()));
        assert!(agree_on_arguments(&alike, &parsed).is_ok());
    }
}
