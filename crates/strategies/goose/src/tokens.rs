//! Goose's token counting for its own decisions (`token_counter.rs`), with the BPE count of a
//! text replaced by `ceil(bytes / 4)`.
//!
//! Per message: 4 framing tokens plus the count of each text, of each tool request written
//! as `id:name:<Debug of the arguments>`, and of each tool response's text; reasoning and
//! media count nothing. A chat adds the system prompt (+4) and a reply primer of 3.

use compactbench_core::estimate::bytes_div4_ceil;
use compactbench_core::{Entry, Log, Part};

use crate::conversation::{conversation, op, GooseMessage, OP_COMPACT};

const TOKENS_PER_MESSAGE: u64 = 4;
const REPLY_PRIMER_TOKENS: u64 = 3;

/// Stand-in for the o200k BPE count: Goose is Rust, so lengths are UTF-8 bytes.
pub(crate) fn count(text: &str) -> u64 {
    bytes_div4_ceil(text)
}

/// Rust's `Debug` of the `Option<JsonObject>` Goose keeps as a call's arguments.
fn debug_arguments(args: &serde_json::Value) -> String {
    match args {
        serde_json::Value::Object(map) => format!("Some({map:?})"),
        _ => "None".to_owned(),
    }
}

/// `count_message_tokens` of one message.
pub(crate) fn message_tokens(message: &GooseMessage<'_>) -> u64 {
    TOKENS_PER_MESSAGE
        + message
            .parts
            .iter()
            .map(|p| match p {
                Part::Text { text } => count(text),
                Part::ToolCall { id, name, args } => count(&format!("{id}:{name}:{}", debug_arguments(args))),
                Part::ToolResult { text, .. } => count(text),
                Part::Reasoning { .. } | Part::Media { .. } => 0,
            })
            .sum::<u64>()
}

/// The auto-compaction fallback: `count_chat_tokens("", [m], [])` summed over the
/// agent-visible messages.
pub(crate) fn estimate(messages: &[GooseMessage<'_>]) -> u64 {
    messages.iter().filter(|m| m.visible).map(|m| message_tokens(m) + REPLY_PRIMER_TOKENS).sum()
}

/// `session.total_tokens`: the provider-reported total of the newest model response, or
/// after a compaction the summary's output tokens (`update_session_metrics` with
/// `is_compaction_usage`), whichever came last. `None` before either exists.
pub(crate) fn session_total(log: &Log) -> Option<u64> {
    log.entries().rev().find_map(|(_, e)| match e {
        Entry::Message(m) => m.usage.map(|u| u.total()),
        Entry::Checkpoint(cp) if op(cp) == Some(OP_COMPACT) => cp.details.get("total_tokens").and_then(|v| v.as_u64()),
        Entry::Checkpoint(_) => None,
    })
}

/// `session.total_tokens`, or the local estimate of the agent-visible messages when no total is
/// known yet.
pub(crate) fn current_tokens(log: &Log) -> u64 {
    session_total(log).unwrap_or_else(|| estimate(&conversation(log).goose_messages()))
}
