//! V0 `CondensationAction` (`openhands/events/action/agent.py`): what a rolling condenser
//! returns, and the checkpoint this crate records for it.

use compactbench_core::{Checkpoint, Error, ErrorKind, SummarizerUsage};
use serde_json::json;

use crate::condensation::{self, CONDENSATION, DETAILS_TAG};
use crate::event::Event;

/// `CondensationAction`'s two shapes: `forgotten_event_ids`, or the inclusive range
/// `forgotten_events_start_id`..`forgotten_events_end_id`.
pub(crate) enum Forgotten {
    List(Vec<i64>),
    Range(i64, i64),
}

impl Forgotten {
    /// The range from the smallest to the largest of `ids`; V0's `min()` raises on none.
    pub(crate) fn range(ids: impl IntoIterator<Item = i64>) -> Result<Forgotten, Error> {
        let (a, b) = ids
            .into_iter()
            .fold(None, |acc, id| match acc {
                None => Some((id, id)),
                Some((a, b)) => Some((id.min(a), id.max(b))),
            })
            .ok_or_else(|| Error::new(ErrorKind::NothingToCompact, "min() arg is an empty sequence"))?;
        Ok(Forgotten::Range(a, b))
    }

    fn forgets(&self, id: i64) -> bool {
        match self {
            Forgotten::List(l) => l.contains(&id),
            Forgotten::Range(a, b) => *a <= id && id <= *b,
        }
    }
}

/// A condensation before it becomes a checkpoint.
pub(crate) struct Condensation {
    pub(crate) forgotten: Forgotten,
    pub(crate) summary: Option<String>,
    pub(crate) summary_offset: Option<usize>,
    pub(crate) usage: SummarizerUsage,
}

impl Condensation {
    /// A condensation that only forgets.
    pub(crate) fn forgetting(forgotten: Forgotten) -> Condensation {
        Condensation { forgotten, summary: None, summary_offset: None, usage: SummarizerUsage::default() }
    }

    /// The checkpoint recording this condensation of the base view `base`, made by
    /// `condenser` (on a condensation request when `request`).
    pub(crate) fn checkpoint(self, base: &[Event], request: bool, condenser: &str) -> Checkpoint {
        let mut details = json!({
            DETAILS_TAG: CONDENSATION,
            "condenser": condenser,
            "summary_offset": self.summary_offset,
            "request": request,
        });
        match &self.forgotten {
            Forgotten::List(l) => details["forgotten"] = json!(l),
            Forgotten::Range(a, b) => details["forgotten_range"] = json!([a, b]),
        }
        let tokens_before = base.iter().map(Event::v0_tokens).sum();
        let forgets = |e: &Event| self.forgotten.forgets(e.id.v0());
        condensation::checkpoint(base, forgets, self.summary, tokens_before, self.usage, details)
    }
}
