//! `fabricbench-docs`' command line.

use clap::{ArgGroup, Parser};
use std::path::PathBuf;

/// Writes fabricbench's documentation generated from its code: the Markdown
/// reference (every binary's flags, the CSV columns, the exit statuses), a man
/// page per binary and bash, zsh and fish completions. Files it writes are
/// replaced; nothing else in the folders is touched.
#[derive(Parser, Debug)]
#[command(name = "fabricbench-docs", version = crate::job::provenance::version())]
#[command(group(ArgGroup::new("output").required(true).multiple(true).args(["reference", "man", "completions"])))]
pub struct DocsArgs {
    /// Write the Markdown reference to DIR (the repository keeps it in docs/reference)
    #[arg(long = "reference", value_name = "DIR")]
    pub reference: Option<PathBuf>,
    /// Write a man page per binary (section 1, NAME.1) to DIR
    #[arg(long = "man", value_name = "DIR")]
    pub man: Option<PathBuf>,
    /// Write the completions to DIR/bash/NAME, DIR/zsh/_NAME and DIR/fish/NAME.fish
    #[arg(long = "completions", value_name = "DIR")]
    pub completions: Option<PathBuf>,
}
