//! Command-line pieces that several families share: the size parser and the flag
//! groups that clap `flatten`s into each binary's arguments; `numbers`: the
//! parsers of number flags.

mod numbers;

pub use numbers::{real, shown, whole, Rule, Whole};

use crate::job::UsageError;
use crate::sizes::parse_size;
use clap::Parser;
use serde::Serialize;
use std::path::PathBuf;

/// A size flag's value: bytes, with binary K, M, G suffixes (1K = 1024).
pub fn size_arg(text: &str) -> anyhow::Result<u64> {
    parse_size(text)
}

/// `--csv PATH` and `--append`: where rows go; a file is never overwritten.
#[derive(clap::Args, Debug, Clone, Default, Serialize)]
pub struct CsvArgs {
    /// Append one row per measured size to this CSV (never overwritten)
    #[arg(long = "csv")]
    pub csv: Option<PathBuf>,
    /// With --csv: add rows to an existing file of the same schema
    #[arg(long = "append", requires = "csv")]
    pub append: bool,
}

/// `--counters FILE`: every fabric counter delta of every size, in long form.
#[derive(clap::Args, Debug, Clone, Default, Serialize)]
pub struct CountersArgs {
    /// Write every fabric counter delta of every size to this CSV (long form; never overwritten)
    #[arg(long = "counters", value_name = "FILE")]
    pub counters: Option<PathBuf>,
}

/// `--all-pairs` and how a slow pair is judged.
#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct AllPairsArgs {
    /// Measure every pair of ranks in rounds of disjoint pairs; --csv gets the N x N matrices and a heatmap
    #[arg(long = "all-pairs")]
    pub all_pairs: bool,
    /// With --all-pairs: a pair whose bandwidth is below this fraction of the median is slow
    #[arg(long = "slow-fraction", default_value_t = 0.9, value_parser = real(SLOW_FRACTION), allow_hyphen_values = true, requires = "all_pairs")]
    pub slow_fraction: f64,
    /// With --all-pairs: a pair whose latency is above this multiple of the lowest is slow
    #[arg(long = "slow-latency", default_value_t = 2.0, value_parser = real(SLOW_LATENCY), allow_hyphen_values = true, requires = "all_pairs")]
    pub slow_latency: f64,
}

/// --slow-fraction (a spec's slow_fraction): 1 calls every pair below the
/// median slow, 0 none.
pub const SLOW_FRACTION: Rule = Rule {
    least: 0.0,
    above: true,
    most: 1.0,
    what: "a fraction of the median",
    example: "0.9",
};

/// --slow-latency (a spec's slow_latency): below 1 even the fastest pair is
/// slow; a million times the lowest is no bound on any fabric.
pub const SLOW_LATENCY: Rule = Rule {
    least: 1.0,
    above: false,
    most: 1e6,
    what: "a multiple of the lowest latency",
    example: "2",
};

/// An I/O error as words: "No space left on device", without Rust's "(os error 28)".
pub fn io_reason(e: &std::io::Error) -> String {
    in_words(&e.to_string())
}

/// A message with Rust's " (os error N)" after each I/O error taken out.
pub fn in_words(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(" (os error ") {
        out += &rest[..at];
        rest = &rest[at..];
        rest = rest.find(')').map_or("", |end| &rest[end + 1..]);
    }
    out + rest
}

/// Parses a command line, turning clap's multi-line errors into one line.
/// `--help` and `--version` print and exit 0 as usual.
pub fn parse_one_line<P, I, T>(argv: I) -> Result<P, UsageError>
where
    P: Parser,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    parse_with(P::command(), argv)
}

/// `parse_one_line` with the binary's own `command` (a family's arguments with
/// what that binary offers of them: its name, its help, the flags it hides).
pub fn parse_with<P, I, T>(command: clap::Command, argv: I) -> Result<P, UsageError>
where
    P: clap::FromArgMatches,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let one_line_error = |e: clap::Error, command: &clap::Command| match e.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => e.exit(),
        _ => UsageError(
            invalid_choice(&e, command)
                .or_else(|| invalid_value(&e, command))
                .unwrap_or_else(|| one_line(&e)),
        ),
    };
    let matches = command
        .clone()
        .try_get_matches_from(argv)
        .map_err(|e| one_line_error(e, &command))?;
    P::from_arg_matches(&matches).map_err(|e| one_line_error(e, &command))
}

/// A value its parser refused, in the house style: "-n/--iters -1: use a whole
/// number >= 1" (clap's own message quotes the value name and spans lines). A
/// reason that quotes the value already follows the flag alone:
/// "-e/--maxbytes: '12Q' is not a size: ...".
fn invalid_value(e: &clap::Error, command: &clap::Command) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let (
        ErrorKind::ValueValidation,
        Some(ContextValue::String(arg)),
        Some(ContextValue::String(value)),
    ) = (
        e.kind(),
        e.get(ContextKind::InvalidArg),
        e.get(ContextKind::InvalidValue),
    )
    else {
        return None;
    };
    let reason = std::error::Error::source(e)?.to_string();
    let flag = flag_name(arg, command);
    Some(match reason.starts_with(&format!("'{value}'")) {
        true => format!("{flag}: {reason}"),
        false => format!("{flag} {value}: {reason}"),
    })
}

/// The flag clap's error names (`--datatype <DATATYPE>`) as the house style
/// names it: `-d/--datatype` when it has both spellings.
fn flag_name(arg: &str, command: &clap::Command) -> String {
    let token = arg.split_whitespace().next().unwrap_or(arg);
    command
        .get_arguments()
        .find(|a| {
            a.get_long().map(|l| format!("--{l}")).as_deref() == Some(token)
                || a.get_short().map(|s| format!("-{s}")).as_deref() == Some(token)
        })
        .map_or(token.to_string(), |a| match (a.get_short(), a.get_long()) {
            (Some(s), Some(l)) => format!("-{s}/--{l}"),
            _ => token.to_string(),
        })
}

/// clap's message up to its usage block, on one line (a missing argument is named
/// on the line after the first).
fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let message: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    format!(
        "{} (see --help)",
        message.join(" ").trim_start_matches("error: ")
    )
}

/// A value outside a flag's fixed choices, in the house style: "--backend tcp: use
/// mpi, nccl or auto" (clap's own message spans lines and lists them in brackets).
fn invalid_choice(e: &clap::Error, command: &clap::Command) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let (
        Some(ContextValue::String(arg)),
        Some(ContextValue::String(value)),
        Some(ContextValue::Strings(valid)),
    ) = (
        e.get(ContextKind::InvalidArg),
        e.get(ContextKind::InvalidValue),
        e.get(ContextKind::ValidValue),
    )
    else {
        return None;
    };
    let flag = flag_name(arg, command);
    let choices = or_list(valid)?;
    Some(format!("{flag} {value}: use {choices}"))
}

/// Words as a sentence lists them: "a", "a or b", "a, b or c"; None for none.
pub fn or_list(words: &[String]) -> Option<String> {
    match words.split_last() {
        Some((last, [])) => Some(last.clone()),
        Some((last, rest)) => Some(format!("{} or {last}", rest.join(", "))),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_in_words() {
        assert_eq!(
            in_words("cannot read x: No such file or directory (os error 2)"),
            "cannot read x: No such file or directory"
        );
        assert_eq!(in_words("a (os error 2); b (os error 28)!"), "a; b!");
    }
}
