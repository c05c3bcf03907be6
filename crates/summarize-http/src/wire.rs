//! The chat-completions wire format: only the fields we send and read.
//!
//! Response types ignore unknown fields and make everything but `choices` optional, because
//! OpenAI-compatible servers differ in what else they send (vLLM adds `prompt_logprobs`,
//! llama.cpp `timings`, Ollama `system_fingerprint`) and a summary needs none of it.

use serde::{Deserialize, Serialize};

use compactbench_core::SummaryRequest;

#[derive(Serialize)]
pub(crate) struct ChatRequest<'a> {
    pub(crate) model: &'a str,
    pub(crate) messages: Vec<ChatMessage>,
    pub(crate) max_tokens: u64,
    pub(crate) temperature: f64,
}

#[derive(Serialize)]
pub(crate) struct ChatMessage {
    pub(crate) role: &'static str,
    pub(crate) content: String,
}

impl<'a> ChatRequest<'a> {
    /// The request for `request`; with `fold_system`, its system prompt opens the user message
    /// (separated by a blank line) instead of being a system message.
    pub(crate) fn new(model: &'a str, request: &SummaryRequest, fold_system: bool) -> ChatRequest<'a> {
        let mut messages = Vec::with_capacity(2);
        let mut user = request.user_message();
        // An empty system message is not nothing to every chat template (some render an empty
        // system turn), so a request without a system prompt sends none.
        if !request.system.is_empty() {
            if fold_system {
                user = format!("{}\n\n{user}", request.system);
            } else {
                messages.push(ChatMessage { role: "system", content: request.system.clone() });
            }
        }
        messages.push(ChatMessage { role: "user", content: user });
        // Temperature 0: the closest a server gets to a deterministic summary.
        ChatRequest { model, messages, max_tokens: request.max_output_tokens, temperature: 0.0 }
    }
}

#[derive(Deserialize)]
pub(crate) struct ChatResponse {
    pub(crate) choices: Vec<Choice>,
    #[serde(default)]
    pub(crate) usage: Option<Usage>,
}

#[derive(Deserialize)]
pub(crate) struct Choice {
    #[serde(default)]
    pub(crate) message: Option<ChoiceMessage>,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct ChoiceMessage {
    #[serde(default)]
    pub(crate) content: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct Usage {
    #[serde(default)]
    pub(crate) prompt_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) completion_tokens: Option<u64>,
}

/// The `{"error": ...}` body servers send with failures (and a few with status 200): an
/// object with a `message` (OpenAI, vLLM, llama.cpp) or a bare string (Ollama's native API).
#[derive(Deserialize)]
pub(crate) struct ErrorBody {
    pub(crate) error: serde_json::Value,
}

impl ErrorBody {
    pub(crate) fn message(&self) -> String {
        match &self.error {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Object(o) => match o.get("message") {
                Some(serde_json::Value::String(s)) => s.clone(),
                _ => self.error.to_string(),
            },
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(system: &str) -> SummaryRequest {
        SummaryRequest { purpose: "history".into(), system: system.into(), transcript: "T".into(), instructions: "I".into(), max_output_tokens: 10 }
    }

    fn roles_and_contents(r: &ChatRequest<'_>) -> Vec<(&'static str, String)> {
        r.messages.iter().map(|m| (m.role, m.content.clone())).collect()
    }

    #[test]
    fn system_prompt_is_a_message_or_folded_into_the_user_turn() {
        let user = request("S").user_message();
        assert_eq!(roles_and_contents(&ChatRequest::new("m", &request("S"), false)), [("system", "S".to_owned()), ("user", user.clone())]);
        assert_eq!(roles_and_contents(&ChatRequest::new("m", &request("S"), true)), [("user", format!("S\n\n{user}"))]);
        for fold in [false, true] {
            assert_eq!(roles_and_contents(&ChatRequest::new("m", &request(""), fold)), [("user", user.clone())]);
        }
    }
}
