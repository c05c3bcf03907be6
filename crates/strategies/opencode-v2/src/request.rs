//! The request V2 builds before every provider turn, as the JSON its trigger measures.
//!
//! `compactIfNeeded` estimates `JSON.stringify({system, messages, tools})` of the already
//! built `LLMRequest`. This module rebuilds that JSON from the view with the shapes of
//! `toLLMMessages` (@60ada05b / @5ea89d13) and the `@opencode-ai/llm` message schema:
//! system parts `{type, text}`; messages `{id?, role, content: [parts], metadata?}`; tool
//! results as separate `tool` messages. Field order does not matter to a length estimate.

use std::collections::HashSet;

use compactbench_core::{EntryId, Log, Message, Origin, Part, Role, View};
use serde_json::{json, Value};

use crate::history::{est_oc, leading_system_count};

/// A V2 message id: `msg_` plus 26 characters, the length of an ascending identifier
/// (modelling choice: only the length reaches the estimate).
fn message_id(id: EntryId) -> String {
    format!("msg_{:026}", id.0)
}

/// A media part. The seam keeps only the token size, so the base64 payload is modelled as
/// `4 × tokens` characters, which the estimator counts as `tokens`.
fn media(mime: &str, tokens: u32) -> Value {
    json!({"type": "media", "mediaType": mime, "data": "A".repeat(4 * tokens as usize)})
}

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// The `@opencode-ai/llm` messages one view message becomes.
fn native(id: Option<EntryId>, m: &Message) -> Vec<Value> {
    let with_id = |mut v: Value| {
        if let (Some(id), Some(obj)) = (id, v.as_object_mut()) {
            obj.insert("id".into(), Value::String(message_id(id)));
        }
        v
    };
    match m.role {
        Role::User => {
            let content: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text: t } => Some(text(t)),
                    Part::Media { mime, tokens } => Some(media(mime, *tokens)),
                    _ => None,
                })
                .collect();
            // User rows always carry a metadata object (`{...message.metadata}`).
            vec![with_id(json!({"role": "user", "content": content, "metadata": {}}))]
        }
        Role::System => vec![json!({"role": "system", "content": [text(&m.text())]})],
        Role::Assistant => {
            let content: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text: t } if !t.is_empty() => Some(text(t)),
                    Part::Reasoning { text: t } if !t.is_empty() => Some(json!({"type": "reasoning", "text": t})),
                    Part::ToolCall { id, name, args } => {
                        Some(json!({"type": "tool-call", "id": id, "name": name, "input": args}))
                    }
                    Part::Media { mime, tokens } => Some(media(mime, *tokens)),
                    _ => None,
                })
                .collect();
            if content.is_empty() {
                return Vec::new();
            }
            vec![with_id(json!({"role": "assistant", "content": content}))]
        }
        Role::Tool => {
            let mut out: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolResult { call_id, name, text, is_error: false } => Some(json!({
                        "role": "tool",
                        "content": [{"type": "tool-result", "id": call_id, "name": name,
                                     "result": {"type": "text", "value": text}}],
                    })),
                    Part::ToolResult { call_id, name, text, is_error: true } => Some(json!({
                        "role": "tool",
                        "content": [{"type": "tool-result", "id": call_id, "name": name,
                                     "result": {"type": "error", "value": {
                                         "error": {"type": "unknown", "message": text}, "content": []}}}],
                    })),
                    _ => None,
                })
                .collect();
            if let Some(content) = out.first_mut().and_then(|v| v["content"].as_array_mut()) {
                content.extend(m.parts.iter().filter_map(|p| match p {
                    Part::Media { mime, tokens } => Some(media(mime, *tokens)),
                    _ => None,
                }));
            }
            out
        }
    }
}

/// `JSON.stringify({system, messages, tools})` of the request built from `view`. The leading
/// system messages of the log are the system parts (agent prompt and context baseline);
/// `tools` is empty because the seam carries no tool definitions.
pub(crate) fn request_json(log: &Log, view: &View) -> String {
    let leading: HashSet<EntryId> = (0..leading_system_count(log) as u32).map(EntryId).collect();
    let mut system = Vec::new();
    let mut messages = Vec::new();
    for vm in &view.messages {
        let m = &vm.message;
        match vm.origin {
            Origin::Entry(id) | Origin::Replaced(id, _) if leading.contains(&id) => {
                let t = m.text();
                if !t.is_empty() {
                    system.push(text(&t));
                }
            }
            // The checkpoint row: one user message, no metadata.
            Origin::Summary(cp) => {
                messages.push(json!({"id": message_id(cp), "role": "user", "content": [text(&m.text())]}));
            }
            origin => messages.extend(native(origin.entry(), m)),
        }
    }
    json!({"system": system, "messages": messages, "tools": []}).to_string()
}

/// The trigger's estimate of the request built from `view`.
pub(crate) fn estimate_request(log: &Log, view: &View) -> u64 {
    est_oc(&request_json(log, view))
}
