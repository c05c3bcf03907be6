//! oh-my-pi ("omp", can1357/oh-my-pi): Pi's coding agent forked with its own trigger and an
//! ordered list of context-maintenance methods — `remote`, `snapcompact`, `handoff`, `shake`,
//! `soft` — plus per-turn tool-output pruning.
//!
//! # Sources
//! The newest release on npm, read in full where it matters (spec: `shared/specs/oh-my-pi.md`):
//! - `@oh-my-pi/pi-coding-agent` **18.3.4**: `src/session/session-maintenance.ts`
//!   (`checkCompaction`, `runPrePromptCompactionIfNeeded`, `maintainContextMidRun`,
//!   `runAutoCompaction`, `#runAutoShake`, `shake`, `#commitAutoCompactionResult`,
//!   `#rescueCompactionDeadEnd`, `#pruneToolOutputs`, `#pruneStaleToolResults`),
//!   `compaction-methods.ts`, `context-settings.ts`, `session-handoff.ts` (`generateDocument`),
//!   `session-stats.ts` (`getContextBreakdown`, `recordAnchoredHistoryRewrite`), `messages.ts`.
//! - `@oh-my-pi/pi-agent-core` **18.2.11** (the release pins 18.3.4, which npm does not have;
//!   18.2.11 is the newest published): `src/tokenizer.ts`, `src/compaction/compaction.ts`
//!   (thresholds, `findCutPoint`, `prepareCompaction`, `compact`, `generateSummary`,
//!   `generateHandoffFromContext`), `shake.ts`, `pruning.ts`, `tool-protection.ts`, `utils.ts`,
//!   `messages.ts`, `transcript-tokens.ts`, `prompts/*.md`.
//! - `@oh-my-pi/pi-utils` 18.2.9: `path-tree.ts` (`formatGroupedPaths`), `prompt.ts`.
//! - Git source, for the tests only: `can1357/oh-my-pi@b46db80e389945d124d8ddaac21dc0dbbac3767c`
//!   (`packages/agent/test/shake.test.ts`, the shake cases of the spec's (j)). The npm releases
//!   above, not a commit, are what this crate reproduces.
//!
//! Nothing is shared with the `pi` crate: the parts oh-my-pi inherited from Pi (cut points,
//! split-turn merge, serializer, file lists) are re-implemented here from the oh-my-pi release,
//! which changed most of them; only the UTF-16 truncation follows the `pi` crate's helper.
//!
//! # Layers
//! Session maintenance is plain functions of the branch (`maintain::decide`, the checks;
//! `maintain::maintain`, the pass), which the trait methods fold from the whole log; the replay
//! (`replay.rs`) keeps that fold (message estimates, newest rewrites, `prunedAt` stamps, what
//! shakes removed before each usage anchor) in a field fed one entry at a time.
//!
//! # Trigger
//! Threshold (`resolveThresholdTokens`): `window − R`, where the reserve is at least 15% of the
//! window (`max(floor(0.15·window), reserveTokens ?? 16384)`), falling back to the plain 15%
//! when an unset reserve would leave (almost) nothing; `compaction.thresholdTokens` (clamped
//! to `[1, window−1]`) or `thresholdPercent` (clamped to `[1, 99]`) override it. 200k → 170,000;
//! 1M → 850,000. Strictly greater triggers. The numerator is provider usage floored by the
//! local estimate of the stored conversation (system prompt plus every context message).
//! Checked where the original checks ([`OhMyPiConfig`] has the defaults):
//! - [`Moment::TurnEnd`] — `checkCompaction` after each run: first the stale-read pass, then
//!   the age pass (below), then the reply's usage (0 if it predates the latest compaction)
//!   floored by the local estimate; the method loop gets that minus what pruning freed.
//! - [`Moment::BeforeRequest`] with a user message last — `runPrePromptCompactionIfNeeded`:
//!   context usage (the newest good reply after the latest compaction: its prompt tokens minus
//!   what shakes removed before it, plus a local count of what follows) floored likewise.
//! - [`Moment::BeforeRequest`] with a tool result last — `maintainContextMidRun` between tool
//!   steps (`midTurnEnabled`): the last reply's usage floored likewise.
//! - [`Moment::Overflow`] — the provider's overflow error: reason `overflow`, then retry.
//! - [`Moment::Manual`] — `/compact [instructions]` (spec (b)): "Nothing to compact" without a
//!   preparation; otherwise the local summary of the preparation (`soft`, the one offline route
//!   of the method list; no mode is given, so no override) whatever `enabled` and the thresholds
//!   say, with the instructions after each history call's prompt as `Additional focus: …`
//!   (literal, spec (d)); no rescue, no progress check. Project memory (AGENTS.md) is part of the
//!   agent's system prompt, which the summary calls replace with their own (spec (d)); only the
//!   handoff method, which sends the live context, carries it, and manual compaction does not use
//!   it.
//!
//! # Methods (release 18.3.4, default order `remote, snapcompact, handoff, shake, soft`)
//! A pass takes the first *usable* method from the order (`isCompactionMethodUsable`):
//! `remote` needs a provider-native route or `compaction.remoteEndpoint`; `snapcompact` an
//! image-input model (never on a 413 byte-limit recovery); `handoff` any reason but
//! `overflow`; `shake` and `soft` always. What the original does when a method fails —
//! unknown in the spec, read in `runAutoCompaction` — is reproduced: a method that fails
//! before committing hands over to the next usable one (`methodIndex + 1`), with an event
//! ending `trying the next preferred compaction method.`; the last method's error is final
//! (`Auto-compaction failed: …`, `Context overflow recovery failed: …`).
//! - `remote`, `snapcompact`: never usable here (see Deviations), so skipped silently, as the
//!   original skips them without a native route or image input. Threshold passes therefore
//!   start at `handoff`, overflow passes at `shake` — the spec's worked example (i).
//! - `handoff` (`session-handoff.ts`): the **live context** — the session system prompt and
//!   every context message — plus a final user message with the handoff prompt and the
//!   automatic-threshold focus line, no output cap beyond the model's; a blank reply falls
//!   through (`Auto-handoff returned no document; …`), an error too. The document with the
//!   `<files>` list becomes the summary, stored as a [`CheckpointKind::Handoff`] with the same
//!   kept tail `soft` would keep, shown as a user message `…<handoff>\n…\n</handoff>`. No short
//!   summary. (The original defers a threshold handoff until the current prompt finishes; the
//!   runner's next step is the same point.)
//! - `shake` (`#runAutoShake`, preset `protectTokens 16000, minSavings 4000, fenceMinTokens
//!   400`): every tool result (not `skill`, not a `skill://` or `artifact://` read, not already
//!   pruned) and every fenced or top-level XML block of ≥ 400 tokens in user or assistant text,
//!   at or after the latest compaction's first kept entry, with ≥ 16,000 tokens of context
//!   after it, is elided — if `Σ max(0, tokens − 16)` reaches 4,000. The originals go to one
//!   artifact `artifact://<n>` in the [`VirtualStore`](compactbench_core::VirtualStore)
//!   (sections `### region i (label, ~N tok)`), each region becomes
//!   `[shaken ~N tokens — recover: artifact://<n> (region i)]`; one
//!   [`CheckpointKind::Offload`] checkpoint ([`Window::Inherit`](compactbench_core::Window),
//!   replacements keeping call ids, the artifact as an offload) — no compaction entry. It
//!   falls through when the trigger minus what it freed is still above
//!   `floor(0.8 × threshold)` (without a trigger figure: the post-shake context usage still
//!   over the threshold), or on overflow when it found nothing (`Auto-shake reclaimed ~N
//!   tokens but context is still above the threshold; …` / `Auto-shake found nothing eligible
//!   to drop; …`). What it freed stays freed when a later method runs.
//! - `soft` (`compact` local path): Pi's algorithm with omp's changes — the scan restarts at
//!   the previous compaction's first kept entry; the keep budget (20,000) is scaled to provider
//!   tokens (`floor(20000 / ratio)` when prompt tokens exceed the local count); `findCutPoint`
//!   checks the budget only at cut points after whole assistant groups, so the kept tail is at
//!   most the budget unless the newest group alone exceeds it (**not** Pi's rule, contrary to
//!   the spec's (c)); nothing to summarize → no preparation. History is summarized (cap
//!   `min(0.8 × reserve, 16384)` = 13,107) as a fold over input windows of
//!   `max(minIn, 0.8 × window − cap − 16384)` tokens when it does not fit one call (a window
//!   the provider refuses as too long is planned again at half of what it sent, down to
//!   `minIn`, then the refusal fails the method); a split
//!   turn's prefix separately (cap 8,192) merged after the literal
//!   `\n\n---\n\n**Turn Context (split turn):**\n\n`; with no new messages the previous
//!   summary is reused unchanged. Then a **short-summary call** (cap 512) over the kept tail
//!   — its failure fails the method. The `<files>` tag is upserted. Stored as
//!   [`CheckpointKind::Summary`], shown first after the system prompt as a user message
//!   `…<summary>\n…\n</summary>` (literal tags, paraphrased preamble).
//! - After a commit (`#commitAutoCompactionResult`): a threshold pass must leave the residual
//!   (context usage floored by the local estimate) at most `floor(0.8 × threshold)`, an
//!   overflow pass must fit `window − reserve`; otherwise the rescue runs — the rescue shake
//!   (no protect window, no savings floor; skipped if this pass fell through from shake), then
//!   dropping images — and if that does not help the entry is stamped with the dead-end
//!   warning. When there is nothing to summarize at all, the same rescue runs first; if it
//!   finds nothing the pass ends (no fall-through, as in the original).
//!
//! # Pruning without a summary (per turn, [`CheckpointKind::Prune`])
//! - Stale reads (`pruneSupersededToolResults`, `compaction.supersedeReads`): an older read of
//!   a file superseded by a newer read of it becomes `[Superseded by a newer read of this
//!   file]` — only if at most 8,000 tokens of messages follow it (warm prompt cache).
//! - Age (`pruneToolOutputs`, `DEFAULT_PRUNE_CONFIG`): tool results older than the newest
//!   40,000 tokens of tool output (≥ 50 tokens, not protected) become `[Output truncated - N
//!   tokens]`, only if the batch saves ≥ 20,000 tokens, and never inside the warm prefix
//!   (> 8,000 tokens after it) — so in this release it cannot fire (reproduced as written).
//!
//! Reads, edits and writes are recognised through
//! [`tool_kind`](compactbench_core::tools::tool_kind) and
//! [`tool_path`](compactbench_core::tools::tool_path) (oh-my-pi keys on its own `read`,
//! `edit`, `write`), so the file list, supersede keys and protected reads work whichever
//! harness recorded the session.
//!
//! # Token estimator
//! `Tokenizer` for models without a catalog tokenizer family: per text fragment
//! `ceil(utf8_bytes / 4)`, fragments rounded separately; 1200 per image; assistant tool calls
//! count name and `JSON.stringify(arguments)`; a compaction summary its raw text. Provider
//! usage: `calculateContextTokens = input + output + cacheRead`, `calculatePromptTokens =
//! input + cacheRead`.
//!
//! # Deviations
//! - Deliberate: `remote` cannot run offline (it needs OpenAI/Anthropic server compaction or a
//!   compaction endpoint) and [`ModelProfile`](compactbench_core::ModelProfile) names no
//!   image-input capability, so both `remote` and `snapcompact` are treated as unusable —
//!   exactly what the original does for a text-only model without a native route. Their rules
//!   (selection, the `Remote compaction preserved …` placeholder, 5024 tokens per frame) are
//!   kept and tested but never reached.
//! - Deliberate: in-place rewrites are replacements in checkpoints with `Window::Inherit`;
//!   `prunedAt` stamps and the tokens a shake removed before the usage anchor are recorded in
//!   their `details` and read back.
//! - Deliberate: no wall clock, so the supersede pass's 90-minute idle flush, idle compaction
//!   and speculative (background) compaction do not happen; no provider dialect, so the
//!   serializer is the plain one (`[User]: …`); no tool schemas, so the non-message overhead is
//!   the system prompt alone; no `useless` flags, `skill` tool or plan file in our sessions.
//! - A reply marked failed ([`Message::failure`](compactbench_core::Message::failure), oh-my-pi's
//!   `stopReason` `"aborted"` or `"error"`) gives no usage to the trigger, the anchor or
//!   `tokensBefore`, even with partial usage (`getAssistantUsage`, `isTranscriptUsageAnchor`);
//!   its content is counted, cut at and summarized like any reply. Deliberate: a reply without
//!   usage (or with all-zero usage) and no marker stands for a failed one too, the convention
//!   from before the marker. Not modelled: `retainCompletedToolCalls` (the original drops a
//!   failed reply's unfinished tool calls when it stores it; our logs hold what was stored).
//!   Overflow arrives as [`Moment::Overflow`]; error-text, length-stop (`incomplete`) and
//!   HTTP 413 payload paths, context promotion, extensions and manual commands are not modelled.
//! - Deliberate: the pre-prompt check sees the new prompt already in the log, so it stays after
//!   the kept tail (the original appends it after compacting). As in the original it is not on
//!   the branch the preparation reads (cut point, keep budget, short summary) nor in the
//!   handoff context.
//! - Deliberate: past the byte bound the original counts summarizer input exactly; we use the
//!   byte heuristic there too (also for the size of a refused window, which a context-overflow
//!   error halves and plans again, as `generateSummary` does). The `prompt.render` line
//!   normalisation of the wrappers is not reproduced.
//! - Deliberate: the split-turn history and prefix calls run one after the other (the original
//!   runs them in parallel; the first failure fails the method either way).
//! - Deliberate: a pass whose last method fails after an earlier step rewrote history returns
//!   those rewrites (the original keeps them) and records the error in the events instead of
//!   failing, since errors must leave the log unchanged.
//!
//! # Measured against the original (compactbench-fidelity)
//! `fidelity/oh-my-pi/driver.mjs` runs `@oh-my-pi/pi-agent-core` 18.2.11's own `shouldCompact`,
//! `compactionContextTokens`, `Tokenizer` and `prepareCompaction` on sessions exported by
//! `crates/fidelity/src/originals/oh_my_pi.rs` (the coding agent 18.3.4 itself cannot be
//! loaded: it pins 18.3.4 siblings the registry lacks, so its pre-prompt and mid-run checks
//! are re-stated there as the same calls). Found and fixed: the pre-prompt preparation counted
//! the pending prompt against the keep budget (`runPrePromptCompactionIfNeeded` prepares the
//! branch before the prompt is appended); test `pre_prompt_selection_leaves_the_pending_prompt_out`.
//! Checkpoints carry `isSplitTurn` in their details so the split flag is compared too.
//! A second row checks a turn's end (`checkCompaction`): the driver runs the package's own
//! `pruneSupersededToolResults` and `pruneToolOutputs` with the settings 18.3.4's
//! `#pruneStaleToolResults` / `#pruneToolOutputs` pass, then the threshold and the preparation,
//! and the entries it prunes are compared with our prune checkpoints (the rescue after a
//! threshold pass is not driven). Found and fixed there: the cache guard's suffix of a result
//! counts the results after it in the same tool message of ours, since oh-my-pi stores one
//! message per result; test `the_cache_guard_counts_later_results_of_the_same_tool_message`.
//!
//! [`CheckpointKind::Handoff`]: compactbench_core::CheckpointKind::Handoff
//! [`CheckpointKind::Offload`]: compactbench_core::CheckpointKind::Offload
//! [`CheckpointKind::Summary`]: compactbench_core::CheckpointKind::Summary
//! [`CheckpointKind::Prune`]: compactbench_core::CheckpointKind::Prune

use compactbench_core::{
    Checkpoint, Cx, Decision, DefaultView, Error, Fidelity, Log, Moment, Replay, Strategy, StrategyInfo, View,
};

mod branch;
mod files;
mod maintain;
mod prepare;
mod prune;
mod replay;
mod shake;
mod summarize;
mod tokens;
mod trigger;

use branch::{Branch, Work};
use replay::OhMyPiReplay;
use trigger::method_order;

/// oh-my-pi's `compaction.*` settings, with the release's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct OhMyPiConfig {
    /// `compaction.enabled`.
    pub enabled: bool,
    /// `compaction.methodOrder`: method names in order of preference; unknown names are
    /// ignored, an empty list disables automatic maintenance.
    pub method_order: Vec<String>,
    /// `compaction.thresholdPercent` (`None` = off).
    pub threshold_percent: Option<f64>,
    /// `compaction.thresholdTokens` (`None` = off); wins over the percent.
    pub threshold_tokens: Option<u64>,
    /// `compaction.reserveTokens`; unset (`None`) is not the same as 16384 (see the trigger).
    pub reserve_tokens: Option<u64>,
    /// `compaction.keepRecentTokens`.
    pub keep_recent_tokens: u64,
    /// `compaction.midTurnEnabled`: also check between the tool steps of a run.
    pub mid_turn_enabled: bool,
    /// `compaction.supersedeReads`: prune reads superseded by a newer read each turn.
    pub supersede_reads: bool,
}

impl Default for OhMyPiConfig {
    fn default() -> OhMyPiConfig {
        OhMyPiConfig {
            enabled: true,
            method_order: ["remote", "snapcompact", "handoff", "shake", "soft"].map(String::from).to_vec(),
            threshold_percent: None,
            threshold_tokens: None,
            reserve_tokens: None,
            keep_recent_tokens: 20_000,
            mid_turn_enabled: true,
            supersede_reads: true,
        }
    }
}

/// oh-my-pi's context maintenance (see the crate docs).
pub struct OhMyPiStrategy {
    info: StrategyInfo,
    config: OhMyPiConfig,
}

impl OhMyPiStrategy {
    /// oh-my-pi 18.3.4 with `config`. The report id is `oh-my-pi` for the default method
    /// order and `oh-my-pi/<methods joined by +>` otherwise.
    pub fn new(config: OhMyPiConfig) -> OhMyPiStrategy {
        let order = method_order(&config.method_order);
        let id = if config.method_order == OhMyPiConfig::default().method_order {
            "oh-my-pi".to_owned()
        } else {
            format!("oh-my-pi/{}", order.iter().map(|m| m.as_str()).collect::<Vec<_>>().join("+"))
        };
        OhMyPiStrategy {
            info: StrategyInfo {
                id,
                harness: "oh-my-pi".into(),
                source: "npm @oh-my-pi/pi-coding-agent@18.3.4 + @oh-my-pi/pi-agent-core@18.2.11 (can1357/oh-my-pi)"
                    .into(),
                summary: format!(
                    "after a turn, before a prompt and between tool steps, if usage (floored by a bytes/4 estimate) > \
                     window - max(15%, 16384): methods {} (remote/snapcompact unavailable offline; shake elides to \
                     artifacts, soft/handoff keep ~{} tokens); per-turn stale-read pruning",
                    order.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(" > "),
                    config.keep_recent_tokens
                ),
                fidelity: Fidelity::Source,
            },
            config,
        }
    }
}

/// The default: oh-my-pi 18.3.4 with the release's settings.
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(OhMyPiStrategy::new(OhMyPiConfig::default()))
}

/// Every row to report: the default order, then each local method alone
/// (`compaction.methodOrder` set to one method): `oh-my-pi/soft`, `oh-my-pi/handoff`,
/// `oh-my-pi/shake`.
pub fn variants() -> Vec<Box<dyn Strategy>> {
    let only = |m: &str| -> Box<dyn Strategy> {
        Box::new(OhMyPiStrategy::new(OhMyPiConfig { method_order: vec![m.to_owned()], ..OhMyPiConfig::default() }))
    };
    vec![strategy(), only("soft"), only("handoff"), only("shake")]
}

impl Strategy for OhMyPiStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(OhMyPiReplay { config: &self.config, view: DefaultView::new(), branch: Branch::default() })
    }

    fn decide(&self, log: &Log, _view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        maintain::decide(&self.config, &mut Work::new(log), at, cx.model.window)
    }

    fn compact(&self, log: &Log, _view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        maintain::maintain(&self.config, &mut Work::new(log), at, cx)
    }
}

#[cfg(test)]
mod tests;
