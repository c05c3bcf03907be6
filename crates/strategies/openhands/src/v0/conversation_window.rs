//! V0 `ConversationWindowCondenser` (`impl/conversation_window_condenser.py`): acts on
//! condensation requests only.

use std::collections::HashSet;

use crate::event::{Event, Kind};
use crate::v0::condensation::{Condensation, Forgotten};

/// `get_condensation`: keep the system prompt, the first user message and about half of the
/// rest, never starting on an observation; forget the others (as a range when contiguous).
/// No user message: a condensation that forgets nothing.
pub(crate) fn get_condensation(view: &[Event]) -> Condensation {
    let Some(first_user) = view.iter().position(Event::is_user_message) else {
        return Condensation::forgetting(Forgotten::List(Vec::new()));
    };
    let mut essential = Vec::new();
    if let Some(system) = view.iter().find(|e| e.kind == Kind::SystemPrompt) {
        essential.push(system.id.v0());
    }
    essential.push(view[first_user].id.v0());
    let keep_recent = ((view.len() - essential.len()) / 2).max(1);
    let slice_start = view.len().saturating_sub(keep_recent);
    // Dangling results at the start of the slice are dropped too.
    let skip = view[slice_start..].iter().take_while(|e| e.is_v0_observation()).count();
    let mut keep: HashSet<i64> = essential.into_iter().collect();
    keep.extend(view[slice_start + skip..].iter().map(|e| e.id.v0()));
    let mut forgotten: Vec<i64> = view.iter().map(|e| e.id.v0()).filter(|id| !keep.contains(id)).collect();
    forgotten.sort_unstable();
    forgotten.dedup();
    let forgotten = match (forgotten.first(), forgotten.last()) {
        (Some(&a), Some(&b)) if forgotten.len() > 1 && b - a == forgotten.len() as i64 - 1 => Forgotten::Range(a, b),
        _ => Forgotten::List(forgotten),
    };
    Condensation::forgetting(forgotten)
}
