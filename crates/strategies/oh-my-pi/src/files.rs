//! File-operation tracking and the `<files>` list (agent-core `compaction/utils.ts`:
//! `extractFileOpsFromMessage`, `computeFileLists`, `formatFileOperations`,
//! `upsertFileOperations`, `splitReadSelector`; pi-utils `formatGroupedPaths`).

use std::collections::BTreeSet;

use compactbench_core::tools::{tool_kind, tool_path, ToolKind};
use compactbench_core::{Message, Part, Role};

/// `FILE_OPERATION_SUMMARY_LIMIT`.
const FILE_OPERATION_SUMMARY_LIMIT: usize = 20;

/// `FileOperations`.
#[derive(Default)]
pub(crate) struct FileOps {
    pub(crate) read: BTreeSet<String>,
    pub(crate) written: BTreeSet<String>,
    pub(crate) edited: BTreeSet<String>,
}

/// `isUrlSchemePath`: `scheme://` anywhere in the path.
fn is_url_scheme_path(path: &str) -> bool {
    // `/[a-z][a-z0-9+.-]*:\/\//i`: some letter starts the run of scheme characters that ends
    // right before a `://`.
    path.match_indices("://").any(|(i, _)| {
        path[..i]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || "+.-".contains(*c))
            .any(|c| c.is_ascii_alphabetic())
    })
}

/// One chunk of a read line-range selector: `L?\d+(?:(?:[-+]|\.\.)L?\d+|-|\.\.)?`.
fn is_range_chunk(s: &str) -> bool {
    fn number(s: &str) -> Option<&str> {
        let s = s.strip_prefix(['L', 'l']).unwrap_or(s);
        let n = s.bytes().take_while(u8::is_ascii_digit).count();
        (n > 0).then(|| &s[n..])
    }
    let Some(rest) = number(s) else { return false };
    if rest.is_empty() || rest == "-" || rest == ".." {
        return true;
    }
    let after = rest.strip_prefix("..").or_else(|| rest.strip_prefix(['-', '+']));
    after.and_then(number).is_some_and(str::is_empty)
}

fn is_range_list(s: &str) -> bool {
    s.split(',').all(is_range_chunk)
}

fn is_raw(s: &str) -> bool {
    s.eq_ignore_ascii_case("raw")
}

/// `splitReadSelector`: a trailing `:50-200`, `:raw`, `:conflicts` (or `range:raw` /
/// `raw:range` compound) is a selector, not part of the path.
pub(crate) fn split_read_selector(path: &str) -> (&str, Option<String>) {
    let Some(colon) = path.rfind(':').filter(|&c| c > 0) else { return (path, None) };
    let candidate = &path[colon + 1..];
    if !(is_range_list(candidate) || is_raw(candidate) || candidate.eq_ignore_ascii_case("conflicts")) {
        return (path, None);
    }
    let mut base = &path[..colon];
    let mut sel = candidate.to_owned();
    if let Some(inner) = base.rfind(':').filter(|&i| i > 0) {
        let inner_candidate = &base[inner + 1..];
        if (is_raw(inner_candidate) && is_range_list(candidate))
            || (is_range_list(inner_candidate) && is_raw(candidate))
        {
            sel = format!("{inner_candidate}:{candidate}");
            base = &base[..inner];
        }
    }
    (base, Some(sel))
}

impl FileOps {
    /// A previous compaction's `details.readFiles` (selectors stripped) and `modifiedFiles`.
    pub(crate) fn add_previous(&mut self, read: Vec<String>, modified: Vec<String>) {
        self.read.extend(read.iter().map(|f| split_read_selector(f).0.to_owned()));
        self.edited.extend(modified);
    }

    /// `extractFileOpsFromMessage`: assistant tool calls of oh-my-pi's `read`, `write` and
    /// `edit` tools with a `path` argument that is not a `scheme://` URL. The session's tool
    /// names are mapped to those three through [`tool_kind`] and the path found with
    /// [`tool_path`], so the list fills whichever harness recorded the session.
    pub(crate) fn add_message(&mut self, m: &Message) {
        if m.role != Role::Assistant {
            return;
        }
        for part in &m.parts {
            let Part::ToolCall { name, args, .. } = part else { continue };
            let Some(path) = tool_path(args) else { continue };
            if is_url_scheme_path(path) {
                continue;
            }
            match tool_kind(name) {
                ToolKind::Read => {
                    self.read.insert(split_read_selector(path).0.to_owned());
                }
                ToolKind::Write => {
                    self.written.insert(path.to_owned());
                }
                ToolKind::Edit => {
                    self.edited.insert(path.to_owned());
                }
                _ => {}
            }
        }
    }

    /// `computeFileLists`: (read-only files, modified files), both sorted.
    pub(crate) fn lists(&self) -> (Vec<String>, Vec<String>) {
        let modified: BTreeSet<&String> =
            self.edited.iter().chain(&self.written).filter(|f| !is_url_scheme_path(f)).collect();
        let mut read: Vec<String> =
            self.read.iter().filter(|f| !is_url_scheme_path(f) && !modified.contains(f)).cloned().collect();
        let mut modified: Vec<String> = modified.into_iter().cloned().collect();
        read.sort_by(|a, b| js_cmp(a, b));
        modified.sort_by(|a, b| js_cmp(a, b));
        (read, modified)
    }
}

/// JavaScript's default sort order: UTF-16 code units.
fn js_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

#[derive(Default)]
struct Node {
    files: Vec<(String, String)>,
    dirs: Vec<(String, Node)>,
}

/// `formatGroupedPaths`: a prefix-folded directory tree, `#`-headers per level, files bare
/// under the deepest header that owns them, each annotated.
fn format_grouped_paths(paths: &[String], annotate: impl Fn(&str) -> String) -> String {
    let mut root = Node::default();
    for raw in paths {
        let normalized = raw.replace('\\', "/");
        let trimmed = normalized.strip_suffix('/').unwrap_or(&normalized);
        if trimmed.is_empty() {
            continue;
        }
        let segments: Vec<&str> = trimmed.split('/').collect();
        let mut node = &mut root;
        for seg in &segments[..segments.len() - 1] {
            let i = match node.dirs.iter().position(|(n, _)| n == seg) {
                Some(i) => i,
                None => {
                    node.dirs.push(((*seg).to_owned(), Node::default()));
                    node.dirs.len() - 1
                }
            };
            node = &mut node.dirs[i].1;
        }
        let name = segments[segments.len() - 1].to_owned();
        if !node.files.iter().any(|(n, _)| *n == name) {
            node.files.push((name, raw.clone()));
        }
    }
    let mut lines = Vec::new();
    walk(&root, 0, &annotate, &mut lines);
    lines.join("\n")
}

fn walk(node: &Node, depth: usize, annotate: &impl Fn(&str) -> String, lines: &mut Vec<String>) {
    for (name, key) in &node.files {
        lines.push(format!("{name}{}", annotate(key)));
    }
    for (name, child) in &node.dirs {
        let mut parts = vec![name.as_str()];
        let mut node = child;
        while node.files.is_empty() && node.dirs.len() == 1 {
            parts.push(&node.dirs[0].0);
            node = &node.dirs[0].1;
        }
        lines.push(format!("{} {}/", "#".repeat(depth + 1), parts.join("/")));
        walk(node, depth + 1, annotate, lines);
    }
}

/// `formatFileOperations`: one literal `<files>` tag holding the grouped tree of at most 20
/// paths marked ` (Read)`, ` (Write)` or ` (RW)` (modified and also read), then
/// `[…N files elided…]` for the rest; empty when there are no files.
pub(crate) fn format_file_operations(read: &[String], modified: &[String], read_set: &BTreeSet<String>) -> String {
    if read.is_empty() && modified.is_empty() {
        return String::new();
    }
    let mut all: Vec<(String, &str)> = read.iter().map(|f| (f.clone(), "Read")).collect();
    for f in modified {
        let mode = if read_set.contains(f) { "RW" } else { "Write" };
        match all.iter_mut().find(|(p, _)| p == f) {
            Some(entry) => entry.1 = mode,
            None => all.push((f.clone(), mode)),
        }
    }
    all.sort_by(|a, b| js_cmp(&a.0, &b.0));
    let shown: Vec<String> = all.iter().take(FILE_OPERATION_SUMMARY_LIMIT).map(|(p, _)| p.clone()).collect();
    let mode_of = |p: &str| all.iter().find(|(q, _)| q == p).map_or("Read", |(_, m)| m);
    let mut files = format_grouped_paths(&shown, |p| format!(" ({})", mode_of(p)));
    if all.len() > FILE_OPERATION_SUMMARY_LIMIT {
        files.push_str(&format!("\n[…{} files elided…]", all.len() - FILE_OPERATION_SUMMARY_LIMIT));
    }
    format!("<files>\n{}\n</files>", files.trim())
}

/// Removes every `<open>…</close>` span and the whitespace after it.
fn strip_tag(summary: &str, open: &str, close: &str) -> String {
    let mut out = String::new();
    let mut rest = summary;
    while let Some(start) = rest.find(open) {
        let Some(end) = rest[start..].find(close) else { break };
        out.push_str(&rest[..start]);
        rest = rest[start + end + close.len()..].trim_start();
    }
    out.push_str(rest);
    out
}

/// `upsertFileOperations`: the summary without any earlier `<files>` (or legacy
/// `<read-files>` / `<modified-files>`) tag, then a blank line and the new `<files>` tag.
pub(crate) fn upsert_file_operations(summary: &str, ops: &FileOps) -> String {
    let mut base = strip_tag(summary, "<files>", "</files>");
    base = strip_tag(&base, "<read-files>", "</read-files>");
    base = strip_tag(&base, "<modified-files>", "</modified-files>");
    let base = base.trim_end();
    let (read, modified) = ops.lists();
    let files = format_file_operations(&read, &modified, &ops.read);
    if files.is_empty() {
        return base.to_owned();
    }
    if base.is_empty() {
        return files;
    }
    format!("{base}\n\n{files}")
}
