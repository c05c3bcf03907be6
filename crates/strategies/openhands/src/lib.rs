//! OpenHands: the condenser family behind one strategy; [`OpenhandsConfig`] picks the
//! condenser.
//!
//! # Sources
//! - SDK (the current agent runtime, and the default here): PyPI `openhands-sdk` 1.58.2
//!   (OpenHands/software-agent-sdk), `openhands/sdk/context/condenser/{base.py,
//!   llm_summarizing_condenser.py, utils.py, pipeline_condenser.py, no_op_condenser.py,
//!   prompts/summarizing_system.j2, prompts/summarizing_events.j2}`,
//!   `context/view/{view.py, manipulation_indices.py, properties/*.py}`,
//!   `event/condenser.py`, `event/base.py` (`events_to_messages`, `str(event)`),
//!   `agent/agent.py`, `settings/model.py`; the spec cites
//!   OpenHands/software-agent-sdk@611629e6999ad398dc49c761721eefe18d5e6bd9.
//! - V0: All-Hands-AI/OpenHands@156d0686c46aafb0fa9d291da6421fb6f64dddc0,
//!   `openhands/memory/condenser/{condenser.py, impl/*.py}`, `openhands/memory/view.py`,
//!   `openhands/memory/conversation_memory.py`, `openhands/core/config/condenser_config.py`,
//!   `openhands/server/session/session.py` (the app's default pipeline).
//!
//! # Model
//! OpenHands never edits its history. The log is expanded into OpenHands' event stream (one
//! event per tool call, per tool result, per other message; `event.rs`, `stream.rs`). A
//! condensation is a checkpoint naming the forgotten event ids (`details.forgotten`, or V0's
//! inclusive `details.forgotten_range`), an optional summary and its `summary_offset`
//! (`condensation.rs`). The view is this crate's own:
//! - SDK `View.from_events` (`sdk/view.rs`): condensations replay in order; each drops its
//!   forgotten events from the list so far and inserts its summary (a user message) at
//!   `summary_offset` of the reduced list, so several summaries can coexist; then the view
//!   properties (observation uniqueness, batch atomicity, tool-call matching, tool-loop
//!   atomicity) drop whatever breaks them.
//! - V0 `View.from_events` (`v0/view.rs`): the union of all forgotten ids is dropped at once
//!   and only the latest summary is inserted, at its offset. Then the configured non-rolling
//!   condensers transform the view (nothing stored), and V0's message builder decides what is
//!   sent (`v0/messages.rs`): the first user message is put back second when the second
//!   event is not a user message, a tool-call message is sent only once all its results are
//!   in the view (so an observation whose action was forgotten, or an action whose
//!   observation was masked, is silently dropped), and observations are middle-truncated at
//!   `max_message_chars` (30 000).
//!
//! Two layers: the originals' algorithms as functions of the events (`sdk/`, `v0/`, one
//! module per V0 condenser), which the [`Strategy`] methods call on the whole log expanded
//! afresh; and `replay.rs`, a run's [`Replay`], which keeps the stream, the SDK's replay or
//! V0's kept events and the SDK's running token count as entries arrive, and calls the same
//! functions.
//!
//! # Trigger
//! The condenser runs before every model request ([`Moment::BeforeRequest`]). On
//! [`Moment::Overflow`] the agent appends a condensation request; condensers that handle
//! requests (SDK summarizing, V0 rolling condensers and conversation window) then condense
//! with the request as a reason, in the same step.
//! - SDK `LLMSummarizingCondenser`: reasons `request`, `tokens` (the SDK's LiteLLM count of
//!   the view > `min(max_tokens, model window)`; the agent always passes its LLM, so the
//!   window always applies), `events` (`len(view) > max_size`). Tokens or request are a hard requirement,
//!   events alone a soft one.
//! - V0 rolling condensers (LLM summarizing, structured summary, amortized forgetting, LLM
//!   attention): `len(view) > max_size` or a request. Conversation window: a request only.
//!   Observation masking, browser output, recent events: no trigger; they reshape every view.
//!
//! [`Moment::Manual`] does nothing: the spec names no user command that compacts (a
//! `CondensationRequest` comes from a context-window error or from the agent's own
//! `request_condensation` tool, spec (b)), so nothing the user types reaches a summary call.
//! Project memory (microagents, `AGENTS.md`) is no part of the condensers' summary prompts
//! (spec (d)).
//!
//! # Kept, summarized, dropped
//! - SDK: the tail length is the strictest over the reasons (request `len//2 - keep_first -
//!   1`, events `max_size//2 - keep_first - 1`, tokens: what remains after the shortest
//!   prefix past `keep_first` whose tokens exceed `total - max//2`). The cut start (at
//!   `keep_first`, never before the system prompt) and end move forward to manipulation
//!   indices, so batches, call/result pairs and thinking tool loops stay whole. The forgotten
//!   events, including any earlier summary at the cut, go to the summarizer as `<EVENT>`
//!   blocks of `str(event)` (a 500-character preview; tool arguments are not shown). Fewer
//!   than `minimum_progress` (10%) of the view, nothing to forget, or a failed summarizer call
//!   means no condensation: soft requirement -> the view stays as it is; hard -> hard context
//!   reset (everything after the system prompt summarized, summary right after it; on failure
//!   event strings are capped at 0.8x the longest, then 0.8x again, 5 attempts; then the
//!   original error).
//! - V0 LLM summarizing / structured summary: keep `keep_first` events and
//!   `max_size//2 - keep_first - 1` from the tail, forget the id range between (previous
//!   summary excluded from the events but given as `<PREVIOUS SUMMARY>`), summary at
//!   `keep_first`; no pairing protection. Amortized forgetting: same cut without a summary.
//!   LLM attention: keeps the ids the model ranks first. Conversation window: keeps the system
//!   prompt, the first user message and about half of the rest, not starting on an
//!   observation. Observation masking: `<MASKED>` for observations outside the attention
//!   window. Browser output: all but the newest browser outputs become "Visited URL …
//!   Content omitted". Recent events: `keep_first` + the newest events.
//! - Default configuration ([`strategy`]): SDK `default_condenser` (`max_size` 80,
//!   `keep_first` 4), used by the SDK's default agent and sub-agents. [`variants`] adds the
//!   SDK settings defaults (240, 2) and the V0 condensers with their config defaults, plus the
//!   V0 app pipeline (conversation window -> browser output(2) -> LLM summarizing(keep_first
//!   4, max_size 120)).
//!
//! # Token estimator
//! V0 counts events only; its `tokens_before` (reports only) is code points / 4 (rounded up)
//! per event plus stated media sizes (`event.rs`). The SDK counts with
//! `openhands/sdk/context/condenser/utils.py:get_total_token_count` (LiteLLM 1.105.7
//! `token_counter` over the events turned into messages, tiktoken `o200k_base` for LiteLLM's
//! OpenAI catalog names that map to it and `cl100k_base` for every other name). This crate
//! counts the same way through the injected [`Cx::tokenizer`](compactbench_core::Cx)
//! (`tokens.rs`, which details the count and what is not reproducible: Hugging Face
//! tokenizer names, string-serialized models; none of the scenario models is either), for
//! the `tokens` reason, the suffix search (`count(base + prefix) - count(base)`) and
//! `tokens_before`.
//!
//! # Deviations
//! - Tool schemas are not counted (the log has none); Hugging Face tokenizer names are
//!   counted with `cl100k_base` (above). Deliberate: only tiktoken encodings are injected.
//! - The condensation request and its handling are one step: at overflow the condenser runs
//!   at once with the request as a reason, and a failed handling stores no pending request.
//!   Deliberate: the runner retries once right after compaction.
//! - Tool calls are generic (name + JSON arguments): the SDK's `Action:` line shows the tool
//!   name instead of an action class, V0 renders calls as its generic tool action
//!   (`MCPAction`) and results as its observation (`ErrorObservation` when failed).
//!   Browser outputs are results of the V0 tools `browser` and `web_read`; their URL is the
//!   call's `url` argument. Deliberate: the log has no typed actions.
//! - Reasoning parts stand for thinking blocks (tool-loop atomicity) for every provider.
//!   Deliberate: `project` does not know the provider, and cuts and enforcement must agree.
//! - The SDK merges adjacent plain user messages into one turn, and V0 prefixes a user
//!   message that follows another with a blank line; here they stay separate messages with
//!   their own origins (provider lowering merges where required). V0 also drops reasoning
//!   from resent tool-call messages and appends an error note to failed results; not done.
//!   Deliberate: not compaction, and one origin per view message.
//! - V0 computes its stand-ins (masked observations, browser outputs reduced to a URL,
//!   results truncated at 30 000 characters) on every step and stores nothing; so does this
//!   crate. A message V0 sends in place of a log message names no checkpoint: its origin is
//!   `Replaced(message, message)` when the message builder cut it (truncated, or only some of
//!   its results sent), and `Replaced(observation, its call's message)` for a condenser's
//!   stand-in (`<MASKED>`, "Visited URL …"), so that the two never share an origin (the
//!   runner keys what it measures of a view message by its origin). Not covered: a tool
//!   message with several results masked at different steps shows stand-ins of one origin
//!   with one, then more texts (the scenarios' tool messages hold one result each).
//!   Summaries are never masked (there is no log message to stand in for).
//! - The SDK view shows a log message only in part when its rules drop some of a batch's
//!   calls or results (an unmatched call, a forgotten observation); such a message has the
//!   origin `Replaced(message, newest checkpoint)`, or `Replaced(message, message)` before any
//!   checkpoint, as opencode-v1 does for its made-up results.
//! - V0 structured summary and LLM attention use forced function calls / response schemas;
//!   the summarizer seam returns text, so both ask for JSON in the instructions. A reply that
//!   is not the JSON object gives an empty state summary (as an unparsable tool call does),
//!   or an error for attention (as V0's validation error does). LLM attention is available
//!   through [`OpenhandsConfig::LlmAttention`] but is not a report row, since a prose
//!   summarizer can never answer it.
//! - Prompts are paraphrased; the SDK truncation notice is paraphrased. V0 sends one user
//!   message that opens with the rules (the attention condenser: one message per event after
//!   the rules); here the rules are the request's system text and the events the transcript,
//!   since the seam puts instructions after the material. Deliberate: extractive summarizers
//!   read the transcript only.
//! - V0 quirks are kept: range forgetting may orphan an observation (then dropped by the
//!   message builder), recent events repeats its head while the view is shorter than
//!   `max_events`, conversation window may forget nothing, a request on a view shorter than
//!   `max_size // 2` makes the summarizing condensers fail (`min()` of nothing), a
//!   browser output can be taken for the previous summary in the pipeline, and in a pipeline
//!   a condensation request does not reach a rolling condenser behind masking, browser output
//!   or recent events (each returns a new view without it; the app's pipeline handles the
//!   request first, in its conversation window).
//! - Differences between the spec's SDK commit and release 1.58.2 follow the release: the
//!   system prompt is never forgotten (a hard reset puts the summary right after it, not at
//!   0), the summarizer gets its rules as a system message and the events as a user message,
//!   and a hard reset that fails every attempt raises the original error.
//!
//! # Measured against the original (compactbench-fidelity)
//! `fidelity/openhands/driver.py` runs the SDK 1.58.2 `default_condenser` on the same
//! sessions written as the SDK's own events (`View.from_events`, then
//! `condensation_requirement` and `condense`; only the summarizer call is mocked), our
//! condensations included as its `Condensation` events, with the SDK's own LiteLLM token
//! count as it ships. 318 cases (203 fresh, 115 with earlier condensations, on
//! `claude-sonnet-4`, `gpt-5`, `gpt-4.1`, `gpt-4.1-mini` and `gemini-2.5-pro`) agree on
//! trigger 318/318, kept set 165/165 and `tokens_before` 165/165. (With the former chars/4
//! estimate, about 7-9% below LiteLLM's count on these sessions, only 236/318 triggers and
//! 115/155 kept sets agreed; with the driver swapping that estimate into the SDK, all did.)
//! Earlier extra runs with thinking on tool calls (tool loops) and with one loop spanning the
//! whole session (hard context resets, soft requirements left unmet) agreed under the
//! estimate; they have not been rerun with the exact count.
//! The same row runs with two settings of `LLMSummarizingCondenser` away from
//! `default_condenser`'s (`max_size 40, keep_first 2`; `max_tokens 8000`), ours configured the
//! same way. The V0 rows `openhands/amortized-forgetting`, `openhands/llm-summarizing-v0`,
//! `openhands/structured-summary`, `openhands/pipeline` (before each request) and
//! `openhands/conversation-window` (at an overflow, after the condensation request the agent
//! controller appends) are checked against PyPI `openhands-ai` 1.0.0, whose `openhands/memory/`
//! and `openhands/events/` are byte-identical to the commit cited above
//! (`fidelity/openhands-v0/driver.py`: V0's own `View.from_events` and `condense`), and so are
//! `openhands/observation-masking` and `openhands/recent-events`, which record no checkpoint:
//! there the log messages our view shows are compared with those V0's message builder
//! (`ConversationMemory.process_events`) sends of the view the condenser returns, and the
//! `<MASKED>` stand-ins of our view with the events V0's condenser replaced. Figures for every
//! row are in `reports/fidelity/report.md`. The pipeline's browser output condenser is not
//! exercised (no scenario has a browser tool).

use compactbench_core::{Checkpoint, Cx, Decision, Error, ErrorKind, Fidelity, Log, Moment, Replay, Strategy, StrategyInfo, View};

use crate::event::Event;
use crate::render::Rendered;
use crate::stream::Stream;
use crate::tokens::Counter;
use crate::v0::condenser::Condenser;

mod condensation;
mod event;
mod prompt;
mod render;
mod replay;
mod sdk;
mod stream;
mod tokens;
mod truncate;
mod v0;

const SDK_SOURCE: &str = "openhands-sdk 1.58.2 (OpenHands/software-agent-sdk)";
const V0_SOURCE: &str = "All-Hands-AI/OpenHands@156d0686c46aafb0fa9d291da6421fb6f64dddc0";

/// Which OpenHands condenser to run, with its settings. Sizes are signed, as in the
/// original, so invalid settings can be expressed and are rejected by
/// [`OpenhandsStrategy::new`].
#[derive(Clone, Debug, PartialEq)]
pub enum OpenhandsConfig {
    /// SDK `LLMSummarizingCondenser`.
    LlmSummarizing {
        /// Events in the view before condensing (class default 240; `default_condenser` 80).
        max_size: i64,
        /// Events at the start that are never forgotten (class default 2; `default_condenser` 4).
        keep_first: i64,
        /// Token cap; the model window applies in any case.
        max_tokens: Option<u64>,
        /// Smallest share of the view a condensation must forget (0.1).
        minimum_progress: f64,
        /// Hard context reset attempts (5).
        hard_context_reset_max_retries: i64,
        /// Factor applied to the event string cap after a failed attempt (0.8).
        hard_context_reset_context_scaling: f64,
    },
    /// `NoOpCondenser`: the view as it is.
    NoOp,
    /// V0 `LLMSummarizingCondenser` (config defaults 100, 1, 10 000).
    V0LlmSummarizing {
        /// Events in the view before condensing.
        max_size: i64,
        /// Events at the start that are kept.
        keep_first: i64,
        /// Characters of each event string sent to the summarizer.
        max_event_length: i64,
    },
    /// V0 `StructuredSummaryCondenser` (config defaults 100, 1, 10 000).
    StructuredSummary {
        /// Events in the view before condensing.
        max_size: i64,
        /// Events at the start that are kept.
        keep_first: i64,
        /// Characters of each event string sent to the summarizer.
        max_event_length: i64,
    },
    /// V0 `AmortizedForgettingCondenser` (config defaults 100, 1).
    AmortizedForgetting {
        /// Events in the view before forgetting.
        max_size: i64,
        /// Events at the start that are kept.
        keep_first: i64,
    },
    /// V0 `LLMAttentionCondenser` (config defaults 100, 1).
    LlmAttention {
        /// Events in the view before condensing.
        max_size: i64,
        /// Events at the start that are kept.
        keep_first: i64,
    },
    /// V0 `ObservationMaskingCondenser` (config default 100).
    ObservationMasking {
        /// Newest events whose observations stay unmasked.
        attention_window: i64,
    },
    /// V0 `BrowserOutputCondenser` (config default 1).
    BrowserOutput {
        /// Newest browser outputs that keep their content.
        attention_window: i64,
    },
    /// V0 `RecentEventsCondenser` (config defaults 1, 100).
    RecentEvents {
        /// Events at the start that are kept.
        keep_first: i64,
        /// Events in the returned view.
        max_events: i64,
    },
    /// V0 `ConversationWindowCondenser`: acts on condensation requests only.
    ConversationWindow,
    /// V0 `CondenserPipeline` of V0 condensers, run in order until one condenses.
    Pipeline(Vec<OpenhandsConfig>),
}

impl Default for OpenhandsConfig {
    /// SDK `default_condenser`: what the SDK's default agent and its sub-agents run.
    fn default() -> Self {
        OpenhandsConfig::llm_summarizing(80, 4, None)
    }
}

impl OpenhandsConfig {
    /// SDK `LLMSummarizingCondenser` with these three settings and the class defaults for the
    /// rest (`minimum_progress` 0.1, 5 hard reset attempts, scaling 0.8), as `default_condenser`
    /// builds it with its own `max_size` and `keep_first`
    /// (`openhands/sdk/context/condenser/llm_summarizing_condenser.py`, 1.58.2).
    pub fn llm_summarizing(max_size: i64, keep_first: i64, max_tokens: Option<u64>) -> OpenhandsConfig {
        OpenhandsConfig::LlmSummarizing {
            max_size,
            keep_first,
            max_tokens,
            minimum_progress: 0.1,
            hard_context_reset_max_retries: 5,
            hard_context_reset_context_scaling: 0.8,
        }
    }

    /// Report id suffix.
    fn name(&self) -> &'static str {
        match self {
            OpenhandsConfig::LlmSummarizing { .. } => "llm-summarizing",
            OpenhandsConfig::NoOp => "no-op",
            OpenhandsConfig::V0LlmSummarizing { .. } => "llm-summarizing-v0",
            OpenhandsConfig::StructuredSummary { .. } => "structured-summary",
            OpenhandsConfig::AmortizedForgetting { .. } => "amortized-forgetting",
            OpenhandsConfig::LlmAttention { .. } => "llm-attention",
            OpenhandsConfig::ObservationMasking { .. } => "observation-masking",
            OpenhandsConfig::BrowserOutput { .. } => "browser-output",
            OpenhandsConfig::RecentEvents { .. } => "recent-events",
            OpenhandsConfig::ConversationWindow => "conversation-window",
            OpenhandsConfig::Pipeline(_) => "pipeline",
        }
    }

    /// The original this condenser is rebuilt from.
    fn source(&self) -> &'static str {
        match self {
            OpenhandsConfig::LlmSummarizing { .. } | OpenhandsConfig::NoOp => SDK_SOURCE,
            _ => V0_SOURCE,
        }
    }

    /// What the condenser does, in one line.
    fn summary(&self) -> String {
        match self {
            OpenhandsConfig::LlmSummarizing { max_size, keep_first, .. } => format!(
                "SDK LLM summarizing: over {max_size} events or the window (LiteLLM's count), keep the first {keep_first} and a tail cut at atomic boundaries; summary inserted where the cut starts"
            ),
            OpenhandsConfig::NoOp => "no-op condenser: never condenses".into(),
            OpenhandsConfig::V0LlmSummarizing { max_size, keep_first, .. } => {
                format!("V0 LLM summarizing: over {max_size} events, keep the first {keep_first} and the newest, summary after the head")
            }
            OpenhandsConfig::StructuredSummary { max_size, keep_first, .. } => {
                format!("V0 structured summary: over {max_size} events, keep the first {keep_first} and the newest, state summary after the head")
            }
            OpenhandsConfig::AmortizedForgetting { max_size, keep_first } => {
                format!("V0 amortized forgetting: over {max_size} events, keep the first {keep_first} and the newest, no summary")
            }
            OpenhandsConfig::LlmAttention { max_size, keep_first } => {
                format!("V0 LLM attention: over {max_size} events, keep the first {keep_first} and the events the model ranks first")
            }
            OpenhandsConfig::ObservationMasking { attention_window } => {
                format!("V0 observation masking: observations older than the last {attention_window} events masked")
            }
            OpenhandsConfig::BrowserOutput { attention_window } => {
                format!("V0 browser output: all but the newest {attention_window} browser outputs reduced to their URL")
            }
            OpenhandsConfig::RecentEvents { keep_first, max_events } => {
                format!("V0 recent events: the first {keep_first} and the newest events, {max_events} in all")
            }
            OpenhandsConfig::ConversationWindow => {
                "V0 conversation window: on overflow keep system, first user message and half of the rest".into()
            }
            OpenhandsConfig::Pipeline(members) => {
                format!("V0 pipeline: {}", members.iter().map(OpenhandsConfig::name).collect::<Vec<_>>().join(" -> "))
            }
        }
    }
}

/// The condenser a strategy runs, validated.
enum Condensers {
    SdkNoOp,
    Sdk(sdk::condenser::Summarizing),
    /// A V0 pipeline (a single condenser is a pipeline of one).
    V0(Vec<Condenser>),
}

fn invalid(message: String) -> Error {
    Error::new(ErrorKind::Other, message)
}

/// The checks V0's rolling condensers make in their constructors.
fn v0_rolling(max_size: i64, keep_first: i64) -> Result<(usize, usize), Error> {
    if keep_first >= max_size.div_euclid(2) {
        return Err(invalid(format!("keep_first ({keep_first}) must be less than half of max_size ({max_size})")));
    }
    if keep_first < 0 {
        return Err(invalid(format!("keep_first ({keep_first}) cannot be negative")));
    }
    if max_size < 1 {
        return Err(invalid(format!("max_size ({max_size}) cannot be non-positive")));
    }
    Ok((max_size as usize, keep_first as usize))
}

fn at_least(name: &str, value: i64, min: i64) -> Result<usize, Error> {
    if value < min {
        return Err(invalid(format!("{name} ({value}) must be at least {min}")));
    }
    Ok(value as usize)
}

fn v0_condenser(config: &OpenhandsConfig) -> Result<Condenser, Error> {
    Ok(match *config {
        OpenhandsConfig::NoOp => Condenser::NoOp,
        OpenhandsConfig::V0LlmSummarizing { max_size, keep_first, max_event_length }
        | OpenhandsConfig::StructuredSummary { max_size, keep_first, max_event_length } => {
            let (max_size, keep_first) = v0_rolling(max_size, keep_first)?;
            let max_event_length = at_least("max_event_length", max_event_length, 0)?;
            let settings = v0::llm_summarizing::LlmSummarizing { max_size, keep_first, max_event_length };
            if matches!(config, OpenhandsConfig::StructuredSummary { .. }) {
                Condenser::StructuredSummary(v0::structured_summary::StructuredSummary(settings))
            } else {
                Condenser::LlmSummarizing(settings)
            }
        }
        OpenhandsConfig::AmortizedForgetting { max_size, keep_first } => {
            let (max_size, keep_first) = v0_rolling(max_size, keep_first)?;
            Condenser::AmortizedForgetting { max_size, keep_first }
        }
        OpenhandsConfig::LlmAttention { max_size, keep_first } => {
            let (max_size, keep_first) = v0_rolling(max_size, keep_first)?;
            Condenser::LlmAttention { max_size, keep_first }
        }
        OpenhandsConfig::ObservationMasking { attention_window } => {
            Condenser::ObservationMasking { attention_window: at_least("attention_window", attention_window, 1)? }
        }
        OpenhandsConfig::BrowserOutput { attention_window } => {
            Condenser::BrowserOutput { attention_window: at_least("attention_window", attention_window, 1)? }
        }
        OpenhandsConfig::RecentEvents { keep_first, max_events } => Condenser::RecentEvents {
            keep_first: at_least("keep_first", keep_first, 0)?,
            max_events: at_least("max_events", max_events, 1)?,
        },
        OpenhandsConfig::ConversationWindow => Condenser::ConversationWindow,
        OpenhandsConfig::LlmSummarizing { .. } | OpenhandsConfig::Pipeline(_) => {
            return Err(invalid(format!("{} cannot be part of a V0 pipeline", config.name())));
        }
    })
}

fn condensers(config: &OpenhandsConfig) -> Result<Condensers, Error> {
    match *config {
        OpenhandsConfig::LlmSummarizing {
            max_size,
            keep_first,
            max_tokens,
            minimum_progress,
            hard_context_reset_max_retries,
            hard_context_reset_context_scaling,
        } => {
            let max_size = at_least("max_size", max_size, 1)?;
            let keep_first = at_least("keep_first", keep_first, 0)?;
            if (max_size / 2) as i64 - keep_first as i64 - 1 <= 0 {
                return Err(invalid(
                    "keep_first must be less than max_size // 2 to leave room for condensation".to_owned(),
                ));
            }
            if !(minimum_progress > 0.0 && minimum_progress < 1.0) {
                return Err(invalid(format!("minimum_progress ({minimum_progress}) must be in (0, 1)")));
            }
            if !(hard_context_reset_context_scaling > 0.0 && hard_context_reset_context_scaling < 1.0) {
                return Err(invalid(format!(
                    "hard_context_reset_context_scaling ({hard_context_reset_context_scaling}) must be in (0, 1)"
                )));
            }
            Ok(Condensers::Sdk(sdk::condenser::Summarizing {
                max_size,
                keep_first,
                max_tokens,
                minimum_progress,
                hard_reset_max_retries: at_least("hard_context_reset_max_retries", hard_context_reset_max_retries, 1)?,
                hard_reset_scaling: hard_context_reset_context_scaling,
            }))
        }
        OpenhandsConfig::NoOp => Ok(Condensers::SdkNoOp),
        OpenhandsConfig::Pipeline(ref members) => {
            Ok(Condensers::V0(members.iter().map(v0_condenser).collect::<Result<_, _>>()?))
        }
        _ => Ok(Condensers::V0(vec![v0_condenser(config)?])),
    }
}

/// OpenHands' condensers as one strategy; the configuration picks the condenser.
pub struct OpenhandsStrategy {
    info: StrategyInfo,
    condensers: Condensers,
}

impl OpenhandsStrategy {
    /// A strategy running `config`, reported as `openhands/<condenser>`. Fails on the
    /// settings the original rejects (e.g. `keep_first >= max_size // 2`).
    pub fn new(config: OpenhandsConfig) -> Result<OpenhandsStrategy, Error> {
        Ok(OpenhandsStrategy {
            info: StrategyInfo {
                id: format!("openhands/{}", config.name()),
                harness: "openhands".into(),
                source: config.source().into(),
                summary: config.summary(),
                fidelity: Fidelity::Source,
            },
            condensers: condensers(&config)?,
        })
    }

    /// `config` reported under `id`: the default row (`openhands`) with a setting of its own,
    /// as the fidelity check runs it.
    pub fn with_id(config: OpenhandsConfig, id: &str) -> OpenhandsStrategy {
        let mut s = OpenhandsStrategy::new(config).expect("built-in configurations are valid");
        s.info.id = id.into();
        s
    }
}

/// The default: the SDK's `default_condenser` (LLM summarizing, `max_size` 80, `keep_first` 4).
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(OpenhandsStrategy::with_id(OpenhandsConfig::default(), "openhands"))
}

/// Every condenser reported as its own row, the default first.
pub fn variants() -> Vec<Box<dyn Strategy>> {
    let v0_summary = |structured: bool| {
        let (max_size, keep_first, max_event_length) = (100, 1, 10_000);
        if structured {
            OpenhandsConfig::StructuredSummary { max_size, keep_first, max_event_length }
        } else {
            OpenhandsConfig::V0LlmSummarizing { max_size, keep_first, max_event_length }
        }
    };
    let configs = [
        // SDK settings defaults (agent-server and GUI settings), distinct from the default above.
        OpenhandsConfig::llm_summarizing(240, 2, None),
        v0_summary(false),
        v0_summary(true),
        OpenhandsConfig::AmortizedForgetting { max_size: 100, keep_first: 1 },
        OpenhandsConfig::RecentEvents { keep_first: 1, max_events: 100 },
        OpenhandsConfig::ObservationMasking { attention_window: 100 },
        OpenhandsConfig::ConversationWindow,
        // The V0 web app's default (`Session` with `enable_default_condenser`).
        OpenhandsConfig::Pipeline(vec![
            OpenhandsConfig::ConversationWindow,
            OpenhandsConfig::BrowserOutput { attention_window: 2 },
            OpenhandsConfig::V0LlmSummarizing { max_size: 120, keep_first: 4, max_event_length: 10_000 },
        ]),
    ];
    let mut out = vec![strategy()];
    for config in configs {
        out.push(Box::new(OpenhandsStrategy::new(config).expect("built-in configurations are valid")));
    }
    out
}

impl Strategy for OpenhandsStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(replay::OpenhandsReplay::new(&self.condensers))
    }

    fn decide(&self, log: &Log, _view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        let Some(request) = request(at) else { return Decision::Skip };
        let stream = Stream::of(log);
        let view = self.condensers.view_from_events(log, &stream);
        let tokens = || Counter::new(cx.tokenizer, &cx.model.name).total(log, &view);
        self.condensers.decide(log, &stream, &view, tokens, request, cx)
    }

    fn compact(&self, log: &Log, _view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let stream = Stream::of(log);
        let view = self.condensers.view_from_events(log, &stream);
        let tokens = || Counter::new(cx.tokenizer, &cx.model.name).total(log, &view);
        self.condensers.condense(log, &stream, &view, tokens, at == Moment::Overflow, cx)
    }

    fn project(&self, log: &Log) -> View {
        let stream = Stream::of(log);
        render::materialize(log, &self.condensers.messages(log, &stream, &self.condensers.view_from_events(log, &stream)))
    }
}

/// Whether the condensers run at `at`, and on a condensation request: before every request,
/// with a request at overflow (the agent appends one and condenses in the same step).
fn request(at: Moment) -> Option<bool> {
    match at {
        // No user command: see the crate docs on manual compaction.
        Moment::TurnEnd | Moment::Manual => None,
        Moment::BeforeRequest => Some(false),
        Moment::Overflow => Some(true),
    }
}

impl Condensers {
    /// `View.from_events`: the SDK view, or the V0 base view.
    fn view_from_events(&self, log: &Log, stream: &Stream) -> Vec<Event> {
        match self {
            Condensers::SdkNoOp | Condensers::Sdk(_) => sdk::view::from_events(log, stream),
            Condensers::V0(_) => v0::view::from_events(log, stream),
        }
    }

    /// The decision for `view` (the SDK view, whose token count is `tokens`, or the V0 base
    /// view) on a condensation request or not.
    fn decide(&self, log: &Log, stream: &Stream, view: &[Event], tokens: impl FnOnce() -> u64, request: bool, cx: &Cx<'_>) -> Decision {
        match self {
            Condensers::SdkNoOp => Decision::Skip,
            Condensers::Sdk(s) => {
                let reasons = s.reasons(view, tokens(), request, cx.model.window);
                if reasons.is_empty() {
                    return Decision::Skip;
                }
                Decision::compact(reasons.iter().map(|r| r.as_str()).collect::<Vec<_>>().join("+"))
            }
            Condensers::V0(pipeline) if v0::pipeline::wants(log, stream, view, pipeline, request) => {
                Decision::compact(if request { "request" } else { "max_size" })
            }
            Condensers::V0(_) => Decision::Skip,
        }
    }

    /// The condensation of `view`, as for [`Condensers::decide`].
    fn condense(&self, log: &Log, stream: &Stream, view: &[Event], tokens: impl FnOnce() -> u64, request: bool, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let checkpoint = match self {
            Condensers::SdkNoOp => None,
            Condensers::Sdk(s) => s.condense(log, view, tokens(), request, cx)?,
            Condensers::V0(pipeline) => v0::pipeline::condense(log, stream, view, pipeline, request, cx)?,
        };
        Ok(checkpoint.into_iter().collect())
    }

    /// The messages sent for `view` (the SDK view, or the V0 base view before the pipeline's
    /// transforms).
    fn messages(&self, log: &Log, stream: &Stream, view: &[Event]) -> Vec<Rendered> {
        match self {
            Condensers::SdkNoOp | Condensers::Sdk(_) => sdk::messages::events_to_messages(log, view),
            Condensers::V0(pipeline) => {
                v0::messages::process_events(log, stream, &v0::pipeline::view(log, stream, view, pipeline))
            }
        }
    }
}

#[cfg(test)]
mod tests;
