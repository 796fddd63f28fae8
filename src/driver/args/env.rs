//! nccl-tests' environment variables that change what a run does:
//! `NCCL_TESTS_MIN_BW` (the average busbw a run must reach) and
//! `NCCL_TESTS_SPLIT_MASK` / `NCCL_TESTS_SPLIT` (ranks split into groups that run
//! the collective side by side), read with nccl-tests' syntax. A value that does
//! not parse is one usage line naming the variable, where nccl-tests would
//! silently read 0.

use crate::job::UsageError;

pub const MIN_BW_ENV: &str = "NCCL_TESTS_MIN_BW";
pub const SPLIT_MASK_ENV: &str = "NCCL_TESTS_SPLIT_MASK";
pub const SPLIT_ENV: &str = "NCCL_TESTS_SPLIT";

/// How a rank's group ("color") is computed from its rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitOp {
    And,
    Or,
    Mod,
    Div,
}

/// The rule of `NCCL_TESTS_SPLIT_MASK` (rank & mask) or `NCCL_TESTS_SPLIT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// As set: "NCCL_TESTS_SPLIT_MASK=0x1", for the header.
    pub setting: String,
    pub op: SplitOp,
    pub value: u64,
}

impl Split {
    /// The group of the process of world rank `proc`, as nccl-tests computes it.
    pub fn color(&self, proc: usize) -> u64 {
        let p = proc as u64;
        match self.op {
            SplitOp::And => p & self.value,
            SplitOp::Or => p | self.value,
            // A zero divisor is refused when parsed.
            SplitOp::Mod => p % self.value,
            SplitOp::Div => p / self.value,
        }
    }
}

/// The variables' meaning.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TestsEnv {
    /// NCCL_TESTS_MIN_BW, GB/s.
    pub min_busbw_gbs: Option<f64>,
    pub split: Option<Split>,
    /// NCCL_TESTS_DEVICE: the first GPU of every process (nccl backend).
    pub first_device: Option<usize>,
}

/// NCCL_TESTS_DEVICE, as nccl-tests reads it: GPUs first..first+g-1 of every process
/// instead of local_rank*g.
fn first_device(text: Option<&str>) -> Result<Option<usize>, UsageError> {
    match text {
        None => Ok(None),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) => Ok(Some(n)),
            Err(_) => Err(UsageError(format!(
                "NCCL_TESTS_DEVICE={v}: not a GPU number; use 0, 1, ... or unset it"
            ))),
        },
    }
}

impl TestsEnv {
    pub fn from_env() -> Result<TestsEnv, UsageError> {
        let var = |name| std::env::var(name).ok();
        let mut env = TestsEnv::parse(
            var(MIN_BW_ENV).as_deref(),
            var(SPLIT_MASK_ENV).as_deref(),
            var(SPLIT_ENV).as_deref(),
        )?;
        env.first_device = first_device(var("NCCL_TESTS_DEVICE").as_deref())?;
        Ok(env)
    }

    /// As nccl-tests: the mask wins when both split variables are set.
    pub fn parse(
        min_bw: Option<&str>,
        mask: Option<&str>,
        split: Option<&str>,
    ) -> Result<TestsEnv, UsageError> {
        let min_busbw_gbs = match min_bw {
            None => None,
            Some(text) => match text.trim().parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => Some(v),
                _ => {
                    return Err(UsageError(format!(
                    "{MIN_BW_ENV}={text}: not a bandwidth; give the lowest average busbw in GB/s, \
                         e.g. {MIN_BW_ENV}=100 (the run fails below 90% of it, as in nccl-tests)"
                )))
                }
            },
        };
        let split = match (mask, split) {
            (Some(text), _) => Some(parse_mask(text)?),
            (None, Some(text)) => Some(parse_split(text)?),
            (None, None) => None,
        };
        Ok(TestsEnv {
            min_busbw_gbs,
            split,
            first_device: None,
        })
    }
}

fn parse_mask(text: &str) -> Result<Split, UsageError> {
    // strtoul(text, NULL, 16): an optional 0x.
    let t = text.trim();
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let value = u64::from_str_radix(digits, 16).map_err(|_| {
        UsageError(format!(
            "{SPLIT_MASK_ENV}={text}: not a hexadecimal mask; use e.g. {SPLIT_MASK_ENV}=0x1 \
             (ranks whose rank & mask agree form a group)"
        ))
    })?;
    Ok(Split {
        setting: format!("{SPLIT_MASK_ENV}={text}"),
        op: SplitOp::And,
        value,
    })
}

fn parse_split(text: &str) -> Result<Split, UsageError> {
    let bad = |why: &str| {
        UsageError(format!(
            "{SPLIT_ENV}={text}: {why}; use AND, OR, MOD or DIV (or &, |, %, /) and a number, \
             e.g. {SPLIT_ENV}=\"MOD 2\" (ranks with the same rank % 2 form a group)"
        ))
    };
    let t = text.trim_start();
    let upper = t.to_ascii_uppercase();
    let (op, rest) = [
        ("AND", SplitOp::And),
        ("&", SplitOp::And),
        ("OR", SplitOp::Or),
        ("|", SplitOp::Or),
        ("MOD", SplitOp::Mod),
        ("%", SplitOp::Mod),
        ("DIV", SplitOp::Div),
        ("/", SplitOp::Div),
    ]
    .into_iter()
    .find_map(|(word, op)| upper.starts_with(word).then(|| (op, &t[word.len()..])))
    .ok_or_else(|| bad("no operation"))?;
    let value = parse_int(rest).ok_or_else(|| bad("no number after the operation"))?;
    if value == 0 && matches!(op, SplitOp::Mod | SplitOp::Div) {
        return Err(bad("a divisor of 0"));
    }
    Ok(Split {
        setting: format!("{SPLIT_ENV}={text}"),
        op,
        value,
    })
}

/// nccl-tests' parseInt: leading blanks, then 0b binary, or C's base 0 (0x hex,
/// a leading 0 octal, else decimal); nothing may follow.
fn parse_int(text: &str) -> Option<u64> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let (digits, radix) = if let Some(b) = lower.strip_prefix("0b") {
        (b, 2)
    } else if let Some(h) = lower.strip_prefix("0x") {
        (h, 16)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (&lower[1..], 8)
    } else {
        (lower.as_str(), 10)
    };
    u64::from_str_radix(digits, radix).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn nccl_tests_device_is_a_gpu_number() {
        assert_eq!(super::first_device(Some("3")).unwrap(), Some(3));
        assert_eq!(super::first_device(None).unwrap(), None);
        let e = super::first_device(Some("gpu1")).unwrap_err().0;
        assert!(
            e.starts_with("NCCL_TESTS_DEVICE=gpu1: not a GPU number"),
            "{e}"
        );
    }
    use super::*;

    fn split(mask: Option<&str>, split: Option<&str>) -> Result<Split, String> {
        TestsEnv::parse(None, mask, split)
            .map(|e| e.split.unwrap())
            .map_err(|e| e.0)
    }

    fn colors(s: &Split) -> Vec<u64> {
        (0..8).map(|p| s.color(p)).collect()
    }

    #[test]
    fn both_syntaxes_as_nccl_tests() {
        assert_eq!(
            colors(&split(Some("0x1"), None).unwrap()),
            [0, 1, 0, 1, 0, 1, 0, 1]
        );
        assert_eq!(
            colors(&split(Some("6"), None).unwrap()),
            [0, 0, 2, 2, 4, 4, 6, 6]
        );
        assert_eq!(
            colors(&split(None, Some("MOD 2")).unwrap()),
            [0, 1, 0, 1, 0, 1, 0, 1]
        );
        assert_eq!(
            colors(&split(None, Some("%3")).unwrap()),
            [0, 1, 2, 0, 1, 2, 0, 1]
        );
        assert_eq!(
            colors(&split(None, Some("div 4")).unwrap()),
            [0, 0, 0, 0, 1, 1, 1, 1]
        );
        assert_eq!(
            colors(&split(None, Some("/0b10")).unwrap()),
            [0, 0, 1, 1, 2, 2, 3, 3]
        );
        assert_eq!(
            colors(&split(None, Some("AND 0x6")).unwrap()),
            [0, 0, 2, 2, 4, 4, 6, 6]
        );
        assert_eq!(
            colors(&split(None, Some("|1")).unwrap()),
            [1, 1, 3, 3, 5, 5, 7, 7]
        );
        assert_eq!(split(None, Some("& 010")).unwrap().value, 8);
        // The mask wins.
        assert_eq!(split(Some("0x1"), Some("DIV 4")).unwrap().op, SplitOp::And);
    }

    #[test]
    fn malformed_values_name_the_variable() {
        for (mask, s, expected) in [
            (
                Some("zz"),
                None,
                "NCCL_TESTS_SPLIT_MASK=zz: not a hexadecimal mask",
            ),
            (None, Some("XOR 1"), "NCCL_TESTS_SPLIT=XOR 1: no operation"),
            (
                None,
                Some("MOD"),
                "NCCL_TESTS_SPLIT=MOD: no number after the operation",
            ),
            (None, Some("MOD 2x"), "NCCL_TESTS_SPLIT=MOD 2x: no number"),
            (
                None,
                Some("DIV 0"),
                "NCCL_TESTS_SPLIT=DIV 0: a divisor of 0",
            ),
        ] {
            let e = split(mask, s).unwrap_err();
            assert!(e.starts_with(expected), "{e}");
            assert_eq!(e.lines().count(), 1);
        }
        let e = TestsEnv::parse(Some("fast"), None, None).unwrap_err().0;
        assert!(
            e.starts_with("NCCL_TESTS_MIN_BW=fast: not a bandwidth"),
            "{e}"
        );
        assert_eq!(
            TestsEnv::parse(Some("12.5"), None, None)
                .unwrap()
                .min_busbw_gbs,
            Some(12.5)
        );
    }
}
