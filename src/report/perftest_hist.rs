//! perftest's `-U/--report-unsorted` and `-H/--report-histogram` output of a
//! latency size (print_report_lat): every sample in measured order, then the
//! sorted samples without the two largest, each block under "#, usec" as
//! "N, %g"; after either, perftest prints the rule and the column titles again
//! before the size's row.

use super::perftest::RESULT_LINE;

/// perftest drops the two largest samples from its sorted list (LAT_MEASURE_TAIL).
pub const DROPPED_TAIL: usize = 2;

/// Which blocks to print.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleDump {
    pub unsorted: bool,
    pub histogram: bool,
}

impl SampleDump {
    pub fn any(self) -> bool {
        self.unsorted || self.histogram
    }

    /// The lines perftest prints for one size, before its row: `samples_us` as
    /// measured (microseconds), `titles` the table's column titles.
    pub fn lines(self, samples_us: &[f64], titles: &str) -> Vec<String> {
        let mut out = Vec::new();
        if !self.any() {
            return out;
        }
        let block = |out: &mut Vec<String>, values: &[f64]| {
            out.push("#, usec".to_string());
            out.extend(
                values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| format!("{}, {}", i + 1, format_g(*v))),
            );
        };
        if self.unsorted {
            block(&mut out, samples_us);
        }
        if self.histogram {
            let mut sorted = samples_us.to_vec();
            sorted.sort_by(f64::total_cmp);
            sorted.truncate(sorted.len().saturating_sub(DROPPED_TAIL));
            block(&mut out, &sorted);
        }
        out.push(RESULT_LINE.to_string());
        out.push(titles.to_string());
        out
    }
}

/// C's printf "%g": 6 significant digits, trailing zeros dropped, the
/// exponent form below 1e-4 and from 1e6 on.
pub fn format_g(v: f64) -> String {
    const PRECISION: i32 = 6;
    if v == 0.0 || !v.is_finite() {
        return if v.is_nan() {
            "nan".into()
        } else if v.is_infinite() {
            if v > 0.0 { "inf" } else { "-inf" }.into()
        } else {
            "0".into()
        };
    }
    // The exponent after rounding to 6 digits, as %e would print it.
    let sci = format!("{:.*e}", (PRECISION - 1) as usize, v);
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    if !(-4..PRECISION).contains(&exp) {
        let mantissa = trim_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (PRECISION - 1 - exp).max(0) as usize;
        trim_zeros(&format!("{v:.decimals$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_g_as_c_prints_it() {
        // printf("%g") of each, from glibc.
        let cases = [
            (1.0, "1"),
            (1.5, "1.5"),
            (2.345678, "2.34568"),
            (12.3456789, "12.3457"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (0.1, "0.1"),
            (100.0, "100"),
            (0.0, "0"),
            (9.9999996, "10"),
            (999999.7, "1e+06"),
        ];
        for (v, c) in cases {
            assert_eq!(format_g(v), c, "{v}");
        }
    }

    const TITLES: &str = " #bytes #iterations    t_min[usec]";

    #[test]
    fn unsorted_then_sorted_without_the_tail_then_the_titles_again() {
        let samples = [3.25, 1.5, 9.0, 2.0, 7.125];
        let both = SampleDump {
            unsorted: true,
            histogram: true,
        };
        assert_eq!(
            both.lines(&samples, TITLES),
            [
                "#, usec",
                "1, 3.25",
                "2, 1.5",
                "3, 9",
                "4, 2",
                "5, 7.125",
                "#, usec",
                "1, 1.5",
                "2, 2",
                "3, 3.25",
                RESULT_LINE,
                TITLES,
            ]
        );
        let hist = SampleDump {
            unsorted: false,
            histogram: true,
        };
        assert_eq!(
            hist.lines(&samples, TITLES),
            ["#, usec", "1, 1.5", "2, 2", "3, 3.25", RESULT_LINE, TITLES]
        );
        assert!(SampleDump::default().lines(&samples, TITLES).is_empty());
    }
}
