//! Aider's `done_messages` / `cur_messages` read from the log, the background summarization
//! mapped onto the request after each move that made done too big, and the view rebuilt from
//! checkpoints.

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
    /// Where done ended after each move of the current turn (since the newest checkpoint), in
    /// order: Aider ran `summarize_start` at each, and applied what it started at the next
    /// request (`summarize_end` in `format_chat_chunks`), mid-turn for all but the last.
    moves: Vec<usize>,
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
            (self.start, self.moves) = (self.len, Vec::new());
        }
        if writes_edit(&vm.message) {
            self.done = self.len + 1;
            self.moves.push(self.done);
        }
        self.len += 1;
    }

    /// Where done ends: after the newest reply that wrote an edit (Aider moved cur then).
    pub(crate) fn done(&self) -> usize {
        self.done
    }

    /// Whether a reply of the current turn wrote an edit since the newest checkpoint: Aider then
    /// moved cur into done and ran `summarize_start`.
    pub(crate) fn moved(&self) -> bool {
        !self.moves.is_empty()
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
fn lists(view: &View, exchanges: &Exchanges, counter: &Counter<'_>) -> (Vec<Item>, Vec<Item>) {
    let (done, cur) = view.messages[leading(view)..].split_at(exchanges.done());
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
    summarize_start(config, log, at, exchanges.moved(), cx, |counter| history[..exchanges.done()].iter().map(|vm| size(counter, vm)).sum())
}

/// Whether a summary is due before the next request: a reply of the current turn wrote an edit
/// since the newest checkpoint (`moved`: Aider moved cur into done then and ran
/// `summarize_start`) and done, whose total `done_tokens` counts, is over the limit. Aider
/// applies the worker's result when it formats the next request (`summarize_end` in
/// `format_chat_chunks`, called by `send_message`): mid-turn before the next reply's request
/// ([`Moment::BeforeRequest`]), or, after the turn's last reply, before the next prompt's, which
/// the turn's end ([`Moment::TurnEnd`]) stands for. Done only grows between checkpoints, so the
/// first move that was too big is the one done now is over the limit at: it is still due exactly
/// when no checkpoint followed it. On overflow (and at a manual command) Aider never compacts.
pub(crate) fn summarize_start(config: &AiderConfig, log: &Log, at: Moment, moved: bool, cx: &Cx<'_>, done_tokens: impl FnOnce(&Counter<'_>) -> u64) -> Decision {
    // This move was already handled; sizes are counted only once something moved (turns
    // without an edit are free).
    if !matches!(at, Moment::TurnEnd | Moment::BeforeRequest)
        || matches!(log.entries().next_back(), Some((_, Entry::Checkpoint(_))))
        || !moved
    {
        return Decision::Skip;
    }
    if history::too_big(done_tokens(&Counter::of(cx)), max_tokens(config, cx)) {
        Decision::compact("max_chat_history_tokens")
    } else {
        Decision::Skip
    }
}

/// The newest background summarization of a turn: done's tokens when it started, and its error
/// when every model failed.
struct Started {
    tokens_before: u64,
    failed: Option<Error>,
}

/// Aider's loop over the moves of one turn (`send_message`): each move appends what was cur to
/// done (`move_back_cur_messages`, `moves` are where done ends after each, positions in
/// `items`); `summarize_start` starts the worker (`summarize_worker`: `ChatSummary.summarize` of
/// a snapshot of done) when done is `too_big`; and the next request's `summarize_end` puts its
/// result in done's place, before the next move. A result is put in place only when done still
/// equals the snapshot: never under `confirmation_race`. A worker that fails for every model
/// leaves `[]`, which empties done (`wipe_history_on_failure`; off, the error is returned).
/// Returns done after the last move's result, and the newest start (`None`: none started).
fn run_moves(summary: &mut ChatSummary<'_>, config: &AiderConfig, limit: f64, items: Vec<Item>, moves: &[usize]) -> Result<(Vec<Item>, Option<Started>), Error> {
    let mut items = items.into_iter();
    let (mut done, mut moved, mut newest) = (Vec::new(), 0, None);
    for &end in moves {
        done.extend(items.by_ref().take(end - moved));
        moved = end;
        let tokens_before = history::total(&done);
        if !history::too_big(tokens_before, limit) {
            continue;
        }
        let result = summary.summarize(done.clone());
        newest = Some(Started { tokens_before, failed: result.as_ref().err().cloned() });
        match result {
            // The snapshot lacks the confirmation pair appended after the worker started.
            _ if config.confirmation_race => {}
            Ok(summarized) => done = summarized,
            Err(_) if config.wipe_history_on_failure => done = Vec::new(),
            Err(e) => return Err(e),
        }
    }
    Ok((done, newest))
}

/// `summarize_start` → `summarize_worker` → `summarize_end` for every move of the current turn
/// not yet handled: in a run the one move whose result is due now (earlier ones were applied at
/// their own next request), on a log cut without them (the fidelity check's) each in turn, as
/// Aider applies them mid-turn. With no move in the turn, done as it stands is summarized when
/// it is too big (a compaction asked for anyway).
pub(crate) fn compact(config: &AiderConfig, log: &Log, view: &View, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
    let exchanges = exchanges(log, view);
    let (done, cur) = lists(view, &exchanges, &Counter::of(cx));
    let moves = if exchanges.moved() { exchanges.moves.clone() } else { vec![done.len()] };
    let limit = max_tokens(config, cx);
    let mut summary = ChatSummary::new(config, cx);
    let (done, newest) = run_moves(&mut summary, config, limit, done, &moves)?;
    let Some(Started { tokens_before, failed }) = newest else {
        return Ok(Vec::new());
    };
    if config.confirmation_race {
        // `summarize_end` threw every result away, success or failure alike.
        return Err(failed.unwrap_or_else(|| Error::new(ErrorKind::Rejected, "summary discarded: done_messages changed while summarizing")));
    }
    let extra = json!({
        "max_chat_history_tokens": limit,
        "depth": summary.depth,
        "dropped": summary.dropped.iter().map(|id| id.0).collect::<Vec<_>>(),
    });
    if failed.is_some() {
        // The newest worker swallowed the ValueError and left its result at `[]`, which
        // `summarize_end` assigned to `done_messages`.
        let mut cp = checkpoint(CheckpointKind::Truncate, done, cur, extra, (tokens_before, summary.usage));
        cp.details["outcome"] = json!("wiped");
        return Ok(vec![cp]);
    }
    Ok(vec![checkpoint(CheckpointKind::Summary, done, cur, extra, (tokens_before, summary.usage))])
}

/// The chat-mode switch (`/chat-mode` to another edit format, `Coder.create` with
/// `summarize_from_coder`): `summarize_all` of the whole done list whatever its size, no `Ok.`;
/// on failure the full history is kept (Aider warns and continues).
#[cfg_attr(not(test), expect(dead_code, reason = "the runner's sessions never switch chat modes"))]
pub(crate) fn switch_chat_mode(config: &AiderConfig, log: &Log, view: &View, cx: &mut Cx<'_>) -> Vec<Checkpoint> {
    let (done, cur) = lists(view, &exchanges(log, view), &Counter::of(cx));
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
