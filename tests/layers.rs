//! The shape of the code, checked on every test run: layers that only point down, no
//! import circle anywhere in the crate (between top-level modules, and between any two
//! files, `mod.rs` included, in one folder or across folders), files under 600 lines of
//! code before their tests, and binaries that are one call into the library.
//! docs/architecture.md says exactly what each test reads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules by layer, lowest first: a module may use its own layer and
/// those below it, never one above.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundation",
        &[
            "sizes",
            "stats",
            "datatype",
            "pattern",
            "input",
            "sysfs",
            "job",
            "cli",
            "output",
            "nccl_names",
            "faults",
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
            "driver", "allpairs", "verbs", "copy_bw", "doctor", "rack", "compare",
        ],
    ),
    ("documentation", &["docgen"]),
];

/// Most lines of code (not comments, not blank) a file may have before its tests.
const MAX_CODE_LINES: usize = 600;

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

/// `code` with every comment blanked (newlines kept) and the text of every string and
/// char literal replaced by dots: what is left is what the compiler reads as paths, and
/// a line of it with anything but whitespace is a line of code.
fn without_comments(code: &str) -> String {
    let c: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (i == 0 || !ident(c[i - 1]) || c[i - 1] == 'b')
            && matches!(next, Some('"') | Some('#'))
            && c[i + 1..].iter().find(|&&h| h != '#') == Some(&'"')
        {
            // A raw string: r"..." or r#"..."#, ended by '"' and as many '#'.
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            out.push('r');
            out.extend(std::iter::repeat_n('#', hashes));
            out.push('"');
            i += 2 + hashes;
            while i < c.len() {
                if c[i] == '"'
                    && c[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    out.push('"');
                    out.extend(std::iter::repeat_n('#', hashes));
                    i += 1 + hashes;
                    break;
                }
                out.push(dot(c[i]));
                i += 1;
            }
        } else if c[i] == '"' {
            i = literal(&c, i, '"', &mut out);
        } else if c[i] == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            // A char literal ('x', '\n', '\u{..}'); a lifetime ('a) is left alone.
            i = literal(&c, i, '\'', &mut out);
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// A literal's character as the path reader sees it: a dot, white space kept.
fn dot(ch: char) -> char {
    if ch.is_whitespace() {
        ch
    } else {
        '.'
    }
}

/// Copies the string or char literal that opens with `quote` at `c[i]` into `out`,
/// its text as dots (escapes included); the index after it.
fn literal(c: &[char], mut i: usize, quote: char, out: &mut String) -> usize {
    out.push(quote);
    i += 1;
    while i < c.len() && c[i] != quote {
        if c[i] == '\\' {
            out.push('.');
            i += 1;
        }
        if i < c.len() {
            out.push(dot(c[i]));
            i += 1;
        }
    }
    out.push(quote);
    i + 1
}

/// Lines with code on them: not blank, not only a comment.
fn lines_of_code(code: &str) -> usize {
    without_comments(code)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}

/// The tokens the path reader needs: identifiers, `::` and single punctuation.
fn tokens(code: &str) -> Vec<String> {
    let text = without_comments(code);
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_alphanumeric() || c[i] == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".to_string());
            i += 2;
        } else {
            if !c[i].is_whitespace() {
                out.push(c[i].to_string());
            }
            i += 1;
        }
    }
    out
}

fn is_ident(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Every path of two or more segments in the tokens (`a::b::c`), each `use` group
/// expanded (`use a::{b, c::{d, e}}` -> a::b, a::c::d, a::c::e); a glob (`a::*`) is
/// its module's path.
fn paths_in(tokens: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let starts = is_ident(&tokens[i])
            && tokens.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || tokens[i - 1] != "::");
        if starts {
            i = path_tree(tokens, i, &[], &mut out);
        } else {
            i += 1;
        }
    }
    out
}

/// Reads one path or use tree at `tokens[i]` below `prefix` into `out`; the index after it.
fn path_tree(
    tokens: &[String],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("{") => {
                i += 1;
                loop {
                    match tokens.get(i).map(String::as_str) {
                        None => return i,
                        Some("}") => return i + 1,
                        Some(",") => i += 1,
                        Some("as") => i += 2,
                        Some(_) => {
                            let after = path_tree(tokens, i, &path, out);
                            i = after.max(i + 1);
                        }
                    }
                }
            }
            Some("*") => {
                out.push(path);
                return i + 1;
            }
            Some(word) if is_ident(word) => {
                path.push(word.to_string());
                i += 1;
            }
            _ => break,
        }
        if tokens.get(i).is_some_and(|t| t == "::") {
            i += 1;
        } else {
            break;
        }
    }
    if path.len() > prefix.len() {
        out.push(path);
    }
    i
}

/// The names a module brings into scope with `use` (its own or `pub use` ones):
/// name -> the path it stands for, as written in that module.
fn use_names(tokens: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut names = BTreeMap::new();
    for (i, t) in tokens.iter().enumerate() {
        if t != "use" || tokens.get(i + 1).is_some_and(|n| n == "::") {
            continue;
        }
        let mut paths = Vec::new();
        path_tree(tokens, i + 1, &[], &mut paths);
        for path in paths {
            let name = match path.last().map(String::as_str) {
                Some("self") => path.len().checked_sub(2).map(|k| path[k].clone()),
                last => last.map(str::to_string),
            };
            if let Some(name) = name {
                names.insert(name, path);
            }
        }
    }
    names
}

/// One file of `src/` as the import graph sees it.
struct Module {
    file: PathBuf,
    tokens: Vec<String>,
    names: BTreeMap<String, Vec<String>>,
}

/// Every module of the crate by its path (`src/a/b.rs` and `src/a/b/mod.rs` -> [a, b]).
struct Crate {
    src: PathBuf,
    modules: BTreeMap<Vec<String>, Module>,
}

impl Crate {
    fn read() -> Crate {
        let (src, files) = src_files();
        let modules = files
            .into_iter()
            .map(|file| {
                let tokens = tokens(&code_of(&file));
                let names = use_names(&tokens);
                let module = module_path(&src, &file);
                (
                    module,
                    Module {
                        file,
                        tokens,
                        names,
                    },
                )
            })
            .collect();
        Crate { src, modules }
    }

    fn file(&self, module: &[String]) -> String {
        let file = &self.modules[module].file;
        file.strip_prefix(self.src.parent().unwrap())
            .unwrap_or(file)
            .display()
            .to_string()
    }

    /// The module a path written in `from` lands in: `crate::`, `self::`, `super::`
    /// or a child module's name first, then down the modules, then through the `use`
    /// of the module it reached when the next word is a name that module imports (a
    /// re-export, or a parent's import a child reaches through `super::`). None for a
    /// path that starts elsewhere (std, a dependency, a type's associated item).
    fn resolve(&self, from: &[String], path: &[String], depth: usize) -> Option<Vec<String>> {
        let (mut module, rest): (Vec<String>, &[String]) = match path.first()?.as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (from.to_vec(), &path[1..]),
            "super" => {
                let ups = path.iter().take_while(|w| *w == "super").count();
                (from[..from.len().checked_sub(ups)?].to_vec(), &path[ups..])
            }
            first => {
                let mut child = from.to_vec();
                child.push(first.to_string());
                if !self.modules.contains_key(&child) {
                    return None;
                }
                (from.to_vec(), path)
            }
        };
        for (k, word) in rest.iter().enumerate() {
            let mut next = module.clone();
            next.push(word.clone());
            if self.modules.contains_key(&next) {
                module = next;
                continue;
            }
            let imported = self.modules.get(&module)?.names.get(word);
            if let Some(imported) = imported.filter(|_| depth < 8) {
                let mut further = imported.clone();
                further.extend(rest[k + 1..].iter().cloned());
                if let Some(there) = self.resolve(&module, &further, depth + 1) {
                    return Some(there);
                }
            }
            break;
        }
        Some(module)
    }

    /// module -> module it uses -> one path that shows it.
    fn imports(&self) -> BTreeMap<Vec<String>, BTreeMap<Vec<String>, String>> {
        let mut graph: BTreeMap<Vec<String>, BTreeMap<Vec<String>, String>> = BTreeMap::new();
        for (from, module) in &self.modules {
            let edges = graph.entry(from.clone()).or_default();
            for path in paths_in(&module.tokens) {
                let Some(to) = self.resolve(from, &path, 0) else {
                    continue;
                };
                if &to != from {
                    edges.entry(to).or_insert_with(|| path.join("::"));
                }
            }
        }
        graph
    }
}

/// The edges a circle is looked for in. A file's use of a module above it (its
/// folder's `mod.rs`) is the ground it stands on, not a peer, so it counts only when
/// that module reaches the file back through a module outside its own folder: a
/// `mod.rs` that uses its children which use what it defines is a hub, while one that
/// goes out to another folder and comes back down is a circle.
fn circle_graph(
    imports: &BTreeMap<Vec<String>, BTreeMap<Vec<String>, String>>,
) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (from, edges) in imports {
        let down = edges.keys().filter(|to| !from.starts_with(to));
        graph.entry(from.clone()).or_default().extend(down.cloned());
    }
    let reach = |start: &Vec<String>| -> BTreeSet<Vec<String>> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start.clone()];
        while let Some(node) = todo.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let mut up = Vec::new();
    for (from, edges) in imports {
        for above in edges.keys().filter(|to| from.starts_with(to)) {
            let back = reach(above)
                .into_iter()
                .filter(|x| !x.starts_with(above))
                .any(|x| reach(&x).contains(from));
            if back {
                up.push((from.clone(), above.clone()));
            }
        }
    }
    for (from, above) in up {
        graph.entry(from).or_default().insert(above);
    }
    graph
}

/// `src/a/b.rs` -> ["a", "b"]; `src/a/mod.rs` -> ["a"]; `src/a.rs` -> ["a"]; `src/lib.rs` -> [].
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

/// The strongly connected groups of two or more nodes (Tarjan): each holds a circle.
fn circles<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    struct Walk<'g, N> {
        graph: &'g BTreeMap<N, BTreeSet<N>>,
        index: BTreeMap<N, usize>,
        low: BTreeMap<N, usize>,
        stack: Vec<N>,
        on_stack: BTreeSet<N>,
        groups: Vec<Vec<N>>,
    }
    impl<N: Ord + Clone> Walk<'_, N> {
        fn visit(&mut self, node: &N) {
            let n = self.index.len();
            self.index.insert(node.clone(), n);
            self.low.insert(node.clone(), n);
            self.stack.push(node.clone());
            self.on_stack.insert(node.clone());
            for next in self.graph.get(node).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node.clone(), low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node.clone(), low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut group = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(&top);
                    let done = &top == node;
                    group.push(top);
                    if done {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.groups.push(group);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        groups: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node) {
            walk.visit(node);
        }
    }
    walk.groups.sort();
    walk.groups
}

#[test]
fn layers_point_down_and_no_top_level_module_imports_in_a_circle() {
    let krate = Crate::read();
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut wrong_way = Vec::new();
    for (from, edges) in krate.imports() {
        let Some(own) = from.first() else { continue };
        let own_layer = layer_of(own)
            .unwrap_or_else(|| panic!("src module `{own}` has no layer in tests/layers.rs"));
        for (to, shown_by) in edges {
            let Some(target) = to.first() else { continue };
            if target == own {
                continue;
            }
            top.entry(own.clone()).or_default().insert(target.clone());
            let target_layer = layer_of(target)
                .unwrap_or_else(|| panic!("src module `{target}` has no layer in tests/layers.rs"));
            if target_layer > own_layer {
                wrong_way.push(format!(
                    "{}: `{own}` ({}) uses `{target}` ({}) through {shown_by}",
                    krate.file(&from),
                    LAYERS[own_layer].0,
                    LAYERS[target_layer].0
                ));
            }
        }
    }
    assert!(
        wrong_way.is_empty(),
        "imports pointing up:\n{}",
        wrong_way.join("\n")
    );
    let found = circles(&top);
    assert!(
        found.is_empty(),
        "top-level modules that import each other in a circle: {found:?}"
    );
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let krate = Crate::read();
    let imports = krate.imports();
    let graph = circle_graph(&imports);
    let mut found = Vec::new();
    for group in circles(&graph) {
        let mut lines = vec![format!("a circle of {} files:", group.len())];
        for from in &group {
            for (to, shown_by) in &imports[from] {
                if group.contains(to) && graph[from].contains(to) {
                    let (a, b) = (krate.file(from), krate.file(to));
                    lines.push(format!("  {a} -> {b} ({shown_by})"));
                }
            }
        }
        found.push(lines.join("\n"));
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn source_files_stay_under_600_lines_of_code_before_their_tests() {
    let (_, files) = src_files();
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, lines_of_code(&code_of(f))))
        .filter(|(_, n)| *n > MAX_CODE_LINES)
        .map(|(f, n)| format!("{} has {n} lines of code", f.display()))
        .collect();
    assert!(long.is_empty(), "split by concern:\n{}", long.join("\n"));
}

#[test]
fn every_binary_is_one_call_into_the_library() {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("bin");
    let mut fat = Vec::new();
    for entry in std::fs::read_dir(&bin).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let code = lines_of_code(&text);
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

fn words(path: &str) -> Vec<String> {
    path.split("::").map(str::to_string).collect()
}

#[test]
fn the_checker_finds_circles_and_reads_paths_and_comments() {
    let mut g: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    g.entry("a").or_default().insert("b");
    g.entry("b").or_default().insert("c");
    g.entry("d").or_default().insert("d");
    assert!(
        circles(&g).is_empty(),
        "a chain and a self-edge are no circle"
    );
    g.entry("c").or_default().insert("a");
    assert_eq!(circles(&g), vec![vec!["a", "b", "c"]]);

    // A hub (a/mod.rs uses its child a/x.rs, which uses what a/mod.rs defines) is no
    // circle; the same use is one when a/mod.rs reaches a/x.rs back through b.
    let m = |p: &str| -> Vec<String> { p.split('/').map(str::to_string).collect() };
    let mut imports: BTreeMap<Vec<String>, BTreeMap<Vec<String>, String>> = BTreeMap::new();
    imports
        .entry(m("a"))
        .or_default()
        .insert(m("a/x"), String::new());
    imports
        .entry(m("a/x"))
        .or_default()
        .insert(m("a"), String::new());
    imports.entry(m("b")).or_default();
    assert!(circles(&circle_graph(&imports)).is_empty());
    imports
        .get_mut(&m("a"))
        .unwrap()
        .insert(m("b"), String::new());
    imports
        .get_mut(&m("b"))
        .unwrap()
        .insert(m("a/x"), String::new());
    assert_eq!(
        circles(&circle_graph(&imports)),
        vec![vec![m("a"), m("a/x"), m("b")]]
    );

    let code = "use crate::{report::csv, sizes};\n\
                use super::{wire::{Hello, Bye as B}, *};\n\
                // crate::commented::out\n\
                let x = crate::job::main(\"crate::in::a::string\", '\"');\n\
                /* super::block /* nested */ comment */ let y = self::z::W::<u8>::new();";
    let paths: Vec<String> = paths_in(&tokens(code))
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        paths,
        [
            "crate::report::csv",
            "crate::sizes",
            "super::wire::Hello",
            "super::wire::Bye",
            "super",
            "crate::job::main",
            "self::z::W",
        ]
    );
    let names = use_names(&tokens(
        "pub use bench::{Benchmark, Test};\nuse link::{self, tcp};",
    ));
    assert_eq!(names["Test"], words("bench::Test"));
    assert_eq!(names["link"], words("link::self"));
    assert_eq!(names["tcp"], words("link::tcp"));
    assert_eq!(
        lines_of_code("// why\n\nfn f() { /* a\n b */ }\nlet s = r#\"\n// kept\n\"#;\n"),
        5
    );
}
