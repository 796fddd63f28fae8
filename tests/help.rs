//! `--help` against the parser, binary by binary: every flag a binary's `--help`
//! lists is one its parser takes (not "unexpected argument", not refused as
//! something that binary does not do), every value it lists for an enumerated
//! flag parses, and the values the parser takes are the ones listed.
//!
//! "Takes" means the whole check a binary makes before it touches the machine:
//! clap, then the family's plan (collectives, verbs, copy_bw), so a flag shown
//! by a binary whose plan refuses it fails here.

mod common;

use clap::builder::PossibleValue;
use clap::Arg;
use common::{scratch, text};
use fabricbench::datatype::{DataType, RedOp};
use fabricbench::docgen::binaries::Binary;
use std::collections::BTreeSet;
use std::path::Path;

/// A command line each flag is accepted in (by every binary that offers it),
/// by long name; alternatives where binaries need different company
/// (`-r` on ib_send_bw alone, on ib_write_bw with --write_with_imm). `@` is
/// replaced by a fresh scratch folder. A flag `--help` lists without an entry
/// here fails the test: give it one.
const SAMPLES: &[(&str, &[&[&str]])] = &[
    // Collectives.
    ("minbytes", &[&["--minbytes", "8"]]),
    ("maxbytes", &[&["-b", "8", "--maxbytes", "64"]]),
    ("stepfactor", &[&["--stepfactor", "4"]]),
    ("stepbytes", &[&["--stepbytes", "1K"]]),
    ("iters", &[&["--iters", "10"]]),
    ("warmup_iters", &[&["--warmup_iters", "2"]]),
    ("check", &[&["--check", "0"]]),
    ("op", &[&["--op", "max"]]),
    ("datatype", &[&["--datatype", "double"]]),
    ("root", &[&["--root", "1"]]),
    ("average", &[&["--average", "2"]]),
    ("run_cycles", &[&["--run_cycles", "2"]]),
    ("timeout", &[&["--timeout", "30"]]),
    ("backend", &[&["--backend", "mpi"]]),
    ("csv", &[&["--csv", "@/rows.csv"]]),
    ("append", &[&["--csv", "@/rows.csv", "--append"]]),
    ("counters", &[&["--counters", "@/counters.csv"]]),
    ("limit", &[&["--limit", "400g"]]),
    ("sysfs-root", &[&["--sysfs-root", "/"]]),
    ("expected", &[&["--expected"]]),
    ("model-latency", &[&["--model-latency", "5"]]),
    ("plot", &[&["--plot", "@/plots"]]),
    ("hist", &[&["--hist", "@/hist"]]),
    ("ngpus", &[&["--ngpus", "2"]]),
    ("blocking", &[&["--blocking", "3"]]),
    ("agg_iters", &[&["--agg_iters", "2"]]),
    ("cudagraph", &[&["--cudagraph", "2"]]),
    ("report_cputime", &[&["--report_cputime", "1"]]),
    ("nccl-lib", &[&["--nccl-lib", "/opt/nccl/lib"]]),
    ("unalign", &[&["--unalign", "1"]]),
    ("memory", &[&["--memory", "1"]]),
    ("nthreads", &[&["--nthreads", "1"]]),
    ("parallel_init", &[&["--parallel_init", "1"]]),
    ("stream_null", &[&["--stream_null", "1"]]),
    ("local_register", &[&["--local_register", "2"]]),
    ("cta_policy", &[&["--cta_policy", "1"]]),
    (
        "device_implementation",
        &[&["--device_implementation", "0"]],
    ),
    ("device_cta_count", &[&["--device_cta_count", "16"]]),
    ("output_file", &[&["--output_file", "@/run.json"]]),
    ("per_iter_timing", &[&["--per_iter_timing", "1"]]),
    (
        "per_iter_skip",
        &[&["--per_iter_timing", "1", "--per_iter_skip", "1"]],
    ),
    ("report_timestamps", &[&["--report_timestamps", "1"]]),
    ("percentiles", &[&["--percentiles", "0"]]),
    ("rounds", &[&["--rounds", "3"], &["--rounds", "auto"]]),
    (
        "rounds-tolerance",
        &[&["--rounds", "auto", "--rounds-tolerance", "5"]],
    ),
    ("max-rounds", &[&["--rounds", "auto", "--max-rounds", "10"]]),
    (
        "rounds-time",
        &[&["--rounds", "auto", "--rounds-time", "30"]],
    ),
    ("min-busbw", &[&["--min-busbw", "10"]]),
    ("all-pairs", &[&["--all-pairs"]]),
    ("rails", &[&["--all-pairs", "--rails", "eth1,eth2"]]),
    ("rank-pairs", &[&["--all-pairs", "--rank-pairs"]]),
    (
        "slow-fraction",
        &[&["--all-pairs", "--slow-fraction", "0.5"]],
    ),
    ("slow-latency", &[&["--all-pairs", "--slow-latency", "3"]]),
    // Verbs.
    ("ib-dev", &[&["--ib-dev", "mlx5_0,mlx5_1"]]),
    ("ib-port", &[&["--ib-port", "2"]]),
    ("gid-index", &[&["--gid-index", "3"]]),
    ("size", &[&["--size", "64"]]),
    ("all", &[&["--all"]]),
    ("duration", &[&["--duration", "4"]]),
    ("qp", &[&["--qp", "2"]]),
    ("tx-depth", &[&["--tx-depth", "64"]]),
    (
        "rx-depth",
        &[
            &["--rx-depth", "64"],
            &["--rx-depth", "64", "--write_with_imm"],
        ],
    ),
    ("cq-mod", &[&["--cq-mod", "10"]]),
    ("mtu", &[&["--mtu", "1024"]]),
    ("qp-timeout", &[&["--qp-timeout", "18"]]),
    ("inline_size", &[&["--inline_size", "64"]]),
    ("bidirectional", &[&["--bidirectional"]]),
    ("noPeak", &[&["--noPeak"]]),
    ("CPU-freq", &[&["--CPU-freq"]]),
    ("report_gbits", &[&["--report_gbits"]]),
    ("port", &[&["--port", "18600"]]),
    (
        "use_cuda",
        &[
            &["--use_cuda", "0"],
            &["--use_cuda", "0", "--write_with_imm"],
        ],
    ),
    (
        "use_cuda_dmabuf",
        &[
            &["--use_cuda", "0", "--use_cuda_dmabuf"],
            &["--use_cuda", "0", "--use_cuda_dmabuf", "--write_with_imm"],
        ],
    ),
    (
        "report-counters",
        &[&["--report-counters", "counters/port_xmit_data"]],
    ),
    ("atomic_type", &[&["--atomic_type", "CMP_AND_SWAP"]]),
    ("outs", &[&["--outs", "4"]]),
    ("connection", &[&["--connection", "UC"]]),
    ("data_validation", &[&["--data_validation"]]),
    ("perform_warm_up", &[&["--perform_warm_up"]]),
    ("limit_bw", &[&["--limit_bw", "1000"]]),
    ("limit_msgrate", &[&["--limit_msgrate", "0.5"]]),
    ("sl", &[&["--sl", "3"]]),
    ("tos", &[&["--tos", "96"]]),
    ("tclass", &[&["--tclass", "96"]]),
    ("flow_label", &[&["--flow_label", "5"]]),
    ("hop_limit", &[&["--hop_limit", "64"]]),
    ("pkey_index", &[&["--pkey_index", "1"]]),
    ("ipv6", &[&["--ipv6"]]),
    ("bind_source_ip", &[&["--bind_source_ip", "10.0.0.1"]]),
    ("pin_cores", &[&["--pin_cores", "0-1"]]),
    ("numa_node", &[&["--numa_node", "0"]]),
    ("disable_numa", &[&["--disable_numa"]]),
    ("margin", &[&["--duration", "4", "--margin", "1"]]),
    (
        "run_infinitely",
        &[&["--duration", "2", "--run_infinitely"]],
    ),
    ("write_with_imm", &[&["--write_with_imm"]]),
    ("rdma_cm", &[&["--rdma_cm"]]),
    ("comm_rdma_cm", &[&["--comm_rdma_cm"]]),
    ("retry_count", &[&["--rdma_cm", "--retry_count", "3"]]),
    ("post_list", &[&["--post_list", "2"]]),
    ("recv_post_list", &[&["--recv_post_list", "2"]]),
    ("events", &[&["--events"]]),
    ("cqe_poll", &[&["--cqe_poll", "4"]]),
    ("rounds", &[&["--rounds", "3"]]),
    ("disable_dynamic_polling", &[&["--disable_dynamic_polling"]]),
    ("use_old_post_send", &[&["--use_old_post_send"]]),
    ("report-histogram", &[&["--report-histogram"]]),
    ("report-unsorted", &[&["--report-unsorted"]]),
    ("report-both", &[&["--bidirectional", "--report-both"]]),
    ("cpu_util", &[&["--duration", "4", "--cpu_util"]]),
    ("out_json", &[&["--out_json"]]),
    ("out_json_file", &[&["--out_json_file", "@/perftest.json"]]),
    // copy_bw.
    ("gpus", &[&["--gpus", "0,1"]]),
    ("tests", &[&["--tests", "d2d,p2p"]]),
    // plot, compare.
    ("out", &[&["--out", "@/out"]]),
    ("threshold", &[&["--threshold", "5"]]),
    ("p99-threshold", &[&["--p99-threshold", "10%"]]),
    ("vs", &[&["--vs", "other.csv"]]),
    ("band", &[&["--band", "0.95:1.05"], &["--band", "0.98:"]]),
    // doctor, rack_check.
    ("node-name", &[&["--node-name", "n1"]]),
    ("hca", &[&["--hca", "mlx5_0:1,mlx5_1"]]),
    ("port-rate", &[&["--port-rate", "400"]]),
    ("json", &[&["--json", "@/doctor.json"]]),
    ("spec", &[&["--spec", "rack.toml"]]),
    ("bin-dir", &[&["--bin-dir", "@"]]),
    // fabricbench-docs.
    ("reference", &[&["--reference", "@/reference"]]),
    ("man", &[&["--man", "@/man"]]),
    ("completions", &[&["--completions", "@/completions"]]),
];

/// What a binary needs beside any flag: its required arguments, left out where
/// the sample gives them itself.
fn required(b: Binary) -> &'static [&'static str] {
    match b.name().as_str() {
        "plot" => &["run.csv"],
        "compare" => &["base.csv", "candidate.csv"],
        "fabricbench-stats" => &["ours.txt", "peer.txt"],
        "rack_check" => &["--spec", "rack.toml"],
        "fabricbench-docs" => &["--man", "man"],
        _ => &[],
    }
}

/// Whether `b` takes `args` (argv[0] left out): clap, then the family's plan.
fn accepts(b: Binary, args: &[String]) -> Result<(), String> {
    let argv = std::iter::once(b.name()).chain(args.iter().cloned());
    match b {
        Binary::Collective(c) => fabricbench::driver::args::parse_args(c, argv)
            .and_then(|a| a.plan())
            .map(drop)
            .map_err(|e| e.0),
        Binary::Verbs(bench) => fabricbench::verbs::flags::parse(bench, argv)
            .map(drop)
            .map_err(|e| e.0),
        Binary::CopyBw => {
            fabricbench::cli::parse_one_line::<fabricbench::copy_bw::CopyArgs, _, _>(argv)
                .and_then(|a| a.plan())
                .map(drop)
                .map_err(|e| e.0)
        }
        _ => b
            .command()
            .try_get_matches_from(argv)
            .map(drop)
            .map_err(|e| e.to_string()),
    }
}

/// `sample` with the binary's required arguments (a required flag only where
/// the sample does not give it), `@` replaced by `dir`.
fn command_line(b: Binary, sample: &[&str], dir: &Path) -> Vec<String> {
    let extra = match required(b) {
        [flag, _] if sample.contains(flag) => &[][..],
        required => required,
    };
    let at = dir.display().to_string();
    sample
        .iter()
        .chain(extra)
        .map(|a| a.replacen('@', &at, 1))
        .collect()
}

/// The arguments a binary offers: shown by `--help`, help and version included.
fn shown(b: Binary) -> Vec<Arg> {
    let mut cmd = b.command();
    cmd.build();
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set())
        .cloned()
        .collect()
}

fn is_help_or_version(arg: &Arg) -> bool {
    matches!(
        arg.get_action(),
        clap::ArgAction::Help
            | clap::ArgAction::HelpLong
            | clap::ArgAction::HelpShort
            | clap::ArgAction::Version
    )
}

#[test]
fn every_flag_a_binary_offers_it_accepts() {
    let dir = scratch("help-flags");
    let mut failures = Vec::new();
    for b in Binary::all() {
        for arg in shown(b) {
            let Some(long) = arg.get_long() else { continue };
            if is_help_or_version(&arg) {
                continue;
            }
            let Some((_, samples)) = SAMPLES.iter().find(|(name, _)| *name == long) else {
                failures.push(format!("{}: --{long} has no sample in SAMPLES", b.name()));
                continue;
            };
            let tries: Vec<Result<(), String>> = samples
                .iter()
                .map(|s| accepts(b, &command_line(b, s, &dir)))
                .collect();
            if tries.iter().all(Result::is_err) {
                let why: Vec<String> = tries.into_iter().filter_map(Result::err).collect();
                failures.push(format!(
                    "{} offers --{long} but refuses it: {}",
                    b.name(),
                    why.join(" / ")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The names a value is accepted by: its name and aliases.
fn spellings(value: &PossibleValue) -> Vec<String> {
    value.get_name_and_aliases().map(str::to_string).collect()
}

#[test]
fn every_listed_value_parses_and_every_value_parsed_is_listed() {
    let dir = scratch("help-values");
    let mut failures = Vec::new();
    for b in Binary::all() {
        for arg in shown(b) {
            let (Some(long), true) = (arg.get_long(), arg.get_action().takes_values()) else {
                continue;
            };
            let values = arg.get_possible_values();
            let listed: BTreeSet<String> = values
                .iter()
                .filter(|v| !v.is_hide_set())
                .flat_map(spellings)
                .collect();
            let flag = format!("--{long}");
            for value in &listed {
                if let Err(e) = accepts(b, &command_line(b, &[&flag, value], &dir)) {
                    failures.push(format!(
                        "{} lists {flag} {value} but refuses it: {e}",
                        b.name()
                    ));
                }
            }
            // Other spellings of the listed ones (and hidden values, kept for
            // perftest's command lines and refused with a reason) are not taken
            // as listed values: the parser takes exactly what is listed.
            let probes = listed
                .iter()
                .flat_map(|v| [v.to_uppercase(), v.to_lowercase(), format!("{v}x")])
                .filter(|p| !listed.contains(p));
            for probe in probes {
                let taken = accepts(b, &command_line(b, &[&flag, &probe], &dir));
                if taken.is_ok() && values.iter().all(|v| !v.matches(&probe, false)) {
                    failures.push(format!(
                        "{} takes {flag} {probe}, which it does not list",
                        b.name()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The block of `--help` text that describes `long`: its line and the lines
/// below it up to the next flag.
fn help_block<'a>(help: &'a str, long: &str) -> Option<Vec<&'a str>> {
    let is_flag_line = |l: &str| {
        let indent = l.len() - l.trim_start().len();
        indent < 10 && l.trim_start().starts_with('-')
    };
    let lines: Vec<&str> = help.lines().collect();
    let start = lines.iter().position(|l| {
        is_flag_line(l) && l.split([' ', ',', '=']).any(|w| w == format!("--{long}"))
    })?;
    let end = lines[start + 1..]
        .iter()
        .position(|l| is_flag_line(l))
        .map_or(lines.len(), |i| start + 1 + i);
    Some(lines[start..end].to_vec())
}

/// The long flags a `--help` text lists: the flag lines', indented less than
/// the descriptions.
fn listed_flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter(|l| l.len() - l.trim_start().len() < 10 && l.trim_start().starts_with('-'))
        .filter_map(|l| {
            l.trim_start()
                .split([' ', ','])
                .find_map(|w| w.strip_prefix("--"))
                .map(|w| w.split(['=', '<', '[']).next().unwrap_or(w).to_string())
        })
        .collect()
}

/// What `name --help` prints, run as cargo built it for this test run (as
/// root, as the tests run, which Open MPI needs told).
fn help_text(name: &str) -> String {
    let binary = Path::new(env!("CARGO_BIN_EXE_all_reduce_perf")).with_file_name(name);
    let out = std::process::Command::new(binary)
        .arg("--help")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("the binary runs");
    let (help, stderr) = text(&out);
    assert!(out.status.success(), "{name} --help: {stderr}");
    help
}

#[test]
fn each_binarys_help_is_its_parsers() {
    let mut failures = Vec::new();
    for b in Binary::all() {
        let name = b.name();
        let help = help_text(&name);
        let offered: BTreeSet<String> = shown(b)
            .iter()
            .filter_map(|a| a.get_long().map(str::to_string))
            .collect();
        let listed = listed_flags(&help);
        if listed != offered {
            failures.push(format!(
                "{name} --help lists {:?} that the parser does not offer, and lacks {:?}",
                listed.difference(&offered).collect::<Vec<_>>(),
                offered.difference(&listed).collect::<Vec<_>>()
            ));
        }
        for arg in shown(b) {
            let Some(long) = arg.get_long() else { continue };
            let Some(block) = help_block(&help, long) else {
                failures.push(format!("{name} --help has no entry for --{long}"));
                continue;
            };
            // Whole words: a hidden RC must not be found in a shown XRC.
            let words: BTreeSet<&str> = block
                .iter()
                .flat_map(|l| l.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-')))
                .collect();
            for value in arg.get_possible_values() {
                let shown = words.contains(value.get_name());
                match value.is_hide_set() {
                    false if !spellings(&value).iter().all(|s| words.contains(s.as_str())) => {
                        failures.push(format!(
                            "{name} --help: --{long} does not list {:?}",
                            spellings(&value)
                        ))
                    }
                    true if shown => failures.push(format!(
                        "{name} --help: --{long} lists {}, which this binary refuses",
                        value.get_name()
                    )),
                    _ => {}
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The defects this test was written for, named so a regression reads plainly.
#[test]
fn the_defects_of_issue_31_stay_fixed() {
    let all_reduce = Binary::all()
        .into_iter()
        .find(|b| b.name() == "all_reduce_perf")
        .unwrap();
    let help = help_text("all_reduce_perf");
    let agg = help_block(&help, "agg_iters").unwrap().join("\n");
    let graph = help_block(&help, "cudagraph").unwrap().join("\n");
    assert!(
        !agg.contains("CUDA graph") && agg.contains("Calls per timed iteration"),
        "{agg}"
    );
    assert!(graph.contains("CUDA graph"), "{graph}");
    // Every type and op the parser's tables hold, aliases included.
    let datatypes = help_block(&help, "datatype").unwrap().join("\n");
    for t in DataType::ALL {
        for name in std::iter::once(t.name()).chain(t.aliases()) {
            assert!(datatypes.contains(name), "-d lacks {name}:\n{datatypes}");
        }
    }
    let ops = help_block(&help, "op").unwrap().join("\n");
    for op in RedOp::ALL {
        assert!(ops.contains(op.name()), "-o lacks {}:\n{ops}", op.name());
    }
    assert!(!help.contains("--all-pairs"), "{help}");
    let sendrecv = Binary::all()
        .into_iter()
        .find(|b| b.name() == "sendrecv_perf")
        .unwrap();
    assert!(shown(sendrecv)
        .iter()
        .any(|a| a.get_long() == Some("all-pairs")));
    assert!(!shown(all_reduce)
        .iter()
        .any(|a| a.get_long() == Some("all-pairs")));
}

#[test]
fn the_list_of_binaries_is_bin() {
    let in_bin: BTreeSet<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("bin"))
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".rs").map(str::to_string)
            })
            .collect();
    let listed: BTreeSet<String> = Binary::all().into_iter().map(Binary::name).collect();
    assert_eq!(
        in_bin, listed,
        "bin/ and docgen::binaries::Binary::all() differ"
    );
}

#[test]
fn completions_offer_what_help_offers() {
    for b in Binary::all() {
        let offered: Vec<String> = b
            .offered()
            .get_arguments()
            .filter_map(|a| a.get_long().map(str::to_string))
            .collect();
        let mut shown: Vec<String> = shown(b)
            .iter()
            .filter_map(|a| a.get_long().map(str::to_string))
            .collect();
        let mut offered_sorted = offered.clone();
        offered_sorted.sort();
        shown.sort();
        assert_eq!(offered_sorted, shown, "{}", b.name());
    }
}
