//! The SDK's token count, with the injected exact tokenizer in the encoding LiteLLM picks.
//!
//! `get_total_token_count(events, llm)` (`openhands/sdk/context/condenser/utils.py`) turns the
//! events into messages (`LLMConvertibleEvent.events_to_messages`: one message per action
//! batch, adjacent plain user messages merged into one), formats them
//! (`LLM.format_messages_for_llm` -> `Message.to_chat_dict`) and counts them with
//! `LLM.get_token_count` -> `litellm.token_counter(model=llm.model, messages=…)` (LiteLLM
//! 1.105.7, `litellm_core_utils/token_counter.py`; no tools: the log has no schemas; no
//! custom tokenizer, so no chat template). `_count_messages` + `_count_extra` give:
//! - 3 for the reply, once per count;
//! - per message 3, plus the tokens of every string value: `role`, the text of every
//!   `content` block (a list for every model with native tool calling), `tool_call_id`,
//!   `name` (plus 1), and the `arguments` of every tool call (not its name or id). Thinking
//!   blocks and cache markers are not counted (keys LiteLLM skips).
//!
//! Texts are counted in 1024-code-point chunks (`TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS`), and a
//! text over 4 000 000 code points from 16 evenly spaced samples
//! (`TOKEN_COUNTER_MAX_EXACT_CHARS`). The encoding (`openai_tokenizer_encoding_name`):
//! `o200k_base` for the names of LiteLLM's OpenAI chat catalog that tiktoken 0.14.0 maps to
//! it (and any name containing `gpt-4o`), `cl100k_base` for every other name (outside the
//! catalog a name becomes `gpt-3.5-turbo`): `claude-sonnet-4` and `gemini-2.5-pro` count
//! with `cl100k_base`. LiteLLM gives a Hugging Face tokenizer to Anthropic catalog names
//! other than `claude-3*` (`claude-sonnet-4-5`, `claude-opus-4-5`, …), cohere `command-r`
//! and llama names; those are not reproducible here and are counted with `cl100k_base`.
//!
//! Formatting that changes the count: a failed tool's output is preceded by its own text
//! block `[An error occurred during execution.]\n`; tool text over 50 000 code points is
//! middle-truncated with the SDK's notice (`maybe_truncate`); whitespace-only text blocks of
//! a tool-call message are dropped. Not reproduced: the models the SDK string-serializes
//! (`FORCE_STRING_SERIALIZER_MODELS`: `glm`, `deepseek-v3.2`, …) send each message's texts
//! joined by newlines as one string; here they are counted as separate blocks like every
//! other model's.

use compactbench_core::{Encoding, Log, Part, Role, Tokenizer};

use crate::event::{self, Event, Kind};
use crate::truncate;

/// `TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS`.
const CHUNK: usize = 1024;
/// `TOKEN_COUNTER_MAX_EXACT_CHARS`.
const MAX_EXACT: usize = 4_000_000;
/// `EXTRAPOLATION_SAMPLES`.
const SAMPLES: usize = 16;
/// `DEFAULT_TEXT_CONTENT_LIMIT`: tool text longer than this is truncated before counting.
pub(crate) const TOOL_TEXT_LIMIT: usize = 50_000;
/// `DEFAULT_TRUNCATE_NOTICE`, verbatim: its text and length are part of what is counted.
pub(crate) const TRUNCATE_NOTICE: &str =
    "<response clipped><NOTE>Due to the max output limit, only part of the full response has been shown to you.</NOTE>";
/// `Observation.ERROR_MESSAGE_HEADER`.
pub(crate) const ERROR_HEADER: &str = "[An error occurred during execution.]\n";

/// Names in LiteLLM 1.105.7's OpenAI chat and Azure catalogs whose encoding is `o200k_base`
/// (tiktoken 0.14.0); every other name counts with `cl100k_base`.
const O200K_MODELS: &[&str] = &[
    "gpt-4.1", "gpt-4.1-2025-04-14", "gpt-4.1-mini", "gpt-4.1-mini-2025-04-14", "gpt-4.1-nano",
    "gpt-4.1-nano-2025-04-14", "gpt-5", "gpt-5-2025-08-07", "gpt-5-chat", "gpt-5-chat-latest", "gpt-5-codex",
    "gpt-5-mini", "gpt-5-mini-2025-08-07", "gpt-5-nano", "gpt-5-nano-2025-08-07", "gpt-5-pro",
    "gpt-5-pro-2025-10-06", "gpt-5-search-api", "gpt-5-search-api-2025-10-14", "gpt-5.1", "gpt-5.1-2025-11-13",
    "gpt-5.1-chat-latest", "gpt-5.1-codex", "gpt-5.1-codex-max", "gpt-5.1-codex-mini", "gpt-5.2",
    "gpt-5.2-2025-12-11", "gpt-5.2-chat-latest", "gpt-5.2-codex", "gpt-5.2-pro", "gpt-5.2-pro-2025-12-11",
    "gpt-5.3-chat-latest", "gpt-5.3-codex", "gpt-5.4", "gpt-5.4-2026-03-05", "gpt-5.4-mini",
    "gpt-5.4-mini-2026-03-17", "gpt-5.4-nano", "gpt-5.4-nano-2026-03-17", "gpt-5.4-pro", "gpt-5.4-pro-2026-03-05",
    "gpt-5.5", "gpt-5.5-2026-04-23", "gpt-5.5-cyber", "gpt-5.5-cyber-preview", "gpt-5.5-pro",
    "gpt-5.5-pro-2026-04-23", "gpt-5.6", "gpt-5.6-cyber", "gpt-5.6-luna", "gpt-5.6-sol", "gpt-5.6-terra", "o1",
    "o1-2024-12-17", "o1-pro", "o1-pro-2025-03-19", "o3", "o3-2025-04-16", "o3-deep-research",
    "o3-deep-research-2025-06-26", "o3-mini", "o3-mini-2025-01-31", "o3-pro", "o3-pro-2025-06-10", "o4-mini",
    "o4-mini-2025-04-16", "o4-mini-deep-research", "o4-mini-deep-research-2025-06-26",
];

/// The names of LiteLLM's OpenAI chat catalog that contain `gpt-4o` (all `o200k_base`).
const GPT_4O_MODELS: &[&str] = &[
    "gpt-4o", "gpt-4o-2024-05-13", "gpt-4o-2024-08-06", "gpt-4o-2024-11-20", "gpt-4o-audio-preview-2024-12-17",
    "gpt-4o-audio-preview-2025-06-03", "gpt-4o-mini", "gpt-4o-mini-2024-07-18",
    "gpt-4o-mini-audio-preview-2024-12-17", "gpt-4o-mini-realtime-preview-2024-12-17",
    "gpt-4o-mini-search-preview", "gpt-4o-mini-search-preview-2025-03-11", "gpt-4o-mini-transcribe",
    "gpt-4o-mini-transcribe-2025-03-20", "gpt-4o-mini-transcribe-2025-12-15", "gpt-4o-mini-tts",
    "gpt-4o-mini-tts-2025-03-20", "gpt-4o-mini-tts-2025-12-15", "gpt-4o-search-preview",
    "gpt-4o-search-preview-2025-03-11", "gpt-4o-transcribe", "gpt-4o-transcribe-diarize",
];

/// The encoding LiteLLM counts `model` with.
pub(crate) fn encoding(model: &str) -> Encoding {
    if O200K_MODELS.contains(&model) || GPT_4O_MODELS.contains(&model) {
        Encoding::O200kBase
    } else {
        Encoding::Cl100kBase
    }
}

/// `get_total_token_count` for one agent model, through the injected tokenizer.
#[derive(Clone, Copy)]
pub(crate) struct Counter<'a> {
    tokenizer: &'a dyn Tokenizer,
    encoding: Encoding,
}

impl<'a> Counter<'a> {
    /// The counter of the agent model named `model`.
    pub(crate) fn new(tokenizer: &'a dyn Tokenizer, model: &str) -> Counter<'a> {
        Counter { tokenizer, encoding: encoding(model) }
    }

    /// LiteLLM's count function for one string: 1024-code-point chunks, extrapolated from
    /// samples past 4 000 000 code points.
    pub(crate) fn text(&self, text: &str) -> u64 {
        // A text of at most MAX_EXACT bytes has at most that many code points: skip the count.
        if text.len() <= MAX_EXACT {
            return self.exact(text);
        }
        let n = text.chars().count();
        if n <= MAX_EXACT {
            return self.exact(text);
        }
        // `_evenly_spaced_samples(text, MAX_EXACT)`.
        let chars: Vec<char> = text.chars().collect();
        let sample = MAX_EXACT / SAMPLES;
        let last_start = n - sample;
        let mut counted = 0u64;
        for i in 0..SAMPLES {
            let start = last_start * i / (SAMPLES - 1);
            counted += self.exact(&chars[start..start + sample].iter().collect::<String>());
        }
        // Python `round` of `counted * n / (SAMPLES * sample)`: half to even.
        let x = counted as f64 * n as f64 / (SAMPLES * sample) as f64;
        let r = x.round();
        if x - x.floor() == 0.5 && r % 2.0 != 0.0 { (r - 1.0) as u64 } else { r as u64 }
    }

    fn exact(&self, text: &str) -> u64 {
        if text.len() <= CHUNK {
            return self.tokenizer.count(self.encoding, text);
        }
        let mut total = 0;
        let mut start = 0;
        let mut chars = 0;
        for (i, _) in text.char_indices() {
            if chars == CHUNK {
                total += self.tokenizer.count(self.encoding, &text[start..i]);
                start = i;
                chars = 0;
            }
            chars += 1;
        }
        total + self.tokenizer.count(self.encoding, &text[start..])
    }

    /// The content of one message: its text blocks.
    fn content(&self, texts: &[&str]) -> u64 {
        texts.iter().map(|t| self.text(t)).sum()
    }

    fn role(&self, role: &str) -> u64 {
        3 + self.text(role)
    }

    /// What `event` adds to the count of the events before it (`previous` is the event
    /// right before it in the list counted, if any): `get_total_token_count` is this sum
    /// plus 3.
    pub(crate) fn event(&self, log: &Log, previous: Option<&Event>, event: &Event) -> u64 {
        let media: u64 = event::owned_parts(log, event)
            .iter()
            .map(|p| if let Part::Media { tokens, .. } = p { u64::from(*tokens) } else { 0 })
            .sum();
        media
            + match &event.kind {
                Kind::Summary { text, .. } | Kind::Masked { text } => self.user(previous, &[text]),
                Kind::SystemPrompt => self.role("system") + self.content(&event::owned_texts(log, event)),
                Kind::Message(Role::User) => self.user(previous, &event::owned_texts(log, event)),
                Kind::Message(role) => self.role(role.as_str()) + self.content(&event::owned_texts(log, event)),
                Kind::Action { .. } => {
                    let args = event::args_of(log, event).to_string();
                    // The first action of a batch opens the message and carries the thought.
                    let head = !previous.is_some_and(|p| p.is_action() && p.entry == event.entry);
                    if head {
                        // `_remove_content_if_empty`: whitespace-only blocks are dropped.
                        let thought: Vec<&str> =
                            event::owned_texts(log, event).into_iter().filter(|t| !t.trim().is_empty()).collect();
                        self.role("assistant") + self.content(&thought) + self.text(&args)
                    } else {
                        self.text(&args)
                    }
                }
                Kind::Observation { call_id, name } => {
                    let (text, is_error) = event::result_of(log, event);
                    let header = if is_error { self.text(ERROR_HEADER) } else { 0 };
                    let content = header + self.text(&truncate::sdk(text, TOOL_TEXT_LIMIT, TRUNCATE_NOTICE));
                    self.role("tool") + content + self.text(call_id) + self.text(name) + 1
                }
            }
    }

    /// A plain user message: merged into the previous one when that is a plain user message
    /// too (`_can_merge_user_messages`), so only its texts count.
    fn user(&self, previous: Option<&Event>, texts: &[&str]) -> u64 {
        let merged = previous.is_some_and(|p| {
            matches!(p.kind, Kind::Message(Role::User) | Kind::Summary { .. } | Kind::Masked { .. })
        });
        (if merged { 0 } else { self.role("user") }) + self.content(texts)
    }

    /// `get_total_token_count(events)`: 3 plus what each event adds after the one before it.
    pub(crate) fn total(&self, log: &Log, events: &[Event]) -> u64 {
        3 + events.iter().enumerate().map(|(i, e)| self.event(log, i.checked_sub(1).map(|j| &events[j]), e)).sum::<u64>()
    }
}
