//! Aider's `done_messages` / `cur_messages` read from the log, the background summarization
//! mapped onto turn ends, and the view rebuilt from checkpoints.

use compactbench_core::tools::{tool_kind, ToolKind};
use compactbench_core::{
    default_projection, Checkpoint, CheckpointKind, Cx, Decision, Entry, EntryId, Error, ErrorKind, Log, Message,
    Moment, Origin, Part, Role, SummarizerUsage, View, ViewMessage, Window,
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
    let piece = |p: &Part| match p {
        Part::Text { text } | Part::ToolResult { text, .. } => Some(text.clone()),
        Part::Reasoning { .. } => None,
        Part::ToolCall { name, args, .. } => Some(format!("{name} {args}")),
        Part::Media { mime, .. } => Some(format!("[{mime}]")),
    };
    message.parts.iter().filter_map(piece).collect::<Vec<_>>().join("\n")
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

/// The size of `vm`'s Aider dict (`token_count(msg)`), as [`item`] counts it.
pub(crate) fn size(counter: &Counter<'_>, vm: &ViewMessage) -> u64 {
    counter.message(aider_role(vm.message.role), &aider_content(&vm.message))
}

/// The newest checkpoint this strategy wrote, with the done list it left.
fn anchor(log: &Log) -> Option<(EntryId, &Checkpoint, &Vec<Value>)> {
    log.checkpoints().rev().find_map(|(id, cp)| cp.details.get("layout").and_then(Value::as_array).map(|l| (id, cp, l)))
}

/// How many items at the front of the history the newest checkpoint left as done.
fn done_base(log: &Log) -> usize {
    anchor(log).and_then(|(_, cp, _)| cp.details.get("done")).and_then(Value::as_u64).unwrap_or(0) as usize
}

/// How many messages open the view as leading system messages, which are not history.
pub(crate) fn leading(view: &View) -> usize {
    view.messages.iter().take_while(|vm| is_leading(vm)).count()
}

/// Whether `vm` is a system message from the log (leading, when only such messages precede it).
pub(crate) fn is_leading(vm: &ViewMessage) -> bool {
    vm.message.role == Role::System && matches!(vm.origin, Origin::Entry(_))
}

/// Aider's `move_back_cur_messages` read off the history, fed message by message: turns start
/// at user messages from the log ([`opens_turn`]), and done ends right after the newest reply
/// that wrote an edit ([`writes_edit`]), as `send_message` moves `cur_messages` after each such
/// reply; what follows it (results, later replies) stays in cur. Positions count history
/// messages.
#[derive(Default)]
pub(crate) struct Exchanges {
    /// Where the current turn starts, where done ends, and how many were fed.
    start: usize,
    done: usize,
    len: usize,
    /// Whether a reply of the current turn wrote an edit: Aider then moved cur into done and
    /// ran `summarize_start`.
    pub(crate) edited: bool,
}

impl Exchanges {
    /// Nothing fed yet after the first `base` history messages, which the newest checkpoint
    /// left as done.
    pub(crate) fn new(base: usize) -> Exchanges {
        Exchanges { start: base, done: base, len: base, ..Exchanges::default() }
    }

    /// Takes in the next history message.
    pub(crate) fn push(&mut self, vm: &ViewMessage) {
        if self.len > self.start && opens_turn(vm) {
            *self = Exchanges { start: self.len, done: self.done, len: self.len, edited: false };
        }
        if writes_edit(&vm.message) {
            self.edited = true;
            self.done = self.len + 1;
        }
        self.len += 1;
    }

    /// Where done ends: after the newest reply that wrote an edit (Aider moved cur then).
    pub(crate) fn done(&self) -> usize {
        self.done
    }
}

/// Whether an assistant message writes an edit: an edit or write call, whatever its result, or
/// SEARCH/REPLACE blocks Aider parses. Aider moves the exchange for every block it parses, before
/// and whether or not it applies (`apply_updates` returns the paths collected before
/// `apply_edits` raises on a failed match; crate docs, Text shape).
fn writes_edit(message: &Message) -> bool {
    let native = message.role == Role::Assistant
        && message.parts.iter().any(|p| matches!(p, Part::ToolCall { name, .. } if matches!(tool_kind(name), ToolKind::Edit | ToolKind::Write)));
    native || text_edit(message)
}

/// The exchanges of the view's history (after its leading system messages) since the newest
/// checkpoint, which left the first items done.
pub(crate) fn exchanges(log: &Log, view: &View) -> Exchanges {
    let history = &view.messages[leading(view)..];
    let base = done_base(log).min(history.len());
    let mut exchanges = Exchanges::new(base);
    history[base..].iter().for_each(|vm| exchanges.push(vm));
    exchanges
}

/// The view's history as Aider holds it: `done_messages` (sized) and `cur_messages`.
fn lists(log: &Log, view: &View, counter: &Counter<'_>) -> (Vec<Item>, Vec<Item>) {
    let (done, cur) = view.messages[leading(view)..].split_at(exchanges(log, view).done());
    (done.iter().map(|vm| item(Some(counter), vm)).collect(), cur.iter().map(|vm| item(None, vm)).collect())
}

/// Whether `vm` is a request from the log: a user message that is not one of Aider's own
/// (command output, edit confirmation or reflection, which belong to the exchange that caused
/// them).
fn opens_turn(vm: &ViewMessage) -> bool {
    vm.message.role == Role::User
        && matches!(vm.origin, Origin::Entry(_))
        && !chat::is_aider_feedback(&vm.message.text())
}

/// Whether an assistant message holds SEARCH/REPLACE blocks that Aider parses
/// (`EditBlockCoder.get_edits`), applied or not (see Text shape in the crate docs: a block that
/// failed to match moves the exchange all the same; a malformed reply applies nothing).
fn text_edit(message: &Message) -> bool {
    message.role == Role::Assistant && chat::edited_files(&message.text()).is_some_and(|files| !files.is_empty())
}

fn max_tokens(config: &AiderConfig, cx: &Cx<'_>) -> f64 {
    history::max_tokens(config.max_chat_history_tokens, cx.model.window)
}

/// From scratch: [`summarize_start`] on the view's history.
pub(crate) fn decide(config: &AiderConfig, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
    let history = &view.messages[leading(view)..];
    let exchanges = exchanges(log, view);
    summarize_start(config, log, at, exchanges.edited, cx, |counter| history[..exchanges.done()].iter().map(|vm| size(counter, vm)).sum())
}

/// `summarize_start`, at a turn end only: compact when a reply of the turn just ended wrote an
/// edit (`moved`: Aider moved cur into done then) and done, whose total `done_tokens` counts, is
/// over the limit. Before a request or on overflow Aider never compacts.
pub(crate) fn summarize_start(config: &AiderConfig, log: &Log, at: Moment, moved: bool, cx: &Cx<'_>, done_tokens: impl FnOnce(&Counter<'_>) -> u64) -> Decision {
    // This turn's move was already handled; sizes are counted only once something moved
    // (turns without an applied edit are free).
    if at != Moment::TurnEnd || matches!(log.entries().next_back(), Some((_, Entry::Checkpoint(_)))) || !moved {
        return Decision::Skip;
    }
    if history::too_big(done_tokens(&Counter::of(cx)), max_tokens(config, cx)) {
        Decision::compact("max_chat_history_tokens")
    } else {
        Decision::Skip
    }
}

/// `summarize_start` → `summarize_worker` → `summarize_end`.
pub(crate) fn compact(config: &AiderConfig, log: &Log, view: &View, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
    let (done, cur) = lists(log, view, &Counter::of(cx));
    let (limit, tokens_before) = (max_tokens(config, cx), history::total(&done));
    if !history::too_big(tokens_before, limit) {
        return Ok(Vec::new());
    }
    let mut summary = ChatSummary::new(config, cx);
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
        Ok(done) => Ok(vec![checkpoint(CheckpointKind::Summary, done, cur, extra, (tokens_before, summary.usage))]),
        Err(_) if config.wipe_history_on_failure => {
            // The worker swallowed the ValueError and left its result at `[]`, which
            // `summarize_end` assigns to `done_messages`.
            let mut cp = checkpoint(CheckpointKind::Truncate, Vec::new(), cur, extra, (tokens_before, summary.usage));
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
    let (done, cur) = lists(log, view, &Counter::of(cx));
    if done.is_empty() {
        return Vec::new();
    }
    let tokens_before = history::total(&done);
    let mut summary = ChatSummary::new(config, cx);
    match summary.summarize_all(&done) {
        Ok(done) => {
            vec![checkpoint(CheckpointKind::Summary, done, cur, json!({"trigger": "chat-mode switch"}), (tokens_before, summary.usage))]
        }
        Err(_) => Vec::new(),
    }
}

/// A checkpoint whose view, after the leading system messages, is `done` then `cur`, with the
/// tokens of done before and the summarizer's usage. The exact order goes in `details.layout`
/// (log ids as numbers, `"summary"`, `"injected:<i>"`), the rest of the fields say the same
/// thing for reports.
fn checkpoint(kind: CheckpointKind, done: Vec<Item>, cur: Vec<Item>, mut details: Value, (tokens_before, usage): (u64, SummarizerUsage)) -> Checkpoint {
    let done_len = done.len();
    let mut kept = Vec::new();
    let mut layout = Vec::new();
    let mut cp = Checkpoint::new(kind, Window::Kept(Vec::new()));
    (cp.tokens_before, cp.summarizer) = (tokens_before, usage);
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
    let entry = |(id, m): (EntryId, &Message)| ViewMessage { origin: Origin::Entry(id), message: m.clone() };
    let mut view = View::default();
    let mut messages = log.messages().peekable();
    while let Some(leading) = messages.next_if(|(_, m)| m.role == Role::System) {
        view.messages.push(entry(leading));
    }
    for slot in layout {
        let shown = match slot {
            Value::Number(n) => n.as_u64().map(|n| EntryId(n as u32)).and_then(|id| log.message(id).map(|m| entry((id, m)))),
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
    view.messages.extend(log.messages().filter(|(id, _)| *id > anchor_id).map(entry));
    view
}
