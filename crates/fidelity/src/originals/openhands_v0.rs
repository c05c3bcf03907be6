//! Exporter: our log to OpenHands V0's event stream (openhands-ai 1.0.0, `openhands/events/`,
//! the same files as All-Hands-AI/OpenHands@156d0686, which our crate's V0 side cites).
//!
//! V0 stores each event as the dict `openhands/events/serialization/event.py:event_to_dict`
//! writes (`action` or `observation`, `args` or `content` + `extras`, and the underscore keys
//! `id` and `source`); the driver reads each back with `event_from_dict`. One log message
//! becomes the events our crate expands it into (`crates/strategies/openhands/src/event.rs`),
//! as V0's own classes:
//!
//! - the first system message: a `SystemMessageAction` (`action: system`);
//! - a user message, an assistant reply without tool calls, a later system message: a
//!   `MessageAction` (`action: message`; source user, agent, environment);
//! - an assistant message with tool calls: one `MCPAction` per call (`call_tool_mcp`, V0's
//!   generic tool action, as our crate renders calls), the text as the first one's `thought`;
//! - a tool message: one `MCPObservation` per result (`mcp`), or an `ErrorObservation`
//!   (`error`) for a failed one.
//!
//! Calls and results carry the `tool_call_metadata` V0's function-calling agent gives them
//! (`agenthub/codeact_agent/function_calling.py`: each action of one model response names its
//! call and the whole response; the runtime copies it onto the call's observation), which V0's
//! message builder (`ConversationMemory.process_events`) pairs calls and results by.
//!
//! Event ids number events and condensations in log order from 0, as our crate's stream does
//! (`stream.rs`), so a condensation our crate recorded is V0's own `CondensationAction`
//! (`action: condensation`) with the same forgotten ids or inclusive id range, summary and
//! `summary_offset`. Each event also carries `compactbench_message`, the log message it comes
//! from, which the driver takes off before V0 reads the event: several events of one message
//! are one kept entry of ours.

use std::collections::HashMap;

use compactbench_core::{Entry, EntryId, Message, Part, Role};
use serde_json::{json, Value};

use crate::{Case, Export};

pub(crate) fn export(case: &Case) -> Result<Export, String> {
    let mut events = Vec::new();
    let mut ids = Vec::new();
    let mut next: i64 = 0;
    let mut seen_system = false;
    let mut metadata = HashMap::new();
    for (id, entry) in case.log.entries() {
        let mut push = |mut event: Value, next: &mut i64| {
            event["id"] = json!(*next);
            event["compactbench_message"] = json!(id.0);
            *next += 1;
            events.push(event);
            ids.push(id);
        };
        match entry {
            Entry::Checkpoint(cp) => {
                let d = &cp.details;
                if d.get("openhands").and_then(Value::as_str) != Some("condensation") {
                    return Err("a checkpoint that is not a V0 condensation".into());
                }
                if d.get("forgotten_summaries").and_then(Value::as_array).is_some_and(|a| !a.is_empty()) {
                    return Err("an SDK condensation forgetting a summary".into());
                }
                let range = d.get("forgotten_range").and_then(Value::as_array);
                let args = json!({
                    "forgotten_event_ids": if range.is_some() { Value::Null } else { d.get("forgotten").cloned().unwrap_or(Value::Null) },
                    "forgotten_events_start_id": range.and_then(|r| r.first()).cloned(),
                    "forgotten_events_end_id": range.and_then(|r| r.get(1)).cloned(),
                    "summary": cp.summary.as_ref().map(Message::text),
                    "summary_offset": d.get("summary_offset"),
                });
                push(json!({"source": "agent", "action": "condensation", "args": args, "message": ""}), &mut next);
            }
            Entry::Message(m) => {
                for event in message_events(id, m, &mut seen_system, &mut metadata)? {
                    push(event, &mut next);
                }
            }
        }
    }
    Ok(Export { session: Value::Array(events), ids, settings: json!({}) })
}

/// The V0 events of one log message (ids are given by the caller); `metadata` holds the
/// `tool_call_metadata` of every call so far, by call id, for its result.
fn message_events(entry: EntryId, m: &Message, seen_system: &mut bool, metadata: &mut HashMap<String, Value>) -> Result<Vec<Value>, String> {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for part in &m.parts {
        match part {
            Part::Text { text } => texts.push(text.as_str()),
            // V0's `MessageAction` has no reasoning field, and condensers never read it.
            Part::Reasoning { .. } => {}
            Part::ToolCall { id, name, args } => calls.push((id, name, args)),
            Part::ToolResult { call_id, name, text, is_error } => results.push((call_id, name, text, *is_error)),
            Part::Media { .. } => return Err(format!("media in entry {entry} (not exported)")),
        }
    }
    let text = texts.join("\n");
    let out = match m.role {
        Role::System if !*seen_system => {
            *seen_system = true;
            vec![json!({"source": "agent", "action": "system", "args": {"content": text}, "message": ""})]
        }
        Role::Assistant if !calls.is_empty() => {
            let arguments: Vec<Value> =
                calls.iter().map(|(_, _, args)| if args.is_object() { (*args).clone() } else { json!({"value": args}) }).collect();
            // The model response behind every call of this message, as litellm's `ModelResponse`.
            let tool_calls: Vec<Value> = calls
                .iter()
                .zip(&arguments)
                .map(|((id, name, _), arguments)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}))
                .collect();
            let message = json!({"role": "assistant", "content": text, "tool_calls": tool_calls});
            let response = json!({"id": format!("response-{}", entry.0), "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}]});
            calls
                .iter()
                .zip(arguments)
                .enumerate()
                .map(|(k, ((id, name, _), arguments))| {
                    let thought = if k == 0 { text.as_str() } else { "" };
                    let tool_call = json!({"function_name": name, "tool_call_id": id, "model_response": response, "total_calls_in_response": calls.len()});
                    metadata.insert((*id).clone(), tool_call.clone());
                    json!({"source": "agent", "action": "call_tool_mcp", "args": {"name": name, "arguments": arguments, "thought": thought}, "message": "", "tool_call_metadata": tool_call})
                })
                .collect()
        }
        Role::Tool => {
            if results.is_empty() || !texts.is_empty() {
                return Err(format!("a tool message that is not only results in entry {entry}"));
            }
            results
                .iter()
                .map(|(call_id, name, content, is_error)| {
                    let mut event = if *is_error {
                        json!({"source": "environment", "observation": "error", "content": content, "extras": {"error_id": ""}, "message": ""})
                    } else {
                        json!({"source": "environment", "observation": "mcp", "content": content, "extras": {"name": name, "arguments": {}}, "message": ""})
                    };
                    // A result whose call is not in the log has none (as a user-run command's).
                    if let Some(tool_call) = metadata.get(call_id.as_str()) {
                        event["tool_call_metadata"] = tool_call.clone();
                    }
                    event
                })
                .collect()
        }
        role => {
            if !results.is_empty() {
                return Err(format!("a tool result outside a tool message in entry {entry}"));
            }
            let source = match role {
                Role::User => "user",
                Role::Assistant => "agent",
                _ => "environment",
            };
            vec![json!({"source": source, "action": "message", "args": {"content": text}, "message": ""})]
        }
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Checkpoint, CheckpointKind, Log, ModelProfile, Shape, Window};

    use super::*;

    fn case(log: Log) -> Case {
        let model = ModelProfile { name: "m".into(), window: 100_000, max_output: 8_192, provider: Shape::Anthropic, pricing: Default::default() };
        Case::new("t", log, model)
    }

    #[test]
    fn events_and_condensations_share_one_numbering() {
        let mut log = Log::new();
        log.push_message(Message::new(Role::System, vec![Part::text("be brief")]));
        log.push_message(Message::user("ask"));
        log.push_message(Message::new(
            Role::Assistant,
            vec![
                Part::text("looking"),
                Part::ToolCall { id: "a".into(), name: "read".into(), args: json!({"path": "a.rs"}) },
                Part::ToolCall { id: "b".into(), name: "grep".into(), args: json!({"q": "x"}) },
            ],
        ));
        log.push_message(Message::tool_result("a", "read", "fn main() {}", false));
        log.push_message(Message::tool_result("b", "grep", "denied", true));
        let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::Kept(Vec::new()));
        cp.summary = Some(Message::user("sum"));
        cp.details = json!({"openhands": "condensation", "forgotten_range": [2, 4], "summary_offset": 1});
        log.push_checkpoint(cp);
        log.push_message(Message::user("more"));
        let e = export(&case(log)).unwrap();
        let events = e.session.as_array().unwrap();
        let kinds: Vec<&str> = events.iter().map(|v| v.get("action").or(v.get("observation")).unwrap().as_str().unwrap()).collect();
        assert_eq!(kinds, ["system", "message", "call_tool_mcp", "call_tool_mcp", "mcp", "error", "condensation", "message"]);
        assert_eq!(events[2]["args"]["thought"], "looking");
        assert_eq!(events[3]["args"]["thought"], "");
        assert_eq!(events[6]["id"], 6);
        assert_eq!(events[6]["args"]["forgotten_events_start_id"], 2);
        assert_eq!(events[6]["args"]["forgotten_events_end_id"], 4);
        assert_eq!(events[6]["args"]["summary"], "sum");
        assert_eq!(events[7]["id"], 7);
        assert_eq!(e.ids, [0, 1, 2, 2, 3, 4, 5, 6].map(EntryId));
        assert_eq!(events[3]["compactbench_message"], 2);
        // Each call and its result carry the call's metadata, with the whole response.
        let response = &events[3]["tool_call_metadata"]["model_response"];
        assert_eq!(response["id"], "response-2");
        assert_eq!(response["choices"][0]["message"]["tool_calls"][0]["id"], "a");
        assert_eq!(events[2]["tool_call_metadata"]["tool_call_id"], "a");
        assert_eq!(events[5]["tool_call_metadata"], events[3]["tool_call_metadata"]);
        assert_eq!(events[4]["tool_call_metadata"]["total_calls_in_response"], 2);
    }
}
