//! The committed reference (docs/reference/) is what the code generates: a
//! flag, a default, an accepted value, a CSV column or an exit status changed
//! without running `fabricbench-docs --reference docs/reference` fails here,
//! naming the file and its first differing line. Also: the man pages parse
//! with `man`, and the bash completion completes.

mod common;

use common::scratch;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn docs_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fabricbench-docs"))
}

/// Runs fabricbench-docs with `args`; its stdout (the files written).
fn generate(args: &[&str]) -> String {
    let out = Command::new(docs_binary()).args(args).output().unwrap();
    let (stdout, stderr) = common::text(&out);
    assert!(out.status.success(), "fabricbench-docs {args:?}: {stderr}");
    stdout
}

fn file_names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Where `committed` and `generated` first differ: "line N: committed `...`,
/// generated `...`".
fn first_difference(committed: &str, generated: &str) -> Option<String> {
    let (mut c, mut g) = (committed.lines(), generated.lines());
    for n in 1.. {
        match (c.next(), g.next()) {
            (None, None) => return None,
            (a, b) if a == b => continue,
            (a, b) => {
                return Some(format!(
                    "line {n}: committed `{}`, generated `{}`",
                    a.unwrap_or("(end of file)"),
                    b.unwrap_or("(end of file)")
                ))
            }
        }
    }
    None
}

/// Every difference between the committed folder and a fresh one, one line each.
fn drift(committed: &Path, generated: &Path) -> Vec<String> {
    let names: BTreeSet<String> = file_names(committed)
        .union(&file_names(generated))
        .cloned()
        .collect();
    let mut out = Vec::new();
    for name in names {
        let read = |dir: &Path| std::fs::read_to_string(dir.join(&name)).ok();
        let shown = committed.join(&name).display().to_string();
        match (read(committed), read(generated)) {
            (Some(c), Some(g)) => {
                if let Some(line) = first_difference(&c, &g) {
                    out.push(format!("{shown}: {line}"));
                }
            }
            (None, Some(_)) => out.push(format!("{shown}: missing (the code documents it)")),
            (Some(_), None) => out.push(format!("{shown}: the code no longer generates it")),
            (None, None) => {}
        }
    }
    out
}

#[test]
fn the_committed_reference_is_what_the_code_generates() {
    let fresh = scratch("docs-drift");
    generate(&["--reference", fresh.to_str().unwrap()]);
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference");
    let drift = drift(&committed, &fresh);
    assert!(
        drift.is_empty(),
        "docs/reference differs from the code; run `cargo run --bin fabricbench-docs -- \
         --reference docs/reference` and commit the result:\n{}",
        drift.join("\n")
    );
}

#[test]
fn drift_names_the_file_and_the_first_differing_line() {
    let (a, b) = (scratch("drift-a"), scratch("drift-b"));
    std::fs::write(a.join("x.md"), "same\nold default\nsame\n").unwrap();
    std::fs::write(b.join("x.md"), "same\nnew default\nsame\n").unwrap();
    std::fs::write(a.join("gone.md"), "").unwrap();
    std::fs::write(b.join("new.md"), "").unwrap();
    let found = drift(&a, &b);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(
        found[1].ends_with("new.md: missing (the code documents it)"),
        "{found:?}"
    );
    assert!(
        found[2].ends_with("x.md: line 2: committed `old default`, generated `new default`"),
        "{found:?}"
    );
    assert_eq!(
        first_difference("a\n", "a\nb\n").unwrap(),
        "line 2: committed `(end of file)`, generated `b`"
    );
}

/// `man` reads every page without a warning (skipped, saying so, without man-db).
#[test]
fn every_man_page_parses() {
    let dir = scratch("docs-man");
    let written = generate(&["--man", dir.to_str().unwrap()]);
    assert_eq!(written.lines().count(), file_names(&dir).len());
    if Command::new("man").arg("--version").output().is_err() {
        eprintln!("skipped: no `man` (install man-db, as scripts/setup.sh does)");
        return;
    }
    for name in file_names(&dir) {
        let out = Command::new("man")
            .args(["--warnings", "-l"])
            .arg(dir.join(&name))
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        let (page, warnings) = common::text(&out);
        let binary = name.trim_end_matches(".1");
        assert!(
            out.status.success() && warnings.trim().is_empty(),
            "{name}: {warnings}"
        );
        assert!(
            page.contains("SYNOPSIS") && page.contains(binary),
            "{name}:\n{page}"
        );
    }
}

/// bash completes `all_reduce_perf --min` and leaves out what a binary does not offer.
#[test]
fn bash_completes_the_flags_a_binary_offers() {
    let dir = scratch("docs-completions");
    generate(&["--completions", dir.to_str().unwrap()]);
    // One completion file per binary in bin/.
    let binaries = file_names(&Path::new(env!("CARGO_MANIFEST_DIR")).join("bin")).len();
    for shell in ["bash", "zsh", "fish"] {
        assert_eq!(file_names(&dir.join(shell)).len(), binaries, "{shell}");
    }
    let complete = |binary: &str, words: &str| {
        let script = dir.join("bash").join(binary);
        let function = format!("_{binary}");
        let line = format!(
            "source '{}'; COMP_WORDS=({binary} {words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
             {function} {binary} \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             echo \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let out = Command::new("bash").args(["-c", &line]).output().unwrap();
        let (stdout, stderr) = common::text(&out);
        assert!(out.status.success(), "{stderr}");
        stdout.trim().to_string()
    };
    assert_eq!(
        complete("all_reduce_perf", "--min"),
        "--minbytes --min-busbw"
    );
    assert_eq!(
        complete("all_reduce_perf", "--rounds-t"),
        "--rounds-tolerance --rounds-time"
    );
    assert_eq!(complete("all_reduce_perf", "--all"), "");
    assert_eq!(complete("sendrecv_perf", "--all"), "--all-pairs");
    assert_eq!(complete("all_reduce_perf", "-d f8"), "f8e4m3 f8e5m2");
    assert_eq!(complete("ib_write_lat", "--bid"), "");
}

/// A file planted where a page goes is replaced, never written through.
#[test]
fn a_planted_link_is_replaced_not_followed() {
    let dir = scratch("docs-planted");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let out = dir.join("man");
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("doctor.1")).unwrap();
    std::os::unix::fs::symlink(&victim, out.join(".doctor.1.new")).unwrap();
    generate(&["--man", out.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert!(!out.join("doctor.1").is_symlink());
}

#[test]
fn bad_output_folders_are_one_line_and_exit_2() {
    let dir = scratch("docs-bad");
    let file = dir.join("file");
    std::fs::write(&file, "").unwrap();
    for args in [
        vec![],
        vec!["--man".to_string(), file.display().to_string()],
        vec!["--bogus".to_string()],
    ] {
        let out = Command::new(docs_binary()).args(&args).output().unwrap();
        let (_, stderr) = common::text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    }
}
