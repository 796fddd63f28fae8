//! perftest's reporting flags, as a flattened group of the verbs command line:
//! `-H/--report-histogram`, `-U/--report-unsorted`, `--report-both`,
//! `--cpu_util`, `--out_json` and `--out_json_file`, and their checks.

use crate::job::usage;
use crate::job::UsageError;
use crate::output::{check_file, Existing, FileFlag};
use crate::report::perftest::{column_titles, Columns};
use crate::report::perftest_extra::ExtraColumns;
use crate::report::perftest_hist::SampleDump;
use crate::report::perftest_json::DEFAULT_JSON_FILE;
use crate::verbs::flags::benchmark::{Benchmark, Test};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ReportArgs {
    /// Latency tests: print every size's samples sorted (without the two largest), as perftest
    #[arg(short = 'H', long = "report-histogram")]
    pub histogram: bool,
    /// Latency tests: print every size's samples in measured order, as perftest
    #[arg(short = 'U', long = "report-unsorted")]
    pub unsorted: bool,
    /// With -b: each direction's figures on lines (and CSV rows) of their own, after the sum
    #[arg(long = "report-both")]
    pub report_both: bool,
    /// With -D: perftest's CPU_Util[%] column (user share of user + idle time in /proc/stat)
    #[arg(long = "cpu_util")]
    pub cpu_util: bool,
    /// Write perftest's JSON report, every size in one document (default file perftest_out.json)
    #[arg(long = "out_json")]
    pub out_json: bool,
    /// The JSON report's file (implies --out_json); never overwritten
    #[arg(long = "out_json_file", value_name = "PATH")]
    pub out_json_file: Option<PathBuf>,
}

/// The reporting flags, checked.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReportPlan {
    /// -U and -H.
    pub dump: SampleDump,
    /// --report-both.
    pub both: bool,
    pub cpu_util: bool,
    /// --out_json(_file): where the document goes.
    pub json: Option<PathBuf>,
}

impl ReportPlan {
    /// The columns the table adds.
    pub fn extra_columns(&self) -> ExtraColumns {
        ExtraColumns {
            cpu_util: self.cpu_util,
            directions: self.both,
            // The session adds it to the table's columns with --rounds.
            spread: false,
        }
    }

    /// -U/-H: prints one size's samples (ns, as measured) on stdout, before
    /// the table prints its row. `labelled`: the table has a #pair column;
    /// `validation`: a #wrong column.
    pub fn print_dump(&self, samples_ns: &[f64], labelled: bool, validation: bool) {
        if !self.dump.any() {
            return;
        }
        let titles = column_titles(Columns::Latency, labelled, validation, self.extra_columns());
        let samples_us: Vec<f64> = samples_ns.iter().map(|ns| ns / 1e3).collect();
        let mut out = std::io::stdout().lock();
        for line in self.dump.lines(&samples_us, &titles) {
            // stdout gone (a closed pipe) loses only the dump; the run goes on.
            let _ = writeln!(out, "{line}");
        }
    }
}

impl ReportArgs {
    /// `bidirectional`: -b; `duration`: -D is given; `all_pairs`: --all-pairs.
    pub fn plan(
        &self,
        bench: Benchmark,
        bidirectional: bool,
        duration: bool,
        all_pairs: bool,
    ) -> Result<ReportPlan, UsageError> {
        let program = bench.program();
        let given = [
            (self.histogram, "-H/--report-histogram"),
            (self.unsorted, "-U/--report-unsorted"),
            (self.report_both, "--report-both"),
            (self.cpu_util, "--cpu_util"),
            (self.out_json || self.out_json_file.is_some(), "--out_json"),
        ];
        if let Some((_, flag)) = given.iter().find(|(on, _)| *on && all_pairs) {
            return Err(usage(format!(
                "{flag}: --all-pairs reports its pair matrices only (--csv); drop {flag}"
            )));
        }
        if bench.test == Test::Bw {
            // perftest refuses both on bandwidth tests (" Available only on Latency tests").
            for (on, flag) in [
                (self.histogram, "-H/--report-histogram"),
                (self.unsorted, "-U/--report-unsorted"),
            ] {
                if on {
                    return Err(usage(format!(
                        "{flag}: {program} is a bandwidth test and has no per-message samples \
                         (perftest refuses it too); use the latency test or drop {}",
                        &flag[..2]
                    )));
                }
            }
        }
        if self.report_both && bench.test == Test::Lat {
            return Err(usage(format!(
                "--report-both: {program} is a latency test; use it with a bandwidth test and -b"
            )));
        }
        if self.report_both && !bidirectional {
            // perftest ignores it without -b.
            return Err(usage(
                "--report-both: reports each direction of a bidirectional run; add -b",
            ));
        }
        if self.cpu_util && !duration {
            // perftest warns " CPU Utilization works only with Duration mode." and runs without it.
            return Err(usage(
                "--cpu_util: perftest measures it over a -D run only; add -D SECONDS",
            ));
        }
        let json = match (&self.out_json_file, self.out_json) {
            (Some(path), _) => Some(path.clone()),
            (None, true) => Some(PathBuf::from(DEFAULT_JSON_FILE)),
            (None, false) => None,
        };
        if let Some(path) = &json {
            let json = FileFlag {
                flag: "--out_json_file",
                example: DEFAULT_JSON_FILE,
                existing: Existing::Refused { what: "runs" },
            };
            check_file(&json, Some(path))?;
        }
        Ok(ReportPlan {
            dump: SampleDump {
                unsorted: self.unsorted,
                histogram: self.histogram,
            },
            both: self.report_both,
            cpu_util: self.cpu_util,
            json,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
    use crate::verbs::flags::parse;

    const WRITE_BW: Benchmark = Benchmark::new(Verb::Write, Test::Bw);
    const READ_LAT: Benchmark = Benchmark::new(Verb::Read, Test::Lat);

    fn err(bench: Benchmark, args: &[&str]) -> String {
        let argv = std::iter::once(bench.program()).chain(args.iter().copied());
        parse(bench, argv).unwrap_err().0
    }

    #[test]
    fn flags_parse_into_the_plan() {
        let argv = ["ib_read_lat", "-H", "-U", "-D", "2", "--cpu_util"];
        let plan = parse(READ_LAT, argv).unwrap();
        assert!(plan.report.dump.histogram && plan.report.dump.unsorted);
        assert!(plan.report.cpu_util && plan.report.extra_columns().cpu_util);
        let argv = ["ib_write_bw", "-b", "--report-both", "--out_json"];
        let plan = parse(WRITE_BW, argv).unwrap();
        assert!(plan.report.both);
        assert_eq!(
            plan.report.json.as_deref(),
            Some(std::path::Path::new("perftest_out.json"))
        );
    }

    #[test]
    fn bad_combinations_are_one_line_each() {
        let e = err(WRITE_BW, &["-H"]);
        assert!(
            e.starts_with("-H/--report-histogram: ib_write_bw is a bandwidth test"),
            "{e}"
        );
        assert!(
            e.contains("perftest refuses it too") && e.ends_with("drop -H"),
            "{e}"
        );
        assert!(err(WRITE_BW, &["-U"]).ends_with("drop -U"));
        assert_eq!(
            err(WRITE_BW, &["--all-pairs", "--out_json"]),
            "--out_json: --all-pairs reports its pair matrices only (--csv); drop --out_json"
        );
        assert_eq!(
            err(WRITE_BW, &["--report-both"]),
            "--report-both: reports each direction of a bidirectional run; add -b"
        );
        assert!(err(READ_LAT, &["--report-both"])
            .starts_with("--report-both: ib_read_lat is a latency test"));
        assert_eq!(
            err(READ_LAT, &["--cpu_util"]),
            "--cpu_util: perftest measures it over a -D run only; add -D SECONDS"
        );
        for e in [err(WRITE_BW, &["-H"]), err(READ_LAT, &["--cpu_util"])] {
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn the_json_file_is_checked_like_the_csv() {
        let tree = crate::sysfs::fixture::Tree::temp("out-json");
        let fifo = tree.dir().join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let fifo = fifo.display().to_string();
        assert_eq!(
            err(WRITE_BW, &["--out_json_file", &fifo]),
            format!("--out_json_file {fifo}: is a FIFO, not a regular file; give the path of a .json file")
        );
        let taken = tree.dir().join("taken.json");
        std::fs::write(&taken, "{}\n").unwrap();
        let taken = taken.display().to_string();
        assert_eq!(
            err(WRITE_BW, &["--out_json", "--out_json_file", &taken]),
            format!("--out_json_file {taken}: the file exists and runs are never overwritten; choose a new path")
        );
        assert_eq!(
            err(WRITE_BW, &["--out_json_file", "/dev/null"]),
            "--out_json_file /dev/null: is a character device, not a regular file; give the path of a .json file"
        );
        let new = tree.dir().join("sub/new.json");
        let argv = ["ib_write_bw", "--out_json_file", new.to_str().unwrap()];
        assert_eq!(parse(WRITE_BW, argv).unwrap().report.json, Some(new));
    }
}
