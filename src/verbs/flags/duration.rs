//! perftest's flags around -D and the write verb: `-f/--margin`,
//! `--run_infinitely` and `--write_with_imm`, as a flattened group of the
//! verbs command line, with their checks (perftest_parameters.c's), and the
//! GPU-memory rule of the latency tests (the CPU cannot poll GPU memory).

use crate::cli::whole;
use crate::job::usage;
use crate::job::UsageError;
use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
use std::time::Duration;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct DurationArgs {
    /// With -D: seconds left out of the measurement at the start and at the end of the run (perftest's default: a quarter of -D)
    #[arg(short = 'f', long = "margin", value_parser = whole::<u64>(0), allow_hyphen_values = true)]
    pub margin: Option<u64>,
    /// With -D (bandwidth tests): run until SIGINT or SIGTERM, one table line and CSV row every -D seconds
    #[arg(long = "run_infinitely")]
    pub run_infinitely: bool,
    /// ib_write_lat, ib_write_bw: RDMA write with immediate; the receiver waits on its completion queue
    #[arg(long = "write_with_imm")]
    pub write_with_imm: bool,
}

/// The validated flags of this group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Timing {
    /// -D runs: the measured window starts this long after the run's start
    /// and ends this long before its end.
    pub margin: Duration,
    /// --run_infinitely: one -D period after another until a signal.
    pub infinite: bool,
    /// --write_with_imm.
    pub write_imm: bool,
}

/// What the rest of the plan says, for the checks of this group.
pub struct Context {
    pub bench: Benchmark,
    /// -D in seconds (None: -n).
    pub duration: Option<u64>,
    pub gpu: Option<u32>,
    pub bidirectional: bool,
    pub all_pairs: bool,
    /// --data_validation, --perform_warm_up.
    pub validate: bool,
    pub warm_up: bool,
}

impl DurationArgs {
    pub fn timing(&self, cx: &Context) -> Result<Timing, UsageError> {
        let program = cx.bench.program();
        let duration = cx.duration;
        if self.write_with_imm && cx.bench.verb != Verb::Write {
            return Err(usage(format!(
                "--write_with_imm: {program} does not write; use ib_write_lat or ib_write_bw --write_with_imm, or drop it"
            )));
        }
        if self.write_with_imm && cx.all_pairs {
            return Err(usage(
                "--write_with_imm: --all-pairs measures plain writes; drop one of them",
            ));
        }
        if self.write_with_imm && cx.warm_up {
            return Err(usage(
                "--write_with_imm: the warm-up's writes would take the receiver's receives; drop --perform_warm_up",
            ));
        }
        if self.write_with_imm && cx.validate {
            return Err(usage(
                "--write_with_imm: --data_validation checks plain writes (as perftest); drop one of them",
            ));
        }
        if cx.validate && cx.all_pairs {
            return Err(usage(
                "--data_validation: --all-pairs does not validate (its matrices count wrong bytes, which a verbs pair does not check); drop one of them",
            ));
        }
        let rdma_checked = cx.validate && matches!(cx.bench.verb, Verb::Write | Verb::Read);
        if rdma_checked && cx.bidirectional {
            return Err(usage(format!(
                "--data_validation: {program} validates one direction; drop -b"
            )));
        }
        if rdma_checked && cx.bench.verb == Verb::Write && duration.is_some() {
            return Err(usage(
                "--data_validation: ib_write_bw's responder checks a count of messages; use -n instead of -D",
            ));
        }
        if let (Some(gpu), Test::Lat, Verb::Write, false) =
            (cx.gpu, cx.bench.test, cx.bench.verb, self.write_with_imm)
        {
            return Err(usage(format!(
                "--use_cuda={gpu}: {program} polls its buffer from the CPU, which cannot read GPU memory; \
                 add --write_with_imm (the receiver then waits on its completion queue) or drop --use_cuda"
            )));
        }
        let margin = match (self.margin, duration) {
            (Some(f), None) => {
                return Err(usage(format!(
                    "-f/--margin {f}: margins belong to timed runs; add -D SECS or drop -f"
                )))
            }
            (Some(f), Some(_)) if self.run_infinitely => {
                return Err(usage(format!(
                    "-f/--margin {f}: --run_infinitely measures every period whole (as perftest); drop -f"
                )))
            }
            (Some(f), Some(d)) if d <= f.saturating_mul(2) => {
                return Err(usage(format!(
                    "-f/--margin {f}: -D {d} must be longer than both margins (-D > 2 x -f); use -f {} or less, or a longer -D",
                    (d - 1) / 2
                )))
            }
            (Some(f), Some(_)) => f,
            // perftest: a quarter of the duration unless -f is given.
            (None, Some(d)) if !self.run_infinitely => d / 4,
            _ => 0,
        };
        if self.run_infinitely {
            if duration.is_none() {
                return Err(usage(
                    "--run_infinitely: give the reporting period with -D SECS, e.g. -D 5",
                ));
            }
            if cx.bench.test == Test::Lat {
                return Err(usage(format!(
                    "--run_infinitely: {program} is a latency test; perftest runs infinitely in bandwidth tests only"
                )));
            }
            let receives = cx.bench.verb == Verb::Send || self.write_with_imm;
            if cx.bidirectional && receives {
                return Err(usage(
                    "--run_infinitely: not with -b where the receiver counts receives (send, --write_with_imm), as perftest; drop -b",
                ));
            }
            if cx.validate {
                return Err(usage(
                    "--run_infinitely: --data_validation checks runs that end (as perftest); drop one of them",
                ));
            }
            if cx.all_pairs {
                return Err(usage(
                    "--run_infinitely: --all-pairs measures each pair once; drop one of them",
                ));
            }
        }
        Ok(Timing {
            margin: Duration::from_secs(margin),
            infinite: self.run_infinitely,
            write_imm: self.write_with_imm,
        })
    }
}

impl Timing {
    /// The settings both sides must share (SYMMETRIC in perftest).
    pub fn settings(&self) -> Vec<(String, String)> {
        vec![
            ("-f/--margin".into(), self.margin.as_secs().to_string()),
            ("--run_infinitely".into(), self.infinite.to_string()),
            ("--write_with_imm".into(), self.write_imm.to_string()),
        ]
    }
}

/// Where `--data_validation` can check what arrived: the receiver of sends,
/// the responder's ring of writes, the reader's reads (bandwidth tests, RC,
/// as perftest). The refusal otherwise.
pub fn validation_refusal(bench: Benchmark, rc: bool) -> Option<String> {
    let program = bench.program();
    match (bench.verb, bench.test) {
        (Verb::Send, _) => None,
        (Verb::Write | Verb::Read, Test::Lat) => Some(format!(
            "--data_validation: {program} checks nothing (perftest validates writes and reads in bandwidth tests); \
             use ib_write_bw, ib_read_bw, ib_send_bw or ib_send_lat --data_validation"
        )),
        (Verb::Write | Verb::Read, Test::Bw) if !rc => Some(format!(
            "--data_validation: {program} validates over RC only (as perftest); use -c RC"
        )),
        (Verb::Write | Verb::Read, Test::Bw) => None,
        (Verb::Atomic, _) => Some(format!(
            "--data_validation: {program} moves no payload to check; use ib_write_bw, ib_read_bw or ib_send_bw --data_validation"
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
    use crate::verbs::flags::parse;
    use std::time::Duration;

    const WRITE_BW: Benchmark = Benchmark::new(Verb::Write, Test::Bw);
    const WRITE_LAT: Benchmark = Benchmark::new(Verb::Write, Test::Lat);
    const READ_BW: Benchmark = Benchmark::new(Verb::Read, Test::Bw);
    const READ_LAT: Benchmark = Benchmark::new(Verb::Read, Test::Lat);
    const SEND_BW: Benchmark = Benchmark::new(Verb::Send, Test::Bw);
    const ATOMIC_BW: Benchmark = Benchmark::new(Verb::Atomic, Test::Bw);

    fn err(bench: Benchmark, args: &[&str]) -> String {
        let mut argv = vec![bench.program()];
        argv.extend_from_slice(args);
        let e = parse(bench, argv).unwrap_err().0;
        assert_eq!(e.lines().count(), 1, "{e}");
        e
    }

    fn timing(bench: Benchmark, args: &[&str]) -> super::Timing {
        let mut argv = vec![bench.program()];
        argv.extend_from_slice(args);
        parse(bench, argv).unwrap().timing
    }

    #[test]
    fn margins_default_to_a_quarter_of_the_duration() {
        assert_eq!(
            timing(WRITE_BW, &["-D", "8"]).margin,
            Duration::from_secs(2)
        );
        assert_eq!(timing(WRITE_BW, &["-D", "3"]).margin, Duration::ZERO);
        assert_eq!(
            timing(WRITE_BW, &["-D", "5", "-f", "2"]).margin,
            Duration::from_secs(2)
        );
        assert_eq!(
            timing(WRITE_BW, &["-D", "5", "-f", "0"]).margin,
            Duration::ZERO
        );
        assert_eq!(timing(WRITE_BW, &[]).margin, Duration::ZERO);
        // Every period whole.
        let t = timing(SEND_BW, &["-D", "8", "--run_infinitely"]);
        assert!(t.infinite && t.margin == Duration::ZERO);
    }

    #[test]
    fn perftests_checks_are_one_line_naming_the_flag() {
        for (bench, args, want) in [
            (WRITE_BW, vec!["-f", "1"], "-f/--margin 1: margins belong to timed runs; add -D SECS"),
            (WRITE_BW, vec!["-D", "4", "-f", "2"], "-f/--margin 2: -D 4 must be longer than both margins (-D > 2 x -f); use -f 1 or less"),
            (WRITE_BW, vec!["-D", "4", "-f", "-1"], "-f/--margin -1: use a whole number >= 0"),
            (WRITE_BW, vec!["-D", "4", "-f", "1", "--run_infinitely"], "-f/--margin 1: --run_infinitely measures every period whole"),
            (WRITE_BW, vec!["--run_infinitely"], "--run_infinitely: give the reporting period with -D SECS"),
            (WRITE_LAT, vec!["-D", "2", "--run_infinitely"], "--run_infinitely: ib_write_lat is a latency test"),
            (SEND_BW, vec!["-D", "2", "-b", "--run_infinitely"], "--run_infinitely: not with -b"),
            (WRITE_BW, vec!["-D", "2", "--write_with_imm", "-b", "--run_infinitely"], "--run_infinitely: not with -b"),
            (READ_BW, vec!["-D", "2", "--data_validation", "--run_infinitely"], "--run_infinitely: --data_validation"),
            (READ_BW, vec!["--write_with_imm"], "--write_with_imm: ib_read_bw does not write"),
            (WRITE_BW, vec!["--write_with_imm", "--perform_warm_up"], "--write_with_imm: the warm-up's writes"),
            (WRITE_BW, vec!["--write_with_imm", "--data_validation"], "--write_with_imm: --data_validation checks plain writes"),
            (WRITE_LAT, vec!["--use_cuda=0"], "--use_cuda=0: ib_write_lat polls its buffer from the CPU, which cannot read GPU memory; add --write_with_imm"),
            (WRITE_LAT, vec!["--data_validation"], "--data_validation: ib_write_lat checks nothing"),
            (READ_LAT, vec!["--data_validation"], "--data_validation: ib_read_lat checks nothing"),
            (WRITE_BW, vec!["--data_validation", "-c", "UC"], "--data_validation: ib_write_bw validates over RC only"),
            (ATOMIC_BW, vec!["--data_validation"], "--data_validation: ib_atomic_bw moves no payload"),
            (WRITE_BW, vec!["--data_validation", "--all-pairs"], "--data_validation: --all-pairs does not validate"),
            (READ_BW, vec!["--data_validation", "-b"], "--data_validation: ib_read_bw validates one direction; drop -b"),
            (WRITE_BW, vec!["--data_validation", "-D", "3"], "--data_validation: ib_write_bw's responder checks a count"),
        ] {
            let e = err(bench, &args);
            assert!(e.starts_with(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn what_is_allowed() {
        let t = timing(WRITE_LAT, &["--write_with_imm", "--use_cuda=0"]);
        assert!(t.write_imm);
        assert!(timing(WRITE_BW, &["--write_with_imm", "-r", "64"]).write_imm);
        // Reads, sends and atomics need no CPU look at the buffer.
        for bench in [READ_LAT, Benchmark::new(Verb::Send, Test::Lat)] {
            timing(bench, &["--use_cuda=0"]);
        }
        timing(WRITE_BW, &["--data_validation", "-s", "4096"]);
        timing(READ_BW, &["--data_validation", "-a"]);
        assert!(timing(READ_BW, &["-D", "3", "--run_infinitely", "-b"]).infinite);
    }
}
