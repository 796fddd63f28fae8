//! The shape of the code, checked on every test run: layers that only point down,
//! no import loop between modules or between the files of one module, files under
//! 600 lines before their tests, and binaries that are one call into the library.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules by layer, lowest first: a module may use its own layer and
/// those below it, never one above.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundation",
        &[
            "sizes", "stats", "datatype", "pattern", "input", "sysfs", "job", "cli", "output",
        ],
    ),
    ("report", &["limits", "model", "report", "plot"]),
    (
        "backends and transport",
        &["gpu", "backend", "collective", "watchdog"],
    ),
    (
        "families",
        &[
            "args", "driver", "allpairs", "verbs", "copy_bw", "doctor", "rack", "compare",
        ],
    ),
    ("documentation", &["docgen"]),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, mods)| mods.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's code before its `#[cfg(test)]` module.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// The code without its comments: what it imports, not what its docs mention.
fn imports_of(path: &Path) -> String {
    code_of(path)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `src/a/b.rs` -> ["a", "b"]; `src/a/mod.rs` -> ["a"]; `src/a.rs` -> ["a"].
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

fn src_files() -> (PathBuf, Vec<PathBuf>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    (src, files)
}

/// Identifiers after each `crate::` in the code (`crate::report::csv` -> ["report", "csv"]),
/// including those inside `use crate::{a, b::c}` groups.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                out.push(path_words(item.trim()));
            }
        } else {
            out.push(path_words(rest));
        }
    }
    out
}

fn path_words(text: &str) -> Vec<String> {
    let path: String = text
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    path.split("::")
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// A cycle in `graph`, if any, as the list of nodes around it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let start = stack.iter().position(|n| n == next).unwrap();
                    let mut cycle = stack[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(next, graph, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if !state.contains_key(node.as_str()) {
            if let Some(c) = visit(node, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn layers_point_down_and_no_module_imports_in_a_loop() {
    let (src, files) = src_files();
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut wrong_way = Vec::new();
    for file in &files {
        let module = module_path(&src, file);
        let Some(own) = module.first() else { continue };
        let own_layer = layer_of(own)
            .unwrap_or_else(|| panic!("src module `{own}` has no layer in tests/layers.rs"));
        for used in crate_paths(&imports_of(file)) {
            let Some(target) = used.first() else { continue };
            if target == own || layer_of(target).is_none() {
                continue;
            }
            top.entry(own.clone()).or_default().insert(target.clone());
            let target_layer = layer_of(target).unwrap();
            if target_layer > own_layer {
                wrong_way.push(format!(
                    "{}: `{own}` ({}) uses `{target}` ({})",
                    file.display(),
                    LAYERS[own_layer].0,
                    LAYERS[target_layer].0
                ));
            }
        }
    }
    wrong_way.sort();
    wrong_way.dedup();
    assert!(
        wrong_way.is_empty(),
        "imports pointing up:\n{}",
        wrong_way.join("\n")
    );
    assert_eq!(
        find_cycle(&top),
        None,
        "an import loop between top-level modules"
    );
}

#[test]
fn the_files_of_a_module_do_not_import_each_other_in_a_loop() {
    let (src, files) = src_files();
    // Per module directory: file -> sibling files it uses (through super:: or crate::dir::).
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let module = module_path(&src, file);
        if file.file_name().is_some_and(|n| n == "mod.rs") || module.len() < 2 {
            continue;
        }
        let (name, parent) = module.split_last().unwrap();
        let code = imports_of(file);
        let mut used: BTreeSet<String> = BTreeSet::new();
        for path in crate_paths(&code) {
            if path.len() > parent.len() && path[..parent.len()] == parent[..] {
                used.insert(path[parent.len()].clone());
            }
        }
        let mut rest = code.as_str();
        while let Some(i) = rest.find("super::") {
            rest = &rest[i + "super::".len()..];
            let words = if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                group[..end]
                    .split(',')
                    .filter_map(|item| path_words(item.trim()).first().cloned())
                    .collect()
            } else {
                path_words(rest)
                    .first()
                    .cloned()
                    .into_iter()
                    .collect::<Vec<_>>()
            };
            used.extend(words);
        }
        let siblings: BTreeSet<String> = files
            .iter()
            .filter_map(|f| {
                let m = module_path(&src, f);
                (m.len() == module.len() && m[..parent.len()] == parent[..])
                    .then(|| m.last().unwrap().clone())
            })
            .collect();
        let edges = graphs.entry(parent.to_vec()).or_default();
        let entry = edges.entry(name.clone()).or_default();
        entry.extend(
            used.into_iter()
                .filter(|u| u != name && siblings.contains(u)),
        );
    }
    for (parent, graph) in &graphs {
        assert_eq!(
            find_cycle(graph),
            None,
            "an import loop among the files of src/{}",
            parent.join("/")
        );
    }
}

#[test]
fn source_files_stay_under_600_lines_before_their_tests() {
    let (_, files) = src_files();
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, code_of(f).lines().count()))
        .filter(|(_, n)| *n > 600)
        .map(|(f, n)| format!("{} has {n} lines", f.display()))
        .collect();
    assert!(long.is_empty(), "split by concern:\n{}", long.join("\n"));
}

#[test]
fn every_binary_is_one_call_into_the_library() {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("bin");
    let mut fat = Vec::new();
    for entry in std::fs::read_dir(&bin).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let code = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .count();
        // `fn main() -> ExitCode {`, the call, `}` and at most one `use` line.
        if code > 4 {
            fat.push(format!(
                "{} has {code} lines of code",
                entry.path().display()
            ));
        }
    }
    assert!(
        fat.is_empty(),
        "move the CLI into src/:\n{}",
        fat.join("\n")
    );
}

#[test]
fn the_checker_finds_a_loop_and_reads_use_groups() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    assert_eq!(find_cycle(&g), None);
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(find_cycle(&g).map(|c| c.len()), Some(4));
    let paths = crate_paths("use crate::{report::csv, sizes};\nlet x = crate::job::main;");
    assert_eq!(
        paths,
        vec![
            vec!["report".to_string(), "csv".to_string()],
            vec!["sizes".to_string()],
            vec!["job".to_string(), "main".to_string()],
        ]
    );
}
