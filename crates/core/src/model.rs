//! Model profiles: the window, output cap, wire shape and pricing a session runs under.

use serde::{Deserialize, Serialize};

/// The four provider request shapes a view can be lowered to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// OpenAI Chat Completions.
    OpenaiChat,
    /// OpenAI Responses.
    OpenaiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini `generateContent`.
    Gemini,
}

impl Shape {
    /// Every shape, in report order.
    pub const ALL: [Shape; 4] = [Shape::OpenaiChat, Shape::OpenaiResponses, Shape::Anthropic, Shape::Gemini];

    /// Kebab-case name as used in scenario files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::OpenaiChat => "openai-chat",
            Shape::OpenaiResponses => "openai-responses",
            Shape::Anthropic => "anthropic",
            Shape::Gemini => "gemini",
        }
    }
}

/// Prices in US dollars per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    /// Uncached input.
    pub input: f64,
    /// Input served from the prompt cache.
    pub cached_input: f64,
    /// Output.
    pub output: f64,
}

/// The model a session runs against, as a strategy sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelProfile {
    /// Model name, e.g. `claude-sonnet-4`; strategies with per-model rules may look at it.
    pub name: String,
    /// Context window in tokens.
    pub window: u64,
    /// Maximum output tokens per response.
    pub max_output: u64,
    /// The provider's request shape (the one the session is "really" sent as; every request
    /// is also lowered to and validated against the other three).
    pub provider: Shape,
    /// Pricing for cost columns.
    #[serde(default)]
    pub pricing: Pricing,
}
