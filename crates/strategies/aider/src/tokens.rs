//! Aider's token counts, estimated without a tokenizer.
//!
//! Aider's `Model.token_count` encodes `json.dumps(msg)` for one message and calls
//! `litellm.token_counter` for a list. We may not use a real tokenizer, so both are estimated
//! over exactly the text Aider would encode: `ceil(len / 4)` of the `json.dumps` string (which
//! is pure ASCII, so bytes, code points and UTF-16 units agree), and for a list litellm's chat
//! overhead (3 per message, 3 for the reply) plus `ceil(code points / 4)` of role and content.

use compactbench_core::estimate;

/// `len(json.dumps(s))` for a Python string with the default `ensure_ascii=True`: quotes, two-char
/// escapes for `\\ " \b \f \n \r \t`, `\uXXXX` for everything else outside space..tilde (two of
/// them, a surrogate pair, above the BMP).
fn dumps_str_len(s: &str) -> u64 {
    2 + s
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
            ' '..='~' => 1,
            c if (c as u32) < 0x1_0000 => 6,
            _ => 12,
        })
        .sum::<u64>()
}

/// `len(json.dumps({"role": role, "content": content}))`: `{"role": ` + role + `, "content": `
/// + content + `}`.
fn dumps_message_len(role: &str, content: &str) -> u64 {
    9 + dumps_str_len(role) + 13 + dumps_str_len(content) + 1
}

/// `token_count(msg)` for one message dict (the path `too_big` and the split use).
pub(crate) fn message_tokens(role: &str, content: &str) -> u64 {
    dumps_message_len(role, content).div_ceil(4)
}

/// `token_count([msgs])` for a list (the path the recursion test uses for the summary).
pub(crate) fn list_tokens<'a>(messages: impl IntoIterator<Item = (&'a str, &'a str)>) -> u64 {
    3 + messages
        .into_iter()
        .map(|(role, content)| {
            3 + estimate::code_points(role).div_ceil(4) + estimate::code_points(content).div_ceil(4)
        })
        .sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_dumps_lengths_match_python() {
        // Python: len(json.dumps({"role": "user", "content": ""})) == 31.
        assert_eq!(dumps_message_len("user", ""), 31);
        assert_eq!(dumps_message_len("assistant", ""), 36);
        // len(json.dumps('a"\n\x01é😀\x7f')) == 2 + 1 + 2 + 2 + 6 + 6 + 12 + 6 == 37.
        assert_eq!(dumps_str_len("a\"\n\u{1}é😀\u{7f}"), 37);
        assert_eq!(message_tokens("user", "x"), 8, "32 chars / 4");
        assert_eq!(message_tokens("user", "xx"), 9, "33 chars round up");
        assert_eq!(list_tokens([("user", "abcde")]), 3 + 3 + 1 + 2);
    }
}
