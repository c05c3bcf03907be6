//! OpenHands' event model laid over our log.
//!
//! OpenHands stores events, not messages: one event per tool call (all calls of one model
//! response share its response id), one per tool result, one per plain message. A log message
//! is expanded into such events here ([`expand`]), each owning some parts of the message, so
//! that condensers can count, cut and forget exactly what OpenHands counts, cuts and forgets,
//! and the view can be turned back into messages afterwards.

use std::sync::Arc;

use compactbench_core::{estimate, EntryId, Log, Message, Part, Role};

/// Identity of an event in a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum EventId {
    /// An event stored in the stream (a log message or part of one).
    Stream(u32),
    /// The SDK summary event of the checkpoint at this entry (`<condensation id>-summary`).
    Summary(EntryId),
    /// V0's `Event.INVALID_ID` (-1): events made on the fly (summary and masking
    /// observations) that were never stored.
    Invalid,
}

impl EventId {
    /// The id as V0 prints and compares it (`-1` for events that were never stored).
    pub(crate) fn v0(self) -> i64 {
        match self {
            EventId::Stream(n) => i64::from(n),
            EventId::Summary(_) | EventId::Invalid => -1,
        }
    }
}

/// What an event is, in OpenHands' terms.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kind {
    /// The first system message of the log (`SystemPromptEvent` / `SystemMessageAction`).
    SystemPrompt,
    /// A whole message that is neither a tool call nor a tool result (`MessageEvent` /
    /// `MessageAction`): user turns, assistant text replies, later system notices.
    Message(Role),
    /// One tool call of an assistant message (`ActionEvent` / a V0 tool action). The first
    /// call of a message also owns its text and reasoning (OpenHands puts the thought and the
    /// thinking blocks on the first action of a batch only).
    Action {
        /// Provider call id.
        call_id: Arc<str>,
        /// Tool name.
        name: Arc<str>,
        /// Whether it carries thinking blocks (reasoning parts of the message).
        thinking: bool,
    },
    /// One tool result (`ObservationEvent` / a V0 observation).
    Observation {
        /// Id of the call it answers.
        call_id: Arc<str>,
        /// Tool name.
        name: Arc<str>,
    },
    /// A condensation summary (SDK `CondensationSummaryEvent`, V0 `AgentCondensationObservation`).
    Summary {
        /// The checkpoint that carries it.
        checkpoint: EntryId,
        /// Summary text.
        text: Arc<str>,
    },
    /// V0: an observation replaced on the fly by an `AgentCondensationObservation`
    /// (`<MASKED>`, or a browser output reduced to its URL). `entry` and `parts` still name
    /// the observation it stands for.
    Masked {
        /// The stand-in text.
        text: Arc<str>,
    },
}

/// One event of a view. Views are rebuilt per log state from the stream's events, so an
/// event is cheap to clone: what it shares with its stream copy is reference counted.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Event {
    pub(crate) id: EventId,
    /// The log message it was expanded from (none for summaries).
    pub(crate) entry: Option<EntryId>,
    /// Indices of the parts of that message this event owns.
    pub(crate) parts: Arc<[usize]>,
    pub(crate) kind: Kind,
    /// V0's `tokens_before` share of this event ([`Event::v0_tokens`]), computed when it is made.
    v0_tokens: u64,
}

impl Event {
    /// An event owning `parts` of log message `m` (at `entry`).
    fn of_message(id: EventId, entry: EntryId, m: &Message, parts: Vec<usize>, kind: Kind) -> Event {
        let v0_tokens = v0_estimate(parts.iter().filter_map(|&i| m.parts.get(i)));
        Event { id, entry: Some(entry), parts: parts.into(), kind, v0_tokens }
    }

    /// A summary event (stands for no log message).
    pub(crate) fn summary(id: EventId, checkpoint: EntryId, text: String) -> Event {
        let v0_tokens = estimate::code_points(&text).div_ceil(4);
        Event { id, entry: None, parts: Arc::from([]), kind: Kind::Summary { checkpoint, text: text.into() }, v0_tokens }
    }

    /// V0's `AgentCondensationObservation` standing where this observation was, saying `text`.
    pub(crate) fn masked(self, text: Arc<str>) -> Event {
        let v0_tokens = estimate::code_points(&text).div_ceil(4);
        Event { id: EventId::Invalid, entry: self.entry, parts: self.parts, kind: Kind::Masked { text }, v0_tokens }
    }

    pub(crate) fn is_action(&self) -> bool {
        matches!(self.kind, Kind::Action { .. })
    }

    pub(crate) fn is_observation(&self) -> bool {
        matches!(self.kind, Kind::Observation { .. })
    }

    /// V0's `isinstance(event, AgentCondensationObservation)`.
    pub(crate) fn is_condensation_observation(&self) -> bool {
        matches!(self.kind, Kind::Summary { .. } | Kind::Masked { .. })
    }

    /// V0's `isinstance(event, Observation)`.
    pub(crate) fn is_v0_observation(&self) -> bool {
        self.is_observation() || self.is_condensation_observation()
    }

    /// V0's `isinstance(event, MessageAction) and event.source == 'user'`.
    pub(crate) fn is_user_message(&self) -> bool {
        self.kind == Kind::Message(Role::User)
    }

    /// The call id of an action or observation.
    pub(crate) fn call_id(&self) -> Option<&str> {
        match &self.kind {
            Kind::Action { call_id, .. } | Kind::Observation { call_id, .. } => Some(call_id),
            _ => None,
        }
    }

    /// V0's `tokens_before` (reports only; V0 decides by event counts): code points / 4,
    /// rounded up, per event (Python `len`), plus the stated size of media. The SDK's own
    /// count is `tokens.rs`.
    pub(crate) fn v0_tokens(&self) -> u64 {
        self.v0_tokens
    }
}

/// The events of log message `m` (at `entry`), numbered from `next` on. `seen_system` says
/// whether the log had a system message before: only the first is the system prompt.
pub(crate) fn expand(entry: EntryId, m: &Message, seen_system: bool, next: &mut u32) -> Vec<Event> {
    let mut take_id = || {
        *next += 1;
        EventId::Stream(*next - 1)
    };
    let all: Vec<usize> = (0..m.parts.len()).collect();
    // Tool calls become one action each and tool results one observation each.
    let items: Vec<usize> = match m.role {
        Role::Assistant => all.iter().copied().filter(|&i| matches!(m.parts[i], Part::ToolCall { .. })).collect(),
        Role::Tool => all.iter().copied().filter(|&i| matches!(m.parts[i], Part::ToolResult { .. })).collect(),
        Role::System | Role::User => Vec::new(),
    };
    if items.is_empty() {
        let kind = if m.role == Role::System && !seen_system { Kind::SystemPrompt } else { Kind::Message(m.role) };
        return vec![Event::of_message(take_id(), entry, m, all, kind)];
    }
    let thinking = m.parts.iter().any(|p| matches!(p, Part::Reasoning { .. }));
    let rest: Vec<usize> = all.iter().copied().filter(|i| !items.contains(i)).collect();
    items
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            // The first of them also owns the message's other parts.
            let mut parts = if k == 0 { rest.clone() } else { Vec::new() };
            parts.push(i);
            parts.sort_unstable();
            let kind = match &m.parts[i] {
                Part::ToolCall { id, name, .. } => {
                    Kind::Action { call_id: id.as_str().into(), name: name.as_str().into(), thinking: thinking && k == 0 }
                }
                Part::ToolResult { call_id, name, .. } => {
                    Kind::Observation { call_id: call_id.as_str().into(), name: name.as_str().into() }
                }
                _ => unreachable!("items are tool calls or results"),
            };
            Event::of_message(take_id(), entry, m, parts, kind)
        })
        .collect()
}

/// The parts an event owns (of the log message it comes from).
pub(crate) fn owned_parts<'a>(log: &'a Log, event: &Event) -> Vec<&'a Part> {
    match event.entry.and_then(|e| log.message(e)) {
        Some(m) => event.parts.iter().filter_map(|&i| m.parts.get(i)).collect(),
        None => Vec::new(),
    }
}

/// The text parts an event owns, in order (a V0 message's `content`, an SDK action's thought).
pub(crate) fn owned_texts<'a>(log: &'a Log, event: &Event) -> Vec<&'a str> {
    owned_parts(log, event)
        .into_iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The tool result an observation owns: `(text, is_error)`.
pub(crate) fn result_of<'a>(log: &'a Log, event: &Event) -> (&'a str, bool) {
    owned_parts(log, event)
        .into_iter()
        .find_map(|p| match p {
            Part::ToolResult { text, is_error, .. } => Some((text.as_str(), *is_error)),
            _ => None,
        })
        .unwrap_or_default()
}

/// The arguments of the call an action owns.
pub(crate) fn args_of(log: &Log, event: &Event) -> serde_json::Value {
    owned_parts(log, event)
        .into_iter()
        .find_map(|p| match p {
            Part::ToolCall { args, .. } => Some(args.clone()),
            _ => None,
        })
        .unwrap_or(serde_json::Value::Null)
}

/// [`Event::v0_tokens`] of an event owning `parts`.
fn v0_estimate<'a>(parts: impl Iterator<Item = &'a Part>) -> u64 {
    let mut chars = 0;
    let mut media = 0;
    for part in parts {
        match part {
            Part::Text { text } | Part::Reasoning { text } => chars += estimate::code_points(text),
            Part::ToolCall { name, args, .. } => {
                chars += estimate::code_points(name) + estimate::code_points(&args.to_string());
            }
            Part::ToolResult { text, .. } => chars += estimate::code_points(text),
            Part::Media { tokens, .. } => media += u64::from(*tokens),
        }
    }
    chars.div_ceil(4) + media
}

/// Whether `parts` (sorted, without repeats) are all the parts of `m`.
pub(crate) fn is_whole(m: &Message, parts: &[usize]) -> bool {
    parts.len() == m.parts.len() && parts.iter().enumerate().all(|(i, &p)| i == p)
}

/// A message holding only `parts` of `m` (the whole message when all are kept).
pub(crate) fn subset(m: &Message, parts: &[usize]) -> Message {
    if is_whole(m, parts) {
        return m.clone();
    }
    Message { role: m.role, parts: parts.iter().filter_map(|&i| m.parts.get(i).cloned()).collect(), usage: m.usage, failure: m.failure }
}
