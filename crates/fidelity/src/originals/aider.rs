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

use std::collections::HashSet;

use compactbench_core::tools::{tool_kind, ToolKind};
use compactbench_core::{EntryId, Message, Part, Role};
use serde_json::json;

use crate::{Case, Export};

pub(crate) fn export(case: &Case) -> Result<Export, String> {
    if case.log.checkpoints().next().is_some() {
        return Err("aider keeps no record of earlier summaries to export checkpoints to".into());
    }
    let history: Vec<(EntryId, &Message)> = case.log.messages().skip_while(|(_, m)| m.role == Role::System).collect();

    // Turns open at user messages; `done` ends with the newest turn before the last that
    // applied an edit.
    let starts: Vec<usize> = std::iter::once(0)
        .chain((1..history.len()).filter(|&i| history[i].1.role == Role::User))
        .chain(std::iter::once(history.len()))
        .collect();
    let turns: Vec<&[(EntryId, &Message)]> =
        starts.windows(2).filter(|w| w[0] < w[1]).map(|w| &history[w[0]..w[1]]).collect();
    let mut done_len = 0;
    let mut at = 0;
    for (i, turn) in turns.iter().enumerate() {
        at += turn.len();
        if i + 1 < turns.len() && applied_edit(turn) {
            done_len = at;
        }
    }
    let edited = turns.last().is_some_and(|t| applied_edit(t));

    let dict = |m: &Message| json!({"role": role(m.role), "content": content(m)});
    let done: Vec<_> = history[..done_len].iter().map(|(_, m)| dict(m)).collect();
    let cur: Vec<_> = history[done_len..].iter().map(|(_, m)| dict(m)).collect();
    Ok(Export {
        session: json!({"done_messages": done, "cur_messages": cur, "edited": edited}),
        ids: history.iter().map(|(id, _)| *id).collect(),
        settings: json!({}),
    })
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
fn applied_edit(turn: &[(EntryId, &Message)]) -> bool {
    let calls: HashSet<&str> = turn
        .iter()
        .filter(|(_, m)| m.role == Role::Assistant)
        .flat_map(|(_, m)| &m.parts)
        .filter_map(|p| match p {
            Part::ToolCall { id, name, .. } if matches!(tool_kind(name), ToolKind::Edit | ToolKind::Write) => Some(id.as_str()),
            _ => None,
        })
        .collect();
    turn.iter()
        .flat_map(|(_, m)| &m.parts)
        .any(|p| matches!(p, Part::ToolResult { call_id, is_error: false, .. } if calls.contains(call_id.as_str())))
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Log, ModelProfile, Shape};
    use expect_test::expect;

    use super::*;

    fn case(messages: Vec<Message>) -> Case {
        let model = ModelProfile { name: "gpt-4.1".into(), window: 32_000, max_output: 8_192, provider: Shape::OpenaiChat, pricing: Default::default() };
        Case { id: "t".into(), log: Log::from_messages(messages), model }
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
        expect![[r#"{"done_messages":[{"role":"user","content":"fix it"},{"role":"assistant","content":"edit {\"path\":\"a.rs\"}"},{"role":"user","content":"ok"},{"role":"assistant","content":"done"}],"cur_messages":[{"role":"user","content":"why?"},{"role":"assistant","content":"because"}],"edited":false}"#]]
        .assert_eq(&e.session.to_string());
        assert_eq!(e.ids, (1..7).map(EntryId).collect::<Vec<_>>(), "the system prompt is not history");
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
}
