//! Where the cut falls: LangChain's `_determine_cutoff_index` with its tool-pair rule, and
//! Deep Agents' argument-truncation window.

use std::collections::HashSet;

use compactbench_core::{Message, Role};

use crate::config::{Settings, Size};
use crate::count;

/// LangChain's fallback message count when a fraction cannot be resolved.
const DEFAULT_MESSAGES_TO_KEEP: u64 = 20;

/// `_find_safe_cutoff_point`: a cut landing on a tool message moves back to the assistant
/// message whose calls the run of tool messages starting there answers; with no such assistant
/// message (orphan results) it moves forward past the run.
pub(crate) fn safe_point(messages: &[&Message], cutoff: usize) -> usize {
    if cutoff >= messages.len() || messages[cutoff].role != Role::Tool {
        return cutoff;
    }
    let mut ids: HashSet<&str> = HashSet::new();
    let mut idx = cutoff;
    while idx < messages.len() && messages[idx].role == Role::Tool {
        ids.extend(messages[idx].tool_result_ids().filter(|id| !id.is_empty()));
        idx += 1;
    }
    for i in (0..cutoff).rev() {
        let m = messages[i];
        if m.role == Role::Assistant && m.tool_call_ids().any(|id| ids.contains(id)) {
            return i;
        }
    }
    idx
}

/// `_find_safe_cutoff`: keep the last `keep` messages, made safe.
pub(crate) fn safe_cutoff(messages: &[&Message], keep: u64) -> usize {
    let keep = keep as usize;
    if messages.len() <= keep {
        return 0;
    }
    safe_point(messages, messages.len() - keep)
}

/// `_determine_cutoff_index`: index of the first message kept; 0 means nothing to summarize.
pub(crate) fn cutoff(messages: &[&Message], settings: &Settings) -> usize {
    match settings.keep {
        Size::Messages(k) => safe_cutoff(messages, k),
        Size::Tokens(t) => token_cutoff(messages, t.max(1), settings),
        Size::Fraction(f) => match settings.fraction_tokens(f) {
            Some(target) => token_cutoff(messages, target, settings),
            None => safe_cutoff(messages, DEFAULT_MESSAGES_TO_KEEP),
        },
    }
}

/// `_find_token_based_cutoff`: the smallest suffix fitting `target` by binary search, with the
/// newest message always kept.
fn token_cutoff(messages: &[&Message], target: u64, settings: &Settings) -> usize {
    if messages.is_empty() {
        return 0;
    }
    let cpt = settings.chars_per_token();
    if count::count(messages.iter().copied(), cpt, true) <= target {
        return 0;
    }
    let len = messages.len();
    let (mut left, mut right) = (0usize, len);
    let mut candidate = len;
    let max_iterations = (usize::BITS - len.leading_zeros()) as usize + 1;
    for _ in 0..max_iterations {
        if left >= right {
            break;
        }
        let mid = (left + right) / 2;
        if count::count(messages[mid..].iter().copied(), cpt, false) <= target {
            candidate = mid;
            right = mid;
        } else {
            left = mid + 1;
        }
    }
    if candidate == len {
        candidate = left;
    }
    if candidate >= len {
        if len == 1 {
            return 0;
        }
        candidate = len - 1;
    }
    safe_point(messages, candidate)
}

/// `_determine_truncate_cutoff_index`: messages before the returned index may have their
/// arguments truncated.
pub(crate) fn truncate_cutoff(messages: &[&Message], settings: &Settings) -> usize {
    let len = messages.len();
    let by_count = |keep: u64| len.saturating_sub(keep as usize);
    let target = match settings.truncate.keep {
        Size::Messages(k) => return if len <= k as usize { len } else { by_count(k) },
        Size::Tokens(t) => t.max(1),
        Size::Fraction(f) => match settings.fraction_tokens(f) {
            Some(t) => t,
            None => return if len <= 20 { len } else { by_count(20) },
        },
    };
    let cpt = settings.chars_per_token();
    let mut kept = 0u64;
    for i in (0..len).rev() {
        let tokens = count::one(messages[i], cpt);
        if kept + tokens > target {
            return i + 1;
        }
        kept += tokens;
    }
    0
}
