//! The one-line verdicts: rank 0's, from every rank's answer, and a peer's own
//! when rank 0 itself cannot be heard.

use super::state::Where;
use super::tree::Tree;
use std::time::Duration;

/// What rank 0 learnt of one rank when it asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    At(Where),
    /// Connected, but no answer within the bound: stopped, or its host frozen.
    Silent,
    /// Its connection closed: the process ended.
    Gone,
    /// Never proved itself to its parent's watchdog: its host cannot reach
    /// the parent's.
    Unreached,
}

impl Answer {
    /// Why a rank did not answer (None: it did), given its parent and the
    /// parent's host.
    fn why_silent(&self, answer_s: u64, parent: Option<(usize, &str)>) -> Option<String> {
        Some(match self {
            Answer::At(_) => return None,
            Answer::Silent => {
                format!("no answer within {answer_s} s: stopped, or its host is frozen or cut off")
            }
            Answer::Gone => "gone: its process ended".into(),
            Answer::Unreached => match parent {
                Some((p, host)) if p != 0 => format!(
                    "never reached the watchdog of rank {p} (on {host}), which it reports through: its host cannot reach that one"
                ),
                _ => "never reached rank 0's watchdog: its host cannot reach rank 0's".into(),
            },
        })
    }
}

/// rank 0's verdict. At fault, in this order: the ranks that did not answer
/// (they hold the others up, directly or not); else the ranks outside any call;
/// else the ranks in an earlier call than the furthest. Every other rank inside
/// a call is waiting, whichever call it is in (a collective lets ranks be one
/// call apart). A rank that did not answer because a rank it reports through
/// did not is only counted: that one is at fault, not the healthy ranks behind it.
pub fn verdict(
    program: &str,
    (timeout_s, answer_s): (u64, u64),
    hosts: &[String],
    tree: &Tree,
    answers: &[Answer],
    note: &str,
) -> String {
    let unanswered = |r: usize| !matches!(answers[r], Answer::At(_));
    let (behind, silent): (Vec<usize>, Vec<usize>) = (0..answers.len())
        .filter(|&r| unanswered(r))
        .partition(|&r| tree.ancestors(r).any(unanswered));
    let placed: Vec<(usize, &Where)> = answers
        .iter()
        .enumerate()
        .filter_map(|(r, a)| match a {
            Answer::At(w) => Some((r, w)),
            _ => None,
        })
        .collect();
    let furthest = placed
        .iter()
        .filter(|(_, w)| w.in_call)
        .max_by_key(|(_, w)| w.calls);
    let (stuck_at, label) = furthest.map_or((0, ""), |(_, w)| (w.calls, w.label.as_str()));
    let silent: Vec<String> = silent
        .iter()
        .filter_map(|&r| {
            let parent = tree.parent(r).map(|p| (p, hosts[p].as_str()));
            let why = answers[r].why_silent(answer_s, parent)?;
            Some(format!("{r} (on {}: {why})", hosts[r]))
        })
        .collect();
    let (outside, inside): (Vec<_>, Vec<_>) = placed.iter().partition(|(_, w)| !w.in_call);
    let at_fault: Vec<(usize, &Where)> = match (silent.is_empty(), outside.is_empty()) {
        (false, _) => Vec::new(),
        (true, false) => outside.clone(),
        (true, true) => inside
            .iter()
            .copied()
            .filter(|(_, w)| w.calls < stuck_at)
            .collect(),
    };
    let waiting: Vec<(usize, Option<u64>)> = inside
        .iter()
        .filter(|(r, _)| !at_fault.iter().any(|(f, _)| f == r))
        .map(|(r, w)| (*r, (w.calls != stuck_at).then_some(w.calls)))
        .collect();
    let list = |ranks: &[(usize, &Where)], what: fn(&Where) -> String| {
        ranks
            .iter()
            .map(|(r, w)| format!("{r} (on {}, {})", hosts[*r], what(w)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let fault = if !silent.is_empty() {
        let between = match outside.is_empty() {
            true => String::new(),
            false => format!(
                "; ranks between calls: {}",
                list(&outside, |w| format!("after call {}", w.calls))
            ),
        };
        let unheard = match behind.is_empty() {
            true => String::new(),
            false => {
                let ranks: Vec<(usize, Option<u64>)> = behind.iter().map(|&r| (r, None)).collect();
                format!("; unheard behind them: {}", in_runs(&ranks))
            }
        };
        format!(
            "ranks that did not answer: {}{unheard}{between}",
            silent.join(", ")
        )
    } else if at_fault.is_empty() {
        "ranks that had not arrived: none (all arrived: the library itself is stuck)".into()
    } else {
        let late = list(&at_fault, |w| match w.in_call {
            true => format!("in an earlier call, call {}", w.calls),
            false => format!("outside any call after call {}", w.calls),
        });
        format!("ranks that had not arrived: {late}")
    };
    format!(
        "{program}: -T/--timeout {timeout_s}: call {stuck_at} ({label}) did not finish within {timeout_s} s; \
         ranks waiting in it: {}; {fault}{note}; aborting the job",
        if waiting.is_empty() { "none".into() } else { in_runs(&waiting) },
    )
}

/// Ranks in order, each with the call it is in when not the stuck one:
/// "0-44,45 (in call 288),46-76,78-127". Three or more neighbours in the stuck
/// call are written as a run, so that the line grows with the ranks that stand
/// out, not with N (16,384 ranks would be 90 KB).
fn in_runs(ranks: &[(usize, Option<u64>)]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut run: Option<(usize, usize)> = None;
    let close = |run: Option<(usize, usize)>, parts: &mut Vec<String>| match run {
        Some((a, b)) if b >= a + 2 => parts.push(format!("{a}-{b}")),
        Some((a, b)) => parts.extend((a..=b).map(|r| r.to_string())),
        None => {}
    };
    for &(r, call) in ranks {
        match (call, run) {
            (None, Some((a, b))) if r == b + 1 => run = Some((a, r)),
            (None, _) => {
                close(run, &mut parts);
                run = Some((r, r));
            }
            (Some(call), _) => {
                close(run.take(), &mut parts);
                parts.push(format!("{r} (in call {call})"));
            }
        }
    }
    close(run, &mut parts);
    parts.join(",")
}

/// What rank 0 adds to its verdict when it did not run itself shortly before:
/// the others' waits may be its own doing.
pub fn own_pause(host0: &str, length: Duration, since: Duration) -> String {
    format!(
        "; note: rank 0 (on {host0}) itself did not run for {:.1} s until {:.1} s ago \
         (stopped, or its host starved): the waits above may be its own doing",
        length.as_secs_f64(),
        since.as_secs_f64()
    )
}

/// Why a rank could not hear its parent (rank 0, or the relay it reports through).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParentLost {
    /// Connected, but silent for the bound after this rank said it was stuck.
    Silent { bound_s: u64 },
    /// Its connection closed.
    Gone,
    /// Never reached at start.
    Unreached,
}

/// A rank's verdict when its parent cannot hear it or answer: what this rank knows.
pub fn parent_lost(
    program: &str,
    timeout_s: u64,
    (rank, host): (usize, &str),
    (parent, parent_host): (usize, &str),
    mine: &Where,
    why: ParentLost,
) -> String {
    let why = match why {
        ParentLost::Silent { bound_s } => format!(
            "did not answer the watchdog within {bound_s} s: rank {parent} is stopped, or its host is frozen or cut off"
        ),
        ParentLost::Gone => "is gone: its watchdog connection closed".into(),
        ParentLost::Unreached => {
            format!("could not be reached: this host cannot reach rank {parent}'s watchdog")
        }
    };
    let relay = match parent {
        0 => ",",
        _ => ", through which this rank's watchdog reports to rank 0,",
    };
    format!(
        "{program}: -T/--timeout {timeout_s}: call {} ({}) did not finish within {timeout_s} s on rank {rank} \
         (on {host}); at fault: rank {parent} (on {parent_host}){relay} which {why}; aborting the job",
        mine.calls, mine.label
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_in_the_stuck_call_are_written_as_runs() {
        let plain = |r: std::ops::Range<usize>| r.map(|r| (r, None)).collect::<Vec<_>>();
        assert_eq!(in_runs(&plain(0..2)), "0,1");
        assert_eq!(in_runs(&plain(0..3)), "0-2");
        let mut ranks = plain(0..45);
        ranks.push((45, Some(288)));
        ranks.extend(plain(46..77));
        ranks.extend(plain(78..128));
        ranks.push((130, None));
        assert_eq!(in_runs(&ranks), "0-44,45 (in call 288),46-76,78-127,130");
    }

    fn at(calls: u64, in_call: bool) -> Answer {
        Answer::At(Where {
            calls,
            in_call,
            label: "AllReduce float sum 1024 B".into(),
        })
    }

    fn hosts(n: usize) -> Vec<String> {
        (0..n).map(|r| format!("node{r}")).collect()
    }

    fn check(answers: &[Answer]) -> String {
        let hosts = hosts(answers.len());
        let tree = Tree::new(&hosts, super::super::tree::FANOUT);
        let v = verdict("all_reduce_perf", (5, 3), &hosts, &tree, answers, "");
        assert!(!v.contains('\n'), "{v}");
        v
    }

    #[test]
    fn a_rank_outside_any_call_had_not_arrived() {
        let v = check(&[at(9, true), at(9, true), at(8, false)]);
        assert!(
            v.contains("call 9 (AllReduce float sum 1024 B) did not finish within 5 s"),
            "{v}"
        );
        assert!(v.contains("ranks waiting in it: 0,1;"), "{v}");
        assert!(
            v.contains("ranks that had not arrived: 2 (on node2, outside any call after call 8)"),
            "{v}"
        );
    }

    #[test]
    fn a_stopped_rank_is_at_fault_and_the_others_wait_one_call_apart() {
        let v = check(&[at(776, true), at(775, true), Answer::Silent, at(776, true)]);
        assert!(v.contains("call 776 ("), "{v}");
        assert!(
            v.contains("ranks waiting in it: 0,1 (in call 775),3;"),
            "{v}"
        );
        assert!(
            v.contains("ranks that did not answer: 2 (on node2: no answer within 3 s: stopped"),
            "{v}"
        );
        assert!(!v.contains("had not arrived"), "{v}");
        assert!(!v.contains("gone"), "{v}");
    }

    #[test]
    fn a_dead_rank_is_gone_and_a_rank_between_calls_is_neither() {
        let v = check(&[at(5, true), Answer::Gone, at(4, false), Answer::Unreached]);
        assert!(v.contains("ranks waiting in it: 0;"), "{v}");
        assert!(v.contains("1 (on node1: gone: its process ended)"), "{v}");
        assert!(
            v.contains("3 (on node3: never reached rank 0's watchdog"),
            "{v}"
        );
        assert!(
            v.contains("; ranks between calls: 2 (on node2, after call 4)"),
            "{v}"
        );
        assert!(!v.contains("had not arrived"), "{v}");
    }

    #[test]
    fn an_earlier_call_had_not_arrived_and_all_alike_is_the_library() {
        let v = check(&[at(9, true), at(8, true), at(9, true)]);
        assert!(v.contains("ranks waiting in it: 0,2;"), "{v}");
        assert!(
            v.contains("had not arrived: 1 (on node1, in an earlier call, call 8)"),
            "{v}"
        );
        let v = check(&[at(9, true), at(9, true)]);
        assert!(
            v.contains("none (all arrived: the library itself is stuck)"),
            "{v}"
        );
    }

    #[test]
    fn rank_0_says_when_it_did_not_run_itself() {
        let note = own_pause(
            "node0",
            Duration::from_millis(7_240),
            Duration::from_millis(1_310),
        );
        let v = verdict(
            "all_reduce_perf",
            (5, 3),
            &hosts(2),
            &Tree::new(&hosts(2), 2),
            &[at(9, true), at(10, true)],
            &note,
        );
        assert!(
            v.ends_with(
                "had not arrived: 0 (on node0, in an earlier call, call 9); note: rank 0 (on node0) \
                 itself did not run for 7.2 s until 1.3 s ago (stopped, or its host starved): the \
                 waits above may be its own doing; aborting the job"
            ),
            "{v}"
        );
    }

    /// The line of rank `rank` on node2 that lost `parent` as `why` says.
    fn lost(rank: usize, parent: (usize, &str), why: ParentLost) -> String {
        let mine = Where {
            calls: 12,
            in_call: true,
            label: "Broadcast 8 B".into(),
        };
        parent_lost("broadcast_perf", 3, (rank, "node2"), parent, &mine, why)
    }

    #[test]
    fn a_peer_names_rank_0_when_it_cannot_hear_it() {
        assert_eq!(
            lost(2, (0, "node0"), ParentLost::Silent { bound_s: 6 }),
            "broadcast_perf: -T/--timeout 3: call 12 (Broadcast 8 B) did not finish within 3 s on rank 2 \
             (on node2); at fault: rank 0 (on node0), which did not answer the watchdog within 6 s: \
             rank 0 is stopped, or its host is frozen or cut off; aborting the job"
        );
    }

    #[test]
    fn a_rank_names_the_relay_it_reports_through() {
        let v = lost(19, (16, "node2"), ParentLost::Gone);
        assert!(
            v.ends_with(
                "at fault: rank 16 (on node2), through which this rank's watchdog reports to \
                 rank 0, which is gone: its watchdog connection closed; aborting the job"
            ),
            "{v}"
        );
        let v = lost(19, (16, "node2"), ParentLost::Unreached);
        assert!(
            v.contains("this host cannot reach rank 16's watchdog"),
            "{v}"
        );
    }

    #[test]
    fn ranks_behind_a_silent_relay_are_counted_not_blamed() {
        let hosts = vec!["node0".to_string(); 7];
        // 0 <- 1, 2; 1 <- 3, 4; 2 <- 5, 6.
        let tree = Tree::new(&hosts, 2);
        let mut answers = vec![at(7, true); 7];
        for r in [1, 3, 4, 6] {
            answers[r] = Answer::Silent;
        }
        let v = verdict("all_reduce_perf", (5, 3), &hosts, &tree, &answers, "");
        assert!(v.contains("ranks waiting in it: 0,2,5;"), "{v}");
        assert!(
            v.contains("did not answer: 1 (on node0: no answer within 3 s: stopped, or its host is frozen or cut off), 6 (on node0: no answer"),
            "{v}"
        );
        assert!(v.contains("; unheard behind them: 3,4; aborting"), "{v}");
        answers[1] = at(7, true);
        answers[3] = Answer::Unreached;
        let v = verdict("all_reduce_perf", (5, 3), &hosts, &tree, &answers, "");
        assert!(
            v.contains("3 (on node0: never reached the watchdog of rank 1 (on node0), which it reports through"),
            "{v}"
        );
    }
}
