//! `prepareCompaction` and `findCutPoint` (agent-core 18.2.11 `compaction/compaction.ts`).

use compactbench_core::{EntryId, Role};

use crate::branch::{first_kept, strings, summary_text, Item, Work};
use crate::files::FileOps;
use crate::tokens::{context_tokens, count_message, prompt_tokens, valid_usage};

/// Result of `findCutPoint`, as indices into the collected messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CutPoint {
    pub(crate) first_kept: usize,
    pub(crate) turn_start: Option<usize>,
    pub(crate) split: bool,
}

/// `findValidCutPoints`: user and assistant messages (never tool results, so a call keeps
/// its results; a mid-log system message, oh-my-pi's `developer` role, is not one either).
fn is_cut_point(role: Role) -> bool {
    matches!(role, Role::User | Role::Assistant)
}

/// `isTurnStartEntry`: a user message.
fn is_turn_start(role: Role) -> bool {
    role == Role::User
}

/// `findCutPoint(entries, 0, n, keepRecentTokens)` over messages given as (role, tokens).
///
/// Unlike Pi, the budget is checked only at cut points, after a whole assistant group (the
/// assistant message and its results) has been added: walking back from the newest message,
/// each cut point is taken while the suffix from it is at most `keep`. The newest group is
/// kept even when it alone exceeds the budget.
pub(crate) fn find_cut_point(messages: &[(Role, u64)], keep: u64) -> CutPoint {
    let cut_points: Vec<usize> = (0..messages.len()).filter(|&i| is_cut_point(messages[i].0)).collect();
    let Some(&newest) = cut_points.last() else {
        return CutPoint { first_kept: 0, turn_start: None, split: false };
    };
    let mut accumulated = 0u64;
    let mut next_cut = cut_points.len();
    let mut cut = newest;
    for i in (0..messages.len()).rev() {
        accumulated += messages[i].1;
        if next_cut == 0 || i != cut_points[next_cut - 1] {
            continue;
        }
        if accumulated > keep {
            break;
        }
        cut = i;
        next_cut -= 1;
    }
    if is_turn_start(messages[cut].0) {
        return CutPoint { first_kept: cut, turn_start: None, split: false };
    }
    let turn_start = (0..=cut).rev().find(|&i| is_turn_start(messages[i].0));
    CutPoint { first_kept: cut, turn_start, split: turn_start.is_some() }
}

/// Keep-budget scaling: with provider usage, the kept tail is sized in provider tokens, so a
/// ratio of prompt tokens to local tokens above 1 shrinks the local budget.
pub(crate) fn scaled_keep(keep_recent_tokens: u64, prompt: u64, local: u64) -> u64 {
    let ratio = if local > 0 { prompt as f64 / local as f64 } else { 0.0 };
    if ratio.is_finite() && ratio > 1.0 {
        ((keep_recent_tokens as f64 / ratio).floor() as u64).max(1)
    } else {
        keep_recent_tokens
    }
}

/// What `prepareCompaction` hands to a method. Message lists are item indices into the
/// [`Work`] branch it was prepared from.
pub(crate) struct Preparation {
    pub(crate) first_kept: EntryId,
    pub(crate) to_summarize: Vec<usize>,
    pub(crate) turn_prefix: Vec<usize>,
    pub(crate) recent: Vec<usize>,
    pub(crate) split: bool,
    pub(crate) tokens_before: u64,
    pub(crate) previous_summary: Option<String>,
    pub(crate) file_ops: FileOps,
}

/// `prepareCompaction(branch, settings)`.
///
/// 1. Nothing if the branch already ends in a compaction entry.
/// 2. The scan starts at the latest compaction's `firstKeptEntryId` (searched before it), or
///    right after it: what the previous compaction kept is kept again or summarized now.
/// 3. Messages are collected from there (compaction entries yield none).
/// 4. `tokensBefore` is the context size of the newest good reply's usage (0 without one).
/// 5. The keep budget is scaled to provider tokens ([`scaled_keep`]).
/// 6. [`find_cut_point`] splits the collection into history to summarize, the prefix of a
///    split turn, and the kept tail; with nothing to summarize there is no preparation.
/// 7. File operations: the previous compaction's lists plus the summarized messages' calls.
///
/// `pending_prompt`: the pre-prompt check, whose new prompt (the log's last user message) is
/// not on oh-my-pi's branch yet — `runPrePromptCompactionIfNeeded` compacts first and sends
/// the prompt after — so it is left out of the preparation (and of the keep budget).
pub(crate) fn prepare(work: &Work<'_>, keep_recent_tokens: u64, pending_prompt: bool) -> Option<Preparation> {
    let pending = pending_prompt && work.items.last()?.message().is_some_and(|m| m.role == Role::User);
    let end = work.items.len() - usize::from(pending);
    if matches!(work.items[..end].last()?, Item::Compaction { .. }) {
        return None;
    }
    let prev = work.latest_compaction();
    let mut boundary_start = prev.map_or(0, |p| p + 1);
    if let Some(p) = prev {
        let first = work.latest().and_then(first_kept);
        if let Some(i) = (0..p).find(|&i| Some(work.items[i].id()) == first) {
            boundary_start = i;
        }
    }
    let collected: Vec<usize> =
        (boundary_start..end).filter(|&i| work.items[i].message().is_some()).collect();

    let last_usage = work.items.iter().rev().find_map(|it| it.message().and_then(valid_usage));
    let tokens_before = last_usage.map_or(0, |u| context_tokens(&u));
    let sizes: Vec<(Role, u64)> = collected.iter().map(|&i| (work.msg(i).role, count_message(work.msg(i)))).collect();
    let keep = match last_usage {
        Some(u) => scaled_keep(keep_recent_tokens, prompt_tokens(&u), sizes.iter().map(|s| s.1).sum()),
        None => keep_recent_tokens,
    };
    let cut = find_cut_point(&sizes, keep);
    let first_kept = work.items[*collected.get(cut.first_kept)?].id();
    let history_end = match cut.turn_start {
        Some(t) if cut.split => t,
        _ => cut.first_kept,
    };
    let to_summarize = collected[..history_end].to_vec();
    let turn_prefix = match cut.turn_start {
        Some(t) if cut.split => collected[t..cut.first_kept].to_vec(),
        _ => Vec::new(),
    };
    let recent = collected[cut.first_kept..].to_vec();
    if to_summarize.is_empty() && turn_prefix.is_empty() {
        return None;
    }

    let mut file_ops = FileOps::default();
    let previous = work.latest();
    if let Some(c) = previous {
        file_ops.add_previous(strings(c, "readFiles"), strings(c, "modifiedFiles"));
    }
    for &i in to_summarize.iter().chain(&turn_prefix) {
        file_ops.add_message(work.msg(i));
    }
    Some(Preparation {
        first_kept,
        to_summarize,
        turn_prefix,
        recent,
        split: cut.split,
        tokens_before,
        previous_summary: previous.map(|c| summary_text(c).into_owned()),
        file_ops,
    })
}
