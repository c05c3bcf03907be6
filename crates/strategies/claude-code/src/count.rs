//! Claude Code's own token estimate: the last reply's usage plus `ceil(chars / 4)` of what
//! came after it.

use compactbench_core::estimate::chars_div4_ceil;
use compactbench_core::{Message, Part, View};

/// `ceil(chars / 4)` of a text (UTF-16 lengths, as JavaScript counts them).
pub(crate) fn text_tokens(text: &str) -> u64 {
    chars_div4_ceil(text)
}

/// Estimated tokens of one part.
pub(crate) fn part_tokens(part: &Part) -> u64 {
    match part {
        Part::Text { text } | Part::Reasoning { text } => text_tokens(text),
        Part::ToolCall { name, args, .. } => text_tokens(name) + text_tokens(&args.to_string()),
        Part::ToolResult { text, .. } => text_tokens(text),
        Part::Media { tokens, .. } => u64::from(*tokens),
    }
}

/// Estimated tokens of one message.
pub(crate) fn message_tokens(message: &Message) -> u64 {
    message.parts.iter().map(part_tokens).sum()
}

/// Claude Code's context size before a request: the newest reply's usage (the prompt it was
/// answered to plus its own output) plus the estimate of every later view message; without
/// any usage, the estimate of the whole view.
pub(crate) fn context_tokens(view: &View) -> u64 {
    match view.last_usage() {
        Some((i, usage)) => usage.total() + view.messages[i + 1..].iter().map(|m| message_tokens(&m.message)).sum::<u64>(),
        None => view.iter().map(message_tokens).sum(),
    }
}
