//! V0 `AmortizedForgettingCondenser` (`impl/amortized_forgetting_condenser.py`).

use std::collections::HashSet;

use compactbench_core::Error;

use crate::event::Event;
use crate::v0::condensation::{Condensation, Forgotten};

/// Keeps the head and the newest events, forgets the rest without a summary.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AmortizedForgetting {
    /// Events in the view before forgetting (config default 100).
    pub(crate) max_size: usize,
    /// Events at the start that are kept (class default 0, config default 1).
    pub(crate) keep_first: usize,
}

impl AmortizedForgetting {
    /// `get_condensation`: keep `view[:keep_first]` and the last `max_size // 2 - len(head)`
    /// events; forget the range from the smallest to the largest other id.
    pub(crate) fn get_condensation(&self, view: &[Event]) -> Result<Condensation, Error> {
        let head = &view[..self.keep_first.min(view.len())];
        let from_tail = (self.max_size / 2).saturating_sub(head.len());
        let tail = if from_tail == 0 { view } else { &view[view.len().saturating_sub(from_tail)..] };
        let keep: HashSet<i64> = head.iter().chain(tail).map(|e| e.id.v0()).collect();
        let forgotten = Forgotten::range(view.iter().map(|e| e.id.v0()).filter(|id| !keep.contains(id)))?;
        Ok(Condensation::forgetting(forgotten))
    }
}
