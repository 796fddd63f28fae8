//! Message sizes: parsing `-b 8`, `-e 128M`, and the sweep from min to max.

use anyhow::{anyhow, bail};

/// Parses a byte count as nccl-tests does: a number with an optional K, M or G
/// suffix (binary: 1K = 1024), case-insensitive. A fraction is allowed where the
/// result is a whole number of bytes (`1.5K` is 1536); `1.9` is refused, never
/// rounded down to 1 byte. The arithmetic is exact: decimal digits, no float.
pub fn parse_size(text: &str) -> anyhow::Result<u64> {
    let not_a_size =
        || format!("'{text}' is not a size: use a number with an optional K, M or G suffix");
    let too_large = || format!("'{text}' is out of range: sizes stop at 2^64-1 bytes");
    let t = text.trim();
    let (number, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (t[..i].trim(), c.to_ascii_uppercase()),
        _ => (t, ' '),
    };
    let shift: u32 = match unit {
        ' ' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        _ => bail!(not_a_size()),
    };
    let (negative, digits) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number.strip_prefix('+').unwrap_or(number)),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let fraction = fraction.trim_end_matches('0');
    let decimal = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.len() + fraction.len() == 0 || !decimal(whole) || !decimal(fraction) {
        bail!(scientific(text, number).unwrap_or_else(not_a_size));
    }
    if negative {
        bail!("'{text}' is negative: a size is a whole number of bytes, e.g. 8 or 1K");
    }
    let value = |s: &str| {
        s.bytes().try_fold(0u128, |n, b| {
            n.checked_mul(10)?.checked_add(u128::from(b - b'0'))
        })
    };
    let whole = value(whole)
        .filter(|&w| w <= u64::MAX as u128)
        .ok_or_else(|| anyhow!(too_large()))?;
    // fraction / 10^d times 2^shift is whole only when d <= shift and 5^d divides
    // the fraction's digits (its last digit is not 0): then it is
    // (fraction / 5^d) * 2^(shift - d).
    let d = fraction.len() as u32;
    let part = value(fraction)
        .filter(|_| d <= shift)
        .filter(|f| f % 5u128.pow(d) == 0)
        .map(|f| (f / 5u128.pow(d)) << (shift - d));
    let Some(part) = part else {
        let bytes = (whole as f64 + format!("0.{fraction}").parse::<f64>().unwrap_or(0.0))
            * f64::from(1u32 << shift);
        bail!(
            "'{text}' is not a whole number of bytes ({bytes} B); use e.g. {}",
            bytes.ceil()
        );
    };
    u64::try_from((whole << shift) + part).map_err(|_| anyhow!(too_large()))
}

/// What is wrong with a size written as a float ("1e23", "1.5e3"), where it
/// is one: out of range, negative, a fraction, or a whole number to write in
/// digits (nccl-tests reads "1e3" as 1). None for text that is no number
/// (NaN and the infinities included).
fn scientific(text: &str, number: &str) -> Option<String> {
    let v: f64 = number.parse().ok().filter(|v: &f64| !v.is_nan())?;
    let spelled = number.to_ascii_lowercase();
    Some(match v {
        _ if spelled.contains("inf") => return None,
        _ if v >= u64::MAX as f64 => {
            format!("'{text}' is out of range: sizes stop at 2^64-1 bytes")
        }
        _ if v < 0.0 => {
            format!("'{text}' is negative: a size is a whole number of bytes, e.g. 8 or 1K")
        }
        _ if v.fract() != 0.0 => format!(
            "'{text}' is not a whole number of bytes; use e.g. {}",
            v.ceil()
        ),
        _ => format!("'{text}': write sizes in digits, e.g. {v:.0} (K, M or G suffixes allowed)"),
    })
}

/// How the sweep steps from one size to the next (`-f` or `-i`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    Factor(u64),
    Bytes(u64),
}

/// The sizes min, min*f, ... <= max (or min, min+i, ...), as nccl-tests visits
/// them, one at a time: a sweep of many sizes is never held in memory.
pub fn sizes(min: u64, max: u64, step: Step) -> impl Iterator<Item = u64> {
    std::iter::successors((min <= max).then_some(min), move |&size| {
        let next = match step {
            Step::Factor(f) => size.saturating_mul(f),
            Step::Bytes(b) => size.saturating_add(b),
        };
        (next > size && next <= max).then_some(next)
    })
}

/// `sizes` collected, for the families that keep the list.
pub fn sweep(min: u64, max: u64, step: Step) -> Vec<u64> {
    sizes(min, max, step).collect()
}

/// How many sizes `sizes` visits, counted without visiting them.
pub fn sweep_len(min: u64, max: u64, step: Step) -> u64 {
    match step {
        _ if min > max => 0,
        Step::Bytes(0) | Step::Factor(0 | 1) => 1,
        Step::Bytes(b) => (max - min) / b + 1,
        Step::Factor(_) => sizes(min, max, step).count() as u64,
    }
}

/// Formats a byte count for messages: "32 MiB", "1.5 GiB", "8 B".
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A byte count for a label that must tell sizes apart: [`human_bytes`] where
/// it is exact ("1.5 KiB" is 1536 bytes), else the bytes themselves ("1537 B",
/// which `human_bytes` rounds to "1.5 KiB" too).
pub fn exact_bytes(bytes: u64) -> String {
    let unit = std::iter::successors(Some(1u128), |u| Some(u * 1024))
        .take(5)
        .take_while(|u| bytes as u128 >= *u)
        .last()
        .unwrap_or(1);
    // human_bytes shows at most one decimal: exact when ten times the bytes
    // are a whole number of units.
    match (bytes as u128 * 10) % unit {
        0 => human_bytes(bytes),
        _ => format!("{bytes} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `parse_size` with its message as the user reads it.
    fn parse_size(text: &str) -> Result<u64, String> {
        super::parse_size(text).map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn parses_suffixes_like_nccl_tests() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("1K").unwrap(), 1024);
        assert_eq!(parse_size("128M").unwrap(), 128 << 20);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5M").unwrap(), 3 << 19);
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("abc").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("-4").is_err());
    }

    #[test]
    fn exact_labels_tell_sizes_apart() {
        assert_eq!(exact_bytes(1536), "1.5 KiB");
        assert_eq!(exact_bytes(1537), "1537 B");
        assert_eq!(exact_bytes(1000), "1000 B");
        assert_eq!(exact_bytes(1024), "1 KiB");
        assert_eq!(exact_bytes(1 << 20), "1 MiB");
        assert_eq!(exact_bytes((1 << 20) + 1), "1048577 B");
        assert_eq!(exact_bytes(0), "0 B");
        assert_eq!(exact_bytes(u64::MAX), "18446744073709551615 B");
        assert_eq!(exact_bytes(5 << 40), "5 TiB");
    }

    #[test]
    fn sizes_written_as_floats_say_what_is_wrong() {
        let err = |t: &str| parse_size(t).unwrap_err();
        assert_eq!(
            err("1e23"),
            "'1e23' is out of range: sizes stop at 2^64-1 bytes"
        );
        assert_eq!(
            err("1e300"),
            "'1e300' is out of range: sizes stop at 2^64-1 bytes"
        );
        assert_eq!(
            err("1e3"),
            "'1e3': write sizes in digits, e.g. 1000 (K, M or G suffixes allowed)"
        );
        assert_eq!(
            err("1e-300"),
            "'1e-300' is not a whole number of bytes; use e.g. 1"
        );
        assert_eq!(
            err("-1e3"),
            "'-1e3' is negative: a size is a whole number of bytes, e.g. 8 or 1K"
        );
        for no_number in ["nan", "inf", "-inf", "0x10", ""] {
            assert!(err(no_number)
                .ends_with("is not a size: use a number with an optional K, M or G suffix"));
        }
    }

    #[test]
    fn a_size_is_a_whole_number_of_bytes() {
        assert_eq!(parse_size("1.5K").unwrap(), 1536);
        assert_eq!(parse_size("0.5k").unwrap(), 512);
        assert_eq!(parse_size("2.000").unwrap(), 2);
        assert_eq!(parse_size("+8").unwrap(), 8);
        assert_eq!(parse_size(" 1 K ").unwrap(), 1024);
        assert_eq!(parse_size("0.0009765625M").unwrap(), 1024);
        assert_eq!(parse_size("16G").unwrap(), 16 << 30);
        assert_eq!(
            parse_size("1.9").unwrap_err(),
            "'1.9' is not a whole number of bytes (1.9 B); use e.g. 2"
        );
        assert!(parse_size("1.0001K")
            .unwrap_err()
            .starts_with("'1.0001K' is not a whole number of bytes (1024.1024 B)"));
        assert_eq!(
            parse_size("-8").unwrap_err(),
            "'-8' is negative: a size is a whole number of bytes, e.g. 8 or 1K"
        );
        for text in [
            "18446744073709551616",
            "17179869184G",
            "99999999999999999999999999999999999999999",
        ] {
            assert!(
                parse_size(text).unwrap_err().contains("out of range"),
                "{text}"
            );
        }
        assert_eq!(parse_size("18446744073709551615").unwrap(), u64::MAX);
        for text in ["inf", "NaN", ".", "1.2.3", "K", "1KK", "0x10", "1,5"] {
            assert!(
                parse_size(text).unwrap_err().contains("is not a size"),
                "{text}"
            );
        }
        assert!(parse_size(&format!("1.{}1", "0".repeat(40)))
            .unwrap_err()
            .contains("whole"));
    }

    #[test]
    fn sweeps_by_factor_and_by_bytes() {
        assert_eq!(sweep(8, 64, Step::Factor(2)), vec![8, 16, 32, 64]);
        assert_eq!(sweep(8, 100, Step::Factor(4)), vec![8, 32]);
        assert_eq!(sweep(10, 40, Step::Bytes(10)), vec![10, 20, 30, 40]);
        assert_eq!(
            sweep(32 << 20, 32 << 20, Step::Bytes(1 << 20)),
            vec![32 << 20]
        );
        assert_eq!(
            sweep(u64::MAX - 1, u64::MAX, Step::Factor(2)),
            vec![u64::MAX - 1, u64::MAX]
        );
        for (min, max, step) in [
            (8, 64, Step::Factor(2)),
            (8, 100, Step::Factor(4)),
            (10, 40, Step::Bytes(10)),
            (10, 45, Step::Bytes(10)),
            (9, 8, Step::Bytes(1)),
            (1, u64::MAX, Step::Factor(3)),
        ] {
            assert_eq!(
                sweep_len(min, max, step),
                sweep(min, max, step).len() as u64
            );
        }
        // Counted without a list: 2^40 sizes.
        assert_eq!(sweep_len(1, 1 << 40, Step::Bytes(1)), 1 << 40);
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(8), "8 B");
        assert_eq!(human_bytes(32 << 20), "32 MiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }
}
