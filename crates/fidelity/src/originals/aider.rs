//! Exporter: our log as the session aider's own coder loop replays (`fidelity/aider/driver.py`),
//! not as the two lists our crate splits it into: which messages end up in `done_messages` and
//! which in `cur_messages`, and whether the turn's edits moved them, is decided by aider's
//! `Coder.send_message` / `apply_updates` / `move_back_cur_messages` in the driver.
//!
//! `session`:
//! - `done`: what an earlier compaction left as aider's done list (`[summary, tail…, "Ok."?]`).
//!   Aider keeps no record of a compaction, only that list, which our crate's projection
//!   rebuilds from the checkpoint (`details.layout`, `details.done`); the driver starts from it.
//! - `messages`: every later history message in order, as `{role, content}` the way our crate
//!   (`crates/strategies/aider/src/session.rs`) maps it: tool results are `user` messages, the
//!   content joins texts, tool calls as `name {json args}`, result texts and `[mime]` for media
//!   with newlines; reasoning is left out. `request`: a user message of the log (a new prompt,
//!   `Coder.run_one`), not a tool result. Assistant messages also carry `reply`, the text aider's
//!   model would write: the same content with each edit or write call written as the
//!   SEARCH/REPLACE blocks it amounts to (the strategy's chat shape, `Strategy::text_chat`, as
//!   the runner's `+text` rows write them, `compactbench_eval::shape::call_edits`), and
//!   `edits`: those blocks' paths and SEARCH texts with `applied` (the call got a non-error
//!   result), which the driver uses only to fill its scratch files so that the blocks the
//!   session applied match and the others fail, as they did.
//! - `synthetic`: the positions (in `done` then `messages`) that are no log messages
//!   (summaries, `Ok.`), which map to their checkpoint.
//!
//! Leading system messages are aider's system prompt, not history, so they are not exported.

use std::collections::HashMap;

use compactbench_core::{Checkpoint, Message, Origin, Part, Role, TextEdit, ViewMessage};
use compactbench_eval::shape::call_edits;
use serde_json::{json, Value};

use crate::{Case, Export};

pub(crate) fn export(case: &Case) -> Result<Export, String> {
    // After a compaction aider's done list is `[summary, tail…, "Ok."?]`; our crate's projection
    // rebuilds exactly that list (the checkpoint's `details.layout`), so it is what is exported.
    let strategy = compactbench_registry::find("aider").ok_or("the aider strategy is not registered")?;
    let chat = strategy.text_chat().ok_or("the aider strategy declares no chat shape")?;
    let view = strategy.project(&case.log);
    let history: Vec<&ViewMessage> = view
        .messages
        .iter()
        .skip_while(|vm| vm.message.role == Role::System && matches!(vm.origin, Origin::Entry(_)))
        .collect();
    let base = done_base(case).min(history.len());
    // Whether each call got a non-error result (the session's outcome of an edit).
    let applied: HashMap<&str, bool> = history
        .iter()
        .flat_map(|vm| &vm.message.parts)
        .filter_map(|p| match p {
            Part::ToolResult { call_id, is_error, .. } => Some((call_id.as_str(), !is_error)),
            _ => None,
        })
        .collect();

    let dict = |vm: &ViewMessage| json!({"role": role(vm.message.role), "content": content(&vm.message)});
    let done: Vec<Value> = history[..base].iter().map(|vm| dict(vm)).collect();
    let messages: Vec<Value> = history[base..]
        .iter()
        .map(|vm| {
            let mut out = dict(vm);
            out["request"] = json!(vm.message.role == Role::User && matches!(vm.origin, Origin::Entry(_)));
            if vm.message.role == Role::Assistant {
                let (reply, edits) = reply(chat, &vm.message, &applied);
                out["reply"] = json!(reply);
                out["edits"] = json!(edits);
            }
            out
        })
        .collect();
    // Earlier summaries and `Ok.` replies are no log messages: they map to their checkpoint, and
    // the driver leaves them out of what it reports as kept.
    let synthetic: Vec<usize> = history.iter().enumerate().filter(|(_, vm)| vm.origin.entry().is_none()).map(|(i, _)| i).collect();
    let ids = history
        .iter()
        .map(|vm| match vm.origin {
            Origin::Entry(id) | Origin::Replaced(id, _) | Origin::Summary(id) | Origin::Injected(id) => id,
        })
        .collect();
    Ok(Export { session: json!({"done": done, "messages": messages, "synthetic": synthetic}), ids, settings: json!({}) })
}

/// How many items at the front of the history the newest aider checkpoint left as done.
fn done_base(case: &Case) -> usize {
    let newest = case.log.checkpoints().rev().map(|(_, cp): (_, &Checkpoint)| cp).find(|cp| cp.details.get("layout").is_some());
    newest.and_then(|cp| cp.details.get("done")).and_then(Value::as_u64).unwrap_or(0) as usize
}

/// Aider has no tool role: command output goes into the chat as user messages.
fn role(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User | Role::Tool => "user",
        Role::Assistant => "assistant",
    }
}

fn content(message: &Message) -> String {
    let pieces: Vec<String> = message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.clone()),
            Part::Reasoning { .. } => None,
            Part::ToolCall { name, args, .. } => Some(format!("{name} {args}")),
            Part::ToolResult { text, .. } => Some(text.clone()),
            Part::Media { mime, .. } => Some(format!("[{mime}]")),
        })
        .collect();
    pieces.join("\n")
}

/// The reply aider's model would write for an assistant message: its content with every edit or
/// write call as SEARCH/REPLACE blocks, and those blocks (path, SEARCH text, whether the session
/// applied them). Paths are made relative (no leading `/`, no `..`), so the driver's scratch
/// folder holds every file a block names.
fn reply(chat: &dyn compactbench_core::TextChat, message: &Message, applied: &HashMap<&str, bool>) -> (String, Vec<Value>) {
    let mut edits = Vec::new();
    let pieces: Vec<String> = message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.clone()),
            Part::Reasoning { .. } => None,
            Part::ToolCall { id, name, args } => Some(match call_edits(name, args) {
                Some(blocks) => {
                    let blocks: Vec<TextEdit> = blocks.into_iter().map(|e| TextEdit { path: scratch_path(&e.path), ..e }).collect();
                    let ok = applied.get(id.as_str()).copied().unwrap_or(false);
                    edits.extend(blocks.iter().map(|e| json!({"path": e.path, "original": e.original, "applied": ok})));
                    chat.edits(&blocks)
                }
                None => format!("{name} {args}"),
            }),
            Part::ToolResult { text, .. } => Some(text.clone()),
            Part::Media { mime, .. } => Some(format!("[{mime}]")),
        })
        .collect();
    (pieces.join("\n"), edits)
}

/// `path` inside the driver's scratch folder: relative, without `..` components.
fn scratch_path(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty() && *c != "." && *c != "..").collect();
    if parts.is_empty() { "file".to_owned() } else { parts.join("/") }
}

#[cfg(test)]
mod tests {
    use compactbench_core::{EntryId, Log, ModelProfile, Shape};
    use expect_test::expect;

    use super::*;

    fn case(messages: Vec<Message>) -> Case {
        let model = ModelProfile { name: "gpt-4.1".into(), window: 32_000, max_output: 8_192, provider: Shape::OpenaiChat, pricing: Default::default() };
        Case::new("t", Log::from_messages(messages), model)
    }

    #[test]
    fn messages_go_in_order_with_requests_and_the_blocks_aiders_model_would_write() {
        let c = case(vec![
            Message::system("sys"),
            Message::user("fix it"),
            Message::tool_call("c1", "edit", json!({"file_path": "/src/a.rs", "old_string": "x", "new_string": "y"})),
            Message::tool_result("c1", "edit", "ok", false),
            Message::assistant("done"),
            Message::user("why?"),
            Message::assistant("because"),
        ]);
        let e = export(&c).unwrap();
        expect![[r#"{"done":[],"messages":[{"role":"user","content":"fix it","request":true},{"role":"assistant","content":"edit {\"file_path\":\"/src/a.rs\",\"old_string\":\"x\",\"new_string\":\"y\"}","request":false,"reply":"src/a.rs\n```rust\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```","edits":[{"path":"src/a.rs","original":"x","applied":true}]},{"role":"user","content":"ok","request":false},{"role":"assistant","content":"done","request":false,"reply":"done","edits":[]},{"role":"user","content":"why?","request":true},{"role":"assistant","content":"because","request":false,"reply":"because","edits":[]}],"synthetic":[]}"#]]
        .assert_eq(&e.session.to_string());
        assert_eq!(e.ids, (1..7).map(EntryId).collect::<Vec<_>>(), "the system prompt is not history");
    }

    #[test]
    fn a_failed_edit_is_a_block_the_session_did_not_apply_and_other_calls_stay_text() {
        let c = case(vec![
            Message::user("a"),
            Message::tool_call("c1", "write", json!({"path": "b.txt", "content": "hello"})),
            Message::tool_result("c1", "write", "denied", true),
            Message::tool_call("c2", "bash", json!({"command": "ls"})),
            Message::tool_result("c2", "bash", "b.txt", false),
            Message::assistant("failed"),
        ]);
        let e = export(&c).unwrap();
        let messages = e.session["messages"].as_array().unwrap();
        assert_eq!(messages[1]["edits"], json!([{"path": "b.txt", "original": "", "applied": false}]));
        assert!(messages[1]["reply"].as_str().unwrap().contains("<<<<<<< SEARCH\n=======\nhello\n>>>>>>> REPLACE"));
        assert_eq!(messages[3]["reply"], messages[3]["content"]);
        assert_eq!(messages[2]["request"], json!(false), "a tool result is no new prompt");
    }

    #[test]
    fn after_a_compaction_the_summary_heads_done_and_is_synthetic() {
        use compactbench_core::{Cx, Moment, VirtualStore};

        let mut messages = vec![Message::system("sys")];
        for i in 0..5 {
            messages.push(Message::user(format!("request {i} {}", "x".repeat(600))));
            messages.push(Message::assistant(format!("reply {i} {}", "y".repeat(600))));
        }
        messages.push(Message::user("fix it"));
        messages.push(Message::tool_call("c1", "edit", json!({})));
        messages.push(Message::tool_result("c1", "edit", "ok", false));
        messages.push(Message::assistant("done"));
        let mut c = case(messages);
        c.model.window = 16_000;
        let strategy = compactbench_registry::find("aider").unwrap();
        let view = strategy.project(&c.log);
        let mut store = VirtualStore::new();
        let mut cx = Cx::new(&c.model, &crate::ours::FixedSummarizer, &mut store, crate::ours::tokenizer());
        let checkpoints = strategy.compact(&c.log, &view, Moment::TurnEnd, &mut cx).unwrap();
        assert_eq!(checkpoints.len(), 1);
        let cp = c.log.push_checkpoint(checkpoints[0].clone());
        c.log.push_message(Message::user("why?"));
        c.log.push_message(Message::assistant("because"));

        let e = export(&c).unwrap();
        let done = e.session["done"].as_array().unwrap();
        assert!(done[0]["content"].as_str().unwrap().ends_with(crate::ours::FIXED_SUMMARY));
        assert_eq!(done[0]["role"], "user");
        assert_eq!(e.ids[0], cp, "the summary maps to its checkpoint");
        assert_eq!(e.session["synthetic"], json!([0]));
        let messages = e.session["messages"].as_array().unwrap();
        let why = &messages[messages.len() - 2];
        assert_eq!((&why["content"], &why["request"]), (&json!("why?"), &json!(true)));
        assert_eq!(e.ids.len(), done.len() + messages.len());
    }
}
