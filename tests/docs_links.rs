//! Every relative link of README.md and docs/**/*.md resolves: the file or folder it
//! names exists, and its `#anchor` is a heading of the Markdown file it points into
//! (GitHub's heading slugs). Links to the web are not followed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// GitHub's anchor of a heading: its text as rendered (inline code and emphasis
/// markers dropped, a link's text kept), lowercased, every character that is not a
/// letter, digit, space, '-' or '_' dropped, and each space made a '-'.
fn slug(heading: &str) -> String {
    rendered(heading)
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A heading's text without its Markdown: `[text](target)` is `text`, '`' and '*'
/// are gone.
fn rendered(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some((label, after)) = rest[open + 1..].split_once("](") else {
            break;
        };
        let Some(close) = after.find(')') else { break };
        out.push_str(&rest[..open]);
        out.push_str(label);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out.replace(['`', '*'], "")
}

/// The lines of a Markdown file that are prose: fenced code blocks are blanked
/// (kept as empty lines, so that line numbers stay right).
fn prose_lines(text: &str) -> Vec<String> {
    let mut fence: Option<&str> = None;
    text.lines()
        .map(|line| {
            let trimmed = line.trim_start();
            let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
            match (fence, marker) {
                (None, Some(m)) => {
                    fence = Some(m);
                    String::new()
                }
                (Some(f), Some(m)) if f == m => {
                    fence = None;
                    String::new()
                }
                (Some(_), _) => String::new(),
                (None, None) => without_code_spans(line),
            }
        })
        .collect()
}

/// The line with its inline code spans (`...`) removed: a link written inside one is
/// an example, not a link.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('`') {
        let ticks = rest[open..].chars().take_while(|c| *c == '`').count();
        let fence = &rest[open..open + ticks];
        let after = &rest[open + ticks..];
        match after.find(fence) {
            Some(close) => {
                out.push_str(&rest[..open]);
                rest = &after[close + ticks..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

/// The anchors of a Markdown file's headings, with GitHub's `-1`, `-2`, ... for
/// repeated ones.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in text
        .lines()
        .zip(prose_lines(text))
        .filter_map(|(raw, prose)| (!prose.is_empty() && raw.starts_with('#')).then_some(raw))
    {
        let level = line.chars().take_while(|c| *c == '#').count();
        let Some(title) = line[level..].strip_prefix(' ') else {
            continue;
        };
        let base = slug(title.trim());
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of the inline links and images of one line: what is between the
/// parentheses of `[text](target "title")`.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let mut depth = 1;
        let end = after.char_indices().find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i)
        });
        let Some(end) = end else { break };
        let inside = after[..end].trim();
        let target = match inside.strip_prefix('<') {
            Some(bracketed) => bracketed.split('>').next().unwrap_or(""),
            None => inside.split_whitespace().next().unwrap_or(""),
        };
        out.push(target.to_string());
        rest = &after[end + 1..];
    }
    out
}

/// What is wrong with one link of `file` (relative to `root`), if anything.
fn check_link(root: &Path, file: &Path, target: &str) -> Option<String> {
    if target.is_empty() {
        return Some("empty link".into());
    }
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let dest = if path.is_empty() {
        file.to_path_buf()
    } else if let Some(absolute) = path.strip_prefix('/') {
        root.join(absolute)
    } else {
        file.parent().unwrap().join(path)
    };
    let dest = normalise(&dest);
    if !dest.exists() {
        return Some(format!("{} does not exist", shown(root, &dest)));
    }
    let anchor = anchor?;
    if !matches!(dest.extension(), Some(e) if e == "md") {
        return None;
    }
    let text = std::fs::read_to_string(&dest).unwrap();
    (!anchors(&text).contains(anchor)).then(|| {
        format!(
            "no heading of {} has the anchor #{anchor}",
            shown(root, &dest)
        )
    })
}

/// `a/b/../c` -> `a/c`, without touching the file system.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// README.md and every Markdown file under docs/.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![root.join("README.md")];
    walk(&root.join("docs"), &mut files);
    files.sort();
    files
}

/// Every broken link under `root`, as `FILE:LINE: TARGET: what is wrong`.
fn broken_links(root: &Path) -> Vec<String> {
    let mut broken = Vec::new();
    for file in markdown_files(root) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in prose_lines(&text).iter().enumerate() {
            for target in link_targets(line) {
                if let Some(why) = check_link(root, &file, &target) {
                    broken.push(format!("{}:{}: {target}: {why}", shown(root, &file), n + 1));
                }
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_and_anchor_of_the_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = markdown_files(root);
    assert!(
        files.len() > 1,
        "no docs/*.md found next to README.md: {files:?}"
    );
    let broken = broken_links(root);
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn slugs_follow_github() {
    assert_eq!(
        slug("Flags: every nccl-tests 2.19.6 flag and variable, and its status here"),
        "flags-every-nccl-tests-2196-flag-and-variable-and-its-status-here"
    );
    assert_eq!(
        slug("All-pairs over RDMA verbs: `ib_write_bw --all-pairs`, `ib_write_lat --all-pairs`"),
        "all-pairs-over-rdma-verbs-ib_write_bw---all-pairs-ib_write_lat---all-pairs"
    );
    assert_eq!(
        slug("CSV schema (schema_version 1)"),
        "csv-schema-schema_version-1"
    );
    assert_eq!(
        slug("What is measured (perftest's definitions)"),
        "what-is-measured-perftests-definitions"
    );
    assert_eq!(slug("A [linked](x.md) *word*"), "a-linked-word");
    let text = "# A\n## A\n```\n# not a heading\n```\n## A\n";
    let found: Vec<String> = anchors(text).into_iter().collect();
    assert_eq!(found, ["a", "a-1", "a-2"]);
}

#[test]
fn links_in_code_are_not_links_and_titles_are_not_targets() {
    assert_eq!(
        link_targets(&without_code_spans(
            "see [a](b.md#c \"t\"), `[x](y)` and ![i](<d e.png>)"
        )),
        ["b.md#c", "d e.png"]
    );
    assert_eq!(link_targets("[f(x)](f_(x).md)"), ["f_(x).md"]);
}

#[test]
fn the_checker_names_a_missing_file_and_a_missing_anchor() {
    let root = std::env::temp_dir().join(format!("fabricbench-docs-links-{}", std::process::id()));
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(
        root.join("README.md"),
        "# Top\n\n[ok](docs/a.md#part-one) [gone](docs/missing.md)\n\n```\n[in code](nowhere.md)\n```\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/a.md"),
        "# A\n\n## Part one\n\n[back](../README.md#top) [bad](#part-two) [ref](reference/x.md)\n",
    )
    .unwrap();
    let broken = broken_links(&root);
    std::fs::remove_dir_all(&root).unwrap();
    assert_eq!(
        broken,
        [
            "README.md:3: docs/missing.md: docs/missing.md does not exist",
            "docs/a.md:5: #part-two: no heading of docs/a.md has the anchor #part-two",
            "docs/a.md:5: reference/x.md: docs/reference/x.md does not exist",
        ]
    );
}
