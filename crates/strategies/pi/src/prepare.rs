//! `prepareCompaction` and the file-operation lists (compaction.ts, utils.ts).

use std::collections::BTreeSet;

use compactbench_core::{EntryId, Part, Role};

use crate::cut::find_cut_point;
use crate::session::{
    build_session_context, entry_messages, estimate_context_tokens, estimate_projected_context_tokens,
    first_kept_entry_id, raw_summary, Context, Item, PathEntry,
};
use crate::Release;

/// What `prepareCompaction` hands to `compact`.
pub(crate) struct Preparation<'a> {
    /// `firstKeptEntryId`.
    pub(crate) first_kept: EntryId,
    /// `messagesToSummarize`: complete turns before the kept part.
    pub(crate) to_summarize: Vec<Context<'a>>,
    /// `turnPrefixMessages`: the start of a turn that the cut splits.
    pub(crate) turn_prefix: Vec<Context<'a>>,
    /// `isSplitTurn`.
    pub(crate) split: bool,
    /// `tokensBefore`.
    pub(crate) tokens_before: u64,
    /// The previous compaction's summary, for the update prompt.
    pub(crate) previous_summary: Option<&'a str>,
    /// Files only read (`readFiles`), sorted.
    pub(crate) read_files: Vec<String>,
    /// Files written or edited (`modifiedFiles`), sorted.
    pub(crate) modified_files: Vec<String>,
}

/// Whether [`prepare_compaction`] can return a preparation: the path is not empty and its
/// last entry is not a compaction. (Any other path has a cut point or falls back to the scan
/// start, which then lies before the end.)
pub(crate) fn can_prepare(path: &[PathEntry<'_>]) -> bool {
    matches!(path.last(), Some(PathEntry { item: Item::Message(_), .. }))
}

/// `prepareCompaction(pathEntries, settings)`. `None` when the last entry already is a
/// compaction ("Already compacted") or there is no entry to keep, and in 1.6.0 also when
/// there is nothing to summarize. `system_chars` is the length of the system prompt, which
/// 1.6.0 counts in `tokensBefore` when it has no fresh usage.
pub(crate) fn prepare_compaction<'a>(
    path: &[PathEntry<'a>],
    system_chars: u64,
    keep_recent_tokens: u64,
    release: Release,
) -> Option<Preparation<'a>> {
    if matches!(path.last()?.item, Item::Compaction(_)) {
        return None;
    }
    let prev = path.iter().rposition(|e| matches!(e.item, Item::Compaction(_)));
    let prev_cp = prev.map(|i| match path[i].item {
        Item::Compaction(cp) => cp,
        Item::Message(_) => unreachable!("rposition found a compaction"),
    });

    let after_prev = prev.map_or(0, |i| i + 1);
    let boundary_start = match (release, prev_cp) {
        // 0.73.1 (#2608 fix): restart at the previous compaction's first kept entry, so what
        // it kept is either kept again or folded into the new summary.
        // 1.6.0 starts right after the compaction in its projection, which holds the same
        // retained tail: the same start.
        (Release::Npm1_6_0 | Release::Npm0_73_1, Some(cp)) => {
            first_kept_entry_id(cp).and_then(|id| path.iter().position(|e| e.id == id)).unwrap_or(after_prev)
        }
        // Canonical: only entries after the previous compaction; what it kept is lost.
        _ => after_prev,
    };
    let boundary_end = path.len();

    let tokens_before = match release {
        Release::Npm1_6_0 => estimate_projected_context_tokens(path, &build_session_context(path), system_chars),
        Release::Npm0_73_1 => estimate_context_tokens(&build_session_context(path), release).tokens,
        Release::Canonical0_58 => estimate_context_tokens(&entry_messages(&path[prev.unwrap_or(0)..]), release).tokens,
    };

    let cut = find_cut_point(path, boundary_start, boundary_end, keep_recent_tokens, release);
    let first_kept = path.get(cut.first_kept)?.id;
    let history_end = match cut.turn_start {
        Some(turn_start) if cut.split => turn_start,
        _ => cut.first_kept,
    };

    // The release skips compaction entries here; the canonical commit would feed one as its
    // summary message, which cannot happen there because its range starts after the newest.
    let collect = |range: std::ops::Range<usize>| -> Vec<Context<'a>> {
        path[range]
            .iter()
            .filter_map(|e| match e.item {
                Item::Message(m) => Some(Context::Message(m)),
                Item::Compaction(cp) => match release {
                    Release::Npm1_6_0 | Release::Npm0_73_1 => None,
                    Release::Canonical0_58 => Some(Context::Summary(raw_summary(cp))),
                },
            })
            .collect()
    };
    let to_summarize = collect(boundary_start..history_end.max(boundary_start));
    let turn_prefix = match cut.turn_start {
        Some(turn_start) if cut.split => collect(turn_start..cut.first_kept),
        _ => Vec::new(),
    };
    if release == Release::Npm1_6_0 && to_summarize.is_empty() && turn_prefix.is_empty() {
        return None;
    }

    let mut ops = FileOps::default();
    if let Some(cp) = prev_cp {
        ops.add_previous(&cp.details);
    }
    for m in to_summarize.iter().chain(&turn_prefix) {
        ops.add_message(*m);
    }
    let (read_files, modified_files) = ops.lists();

    Some(Preparation {
        first_kept,
        to_summarize,
        turn_prefix,
        split: cut.split,
        tokens_before,
        previous_summary: prev_cp.map(raw_summary),
        read_files,
        modified_files,
    })
}

/// `FileOperations`: paths from `read`, `write` and `edit` tool calls.
#[derive(Default)]
struct FileOps {
    read: BTreeSet<String>,
    written: BTreeSet<String>,
    edited: BTreeSet<String>,
}

impl FileOps {
    /// The previous compaction's `details.readFiles` join the read set and its
    /// `details.modifiedFiles` the edited set (`extractFileOperations`).
    fn add_previous(&mut self, details: &serde_json::Value) {
        let strings = |key: &str| -> Vec<String> {
            details
                .get(key)
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
                .unwrap_or_default()
        };
        self.read.extend(strings("readFiles"));
        self.edited.extend(strings("modifiedFiles"));
    }

    /// `extractFileOpsFromMessage`: assistant tool calls named exactly `read`, `write` or
    /// `edit` with a non-empty string `path` argument. Whether the call succeeded is not
    /// checked; other tools (bash, grep, …) are ignored.
    fn add_message(&mut self, m: Context<'_>) {
        let Context::Message(m) = m else { return };
        if m.role != Role::Assistant {
            return;
        }
        for part in &m.parts {
            let Part::ToolCall { name, args, .. } = part else { continue };
            let Some(path) = args.get("path").and_then(|p| p.as_str()).filter(|p| !p.is_empty()) else { continue };
            let set = match name.as_str() {
                "read" => &mut self.read,
                "write" => &mut self.written,
                "edit" => &mut self.edited,
                _ => continue,
            };
            set.insert(path.to_owned());
        }
    }

    /// `computeFileLists`: modified = edited ∪ written; read-only = read − modified; both
    /// sorted as JavaScript sorts strings (by UTF-16 code units).
    fn lists(self) -> (Vec<String>, Vec<String>) {
        let modified: BTreeSet<String> = self.edited.into_iter().chain(self.written).collect();
        let mut read: Vec<String> = self.read.into_iter().filter(|f| !modified.contains(f)).collect();
        let mut modified: Vec<String> = modified.into_iter().collect();
        let js_order = |a: &String, b: &String| a.encode_utf16().cmp(b.encode_utf16());
        read.sort_by(js_order);
        modified.sort_by(js_order);
        (read, modified)
    }
}

/// `formatFileOperations`: nothing when both lists are empty, else a blank line and the
/// literal `<read-files>` / `<modified-files>` blocks, separated by a blank line.
pub(crate) fn format_file_operations(read: &[String], modified: &[String]) -> String {
    let mut sections = Vec::new();
    if !read.is_empty() {
        sections.push(format!("<read-files>\n{}\n</read-files>", read.join("\n")));
    }
    if !modified.is_empty() {
        sections.push(format!("<modified-files>\n{}\n</modified-files>", modified.join("\n")));
    }
    if sections.is_empty() {
        return String::new();
    }
    format!("\n\n{}", sections.join("\n\n"))
}
