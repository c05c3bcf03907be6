//! The log as OpenHands' event stream: every message expanded into its events, every
//! checkpoint in its place, in log order. Every event and every condensation gets a stream id,
//! as OpenHands' event stream numbers every event it stores (V0 prints these ids to its
//! summarizer and forgets id ranges over them).

use std::sync::Arc;

use compactbench_core::{Entry, EntryId, Log, Role};
use rustc_hash::FxHashMap;

use crate::condensation::Recorded;
use crate::event::{self, Event, Kind};

/// One step of the stream: an event, or a checkpoint with what it records when it is a
/// condensation of this crate's.
#[derive(Clone, Debug)]
pub(crate) enum Slot {
    Event(Event),
    Checkpoint(EntryId, Option<Recorded>),
}

/// The log expanded into events, grown entry by entry ([`Stream::push`]).
#[derive(Default)]
pub(crate) struct Stream {
    pub(crate) slots: Vec<Slot>,
    /// The next stream id.
    next: u32,
    seen_system: bool,
    /// Call id -> the log message that made the call (the last one, should ids repeat).
    calls: FxHashMap<Arc<str>, EntryId>,
    /// The first system prompt and the first user message (V0's message builder puts them
    /// back when the view lost them).
    pub(crate) first_system: Option<Event>,
    pub(crate) first_user: Option<Event>,
}

impl Stream {
    /// The stream of the whole log.
    pub(crate) fn of(log: &Log) -> Stream {
        let mut stream = Stream::default();
        for (id, _) in log.entries() {
            stream.push(log, id);
        }
        stream
    }

    /// Takes in log entry `id`; returns the slots it added.
    pub(crate) fn push(&mut self, log: &Log, id: EntryId) -> &[Slot] {
        let from = self.slots.len();
        match log.get(id).expect("pushed entries are in the log") {
            Entry::Checkpoint(cp) => {
                let recorded = Recorded::read(cp);
                // A condensation event takes a stream id, as in OpenHands.
                if recorded.is_some() {
                    self.next += 1;
                }
                self.slots.push(Slot::Checkpoint(id, recorded));
            }
            Entry::Message(m) => {
                let events = event::expand(id, m, self.seen_system, &mut self.next);
                self.seen_system |= m.role == Role::System;
                for e in &events {
                    match &e.kind {
                        Kind::Action { call_id, .. } => {
                            self.calls.insert(call_id.clone(), id);
                        }
                        Kind::SystemPrompt if self.first_system.is_none() => self.first_system = Some(e.clone()),
                        _ if e.is_user_message() && self.first_user.is_none() => self.first_user = Some(e.clone()),
                        _ => {}
                    }
                }
                self.slots.extend(events.into_iter().map(Slot::Event));
            }
        }
        &self.slots[from..]
    }

    /// The events, without checkpoints.
    pub(crate) fn events(&self) -> impl Iterator<Item = &Event> {
        self.slots.iter().filter_map(|s| match s {
            Slot::Event(e) => Some(e),
            Slot::Checkpoint(..) => None,
        })
    }

    /// The log message that made the call `call_id`.
    pub(crate) fn call(&self, call_id: &str) -> Option<EntryId> {
        self.calls.get(call_id).copied()
    }
}
