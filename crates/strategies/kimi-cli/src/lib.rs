//! Kimi CLI: the context compaction of Moonshot AI's coding agent (`src/kimi_cli/soul`).
//!
//! # Sources
//! - Default (`kimi-cli`): the newest release on PyPI, **`kimi-cli` 1.52.0**, read in
//!   `kimi_cli/soul/compaction.py` (`SimpleCompaction`, `estimate_text_tokens`,
//!   `should_auto_compact`, `CompactionResult.estimated_token_count`), `soul/kimisoul.py`
//!   (`_agent_loop` step 2c, `_step`, `_grow_context`, `compact_context`,
//!   `_compute_completion_overrides`), `soul/context.py` (`token_count_with_pending`),
//!   `llm.py` (`estimate_request_tokens`, `compute_max_completion_tokens`), `config.py`
//!   (`LoopControl`), `soul/message.py`, `background/summary.py` and `prompts/compact.md`.
//!   These files are byte-identical to the spec's canonical commit
//!   `MoonshotAI/kimi-cli@4a550effdfcb29a25a5d325bf935296cc50cd417` (1.49.0); spec
//!   `shared/specs/kimi-cli.md`.
//! - Variant `kimi-cli/k1`: the spec's variant K1,
//!   `MoonshotAI/kimi-cli@3108621c86036b723f36b233127523553f233420` (PR #639), the behaviour the
//!   seed describes: `token_count + reserved_context_size >= max_context_size` on provider usage
//!   only, no ratio, no pending estimate, no output cap, counter 0 after a compaction.
//!
//! # Trigger
//! Before **every** model call of a turn (step 2c of the agent loop, our
//! [`Moment::BeforeRequest`]): compact when `count >= 0.85 · W` or `count + 50_000 >= W`
//! (`compaction_trigger_ratio`, `reserved_context_size`, [`KimiCliConfig`]). `count` is
//! `token_count_with_pending`: the provider usage (`input + output`) of the newest reply since
//! the last compaction — or, right after a compaction, the estimate written by it — plus
//! `floor(chars / 4)` of the text parts of every message appended since. Nothing is checked at
//! a turn's end, and a provider overflow error ([`Moment::Overflow`]) never compacts.
//!
//! `/compact [instruction]` ([`Moment::Manual`], spec (b)): "The context is empty." (nothing
//! happens) while no step has run, else a compaction with no threshold, reported as `manual`
//! or `manual-with-prompt`. The stripped instruction follows the compaction prompt after a
//! blank line, under a bold heading saying the user's custom compaction instruction takes
//! priority over the default priorities (spec (d), `test_prepare_appends_custom_instruction`;
//! K1 had no instruction and drops it). Project memory (AGENTS.md) is in the agent's system
//! prompt, which the summary call does not send (spec (d)): the summarizer never sees it.
//!
//! # Selection
//! `SimpleCompaction.prepare` with `max_preserved_messages = 2`: walking back from the newest
//! message, the second message whose role is user or assistant is the cut. Everything from it on
//! is kept verbatim with no token budget (tool results, media and reasoning included; the cut
//! never lands on a tool message, so calls keep their results). Everything before it is
//! summarized, the previous summary included (summary of a summary). With fewer than two
//! user/assistant messages, or nothing before the cut, no summarizer call is made and nothing is
//! recorded.
//!
//! The summarizer gets the paraphrased one-line compaction system prompt and one user message:
//! for each summarized message a `## Message {i}\nRole: {role}\nContent:\n` header followed by
//! its text parts only (reasoning, media and tool calls are dropped; tool results are text, errors
//! wrapped in `<system>ERROR: …</system>`), joined without separators, then a newline and the
//! paraphrased compaction prompt (six priorities, rules, and the literal output sections
//! `<current_focus>`, `<environment>`, `<completed_tasks>`, `<active_issues>`, `<code_state>`,
//! `<important_context>`). Output cap (Kimi provider): `max(1, min(W, W − (max(post, req) +
//! 1_024)))`, where `post` estimates the next main request after compaction and `req` the
//! summarizer request (`estimate_request_tokens`).
//!
//! The summary becomes one **user** message: the literal text part `<system>Previous context has
//! been compacted. Here is the compaction output:</system>` and then the reply (Kimi drops the
//! reply's think parts). It goes first after the system prompt, followed by the kept tail
//! ([`Window::From`](compactbench_core::Window), [`SummaryPosition::AfterSystem`](compactbench_core::SummaryPosition));
//! running background tasks, if any, are re-announced in a user message after the tail. The
//! counter is then set to `summary output tokens + floor(chars(tail text) / 4)`.
//!
//! # Token estimators
//! - Trigger: provider usage plus `estimate_text_tokens` = `floor(Σ code points of text parts / 4)`
//!   per appended batch (a reply's consecutive tool results form one batch).
//! - Output cap: `estimate_request_tokens`, per string `ceil(ascii / 4) + non-ascii`, over role
//!   names, tool call ids, text and reasoning, 2_000 per media part, and tool call id, name and
//!   arguments.
//!
//! # Failures
//! The summarizer call is tried up to `max_retries_per_step = 3` times when the error is
//! retryable (timeouts, transport errors and empty replies); then the error is returned and
//! nothing is appended (Kimi ends the turn with the error; the next step tries again because the
//! counter is still high). A reply cut off by the cap is accepted as it is; there is no size
//! check, no truncation fallback and no loop breaker.
//!
//! # Layers
//! The algorithm is functions of the log and its view: [`Strategy::project`] (the default
//! projection with injected messages split around the kept tail), the step-2c check with the
//! counter `trigger::token_count_with_pending`, and `compact::compact_context`. A run keeps
//! only the view ([`Incremental::reprojected`]).
//!
//! # Deviations
//! - Deliberate: a "compaction" without a summarizer call (too few messages, nothing before the
//!   cut) rewrites Kimi's context file with the same messages and resets the counter to a text
//!   estimate; we append nothing, because the next model call overwrites that counter before any
//!   check reads it.
//! - Deliberate: our [`Summary`](compactbench_core::Summary) has no reasoning channel, so
//!   dropping think parts from the reply is trivially satisfied; a blank reply stands for
//!   Kimi's empty / think-only reply (`APIEmptyResponseError`, retried).
//! - Deliberate: the runner's sessions have no background tasks, so the active-task message is
//!   implemented and tested but never fires in runs. Kimi's D-Mail (`SendDMail`, disabled in
//!   the default agent) and its `CHECKPOINT` messages, hooks, telemetry, the JSONL file rotation
//!   and the OAuth refresh retry are not reproduced.
//! - Deliberate: the cap's `post` estimate counts the log's leading system messages as the
//!   system prompt but no tool schemas (the strategy does not see them), so it is larger than
//!   Kimi's by their size. The cap is applied only with [`KimiCliConfig::kimi_provider`]
//!   (default true, Kimi's own platform); otherwise the model's `max_output` stands for the
//!   provider default.
//! - Deliberate: `normalize_history` (adjacent user messages merged at request time) is left
//!   to the runner's lowering; the content sent is the same, only OpenAI shapes see two user
//!   messages where Kimi sends one.
//! - Deliberate: a tool message holding several results counts as several Kimi tool messages
//!   (one role and one call id each) in the request estimate; in the summarizer input each
//!   result is one text part under the message's single header.
//! - Deliberate: the `/clear` command is not reproduced.
//! - Deliberate: `tokens_before` is the trigger counter (with pending), where Kimi reports
//!   `token_count` without pending to its hooks.
//! - K1: the media parts K1 still sent to the summarizer cannot travel in a text transcript and
//!   are dropped as in the default (the kimi-cli #1390 API error is not reproduced).
//!
//! # Measured against the original (compactbench-fidelity)
//! `crates/fidelity` runs PyPI `kimi-cli` 1.52.0 itself (`fidelity/kimi-cli/driver.py`) on the
//! same sessions: the log is replayed into Kimi's own `Context` (`append_message`,
//! `update_token_count` with kosong's `TokenUsage.total`, tool messages from
//! `tool_result_to_message`, an earlier compaction's `CompactionResult.estimated_token_count`),
//! then `should_auto_compact(token_count_with_pending, …)` with the `LoopControl` defaults is the
//! trigger and `SimpleCompaction().prepare(history)` the selection; `tokens_before` is
//! `token_count_with_pending` on both sides (see the deviation above). The variant
//! `kimi-cli/k1` is checked against PyPI `kimi-cli` 1.15.0 (`fidelity/kimi-cli-k1/driver.py`),
//! the newest release with K1's rule (3108621c is first released in 0.82; 1.16.0 sets the
//! counter to an estimate after a compaction): the driver runs 1.15.0's own
//! `KimiSoul._agent_loop` up to its first call, so the inline check decides. Agreement figures
//! per row are in `reports/fidelity/report.md` (all 100% at 200 sessions each). Not covered by
//! either: the summarizer's input (media parts), manual `/compact` and background tasks.

use compactbench_core::{default_projection, Checkpoint, Cx, Decision, Error, Fidelity, Incremental, Log, Moment, Origin, Replay, Strategy, StrategyInfo, View};

mod compact;
mod history;
mod prepare;
mod prompt;
mod tasks;
mod tokens;
mod trigger;

/// Kimi CLI's compaction knobs (`[loop_control]` in `config.toml`), with Kimi's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct KimiCliConfig {
    /// `reserved_context_size` (min 1000): compact when `count + reserved >= window`.
    pub reserved_context_size: u64,
    /// `compaction_trigger_ratio` (0.5–0.99): compact when `count >= window · ratio`.
    pub compaction_trigger_ratio: f64,
    /// `max_retries_per_step`: attempts of the summarizer call on retryable errors.
    pub max_retries_per_step: u32,
    /// Whether the model is served by Kimi's own provider, the only one for which Kimi CLI caps
    /// the summary's completion tokens by the room left in the window.
    pub kimi_provider: bool,
}

impl Default for KimiCliConfig {
    fn default() -> KimiCliConfig {
        KimiCliConfig {
            reserved_context_size: 50_000,
            compaction_trigger_ratio: 0.85,
            max_retries_per_step: 3,
            kimi_provider: true,
        }
    }
}

/// Which Kimi CLI the strategy follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// PyPI `kimi-cli` 1.52.0 (= canonical 4a550eff): ratio or reserve, usage plus pending,
    /// text-only summarizer input, output cap, background-task snapshot.
    Pypi1_52,
    /// K1 (3108621c): reserve only, provider usage only, no cap, counter 0 after compaction.
    K1,
}

/// Kimi CLI's compaction (see the crate docs).
pub struct KimiCliStrategy {
    info: StrategyInfo,
    config: KimiCliConfig,
    release: Release,
    /// `SimpleCompaction.max_preserved_messages`; the soul always uses 2 (tests change it).
    max_preserved_messages: usize,
    /// Formatted blocks (`task_id: …` lines) of the background tasks still running. Our
    /// sessions have none; tests fill it.
    active_tasks: Vec<String>,
}

impl KimiCliStrategy {
    /// Kimi CLI as released on PyPI (`kimi-cli` 1.52.0), with `config`.
    pub fn new(config: KimiCliConfig) -> KimiCliStrategy {
        KimiCliStrategy::with_release(config, Release::Pypi1_52)
    }

    /// The spec's variant K1 (MoonshotAI/kimi-cli@3108621c): the reserve-only trigger on
    /// provider usage that the seed describes. `compaction_trigger_ratio` is ignored.
    pub fn k1(config: KimiCliConfig) -> KimiCliStrategy {
        KimiCliStrategy::with_release(config, Release::K1)
    }

    fn with_release(config: KimiCliConfig, release: Release) -> KimiCliStrategy {
        let info = match release {
            Release::Pypi1_52 => StrategyInfo {
                id: "kimi-cli".into(),
                harness: "kimi-cli".into(),
                source: "PyPI kimi-cli 1.52.0 (compaction identical to MoonshotAI/kimi-cli@4a550effdfcb29a25a5d325bf935296cc50cd417)".into(),
                summary: format!(
                    "before every model call, if usage + pending chars/4 >= {} x window or + {} >= window: \
                     summarize all but the last 2 user/assistant messages into a user message",
                    config.compaction_trigger_ratio, config.reserved_context_size
                ),
                fidelity: Fidelity::Source,
            },
            Release::K1 => StrategyInfo {
                id: "kimi-cli/k1".into(),
                harness: "kimi-cli".into(),
                source: "MoonshotAI/kimi-cli@3108621c86036b723f36b233127523553f233420".into(),
                summary: format!(
                    "before every model call, if last usage + {} >= window: summarize all but the last 2 \
                     user/assistant messages into a user message",
                    config.reserved_context_size
                ),
                fidelity: Fidelity::Source,
            },
        };
        KimiCliStrategy { info, config, release, max_preserved_messages: 2, active_tasks: Vec::new() }
    }
}

/// The default: Kimi CLI as released on PyPI (`kimi-cli` 1.52.0).
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(KimiCliStrategy::new(KimiCliConfig::default()))
}

/// Every row to report: the release (`kimi-cli`), then the spec's variant K1 (`kimi-cli/k1`).
pub fn variants() -> Vec<Box<dyn Strategy>> {
    vec![strategy(), Box::new(KimiCliStrategy::k1(KimiCliConfig::default()))]
}

impl Strategy for KimiCliStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::reprojected(self))
    }

    fn decide(&self, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        // `/compact [instruction]` runs without any threshold, once a step has run.
        if at == Moment::Manual {
            return if compact::is_empty(log, view) { Decision::Skip } else { Decision::compact("manual") };
        }
        // Kimi checks only at step 2c, before each model call; an overflow error from the
        // provider ends the step instead.
        if at != Moment::BeforeRequest {
            return Decision::Skip;
        }
        let count = trigger::token_count_with_pending(trigger::anchor(log), view, self.release);
        let ratio = match self.release {
            Release::Pypi1_52 => Some(self.config.compaction_trigger_ratio),
            Release::K1 => None,
        };
        if trigger::should_auto_compact(count, cx.model.window, ratio, self.config.reserved_context_size) {
            Decision::compact("auto")
        } else {
            Decision::Skip
        }
    }

    fn compact(&self, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        if at == Moment::Manual {
            return compact::manual(self, log, view, cx.manual.unwrap_or(""), cx);
        }
        compact::compact_context(self, log, view, &compact::Trigger::Auto, cx)
    }

    /// The default projection, except that re-injected messages Kimi appends after the kept
    /// tail (the background-task note) come after it, not before.
    fn project(&self, log: &Log) -> View {
        let mut view = default_projection(log);
        let Some((anchor, cp)) = trigger::anchor(log) else {
            return view;
        };
        let leading = cp.details.get(compact::LEADING_INJECTED).and_then(serde_json::Value::as_u64).unwrap_or(0) as usize;
        let mut seen = 0;
        let mut trailing = Vec::new();
        view.messages.retain(|vm| {
            if vm.origin != Origin::Injected(anchor) {
                return true;
            }
            seen += 1;
            if seen <= leading {
                return true;
            }
            trailing.push(vm.clone());
            false
        });
        let at = view.messages.iter().position(|vm| vm.origin.entry().is_some_and(|e| e > anchor)).unwrap_or(view.messages.len());
        view.messages.splice(at..at, trailing);
        view
    }
}

#[cfg(test)]
mod tests;
