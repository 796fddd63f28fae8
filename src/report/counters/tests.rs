use super::*;
use crate::report::csv::read_rows;
use crate::report::{Row, RunInfo};
use crate::sysfs::fixture::Tree;

/// `sizes` sizes of a run over a fixture tree, as one node's watch sees them.
fn run_over(tree: &Tree, host: &str, sizes: &[u64]) -> Vec<(u64, SizeCounters)> {
    let plan = FabricPlan {
        root: tree.dir().to_path_buf(),
        ..FabricPlan::default()
    };
    let mut watch = Watch::new(&plan, 0);
    sizes
        .iter()
        .map(|&size| {
            let before = watch.before();
            let node = watch.after_here(host, before).unwrap();
            (size, SizeCounters { nodes: vec![node] })
        })
        .collect()
}

fn footer(plan: &FabricPlan, sizes: &[(u64, SizeCounters)]) -> Vec<String> {
    let mut totals = RunTotals::default();
    for (size, c) in sizes {
        totals.add(*size, c);
    }
    totals.lines(plan)
}

fn meant(nccl_ib_hca: &str) -> Option<Meant> {
    Meant::from_env(|v| (v == "NCCL_IB_HCA").then(|| nccl_ib_hca.to_string()))
}

fn warnings_of(lines: &[String]) -> Vec<&String> {
    lines.iter().filter(|l| l.starts_with("WARNING")).collect()
}

#[test]
fn the_footer_names_the_rails_and_every_trouble_counter() {
    let tree = Tree::named("counters/two-rails");
    let sizes = run_over(&tree, "gpu-a", &[8, 16, 32]);
    let plan = FabricPlan {
        meant: meant("mlx5_0,mlx5_1"),
        expects_rdma: true,
        ..FabricPlan::default()
    };
    let lines = footer(&plan, &sizes);
    // 250000 words each way per size: 2 MB a size, 6 MB over three.
    assert_eq!(
        lines[..3],
        [
            "Fabric counters: deltas over 3 size(s), read before and after each",
            "  gpu-a: data on RDMA ports (sent + received): mlx5_0:1 5.7 MiB (50.0%), mlx5_1:1 5.7 MiB (50.0%)",
            "  gpu-a: data on netdevs (sent + received): eth2 5.7 MiB, eth3 5.7 MiB",
        ]
    );
    assert!(
        lines.contains(
            &"  gpu-a: congestion mlx5_1:1 hw_counters/np_cnp_sent +21 during 8 B, 16 B, 32 B"
                .to_string()
        ),
        "{lines:#?}"
    );
    assert!(
        lines.contains(
            &"  gpu-a: pauses eth3 ethtool/rx_prio3_pause +6 during 8 B, 16 B, 32 B".to_string()
        ),
        "{lines:#?}"
    );
    // A pause duration is not a count of frames.
    assert!(lines.iter().all(|l| !l.contains("rx_prio3_pause_duration")));
    assert!(warnings_of(&lines).is_empty(), "{lines:#?}");
    // The CSV columns of a size: bytes on RDMA ports and each class summed.
    let c = &sizes[0].1;
    assert_eq!(
        (c.rdma_bytes(), c.rdma_packets()),
        (Some(4_000_000), Some(3904))
    );
    assert_eq!(
        [
            Class::Errors,
            Class::Retransmits,
            Class::Congestion,
            Class::Pauses
        ]
        .map(|k| c.sum(k)),
        [0, 0, 14, 2]
    );
}

#[test]
fn a_slow_rail_and_a_wrong_hca_are_warned() {
    let tree = Tree::named("counters/slow-rail");
    let sizes = run_over(&tree, "gpu-a", &[1 << 20]);
    let lines = footer(&FabricPlan::default(), &sizes);
    let w = warnings_of(&lines);
    assert_eq!(w.len(), 1, "{lines:#?}");
    assert!(
        w[0].starts_with(
            "WARNING: gpu-a: mlx5_1:1 carried 3.8% of the node's RDMA data, an even share is 50.0%"
        ),
        "{}",
        w[0]
    );
    // Bytes on ports the variable does not name, none on the one it names.
    let two = Tree::named("counters/two-rails");
    let sizes = run_over(&two, "gpu-a", &[8]);
    let plan = FabricPlan {
        meant: meant("=mlx5_2"),
        ..FabricPlan::default()
    };
    let w: Vec<String> = footer(&plan, &sizes)
        .into_iter()
        .filter(|l| l.starts_with("WARNING"))
        .collect();
    assert_eq!(w.len(), 1, "{w:#?}");
    assert!(w[0].starts_with("WARNING: gpu-a: NCCL_IB_HCA names mlx5_2 but the bytes crossed mlx5_0:1, mlx5_1:1 and none crossed a port it names"), "{}", w[0]);
    // The HCAs named by prefix, as NCCL matches them: no warning.
    let plan = FabricPlan {
        meant: meant("mlx5"),
        ..FabricPlan::default()
    };
    assert!(warnings_of(&footer(&plan, &sizes)).is_empty());
}

#[test]
fn no_bytes_on_any_rdma_port_of_a_multi_node_run_is_a_socket_fallback() {
    // doctor's tree: port counters that do not move.
    let tree = Tree::named("doctor/port-errors");
    let sizes = run_over(&tree, "gpu-a", &[1 << 20, 2 << 20]);
    let across = FabricPlan {
        expects_rdma: true,
        ..FabricPlan::default()
    };
    let lines = footer(&across, &sizes);
    assert_eq!(
        lines[1],
        "  gpu-a: data on RDMA ports (sent + received): mlx5_1:1 0 B"
    );
    let w = warnings_of(&lines);
    assert_eq!(w.len(), 1);
    assert!(w[0].starts_with("WARNING: no bytes crossed any RDMA port on any node while the benchmark ran: the transport fell back to sockets"));
    // On one node the bytes never needed a NIC.
    assert!(warnings_of(&footer(&FabricPlan::default(), &sizes)).is_empty());
    assert!(lines
        .contains(&"  gpu-a: no error, retransmit, congestion or pause counter moved".to_string()));
}

#[test]
fn wraps_resets_and_packet_only_ports_in_the_footer() {
    let tree = Tree::named("counters/wrap-reset");
    let lines = footer(
        &FabricPlan::default(),
        &run_over(&tree, "gpu-w", &[8, 16, 32]),
    );
    assert!(
        lines.contains(
            &"  gpu-w: mlx5_0:1 counters/port_rcv_data: reset during 16 B, its delta unknown"
                .to_string()
        ),
        "{lines:#?}"
    );
    assert!(lines.contains(&"  gpu-w: mlx5_0:1 counters/port_xmit_packets: saturated during 8 B, its delta unknown".to_string()), "{lines:#?}");
    assert!(lines.contains(&"  gpu-w: mlx5_0:1 hw_counters/out_of_sequence: vanished during 16 B, its delta unknown".to_string()), "{lines:#?}");
    // The wrapped counter counts; the reset one counts only the sizes it could.
    assert_eq!(
        lines[1],
        "  gpu-w: data on RDMA ports (sent + received): mlx5_0:1 4.8 MiB (100.0%)"
    );
    let rxe = Tree::named("counters/rxe-retransmits");
    let lines = footer(
        &FabricPlan::default(),
        &run_over(&rxe, "softroce-vm", &[4096]),
    );
    assert_eq!(
        lines[1],
        "  softroce-vm: data on RDMA ports (sent + received): rxe1:1 1500 packets (100.0%)"
    );
    assert!(
        lines.contains(
            &"  softroce-vm: retransmits rxe1:1 hw_counters/duplicate_request +3 during 4 KiB"
                .to_string()
        ),
        "{lines:#?}"
    );
    assert!(
        lines.contains(
            &"  softroce-vm: retransmits rxe1:1 hw_counters/completer_retry_err +1 during 4 KiB"
                .to_string()
        ),
        "{lines:#?}"
    );
}

#[test]
fn meant_ports_from_the_environment_and_flags() {
    let m = meant("=mlx5_0:1,mlx5_1").unwrap();
    assert!(m.names("mlx5_0", 1) && !m.names("mlx5_0", 2) && m.names("mlx5_1", 2));
    assert!(!m.names("mlx5_10", 1));
    assert!(meant("mlx5").unwrap().names("mlx5_10", 1));
    assert_eq!(meant("^mlx5_1"), None);
    let ucx =
        Meant::from_env(|v| (v == "UCX_NET_DEVICES").then(|| "mlx5_2:1".to_string())).unwrap();
    assert_eq!(
        (ucx.by.as_str(), ucx.names("mlx5_2", 1)),
        ("UCX_NET_DEVICES", true)
    );
    assert_eq!(
        Meant::from_env(|v| (v == "UCX_NET_DEVICES").then(|| "all".to_string())),
        None
    );
    assert!(Meant::device("rxe1", 1).names("rxe1", 1));
}

#[test]
fn the_csv_columns_and_the_long_form_file() {
    let tree = Tree::named("counters/two-rails");
    let sizes = run_over(&tree, "gpu-a", &[8, 16]);
    let mut row = Row::default();
    row.set_counters(Some(&sizes[0].1));
    assert_eq!(
        (
            row.rdma_bytes,
            row.rdma_packets,
            row.counter_errors,
            row.counter_retransmits,
            row.counter_congestion,
            row.counter_pauses
        ),
        (
            Some(4_000_000),
            Some(3904),
            Some(0),
            Some(0),
            Some(14),
            Some(2)
        )
    );
    let mut none = Row::default();
    none.set_counters(None);
    assert_eq!((none.rdma_bytes, none.counter_errors), (None, None));

    let dir = Tree::temp("counters-csv");
    let path = dir.dir().join("counters.csv");
    let mut csv = CounterCsv::create(&path).unwrap();
    let run = RunInfo {
        run_id: "r1".into(),
        program: "all_reduce_perf".into(),
        ..RunInfo::default()
    };
    for (size, counters) in &sizes {
        let result = SizeResult {
            collective: "all_reduce".into(),
            datatype: "float".into(),
            redop: "sum".into(),
            root: -1,
            size_bytes: *size,
            count: 0,
            busbw_factor: 1.0,
            cycle: 0,
            round: 1,
            measurements: Vec::new(),
            counters: Some(counters.clone()),
            expected: None,
            nccl_algo: None,
            nccl_proto: None,
        };
        Exporter::<SizeResult>::record(&mut csv, &run, &result).unwrap();
    }
    let mut reader = ::csv::Reader::from_path(&path).unwrap();
    let rows: Vec<CounterRow> = reader.deserialize().map(Result::unwrap).collect();
    let cnp: Vec<&CounterRow> = rows.iter().filter(|r| r.counter == "np_cnp_sent").collect();
    assert_eq!(cnp.len(), 2);
    assert_eq!(
        (
            cnp[1].seq,
            cnp[1].size_bytes,
            cnp[1].device.as_str(),
            cnp[1].port,
            cnp[1].family.as_str(),
            cnp[1].class.as_str(),
            cnp[1].delta
        ),
        (
            1,
            Some(16),
            "mlx5_1",
            Some(1),
            "hw_counters",
            "congestion",
            Some(7)
        )
    );
    let xmit = rows.iter().find(|r| r.counter == "port_xmit_data").unwrap();
    assert_eq!(
        (xmit.delta, xmit.unknown.as_deref(), xmit.host.as_str()),
        (Some(1_000_000), None, "gpu-a")
    );
    // Never overwritten, and not a results CSV.
    let again = CounterCsv::create(&path).err().unwrap().to_string();
    assert!(
        again.ends_with("the file exists and runs are never overwritten; choose a new path"),
        "{again}"
    );
    assert!(read_rows(&path).is_err());
}
