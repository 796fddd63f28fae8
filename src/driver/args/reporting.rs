//! nccl-tests' reporting flags: `-J` (its JSON document), `-I`/`-K` (per-iteration
//! timing) and `-S` (timestamps), validated as nccl-tests validates them: a value
//! it turns off with a message is turned off with the same message, as a warning;
//! and ours, `--percentiles`.

use super::Launch;
use crate::cli::whole;
use crate::job::UsageError;
use crate::output::{check_file, Existing, FileFlag};
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct ReportArgs {
    /// Write nccl-tests' JSON document to FILE.json, a whole document after every
    /// size (each size's record added in place) (FILE.json.0, .1, ... when
    /// FILE.json exists, as nccl-tests does)
    #[arg(short = 'J', long = "output_file", value_name = "FILE.json")]
    pub output_file: Option<PathBuf>,
    /// 1: per-iteration timing: the table's i_min i_max i_p99 i_cv% columns and,
    /// with -J, every iteration's time of every process
    #[arg(
        short = 'I',
        long = "per_iter_timing",
        default_value_t = 0,
        value_parser = whole::<i64>(0),
        allow_hyphen_values = true
    )]
    pub per_iter_timing: i64,
    /// With -I 1: leading iterations left out of the i_* summary
    #[arg(
        short = 'K',
        long = "per_iter_skip",
        default_value_t = 0,
        value_parser = whole::<i64>(0),
        allow_hyphen_values = true
    )]
    pub per_iter_skip: i64,
    /// 1: the local time at the end of each table line
    #[arg(short = 'S', long = "report_timestamps", default_value_t = 0, value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub report_timestamps: u8,
    /// 0: time the loop whole, as nccl-tests does (no clock read between calls, no
    /// p50..max columns); 1: time every call, for the percentiles
    #[arg(long = "percentiles", default_value_t = 1, value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub percentiles: u8,
}

impl Default for ReportArgs {
    fn default() -> ReportArgs {
        ReportArgs {
            output_file: None,
            per_iter_timing: 0,
            per_iter_skip: 0,
            report_timestamps: 0,
            percentiles: 1,
        }
    }
}

/// The reporting part of the plan.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reporting {
    /// -J: where the JSON document goes.
    pub json: Option<PathBuf>,
    /// -I 1 (after nccl-tests' disable rules).
    pub per_iter: bool,
    /// -K: leading iterations left out of the -I summary.
    pub per_iter_skip: usize,
    /// -S 1.
    pub timestamps: bool,
    /// --percentiles 1: every call timed (else only the loop, with no clock read inside).
    pub percentiles: bool,
    /// What nccl-tests would have said on stderr when it turned -I or -K off.
    pub warnings: Vec<String>,
}

impl ReportArgs {
    /// nccl-tests' rules (common.cu, after its option parsing), in its order and
    /// words; then --percentiles against what needs every call's time (`hist`: --hist).
    pub fn plan(&self, iters: usize, launch: Launch, hist: bool) -> Result<Reporting, UsageError> {
        let graph = matches!(launch, Launch::Graph(_));
        let mut warnings = Vec::new();
        let mut per_iter = self.per_iter_timing;
        if per_iter != 0 && per_iter != 1 {
            warnings
                .push("per-iteration timing (-I) only supports 0=off or 1=on. Disabling.".into());
            per_iter = 0;
        }
        if per_iter == 1 && graph {
            warnings.push(
                "per-iteration timing (-I) is incompatible with CUDA graph mode (-G). Disabling."
                    .into(),
            );
            per_iter = 0;
        }
        let mut skip = self.per_iter_skip;
        if skip < 0 || skip >= iters as i64 {
            warnings.push(format!(
                "per-iteration skip (-K) must be between 0 and {}. Disabling.",
                iters as i64 - 1
            ));
            skip = 0;
        }
        if skip != 0 && per_iter == 0 {
            warnings.push(
                "per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.".into(),
            );
            skip = 0;
        }
        let timestamps = match self.report_timestamps {
            0 | 1 => self.report_timestamps == 1,
            v => {
                return Err(UsageError(format!(
                    "-S/--report_timestamps {v}: use 0 or 1"
                )))
            }
        };
        if let Some(path) = &self.output_file {
            check_json_target(path)?;
        }
        let percentiles = match self.percentiles {
            1 => true,
            0 if per_iter == 1 => return Err(UsageError(
                "--percentiles 0 and -I/--per_iter_timing 1: the i_* columns need every call's time; drop one of them".into(),
            )),
            0 if hist => return Err(UsageError(
                "--percentiles 0 and --hist: the histograms are of every call's time; drop one of them".into(),
            )),
            0 if launch == Launch::BarrierOutside => return Err(UsageError(
                "--percentiles 0 and -z/--blocking 3: -z 3 times every call on its own, at no cost; drop --percentiles 0".into(),
            )),
            0 => false,
            v => return Err(UsageError(format!(
                "--percentiles {v}: use 1 (time every call, for the p50..max columns) or 0 (time the loop whole, as nccl-tests does)"
            ))),
        };
        Ok(Reporting {
            json: self.output_file.clone(),
            per_iter: per_iter == 1,
            per_iter_skip: skip as usize,
            timestamps,
            percentiles,
            warnings,
        })
    }
}

/// `-J PATH`: a .json name (nccl-tests writes JSON only there, and nothing
/// otherwise) that `output::check_file` takes. An existing regular file is
/// kept: the document goes to PATH.0, PATH.1, ...
pub fn check_json_target(path: &Path) -> Result<(), UsageError> {
    let json = FileFlag {
        flag: "-J/--output_file",
        example: "results.json",
        existing: Existing::Numbered,
    };
    check_file(&json, Some(path))?;
    match path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        true => Ok(()),
        false => Err(UsageError(format!(
            "-J/--output_file {}: nccl-tests' document is written only to a .json file; name it e.g. {}",
            path.display(),
            path.with_extension("json").display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(i: i64, k: i64, graph: bool) -> Reporting {
        ReportArgs {
            per_iter_timing: i,
            per_iter_skip: k,
            ..ReportArgs::default()
        }
        .plan(
            20,
            if graph {
                Launch::Graph(2)
            } else {
                Launch::Stream
            },
            false,
        )
        .unwrap()
    }

    #[test]
    fn percentiles_off_only_where_nothing_needs_every_call() {
        let with = |p: u8, i: i64, launch: Launch, hist: bool| {
            ReportArgs {
                percentiles: p,
                per_iter_timing: i,
                ..ReportArgs::default()
            }
            .plan(20, launch, hist)
        };
        assert!(with(1, 0, Launch::Stream, false).unwrap().percentiles);
        for launch in [
            Launch::Stream,
            Launch::Blocking,
            Launch::Synced,
            Launch::Graph(3),
        ] {
            assert!(
                !with(0, 0, launch, false).unwrap().percentiles,
                "{launch:?}"
            );
        }
        let err = |p, i, launch, hist| with(p, i, launch, hist).unwrap_err().0;
        assert!(err(0, 1, Launch::Stream, false)
            .starts_with("--percentiles 0 and -I/--per_iter_timing 1:"));
        assert!(err(0, 0, Launch::Stream, true).starts_with("--percentiles 0 and --hist:"));
        assert!(err(0, 0, Launch::BarrierOutside, false)
            .starts_with("--percentiles 0 and -z/--blocking 3:"));
        assert!(err(2, 0, Launch::Stream, false).starts_with("--percentiles 2: use 1"));
        // -I 1 turned off by -G (nccl-tests' rule, a warning) leaves nothing in the way.
        assert!(!with(0, 1, Launch::Graph(2), false).unwrap().percentiles);
    }

    #[test]
    fn nccl_tests_disable_rules_and_words() {
        let on = plan(1, 3, false);
        assert_eq!(
            (on.per_iter, on.per_iter_skip, on.warnings.len()),
            (true, 3, 0)
        );
        let two = plan(2, 0, false);
        assert!(!two.per_iter);
        assert_eq!(
            two.warnings,
            ["per-iteration timing (-I) only supports 0=off or 1=on. Disabling."]
        );
        assert_eq!(
            plan(1, 0, true).warnings,
            ["per-iteration timing (-I) is incompatible with CUDA graph mode (-G). Disabling."]
        );
        let far = plan(1, 20, false);
        assert_eq!((far.per_iter, far.per_iter_skip), (true, 0));
        assert_eq!(
            far.warnings,
            ["per-iteration skip (-K) must be between 0 and 19. Disabling."]
        );
        assert_eq!(plan(1, -1, false).per_iter_skip, 0);
        assert_eq!(
            plan(0, 5, false).warnings,
            ["per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling."]
        );
    }

    #[test]
    fn json_targets() {
        let err = |p: &str| check_json_target(Path::new(p)).unwrap_err().0;
        assert_eq!(
            err("/dev/null"),
            "-J/--output_file /dev/null: is a character device, not a regular file; give the path of a .json file"
        );
        assert!(err("src").starts_with("-J/--output_file src: is a directory"));
        assert_eq!(
            err("out.txt"),
            "-J/--output_file out.txt: nccl-tests' document is written only to a .json file; name it e.g. out.json"
        );
        assert!(check_json_target(Path::new("target/x.JSON")).is_ok());
    }
}
