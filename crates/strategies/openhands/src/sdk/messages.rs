//! What the SDK sends for its view (`LLMConvertibleEvent.events_to_messages`): the events of
//! one log message (a batch of actions, or several results) become that message again, and
//! summaries become user messages.

use compactbench_core::{Log, Message, Origin};

use crate::event::{Event, Kind};
use crate::render::Rendered;

/// The view messages of SDK view `events`. A log message shown only in part (the view's
/// rules dropped some of a batch's calls or results) is shown through the newest checkpoint,
/// or through itself before any checkpoint (a call the view drops for want of a result),
/// since an `Entry` origin promises the log message as it is.
pub(crate) fn events_to_messages(log: &Log, events: &[Event]) -> Vec<Rendered> {
    let mut view = Vec::with_capacity(events.len());
    let mut i = 0;
    while i < events.len() {
        let event = &events[i];
        let Some(entry) = event.entry else {
            if let Kind::Summary { checkpoint, text } = &event.kind {
                view.push(Rendered { origin: Origin::Summary(*checkpoint), built: Some(Message::user(&**text)) });
            }
            i += 1;
            continue;
        };
        let run = 1 + events[i + 1..].iter().take_while(|e| e.entry == Some(entry)).count();
        let mut parts: Vec<usize> = events[i..i + run].iter().flat_map(|e| e.parts.iter().copied()).collect();
        parts.sort_unstable();
        parts.dedup();
        if let Some(m) = log.message(entry) {
            let mut rendered = Rendered::entry(entry, m, &parts);
            if rendered.built.is_some() {
                rendered.origin = Origin::Replaced(entry, log.last_checkpoint().map_or(entry, |(id, _)| id));
            }
            view.push(rendered);
        }
        i += run;
    }
    view
}
