//! Tidy checks over the source tree (as rust-analyzer's `xtask/src/tidy.rs`): rules of the
//! architecture that no compiler checks, run by `cargo test` like any other test.
//!
//! - Strategy crates keep no hidden state: no `thread_local!` and no memo keyed by a pointer
//!   (per-run state lives in the crate's `Replay`, owned by the run).
//! - A strategy crate depends on core plus the allow-list below, each entry with its reason.
//! - No import cycle between the modules of any crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What a strategy crate may depend on besides `compactbench-core`, and why.
const STRATEGY_DEPENDENCIES: &[(&str, &str)] = &[
    ("serde_json", "checkpoint details and originals' JSON formats (tool arguments, session files)"),
    ("serde", "derives for the JSON a strategy writes into checkpoint details or reads back"),
    ("rustc-hash", "fast hash maps keyed by call ids and entry ids in per-request scans"),
    ("memchr", "line and block scans over large tool outputs"),
    ("smallvec", "inline lists of events per message, most of which hold one"),
];

/// The `.rs` files of `dir`, recursively, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Every package folder of the workspace: `crates/*` with a manifest, `crates/strategies/*`,
/// and `xtask`.
fn packages(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for parent in [root.join("crates"), root.join("crates/strategies")] {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(parent).unwrap().flatten().map(|e| e.path()).filter(|p| p.join("Cargo.toml").exists()).collect();
        dirs.sort();
        out.extend(dirs);
    }
    out.push(root.join("xtask"));
    out
}

/// The code of a module without its test code and comments (a doc link names a module
/// without depending on it): files named `tests.rs` or under a `tests` folder are skipped by
/// the caller, and an inline `#[cfg(test)] mod tests` is cut off here.
fn non_test_code(text: &str) -> String {
    let code = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    code.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn is_test_file(path: &Path, src: &Path) -> bool {
    let rel = path.strip_prefix(src).unwrap();
    rel.file_name().is_some_and(|n| n == "tests.rs" || n.to_string_lossy().ends_with("_tests.rs"))
        || rel.components().any(|c| c.as_os_str() == "tests")
}

/// The top-level module a file of `src` belongs to (`None` for the crate root).
fn top_module(path: &Path, src: &Path) -> Option<String> {
    let rel = path.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_string_lossy().into_owned();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
    (!matches!(name.as_str(), "lib" | "main")).then_some(name)
}

/// The first path segments after `crate::` in `text` (and after `super::` in a top-level
/// module, where it means the crate root), expanding `crate::{a::x, b}` groups.
fn referenced_modules(text: &str, top_level_file: bool) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut prefixes = vec!["crate::"];
    if top_level_file {
        prefixes.push("super::");
    }
    for prefix in prefixes {
        for (at, _) in text.match_indices(prefix) {
            // `super::` inside a longer path (`foo::super::`) does not occur in practice; a
            // preceding identifier character means another word (`$crate::`).
            if text[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let rest = &text[at + prefix.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 0;
                let mut item_start = true;
                let mut ident = String::new();
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => item_start = true,
                        c if item_start && (c.is_alphanumeric() || c == '_') => ident.push(c),
                        _ if item_start && !ident.is_empty() => {
                            out.insert(std::mem::take(&mut ident));
                            item_start = false;
                        }
                        _ => {}
                    }
                }
                if !ident.is_empty() {
                    out.insert(ident);
                }
            } else {
                let ident: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !ident.is_empty() {
                    out.insert(ident);
                }
            }
        }
    }
    out
}

/// The import graph between the top-level modules of the crate at `dir` (root excluded: a
/// crate root declares its modules and re-exports them, which is not a dependency).
fn module_graph(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let src = dir.join("src");
    let files: Vec<PathBuf> = rust_files(&src).into_iter().filter(|p| !is_test_file(p, &src)).collect();
    let modules: BTreeSet<String> = files.iter().filter_map(|p| top_module(p, &src)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for path in &files {
        let Some(from) = top_module(path, &src) else { continue };
        let text = std::fs::read_to_string(path).unwrap();
        let top_level_file = path.parent() == Some(src.as_path());
        for to in referenced_modules(&non_test_code(&text), top_level_file) {
            if to != from && modules.contains(&to) {
                graph.get_mut(&from).unwrap().insert(to);
            }
        }
    }
    graph
}

/// The cycles of `graph`: its strongly connected components of more than one module.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Kosaraju: order by finish time, then collect components on the reversed graph.
    fn visit<'a>(n: &'a str, g: &'a BTreeMap<String, BTreeSet<String>>, seen: &mut BTreeSet<&'a str>, out: &mut Vec<&'a str>) {
        if !seen.insert(n) {
            return;
        }
        for m in &g[n] {
            visit(m, g, seen, out);
        }
        out.push(n);
    }
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    for n in graph.keys() {
        visit(n, graph, &mut seen, &mut order);
    }
    let mut reversed: BTreeMap<String, BTreeSet<String>> = graph.keys().map(|k| (k.clone(), BTreeSet::new())).collect();
    for (from, tos) in graph {
        for to in tos {
            reversed.get_mut(to).unwrap().insert(from.clone());
        }
    }
    let mut assigned = BTreeSet::new();
    let mut out = Vec::new();
    for n in order.into_iter().rev() {
        let mut component = Vec::new();
        visit(n, &reversed, &mut assigned, &mut component);
        if component.len() > 1 {
            component.sort();
            out.push(component.into_iter().map(str::to_owned).collect());
        }
    }
    out
}

/// The `[dependencies]` names of a manifest.
fn dependencies(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[dependencies]";
        } else if inside && !line.is_empty() && !line.starts_with('#') {
            out.push(line.split(['=', '.', ' ']).next().unwrap().to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
    }

    fn strategy_crates() -> Vec<PathBuf> {
        packages(&root()).into_iter().filter(|p| p.parent().is_some_and(|d| d.ends_with("strategies"))).collect()
    }

    #[test]
    fn strategy_crates_keep_no_per_thread_or_pointer_keyed_state() {
        let mut found = Vec::new();
        for dir in strategy_crates() {
            for path in rust_files(&dir.join("src")) {
                let text = std::fs::read_to_string(&path).unwrap();
                for (n, line) in text.lines().enumerate() {
                    if line.contains("thread_local!") || line.contains("as *const") {
                        found.push(format!("{}:{}: {}", path.strip_prefix(root()).unwrap().display(), n + 1, line.trim()));
                    }
                }
            }
        }
        assert!(strategy_crates().len() >= 20);
        assert!(found.is_empty(), "per-run state belongs in the crate's Replay:\n{}", found.join("\n"));
    }

    #[test]
    fn strategy_crates_depend_on_core_and_the_allow_list_only() {
        let allowed: BTreeSet<&str> = STRATEGY_DEPENDENCIES.iter().map(|(name, _)| *name).collect();
        let mut unexpected = Vec::new();
        for dir in strategy_crates() {
            let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
            let deps = dependencies(&manifest);
            assert!(deps.iter().any(|d| d == "compactbench-core"), "{}: no core dependency", dir.display());
            for d in deps.iter().filter(|d| *d != "compactbench-core" && !allowed.contains(d.as_str())) {
                unexpected.push(format!("{}: {d}", dir.file_name().unwrap().to_string_lossy()));
            }
        }
        assert!(unexpected.is_empty(), "add a reason to STRATEGY_DEPENDENCIES in xtask/src/tidy.rs, or drop: {unexpected:?}");
    }

    #[test]
    fn no_crate_has_an_import_cycle_between_its_modules() {
        let mut found = Vec::new();
        for dir in packages(&root()) {
            for cycle in cycles(&module_graph(&dir)) {
                found.push(format!("{}: {}", dir.strip_prefix(root()).unwrap().display(), cycle.join(" <-> ")));
            }
        }
        assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
    }

    #[test]
    fn references_and_cycles_are_found() {
        let text = "use crate::{a::X, b::{Y, Z}, c};\nfn f() { crate::d::g(); $crate::e::h(); }\nuse super::f::F;";
        assert_eq!(referenced_modules(text, false), ["a", "b", "c", "d"].map(String::from).into());
        assert!(referenced_modules(text, true).contains("f"));
        let graph: BTreeMap<String, BTreeSet<String>> = [
            ("a", vec!["b"]),
            ("b", vec!["c"]),
            ("c", vec!["a"]),
            ("d", vec!["a"]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.into_iter().map(String::from).collect()))
        .collect();
        assert_eq!(cycles(&graph), vec![vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]]);
        assert_eq!(dependencies("[dependencies]\nserde.workspace = true\nfoo = \"1\"\n# x\n[dev-dependencies]\nbar = \"1\"\n"), ["serde", "foo"]);
    }
}
