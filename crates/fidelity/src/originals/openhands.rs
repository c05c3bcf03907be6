//! Exporter: our log to the OpenHands SDK's event stream (openhands-sdk 1.58.2,
//! `openhands/sdk/event/`).
//!
//! The SDK stores a conversation as events, each a pydantic model serialized with its `kind`
//! discriminator; the session we write is that list, which the driver reads back with
//! `Event.model_validate` and turns into a view with `View.from_events`, as the conversation
//! state does. One log message becomes:
//!
//! - the first system message: a `SystemPromptEvent` (no tools: the log has no schemas);
//! - a user message, an assistant reply without tool calls, a later system message: a
//!   `MessageEvent` (reasoning as Anthropic `thinking_blocks`);
//! - an assistant message with tool calls: one `ActionEvent` per call, all sharing the
//!   message's `llm_response_id`; the first carries the text (`thought`) and the reasoning
//!   (`thinking_blocks`), as the agent writes a batch (`action` is null: the log has no typed
//!   actions);
//! - a tool message: one `ObservationEvent` per result (an `MCPToolObservation`, the SDK's
//!   generic tool output, with `is_error`).
//!
//! Event ids are `e<n>`, `n` numbering events and condensations in log order, as our crate
//! numbers its stream (`crates/strategies/openhands/src/event.rs`), so a condensation our crate
//! recorded (`details.forgotten`: stream numbers) is written as the SDK's own `Condensation`
//! event: `forgotten_event_ids`, `summary`, `summary_offset`; a forgotten earlier summary is
//! the SDK's `<condensation id>-summary`.

use std::collections::HashMap;

use compactbench_core::{Entry, EntryId, Message, Part, Role};
use serde_json::{json, Value};

use crate::{Case, Export};

pub(crate) fn export(case: &Case) -> Result<Export, String> {
    let mut events = Vec::new();
    let mut ids = Vec::new();
    let mut next: u32 = 0;
    let mut seen_system = false;
    // Stream number of each condensation, by its checkpoint entry (for forgotten summaries).
    let mut condensations: HashMap<u64, u32> = HashMap::new();
    // Action event id of each call id (an observation names its action).
    let mut actions: HashMap<String, String> = HashMap::new();
    for (id, entry) in case.log.entries() {
        match entry {
            Entry::Checkpoint(cp) => {
                let d = &cp.details;
                if d.get("openhands").and_then(Value::as_str) != Some("condensation") || d.get("forgotten_range").is_some() {
                    return Err("a checkpoint that is not an SDK condensation".into());
                }
                let n = next;
                next += 1;
                condensations.insert(u64::from(id.0), n);
                let mut forgotten: Vec<String> = ints(d, "forgotten").into_iter().map(|k| format!("e{k}")).collect();
                for s in ints(d, "forgotten_summaries") {
                    let c = condensations.get(&(s as u64)).ok_or("a forgotten summary of an unknown condensation")?;
                    forgotten.push(format!("e{c}-summary"));
                }
                events.push(json!({
                    "kind": "Condensation",
                    "id": format!("e{n}"),
                    "source": "environment",
                    "forgotten_event_ids": forgotten,
                    "summary": cp.summary.as_ref().map(Message::text),
                    "summary_offset": d.get("summary_offset"),
                    "llm_response_id": format!("condensation-{n}"),
                }));
                ids.push(id);
            }
            Entry::Message(m) => {
                for event in message_events(id, m, &mut seen_system, &mut next, &mut actions)? {
                    events.push(event);
                    ids.push(id);
                }
            }
        }
    }
    Ok(Export { session: Value::Array(events), ids, settings: json!({}) })
}

fn ints(details: &Value, key: &str) -> Vec<i64> {
    details.get(key).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_i64).collect()).unwrap_or_default()
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

fn thinking(t: &str) -> Value {
    json!({"type": "thinking", "thinking": t})
}

/// The events of one log message, numbered from `next`.
fn message_events(
    entry: EntryId,
    m: &Message,
    seen_system: &mut bool,
    next: &mut u32,
    actions: &mut HashMap<String, String>,
) -> Result<Vec<Value>, String> {
    let mut take = || {
        let id = format!("e{next}");
        *next += 1;
        id
    };
    let mut texts = Vec::new();
    let mut reasoning = Vec::new();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for part in &m.parts {
        match part {
            Part::Text { text: t } => texts.push(text(t)),
            Part::Reasoning { text: t } => reasoning.push(thinking(t)),
            Part::ToolCall { id, name, args } => calls.push((id, name, args)),
            Part::ToolResult { call_id, name, text: t, is_error } => results.push((call_id, name, t, *is_error)),
            Part::Media { .. } => return Err(format!("media in entry {entry} (not exported)")),
        }
    }
    let response_id = format!("response-{}", entry.0);
    let out = match m.role {
        Role::System if !*seen_system => {
            *seen_system = true;
            let [Part::Text { text: prompt }] = m.parts.as_slice() else {
                return Err("a system prompt that is not one text part".into());
            };
            vec![json!({
                "kind": "SystemPromptEvent",
                "id": take(),
                "source": "agent",
                "system_prompt": text(prompt),
                "tools": [],
            })]
        }
        Role::Assistant if !calls.is_empty() => calls
            .iter()
            .enumerate()
            .map(|(k, (call_id, name, args))| {
                let id = take();
                actions.insert((*call_id).clone(), id.clone());
                let first = k == 0;
                json!({
                    "kind": "ActionEvent",
                    "id": id,
                    "source": "agent",
                    "thought": if first { texts.clone() } else { Vec::new() },
                    "thinking_blocks": if first { reasoning.clone() } else { Vec::new() },
                    "action": null,
                    "tool_name": name,
                    "tool_call_id": call_id,
                    "tool_call": {"id": call_id, "name": name, "arguments": args.to_string(), "origin": "completion"},
                    "llm_response_id": response_id,
                })
            })
            .collect(),
        Role::Tool => {
            if results.is_empty() || !texts.is_empty() || !reasoning.is_empty() {
                return Err(format!("a tool message that is not only results in entry {entry}"));
            }
            results
                .iter()
                .map(|(call_id, name, t, is_error)| {
                    json!({
                        "kind": "ObservationEvent",
                        "id": take(),
                        "source": "environment",
                        "tool_name": name,
                        "tool_call_id": call_id,
                        "observation": {"kind": "MCPToolObservation", "content": [text(t)], "is_error": is_error, "tool_name": name},
                        "action_id": actions.get(call_id.as_str()).cloned().unwrap_or_default(),
                    })
                })
                .collect()
        }
        role => {
            if !results.is_empty() {
                return Err(format!("a tool result outside a tool message in entry {entry}"));
            }
            let (source, llm_response_id) = match role {
                Role::User => ("user", Value::Null),
                Role::Assistant => ("agent", Value::String(response_id.clone())),
                _ => ("environment", Value::Null),
            };
            vec![json!({
                "kind": "MessageEvent",
                "id": take(),
                "source": source,
                "llm_message": {"role": role.as_str(), "content": texts, "thinking_blocks": reasoning},
                "llm_response_id": llm_response_id,
            })]
        }
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Checkpoint, CheckpointKind, Log, ModelProfile, Shape, Window};
    use expect_test::expect;

    use super::*;

    fn case(log: Log) -> Case {
        let model = ModelProfile { name: "m".into(), window: 100_000, max_output: 8_192, provider: Shape::Anthropic, pricing: Default::default() };
        Case::new("t", log, model)
    }

    fn turn(log: &mut Log, n: u32) {
        log.push_message(Message::new(Role::User, vec![Part::text(format!("ask {n}"))]));
        log.push_message(Message::new(
            Role::Assistant,
            vec![
                Part::Reasoning { text: "hm".into() },
                Part::text("looking"),
                Part::ToolCall { id: format!("a{n}"), name: "read".into(), args: json!({"path": "a.rs"}) },
                Part::ToolCall { id: format!("b{n}"), name: "grep".into(), args: json!({"q": "x"}) },
            ],
        ));
        log.push_message(Message::tool_result(format!("a{n}"), "read", "fn main() {}", false));
        log.push_message(Message::tool_result(format!("b{n}"), "grep", "denied", true));
    }

    #[test]
    fn a_fresh_log_is_the_sdks_event_stream() {
        let mut log = Log::new();
        log.push_message(Message::new(Role::System, vec![Part::text("be brief")]));
        turn(&mut log, 1);
        log.push_message(Message::new(Role::Assistant, vec![Part::text("done")]));
        let e = export(&case(log)).unwrap();
        expect![[r#"
            {"kind":"SystemPromptEvent","id":"e0","source":"agent","system_prompt":{"type":"text","text":"be brief"},"tools":[]}
            {"kind":"MessageEvent","id":"e1","source":"user","llm_message":{"role":"user","content":[{"type":"text","text":"ask 1"}],"thinking_blocks":[]},"llm_response_id":null}
            {"kind":"ActionEvent","id":"e2","source":"agent","thought":[{"type":"text","text":"looking"}],"thinking_blocks":[{"type":"thinking","thinking":"hm"}],"action":null,"tool_name":"read","tool_call_id":"a1","tool_call":{"id":"a1","name":"read","arguments":"{\"path\":\"a.rs\"}","origin":"completion"},"llm_response_id":"response-2"}
            {"kind":"ActionEvent","id":"e3","source":"agent","thought":[],"thinking_blocks":[],"action":null,"tool_name":"grep","tool_call_id":"b1","tool_call":{"id":"b1","name":"grep","arguments":"{\"q\":\"x\"}","origin":"completion"},"llm_response_id":"response-2"}
            {"kind":"ObservationEvent","id":"e4","source":"environment","tool_name":"read","tool_call_id":"a1","observation":{"kind":"MCPToolObservation","content":[{"type":"text","text":"fn main() {}"}],"is_error":false,"tool_name":"read"},"action_id":"e2"}
            {"kind":"ObservationEvent","id":"e5","source":"environment","tool_name":"grep","tool_call_id":"b1","observation":{"kind":"MCPToolObservation","content":[{"type":"text","text":"denied"}],"is_error":true,"tool_name":"grep"},"action_id":"e3"}
            {"kind":"MessageEvent","id":"e6","source":"agent","llm_message":{"role":"assistant","content":[{"type":"text","text":"done"}],"thinking_blocks":[]},"llm_response_id":"response-5"}
        "#]]
        .assert_eq(&lines(&e.session));
        assert_eq!(e.ids, [0, 1, 2, 2, 3, 4, 5].map(EntryId));
    }

    #[test]
    fn our_condensations_are_the_sdks_condensation_events() {
        let mut log = Log::new();
        log.push_message(Message::new(Role::System, vec![Part::text("be brief")]));
        turn(&mut log, 1);
        let condensation = |forgotten: &[i64], summaries: &[u32], offset: usize| {
            let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::Kept(Vec::new()));
            cp.summary = Some(Message::user("sum"));
            cp.details = json!({"openhands": "condensation", "forgotten": forgotten, "forgotten_summaries": summaries, "summary_offset": offset});
            cp
        };
        log.push_checkpoint(condensation(&[1, 2, 3, 4, 5], &[], 1));
        turn(&mut log, 2);
        log.push_checkpoint(condensation(&[8, 9, 10], &[5], 1));
        let e = export(&case(log)).unwrap();
        let events = e.session.as_array().unwrap();
        let kinds: Vec<&str> = events.iter().map(|v| v["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds[6], "Condensation");
        assert_eq!(events[6]["id"], "e6");
        assert_eq!(events[6]["forgotten_event_ids"], json!(["e1", "e2", "e3", "e4", "e5"]));
        assert_eq!(events[7]["id"], "e7", "the condensation took a stream number");
        assert_eq!(events[12]["forgotten_event_ids"], json!(["e8", "e9", "e10", "e6-summary"]));
        assert_eq!(events[12]["summary"], "sum");
        assert_eq!(events[12]["summary_offset"], 1);
        assert_eq!(e.ids[6], EntryId(5));
        assert_eq!(e.ids[12], EntryId(10));
    }

    fn lines(session: &Value) -> String {
        session.as_array().unwrap().iter().map(|v| format!("{v}\n")).collect()
    }
}
