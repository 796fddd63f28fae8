//! Man pages (clap_mangen) and bash, zsh and fish completions (clap_complete)
//! of every binary, from the same `Command`s as its `--help`.

use super::binaries::Binary;
use clap_complete::Shell;

/// A man page per binary, section 1: (file name, roff text).
pub fn man_pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    Binary::all()
        .into_iter()
        .map(|b| {
            let mut page = Vec::new();
            clap_mangen::Man::new(b.command()).render(&mut page)?;
            Ok((format!("{}.1", b.name()), page))
        })
        .collect()
}

/// Where each shell's completion of `name` goes, under the completions folder:
/// the names bash-completion, zsh's fpath and fish load them by.
fn completion_file(shell: Shell, name: &str) -> String {
    match shell {
        Shell::Zsh => format!("zsh/_{name}"),
        Shell::Fish => format!("fish/{name}.fish"),
        _ => format!("bash/{name}"),
    }
}

/// The completions of every binary for bash, zsh and fish: (relative path, script).
/// Only what a binary offers is completed (`Binary::offered`).
pub fn completions() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for b in Binary::all() {
        let name = b.name();
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut b.offered(), &name, &mut script);
            out.push((completion_file(shell, &name), script));
        }
    }
    out
}
