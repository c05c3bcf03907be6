//! The duplicate file-read fold (`applyContextOptimizations` and
//! `calculateContextOptimizationMetrics` in `ContextManager.ts`).
//!
//! Deterministic, no model. Every read of a file (a `read_file` result, a `write_to_file` /
//! `replace_in_file` result that echoes the final file, or a `<file_content>` mention) except
//! the latest per exact path gets its content replaced by a notice, as an edit in the store.
//! Then the characters saved decide whether truncation (or summarization) is still needed.

use std::collections::{BTreeSet, HashMap};

use compactbench_core::{estimate, Part};

use crate::history::{parse_tool_header, ClineMessage, Speaker};
use crate::state::{BlockEdit, EditType, MessageEdits, State};

/// `formatResponse.duplicateFileReadNotice()` (literal).
pub(crate) const DUPLICATE_FILE_READ_NOTICE: &str = "[[NOTE] This file read has been removed to save space in the context window. Refer to the latest file read for the most up to date version of this file.]";

/// Below this share of characters saved, the fold does not spare truncation (0.3 in source).
const MIN_SAVED_SHARE: f64 = 0.3;

/// Characters an image counts for. Cline counts the length of its base64 data; our media parts
/// only carry a token size, so four characters per token stand in (a modelling choice).
const CHARS_PER_MEDIA_TOKEN: u64 = 4;

/// Every match of `/<file_content path="([^"]*)">([\s\S]*?)<\/file_content>/g`: (path, whole match).
fn file_mentions(text: &str) -> Vec<(&str, &str)> {
    const OPEN: &str = "<file_content path=\"";
    const CLOSE: &str = "</file_content>";
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(OPEN).map(|i| from + i) {
        let path_start = at + OPEN.len();
        let matched = text[path_start..].find('"').map(|i| path_start + i).and_then(|quote| {
            let body = quote + "\">".len();
            text[quote..].starts_with("\">").then_some(())?;
            let close = text[body..].find(CLOSE).map(|i| body + i)?;
            Some((&text[path_start..quote], close + CLOSE.len()))
        });
        match matched {
            Some((path, end)) => {
                out.push((path, &text[at..end]));
                from = end;
            }
            None => from = at + 1,
        }
    }
    out
}

/// `text.replace(/(<final_file_content path="[^"]*">)[\s\S]*?(<\/final_file_content>)/, "$1 notice $2")`,
/// or `None` when the pattern is absent (e.g. the user rejected the edit).
fn fold_final_file_content(text: &str) -> Option<String> {
    const OPEN: &str = "<final_file_content path=\"";
    const CLOSE: &str = "</final_file_content>";
    let mut from = 0;
    while let Some(at) = text[from..].find(OPEN).map(|i| from + i) {
        let path_start = at + OPEN.len();
        let found = text[path_start..].find('"').map(|i| path_start + i).and_then(|quote| {
            text[quote..].starts_with("\">").then_some(())?;
            let body = quote + "\">".len();
            let close = text[body..].find(CLOSE).map(|i| body + i)?;
            Some((body, close))
        });
        if let Some((body, close)) = found {
            return Some(format!(
                "{} {DUPLICATE_FILE_READ_NOTICE} {}",
                &text[..body],
                &text[close..]
            ));
        }
        from = at + 1;
    }
    None
}

/// One place a file's content appears: `fileReadIndices` values in source.
struct Candidate {
    message: usize,
    kind: EditType,
    /// For mentions: the whole `<file_content>` element to replace.
    search: String,
    /// The replacement (whole block text, or for mentions the new element).
    replace: String,
    block: usize,
}

/// Candidates grouped by exact path, paths in first-seen order (a JavaScript `Map`).
#[derive(Default)]
struct ByPath {
    order: Vec<String>,
    candidates: HashMap<String, Vec<Candidate>>,
}

impl ByPath {
    fn push(&mut self, path: &str, candidate: Candidate) {
        if !self.candidates.contains_key(path) {
            self.order.push(path.to_owned());
        }
        self.candidates.entry(path.to_owned()).or_default().push(candidate);
    }
}

/// `handlePotentialFileMentionCalls`: adds a candidate for every mentioned file not replaced
/// in this block yet; returns whether the block mentions any file, and all paths it mentions.
fn mention_candidates(message: usize, block: usize, text: &str, replaced: &[String], found: &mut ByPath) -> (bool, Vec<String>) {
    let mut paths = Vec::new();
    let mentions = file_mentions(text);
    for (path, whole) in &mentions {
        paths.push((*path).to_owned());
        if !replaced.iter().any(|r| r == path) {
            let replace = format!("<file_content path=\"{path}\">{DUPLICATE_FILE_READ_NOTICE}</file_content>");
            found.push(path, Candidate { message, kind: EditType::FileMention, search: (*whole).to_owned(), replace, block });
        }
    }
    (!mentions.is_empty(), paths)
}

/// `getPossibleDuplicateFileReads`: scans user messages from `start` on.
fn scan(history: &[ClineMessage], start: usize, state: &State) -> (ByPath, HashMap<usize, Vec<String>>) {
    let mut found = ByPath::default();
    let mut mention_paths = HashMap::new();
    for (i, message) in history.iter().enumerate().skip(start) {
        let mut replaced: Vec<String> = Vec::new();
        if let Some(edits) = state.edits.get(&i) {
            if edits.kind != EditType::FileMention {
                // Any other edit means this message was handled for good.
                continue;
            }
            if let Some(last) = edits.blocks.values().next().and_then(|e| e.last()) {
                let (done, all) = last.files.clone().unwrap_or_default();
                if done.len() == all.len() {
                    continue;
                }
                replaced = done;
            }
        }
        // The summary message of an auto-condense is not ours to edit (see the crate docs).
        if message.speaker != Speaker::User || message.is_virtual || message.blocks.is_empty() {
            continue;
        }
        let first = &message.blocks[0];
        let Some(first_text) = first.text() else { continue };
        let mut found_tool_read = false;
        if let Some((tool, path, content_block, header)) = parse_tool_header(&first_text) {
            if tool == "read_file" {
                let replace = if content_block == 1 {
                    DUPLICATE_FILE_READ_NOTICE.to_owned()
                } else {
                    format!("{header}\n{DUPLICATE_FILE_READ_NOTICE}")
                };
                found.push(path, Candidate { message: i, kind: EditType::ReadFileTool, search: String::new(), replace, block: content_block });
                found_tool_read = true;
            } else if tool == "replace_in_file" || tool == "write_to_file" {
                let text = if first.is_tool_result() || content_block == 0 {
                    Some(first_text.clone())
                } else {
                    message.blocks.get(1).and_then(|b| match &b.part {
                        Part::Text { text } if !text.is_empty() => Some(text.clone()),
                        _ => None,
                    })
                };
                if let Some(text) = text {
                    if let Some(replace) = fold_final_file_content(&text) {
                        found.push(path, Candidate { message: i, kind: EditType::AlterFileTool, search: String::new(), replace, block: content_block });
                    }
                    // Source sets this even when the result has no final file content.
                    found_tool_read = true;
                }
            }
        }
        if !found_tool_read {
            // Mentions are searched in blocks 0 to 2 only; the first block with any wins.
            for (b, block) in message.blocks.iter().enumerate().take(3) {
                if let Some(text) = block.text() {
                    let (any, paths) = mention_candidates(i, b, &text, &replaced, &mut found);
                    if any {
                        mention_paths.insert(i, paths);
                        break;
                    }
                }
            }
        }
    }
    (found, mention_paths)
}

/// `applyFileReadContextHistoryUpdates`: folds all but the last occurrence of every path read
/// more than once. Returns whether anything changed and the messages changed now.
fn apply(history: &[ClineMessage], found: ByPath, mention_paths: &HashMap<usize, Vec<String>>, state: &mut State) -> (bool, BTreeSet<usize>) {
    let mut changed = false;
    let mut updated = BTreeSet::new();
    // Message -> (text so far, paths replaced, block), in first-touched order.
    let mut mention_updates: Vec<(usize, String, Vec<String>, usize)> = Vec::new();
    let mut candidates = found.candidates;
    for path in &found.order {
        let list = candidates.remove(path).unwrap_or_default();
        if list.len() < 2 {
            continue;
        }
        for c in &list[..list.len() - 1] {
            changed = true;
            updated.insert(c.message);
            if c.kind == EditType::FileMention {
                let at = match mention_updates.iter().position(|(m, ..)| *m == c.message) {
                    Some(at) => at,
                    None => {
                        let previous = state.edits.get(&c.message).and_then(|e| e.blocks.get(&c.block)).and_then(|e| e.last());
                        let mut base = previous.map(|e| e.text.clone()).unwrap_or_default();
                        let replaced = previous.and_then(|e| e.files.clone()).map(|f| f.0).unwrap_or_default();
                        if base.is_empty() {
                            base = history[c.message].blocks.get(c.block).and_then(|b| b.text()).unwrap_or_default();
                        }
                        mention_updates.push((c.message, base, replaced, c.block));
                        mention_updates.len() - 1
                    }
                };
                let entry = &mut mention_updates[at];
                if !c.search.is_empty() && !entry.1.is_empty() {
                    entry.1 = entry.1.replacen(&c.search, &c.replace, 1);
                    entry.2.push(path.clone());
                }
            } else {
                let edits = state.edits.entry(c.message).or_insert_with(|| MessageEdits::new(c.kind));
                edits.blocks.entry(c.block).or_default().push(BlockEdit { text: c.replace.clone(), files: None });
            }
        }
    }
    for (message, text, replaced, block) in mention_updates {
        let edits = state.edits.entry(message).or_insert_with(|| MessageEdits::new(EditType::FileMention));
        let list = edits.blocks.entry(block).or_default();
        if let Some(all) = mention_paths.get(&message) {
            list.push(BlockEdit { text, files: Some((replaced, all.clone())) });
        }
    }
    (changed, updated)
}

/// `countCharactersAndSavingsInRange` over messages `from..to`: (total, saved), in UTF-16 units.
fn count(history: &[ClineMessage], from: usize, to: usize, state: &State, updated: &BTreeSet<usize>) -> (i64, i64) {
    let len = |s: &str| estimate::utf16_len(s) as i64;
    let (mut total, mut saved) = (0, 0);
    for (i, message) in history.iter().enumerate().take(to).skip(from) {
        let edits = state.edits.get(&i);
        let just_edited = updated.contains(&i);
        for (b, block) in message.blocks.iter().enumerate() {
            if let Some(text) = block.text() {
                match edits.and_then(|e| e.blocks.get(&b)).filter(|list| !list.is_empty()) {
                    Some(list) => {
                        let latest = len(&list[list.len() - 1].text);
                        if just_edited {
                            let original = if list.len() > 1 { len(&list[list.len() - 2].text) } else { len(&text) };
                            saved += original - latest;
                            total += original;
                        } else {
                            total += latest;
                        }
                    }
                    None => total += len(&text),
                }
            } else if let Part::Media { tokens, .. } = block.part {
                total += (u64::from(tokens) * CHARS_PER_MEDIA_TOKEN) as i64;
            }
        }
    }
    (total, saved)
}

/// `calculateContextOptimizationMetrics`: share of the visible characters the fold just saved.
fn share_saved(history: &[ClineMessage], state: &State, updated: &BTreeSet<usize>) -> f64 {
    let (t1, s1) = count(history, 0, 2, state, updated);
    let (t2, s2) = count(history, state.start_of_rest(), history.len(), state, updated);
    let total = t1 + t2;
    if total == 0 {
        0.0
    } else {
        (s1 + s2) as f64 / total as f64
    }
}

/// `attemptFileReadOptimizationCore`: folds what it can into `state` (scanning from the first
/// message after the deleted range) and returns (anything folded, truncation still needed).
pub(crate) fn attempt(history: &[ClineMessage], state: &mut State) -> (bool, bool) {
    let (found, mention_paths) = scan(history, state.start_of_rest(), state);
    let (changed, updated) = apply(history, found, &mention_paths, state);
    if !changed {
        return (false, true);
    }
    let share = share_saved(history, state, &updated);
    (true, share < MIN_SAVED_SHARE)
}

/// Scan and fold only, for tests: (anything folded, messages folded now).
#[cfg(test)]
pub(crate) fn optimize(history: &[ClineMessage], start: usize, state: &mut State) -> (bool, BTreeSet<usize>) {
    let (found, mention_paths) = scan(history, start, state);
    apply(history, found, &mention_paths, state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_and_final_content_match_like_the_regexes() {
        let t = "a <file_content path=\"x\">1</file_content> <file_content path=\"y\"> <file_content path=\"z\">3</file_content>";
        let m = file_mentions(t);
        assert_eq!(m.iter().map(|(p, _)| *p).collect::<Vec<_>>(), ["x", "y"]);
        assert_eq!(m[1].1, "<file_content path=\"y\"> <file_content path=\"z\">3</file_content>");
        let w = "ok\n<final_file_content path=\"a\">\nbody\n</final_file_content>\ntail";
        assert_eq!(
            fold_final_file_content(w).unwrap(),
            format!("ok\n<final_file_content path=\"a\"> {DUPLICATE_FILE_READ_NOTICE} </final_file_content>\ntail")
        );
        assert_eq!(fold_final_file_content("no tags"), None);
    }
}
