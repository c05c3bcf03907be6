//! Variant `cline/sdk`: the compaction of today's Cline, the `prepareTurn` hook of the published
//! `@cline/core` 0.0.86 (npm; the CLI `cline` 3.0.65 runs it), with its defaults: strategy
//! `agentic`, mode `auto`, `preserveRecentTokens` 20,000. Spec: `shared/specs/cline.md`, part 2
//! (read at cline/cline@21cb8d25, SDK 0.0.78); 0.0.86 adds the provider-count floor below and
//! a summary output cap of 8,192.
//!
//! # Estimator
//! Its own: `max(1, ceil(chars / 3))` of the JSON text of a message (`JSON.stringify`, UTF-16
//! units), and of `{systemPrompt, messages: apiMessages, tools}` for the whole request. The hook
//! gets the transcript twice: `messages`, as the agent runtime stores them (the message estimate
//! and the cut count these), and `apiMessages`, as they are sent (the request estimate and its
//! overhead count these). A stored message is `{id, role, content, ts}`, an assistant message
//! with `modelInfo` and `metrics`, one message per tool result ([`stored_messages`]); the sent
//! ones differ in the typed prompt, which the CLI stores wrapped in `<user_input mode="act">`
//! and sends bare, in the tool results of one reply, which go as one message, and in each
//! result's strings, sent cut in the middle to 8,000 characters ([`api_messages`]). What our log
//! does not hold has the length its format always has (ids of 12 characters, `msg_` and a
//! nanoid, 36 for a prompt's UUID; `ts` 13 digits); `modelInfo` names the model profile and
//! [`SdkConfig::provider_id`]; `metrics` are the reply's usage. Content blocks are `text`,
//! `thinking`, `tool_use` (`id`, `name`, `input`), `tool_result` (`tool_use_id`, `name`,
//! `content`, `is_error` only for an error) and `image`; a tool result whose text is a JSON
//! array is that array (the CLI's tools return arrays of `{query, result, success}`, which the
//! Chat Completions wire sends as their JSON text), any other text a string. A compaction
//! summary is `{role, content, metadata}`. Checked against the CLI 3.0.65's own "Context
//! compaction diagnostics" (`CLINE_LOG_LEVEL=debug`) on its 55 black-box runs: its request,
//! sent-message and stored-message estimates equal ours on all 314 requests up to a compaction.
//!
//! `tools` is the session's tool objects as the runtime hands them over
//! (`createRuntimePrepareTurn` passes its own tool list, each tool's `name`, `description`,
//! `inputSchema`, `timeoutMs`, `retryable`, `maxRetries` and, where set, `executionMode`): their
//! JSON length is a setting, [`SdkConfig::tool_definitions_chars`], by default that of the CLI
//! 3.0.65's 25 tools in its default (act) mode.
//!
//! # Trigger (before every model request)
//! `maxInput` is the model's `maxInputTokens` (at most its window) where its model info has one,
//! else `0.9 × window`. The CLI 3.0.65 always gives one: a model configured in its provider
//! settings gets `maxInputTokens = contextWindow` (its catalog models list theirs, mostly the
//! window), so by default `maxInput = window` ([`SdkConfig::max_input_is_window`]). It is scaled
//! down by
//! `min(4, max(1, previous / estimate))` where `previous` is the provider's input count of the
//! previous request of the same run (0 at a run's first request); `trigger = 0.9 × maxInput`;
//! compact iff the request estimate `>= trigger`.
//!
//! # Selection and summary
//! Message target: `0.5 × maxInput` when the transcript has at least 5 user→assistant pairs
//! and the model info's output cap (`maxTokens`) is below `maxInput`, else `0.7 × trigger`
//! (clamped below the trigger), minus the request's overhead (system prompt, tool definitions and
//! framing). A model of the CLI's catalog has `maxTokens` in its info; one configured in the
//! provider settings has none there (its `maxTokens` caps the request only), so it always gets
//! `0.7 × trigger` ([`SdkConfig::max_tokens_in_model_info`]). `preserve =
//! min(20,000, target)`. From the newest message back, messages are kept until their estimates
//! reach `preserve`; the cut moves back to the latest typed user prompt if that is earlier, then
//! back to an assistant message or a typed prompt (never a tool-result message). A cut at 0
//! compacts nothing. Everything before the cut is summarized in a fresh call (its own system
//! prompt, the transcript as `[User]:` / `[Bot]:` / `[Tool result]:` lines); a previous summary
//! before the cut is passed as "Previous summary" and only the messages after it are
//! serialized. The new view is a user message `Context summary:` + summary (a `## Files` list
//! appended when the model wrote none) followed by the kept messages verbatim.
//! Manual `/compact` always compacts, with a target of half the messages' estimate (at most
//! the trigger's message budget); text typed after the command is not used.
//!
//! # Deviations
//! - Message ids and timestamps are placeholders of their formats' fixed lengths; `metrics`
//!   has no `cost` (the CLI writes one only for a priced model) and `cacheWriteTokens` 0 (our
//!   usage has no cache writes); a typed prompt is wrapped as in the CLI's default act mode.
//!   `modelInfo` has no `family` (the CLI writes one only for a catalog provider that has one).
//! - Of `buildForApi`'s other rewrites of the sent messages, none is reproduced: an older read
//!   of a file read again replaced by a note (only once 64 KiB would be reclaimed), assistant
//!   text cut at 200,000 characters, images over the media budget, and the 6 MB cap on the
//!   request's text. A cut never splits a surrogate pair (the CLI's may).
//! - Tool definitions are not in our log: the request estimate counts a tool list of the JSON
//!   length [`SdkConfig::tool_definitions_chars`] (the CLI's by default), whatever the tools
//!   the log calls.
//! - Overflow recovery (the deterministic `basic` fold) and the fallback to it when the
//!   summarizer fails are not reproduced: [`Moment::Overflow`] does nothing and a failed
//!   summary is an error (no compaction).
//! - The summarizer input's budget projection (truncating what exceeds the summarizer's own
//!   limit) is not reproduced; the transcript's tool results are cut at 2,000 characters as
//!   the SDK's serializer cuts them.
//! - `userRunSpan` of the summary metadata counts the typed prompts (and earlier spans) of the
//!   summarized part; the SDK's filters of synthetic prompts are not reproduced. Prompts are
//!   paraphrased.

use compactbench_core::{Checkpoint, CheckpointKind, Cx, Decision, Entry, EntryId, Error, ErrorKind, Fidelity, Log, Message, Moment, Origin, Part, Plan, Replay, Reprojected, Role, Strategy, StrategyInfo, ViewState, SummarizerUsage, SummaryContext, SummaryPosition, SummaryRequest, View, Window, default_projection};
use serde_json::{json, Value};

/// `CONTEXT_WINDOW_INPUT_RATIO`: the usable input share of a window.
const CONTEXT_WINDOW_INPUT_RATIO: f64 = 0.9;
/// `COMPACTION_TRIGGER_RATIO`.
const TRIGGER_RATIO: f64 = 0.9;
/// `MAX_INPUT_UNDERESTIMATE_FACTOR`.
const MAX_UNDERESTIMATE_FACTOR: f64 = 4.0;
/// `DEFAULT_TARGET_RATIO`.
const TARGET_RATIO: f64 = 0.7;
/// The long-conversation target: this share of `maxInput`.
const LONG_TARGET_RATIO: f64 = 0.5;
/// `DEFAULT_SUMMARY_MAX_OUTPUT_TOKENS`.
const SUMMARY_MAX_OUTPUT_TOKENS: u64 = 8_192;
/// `TOOL_RESULT_CHAR_LIMIT` of the summarizer's transcript.
const TOOL_RESULT_CHAR_LIMIT: usize = 2_000;
/// A fixed `generatedAt` (milliseconds; Cline writes `Date.now()`, thirteen digits as here).
const GENERATED_AT: u64 = 1_700_000_000_000;
/// `JSON.stringify(tools).length` of the tools the CLI `cline` 3.0.65 hands the hook in its
/// default (act) mode: `read_files`, `search_codebase`, `run_commands`, `fetch_web_content`,
/// `editor`, `ask_question`, `spawn_agent` and 18 `team_*` tools (17,251 characters as Chat
/// Completions `tools`, the same on every request). Measured from the CLI's own "Context
/// compaction diagnostics" (`CLINE_LOG_LEVEL=debug`): four requests of one run give
/// `requestInputTokens` and `apiMessagesJsonChars`, and with the system prompt as sent only this
/// length yields all four estimates.
pub const CLI_TOOL_DEFINITIONS_CHARS: usize = 17_767;

/// Settings of the SDK's compaction, with its defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct SdkConfig {
    /// `compaction.preserveRecentTokens` (20,000).
    pub preserve_recent_tokens: u64,
    /// `manualTargetRatio` of `/compact` (0.5, clamped to 0.05..0.95).
    pub manual_target_ratio: f64,
    /// `JSON.stringify(tools).length` of the tool definitions every request carries, which the
    /// request estimate counts ([`CLI_TOOL_DEFINITIONS_CHARS`]; 2, `[]`, for none).
    pub tool_definitions_chars: usize,
    /// The CLI's provider id, which each stored assistant message names in its `modelInfo`
    /// (`openai-compatible`, the provider of any OpenAI-compatible endpoint; the model id is
    /// the model profile's name).
    pub provider_id: String,
    /// The model info's `maxInputTokens` is the window (true, as the CLI 3.0.65 fills it from
    /// the provider settings' `contextWindow`); false: the model reports none and the SDK takes
    /// `CONTEXT_WINDOW_INPUT_RATIO` of the window.
    pub max_input_is_window: bool,
    /// The model info has the model's output cap as `maxTokens` (true, a model of the CLI's
    /// catalog); false: a model configured in the CLI's provider settings, whose `maxTokens`
    /// the CLI sends with each request but leaves out of the model info the hook sees (measured:
    /// the CLI 3.0.65's own compaction telemetry matches the hook only without it).
    pub max_tokens_in_model_info: bool,
}

impl Default for SdkConfig {
    fn default() -> SdkConfig {
        SdkConfig { preserve_recent_tokens: 20_000, manual_target_ratio: 0.5, tool_definitions_chars: CLI_TOOL_DEFINITIONS_CHARS, provider_id: "openai-compatible".into(), max_input_is_window: true, max_tokens_in_model_info: true }
    }
}

/// `@cline/core` 0.0.86's agentic compaction.
pub struct SdkStrategy {
    info: StrategyInfo,
    config: SdkConfig,
}

impl SdkStrategy {
    /// The strategy with `config`.
    pub fn new(config: SdkConfig) -> SdkStrategy {
        SdkStrategy {
            info: StrategyInfo {
                id: "cline/sdk".into(),
                harness: "cline".into(),
                source: "npm @cline/core 0.0.86 (cline/cline sdk/packages/core)".into(),
                summary: "request estimate (JSON chars / 3, tool definitions included) >= 90% of the window: summarize all but the newest ~20k estimated tokens, cut at an assistant message or typed prompt".into(),
                fidelity: Fidelity::Source,
            },
            config,
        }
    }
}

/// `estimateTokens`: `max(1, ceil(chars / 3))`.
fn estimate(chars: usize) -> u64 {
    (chars as u64).div_ceil(3).max(1)
}

/// Length of `JSON.stringify(value)` in UTF-16 units (serde_json escapes as JavaScript does;
/// key order does not change the length).
fn json_len(value: &Value) -> usize {
    value.to_string().encode_utf16().count()
}

/// A content block of a message, as the SDK's runtime hands it to the hook.
fn block_json(p: &Part) -> Value {
    match p {
        Part::Text { text } => json!({ "type": "text", "text": text }),
        Part::Reasoning { text } => json!({ "type": "thinking", "thinking": text }),
        Part::ToolCall { id, name, args } => json!({ "type": "tool_use", "id": id, "name": name, "input": args }),
        Part::ToolResult { call_id, name, text, is_error } => {
            json!({ "type": "tool_result", "tool_use_id": call_id, "name": name, "content": text, "is_error": is_error })
        }
        Part::Media { mime, .. } => json!({ "type": "image", "data": "", "mediaType": mime }),
    }
}

/// A message's role and content blocks, as the SDK's strategy reads them.
fn message_json(m: &Message) -> Value {
    let content: Vec<Value> = m.parts.iter().map(block_json).collect();
    let role = if m.role == Role::Assistant { "assistant" } else { "user" };
    json!({ "role": role, "content": content })
}

/// The `id` of a message the agent runtime creates (`createMessage` of `@cline/agents` 0.0.86:
/// `msg_` and an 8-character nanoid, always 12 characters); ours is a placeholder of that length.
const MESSAGE_ID: &str = "msg_00000000";
/// The `id` of a typed prompt (`SessionRuntime.executeRunInternal` of `@cline/core` 0.0.86:
/// `crypto.randomUUID()`, always 36 characters).
const PROMPT_ID: &str = "00000000-0000-4000-8000-000000000000";
/// The `ts` of a stored message (`Date.now()`: thirteen digits until the year 2286).
const STORED_AT: u64 = GENERATED_AT;
/// The CLI's wrapping of a typed prompt (`formatUserInputBlock` of `@cline/shared` 0.0.86 in
/// its default act mode), which the stored message keeps and `apiMessages` strip
/// (`normalizeUserInput`).
const PROMPT_OPEN: &str = "<user_input mode=\"act\">";
const PROMPT_CLOSE: &str = "</user_input>";

/// Which of the hook's two transcripts a message is laid out for.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    /// `messages`: as the runtime stores them (the message estimate, the cut).
    Stored,
    /// `apiMessages`: as `MessageBuilder.buildForApi` sends them (the request estimate).
    Api,
}

/// A tool result's `content` as the runtime keeps it (`toSdkContent`'s `normalizeToolOutput`
/// in `@cline/core` 0.0.86): a tool's array output stays an array, which the Chat Completions
/// wire sends as its JSON text (the CLI's `read_files` and `run_commands` return arrays of
/// `{query, result, success}`), so a text that is a JSON array is that array; any other text
/// is the string.
fn tool_result_content(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(array @ Value::Array(_)) => array,
        _ => Value::String(text.to_owned()),
    }
}

/// `maxToolResultChars` of the CLI's `MessageBuilder` (`@cline/core` 0.0.86; 8,000 unless
/// `CLINE_MESSAGE_BUILDER_MAX_TOOL_RESULT_CHARS` says otherwise).
const MAX_TOOL_RESULT_CHARS: usize = 8_000;

/// `truncateMiddle` of the CLI's `MessageBuilder` (`@cline/core` 0.0.86, its `truncateToLength`):
/// a text over `limit` UTF-16 units keeps as much of its head and tail as fits around a note of
/// how many units it left out, the whole at most `limit` long. (A surrogate pair the CLI would
/// cut in two is left out whole.)
fn truncate_middle(text: &str, limit: usize) -> String {
    let units = text.encode_utf16().count();
    if units <= limit {
        return text.to_owned();
    }
    let note = |left_out: usize| format!("\n\n...[truncated {left_out} chars]...\n\n");
    let first_guess = limit.saturating_sub(note(units - limit).len()) / 2;
    let note = note(units.saturating_sub(first_guess * 2));
    let keep = limit.saturating_sub(note.len()) / 2;
    let (mut head, mut head_units) = (0, 0);
    for c in text.chars() {
        if head_units + c.len_utf16() > keep {
            break;
        }
        head_units += c.len_utf16();
        head += c.len_utf8();
    }
    let (mut tail, mut tail_units) = (text.len(), 0);
    for c in text.chars().rev() {
        if keep == 0 || tail_units + c.len_utf16() > keep {
            break;
        }
        tail_units += c.len_utf16();
        tail -= c.len_utf8();
    }
    format!("{}{note}{}", &text[..head], &text[tail..])
}

/// `truncateNestedStrings`: every string in `value` cut by [`truncate_middle`], images apart.
fn truncate_nested(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(truncate_middle(s, MAX_TOOL_RESULT_CHARS)),
        Value::Array(items) => Value::Array(items.iter().map(truncate_nested).collect()),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("image") => value.clone(),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), truncate_nested(v))).collect()),
        _ => value.clone(),
    }
}

/// A tool result's content as `apiMessages` send it (`truncateToolResultContent`): a string cut
/// to [`MAX_TOOL_RESULT_CHARS`]; in an array, a `text` block's text, a `file` block's content
/// and every string of any other object but an image.
fn truncate_tool_result(content: Value) -> Value {
    match content {
        Value::String(s) => Value::String(truncate_middle(&s, MAX_TOOL_RESULT_CHARS)),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|mut item| {
                    let key = match item["type"].as_str() {
                        Some("text") => "text",
                        Some("file") => "content",
                        Some("image") => return item,
                        _ if item.is_object() => return truncate_nested(&item),
                        _ => return item,
                    };
                    if let Some(s) = item[key].as_str() {
                        item[key] = Value::String(truncate_middle(s, MAX_TOOL_RESULT_CHARS));
                    }
                    item
                })
                .collect(),
        ),
        other => other,
    }
}

/// A content block as the runtime keeps it (`toSdkContent` of `@cline/core` 0.0.86).
fn runtime_block(p: &Part, form: Form, prompt: bool) -> Value {
    match p {
        Part::Text { text } if prompt && form == Form::Stored => json!({ "type": "text", "text": format!("{PROMPT_OPEN}{text}{PROMPT_CLOSE}") }),
        Part::ToolResult { call_id, name, text, is_error } => {
            let content = match form {
                Form::Stored => tool_result_content(text),
                Form::Api => truncate_tool_result(tool_result_content(text)),
            };
            let mut block = json!({ "type": "tool_result", "tool_use_id": call_id, "name": name, "content": content });
            if *is_error {
                block["is_error"] = Value::Bool(true);
            }
            block
        }
        _ => block_json(p),
    }
}

/// A log message as the CLI 3.0.65's runtime hands it to the `prepareTurn` hook (`toHookMessage`
/// of `@cline/core` 0.0.86's `createRuntimePrepareTurn`: `{id, role, content, ts, metadata,
/// modelInfo, metrics}`, undefined fields left out by `JSON.stringify`): one message, or one per
/// tool result for a message of tool results (the agent runtime stores each finished tool as its
/// own message). What our log does not hold has the length its format always has: the ids
/// ([`MESSAGE_ID`], [`PROMPT_ID`] for a typed prompt), `ts` (13 digits); an assistant message's
/// `modelInfo` is `{id, provider}` of `model_id` and `provider_id`, and its `metrics`
/// (`{inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens}` of the reply's usage; no
/// `cost` where the model has no pricing) are there when the reply reported any usage. A tool
/// result's `is_error` is written only for an error (the runtime's `isError` is undefined for a
/// tool that returned); a typed prompt's first text is wrapped as the CLI wraps it.
fn runtime_messages(m: &Message, model_id: &str, provider_id: &str, form: Form) -> Vec<Value> {
    let message = |content: Vec<Value>, id: &str| json!({ "id": id, "role": if m.role == Role::Assistant { "assistant" } else { "user" }, "content": content, "ts": STORED_AT });
    match m.role {
        // `MessageBuilder.addMissingToolResults` merges consecutive tool-result messages into
        // the first for `apiMessages`.
        Role::Tool if form == Form::Api => vec![message(m.parts.iter().map(|p| runtime_block(p, form, false)).collect(), MESSAGE_ID)],
        // Stored, each finished tool is a message of its own; what else a tool message holds
        // (an image the tool returned) goes with the result before it.
        Role::Tool => {
            let mut groups: Vec<Vec<Value>> = Vec::new();
            for p in &m.parts {
                match groups.last_mut() {
                    Some(group) if !matches!(p, Part::ToolResult { .. }) => group.push(runtime_block(p, form, false)),
                    _ => groups.push(vec![runtime_block(p, form, false)]),
                }
            }
            groups.into_iter().map(|content| message(content, MESSAGE_ID)).collect()
        }
        Role::User => {
            let first_text = m.parts.iter().position(|p| matches!(p, Part::Text { .. }));
            let content = m.parts.iter().enumerate().map(|(i, p)| runtime_block(p, form, Some(i) == first_text)).collect();
            vec![message(content, PROMPT_ID)]
        }
        Role::Assistant | Role::System => {
            let mut json = message(m.parts.iter().map(|p| runtime_block(p, form, false)).collect(), MESSAGE_ID);
            if m.role == Role::Assistant {
                json["modelInfo"] = json!({ "id": model_id, "provider": provider_id });
                if let Some(u) = m.usage.filter(|u| u.total() > 0) {
                    json["metrics"] = json!({ "inputTokens": u.input, "outputTokens": u.output, "cacheReadTokens": u.cache_read, "cacheWriteTokens": u.cache_write });
                }
            }
            vec![json]
        }
    }
}

/// A log message as the runtime stores it and hands it to the hook as `messages`.
pub fn stored_messages(m: &Message, model_id: &str, provider_id: &str) -> Vec<Value> {
    runtime_messages(m, model_id, provider_id, Form::Stored)
}

/// A log message as the hook's `apiMessages` hold it (`MessageBuilder.buildForApi`): as stored,
/// its typed prompt unwrapped, its tool results cut to 8,000 characters a string and in one
/// message (a user message right after tool results joins that message: [`api_transcript`]).
pub fn api_messages(m: &Message, model_id: &str, provider_id: &str) -> Vec<Value> {
    runtime_messages(m, model_id, provider_id, Form::Api)
}

/// The `apiMessages` of a transcript: each message's [`api_messages`], a user message right
/// after a message of tool results only joining it (`shouldMergeUserAfterToolResults`).
pub fn api_transcript<'m>(messages: impl IntoIterator<Item = &'m Message>, model_id: &str, provider_id: &str) -> Vec<Value> {
    let results_only = |m: &Value| m["role"] == "user" && m["content"].as_array().is_some_and(|c| !c.is_empty() && c.iter().all(|b| b["type"] == "tool_result"));
    let mut out: Vec<Value> = Vec::new();
    for m in messages {
        for next in api_messages(m, model_id, provider_id) {
            let blocks = next["content"].as_array().cloned().unwrap_or_default();
            match out.last_mut() {
                Some(last) if results_only(last) && next["role"] == "user" && !blocks.is_empty() => {
                    last["content"].as_array_mut().expect("a results message has content").extend(blocks);
                }
                _ => out.push(next),
            }
        }
    }
    out
}

/// `JSON.stringify` lengths and estimates of a log message's runtime messages.
#[derive(Clone, Copy, Default)]
struct Sizes {
    /// How many runtime messages.
    count: usize,
    chars: usize,
    /// The sum of their estimates (`estimateMessageTokens` each).
    tokens: u64,
}

impl Sizes {
    fn of(messages: &[Value]) -> Sizes {
        let lens = messages.iter().map(json_len);
        Sizes { count: messages.len(), chars: lens.clone().sum(), tokens: lens.map(estimate).sum() }
    }
}

/// One message of the transcript the hook sees, with what the SDK reads off it.
struct Item {
    origin: Origin,
    /// The message's role and content blocks (what the SDK's strategy reads).
    json: Value,
    /// Its runtime messages as stored (`messages`).
    stored: Sizes,
    /// Its runtime messages as sent (`apiMessages`).
    api: Sizes,
    /// `metadata.summary` of a compaction summary.
    summary: Option<String>,
}

impl Item {
    fn is_assistant(&self) -> bool {
        self.json["role"] == "assistant"
    }

    /// `isToolResultOnlyUserMessage`.
    fn tool_results_only(&self) -> bool {
        let blocks = self.json["content"].as_array().map(Vec::as_slice).unwrap_or_default();
        !self.is_assistant() && !blocks.is_empty() && blocks.iter().all(|b| b["type"] == "tool_result")
    }

    /// `isTurnStartMessage`: a user message that is neither tool results nor a summary.
    fn is_typed(&self) -> bool {
        !self.is_assistant() && !self.tool_results_only() && self.summary.is_none()
    }

    /// The stored messages' estimate (`estimateMessageTokens` of `messages`).
    fn tokens(&self) -> u64 {
        self.stored.tokens
    }
}

/// What an assistant message's `modelInfo` names: the model and the CLI's provider.
struct Model<'a> {
    id: &'a str,
    provider: &'a str,
}

/// The request as the hook sees it: the system prompt and the transcript.
#[derive(Default)]
struct Request {
    system: Vec<String>,
    items: Vec<Item>,
    /// How many of the view's messages are in `system` and `items`.
    seen: usize,
    /// `JSON.stringify` length of the last message of `apiMessages` while it holds only tool
    /// results (a user message after it joins it there).
    open_results: Option<usize>,
}

impl Request {
    fn of(log: &Log, view: &View, model: &Model<'_>) -> Request {
        let mut req = Request::default();
        req.extend(log, view, model);
        req
    }

    /// Takes in the messages of `view` after the first `seen` (a view that only grew since).
    fn extend(&mut self, log: &Log, view: &View, model: &Model<'_>) {
        for vm in &view.messages[self.seen..] {
            self.seen += 1;
            if self.items.is_empty() && vm.message.role == Role::System {
                self.system.push(vm.message.text());
                continue;
            }
            let item = match vm.origin {
                // The summary message the SDK writes: `{role, content, metadata}`, no id or time.
                Origin::Summary(cp) => {
                    let metadata = match log.get(cp) {
                        Some(Entry::Checkpoint(c)) => c.details.clone(),
                        _ => Value::Null,
                    };
                    let mut json = message_json(&vm.message);
                    let summary = metadata["summary"].as_str().map(str::to_owned);
                    json["metadata"] = metadata;
                    let sizes = Sizes::of(std::slice::from_ref(&json));
                    Item { origin: vm.origin, json, stored: sizes, api: sizes, summary }
                }
                _ => {
                    let stored = Sizes::of(&stored_messages(&vm.message, model.id, model.provider));
                    let api = self.api_sizes(&vm.message, model);
                    Item { origin: vm.origin, json: message_json(&vm.message), stored, api, summary: None }
                }
            };
            if item.summary.is_some() {
                self.open_results = None;
            }
            self.items.push(item);
        }
    }

    /// The sizes `m` adds to `apiMessages`: its own message, or, after a message of tool results
    /// only, its content blocks appended to that message (`shouldMergeUserAfterToolResults` of
    /// `MessageBuilder.addMissingToolResults`), the merged message's estimate growing by the
    /// difference.
    fn api_sizes(&mut self, m: &Message, model: &Model<'_>) -> Sizes {
        let messages = api_messages(m, model.id, model.provider);
        let blocks: Vec<&Value> = messages.iter().filter_map(|j| j["content"].as_array()).flatten().collect();
        let results_only = !blocks.is_empty() && blocks.iter().all(|b| b["type"] == "tool_result");
        match self.open_results {
            Some(chars) if m.role != Role::Assistant && !blocks.is_empty() => {
                let added: usize = blocks.iter().map(|b| json_len(b) + 1).sum();
                self.open_results = results_only.then_some(chars + added);
                Sizes { count: 0, chars: added, tokens: estimate(chars + added) - estimate(chars) }
            }
            _ => {
                let sizes = Sizes::of(&messages);
                self.open_results = (m.role != Role::Assistant && results_only).then_some(sizes.chars);
                sizes
            }
        }
    }

    /// `estimateRequestInputTokens` with tool definitions of `tools` JSON characters: the JSON
    /// of `{systemPrompt, messages: apiMessages, tools}` is its frame with empty lists, plus the tools in
    /// place of `[]`, each message and the commas between them.
    fn tokens(&self, tools: usize) -> u64 {
        let frame = json_len(&json!({ "systemPrompt": self.system.join("\n\n"), "messages": [], "tools": [] }));
        let messages: usize = self.items.iter().map(|i| i.api.chars).sum();
        let count: usize = self.items.iter().map(|i| i.api.count).sum();
        estimate(frame - 2 + tools.max(2) + messages + count.saturating_sub(1))
    }

    /// The stored messages' estimate (`messageInputTokens`).
    fn message_tokens(&self) -> u64 {
        self.items.iter().map(Item::tokens).sum()
    }

    /// The sent messages' estimate (`apiMessageTokens`).
    fn api_message_tokens(&self) -> u64 {
        self.items.iter().map(|i| i.api.tokens).sum()
    }

    /// User→assistant pairs (`countUserAssistantPairs`).
    fn pairs(&self) -> usize {
        let mut pairs = 0;
        let mut user = false;
        for i in &self.items {
            if !i.is_assistant() {
                user = true;
            } else if user {
                pairs += 1;
                user = false;
            }
        }
        pairs
    }
}

/// The provider's input count of the previous request of this run (`lastRequestInputTokens`,
/// reset when a run starts with a typed prompt): the newest reply with usage after the newest
/// user message of the log, else 0. It is the usage event's `inputTokens`, which
/// `@cline/llms` takes from the AI SDK's `inputTokens.total`: cache reads and writes included
/// (its cost formula subtracts both from it).
fn previous_input(log: &Log) -> u64 {
    for (_, m) in log.messages().rev() {
        match m.role {
            Role::User => return 0,
            Role::Assistant => {
                if let Some(u) = m.usage.filter(|u| u.total() > 0) {
                    return u.prompt();
                }
            }
            Role::Tool | Role::System => {}
        }
    }
    0
}

/// What the hook computes before running a strategy.
struct Budget {
    /// The request estimate.
    request: u64,
    /// The messages' estimate.
    messages: u64,
    /// The trigger, on the request estimate.
    trigger: f64,
    /// The message target of `mode`.
    target: u64,
}

fn budget(req: &Request, log: &Log, cx: &Cx<'_>, config: &SdkConfig, manual: bool) -> Budget {
    let request = req.tokens(config.tool_definitions_chars);
    let messages = req.message_tokens();
    // `requestOverheadTokens`: the request's estimate beyond its sent messages' own.
    let overhead = request.saturating_sub(req.api_message_tokens()) as f64;
    // `resolveMaxInputTokens`: `min(maxInputTokens, contextWindow)`, else a share of the window.
    let raw_max = if config.max_input_is_window { cx.model.window as f64 } else { cx.model.window as f64 * CONTEXT_WINDOW_INPUT_RATIO };
    let previous = previous_input(log);
    let factor = if previous > 0 && request > 0 { (previous as f64 / request as f64).clamp(1.0, MAX_UNDERESTIMATE_FACTOR) } else { 1.0 };
    let max_input = raw_max / factor;
    let trigger = max_input * TRIGGER_RATIO;
    let message_trigger = (trigger - overhead).floor().max(1.0);
    let target = match manual.then_some(config.manual_target_ratio) {
        None => {
            let max_tokens = cx.model.max_output as f64;
            let wanted =
                if req.pairs() >= 5 && config.max_tokens_in_model_info && max_tokens < max_input { (max_input * LONG_TARGET_RATIO).floor() } else { (trigger * TARGET_RATIO).floor() };
            let request_target = wanted.min(max_input).min((trigger - 1.0).max(1.0)).max(1.0);
            (request_target - overhead).floor().max(1.0)
        }
        Some(ratio) => (message_trigger.min(messages as f64 * ratio.clamp(0.05, 0.95))).floor().max(1.0),
    };
    Budget { request, messages, trigger, target: target as u64 }
}

/// `findCutIndex`: the first kept index (0: nothing to summarize).
fn cut_index(items: &[Item], preserve: u64) -> usize {
    let mut kept = 0;
    let mut cut = items.len();
    for (i, item) in items.iter().enumerate().rev() {
        kept += item.tokens();
        cut = i;
        if kept >= preserve {
            break;
        }
    }
    if cut == 0 {
        return 0;
    }
    let typed = items.iter().rposition(Item::is_typed).unwrap_or(0);
    let mut cut = if typed > 0 { cut.min(typed) } else { cut };
    while cut > 0 && !(items[cut].is_assistant() || items[cut].is_typed()) {
        cut -= 1;
    }
    cut
}

/// `collectPaths` of a tool call's input.
fn collect_paths(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) if !s.trim().is_empty() => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| collect_paths(v, out)),
        Value::Object(o) => {
            for key in ["path", "file_path", "target_file", "new_file_path", "old_file_path"] {
                if let Some(v) = o.get(key) {
                    collect_paths(v, out);
                }
            }
            if let Some(Value::Array(files)) = o.get("files") {
                for f in files.iter().filter(|f| f.is_object()) {
                    collect_paths(&f["path"], out);
                }
            }
            if let Some(v @ Value::Array(_)) = o.get("file_paths") {
                collect_paths(v, out);
            }
        }
        _ => {}
    }
}

/// `extractFileOps`: files read (`read_files`) and modified (`editor`, `apply_patch`), with
/// the lists of earlier summaries; sorted, unique.
fn file_ops(items: &[Item]) -> (Vec<String>, Vec<String>) {
    let (mut read, mut modified) = (Vec::new(), Vec::new());
    for item in items {
        if item.summary.is_some() {
            let details = &item.json["metadata"]["details"];
            collect_strings(&details["readFiles"], &mut read);
            collect_strings(&details["modifiedFiles"], &mut modified);
            continue;
        }
        for block in item.json["content"].as_array().map(Vec::as_slice).unwrap_or_default() {
            if block["type"] != "tool_use" {
                continue;
            }
            match block["name"].as_str() {
                Some("read_files") => collect_paths(&block["input"], &mut read),
                Some("editor" | "apply_patch") => collect_paths(&block["input"], &mut modified),
                _ => {}
            }
        }
    }
    let tidy = |v: Vec<String>| {
        let mut v: Vec<String> = v.into_iter().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
        v.sort();
        v.dedup();
        v
    };
    (tidy(read), tidy(modified))
}

fn collect_strings(value: &Value, out: &mut Vec<String>) {
    out.extend(value.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_owned));
}

/// `userRunSpan` of a summarized part: its typed prompts plus the spans of earlier summaries.
fn user_run_span(items: &[Item]) -> u64 {
    items
        .iter()
        .map(|i| match &i.summary {
            Some(_) => i.json["metadata"]["userRunSpan"].as_u64().unwrap_or(1),
            None => u64::from(i.is_typed() && !i.json["content"].as_array().is_none_or(Vec::is_empty)),
        })
        .sum()
}

fn bullets(files: &[String]) -> String {
    if files.is_empty() {
        "- none".into()
    } else {
        files.iter().map(|f| format!("- {f}")).collect::<Vec<_>>().join("\n")
    }
}

/// `ensureFilesSection`: the summary, with a `## Files` section appended unless it has one.
fn with_files(summary: &str, read: &[String], modified: &[String]) -> String {
    let summary = summary.trim();
    if summary.lines().any(|l| l.eq_ignore_ascii_case("## files")) {
        return summary.to_owned();
    }
    format!("{summary}\n\n## Files\nRead:\n{}\nModified:\n{}", bullets(read), bullets(modified)).trim().to_owned()
}

fn cut_text(text: &str, limit: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= limit {
        return text.to_owned();
    }
    format!("{}\n...[truncated {} chars]", chars[..limit].iter().collect::<String>(), chars.len() - limit)
}

/// The transcript lines of the summarizer's input (`serializeConversation`).
fn transcript(items: &[Item]) -> String {
    let mut out = Vec::new();
    for item in items {
        let assistant = item.is_assistant();
        let mut calls = Vec::new();
        for block in item.json["content"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let text = |key: &str| block[key].as_str().unwrap_or_default().to_owned();
            match block["type"].as_str() {
                Some("text") if assistant => out.push(format!("[Bot]: {}", text("text"))),
                Some("text") => out.push(format!("[User]: {}", text("text"))),
                Some("thinking") => out.push(format!("[Bot thinking]: {}", cut_text(&text("thinking"), TOOL_RESULT_CHAR_LIMIT))),
                Some("tool_use") => {
                    let args: Vec<String> = block["input"]
                        .as_object()
                        .map(|o| o.iter().map(|(k, v)| format!("{k}={v}")).collect())
                        .unwrap_or_default();
                    calls.push(format!("{}({})", text("name"), args.join(", ")));
                }
                Some("tool_result") => out.push(format!("[Tool result]: {}", cut_text(&text("content"), TOOL_RESULT_CHAR_LIMIT))),
                Some("image") => out.push(format!("[image:{}]", text("mediaType"))),
                _ => {}
            }
        }
        if !calls.is_empty() {
            out.push(format!("[Bot tool calls]: {}", calls.join("; ")));
        }
    }
    out.join("\n\n").trim().to_owned()
}

/// The summary instructions (`buildSummaryRequest`, paraphrased), with the files filled in.
fn instructions(read: &[String], modified: &[String]) -> String {
    let list = |v: &[String]| if v.is_empty() { "none".to_owned() } else { v.join(", ") };
    format!(
        "Summarize the session above so the work can continue; stay short and factual.\n\n## Goal\nOne sentence on what is being built or fixed.\n\n## State\n- Done: steps completed\n- In Progress: the current work\n- Blocked: blockers or open questions\n\n## Highlights\nNotable technical choices or findings (leave out if none).\n\n## Next\nThe next steps.\n\n## Files\nRead: {}\nEdited: {}",
        list(read),
        list(modified)
    )
}

impl SdkStrategy {
    /// The model the stored assistant messages name.
    fn model<'a>(&'a self, cx: &'a Cx<'_>) -> Model<'a> {
        Model { id: &cx.model.name, provider: &self.config.provider_id }
    }

    /// The hook's decision before a model request.
    fn decide_on(&self, req: &Request, log: &Log, at: Moment, cx: &Cx<'_>) -> Decision {
        match at {
            Moment::BeforeRequest => {
                let b = budget(req, log, cx, &self.config, false);
                if b.request as f64 >= b.trigger {
                    Decision::compact(format!("request estimate {} >= trigger {:.0}", b.request, b.trigger))
                } else {
                    Decision::Skip
                }
            }
            Moment::Manual => Decision::compact("manual /compact"),
            Moment::TurnEnd | Moment::Overflow => Decision::Skip,
        }
    }

    fn compact_on(&self, req: &Request, log: &Log, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        match at {
            Moment::BeforeRequest => self.run(req, log, false, cx),
            Moment::Manual => self.run(req, log, true, cx),
            Moment::TurnEnd | Moment::Overflow => Ok(Vec::new()),
        }
    }

    fn run(&self, req: &Request, log: &Log, manual: bool, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let b = budget(req, log, cx, &self.config, manual);
        if !manual && (b.request as f64) < b.trigger {
            return Ok(Vec::new());
        }
        let items = &req.items;
        if items.len() < 2 {
            return Ok(Vec::new());
        }
        let cut = cut_index(items, self.config.preserve_recent_tokens.min(b.target));
        if cut == 0 || cut >= items.len() {
            return Ok(Vec::new());
        }
        let summarized = &items[..cut];
        let latest_summary = summarized.iter().rposition(|i| i.summary.is_some());
        let fresh = latest_summary.map_or(summarized, |s| &summarized[s + 1..]);
        if fresh.is_empty() {
            return Ok(Vec::new());
        }
        let previous = latest_summary.and_then(|s| summarized[s].summary.clone()).filter(|s| !s.trim().is_empty());
        let (read, modified) = file_ops(summarized);
        let mut text = String::new();
        if let Some(p) = &previous {
            text.push_str(&format!("Previous summary:\n{}\n\n", p.trim()));
        }
        text.push_str(&format!("Conversation:\n{}", transcript(fresh)));
        let request = SummaryRequest {
            purpose: "history".into(),
            // A separate call with its own system prompt and the transcript as one message.
            context: SummaryContext::Fresh,
            system: "Summarize the given coding session as a short note for continuing it, with concrete next steps.".into(),
            transcript: text,
            instructions: instructions(&read, &modified),
            max_output_tokens: SUMMARY_MAX_OUTPUT_TOKENS.min(cx.model.max_output.max(1)),
        };
        let answer = cx.summarizer.summarize(&request)?;
        if answer.text.trim().is_empty() {
            return Err(Error::new(ErrorKind::EmptySummary, "the summarizer returned no summary text"));
        }
        let summary = with_files(&answer.text, &read, &modified);
        let first = items[cut].origin.entry().expect("a cut lands on a log message (an assistant message or a typed prompt)");
        let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::From(first))
            .with_summary(Message::new(Role::User, vec![Part::text(format!("Context summary:\n\n{summary}"))]));
        cp.summary_position = SummaryPosition::AfterSystem;
        cp.tokens_before = b.messages;
        cp.summarizer = SummarizerUsage { calls: 1, failures: 0, input_tokens: answer.input_tokens, output_tokens: answer.output_tokens };
        // The summary message's metadata, as the SDK writes it (its estimate counts it).
        cp.details = json!({
            "kind": "compaction_summary",
            "displayRole": "system",
            "userRunSpan": user_run_span(summarized),
            "summary": summary,
            "details": { "readFiles": read, "modifiedFiles": modified },
            "tokensBefore": b.messages,
            "generatedAt": GENERATED_AT,
        });
        Ok(vec![cp])
    }
}

/// `cline/sdk` with the package's defaults.
pub(crate) fn strategy() -> Box<dyn Strategy> {
    Box::new(SdkStrategy::new(SdkConfig::default()))
}

impl Strategy for SdkStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(SdkReplay { strategy: self, view: Reprojected::new(self), req: Request::default() })
    }

    fn decide(&self, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        self.decide_on(&Request::of(log, view, &self.model(cx)), log, at, cx)
    }

    fn compact(&self, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        self.compact_on(&Request::of(log, view, &self.model(cx)), log, at, cx)
    }

    fn project(&self, log: &Log) -> View {
        default_projection(log)
    }
}

/// The incremental layer: the view, and the request the hook sees with each message's JSON
/// length taken once (the estimate otherwise stringifies the whole transcript at every request).
struct SdkReplay<'s> {
    strategy: &'s SdkStrategy,
    view: Reprojected<'s>,
    /// The request of the view's first `req.seen` messages.
    req: Request,
}

impl SdkReplay<'_> {
    fn request(&mut self, log: &Log, cx: &Cx<'_>) -> &Request {
        let view = self.view.view(log);
        self.req.extend(log, view, &self.strategy.model(cx));
        &self.req
    }
}

impl Replay for SdkReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        self.view.push(log, id);
        // A checkpoint or a system message may lay the view out afresh; a message otherwise
        // only grows it.
        if !matches!(log.get(id), Some(Entry::Message(m)) if m.role != Role::System) {
            self.req = Request::default();
        }
    }

    fn view(&mut self, log: &Log) -> &View {
        self.view.view(log)
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        let strategy = self.strategy;
        let decision = strategy.decide_on(self.request(log, cx), log, at, cx);
        Plan::from_decision(log, at, decision)
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        let strategy = self.strategy;
        strategy.compact_on(self.request(log, &*cx), log, plan.at(), cx)
    }
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Decision, Message, Moment, Role, Usage, Window};
    use compactbench_testkit::{assert_replay_law, json, model, Harness};

    use super::*;

    /// The model info of the tests' stored messages (the testkit's `model()`).
    const MODEL: Model<'static> = Model { id: "test-model", provider: "openai-compatible" };

    fn sdk() -> SdkStrategy {
        SdkStrategy::new(SdkConfig::default())
    }

    /// A prompt, then `rounds` reads of `size` characters, each reply reporting `input` tokens.
    fn rounds(rounds: usize, size: usize, input: u64) -> Vec<Message> {
        let mut out = vec![Message::system("sys"), Message::user("Fix it.")];
        for r in 0..rounds {
            let id = format!("c{r}");
            let mut call = Message::tool_call(&id, "read_files", json!({ "files": [{ "path": format!("src/f{r}.rs") }] }));
            call.usage = Some(Usage { input, output: 10, ..Default::default() });
            out.push(call);
            out.push(Message::tool_result(&id, "read_files", "x".repeat(size), false));
        }
        out
    }

    /// `lastRequestInputTokens` is the AI SDK's `inputTokens.total`, cache reads and writes
    /// included; the stored reply's metrics carry the writes as `cacheWriteTokens`.
    #[test]
    fn the_previous_input_counts_cache_reads_and_writes() {
        let mut messages = rounds(2, 10, 0);
        messages[4].usage = Some(Usage { input: 100, output: 10, cache_read: 2_000, cache_write: 300 });
        let log = Log::from_messages(messages.clone());
        assert_eq!(previous_input(&log), 2_400);
        assert_eq!(stored_messages(&messages[4], "m", "p")[0]["metrics"]["cacheWriteTokens"], 300);
        messages.push(Message::user("next"));
        assert_eq!(previous_input(&Log::from_messages(messages)), 0, "a typed prompt starts a new run");
    }

    #[test]
    fn the_estimator_counts_utf16_units_of_the_json_ceil_thirds() {
        let m = Message::user("é😀\n\"");
        // {"role":"user","content":[{"type":"text","text":"é😀\n\""}]}: é is 1 unit, 😀 2, the
        // escapes 2 each.
        let json = message_json(&m);
        assert_eq!(json_len(&json), r#"{"role":"user","content":[{"type":"text","text":""}]}"#.len() + 1 + 2 + 2 + 2);
        assert_eq!((estimate(0), estimate(3), estimate(4)), (1, 1, 2));
    }

    #[test]
    fn stored_messages_are_as_long_as_the_clis() {
        // Messages the CLI 3.0.65 stored in its black-box runs (`~/.cline/data/sessions/*/
        // *.messages.json`, `JSON.stringify` lengths): a reply with a call, a tool result, a
        // typed prompt.
        let len = |m: &Message| stored_messages(m, "compactbench", "openai-compatible").iter().map(json_len).sum::<usize>();
        let mut reply = Message::tool_call("call_cb0000", "run_commands", json!({ "commands": ["cat .compactbench/0000.out"] }));
        reply.usage = Some(Usage { input: 9173, output: 15, ..Default::default() });
        assert_eq!(len(&reply), 339);
        let output = r#"[{"query":"cat .compactbench/0000.out","result":"No matches found for `parse_query_e5k4` in 148 files.","success":true}]"#;
        let result = Message::tool_result("call_cb0000", "run_commands", output, false);
        assert_eq!(len(&result), 270);
        let prompt = Message::user("Next: write the handling in src/parser.rs so the span path works; run the tests when done.");
        assert_eq!(len(&prompt), 244);
        // Sent, the prompt is bare and the results of one reply are one message.
        let sent = |m: &Message| api_messages(m, "compactbench", "openai-compatible");
        assert_eq!(json_len(&sent(&prompt)[0]), 244 - r#"<user_input mode=\"act\"></user_input>"#.len());
        let two = Message::new(Role::Tool, [result.parts.clone(), result.parts.clone()].concat());
        assert_eq!((stored_messages(&two, "compactbench", "openai-compatible").len(), sent(&two).len()), (2, 1));
        // An image a tool returned stays in its result's message.
        let image = Message::new(Role::Tool, vec![result.parts[0].clone(), Part::Media { mime: "image/png".into(), tokens: 10 }]);
        assert_eq!(stored_messages(&image, "compactbench", "openai-compatible").len(), 1);
        // A reply without usage has no metrics; a failed tool's result says so.
        assert_eq!(len(&Message::tool_call("call_cb0000", "run_commands", json!({ "commands": ["cat .compactbench/0000.out"] }))), 339 - r#","metrics":{"inputTokens":9173,"outputTokens":15,"cacheReadTokens":0,"cacheWriteTokens":0}"#.len());
        assert_eq!(len(&Message::tool_result("call_cb0000", "run_commands", output, true)), 270 + r#","is_error":true"#.len());
    }

    #[test]
    fn results_are_sent_cut_to_8000_characters_and_stored_whole() {
        // `truncateMiddle`: head and tail around a note of the units left out, 8,000 in all.
        let cut = truncate_middle(&"x".repeat(10_000), MAX_TOOL_RESULT_CHARS);
        assert_eq!(cut, format!("{}\n\n...[truncated 2032 chars]...\n\n{}", "x".repeat(3_984), "x".repeat(3_984)));
        assert_eq!(truncate_middle(&cut, MAX_TOOL_RESULT_CHARS), cut);
        // In the CLI's arrays, every string of an entry is cut.
        let output = json!([{ "query": "cat big.out", "result": "y".repeat(30_000), "success": true }]).to_string();
        let result = Message::tool_result("c1", "run_commands", &output, false);
        let sent = api_messages(&result, "m", "openai-compatible");
        let sent_result = sent[0]["content"][0]["content"][0]["result"].as_str().unwrap();
        // 33 characters of note leave 7,967 for head and tail: 3,983 each.
        assert_eq!((sent_result.len(), sent_result.contains("...[truncated 22034 chars]...")), (7_999, true));
        assert_eq!(sent[0]["content"][0]["content"][0]["query"], "cat big.out");
        // The request counts the cut result; the messages' total and the cut count it whole.
        let log = Harness::new(vec![Message::system("s"), Message::user("p"), Message::tool_call("c1", "run_commands", json!({})), result], model(1_000_000, 4_096)).log;
        let req = Request::of(&log, &default_projection(&log), &MODEL);
        assert!(req.message_tokens() > 10_000 && req.api_message_tokens() < 3_000, "{} {}", req.message_tokens(), req.api_message_tokens());
    }

    #[test]
    fn the_request_estimate_counts_the_tool_definitions() {
        let h = Harness::new(rounds(4, 3_000, 100), model(1_000_000, 4_096));
        let req = Request::of(&h.log, &h.view(&sdk()), &MODEL);
        // The JSON of `{systemPrompt, messages: apiMessages, tools}` with a list of tools
        // spliced in.
        let tools = json!([{ "name": "read_files", "description": "Read files.", "inputSchema": { "type": "object" }, "timeoutMs": 30_000 }]);
        let messages = api_transcript(h.log.messages().skip(1).map(|(_, m)| m), MODEL.id, MODEL.provider);
        let whole = json!({ "systemPrompt": "sys", "messages": messages, "tools": tools });
        assert_eq!(req.tokens(json_len(&tools)), estimate(json_len(&whole)));
        // A prompt after tool results joins their message there, the two estimated as one.
        let mut log = h.log.clone();
        log.push_message(Message::user("Next."));
        let joined = Request::of(&log, &default_projection(&log), &MODEL);
        let messages = api_transcript(log.messages().skip(1).map(|(_, m)| m), MODEL.id, MODEL.provider);
        assert_eq!(messages.len(), 9);
        assert_eq!(joined.tokens(json_len(&tools)), estimate(json_len(&json!({ "systemPrompt": "sys", "messages": messages, "tools": tools }))));
        assert_eq!(joined.api_message_tokens(), messages.iter().map(|m| estimate(json_len(m))).sum::<u64>());
        // The CLI's tools are about 5,900 tokens of the estimate: a window whose trigger lies
        // between the two estimates fires with them only.
        let (with, without) = (req.tokens(CLI_TOOL_DEFINITIONS_CHARS), req.tokens(2));
        assert!((5_921..=5_922).contains(&(with - without)), "{with} {without}");
        let mut h = Harness::new(rounds(4, 3_000, 100), model(((with + without) as f64 / 2.0 / 0.9) as u64, 4_096));
        assert!(matches!(h.decide(&sdk(), Moment::BeforeRequest), Decision::Compact { .. }));
        let none = SdkStrategy::new(SdkConfig { tool_definitions_chars: 2, ..SdkConfig::default() });
        assert!(matches!(h.decide(&none, Moment::BeforeRequest), Decision::Skip));
    }

    #[test]
    fn fires_at_90_percent_of_the_window_on_the_request_estimate() {
        let h = Harness::new(rounds(4, 3_000, 100), model(1_000_000, 4_096));
        let req = Request::of(&h.log, &h.view(&sdk()), &MODEL);
        let tokens = req.tokens(CLI_TOOL_DEFINITIONS_CHARS) as f64;
        // The window is the CLI's input limit: the trigger is 0.9 x window. A model with no
        // input limit of its own gets 0.9 x 0.9 x window.
        let no_limit = SdkStrategy::new(SdkConfig { max_input_is_window: false, ..SdkConfig::default() });
        for (s, ratio) in [(sdk(), 0.9), (no_limit, 0.81)] {
            // The smallest window whose trigger is above the estimate.
            let flip = (tokens / ratio).floor() as u64 + 1;
            for (window, fires) in [(flip - 1, true), (flip, false)] {
                let mut h = Harness::new(rounds(4, 3_000, 100), model(window, 4_096));
                assert_eq!(matches!(h.decide(&s, Moment::BeforeRequest), Decision::Compact { .. }), fires, "window {window} at {ratio}");
            }
        }
    }

    #[test]
    fn a_model_without_max_tokens_in_its_info_keeps_the_short_conversation_target() {
        // 20 rounds (20 pairs), ~40,500 estimated tokens with the tools, at a 44,000 window: the
        // long-conversation target is 0.5 x 44,000 less the overhead (~16,000 message tokens);
        // without `maxTokens` in the model info it is 0.7 x 39,600 less the overhead, so the
        // 20,000 preserved tokens apply and more is kept.
        let first_kept = |config: SdkConfig| {
            let mut h = Harness::new(rounds(20, 5_000, 100), model(44_000, 4_096));
            let cps = h.step(&SdkStrategy::new(config), Moment::BeforeRequest).unwrap();
            let Window::From(first) = cps[0].window else { panic!("{:?}", cps[0].window) };
            first.0
        };
        let catalog = first_kept(SdkConfig::default());
        let configured = first_kept(SdkConfig { max_tokens_in_model_info: false, ..SdkConfig::default() });
        assert!(configured < catalog, "{configured} {catalog}");
    }

    #[test]
    fn a_larger_provider_count_shrinks_the_budget_at_most_fourfold() {
        let s = sdk();
        let estimate = {
            let h = Harness::new(rounds(4, 3_000, 100), model(1_000_000, 4_096));
            Request::of(&h.log, &h.view(&s), &MODEL).tokens(CLI_TOOL_DEFINITIONS_CHARS) as f64
        };
        let fires = |scale: f64, input: f64| {
            let window = (estimate * scale / 0.9) as u64;
            let mut h = Harness::new(rounds(4, 3_000, input as u64), model(window, 4_096));
            matches!(h.decide(&s, Moment::BeforeRequest), Decision::Compact { .. })
        };
        // A window 3.5 times what the estimate fills at 90%: a count 4x the estimate shrinks
        // the budget enough, 3x does not.
        assert!(!fires(3.5, estimate));
        assert!(!fires(3.5, 3.0 * estimate));
        assert!(fires(3.5, 4.0 * estimate));
        // Five times: even a count 10x the estimate shrinks the budget only fourfold.
        assert!(!fires(5.0, 10.0 * estimate));
        // A new prompt starts a run: the count is forgotten.
        let mut h = Harness::new(rounds(4, 3_000, (4.0 * estimate) as u64), model((estimate * 3.5 / 0.9) as u64, 4_096));
        h.push(Message::user("Next."));
        assert!(matches!(h.decide(&s, Moment::BeforeRequest), Decision::Skip));
    }

    #[test]
    fn the_cut_lands_on_an_assistant_message_and_the_summary_leads_the_view() {
        let s = sdk();
        // 20 reads of ~1,700 tokens: the newest 20,000 tokens are 12 messages back.
        let mut h = Harness::new(rounds(20, 5_000, 100), model(30_000, 4_096));
        let cps = h.step(&s, Moment::BeforeRequest).unwrap();
        let [cp] = cps.as_slice() else { panic!("{cps:?}") };
        let Window::From(first) = cp.window else { panic!("{:?}", cp.window) };
        assert_eq!(h.log.message(first).unwrap().role, Role::Assistant);
        let view = h.view(&s);
        assert_eq!(view.messages[1].message.text().lines().next(), Some("Context summary:"));
        assert!(view.messages[1].message.text().contains("## Files\nRead:\n- src/f0.rs"), "{}", view.messages[1].message.text());
        assert_eq!(cp.details["kind"], "compaction_summary");
        assert_eq!(cp.details["userRunSpan"], 1);
        // Below the typed prompt nothing is cut: a log of one prompt and one huge reply.
        let mut h = Harness::new(vec![Message::system("s"), Message::user("p".repeat(300_000)), Message::assistant("ok")], model(30_000, 4_096));
        assert!(h.step(&s, Moment::BeforeRequest).unwrap().is_empty());
    }

    #[test]
    fn a_second_compaction_folds_the_previous_summary() {
        let s = sdk();
        let mut h = Harness::new(rounds(20, 5_000, 100), model(30_000, 4_096));
        h.step(&s, Moment::BeforeRequest).unwrap();
        for r in 20..30 {
            let id = format!("c{r}");
            h.push(Message::tool_call(&id, "read_files", json!({ "files": [{ "path": "src/g.rs" }] })));
            h.push(Message::tool_result(&id, "read_files", "y".repeat(5_000), false));
        }
        let cps = h.step(&s, Moment::BeforeRequest).unwrap();
        assert_eq!(cps.len(), 1);
        let requests = h.summarizer.requests();
        assert!(requests[1].transcript.starts_with("Previous summary:\nSUMMARY 1 of history"), "{}", requests[1].transcript);
        assert!(cps[0].details["details"]["readFiles"].as_array().unwrap().len() == 21);
    }

    #[test]
    fn manual_compaction_halves_without_a_threshold() {
        let s = sdk();
        let mut h = Harness::new(rounds(20, 5_000, 100), model(1_000_000, 4_096));
        assert!(matches!(h.decide(&s, Moment::BeforeRequest), Decision::Skip));
        let cps = h.step(&s, Moment::Manual).unwrap();
        let Window::From(first) = cps[0].window else { panic!() };
        // Half of the ~34,500 message tokens kept: the newest ten rounds (entries 22 to 41).
        assert!((19..24).contains(&first.0), "{first:?}");
    }

    #[test]
    fn replay_keeps_the_law() {
        let mut session = vec![Message::system("You are Cline."), Message::user("Fix the parser.")];
        for call in 1..=120 {
            let id = format!("c{call}");
            session.push(Message::tool_call(&id, "read_files", json!({ "files": [{ "path": format!("src/f{}.rs", call % 7) }] })));
            session.push(Message::tool_result(&id, "read_files", format!("v{call}\n{}", "x ".repeat(2_000)), false));
            if call % 3 == 0 {
                session.push(Message::assistant(format!("step {call} done")));
                session.push(Message::user(format!("Next step {call}.")));
            }
        }
        let tally = assert_replay_law(&sdk(), &model(64_000, 8_192), &session, 1);
        assert!(tally.compactions > 2, "{tally:?}");
    }

    #[test]
    fn an_overflow_does_nothing() {
        // Overflow recovery (the SDK's basic fold) is not reproduced.
        let mut h = Harness::new(rounds(20, 5_000, 100), model(1_000, 4_096));
        assert!(matches!(h.decide(&sdk(), Moment::Overflow), Decision::Skip));
    }
}
