//! Messages as Claude Code sends and stores them: Anthropic Messages JSON for the summarizer
//! fork, JSONL records for the transcript file.
//!
//! The JSON is written directly rather than built as `serde_json::Value`s and printed: the
//! same bytes (the tests below compare with the `Value` form), without building a tree for
//! every message of the session at every compaction, which was most of the crate's own time.

use compactbench_core::{CheckpointKind, Entry, Log, Message, Part, Role};

/// Where the transcript file is written in the virtual store (\[assume\]: Claude Code writes
/// `~/.claude/projects/<cwd with dashes>/<session id>.jsonl`).
pub(crate) const TRANSCRIPT_PATH: &str = "~/.claude/projects/-workspace/session.jsonl";

fn role(role: Role) -> &'static str {
    match role {
        Role::Assistant => "assistant",
        // Tool results travel in user turns; a system notice in history is sent as user text.
        Role::User | Role::Tool | Role::System => "user",
    }
}

/// Appends `s` as a JSON string literal (quotes and escapes as `serde_json` writes them).
fn string(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(out, s).expect("writing to a Vec cannot fail");
}

/// Appends `,"key":` and `value` as a JSON string.
fn field(out: &mut Vec<u8>, key: &str, value: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
    string(out, value);
}

/// One content block, keys in the order the `Value` form lists them.
fn block(out: &mut Vec<u8>, part: &Part) {
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
        // Images stay in the summarizer request since 2.1.70; documents are stripped (2.1.47).
        Part::Media { mime, tokens } if mime.starts_with("image/") => {
            out.extend_from_slice(br#"{"type":"image","source":{"type":"base64""#);
            field(out, "media_type", mime);
            out.extend_from_slice(format!(r#"}},"tokens":{tokens}"#).as_bytes());
        }
        Part::Media { .. } => out.extend_from_slice(br#"{"type":"text","text":"[document]""#),
    }
    out.push(b'}');
}

/// One message as an Anthropic Messages API object: `{"role":..,"content":[blocks]}`.
fn message_json(out: &mut Vec<u8>, message: &Message) {
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

fn utf8(out: Vec<u8>) -> String {
    String::from_utf8(out).expect("JSON of valid strings is UTF-8")
}

/// Messages as the summarizer fork replays them: one JSON object per line.
pub(crate) fn transcript(messages: &[Message]) -> String {
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        message_json(&mut out, m);
    }
    utf8(out)
}

/// The session's transcript file as Claude Code appends to it: every log message as a JSONL
/// record (`{"type":role,"message":..}`), and for each compaction its `compact_boundary`
/// record and summary message. Every compaction writes it whole.
pub(crate) fn transcript_file(log: &Log) -> String {
    let mut out = Vec::new();
    for (_, entry) in log.entries() {
        match entry {
            Entry::Message(m) => {
                out.extend_from_slice(br#"{"type":"#);
                string(&mut out, role(m.role));
                out.extend_from_slice(br#","message":"#);
                message_json(&mut out, m);
                out.extend_from_slice(b"}\n");
            }
            Entry::Checkpoint(cp) if cp.kind == CheckpointKind::Summary => {
                out.extend_from_slice(b"{\"type\":\"system\",\"subtype\":\"compact_boundary\"}\n");
                if let Some(s) = &cp.summary {
                    out.extend_from_slice(br#"{"type":"user","isCompactSummary":true,"message":"#);
                    message_json(&mut out, s);
                    out.extend_from_slice(b"}\n");
                }
            }
            // A micro-compaction leaves no record: the transcript keeps the full results.
            Entry::Checkpoint(_) => {}
        }
    }
    utf8(out)
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Checkpoint, CheckpointKind, Entry, Log, Message, Part, Role, Window};
    use serde_json::{json, Value};

    use super::role;

    /// The `serde_json::Value` forms the writers must reproduce byte for byte.
    fn block(part: &Part) -> Value {
        match part {
            Part::Text { text } => json!({"type": "text", "text": text}),
            Part::Reasoning { text } => json!({"type": "thinking", "thinking": text}),
            Part::ToolCall { id, name, args } => json!({"type": "tool_use", "id": id, "name": name, "input": args}),
            Part::ToolResult { call_id, text, is_error, .. } => {
                if *is_error {
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": true})
                } else {
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": text})
                }
            }
            Part::Media { mime, tokens } if mime.starts_with("image/") => {
                json!({"type": "image", "source": {"type": "base64", "media_type": mime}, "tokens": tokens})
            }
            Part::Media { .. } => json!({"type": "text", "text": "[document]"}),
        }
    }

    fn message_json(message: &Message) -> Value {
        json!({"role": role(message.role), "content": message.parts.iter().map(block).collect::<Vec<_>>()})
    }

    fn transcript(messages: &[Message]) -> String {
        messages.iter().map(|m| message_json(m).to_string()).collect::<Vec<_>>().join("\n")
    }

    fn transcript_file(log: &Log) -> String {
        let mut out = String::new();
        for (_, entry) in log.entries() {
            let records = match entry {
                Entry::Message(m) => vec![json!({"type": role(m.role), "message": message_json(m)})],
                Entry::Checkpoint(cp) if cp.kind == CheckpointKind::Summary => {
                    let mut r = vec![json!({"type": "system", "subtype": "compact_boundary"})];
                    if let Some(s) = &cp.summary {
                        r.push(json!({"type": "user", "isCompactSummary": true, "message": message_json(s)}));
                    }
                    r
                }
                Entry::Checkpoint(_) => Vec::new(),
            };
            for r in records {
                out.push_str(&r.to_string());
                out.push('\n');
            }
        }
        out
    }

    fn messages() -> Vec<Message> {
        let parts = vec![
            Part::text("say \"hi\"\n\tthen é😀 \u{1}\u{7f}\u{2028}"),
            Part::Reasoning { text: "think \\ harder".into() },
            Part::ToolCall { id: "c1".into(), name: "Grep".into(), args: json!({"pattern": "a\\b", "n": 2, "deep": {"x": [null, true]}, "e": []}) },
            Part::ToolResult { call_id: "c1".into(), name: "Grep".into(), text: "no matches".into(), is_error: true },
            Part::ToolResult { call_id: "c2".into(), name: "Read".into(), text: String::new(), is_error: false },
            Part::Media { mime: "image/png".into(), tokens: 1200 },
            Part::Media { mime: "application/pdf".into(), tokens: 7 },
        ];
        let mut out: Vec<Message> = [Role::System, Role::User, Role::Assistant, Role::Tool]
            .into_iter()
            .map(|role| Message::new(role, parts.clone()))
            .collect();
        out.push(Message::new(Role::User, vec![]));
        out
    }

    #[test]
    fn transcripts_are_the_json_values_bytes() {
        let messages = messages();
        assert_eq!(super::transcript(&messages), transcript(&messages));
        assert_eq!(super::transcript(&[]), transcript(&[]));
        assert_eq!(super::transcript(&messages[..1]), transcript(&messages[..1]));
    }

    #[test]
    fn transcript_files_are_the_json_values_bytes() {
        let mut log = Log::from_messages(messages());
        let mut summary = Checkpoint::new(CheckpointKind::Summary, Window::Kept(Vec::new()));
        summary.summary = Some(Message::user("Summary:\n\"quoted\" é"));
        log.push_checkpoint(summary);
        log.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::Kept(Vec::new())));
        log.push_checkpoint(Checkpoint::new(CheckpointKind::Prune, Window::Inherit));
        log.push_message(Message::assistant("after"));
        assert_eq!(super::transcript_file(&log), transcript_file(&log));
        assert_eq!(super::transcript_file(&Log::default()), transcript_file(&Log::default()));
    }
}
