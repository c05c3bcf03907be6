//! The message model shared by every strategy: roles, parts and provider-reported usage.

use serde::{Deserialize, Serialize};

/// Who speaks a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The system prompt, or a system notice a harness inserts.
    System,
    /// The human, or a harness message sent in the user's name (summaries often are).
    User,
    /// The model.
    Assistant,
    /// Results of tool calls.
    Tool,
}

impl Role {
    /// Lowercase name as used in renders and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One piece of a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Model reasoning (thinking) kept as such, not as text.
    Reasoning {
        /// The reasoning text, or a stand-in for opaque encrypted reasoning.
        text: String,
    },
    /// A tool call made by the assistant.
    ToolCall {
        /// Provider call id that the result refers to.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments as JSON (key order preserved, as `JSON.stringify` would print them).
        args: serde_json::Value,
    },
    /// The result of a tool call.
    ToolResult {
        /// Id of the call this answers.
        call_id: String,
        /// Name of the tool that was called (kept here so strategies need no lookup).
        name: String,
        /// Output text.
        text: String,
        /// Whether the tool reported failure.
        is_error: bool,
    },
    /// An image or other media, present only by its size.
    Media {
        /// MIME type, e.g. `image/png`.
        mime: String,
        /// Token size charged for it by providers.
        tokens: u32,
    },
}

impl Part {
    /// Text part.
    pub fn text(text: impl Into<String>) -> Part {
        Part::Text { text: text.into() }
    }
}

/// Token usage a provider reports for one response (the request's input plus the output).
///
/// The prompt is split in three disjoint parts, as Anthropic reports it: `input` (neither read
/// from nor written to the cache), `cache_read` and `cache_write`. Providers without a
/// cache-write count (OpenAI, Gemini) report 0 there, and harnesses differ on which parts
/// they count (each strategy crate says which of its original's fields it reads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens neither served from nor written to the provider's prompt cache.
    pub input: u64,
    /// Completion tokens.
    pub output: u64,
    /// Prompt tokens served from the provider's prompt cache.
    pub cache_read: u64,
    /// Prompt tokens written to the provider's prompt cache by this request (Anthropic's
    /// `cache_creation_input_tokens`, Pi's `cacheWrite`). Absent in logs written before it
    /// existed, and left out of the JSON when 0, so those logs and results read and print as
    /// before.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// All tokens of the exchange: the context the request used (uncached input, cache reads
    /// and cache writes) plus the reply, as Pi's `totalTokens` and Anthropic's four counts sum.
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_write
    }

    /// The prompt the request sent: everything but the reply.
    pub fn prompt(&self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }
}

/// Why an assistant reply ended before it completed.
///
/// Originals that keep such a reply mark it (Pi and oh-my-pi as `stopReason` `"aborted"` /
/// `"error"`, OpenCode as `info.error`); see `fidelity/failed-replies.md` for how each one
/// treats it in later requests, in its compaction trigger and in selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Failure {
    /// The user cancelled the reply mid-stream.
    Aborted,
    /// The provider or the stream failed (possibly after retries).
    Error,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Speaker.
    pub role: Role,
    /// Content, in order.
    pub parts: Vec<Part>,
    /// Provider-reported usage; set by the runner on assistant messages it "received".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Set on an assistant reply that ended before it completed (user abort, provider or
    /// stream error); `usage` then holds what the provider reported before the end, if
    /// anything (Anthropic reports the prompt's tokens at `message_start`, so an aborted
    /// reply often carries partial usage). `None` for a completed reply. Absent in logs
    /// written before it existed, and left out of the JSON when `None`, so those logs and
    /// results read and print as before. Generated sessions never set it.
    ///
    /// Before this marker, a failed reply could be expressed only as an assistant message
    /// without usage (or with all-zero usage); strategies still read that convention too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
}

impl Message {
    /// A message with the given role and parts.
    pub fn new(role: Role, parts: Vec<Part>) -> Message {
        Message { role, parts, usage: None, failure: None }
    }

    /// A system message with one text part.
    pub fn system(text: impl Into<String>) -> Message {
        Message::new(Role::System, vec![Part::text(text)])
    }

    /// A user message with one text part.
    pub fn user(text: impl Into<String>) -> Message {
        Message::new(Role::User, vec![Part::text(text)])
    }

    /// An assistant message with one text part.
    pub fn assistant(text: impl Into<String>) -> Message {
        Message::new(Role::Assistant, vec![Part::text(text)])
    }

    /// An assistant message with one tool call.
    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, args: serde_json::Value) -> Message {
        Message::new(
            Role::Assistant,
            vec![Part::ToolCall { id: id.into(), name: name.into(), args }],
        )
    }

    /// A tool message holding one result.
    pub fn tool_result(
        call_id: impl Into<String>,
        name: impl Into<String>,
        text: impl Into<String>,
        is_error: bool,
    ) -> Message {
        Message::new(
            Role::Tool,
            vec![Part::ToolResult { call_id: call_id.into(), name: name.into(), text: text.into(), is_error }],
        )
    }

    /// Ids of the tool calls this message makes.
    pub fn tool_call_ids(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
    }

    /// Ids of the calls whose results this message carries.
    pub fn tool_result_ids(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
    }

    /// Whether the message calls at least one tool.
    pub fn has_tool_calls(&self) -> bool {
        self.tool_call_ids().next().is_some()
    }

    /// Concatenated `Text` parts, joined by newlines.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n")
    }

    /// Every searchable string of the message (text, reasoning, tool names, arguments,
    /// results), joined by newlines. Probes search this; token counters count it.
    pub fn searchable_text(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if !out.is_empty() {
                out.push('\n');
            }
            match part {
                Part::Text { text } | Part::Reasoning { text } => out.push_str(text),
                Part::ToolCall { name, args, .. } => {
                    out.push_str(name);
                    out.push(' ');
                    out.push_str(&args.to_string());
                }
                Part::ToolResult { text, .. } => out.push_str(text),
                Part::Media { mime, .. } => {
                    out.push('[');
                    out.push_str(mime);
                    out.push(']');
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Logs and results written before `cache_write` existed read with 0 there, and a usage
    /// without cache writes prints as it did.
    #[test]
    fn cache_write_defaults_to_zero_and_is_left_out_when_zero() {
        let old: Usage = serde_json::from_str(r#"{"input":10,"output":2,"cache_read":5}"#).unwrap();
        assert_eq!(old, Usage { input: 10, output: 2, cache_read: 5, cache_write: 0 });
        assert_eq!(serde_json::to_string(&old).unwrap(), r#"{"input":10,"output":2,"cache_read":5}"#);
        let written = Usage { cache_write: 7, ..old };
        assert_eq!(serde_json::to_string(&written).unwrap(), r#"{"input":10,"output":2,"cache_read":5,"cache_write":7}"#);
        assert_eq!((written.total(), written.prompt()), (24, 22));
    }
}
