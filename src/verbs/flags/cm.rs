//! perftest's rdma_cm flags (-R, -z, --retry_count) and their checks: which
//! connections and starts they allow, as perftest 26.04 refuses them.

use crate::cli::whole;
use crate::job::usage;
use crate::job::UsageError;
use crate::verbs::flags::parity::Connection;
use clap::Args;

/// perftest's DEF_RETRY_COUNT.
pub const DEFAULT_RETRY_COUNT: u8 = 7;
/// The QP's transport retry count is a 3-bit field (the CM clamps larger values to 7).
const MAX_RETRY_COUNT: u32 = 7;

#[derive(Args, Debug, Clone, Default)]
pub struct CmArgs {
    /// Connect the QPs with rdma_cm (librdmacm) and run the test on them; the
    /// details are exchanged over rdma_cm too. HOST is the server's RDMA interface address
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,
    /// Exchange the connection details over an rdma_cm connection instead of
    /// TCP; the test QPs are connected as usual
    #[arg(short = 'z', long = "comm_rdma_cm")]
    pub comm_rdma_cm: bool,
    /// Transport retry count of the QPs connected through rdma_cm (-R/-z), 0 to 7
    #[arg(long = "retry_count", value_parser = whole::<u32>(0), allow_hyphen_values = true)]
    pub retry_count: Option<u32>,
}

/// How rdma_cm takes part in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CmPlan {
    /// -R: the test QPs are connected through rdma_cm.
    pub connect_qps: bool,
    /// -R or -z: the details travel over an rdma_cm connection, not TCP.
    pub exchange: bool,
    /// --retry_count: the transport (and, with -R, RNR) retry count of those QPs.
    pub retry_count: u8,
}

impl CmArgs {
    /// The rdma_cm plan for `connection`; `all_pairs`: --all-pairs was given.
    pub fn plan(&self, connection: Connection, all_pairs: bool) -> Result<CmPlan, UsageError> {
        let flag = if self.rdma_cm {
            "-R/--rdma_cm"
        } else {
            "-z/--comm_rdma_cm"
        };
        let exchange = self.rdma_cm || self.comm_rdma_cm;
        let retry_count = match self.retry_count {
            Some(n) if n > MAX_RETRY_COUNT => {
                return Err(usage(format!(
                    "--retry_count {n}: the QP retry count is a 3-bit field, 0 to {MAX_RETRY_COUNT} (default {DEFAULT_RETRY_COUNT}, as perftest)"
                )))
            }
            Some(_) if !exchange => {
                return Err(usage(
                    "--retry_count: only QPs connected through rdma_cm use it; add -R (or -z), or drop --retry_count",
                ))
            }
            Some(n) => n as u8,
            None => DEFAULT_RETRY_COUNT,
        };
        if exchange && all_pairs {
            return Err(usage(format!(
                "{flag}: --all-pairs connects its pairs through MPI; drop {flag}"
            )));
        }
        if self.rdma_cm {
            // perftest's own refusals (perftest_parameters.c), then ours.
            let why = match connection {
                // UD: through rdma_cm's UDP port space (cm_ud.rs), as perftest.
                Connection::Rc | Connection::Ud => None,
                Connection::Uc => Some("UC is not supported in librdmacm (as perftest); use -c RC"),
                Connection::Xrc => Some("XRC does not support rdma_cm (as perftest); drop -c XRC"),
                Connection::Dc => Some("DC does not support rdma_cm (as perftest); drop -c DC"),
                Connection::Srd => Some("SRD does not support rdma_cm (as perftest); drop -c SRD"),
            };
            if let Some(why) = why {
                return Err(usage(format!("-R/--rdma_cm: {why}")));
            }
        }
        Ok(CmPlan {
            connect_qps: self.rdma_cm,
            exchange,
            retry_count,
        })
    }
}

impl CmPlan {
    /// What both sides must share: -R (a -z mismatch cannot even connect).
    pub fn settings(&self) -> Vec<(String, String)> {
        vec![("-R/--rdma_cm".into(), self.connect_qps.to_string())]
    }
}

/// The refusal of rdma_cm under mpirun: perftest has no such start, and the
/// pairs find each other through MPI there.
pub fn check_launch(plan: &CmPlan, mpi_pairs: bool) -> Result<(), UsageError> {
    if plan.exchange && mpi_pairs {
        let flag = if plan.connect_qps {
            "-R/--rdma_cm"
        } else {
            "-z/--comm_rdma_cm"
        };
        return Err(usage(format!(
            "{flag}: under mpirun the pairs exchange their details over MPI; start the server and the client without mpirun (as perftest), or drop {flag}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        cm: CmArgs,
    }

    fn plan(args: &[&str], connection: Connection) -> Result<CmPlan, String> {
        let cli = Cli::try_parse_from(std::iter::once("ib_write_bw").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.cm.plan(connection, false).map_err(|e| e.0)
    }

    #[test]
    fn defaults_and_flags() {
        assert_eq!(
            plan(&[], Connection::Rc).unwrap(),
            CmPlan {
                connect_qps: false,
                exchange: false,
                retry_count: 7
            }
        );
        let r = plan(&["-R", "--retry_count", "3"], Connection::Rc).unwrap();
        assert!(r.connect_qps && r.exchange);
        assert_eq!(r.retry_count, 3);
        let z = plan(&["--comm_rdma_cm"], Connection::Ud).unwrap();
        assert!(!z.connect_qps && z.exchange);
        assert_eq!(
            plan(&["--rdma_cm", "--retry_count=0"], Connection::Rc)
                .unwrap()
                .retry_count,
            0
        );
    }

    #[test]
    fn refusals_name_the_flag_and_the_fix() {
        let e = plan(&["-R", "--retry_count", "8"], Connection::Rc).unwrap_err();
        assert!(
            e.starts_with("--retry_count 8: the QP retry count is a 3-bit field, 0 to 7"),
            "{e}"
        );
        let e = plan(&["--retry_count", "2"], Connection::Rc).unwrap_err();
        assert!(e.contains("add -R (or -z), or drop --retry_count"), "{e}");
        let e = plan(&["-R"], Connection::Uc).unwrap_err();
        assert_eq!(
            e,
            "-R/--rdma_cm: UC is not supported in librdmacm (as perftest); use -c RC"
        );
        // perftest connects UD QPs through rdma_cm's UDP port space: so do we.
        assert!(plan(&["-R"], Connection::Ud).unwrap().connect_qps);
        for (c, name) in [
            (Connection::Xrc, "XRC"),
            (Connection::Dc, "DC"),
            (Connection::Srd, "SRD"),
        ] {
            let e = plan(&["-R"], c).unwrap_err();
            assert!(
                e.starts_with(&format!("-R/--rdma_cm: {name} does not support rdma_cm")),
                "{e}"
            );
        }
        // A negative count is clap's, naming the flag.
        let e = plan(&["-R", "--retry_count", "-1"], Connection::Rc).unwrap_err();
        assert!(e.contains("--retry_count"), "{e}");
        let cli = Cli::try_parse_from(["ib_write_bw", "-z"]).unwrap();
        let e = cli.cm.plan(Connection::Rc, true).unwrap_err().0;
        assert_eq!(
            e,
            "-z/--comm_rdma_cm: --all-pairs connects its pairs through MPI; drop -z/--comm_rdma_cm"
        );
    }

    #[test]
    fn both_sides_must_agree_on_rdma_cm_qps() {
        use crate::verbs::flags::parse;
        use crate::verbs::{Benchmark, Test, Verb};
        let bench = Benchmark::new(Verb::Write, Test::Bw);
        let settings = |args: &[&str]| {
            parse(
                bench,
                std::iter::once("ib_write_bw").chain(args.iter().copied()),
            )
            .unwrap()
            .symmetric_settings()
        };
        assert_ne!(settings(&["-R"]), settings(&[]));
        // The retry count is each side's own (as perftest).
        assert_eq!(settings(&["-R"]), settings(&["-R", "--retry_count", "2"]));
    }

    #[test]
    fn mpirun_is_refused_with_the_reason() {
        let r = plan(&["-R"], Connection::Rc).unwrap();
        let e = check_launch(&r, true).unwrap_err().0;
        assert!(
            e.starts_with("-R/--rdma_cm: under mpirun the pairs exchange their details over MPI"),
            "{e}"
        );
        assert!(check_launch(&r, false).is_ok());
        assert!(check_launch(&CmPlan::default(), true).is_ok());
    }
}
