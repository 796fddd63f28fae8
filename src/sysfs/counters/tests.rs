use super::super::fixture::{advancing, Tree, PASSES};
use super::*;

fn key(device: &str, port: Option<u32>, family: Family, name: &str) -> Key {
    Key {
        device: device.into(),
        port,
        family,
        name: name.into(),
    }
}

/// The changes of size `k` (passes 2k and 2k+1) of a stepping tree.
fn size_changes(tree: &Tree, sizes: usize) -> Vec<Vec<Change>> {
    let mut reader = Reader::new(tree.root());
    (0..sizes)
        .map(|_| {
            let before = reader.snapshot();
            let after = reader.snapshot();
            diff(&before, &after)
        })
        .collect()
}

fn find<'a>(changes: &'a [Change], k: &Key) -> Option<&'a Change> {
    changes.iter().find(|c| &c.key == k)
}

#[test]
fn deltas_wrap_reset_and_saturate() {
    assert_eq!(delta(5, 9), Delta::Counted(4));
    assert_eq!(delta(7, 7), Delta::Counted(0));
    // 32 bits: from the top half past the top.
    assert_eq!(delta(u32::MAX as u64 - 9, 5), Delta::Counted(15));
    // 64 bits likewise.
    assert_eq!(delta(u64::MAX - 1, 3), Delta::Counted(5));
    // Down from low: a reset, never a huge or negative delta.
    assert_eq!(delta(1000, 10), Delta::Unknown(Unknown::Reset));
    assert_eq!(delta(1 << 40, 10), Delta::Unknown(Unknown::Reset));
    assert_eq!(
        delta(5, u32::MAX as u64),
        Delta::Unknown(Unknown::Saturated)
    );
    assert_eq!(
        delta(u32::MAX as u64, u32::MAX as u64),
        Delta::Unknown(Unknown::Saturated)
    );
}

#[test]
fn every_family_is_read_and_moves_between_passes() {
    let tree = Tree::named("counters/two-rails");
    let sizes = size_changes(&tree, 3);
    let xmit = key("mlx5_0", Some(1), Family::Port, "port_xmit_data");
    for changes in &sizes {
        // 4-byte words: 250000 words are a million bytes.
        assert_eq!(
            find(changes, &xmit).unwrap().delta,
            Delta::Counted(1_000_000)
        );
        let cnp = key("mlx5_1", Some(1), Family::Hw, "np_cnp_sent");
        assert_eq!(find(changes, &cnp).unwrap().delta, Delta::Counted(7));
        let tx = key("eth2", None, Family::Netdev, "tx_bytes");
        assert_eq!(find(changes, &tx).unwrap().delta, Delta::Counted(1_000_000));
        let pfc = key("eth3", None, Family::Ethtool, "rx_prio3_pause");
        assert_eq!(find(changes, &pfc).unwrap().delta, Delta::Counted(2));
        assert_eq!(pfc.class(), Class::Pauses);
        // Still counters are left out; RDMA data counters that moved nothing are kept.
        let errors = key("mlx5_0", Some(1), Family::Port, "symbol_error");
        assert!(find(changes, &errors).is_none());
        // ethtool's other statistics are not kept at all.
        assert!(changes.iter().all(|c| c.key.name != "rx_bytes_phy"));
    }
    // Between sizes nothing moves: an "after" and the next "before" agree.
    let mut reader = Reader::new(tree.root());
    let _ = reader.snapshot();
    let after = reader.snapshot();
    let next = reader.snapshot();
    assert!(diff(&after, &next)
        .iter()
        .all(|c| c.delta == Delta::Counted(0)));
    // A plain read (no pass) sees the first values, as doctor does.
    let plain = read(&tree.root());
    assert_eq!(plain.values[&xmit], 1 << 20);
    assert_eq!(
        plain.values[&key("mlx5_0", Some(1), Family::Hw, "lifespan")],
        10
    );
}

#[test]
fn rxe_hw_counters_are_read() {
    let tree = Tree::named("counters/rxe-retransmits");
    let changes = &size_changes(&tree, 1)[0];
    let dup = key("rxe1", Some(1), Family::Hw, "duplicate_request");
    assert_eq!(find(changes, &dup).unwrap().delta, Delta::Counted(3));
    assert_eq!(dup.class(), Class::Retransmits);
    let sent = key("rxe1", Some(1), Family::Hw, "sent_pkts");
    assert_eq!(find(changes, &sent).unwrap().delta, Delta::Counted(1000));
}

#[test]
fn wraps_resets_and_missing_files_are_told() {
    let tree = Tree::named("counters/wrap-reset");
    let sizes = size_changes(&tree, 3);
    let xmit = key("mlx5_0", Some(1), Family::Port, "port_xmit_data");
    let rcv = key("mlx5_0", Some(1), Family::Port, "port_rcv_data");
    let packets = key("mlx5_0", Some(1), Family::Port, "port_xmit_packets");
    let oos = key("mlx5_0", Some(1), Family::Hw, "out_of_sequence");
    let fancy = key("mlx5_0", Some(1), Family::Hw, "fancy_new_counter");
    for (k, changes) in sizes.iter().enumerate() {
        // The wrap of the legacy counter during size 1 counts as the same movement.
        assert_eq!(
            find(changes, &xmit).unwrap().delta,
            Delta::Counted(1_000_000),
            "size {k}"
        );
        assert_eq!(
            find(changes, &packets).unwrap().delta,
            Delta::Unknown(Unknown::Saturated)
        );
        assert_eq!(find(changes, &fancy).unwrap().delta, Delta::Counted(9));
        assert_eq!(fancy.class(), Class::Other);
        assert!(changes.iter().all(|c| c.key.name != "broken"));
    }
    assert_eq!(
        find(&sizes[1], &rcv).unwrap().delta,
        Delta::Unknown(Unknown::Reset)
    );
    assert_eq!(
        find(&sizes[2], &rcv).unwrap().delta,
        Delta::Counted(1_000_000)
    );
    assert_eq!(find(&sizes[0], &oos).unwrap().delta, Delta::Counted(1));
    assert_eq!(
        find(&sizes[1], &oos).unwrap().delta,
        Delta::Unknown(Unknown::Vanished)
    );
    assert!(find(&sizes[2], &oos).is_none());
    // Past the last pass listed, the counters stand still.
    let mut reader = Reader::new(tree.root());
    for _ in 0..PASSES {
        reader.snapshot();
    }
    assert!(diff(&reader.snapshot(), &reader.snapshot())
        .iter()
        .all(|c| c.counted().is_none_or(|d| d == 0)));
}

#[test]
fn a_node_without_counters_reads_empty() {
    let tree = Tree::temp("counters-none");
    tree.put("/sys/class/net/lo/mtu", "65536");
    assert_eq!(read(&tree.root()), Snapshot::default());
    assert_eq!(advancing(10, 5, 0)[..4], ["10", "15", "15", "20"]);
    assert_eq!(advancing(14, 5, 16)[..3], ["14", "3", "3"]);
}
