//! SDK `View.from_events` (`openhands/sdk/context/view/view.py`): the stream replayed in
//! order, each condensation dropping its forgotten events from the list built so far and
//! inserting its summary at its offset of the reduced list (so several summaries can
//! coexist), then the view properties (`view/properties/*.py`) enforced; and
//! `View.manipulation_indices` (`view/manipulation_indices.py`).

use compactbench_core::{Entry, EntryId, Log};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::condensation::Recorded;
use crate::event::{Event, EventId, Kind};
use crate::stream::{Slot, Stream};

/// SDK `View.from_events` of the whole log.
pub(crate) fn from_events(log: &Log, stream: &Stream) -> Vec<Event> {
    let mut replay = FromEvents::default();
    for slot in &stream.slots {
        replay.add(log, slot);
    }
    replay.view()
}

/// The replay of `View.from_events`, one stream slot at a time, with what enforcing the
/// properties needs to know of the whole stream.
#[derive(Default)]
pub(crate) struct FromEvents {
    /// The events so far, each condensation applied in its turn; the properties are
    /// enforced on a copy ([`FromEvents::view`]).
    events: Vec<Event>,
    /// Action events per batch (the log message of one model response): batch atomicity.
    batch_sizes: FxHashMap<EntryId, usize>,
    /// The tool loop of each event in one, and the size of each loop: tool-loop atomicity.
    loop_of: FxHashMap<EventId, usize>,
    loop_sizes: Vec<usize>,
    /// The loop the stream ends in, if any.
    open_loop: Option<usize>,
}

impl FromEvents {
    /// Takes in the next slot of the stream.
    pub(crate) fn add(&mut self, log: &Log, slot: &Slot) {
        match slot {
            Slot::Event(e) => {
                if e.is_action() {
                    *self.batch_sizes.entry(e.entry.unwrap_or(EntryId(0))).or_default() += 1;
                }
                // A tool loop starts at an action with thinking blocks and runs over the
                // actions and observations after it; anything else ends it.
                match e.kind {
                    Kind::Action { thinking: true, .. } => {
                        self.open_loop = Some(self.loop_sizes.len());
                        self.loop_sizes.push(0);
                    }
                    Kind::Action { .. } | Kind::Observation { .. } => {}
                    _ => self.open_loop = None,
                }
                if let Some(l) = self.open_loop {
                    self.loop_of.insert(e.id, l);
                    self.loop_sizes[l] += 1;
                }
                self.events.push(e.clone());
            }
            Slot::Checkpoint(id, recorded) => {
                self.open_loop = None;
                if let Some(recorded) = recorded {
                    let Some(Entry::Checkpoint(cp)) = log.get(*id) else { unreachable!("a checkpoint slot names a checkpoint") };
                    apply(&mut self.events, *id, recorded, cp.summary.as_ref().map(|s| s.text()));
                }
            }
        }
    }

    /// The view: the events so far with the properties enforced.
    pub(crate) fn view(&self) -> Vec<Event> {
        let mut events = self.events.clone();
        self.enforce_properties(&mut events);
        events
    }

    /// `View.enforce_properties`: observation uniqueness, batch atomicity, tool-call matching,
    /// tool-loop atomicity, in that order; after any property drops events, all are checked
    /// again.
    fn enforce_properties(&self, events: &mut Vec<Event>) {
        loop {
            let drop = [
                observation_uniqueness(events),
                self.batch_atomicity(events),
                tool_call_matching(events),
                self.tool_loop_atomicity(events),
            ]
            .into_iter()
            .find(|d| !d.is_empty());
            match drop {
                Some(d) => events.retain(|e| !d.contains(&e.id)),
                None => return,
            }
        }
    }

    /// The actions of a batch stay only all together.
    fn batch_atomicity(&self, events: &[Event]) -> FxHashSet<EventId> {
        let mut present: FxHashMap<EntryId, Vec<EventId>> = FxHashMap::default();
        for e in events.iter().filter(|e| e.is_action()) {
            present.entry(e.entry.unwrap_or(EntryId(0))).or_default().push(e.id);
        }
        present.into_iter().filter(|(batch, ids)| self.batch_sizes.get(batch) != Some(&ids.len())).flat_map(|(_, ids)| ids).collect()
    }

    /// The events of a tool loop stay only all together.
    fn tool_loop_atomicity(&self, events: &[Event]) -> FxHashSet<EventId> {
        let mut present: FxHashMap<usize, Vec<EventId>> = FxHashMap::default();
        for e in events {
            if let Some(&l) = self.loop_of.get(&e.id) {
                present.entry(l).or_default().push(e.id);
            }
        }
        present.into_iter().filter(|&(l, ref ids)| self.loop_sizes[l] != ids.len()).flat_map(|(_, ids)| ids).collect()
    }
}

/// `Condensation.apply`: drops the forgotten events, then inserts the summary (if it has one
/// and an offset) at its offset of the reduced list.
fn apply(events: &mut Vec<Event>, checkpoint: EntryId, recorded: &Recorded, summary: Option<String>) {
    events.retain(|e| !recorded.forgotten.forgets(e.id));
    if let (Some(summary), Some(offset)) = (summary, recorded.summary_offset) {
        let at = offset.min(events.len());
        events.insert(at, Event::summary(EventId::Summary(checkpoint), checkpoint, summary));
    }
}

/// Only the first observation of a call stays.
fn observation_uniqueness(events: &[Event]) -> FxHashSet<EventId> {
    let mut seen = FxHashSet::default();
    events.iter().filter(|e| e.is_observation()).filter(|e| !seen.insert(e.call_id().unwrap_or_default())).map(|e| e.id).collect()
}

/// Actions stay only with their observation, and observations with their action.
fn tool_call_matching(events: &[Event]) -> FxHashSet<EventId> {
    let calls: FxHashSet<&str> = events.iter().filter(|e| e.is_action()).filter_map(Event::call_id).collect();
    let results: FxHashSet<&str> = events.iter().filter(|e| e.is_observation()).filter_map(Event::call_id).collect();
    events
        .iter()
        .filter(|e| match e.kind {
            Kind::Action { ref call_id, .. } => !results.contains(&**call_id),
            Kind::Observation { ref call_id, .. } => !calls.contains(&**call_id),
            _ => false,
        })
        .map(|e| e.id)
        .collect()
}

/// `View.manipulation_indices`: the positions where the view may be cut or a summary
/// inserted, intersected over the four properties (observation uniqueness restricts none).
pub(crate) fn manipulation_indices(events: &[Event]) -> Vec<bool> {
    let mut ok = vec![true; events.len() + 1];
    // Batch atomicity: never between two actions of one model response.
    for (i, pair) in events.windows(2).enumerate() {
        if pair[0].is_action() && pair[1].is_action() && pair[0].entry == pair[1].entry {
            ok[i + 1] = false;
        }
    }
    // Tool-call matching: never while a call is waiting for its result.
    let mut pending: FxHashSet<&str> = FxHashSet::default();
    for (i, e) in events.iter().enumerate() {
        match &e.kind {
            Kind::Action { call_id, .. } => {
                pending.insert(call_id);
            }
            Kind::Observation { call_id, .. } => {
                pending.remove(&**call_id);
            }
            _ => {}
        }
        if !pending.is_empty() {
            ok[i + 1] = false;
        }
    }
    // Tool-loop atomicity: never inside a loop (before its thinking action is fine).
    let mut in_loop = false;
    for (i, e) in events.iter().enumerate() {
        match &e.kind {
            Kind::Action { thinking: true, .. } => in_loop = true,
            Kind::Action { .. } | Kind::Observation { .. } => {
                if in_loop {
                    ok[i] = false;
                }
            }
            _ => in_loop = false,
        }
    }
    ok
}

/// `ManipulationIndices.find_next`: the smallest allowed index at or above `threshold`.
pub(crate) fn find_next(ok: &[bool], threshold: i64) -> Option<usize> {
    let start = usize::try_from(threshold.max(0)).ok()?;
    (start..ok.len()).find(|&i| ok[i])
}
