//! Condensations as this crate records them: a checkpoint whose details name what OpenHands'
//! `Condensation` (SDK) or `CondensationAction` (V0) names, read back when the view is built.

use std::collections::HashSet;

use compactbench_core::{Checkpoint, CheckpointKind, EntryId, Message, SummarizerUsage, SummaryPosition, Window};

use crate::event::{Event, EventId};

/// Key under which this crate's checkpoint details say what they record.
pub(crate) const DETAILS_TAG: &str = "openhands";
/// Tag value of a condensation (the SDK `Condensation` / V0 `CondensationAction`).
pub(crate) const CONDENSATION: &str = "condensation";

/// The checkpoint recording a condensation of `view` that forgets the events `forgets` names:
/// it keeps the log messages of the other events, carries `summary` as a user message (placed
/// by the `summary_offset` in `details`) and records `details`.
pub(crate) fn checkpoint(
    view: &[Event],
    forgets: impl Fn(&Event) -> bool,
    summary: Option<String>,
    tokens_before: u64,
    usage: SummarizerUsage,
    details: serde_json::Value,
) -> Checkpoint {
    let mut kept: Vec<EntryId> = view.iter().filter(|e| !forgets(e)).filter_map(|e| e.entry).collect();
    kept.dedup();
    let kind = if summary.is_some() { CheckpointKind::Summary } else { CheckpointKind::Truncate };
    let mut cp = Checkpoint::new(kind, Window::Kept(kept));
    cp.summary = summary.map(Message::user);
    cp.summary_position = SummaryPosition::AfterSystem;
    cp.tokens_before = tokens_before;
    cp.summarizer = usage;
    cp.details = details;
    cp
}

/// What a condensation checkpoint records.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Recorded {
    pub(crate) forgotten: Forgetting,
    /// Where the summary goes in the reduced list.
    pub(crate) summary_offset: Option<usize>,
}

impl Recorded {
    /// Reads a checkpoint's details; `None` for checkpoints this crate did not write.
    pub(crate) fn read(cp: &Checkpoint) -> Option<Recorded> {
        let d = cp.details.as_object()?;
        if d.get(DETAILS_TAG)? != CONDENSATION {
            return None;
        }
        let ints = |key: &str| d.get(key).and_then(|v| v.as_array()).into_iter().flatten().filter_map(|x| x.as_i64());
        let range = d
            .get("forgotten_range")
            .and_then(|v| v.as_array())
            .and_then(|a| Some((a.first()?.as_i64()?, a.get(1)?.as_i64()?)));
        let forgotten = Forgetting {
            ids: ints("forgotten").collect(),
            ranges: range.filter(|(a, b)| a <= b).into_iter().collect(),
            summaries: ints("forgotten_summaries").filter_map(|n| u32::try_from(n).ok()).map(EntryId).collect(),
        };
        Some(Recorded { forgotten, summary_offset: d.get("summary_offset").and_then(|v| v.as_u64()).map(|n| n as usize) })
    }
}

/// The events one or more condensations forget: an explicit id set (V1's only shape), V0's
/// inclusive id ranges, and SDK summary events. Several are merged into one, so that each
/// event is looked up once rather than once per condensation (a long session holds
/// hundreds).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Forgetting {
    ids: HashSet<i64>,
    /// Inclusive id ranges, sorted and disjoint.
    ranges: Vec<(i64, i64)>,
    summaries: HashSet<EntryId>,
}

impl Forgetting {
    /// What all of `recorded` forget together.
    pub(crate) fn of<'r>(recorded: impl IntoIterator<Item = &'r Recorded>) -> Forgetting {
        let mut all = Forgetting::default();
        for r in recorded {
            all.add(&r.forgotten);
        }
        all
    }

    /// Adds what `other` forgets.
    pub(crate) fn add(&mut self, other: &Forgetting) {
        self.ids.extend(&other.ids);
        self.summaries.extend(&other.summaries);
        self.ranges.extend(&other.ranges);
        self.ranges.sort_unstable();
        // Merge overlapping and adjacent ranges.
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(self.ranges.len());
        for &(a, b) in &self.ranges {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        self.ranges = merged;
    }

    /// Whether the event is forgotten.
    pub(crate) fn forgets(&self, id: EventId) -> bool {
        match id {
            EventId::Stream(_) => {
                let n = id.v0();
                if self.ids.contains(&n) {
                    return true;
                }
                let after = self.ranges.partition_point(|&(a, _)| a <= n);
                after > 0 && n <= self.ranges[after - 1].1
            }
            EventId::Summary(cp) => self.summaries.contains(&cp),
            EventId::Invalid => false,
        }
    }
}
