//! What Cline's `Task` holds for its context management at one log state: the API history it
//! stored and the `ContextManager` state persisted with it, built from the whole log or kept
//! entry by entry by a run (`replay.rs`). Only a compaction and auto-condense's guard read it;
//! the trigger reads the usage off the log ([`crate::trigger::previous_usage`]).

use std::collections::HashMap;

use compactbench_core::{Entry, EntryId, Log, Message};

use crate::history::{History, Speaker};
use crate::state::State;

#[derive(Default)]
pub(crate) struct Task {
    pub(crate) history: History,
    /// The state of the newest checkpoint this strategy wrote (the empty state before one).
    pub(crate) state: State,
    /// Log message -> what the checkpoints so far show instead (our mapping of the edit store
    /// and the stripped results, which a new checkpoint only restates where it changes them).
    pub(crate) shown: HashMap<EntryId, Message>,
}

impl Task {
    /// The task at the state of `log`.
    pub(crate) fn of(log: &Log) -> Task {
        let mut task = Task::default();
        for (id, _) in log.entries() {
            task.push(log, id);
        }
        task
    }

    /// Takes in entry `id`, which `log` just appended (the entries before it taken in already).
    pub(crate) fn push(&mut self, log: &Log, id: EntryId) {
        match log.get(id).expect("pushed entries are in the log") {
            Entry::Message(m) => self.history.push(id, m),
            Entry::Checkpoint(cp) => {
                if let Some(state) = State::of(cp) {
                    if state.condensed {
                        self.history.push_condense(cp.summary.as_ref().map(Message::text).unwrap_or_default());
                    }
                    self.state = State { condensed: false, ..state };
                }
                self.shown.extend(cp.replacements.iter().map(|r| (r.entry, r.message.clone())));
            }
        }
    }

    /// Length of the history without a trailing user message of our log (the content of the
    /// request about to be made, which Cline has not stored yet when auto-condense decides).
    pub(crate) fn settled_len(&self) -> usize {
        match self.history.messages.last() {
            Some(m) if m.speaker == Speaker::User && !m.is_virtual => self.history.messages.len() - 1,
            _ => self.history.messages.len(),
        }
    }

    /// Auto-condense's guard: at most two messages visible after the range, not counting the
    /// new user content, means the last thing done was a summary.
    pub(crate) fn too_few_active(&self) -> bool {
        let Some([_, end]) = self.state.deleted_range else { return false };
        self.settled_len() as i64 - end - 1 <= 2
    }
}

