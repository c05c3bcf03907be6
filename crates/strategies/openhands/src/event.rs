//! OpenHands' event model laid over our log.
//!
//! OpenHands stores events, not messages: one event per tool call (all calls of one model
//! response share its response id), one per tool result, one per plain message. The log is
//! expanded into that stream here, each event owning some parts of one log message, so that
//! condensers can count, cut and forget exactly what OpenHands counts, cuts and forgets, and
//! the view can be turned back into messages afterwards.
//!
//! Every event and every checkpoint gets a stream id in log order, as OpenHands' event
//! stream numbers every event it stores (V0 prints these ids to its summarizer and forgets
//! id ranges over them).

use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;

use compactbench_core::{estimate, fold, Checkpoint, Entry, EntryId, Log, Message, Origin, Part, Role, View, ViewMessage};

use crate::{prompt, v0};

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
        call_id: Rc<str>,
        /// Tool name.
        name: Rc<str>,
        /// Whether it carries thinking blocks (reasoning parts of the message).
        thinking: bool,
    },
    /// One tool result (`ObservationEvent` / a V0 observation).
    Observation {
        /// Id of the call it answers.
        call_id: Rc<str>,
        /// Tool name.
        name: Rc<str>,
    },
    /// A condensation summary (SDK `CondensationSummaryEvent`, V0 `AgentCondensationObservation`).
    Summary {
        /// The checkpoint that carries it.
        checkpoint: EntryId,
        /// Summary text.
        text: Rc<str>,
    },
    /// V0: an observation replaced on the fly by an `AgentCondensationObservation`
    /// (`<MASKED>`, or a browser output reduced to its URL). `entry` and `parts` still name
    /// the observation it stands for.
    Masked {
        /// The stand-in text.
        text: Rc<str>,
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
    pub(crate) parts: Rc<[usize]>,
    pub(crate) kind: Kind,
    /// V0's `tokens_before` share of this event ([`tokens`]), computed when it is made.
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
        Event { id, entry: None, parts: Rc::from([]), kind: Kind::Summary { checkpoint, text: text.into() }, v0_tokens }
    }

    /// V0's `AgentCondensationObservation` standing where this observation was, saying `text`.
    pub(crate) fn masked(self, text: Rc<str>) -> Event {
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
}

/// One step of the expanded log: an event, or a checkpoint with what it records when it is
/// a condensation of this crate's.
#[derive(Clone, Debug)]
pub(crate) enum Slot {
    Event(Event),
    Checkpoint(EntryId, Option<Recorded>),
}

/// The log expanded into OpenHands' event stream, in log order.
#[derive(Clone, Default)]
pub(crate) struct Stream {
    pub(crate) slots: Vec<Slot>,
    /// The SDK's `View.from_events` replay so far, before the view properties are enforced:
    /// the events, each condensation dropping what it forgets from the list before it and
    /// inserting its summary. Replayed once per entry here rather than from the start at
    /// every log state (each condensation filters the whole list).
    pub(crate) replayed: Vec<Event>,
    /// The number of log entries up to the last one that changed the events (a message or a
    /// condensation): later entries (other checkpoints) leave every view of them as it is.
    pub(crate) events_end: usize,
    /// The number of log entries up to the last condensation.
    pub(crate) condensed_end: usize,
    /// The next stream id.
    next: u32,
    seen_system: bool,
}

impl fold::Fold for Stream {
    fn add(&mut self, id: EntryId, entry: &Entry) {
        match entry {
            Entry::Checkpoint(cp) => {
                let recorded = Recorded::read(cp);
                // A condensation event takes a stream id, as in OpenHands; the stand-in
                // records of V0 masking are ours and take none.
                if let Some(rec) = &recorded {
                    self.next += 1;
                    self.events_end = id.index() + 1;
                    self.condensed_end = id.index() + 1;
                    crate::sdk::apply(&mut self.replayed, id, rec, cp.summary.as_ref());
                }
                self.slots.push(Slot::Checkpoint(id, recorded));
            }
            Entry::Message(m) => {
                self.events_end = id.index() + 1;
                let events = expand_message(id, m, &mut self.seen_system, &mut self.next);
                self.replayed.extend(events.iter().cloned());
                self.slots.extend(events.into_iter().map(Slot::Event));
            }
        }
    }
}

impl Stream {
    /// The events, without checkpoints.
    pub(crate) fn events(&self) -> impl Iterator<Item = &Event> {
        self.slots.iter().filter_map(|s| match s {
            Slot::Event(e) => Some(e),
            Slot::Checkpoint(..) => None,
        })
    }
}

/// The log's event stream (kept per thread and extended as the log grows: every view of
/// every log state starts from it).
pub(crate) fn stream(log: &Log) -> Rc<Stream> {
    thread_local!(static STREAM: fold::Folds<Stream> = const { RefCell::new(Vec::new()) });
    fold::fold(&STREAM, log)
}

/// The checkpoint at `id` (a [`Slot::Checkpoint`] of this log's stream).
pub(crate) fn checkpoint(log: &Log, id: EntryId) -> &Checkpoint {
    match log.get(id) {
        Some(Entry::Checkpoint(cp)) => cp,
        _ => unreachable!("a checkpoint slot names a checkpoint of its log"),
    }
}

/// The message events of the log, without checkpoints.
#[cfg(test)]
pub(crate) fn message_events(log: &Log) -> Vec<Event> {
    stream(log).events().cloned().collect()
}

fn expand_message(entry: EntryId, m: &Message, seen_system: &mut bool, next: &mut u32) -> Vec<Event> {
    let mut take_id = || {
        let id = EventId::Stream(*next);
        *next += 1;
        id
    };
    let all: Vec<usize> = (0..m.parts.len()).collect();
    let whole = |kind: Kind, id: EventId| Event::of_message(id, entry, m, all.clone(), kind);
    match m.role {
        Role::System => {
            let kind = if *seen_system { Kind::Message(Role::System) } else { Kind::SystemPrompt };
            *seen_system = true;
            vec![whole(kind, take_id())]
        }
        Role::User => vec![whole(Kind::Message(Role::User), take_id())],
        Role::Assistant => {
            let calls: Vec<usize> = m
                .parts
                .iter()
                .enumerate()
                .filter(|(_, p)| matches!(p, Part::ToolCall { .. }))
                .map(|(i, _)| i)
                .collect();
            if calls.is_empty() {
                return vec![whole(Kind::Message(Role::Assistant), take_id())];
            }
            let thinking = m.parts.iter().any(|p| matches!(p, Part::Reasoning { .. }));
            let rest: Vec<usize> = all.iter().copied().filter(|i| !calls.contains(i)).collect();
            calls
                .iter()
                .enumerate()
                .map(|(k, &i)| {
                    let Part::ToolCall { id, name, .. } = &m.parts[i] else { unreachable!("filtered to tool calls") };
                    let mut parts = if k == 0 { rest.clone() } else { Vec::new() };
                    parts.push(i);
                    parts.sort_unstable();
                    let kind = Kind::Action { call_id: id.as_str().into(), name: name.as_str().into(), thinking: thinking && k == 0 };
                    Event::of_message(take_id(), entry, m, parts, kind)
                })
                .collect()
        }
        Role::Tool => {
            let results: Vec<usize> = m
                .parts
                .iter()
                .enumerate()
                .filter(|(_, p)| matches!(p, Part::ToolResult { .. }))
                .map(|(i, _)| i)
                .collect();
            if results.is_empty() {
                return vec![whole(Kind::Message(Role::Tool), take_id())];
            }
            let rest: Vec<usize> = all.iter().copied().filter(|i| !results.contains(i)).collect();
            results
                .iter()
                .enumerate()
                .map(|(k, &i)| {
                    let Part::ToolResult { call_id, name, .. } = &m.parts[i] else {
                        unreachable!("filtered to results")
                    };
                    let mut parts = if k == 0 { rest.clone() } else { Vec::new() };
                    parts.push(i);
                    parts.sort_unstable();
                    let kind = Kind::Observation { call_id: call_id.as_str().into(), name: name.as_str().into() };
                    Event::of_message(take_id(), entry, m, parts, kind)
                })
                .collect()
        }
    }
}

/// The log message an event comes from.
pub(crate) fn message<'a>(log: &'a Log, event: &Event) -> Option<&'a Message> {
    event.entry.and_then(|e| log.message(e))
}

/// The parts an event owns.
pub(crate) fn owned_parts<'a>(log: &'a Log, event: &Event) -> Vec<&'a Part> {
    match message(log, event) {
        Some(m) => event.parts.iter().filter_map(|&i| m.parts.get(i)).collect(),
        None => Vec::new(),
    }
}

/// The text parts an event owns, in order (a V0 message's `content`, an SDK action's thought).
pub(crate) fn owned_texts(log: &Log, event: &Event) -> Vec<String> {
    owned_parts(log, event)
        .into_iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// The tool result an observation owns: `(text, is_error)`.
pub(crate) fn result_of(log: &Log, event: &Event) -> (String, bool) {
    owned_parts(log, event)
        .into_iter()
        .find_map(|p| match p {
            Part::ToolResult { text, is_error, .. } => Some((text.clone(), *is_error)),
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

/// V0's `tokens_before` (reports only; V0 decides by event counts): code points / 4, rounded
/// up, per event (Python `len`), plus the stated size of media. The SDK's own count is
/// `tokens.rs`.
pub(crate) fn tokens(event: &Event) -> u64 {
    event.v0_tokens
}

/// [`tokens`] of an event owning `parts`.
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
    Message { role: m.role, parts: parts.iter().filter_map(|&i| m.parts.get(i).cloned()).collect(), usage: m.usage }
}

/// The origin of a message built for log message `entry` (some of a batch's calls or results
/// dropped by the view's rules, a stand-in): shown through the newest checkpoint, or through
/// itself when there is none yet (a call the view drops for want of a result), since an
/// `Entry` origin promises the log message as it is.
fn shown_as(log: &Log, entry: EntryId, message: &Message) -> Origin {
    if log.message(entry) == Some(message) {
        Origin::Entry(entry)
    } else {
        Origin::Replaced(entry, log.last_checkpoint().map_or(entry, |(id, _)| id))
    }
}

/// Turns events into view messages the way the SDK's `events_to_messages` does: the events
/// of one log message (a batch of actions, or several results) become that message again;
/// summaries and stand-ins become user messages.
pub(crate) fn render(log: &Log, events: &[Event]) -> Vec<Rendered> {
    let mut view = Vec::with_capacity(events.len());
    let mut i = 0;
    while i < events.len() {
        let event = &events[i];
        match (&event.kind, event.entry) {
            (Kind::Summary { checkpoint, text }, _) => {
                let built = Some(Rc::new(Built::Message(Message::user(&**text))));
                view.push(Rendered { origin: Origin::Summary(*checkpoint), built });
                i += 1;
            }
            (Kind::Masked { text }, Some(entry)) => {
                let message = Message::user(&**text);
                view.push(Rendered { origin: shown_as(log, entry, &message), built: Some(Rc::new(Built::Message(message))) });
                i += 1;
            }
            (_, Some(entry)) => {
                let mut parts = Vec::new();
                let mut j = i;
                while j < events.len()
                    && events[j].entry == Some(entry)
                    && !matches!(events[j].kind, Kind::Summary { .. } | Kind::Masked { .. })
                {
                    parts.extend(events[j].parts.iter().copied());
                    j += 1;
                }
                parts.sort_unstable();
                parts.dedup();
                if let Some(m) = log.message(entry) {
                    let mut rendered = Rendered::entry(entry, m, &parts);
                    if let Some(Built::Message(built)) = rendered.built.as_deref() {
                        rendered.origin = shown_as(log, entry, built);
                    }
                    view.push(rendered);
                }
                i = j;
            }
            (_, None) => i += 1,
        }
    }
    view
}

/// One message of a view as rendered: the log message at `origin` as it is (`built` is
/// `None`), or the message built in its place.
#[derive(Clone, Debug)]
pub(crate) struct Rendered {
    pub(crate) origin: Origin,
    /// Shared: a view is rendered anew at every log state, mostly into the same messages.
    pub(crate) built: Option<Rc<Built>>,
}

/// A message built in place of a log message.
#[derive(Clone, Debug)]
pub(crate) enum Built {
    /// A summary, part of a batch, truncated results.
    Message(Message),
    /// V0: stand-ins for masked observations of one log message, one user text each (before
    /// truncation at `max_message_chars`). Kept as the stand-in texts, shared with their
    /// events: most of a long masked view, rebuilt at every log state and compared with the
    /// stand-ins recorded for it.
    Masked(Vec<Rc<str>>),
}

impl Built {
    pub(crate) fn to_message(&self) -> Message {
        match self {
            Built::Message(m) => m.clone(),
            Built::Masked(texts) => {
                Message::new(Role::User, texts.iter().map(|t| Part::text(prompt::v0_truncate(t, v0::MAX_MESSAGE_CHARS))).collect())
            }
        }
    }

    /// Whether this is `m` (without building it).
    pub(crate) fn is(&self, m: &Message) -> bool {
        match self {
            Built::Message(built) => built == m,
            Built::Masked(texts) => {
                m.role == Role::User
                    && m.usage.is_none()
                    && m.parts.len() == texts.len()
                    && m.parts.iter().zip(texts).all(|(p, t)| match p {
                        Part::Text { text } if prompt::longer_than(t, v0::MAX_MESSAGE_CHARS) => {
                            *text == prompt::v0_truncate(t, v0::MAX_MESSAGE_CHARS)
                        }
                        Part::Text { text } => **text == **t,
                        _ => false,
                    })
            }
        }
    }
}

impl Rendered {
    /// Log message `m` (at `entry`) showing only `parts`.
    pub(crate) fn entry(entry: EntryId, m: &Message, parts: &[usize]) -> Rendered {
        let built = (!is_whole(m, parts)).then(|| Rc::new(Built::Message(subset(m, parts))));
        Rendered { origin: Origin::Entry(entry), built }
    }

    /// The view message, as [`Strategy::project`](compactbench_core::Strategy::project)
    /// returns it.
    pub(crate) fn to_view_message(&self, log: &Log) -> ViewMessage {
        let message = match (&self.built, self.origin) {
            (Some(built), _) => built.to_message(),
            (None, Origin::Entry(entry)) => log.message(entry).expect("rendered from a log message").clone(),
            (None, _) => unreachable!("only log messages are rendered as they are"),
        };
        ViewMessage { origin: self.origin, message }
    }
}

/// The view of `rendered` messages.
pub(crate) fn materialize(log: &Log, rendered: &[Rendered]) -> View {
    View { messages: rendered.iter().map(|r| r.to_view_message(log)).collect() }
}

/// Brings `view`, [`materialize`]d at an earlier state of `log`, up to date with `rendered`.
/// A message showing its log message as it is at the same place stays; one built in its place
/// stays when it is the same; from the first difference on, messages are made anew (views are
/// rebuilt at every log state, and copying every message was most of the cost).
pub(crate) fn bring_up_to_date(log: &Log, view: &mut View, rendered: &[Rendered]) {
    let same = view
        .messages
        .iter()
        .zip(rendered)
        .take_while(|(vm, r)| vm.origin == r.origin && r.built.as_ref().is_none_or(|b| b.is(&vm.message)))
        .count();
    view.messages.truncate(same);
    view.messages.extend(rendered[same..].iter().map(|r| r.to_view_message(log)));
}

/// Checkpoint data this crate writes, read back when the view is rebuilt.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Recorded {
    /// Explicit forgotten stream ids (V0 ids, `-1` possible).
    pub(crate) forgotten: HashSet<i64>,
    /// V0 inclusive id range.
    pub(crate) range: Option<(i64, i64)>,
    /// SDK: forgotten summary events, by the checkpoint that carried them.
    pub(crate) forgotten_summaries: Vec<EntryId>,
    /// Where the summary goes in the reduced list.
    pub(crate) summary_offset: Option<usize>,
}

/// Key under which this crate's checkpoint details say what they record.
pub(crate) const DETAILS_TAG: &str = "openhands";
/// Tag value of a condensation (the SDK `Condensation` / V0 `CondensationAction`).
pub(crate) const CONDENSATION: &str = "condensation";

impl Recorded {
    /// Reads a checkpoint's details; `None` for checkpoints this crate did not write.
    pub(crate) fn read(cp: &Checkpoint) -> Option<Recorded> {
        let d = cp.details.as_object()?;
        if d.get(DETAILS_TAG)? != CONDENSATION {
            return None;
        }
        let ints = |key: &str| -> Vec<i64> {
            d.get(key)
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|x| x.as_i64()).collect())
                .unwrap_or_default()
        };
        let range = d
            .get("forgotten_range")
            .and_then(|v| v.as_array())
            .and_then(|a| Some((a.first()?.as_i64()?, a.get(1)?.as_i64()?)));
        Some(Recorded {
            forgotten: ints("forgotten").into_iter().collect(),
            range,
            forgotten_summaries: ints("forgotten_summaries")
                .into_iter()
                .filter_map(|n| u32::try_from(n).ok())
                .map(EntryId)
                .collect(),
            summary_offset: d.get("summary_offset").and_then(|v| v.as_u64()).map(|n| n as usize),
        })
    }

    /// Whether this condensation forgets the event.
    pub(crate) fn forgets(&self, id: EventId) -> bool {
        match id {
            EventId::Stream(_) => {
                let n = id.v0();
                self.forgotten.contains(&n) || self.range.is_some_and(|(a, b)| a <= n && n <= b)
            }
            EventId::Summary(cp) => self.forgotten_summaries.contains(&cp),
            EventId::Invalid => false,
        }
    }
}

/// What a set of condensations forgets together: an event is forgotten when any of them
/// forgets it. Merged once, so that each event is looked up once rather than once per
/// condensation (a long session holds hundreds).
#[derive(Default)]
pub(crate) struct Forgetting {
    ids: HashSet<i64>,
    /// Inclusive id ranges, sorted and disjoint.
    ranges: Vec<(i64, i64)>,
    summaries: HashSet<EntryId>,
}

impl Forgetting {
    pub(crate) fn of<'r>(recorded: impl IntoIterator<Item = &'r Recorded>) -> Forgetting {
        let mut all = Forgetting::default();
        let mut ranges = Vec::new();
        for r in recorded {
            all.ids.extend(r.forgotten.iter().copied());
            all.summaries.extend(r.forgotten_summaries.iter().copied());
            ranges.extend(r.range.filter(|(a, b)| a <= b));
        }
        ranges.sort_unstable();
        for (a, b) in ranges {
            match all.ranges.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => all.ranges.push((a, b)),
            }
        }
        all
    }

    /// [`Recorded::forgets`] of any of the condensations.
    pub(crate) fn forgets(&self, id: EventId) -> bool {
        match id {
            EventId::Stream(_) => {
                let n = id.v0();
                if self.ids.contains(&n) {
                    return true;
                }
                let after = self.ranges.partition_point(|&(a, _)| a <= n);
                after > 0 && n <= self.ranges[after - 1].1
            }
            EventId::Summary(cp) => self.summaries.contains(&cp),
            EventId::Invalid => false,
        }
    }
}
