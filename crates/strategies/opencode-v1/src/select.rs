//! `select`, `turns` and `splitTurn` of `compaction.ts`: which messages are summarized (the head)
//! and where the verbatim tail starts.

use crate::session::{OcMsg, Slot};
use crate::sizing::{estimate, size, Size};

/// A user turn: `msgs[start..end]`.
#[derive(Clone, Copy, Debug)]
struct Turn {
    start: usize,
    end: usize,
}

/// `turns`: each real (non-marker) user message starts a turn that runs to the next one.
/// Messages before the first user message belong to no turn.
fn turns(msgs: &[&OcMsg<'_>]) -> Vec<Turn> {
    let starts: Vec<usize> = (0..msgs.len()).filter(|&i| msgs[i].is_real_user()).collect();
    starts
        .iter()
        .enumerate()
        .map(|(k, &start)| Turn { start, end: starts.get(k + 1).copied().unwrap_or(msgs.len()) })
        .collect()
}

/// The result of `select`.
pub(crate) struct Selection {
    /// Number of leading messages summarized; the rest is the tail.
    pub(crate) head: usize,
    /// `tail_start_id`; `None` when everything is summarized.
    pub(crate) tail_start: Option<Slot>,
}

/// Sizes are computed lazily, as the original estimates only the turns it walks.
struct Sizes<'m, 'a> {
    msgs: &'m [&'m OcMsg<'a>],
    cache: Vec<Option<Size>>,
}

impl Sizes<'_, '_> {
    fn est(&mut self, from: usize, to: usize) -> u64 {
        let sizes: Vec<Size> = (from..to).map(|i| *self.cache[i].get_or_insert_with(|| size(self.msgs[i]))).collect();
        estimate(&sizes)
    }
}

/// `splitTurn`: the longest suffix of `turn` (never the whole turn) that fits `budget`.
fn split_turn(sizes: &mut Sizes<'_, '_>, turn: Turn, budget: u64) -> Option<usize> {
    if budget == 0 || turn.end - turn.start <= 1 {
        return None;
    }
    (turn.start + 1..turn.end).find(|&start| sizes.est(start, turn.end) <= budget)
}

/// `select`: walk turns newest first, keep whole turns while they fit `budget`, then try to
/// split the first turn that does not fit, and stop.
pub(crate) fn select(msgs: &[&OcMsg<'_>], tail_turns: Option<i64>, budget: u64) -> Selection {
    let all = Selection { head: msgs.len(), tail_start: None };
    if tail_turns.is_some_and(|limit| limit <= 0) {
        return all;
    }
    let turns = turns(msgs);
    if turns.is_empty() {
        return all;
    }
    let recent = match tail_turns {
        Some(limit) => &turns[turns.len().saturating_sub(usize::try_from(limit).unwrap_or(usize::MAX))..],
        None => &turns[..],
    };
    let mut sizes = Sizes { msgs, cache: vec![None; msgs.len()] };
    let mut total = 0;
    let mut keep: Option<usize> = None;
    for turn in recent.iter().rev() {
        let size = sizes.est(turn.start, turn.end);
        if total + size <= budget {
            total += size;
            keep = Some(turn.start);
            continue;
        }
        if let Some(start) = split_turn(&mut sizes, *turn, budget - total) {
            keep = Some(start);
        }
        break;
    }
    match keep {
        None | Some(0) => all,
        Some(start) => Selection { head: start, tail_start: Some(msgs[start].slot) },
    }
}
