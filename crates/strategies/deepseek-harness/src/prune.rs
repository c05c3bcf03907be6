//! The optional tool-result pruner (`compaction-tool-result-pruner`): head + marker + tail for
//! every over-long tool result on the surface, recent ones included.

use compactbench_core::{Part, Replacement, Role, View};
use serde_json::{json, Value};

use crate::DeepseekHarnessConfig;

/// Text put in place of a pruned middle (`PRUNE_MARKER`, literal).
pub(crate) const PRUNE_MARKER: &str = "\n\n[... tool result middle pruned ...]\n\n";

/// `pruneContent` for one text: `None` when it is within `threshold` code points.
pub(crate) fn prune_text(text: &str, threshold: usize, head: usize, tail: usize) -> Option<String> {
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

/// `pruneSession` over the current surface: the whole-message replacements and, per pruned
/// result, its entry and code points before and after. `None` when nothing is over budget.
pub(crate) fn prune(view: &View, config: &DeepseekHarnessConfig) -> Option<(Vec<Replacement>, Value)> {
    let mut replacements = Vec::new();
    let mut stats = Vec::new();
    for vm in &view.messages {
        if vm.message.role != Role::Tool {
            continue;
        }
        let Some(entry) = vm.origin.entry() else { continue };
        let mut message = vm.message.clone();
        let mut changed = false;
        for part in &mut message.parts {
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
            *text = pruned;
            changed = true;
        }
        if changed {
            message.usage = None;
            replacements.push(Replacement { entry, message });
        }
    }
    (!replacements.is_empty()).then(|| (replacements, Value::Array(stats)))
}
