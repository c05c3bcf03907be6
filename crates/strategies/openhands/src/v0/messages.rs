//! What V0's `ConversationMemory.process_events` (`openhands/memory/conversation_memory.py`)
//! sends for a view. Its stand-ins are computed here at every step and stored nowhere, as in
//! V0; the origins of the messages sent in place of log messages are in the crate docs
//! (Deviations).

use compactbench_core::{EntryId, Log, Message, Origin, Part, Role};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::event::{self, Event, Kind};
use crate::render::Rendered;
use crate::stream::Stream;
use crate::truncate;

/// `LLMConfig.max_message_chars` default: longer observations are middle-truncated when
/// messages are built.
const MAX_MESSAGE_CHARS: usize = 30_000;

/// The messages V0 sends for view `events` of the log whose stream is `stream`:
/// - a system prompt is put first if the view lost it, and the first user message is put
///   second if the second event is not a user message;
/// - a tool-call message is sent only once every one of its calls has a result in the view,
///   right after the event that completes it and followed by those results; results whose
///   call never completes are never sent;
/// - summaries and masked observations are user messages;
/// - observations and summaries longer than `max_message_chars` are middle-truncated.
pub(crate) fn process_events(log: &Log, stream: &Stream, events: &[Event]) -> Vec<Rendered> {
    let mut events: Vec<&Event> = events.iter().collect();
    if !events.iter().any(|e| e.kind == Kind::SystemPrompt) {
        if let Some(system) = &stream.first_system {
            events.insert(0, system);
        }
    }
    if let Some(initial) = &stream.first_user {
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
                built: Some(Message::user(truncate::v0(text, MAX_MESSAGE_CHARS))),
            }),
            (Kind::Masked { text }, Some(entry)) => {
                let text = Part::text(truncate::v0(text, MAX_MESSAGE_CHARS));
                match view.last_mut() {
                    // Stand-ins for several results of one tool message form one message.
                    Some(Rendered { built: Some(last), .. }) if masked_from == Some(entry) => last.parts.push(text),
                    _ => {
                        // Shown through the message of the call it answers (see the crate docs).
                        let call = event::owned_parts(log, e).into_iter().find_map(|p| match p {
                            Part::ToolResult { call_id, .. } => stream.call(call_id),
                            _ => None,
                        });
                        let origin = Origin::Replaced(entry, call.unwrap_or(entry));
                        view.push(Rendered { origin, built: Some(Message::new(Role::User, vec![text])) });
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
        let long = |p: &Part| matches!(p, Part::ToolResult { text, .. } if truncate::longer_than(text, MAX_MESSAGE_CHARS));
        if message.as_ref().unwrap_or(m).parts.iter().any(long) {
            for p in &mut message.get_or_insert_with(|| m.clone()).parts {
                if let Part::ToolResult { text, .. } = p {
                    if truncate::longer_than(text, MAX_MESSAGE_CHARS) {
                        *text = truncate::v0(text, MAX_MESSAGE_CHARS);
                    }
                }
            }
        }
        // Cut by the builder: shown through itself (see the crate docs).
        let origin = if message.is_some() { Origin::Replaced(entry, entry) } else { Origin::Entry(entry) };
        view.push(Rendered { origin, built: message });
    }
}

