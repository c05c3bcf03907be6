//! Exporter: our log as Gemini CLI's chat history (`GeminiChat` of `@google/gemini-cli-core`).
//!
//! The history is the log's view (Gemini CLI's strategy projects the default way), so earlier
//! compressions appear as Gemini CLI leaves them: the `<state_snapshot>` summary as a user
//! entry, the "Got it." acknowledgement as a model entry, then the kept entries (with
//! truncated or masked outputs as replaced). The session is an object:
//! - `systemInstruction`: the leading system messages' text (Gemini CLI keeps its system prompt
//!   out of the history);
//! - `contents`: one Gemini `Content` per remaining view message, in order: assistant messages
//!   are `model` entries, everything else `user` entries (tool results as `functionResponse`
//!   parts, `{output}` or `{error}` as `createFunctionResponsePart` / `createErrorResponse`
//!   write them; a later system message as a text part). Consecutive tool messages stay
//!   separate `Content`s so that every native index is one of our entries; `getHistory`
//!   coalesces same-role neighbours for every model the bench runs, so the history the
//!   original reads is the one batch entry Gemini CLI records;
//! - `pending`: the index where the request being sent starts (the messages after the newest
//!   assistant message); `sendMessageStream` checks compression before adding them;
//! - `usage`: `usageMetadata` of the model replies received since the history was last
//!   replaced (`promptTokenCount` counts cached tokens too). `GeminiChat` keeps the newest as
//!   `lastPromptTokenCount`; a compression (`startChat`), truncation or masking (`setHistory`)
//!   resets it to the estimate of the new history, which is what a chat built from `contents`
//!   without any reply estimates;
//! - `shellTools`: the tool names of the session that Gemini CLI's shell tool
//!   (`run_shell_command`) stands for. Glue of ours, stated here: our sessions name the shell
//!   tool as other harnesses do, and our crate maps them through `tool_kind`, so the driver
//!   runs the original's tool-time truncation on exactly those results;
//! - `fileSuffixes`: per content, the suffix our crate gives a masked output's file in place of
//!   the original's random one (the entry id). Glue of ours: the driver names the original's
//!   files so, since whether masking saves tokens turns on the snippet's length.
//!
//! A model reply is recorded the way `GeminiChat.processStreamResponse` records it: thought
//! parts are filtered out of the stream and adjacent text parts are joined into one.
//! Call and response ids are stored as `{name}__{id}` (`Turn.handlePendingFunctionCall` and
//! the stream consolidation prefix them; only main-loop requests strip the prefix), as the
//! black-box run of the CLI 0.61.0 recorded them in its compression requests.

use compactbench_core::tools::{tool_kind, ToolKind};
use compactbench_core::{default_projection, CheckpointKind, EntryId, Message, Origin, Part, Role};
use serde_json::{json, Value};

use crate::{Case, Export};

pub(crate) fn export(case: &Case) -> Result<Export, String> {
    // Replies older than the newest history replacement no longer set `lastPromptTokenCount`.
    let reset = case
        .log
        .checkpoints()
        .rev()
        .find(|(_, cp)| matches!(cp.kind, CheckpointKind::Summary | CheckpointKind::Truncate | CheckpointKind::Mask))
        .map(|(id, _)| id);
    let view = default_projection(&case.log);
    let mut system = Vec::new();
    let mut contents = Vec::new();
    let mut ids = Vec::new();
    let mut usage = Vec::new();
    let mut pending = 0;
    for vm in &view.messages {
        let m = &vm.message;
        if m.role == Role::System && contents.is_empty() {
            system.extend(m.parts.iter().filter_map(|p| match p {
                Part::Text { text } => Some(text.clone()),
                _ => None,
            }));
            continue;
        }
        let id = match vm.origin {
            Origin::Entry(e) | Origin::Replaced(e, _) => e,
            Origin::Summary(cp) | Origin::Injected(cp) => cp,
        };
        if m.role == Role::Assistant {
            pending = contents.len() + 1;
            let fresh = matches!(vm.origin, Origin::Entry(_) | Origin::Replaced(..)) && reset.is_none_or(|r| id > r);
            if let Some(u) = m.usage.filter(|_| fresh) {
                let mut meta = json!({ "promptTokenCount": u.prompt(), "candidatesTokenCount": u.output });
                if u.cache_read > 0 {
                    meta["cachedContentTokenCount"] = json!(u.cache_read);
                }
                usage.push(json!({ "index": contents.len(), "usageMetadata": meta }));
            }
        }
        contents.push(content(m));
        ids.push(id);
    }
    let session = json!({
        "systemInstruction": system.join("\n\n"),
        "contents": contents,
        "pending": pending,
        "usage": usage,
        "shellTools": shell_tools(&view.messages),
        "fileSuffixes": ids.iter().map(ToString::to_string).collect::<Vec<_>>(),
    });
    Ok(Export { session, ids: ids.into_iter().collect::<Vec<EntryId>>(), settings: json!({}) })
}

/// The names of the session's tools that our crate takes for the shell tool, sorted.
fn shell_tools(messages: &[compactbench_core::ViewMessage]) -> Vec<&str> {
    let mut names: Vec<&str> = messages
        .iter()
        .flat_map(|vm| &vm.message.parts)
        .filter_map(|p| match p {
            Part::ToolCall { name, .. } | Part::ToolResult { name, .. } if tool_kind(name) == ToolKind::Shell => Some(name.as_str()),
            _ => None,
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// One message as a Gemini `Content`.
fn content(m: &Message) -> Value {
    let role = if m.role == Role::Assistant { "model" } else { "user" };
    let mut parts: Vec<Value> = Vec::new();
    for p in &m.parts {
        let part = match p {
            // Thoughts never reach Gemini CLI's history (`processStreamResponse` filters them).
            Part::Reasoning { .. } if m.role == Role::Assistant => continue,
            Part::Text { text } | Part::Reasoning { text } => {
                if m.role == Role::Assistant {
                    // Adjacent text parts of a reply are joined into one (`lastPart?.text && …`:
                    // not onto an empty one).
                    if let Some(Value::String(last)) =
                        parts.last_mut().and_then(|l| l.get_mut("text")).filter(|t| t.as_str().is_some_and(|t| !t.is_empty()))
                    {
                        last.push_str(text);
                        continue;
                    }
                }
                json!({ "text": text })
            }
            Part::ToolCall { id, name, args } => json!({ "functionCall": { "id": stored_id(name, id), "name": name, "args": args } }),
            Part::ToolResult { call_id, name, text, is_error } => {
                let key = if *is_error { "error" } else { "output" };
                json!({ "functionResponse": { "id": stored_id(name, call_id), "name": name, "response": { key: text } } })
            }
            // Only the size of media is known: base64 data of four characters per token.
            Part::Media { mime, tokens } => {
                json!({ "inlineData": { "mimeType": mime, "data": "A".repeat(4 * *tokens as usize) } })
            }
        };
        parts.push(part);
    }
    json!({ "role": role, "parts": parts })
}

/// The id Gemini CLI stores for a call or its response (see the module docs).
fn stored_id(name: &str, id: &str) -> String {
    let name = match name.trim() {
        "" => "generic_tool",
        n => n,
    };
    if id.is_empty() || id.starts_with(&format!("{name}__")) {
        id.to_owned()
    } else {
        format!("{name}__{id}")
    }
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Log, ModelProfile, Shape, Usage};
    use expect_test::expect;

    use super::*;

    fn case(log: Log) -> Case {
        let model = ModelProfile {
            name: "claude-sonnet-4".into(),
            window: 10_000,
            max_output: 1_000,
            provider: Shape::Anthropic,
            pricing: Default::default(),
        };
        Case::new("t", log, model)
    }

    /// The shell tools are named for the driver's tool-time truncation, by our `tool_kind`.
    #[test]
    fn the_tools_taken_for_the_shell_are_named() {
        let log = Log::from_messages([
            Message::user("go"),
            Message::new(
                Role::Assistant,
                vec![
                    Part::ToolCall { id: "a".into(), name: "bash".into(), args: json!({}) },
                    Part::ToolCall { id: "b".into(), name: "read".into(), args: json!({}) },
                ],
            ),
            Message::tool_result("a", "bash", "ok", false),
            Message::tool_result("b", "read", "text", false),
        ]);
        assert_eq!(export(&case(log)).unwrap().session["shellTools"], json!(["bash"]));
    }

    #[test]
    fn a_tool_round_exports_as_gemini_contents_with_the_request_pending() {
        let mut log = Log::new();
        log.push_message(Message::system("You are a coding agent."));
        log.push_message(Message::user("Fix the bug."));
        let mut call = Message::new(
            Role::Assistant,
            vec![
                Part::Reasoning { text: "think".into() },
                Part::text("Looking"),
                Part::text(" now."),
                Part::ToolCall { id: "c1".into(), name: "read_file".into(), args: json!({"path": "a.rs"}) },
            ],
        );
        call.usage = Some(Usage { input: 100, output: 20, cache_read: 50, ..Default::default() });
        log.push_message(call);
        log.push_message(Message::new(
            Role::Tool,
            vec![Part::ToolResult { call_id: "c1".into(), name: "read_file".into(), text: "fn main() {}".into(), is_error: false }],
        ));
        let e = export(&case(log)).unwrap();
        assert_eq!(e.ids, vec![EntryId(1), EntryId(2), EntryId(3)]);
        expect![[r#"{"systemInstruction":"You are a coding agent.","contents":[{"role":"user","parts":[{"text":"Fix the bug."}]},{"role":"model","parts":[{"text":"Looking now."},{"functionCall":{"id":"read_file__c1","name":"read_file","args":{"path":"a.rs"}}}]},{"role":"user","parts":[{"functionResponse":{"id":"read_file__c1","name":"read_file","response":{"output":"fn main() {}"}}}]}],"pending":2,"usage":[{"index":1,"usageMetadata":{"promptTokenCount":150,"candidatesTokenCount":20,"cachedContentTokenCount":50}}],"shellTools":[],"fileSuffixes":["e1","e2","e3"]}"#]]
        .assert_eq(&e.session.to_string());
    }

    #[test]
    fn a_compressed_history_exports_as_summary_ack_and_kept_entries() {
        use compactbench_core::{Checkpoint, SummaryPosition, Window};
        let mut log = Log::new();
        log.push_message(Message::system("sys"));
        log.push_message(Message::user("old task"));
        let mut old = Message::assistant("old answer");
        old.usage = Some(Usage { input: 900, output: 10, ..Default::default() });
        log.push_message(old);
        log.push_message(Message::user("new task"));
        let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::Kept(vec![EntryId(3)]))
            .with_summary(Message::user("<state_snapshot>s</state_snapshot>"));
        cp.summary_position = SummaryPosition::AfterSystem;
        cp.injected = vec![Message::assistant("Got it. Thanks for the additional context!")];
        log.push_checkpoint(cp);
        let e = export(&case(log.clone())).unwrap();
        // The reply before the compression no longer counts: no usage.
        assert_eq!(e.ids, vec![EntryId(4), EntryId(4), EntryId(3)]);
        expect![[r#"{"systemInstruction":"sys","contents":[{"role":"user","parts":[{"text":"<state_snapshot>s</state_snapshot>"}]},{"role":"model","parts":[{"text":"Got it. Thanks for the additional context!"}]},{"role":"user","parts":[{"text":"new task"}]}],"pending":2,"usage":[],"shellTools":[],"fileSuffixes":["e4","e4","e3"]}"#]]
        .assert_eq(&e.session.to_string());

        let mut reply = Message::assistant("done");
        reply.usage = Some(Usage { input: 200, output: 5, ..Default::default() });
        log.push_message(reply);
        log.push_message(Message::user("next"));
        let e = export(&case(log)).unwrap();
        assert_eq!(e.session["pending"], 4);
        assert_eq!(e.session["usage"], json!([{ "index": 3, "usageMetadata": { "promptTokenCount": 200, "candidatesTokenCount": 5 } }]));
    }
}
