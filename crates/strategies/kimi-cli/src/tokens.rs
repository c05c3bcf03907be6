//! Kimi CLI's two token estimators: `estimate_text_tokens` (`soul/compaction.py`, for the
//! trigger and the post-compaction counter) and `estimate_request_tokens` (`llm.py`, only for
//! the summary's output cap).

use compactbench_core::{estimate, Message, Part};

use crate::history::{result_text, text_parts};

/// `MEDIA_TOKEN_ESTIMATE`: what an image, audio or video part counts in a request estimate.
const MEDIA_TOKEN_ESTIMATE: u64 = 2_000;

/// `estimate_text_tokens`: `floor(total / 4)` where `total` sums the code points of every text
/// part of every message; the floor is taken once over the whole batch.
pub(crate) fn estimate_text_tokens<'a>(messages: impl IntoIterator<Item = &'a Message>) -> u64 {
    let chars: u64 = messages.into_iter().flat_map(text_parts).map(|t| estimate::code_points(&t)).sum();
    chars / 4
}

/// `_estimate_text_tokens` of `llm.py`: `ceil(ascii / 4) + non_ascii`, in code points.
pub(crate) fn text_tokens(text: &str) -> u64 {
    // An ASCII character is one byte below 0x80, and no byte of another character is: counting
    // bytes gives the same number without decoding.
    let ascii = text.bytes().filter(u8::is_ascii).count() as u64;
    let non_ascii = estimate::code_points(text) - ascii;
    ascii.div_ceil(4) + non_ascii
}

/// `_estimate_message_tokens`: role, tool call id, text and think parts, media, tool calls.
/// A tool message with several results stands for several Kimi tool messages (one role and one
/// `tool_call_id` each).
pub(crate) fn message_tokens(message: &Message) -> u64 {
    let role = text_tokens(message.role.as_str());
    let mut total = role;
    let mut results: u64 = 0;
    for part in &message.parts {
        total += match part {
            Part::Text { text } | Part::Reasoning { text } => text_tokens(text),
            Part::Media { .. } => MEDIA_TOKEN_ESTIMATE,
            Part::ToolCall { id, name, args } => text_tokens(id) + text_tokens(name) + text_tokens(&args.to_string()),
            Part::ToolResult { call_id, text, is_error, .. } => {
                results += 1;
                text_tokens(call_id) + text_tokens(&result_text(text, *is_error))
            }
        };
    }
    total + role * results.saturating_sub(1)
}

/// `estimate_request_tokens(system_prompt, tools, history)`: our strategies see no tool
/// schemas, so the tools term is 0.
pub(crate) fn estimate_request_tokens<'a>(system_prompt: &str, history: impl IntoIterator<Item = &'a Message>) -> u64 {
    text_tokens(system_prompt) + history.into_iter().map(message_tokens).sum::<u64>()
}
