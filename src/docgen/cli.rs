//! The `fabricbench-docs` binary: writes the reference, the man pages and the
//! shell completions into the folders it is given.

use super::args::DocsArgs;
use super::{manuals, reference};
use crate::cli::parse_one_line;
use crate::job::{self, ExitStatus, Failure, Start, UsageError};
use crate::output::{check_folder, write_whole, Replace};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub fn main() -> ExitCode {
    job::main(Start::Alone, "fabricbench-docs", |_job, _program| {
        let args: DocsArgs = parse_one_line(std::env::args_os())?;
        for (flag, dir) in [
            ("--reference", &args.reference),
            ("--man", &args.man),
            ("--completions", &args.completions),
        ] {
            check_folder(flag, dir.as_deref(), "generated files")?;
        }
        for path in write(&args)? {
            println!("{}", path.display());
        }
        Ok(ExitStatus::Ok)
    })
}

/// Writes what `args` asks for; returns the files written.
fn write(args: &DocsArgs) -> Result<Vec<PathBuf>, Failure> {
    let mut written = Vec::new();
    if let Some(dir) = &args.reference {
        let files = reference::files()
            .into_iter()
            .map(|(n, t)| (n, t.into_bytes()));
        written.extend(write_files("--reference", dir, files)?);
    }
    if let Some(dir) = &args.man {
        let pages = manuals::man_pages().map_err(|e| anyhow::anyhow!("--man: {e}"))?;
        written.extend(write_files("--man", dir, pages)?);
    }
    if let Some(dir) = &args.completions {
        written.extend(write_files("--completions", dir, manuals::completions())?);
    }
    Ok(written)
}

/// Writes each (relative path, contents) under `dir`, each file whole: into a
/// new file beside it, then renamed over it, so a link planted at a file's
/// name is replaced, never followed.
fn write_files(
    flag: &str,
    dir: &Path,
    files: impl IntoIterator<Item = (String, Vec<u8>)>,
) -> Result<Vec<PathBuf>, Failure> {
    let mut written = Vec::new();
    for (name, contents) in files {
        let path = dir.join(&name);
        write_whole(&path, Replace::Always, &contents).map_err(|e| {
            UsageError(format!(
                "{flag} {}: cannot write {name}: {}",
                dir.display(),
                crate::cli::io_reason(&e)
            ))
        })?;
        written.push(path);
    }
    Ok(written)
}
