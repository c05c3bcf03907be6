//! Gemini CLI's own size measures: `estimateTokenCountSync` (`utils/tokenCalculation.ts`)
//! and `JSON.stringify` lengths of history entries (`findCompressSplitPoint`).
//!
//! The estimator is private to this crate because no core estimator matches it: ASCII code
//! units count 1/4 token, every other UTF-16 code unit 1.5 tokens, texts over 100 000 code
//! units `length / 4`; function responses `(name + JSON of the response) / 4`; images 3000,
//! PDFs 25 800; any other part `JSON.stringify(part).length / 4`. Parts are summed as
//! floating point and floored once per call.

use compactbench_core::estimate::utf16_len;
use serde_json::{json, Value};

use crate::history::{Content, GPart, Kind, ResponseKey};

const MAX_CHARS_FOR_FULL_HEURISTIC: u64 = 100_000;
const NON_ASCII_TOKENS_PER_CHAR: f64 = 1.5;
const CHARS_PER_TOKEN: f64 = 4.0;
const IMAGE_TOKEN_ESTIMATE: f64 = 3000.0;
const PDF_TOKEN_ESTIMATE: f64 = 25_800.0;

/// `estimateTextTokens` (unfloored).
pub(crate) fn text_tokens(text: &str) -> f64 {
    let len = utf16_len(text);
    if len > MAX_CHARS_FOR_FULL_HEURISTIC {
        return len as f64 / CHARS_PER_TOKEN;
    }
    // ASCII code units are exactly the ASCII bytes; counted per byte so the loop vectorizes.
    let ascii = text.bytes().filter(u8::is_ascii).count() as u64;
    // Every term is a multiple of 0.25, so this equals JavaScript's running sum exactly.
    ascii as f64 / CHARS_PER_TOKEN + (len - ascii) as f64 * NON_ASCII_TOKENS_PER_CHAR
}

/// One part's unfloored estimate.
pub(crate) fn part_tokens(part: &Kind) -> f64 {
    match part {
        Kind::Text { text, .. } => text_tokens(text),
        Kind::Response { name, key, text, .. } => {
            (utf16_len(name) + response_json_len(*key, text)) as f64 / CHARS_PER_TOKEN
        }
        Kind::Media { mime, .. } if mime.starts_with("image/") => IMAGE_TOKEN_ESTIMATE,
        Kind::Media { mime, .. } if mime.starts_with("application/pdf") => PDF_TOKEN_ESTIMATE,
        Kind::Call { .. } | Kind::Media { .. } => part_json_len(part) as f64 / CHARS_PER_TOKEN,
    }
}

/// `estimateTokenCountSync(parts)`.
pub(crate) fn estimate<'a>(parts: impl IntoIterator<Item = &'a GPart>) -> u64 {
    parts.into_iter().map(|p| part_tokens(&p.kind)).sum::<f64>().floor() as u64
}

/// `estimateTokenCountSync` over every part of `contents`.
pub(crate) fn estimate_contents(contents: &[Content]) -> u64 {
    estimate(contents.iter().flat_map(|c| &c.parts))
}

/// `estimateTokenCountSync([{text}])`.
pub(crate) fn estimate_text(text: &str) -> u64 {
    text_tokens(text).floor() as u64
}

/// `JSON.stringify(s).length` for a string `s`: the quotes, `s`'s UTF-16 length, and what
/// escaping adds. Every escaped character is one ASCII byte, so the escapes are counted per
/// byte (this runs over every tool result before every request).
pub(crate) fn json_str_len(s: &str) -> u64 {
    let escaping: u64 = s
        .bytes()
        .map(|b| match b {
            // `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`: one unit more.
            b'"' | b'\\' | 0x08 | 0x0C | b'\n' | b'\r' | b'\t' => 1,
            // `\u00XX`: five more.
            0..0x20 => 5,
            _ => 0,
        })
        .sum();
    2 + utf16_len(s) + escaping
}

/// `JSON.stringify({<key>: text}).length`.
pub(crate) fn response_json_len(key: ResponseKey, text: &str) -> u64 {
    // `{"` key `":` value `}`
    2 + key.as_str().len() as u64 + 2 + json_str_len(text) + 1
}

/// `JSON.stringify(part).length`.
pub(crate) fn part_json_len(part: &Kind) -> u64 {
    match part {
        // {"text":…} and {"text":…,"thought":true}
        Kind::Text { text, thought } => 9 + json_str_len(text) + if *thought { 15 } else { 0 },
        // {"functionCall":{"id":…,"name":…,"args":…}}
        Kind::Call { id, name, args } => {
            22 + json_str_len(id) + 8 + json_str_len(name) + 8 + utf16_len(&args.to_string()) + 2
        }
        // {"functionResponse":{"id":…,"name":…,"response":…}}
        Kind::Response { id, name, key, text } => {
            26 + json_str_len(id) + 8 + json_str_len(name) + 12 + response_json_len(*key, text) + 2
        }
        // {"inlineData":{"mimeType":…,"data":"…"}}: the base64 data modelled as 4 characters
        // per token of the part.
        Kind::Media { mime, tokens } => 26 + json_str_len(mime) + 9 + 4 * u64::from(*tokens) + 3,
    }
}

/// `JSON.stringify(content).length`: `{"role":…,"parts":[…]}`.
pub(crate) fn content_json_len(content: &Content) -> u64 {
    let parts: u64 = content.parts.iter().map(|p| part_json_len(&p.kind)).sum();
    let commas = content.parts.len().saturating_sub(1) as u64;
    // {"role":"<role>","parts":[ … ]}
    9 + content.role.as_str().len() as u64 + 11 + parts + commas + 2
}

/// A part as Gemini JSON (the media payload left out: it cannot travel in a text transcript).
pub(crate) fn part_json(part: &Kind) -> Value {
    match part {
        Kind::Text { text, thought: false } => json!({ "text": text }),
        Kind::Text { text, thought: true } => json!({ "text": text, "thought": true }),
        Kind::Call { id, name, args } => json!({ "functionCall": { "id": id, "name": name, "args": args } }),
        Kind::Response { id, name, key, text } => {
            json!({ "functionResponse": { "id": id, "name": name, "response": { key.as_str(): text } } })
        }
        Kind::Media { mime, .. } => json!({ "inlineData": { "mimeType": mime } }),
    }
}

/// A history entry as Gemini JSON.
pub(crate) fn content_json(content: &Content) -> Value {
    json!({
        "role": content.role.as_str(),
        "parts": content.parts.iter().map(|p| part_json(&p.kind)).collect::<Vec<_>>(),
    })
}
