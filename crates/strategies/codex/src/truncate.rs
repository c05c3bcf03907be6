//! `truncate_text(s, TruncationPolicy::Tokens(n))` from `codex-rs/core/src/truncate.rs`: keep a
//! head and a tail of the text on UTF-8 boundaries within `4 * n` bytes, and put a middle
//! marker `…N tokens truncated…` (literal shape) between them, where N is the removed byte
//! count over four, rounded up. The marker comes on top of the budget, as in the original.

/// Truncates `s` to about `max_tokens` tokens (`4 * max_tokens` bytes) of head and tail.
pub(crate) fn truncate_tokens(s: &str, max_tokens: u64) -> String {
    let max_bytes = usize::try_from(max_tokens.saturating_mul(4)).unwrap_or(usize::MAX);
    if s.is_empty() || (max_bytes > 0 && s.len() <= max_bytes) {
        return s.to_owned();
    }
    if max_bytes == 0 {
        return marker(s.len());
    }
    let left_budget = max_bytes / 2;
    let right_budget = max_bytes - left_budget;
    let (prefix, suffix) = split(s, left_budget, right_budget);
    format!("{prefix}{}{suffix}", marker(s.len() - max_bytes))
}

fn marker(removed_bytes: usize) -> String {
    format!("…{} tokens truncated…", removed_bytes.div_ceil(4))
}

/// Head of at most `head` bytes and tail of at most `tail` bytes, each ending or starting on
/// a character boundary (`split_string`): a character belongs to the head only if it ends
/// within the head budget, and to the tail only if it starts within the tail budget.
fn split(s: &str, head: usize, tail: usize) -> (&str, &str) {
    let tail_start_target = s.len().saturating_sub(tail);
    let mut prefix_end = 0;
    let mut suffix_start = s.len();
    for (idx, ch) in s.char_indices() {
        let end = idx + ch.len_utf8();
        if end <= head {
            prefix_end = end;
        } else if idx >= tail_start_target {
            suffix_start = idx;
            break;
        }
    }
    let suffix_start = suffix_start.max(prefix_end);
    (&s[..prefix_end], &s[suffix_start..])
}
