//! langchain-core `get_buffer_string(messages, format="xml")`: how the original serializes
//! evicted messages for the summarizer and for the history file.

use std::collections::HashMap;

use compactbench_core::{EntryId, Message, Part, Role, ViewMessage};

use crate::count::has_string_content;

/// Tool-call ids longer than this are shown cut, followed by `...`.
const TOOL_CALL_ID_DISPLAY_LIMIT: usize = 64;

/// Serializes `messages`, one element per message joined by newlines. `media` maps
/// `(entry, part index)` of media parts that were offloaded to the rendered block that now
/// references them; other media carried inline data, which the serializer skips.
/// `anthropic` drops reasoning: Claude's `thinking` blocks are not a type the serializer knows.
pub(crate) fn buffer_string<'a>(
    messages: impl IntoIterator<Item = &'a ViewMessage>,
    media: &HashMap<(EntryId, usize), String>,
    anthropic: bool,
) -> String {
    let rendered: Vec<String> = messages
        .into_iter()
        .map(|vm| {
            let entry = vm.origin.entry();
            message(&vm.message, |part| entry.and_then(|e| media.get(&(e, part)).cloned()), anthropic)
        })
        .collect();
    rendered.join("\n")
}

fn message(m: &Message, media: impl Fn(usize) -> Option<String>, anthropic: bool) -> String {
    let kind = match m.role {
        Role::User => "human",
        Role::Assistant => "ai",
        Role::System => "system",
        Role::Tool => "tool",
    };
    let mut content: Vec<String> = Vec::new();
    if has_string_content(m) && m.role != Role::Tool {
        let text = m.text();
        if !text.is_empty() {
            content.push(escape(&text));
        }
    } else {
        for (i, part) in m.parts.iter().enumerate() {
            match part {
                Part::Text { text } | Part::ToolResult { text, .. } if !text.is_empty() => content.push(escape(text)),
                Part::Reasoning { text } if !anthropic && !text.is_empty() => {
                    content.push(format!("<reasoning>{}</reasoning>", escape(text)));
                }
                Part::Media { .. } => content.extend(media(i)),
                _ => {}
            }
        }
    }
    if m.role == Role::Assistant && m.has_tool_calls() {
        let mut lines = vec![format!("<message type={}>", quoteattr(kind))];
        if !content.is_empty() {
            lines.push(format!("  <content>{}</content>", content.join(" ")));
        }
        for part in &m.parts {
            if let Part::ToolCall { id, name, args } = part {
                lines.push(format!(
                    "  <tool_call id={} name={}>{}</tool_call>",
                    quoteattr(&display_id(id)),
                    quoteattr(name),
                    escape(&json_dumps(args))
                ));
            }
        }
        lines.push("</message>".into());
        lines.join("\n")
    } else {
        format!("<message type={}>{}</message>", quoteattr(kind), content.join(" "))
    }
}

fn display_id(id: &str) -> String {
    if id.chars().count() > TOOL_CALL_ID_DISPLAY_LIMIT {
        format!("{}...", id.chars().take(TOOL_CALL_ID_DISPLAY_LIMIT).collect::<String>())
    } else {
        id.to_owned()
    }
}

/// `xml.sax.saxutils.escape`.
pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// `xml.sax.saxutils.quoteattr`.
pub(crate) fn quoteattr(s: &str) -> String {
    let mut data = escape(s).replace('\n', "&#10;").replace('\r', "&#13;").replace('\t', "&#9;");
    if data.contains('"') {
        if data.contains('\'') {
            data = data.replace('"', "&quot;");
            format!("\"{data}\"")
        } else {
            format!("'{data}'")
        }
    } else {
        format!("\"{data}\"")
    }
}

/// Python `json.dumps(value, ensure_ascii=False)`: `", "` and `": "` separators.
pub(crate) fn json_dumps(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "null".into(),
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::String(s) => json_str(s),
        serde_json::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(json_dumps).collect();
            format!("[{}]", items.join(", "))
        }
        serde_json::Value::Object(map) => {
            let items: Vec<String> = map.iter().map(|(k, v)| format!("{}: {}", json_str(k), json_dumps(v))).collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
