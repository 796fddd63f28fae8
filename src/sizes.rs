//! Message sizes: parsing `-b 8`, `-e 128M`, and the sweep from min to max.

/// Parses a byte count as nccl-tests does: a number with an optional K, M or G
/// suffix (binary: 1K = 1024), case-insensitive; fractions allowed (`1.5M`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_uppercase()),
        _ => (t, ' '),
    };
    let multiplier: f64 = match unit {
        ' ' => 1.0,
        'K' => 1024.0,
        'M' => 1024.0 * 1024.0,
        'G' => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "'{text}' is not a size: use a number with an optional K, M or G suffix"
            ))
        }
    };
    let value: f64 = digits.trim().parse().map_err(|_| {
        format!("'{text}' is not a size: use a number with an optional K, M or G suffix")
    })?;
    let bytes = value * multiplier;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("'{text}' is out of range"));
    }
    Ok(bytes as u64)
}

/// How the sweep steps from one size to the next (`-f` or `-i`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    Factor(u64),
    Bytes(u64),
}

/// The sizes min, min*f, ... <= max (or min, min+i, ...), as nccl-tests visits them.
pub fn sweep(min: u64, max: u64, step: Step) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut size = min;
    while size <= max {
        sizes.push(size);
        let next = match step {
            Step::Factor(f) => size.saturating_mul(f),
            Step::Bytes(b) => size.saturating_add(b),
        };
        if next <= size {
            break;
        }
        size = next;
    }
    sizes
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

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(8), "8 B");
        assert_eq!(human_bytes(32 << 20), "32 MiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }
}
