//! Messages as Claude Code sends and stores them: Anthropic Messages JSON for the summarizer
//! fork, JSONL records for the transcript file.

use compactbench_core::{CheckpointKind, Entry, Log, Message, Part, Role};
use serde_json::{json, Value};

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
        // Images stay in the summarizer request since 2.1.70; documents are stripped (2.1.47).
        Part::Media { mime, tokens } if mime.starts_with("image/") => {
            json!({"type": "image", "source": {"type": "base64", "media_type": mime}, "tokens": tokens})
        }
        Part::Media { .. } => json!({"type": "text", "text": "[document]"}),
    }
}

/// One message as an Anthropic Messages API object.
pub(crate) fn message_json(message: &Message) -> Value {
    json!({"role": role(message.role), "content": message.parts.iter().map(block).collect::<Vec<_>>()})
}

/// Messages as the summarizer fork replays them: one JSON object per line.
pub(crate) fn transcript(messages: &[Message]) -> String {
    messages.iter().map(|m| message_json(m).to_string()).collect::<Vec<_>>().join("\n")
}

/// The session's transcript file: every log message as a JSONL record, and for each earlier
/// compaction its `compact_boundary` record and summary message.
pub(crate) fn transcript_file(log: &Log) -> String {
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
            // A micro-compaction leaves no record: the transcript keeps the full results.
            Entry::Checkpoint(_) => Vec::new(),
        };
        for r in records {
            out.push_str(&r.to_string());
            out.push('\n');
        }
    }
    out
}
