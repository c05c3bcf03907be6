//! The replacement history as checkpoint data, and the view rebuilt from it.
//!
//! Codex replaces its whole history at a compaction (`replace_history(new_history)`) and
//! persists that list (`RolloutItem::Compacted { replacement_history }`). The checkpoint
//! records the same list as a layout of slots in `details`: kept log messages (verbatim or
//! rewritten, e.g. truncated), the summary, and copies of the initial context. The view is
//! the base instructions, that layout, then every message logged after the checkpoint. The
//! standard checkpoint fields (kept ids, replacements, injected, summary after the kept
//! messages) are filled too, so reports read them as usual, but the default projection
//! cannot express the order (context spliced between kept user messages), hence the
//! strategy's own `project`.

use compactbench_core::{
    default_projection, Checkpoint, CheckpointKind, Entry, EntryId, Log, Origin, Replacement, SummarizerUsage,
    SummaryPosition, View, ViewMessage, Window,
};
use serde::{Deserialize, Serialize};

use crate::history::{base_instructions, Built};

/// Which compaction path produced a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Path {
    /// `run_compact_task_inner` with a summarizer request.
    Local,
    /// The modelled `/responses/compact` call.
    Remote,
}

/// `InitialContextInjection`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Injection {
    /// Mid-turn: initial context goes just before the last real user message.
    BeforeLastUserMessage,
    /// Pre-turn (and manual): no context in the replacement; the next turn re-injects it.
    DoNotInject,
}

/// One item of the replacement history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Slot {
    /// This log message as it is.
    Entry(u32),
    /// This log message through the checkpoint's replacement of it.
    Replaced(u32),
    /// The checkpoint's summary.
    Summary,
    /// The checkpoint's injected message with this index.
    Injected(usize),
}

/// Strategy-private checkpoint data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Details {
    /// Which path ran.
    pub(crate) path: Path,
    /// Where the initial context went.
    pub(crate) injection: Injection,
    /// The replacement history, in order.
    pub(crate) layout: Vec<Slot>,
    /// With `DoNotInject`: the layout index from which the initial context stands for what
    /// the next turn re-injects (it is not part of Codex's replacement history).
    pub(crate) reinjected_from: Option<usize>,
    /// `recompute_token_usage` after the compaction: base instructions plus the replacement
    /// history by Codex's byte estimate. The trigger counts from here until the next reply.
    pub(crate) tokens_after: u64,
    /// History items dropped to make the compaction request fit (oldest first for local,
    /// trailing tool outputs for remote).
    pub(crate) trimmed_items: usize,
    /// The summarizer's text as returned.
    pub(crate) summary_text: String,
}

impl Details {
    /// The details of a checkpoint of this strategy, if it is one.
    pub(crate) fn of(checkpoint: &Checkpoint) -> Option<Details> {
        serde_json::from_value(checkpoint.details.clone()).ok()
    }
}

/// What a compaction produced, before it becomes a checkpoint.
pub(crate) struct Outcome {
    pub(crate) path: Path,
    pub(crate) injection: Injection,
    pub(crate) history: Vec<Built>,
    pub(crate) reinjected_from: Option<usize>,
    pub(crate) tokens_before: u64,
    pub(crate) tokens_after: u64,
    pub(crate) trimmed_items: usize,
    pub(crate) summary_text: String,
    pub(crate) usage: SummarizerUsage,
}

/// The checkpoint recording `outcome`.
pub(crate) fn checkpoint(log: &Log, outcome: Outcome) -> Checkpoint {
    let mut layout = Vec::new();
    let mut kept = Vec::new();
    let mut replacements = Vec::new();
    let mut injected = Vec::new();
    let mut summary = None;
    for built in outcome.history {
        match built {
            Built::Summary(message) => {
                summary = Some(message);
                layout.push(Slot::Summary);
            }
            Built::Message { entry: Some(entry), message } => {
                kept.push(entry);
                if log.message(entry) == Some(&message) {
                    layout.push(Slot::Entry(entry.0));
                } else {
                    replacements.push(Replacement { entry, message });
                    layout.push(Slot::Replaced(entry.0));
                }
            }
            Built::Message { entry: None, message } => {
                layout.push(Slot::Injected(injected.len()));
                injected.push(message);
            }
        }
    }
    kept.sort();
    kept.dedup();
    let details = Details {
        path: outcome.path,
        injection: outcome.injection,
        layout,
        reinjected_from: outcome.reinjected_from,
        tokens_after: outcome.tokens_after,
        trimmed_items: outcome.trimmed_items,
        summary_text: outcome.summary_text,
    };
    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::Kept(kept));
    cp.summary = summary;
    cp.summary_position = SummaryPosition::AfterKept;
    cp.replacements = replacements;
    cp.injected = injected;
    cp.tokens_before = outcome.tokens_before;
    cp.summarizer = outcome.usage;
    cp.details = serde_json::to_value(details).expect("details serialize");
    cp
}

/// The newest window-setting checkpoint, when it is one of ours: the view shows its
/// replacement history, and the trigger counts from its estimate until the next reply.
pub(crate) struct Anchor {
    pub(crate) id: EntryId,
    pub(crate) details: Details,
}

/// The anchor of `log`, if it has one.
pub(crate) fn anchor(log: &Log) -> Option<Anchor> {
    let (id, cp) = log.checkpoints().rev().find(|(_, cp)| cp.window != Window::Inherit)?;
    Details::of(cp).map(|details| Anchor { id, details })
}

/// Whether a view message is a remote compaction item: the summary of a remote anchor (a
/// view shows no other checkpoint's summary).
pub(crate) fn is_compaction(anchor: Option<&Anchor>, origin: Origin) -> bool {
    anchor.is_some_and(|a| a.details.path == Path::Remote && origin == Origin::Summary(a.id))
}

/// The working view: base instructions, the anchor's replacement history, then everything
/// logged after it. Without an anchor, the default projection.
pub(crate) fn project(log: &Log, anchor: Option<&Anchor>) -> View {
    let Some(&Anchor { id: anchor_id, ref details }) = anchor else { return default_projection(log) };
    let Some(Entry::Checkpoint(cp)) = log.get(anchor_id) else { panic!("an anchor is a checkpoint of the log") };
    let mut view = View::default();
    if let Some((id, m)) = base_instructions(log) {
        view.messages.push(ViewMessage { origin: Origin::Entry(id), message: m.clone() });
    }
    for slot in &details.layout {
        let shown = match *slot {
            Slot::Entry(n) => log
                .message(EntryId(n))
                .map(|m| ViewMessage { origin: Origin::Entry(EntryId(n)), message: m.clone() }),
            Slot::Replaced(n) => cp
                .replacements
                .iter()
                .find(|r| r.entry == EntryId(n))
                .map(|r| ViewMessage { origin: Origin::Replaced(EntryId(n), anchor_id), message: r.message.clone() }),
            Slot::Summary => cp.summary.clone().map(|message| ViewMessage { origin: Origin::Summary(anchor_id), message }),
            Slot::Injected(k) => cp.injected.get(k).map(|m| ViewMessage { origin: Origin::Injected(anchor_id), message: m.clone() }),
        };
        view.messages.extend(shown);
    }
    view.messages.extend(
        log.messages()
            .filter(|(id, _)| *id > anchor_id)
            .map(|(id, m)| ViewMessage { origin: Origin::Entry(id), message: m.clone() }),
    );
    view
}
