//! DeepSeek Harness: the `compaction-basic` engine with the optional tool-result pruner.
//!
//! # Sources
//! Read in source at `deepseek-ai/deepseek-harness@b150a551b8d465e31e418e1b2eaf5e79bbb7d28e`
//! (release "0.1.1-rc.2"): `packages/compaction/compaction-basic/src/{index,region,summarizer,config,types}.ts`
//! (engine, `selectCompactableRange`, the compaction transaction, `COMPACTION_INSTRUCTION`,
//! checkpoint framing, `BasicCompactionConfig` defaults), `packages/compaction/compaction/src/tool-pairing.ts`
//! (balanced cuts), `packages/compaction/compaction-tool-result-pruner/src/{index,config}.ts`
//! (pruner), `packages/llm/token-meter/src/{estimate,index,surface-fold}.ts` (estimator and
//! pressure measurement), `packages/core/agent-loop/src/agent.ts` (when `agent/pre-step` runs),
//! and the CLI preset `apps/cli/config/agent-presets/code/agent.cordis.yml` (which loads the
//! engine with its defaults plus the pruner at 8192 / 4096 / 1024). Spec:
//! `shared/specs/deepseek-harness.md`.
//!
//! # Trigger
//! `agent/pre-step`, before every model request once the previous step's reply and all its
//! tool results are in the log: pressure `totalTokens >= floor(window × thresholdRatio)`
//! (defaults in [`DeepseekHarnessConfig`]: ratio 0.8, retain ratio 0.16, summary cap 8192,
//! `compactionRetries` 1, `maxOverflowRetries` 1). The agent loop runs the pre-step hook
//! *before* it appends the step's new user message, so the first request of a turn is checked
//! at [`Moment::TurnEnd`] (without the new user message) and later requests of the turn at
//! [`Moment::BeforeRequest`]; a `BeforeRequest` whose newest message is a user message is that
//! already-checked first step and is skipped. Nothing is checked before the first routed
//! request (no assistant reply in the log yet), nor while a tool call is unanswered. A window
//! of 0 stands for a model without known capacity: warn and never compact on pressure. A
//! `retainTokens` that is not below the threshold is a per-target configuration error with the
//! same effect.
//!
//! Overflow ([`Moment::Overflow`], the runner's stand-in for `CONTEXT_WINDOW_EXCEEDED`): while
//! fewer than `maxOverflowRetries` overflow recoveries happened since the newest assistant
//! reply (the original resets its counter on each successful reply), prune, then compact with
//! a retained budget of 0, and let the runner retry the request. If neither the pruner nor the
//! summary changed anything there is no retry and the provider's error stands.
//!
//! Manual ([`Moment::Manual`]): a bare `/compact` (`command-compact`, idle sessions only,
//! which the prompt between turns is) compacts with a retained budget of 0 and no pruner
//! (spec (b), (c)), whether or not automatic compaction is on. The command takes no
//! arguments: `/compact <text>` is a usage error and compacts nothing, so typed instructions
//! never reach the summarizer. Project memory reaches the summary call only as context: the
//! call reuses the last request's system prompt (spec (d)), where our sessions keep it, and
//! appends only `COMPACTION_INSTRUCTION`.
//!
//! # Selection, summary, checkpoint
//! Pruner first (once pressure qualifies; always on overflow): every tool result longer than
//! 8192 code points becomes its first 4096 code points, the literal marker
//! `\n\n[... tool result middle pruned ...]\n\n`, and its last 1024 code points (a
//! [`CheckpointKind::Prune`](compactbench_core::CheckpointKind) checkpoint of whole-message
//! replacements); recent results too; idempotent. Re-measured below the threshold, no summary.
//!
//! `selectCompactableRange`: walk the surface (everything after the system prompt, the
//! previous checkpoint included) from the newest node, summing prices, and stop at the first
//! node where the sum reaches `retainTokens`; that node is the first kept one. Move the cut
//! earlier while any tool call is still open across it (a running count, `+` calls of each
//! assistant message, `−1` per tool result; turn boundaries are not protected). Reaching the
//! head means nothing to compact. Everything before the cut — always head-anchored, so an
//! earlier checkpoint is re-summarized with newer history (CBR-001) — goes to the summarizer:
//! the session's system prompt, the shadowed messages verbatim as the harness's own JSON
//! messages (one per line; a tool result is its own user-role message), then a final user
//! message with the instruction (paraphrased; the eight section headings and the literal
//! `<compacted-summary>` tag kept), capped at `maxTokens`.
//!
//! The checkpoint is **one user-role message** of three text blocks: a preamble
//! (paraphrased) plus `\n\n<compacted-summary>`, the summary, `</compacted-summary>`. It goes
//! first after the system prompt ([`Window::From`](compactbench_core::Window) the first kept
//! message, [`SummaryPosition::AfterSystem`](compactbench_core::SummaryPosition)); the kept
//! messages follow unchanged and nothing is re-injected. Shadowed messages stay in the
//! append-only log (the original's "shadowed events"); no tool exposes them to the model.
//!
//! Pressure path: at most `compactionRetries + 1` (= 2) compactions per check, re-measuring
//! after each; still at or above the threshold after the last one, the original throws and
//! its listener warns and lets the turn continue: the landed checkpoints are returned and the
//! last one's `details.warning` records the message.
//!
//! # Token estimator
//! The token meter's heuristic (`meter.rs`): per content block `ceil(len / 4) + 4` for text
//! and reasoning, `ceil(len(name) / 4) + ceil(len(arguments JSON) / 4) + 4` for a tool call, a
//! tool result's content plus 4, and `+4` per message; system prompt `ceil(len / 4) + 4`.
//! Lengths are UTF-16 units (the pruner's threshold counts code points). The total is
//! **anchored to provider usage**: at the newest assistant reply the meter records the
//! surface as it stood at that step's start plus the reply, and the baseline is the reply's
//! provider total (`usageTokens`: `inputTokens + cacheReadTokens + cacheWriteTokens +
//! outputTokens`, [`Usage::total`](compactbench_core::Usage::total)) when that is at least the heuristic price of
//! the same request, else the heuristic price; pressure = baseline + (surface now − surface at
//! the anchor). The step's start precedes the step's own new user message, so that message is
//! counted twice (in the provider usage and in the delta) until the next reply re-anchors; this
//! is reproduced.
//!
//! # Failures
//! Shrink rule: the framed checkpoint's estimate must be below the shadowed nodes' estimate,
//! else [`ErrorKind::Rejected`](compactbench_core::ErrorKind). A summary stopped at the
//! output cap (`MAX_TOKENS`) is rejected too; an empty one is
//! [`ErrorKind::EmptySummary`](compactbench_core::ErrorKind); summarizer errors pass through.
//! A failed summary is not retried (the retry loop only repeats after a *successful*
//! compaction that left pressure too high) and leaves the log unchanged.
//!
//! # Deviations
//! - Deliberate (seam): the original logs a failed attempt (`compaction/start`,
//!   `compaction/end{error}`); here a failure returns `Err` and appends nothing, and the
//!   runner records the failed compaction. When a pruning pass or an earlier attempt of the
//!   same check already landed, the original keeps it and only warns about the later failure;
//!   we return the landed checkpoints and put the failure in the last one's `details.warning`
//!   (one call cannot return both checkpoints and an error).
//! - Deliberate (seam): the request envelope holds no tool schemas in our sessions, so the
//!   meter's tools term is 0 and the summarizer gets no tool schemas (the original replays them
//!   for the prefix cache). The system prompt is the log's leading system messages joined by
//!   a blank line; a later system message is a surface node.
//! - Deliberate: an image is priced as the original prices its block (`4 + ceil(JSON / 4)`),
//!   over a stand-in attachment reference of fixed shape (id, media type, byte size and
//!   dimensions are not in our messages); the summarizer gets the same stand-in.
//! - Deliberate: a tool message carrying several results is one surface node priced as that
//!   many tool-result messages; no cut can fall between them anyway.
//! - Deliberate: the original runs the closing pre-step of a turn and the opening pre-step
//!   of the next one back to back; both fall at [`Moment::TurnEnd`] and are one check here.
//! - Deliberate: the compaction lock (`busy`), the stability re-check
//!   (nothing changes the log while we summarize), per-model policies and a separate
//!   summarization model are not modelled.
//! - Deliberate: "overflow retries since the last successful reply" is read from the log:
//!   recoveries are counted after the newest assistant message, since every assistant
//!   message in a replayed session was received.

use compactbench_core::{Checkpoint, Cx, Decision, Error, ErrorKind, Fidelity, Incremental, Log, Moment, Replay, Strategy, StrategyInfo, View};

mod meter;
mod prompt;
mod prune;
mod region;

use meter::measure;
use region::{select, Trigger};

/// `BasicCompactionConfig` plus the pruner's settings, with the defaults of the CLI's
/// `code` preset (engine defaults, pruner 8192 / 4096 / 1024).
#[derive(Clone, Debug, PartialEq)]
pub struct DeepseekHarnessConfig {
    /// `thresholdRatio`: compact when pressure reaches `floor(window × ratio)`.
    pub threshold_ratio: f64,
    /// `retainRatio`: the verbatim tail budget, `floor(window × ratio)`.
    pub retain_ratio: f64,
    /// `retainTokens`: an absolute tail budget used instead of `retain_ratio` when set (the
    /// original makes the two mutually exclusive).
    pub retain_tokens: Option<u64>,
    /// `maxTokens`: output cap of the summary call.
    pub max_tokens: u64,
    /// `compactionRetries`: extra compactions in one check while pressure stays too high.
    pub compaction_retries: u32,
    /// `maxOverflowRetries`: overflow recoveries before the next successful reply; 0 disables.
    pub max_overflow_retries: u32,
    /// `auto`: the pre-step pressure and overflow listeners.
    pub auto: bool,
    /// Whether the tool-result pruner service is loaded.
    pub prune_tool_results: bool,
    /// Pruner `thresholdChars` (code points).
    pub prune_threshold_chars: usize,
    /// Pruner `headChars`.
    pub prune_head_chars: usize,
    /// Pruner `tailChars`.
    pub prune_tail_chars: usize,
}

impl Default for DeepseekHarnessConfig {
    fn default() -> DeepseekHarnessConfig {
        DeepseekHarnessConfig {
            threshold_ratio: 0.8,
            retain_ratio: 0.16,
            retain_tokens: None,
            max_tokens: 8192,
            compaction_retries: 1,
            max_overflow_retries: 1,
            auto: true,
            prune_tool_results: true,
            prune_threshold_chars: 8192,
            prune_head_chars: 4096,
            prune_tail_chars: 1024,
        }
    }
}

/// Token budgets of one model: `thresholdTokens` and `retainTokens`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budgets {
    pub(crate) threshold: u64,
    pub(crate) retain: u64,
}

/// DeepSeek Harness compaction (see the crate docs).
pub struct DeepseekHarnessStrategy {
    info: StrategyInfo,
    config: DeepseekHarnessConfig,
}

impl DeepseekHarnessStrategy {
    /// The strategy with `config`, validated as the plugin loader does.
    pub fn new(config: DeepseekHarnessConfig) -> Result<DeepseekHarnessStrategy, Error> {
        let config_error = |m: String| Err(Error::new(ErrorKind::Other, format!("BasicCompactionConfig: {m}")));
        let ratio_ok = |r: f64| r.is_finite() && r > 0.0 && r <= 1.0;
        if !ratio_ok(config.threshold_ratio) {
            return config_error(format!("thresholdRatio ({}) must be a number in (0, 1]", config.threshold_ratio));
        }
        if config.retain_tokens.is_none() {
            if !ratio_ok(config.retain_ratio) {
                return config_error(format!("retainRatio ({}) must be a number in (0, 1]", config.retain_ratio));
            }
            if config.retain_ratio >= config.threshold_ratio {
                return config_error(format!(
                    "retainRatio ({}) must be less than the resolved thresholdRatio ({})",
                    config.retain_ratio, config.threshold_ratio
                ));
            }
        }
        if config.max_tokens == 0 {
            return config_error("maxTokens (0) must be a positive integer".into());
        }
        if config.prune_tool_results {
            let emitted = config.prune_head_chars + prune::PRUNE_MARKER.chars().count() + config.prune_tail_chars;
            if config.prune_threshold_chars == 0 || emitted > config.prune_threshold_chars {
                return Err(Error::new(
                    ErrorKind::Other,
                    format!(
                        "ToolResultPruneConfig: headChars + marker + tailChars ({emitted}) must be at most thresholdChars ({})",
                        config.prune_threshold_chars
                    ),
                ));
            }
        }
        let retain = match config.retain_tokens {
            Some(t) => format!("{t} tokens"),
            None => format!("{} of the window", config.retain_ratio),
        };
        Ok(DeepseekHarnessStrategy {
            info: StrategyInfo {
                id: "deepseek-harness".into(),
                harness: "deepseek-harness".into(),
                source: "deepseek-ai/deepseek-harness@b150a551b8d465e31e418e1b2eaf5e79bbb7d28e (0.1.1-rc.2)".into(),
                summary: format!(
                    "before each request, if estimated pressure >= {} of the window: prune tool results > {} chars, \
                     then summarize the head into one user-role checkpoint keeping a balanced tail of >= {retain} \
                     (at most {} tries); overflow: prune + keep the last unit, retry once",
                    config.threshold_ratio,
                    config.prune_threshold_chars,
                    config.compaction_retries + 1
                ),
                fidelity: Fidelity::Source,
            },
            config,
        })
    }

    /// `resolveCompactSpec`: the window's budgets, or the per-target configuration error the
    /// pressure listener warns about once and skips.
    pub(crate) fn budgets(&self, window: u64) -> Result<Budgets, Error> {
        if window == 0 {
            return Err(Error::new(
                ErrorKind::Other,
                "compaction-basic: no context capacity for the routed model; configure contextWindow on that adapter model",
            ));
        }
        // f64 arithmetic and floor, as `Math.floor(contextWindow * ratio)`.
        let threshold = (window as f64 * self.config.threshold_ratio).floor() as u64;
        let retain = self.config.retain_tokens.unwrap_or_else(|| (window as f64 * self.config.retain_ratio).floor() as u64);
        if retain >= threshold {
            return Err(Error::new(
                ErrorKind::Other,
                format!("BasicCompactionConfig: retainTokens ({retain}) must be less than threshold tokens {threshold}"),
            ));
        }
        Ok(Budgets { threshold, retain })
    }

    /// Whether the pressure listener would act now: a routed request exists, no tool call is
    /// open, the budgets resolve, pressure qualifies, and pruning or a range would do something.
    fn pressure_qualifies(&self, log: &Log, view: &View, at: Moment, window: u64) -> bool {
        let newest = log.messages().next_back().map(|(_, m)| m.role);
        if at == Moment::BeforeRequest && newest == Some(compactbench_core::Role::User) {
            return false;
        }
        if !log.messages().any(|(_, m)| m.role == compactbench_core::Role::Assistant) {
            return false;
        }
        let Ok(budgets) = self.budgets(window) else { return false };
        let m = measure(log, view);
        if !meter::balanced_at_tail(&m.nodes) {
            return false;
        }
        if m.total < budgets.threshold {
            return false;
        }
        self.would_prune(view) || matches!(select(&m.nodes, budgets.retain), Ok(Some(_)))
    }

    fn would_prune(&self, view: &View) -> bool {
        self.config.prune_tool_results && prune::would_prune(view, &self.config)
    }
}

/// The default configuration.
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(DeepseekHarnessStrategy::new(DeepseekHarnessConfig::default()).expect("the defaults are valid"))
}

impl Strategy for DeepseekHarnessStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::default_view(self))
    }

    fn decide(&self, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        if at == Moment::Manual {
            // `/compact` takes no arguments: anything typed after it is a usage error and
            // nothing runs (spec (b)); a bare one runs whether or not `auto` is on.
            let bare = cx.manual.is_none_or(|typed| typed.trim().is_empty());
            let m = measure(log, view);
            return if bare && matches!(select(&m.nodes, 0), Ok(Some(_))) { Decision::compact(Trigger::Manual.as_str()) } else { Decision::Skip };
        }
        if !self.config.auto {
            return Decision::Skip;
        }
        match at {
            Moment::Overflow => {
                if region::overflow_recoveries(log) >= self.config.max_overflow_retries {
                    return Decision::Skip;
                }
                let m = measure(log, view);
                if self.would_prune(view) || matches!(select(&m.nodes, 0), Ok(Some(_))) {
                    Decision::compact(Trigger::Overflow.as_str())
                } else {
                    Decision::Skip
                }
            }
            // Answered above.
            Moment::Manual => Decision::Skip,
            Moment::TurnEnd | Moment::BeforeRequest => {
                if self.pressure_qualifies(log, view, at, cx.model.window) {
                    Decision::compact(Trigger::Pressure.as_str())
                } else {
                    Decision::Skip
                }
            }
        }
    }

    fn compact(&self, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let trigger = match at {
            Moment::Overflow => Trigger::Overflow,
            Moment::Manual => Trigger::Manual,
            Moment::TurnEnd | Moment::BeforeRequest => Trigger::Pressure,
        };
        region::compact_if_needed(self, &self.config, log, view, trigger, cx)
    }
}

#[cfg(test)]
mod tests;
