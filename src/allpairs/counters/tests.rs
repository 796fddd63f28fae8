use super::*;
use crate::allpairs::matrix::{labels, read_csv, write_csv, SizeMatrices};
use crate::allpairs::schedule::round_robin;
use crate::report::counters::{Meant, Watch};
use crate::sysfs::counters::{Change, Delta, Family, Key};
use crate::sysfs::fixture::Tree;

/// Three rounds over the fixture tree, as the node's local rank 0 reads them.
fn rounds_over(tree: &Tree, host: &str, n: usize) -> RoundCounters {
    let plan = FabricPlan {
        root: tree.dir().to_path_buf(),
        ..FabricPlan::default()
    };
    let mut watch = Watch::new(&plan, 0);
    let rounds = (0..n)
        .map(|_| {
            let before = watch.before();
            let node = watch.after_here(host, before).unwrap();
            SizeCounters { nodes: vec![node] }
        })
        .collect();
    RoundCounters { rounds }
}

/// Each rank's host and label, and the rounds of their pairs.
struct Ranks {
    hosts: Vec<String>,
    labels: Vec<String>,
    rounds: Vec<Vec<(usize, usize)>>,
}

impl Ranks {
    fn on(hosts: &[&str]) -> Ranks {
        let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
        Ranks {
            labels: labels(&hosts),
            rounds: round_robin(hosts.len()),
            hosts,
        }
    }

    fn schedule(&self) -> Schedule<'_> {
        Schedule {
            hosts: &self.hosts,
            labels: &self.labels,
            rounds: &self.rounds,
        }
    }
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
    let ranks = Ranks::on(&["softroce-vm"; 3]);
    let (schedule, labels) = (ranks.schedule(), ranks.labels.clone());
    let mut results = PairResults {
        labels: labels.clone(),
        sizes: vec![SizeMatrices::empty(8, 3, false)],
        counters: Vec::new(),
    };
    let lines = fill(&rounds, &rxe_plan(), &schedule, &mut results);
    let pair = "softroce-vm/0 <-> softroce-vm/1";
    assert_eq!(
        lines,
        [
            "Fabric counters: deltas over 3 round(s) of pairs, read before and after each".to_string(),
            "  softroce-vm: data on RDMA ports (sent + received): rxe1:1 2400 packets (50.0%), rxe2:1 2400 packets (50.0%)".into(),
            format!("  softroce-vm: retransmits rxe1:1 hw_counters/completer_retry_err +2 during round 2 ({pair})"),
            format!("  softroce-vm: retransmits rxe2:1 hw_counters/duplicate_request +5 during round 2 ({pair})"),
            format!(
                "WARNING: pair {pair} (round 2 of 3): retransmits +7 while this pair ran \
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
    let scratch = Tree::temp("allpairs-counters");
    let dir = scratch.dir();
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
    let counters_path = dir.join("counters.csv");
    let mut file = CounterCsv::create(&counters_path).unwrap();
    let run = RunInfo::new("ib_write_bw", chrono::Utc::now());
    rounds.write(&mut file, &run, &schedule).unwrap();
    drop(file);
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
    let ranks = Ranks::on(&["a", "a", "b", "b"]);
    let schedule = ranks.schedule();
    let quiet = |host: &str| retransmit(host, 0);
    let rounds = RoundCounters {
        rounds: vec![
            SizeCounters {
                nodes: vec![retransmit("a", 3), quiet("b")],
            },
            SizeCounters {
                nodes: vec![quiet("a"), retransmit("b", 4)],
            },
            SizeCounters {
                nodes: vec![quiet("a"), quiet("b")],
            },
        ],
    };
    let lines = rounds.lines(&FabricPlan::default(), &schedule);
    let warnings: Vec<&String> = lines.iter().filter(|l| l.starts_with("WARNING")).collect();
    assert_eq!(warnings.len(), 3, "{lines:#?}");
    assert!(
        warnings[0].starts_with(
            "WARNING: pair a/0 <-> b/3 (round 1 of 3): retransmits +3 while this pair ran \
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
    assert!(warnings[1].starts_with("WARNING: pair a/1 <-> b/2 (round 1 of 3)"));
    // Round 2: both of b's ranks ran one pair, on b alone: that pair only, no doubt.
    assert!(
        warnings[2].starts_with("WARNING: pair b/2 <-> b/3 (round 2 of 3): retransmits +4"),
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
