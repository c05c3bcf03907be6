//! Condensations as this crate records them: a checkpoint whose details name what OpenHands'
//! `Condensation` (SDK) or `CondensationAction` (V0) names, read back when the view is built.

use std::collections::HashSet;

use compactbench_core::{Checkpoint, EntryId};

use crate::event::EventId;

/// Key under which this crate's checkpoint details say what they record.
pub(crate) const DETAILS_TAG: &str = "openhands";
/// Tag value of a condensation (the SDK `Condensation` / V0 `CondensationAction`).
pub(crate) const CONDENSATION: &str = "condensation";

/// What a condensation checkpoint records.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Recorded {
    /// Explicit forgotten stream ids (V0 ids, `-1` possible).
    pub(crate) forgotten: HashSet<i64>,
    /// V0 inclusive id range.
    pub(crate) range: Option<(i64, i64)>,
    /// SDK: forgotten summary events, by the checkpoint that carried them.
    pub(crate) forgotten_summaries: Vec<EntryId>,
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
        let ints = |key: &str| -> Vec<i64> {
            d.get(key)
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|x| x.as_i64()).collect())
                .unwrap_or_default()
        };
        let range = d
            .get("forgotten_range")
            .and_then(|v| v.as_array())
            .and_then(|a| Some((a.first()?.as_i64()?, a.get(1)?.as_i64()?)));
        Some(Recorded {
            forgotten: ints("forgotten").into_iter().collect(),
            range,
            forgotten_summaries: ints("forgotten_summaries")
                .into_iter()
                .filter_map(|n| u32::try_from(n).ok())
                .map(EntryId)
                .collect(),
            summary_offset: d.get("summary_offset").and_then(|v| v.as_u64()).map(|n| n as usize),
        })
    }

    /// Whether this condensation forgets the event.
    pub(crate) fn forgets(&self, id: EventId) -> bool {
        match id {
            EventId::Stream(_) => {
                let n = id.v0();
                self.forgotten.contains(&n) || self.range.is_some_and(|(a, b)| a <= n && n <= b)
            }
            EventId::Summary(cp) => self.forgotten_summaries.contains(&cp),
            EventId::Invalid => false,
        }
    }
}

/// What a set of condensations forgets together: an event is forgotten when any of them
/// forgets it. Merged, so that each event is looked up once rather than once per
/// condensation (a long session holds hundreds).
#[derive(Clone, Debug, Default)]
pub(crate) struct Forgetting {
    ids: HashSet<i64>,
    /// Inclusive id ranges, sorted and disjoint.
    ranges: Vec<(i64, i64)>,
    summaries: HashSet<EntryId>,
}

impl Forgetting {
    pub(crate) fn of<'r>(recorded: impl IntoIterator<Item = &'r Recorded>) -> Forgetting {
        let mut all = Forgetting::default();
        for r in recorded {
            all.add(r);
        }
        all
    }

    /// Adds what one more condensation forgets.
    pub(crate) fn add(&mut self, r: &Recorded) {
        self.ids.extend(r.forgotten.iter().copied());
        self.summaries.extend(r.forgotten_summaries.iter().copied());
        let Some((a, b)) = r.range.filter(|(a, b)| a <= b) else { return };
        let at = self.ranges.partition_point(|&(x, _)| x < a);
        self.ranges.insert(at, (a, b));
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

    /// [`Recorded::forgets`] of any of the condensations.
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
