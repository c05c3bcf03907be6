//! The chat-completions wire format: only the fields we send and read.
//!
//! Response types ignore unknown fields and make everything but `choices` optional, because
//! OpenAI-compatible servers differ in what else they send (vLLM adds `prompt_logprobs`,
//! llama.cpp `timings`, Ollama `system_fingerprint`) and a summary needs none of it.

use serde::{Deserialize, Serialize};

use compactbench_core::SummaryRequest;

use crate::OpenAiConfig;

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
    /// The request for `request` as `config` says: with `fold_system`, its system prompt opens
    /// the user message (separated by a blank line) instead of being a system message; the
    /// output cap is the request's, lowered to `max_output_tokens` when that is set.
    pub(crate) fn new(config: &'a OpenAiConfig, request: &SummaryRequest) -> ChatRequest<'a> {
        let mut messages = Vec::with_capacity(2);
        let mut user = request.user_message();
        // An empty system message is not nothing to every chat template (some render an empty
        // system turn), so a request without a system prompt sends none.
        if !request.system.is_empty() {
            if config.fold_system {
                user = format!("{}\n\n{user}", request.system);
            } else {
                messages.push(ChatMessage { role: "system", content: request.system.clone() });
            }
        }
        messages.push(ChatMessage { role: "user", content: user });
        // Temperature 0: the closest a server gets to a deterministic summary.
        let max_tokens = config.max_output_tokens.map_or(request.max_output_tokens, |cap| cap.min(request.max_output_tokens));
        ChatRequest { model: &config.model, messages, max_tokens, temperature: 0.0 }
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
        SummaryRequest { purpose: "history".into(), context: compactbench_core::SummaryContext::Fresh, system: system.into(), transcript: "T".into(), instructions: "I".into(), max_output_tokens: 10 }
    }

    fn roles_and_contents(r: &ChatRequest<'_>) -> Vec<(&'static str, String)> {
        r.messages.iter().map(|m| (m.role, m.content.clone())).collect()
    }

    #[test]
    fn system_prompt_is_a_message_or_folded_into_the_user_turn() {
        let user = request("S").user_message();
        let plain = OpenAiConfig::new("http://x", "m");
        let folding = OpenAiConfig { fold_system: true, ..plain.clone() };
        assert_eq!(roles_and_contents(&ChatRequest::new(&plain, &request("S"))), [("system", "S".to_owned()), ("user", user.clone())]);
        assert_eq!(roles_and_contents(&ChatRequest::new(&folding, &request("S"))), [("user", format!("S\n\n{user}"))]);
        for config in [&plain, &folding] {
            assert_eq!(roles_and_contents(&ChatRequest::new(config, &request(""))), [("user", user.clone())]);
        }
    }

    #[test]
    fn output_cap_is_the_lower_of_the_request_and_the_config() {
        let config = OpenAiConfig::new("http://x", "m");
        assert_eq!(ChatRequest::new(&config, &request("")).max_tokens, 10);
        let capped = OpenAiConfig { max_output_tokens: Some(4), ..config.clone() };
        assert_eq!(ChatRequest::new(&capped, &request("")).max_tokens, 4);
        let loose = OpenAiConfig { max_output_tokens: Some(400), ..config };
        assert_eq!(ChatRequest::new(&loose, &request("")).max_tokens, 10);
    }
}
