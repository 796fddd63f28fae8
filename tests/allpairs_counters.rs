//! The fabric counters of `sendrecv_perf --all-pairs` under mpirun: a fixture
//! tree (`--sysfs-root`) whose retransmit counters move during the second
//! round only, so the footer, the matrix CSV and `--counters FILE` must name
//! that round's pair and no other.

mod common;

use common::{fixture, log, mpirun, pandas_rows, scratch};
use fabricbench::allpairs::read_csv;
use fabricbench::report::counters::Column;

const SENDRECV: &str = env!("CARGO_BIN_EXE_sendrecv_perf");

#[test]
fn the_pair_whose_round_moved_a_retransmit_is_named() {
    let dir = scratch("allpairs-counters");
    let (csv, counters) = (dir.join("pairs.csv"), dir.join("counters.csv"));
    let root = fixture("counters/rxe-bad-round");
    // Three ranks, rounds (1, 2), (0, 1), (0, 2), three times over (9 rounds);
    // thresholds no noise crosses.
    let mut args: Vec<&str> =
        "--all-pairs -b 8 -e 64 -f 8 -n 3 -w 1 --slow-fraction 0.001 --slow-latency 100000"
            .split(' ')
            .collect();
    let paths = [root, csv.clone(), counters.clone()];
    for (flag, path) in ["--sysfs-root", "--csv", "--counters"].iter().zip(&paths) {
        args.extend([*flag, path.to_str().unwrap()]);
    }
    let out = mpirun(3, SENDRECV, &args);
    let log = log(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    let results = read_csv(&csv).unwrap();
    let pair = format!("{} <-> {}", results.labels[0], results.labels[1]);
    let footer: Vec<&str> = log
        .lines()
        .skip_while(|l| !l.starts_with("# Fabric counters:"))
        .collect();
    assert_eq!(
        footer.first().copied(),
        Some("# Fabric counters: deltas over 9 round(s) of pairs, read before and after each"),
        "{log}"
    );
    assert!(
        footer.iter().any(|l| l.ends_with(&format!(
            ": retransmits rxe2:1 hw_counters/duplicate_request +5 during round 2 ({pair})"
        ))),
        "{log}"
    );
    let warnings: Vec<&&str> = footer
        .iter()
        .filter(|l| l.starts_with("# WARNING"))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(
        warnings[0].starts_with(&format!(
            "# WARNING: pair {pair} (round 2 of 9): retransmits +7 while this pair ran"
        )),
        "{log}"
    );
    // The matrix CSV's counter columns: the deltas of the pair's rounds added up.
    let retransmits = &results
        .counters
        .iter()
        .find(|(c, _)| *c == Column::Retransmits)
        .expect("counter columns in the matrix CSV")
        .1;
    assert_eq!(
        retransmits.pairs(),
        vec![(0, 1, 7.0), (0, 2, 0.0), (1, 2, 0.0)]
    );
    // --counters: per round 2 ports x (sent, received), and the 2 that moved in round 2.
    assert_eq!(pandas_rows(&counters), 9 * 4 + 2);
    let text = std::fs::read_to_string(&counters).unwrap();
    let dup: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(",duplicate_request,"))
        .collect();
    assert_eq!(dup.len(), 1, "{text}");
    assert!(
        dup[0].ends_with(&format!(",retransmits,5,,2,{pair}")),
        "{text}"
    );
    // The matrix CSV loads too: 4 metrics (validated) for each of 2 sizes and 6 counter
    // columns, 3 rows each.
    assert_eq!(pandas_rows(&csv), 3 * (4 * 2 + 6));
}

#[test]
fn report_counters_are_refused_with_all_pairs() {
    let out = mpirun(
        2,
        env!("CARGO_BIN_EXE_ib_write_bw"),
        &["--all-pairs", "-n", "5", "-W", "counters/port_xmit_data"],
    );
    let line = common::one_error(&out, 2, "-W/--report-counters with --all-pairs");
    assert!(line.contains("drop -W"), "{line}");
}
