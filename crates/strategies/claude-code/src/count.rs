//! Claude Code's own token estimate: the last reply's usage plus `ceil(chars / 4)` of what
//! came after it.

use compactbench_core::estimate::{chars_div4_ceil, json_utf16_len};
use compactbench_core::{Message, Part, View};

/// `ceil(chars / 4)` of a text (UTF-16 lengths, as JavaScript counts them).
pub(crate) fn text_tokens(text: &str) -> u64 {
    chars_div4_ceil(text)
}

/// Estimated tokens of one part. A tool call counts its name plus `JSON.stringify(input)`:
/// `json_utf16_len` is that string's length, counted without building it.
pub(crate) fn part_tokens(part: &Part) -> u64 {
    match part {
        Part::Text { text } | Part::Reasoning { text } => text_tokens(text),
        Part::ToolCall { name, args, .. } => text_tokens(name) + json_utf16_len(args).div_ceil(4),
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

#[cfg(test)]
mod tests {
    use compactbench_core::Part;
    use serde_json::json;

    /// A call's estimate is still `ceil(len(JSON.stringify(input)) / 4)` with the string built.
    #[test]
    fn call_tokens_count_the_arguments_json() {
        for args in [json!({}), json!([]), json!({"path": "src/é😀.rs", "q": "a\"b\\c\n\u{1}", "n": [1, null, true, {}]})] {
            let part = Part::ToolCall { id: "c".into(), name: "Read".into(), args: args.clone() };
            assert_eq!(super::part_tokens(&part), super::text_tokens("Read") + super::text_tokens(&args.to_string()));
        }
    }
}
