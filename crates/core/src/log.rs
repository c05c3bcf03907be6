//! The append-only session log.

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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Log {
    /// Shared, not owned: strategies clone the log to look at it as if their checkpoints were
    /// appended, and a clone then costs a pointer per entry, not a copy of the session.
    entries: Vec<Arc<Entry>>,
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
