//! `prune` of `compaction.ts`: clear old tool outputs outside a protected budget, without a model
//! call, when enough would be saved.

use std::collections::{BTreeMap, HashSet};

use compactbench_core::{Checkpoint, CheckpointKind, EntryId, Message, Part, Replacement, Window};

use crate::session::{Kind, PruneDetails, PrunedPart, Session, CLEARED};
use crate::sizing::est_oc;

/// `PRUNE_MINIMUM`: prune only when strictly more than this would be cleared.
const PRUNE_MINIMUM: u64 = 20_000;
/// `PRUNE_PROTECT`: the newest tool output tokens that are never cleared.
const PRUNE_PROTECT: u64 = 40_000;
/// `PRUNE_PROTECTED_TOOLS` (literal tool names): neither counted nor cleared.
const PRUNE_PROTECTED_TOOLS: [&str; 1] = ["skill"];

/// What a prune would clear.
pub(crate) struct Plan {
    parts: Vec<PrunedPart>,
    total: u64,
    pruned: u64,
}

/// The walk of `prune` over everything stored (not the working view), newest first. Returns
/// `None` when the saving does not exceed [`PRUNE_MINIMUM`], or when every output it would clear
/// is already out of the working view.
///
/// The walk only gets behind a summary right after it (its continue and marker messages are then
/// the two newest user turns), and outputs behind a summary are never sent or serialized again,
/// so a prune that clears only those changes nothing the model or a later walk sees; it is
/// skipped rather than reported as an event that saved nothing.
pub(crate) fn plan(session: &Session<'_>) -> Option<Plan> {
    let mut total = 0;
    let mut pruned = 0;
    let mut parts = Vec::new();
    let mut turns = 0;
    'walk: for msg in session.msgs.iter().rev() {
        // A user message counts before the skip test, so the two newest turns are exempt.
        if msg.is_user() {
            turns += 1;
        }
        if turns < 2 {
            continue;
        }
        if msg.kind == Kind::Summary {
            break;
        }
        for part in msg.parts.iter().rev() {
            if !part.completed() || PRUNE_PROTECTED_TOOLS.contains(&part.name) {
                continue;
            }
            let output = part.output.as_ref().expect("completed parts have output");
            if output.compacted {
                break 'walk;
            }
            let estimate = est_oc(output.text);
            total += estimate;
            if total <= PRUNE_PROTECT {
                continue;
            }
            pruned += estimate;
            parts.push(PrunedPart { entry: output.entry, call_id: part.call_id.to_owned() });
        }
    }
    if pruned <= PRUNE_MINIMUM {
        return None;
    }
    let visible = session.visible_tool_messages();
    parts.iter().any(|p| visible.contains(&p.entry)).then_some(Plan { parts, total, pruned })
}

/// `message` with the outputs in `cleared` replaced by the placeholder. Attachments go with the
/// output; a tool message's media are dropped once all of its results are cleared.
fn cleared_message(message: &Message, cleared: impl Fn(&str) -> bool) -> Message {
    let all = message.tool_result_ids().all(&cleared);
    let parts = message
        .parts
        .iter()
        .filter(|p| !(all && matches!(p, Part::Media { .. })))
        .map(|p| match p {
            Part::ToolResult { call_id, name, .. } if cleared(call_id) => {
                Part::ToolResult { call_id: call_id.clone(), name: name.clone(), text: CLEARED.into(), is_error: false }
            }
            other => other.clone(),
        })
        .collect();
    Message { role: message.role, parts, usage: message.usage, failure: message.failure }
}

/// The prune checkpoint for `plan`: replacements keep each tool message and call id, so the
/// call/result pairing survives, and the details record the cleared parts for later walks.
pub(crate) fn checkpoint(session: &Session<'_>, plan: Plan, tokens_before: u64) -> Checkpoint {
    let mut by_entry: BTreeMap<EntryId, Vec<&str>> = BTreeMap::new();
    for part in &plan.parts {
        by_entry.entry(part.entry).or_default().push(&part.call_id);
    }
    let mut cp = Checkpoint::new(CheckpointKind::Prune, Window::Inherit);
    for (entry, new) in by_entry {
        let Some(original) = session.log.message(entry) else { continue };
        let new: HashSet<&str> = new.into_iter().collect();
        let cleared = |call_id: &str| new.contains(call_id) || session.compacted.contains(&(entry, call_id.to_owned()));
        cp.replacements.push(Replacement { entry, message: cleared_message(original, cleared) });
    }
    cp.tokens_before = tokens_before;
    cp.details = serde_json::to_value(PruneDetails { parts: plan.parts, total: plan.total, pruned: plan.pruned })
        .expect("prune details serialize");
    cp
}
