//! Where Pi cuts: `findValidCutPoints`, `findTurnStartIndex` and `findCutPoint`
//! (compaction.ts). Identical at the canonical commit and in the 0.73.1 release; 1.6.0 falls
//! back differently when no cut point follows the budget boundary.

use compactbench_core::Role;

use crate::session::{estimate_tokens, PathEntry};
use crate::Release;

/// Result of `findCutPoint`, as indices into the branch path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CutPoint {
    /// `firstKeptEntryIndex`.
    pub(crate) first_kept: usize,
    /// `turnStartIndex` (Pi's −1 is `None`).
    pub(crate) turn_start: Option<usize>,
    /// `isSplitTurn`.
    pub(crate) split: bool,
}

fn role(e: &PathEntry<'_>) -> Option<Role> {
    e.message().map(|m| m.role)
}

/// A user or assistant message can start the kept part. A tool result never can, so it always
/// stays with the assistant message that called it; checkpoints are not cut points either.
/// (Pi's other cut points — bash executions, custom and summary messages, `custom_message` and
/// `branch_summary` entries — do not occur in our log.)
fn is_valid_cut_point(e: &PathEntry<'_>) -> bool {
    matches!(role(e), Some(Role::User | Role::Assistant))
}

/// `findValidCutPoints` over `[start, end)`.
fn find_valid_cut_points(path: &[PathEntry<'_>], start: usize, end: usize) -> Vec<usize> {
    (start..end).filter(|&i| is_valid_cut_point(&path[i])).collect()
}

/// `findTurnStartIndex`: scanning back from `index` to `start`, the first user message.
pub(crate) fn find_turn_start_index(path: &[PathEntry<'_>], index: usize, start: usize) -> Option<usize> {
    (start..=index).rev().find(|&i| role(&path[i]) == Some(Role::User))
}

/// `findCutPoint(path, start, end, keepRecentTokens)`.
///
/// Walks back from the newest entry adding `estimateTokens` of every message (checkpoints are
/// skipped); at the first entry where the sum reaches `keep`, the cut is the nearest valid cut
/// point at or after that entry. If the budget is never reached, everything from the first cut
/// point is kept. If it is reached inside trailing tool results that no cut point follows,
/// 0.73.1 and earlier keep everything from the first cut point; 1.6.0 keeps from the last one
/// (the assistant call of those results).
pub(crate) fn find_cut_point(path: &[PathEntry<'_>], start: usize, end: usize, keep: u64, release: Release) -> CutPoint {
    let cut_points = find_valid_cut_points(path, start, end);
    let Some(&first_cut_point) = cut_points.first() else {
        return CutPoint { first_kept: start, turn_start: None, split: false };
    };

    let mut accumulated = 0u64;
    let mut cut = first_cut_point;
    for i in (start..end).rev() {
        let Some(m) = path[i].message() else { continue };
        accumulated += estimate_tokens(m, release);
        if accumulated >= keep {
            match cut_points.iter().find(|&&c| c >= i) {
                Some(&c) => cut = c,
                // No cut point at or after `i`: earlier releases keep the default (the first
                // cut point); 1.6.0 takes the last one.
                None if release == Release::Npm1_6_0 => cut = *cut_points.last().expect("not empty"),
                None => {}
            }
            break;
        }
    }

    // Pi now moves the cut back over directly preceding metadata entries (model or thinking
    // level changes, labels) so they stay with the kept part, stopping at any message or
    // compaction entry. Our log has no metadata entries — every non-message entry is a
    // checkpoint, where that walk stops — so the cut stays where it is.

    if role(&path[cut]) == Some(Role::User) {
        return CutPoint { first_kept: cut, turn_start: None, split: false };
    }
    let turn_start = find_turn_start_index(path, cut, start);
    CutPoint { first_kept: cut, turn_start, split: turn_start.is_some() }
}
