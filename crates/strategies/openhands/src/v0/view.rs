//! V0 `View.from_events` (`openhands/memory/view.py`): every forgotten id of every
//! condensation is dropped at once (no replay, no property enforcement), then the summary of
//! the latest condensation that has one is inserted at its offset.

use compactbench_core::{Entry, EntryId, Log};

use crate::condensation::{Forgetting, Recorded};
use crate::event::{Event, EventId, Kind};
use crate::stream::{Slot, Stream};

/// V0 `View.from_events` of the whole log.
pub(crate) fn from_events(log: &Log, stream: &Stream) -> Vec<Event> {
    let condensations: Vec<(EntryId, &Recorded)> = stream
        .slots
        .iter()
        .filter_map(|s| match s {
            Slot::Checkpoint(id, Some(r)) => Some((*id, r)),
            Slot::Checkpoint(_, None) | Slot::Event(_) => None,
        })
        .collect();
    let forgetting = Forgetting::of(condensations.iter().map(|(_, r)| *r));
    let mut events: Vec<Event> = stream.events().filter(|e| !forgetting.forgets(e.id)).cloned().collect();
    if let Some((summary, offset)) = condensations.iter().rev().find_map(|&(id, r)| summary(log, id, r)) {
        events.insert(offset.min(events.len()), summary);
    }
    events
}

/// The summary event of a condensation that has both a summary and an offset.
fn summary(log: &Log, id: EntryId, recorded: &Recorded) -> Option<(Event, usize)> {
    let Some(Entry::Checkpoint(cp)) = log.get(id) else { unreachable!("a checkpoint slot names a checkpoint") };
    Some((Event::summary(EventId::Invalid, id, cp.summary.as_ref()?.text()), recorded.summary_offset?))
}

/// [`from_events`] kept as the stream grows: new events are appended, a condensation drops
/// what it forgets, and the summary stays at its offset.
#[derive(Default)]
pub(crate) struct Kept {
    forgetting: Forgetting,
    /// The view: the events no condensation forgets, with the summary inserted.
    events: Vec<Event>,
    /// The summary's index in `events` and its offset (more than the index when the list was
    /// shorter than the offset).
    summary: Option<(usize, usize)>,
}

impl Kept {
    /// Takes in the slots a log entry added to the stream.
    pub(crate) fn add(&mut self, log: &Log, slots: &[Slot]) {
        for slot in slots {
            match slot {
                Slot::Event(e) if !self.forgetting.forgets(e.id) => match self.summary {
                    Some((at, offset)) if at < offset => {
                        let summary = self.events.remove(at);
                        self.events.push(e.clone());
                        self.insert(summary, offset);
                    }
                    _ => self.events.push(e.clone()),
                },
                Slot::Checkpoint(id, Some(recorded)) => {
                    let previous = self.summary.take().map(|(at, offset)| (self.events.remove(at), offset));
                    self.forgetting.add(&recorded.forgotten);
                    let forgetting = &self.forgetting;
                    self.events.retain(|e| !forgetting.forgets(e.id));
                    if let Some((summary, offset)) = summary(log, *id, recorded).or(previous) {
                        self.insert(summary, offset);
                    }
                }
                Slot::Event(_) | Slot::Checkpoint(_, None) => {}
            }
        }
        debug_assert!(self.summary.is_none_or(|(at, _)| matches!(self.events[at].kind, Kind::Summary { .. })));
    }

    fn insert(&mut self, summary: Event, offset: usize) {
        let at = offset.min(self.events.len());
        self.events.insert(at, summary);
        self.summary = Some((at, offset));
    }

    /// The view of the stream so far.
    pub(crate) fn events(&self) -> &[Event] {
        &self.events
    }
}
