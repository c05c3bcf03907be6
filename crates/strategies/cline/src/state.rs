//! The `ContextManager`'s persisted state, carried in checkpoint `details`.
//!
//! Cline keeps two things next to the untouched API history: the task's
//! `conversationHistoryDeletedRange` and the `contextHistory` edit store (per message index, an
//! edit type and per content block a list of text edits, the latest of which applies). Both are
//! stored here, whole, in every checkpoint this strategy appends, and read back from the newest
//! one (`task.rs`). Edit timestamps are left out: they only serve Cline's checkpoint restore, which the
//! benchmark never does.

use std::collections::BTreeMap;

use compactbench_core::Checkpoint;
use serde::{Deserialize, Serialize};

/// Key of our state inside `Checkpoint::details`.
const KEY: &str = "cline";

/// Cline's `EditType`: which kind of edit created a message's entry in the edit store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EditType {
    /// Notices (`UNDEFINED` = 0).
    Undefined,
    /// A `read_file` result (`READ_FILE_TOOL` = 2).
    ReadFileTool,
    /// A `write_to_file` / `replace_in_file` result (`ALTER_FILE_TOOL` = 3).
    AlterFileTool,
    /// `<file_content>` mentions in user text (`FILE_MENTION` = 4).
    FileMention,
}

/// One text edit of a content block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BlockEdit {
    /// The block's new text.
    pub(crate) text: String,
    /// For file mentions: (paths replaced so far in this block, every path it mentions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) files: Option<(Vec<String>, Vec<String>)>,
}

/// Edits of one message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MessageEdits {
    pub(crate) kind: EditType,
    /// Block index -> edits, oldest first.
    pub(crate) blocks: BTreeMap<usize, Vec<BlockEdit>>,
}

impl MessageEdits {
    pub(crate) fn new(kind: EditType) -> MessageEdits {
        MessageEdits { kind, blocks: BTreeMap::new() }
    }

    /// The latest text of every edited block.
    pub(crate) fn latest(&self) -> impl Iterator<Item = (usize, &str)> {
        self.blocks.iter().filter_map(|(b, edits)| edits.last().map(|e| (*b, e.text.as_str())))
    }
}

/// Everything the `ContextManager` remembers between requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct State {
    /// `conversationHistoryDeletedRange`, inclusive. Signed because Cline's arithmetic can
    /// step below its own start (`[2, 1]` removes nothing).
    pub(crate) deleted_range: Option<[i64; 2]>,
    /// The edit store, by Cline message index.
    pub(crate) edits: BTreeMap<usize, MessageEdits>,
    /// Whether the checkpoint holding this state is an auto-condense, i.e. Cline's history has
    /// the `summarize_task` call and its result at that checkpoint. Not cumulative.
    #[serde(default)]
    pub(crate) condensed: bool,
}

impl State {
    /// Our state in `cp`, if this strategy wrote it.
    pub(crate) fn of(cp: &Checkpoint) -> Option<State> {
        cp.details.get(KEY).and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    /// The JSON to put in `Checkpoint::details`.
    pub(crate) fn to_details(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        map.insert(KEY.to_owned(), serde_json::to_value(self).expect("state serializes"));
        serde_json::Value::Object(map)
    }

    /// First Cline index after the deleted range (2 when there is none).
    pub(crate) fn start_of_rest(&self) -> usize {
        match self.deleted_range {
            Some([_, end]) => usize::try_from(end + 1).unwrap_or(0),
            None => 2,
        }
    }
}
