//! V0 `AmortizedForgettingCondenser` (`impl/amortized_forgetting_condenser.py`): keeps the head
//! and the newest events, forgets the rest without a summary.

use std::collections::HashSet;

use compactbench_core::Error;

use crate::event::Event;
use crate::v0::condensation::{Condensation, Forgotten};

/// `get_condensation`: keep `view[:keep_first]` and the last `max_size // 2 - len(head)`
/// events; forget the range from the smallest to the largest other id.
pub(crate) fn get_condensation(view: &[Event], max_size: usize, keep_first: usize) -> Result<Condensation, Error> {
    let head = &view[..keep_first.min(view.len())];
    let from_tail = (max_size / 2).saturating_sub(head.len());
    let tail = if from_tail == 0 { view } else { &view[view.len().saturating_sub(from_tail)..] };
    let keep: HashSet<i64> = head.iter().chain(tail).map(|e| e.id.v0()).collect();
    let forgotten = Forgotten::range(view.iter().map(|e| e.id.v0()).filter(|id| !keep.contains(id)))?;
    Ok(Condensation::forgetting(forgotten))
}
