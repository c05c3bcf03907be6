//! `ensureToolResultsFollowToolUse`, run by Cline on every view it sends.
//!
//! For each assistant message with tool calls that is followed by a user message, the user
//! message must start with the matching results in call order. If anything is out of order or
//! missing, the message is rebuilt: the results in call order (a missing one becomes a result
//! reading "result missing", literal), results for other ids dropped, then the other blocks.
//! In our model Cline's user message is the run of user, tool and system messages up to the
//! next assistant message; results become one tool message each.

use std::collections::HashMap;

use compactbench_core::{EntryId, Message, Origin, Part, Role, View, ViewMessage};

/// Text of a result the repair has to invent (literal).
const RESULT_MISSING: &str = "result missing";

/// Repairs `view` in place from message `from` on (the messages before it repaired already,
/// their last run closed by an assistant message at `from`). Invented results are attributed
/// to checkpoint `by`; without a checkpoint nothing was removed, and the repair is skipped
/// (runner logs always carry their results).
pub(crate) fn repair(view: &mut View, by: Option<EntryId>, from: usize) {
    let Some(by) = by else { return };
    let mut i = from;
    while i < view.messages.len() {
        let calls: Vec<(String, String)> = view.messages[i]
            .message
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolCall { id, name, .. } => Some((id.clone(), name.clone())),
                _ => None,
            })
            .collect();
        if view.messages[i].message.role != Role::Assistant || calls.is_empty() {
            i += 1;
            continue;
        }
        let run_start = i + 1;
        let run_end = view.messages[run_start..]
            .iter()
            .position(|m| m.message.role == Role::Assistant)
            .map_or(view.messages.len(), |k| run_start + k);
        if run_start == run_end {
            // Followed by another assistant message, or by nothing.
            i += 1;
            continue;
        }
        let run = &view.messages[run_start..run_end];
        if let Some(rebuilt) = rebuild(run, &calls, by) {
            view.messages.splice(run_start..run_end, rebuilt);
        }
        i += 1;
    }
}

/// The rebuilt run, or `None` when it already starts with exactly the right results.
fn rebuild(run: &[ViewMessage], calls: &[(String, String)], by: EntryId) -> Option<Vec<ViewMessage>> {
    let blocks: Vec<&Part> = run.iter().flat_map(|m| m.message.parts.iter()).collect();
    let mut results: HashMap<&str, (Part, &ViewMessage)> = HashMap::new();
    for m in run {
        for p in &m.message.parts {
            if let Part::ToolResult { call_id, .. } = p {
                results.insert(call_id.as_str(), (p.clone(), m));
            }
        }
    }
    let mut needs_update = false;
    if !results.is_empty() {
        let mut expected = 0;
        for b in &blocks {
            if expected >= calls.len() {
                break;
            }
            match b {
                Part::ToolResult { call_id, .. } if *call_id == calls[expected].0 => expected += 1,
                _ => {
                    needs_update = true;
                    break;
                }
            }
        }
        if !needs_update && expected < results.len() {
            needs_update = true;
        }
    }
    if calls.iter().any(|(id, _)| !results.contains_key(id.as_str())) {
        needs_update = true;
    }
    if !needs_update {
        return None;
    }
    let mut out = Vec::new();
    for (id, name) in calls {
        let (part, from) = match results.get(id.as_str()) {
            Some((part, from)) => (part.clone(), Some(*from)),
            None => (
                Part::ToolResult { call_id: id.clone(), name: name.clone(), text: RESULT_MISSING.to_owned(), is_error: false },
                None,
            ),
        };
        let message = Message::new(Role::Tool, vec![part]);
        let origin = from.map_or(Origin::Injected(by), |m| piece_origin(m, &message, by));
        out.push(ViewMessage { origin, message });
    }
    for m in run {
        let others: Vec<Part> = m.message.parts.iter().filter(|p| !matches!(p, Part::ToolResult { .. })).cloned().collect();
        if !others.is_empty() {
            let message = Message { role: m.message.role, parts: others, usage: m.message.usage, failure: m.message.failure };
            out.push(ViewMessage { origin: piece_origin(m, &message, by), message });
        }
    }
    Some(out)
}

/// The origin of `piece`, built from view message `m`: `m`'s own when the piece is all of it;
/// a log message shown only in part (a result split from media or from other results) is shown
/// through the repair, attributed to checkpoint `by`, since an `Entry` origin promises the log
/// message as it is.
fn piece_origin(m: &ViewMessage, piece: &Message, by: EntryId) -> Origin {
    match m.origin {
        Origin::Entry(e) if *piece != m.message => Origin::Replaced(e, by),
        origin => origin,
    }
}
