//! The crate's token estimate (Amp's own is unknown): the newest reply's provider usage plus
//! `ceil(chars / 4)` of what came after it.

use compactbench_core::estimate::chars_div4_ceil;
use compactbench_core::View;

pub(crate) use compactbench_core::estimate::message_chars_div4_ceil as message_tokens;

/// Estimated tokens of a text.
pub(crate) fn text_tokens(text: &str) -> u64 {
    chars_div4_ceil(text)
}

/// The context size before a request: the newest reply's usage (its prompt plus its own
/// output) plus the estimate of every later view message; without usage in view, the
/// estimate of the whole view. Both modes keep nothing of the old thread, so any usage in
/// view belongs to the current thread.
pub(crate) fn context_tokens(view: &View) -> u64 {
    match view.last_usage() {
        Some((i, usage)) => usage.total() + view.messages[i + 1..].iter().map(|m| message_tokens(&m.message)).sum::<u64>(),
        None => view.iter().map(message_tokens).sum(),
    }
}
