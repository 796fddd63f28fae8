//! copy_bw's command line and the plan it validates into.

use crate::backend::MemoryBudget;
use crate::cli::{size_arg, whole, CsvArgs};
use crate::job::UsageError;
use crate::output::{check_file, csv_flag};
use crate::report::copy::CopyKind;
use crate::sizes::{sweep, Step};
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::Parser;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "copy_bw",
    version = crate::job::provenance::version(),
    about = "GPU copy bandwidth per direction (H2D, D2H, D2D, GPU to GPU) against the PCIe, NVLink and memory limits read from the machine"
)]
pub struct CopyArgs {
    /// Smallest copy in bytes (K, M, G suffixes: 1K = 1024)
    #[arg(short = 'b', long = "minbytes", default_value = "1M", value_parser = size_arg, allow_hyphen_values = true)]
    pub minbytes: u64,
    /// Largest copy in bytes
    #[arg(short = 'e', long = "maxbytes", default_value = "1G", value_parser = size_arg, allow_hyphen_values = true)]
    pub maxbytes: u64,
    /// Multiply the size by this factor at each step (an integer > 1)
    #[arg(short = 'f', long = "stepfactor", default_value_t = 4, value_parser = whole::<u64>(2), allow_hyphen_values = true)]
    pub stepfactor: u64,
    /// Timed copies per size
    #[arg(short = 'n', long = "iters", default_value_t = 20, value_parser = whole::<usize>(1), allow_hyphen_values = true)]
    pub iters: usize,
    /// Untimed copies before each timed loop
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 3, value_parser = whole::<usize>(0), allow_hyphen_values = true)]
    pub warmup_iters: usize,
    /// Check the copied bytes after each size (0 = no check)
    #[arg(short = 'c', long = "check", default_value_t = 1, value_parser = whole::<usize>(0), allow_hyphen_values = true)]
    pub check: usize,
    /// GPUs to measure, e.g. 0,1,3 (default: every visible GPU)
    #[arg(long = "gpus", value_delimiter = ',', value_parser = whole::<usize>(0), allow_hyphen_values = true)]
    pub gpus: Vec<usize>,
    /// Copies to run, comma-separated
    #[arg(
        long = "tests",
        value_delimiter = ',',
        default_value = "h2d,d2h,d2d,p2p",
        value_parser = PossibleValuesParser::new(CopyKind::ALL.map(|k| PossibleValue::new(k.name()).help(k.meaning())))
    )]
    pub tests: Vec<String>,
    #[command(flatten)]
    pub csv: CsvArgs,
}

/// The validated command line.
#[derive(Clone, Debug)]
pub struct CopyPlan {
    pub sizes: Vec<u64>,
    pub iters: usize,
    pub warmup_iters: usize,
    pub check: bool,
    pub gpus: Option<Vec<usize>>,
    pub kinds: Vec<CopyKind>,
}

/// Host bytes each timed copy keeps: its CUDA event, its time in ms and in seconds.
const BYTES_PER_COPY: u64 = (std::mem::size_of::<cudarc::driver::CudaEvent>() + 4 + 8) as u64;

impl CopyPlan {
    /// The largest copy: the size of every buffer.
    pub fn largest(&self) -> usize {
        *self.sizes.last().unwrap_or(&1) as usize
    }

    /// Checks, before anything is allocated, that the per-copy timing of -n
    /// copies fits in the host memory `budget`.
    pub fn check_memory(&self, budget: Option<MemoryBudget>) -> anyhow::Result<()> {
        let n = self.iters;
        let Some(need) = (n as u64)
            .checked_add(1)
            .and_then(|c| c.checked_mul(BYTES_PER_COPY))
        else {
            anyhow::bail!(
                "-n/--iters {n}: the timing of so many copies exceeds any memory; use e.g. -n 20"
            );
        };
        match budget {
            Some(budget) if need > budget.bytes => anyhow::bail!(
                "-n/--iters {n}: timing the copies needs {} of host memory ({BYTES_PER_COPY} B a copy) but only {} \
                 is available ({}); lower -n/--iters",
                crate::sizes::human_bytes(need),
                crate::sizes::human_bytes(budget.bytes),
                budget.what
            ),
            _ => Ok(()),
        }
    }
}

impl CopyArgs {
    pub fn plan(&self) -> Result<CopyPlan, UsageError> {
        let usage = |msg: String| Err(UsageError(msg));
        if self.minbytes == 0 || self.minbytes > self.maxbytes {
            return usage(format!(
                "-b/--minbytes {} -e/--maxbytes {}: give 1 <= -b <= -e",
                self.minbytes, self.maxbytes
            ));
        }
        if self.stepfactor < 2 {
            return usage(format!(
                "-f/--stepfactor {}: must be an integer > 1 (e.g. -f 4)",
                self.stepfactor
            ));
        }
        if self.iters == 0 {
            return usage("-n/--iters 0: at least one timed copy is needed; use e.g. -n 20".into());
        }
        let kinds = self
            .tests
            .iter()
            .map(|t| {
                CopyKind::ALL
                    .into_iter()
                    .find(|k| k.name() == t.trim())
                    .ok_or_else(|| {
                        UsageError(format!(
                            "--tests {t}: use h2d, d2h, d2d and/or p2p, comma-separated"
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        check_file(&csv_flag(self.csv.append), self.csv.csv.as_deref())?;
        Ok(CopyPlan {
            sizes: sweep(self.minbytes, self.maxbytes, Step::Factor(self.stepfactor)),
            iters: self.iters,
            warmup_iters: self.warmup_iters,
            check: self.check > 0,
            gpus: (!self.gpus.is_empty()).then(|| self.gpus.clone()),
            kinds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(args: &[&str]) -> Result<CopyPlan, String> {
        let mut argv = vec!["copy_bw"];
        argv.extend_from_slice(args);
        crate::cli::parse_one_line::<CopyArgs, _, _>(argv)
            .and_then(|a| a.plan())
            .map_err(|e| e.0)
    }

    #[test]
    fn default_sweep_and_tests() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.sizes.first(), Some(&(1 << 20)));
        assert_eq!(p.sizes.last(), Some(&(1 << 30)));
        assert_eq!(p.largest(), 1 << 30);
        assert_eq!(p.sizes.len(), 6);
        assert_eq!(p.kinds, CopyKind::ALL.to_vec());
        assert_eq!(p.gpus, None);
    }

    #[test]
    fn bad_input_names_the_flag() {
        assert!(plan(&["--tests", "h2d,x2y"])
            .unwrap_err()
            .starts_with("--tests x2y"));
        assert!(plan(&["-b", "2G", "-e", "1G"])
            .unwrap_err()
            .starts_with("-b/--minbytes"));
        assert!(plan(&["-f", "1"])
            .unwrap_err()
            .starts_with("-f/--stepfactor 1"));
        assert!(plan(&["-n", "0"]).unwrap_err().starts_with("-n/--iters 0"));
        assert_eq!(plan(&["--gpus", "0,2"]).unwrap().gpus, Some(vec![0, 2]));
        let tree = crate::sysfs::fixture::Tree::temp("copy-bw-csv");
        let exists = tree.dir().join("runs.csv");
        std::fs::write(&exists, "rows\n").unwrap();
        let exists = exists.to_str().unwrap();
        assert!(plan(&["--csv", exists])
            .unwrap_err()
            .contains("the file exists and runs are never overwritten"));
        assert!(plan(&["--csv", exists, "--append"]).is_ok());
        for (args, expected) in [
            (&["-n", "-1"][..], "-n/--iters -1: use a whole number >= 1"),
            (
                &["-w", "-1"],
                "-w/--warmup_iters -1: use a whole number >= 0",
            ),
            (
                &["-c", "x"],
                "-c/--check: 'x' is not a number; use a whole number >= 0",
            ),
            (&["-f", "-4"], "-f/--stepfactor -4: use a whole number >= 2"),
            (&["--gpus", "-1"], "--gpus -1: use a whole number >= 0"),
            (
                &["-b", "1.9"],
                "-b/--minbytes: '1.9' is not a whole number of bytes",
            ),
            (&["-e", "-1G"], "-e/--maxbytes: '-1G' is negative"),
        ] {
            let e = plan(args).unwrap_err();
            assert!(e.starts_with(expected), "{args:?}: {e}");
        }
    }

    #[test]
    fn per_copy_timing_is_in_the_memory_check() {
        let budget = Some(MemoryBudget {
            bytes: 1 << 30,
            what: "a test".into(),
        });
        plan(&[]).unwrap().check_memory(budget.clone()).unwrap();
        let e = plan(&["-n", "10000000000000"])
            .unwrap()
            .check_memory(budget)
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("-n/--iters 10000000000000: timing the copies needs "),
            "{e}"
        );
        assert!(
            e.to_string()
                .ends_with("but only 1 GiB is available (a test); lower -n/--iters"),
            "{e}"
        );
    }
}
