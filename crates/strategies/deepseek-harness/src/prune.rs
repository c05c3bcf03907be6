//! The optional tool-result pruner (`compaction-tool-result-pruner`): head + marker + tail for
//! every over-long tool result on the surface, recent ones included.

use compactbench_core::{EntryId, Message, Part, Replacement, Role, View};
use serde_json::{json, Value};

use crate::DeepseekHarnessConfig;

/// Text put in place of a pruned middle (`PRUNE_MARKER`, literal).
pub(crate) const PRUNE_MARKER: &str = "\n\n[... tool result middle pruned ...]\n\n";

/// Whether `text` is over `threshold` code points. A text of at most `threshold` bytes
/// cannot be (every code point takes at least one byte), so most are settled without
/// counting.
fn over(text: &str, threshold: usize) -> bool {
    text.len() > threshold && text.chars().count() > threshold
}

/// Byte offset of the code point at index `n` (the end of the text when there are fewer).
fn byte_at(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

/// `pruneContent` for one text: `None` when it is within `threshold` code points. The first
/// `head` and last `tail` code points are sliced by byte offset.
pub(crate) fn prune_text(text: &str, threshold: usize, head: usize, tail: usize) -> Option<String> {
    if !over(text, threshold) {
        return None;
    }
    let total = text.chars().count();
    let head_end = byte_at(text, head.min(total));
    let tail_start = byte_at(text, total.saturating_sub(tail));
    Some([&text[..head_end], PRUNE_MARKER, &text[tail_start..]].concat())
}

/// The surface's tool messages that stand for a log entry, with that entry: what the pruner
/// walks.
fn tool_messages(view: &View) -> impl Iterator<Item = (EntryId, &Message)> {
    view.messages
        .iter()
        .filter(|vm| vm.message.role == Role::Tool)
        .filter_map(|vm| Some((vm.origin.entry()?, &vm.message)))
}

/// Whether [`prune`] would prune anything (it returns `Some`), without building its result.
pub(crate) fn would_prune(view: &View, config: &DeepseekHarnessConfig) -> bool {
    tool_messages(view).any(|(_, m)| {
        m.parts.iter().any(|p| matches!(p, Part::ToolResult { text, .. } if over(text, config.prune_threshold_chars)))
    })
}

/// `pruneSession` over the current surface: the whole-message replacements and, per pruned
/// result, its entry and code points before and after. `None` when nothing is over budget.
pub(crate) fn prune(view: &View, config: &DeepseekHarnessConfig) -> Option<(Vec<Replacement>, Value)> {
    let mut replacements = Vec::new();
    let mut stats = Vec::new();
    for (entry, original) in tool_messages(view) {
        let mut message: Option<Message> = None;
        for (i, part) in original.parts.iter().enumerate() {
            let Part::ToolResult { call_id, text, .. } = part else { continue };
            let Some(pruned) =
                prune_text(text, config.prune_threshold_chars, config.prune_head_chars, config.prune_tail_chars)
            else {
                continue;
            };
            stats.push(json!({
                "entry": entry.0,
                "callId": call_id,
                "charsBefore": text.chars().count(),
                "charsAfter": pruned.chars().count(),
            }));
            // Only a message with something to prune is copied.
            let copy = message.get_or_insert_with(|| original.clone());
            if let Part::ToolResult { text, .. } = &mut copy.parts[i] {
                *text = pruned;
            }
        }
        if let Some(mut message) = message {
            message.usage = None;
            replacements.push(Replacement { entry, message });
        }
    }
    (!replacements.is_empty()).then(|| (replacements, Value::Array(stats)))
}

#[cfg(test)]
mod tests {
    use super::{prune_text, PRUNE_MARKER};

    /// The original's slicing over an array of code points: the reference for `prune_text`.
    fn reference(text: &str, threshold: usize, head: usize, tail: usize) -> Option<String> {
        let points: Vec<char> = text.chars().collect();
        let total = points.len();
        if total <= threshold {
            return None;
        }
        let head_end = head.min(total);
        let tail_start = total.saturating_sub(tail).min(total);
        let mut out: String = points[..head_end].iter().collect();
        out.push_str(PRUNE_MARKER);
        out.extend(&points[tail_start..]);
        Some(out)
    }

    #[test]
    fn byte_slicing_matches_code_point_slicing() {
        let mixed = |n: usize| "aé日😀".chars().cycle().take(n).collect::<String>();
        for text in [String::new(), mixed(7), mixed(8), mixed(9), mixed(40), "é".repeat(8), "😀".repeat(9), "x".repeat(9)] {
            for (threshold, head, tail) in [(8, 3, 2), (8, 0, 0), (8, 8, 8), (0, 1, 1), (30, 10, 5)] {
                assert_eq!(prune_text(&text, threshold, head, tail), reference(&text, threshold, head, tail), "{text:?}");
            }
        }
    }
}
