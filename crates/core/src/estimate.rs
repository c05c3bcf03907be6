//! Token estimators that harnesses use for their own decisions.
//!
//! The runner measures requests exactly (the `tokens` crate); a strategy decides with the
//! estimate its original uses, picked from here by name. Lengths follow the original's
//! language: JavaScript harnesses count UTF-16 code units, Python ones code points, Go and
//! Rust ones bytes.

use crate::{Log, Message, Part, Role, View, Window};

/// JavaScript `string.length`: UTF-16 code units.
pub fn utf16_len(s: &str) -> u64 {
    utf16_units(s.as_bytes())
}

/// UTF-16 code units of UTF-8 `bytes` (any slicing of valid UTF-8): one per byte that starts a
/// character, plus one more per four-byte lead (characters outside the BMP take two units).
/// Counted byte by byte so the loop vectorizes: estimators run over every message before every
/// request, and decoding characters was the eval's single hottest function. The counts are
/// summed in blocks of 127 bytes into a `u8` (each byte adds at most 2, so a block adds at
/// most 254): byte-wide vector adds, about ten times faster than widening every byte to `u64`.
fn utf16_units(bytes: &[u8]) -> u64 {
    bytes
        .chunks(127)
        .map(|block| u64::from(block.iter().fold(0u8, |n, &b| n + u8::from((b & 0xC0) != 0x80) + u8::from(b >= 0xF0))))
        .sum()
}

/// `utf16_len` of `value` serialized as compact JSON (`JSON.stringify` of a tool call's
/// arguments), without building the string.
pub fn json_utf16_len(value: &serde_json::Value) -> u64 {
    json_measure(value, utf16_units)
}

/// The byte length of `value` serialized as compact JSON (`serde_json::to_string(value).len()`,
/// what Codex's estimator divides by four), without building the string.
pub fn json_byte_len(value: &serde_json::Value) -> u64 {
    json_measure(value, |bytes| bytes.len() as u64)
}

/// `value` serialized as compact JSON, each written run of bytes measured by `units` and summed.
fn json_measure(value: &serde_json::Value, units: fn(&[u8]) -> u64) -> u64 {
    struct Measure(u64, fn(&[u8]) -> u64);
    impl std::io::Write for Measure {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += (self.1)(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut measure = Measure(0, units);
    serde_json::to_writer(&mut measure, value).expect("a Value always serializes");
    measure.0
}

/// `utf16_len` of `s` written as a JSON string literal (its quotes and escapes, as
/// `serde_json` writes them), without building it: with [`json_utf16_len`], lets a strategy
/// add up the length of a JSON document member by member instead of serializing it.
///
/// Counted in one pass over the bytes: the two quotes, plus per byte its UTF-16 units (as in
/// [`utf16_len`]) and what its escape adds: one for `\"`, `\\` and the short escapes `\b`
/// `\t` `\n` `\f` `\r`, five for any other control character (`\u00XX`); nothing else is
/// escaped. A byte adds at most 6, so the bytes are summed in a `u8` per 42-byte chunk
/// (byte-wide vector adds) and widened once per chunk.
pub fn json_str_utf16_len(s: &str) -> u64 {
    let added = |b: u8| {
        let units = u8::from((b & 0xC0) != 0x80) + u8::from(b >= 0xF0);
        let quoted = u8::from(b == b'"' || b == b'\\');
        let control = u8::from(b < 0x20);
        // Only control characters have short escapes, so this never goes below zero.
        let short = u8::from(matches!(b, 0x08 | 0x09 | 0x0A | 0x0C | 0x0D));
        units + quoted + 5 * control - 4 * short
    };
    2 + s.as_bytes().chunks(42).map(|chunk| u64::from(chunk.iter().fold(0u8, |n, &b| n + added(b)))).sum::<u64>()
}

/// Python `len(str)`: Unicode code points.
pub fn code_points(s: &str) -> u64 {
    s.chars().count() as u64
}

/// `ceil(utf16_len / 4)` (Pi's `estimateTokens` per text).
pub fn chars_div4_ceil(s: &str) -> u64 {
    utf16_len(s).div_ceil(4)
}

/// `round(utf16_len / 4)`, halves rounded up as JavaScript's `Math.round` does.
pub fn chars_div4_round(s: &str) -> u64 {
    round_div4(utf16_len(s))
}

/// `ceil(bytes / 4)` over UTF-8 bytes (Codex's `approx_token_count`).
pub fn bytes_div4_ceil(s: &str) -> u64 {
    (s.len() as u64).div_ceil(4)
}

/// `ceil(chars / 4)` per part of `message`, summed: texts and reasoning, a tool call's name and
/// JSON arguments, results; media by their declared size. The estimate of harnesses whose own
/// is unknown (closed ones), and of several that count this way.
pub fn message_chars_div4_ceil(message: &Message) -> u64 {
    message
        .parts
        .iter()
        .map(|part| match part {
            Part::Text { text } | Part::Reasoning { text } => chars_div4_ceil(text),
            Part::ToolCall { name, args, .. } => chars_div4_ceil(name) + json_utf16_len(args).div_ceil(4),
            Part::ToolResult { text, .. } => chars_div4_ceil(text),
            Part::Media { tokens, .. } => u64::from(*tokens),
        })
        .sum()
}

/// The context size before a request, as most harnesses estimate it: the provider usage of the
/// newest reply received after the newest window-setting checkpoint (its prompt plus its own
/// output), plus [`message_chars_div4_ceil`] of every later view message; without such a
/// reply, the estimate of the whole view. A kept reply from before the checkpoint measured the
/// longer history and is not used.
pub fn fresh_usage_plus_chars_div4(log: &Log, view: &View) -> u64 {
    let anchor = log.checkpoints().rev().find(|(_, cp)| cp.window != Window::Inherit).map(|(id, _)| id);
    let fresh = view.messages.iter().enumerate().rev().find_map(|(i, m)| {
        let id = m.origin.entry()?;
        let usage = m.message.usage.filter(|_| m.message.role == Role::Assistant)?;
        anchor.is_none_or(|a| id > a).then_some((i, usage))
    });
    match fresh {
        Some((i, usage)) => usage.total() + view.messages[i + 1..].iter().map(|m| message_chars_div4_ceil(&m.message)).sum::<u64>(),
        None => view.iter().map(message_chars_div4_ceil).sum(),
    }
}

/// `n / 4` rounded half up.
pub fn round_div4(n: u64) -> u64 {
    (n + 2) / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimators_round_as_their_originals() {
        assert_eq!(chars_div4_ceil(""), 0);
        assert_eq!(chars_div4_ceil("abcde"), 2);
        assert_eq!(chars_div4_round("abcde"), 1);
        assert_eq!(chars_div4_round("abcdef"), 2, "1.5 rounds up like Math.round");
        // "é" is one UTF-16 unit, two UTF-8 bytes; "😀" is two units, four bytes.
        assert_eq!(utf16_len("é😀"), 3);
        assert_eq!(code_points("é😀"), 2);
        assert_eq!(bytes_div4_ceil("é😀"), 2);
    }

    #[test]
    fn utf16_lengths_match_encode_utf16() {
        for s in ["", "ascii", "é😀", "\u{10FFFF}\u{800}\u{7FF}\u{80}\u{7F}", "日本語 text 🎉🎉 mixed\n"] {
            assert_eq!(utf16_len(s), s.encode_utf16().count() as u64, "{s:?}");
        }
        // Across the 127-byte blocks, with blocks made only of four-byte characters (the most
        // a block can add) and characters split between blocks.
        for unit in ["a", "é", "日", "😀", "a😀é日"] {
            for n in [31, 32, 42, 43, 63, 64, 127, 128, 300, 1000] {
                let s = unit.repeat(n);
                assert_eq!(utf16_len(&s), s.encode_utf16().count() as u64, "{unit:?} × {n}");
                let shifted = format!("x{s}");
                assert_eq!(utf16_len(&shifted), shifted.encode_utf16().count() as u64, "{unit:?} × {n}, shifted");
            }
        }
        let args = serde_json::json!({"path": "src/é😀.rs", "n": 3, "nested": {"quote": "a\"b\\c\n", "list": [1, null, true]}});
        assert_eq!(json_utf16_len(&args), utf16_len(&args.to_string()));
        assert_eq!(json_byte_len(&args), args.to_string().len() as u64);
        let json_len = |s: &str| utf16_len(&serde_json::Value::from(s).to_string());
        for s in ["", "plain", "q\"b\\s/", "\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}", "é😀\u{2028}"] {
            assert_eq!(json_str_utf16_len(s), json_len(s), "{s:?}");
        }
        // Every ASCII character (escaped or not) and every UTF-8 width, alone and repeated
        // across the 42-byte chunks (control characters are the most a chunk can add).
        let chars = (0..=0x7Fu8).map(char::from).chain(['é', '日', '😀', '\u{2028}', '\u{FFFF}', '\u{10FFFF}']);
        for c in chars {
            for n in [1, 41, 42, 43, 100] {
                let s = c.to_string().repeat(n);
                assert_eq!(json_str_utf16_len(&s), json_len(&s), "{c:?} × {n}");
            }
        }
    }

    #[test]
    fn fresh_usage_counts_only_replies_after_the_newest_window() {
        use crate::{default_projection, Checkpoint, CheckpointKind, EntryId, Usage};
        let mut reply = Message::assistant("abcd");
        reply.usage = Some(Usage { input: 100, output: 1, ..Default::default() });
        let mut log = Log::from_messages([Message::user("12345678"), reply]);
        log.push_message(Message::user("abcdefgh"));
        // 101 from the reply's usage + 2 for the 8-char message after it.
        assert_eq!(fresh_usage_plus_chars_div4(&log, &default_projection(&log)), 103);
        // After a checkpoint that keeps the reply, its usage measured the longer history.
        log.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(1))));
        assert_eq!(fresh_usage_plus_chars_div4(&log, &default_projection(&log)), 1 + 2);
    }
}
