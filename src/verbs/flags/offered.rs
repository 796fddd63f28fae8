//! What each of the eight verbs binaries offers of the flags they share: its
//! one-line description, the connection types and atomics it runs, and the
//! flags it does not offer: those it refuses whatever their value, and those
//! whose only accepted value is the one it uses anyway (`-q 1` on a latency
//! test). Those stay parsed, hidden, so perftest's command lines get their
//! one-line reason instead of "unexpected argument".

use crate::cli::or_list;
use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
use crate::verbs::flags::duration::validation_refusal;
use crate::verbs::flags::parity::{AtomicOp, Connection};
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::Command;

/// The shared command line `cmd` as `bench`'s binary offers it.
pub fn apply(bench: Benchmark, cmd: Command) -> Command {
    let cmd = hidden(bench)
        .into_iter()
        .fold(cmd, |cmd, id| cmd.mut_arg(id, |a| a.hide(true)))
        .mut_arg("connection", |a| {
            a.value_parser(PossibleValuesParser::new(connections(bench)))
        });
    let cmd = match bench.verb {
        Verb::Atomic => cmd.mut_arg("atomic_type", |a| {
            a.value_parser(PossibleValuesParser::new(atomics()))
        }),
        // Any text, for the plan's "runs no atomics" line.
        _ => cmd,
    };
    cmd.name(bench.program())
        .bin_name(bench.program())
        .about(about(bench))
}

fn about(bench: Benchmark) -> String {
    let what = match bench.verb {
        Verb::Write => "RDMA write",
        Verb::Read => "RDMA read",
        Verb::Send => "Send/receive",
        Verb::Atomic => "RDMA atomic (fetch-and-add or compare-and-swap)",
    };
    let measure = match bench.test {
        Test::Bw => "bandwidth and message rate",
        Test::Lat => "latency",
    };
    let runs: Vec<String> = connections(bench)
        .iter()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect();
    let runs = or_list(&runs).unwrap_or_default();
    format!(
        "{what} {measure} over {runs} queue pairs, as perftest's {} measures it. \
         Server: run without HOST; client: run with the server's HOST. \
         Under mpirun, 2k ranks form k pairs (rank i with rank i+k).",
        bench.program()
    )
}

/// `-c`: every type perftest knows, shown where `bench` runs it. The others
/// stay accepted for their one-line reason (UD carries sends only; XRC, DC and
/// SRD are refused with the capability the device lacks).
fn connections(bench: Benchmark) -> Vec<PossibleValue> {
    Connection::ALL
        .into_iter()
        .map(|c| {
            let (runs, help) = match c {
                Connection::Rc => (true, "reliable connection (default)"),
                Connection::Uc => (!bench.verb.fetches(), "unreliable connection"),
                Connection::Ud => (
                    bench.verb == Verb::Send,
                    "unreliable datagram: messages up to the path MTU",
                ),
                Connection::Xrc | Connection::Dc | Connection::Srd => (false, ""),
            };
            PossibleValue::new(c.name()).help(help).hide(!runs)
        })
        .collect()
}

/// `-A` of the atomic tests.
fn atomics() -> Vec<PossibleValue> {
    [
        (AtomicOp::FetchAndAdd, "fetch and add (default)"),
        (AtomicOp::CmpAndSwap, "compare and swap"),
    ]
    .map(|(op, help)| PossibleValue::new(op.name()).help(help))
    .to_vec()
}

/// The argument ids `bench` does not offer (see the module's note).
fn hidden(bench: Benchmark) -> Vec<&'static str> {
    let Benchmark { verb, test } = bench;
    let groups: [(bool, &[&str]); 11] = [
        // One message in flight on one QP, a completion for each.
        (
            test == Test::Lat,
            &[
                "bidirectional",
                "qps",
                "tx_depth",
                "cq_mod",
                "post_list",
                "cqe_poll",
                "disable_dynamic_polling",
                "report_both",
                "run_infinitely",
                "limit_bw",
                "limit_msgrate",
            ],
        ),
        // Only latency tests keep per-message samples.
        (test == Test::Bw, &["histogram", "unsorted"]),
        (
            verb != Verb::Write,
            &[
                "write_with_imm",
                "all_pairs",
                "slow_fraction",
                "slow_latency",
            ],
        ),
        // The receiver of a write gets no completion to wait for.
        (verb == Verb::Write, &["events"]),
        (
            bench != Benchmark::new(Verb::Send, Test::Bw),
            &["recv_post_list"],
        ),
        // Only reads and atomics keep requests outstanding at the responder.
        (!verb.fetches(), &["outs"]),
        (verb != Verb::Atomic, &["atomic_type"]),
        // One 8-byte word, RC.
        (verb == Verb::Atomic, &["all", "size"]),
        // Fetches carry no inline data, post no receives, need RC.
        (verb.fetches(), &["inline_size", "rx_depth", "connection"]),
        // perftest warms up write, read and atomic bandwidth tests only.
        (
            test == Test::Lat || verb == Verb::Send,
            &["perform_warm_up"],
        ),
        (
            validation_refusal(bench, true).is_some(),
            &["data_validation"],
        ),
    ];
    groups
        .into_iter()
        .filter(|(hide, _)| *hide)
        .flat_map(|(_, ids)| ids.iter().copied())
        .collect()
}
