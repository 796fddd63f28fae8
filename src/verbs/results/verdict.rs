//! perftest's verifier limits of the bandwidth tests: `-w/--limit_bw` (the
//! least BW average, in the table's unit) and `-y/--limit_msgrate` (the least
//! MsgRate, Mpps). perftest passes a run when any size meets the limit; here
//! every pair's line of every size must, and the run exits 1 naming the first
//! that did not (a sum over pairs is not judged: each pair is).

use crate::cli;
use crate::job::UsageError;
use crate::report::verbs::{Figures, Line};

const MIB: f64 = 1024.0 * 1024.0;
/// perftest's Gb/s: 125e6 bytes per second.
const GBIT_BYTES: f64 = 125e6;

/// The limits of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Limits {
    pub bw: Option<f64>,
    pub msgrate: Option<f64>,
    /// --report_gbits: -w is in Gb/s, else MiB/s.
    pub gbits: bool,
}

impl Limits {
    /// Checks -w and -y; `bw_test`: a bandwidth test (latency tests have neither figure).
    pub fn new(
        bw: Option<f64>,
        msgrate: Option<f64>,
        gbits: bool,
        bw_test: bool,
    ) -> Result<Limits, UsageError> {
        if !bw_test && (bw.is_some() || msgrate.is_some()) {
            let flag = if bw.is_some() {
                "-w/--limit_bw"
            } else {
                "-y/--limit_msgrate"
            };
            return Err(UsageError(format!(
                "{flag}: latency tests have no BW average or MsgRate to hold to a limit; drop {flag}"
            )));
        }
        // The values themselves were checked by their flags' parsers.
        Ok(Limits { bw, msgrate, gbits })
    }

    fn unit(self) -> &'static str {
        if self.gbits {
            "Gb/s"
        } else {
            "MiB/s"
        }
    }

    /// The first line of `lines` below a limit, as one line naming the flag.
    pub fn judge(&self, lines: &[Line]) -> Option<String> {
        for line in lines.iter().filter(|l| l.label.as_deref() != Some("sum")) {
            let Figures::Bw {
                average,
                msgs_per_s,
                ..
            } = &line.figures
            else {
                continue;
            };
            let pair = line
                .label
                .as_ref()
                .map_or(String::new(), |p| format!(" (pair {p})"));
            let shown = if self.gbits {
                average / GBIT_BYTES
            } else {
                average / MIB
            };
            // A figure that is no number meets no limit (NaN compares false).
            if let Some(limit) = self.bw.filter(|&l| shown.is_nan() || shown < l) {
                return Some(format!(
                    "-w/--limit_bw {}: {} B{pair} averaged {shown:.2} {}, below the limit",
                    cli::shown(limit),
                    line.size,
                    self.unit()
                ));
            }
            let mpps = msgs_per_s / 1e6;
            if let Some(limit) = self.msgrate.filter(|&l| mpps.is_nan() || mpps < l) {
                return Some(format!(
                    "-y/--limit_msgrate {}: {} B{pair} ran at {mpps:.6} Mpps, below the limit",
                    cli::shown(limit),
                    line.size
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::verbs::tests::bw_line;

    #[test]
    fn every_pair_line_must_meet_the_limits() {
        // bw_line: 3125 MiB/s, 0.05 Mpps.
        let lines = vec![bw_line(None, None)];
        let ok = Limits::new(Some(3000.0), Some(0.04), false, true).unwrap();
        assert_eq!(ok.judge(&lines), None);
        let e = Limits::new(Some(4000.0), None, false, true)
            .unwrap()
            .judge(&lines)
            .unwrap();
        assert_eq!(
            e,
            "-w/--limit_bw 4000: 65536 B averaged 3125.00 MiB/s, below the limit"
        );
        // 3125 MiB/s = 26.21 Gb/s.
        let e = Limits::new(Some(30.0), None, true, true)
            .unwrap()
            .judge(&lines)
            .unwrap();
        assert!(e.contains("averaged 26.21 Gb/s"), "{e}");
        let e = Limits::new(None, Some(0.06), false, true)
            .unwrap()
            .judge(&lines)
            .unwrap();
        assert_eq!(
            e,
            "-y/--limit_msgrate 0.06: 65536 B ran at 0.050000 Mpps, below the limit"
        );
        // A sum over pairs is not judged.
        let sum = vec![bw_line(Some("sum"), None)];
        assert_eq!(
            Limits::new(Some(1e9), None, false, true)
                .unwrap()
                .judge(&sum),
            None
        );
        let e = Limits::new(Some(1e9), None, false, true)
            .unwrap()
            .judge(&[bw_line(Some("1"), None)]);
        assert!(e.unwrap().contains("65536 B (pair 1) averaged"));
        // A figure that is no number meets no limit.
        let mut nan = bw_line(None, None);
        if let Figures::Bw {
            average,
            msgs_per_s,
            ..
        } = &mut nan.figures
        {
            (*average, *msgs_per_s) = (f64::NAN, f64::NAN);
        }
        let e = ok.judge(std::slice::from_ref(&nan)).unwrap();
        assert_eq!(
            e,
            "-w/--limit_bw 3000: 65536 B averaged NaN MiB/s, below the limit"
        );
        let rate = Limits::new(None, Some(0.04), false, true).unwrap();
        assert!(rate.judge(&[nan]).is_some());
    }

    #[test]
    fn bad_limits_are_usage_errors() {
        let e = Limits::new(None, Some(1.0), false, false).unwrap_err().0;
        assert!(
            e.starts_with("-y/--limit_msgrate: latency tests have no"),
            "{e}"
        );
        assert_eq!(
            Limits::new(None, None, false, false).unwrap(),
            Limits::default()
        );
    }
}
