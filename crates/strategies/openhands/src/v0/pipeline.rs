//! The V0 side (All-Hands-AI/OpenHands `openhands/memory`): `View.from_events` (all
//! forgotten ids at once, only the latest summary), the condenser family, the pipeline, and
//! the parts of `ConversationMemory.process_events` that decide what reaches the model.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use compactbench_core::{
    fold, Checkpoint, CheckpointKind, Cx, Entry, EntryId, Error, ErrorKind, Log, LogVersion, Message, Origin, Part,
    SummarizerUsage, SummaryPosition, SummaryRequest, View, Window,
};
use rustc_hash::FxHashMap;
use serde_json::json;
use smallvec::SmallVec;

use crate::event::{self, Built, Event, EventId, Forgetting, Kind, Recorded, Rendered, Slot, CONDENSATION, DETAILS_TAG};
use crate::{memo, prompt};

/// `LLMConfig.max_message_chars` default: longer observations are middle-truncated when
/// messages are built.
pub(crate) const MAX_MESSAGE_CHARS: usize = 30_000;

/// V0 tool names whose results are `BrowserOutputObservation`s (CodeAct's `browser` and
/// `web_read`).
const BROWSER_TOOLS: [&str; 2] = ["browser", "web_read"];

/// One V0 condenser (validated settings).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Condenser {
    NoOp,
    ObservationMasking {
        attention_window: usize,
    },
    BrowserOutput {
        attention_window: usize,
    },
    RecentEvents {
        keep_first: usize,
        max_events: usize,
    },
    /// `LLMSummarizingCondenser`, or `StructuredSummaryCondenser` when `structured`.
    Summarizing {
        structured: bool,
        max_size: usize,
        keep_first: usize,
        max_event_length: usize,
    },
    AmortizedForgetting {
        max_size: usize,
        keep_first: usize,
    },
    LlmAttention {
        max_size: usize,
        keep_first: usize,
    },
    ConversationWindow,
}

impl Condenser {
    /// Rolling condensers emit condensation events; the others transform every view.
    fn is_rolling(&self) -> bool {
        matches!(
            self,
            Condenser::Summarizing { .. }
                | Condenser::AmortizedForgetting { .. }
                | Condenser::LlmAttention { .. }
                | Condenser::ConversationWindow
        )
    }

    fn should_condense(&self, view: &[Event], request: bool) -> bool {
        match self {
            Condenser::Summarizing { max_size, .. }
            | Condenser::AmortizedForgetting { max_size, .. }
            | Condenser::LlmAttention { max_size, .. } => view.len() > *max_size || request,
            Condenser::ConversationWindow => request,
            _ => false,
        }
    }

    /// The view a non-rolling condenser returns (nothing stored). Borrowed in, borrowed out
    /// where it changes nothing, and only what it keeps is copied: the base view holds every
    /// event a condensation has not forgotten, and copying it whole per request was most of
    /// a `RecentEvents` pipeline's cost.
    fn transform<'v>(&self, log: &Log, view: Cow<'v, [Event]>) -> Cow<'v, [Event]> {
        match self {
            Condenser::ObservationMasking { attention_window } => {
                let n = view.len();
                let text: Rc<str> = Rc::from("<MASKED>");
                view.into_owned()
                    .into_iter()
                    .enumerate()
                    .map(|(i, e)| {
                        // Summaries stay: they stand for no log message a stand-in could replace.
                        if e.is_observation() && (i as i64) < n as i64 - *attention_window as i64 {
                            e.masked(text.clone())
                        } else {
                            e
                        }
                    })
                    .collect()
            }
            Condenser::BrowserOutput { attention_window } => {
                let urls = action_urls(log);
                let mut seen = 0;
                let mut out: Vec<Event> = view
                    .into_owned()
                    .into_iter()
                    .rev()
                    .map(|e| {
                        if !is_browser_output(&e) {
                            return e;
                        }
                        if seen >= *attention_window {
                            let url = e.call_id().and_then(|c| urls.0.get(c)).cloned().unwrap_or_default();
                            e.masked(format!("Visited URL {url}\nContent omitted").into())
                        } else {
                            seen += 1;
                            e
                        }
                    })
                    .collect();
                out.reverse();
                Cow::Owned(out)
            }
            Condenser::RecentEvents { keep_first, max_events } => {
                let head: Vec<Event> = view.iter().take(*keep_first).cloned().collect();
                let tail_len = max_events.saturating_sub(head.len());
                // Python `view[-tail_len:]`: `view[-0:]` is the whole view, and a tail longer
                // than the view is the whole view too, so short views repeat their head.
                let tail = if tail_len == 0 { &view[..] } else { &view[view.len().saturating_sub(tail_len)..] };
                Cow::Owned(head.into_iter().chain(tail.iter().cloned()).collect())
            }
            _ => view,
        }
    }
}

fn is_browser_output(e: &Event) -> bool {
    matches!(&e.kind, Kind::Observation { name, .. } if BROWSER_TOOLS.contains(&&**name))
}

/// Call id -> the `url` argument of the call, for browser outputs' "Visited URL" line.
#[derive(Clone, Default)]
struct ActionUrls(HashMap<String, String>);

impl fold::Fold for ActionUrls {
    fn add(&mut self, _: EntryId, entry: &Entry) {
        let Entry::Message(m) = entry else { return };
        for p in &m.parts {
            if let Part::ToolCall { id, args, .. } = p {
                if let Some(u) = args.get("url").and_then(|u| u.as_str()) {
                    self.0.insert(id.clone(), u.to_owned());
                }
            }
        }
    }
}

fn action_urls(log: &Log) -> Rc<ActionUrls> {
    thread_local!(static URLS: fold::Folds<ActionUrls> = const { RefCell::new(Vec::new()) });
    fold::fold(&URLS, log)
}

/// V0 `View.from_events`: every forgotten id of every condensation is dropped at once, then
/// the summary of the latest condensation that has one is inserted at its offset.
///
/// Kept per thread and extended while the log grows without a condensation: the new events
/// are then appended (after the same filter), unless the summary sat at the end of a list
/// shorter than its offset (it would move).
pub(crate) fn base_view(log: &Log) -> Rc<Vec<Event>> {
    thread_local!(static KEPT: RefCell<Option<BaseView>> = const { RefCell::new(None) });
    let stream = event::stream(log);
    let version = log.version();
    KEPT.with_borrow_mut(|kept| {
        match kept {
            Some(k) if k.version == version => return k.events.clone(),
            Some(k) if version.extends(k.version) && stream.condensed_end <= k.version.entries() && k.summary_stays => {
                let new = stream.slots[k.slots..].iter().filter_map(|s| match s {
                    Slot::Event(e) if !k.forgetting.forgets(e.id) => Some(e.clone()),
                    _ => None,
                });
                Rc::make_mut(&mut k.events).extend(new);
                (k.version, k.slots) = (version, stream.slots.len());
                return k.events.clone();
            }
            _ => {}
        }
        let built = BaseView::build(log, &stream);
        let events = built.events.clone();
        *kept = Some(built);
        events
    })
}

/// [`base_view`] at one log state, with what extending it needs.
struct BaseView {
    version: LogVersion,
    /// Stream slots it was built from.
    slots: usize,
    forgetting: Forgetting,
    /// Whether appending events leaves the summary where it is.
    summary_stays: bool,
    events: Rc<Vec<Event>>,
}

impl BaseView {
    fn build(log: &Log, stream: &event::Stream) -> BaseView {
        let recorded: Vec<(EntryId, &Recorded)> = stream
            .slots
            .iter()
            .filter_map(|s| match s {
                Slot::Checkpoint(id, Some(r)) => Some((*id, r)),
                Slot::Checkpoint(_, None) | Slot::Event(_) => None,
            })
            .collect();
        let forgetting = Forgetting::of(recorded.iter().map(|(_, r)| *r));
        let mut events: Vec<Event> = stream.events().filter(|e| !forgetting.forgets(e.id)).cloned().collect();
        let latest = recorded
            .iter()
            .rev()
            .find_map(|(id, r)| Some((*id, event::checkpoint(log, *id).summary.as_ref()?, r.summary_offset?)));
        let mut summary_stays = true;
        if let Some((checkpoint, summary, offset)) = latest {
            let at = offset.min(events.len());
            summary_stays = at == offset;
            events.insert(at, Event::summary(EventId::Invalid, checkpoint, summary.text()));
        }
        BaseView { version: log.version(), slots: stream.slots.len(), forgetting, summary_stays, events: Rc::new(events) }
    }
}

/// The view the pipeline hands to the model when nothing condenses: every transform applied.
/// The same for every state of a log with the same events (a stand-in record, appended after
/// most requests of a masking pipeline, adds none), so it is kept until an event arrives.
pub(crate) fn view(log: &Log, pipeline: &[Condenser]) -> Rc<Vec<Event>> {
    thread_local!(static VIEW: memo::EventsSlot<Vec<Condenser>, Vec<Event>> = const { RefCell::new(None) });
    memo::get_for_events(&VIEW, log, event::stream(log).events_end, pipeline.to_vec(), || {
        let base = base_view(log);
        pipeline.iter().fold(Cow::Borrowed(&base[..]), |v, c| c.transform(log, v)).into_owned()
    })
}

/// The condensers up to the last rolling one: a transform after it cannot change whether or
/// how the pipeline condenses, so `wants` and `condense` need not run it.
fn up_to_last_rolling(pipeline: &[Condenser]) -> &[Condenser] {
    &pipeline[..pipeline.iter().rposition(Condenser::is_rolling).map_or(0, |i| i + 1)]
}

/// Whether the pipeline would return a condensation for this log.
pub(crate) fn wants(log: &Log, pipeline: &[Condenser], request: bool) -> bool {
    let pipeline = up_to_last_rolling(pipeline);
    if pipeline.is_empty() {
        return false;
    }
    let base = base_view(log);
    let mut view = Cow::Borrowed(&base[..]);
    for c in pipeline {
        if c.is_rolling() {
            if c.should_condense(&view, request) {
                return true;
            }
        } else {
            view = c.transform(log, view);
        }
    }
    false
}

/// `CondensationAction`'s two shapes.
enum Forgotten {
    List(Vec<i64>),
    Range(i64, i64),
}

struct Condensation {
    forgotten: Forgotten,
    summary: Option<String>,
    offset: Option<usize>,
    usage: SummarizerUsage,
}

/// The pipeline's `condense`: transforms run in order; the first rolling condenser that
/// triggers returns the condensation (errors propagate, as in V0).
fn condense(log: &Log, pipeline: &[Condenser], request: bool, cx: &mut Cx<'_>) -> Result<Option<Checkpoint>, Error> {
    let pipeline = up_to_last_rolling(pipeline);
    if pipeline.is_empty() {
        return Ok(None);
    }
    let base = base_view(log);
    let mut view = Cow::Borrowed(&base[..]);
    for c in pipeline {
        if !c.is_rolling() {
            view = c.transform(log, view);
            continue;
        }
        if !c.should_condense(&view, request) {
            continue;
        }
        let condensation = match c {
            Condenser::Summarizing { structured, max_size, keep_first, max_event_length } => {
                summarize(log, &view, *structured, *max_size, *keep_first, *max_event_length, cx)?
            }
            Condenser::AmortizedForgetting { max_size, keep_first } => amortized(&view, *max_size, *keep_first)?,
            Condenser::LlmAttention { max_size, keep_first } => attention(log, &view, *max_size, *keep_first, cx)?,
            Condenser::ConversationWindow => window(&view),
            _ => unreachable!("only rolling condensers condense"),
        };
        return Ok(Some(checkpoint(&base, condensation, request, name(c))));
    }
    Ok(None)
}

fn name(c: &Condenser) -> &'static str {
    match c {
        Condenser::Summarizing { structured: false, .. } => "llm_summarizing",
        Condenser::Summarizing { structured: true, .. } => "structured_summary",
        Condenser::AmortizedForgetting { .. } => "amortized_forgetting",
        Condenser::LlmAttention { .. } => "llm_attention",
        Condenser::ConversationWindow => "conversation_window",
        Condenser::NoOp => "noop",
        Condenser::ObservationMasking { .. } => "observation_masking",
        Condenser::BrowserOutput { .. } => "browser_output",
        Condenser::RecentEvents { .. } => "recent_events",
    }
}

/// Python `view[start:-from_tail]` for `from_tail >= 0`.
fn middle(view: &[Event], start: usize, from_tail: usize) -> &[Event] {
    let end = if from_tail == 0 { 0 } else { view.len().saturating_sub(from_tail) };
    let start = start.min(view.len());
    if start >= end {
        &[]
    } else {
        &view[start..end]
    }
}

fn min_max(ids: impl IntoIterator<Item = i64>) -> Option<(i64, i64)> {
    ids.into_iter().fold(None, |acc, id| match acc {
        None => Some((id, id)),
        Some((a, b)) => Some((a.min(id), b.max(id))),
    })
}

fn empty_min() -> Error {
    Error::new(ErrorKind::NothingToCompact, "min() arg is an empty sequence")
}

/// `LLMSummarizingCondenser.get_condensation` / `StructuredSummaryCondenser.get_condensation`.
fn summarize(
    log: &Log,
    view: &[Event],
    structured: bool,
    max_size: usize,
    keep_first: usize,
    max_event_length: usize,
    cx: &mut Cx<'_>,
) -> Result<Condensation, Error> {
    let head_len = keep_first.min(view.len());
    let from_tail = (max_size / 2).saturating_sub(head_len + 1);
    let Some(at_offset) = view.get(keep_first) else {
        return Err(Error::new(ErrorKind::NothingToCompact, "list index out of range"));
    };
    let previous = if at_offset.is_condensation_observation() {
        prompt::v0_event_message(log, at_offset)
    } else {
        "No events summarized".to_owned()
    };
    let forgotten: Vec<&Event> =
        middle(view, keep_first, from_tail).iter().filter(|e| !e.is_condensation_observation()).collect();
    let (start, end) = min_max(forgotten.iter().map(|e| e.id.v0())).ok_or_else(empty_min)?;

    let mut transcript = String::new();
    transcript.push_str(&format!(
        "<PREVIOUS SUMMARY>\n{}\n</PREVIOUS SUMMARY>\n",
        prompt::v0_truncate(&previous, max_event_length)
    ));
    transcript.push_str("\n\n");
    for e in &forgotten {
        let content = prompt::v0_truncate(&prompt::v0_event_str(log, e), max_event_length);
        transcript.push_str(&format!("<EVENT id={}>\n{content}\n</EVENT>\n", e.id.v0()));
    }
    let request = SummaryRequest {
        purpose: if structured { "structured-summary" } else { "condensation" }.to_owned(),
        // V0 sends one user message that opens with the rules; the seam sends instructions
        // after the material, so the rules go in the system text instead.
        system: if structured { prompt::STRUCTURED_RULES.to_owned() } else { prompt::summary_rules(false) },
        transcript,
        instructions: if structured { prompt::structured_instructions() } else { prompt::SUMMARIZE_NOW.to_owned() },
        max_output_tokens: cx.model.max_output,
    };
    let mut usage = SummarizerUsage { calls: 1, ..SummarizerUsage::default() };
    let reply = cx.summarizer.summarize(&request)?;
    usage.input_tokens = reply.input_tokens;
    usage.output_tokens = reply.output_tokens;
    let summary = if structured {
        // A reply that is not the function's JSON arguments becomes an empty state summary.
        let fields = serde_json::from_str::<serde_json::Value>(reply.text.trim())
            .ok()
            .and_then(|v| v.as_object().cloned())
            .filter(|o| o.iter().all(|(k, v)| !prompt::STATE_SUMMARY_FIELDS.contains(&k.as_str()) || v.is_string()))
            .unwrap_or_default();
        prompt::render_state_summary(&fields)
    } else {
        reply.text
    };
    Ok(Condensation {
        forgotten: Forgotten::Range(start, end),
        summary: Some(summary),
        offset: Some(keep_first),
        usage,
    })
}

/// `AmortizedForgettingCondenser.get_condensation`.
fn amortized(view: &[Event], max_size: usize, keep_first: usize) -> Result<Condensation, Error> {
    let head: Vec<&Event> = view.iter().take(keep_first).collect();
    let from_tail = (max_size / 2).saturating_sub(head.len());
    let tail = if from_tail == 0 { view } else { &view[view.len().saturating_sub(from_tail)..] };
    let keep: HashSet<i64> = head.iter().copied().chain(tail.iter()).map(|e| e.id.v0()).collect();
    let forget = view.iter().map(|e| e.id.v0()).filter(|id| !keep.contains(id));
    let (start, end) = min_max(forget).ok_or_else(empty_min)?;
    Ok(Condensation {
        forgotten: Forgotten::Range(start, end),
        summary: None,
        offset: None,
        usage: SummarizerUsage::default(),
    })
}

/// `LLMAttentionCondenser.get_condensation`.
fn attention(
    log: &Log,
    view: &[Event],
    max_size: usize,
    keep_first: usize,
    cx: &mut Cx<'_>,
) -> Result<Condensation, Error> {
    let head: Vec<i64> = view.iter().take(keep_first).map(|e| e.id.v0()).collect();
    let from_tail = (max_size / 2).saturating_sub(head.len());
    let items: Vec<String> = view
        .iter()
        .map(|e| format!("<ID>{}</ID>\n<CONTENT>{}</CONTENT>", e.id.v0(), prompt::v0_event_message(log, e)))
        .collect();
    let request = SummaryRequest {
        purpose: "attention".to_owned(),
        // V0 sends the rules as the first user message, then one message per event.
        system: prompt::ATTENTION_RULES.to_owned(),
        transcript: items.join("\n\n"),
        instructions: prompt::ATTENTION_INSTRUCTIONS.to_owned(),
        max_output_tokens: cx.model.max_output,
    };
    let reply = cx.summarizer.summarize(&request)?;
    let ids: Vec<i64> = serde_json::from_str::<serde_json::Value>(reply.text.trim())
        .ok()
        .and_then(|v| v.get("ids")?.as_array()?.iter().map(|x| x.as_i64()).collect::<Option<Vec<i64>>>())
        .ok_or_else(|| Error::new(ErrorKind::Rejected, "response is not an ImportantEventSelection"))?;
    let mut keep: Vec<i64> = ids.into_iter().filter(|id| !head.contains(id)).take(from_tail).collect();
    for e in view.iter().rev() {
        if keep.len() >= from_tail {
            break;
        }
        if !keep.contains(&e.id.v0()) {
            keep.push(e.id.v0());
        }
    }
    let forgotten = view.iter().map(|e| e.id.v0()).filter(|id| !keep.contains(id) && !head.contains(id)).collect();
    let usage =
        SummarizerUsage { calls: 1, failures: 0, input_tokens: reply.input_tokens, output_tokens: reply.output_tokens };
    Ok(Condensation { forgotten: Forgotten::List(forgotten), summary: None, offset: None, usage })
}

/// `ConversationWindowCondenser.get_condensation`: keep the system prompt, the first user
/// message and about half of the rest, never starting on an observation.
fn window(view: &[Event]) -> Condensation {
    let empty = || Condensation {
        forgotten: Forgotten::List(Vec::new()),
        summary: None,
        offset: None,
        usage: SummarizerUsage::default(),
    };
    let Some(first_user) = view.iter().position(Event::is_user_message) else { return empty() };
    let mut essential = Vec::new();
    if let Some(system) = view.iter().find(|e| e.kind == Kind::SystemPrompt) {
        essential.push(system.id.v0());
    }
    essential.push(view[first_user].id.v0());
    let non_essential = view.len() - essential.len();
    let keep_recent = (non_essential / 2).max(1);
    let slice_start = view.len().saturating_sub(keep_recent);
    let skip = view[slice_start..].iter().take_while(|e| e.is_v0_observation()).count();
    let mut keep: HashSet<i64> = essential.into_iter().collect();
    keep.extend(view[slice_start + skip..].iter().map(|e| e.id.v0()));
    let mut forgotten: Vec<i64> = view.iter().map(|e| e.id.v0()).filter(|id| !keep.contains(id)).collect();
    forgotten.sort_unstable();
    forgotten.dedup();
    let forgotten = match (forgotten.first(), forgotten.last()) {
        (Some(&a), Some(&b)) if forgotten.len() > 1 && b - a == forgotten.len() as i64 - 1 => Forgotten::Range(a, b),
        _ => Forgotten::List(forgotten),
    };
    Condensation { forgotten, summary: None, offset: None, usage: SummarizerUsage::default() }
}

fn checkpoint(base: &[Event], c: Condensation, request: bool, condenser: &str) -> Checkpoint {
    let forgets = |id: i64| match &c.forgotten {
        Forgotten::List(l) => l.contains(&id),
        Forgotten::Range(a, b) => *a <= id && id <= *b,
    };
    let mut kept: Vec<EntryId> = base
        .iter()
        .filter(|e| matches!(e.id, EventId::Stream(_)) && !forgets(e.id.v0()))
        .filter_map(|e| e.entry)
        .collect();
    kept.dedup();
    let mut cp = Checkpoint::new(
        if c.summary.is_some() { CheckpointKind::Summary } else { CheckpointKind::Truncate },
        Window::Kept(kept),
    );
    cp.summary = c.summary.map(Message::user);
    cp.summary_position = SummaryPosition::AfterSystem;
    cp.tokens_before = base.iter().map(event::tokens).sum();
    cp.summarizer = c.usage;
    let mut details = json!({
        DETAILS_TAG: CONDENSATION,
        "condenser": condenser,
        "summary_offset": c.offset,
        "request": request,
    });
    match c.forgotten {
        Forgotten::List(l) => details["forgotten"] = json!(l),
        Forgotten::Range(a, b) => details["forgotten_range"] = json!([a, b]),
    }
    cp.details = details;
    cp
}

/// What V0's `ConversationMemory.process_events` sends for these events:
/// - a system prompt is put first if the view lost it, and the first user message is put
///   second if the second event is not a user message;
/// - a tool-call message is sent only once every one of its calls has a result in the view,
///   right after the event that completes it and followed by those results; results whose
///   call never completes are never sent;
/// - summaries and masked observations are user messages;
/// - observations and summaries longer than `max_message_chars` are middle-truncated.
fn render(log: &Log, events: &[Event]) -> Vec<Rendered> {
    // The first system prompt and user message of the whole stream (nearly always the first
    // two messages of the log: the search stops there).
    let stream = event::stream(log);
    let (mut system, mut initial) = (None, None);
    for e in stream.events() {
        if e.kind == Kind::SystemPrompt {
            system.get_or_insert(e);
        } else if e.is_user_message() {
            initial.get_or_insert(e);
        }
        if system.is_some() && initial.is_some() {
            break;
        }
    }
    // The message of each call, which a stand-in for the call's observation is shown through.
    let actions: FxHashMap<&str, EntryId> =
        stream.events().filter(|e| e.is_action()).filter_map(|e| Some((e.call_id()?, e.entry?))).collect();
    let mut events: Vec<&Event> = events.iter().collect();
    if !events.iter().any(|e| e.kind == Kind::SystemPrompt) {
        if let Some(system) = system {
            events.insert(0, system);
        }
    }
    if let Some(initial) = initial {
        if events.len() == 1 || events.get(1).is_some_and(|e| !e.is_user_message()) {
            events.insert(1, initial);
        }
    }

    let mut view: Vec<Rendered> = Vec::with_capacity(events.len());
    // Tool-call messages waiting for results, in the order they started waiting. Only the
    // event that adds a waiting message or a result can complete one, and only the messages
    // naming that result's call: checking just those (rather than every waiting message after
    // every event, as `process_events` does) sends the same messages, in linear time when
    // many calls never complete.
    let mut waiting_since: FxHashMap<EntryId, u64> = FxHashMap::default();
    let mut naming: FxHashMap<&str, SmallVec<[EntryId; 1]>> = FxHashMap::default();
    let mut results: FxHashMap<&str, &Event> = FxHashMap::default();
    let mut masked_from: Option<EntryId> = None;
    for (n, &e) in events.iter().enumerate() {
        let mut continue_masked = false;
        let mut candidates: Vec<EntryId> = Vec::new();
        match (&e.kind, e.entry) {
            (Kind::Action { .. }, Some(entry)) => {
                if let std::collections::hash_map::Entry::Vacant(v) = waiting_since.entry(entry) {
                    v.insert(n as u64);
                    for id in log.message(entry).into_iter().flat_map(Message::tool_call_ids) {
                        naming.entry(id).or_default().push(entry);
                    }
                }
                candidates.push(entry);
            }
            (Kind::Observation { call_id, .. }, Some(_)) => {
                results.insert(call_id, e);
                let mut named: Vec<(u64, EntryId)> = naming
                    .get(&**call_id)
                    .into_iter()
                    .flatten()
                    .filter_map(|entry| waiting_since.get(entry).map(|&since| (since, *entry)))
                    .collect();
                named.sort_unstable();
                named.dedup();
                candidates.extend(named.into_iter().map(|(_, entry)| entry));
            }
            (Kind::Summary { checkpoint, text }, _) => view.push(Rendered {
                origin: Origin::Summary(*checkpoint),
                built: Some(Rc::new(Built::Message(Message::user(prompt::v0_truncate(text, MAX_MESSAGE_CHARS))))),
            }),
            (Kind::Masked { text }, Some(entry)) => {
                // Stand-ins for several results of one tool message form one message.
                let last = match view.last_mut() {
                    Some(Rendered { built: Some(built), .. }) if masked_from == Some(entry) => Rc::get_mut(built),
                    _ => None,
                };
                match last {
                    Some(Built::Masked(texts)) => texts.push(text.clone()),
                    _ => {
                        let call = event::owned_parts(log, e).into_iter().find_map(|p| match p {
                            Part::ToolResult { call_id, .. } => actions.get(call_id.as_str()).copied(),
                            _ => None,
                        });
                        let by = call.unwrap_or(entry);
                        view.push(Rendered {
                            origin: Origin::Replaced(entry, by),
                            built: Some(Rc::new(Built::Masked(vec![text.clone()]))),
                        })
                    }
                }
                masked_from = Some(entry);
                continue_masked = true;
            }
            (_, Some(entry)) => {
                if let Some(m) = log.message(entry) {
                    view.push(Rendered::entry(entry, m, &e.parts));
                }
            }
            (_, None) => {}
        }
        if !continue_masked {
            masked_from = None;
        }
        for entry in candidates {
            let Some(m) = log.message(entry) else { continue };
            if !waiting_since.contains_key(&entry) || !m.tool_call_ids().all(|id| results.contains_key(id)) {
                continue;
            }
            view.push(Rendered { origin: Origin::Entry(entry), built: None });
            let answers: Vec<&Event> = m.tool_call_ids().filter_map(|id| results.remove(id)).collect();
            push_results(log, &mut view, &answers);
            waiting_since.remove(&entry);
        }
    }
    view
}

/// Tool messages for answered calls, results from one log message kept together.
fn push_results(log: &Log, view: &mut Vec<Rendered>, answers: &[&Event]) {
    let mut i = 0;
    while i < answers.len() {
        let entry = answers[i].entry;
        let mut parts = Vec::new();
        while i < answers.len() && answers[i].entry == entry {
            parts.extend(answers[i].parts.iter().copied());
            i += 1;
        }
        let Some((entry, m)) = entry.and_then(|e| Some((e, log.message(e)?))) else { continue };
        let mut message = (!event::is_whole(m, &parts)).then(|| event::subset(m, &parts));
        let long = |p: &Part| matches!(p, Part::ToolResult { text, .. } if prompt::longer_than(text, MAX_MESSAGE_CHARS));
        if message.as_ref().unwrap_or(m).parts.iter().any(long) {
            for p in &mut message.get_or_insert_with(|| m.clone()).parts {
                if let Part::ToolResult { text, .. } = p {
                    if prompt::longer_than(text, MAX_MESSAGE_CHARS) {
                        *text = prompt::v0_truncate(text, MAX_MESSAGE_CHARS);
                    }
                }
            }
        }
        // Cut by the builder: shown through itself (it names no checkpoint; a stand-in is shown
        // through its action, so the two never share an origin).
        let origin = if message.is_some() { Origin::Replaced(entry, entry) } else { Origin::Entry(entry) };
        view.push(Rendered { origin, built: message.map(|m| Rc::new(Built::Message(m))) });
    }
}

/// What [`render`] makes of the pipeline's view.
fn rendered(log: &Log, pipeline: &[Condenser]) -> Rc<Vec<Rendered>> {
    thread_local!(static RENDERED: memo::EventsSlot<Vec<Condenser>, Vec<Rendered>> = const { RefCell::new(None) });
    memo::get_for_events(&RENDERED, log, event::stream(log).events_end, pipeline.to_vec(), || render(log, &view(log, pipeline)))
}

/// The view V0 sends for this log.
pub(crate) fn messages(log: &Log, pipeline: &[Condenser]) -> View {
    event::materialize(log, &rendered(log, pipeline))
}

/// Brings `view`, [`messages`] at an earlier state of `log`, up to date.
pub(crate) fn remessage(log: &Log, pipeline: &[Condenser], view: &mut View) {
    event::bring_up_to_date(log, view, &rendered(log, pipeline));
}

/// Everything V0 does before a request that is stored: a condensation if a rolling
/// condenser triggers (its transforms are recomputed at every view and stored nowhere).
pub(crate) fn compact(
    log: &Log,
    pipeline: &[Condenser],
    request: bool,
    cx: &mut Cx<'_>,
) -> Result<Vec<Checkpoint>, Error> {
    Ok(condense(log, pipeline, request, cx)?.into_iter().collect())
}
