//! The Markdown reference (docs/reference/): a page per binary with its flags
//! as its clap `Command` defines them, the CSV columns from `Row::COLUMNS`, the
//! exit statuses from `ExitStatus`, and an index. `tests/docs_drift.rs` checks
//! that the committed copy is what this writes.

use super::binaries::{Binary, Family};
use crate::job::ExitStatus;
use crate::report::row::{Row, SCHEMA_VERSION};
use clap::{Arg, Command};

/// The line each generated page starts with.
pub const GENERATED: &str =
    "<!-- Generated from the code by `fabricbench-docs --reference docs/reference`; \
     do not edit: change the code and run it again (tests/docs_drift.rs checks). -->";

/// Every file of the reference: its name in the folder and its text.
pub fn files() -> Vec<(String, String)> {
    let binaries = Binary::all();
    let mut out: Vec<(String, String)> = binaries
        .iter()
        .map(|b| (format!("{}.md", b.name()), binary_page(b.command())))
        .collect();
    out.push(("csv-columns.md".into(), csv_columns()));
    out.push(("exit-status.md".into(), exit_statuses()));
    out.push(("README.md".into(), index(&binaries)));
    out
}

/// A table cell of prose: one line, its pipes escaped, and outside code spans
/// its `<` and `*` too (no HTML, no emphasis).
fn cell(text: &str) -> String {
    let one_line: Vec<&str> = text.split_whitespace().collect();
    let mut in_code = false;
    let mut out = String::new();
    for c in one_line.join(" ").chars() {
        in_code ^= c == '`';
        match c {
            '|' => out += "\\|",
            '<' | '*' if !in_code => out.extend(['\\', c]),
            _ => out.push(c),
        }
    }
    out
}

/// A code span in a table cell: only its pipes escaped (GFM reads `\|` there).
fn code(text: &str) -> String {
    format!("`{}`", text.replace('|', "\\|"))
}

fn help_of(arg: &Arg) -> String {
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(ToString::to_string)
        .unwrap_or_default();
    match arg.get_env() {
        Some(env) => format!("{help} (environment: `{}`)", env.to_string_lossy()),
        None => help,
    }
}

fn takes_value(arg: &Arg) -> bool {
    arg.get_action().takes_values()
}

fn value_name(arg: &Arg) -> String {
    match arg.get_value_names() {
        Some(names) => names
            .iter()
            .map(|n| n.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        None => arg.get_id().as_str().to_uppercase(),
    }
}

fn default_of(arg: &Arg) -> String {
    let values: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    match values.is_empty() || !takes_value(arg) || arg.is_hide_default_value_set() {
        true => String::new(),
        false => code(&values.join(",")),
    }
}

/// The values an enumerated flag takes, with their aliases: "`int8` (`char`), ...".
fn accepted(arg: &Arg) -> String {
    if !takes_value(arg) {
        return String::new();
    }
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| {
            let names: Vec<&str> = v.get_name_and_aliases().collect();
            match names.split_first() {
                Some((name, [])) => code(name),
                Some((name, aliases)) => {
                    let aliases: Vec<String> = aliases.iter().map(|a| code(a)).collect();
                    format!("{} ({})", code(name), aliases.join(", "))
                }
                None => String::new(),
            }
        })
        .collect();
    values.join(", ")
}

/// Each enumerated flag's values with what they mean, where they say.
fn value_meanings(args: &[&Arg]) -> String {
    let mut out = String::new();
    for arg in args {
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set() && v.get_help().is_some())
            .map(|v| {
                format!(
                    "  - {}: {}\n",
                    code(v.get_name()),
                    cell(&v.get_help().unwrap().to_string())
                )
            })
            .collect();
        if takes_value(arg) && !values.is_empty() {
            out += &format!("- {}:\n{}", flag_label(arg), values.concat());
        }
    }
    out
}

/// `-d`/`--datatype`, `--csv`, `-h`.
fn flag_label(arg: &Arg) -> String {
    match (arg.get_short(), arg.get_long()) {
        (Some(s), Some(l)) => format!("`-{s}`/`--{l}`"),
        (None, Some(l)) => format!("`--{l}`"),
        (Some(s), None) => format!("`-{s}`"),
        (None, None) => format!("`{}`", value_name(arg)),
    }
}

fn binary_page(mut cmd: Command) -> String {
    cmd.build();
    let name = cmd.get_name().to_string();
    let about = cmd.get_about().map(ToString::to_string).unwrap_or_default();
    let usage = cmd.render_usage().to_string();
    let args: Vec<&Arg> = cmd.get_arguments().collect();
    let (shown, hidden): (Vec<&Arg>, Vec<&Arg>) = args.iter().partition(|a| !a.is_hide_set());
    let (positionals, options): (Vec<&Arg>, Vec<&Arg>) =
        shown.iter().partition(|a| a.is_positional());
    let mut page = format!("{GENERATED}\n\n# {name}\n\n{about}\n\n```text\n{usage}\n```\n");
    if !positionals.is_empty() {
        page += "\n## Arguments\n\n| Argument | Required | Accepted values | Description |\n|---|---|---|---|\n";
        for arg in &positionals {
            let required = if arg.is_required_set() { "yes" } else { "no" };
            page += &format!(
                "| {} | {required} | {} | {} |\n",
                code(&value_name(arg)),
                accepted(arg),
                cell(&help_of(arg))
            );
        }
    }
    page += "\n## Options\n\n| Short | Long | Value | Default | Accepted values | Description |\n|---|---|---|---|---|---|\n";
    for arg in &options {
        page += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            arg.get_short()
                .map_or(String::new(), |s| code(&format!("-{s}"))),
            arg.get_long()
                .map_or(String::new(), |l| code(&format!("--{l}"))),
            match takes_value(arg) {
                true => code(&value_name(arg)),
                false => String::new(),
            },
            default_of(arg),
            accepted(arg),
            cell(&help_of(arg))
        );
    }
    let meanings = value_meanings(&shown);
    if !meanings.is_empty() {
        page += &format!("\n## Values\n\n{meanings}");
    }
    if !hidden.is_empty() {
        let flags: Vec<String> = hidden.iter().map(|a| flag_label(a)).collect();
        page += &format!(
            "\nAccepted but not offered here (the nccl-tests or perftest flags this binary \
             ignores, or refuses with a one-line reason): {}.\n",
            flags.join(", ")
        );
    }
    page + "\nExit statuses: [exit-status.md](exit-status.md). CSV columns: [csv-columns.md](csv-columns.md).\n"
}

fn csv_columns() -> String {
    let mut page = format!(
        "{GENERATED}\n\n# CSV columns (schema_version {SCHEMA_VERSION})\n\n\
         Every binary's `--csv` writes these columns, in this order, one row per measurement, \
         each row written whole as soon as it is measured. `pd.read_csv(path)` loads the file \
         with the right types; an empty field is a missing value (NaN). Columns are only ever \
         added at the end; a column that changes meaning or goes away bumps `schema_version`.\n\n\
         | # | Column | Type | Meaning |\n|---|---|---|---|\n"
    );
    for (i, column) in Row::COLUMNS.iter().enumerate() {
        page += &format!(
            "| {} | {} | {} | {} |\n",
            i + 1,
            code(column.name),
            column.kind(),
            cell(&column.meaning())
        );
    }
    page
}

fn exit_statuses() -> String {
    let mut page = format!(
        "{GENERATED}\n\n# Exit statuses\n\n\
         Every binary exits with one of these. A mistake is one line on stderr naming the flag, \
         what was typed and the fix, printed once per job.\n\n| Status | Meaning |\n|---|---|\n"
    );
    for status in ExitStatus::ALL {
        page += &format!("| {} | {} |\n", status.code(), cell(status.meaning()));
    }
    page
}

fn index(binaries: &[Binary]) -> String {
    let mut page = format!(
        "{GENERATED}\n\n# Reference\n\n\
         Generated from the code: the flags of every binary from its command-line parser, the \
         CSV columns from the row that is written, the exit statuses from the one exit policy. \
         `tests/docs_drift.rs` fails when this folder and the code disagree; \
         `cargo run --bin fabricbench-docs -- --reference docs/reference` writes it again.\n"
    );
    let mut families: Vec<Family> = binaries.iter().map(|b| b.family()).collect();
    families.dedup();
    for family in families {
        page += &format!(
            "\n## {}\n\n| Binary | What it does |\n|---|---|\n",
            family.title()
        );
        for b in binaries.iter().filter(|b| b.family() == family) {
            let cmd = b.command();
            let about = cmd.get_about().map(ToString::to_string).unwrap_or_default();
            page += &format!("| [{0}]({0}.md) | {1} |\n", cmd.get_name(), cell(&about));
        }
    }
    page + "\n## Formats\n\n\
            - [CSV columns](csv-columns.md): what `--csv` writes, column by column.\n\
            - [Exit statuses](exit-status.md): what each binary's exit status means.\n\n\
            Man pages and shell completions come from the same definitions: \
            `fabricbench-docs --man DIR --completions DIR`, or `scripts/install-docs.sh PREFIX` \
            to install them.\n"
}
