//! Exporter: our log to oh-my-pi's session branch (`SessionEntry[]` of `@oh-my-pi/pi-agent-core`
//! `compaction/entries.ts`, messages as in `@oh-my-pi/pi-ai`), the shape `prepareCompaction`
//! and the session's token accounting read.
//!
//! - The log's leading system messages are oh-my-pi's system prompt, which lives outside the
//!   session: `systemPrompt` holds their text parts, one string each (`computeNonMessageTokens`
//!   counts those parts as separate fragments).
//! - Every other message is one `{"type": "message"}` entry, except a tool message, which
//!   becomes one `toolResult` message per result (oh-my-pi stores one result per message); all
//!   of them map back to the same entry of ours.
//! - A later system message is oh-my-pi's `developer` role (counted like a user message, never a
//!   cut point).
//! - A reply marked failed ([`Message::failure`](compactbench_core::Message::failure)) is
//!   `stopReason` `"aborted"` or `"error"` with the usage it reported (partial, or all zero);
//!   an assistant message without usage (or with all-zero usage) and no marker is a failed
//!   reply too: `stopReason: "error"` with zero usage. oh-my-pi skips the usage of both
//!   wherever it reads usage.

use compactbench_core::{Checkpoint, Entry, Message, Part, Role};
use serde_json::{json, Value};

use super::pi::image;
use crate::{Case, Export};

pub(crate) fn export(case: &Case) -> Result<Export, String> {
    let mut system = Vec::new();
    let mut entries = Vec::new();
    let mut ids = Vec::new();
    let mut leading = true;
    for (id, entry) in case.log.entries() {
        let Entry::Message(m) = entry else {
            return Err("the log holds a checkpoint; oh-my-pi compaction entries are not exported".into());
        };
        if leading && m.role == Role::System {
            system.extend(m.parts.iter().filter_map(|p| match p {
                Part::Text { text } => Some(text.clone()),
                _ => None,
            }));
            continue;
        }
        leading = false;
        for message in messages(m) {
            let i = entries.len();
            let timestamp = 1_700_000_000_000u64 + i as u64 * 1000;
            let mut message = message;
            message["timestamp"] = json!(timestamp);
            entries.push(json!({
                "type": "message",
                "id": format!("e{i}"),
                "parentId": if i == 0 { Value::Null } else { json!(format!("e{}", i - 1)) },
                "timestamp": format!("2023-11-14T22:{:02}:{:02}.000Z", (i / 60) % 60, i % 60),
                "message": message,
            }));
            ids.push(id);
        }
    }
    Ok(Export { session: json!({ "systemPrompt": system, "entries": entries }), ids, settings: json!({}) })
}

/// A rewrite of the per-turn prune passes `checkCompaction` runs first (`#pruneStaleToolResults`,
/// `#pruneToolOutputs`), by the step our crate records on its checkpoint.
pub(crate) fn per_turn_prune(cp: &Checkpoint) -> bool {
    matches!(cp.details.get("step").and_then(Value::as_str), Some("supersede" | "prune-tool-outputs"))
}

/// One message of ours as oh-my-pi messages (several for a tool message with several results).
fn messages(m: &Message) -> Vec<Value> {
    match m.role {
        Role::User | Role::System => {
            let role = if m.role == Role::User { "user" } else { "developer" };
            vec![json!({ "role": role, "content": user_content(&m.parts) })]
        }
        Role::Assistant => vec![assistant(m)],
        Role::Tool => tool_results(&m.parts),
    }
}

fn user_content(parts: &[Part]) -> Vec<Value> {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } | Part::Reasoning { text } | Part::ToolResult { text, .. } => {
                Some(json!({ "type": "text", "text": text }))
            }
            Part::Media { mime, .. } => Some(image(mime)),
            Part::ToolCall { .. } => None,
        })
        .collect()
}

/// Its assistant messages are Pi's (model name fixed: oh-my-pi's estimates never read it).
fn assistant(m: &Message) -> Value {
    super::pi::assistant_message(m, "compactbench")
}

/// One `toolResult` message per result; text parts and images go with the result before them
/// (or the first one).
fn tool_results(parts: &[Part]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut loose = Vec::new();
    for p in parts {
        match p {
            Part::ToolResult { call_id, name, text, is_error } => out.push(json!({
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": [{ "type": "text", "text": text }],
                "isError": is_error,
            })),
            Part::Text { text } | Part::Reasoning { text } => loose.push((out.len(), json!({ "type": "text", "text": text }))),
            Part::Media { mime, .. } => loose.push((out.len(), image(mime))),
            Part::ToolCall { .. } => {}
        }
    }
    if out.is_empty() {
        out.push(json!({ "role": "toolResult", "toolCallId": "", "toolName": "", "content": [], "isError": false }));
    }
    for (after, block) in loose {
        let i = after.saturating_sub(1);
        out[i]["content"].as_array_mut().expect("content is an array").push(block);
    }
    out
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Checkpoint, CheckpointKind, EntryId, Log, ModelProfile, Pricing, Shape, Window};
    use expect_test::expect;

    use compactbench_core::Usage;

    use super::*;

    fn case(log: Log) -> Case {
        let model = ModelProfile {
            name: "m".into(),
            window: 1000,
            max_output: 100,
            provider: Shape::Anthropic,
            pricing: Pricing::default(),
        };
        Case::new("t", log, model)
    }

    #[test]
    fn a_small_log_exports_to_a_session_branch() {
        let mut log = Log::new();
        log.push_message(Message::system("sys"));
        log.push_message(Message::new(Role::User, vec![Part::text("read a")]));
        let mut a = Message::new(
            Role::Assistant,
            vec![Part::ToolCall { id: "c1".into(), name: "read".into(), args: json!({"path": "a"}) }, Part::ToolCall {
                id: "c2".into(),
                name: "read".into(),
                args: json!({"path": "b"}),
            }],
        );
        a.usage = Some(Usage { input: 10, output: 2, cache_read: 5, ..Default::default() });
        log.push_message(a);
        log.push_message(Message::new(
            Role::Tool,
            vec![
                Part::ToolResult { call_id: "c1".into(), name: "read".into(), text: "A".into(), is_error: false },
                Part::ToolResult { call_id: "c2".into(), name: "read".into(), text: "B".into(), is_error: true },
            ],
        ));
        log.push_message(Message::new(Role::Assistant, vec![Part::text("failed")]));
        let e = export(&case(log)).unwrap();
        assert_eq!(e.ids, [EntryId(1), EntryId(2), EntryId(3), EntryId(3), EntryId(4)]);
        let brief: Vec<String> = e.session["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                let m = &x["message"];
                format!("{} {} {} {} {}", x["id"], m["role"], m["stopReason"], m["usage"]["totalTokens"], m["content"])
            })
            .collect();
        expect![[r#"
            [
                "\"e0\" \"user\" null null [{\"type\":\"text\",\"text\":\"read a\"}]",
                "\"e1\" \"assistant\" \"toolUse\" 17 [{\"type\":\"toolCall\",\"id\":\"c1\",\"name\":\"read\",\"arguments\":{\"path\":\"a\"}},{\"type\":\"toolCall\",\"id\":\"c2\",\"name\":\"read\",\"arguments\":{\"path\":\"b\"}}]",
                "\"e2\" \"toolResult\" null null [{\"type\":\"text\",\"text\":\"A\"}]",
                "\"e3\" \"toolResult\" null null [{\"type\":\"text\",\"text\":\"B\"}]",
                "\"e4\" \"assistant\" \"error\" 0 [{\"type\":\"text\",\"text\":\"failed\"}]",
            ]
        "#]]
        .assert_debug_eq(&brief);
        assert_eq!(e.session["systemPrompt"], json!(["sys"]));
    }

    #[test]
    fn checkpoints_are_refused() {
        let mut log = Log::new();
        log.push_message(Message::new(Role::User, vec![Part::text("hi")]));
        log.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::Inherit));
        assert!(export(&case(log)).is_err());
    }
}
