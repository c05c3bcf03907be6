//! The token estimator the original decides with: langchain-core's
//! `count_tokens_approximately`, as LangChain's summarization middleware tunes it.
//!
//! Per message: characters of the content (Python `len`, i.e. code points), plus the Python
//! `repr` of the tool calls for an assistant message with plain-string content, plus the tool
//! call id and tool name of a tool message, plus the OpenAI role name; then
//! `ceil(chars / chars_per_token) + 3`. Images cost a flat 85 tokens. The main counter then
//! scales the total by `min(1.25, max(1.0, R / A))`, where `R` is the provider-reported total
//! of the newest assistant message carrying usage and `A` the running estimate right after it.

use compactbench_core::{Message, Part, Role};

/// Flat cost of an image block.
const TOKENS_PER_IMAGE: f64 = 85.0;
/// `extra_tokens_per_message`.
const EXTRA_TOKENS_PER_MESSAGE: f64 = 3.0;

/// Counts `messages` with `chars_per_token`; `scaling` selects the main counter
/// (`use_usage_metadata_scaling=True`) over the partial one.
pub(crate) fn count<'a>(messages: impl IntoIterator<Item = &'a Message>, chars_per_token: f64, scaling: bool) -> u64 {
    total(messages.into_iter().map(|m| (m, tokens(m, chars_per_token))), scaling)
}

/// One message's share of the count: flat tokens, `ceil(chars / chars_per_token)`, and the
/// extra tokens per message. Always a whole number, so shares add up exactly in any order.
pub(crate) fn tokens(m: &Message, chars_per_token: f64) -> f64 {
    let (chars, flat) = message_chars(m);
    flat + (chars as f64 / chars_per_token).ceil() + EXTRA_TOKENS_PER_MESSAGE
}

/// The count of messages given with their [`tokens`]: their sum, scaled by the main counter.
pub(crate) fn total<'a>(messages: impl IntoIterator<Item = (&'a Message, f64)>, scaling: bool) -> u64 {
    let mut total = 0.0_f64;
    let mut n = 0usize;
    let mut last_reported: Option<u64> = None;
    let mut approx_at_last: f64 = 0.0;
    for (m, tokens) in messages {
        n += 1;
        total += tokens;
        // Every assistant message comes from the session's one model, so the provider check
        // (all assistant messages share one `model_provider`) always passes.
        if scaling && m.role == Role::Assistant {
            if let Some(usage) = m.usage {
                last_reported = Some(usage.total());
                approx_at_last = total;
            }
        }
    }
    if let Some(reported) = last_reported {
        if scaling && n > 1 && approx_at_last > 0.0 {
            let factor = (reported as f64 / approx_at_last).clamp(1.0, 1.25);
            total *= factor;
        }
    }
    total.ceil() as u64
}

/// Tokens of one message by the partial counter (no scaling).
pub(crate) fn one(message: &Message, chars_per_token: f64) -> u64 {
    count(std::iter::once(message), chars_per_token, false)
}

/// Whether the message's content would be a plain string in LangChain (no parts, or exactly one
/// text part besides tool calls and results) rather than a list of content blocks.
pub(crate) fn has_string_content(m: &Message) -> bool {
    let mut content = m.parts.iter().filter(|p| !matches!(p, Part::ToolCall { .. } | Part::ToolResult { .. }));
    matches!((content.next(), content.next()), (None, _) | (Some(Part::Text { .. }), None))
}

/// Characters counted for a message, and flat tokens (images).
fn message_chars(m: &Message) -> (u64, f64) {
    let mut chars = 0u64;
    let mut flat = 0.0;
    let string_content = has_string_content(m);
    for part in &m.parts {
        match part {
            Part::Text { text } => chars += len(text),
            Part::Reasoning { text } => {
                chars += len(&py_dict(&[("type", py_str("reasoning")), ("reasoning", py_str(text))]));
            }
            Part::Media { mime, tokens } => {
                // Only `image` blocks have a flat price; other media are counted by the
                // `repr` of their (base64-carrying) block, which this model cannot see, so
                // their provider size stands in.
                flat += if mime.starts_with("image/") { TOKENS_PER_IMAGE } else { f64::from(*tokens) };
            }
            Part::ToolCall { id, name, args } => {
                // With list content the calls are content blocks (Anthropic `tool_use`) and
                // LangChain counts them by `repr`; with string content it adds
                // `repr(message.tool_calls)` once, below.
                if !string_content {
                    chars += len(&py_dict(&[
                        ("type", py_str("tool_use")),
                        ("id", py_str(id)),
                        ("name", py_str(name)),
                        ("input", py_repr(args)),
                    ]));
                }
            }
            Part::ToolResult { call_id, name, text, .. } => {
                chars += len(text) + len(call_id) + len(name);
            }
        }
    }
    if string_content && m.has_tool_calls() {
        chars += len(&tool_calls_repr(m));
    }
    chars += len(openai_role(m.role));
    (chars, flat)
}

/// `_get_message_openai_role`.
fn openai_role(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// Python `repr(message.tool_calls)`: a list of `{'name', 'args', 'id', 'type'}` dicts.
fn tool_calls_repr(m: &Message) -> String {
    let calls: Vec<String> = m
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolCall { id, name, args } => Some(py_dict(&[
                ("name", py_str(name)),
                ("args", py_repr(args)),
                ("id", py_str(id)),
                ("type", py_str("tool_call")),
            ])),
            _ => None,
        })
        .collect();
    format!("[{}]", calls.join(", "))
}

/// Python `len` of a string: code points.
pub(crate) fn len(s: &str) -> u64 {
    s.chars().count() as u64
}

fn py_dict(items: &[(&str, String)]) -> String {
    let body: Vec<String> = items.iter().map(|(k, v)| format!("{}: {v}", py_str(k))).collect();
    format!("{{{}}}", body.join(", "))
}

/// Python `repr` of a JSON value as `json.loads` would have built it.
pub(crate) fn py_repr(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "None".into(),
        serde_json::Value::Bool(true) => "True".into(),
        serde_json::Value::Bool(false) => "False".into(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::String(s) => py_str(s),
        serde_json::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(py_repr).collect();
            format!("[{}]", items.join(", "))
        }
        serde_json::Value::Object(map) => {
            let items: Vec<String> = map.iter().map(|(k, v)| format!("{}: {}", py_str(k), py_repr(v))).collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// Python `repr` of a string: single quotes unless the text has a single quote and no double
/// quote; backslash escapes for the quote, backslash, and non-printable characters.
pub(crate) fn py_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}
