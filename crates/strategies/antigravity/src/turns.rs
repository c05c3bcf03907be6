//! The sliding window: whole user turns kept from the newest backwards within the retain
//! budget, the latest always; everything before the cut is summarized.

use compactbench_core::{EntryId, Origin, Role, View};

use crate::count::message_tokens;

/// What one compaction summarizes and keeps, as indices into the view.
pub(crate) struct Selection {
    /// The previous summary, if the view has one.
    pub(crate) previous: Option<usize>,
    /// Messages summarized (previous summary excluded), oldest first.
    pub(crate) summarized: Vec<usize>,
    /// Log entries of the retained turns.
    pub(crate) kept: Vec<EntryId>,
    /// Number of retained user turns.
    pub(crate) kept_turns: usize,
    /// Their estimated size.
    pub(crate) kept_tokens: u64,
}

/// Where each user turn starts: a user message from the log (not a summary), after the
/// leading system messages.
fn turn_starts(view: &View, body: usize) -> Vec<usize> {
    (body..view.len())
        .filter(|&i| view.messages[i].message.role == Role::User && view.messages[i].origin.entry().is_some())
        .collect()
}

/// The estimate of view messages `from..to` if it is at most `budget`, else `None`.
fn tokens_within(view: &View, from: usize, to: usize, budget: u64) -> Option<u64> {
    let mut sum = 0;
    for m in &view.messages[from..to] {
        sum += message_tokens(&m.message);
        if sum > budget {
            return None;
        }
    }
    Some(sum)
}

/// The cut for `retain` tokens; `None` when nothing before the latest kept turn would be
/// summarized (no turn, or nothing but the previous summary before the window).
pub(crate) fn select(view: &View, retain: u64) -> Option<Selection> {
    let body = view.messages.iter().take_while(|m| m.message.role == Role::System).count();
    let starts = turn_starts(view, body);
    let (&latest, earlier) = starts.split_last()?;
    let tokens = |from: usize, to: usize| view.messages[from..to].iter().map(|m| message_tokens(&m.message)).sum::<u64>();
    let mut cut = latest;
    let mut kept_tokens = tokens(latest, view.len());
    let mut kept_turns = 1;
    for &start in earlier.iter().rev() {
        // The turn's estimate when it fits the rest of the budget; counting stops at the first
        // message past it (the sum only grows), so the turn that ends the window, often most
        // of the history, is not counted in full.
        let Some(t) = tokens_within(view, start, cut, retain.saturating_sub(kept_tokens)) else { break };
        if kept_tokens + t > retain {
            break;
        }
        kept_tokens += t;
        kept_turns += 1;
        cut = start;
    }
    let is_summary = |i: usize| matches!(view.messages[i].origin, Origin::Summary(_));
    let summarized: Vec<usize> = (body..cut).filter(|&i| !is_summary(i)).collect();
    if summarized.is_empty() {
        return None;
    }
    Some(Selection {
        previous: (body..view.len()).find(|&i| is_summary(i)),
        summarized,
        kept: view.messages[cut..].iter().filter_map(|m| m.origin.entry()).collect(),
        kept_turns,
        kept_tokens,
    })
}
