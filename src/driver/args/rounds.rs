//! `--rounds` and what goes with it: how many interleaved rounds measure each
//! line of the table (a fixed count, or `auto`: until each line's interval is
//! narrow enough), and `--min-busbw`, the interval-aware minimum.

use crate::cli::{real, whole, Rule};
use crate::job::UsageError;
use serde::Serialize;

/// `--rounds-tolerance` when not given: ±2%.
const DEFAULT_TOLERANCE_PCT: f64 = 2.0;
/// `--max-rounds` when not given.
const DEFAULT_MAX_ROUNDS: u32 = 20;
/// `--rounds-time` when not given, seconds.
const DEFAULT_ROUNDS_TIME_S: f64 = 60.0;
/// The fewest rounds `auto` measures: fewer give no interval to judge.
pub const AUTO_LEAST_ROUNDS: u32 = crate::stats::interval::MIN_SAMPLES as u32;

const TOLERANCE: Rule = Rule {
    least: 0.0,
    above: true,
    most: 100.0,
    what: "a percentage (the interval's half-width)",
    example: "2",
};

const SECONDS: Rule = Rule {
    least: 0.0,
    above: true,
    most: f64::INFINITY,
    what: "seconds",
    example: "60",
};

const MIN_BUSBW: Rule = Rule {
    least: 0.0,
    above: true,
    most: f64::INFINITY,
    what: "a bandwidth in GB/s",
    example: "10",
};

#[derive(clap::Args, Debug, Clone, Default, Serialize)]
pub struct RoundsArgs {
    /// Measure every line of the table in this many rounds, interleaved (round 1 of
    /// every size, then round 2, ...); the table shows each line's median with its
    /// spread, the CSV one row per round. `auto`: add rounds until each line's
    /// busbw median is known within --rounds-tolerance
    #[arg(long = "rounds", value_name = "R|auto", value_parser = rounds_value, allow_hyphen_values = true)]
    pub rounds: Option<RoundsValue>,
    /// With --rounds auto: a line is settled when the 95% interval of its median
    /// busbw is within this many percent of the median [default: 2]
    #[arg(long = "rounds-tolerance", value_name = "PERCENT", value_parser = real(TOLERANCE), allow_hyphen_values = true)]
    pub rounds_tolerance: Option<f64>,
    /// With --rounds auto: at most this many rounds [default: 20]
    #[arg(long = "max-rounds", value_name = "N", value_parser = whole::<u32>(AUTO_LEAST_ROUNDS), allow_hyphen_values = true)]
    pub max_rounds: Option<u32>,
    /// With --rounds auto: no round starts after this many seconds of rounds [default: 60]
    #[arg(long = "rounds-time", value_name = "SECONDS", value_parser = real(SECONDS), allow_hyphen_values = true)]
    pub rounds_time: Option<f64>,
    /// Fail (exit 1) when the median over rounds of the run's average busbw is, with
    /// its whole 95% interval, below this; exit 4 when the interval straddles it or
    /// fewer than 3 rounds leave the noise unknown (unlike NCCL_TESTS_MIN_BW)
    #[arg(long = "min-busbw", value_name = "GB/s", value_parser = real(MIN_BUSBW), allow_hyphen_values = true)]
    pub min_busbw: Option<f64>,
}

/// What `--rounds` was given.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum RoundsValue {
    Count(u32),
    Auto,
}

fn rounds_value(text: &str) -> anyhow::Result<RoundsValue> {
    match text.trim() {
        "auto" => Ok(RoundsValue::Auto),
        // One flat line: clap prints an error's outermost message only.
        t => whole::<u32>(1)(t)
            .map_err(|why| anyhow::anyhow!("{why} (or auto)"))
            .map(RoundsValue::Count),
    }
}

/// How many rounds measure each line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rounds {
    /// Every line this many times (1: today's run).
    Fixed(u32),
    /// Until every line's busbw median is within `tolerance` (a fraction:
    /// 0.02 is ±2%), at most `max_rounds` rounds, and no round started after
    /// `max_seconds`.
    Auto {
        tolerance: f64,
        max_rounds: u32,
        max_seconds: f64,
    },
}

impl Rounds {
    /// More than one round per line may be measured: the table shows medians.
    pub fn many(self) -> bool {
        self != Rounds::Fixed(1)
    }
}

/// The rounds part of the plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundsPlan {
    pub rounds: Rounds,
    /// --min-busbw, GB/s.
    pub min_busbw_gbs: Option<f64>,
}

impl Default for RoundsPlan {
    fn default() -> RoundsPlan {
        RoundsPlan {
            rounds: Rounds::Fixed(1),
            min_busbw_gbs: None,
        }
    }
}

impl RoundsArgs {
    /// The plan; `run_cycles` (-N) and `all_pairs` are refused with more than one round.
    pub fn plan(&self, run_cycles: u64, all_pairs: bool) -> Result<RoundsPlan, UsageError> {
        let auto_only = [
            ("--rounds-tolerance", self.rounds_tolerance.is_some()),
            ("--max-rounds", self.max_rounds.is_some()),
            ("--rounds-time", self.rounds_time.is_some()),
        ];
        let value = self.rounds.unwrap_or(RoundsValue::Count(1));
        if value != RoundsValue::Auto {
            if let Some((flag, _)) = auto_only.iter().find(|(_, given)| *given) {
                return Err(UsageError(format!(
                    "{flag}: only --rounds auto uses it; add --rounds auto or drop {flag}"
                )));
            }
        }
        if let Some(n) = self.max_rounds.filter(|&n| n < AUTO_LEAST_ROUNDS) {
            return Err(UsageError(format!(
                "--max-rounds {n}: auto needs {AUTO_LEAST_ROUNDS} rounds for an interval; use e.g. --max-rounds 20"
            )));
        }
        let rounds = match value {
            RoundsValue::Count(0) => {
                return Err(UsageError(
                    "--rounds 0: every line needs at least one round; use e.g. --rounds 5".into(),
                ))
            }
            RoundsValue::Count(n) => Rounds::Fixed(n),
            RoundsValue::Auto => Rounds::Auto {
                tolerance: self.rounds_tolerance.unwrap_or(DEFAULT_TOLERANCE_PCT) / 100.0,
                max_rounds: self.max_rounds.unwrap_or(DEFAULT_MAX_ROUNDS),
                max_seconds: self.rounds_time.unwrap_or(DEFAULT_ROUNDS_TIME_S),
            },
        };
        let given = match value {
            RoundsValue::Count(n) => n.to_string(),
            RoundsValue::Auto => "auto".into(),
        };
        if rounds.many() && run_cycles == 0 {
            return Err(UsageError(format!(
                "--rounds {given} with -N/--run_cycles 0: a run until interrupted never reaches round 2; give -N 1 or more"
            )));
        }
        if rounds.many() && all_pairs {
            return Err(UsageError(format!(
                "--rounds {given} with --all-pairs: all-pairs measures each pair once and judges its own matrix; drop --rounds"
            )));
        }
        if self.min_busbw.is_some() && all_pairs {
            return Err(UsageError(
                "--min-busbw with --all-pairs: all-pairs judges pairs with --slow-fraction; drop --min-busbw".into(),
            ));
        }
        Ok(RoundsPlan {
            rounds,
            min_busbw_gbs: self.min_busbw,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(rounds: Option<RoundsValue>) -> RoundsArgs {
        RoundsArgs {
            rounds,
            ..RoundsArgs::default()
        }
    }

    #[test]
    fn values_and_defaults() {
        assert_eq!(rounds_value("auto").ok(), Some(RoundsValue::Auto));
        assert_eq!(rounds_value("5").ok(), Some(RoundsValue::Count(5)));
        for bad in ["nan", "inf", "-1", "1.5", "x"] {
            let why = rounds_value(bad).unwrap_err().to_string();
            assert!(why.ends_with("(or auto)"), "{bad}: {why}");
        }
        let plan = args(None).plan(1, false).unwrap();
        assert_eq!(plan, RoundsPlan::default());
        assert!(!plan.rounds.many());
        let auto = args(Some(RoundsValue::Auto)).plan(1, false).unwrap();
        assert_eq!(
            auto.rounds,
            Rounds::Auto {
                tolerance: 0.02,
                max_rounds: 20,
                max_seconds: 60.0
            }
        );
        for bad in ["0", "-2", "nan", "inf"] {
            assert!(real(TOLERANCE)(bad).is_err(), "{bad}");
            assert!(real(MIN_BUSBW)(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn what_rounds_cannot_go_with_is_refused() {
        let zero = args(Some(RoundsValue::Count(0))).plan(1, false);
        assert!(zero.unwrap_err().0.starts_with("--rounds 0"));
        let forever = args(Some(RoundsValue::Count(3))).plan(0, false);
        assert!(forever.unwrap_err().0.contains("-N/--run_cycles 0"));
        let pairs = args(Some(RoundsValue::Auto)).plan(1, true);
        assert!(pairs.unwrap_err().0.contains("--all-pairs"));
        let tolerance = RoundsArgs {
            rounds_tolerance: Some(5.0),
            ..args(Some(RoundsValue::Count(3)))
        };
        let e = tolerance.plan(1, false).unwrap_err().0;
        assert!(
            e.starts_with("--rounds-tolerance: only --rounds auto"),
            "{e}"
        );
    }
}
