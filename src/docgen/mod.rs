//! Documentation generated from the code, so that it cannot drift from it:
//! `binaries` (every binary and the clap `Command` it parses with),
//! `reference` (the Markdown pages of docs/reference), `manuals` (man pages and
//! shell completions), `args` and `cli` (the `fabricbench-docs` binary that
//! writes them).

pub mod args;
pub mod binaries;
pub mod cli;
pub mod manuals;
pub mod reference;
