//! Gemini CLI: "chat compression" of Google's Gemini CLI (`packages/core`), with the tool
//! output masking and truncation that run next to it by default.
//!
//! # Sources
//! - Reference: the newest npm release of `@google/gemini-cli-core`, **0.61.0** (dist-tag
//!   `latest` when this crate was written), read in `dist/src/context/chatCompressionService.js`,
//!   `context/toolOutputMaskingService.js`, `core/client.js` (`processTurn`, `tryCompressChat`),
//!   `core/geminiChat.js` (`getHistory`, `setHistory`, `lastPromptTokenCount`),
//!   `utils/tokenCalculation.js`, `utils/fileUtils.js`, `scheduler/tool-executor.js`,
//!   `prompts/snippets.js`, `config/config.js`, `config/models.js`, `core/tokenLimits.js`.
//! - Spec: `shared/specs/gemini-cli.md`, canonical commit
//!   `google-gemini/gemini-cli@5411f113cafae26161b4969b0237b8e1e024e2c2`. Every constant and
//!   step the spec names was checked against 0.61.0 and is unchanged. The spec's JSON lengths
//!   66/68/66/68/65 in case 2 are the upstream test's comments; the real lengths are
//!   63/65/63/65/63, with the same split points.
//!
//! # Trigger
//! At [`Moment::BeforeRequest`] only (Gemini CLI checks at the start of every
//! `sendMessageStream`: new prompts and tool-result continuations). The pending request — the
//! messages after the newest assistant message — is not part of the history yet.
//! Compression is due when `lastPromptTokenCount >= threshold × tokenLimit`, `threshold` =
//! `model.compressionThreshold` ([`GeminiCliConfig::compression_threshold`], default 0.5,
//! 0 meaning unset), `tokenLimit` = the model's window. `lastPromptTokenCount` is the provider's
//! prompt size of the newest reply ([`Usage::prompt`](compactbench_core::Usage::prompt):
//! `promptTokenCount`, cached part included; writes a provider reports apart are prompt too),
//! or, when a checkpoint replaced the history after that reply, the local estimate of the new
//! history (kept in the checkpoint's `details`). No compaction on an overflow error
//! ([`Moment::Overflow`] is skipped) and none at [`Moment::TurnEnd`].
//!
//! [`Moment::Manual`] is `/compress` (aliases `/summarize`, `/compact`):
//! `tryCompressChat(promptId, force=true)`, the compression alone with no threshold test and
//! no failure latch (spec (b)). The command takes no arguments, so what the user types after it
//! is dropped. Project memory (GEMINI.md) lives in the agent's system instruction, which the
//! compression call replaces with the compression prompt (spec (d)); it is put back into the new
//! chat's system instruction, not given to the summarizer.
//!
//! Every compaction does, in order, what `processTurn` does before a request:
//! 1. **Tool-time truncation** (checkpoint `Offload`): shell results in the pending request
//!    longer than `min(4 × (window − lastPromptTokenCount), 40 000)` characters are saved to
//!    `tool-outputs/session-<id>/<tool>_<callId>.txt` and cut to their first 20 % and last 80 %.
//! 2. **Compression** (`tryCompressChat`, checkpoint `Summary`):
//!    - the curated history (invalid model runs dropped; for Gemini 2/3 and non-Gemini models,
//!      i.e. every model the bench runs, thoughts stripped and same-role entries merged) first
//!      goes through the reverse token budget: newest first, function responses beyond
//!      50 000 estimated tokens are saved to `tool-outputs/<tool>_<n>.txt` and cut to
//!      `min(4 × (window − lastPromptTokenCount), 40 000)` characters (kept tail included);
//!    - the split is the first user entry without a function response at or after 70 % of the
//!      history's `JSON.stringify` characters; failing that, everything when the history ends
//!      with a model entry without a function call, else the last such user entry before the
//!      mark (0: nothing to do);
//!    - two summarizer calls get the slice before the split as Gemini `Content` JSON, one per
//!      line (the original untruncated slice unless its estimate reaches the window): a
//!      `<state_snapshot>` request (anchored "integrate the previous snapshot" when the slice
//!      contains `<state_snapshot>`), then a verification pass replaying the draft as the
//!      model's answer; the final text is the trimmed verification reply, else the draft.
//!      The system instruction is the compression prompt (paraphrased); no output cap is set
//!      upstream, so the model's own maximum output is passed;
//!    - the new history is `[summary (user), "Got it. Thanks for the additional context!"
//!      (model), kept entries…]`: the summary is a bare user message first after the system
//!      prompt ([`SummaryPosition::AfterSystem`](compactbench_core::SummaryPosition)), the
//!      acknowledgement an injected assistant message, the kept tail and the pending request
//!      a [`Window::Kept`](compactbench_core::Window) list, truncated outputs replacements.
//! 3. **Masking** (`ToolOutputMaskingService`, checkpoint `Mask`): on the history after step 2,
//!    the newest entry skipped, function responses of tools other than `activate_skill`,
//!    `ask_user`, `enter_plan_mode`, `exit_plan_mode` are protected up to 50 000 estimated
//!    tokens (newest first); once at least 30 000 tokens lie beyond that line, each of them is
//!    saved to `tool-outputs/session-<id>/…` and replaced by a `<tool_output_masked>` preview
//!    (shell: first and last 10 lines; others: first and last 250 characters of the JSON),
//!    where that saves tokens. No rule counts "tool turns"; the exempt tools are interaction
//!    tools, not retrieval tools (spec (k)).
//!
//! Every saved file is an [`Offload`](compactbench_core::Offload) in the virtual store and its
//! path is named in the rewritten output, so the content stays recoverable.
//!
//! # Failures (spec (g))
//! - Both summary replies blank: [`ErrorKind::EmptySummary`](compactbench_core::ErrorKind);
//!   not latched, the next request tries again.
//! - The new history's estimate above `lastPromptTokenCount`
//!   (`COMPRESSION_FAILED_INFLATED_TOKEN_COUNT`): [`ErrorKind::Rejected`](compactbench_core::ErrorKind),
//!   the log unchanged, and `hasFailedCompressionAttempt` is latched for the session. From
//!   then on a due compression makes no summarizer call: it installs the budget-truncated
//!   history if that is smaller (`CONTENT_TRUNCATED`, checkpoint `Truncate`), else nothing.
//! - Summarizer errors propagate unchanged (the original's turn ends); not latched.
//! - The stop reason of the replies is not looked at, as upstream.
//!
//! # Token estimator
//! `estimateTokenCountSync` (private module `tokens`): ASCII UTF-16 code units 1/4 token,
//! others 1.5, texts over 100 000 units `length / 4`; function responses
//! `(name + JSON.stringify(response)) / 4`; images 3000, PDFs 25 800, other parts
//! `JSON.stringify(part) / 4`; floored once per call. The split measures
//! `JSON.stringify(content).length`. Tool results map to `{output: text}`, failed ones to
//! `{error: text}`; media to `{inlineData: {mimeType, data}}` with 4 characters of data per
//! token.
//!
//! # Deviations
//! - Deliberate: `tokenLimit(model)` is the bench model's window, not Gemini CLI's table
//!   (1 048 576 for every Gemini model), so thresholds scale with the bench's windows; the
//!   absolute constants (50 000-token budget, masking 50 000 / 30 000, 40 000 characters)
//!   stay as upstream.
//! - Deliberate: no `<session_context>` entry. Our sessions have no environment-context
//!   message, so none is re-created after compression or counted in the new estimate.
//! - Deliberate: the overflow pre-check (`ContextWindowWillOverflow`) cannot stop the runner
//!   from sending; when it would refuse, the last checkpoint's `details` record
//!   `context_window_will_overflow` (only when a checkpoint is appended).
//! - Seam: the `hasFailedCompressionAttempt` latch is session state that a failed compaction
//!   cannot put in the log and that `Cx::failures` cannot tell apart from other failures; it
//!   is kept as the marker file `compactbench/gemini-cli/hasFailedCompressionAttempt` in the
//!   session's virtual store.
//! - Deliberate: an inflation rejection is returned as an error, so the masking that the
//!   original still runs on that request waits for the next request; likewise a tool-time
//!   truncation computed in the same call is lost when compression fails.
//! - Deliberate: a latched truncation-only pass that truncates nothing is not recorded
//!   (upstream it re-installs the same history, resetting only the counter).
//! - Deliberate: `/compress` (forced compression) is not driven by the runner; it exists
//!   internally and is exercised by the tests.
//! - Deliberate: thoughts are stripped from the summarizer input and split, but the kept
//!   messages keep their reasoning parts in the view (the Gemini request shape drops them).
//! - Deliberate: summarizer retries (`retryWithBackoff`, up to 5 attempts) are the
//!   summarizer's business; one failed call fails the compaction.
//! - Deliberate: file names use a fixed project temp dir and session id, and the random part of
//!   masked-output names is the log entry id. The pointer sentences in truncated and masked
//!   outputs are the original's short literal markers, as masking keeps a snippet only where it
//!   saves tokens: a paraphrase of another length flipped a 706-character output in the
//!   fidelity check.
//! - Deliberate: the shell tool is recognized through [`compactbench_core::tools::tool_kind`],
//!   as sessions use other harnesses' tool names.
//! - Not modelled: the `PreCompress` hook, IDE context, `countTokens` calls for media (the
//!   estimate is used), the off-by-default context-management pipeline (spec names it a later
//!   variant `gemini-cli/cm`; not specced, not built).
//!
//! # Measured against the original (compactbench-fidelity)
//! `fidelity/gemini-cli/driver.mjs` runs 0.61.0's own `ChatCompressionService.compress`
//! (`context/chatCompressionService.js`: the threshold check, `truncateHistoryToBudget`,
//! `findCompressSplitPoint`, the inflation check) on a real `GeminiChat` built from the case
//! (`getHistory(true)`: curation, thought stripping, coalescing), with
//! `Config.getTruncateToolOutputThreshold` and `tokenLimit` set to the case's window; only the
//! summarizer call is mocked. On 918 cases (fresh and history, 10 scenarios) trigger, kept set
//! and tokens-before agree on every case. One known difference, deliberate (see above):
//! - The original's new history starts with the `<session_context>` entry of
//!   `getInitialChatHistory` (utils/environmentContext.js), counted in `newTokenCount`, while
//!   the exported history (our log) has none. When a compression saves nothing (a previous
//!   snapshot and its acknowledgement replaced by a same-sized one), the original reports
//!   `COMPRESSION_FAILED_INFLATED_TOKEN_COUNT` by exactly that entry's 73 tokens and we
//!   compress (11 of 918 cases, `long-turn`/`parallel-calls` history cases). In a real Gemini
//!   CLI session the entry is in the old history too, so equal sizes is the like-for-like
//!   comparison.
//! - Not measured: masking and tool-time truncation as triggers of their own (the driver asks
//!   the compression trigger; in every case where they would fire, compression was due too).

use compactbench_core::{Checkpoint, Cx, Decision, Error, Fidelity, Incremental, Log, Moment, Replay, Strategy, StrategyInfo, View};

mod compress;
mod history;
mod mask;
mod prompt;
mod rewrite;
mod tokens;
mod truncate;
mod turn;

#[cfg(test)]
mod tests;

/// Gemini CLI's settings that shape compaction, with its defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct GeminiCliConfig {
    /// `model.compressionThreshold`: compression starts when the last prompt reaches this
    /// fraction of the window (0 means unset, i.e. 0.5).
    pub compression_threshold: f64,
    /// `tools.truncateToolOutputThreshold` in characters; at most 0 disables tool-time
    /// truncation.
    pub truncate_tool_output_threshold: i64,
    /// `contextManagement.tools.outputMasking.protectionThresholdTokens`.
    pub masking_protection_threshold_tokens: u64,
    /// `contextManagement.tools.outputMasking.minPrunableThresholdTokens`.
    pub masking_min_prunable_threshold_tokens: u64,
    /// `contextManagement.tools.outputMasking.protectLatestTurn`.
    pub masking_protect_latest_turn: bool,
}

impl Default for GeminiCliConfig {
    fn default() -> GeminiCliConfig {
        GeminiCliConfig {
            compression_threshold: 0.5,
            truncate_tool_output_threshold: 40_000,
            masking_protection_threshold_tokens: 50_000,
            masking_min_prunable_threshold_tokens: 30_000,
            masking_protect_latest_turn: true,
        }
    }
}

impl GeminiCliConfig {
    /// `getCompressionThreshold() ?? DEFAULT_COMPRESSION_TOKEN_THRESHOLD`: a falsy setting
    /// (0, NaN) is unset.
    pub(crate) fn threshold(&self) -> f64 {
        let t = self.compression_threshold;
        if t == 0.0 || t.is_nan() {
            0.5
        } else {
            t
        }
    }

    pub(crate) fn masking(&self) -> mask::MaskConfig {
        mask::MaskConfig {
            protection_threshold_tokens: self.masking_protection_threshold_tokens,
            min_prunable_threshold_tokens: self.masking_min_prunable_threshold_tokens,
            protect_latest_turn: self.masking_protect_latest_turn,
        }
    }
}

/// Gemini CLI's chat compression with tool output masking (see the crate docs).
pub struct GeminiCliStrategy {
    info: StrategyInfo,
    config: GeminiCliConfig,
}

impl GeminiCliStrategy {
    /// Gemini CLI as released in npm `@google/gemini-cli-core` 0.61.0, with `config`.
    pub fn new(config: GeminiCliConfig) -> GeminiCliStrategy {
        GeminiCliStrategy {
            info: StrategyInfo {
                id: "gemini-cli".into(),
                harness: "gemini-cli".into(),
                source: "npm @google/gemini-cli-core@0.61.0 (spec canonical google-gemini/gemini-cli@5411f113cafae26161b4969b0237b8e1e024e2c2)".into(),
                summary: format!(
                    "before every request, if the last prompt >= {} x window: <state_snapshot> summary (2 calls) of all \
                     before the first real user message past 70% of the history; tool outputs beyond 50k tokens cut, \
                     masked beyond 50k+30k",
                    config.threshold()
                ),
                fidelity: Fidelity::Source,
            },
            config,
        }
    }
}

/// The default: Gemini CLI 0.61.0 with its default settings.
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(GeminiCliStrategy::new(GeminiCliConfig::default()))
}

impl Strategy for GeminiCliStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::default_view(self))
    }

    fn decide(&self, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        turn::decide(&self.config, log, view, at, cx)
    }

    fn compact(&self, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        if at == Moment::Manual {
            return Ok(turn::compress_now(&self.config, log, view, cx, true)?.into_iter().collect());
        }
        turn::before_request(&self.config, log, view, cx)
    }
}
