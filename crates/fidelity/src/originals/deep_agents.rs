//! Exporter: our log to a LangChain request as Deep Agents' summarization middleware sees it
//! in `wrap_model_call`: the system prompt apart (`ModelRequest.system_message`) and the raw
//! LangGraph state messages, both in LangChain's own serialized form (`messages_to_dict`:
//! `{"type": "human"|"ai"|"tool"|"system", "data": {...}}`), which the driver turns back into
//! message objects with `messages_from_dict`.
//!
//! Content follows what `count_tokens_approximately` sees in a real run: a plain string when the
//! message is one text (tool calls then live only in `tool_calls`), else a list of blocks —
//! `text`, `reasoning`, Anthropic-style `tool_use` (LangChain keeps the calls in the content as
//! well) and `image`. Assistant messages carry `usage_metadata` (LangChain's `input_tokens`
//! include cache reads) and `response_metadata.model_provider`, the provider of the case's
//! model, so the reported-usage trigger and the usage scaling apply as in a run where every
//! reply came from that model.
//!
//! Our checkpoints become the middleware's private state: the newest summary is the
//! `_summarization_event` (`cutoff_index` = first kept state index, `created_at_index` = state
//! length when it was made, `summary_message` = our summary text as a `HumanMessage` tagged
//! `lc_source: summarization`), and replacements overwrite the state messages as the original's
//! in-place writes do (tool results evicted at tool time, clipped tails). Replacements that only
//! drop reasoning from kept messages are left out: the original drops that reasoning itself,
//! from `created_at_index`. Evicted human messages (tagged in state, not replaced) are not
//! exported.
//!
//! The driver reports the filesystem middleware's evictions apart from `compact` (the
//! summarization middleware's action): which state messages it replaced and the text each then
//! holds, compared with our `tool_eviction` and `human_eviction` checkpoints
//! ([`filesystem_eviction`]). Known limits of that comparison:
//! - A human message evicted at an earlier request cannot be asked (the original keeps its full
//!   text in state, tagged `lc_evicted_to`, and shows a preview in every request; our log holds
//!   the stub as a replacement): such cases are not exported, so only an eviction of the newest
//!   human message at the asked request is compared.
//! - The original names that message's file with a random uuid; ours hashes its content.
//! - Our stubs paraphrase the original's wording (crate docs), so the texts of every eviction
//!   differ; the paths and the preview inside them are the original's.
//! - The overflow tail clip of the summarization middleware stays part of `compact`.

use std::collections::HashMap;

use compactbench_core::{Checkpoint, Entry, EntryId, Message, Part, Role, Shape, Window};
use serde_json::{json, Map, Value};

use crate::{Case, Export};

pub(crate) fn export(case: &Case) -> Result<Export, String> {
    let log = &case.log;
    let provider = match case.model.provider {
        Shape::Anthropic => "anthropic",
        Shape::OpenaiChat | Shape::OpenaiResponses => "openai",
        Shape::Gemini => "google_genai",
    };
    let mut replaced = HashMap::new();
    let mut anchor = None;
    for (id, entry) in log.entries() {
        let Entry::Checkpoint(cp) = entry else { continue };
        for r in &cp.replacements {
            let Some(before) = log.message(r.entry) else { continue };
            if before.role == Role::User {
                return Err("an evicted human message (the original tags it in state)".into());
            }
            if r.message != without_reasoning(before) {
                replaced.insert(r.entry, &r.message);
            }
        }
        match (&cp.window, &cp.summary) {
            (Window::Inherit, _) => {}
            (Window::From(first), Some(summary)) => anchor = Some((id, *first, summary, &cp.details)),
            _ => return Err("a checkpoint without a summary, or keeping a set".into()),
        }
    }
    let mut all = log.messages().peekable();
    // Our crate counts every leading system message as the system prompt; LangChain has one.
    let mut system = None;
    if let Some((_, m)) = all.next_if(|(_, m)| m.role == Role::System) {
        system = Some(message(m, provider, None)?);
    }
    if all.peek().is_some_and(|(_, m)| m.role == Role::System) {
        return Err("more than one leading system message".into());
    }
    let mut ids = Vec::new();
    let mut messages = Vec::new();
    for (id, m) in all {
        messages.push(message(replaced.get(&id).copied().unwrap_or(m), provider, Some(id))?);
        ids.push(id);
    }
    // State indices: how many state messages come before an entry.
    let index = |id: EntryId| ids.iter().filter(|&&i| i < id).count();
    let event = anchor.map(|(at, first, summary, details)| {
        let mut summary = message(summary, provider, None).expect("a summary is one text");
        summary["data"]["additional_kwargs"] = json!({ "lc_source": "summarization" });
        json!({
            "cutoff_index": index(first),
            "summary_message": summary,
            "file_path": details.pointer("/deep_agents/file_path"),
            "created_at_index": index(at),
            "session_id": details.pointer("/deep_agents/session_id"),
        })
    });
    Ok(Export {
        session: json!({ "system_message": system, "messages": messages, "event": event }),
        ids,
        settings: json!({
            "provider": provider,
            // `_get_approximate_token_counter`: 3.3 chars per token for `anthropic-chat*` models.
            "anthropic": case.model.provider == Shape::Anthropic,
        }),
    })
}

/// A rewrite of the filesystem middleware (a large tool result or human message evicted), by
/// the step our crate records on its checkpoint: what the driver reports as `rewritten`.
pub(crate) fn filesystem_eviction(cp: &Checkpoint) -> bool {
    matches!(cp.details.pointer("/deep_agents/step").and_then(Value::as_str), Some("tool_eviction" | "human_eviction"))
}

/// `m` without its reasoning parts.
fn without_reasoning(m: &Message) -> Message {
    let mut out = m.clone();
    out.parts.retain(|p| !matches!(p, Part::Reasoning { .. }));
    out
}

/// Whether LangChain would hold the content as one string: no content parts, or one text.
fn string_content(m: &Message) -> bool {
    let mut content = m.parts.iter().filter(|p| !matches!(p, Part::ToolCall { .. } | Part::ToolResult { .. }));
    matches!((content.next(), content.next()), (None, _) | (Some(Part::Text { .. }), None))
}

fn message(m: &Message, provider: &str, id: Option<EntryId>) -> Result<Value, String> {
    let results: Vec<&Part> = m.parts.iter().filter(|p| matches!(p, Part::ToolResult { .. })).collect();
    let string = string_content(m);
    let mut blocks = Vec::new();
    for part in &m.parts {
        match part {
            Part::Text { text } => blocks.push(json!({ "type": "text", "text": text })),
            Part::Reasoning { text } => blocks.push(json!({ "type": "reasoning", "reasoning": text })),
            Part::ToolCall { id, name, args } if !string => {
                blocks.push(json!({ "type": "tool_use", "id": id, "name": name, "input": args }));
            }
            Part::ToolCall { .. } => {}
            Part::ToolResult { text, .. } if !string => blocks.push(json!({ "type": "text", "text": text })),
            Part::ToolResult { .. } => {}
            Part::Media { mime, .. } if mime.starts_with("image/") => {
                blocks.push(json!({ "type": "image", "source_type": "base64", "mime_type": mime, "data": "" }));
            }
            Part::Media { mime, .. } => return Err(format!("{mime} media (our crate counts its provider size)")),
        }
    }
    let content = if string {
        // The one text, or a tool message's result.
        let text = m.parts.iter().find_map(|p| match p {
            Part::Text { text } | Part::ToolResult { text, .. } => Some(text.clone()),
            _ => None,
        });
        Value::String(text.unwrap_or_default())
    } else {
        Value::Array(blocks)
    };
    let mut data = Map::new();
    data.insert("content".into(), content);
    if let Some(id) = id {
        data.insert("id".into(), json!(format!("m{}", id.0)));
    }
    let kind = match m.role {
        Role::System => "system",
        Role::User => "human",
        Role::Assistant => {
            let calls: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall { id, name, args } => Some(json!({ "name": name, "args": args, "id": id, "type": "tool_call" })),
                    _ => None,
                })
                .collect();
            data.insert("tool_calls".into(), Value::Array(calls));
            data.insert("response_metadata".into(), json!({ "model_provider": provider }));
            if let Some(u) = m.usage {
                data.insert(
                    "usage_metadata".into(),
                    json!({
                        "input_tokens": u.prompt(),
                        "output_tokens": u.output,
                        "total_tokens": u.total(),
                        "input_token_details": { "cache_read": u.cache_read, "cache_creation": u.cache_write },
                    }),
                );
            }
            "ai"
        }
        Role::Tool => {
            let [Part::ToolResult { call_id, name, is_error, .. }] = results[..] else {
                return Err(format!("tool message with {} results", results.len()));
            };
            if m.parts.iter().any(|p| matches!(p, Part::Text { .. })) {
                return Err("tool message with text besides its result".into());
            }
            data.insert("tool_call_id".into(), json!(call_id));
            data.insert("name".into(), json!(name));
            data.insert("status".into(), json!(if *is_error { "error" } else { "success" }));
            "tool"
        }
    };
    if m.role != Role::Tool && !results.is_empty() {
        return Err(format!("{} message with tool results", m.role.as_str()));
    }
    data.insert("type".into(), json!(kind));
    Ok(json!({ "type": kind, "data": data }))
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Log, ModelProfile, Usage};

    use super::*;

    fn case(log: Log, provider: Shape) -> Case {
        let model = ModelProfile { name: "m".into(), window: 10_000, max_output: 1_000, provider, pricing: Default::default() };
        Case::new("t", log, model)
    }

    #[test]
    fn a_small_log_exports_as_langchain_message_dicts() {
        let mut answer = Message::new(
            Role::Assistant,
            vec![Part::text("reading"), Part::ToolCall { id: "c1".into(), name: "read_file".into(), args: json!({"file_path": "/a.py"}) }],
        );
        answer.usage = Some(Usage { input: 100, output: 20, cache_read: 50, ..Default::default() });
        let thinking = Message::new(
            Role::Assistant,
            vec![Part::Reasoning { text: "hmm".into() }, Part::ToolCall { id: "c2".into(), name: "ls".into(), args: json!({}) }],
        );
        let log = Log::from_messages([
            Message::system("sys"),
            Message::user("fix it"),
            answer,
            Message::tool_result("c1", "read_file", "x = 1", false),
            thinking,
        ]);
        let export = export(&case(log, Shape::Anthropic)).unwrap();
        assert_eq!(export.ids, vec![EntryId(1), EntryId(2), EntryId(3), EntryId(4)]);
        assert_eq!(export.settings, json!({"provider": "anthropic", "anthropic": true}));
        assert_eq!(
            export.session,
            json!({
                "system_message": {"type": "system", "data": {"content": "sys", "type": "system"}},
                "messages": [
                    {"type": "human", "data": {"content": "fix it", "id": "m1", "type": "human"}},
                    {"type": "ai", "data": {
                        "content": "reading", "id": "m2",
                        "tool_calls": [{"name": "read_file", "args": {"file_path": "/a.py"}, "id": "c1", "type": "tool_call"}],
                        "response_metadata": {"model_provider": "anthropic"},
                        "usage_metadata": {"input_tokens": 150, "output_tokens": 20, "total_tokens": 170, "input_token_details": {"cache_read": 50, "cache_creation": 0}},
                        "type": "ai"}},
                    {"type": "tool", "data": {"content": "x = 1", "id": "m3", "tool_call_id": "c1", "name": "read_file", "status": "success", "type": "tool"}},
                    {"type": "ai", "data": {
                        "content": [{"type": "reasoning", "reasoning": "hmm"}, {"type": "tool_use", "id": "c2", "name": "ls", "input": {}}],
                        "id": "m4",
                        "tool_calls": [{"name": "ls", "args": {}, "id": "c2", "type": "tool_call"}],
                        "response_metadata": {"model_provider": "anthropic"},
                        "type": "ai"}},
                ],
                "event": null,
            })
        );
    }

    /// A large tool result evicted before a request with room to spare: ours reports the
    /// eviction as the driver does, apart from `compact`, with the stub it wrote.
    #[test]
    fn an_eviction_alone_is_a_rewrite_not_a_compaction() {
        let big: String = (0..9_000).map(|i| format!("line {i} of the build output\n")).collect();
        let log = Log::from_messages([
            Message::system("sys"),
            Message::user("build it"),
            Message::tool_call("c1", "bash", json!({"command": "make"})),
            Message::tool_result("c1", "bash", big, false),
        ]);
        let mut case = case(log, Shape::Anthropic);
        case.model.window = 1_000_000;
        let strategy = compactbench_registry::find("deep-agents").unwrap();
        let ours = crate::ours::answer(strategy.as_ref(), &case, compactbench_core::Moment::BeforeRequest, filesystem_eviction, true);
        assert!(!ours.compact, "the summarization middleware has nothing to do");
        assert_eq!(ours.rewritten, Some(vec![EntryId(3)]));
        let text = &ours.rewritten_text.as_ref().unwrap()[&EntryId(3)];
        assert!(text.contains("/large_tool_results/c1") && text.contains("lines truncated"), "{text}");
        // The trigger fired for the eviction: counted as a compaction it would disagree.
        assert!(crate::ours::answer(strategy.as_ref(), &case, compactbench_core::Moment::BeforeRequest, filesystem_eviction, false).compact);
    }

    #[test]
    fn only_the_filesystem_middlewares_steps_are_its_evictions() {
        use compactbench_core::{Checkpoint, CheckpointKind};
        let step = |s: &str| {
            let mut cp = Checkpoint::new(CheckpointKind::Offload, Window::Inherit);
            cp.details = json!({"deep_agents": {"step": s}});
            cp
        };
        assert!(filesystem_eviction(&step("tool_eviction")) && filesystem_eviction(&step("human_eviction")));
        assert!(!filesystem_eviction(&step("tail_clip")) && !filesystem_eviction(&step("profile")));
    }

    #[test]
    fn several_results_in_one_tool_message_are_refused() {
        let mut two = Message::tool_result("a", "ls", "1", false);
        two.parts.push(Part::ToolResult { call_id: "b".into(), name: "ls".into(), text: "2".into(), is_error: false });
        let log = Log::from_messages([Message::user("hi"), two]);
        assert_eq!(export(&case(log, Shape::OpenaiChat)).unwrap_err(), "tool message with 2 results");
    }

    #[test]
    fn a_summary_checkpoint_becomes_the_summarization_event_and_replacements_the_state() {
        use compactbench_core::{Checkpoint, CheckpointKind, Replacement};
        let thinking = Message::new(Role::Assistant, vec![Part::Reasoning { text: "r".into() }, Part::text("a")]);
        let mut log = Log::from_messages([
            Message::system("sys"),                             // e0 (system prompt)
            Message::user("u1"),                                // e1 state 0
            Message::tool_call("c1", "bash", json!({})),        // e2 state 1
            Message::tool_result("c1", "bash", "big", false),   // e3 state 2
            thinking.clone(),                                   // e4 state 3
        ]);
        let mut evict = Checkpoint::new(CheckpointKind::Offload, Window::Inherit);
        evict.replacements.push(Replacement { entry: EntryId(3), message: Message::tool_result("c1", "bash", "stub", false) });
        log.push_checkpoint(evict); // e5
        let mut summary = Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(3))).with_summary(Message::user("S"));
        // Reasoning dropped from a kept message: the original does that itself.
        summary.replacements.push(Replacement { entry: EntryId(4), message: Message::assistant("a") });
        summary.details = json!({"deep_agents": {"file_path": "/conversation_history/session_x.md", "session_id": "session_x"}});
        log.push_checkpoint(summary); // e6
        log.push_message(Message::user("u2")); // e7 state 4
        let export = export(&case(log, Shape::Anthropic)).unwrap();
        assert_eq!(export.ids, vec![EntryId(1), EntryId(2), EntryId(3), EntryId(4), EntryId(7)]);
        let s = &export.session;
        assert_eq!(s["messages"][2]["data"]["content"], "stub");
        assert_eq!(s["messages"][3]["data"]["content"], json!([{"type": "reasoning", "reasoning": "r"}, {"type": "text", "text": "a"}]));
        assert_eq!(
            s["event"],
            json!({
                "cutoff_index": 2,
                "summary_message": {"type": "human", "data": {"content": "S", "type": "human", "additional_kwargs": {"lc_source": "summarization"}}},
                "file_path": "/conversation_history/session_x.md",
                "created_at_index": 4,
                "session_id": "session_x",
            })
        );
    }
}
