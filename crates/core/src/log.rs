//! The append-only session log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{Checkpoint, Message};

/// Stable id of a log entry: its position in the log, which never changes because the log
/// only grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct EntryId(pub u32);

impl EntryId {
    /// Position in the log.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Display for EntryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "e{}", self.0)
    }
}

/// One log entry: a message of the session or a checkpoint a strategy appended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "entry", rename_all = "snake_case")]
pub enum Entry {
    /// A message of the session as it happened.
    Message(Message),
    /// A compaction, as data. Boxed: a checkpoint is several times the size of a message,
    /// and most entries are messages.
    Checkpoint(Box<Checkpoint>),
}

/// The append-only session history.
///
/// Architecture invariant: there is no way to remove or rewrite an entry. Compaction appends
/// a [`Checkpoint`]; the working view is a projection of the log.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Log {
    /// Shared, not owned: strategies clone the log to project it as if their checkpoints
    /// were appended, and a clone then costs a pointer per entry, not a copy of the session.
    entries: Vec<Arc<Entry>>,
    #[serde(skip)]
    identity: Identity,
}

/// A process-unique number for one log value, and the log state it was cloned from. A clone
/// gets a new number, so two logs never share it even after they diverge; it is not
/// content, so it never makes logs unequal.
#[derive(Debug)]
struct Identity {
    id: u64,
    /// (the original's id, its length then): the clone's entries up to that length are the
    /// original's, so a value folded over them carries over (see [`LogVersion::extends`]).
    fork: Option<(u64, usize)>,
}

impl Identity {
    fn new(fork: Option<(u64, usize)>) -> Identity {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Identity { id: NEXT.fetch_add(1, Ordering::Relaxed), fork }
    }
}

impl Default for Identity {
    fn default() -> Self {
        Identity::new(None)
    }
}

impl Clone for Log {
    /// A new log with the same entries. Strategies clone the runner's log to append their
    /// checkpoints and look at the result; the clone's folds start from the original's.
    fn clone(&self) -> Log {
        Log { entries: self.entries.clone(), identity: Identity::new(Some((self.identity.id, self.entries.len()))) }
    }
}

impl PartialEq for Identity {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// One state of one log (see [`Log::version`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LogVersion {
    log: u64,
    len: usize,
    fork: Option<(u64, usize)>,
}

impl LogVersion {
    /// Number of entries at this state.
    pub fn entries(self) -> usize {
        self.len
    }

    /// Whether the entries of `earlier` are the first `earlier.entries()` entries of this
    /// state, so a value folded over them can be extended with the rest rather than
    /// recomputed: `earlier` is a state of the same log at or before this one, or of the log
    /// this one was cloned from, at or before the clone.
    pub fn extends(self, earlier: LogVersion) -> bool {
        (self.same_log(earlier) && self.len >= earlier.len)
            || self.fork.is_some_and(|(log, len)| earlier.log == log && earlier.len <= len)
    }

    /// Whether this and `other` are states of the same log (whichever is newer): a value
    /// that depends only on what an entry id holds is the same for both.
    pub fn same_log(self, other: LogVersion) -> bool {
        self.log == other.log
    }
}

impl Log {
    /// An empty log.
    pub fn new() -> Log {
        Log::default()
    }

    /// A log holding `messages` in order.
    pub fn from_messages(messages: impl IntoIterator<Item = Message>) -> Log {
        let mut log = Log::new();
        for m in messages {
            log.push_message(m);
        }
        log
    }

    fn push(&mut self, entry: Entry) -> EntryId {
        let id = EntryId(u32::try_from(self.entries.len()).expect("log longer than u32::MAX entries"));
        self.entries.push(Arc::new(entry));
        id
    }

    /// Appends a message and returns its id.
    pub fn push_message(&mut self, message: Message) -> EntryId {
        self.push(Entry::Message(message))
    }

    /// Appends a checkpoint and returns its id.
    pub fn push_checkpoint(&mut self, checkpoint: Checkpoint) -> EntryId {
        self.push(Entry::Checkpoint(Box::new(checkpoint)))
    }

    /// This log's identity and length. Because a log only grows, two calls that return the
    /// same version saw the same entries: a strategy whose projection is costly can compute
    /// it once per version for `project`, `decide` and `compact` at one log state.
    pub fn version(&self) -> LogVersion {
        LogVersion { log: self.identity.id, len: self.entries.len(), fork: self.identity.fork }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry with this id.
    pub fn get(&self, id: EntryId) -> Option<&Entry> {
        self.entries.get(id.index()).map(|e| &**e)
    }

    /// The message with this id, if that entry is a message.
    pub fn message(&self, id: EntryId) -> Option<&Message> {
        match self.get(id)? {
            Entry::Message(m) => Some(m),
            Entry::Checkpoint(_) => None,
        }
    }

    /// All entries with their ids, oldest first.
    pub fn entries(&self) -> impl DoubleEndedIterator<Item = (EntryId, &Entry)> + ExactSizeIterator {
        self.entries.iter().enumerate().map(|(i, e)| (EntryId(i as u32), &**e))
    }

    /// All message entries with their ids, oldest first.
    pub fn messages(&self) -> impl DoubleEndedIterator<Item = (EntryId, &Message)> {
        self.entries().filter_map(|(id, e)| match e {
            Entry::Message(m) => Some((id, m)),
            Entry::Checkpoint(_) => None,
        })
    }

    /// The messages after the first `len` entries, when every entry since is a message: what
    /// a strategy that reprojects on appended messages adds to its view. `None` when a
    /// checkpoint followed (it may change what was shown before) or the log is shorter.
    pub fn messages_since(&self, len: usize) -> Option<impl Iterator<Item = (EntryId, &Message)>> {
        let since = self.entries.get(len..)?;
        let messages = since.iter().zip(len..).filter_map(|(e, i)| match &**e {
            Entry::Message(m) => Some((EntryId(i as u32), m)),
            Entry::Checkpoint(_) => None,
        });
        since.iter().all(|e| matches!(**e, Entry::Message(_))).then_some(messages)
    }

    /// All checkpoint entries with their ids, oldest first.
    pub fn checkpoints(&self) -> impl DoubleEndedIterator<Item = (EntryId, &Checkpoint)> {
        self.entries().filter_map(|(id, e)| match e {
            Entry::Checkpoint(c) => Some((id, &**c)),
            Entry::Message(_) => None,
        })
    }

    /// The newest checkpoint, if any.
    pub fn last_checkpoint(&self) -> Option<(EntryId, &Checkpoint)> {
        self.checkpoints().next_back()
    }

    /// The id the next appended entry will get.
    pub fn next_id(&self) -> EntryId {
        EntryId(self.entries.len() as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CheckpointKind, Window};

    #[test]
    fn messages_since_are_the_appended_messages_unless_a_checkpoint_follows() {
        let mut log = Log::from_messages([Message::user("a"), Message::assistant("b")]);
        let ids = |log: &Log, len| log.messages_since(len).map(|m| m.map(|(id, _)| id.0).collect::<Vec<_>>());
        assert_eq!(ids(&log, 2), Some(vec![]));
        assert_eq!(ids(&log, 1), Some(vec![1]));
        assert_eq!(ids(&log, 3), None, "longer than the log");
        log.push_checkpoint(Checkpoint::new(CheckpointKind::Prune, Window::Inherit));
        log.push_message(Message::user("c"));
        assert_eq!(ids(&log, 3), Some(vec![3]));
        assert_eq!(ids(&log, 2), None, "a checkpoint follows");
    }
}
