//! Long tool outputs written to files and replaced in context by a preview and the path
//! ("Dynamic context discovery").

use compactbench_core::estimate::utf16_len;
use compactbench_core::{Checkpoint, CheckpointKind, Cx, Log, Message, Offload, Origin, Part, Replacement, Role, View, Window};
use serde_json::json;

use crate::count::message_tokens;
use crate::CursorConfig;

/// Where an output is written \[assume\].
fn output_path(call_id: &str) -> String {
    let safe: String = call_id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    format!(".cursor/tool-outputs/{safe}.txt")
}

fn too_long(config: &CursorConfig, part: &Part) -> bool {
    matches!(part, Part::ToolResult { text, .. } if longer_than(text, config.offload_chars))
}

/// `utf16_len(text) > limit`, mostly decided by the byte length alone: every UTF-16 unit takes
/// one to three UTF-8 bytes (a 1-3 byte character is one unit, a 4-byte one two), so
/// `bytes / 3 <= utf16_len <= bytes`. Only a text in between is counted. The check runs over
/// every tool output in view before every request.
fn longer_than(text: &str, limit: u64) -> bool {
    let bytes = text.len() as u64;
    if bytes <= limit {
        false
    } else if bytes > limit.saturating_mul(3) {
        true
    } else {
        utf16_len(text) > limit
    }
}

/// View indices of tool messages (as the log holds them) with an output over the limit.
pub(crate) fn candidates(config: &CursorConfig, view: &View) -> Vec<usize> {
    view.messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m.origin, Origin::Entry(_)) && m.message.role == Role::Tool)
        .filter(|(_, m)| m.message.parts.iter().any(|p| too_long(config, p)))
        .map(|(i, _)| i)
        .collect()
}

/// An offload step: the checkpoint, the view with its replacements, the tokens it saved.
pub(crate) struct Offloaded {
    pub(crate) checkpoint: Checkpoint,
    pub(crate) view: View,
    pub(crate) saved: u64,
}

/// Writes every long output in `view` to its file; `None` when there is none.
pub(crate) fn run(config: &CursorConfig, log: &Log, view: &View, tokens_before: u64, cx: &mut Cx<'_>) -> Option<Offloaded> {
    let indices = candidates(config, view);
    if indices.is_empty() {
        return None;
    }
    let checkpoint_id = log.next_id();
    let mut cp = Checkpoint::new(CheckpointKind::Offload, Window::Inherit);
    let mut working = view.clone();
    let mut saved = 0;
    for i in indices {
        let Some(entry) = view.messages[i].origin.entry() else { continue };
        let original = &view.messages[i].message;
        let mut parts = Vec::with_capacity(original.parts.len());
        for part in &original.parts {
            match part {
                Part::ToolResult { call_id, name, text, is_error } if too_long(config, part) => {
                    let path = output_path(call_id);
                    cx.store.write(path.clone(), text.clone());
                    cp.offloads.push(Offload { path: path.clone(), entries: vec![entry] });
                    let preview: String = text.chars().take(config.preview_chars).collect();
                    let stub = format!(
                        "{preview}\n\n[Output truncated: {} characters in total. The full output is saved at {path}; \
                         read or grep that file for the rest.]",
                        utf16_len(text)
                    );
                    parts.push(Part::ToolResult { call_id: call_id.clone(), name: name.clone(), text: stub, is_error: *is_error });
                }
                other => parts.push(other.clone()),
            }
        }
        let message = Message { role: original.role, parts, usage: original.usage, failure: original.failure };
        saved += message_tokens(original).saturating_sub(message_tokens(&message));
        cp.replacements.push(Replacement { entry, message: message.clone() });
        working.messages[i].message = message;
        working.messages[i].origin = Origin::Replaced(entry, checkpoint_id);
    }
    cp.tokens_before = tokens_before;
    cp.details = json!({ "outputs": cp.offloads.len(), "saved_tokens": saved });
    Some(Offloaded { checkpoint: cp, view: working, saved })
}

#[cfg(test)]
mod tests {
    use compactbench_core::estimate::utf16_len;

    /// The byte-length shortcut agrees with counting, at and around every bound.
    #[test]
    fn longer_than_is_the_utf16_comparison() {
        let texts: Vec<String> = ["", "a", "é", "日", "😀", "a😀é日"]
            .iter()
            .flat_map(|unit| (0..14).map(move |n| unit.repeat(n)))
            .collect();
        for text in &texts {
            for limit in 0..30 {
                assert_eq!(super::longer_than(text, limit), utf16_len(text) > limit, "{text:?} {limit}");
            }
        }
        assert!(!super::longer_than("abc", u64::MAX));
    }
}
