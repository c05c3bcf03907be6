//! Checkpoints: a compaction recorded as data in the log.

use serde::{Deserialize, Serialize};

use crate::{EntryId, Message};

/// What a compaction did, for reports. A strategy picks the kind that names its main effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CheckpointKind {
    /// History replaced by a model (or extractive) summary.
    Summary,
    /// Old tool outputs replaced by placeholders, no summary (e.g. OpenCode prune).
    Prune,
    /// Tool outputs masked by a rule (observation masking).
    Mask,
    /// Whole messages dropped without a summary.
    Truncate,
    /// Content moved to the virtual file store with a pointer left behind.
    Offload,
    /// Duplicate content folded (e.g. repeated file reads).
    Fold,
    /// A new thread seeded from the old one.
    Handoff,
}

impl CheckpointKind {
    /// Lowercase name as used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointKind::Summary => "summary",
            CheckpointKind::Prune => "prune",
            CheckpointKind::Mask => "mask",
            CheckpointKind::Truncate => "truncate",
            CheckpointKind::Offload => "offload",
            CheckpointKind::Fold => "fold",
            CheckpointKind::Handoff => "handoff",
        }
    }
}

/// Which messages from before a checkpoint stay in the working view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    /// Keep the previous checkpoint's window and summary; this checkpoint only adds
    /// replacements or offloads (prune, mask, fold).
    Inherit,
    /// Keep every message with an id at or after this one (Pi's `firstKeptEntryId`).
    From(EntryId),
    /// Keep exactly these messages (in log order) from before the checkpoint.
    Kept(Vec<EntryId>),
}

/// Where the summary message goes in the working view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryPosition {
    /// Right after the leading system messages, before the kept messages (Pi, most harnesses).
    AfterSystem,
    /// After the kept messages from before the checkpoint (Codex's bridge message).
    AfterKept,
}

/// A whole-message stand-in for one log message in the view (a pruned or masked tool result
/// keeps its call id, so pairing survives).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Replacement {
    /// The replaced log message.
    pub entry: EntryId,
    /// What the view shows instead.
    pub message: Message,
}

/// Content written to the virtual file store, with the log entries it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offload {
    /// Path in the virtual store.
    pub path: String,
    /// Log entries whose content the file holds.
    pub entries: Vec<EntryId>,
}

/// Cost of the summarizer calls a compaction made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummarizerUsage {
    /// Number of summarizer calls.
    pub calls: u32,
    /// Calls that failed.
    pub failures: u32,
    /// Input tokens sent, as the summarizer counted them.
    pub input_tokens: u64,
    /// Output tokens received.
    pub output_tokens: u64,
}

impl SummarizerUsage {
    /// Adds another call's usage.
    pub fn add(&mut self, other: SummarizerUsage) {
        self.calls += other.calls;
        self.failures += other.failures;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// A compaction recorded as data. The default projection ([`crate::default_projection`])
/// rebuilds the working view from the newest checkpoint that sets a window, plus the
/// replacements of every checkpoint so far.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Main effect, for reports.
    pub kind: CheckpointKind,
    /// Which earlier messages stay in view.
    pub window: Window,
    /// The summary message as the strategy wants it sent (role and wrapper included).
    pub summary: Option<Message>,
    /// Where the summary message goes.
    pub summary_position: SummaryPosition,
    /// Messages shown in place of log messages (cumulative across checkpoints).
    pub replacements: Vec<Replacement>,
    /// Content moved to the virtual file store.
    pub offloads: Vec<Offload>,
    /// Messages re-injected after the summary (instructions files, recent files, plans).
    pub injected: Vec<Message>,
    /// Context size before compaction by the strategy's own estimator.
    pub tokens_before: u64,
    /// Summarizer cost of this compaction.
    pub summarizer: SummarizerUsage,
    /// Strategy-private data the strategy reads back on its next compaction
    /// (e.g. Pi's file lists and raw summary text).
    pub details: serde_json::Value,
}

impl Checkpoint {
    /// A checkpoint of `kind` that sets `window`, with everything else empty.
    pub fn new(kind: CheckpointKind, window: Window) -> Checkpoint {
        Checkpoint {
            kind,
            window,
            summary: None,
            summary_position: SummaryPosition::AfterSystem,
            replacements: Vec::new(),
            offloads: Vec::new(),
            injected: Vec::new(),
            tokens_before: 0,
            summarizer: SummarizerUsage::default(),
            details: serde_json::Value::Null,
        }
    }

    /// Sets the summary message.
    pub fn with_summary(mut self, summary: Message) -> Checkpoint {
        self.summary = Some(summary);
        self
    }
}
