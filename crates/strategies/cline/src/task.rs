//! What Cline's `Task` holds for its context management at one log state: the API history it
//! stored, the `ContextManager` state persisted with it, and the usage of the previous request
//! (read from the last `api_req_started` UI message). Built entry by entry: from the whole log
//! for the strategy's from-scratch functions, as the log grows for a replay.

use std::collections::HashMap;

use compactbench_core::{Entry, EntryId, Log, Message, Role};

use crate::history::{History, Speaker};
use crate::state::State;

#[derive(Default)]
pub(crate) struct Task {
    pub(crate) history: History,
    /// The state of the newest checkpoint this strategy wrote (the empty state before one).
    pub(crate) state: State,
    /// `tokensIn + tokensOut + cacheWrites + cacheReads` of the previous request: the usage on
    /// the newest assistant message that carries one (our usage has no cache-write field; the
    /// runner reports none). `None` before any request, which makes every check say no.
    pub(crate) usage: Option<u64>,
    /// Log message -> what the checkpoints so far show instead (our mapping of the edit store
    /// and the stripped results, which a new checkpoint only restates where it changes them).
    pub(crate) shown: HashMap<EntryId, Message>,
}

impl Task {
    /// The task at the state of `log`.
    pub(crate) fn of(log: &Log) -> Task {
        let mut task = Task::default();
        for (id, entry) in log.entries() {
            task.push(id, entry);
        }
        task
    }

    /// Takes in entry `id` of the log, the entries before it taken in already.
    pub(crate) fn push(&mut self, id: EntryId, entry: &Entry) {
        match entry {
            Entry::Message(m) => {
                self.history.push(id, m);
                if m.role == Role::Assistant {
                    self.usage = m.usage.map(|u| u.total()).or(self.usage);
                }
            }
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

