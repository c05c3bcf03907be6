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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens not served from cache.
    pub input: u64,
    /// Completion tokens.
    pub output: u64,
    /// Prompt tokens served from the provider's prompt cache.
    pub cache_read: u64,
}

impl Usage {
    /// All tokens of the exchange: the context the request used plus the reply.
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_read
    }
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
}

impl Message {
    /// A message with the given role and parts.
    pub fn new(role: Role, parts: Vec<Part>) -> Message {
        Message { role, parts, usage: None }
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
