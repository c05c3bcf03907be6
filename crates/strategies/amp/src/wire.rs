//! Amp's native message shape for the draft and compaction requests: Anthropic Messages
//! objects, one per line \[assume: Amp runs Anthropic models by default\].

use compactbench_core::{Message, Part, Role};

fn role(role: Role) -> &'static str {
    match role {
        Role::Assistant => "assistant",
        // Tool results travel in user turns; a system notice inside the thread is user text.
        Role::User | Role::Tool | Role::System => "user",
    }
}

/// Appends `s` as a JSON string literal (quotes and escapes as `serde_json` writes them).
fn string(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(out, s).expect("writing to a Vec cannot fail");
}

fn block(out: &mut Vec<u8>, part: &Part) {
    let field = |out: &mut Vec<u8>, key: &str, value: &str| {
        out.extend_from_slice(b",\"");
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        string(out, value);
    };
    match part {
        Part::Text { text } => {
            out.extend_from_slice(br#"{"type":"text""#);
            field(out, "text", text);
        }
        Part::Reasoning { text } => {
            out.extend_from_slice(br#"{"type":"thinking""#);
            field(out, "thinking", text);
        }
        Part::ToolCall { id, name, args } => {
            out.extend_from_slice(br#"{"type":"tool_use""#);
            field(out, "id", id);
            field(out, "name", name);
            out.extend_from_slice(br#","input":"#);
            serde_json::to_writer(&mut *out, args).expect("writing to a Vec cannot fail");
        }
        Part::ToolResult { call_id, text, is_error, .. } => {
            out.extend_from_slice(br#"{"type":"tool_result""#);
            field(out, "tool_use_id", call_id);
            field(out, "content", text);
            if *is_error {
                out.extend_from_slice(br#","is_error":true"#);
            }
        }
        Part::Media { mime, tokens } => {
            out.extend_from_slice(br#"{"type":"image","source":{"type":"base64""#);
            field(out, "media_type", mime);
            out.extend_from_slice(format!(r#"}},"tokens":{tokens}"#).as_bytes());
        }
    }
    out.push(b'}');
}

/// Appends one message as one line of JSON: `{"role":..,"content":[blocks]}`. Written
/// directly rather than through a `serde_json::Value` (same bytes): Amp serializes the whole
/// thread at every compaction, and building the values was most of its time.
pub(crate) fn write_line(out: &mut Vec<u8>, message: &Message) {
    out.extend_from_slice(br#"{"role":"#);
    string(out, role(message.role));
    out.extend_from_slice(br#","content":["#);
    for (i, part) in message.parts.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        block(out, part);
    }
    out.extend_from_slice(b"]}");
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Message, Part, Role};
    use serde_json::json;

    fn line(message: &Message) -> String {
        let mut out = Vec::new();
        super::write_line(&mut out, message);
        String::from_utf8(out).unwrap()
    }

    /// The `serde_json::Value` form `line` must reproduce byte for byte.
    fn reference(message: &Message) -> String {
        let block = |part: &Part| match part {
            Part::Text { text } => json!({"type": "text", "text": text}),
            Part::Reasoning { text } => json!({"type": "thinking", "thinking": text}),
            Part::ToolCall { id, name, args } => json!({"type": "tool_use", "id": id, "name": name, "input": args}),
            Part::ToolResult { call_id, text, is_error: true, .. } => {
                json!({"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": true})
            }
            Part::ToolResult { call_id, text, .. } => json!({"type": "tool_result", "tool_use_id": call_id, "content": text}),
            Part::Media { mime, tokens } => json!({"type": "image", "source": {"type": "base64", "media_type": mime}, "tokens": tokens}),
        };
        json!({"role": super::role(message.role), "content": message.parts.iter().map(block).collect::<Vec<_>>()}).to_string()
    }

    #[test]
    fn lines_are_the_json_values_bytes() {
        let parts = vec![
            Part::text("say \"hi\"\n\tthen é😀 \u{1}"),
            Part::Reasoning { text: "think".into() },
            Part::ToolCall { id: "c1".into(), name: "grep".into(), args: json!({"pattern": "a\\b", "n": 2, "deep": {"x": [null, true]}}) },
            Part::ToolResult { call_id: "c1".into(), name: "grep".into(), text: "no matches".into(), is_error: true },
            Part::ToolResult { call_id: "c2".into(), name: "read".into(), text: "ok".into(), is_error: false },
            Part::Media { mime: "image/png".into(), tokens: 1200 },
        ];
        for role in [Role::System, Role::User, Role::Assistant, Role::Tool] {
            let m = Message::new(role, parts.clone());
            assert_eq!(line(&m), reference(&m));
        }
        assert_eq!(line(&Message::new(Role::User, vec![])), reference(&Message::new(Role::User, vec![])));
    }
}
