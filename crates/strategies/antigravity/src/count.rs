//! The crate's history-size estimate (Antigravity's own is unknown): the newest fresh
//! reply's provider usage plus `ceil(chars / 4)` of what came after it.

use compactbench_core::estimate::chars_div4_ceil;
use compactbench_core::{Log, Message, Part, Role, View, Window};

fn part_tokens(part: &Part) -> u64 {
    match part {
        Part::Text { text } | Part::Reasoning { text } => chars_div4_ceil(text),
        Part::ToolCall { name, args, .. } => chars_div4_ceil(name) + chars_div4_ceil(&args.to_string()),
        Part::ToolResult { text, .. } => chars_div4_ceil(text),
        Part::Media { tokens, .. } => u64::from(*tokens),
    }
}

/// `ceil(chars / 4)` of one message: its texts, a tool call's name and JSON arguments, a media
/// part's own size.
pub(crate) fn message_tokens(message: &Message) -> u64 {
    message.parts.iter().map(part_tokens).sum()
}

/// The history size before a request: the newest reply received after the newest compaction
/// (its usage is the prompt it answered plus its output) plus the estimate of every later view
/// message; without such a reply, the estimate of the whole view. A kept reply from before the
/// compaction measured the longer history and is not used.
pub(crate) fn history_tokens(log: &Log, view: &View) -> u64 {
    let anchor = log.checkpoints().rev().find(|(_, cp)| cp.window != Window::Inherit).map(|(id, _)| id);
    let fresh = view.messages.iter().enumerate().rev().find_map(|(i, m)| {
        let id = m.origin.entry()?;
        let usage = m.message.usage.filter(|_| m.message.role == Role::Assistant)?;
        anchor.is_none_or(|a| id > a).then_some((i, usage))
    });
    match fresh {
        Some((i, usage)) => usage.total() + view.messages[i + 1..].iter().map(|m| message_tokens(&m.message)).sum::<u64>(),
        None => view.iter().map(message_tokens).sum(),
    }
}
