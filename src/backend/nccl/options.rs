//! nccl-tests' GPU-only flags (`-t -p -y -R -x -D -V`), spelled and defaulted as
//! nccl-tests 2.19 does, and what they ask of NCCL: checked once against the
//! command line (`NcclFlags::options`), once against the NCCL library that loads
//! (`NcclOptions::against`), and refused with one line on the mpi backend
//! (`NcclOptions::gpu_only_flag`).

use crate::cli::whole;
use crate::job::{usage, UsageError};
use serde::Serialize;

/// `-R` as nccl-tests numbers it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Register {
    /// 0: plain buffers, no registration.
    #[default]
    Off,
    /// 1: ncclMemAlloc buffers, each registered with ncclCommRegister (NCCL 2.19+).
    Local,
    /// 2: ncclMemAlloc buffers as ncclCommWindowRegister symmetric windows (NCCL 2.27+).
    Symmetric,
}

/// NCCL_CTA_POLICY_* values `-x` may set (nccl.h).
pub const CTA_POLICY_NAMES: [&str; 3] = ["DEFAULT", "EFFICIENCY", "ZERO"];

/// NCCL versions the flags need (NCCL_VERSION_CODE); those of entry points are
/// where the entry points are listed.
pub use crate::gpu::nccl_lib::symbols::{CONFIG_VERSION, REGISTER_VERSION, WINDOW_VERSION};
pub const CTA_POLICY_VERSION: i32 = 2_27_00;
pub const CTA_POLICY_ZERO_VERSION: i32 = 2_28_00;
pub const DEVICE_API_VERSION: i32 = 2_28_00;
pub const NVLINK_SCHED_VERSION: i32 = 2_28_00;

/// The flags as typed; `options` validates them.
#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct NcclFlags {
    /// Threads per process, each driving -g GPUs (nccl-tests); here 1: use -g for more GPUs per process
    #[arg(short = 't', long = "nthreads", default_value_t = 1, value_parser = whole::<usize>(1), allow_hyphen_values = true)]
    pub nthreads: usize,
    /// 1: initialise each GPU's communicator from its own thread, concurrently (nccl backend)
    #[arg(short = 'p', long = "parallel_init", default_value_t = 0, value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub parallel_init: u8,
    /// 1: issue every call on the NULL stream instead of a non-blocking stream (nccl backend)
    #[arg(short = 'y', long = "stream_null", default_value_t = 0, value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub stream_null: u8,
    /// Buffer registration: 0 none, 1 local (ncclCommRegister), 2 symmetric windows (ncclCommWindowRegister); nccl backend
    #[arg(short = 'R', long = "local_register", default_value_t = 0, value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub local_register: u8,
    /// NCCL CTA policy: 0 default, 1 efficiency, 2 zero (NCCL 2.27+, 2 needs 2.28; default: not set)
    #[arg(short = 'x', long = "cta_policy", value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub cta_policy: Option<u8>,
    /// nccl-tests' device-API kernels (NCCL 2.28+): only 0, NCCL's own implementation, here
    #[arg(short = 'D', long = "device_implementation", value_parser = whole::<u64>(0), allow_hyphen_values = true)]
    pub device_implementation: Option<u64>,
    /// CTAs of the device implementation, 1 to 128 (NCCL 2.28+; default 16)
    #[arg(short = 'V', long = "device_cta_count", value_parser = whole::<u64>(0), allow_hyphen_values = true)]
    pub device_cta_count: Option<u64>,
}

/// The validated GPU-only flags.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NcclOptions {
    pub parallel_init: bool,
    pub stream_null: bool,
    pub register: Register,
    /// NCCL_CTA_POLICY_* for ncclConfig_t.CTAPolicy; None leaves it unset.
    pub cta_policy: Option<u8>,
    /// -D as given (only 0 is accepted).
    pub device_implementation: Option<u64>,
    /// -V as given.
    pub device_cta_count: Option<u64>,
}

fn flag01(name: &str, v: u8) -> Result<bool, UsageError> {
    match v {
        0 | 1 => Ok(v == 1),
        _ => Err(usage(format!("{name} {v}: use 0 or 1"))),
    }
}

impl NcclFlags {
    /// Checks what does not depend on the library: values and combinations.
    pub fn options(&self) -> Result<NcclOptions, UsageError> {
        if self.nthreads == 0 {
            return Err(usage(
                "-t/--nthreads 0: use a whole number >= 1 (1: one thread per process)",
            ));
        }
        if self.nthreads > 1 {
            return Err(usage(format!(
                "-t/--nthreads {n}: fabricbench drives a process's GPUs from one thread with grouped calls; \
                 use -g {n} (--backend nccl) for {n} GPUs per process, or start {n}x the ranks",
                n = self.nthreads
            )));
        }
        let parallel_init = flag01("-p/--parallel_init", self.parallel_init)?;
        let stream_null = flag01("-y/--stream_null", self.stream_null)?;
        let register = match self.local_register {
            0 => Register::Off,
            1 => Register::Local,
            2 => Register::Symmetric,
            r => {
                return Err(usage(format!(
                    "-R/--local_register {r}: use 0 (none), 1 (local, ncclCommRegister) or 2 (symmetric windows)"
                )))
            }
        };
        if let Some(x) = self.cta_policy {
            if x as usize >= CTA_POLICY_NAMES.len() {
                return Err(usage(format!(
                    "-x/--cta_policy {x}: use 0 (NCCL_CTA_POLICY_DEFAULT), 1 (EFFICIENCY) or 2 (ZERO)"
                )));
            }
        }
        if let Some(v) = self.device_cta_count {
            if !(1..=128).contains(&v) {
                return Err(usage(format!(
                    "-V/--device_cta_count {v}: use 1 to 128 (nccl-tests' default is 16)"
                )));
            }
        }
        match self.device_implementation {
            Some(d) if d > 0 && register != Register::Symmetric => {
                return Err(usage(format!(
                    "-D/--device_implementation {d}: a device implementation needs symmetric registration; add -R 2"
                )))
            }
            Some(d) if d > 0 => {
                return Err(usage(format!(
                    "-D/--device_implementation {d}: nccl-tests' device-API kernels are CUDA code fabricbench does \
                     not carry; use -D 0 (NCCL's own implementation, the default)"
                )))
            }
            _ => {}
        }
        Ok(NcclOptions {
            parallel_init,
            stream_null,
            register,
            cta_policy: self.cta_policy,
            device_implementation: self.device_implementation,
            device_cta_count: self.device_cta_count,
        })
    }
}

/// "NCCL 2.27" from a version code.
fn needs(code: i32) -> String {
    format!("NCCL {}.{}", code / 10000, code % 10000 / 100)
}

impl NcclOptions {
    /// The first GPU-only flag given, for the mpi backend's one-line refusal.
    pub fn gpu_only_flag(&self) -> Option<String> {
        let register = match self.register {
            Register::Off => None,
            Register::Local => Some(1),
            Register::Symmetric => Some(2),
        };
        [
            self.parallel_init
                .then(|| "-p/--parallel_init 1".to_string()),
            self.stream_null.then(|| "-y/--stream_null 1".to_string()),
            register.map(|r| format!("-R/--local_register {r}")),
            self.cta_policy.map(|x| format!("-x/--cta_policy {x}")),
            self.device_implementation
                .map(|d| format!("-D/--device_implementation {d}")),
            self.device_cta_count
                .map(|v| format!("-V/--device_cta_count {v}")),
        ]
        .into_iter()
        .flatten()
        .next()
    }

    /// Checks the flags against the NCCL that loaded (`version`: NCCL_VERSION_CODE,
    /// `name`: "NCCL 2.21.5"); returns the options to use and the notes to print.
    /// -R 2 before 2.27 falls back to local registration with a note, as nccl-tests does.
    pub fn against(
        &self,
        version: i32,
        name: &str,
    ) -> Result<(NcclOptions, Vec<String>), UsageError> {
        let mut notes = Vec::new();
        let mut options = self.clone();
        let refuse = |flag: String, code: i32, what: &str| {
            Err(usage(format!(
                "{flag}: {what} needs {} or newer, but this is {name}",
                needs(code)
            )))
        };
        if options.register == Register::Symmetric && version < WINDOW_VERSION {
            notes.push(format!(
                "-R 2 (symmetric) is not supported before NCCL 2.27 ({name}): defaulting to local registration, as nccl-tests does"
            ));
            options.register = Register::Local;
        }
        if options.register != Register::Off && version < REGISTER_VERSION {
            return refuse(
                "-R/--local_register 1".into(),
                REGISTER_VERSION,
                "ncclMemAlloc and ncclCommRegister",
            );
        }
        if let Some(x) = options.cta_policy {
            let code = if x >= 2 {
                CTA_POLICY_ZERO_VERSION
            } else {
                CTA_POLICY_VERSION
            };
            if version < code {
                return refuse(
                    format!("-x/--cta_policy {x}"),
                    code,
                    "ncclConfig_t.CTAPolicy",
                );
            }
        }
        let device_api = [
            ("-D/--device_implementation", options.device_implementation),
            ("-V/--device_cta_count", options.device_cta_count),
        ];
        for (flag, value) in device_api {
            if let Some(v) = value.filter(|_| version < DEVICE_API_VERSION) {
                return refuse(format!("{flag} {v}"), DEVICE_API_VERSION, "the device API");
            }
        }
        Ok((options, notes))
    }

    /// The header lines that say how the communicators and buffers were set up.
    pub fn describe(&self, version: i32) -> Vec<String> {
        let config = if version >= CONFIG_VERSION {
            let mut set: Vec<String> = Vec::new();
            if let Some(x) = self.cta_policy {
                set.push(format!("CTAPolicy={}", CTA_POLICY_NAMES[x as usize]));
            }
            if version >= NVLINK_SCHED_VERSION {
                set.push("nvlinkCentricSched=1".into());
            }
            let set = match set.is_empty() {
                true => "nothing set".to_string(),
                false => set.join(", "),
            };
            format!(
                "Communicators: ncclCommInitRankConfig, config as nccl-tests sets it ({set}; the rest \
                 NCCL_CONFIG_UNDEF, so NCCL_COMM_BLOCKING, NCCL_CGA_CLUSTER_SIZE, ... apply)"
            )
        } else {
            "Communicators: ncclCommInitRank (NCCL < 2.14 has no ncclCommInitRankConfig)"
                .to_string()
        };
        let init = match self.parallel_init {
            true => ", one thread per GPU (-p 1)",
            false => "",
        };
        let buffers = match self.register {
            Register::Off => "Buffers: cuMemAlloc, not registered (-R 0)",
            Register::Local => "Buffers: ncclMemAlloc, registered with ncclCommRegister (-R 1)",
            Register::Symmetric => {
                "Buffers: ncclMemAlloc, registered as symmetric windows (ncclCommWindowRegister, -R 2)"
            }
        };
        let stream = match self.stream_null {
            true => "Streams: the NULL stream (-y 1)",
            false => "Streams: one non-blocking stream per GPU",
        };
        vec![
            format!("{config}{init}"),
            buffers.to_string(),
            stream.to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: NcclFlags,
    }

    fn options(args: &[&str]) -> Result<NcclOptions, String> {
        let mut argv = vec!["x"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        cli.flags.options().map_err(|e| e.0)
    }

    #[test]
    fn defaults_are_nccl_tests_defaults() {
        let o = options(&[]).unwrap();
        assert_eq!(o, NcclOptions::default());
        assert_eq!(o.gpu_only_flag(), None);
        let o = options(&[
            "-p", "1", "-y", "1", "-R", "2", "-x", "1", "-D", "0", "-V", "16",
        ])
        .unwrap();
        assert!(o.parallel_init && o.stream_null);
        assert_eq!((o.register, o.cta_policy), (Register::Symmetric, Some(1)));
        assert_eq!(o.gpu_only_flag().as_deref(), Some("-p/--parallel_init 1"));
        assert_eq!(
            options(&["--local_register", "1"])
                .unwrap()
                .gpu_only_flag()
                .as_deref(),
            Some("-R/--local_register 1")
        );
    }

    #[test]
    fn refusals_are_one_line_naming_the_flag() {
        for (args, expected) in [
            (&["-t", "2"][..], "-t/--nthreads 2: fabricbench drives a process's GPUs from one thread"),
            (&["-p", "2"], "-p/--parallel_init 2: use 0 or 1"),
            (&["-y", "3"], "-y/--stream_null 3: use 0 or 1"),
            (&["-R", "3"], "-R/--local_register 3: use 0 (none), 1"),
            (&["-x", "3"], "-x/--cta_policy 3: use 0 (NCCL_CTA_POLICY_DEFAULT)"),
            (&["-V", "0"], "-V/--device_cta_count 0: use 1 to 128"),
            (&["-V", "129"], "-V/--device_cta_count 129: use 1 to 128"),
            (&["-D", "1"], "-D/--device_implementation 1: a device implementation needs symmetric registration; add -R 2"),
            (&["-D", "1", "-R", "2"], "-D/--device_implementation 1: nccl-tests' device-API kernels"),
        ] {
            let e = options(args).unwrap_err();
            assert!(e.starts_with(expected), "{args:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        assert!(options(&["-t", "2"]).unwrap_err().contains("use -g 2"));
        assert!(options(&["-t", "0"]).is_err());
        assert!(options(&["-t", "1"]).is_ok());
    }

    #[test]
    fn library_versions_gate_the_flags() {
        let o = options(&["-R", "2"]).unwrap();
        let (used, notes) = o.against(2_21_05, "NCCL 2.21.5").unwrap();
        assert_eq!(used.register, Register::Local);
        assert!(notes[0].starts_with("-R 2 (symmetric) is not supported before NCCL 2.27"));
        let (used, notes) = o.against(2_27_03, "NCCL 2.27.3").unwrap();
        assert_eq!((used.register, notes.len()), (Register::Symmetric, 0));
        let e = options(&["-R", "1"])
            .unwrap()
            .against(2_18_03, "NCCL 2.18.3")
            .unwrap_err()
            .0;
        assert_eq!(
            e,
            "-R/--local_register 1: ncclMemAlloc and ncclCommRegister needs NCCL 2.19 or newer, but this is NCCL 2.18.3"
        );
        let e = options(&["-x", "2"])
            .unwrap()
            .against(2_27_03, "NCCL 2.27.3")
            .unwrap_err()
            .0;
        assert!(
            e.starts_with("-x/--cta_policy 2: ncclConfig_t.CTAPolicy needs NCCL 2.28"),
            "{e}"
        );
        assert!(options(&["-x", "1"]).unwrap().against(2_27_03, "x").is_ok());
        let e = options(&["-V", "32"])
            .unwrap()
            .against(2_27_03, "NCCL 2.27.3")
            .unwrap_err()
            .0;
        assert!(
            e.starts_with("-V/--device_cta_count 32: the device API needs NCCL 2.28 or newer"),
            "{e}"
        );
        assert!(options(&["-D", "0"])
            .unwrap()
            .against(2_26_02, "NCCL 2.26.2")
            .is_err());
        assert!(options(&["-D", "0"])
            .unwrap()
            .against(2_28_03, "NCCL 2.28.3")
            .is_ok());
    }

    #[test]
    fn header_lines_say_what_was_set() {
        let o = options(&["-x", "1", "-R", "1", "-y", "1"]).unwrap();
        let lines = o.describe(2_28_03);
        assert!(lines[0].contains("ncclCommInitRankConfig"), "{}", lines[0]);
        assert!(
            lines[0].contains("CTAPolicy=EFFICIENCY, nvlinkCentricSched=1"),
            "{}",
            lines[0]
        );
        assert!(lines[1].contains("ncclCommRegister"));
        assert!(lines[2].contains("NULL stream"));
        assert!(NcclOptions::default().describe(2_13_04)[0].contains("ncclCommInitRank ("));
        assert!(NcclOptions::default().describe(2_21_05)[0].contains("(nothing set;"));
    }
}
