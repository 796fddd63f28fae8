//! perftest's flags beyond RC write/read/send: the atomic type (-A), the
//! reads and atomics in flight (-o) and the connection type (-c), as a
//! flattened group of the verbs command line, and their checks (the device's
//! capabilities, UD's MTU bound) once the device and the path are known.

use crate::cli::{real, whole, Rule};
use crate::faults;
use crate::job::usage;
use crate::job::UsageError;
use crate::verbs::device::source_text;
use crate::verbs::device::Port;
use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
use crate::verbs::flags::duration::validation_refusal;
use crate::verbs::results::verdict::Limits;
use anyhow::{anyhow, bail};

/// perftest's atomic tests move one 8-byte word (DEF_SIZE_ATOMIC).
pub const ATOMIC_SIZE: u64 = 8;
/// perftest's operands: fetch-and-add adds 1, compare-and-swap swaps in 0.
pub const ATOMIC_ADD_VALUE: u64 = 1;
pub const ATOMIC_SWAP_VALUE: u64 = 0;
/// libibverbs' IBV_DEVICE_XRC capability bit and IBV_ATOMIC_NONE.
const IBV_DEVICE_XRC: u32 = 1 << 20;
const IBV_ATOMIC_NONE: u32 = 0;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ParityArgs {
    /// Atomic operation
    #[arg(short = 'A', long = "atomic_type", value_name = "TYPE")]
    pub atomic_type: Option<String>,
    /// Reads or atomics in flight per QP (read and atomic tests; default: the most both devices allow)
    #[arg(short = 'o', long = "outs", value_parser = whole::<u32>(1), allow_hyphen_values = true)]
    pub outs: Option<u32>,
    /// Connection type (transport service) of the queue pairs
    #[arg(short = 'c', long = "connection", value_name = "TYPE")]
    pub connection: Option<String>,
    /// Send tests and write/read bandwidth tests (RC): fill each message with a pattern of its iteration and check it where it lands; the table counts the wrong ones
    #[arg(long = "data_validation")]
    pub data_validation: bool,
    /// Write, read and atomic bandwidth tests: run -t signalled requests per QP before the timed run (perftest's default since 6.x is none)
    #[arg(long = "perform_warm_up")]
    pub perform_warm_up: bool,
    /// Bandwidth tests: the least BW average every line must reach, in the table's unit (MiB/s, Gb/s with --report_gbits); below it the run exits 1
    #[arg(short = 'w', long = "limit_bw", value_parser = real(LIMIT_BW), allow_hyphen_values = true)]
    pub limit_bw: Option<f64>,
    /// Bandwidth tests: the least MsgRate (Mpps) every line must reach; below it the run exits 1
    #[arg(short = 'y', long = "limit_msgrate", value_parser = real(LIMIT_MSGRATE), allow_hyphen_values = true)]
    pub limit_msgrate: Option<f64>,
}

/// -w: more than 0 (a limit of 0 holds every line to nothing).
const LIMIT_BW: Rule = Rule {
    least: 0.0,
    above: true,
    most: f64::INFINITY,
    what: "the least BW average a line must reach (MiB/s, Gb/s with --report_gbits)",
    example: "1000",
};

/// -y: more than 0.
const LIMIT_MSGRATE: Rule = Rule {
    least: 0.0,
    above: true,
    most: f64::INFINITY,
    what: "the least MsgRate in Mpps a line must reach",
    example: "0.5",
};

/// -A: the atomic operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AtomicOp {
    CmpAndSwap,
    #[default]
    FetchAndAdd,
}

impl AtomicOp {
    /// perftest's spelling (atomicTypesStr).
    pub fn name(self) -> &'static str {
        match self {
            AtomicOp::CmpAndSwap => "CMP_AND_SWAP",
            AtomicOp::FetchAndAdd => "FETCH_AND_ADD",
        }
    }
}

/// -c: the transport service of the queue pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Connection {
    #[default]
    Rc,
    Uc,
    Ud,
    /// Known to perftest, run only where the device has them: refused with
    /// the capability the device lacks.
    Xrc,
    Dc,
    Srd,
}

impl Connection {
    pub const ALL: [Connection; 6] = [
        Connection::Rc,
        Connection::Uc,
        Connection::Ud,
        Connection::Xrc,
        Connection::Dc,
        Connection::Srd,
    ];

    /// perftest's spelling (connStr).
    pub fn name(self) -> &'static str {
        match self {
            Connection::Rc => "RC",
            Connection::Uc => "UC",
            Connection::Ud => "UD",
            Connection::Xrc => "XRC",
            Connection::Dc => "DC",
            Connection::Srd => "SRD",
        }
    }

    fn parse(text: &str) -> Option<Connection> {
        Connection::ALL.into_iter().find(|c| c.name() == text)
    }
}

/// The validated flags of this group.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Options {
    pub atomic: AtomicOp,
    /// -o as given (capped by the devices when connecting).
    pub outs: Option<u32>,
    pub connection: Connection,
    /// --data_validation.
    pub validate: bool,
    /// The fault hook: the message (of every size) the sender corrupts.
    pub corrupt: Option<u64>,
    /// -w, -y.
    pub limits: Limits,
    /// --perform_warm_up.
    pub warm_up: bool,
}

impl ParityArgs {
    /// The options of `bench`; `gpu`: --use_cuda was given; `gbits`: --report_gbits.
    pub fn options(&self, bench: Benchmark, gpu: bool, gbits: bool) -> Result<Options, UsageError> {
        let program = bench.program();
        if self.perform_warm_up && (bench.test != Test::Bw || bench.verb == Verb::Send) {
            return Err(usage(format!(
                "--perform_warm_up: only write, read and atomic bandwidth tests warm up (as perftest); drop it from {program}"
            )));
        }
        if self.data_validation && gpu {
            return Err(usage(
                "--data_validation: the receiver checks payloads from the CPU, which cannot read GPU memory; drop --use_cuda",
            ));
        }
        let atomic = match self.atomic_type.as_deref() {
            None => AtomicOp::default(),
            Some(t) if bench.verb != Verb::Atomic => {
                return Err(usage(format!(
                    "-A/--atomic_type {t}: {program} runs no atomics; use ib_atomic_bw or ib_atomic_lat, or drop -A"
                )))
            }
            Some("CMP_AND_SWAP") => AtomicOp::CmpAndSwap,
            Some("FETCH_AND_ADD") => AtomicOp::FetchAndAdd,
            Some(t) => {
                return Err(usage(format!(
                    "-A/--atomic_type '{t}': use CMP_AND_SWAP or FETCH_AND_ADD"
                )))
            }
        };
        if let Some(o) = self.outs {
            if !bench.verb.fetches() {
                return Err(usage(format!(
                    "-o/--outs {o}: only read and atomic tests have requests outstanding at the responder; drop -o"
                )));
            }
        }
        let connection = match self.connection.as_deref() {
            None => Connection::Rc,
            Some(text) => Connection::parse(text).ok_or_else(|| {
                usage(format!(
                    "-c/--connection '{text}': use RC, UC or UD (perftest's XRC, DC, SRD where the device has them)"
                ))
            })?,
        };
        if let Some(refusal) =
            validation_refusal(bench, connection == Connection::Rc).filter(|_| self.data_validation)
        {
            return Err(usage(refusal));
        }
        match (connection, bench.verb) {
            (Connection::Uc, v) if v.fetches() => {
                return Err(usage(format!(
                    "-c/--connection UC: {program} needs RC (UC carries no RDMA reads or atomics); use -c RC"
                )))
            }
            (Connection::Ud, v) if v != Verb::Send => {
                return Err(usage(format!(
                    "-c/--connection UD: {program} needs a connection (UD carries sends only); use ib_send_{} -c UD or -c RC",
                    match bench.test {
                        Test::Bw => "bw",
                        Test::Lat => "lat",
                    }
                )))
            }
            _ => {}
        }
        Ok(Options {
            atomic,
            outs: self.outs,
            connection,
            validate: self.data_validation,
            corrupt: faults::injected().verbs_corrupted_message()?,
            warm_up: self.perform_warm_up,
            limits: Limits::new(
                self.limit_bw,
                self.limit_msgrate,
                gbits,
                bench.test == Test::Bw,
            )?,
        })
    }
}

/// The sizes of an atomic test: 8 bytes, the only size perftest allows.
pub fn atomic_sizes(size: Option<u64>, all: bool, program: &str) -> Result<Vec<u64>, UsageError> {
    if all {
        return Err(usage(format!(
            "-a/--all: {program} moves one {ATOMIC_SIZE}-byte word; drop -a"
        )));
    }
    match size {
        Some(s) if s != ATOMIC_SIZE => Err(usage(format!(
            "-s/--size {s}: {program} moves one {ATOMIC_SIZE}-byte word; drop -s"
        ))),
        _ => Ok(vec![ATOMIC_SIZE]),
    }
}

impl Options {
    /// The settings both sides must share (perftest's SYMMETRIC flags).
    pub fn settings(&self, bench: Benchmark) -> Vec<(String, String)> {
        let mut out = vec![(
            "-c/--connection".to_string(),
            self.connection.name().to_string(),
        )];
        if bench.verb == Verb::Atomic {
            out.push(("-A/--atomic_type".into(), self.atomic.name().into()));
        }
        out.push(("--data_validation".into(), self.validate.to_string()));
        out
    }

    /// The reads or atomics in flight: -o, at most what both devices allow.
    pub fn out_reads(&self, allowed: u32) -> u8 {
        self.outs
            .map_or(allowed, |o| o.min(allowed))
            .min(u8::MAX as u32) as u8
    }

    /// perftest's warning when -o asks for more than the devices allow.
    pub fn outs_warning(&self, used: u8) -> Option<String> {
        self.outs.filter(|&o| o > used as u32).map(|o| {
            format!("-o/--outs {o}: above the most both devices allow; {used} outstanding instead")
        })
    }
}

/// Checks what this side's device must have for the plan: the connection
/// type (XRC, DC, SRD need capabilities this build does not drive) and, for
/// the atomic tests, atomics.
pub fn check_device(bench: Benchmark, options: &Options, port: &Port) -> anyhow::Result<()> {
    let attr = port.ctx.query_device().map_err(|e| {
        anyhow!(
            "cannot query RDMA device {}: {}",
            port.device,
            source_text(&e)
        )
    })?;
    let dev = format!("{} port {}", port.device, port.port);
    match options.connection {
        Connection::Xrc => {
            let flags = attr.attr.orig_attr.device_cap_flags;
            if flags & IBV_DEVICE_XRC == 0 {
                bail!(
                    "-c/--connection XRC: {dev} lacks the XRC capability (IBV_DEVICE_XRC not in its capability flags 0x{flags:x}); use -c RC"
                );
            }
            bail!("-c/--connection XRC: {dev} has XRC, but fabricbench runs RC, UC and UD only; use -c RC or perftest");
        }
        Connection::Dc => bail!(
            "-c/--connection DC: {dev} lacks the DC transport (an mlx5 DCT/DCI capability through mlx5dv; this device reports none to libibverbs); use -c RC"
        ),
        Connection::Srd => bail!(
            "-c/--connection SRD: {dev} lacks the SRD transport (an EFA device's efadv capability); use -c RC or UD"
        ),
        Connection::Rc | Connection::Uc | Connection::Ud => {}
    }
    if bench.verb == Verb::Atomic && attr.attr.orig_attr.atomic_cap == IBV_ATOMIC_NONE {
        bail!(
            "{}: {dev} reports no atomics (atomic_cap IBV_ATOMIC_NONE); run it on a device with IBV_ATOMIC_HCA or IBV_ATOMIC_GLOB",
            bench.program()
        );
    }
    Ok(())
}

/// UD carries one message per MTU: the sizes above the path MTU are refused
/// (-s) or left out (-a, as perftest runs up to the MTU).
pub fn ud_sizes(sizes: &[u64], all: bool, mtu: u32, path: &str) -> anyhow::Result<Vec<u64>> {
    let fit: Vec<u64> = sizes.iter().copied().filter(|&s| s <= mtu as u64).collect();
    if !all && fit.len() != sizes.len() {
        bail!(
            "-s/--size {}: UD messages are at most the path MTU, {mtu} B ({path}); use -s {mtu} or less",
            sizes[0]
        );
    }
    Ok(fit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::flags::parse;

    fn err(verb: Verb, test: Test, args: &[&str]) -> String {
        let bench = Benchmark::new(verb, test);
        let argv = std::iter::once(bench.program()).chain(args.iter().copied());
        parse(bench, argv).unwrap_err().0
    }

    fn options(verb: Verb, test: Test, args: &[&str]) -> Options {
        let bench = Benchmark::new(verb, test);
        let argv = std::iter::once(bench.program()).chain(args.iter().copied());
        parse(bench, argv).unwrap().options
    }

    #[test]
    fn atomics_as_perftest() {
        let o = options(Verb::Atomic, Test::Bw, &[]);
        assert_eq!(
            (o.atomic, o.connection, o.outs),
            (AtomicOp::FetchAndAdd, Connection::Rc, None)
        );
        let o = options(Verb::Atomic, Test::Lat, &["-A", "CMP_AND_SWAP", "-o", "4"]);
        assert_eq!((o.atomic, o.outs), (AtomicOp::CmpAndSwap, Some(4)));
        assert_eq!(o.out_reads(16), 4);
        assert_eq!(o.out_reads(2), 2);
        assert_eq!(
            o.outs_warning(2).unwrap(),
            "-o/--outs 4: above the most both devices allow; 2 outstanding instead"
        );
        assert_eq!(o.outs_warning(4), None);
        let bench = Benchmark::new(Verb::Atomic, Test::Bw);
        let p = parse(bench, ["ib_atomic_bw"]).unwrap();
        assert_eq!(p.sizes, vec![8]);
        assert!(p
            .symmetric_settings()
            .contains(&("-A/--atomic_type".into(), "FETCH_AND_ADD".into())));
    }

    #[test]
    fn mistakes_are_one_line_naming_the_flag() {
        for (verb, test, args, want) in [
            (
                Verb::Write,
                Test::Bw,
                vec!["-A", "FETCH_AND_ADD"],
                "-A/--atomic_type FETCH_AND_ADD: ib_write_bw runs no atomics",
            ),
            (
                Verb::Atomic,
                Test::Bw,
                vec!["-A", "ADD"],
                "-A/--atomic_type ADD: use FETCH_AND_ADD or CMP_AND_SWAP",
            ),
            (
                Verb::Atomic,
                Test::Bw,
                vec!["-s", "16"],
                "-s/--size 16: ib_atomic_bw moves one 8-byte word",
            ),
            (
                Verb::Atomic,
                Test::Lat,
                vec!["-a"],
                "-a/--all: ib_atomic_lat moves one 8-byte word",
            ),
            (
                Verb::Atomic,
                Test::Bw,
                vec!["-I", "8"],
                "-I/--inline_size 8",
            ),
            (
                Verb::Write,
                Test::Bw,
                vec!["-o", "4"],
                "-o/--outs 4: only read and atomic tests",
            ),
            (
                Verb::Read,
                Test::Bw,
                vec!["-c", "UC"],
                "-c/--connection UC: ib_read_bw needs RC",
            ),
            (
                Verb::Atomic,
                Test::Lat,
                vec!["-c", "UC"],
                "-c/--connection UC: ib_atomic_lat needs RC",
            ),
            (
                Verb::Write,
                Test::Lat,
                vec!["-c", "UD"],
                "-c/--connection UD: ib_write_lat needs a connection",
            ),
            (
                Verb::Write,
                Test::Bw,
                vec!["-c", "rc"],
                "-c/--connection rc: use RC or UC",
            ),
            (
                Verb::Send,
                Test::Bw,
                vec!["--perform_warm_up"],
                "--perform_warm_up: only write, read and atomic bandwidth tests",
            ),
            (
                Verb::Write,
                Test::Lat,
                vec!["--perform_warm_up"],
                "--perform_warm_up: only write, read and atomic bandwidth tests",
            ),
        ] {
            let e = err(verb, test, &args);
            assert!(e.starts_with(want), "{args:?}: {e}");
            assert_eq!(e.lines().count(), 1);
        }
        assert_eq!(
            options(Verb::Send, Test::Bw, &["-c", "UD"]).connection,
            Connection::Ud
        );
        assert_eq!(
            options(Verb::Write, Test::Lat, &["-c", "UC"]).connection,
            Connection::Uc
        );
        assert_eq!(
            options(Verb::Write, Test::Bw, &["-c", "XRC"]).connection,
            Connection::Xrc
        );
    }

    #[test]
    fn ud_sizes_stop_at_the_mtu() {
        assert_eq!(
            ud_sizes(&[2, 1024, 2048], true, 1024, "x").unwrap(),
            vec![2, 1024]
        );
        assert_eq!(ud_sizes(&[1024], false, 1024, "x").unwrap(), vec![1024]);
        let e = ud_sizes(&[4096], false, 1024, "rxe1 port 1 to rxe2 port 1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "-s/--size 4096: UD messages are at most the path MTU, 1024 B (rxe1 port 1 to rxe2 port 1); use -s 1024 or less"
        );
    }
}
