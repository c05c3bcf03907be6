//! Exporter: our log as the request `@cline/core`'s `prepareTurn` hook receives before a model
//! call (checks `cline/sdk`). The session is an object:
//! - `systemPrompt`: the leading system messages, joined by a blank line;
//! - `messages`: the log messages after them as the CLI's runtime stores them and hands them to
//!   the hook, our crate's `stored_messages` (ids, timestamps, model info and metrics of their
//!   formats' lengths, one message per tool result): assistant messages are `assistant`, every
//!   other role `user`;
//! - `apiMessages`: the same as sent, our crate's `api_transcript` (the typed prompt unwrapped,
//!   a reply's tool results in one message);
//! - `previousRequestInputTokens`: the provider's input count (uncached + cache reads) of the
//!   newest reply with usage since the newest user message, the runtime's
//!   `lastRequestInputTokens` (reset when a run starts); null when there is none;
//! - `tools`: glue, not the CLI's tools: one stand-in tool whose `JSON.stringify` length is our
//!   crate's `tool_definitions_chars` (the CLI 3.0.65's 25 tools by default). The hook reads its
//!   `tools` only through that JSON text's length (`estimateRequestInputTokens`), so the original
//!   counts the same tool definitions our crate counts;
//! - `maxInputTokens`: the model info's input limit as the CLI 3.0.65 fills it (its provider
//!   settings' `contextWindow`, the case's window) where our crate's `max_input_is_window` is
//!   on (the default), else null (the model reports none).
//!
//! Checkpoints are refused: our cases are cut from fresh replays only (`history: false`).
//!
//! Circular part: `messages` and `apiMessages` are written by our crate's own functions, so this
//! check does not test how the crate lays a message out, only what the SDK's estimator and cut do
//! with the layout. The layout is checked apart, against the CLI itself: in its 55 black-box runs
//! the CLI's own compaction diagnostics (`CLINE_LOG_LEVEL=debug`: request, sent-message and
//! stored-message estimates) equal our crate's on all 314 requests up to a compaction.

use compactbench_core::{Entry, EntryId, Role};
use compactbench_strategy_cline::{api_transcript, stored_messages, SdkConfig};
use serde_json::{json, Value};

use crate::{Case, Export};

pub(crate) fn export(case: &Case) -> Result<Export, String> {
    let config = SdkConfig::default();
    let (model, provider) = (case.model.name.as_str(), config.provider_id.as_str());
    let mut system = Vec::new();
    let mut messages = Vec::new();
    let mut sent = Vec::new();
    let mut ids: Vec<EntryId> = Vec::new();
    for (id, entry) in case.log.entries() {
        let Entry::Message(m) = entry else { return Err("checkpoints of ours are not exported to the SDK's compaction state".into()) };
        if messages.is_empty() && m.role == Role::System {
            system.push(m.text());
            continue;
        }
        for stored in stored_messages(m, model, provider) {
            messages.push(stored);
            ids.push(id);
        }
        sent.push(m);
    }
    let api = api_transcript(sent, model, provider);
    let mut previous = Value::Null;
    for (_, m) in case.log.messages().rev() {
        if m.role == Role::User {
            break;
        }
        if let Some(u) = m.usage.filter(|u| m.role == Role::Assistant && u.total() > 0) {
            previous = json!(u.prompt());
            break;
        }
    }
    let tools = tools(config.tool_definitions_chars)?;
    let max_input = if config.max_input_is_window { json!(case.model.window) } else { Value::Null };
    let session = json!({
        "systemPrompt": system.join("\n\n"),
        "messages": messages,
        "apiMessages": api,
        "previousRequestInputTokens": previous,
        "tools": tools,
        "maxInputTokens": max_input,
    });
    Ok(Export { session, ids, settings: json!({}) })
}

/// A tool list whose JSON text is `chars` UTF-16 units long (`[]` for 2).
fn tools(chars: usize) -> Result<Value, String> {
    let tool = |description: String| json!([{ "name": "compactbench_tools", "description": description }]);
    let frame = tool(String::new()).to_string().len();
    match chars {
        2 => Ok(json!([])),
        _ if chars >= frame => Ok(tool("x".repeat(chars - frame))),
        _ => Err(format!("no stand-in tool list is {chars} characters of JSON")),
    }
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Checkpoint, CheckpointKind, Log, Message, ModelProfile, Part, Pricing, Shape, Usage, Window};
    use expect_test::expect;

    use super::*;

    fn case(log: Log) -> Case {
        let model = ModelProfile { name: "m".into(), window: 1000, max_output: 100, provider: Shape::Anthropic, pricing: Pricing::default() };
        Case::new("t", log, model)
    }

    #[test]
    fn a_tool_round_exports_as_sdk_messages_with_the_runs_last_input_count() {
        let mut log = Log::new();
        log.push_message(Message::system("sys"));
        log.push_message(Message::new(Role::User, vec![Part::text("Fix it.")]));
        let mut a = Message::new(Role::Assistant, vec![Part::ToolCall { id: "c1".into(), name: "read_files".into(), args: json!({"files": [{"path": "a.rs"}]}) }]);
        a.usage = Some(Usage { input: 100, output: 20, cache_read: 50, ..Default::default() });
        log.push_message(a);
        log.push_message(Message::new(Role::Tool, vec![Part::ToolResult { call_id: "c1".into(), name: "read_files".into(), text: "fn main() {}".into(), is_error: false }]));
        let mut e = export(&case(log.clone())).unwrap();
        assert_eq!(e.ids, [EntryId(1), EntryId(2), EntryId(3)]);
        // The stand-in tools: as long as the CLI's as JSON.
        let tools = e.session.as_object_mut().unwrap().remove("tools").unwrap();
        assert_eq!(tools.to_string().len(), compactbench_strategy_cline::CLI_TOOL_DEFINITIONS_CHARS);
        assert_eq!(super::tools(2).unwrap().to_string(), "[]");
        assert_eq!(e.session.as_object_mut().unwrap().remove("maxInputTokens").unwrap(), json!(1000));
        expect![[r#"{"systemPrompt":"sys","messages":[{"id":"00000000-0000-4000-8000-000000000000","role":"user","content":[{"type":"text","text":"<user_input mode=\"act\">Fix it.</user_input>"}],"ts":1700000000000},{"id":"msg_00000000","role":"assistant","content":[{"type":"tool_use","id":"c1","name":"read_files","input":{"files":[{"path":"a.rs"}]}}],"ts":1700000000000,"modelInfo":{"id":"m","provider":"openai-compatible"},"metrics":{"inputTokens":100,"outputTokens":20,"cacheReadTokens":50,"cacheWriteTokens":0}},{"id":"msg_00000000","role":"user","content":[{"type":"tool_result","tool_use_id":"c1","name":"read_files","content":"fn main() {}"}],"ts":1700000000000}],"apiMessages":[{"id":"00000000-0000-4000-8000-000000000000","role":"user","content":[{"type":"text","text":"Fix it."}],"ts":1700000000000},{"id":"msg_00000000","role":"assistant","content":[{"type":"tool_use","id":"c1","name":"read_files","input":{"files":[{"path":"a.rs"}]}}],"ts":1700000000000,"modelInfo":{"id":"m","provider":"openai-compatible"},"metrics":{"inputTokens":100,"outputTokens":20,"cacheReadTokens":50,"cacheWriteTokens":0}},{"id":"msg_00000000","role":"user","content":[{"type":"tool_result","tool_use_id":"c1","name":"read_files","content":"fn main() {}"}],"ts":1700000000000}],"previousRequestInputTokens":150}"#]]
        .assert_eq(&e.session.to_string());
        // A new prompt starts a run: no input count yet.
        log.push_message(Message::new(Role::User, vec![Part::text("Next.")]));
        assert_eq!(export(&case(log.clone())).unwrap().session["previousRequestInputTokens"], Value::Null);
        log.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(1))));
        assert!(export(&case(log)).is_err());
    }
}
