//! Differential fidelity: does our strategy crate decide and select what its original does?
//!
//! For every source-based strategy whose original ships as a package (npm or PyPI), a small
//! driver under `fidelity/<original>/` calls the original's own functions (its trigger check and
//! its cut-point selection; only the model call is mocked). This crate:
//!
//! 1. builds seeded [`Case`]s: logs cut right before a model request, from every scenario, with
//!    windows chosen around the strategy's own threshold (and right at it);
//! 2. exports each case to the original's own session format ([`Export`], one exporter per
//!    original in `originals/`);
//! 3. asks the driver (one long-lived process, one JSON line per case) and our crate
//!    ([`ours::answer`]) for an [`Answer`], and compares trigger and selection;
//! 4. shrinks every disagreement to the smallest session that still disagrees
//!    ([`minimize`]) and writes `reports/fidelity/` (report.md and agreement.json).
//!
//! The wire protocol (one line in, one line out, per case) is in `fidelity/README.md`.

pub mod blackbox;
pub mod cases;
pub mod classes;
pub mod checks;
pub mod compare;
pub mod deliberate;
pub mod driver;
pub mod minimize;
pub mod originals;
pub mod ours;
pub mod recorded;
pub mod report;
pub mod run;
pub mod source;

use compactbench_core::EntryId;
use serde::{Deserialize, Serialize};

pub use cases::Case;
pub use originals::{Harness, Install, Original, HARNESSES, ORIGINALS};

/// What a harness does with a session at one moment: whether it compacts, and what it would
/// keep if it compacted now. Entry ids are ours; a driver's indices are mapped through the
/// [`Export`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The trigger fired.
    pub compact: bool,
    /// The first entry kept verbatim after the summary (Pi's `firstKeptEntryId`, a cut index).
    pub first_kept: Option<EntryId>,
    /// The kept set, for originals that keep a set rather than a suffix.
    pub kept: Option<Vec<EntryId>>,
    /// The cut falls inside a turn.
    pub split_turn: Option<bool>,
    /// The context size the original estimates before compacting.
    pub tokens_before: Option<u64>,
    /// Entries rewritten in place (truncated, masked, pruned), sorted; `None` from a driver
    /// that does not check in-place rewrites.
    pub rewritten: Option<Vec<EntryId>>,
    /// The text each rewritten entry shows after its rewrite (see [`rewrite_text`]); `None`
    /// from a driver that reports which entries it rewrote but not what it wrote there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewritten_text: Option<std::collections::BTreeMap<EntryId, String>>,
    /// The original's own name for what it did (Gemini CLI's `CompressionStatus`), where its
    /// driver reports one; ours is `None`. Not compared: a reviewed difference may be narrowed
    /// to it ([`deliberate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
}

/// The text of a rewritten message as both sides report it: its text parts and tool results,
/// in order, one per line (LangChain's `_extract_text_from_message` joins a message's text
/// blocks so).
pub fn rewrite_text(m: &compactbench_core::Message) -> String {
    let texts: Vec<&str> = m
        .parts
        .iter()
        .filter_map(|p| match p {
            compactbench_core::Part::Text { text } | compactbench_core::Part::ToolResult { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

/// A case in an original's own session format, with our entry id for every native item.
#[derive(Clone, Debug, PartialEq)]
pub struct Export {
    /// What the driver reads as `session`.
    pub session: serde_json::Value,
    /// `ids[i]` is our log entry behind native item `i` (several native items may share one
    /// entry, e.g. a message split into parts). Index `ids.len()` means "nothing kept".
    pub ids: Vec<EntryId>,
    /// Extra settings the driver passes to the original (its defaults unless a case says
    /// otherwise); forwarded as `settings`.
    pub settings: serde_json::Value,
}

impl Export {
    /// Our entry for native index `i`; `ids.len()` (past the end) maps to `next`, the id the
    /// next log entry would get.
    pub fn entry(&self, i: usize, next: EntryId) -> Option<EntryId> {
        if i == self.ids.len() {
            Some(next)
        } else {
            self.ids.get(i).copied()
        }
    }
}
