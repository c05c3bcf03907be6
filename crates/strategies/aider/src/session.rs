//! Aider's `done_messages` / `cur_messages` read from the log, the background summarization
//! mapped onto turn ends, and the view rebuilt from checkpoints.

use std::collections::HashSet;

use compactbench_core::tools::{tool_kind, ToolKind};
use compactbench_core::{
    default_projection, Checkpoint, CheckpointKind, Cx, Decision, Entry, EntryId, Error, ErrorKind, Log, Message,
    Origin, Part, Role, View, ViewMessage, Window,
};
use serde_json::{json, Value};

use crate::chat;
use crate::history::{self, ChatSummary, Item, Source};
use crate::tokens::Counter;
use crate::AiderConfig;

/// The role of a message's Aider dict. Tool results become user messages: Aider puts command
/// output into the chat as user messages and has no tool role.
fn aider_role(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User | Role::Tool => "user",
        Role::Assistant => "assistant",
    }
}

/// The content of a message's Aider dict: text, tool calls as `name {args}`, tool results,
/// media placeholders; reasoning is left out (Aider strips it from the stored reply).
fn aider_content(message: &Message) -> String {
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

/// The Aider dict of `vm`, sized when `counter` is given (done items; cur items are never sized).
fn item(counter: Option<&Counter<'_>>, vm: &ViewMessage) -> Item {
    let source = match vm.origin {
        Origin::Entry(id) | Origin::Replaced(id, _) => Source::Entry(id),
        Origin::Summary(_) | Origin::Injected(_) => Source::Injected(vm.message.clone()),
    };
    let (role, content) = (aider_role(vm.message.role), aider_content(&vm.message));
    match counter {
        Some(counter) => Item::new(counter, role, content, source),
        None => Item { role, content, tokens: 0, source },
    }
}

/// The view split as Aider holds it: leading system messages (not history), `done_messages`,
/// `cur_messages`.
struct Lists {
    done: Vec<Item>,
    cur: Vec<Item>,
}

/// The newest checkpoint this strategy wrote, with the done list it left.
fn anchor(log: &Log) -> Option<(EntryId, &Checkpoint, &Vec<Value>)> {
    log.checkpoints().rev().find_map(|(id, cp)| cp.details.get("layout").and_then(Value::as_array).map(|l| (id, cp, l)))
}

/// How many items at the front of the history the newest checkpoint left as done.
fn done_base(log: &Log) -> usize {
    anchor(log).and_then(|(_, cp, _)| cp.details.get("done")).and_then(Value::as_u64).unwrap_or(0) as usize
}

/// The history part of the view (after the leading system messages), how many of its items
/// the newest checkpoint left as done, and where done ends now.
fn split<'v>(log: &Log, view: &'v View) -> (Vec<&'v ViewMessage>, usize, usize) {
    let history: Vec<&ViewMessage> = view
        .messages
        .iter()
        .skip_while(|vm| vm.message.role == Role::System && matches!(vm.origin, Origin::Entry(_)))
        .collect();
    let base = done_base(log).min(history.len());

    // Turns start at user messages from the log; the done part ends with the newest turn that
    // applied an edit (Aider's `move_back_cur_messages`).
    let mut boundary = base;
    let mut start = base;
    for i in base..=history.len() {
        let new_turn = i == history.len() || (i > start && opens_turn(history[i]));
        if new_turn {
            if applied_edit(&history[start..i]) {
                boundary = i;
            }
            start = i;
        }
    }
    (history, base, boundary)
}

fn lists(log: &Log, view: &View, counter: &Counter<'_>) -> Lists {
    let (history, _, boundary) = split(log, view);
    let (done, cur) = history.split_at(boundary);
    Lists {
        done: done.iter().map(|vm| item(Some(counter), vm)).collect(),
        cur: cur.iter().map(|vm| item(None, vm)).collect(),
    }
}

/// Whether `vm` is a request from the log: a user message that is not one of Aider's own
/// (command output, edit confirmation or reflection, which belong to the exchange that caused
/// them).
fn opens_turn(vm: &ViewMessage) -> bool {
    vm.message.role == Role::User
        && matches!(vm.origin, Origin::Entry(_))
        && !chat::is_aider_feedback(&vm.message.text())
}

/// Whether this turn applied an edit: Aider moves an exchange into history once
/// `apply_updates` returned edited files (see [`text_edit`]), and a native edit or write call
/// counts when it got a non-error result.
fn applied_edit(turn: &[&ViewMessage]) -> bool {
    native_edit(turn) || turn.iter().any(|vm| text_edit(&vm.message))
}

/// Whether an assistant message holds SEARCH/REPLACE blocks that Aider parses
/// (`EditBlockCoder.get_edits`). Applied or not: `Coder.apply_updates` collects the edited
/// paths before `apply_edits` raises on a block that failed to match, returns them with the
/// reflection set, and `send_message` moves the exchange all the same (measured with
/// aider-chat 0.86.2's own `Coder.run_one`: the failing reply and the confirmation note end up
/// in `done_messages`, the reflection in `cur_messages`). A malformed reply applies nothing.
fn text_edit(message: &Message) -> bool {
    message.role == Role::Assistant && chat::edited_files(&message.text()).is_some_and(|files| !files.is_empty())
}

/// Whether an assistant edit or write call of this turn got a non-error result in it.
fn native_edit(turn: &[&ViewMessage]) -> bool {
    let calls: HashSet<&str> = turn
        .iter()
        .filter(|vm| vm.message.role == Role::Assistant)
        .flat_map(|vm| vm.message.parts.iter())
        .filter_map(|p| match p {
            Part::ToolCall { id, name, .. } if matches!(tool_kind(name), ToolKind::Edit | ToolKind::Write) => {
                Some(id.as_str())
            }
            _ => None,
        })
        .collect();
    turn.iter().flat_map(|vm| vm.message.parts.iter()).any(|p| {
        matches!(p, Part::ToolResult { call_id, is_error: false, .. } if calls.contains(call_id.as_str()))
    })
}

fn max_tokens(config: &AiderConfig, cx: &Cx<'_>) -> f64 {
    history::max_tokens(config.max_chat_history_tokens, cx.model.window)
}

/// `ChatSummary.token_count`: the first summarizer model's (the weak model, named as the main
/// model here: one summarizer), through the injected tokenizer.
fn counter<'a>(cx: &Cx<'a>) -> Counter<'a> {
    Counter::new(cx.tokenizer, &cx.model.name)
}

fn chat_summary<'a>(config: &AiderConfig, cx: &Cx<'a>) -> ChatSummary<'a> {
    ChatSummary::new(
        max_tokens(config, cx),
        config.weak_model_max_input_tokens.unwrap_or(cx.model.window),
        config.summarizer_models,
        cx.model.max_output,
        cx.summarizer,
        counter(cx),
    )
}

/// At a turn end: compact when the turn just ended applied an edit (so everything moved into
/// done and nothing is left in cur) and done is over the limit.
pub(crate) fn decide(config: &AiderConfig, log: &Log, view: &View, cx: &Cx<'_>) -> Decision {
    // This turn's move was already handled.
    if matches!(log.entries().next_back(), Some((_, Entry::Checkpoint(_)))) {
        return Decision::Skip;
    }
    // Sizes are counted only once something moved (turns without an applied edit are free).
    let (history, base, boundary) = split(log, view);
    let moved = boundary == history.len() && boundary > base;
    if !moved {
        return Decision::Skip;
    }
    let counter = counter(cx);
    let done: Vec<Item> = history.iter().map(|vm| item(Some(&counter), vm)).collect();
    if history::too_big(&done, max_tokens(config, cx)) {
        Decision::compact("max_chat_history_tokens")
    } else {
        Decision::Skip
    }
}

/// `summarize_start` → `summarize_worker` → `summarize_end`.
pub(crate) fn compact(config: &AiderConfig, log: &Log, view: &View, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
    let Lists { done, cur } = lists(log, view, &counter(cx));
    let limit = max_tokens(config, cx);
    if !history::too_big(&done, limit) {
        return Ok(Vec::new());
    }
    let tokens_before = history::total(&done);
    let mut summary = chat_summary(config, cx);
    let result = summary.summarize(done);
    if config.confirmation_race {
        // The worker's snapshot lacks the confirmation pair appended after it started, so
        // `summarize_end` throws the result away, success or failure alike.
        return Err(match result {
            Ok(_) => Error::new(ErrorKind::Rejected, "summary discarded: done_messages changed while summarizing"),
            Err(e) => e,
        });
    }
    let extra = json!({
        "max_chat_history_tokens": limit,
        "depth": summary.depth,
        "dropped": summary.dropped.iter().map(|id| id.0).collect::<Vec<_>>(),
    });
    match result {
        Ok(done) => {
            let mut cp = checkpoint(CheckpointKind::Summary, done, cur, extra);
            cp.tokens_before = tokens_before;
            cp.summarizer = summary.usage;
            Ok(vec![cp])
        }
        Err(_) if config.wipe_history_on_failure => {
            // The worker swallowed the ValueError and left its result at `[]`, which
            // `summarize_end` assigns to `done_messages`.
            let mut cp = checkpoint(CheckpointKind::Truncate, Vec::new(), cur, extra);
            cp.tokens_before = tokens_before;
            cp.summarizer = summary.usage;
            cp.details["outcome"] = json!("wiped");
            Ok(vec![cp])
        }
        Err(e) => Err(e),
    }
}

/// The chat-mode switch (`/chat-mode` to another edit format, `Coder.create` with
/// `summarize_from_coder`): `summarize_all` of the whole done list whatever its size, no `Ok.`;
/// on failure the full history is kept (Aider warns and continues).
#[cfg_attr(not(test), expect(dead_code, reason = "the runner's sessions never switch chat modes"))]
pub(crate) fn switch_chat_mode(config: &AiderConfig, log: &Log, view: &View, cx: &mut Cx<'_>) -> Vec<Checkpoint> {
    let Lists { done, cur } = lists(log, view, &counter(cx));
    if done.is_empty() {
        return Vec::new();
    }
    let tokens_before = history::total(&done);
    let mut summary = chat_summary(config, cx);
    match summary.summarize_all(&done) {
        Ok(done) => {
            let mut cp = checkpoint(CheckpointKind::Summary, done, cur, json!({"trigger": "chat-mode switch"}));
            cp.tokens_before = tokens_before;
            cp.summarizer = summary.usage;
            vec![cp]
        }
        Err(_) => Vec::new(),
    }
}

/// A checkpoint whose view, after the leading system messages, is `done` then `cur`. The exact
/// order goes in `details.layout` (log ids as numbers, `"summary"`, `"injected:<i>"`), the rest
/// of the fields say the same thing for reports.
fn checkpoint(kind: CheckpointKind, done: Vec<Item>, cur: Vec<Item>, mut details: Value) -> Checkpoint {
    let done_len = done.len();
    let mut kept = Vec::new();
    let mut layout = Vec::new();
    let mut cp = Checkpoint::new(kind, Window::Kept(Vec::new()));
    for item in done.into_iter().chain(cur) {
        match item.source {
            Source::Entry(id) => {
                kept.push(id);
                layout.push(json!(id.0));
            }
            Source::Summary if cp.summary.is_none() => {
                cp.summary = Some(Message::user(item.content));
                layout.push(json!("summary"));
            }
            Source::Summary => {
                layout.push(json!(format!("injected:{}", cp.injected.len())));
                cp.injected.push(Message::user(item.content));
            }
            Source::Injected(message) => {
                layout.push(json!(format!("injected:{}", cp.injected.len())));
                cp.injected.push(message);
            }
        }
    }
    cp.window = Window::Kept(kept);
    details["layout"] = Value::Array(layout);
    details["done"] = json!(done_len);
    details["outcome"] = json!("summarized");
    cp.details = details;
    cp
}

/// Leading system messages, the done list (and cur) as the newest checkpoint laid it out, then
/// every later message.
pub(crate) fn project(log: &Log) -> View {
    let Some((anchor_id, cp, layout)) = anchor(log) else {
        return default_projection(log);
    };
    let mut view = View::default();
    let mut messages = log.messages().peekable();
    while let Some((id, m)) = messages.next_if(|(_, m)| m.role == Role::System) {
        view.messages.push(ViewMessage { origin: Origin::Entry(id), message: m.clone() });
    }
    for slot in layout {
        let shown = match slot {
            Value::Number(n) => n.as_u64().and_then(|n| {
                let id = EntryId(n as u32);
                log.message(id).map(|m| ViewMessage { origin: Origin::Entry(id), message: m.clone() })
            }),
            Value::String(s) if s == "summary" => {
                cp.summary.clone().map(|m| ViewMessage { origin: Origin::Summary(anchor_id), message: m })
            }
            Value::String(s) => s
                .strip_prefix("injected:")
                .and_then(|i| i.parse::<usize>().ok())
                .and_then(|i| cp.injected.get(i))
                .map(|m| ViewMessage { origin: Origin::Injected(anchor_id), message: m.clone() }),
            _ => None,
        };
        view.messages.extend(shown);
    }
    view.messages.extend(
        log.messages().filter(|(id, _)| *id > anchor_id).map(|(id, m)| ViewMessage { origin: Origin::Entry(id), message: m.clone() }),
    );
    view
}
