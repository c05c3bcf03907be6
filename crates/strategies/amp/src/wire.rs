//! Amp's native message shape for the draft and compaction requests: Anthropic Messages
//! objects, one per line \[assume: Amp runs Anthropic models by default\].

use compactbench_core::{Message, Part, Role};
use serde_json::{json, Value};

fn role(role: Role) -> &'static str {
    match role {
        Role::Assistant => "assistant",
        // Tool results travel in user turns; a system notice inside the thread is user text.
        Role::User | Role::Tool | Role::System => "user",
    }
}

fn block(part: &Part) -> Value {
    match part {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Reasoning { text } => json!({"type": "thinking", "thinking": text}),
        Part::ToolCall { id, name, args } => json!({"type": "tool_use", "id": id, "name": name, "input": args}),
        Part::ToolResult { call_id, text, is_error: true, .. } => {
            json!({"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": true})
        }
        Part::ToolResult { call_id, text, .. } => json!({"type": "tool_result", "tool_use_id": call_id, "content": text}),
        Part::Media { mime, tokens } => json!({"type": "image", "source": {"type": "base64", "media_type": mime}, "tokens": tokens}),
    }
}

/// One message as one line of JSON.
pub(crate) fn line(message: &Message) -> String {
    json!({"role": role(message.role), "content": message.parts.iter().map(block).collect::<Vec<_>>()}).to_string()
}
