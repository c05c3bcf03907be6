//! Aider's token counts, with the injected exact tokenizer in the encodings litellm picks.
//!
//! `Model.token_count` (aider/models.py) has two paths:
//! - one message (a dict): `len(self.tokenizer(json.dumps(msg)))`, where `tokenizer` is
//!   `litellm.encode(model=self.name, text=…)`. `litellm.utils._select_tokenizer_helper` gives a
//!   Hugging Face tokenizer to a few names (cohere `command-r`, Anthropic catalog names other
//!   than `claude-3*`, `llama-2` / `replicate`, `llama-3`) and otherwise
//!   `_return_openai_tokenizer`: litellm's default encoding, tiktoken `cl100k_base`, whatever
//!   the name (even `gpt-4o`). `ChatSummary.too_big`, `tokenize` and so the tail walk, the head
//!   budget and `tokens_before` use this path.
//! - a list: `litellm.token_counter(model=self.name, messages=…)`
//!   (`litellm_core_utils/token_counter.py`: `_count_messages` + `_count_extra`): 3 per message
//!   plus the tokens of each string value (`role`, `content`), plus 3 for the reply. Its encoding
//!   comes from `_get_count_function`: `_fix_model_name` keeps a name in litellm's OpenAI chat
//!   catalog and maps every other name to `gpt-3.5-turbo`; then `o200k_base` if the name
//!   contains `gpt-4o`, else `tiktoken.encoding_for_model` (`cl100k_base` on a `KeyError`).
//!   `ChatSummary.summarize_real` uses this path for the summary in the recursion test.
//!
//! Encodings follow litellm 1.81.10 and tiktoken 0.12.0 (pinned by aider-chat 0.86.2).

use compactbench_core::{Cx, Encoding, Tokenizer};

/// The names of litellm 1.81.10's OpenAI chat catalog (`litellm.open_ai_chat_completion_models`)
/// that its list path counts with `o200k_base`; every other name is counted with `cl100k_base`
/// (outside the catalog it becomes `gpt-3.5-turbo`; `gpt-5.1`, `gpt-5.2` and the image, audio
/// and realtime names are in the catalog but unknown to tiktoken 0.12.0, so they fall back).
const O200K_LIST_MODELS: &[&str] = &[
    "chatgpt-4o-latest", "gpt-4.1", "gpt-4.1-2025-04-14", "gpt-4.1-mini", "gpt-4.1-mini-2025-04-14", "gpt-4.1-nano",
    "gpt-4.1-nano-2025-04-14", "gpt-4.5-preview", "gpt-4.5-preview-2025-02-27", "gpt-4o", "gpt-4o-2024-05-13",
    "gpt-4o-2024-08-06", "gpt-4o-2024-11-20", "gpt-4o-audio-preview", "gpt-4o-audio-preview-2024-10-01",
    "gpt-4o-audio-preview-2024-12-17", "gpt-4o-audio-preview-2025-06-03", "gpt-4o-mini", "gpt-4o-mini-2024-07-18",
    "gpt-4o-mini-audio-preview", "gpt-4o-mini-audio-preview-2024-12-17", "gpt-4o-mini-realtime-preview",
    "gpt-4o-mini-realtime-preview-2024-12-17", "gpt-4o-mini-search-preview",
    "gpt-4o-mini-search-preview-2025-03-11", "gpt-4o-mini-transcribe", "gpt-4o-mini-tts", "gpt-4o-realtime-preview",
    "gpt-4o-realtime-preview-2024-10-01", "gpt-4o-realtime-preview-2024-12-17",
    "gpt-4o-realtime-preview-2025-06-03", "gpt-4o-search-preview", "gpt-4o-search-preview-2025-03-11",
    "gpt-4o-transcribe", "gpt-4o-transcribe-diarize", "gpt-5", "gpt-5-2025-08-07", "gpt-5-chat",
    "gpt-5-chat-latest", "gpt-5-codex", "gpt-5-mini", "gpt-5-mini-2025-08-07", "gpt-5-nano",
    "gpt-5-nano-2025-08-07", "gpt-5-pro", "gpt-5-pro-2025-10-06", "o1", "o1-2024-12-17", "o1-mini",
    "o1-mini-2024-09-12", "o1-preview", "o1-preview-2024-09-12", "o1-pro", "o1-pro-2025-03-19", "o3",
    "o3-2025-04-16", "o3-deep-research", "o3-deep-research-2025-06-26", "o3-mini", "o3-mini-2025-01-31", "o3-pro",
    "o3-pro-2025-06-10", "o4-mini", "o4-mini-2025-04-16", "o4-mini-deep-research",
    "o4-mini-deep-research-2025-06-26",
];

/// The encoding of litellm's list path for aider's model `name` (the profile's name, resolved
/// through `MODEL_ALIASES` as `Model.__init__` does; of the aliases only `4o` leads to
/// `o200k_base`).
pub(crate) fn list_encoding(name: &str) -> Encoding {
    let name = if name == "4o" { "gpt-4o" } else { name };
    if O200K_LIST_MODELS.contains(&name) {
        Encoding::O200kBase
    } else {
        Encoding::Cl100kBase
    }
}

/// Aider's `Model.token_count` for one model, through the injected tokenizer.
#[derive(Clone, Copy)]
pub(crate) struct Counter<'a> {
    tokenizer: &'a dyn Tokenizer,
    list: Encoding,
}

impl<'a> Counter<'a> {
    /// The counter of the model named `model` (the first summarizer model, whose `token_count`
    /// `ChatSummary` uses).
    pub(crate) fn new(tokenizer: &'a dyn Tokenizer, model: &str) -> Counter<'a> {
        Counter { tokenizer, list: list_encoding(model) }
    }

    /// `ChatSummary.token_count`: the first summarizer model's (the weak model, named as the
    /// main model here: one summarizer), through the injected tokenizer.
    pub(crate) fn of(cx: &Cx<'a>) -> Counter<'a> {
        Counter::new(cx.tokenizer, &cx.model.name)
    }

    /// `token_count(msg)` for one message dict: `cl100k_base` tokens of `json.dumps(msg)`.
    pub(crate) fn message(&self, role: &str, content: &str) -> u64 {
        self.tokenizer.count(Encoding::Cl100kBase, &dumps_message(role, content))
    }

    /// `token_count([msgs])` for a list: litellm's `token_counter`.
    pub(crate) fn list<'m>(&self, messages: impl IntoIterator<Item = (&'m str, &'m str)>) -> u64 {
        3 + messages
            .into_iter()
            .map(|(role, content)| 3 + self.tokenizer.count(self.list, role) + self.tokenizer.count(self.list, content))
            .sum::<u64>()
    }
}

/// Appends `json.dumps(s)` for a Python string with the default `ensure_ascii=True`: quotes,
/// two-char escapes for `\\ " \b \f \n \r \t`, lowercase `\uXXXX` for everything else outside
/// space..tilde (a surrogate pair above the BMP).
fn dumps_str(s: &str, out: &mut String) {
    use std::fmt::Write;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            ' '..='~' => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// `json.dumps({"role": role, "content": content})` (aider builds its dicts role first).
fn dumps_message(role: &str, content: &str) -> String {
    let mut out = String::with_capacity(role.len() + content.len() + 32);
    out.push_str("{\"role\": ");
    dumps_str(role, &mut out);
    out.push_str(", \"content\": ");
    dumps_str(content, &mut out);
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_dumps_matches_python() {
        // Python: json.dumps({"role": "user", "content": ""}) == '{"role": "user", "content": ""}'.
        assert_eq!(dumps_message("user", ""), r#"{"role": "user", "content": ""}"#);
        // json.dumps('a"\n\x01é😀\x7f') == '"a\\"\\n\\u0001\\u00e9\\ud83d\\ude00\\u007f"'.
        let mut s = String::new();
        dumps_str("a\"\n\u{1}é😀\u{7f}\\\t", &mut s);
        assert_eq!(s, r#""a\"\n\u0001\u00e9\ud83d\ude00\u007f\\\t""#);
    }

    #[test]
    fn counts_match_aider_on_the_scenario_models() {
        // Measured with aider-chat 0.86.2 (litellm 1.81.10, tiktoken 0.12.0):
        // Model("gpt-4.1").token_count({"role": "user", "content": "hello world"}) == 13
        // Model("gpt-4.1").token_count([{"role": "user", "content": "Καλημέρα κόσμε"}]) == 13
        // Model("claude-sonnet-4").token_count([{"role": "user", "content": "Καλημέρα κόσμε"}]) == 21
        let t = compactbench_testkit::tokenizer();
        assert_eq!(Counter::new(t, "gpt-4.1").message("user", "hello world"), 13);
        assert_eq!(Counter::new(t, "gpt-4.1").list([("user", "Καλημέρα κόσμε")]), 13);
        assert_eq!(Counter::new(t, "claude-sonnet-4").list([("user", "Καλημέρα κόσμε")]), 21);
        assert_eq!(list_encoding("gpt-5"), Encoding::O200kBase);
        assert_eq!(list_encoding("4o"), Encoding::O200kBase);
        assert_eq!(list_encoding("gpt-5.1"), Encoding::Cl100kBase);
        assert_eq!(list_encoding("gemini-2.5-pro"), Encoding::Cl100kBase);
    }
}
