//! Reading a history the way Codex does (which user messages are real, which are context,
//! which are earlier summaries), and building the replacement history of a compaction
//! (`compact.rs` @e06dd0e5: `collect_user_messages`, `build_compacted_history_with_limit`,
//! `insert_initial_context_before_last_real_user_or_summary`,
//! `extract_trailing_model_switch_update_for_compaction_request`).

use compactbench_core::{EntryId, Log, Message, Part, Role};

use crate::prompt::{CONTEXTUAL_MARKERS, MODEL_SWITCH_OPEN, SUMMARY_PREFIX};
use crate::truncate::truncate_tokens;

/// One message of a history as a compaction sees it: where it came from and whether it is
/// the modelled remote `Compaction` item.
#[derive(Clone, Debug)]
pub(crate) struct HistMessage {
    /// The log message it stands for, if any.
    pub(crate) entry: Option<EntryId>,
    /// The message as the model sees it.
    pub(crate) message: Message,
    /// Whether it is a remote compaction item.
    pub(crate) compaction: bool,
}

/// An item of a replacement history.
#[derive(Clone, Debug)]
pub(crate) enum Built {
    /// A message, backed by a log entry (kept, possibly rewritten) or not (a copy of the
    /// initial context).
    Message { entry: Option<EntryId>, message: Message },
    /// This compaction's summary (a prefixed user message, or the remote compaction item).
    Summary(Message),
}

impl Built {
    fn message(&self) -> &Message {
        match self {
            Built::Message { message, .. } | Built::Summary(message) => message,
        }
    }
}

/// Whether a user message is context Codex injected rather than something the user typed:
/// some text part, trimmed, starts and ends with one of the marker pairs (ASCII case ignored).
pub(crate) fn is_contextual(message: &Message) -> bool {
    message.role == Role::User
        && message.parts.iter().any(|p| match p {
            Part::Text { text } => {
                let start = text.trim_start();
                let end = text.trim_end();
                CONTEXTUAL_MARKERS.iter().any(|(open, close)| {
                    start.get(..open.len()).is_some_and(|s| s.eq_ignore_ascii_case(open))
                        && end.get(end.len().saturating_sub(close.len())..).is_some_and(|s| s.eq_ignore_ascii_case(close))
                })
            }
            _ => false,
        })
}

/// A user message that starts a user turn (`is_user_turn_boundary`): user role, not context.
pub(crate) fn is_real_user(message: &Message) -> bool {
    message.role == Role::User && !is_contextual(message)
}

/// The text Codex reads from a user message (`UserMessageItem::message`): its text parts
/// joined without separator; images contribute nothing.
pub(crate) fn user_text(message: &Message) -> String {
    message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Whether a user text is an earlier compaction summary (`is_summary_message`).
pub(crate) fn is_summary_text(text: &str) -> bool {
    text.strip_prefix(SUMMARY_PREFIX).is_some_and(|rest| rest.starts_with('\n'))
}

/// The `<model_switch>` developer message: a system message whose only part is text
/// starting with the literal marker.
pub(crate) fn is_model_switch(message: &Message) -> bool {
    message.role == Role::System
        && matches!(message.parts.as_slice(), [Part::Text { text }] if text.starts_with(MODEL_SWITCH_OPEN))
}

/// The base instructions: the log's first message when it is a system message. Codex sends
/// them as the request's `instructions`, outside the history, so compaction never touches
/// them. Every later system message is a `developer` item of the history.
pub(crate) fn base_instructions(log: &Log) -> Option<(EntryId, &Message)> {
    log.messages().next().filter(|(_, m)| m.role == Role::System)
}

/// The initial context Codex rebuilds from its session settings at compaction time
/// (`build_initial_context`: developer message, AGENTS.md instructions, environment
/// context). We take it from the session's prelude: every developer (system) message and
/// contextual user message between the base instructions and the first real user message.
pub(crate) fn initial_context(log: &Log) -> Vec<Message> {
    let base = base_instructions(log).map(|(id, _)| id);
    log.messages()
        .filter(|(id, _)| Some(*id) != base)
        .take_while(|(_, m)| !is_real_user(m))
        .filter(|(_, m)| (m.role == Role::System && !is_model_switch(m)) || is_contextual(m))
        .map(|(_, m)| m.clone())
        .collect()
}

/// Removes and returns the model-switch message that trails the last real user message
/// (the newest one after it), so that the summarizer does not see it.
pub(crate) fn take_trailing_model_switch(history: &mut Vec<HistMessage>) -> Option<HistMessage> {
    let boundary = history.iter().rposition(|h| is_real_user(&h.message));
    let index = history
        .iter()
        .enumerate()
        .rev()
        .take_while(|(i, _)| boundary.is_none_or(|b| *i > b))
        .find(|(_, h)| is_model_switch(&h.message))
        .map(|(i, _)| i)?;
    Some(history.remove(index))
}

/// Real user messages of the history, oldest first, with earlier summaries left out
/// (`collect_user_messages`).
pub(crate) fn collect_user_messages(history: &[HistMessage]) -> Vec<(Option<EntryId>, String)> {
    history
        .iter()
        .filter(|h| !h.compaction && is_real_user(&h.message))
        .map(|h| (h.entry, user_text(&h.message)))
        .filter(|(_, text)| !is_summary_text(text))
        .collect()
}

/// The newest user messages within `max_tokens` (by `ceil(bytes / 4)`), oldest first: whole
/// while they fit, then the first one that does not fit truncated to what is left, then
/// nothing older (`build_compacted_history_with_limit`).
pub(crate) fn select_user_messages(
    messages: &[(Option<EntryId>, String)],
    max_tokens: u64,
) -> Vec<(Option<EntryId>, String)> {
    let mut selected = Vec::new();
    let mut remaining = max_tokens;
    for (entry, text) in messages.iter().rev() {
        if remaining == 0 {
            break;
        }
        let tokens = crate::items::text_tokens(text);
        if tokens <= remaining {
            selected.push((*entry, text.clone()));
            remaining -= tokens;
        } else {
            selected.push((*entry, truncate_tokens(text, remaining)));
            break;
        }
    }
    selected.reverse();
    selected
}

/// The selected user messages, each as a user message of its own, then the summary.
pub(crate) fn build_compacted_history(selected: Vec<(Option<EntryId>, String)>, summary: Message) -> Vec<Built> {
    let mut history: Vec<Built> =
        selected.into_iter().map(|(entry, text)| Built::Message { entry, message: Message::user(text) }).collect();
    history.push(Built::Summary(summary));
    history
}

/// Splices the initial context in just before the last real user message; failing that,
/// before the last summary-like user message; failing that, before the last compaction item;
/// otherwise at the end. `summary_is_compaction` says what this compaction's summary is.
pub(crate) fn insert_initial_context(
    mut history: Vec<Built>,
    context: Vec<Message>,
    summary_is_compaction: bool,
) -> Vec<Built> {
    let mut last_user_or_summary = None;
    let mut last_real_user = None;
    let mut last_compaction = None;
    for (i, built) in history.iter().enumerate().rev() {
        let compaction = matches!(built, Built::Summary(_)) && summary_is_compaction;
        if compaction {
            last_compaction.get_or_insert(i);
            continue;
        }
        let message = built.message();
        if !is_real_user(message) {
            continue;
        }
        last_user_or_summary.get_or_insert(i);
        if !is_summary_text(&user_text(message)) {
            last_real_user = Some(i);
            break;
        }
    }
    let context = context.into_iter().map(|message| Built::Message { entry: None, message });
    match last_real_user.or(last_user_or_summary).or(last_compaction) {
        Some(at) => {
            history.splice(at..at, context);
        }
        None => history.extend(context),
    }
    history
}
