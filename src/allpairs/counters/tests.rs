use super::*;
use crate::allpairs::matrix::{labels, read_csv, write_csv, SizeMatrices};
use crate::allpairs::schedule::Repeated;
use crate::report::counters::{Meant, Watch};
use crate::sysfs::counters::{Change, Delta, Family, Key};
use crate::sysfs::fixture::Tree;

/// `n` rounds over the fixture tree, as the node's local rank 0 reads them.
fn rounds_over(tree: &Tree, host: &str, n: usize) -> Vec<SizeCounters> {
    let plan = FabricPlan {
        root: tree.dir().to_path_buf(),
        ..FabricPlan::default()
    };
    let mut watch = Watch::new(&plan, 0);
    (0..n)
        .map(|_| {
            let before = watch.before();
            let node = watch.after_here(host, before).unwrap();
            SizeCounters { nodes: vec![node] }
        })
        .collect()
}

/// The schedule of ranks on `hosts`.
fn on(hosts: &[&str]) -> Schedule {
    let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
    Schedule {
        labels: labels(&hosts),
        rounds: Repeated::new(hosts.len()),
        hosts,
    }
}

/// The footer's lines and the results with the counter matrices after
/// `rounds`, in order from the first, each round's deltas written to `file`
/// as they are tallied.
fn tally(
    schedule: Schedule,
    rounds: &[SizeCounters],
    (plan, sizes): (&FabricPlan, Vec<SizeMatrices>),
    file: Option<(CounterCsv, RunInfo)>,
) -> (Vec<String>, PairResults) {
    let mut results = PairResults {
        labels: schedule.labels.clone(),
        sizes,
        counters: Vec::new(),
    };
    let mut tally = RoundTally::new(schedule, file);
    for (r, round) in rounds.iter().enumerate() {
        tally.add(r, round);
    }
    let (lines, written) = tally.finish(plan, &mut results);
    written.unwrap();
    (lines, results)
}

fn rxe_plan() -> FabricPlan {
    FabricPlan {
        meant: Some(Meant {
            by: "-d".into(),
            ports: vec![("rxe1".into(), Some(1)), ("rxe2".into(), Some(1))],
            prefix: false,
        }),
        expects_rdma: true,
        ..FabricPlan::default()
    }
}

#[test]
fn a_counter_that_moved_in_one_round_names_that_rounds_pair() {
    // Three ranks on one host: rounds (1, 2), (0, 1), (0, 2); the tree's
    // retransmits move during the second read span only.
    let tree = Tree::named("counters/rxe-bad-round");
    let rounds = rounds_over(&tree, "softroce-vm", 3);
    let schedule = on(&["softroce-vm"; 3]);
    // --counters FILE, written round by round.
    let scratch = Tree::temp("allpairs-counters");
    let dir = scratch.dir();
    let counters_path = dir.join("counters.csv");
    let file = CounterCsv::create(&counters_path).unwrap();
    let run = RunInfo::new("ib_write_bw", chrono::Utc::now());
    let sizes = vec![SizeMatrices::empty(8, 3, false)];
    let (lines, results) = tally(schedule, &rounds, (&rxe_plan(), sizes), Some((file, run)));
    let pair = "softroce-vm/0 <-> softroce-vm/1";
    assert_eq!(
        lines,
        [
            "Fabric counters: deltas over 3 round(s) of pairs, read before and after each".to_string(),
            "  softroce-vm: data on RDMA ports (sent + received): rxe1:1 2400 packets (50.0%), rxe2:1 2400 packets (50.0%)".into(),
            format!("  softroce-vm: retransmits rxe1:1 hw_counters/completer_retry_err +2 during round 2 ({pair})"),
            format!("  softroce-vm: retransmits rxe2:1 hw_counters/duplicate_request +5 during round 2 ({pair})"),
            format!(
                "WARNING: pair {pair} (round 2 of 9): retransmits +7 while this pair ran \
                 (softroce-vm rxe1:1 hw_counters/completer_retry_err +2, softroce-vm rxe2:1 \
                 hw_counters/duplicate_request +5): check the link between them (cables and \
                 switch ports: ibdiagnet, mlxlink; on RoCE the PFC/ECN settings)"
            ),
        ]
    );
    // The matrix CSV's counter columns: only pair (0, 1) moved a retransmit.
    let column = |c: Column| &results.counters.iter().find(|(k, _)| *k == c).unwrap().1;
    let retransmits = column(Column::Retransmits);
    assert_eq!(
        retransmits.pairs(),
        vec![(0, 1, 7.0), (0, 2, 0.0), (1, 2, 0.0)]
    );
    // rxe counts packets, not bytes: 400 sent and 400 received per port and span.
    assert_eq!(column(Column::RdmaPackets).get(1, 2), Some(1600.0));
    assert_eq!(column(Column::RdmaBytes).pairs(), vec![]);
    // ... and they come back from the file.
    let path = dir.join("m.csv");
    let mut bytes = Vec::new();
    write_csv(&mut bytes, &results).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    assert!(
        text.contains("\ncounter_retransmits,,softroce-vm/0,,7,0\n"),
        "{text}"
    );
    std::fs::write(&path, &text).unwrap();
    assert_eq!(read_csv(&path).unwrap(), results);

    // --counters FILE: each raw delta with its round and pair, loadable.
    let mut reader = ::csv::Reader::from_path(&counters_path).unwrap();
    let rows: Vec<crate::report::counters::CounterRow> =
        reader.deserialize().map(Result::unwrap).collect();
    let dup = rows
        .iter()
        .find(|r| r.counter == "duplicate_request")
        .unwrap();
    assert_eq!(
        (
            dup.seq,
            dup.size_bytes,
            dup.round,
            dup.pairs.as_deref(),
            dup.class.as_str(),
            dup.delta
        ),
        (1, None, Some(2), Some(pair), "retransmits", Some(5))
    );
    // Every round's data counters, both ports: 3 rounds x 2 ports x 2 counters.
    assert_eq!(
        rows.iter().filter(|r| r.class == "data_packets").count(),
        12
    );
}

fn retransmit(host: &str, by: u64) -> NodeChanges {
    NodeChanges {
        host: host.into(),
        changes: vec![Change {
            key: Key {
                device: "mlx5_0".into(),
                port: Some(1),
                family: Family::Hw,
                name: "packet_seq_err".into(),
            },
            delta: Delta::Counted(by),
        }],
    }
}

#[test]
fn pairs_that_share_a_node_in_a_round_are_not_told_apart() {
    // Ranks 0, 1 on a and 2, 3 on b: rounds (0,3)+(1,2), (0,1)+(2,3), (0,2)+(1,3).
    let schedule = on(&["a", "a", "b", "b"]);
    let quiet = |host: &str| retransmit(host, 0);
    let rounds = [
        SizeCounters {
            nodes: vec![retransmit("a", 3), quiet("b")],
        },
        SizeCounters {
            nodes: vec![quiet("a"), retransmit("b", 4)],
        },
        SizeCounters {
            nodes: vec![quiet("a"), quiet("b")],
        },
    ];
    let quiet_plan = (&FabricPlan::default(), Vec::new());
    let (lines, results) = tally(schedule, &rounds, quiet_plan, None);
    // Both pairs of round 1 crossed a, so a's +3 is in both their cells.
    let column = &results
        .counters
        .iter()
        .find(|(k, _)| *k == Column::Retransmits);
    assert_eq!(
        column.unwrap().1.pairs(),
        vec![
            (0, 1, 0.0),
            (0, 2, 0.0),
            (0, 3, 3.0),
            (1, 2, 3.0),
            (1, 3, 0.0),
            (2, 3, 4.0)
        ]
    );
    let warnings: Vec<&String> = lines.iter().filter(|l| l.starts_with("WARNING")).collect();
    assert_eq!(warnings.len(), 3, "{lines:#?}");
    assert!(
        warnings[0].starts_with(
            "WARNING: pair a/0 <-> b/3 (round 1 of 9): retransmits +3 while this pair ran \
             (a mlx5_0:1 hw_counters/packet_seq_err +3)"
        ),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[0].ends_with(
            "; a/1 <-> b/2 ran on the same node(s) in that round and the counters cannot tell \
             the pairs apart (launch one rank per node)"
        ),
        "{}",
        warnings[0]
    );
    assert!(warnings[1].starts_with("WARNING: pair a/1 <-> b/2 (round 1 of 9)"));
    // Round 2: both of b's ranks ran one pair, on b alone: that pair only, no doubt.
    assert!(
        warnings[2].starts_with("WARNING: pair b/2 <-> b/3 (round 2 of 9): retransmits +4"),
        "{}",
        warnings[2]
    );
    assert!(!warnings[2].contains("cannot tell"), "{}", warnings[2]);
    assert!(
        lines.contains(
            &"  b: retransmits mlx5_0:1 hw_counters/packet_seq_err +4 during round 2 (b/2 <-> b/3)"
                .to_string()
        ),
        "{lines:#?}"
    );
}

/// A counter that moves in every round of a long run: the footer names its
/// first rounds and counts the rest, and the pair warnings stop at
/// `LINES_EACH` with a count, so neither grows with rounds times pairs.
#[test]
fn a_counter_moving_every_round_is_counted_not_listed() {
    let hosts = ["a", "b", "c", "d", "e", "f"];
    let schedule = on(&hosts);
    let total = schedule.rounds.total();
    assert_eq!(total, 15);
    let rounds: Vec<SizeCounters> = (0..total)
        .map(|_| SizeCounters {
            nodes: hosts.iter().map(|h| retransmit(h, 1)).collect(),
        })
        .collect();
    let quiet_plan = (&FabricPlan::default(), Vec::new());
    let (lines, results) = tally(schedule, &rounds, quiet_plan, None);
    let warnings: Vec<&String> = lines.iter().filter(|l| l.starts_with("WARNING")).collect();
    assert_eq!(warnings.len(), LINES_EACH + 1, "{lines:#?}");
    // 15 rounds of 3 pairs, each pair's two nodes moved: 45 warnings.
    assert!(
        warnings[LINES_EACH].starts_with("WARNING: 25 more pair rounds moved a trouble counter"),
        "{}",
        warnings[LINES_EACH]
    );
    let a = lines
        .iter()
        .find(|l| l.starts_with("  a: retransmits"))
        .expect("a's retransmits");
    assert!(a.contains("+15 during round 1 ("), "{a}");
    assert!(a.ends_with(", 7 more"), "{a}");
    assert_eq!(a.matches("round ").count(), 8, "{a}");
    // Every pair ran in 3 rounds and moved 2 a round (one a node).
    let column = &results
        .counters
        .iter()
        .find(|(k, _)| *k == Column::Retransmits)
        .unwrap()
        .1;
    assert!(
        column.pairs().iter().all(|&(_, _, v)| v == 6.0),
        "{:?}",
        column.pairs()
    );
    assert_eq!(column.pairs().len(), 15);
}
