//! The auto-compaction check of step 2c (`should_auto_compact`) and the counter it reads
//! (`Context.token_count_with_pending`), rebuilt from the log.

use compactbench_core::{Checkpoint, EntryId, Log, Message, Role, View, ViewMessage, Window};

use crate::history;
use crate::tokens::estimate_text_tokens;
use crate::Release;

/// Key in a checkpoint's `details`: the counter value the compaction wrote
/// (`update_token_count(estimated_token_count)`; 0 in K1, whose `clear()` left it at 0).
pub(crate) const TOKEN_COUNT: &str = "token_count";

/// `should_auto_compact`: `count >= window · ratio` (when the release has the ratio) or
/// `count + reserved >= window`. The ratio side is compared in floating point, as Python does.
pub(crate) fn should_auto_compact(count: u64, window: u64, ratio: Option<f64>, reserved: u64) -> bool {
    ratio.is_some_and(|r| count as f64 >= window as f64 * r) || count + reserved >= window
}

/// The newest checkpoint that sets a window (every Kimi checkpoint does), with its id.
pub(crate) fn anchor(log: &Log) -> Option<(EntryId, &Checkpoint)> {
    log.checkpoints().rev().find(|(_, cp)| cp.window != Window::Inherit)
}

/// Kimi's counter at a step's check.
///
/// After each model call Kimi writes the reply's usage (`input + output`) and resets `pending`;
/// every later append adds `estimate_text_tokens` of the appended batch. A compaction writes its
/// own estimate the same way. So: the usage of the newest reply received after the newest
/// compaction, else that compaction's estimate, else 0 (a fresh session); plus, since K3, the
/// pending estimate of the history messages after that point. Usage of replies kept from before
/// the compaction is stale: the counter was overwritten since.
pub(crate) fn token_count_with_pending(anchor: Option<(EntryId, &Checkpoint)>, view: &View, release: Release) -> u64 {
    let items = history::items(view);
    let fresh = |item: &ViewMessage| match anchor {
        None => true,
        Some((a, _)) => item.origin.entry().is_some_and(|e| e > a),
    };
    let last_reply = items
        .iter()
        .rposition(|it| fresh(it) && it.message.role == Role::Assistant && it.message.usage.is_some());
    let (base, since): (u64, Vec<&Message>) = match last_reply {
        Some(i) => (items[i].message.usage.map_or(0, |u| u.total()), items[i + 1..].iter().map(|it| &it.message).collect()),
        None => {
            let base = anchor.and_then(|(_, cp)| cp.details.get(TOKEN_COUNT)?.as_u64()).unwrap_or(0);
            (base, items.iter().filter(|it| fresh(it)).map(|it| &it.message).collect())
        }
    };
    match release {
        Release::Pypi1_52 => base + pending(&since),
        // Before PR #1652 only provider usage was counted.
        Release::K1 => base,
    }
}

/// `pending`: the sum of `estimate_text_tokens` per appended batch. Kimi appends a reply's tool
/// results as one batch and every other message on its own, so the floor is taken per batch.
fn pending(messages: &[&Message]) -> u64 {
    messages
        .chunk_by(|a, b| a.role == Role::Tool && b.role == Role::Tool)
        .map(|batch| estimate_text_tokens(batch.iter().copied()))
        .sum()
}
