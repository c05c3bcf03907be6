//! Exporter: our log to aider's in-memory chat lists (`Coder.done_messages` and
//! `Coder.cur_messages`, lists of `{role, content}` dicts), as they stand at the end of a turn,
//! right before `send_message` runs `move_back_cur_messages` when the turn's edits were applied.
//!
//! Aider never sends native tool calls, so a message becomes one dict the way our crate
//! (`crates/strategies/aider/src/session.rs`) maps it: tool results are `user` messages, the
//! content joins texts, tool calls as `name {json args}`, result texts and `[mime]` for media
//! with newlines; reasoning is left out. Leading system messages are aider's system prompt, not
//! history, so they are not exported. The two lists follow the crate too: `cur_messages` is
//! everything after the newest turn (a user message and what follows it) that applied an edit
//! (an edit or write call with a non-error result) before the last turn, and `edited` says
//! whether the last turn applied one (aider's `apply_updates()` result).
//!
//! Earlier compactions: aider keeps no record of them, only the list they left (`[summary,
//! tail…, "Ok."?]`, then later messages), which is what our crate's projection rebuilds from
//! the checkpoint; that list is exported, and `synthetic` names the items that are not log
//! messages (summaries, `Ok.`), which map to their checkpoint.

use std::collections::HashSet;

use compactbench_core::tools::{tool_kind, ToolKind};
use compactbench_core::{Checkpoint, Message, Origin, Part, Role, ViewMessage};
use serde_json::{json, Value};

use crate::{Case, Export};

pub(crate) fn export(case: &Case) -> Result<Export, String> {
    // After a compaction aider's done list is `[summary, tail…, "Ok."?]`; our crate's projection
    // rebuilds exactly that list (the checkpoint's `details.layout`), so it is what is exported.
    let strategy = compactbench_registry::find("aider").ok_or("the aider strategy is not registered")?;
    let view = strategy.project(&case.log);
    let history: Vec<&ViewMessage> = view
        .messages
        .iter()
        .skip_while(|vm| vm.message.role == Role::System && matches!(vm.origin, Origin::Entry(_)))
        .collect();
    let base = done_base(case).min(history.len());

    // Turns open at user messages of the log; `done` ends with the newest turn before the last
    // one that applied an edit (or with what the previous compaction left as done).
    let mut turns = Vec::new();
    let mut start = base;
    for i in base + 1..=history.len() {
        if i == history.len() || (history[i].message.role == Role::User && matches!(history[i].origin, Origin::Entry(_))) {
            turns.push(start..i);
            start = i;
        }
    }
    let mut done_len = base;
    for turn in turns.iter().rev().skip(1) {
        if applied_edit(&history[turn.clone()]) {
            done_len = turn.end;
            break;
        }
    }
    let edited = turns.last().is_some_and(|t| applied_edit(&history[t.clone()]));

    let dict = |vm: &&ViewMessage| json!({"role": role(vm.message.role), "content": content(&vm.message)});
    let done: Vec<Value> = history[..done_len].iter().map(dict).collect();
    let cur: Vec<Value> = history[done_len..].iter().map(dict).collect();
    // Earlier summaries and `Ok.` replies are no log messages: they map to their checkpoint, and
    // the driver leaves them out of what it reports as kept.
    let synthetic: Vec<usize> = history.iter().enumerate().filter(|(_, vm)| vm.origin.entry().is_none()).map(|(i, _)| i).collect();
    let ids = history
        .iter()
        .map(|vm| match vm.origin {
            Origin::Entry(id) | Origin::Replaced(id, _) | Origin::Summary(id) | Origin::Injected(id) => id,
        })
        .collect();
    Ok(Export {
        session: json!({"done_messages": done, "cur_messages": cur, "edited": edited, "synthetic": synthetic}),
        ids,
        settings: json!({}),
    })
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

/// An edit or write call of this turn got a non-error result in it.
fn applied_edit(turn: &[&ViewMessage]) -> bool {
    let calls: HashSet<&str> = turn
        .iter()
        .filter(|vm| vm.message.role == Role::Assistant)
        .flat_map(|vm| &vm.message.parts)
        .filter_map(|p| match p {
            Part::ToolCall { id, name, .. } if matches!(tool_kind(name), ToolKind::Edit | ToolKind::Write) => Some(id.as_str()),
            _ => None,
        })
        .collect();
    turn.iter()
        .flat_map(|vm| &vm.message.parts)
        .any(|p| matches!(p, Part::ToolResult { call_id, is_error: false, .. } if calls.contains(call_id.as_str())))
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
    fn turns_before_the_newest_edit_are_done_and_the_rest_is_cur() {
        let c = case(vec![
            Message::system("sys"),
            Message::user("fix it"),
            Message::tool_call("c1", "edit", json!({"path": "a.rs"})),
            Message::tool_result("c1", "edit", "ok", false),
            Message::assistant("done"),
            Message::user("why?"),
            Message::assistant("because"),
        ]);
        let e = export(&c).unwrap();
        expect![[r#"{"done_messages":[{"role":"user","content":"fix it"},{"role":"assistant","content":"edit {\"path\":\"a.rs\"}"},{"role":"user","content":"ok"},{"role":"assistant","content":"done"}],"cur_messages":[{"role":"user","content":"why?"},{"role":"assistant","content":"because"}],"edited":false,"synthetic":[]}"#]]
        .assert_eq(&e.session.to_string());
        assert_eq!(e.ids, (1..7).map(EntryId).collect::<Vec<_>>(), "the system prompt is not history");
        assert_eq!(e.session["synthetic"], json!([]));
    }

    #[test]
    fn a_last_turn_with_an_applied_edit_is_edited_and_failed_edits_do_not_count() {
        let c = case(vec![
            Message::user("a"),
            Message::tool_call("c1", "write", json!({})),
            Message::tool_result("c1", "write", "denied", true),
            Message::assistant("failed"),
            Message::user("b"),
            Message::tool_call("c2", "str_replace", json!({})),
            Message::tool_result("c2", "str_replace", "ok", false),
            Message::assistant("done"),
        ]);
        let e = export(&c).unwrap();
        assert_eq!(e.session["done_messages"], json!([]));
        assert_eq!(e.session["cur_messages"].as_array().unwrap().len(), 8);
        assert_eq!(e.session["edited"], json!(true));
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
        let done = e.session["done_messages"].as_array().unwrap();
        assert!(done[0]["content"].as_str().unwrap().ends_with(crate::ours::FIXED_SUMMARY));
        assert_eq!(done[0]["role"], "user");
        assert_eq!(e.ids[0], cp, "the summary maps to its checkpoint");
        assert_eq!(e.session["synthetic"], json!([0]));
        assert_eq!(e.session["cur_messages"], json!([{"role": "user", "content": "why?"}, {"role": "assistant", "content": "because"}]));
        assert_eq!(e.ids.len(), done.len() + 2);
    }
}
