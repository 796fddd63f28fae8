//! Number flags in the house style (see `parse_one_line`: the flag and what was
//! typed, as typed, then the reason): the reason never names a rule the value
//! already meets. A value past the largest is "too large" with the range; NaN,
//! inf, hex and nothing are "not a number"; 1.5 and 1e-300 are "not a whole
//! number"; 1e3 is asked for in digits (nccl-tests reads it as 1). A flag of
//! these needs `allow_hyphen_values`, or clap takes "-1" or "-inf" for a flag.

use anyhow::{anyhow, bail};

/// The whole-number types of flags, with their range.
pub trait Whole: TryFrom<i128> + Clone + Send + Sync + 'static {
    const MIN: i128;
    const MAX: i128;
}

macro_rules! whole_types {
    ($($t:ty),*) => {$(impl Whole for $t {
        const MIN: i128 = <$t>::MIN as i128;
        const MAX: i128 = <$t>::MAX as i128;
    })*};
}
whole_types!(u8, u16, u32, u64, usize, i64);

/// Why a text is no whole number of a type's range.
#[derive(Debug, PartialEq)]
enum NotWhole {
    NotANumber,
    TooSmall,
    TooLarge,
    Fraction,
    /// A whole number written otherwise than in digits (1e3, 2.0): this one.
    NotDigits(f64),
}

/// The whole number `text` is in digits (a sign allowed; -0 is 0) within
/// `min..=max`, or why it is not one.
fn whole_number(text: &str, min: i128, max: i128) -> Result<i128, NotWhole> {
    let t = text.trim();
    let (negative, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        let out_of_range = match negative {
            true => NotWhole::TooSmall,
            false => NotWhole::TooLarge,
        };
        let magnitude: i128 = digits.parse().map_err(|_| out_of_range)?;
        let n = if negative { -magnitude } else { magnitude };
        return match n {
            _ if n < min => Err(NotWhole::TooSmall),
            _ if n > max => Err(NotWhole::TooLarge),
            n => Ok(n),
        };
    }
    match finite(t) {
        None => Err(NotWhole::NotANumber),
        Some(v) if v < min as f64 => Err(NotWhole::TooSmall),
        Some(v) if v > max as f64 => Err(NotWhole::TooLarge),
        Some(v) if v.fract() != 0.0 => Err(NotWhole::Fraction),
        Some(v) => Err(NotWhole::NotDigits(v)),
    }
}

/// The number `text` writes, None where it writes none: NaN and the
/// infinities are no numbers, but 1e999999 is one too large for f64 (its
/// infinity keeps the sign, and the bounds judge it).
fn finite(text: &str) -> Option<f64> {
    let v = text.parse::<f64>().ok()?;
    let spelled = text.to_ascii_lowercase();
    (!v.is_nan() && !spelled.contains("inf")).then_some(v)
}

/// A whole-number flag value of type `T`; `least` is the smallest value the
/// flag takes, named in the messages: "-n/--iters -1: use a whole number >= 1",
/// "-n/--iters: 'x' is not a number; use a whole number >= 1", "-n/--iters
/// 1e300: too large; use a whole number from 1 to 18446744073709551615".
/// Values from the type's least to `least` pass, for the plan to say why they
/// do not do (its messages predate this parser).
pub fn whole<T: Whole>(
    least: impl Into<i128>,
) -> impl Fn(&str) -> anyhow::Result<T> + Clone + Send + Sync {
    let least = least.into();
    move |text: &str| {
        let range = format!("use a whole number from {least} to {}", T::MAX);
        let rule = match T::MAX >= i64::MAX as i128 {
            true => format!("use a whole number >= {least}"),
            false => range.clone(),
        };
        let n = whole_number(text, T::MIN, T::MAX).map_err(|why| match why {
            NotWhole::NotANumber => anyhow!("'{text}' is not a number; {rule}"),
            NotWhole::TooSmall => anyhow!(rule),
            NotWhole::TooLarge => anyhow!("too large; {range}"),
            NotWhole::Fraction => anyhow!("not a whole number; {rule}"),
            NotWhole::NotDigits(v) => anyhow!("write it in digits ({v:.0}); {rule}"),
        })?;
        T::try_from(n).map_err(|_| anyhow!("too large; {range}"))
    }
}

/// What a real-number value may be: from `least` (or, `above`, more than it)
/// to `most` (infinite: no bound), and how the fix names it ("give `what`,
/// <range>, e.g. `example`").
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    pub least: f64,
    pub above: bool,
    pub most: f64,
    pub what: &'static str,
    pub example: &'static str,
}

impl Rule {
    /// "give the rate in Gb/s, more than 0 and at most 10000, e.g. 400".
    fn fix(&self) -> String {
        let (least, most) = (shown(self.least), shown(self.most));
        let range = match (self.above, self.most.is_finite()) {
            (false, true) => format!("from {least} to {most}"),
            (false, false) => format!("at least {least}"),
            (true, false) => format!("more than {least}"),
            (true, true) => format!("more than {least} and at most {most}"),
        };
        format!("give {}, {range}, e.g. {}", self.what, self.example)
    }

    /// `v` where it keeps the rule, else why not (for a message that names
    /// the value first: "slow_fraction 3: too large; give ...").
    pub fn check(&self, v: f64) -> anyhow::Result<f64> {
        let from_below = v > self.least || (v == self.least && !self.above);
        match v {
            _ if v.is_nan() => bail!("not a number; {}", self.fix()),
            _ if v > self.most || v == f64::INFINITY => bail!("too large; {}", self.fix()),
            _ if !from_below => bail!("too small; {}", self.fix()),
            _ => Ok(v),
        }
    }
}

/// A real-number flag value that keeps `rule`. NaN and the infinities typed
/// are not numbers; a trailing '%' is allowed where `rule` is of a percentage.
pub fn real(rule: Rule) -> impl Fn(&str) -> anyhow::Result<f64> + Clone + Send + Sync {
    move |text: &str| {
        let number = match rule.what.contains("percentage") {
            true => text.trim().trim_end_matches('%'),
            false => text.trim(),
        };
        match finite(number) {
            None => bail!("'{text}' is not a number; {}", rule.fix()),
            Some(v) => rule.check(v),
        }
    }
}

/// A number for messages as a person writes it: "5", "0.25", "1e300",
/// "1.5e-7" (Display alone writes 1e300 as 301 digits).
pub fn shown(v: f64) -> String {
    let a = v.abs();
    match a != 0.0 && a.is_finite() && !(1e-4..1e15).contains(&a) {
        true => format!("{v:e}"),
        false => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{shown, Rule};

    /// `super::whole` with its message as the user reads it.
    fn whole<T: super::Whole>(least: impl Into<i128>) -> impl Fn(&str) -> Result<T, String> {
        let parse = super::whole::<T>(least);
        move |text| parse(text).map_err(|e| format!("{e:#}"))
    }

    /// `super::real` with its message as the user reads it.
    fn real(rule: Rule) -> impl Fn(&str) -> Result<f64, String> {
        let parse = super::real(rule);
        move |text| parse(text).map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn whole_numbers_in_words() {
        let n = whole::<usize>(1);
        assert_eq!(n("20"), Ok(20));
        assert_eq!(n(" +7 "), Ok(7));
        // Left to the plan, whose message says why.
        assert_eq!(n("0"), Ok(0));
        assert_eq!(n("-0"), Ok(0));
        assert_eq!(n("-1"), Err("use a whole number >= 1".into()));
        assert_eq!(n("-1e300"), Err("use a whole number >= 1".into()));
        let max = usize::MAX;
        let too_large = format!("too large; use a whole number from 1 to {max}");
        for huge in ["1e23", "1e300", "99999999999999999999999", "1e999999"] {
            assert_eq!(n(huge), Err(too_large.clone()), "{huge}");
        }
        assert_eq!(n(&"9".repeat(400)), Err(too_large));
        assert_eq!(
            n("1.5"),
            Err("not a whole number; use a whole number >= 1".into())
        );
        assert_eq!(
            n("1e-300"),
            Err("not a whole number; use a whole number >= 1".into())
        );
        assert_eq!(
            n("1e3"),
            Err("write it in digits (1000); use a whole number >= 1".into())
        );
        for not_a_number in ["x", "nan", "NaN", "inf", "-inf", "0x10", ""] {
            assert_eq!(
                n(not_a_number),
                Err(format!(
                    "'{not_a_number}' is not a number; use a whole number >= 1"
                )),
                "{not_a_number}"
            );
        }
        assert_eq!(
            whole::<u8>(0)("256"),
            Err("too large; use a whole number from 0 to 255".into())
        );
        assert_eq!(
            whole::<u8>(0)("-1"),
            Err("use a whole number from 0 to 255".into())
        );
        let root = whole::<i64>(-1);
        assert_eq!(root("-1"), Ok(-1));
        assert_eq!(root("-2"), Ok(-2));
        assert_eq!(
            root("1e23"),
            Err(format!(
                "too large; use a whole number from -1 to {}",
                i64::MAX
            ))
        );
    }

    #[test]
    fn real_numbers_in_words() {
        let rate = real(Rule {
            least: 0.0,
            above: true,
            most: 10000.0,
            what: "the rate in Gb/s",
            example: "400",
        });
        let rule = "give the rate in Gb/s, more than 0 and at most 10000, e.g. 400";
        assert_eq!(rate("400"), Ok(400.0));
        assert_eq!(rate("1e300"), Err(format!("too large; {rule}")));
        assert_eq!(rate("1e999999"), Err(format!("too large; {rule}")));
        assert_eq!(rate("-0"), Err(format!("too small; {rule}")));
        assert_eq!(rate("0"), Err(format!("too small; {rule}")));
        assert_eq!(rate("1e-300"), Ok(1e-300));
        for bad in ["nan", "inf", "-inf", "0x10", "", "fast"] {
            assert_eq!(rate(bad), Err(format!("'{bad}' is not a number; {rule}")));
        }
        let pct = real(Rule {
            least: 0.0,
            above: false,
            most: f64::INFINITY,
            what: "a percentage",
            example: "5",
        });
        assert_eq!(pct("2.5%"), Ok(2.5));
        assert_eq!(
            pct("-1"),
            Err("too small; give a percentage, at least 0, e.g. 5".into())
        );
        assert_eq!(
            pct("inf"),
            Err("'inf' is not a number; give a percentage, at least 0, e.g. 5".into())
        );
        assert_eq!(shown(1e300), "1e300");
        assert_eq!(shown(1e-300), "1e-300");
        assert_eq!(shown(1.5e23), "1.5e23");
        assert_eq!(shown(5.0), "5");
        assert_eq!(shown(0.25), "0.25");
        assert_eq!(shown(0.0), "0");
        assert_eq!(shown(f64::NAN), "NaN");
    }
}
