//! Codex CLI (`openai/codex`, the Rust `codex-rs` agent): local compaction, which replaces the
//! whole history by the user's recent messages plus a handoff summary sent as a user message,
//! and a modelled variant of the server-side ("remote") compaction Codex uses with OpenAI.
//!
//! # Source
//! - `openai/codex@e06dd0e5d5694c24968bf49b62466cdedae04aaa`, `codex-rs/core/src/compact.rs`
//!   (canonical): `run_compact_task_inner`, `collect_user_messages`, `is_summary_message`,
//!   `build_compacted_history_with_limit` (`COMPACT_USER_MESSAGE_MAX_TOKENS = 20_000`),
//!   `insert_initial_context_before_last_real_user_or_summary`,
//!   `extract_trailing_model_switch_update_for_compaction_request`.
//! - `codex-rs/core/src/truncate.rs` of the same era (`truncate_text` with
//!   `TruncationPolicy::Tokens`, `approx_token_count`); `codex-rs/core/src/context_manager/history.rs`
//!   (`get_total_token_usage`, item estimates, `remove_first_item`); `codex-rs/core/src/codex.rs`
//!   (`run_turn`, `run_pre_sampling_compact`, commit not pinned by the spec);
//!   `codex-rs/protocol/src/openai_models.rs` (`auto_compact_token_limit`).
//! - Remote: `openai/codex@683f0a6897c3835f32556f3ddf6542f94689f401`, `codex-rs/core/src/compact_remote.rs`
//!   (client side only; the server is closed).
//! - Prompts, paraphrased: `templates/compact/prompt.md` @11baefb5, `summary_prefix.md` @50a53333.
//!
//! # Trigger
//! The limit is `window * 9 / 10` (integer), or the configured `model_auto_compact_token_limit`
//! capped at that value (uncapped in the Nov-2025 code, [`CodexConfig::cap_configured_limit`]).
//! The count is the provider-reported total (input + output) of the last reply plus Codex's
//! estimate of every item added after the last model-generated item (by its model-visible
//! bytes, as 0.171.0 counts them in `cargo xtask fidelity --black-box`;
//! [`CodexConfig::content_estimate`]` = false` counts the serialized JSON, as the cited commit
//! does); right after a compaction
//! it is the estimate Codex recomputes for the new history. Compaction runs when
//! `count >= limit`, at two of Codex's sites:
//! - pre-turn (`run_pre_sampling_compact`, before the new user message is recorded) maps to
//!   [`Moment::TurnEnd`]; 0.171.0 places the initial context before the last real user
//!   message of the replacement, as mid-turn (black box, every pre-turn compaction seen);
//!   with [`CodexConfig::pre_turn_context_before_last_user`]` = false` it compacts without
//!   initial context (`DoNotInject`) and the next turn re-injects it, as the cited commit does;
//! - mid-turn (after a sample whose tool calls need a follow-up request) maps to
//!   [`Moment::BeforeRequest`] when the last model reply called tools; it splices the initial
//!   context in before the last real user message (`BeforeLastUserMessage`) and the turn goes on.
//!
//! A first request of a turn is not checked ([`Moment::BeforeRequest`] after a user message
//! skips), and [`Moment::Overflow`] always skips: a context-window error during a normal turn
//! ends the turn in Codex, and the next pre-turn check compacts.
//!
//! Manual `/compact` ([`Moment::Manual`]) runs `run_compact_task` whatever the count, with
//! `DoNotInject` (spec (b)), locally or remotely as configured. The command takes no text
//! (openai/codex #29816 asks for it), so anything typed after it is dropped. Project memory
//! (AGENTS.md, a contextual `<INSTRUCTIONS>` user message in Codex) reaches the summary call
//! only as part of the history it re-sends (here the base instructions, where our sessions
//! keep it), never in the compact prompt.
//!
//! # What is kept, summarized, dropped
//! The summarizer gets the whole history (tool outputs as they were recorded) as Responses
//! items, one JSON item per line, with the base instructions as system text and the
//! compaction prompt (config `compact_prompt`, else a paraphrase of `SUMMARIZATION_PROMPT`)
//! after it; its output cap is the model's (nothing compaction-specific). The new history is:
//! every real user message, newest first while they fit in 20,000 tokens (`ceil(bytes / 4)`),
//! the first one that does not fit middle-truncated to what is left
//! (`…N tokens truncated…`), older ones dropped; then the summary as one user message,
//! `SUMMARY_PREFIX + "\n" + summary` (the prefix paraphrased); then the trailing
//! `<model_switch>` message if there was one. Assistant messages, reasoning, tool calls and
//! tool outputs are dropped (they survive only in the summary), as are contextual user
//! messages (AGENTS.md, `<environment_context>`, …) and earlier summaries. Initial context
//! (developer messages and contextual user messages of the session's prelude) goes before the
//! last real user message mid-turn, or after the summary as the next turn's re-injection
//! pre-turn. The base instructions (the log's first message, when it is a system message) are
//! never compacted. A later compaction summarizes the earlier summary with everything else
//! (summary of summary) and carries the accumulated user messages under the same cap.
//!
//! # Failures
//! A context-window rejection of the compaction request (an error of kind `ContextOverflow`,
//! the runner's provider refusing a request larger than the window, or one naming
//! `context_length_exceeded`) drops the oldest history item (and its call or output partner)
//! and retries; with only the prompt left it fails. Like Codex, the crate sends the request
//! whatever its own estimate says: only the provider's rejection trims. Other summarizer errors are retried up to `stream_max_retries` (5)
//! times, then the compaction fails. Failures leave the log unchanged.
//!
//! # Token estimator
//! `ceil(bytes / 4)` over UTF-8 (`approx_token_count`), applied per Responses item to its JSON
//! serialization (images at the fixed 7,373 bytes), to the base instructions, and to user
//! message text for the 20,000-token cap. Provider usage comes from
//! [`compactbench_core::View::last_usage`].
//!
//! # Variants
//! [`variants`] returns `codex` (local, the default) and `codex/remote`. Codex routes to remote
//! compaction when `provider.is_openai()`; `codex/remote` always takes that path, modelled:
//! the history, trimmed of trailing tool outputs while its estimate exceeds the window, goes to
//! the summarizer with a neutral server-side instruction (an assumption: OpenAI's prompt is
//! not public; `compact_prompt` is not applied, as in Codex); the reply is modelled as the input's
//! user messages followed by one `Compaction` item, which we carry as an assistant message
//! holding the summary in plain text (the compaction docs of OpenAI and Vercel's AI Gateway
//! describe that shape; the real item is encrypted). Codex then keeps the non-contextual user messages, assistant
//! text and the compaction item and places initial context as in the local path. A failure is
//! not retried. [`CodexConfig::remote`]` = None` routes like Codex (remote for the OpenAI
//! Responses shape).
//!
//! # Layers
//! The algorithm is functions of the log and its view: `trigger::decide`, `compact::run` and
//! `layout::project`, each given the anchor (the newest checkpoint of ours, whose layout the
//! view shows) found in the log. A run keeps only the view ([`Incremental::reprojected`]).
//!
//! # Deviations
//! - Deliberate: the model-downshift site (`maybe_run_previous_model_inline_compact`) is not
//!   reproduced; a replayed session keeps one model.
//! - Deliberate: initial context is copied from the log's prelude (Codex rebuilds it from its
//!   settings, which a replay does not have); later `<environment_context>` updates are dropped
//!   at compaction as in Codex.
//! - Deliberate: the prompts and `SUMMARY_PREFIX` are paraphrased, so a real Codex summary in
//!   an imported transcript is not recognised as one.
//! - Deliberate: an empty summary gives `prefix + "\n" + "(no summary available)"` as the spec's
//!   case 8 requires; the source at e06dd0e5 applies the placeholder only to an empty whole
//!   text, which the prefix makes impossible, so there an empty reply gives `prefix + "\n"`.
//! - Deliberate: reasoning is counted as plain-text reasoning items; Codex's extra estimate for
//!   older encrypted reasoning the server does not report is not modelled (runner usage counts
//!   the whole prompt).
//! - Deliberate: ghost snapshots (`/undo`) and the rollout file are not modelled; backoff delays
//!   between retries are not waited.
//! - Deliberate (remote): the server's summary, its prompt, and which items its reply keeps
//!   are modelled, not reproduced; see Variants.
//! - Not reproduced: the Nov-2025 replacement layout (initial context always first); only its
//!   uncapped limit is a switch.
//! - Modelled (remote): the `/responses/compact` call is priced as a `Prefix` request
//!   (`SummaryRequest::context`): it sends the same history and base instructions as the turn, and
//!   whether the server reuses their cache is not published. Local compaction is a `Prefix` from
//!   the source (the history plus one user message with the prompt).

use compactbench_core::{Checkpoint, Cx, Decision, Error, Fidelity, Incremental, Log, Moment, Replay, Shape, Strategy, StrategyInfo, View};

mod compact;
mod history;
mod items;
mod layout;
mod prompt;
mod trigger;
mod truncate;

/// Codex's settings that shape compaction, with Codex's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodexConfig {
    /// `model_auto_compact_token_limit` from `config.toml`; `None` uses 90% of the window.
    pub model_auto_compact_token_limit: Option<u64>,
    /// Cap a configured limit at 90% of the window (current code, default); `false` is the
    /// Nov-2025 behaviour, which used the configured value as given.
    pub cap_configured_limit: bool,
    /// `compact_prompt`: replaces the summarization prompt of local compaction.
    pub compact_prompt: Option<String>,
    /// `COMPACT_USER_MESSAGE_MAX_TOKENS` (20,000): budget for carried user messages.
    pub user_message_max_tokens: u64,
    /// `stream_max_retries` (5): retries of a failed local compaction request.
    pub stream_max_retries: u32,
    /// `Some(false)`: always local (default); `Some(true)`: always the modelled remote path;
    /// `None`: as Codex routes, remote when the provider is OpenAI (the Responses shape).
    pub remote: Option<bool>,
    /// The trigger counts the items added since the last reply by their model-visible bytes
    /// (texts, outputs, names and arguments, no JSON syntax), as 0.171.0 does in the black-box
    /// check; `false` counts their serialized JSON, as the cited commit does.
    pub content_estimate: bool,
    /// A pre-turn compaction places the initial context before the last real user message of
    /// the replacement, as a mid-turn one does (0.171.0 in the black-box check); `false` leaves
    /// it out for the next turn to re-inject after the summary (the cited commit).
    pub pre_turn_context_before_last_user: bool,
}

impl Default for CodexConfig {
    fn default() -> CodexConfig {
        CodexConfig {
            model_auto_compact_token_limit: None,
            cap_configured_limit: true,
            compact_prompt: None,
            user_message_max_tokens: 20_000,
            stream_max_retries: 5,
            remote: Some(false),
            content_estimate: true,
            pre_turn_context_before_last_user: true,
        }
    }
}

impl CodexConfig {
    /// `TurnContext::compact_prompt()`: the configured prompt or the built-in one.
    pub(crate) fn compact_prompt(&self) -> &str {
        self.compact_prompt.as_deref().unwrap_or(prompt::SUMMARIZATION_PROMPT)
    }

    /// `should_use_remote_compact_task`, with OpenAI providers taken to be the Responses shape.
    pub(crate) fn uses_remote(&self, provider: Shape) -> bool {
        self.remote.unwrap_or(provider == Shape::OpenaiResponses)
    }
}

/// Codex CLI's compaction.
pub struct CodexStrategy {
    config: CodexConfig,
    info: StrategyInfo,
}

impl CodexStrategy {
    /// A strategy with `config`.
    pub fn new(config: CodexConfig) -> CodexStrategy {
        let (id, source, summary, fidelity) = match config.remote {
            Some(false) => (
                "codex",
                "openai/codex@e06dd0e5d5694c24968bf49b62466cdedae04aaa",
                "at 90% of the window (reported usage + bytes/4): newest user messages within 20k tokens + summary as a user message",
                Fidelity::Source,
            ),
            Some(true) => (
                "codex/remote",
                "openai/codex@683f0a6897c3835f32556f3ddf6542f94689f401 (client; server modelled)",
                "at 90% of the window: modelled /responses/compact, user messages + compaction item",
                Fidelity::Modelled,
            ),
            None => (
                "codex/by-provider",
                "openai/codex@e06dd0e5d5694c24968bf49b62466cdedae04aaa",
                "at 90% of the window: remote for OpenAI Responses providers, local otherwise",
                Fidelity::Modelled,
            ),
        };
        let info = StrategyInfo { id: id.into(), harness: "codex".into(), source: source.into(), summary: summary.into(), fidelity };
        CodexStrategy { info, config }
    }
}

/// Codex with its default configuration: local compaction.
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(CodexStrategy::new(CodexConfig::default()))
}

/// Every configuration to report: `codex` (local) first, then `codex/remote`.
pub fn variants() -> Vec<Box<dyn Strategy>> {
    vec![strategy(), Box::new(CodexStrategy::new(CodexConfig { remote: Some(true), ..CodexConfig::default() }))]
}

impl Strategy for CodexStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::reprojected(self))
    }

    fn decide(&self, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        trigger::decide(&self.config, view, layout::anchor(log).as_ref(), at, cx.model.window)
    }

    fn compact(&self, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        compact::run(&self.config, log, view, layout::anchor(log).as_ref(), at, cx)
    }

    fn project(&self, log: &Log) -> View {
        layout::project(log, layout::anchor(log).as_ref())
    }
}

#[cfg(test)]
mod tests;
