//! OpenCode V1: the `packages/opencode` Session / MessageV2 stack of OpenCode.
//!
//! Upstream source (spec `shared/specs/opencode-v1.md`):
//! - `sst/opencode@3df4a25506fb5ef55e4a02142708448c07fa754a`
//!   `packages/opencode/src/session/compaction.ts` (`prune`, `select`, `splitTurn`, `turns`,
//!   `completedCompactions`, `serialize`, `processCompaction`), the canonical version;
//! - `sst/opencode@31e22f65a23c498639b8cef24b90e6ae193cdcb6` `packages/opencode/src/session/overflow.ts`
//!   (`usable`, `isOverflow`), `packages/opencode/src/session/processor.ts` (post-step overflow
//!   check, `ContextOverflowError`), `packages/core/src/session/compaction.ts` (`buildPrompt`) and
//!   `packages/core/src/session/compaction-suffix.ts` (summary template, update instructions);
//! - `sst/opencode@00d0a710e3c90c3661126ded4df5302d54a8c6e6` `packages/opencode/src/session/prompt.ts`
//!   (`runLoop`: trigger, compaction dispatch, prune after the loop);
//! - `anomalyco/opencode@007a9409bafea06d6b9084ff1f6d1fe9f5e3a803` `packages/opencode/src/session/message-v2.ts`
//!   (`toModelMessages`), and the dev-branch `filterCompacted` with its reorder step.
//!
//! # Trigger
//! Provider-reported usage of the newest finished assistant message in storage order
//! (`tokens.total || input + output + cache.read + cache.write`:
//! [`Usage::total`](compactbench_core::Usage::total), cache writes included), compared
//! inclusively with
//! `usable = context − min(output, 32,000)` (or `input limit − reserved` when the model has an
//! input limit, `reserved = min(20,000, min(output, 32,000))`), as `overflow.ts` ships in
//! opencode-ai 1.18.33 (measured black box: `cargo xtask fidelity --black-box`);
//! `sst/opencode@31e22f65` subtracts `reserved` without an input limit too
//! ([`OpencodeV1Config::reserve_without_input_limit`]). No local estimate. A summary
//! being the newest finished message never triggers. The check runs after every response, so it
//! is made at [`Moment::BeforeRequest`] (mid-turn) and [`Moment::TurnEnd`]; a provider overflow
//! ([`Moment::Overflow`]) compacts with `overflow: true`, which replays the last user message.
//! A `compact` call without any of these reasons is a manual `/compact` (`auto: false`), and so
//! is [`Moment::Manual`]: `create({auto: false})` takes no text, so anything typed after the
//! command is dropped (spec (b)). Project memory (AGENTS.md) is part of the agent's system
//! prompt, which the summary call replaces with the compaction agent's prompt (spec (d)): the
//! summarizer never sees it.
//!
//! # What is kept, summarized, dropped
//! - **Prune** (opt-in, `prune = false` by default as in the original): at the end of a turn,
//!   after any compaction of that turn, walk everything stored newest first, skip the two newest
//!   user turns, stop at a summary or an already pruned output, protect 40,000 estimated output
//!   tokens (`skill` outputs are exempt), and clear every older output only if more than 20,000
//!   would be cleared. Recorded as its own [`CheckpointKind::Prune`](compactbench_core::CheckpointKind::Prune) checkpoint: tool messages
//!   are replaced, call ids kept, text `[Old tool result content cleared]`.
//! - **Summary**: the working view, minus earlier (marker, summary) pairs, is split into turns;
//!   whole turns are kept newest first while they fit the tail budget
//!   (`min(15,000, max(2,000, usable / 4))`), the first turn that does not fit may be split to
//!   its longest fitting suffix, and everything before is serialized (tool outputs cut at 2,000
//!   characters) and summarized with the previous summary in `<prior-summary>`. If the tail
//!   would start at the first message, everything is summarized.
//! - **View** (overrides [`Strategy::project`]): `filterCompacted` followed by `toModelMessages`:
//!   system prompt, user `What did we do so far?`, the summary as an assistant message, the
//!   tail in structure, everything after the summary, and the continue (or replayed) user
//!   message. Tool calls without a result get `[Tool execution was interrupted]` error results.
//!
//! # Token estimator
//! `Token.estimate(s) = round(len(s) / 4)` over UTF-16 units, applied to the model-message
//! JSON of a slice of messages (tail selection) or to a tool output (prune).
//!
//! # Layers
//! The algorithm works from the log: `Session::new` rebuilds OpenCode's storage from it, and
//! the trigger, prune, `select`, the summary step and the view (`filterCompacted`, then
//! `toModelMessages`) read that storage. A run keeps only the view (`replay.rs`), lowering just
//! the messages logged since it was last shown when they cannot change what was stored before.
//!
//! # Deviations
//! - Deliberate: the experimental `compaction.mode = "suffix"` path is not reproduced; only the
//!   canonical prepend path exists (suffix mode is experimental and falls back to it).
//! - Deliberate: plugin hooks (`experimental.session.compacting`, `experimental.chat.messages.transform`,
//!   `experimental.compaction.autocontinue`) are not modelled; the auto-continue hook is a config
//!   switch ([`OpencodeV1Config::autocontinue`], on as in the original).
//! - Deliberate: environment variables (`OPENCODE_DISABLE_AUTOCOMPACT`, `OPENCODE_DISABLE_PRUNE`,
//!   `OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX`) are config fields; strategies read no environment.
//! - Deliberate: the model answering the auto-continue message is not simulated; the replayed
//!   session goes on with its next message after the continue message.
//! - Deliberate: a summarizer error ends the compaction with that error and leaves the log
//!   unchanged; the original keeps a failed summary message (which also blocks re-triggering until
//!   the next response) and retries retryable provider errors. The runner may therefore try again
//!   at its next decision, where the original waits for the next response. `Cx::failures` is
//!   not used: it cannot tell whether a response arrived since the failure.
//! - Deliberate: a prune whose cleared outputs are all out of the working view is skipped. The
//!   walk gets behind a summary only right after it, and outputs behind a summary are never sent
//!   or serialized again, so the original's flags there change nothing later (in sessions whose
//!   compactions are automatic); skipping keeps prune events to those that save tokens.
//! - Modelled: the summary step's `ContextOverflowError` is taken to happen when the summarizer
//!   rejects the request as larger than the window (`ErrorKind::ContextOverflow`, the runner's
//!   provider) or reports more input tokens than it; the error texts are the original's.
//! - Modelled: a truncated summary (`StopReason::Length`) is accepted, as the original accepts a
//!   summary that finished with reason `length`.
//! - Modelled: media have no bytes here; in the model-message JSON they count as an empty data
//!   field plus their provider token size, and they have no file name (`[Attached <mime>: file]`).
//! - Modelled: a system message after the first non-system message is a user message for turns
//!   and prune (OpenCode stores notices as user text), and is sent as it is.
//! - Modelled: a result without a matching call in the same assistant message becomes a tool part
//!   of its own (OpenCode cannot store one).
//! - Modelled: the error result made for a call without a result has the origin
//!   `Replaced(call, call)`: it stands for the call's log message, and no checkpoint made it.
//! - Modelled: `tokens_before` is `est_oc` of the working view's model-message JSON.
//! - Not fixed, on purpose: the original's view quirks are reproduced (the summary directly
//!   follows the marker and precedes an assistant tail message; a replay with a retained tail
//!   shows the cut-out turn and its replay; a tail reaching back past an older compaction shows
//!   that compaction's marker and summary mid-view). Pairing validators record what breaks.

use compactbench_core::{Checkpoint, Cx, Decision, Error, Fidelity, Incremental, Log, ModelProfile, Moment, Replay, Strategy, StrategyInfo, View};

mod prompt;
mod prune;
mod replay;
mod select;
mod session;
mod sizing;
mod summarize;
mod trigger;

#[cfg(test)]
mod tests;

use session::{last_finished, Finished, Session};
use summarize::{summarize, view_estimate, Trigger};

/// The V1 `compaction` config and the model limits the seam's [`ModelProfile`] lacks, with the
/// original's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpencodeV1Config {
    /// `compaction.auto` (default true); `OPENCODE_DISABLE_AUTOCOMPACT` sets it false.
    pub auto: bool,
    /// `compaction.prune` (default false); `OPENCODE_DISABLE_PRUNE` sets it false.
    pub prune: bool,
    /// `compaction.tail_turns` (default unset: the tail is limited by tokens only; `<= 0`: no tail).
    pub tail_turns: Option<i64>,
    /// `compaction.preserve_recent_tokens` (default unset: a quarter of the usable context,
    /// clamped to 2,000..15,000).
    pub preserve_recent_tokens: Option<u64>,
    /// `compaction.reserved` (default unset: `min(20,000, max output tokens)`); it counts against
    /// the input limit only, unless `reserve_without_input_limit`.
    pub reserved: Option<u64>,
    /// Without an input limit, `usable` also subtracts `reserved` (`context − max output −
    /// reserved`), as `overflow.ts` reads at `sst/opencode@31e22f65`. Default false:
    /// opencode-ai 1.18.33 ships `context − max output` there.
    pub reserve_without_input_limit: bool,
    /// The model's `limit.input`, if the provider states one (default none).
    pub input_limit: Option<u64>,
    /// `OUTPUT_TOKEN_MAX` (default 32,000; `OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX` overrides it).
    pub output_token_max: u64,
    /// The `experimental.compaction.autocontinue` hook's answer (default true).
    pub autocontinue: bool,
}

impl Default for OpencodeV1Config {
    fn default() -> Self {
        OpencodeV1Config {
            auto: true,
            prune: false,
            tail_turns: None,
            preserve_recent_tokens: None,
            reserved: None,
            reserve_without_input_limit: false,
            input_limit: None,
            output_token_max: 32_000,
            autocontinue: true,
        }
    }
}

/// OpenCode V1 compaction: opt-in prune, then an anchored summary with a verbatim tail.
pub struct OpencodeV1Strategy {
    info: StrategyInfo,
    config: OpencodeV1Config,
}

impl OpencodeV1Strategy {
    /// The strategy with `config`.
    pub fn new(config: OpencodeV1Config) -> OpencodeV1Strategy {
        OpencodeV1Strategy {
            info: StrategyInfo {
                id: "opencode-v1".into(),
                harness: "opencode".into(),
                source: "sst/opencode@3df4a25506fb5ef55e4a02142708448c07fa754a".into(),
                summary: "summarizes when the last response's reported usage reaches the usable context; \
                          keeps a token-budgeted tail of recent turns; prune of old tool outputs is opt-in"
                    .into(),
                fidelity: Fidelity::Source,
            },
            config,
        }
    }

    /// Whether the newest finished assistant message overflowed (`isOverflow` on its usage).
    fn overflowed(&self, log: &Log, model: &ModelProfile) -> bool {
        match last_finished(log) {
            Some(Finished::Assistant(usage)) => trigger::is_overflow(&self.config, model, usage.total()),
            Some(Finished::Summary) | None => false,
        }
    }

    fn prune_due(&self, log: &Log) -> bool {
        self.config.prune && prune::plan(&Session::new(log)).is_some()
    }
}

/// OpenCode V1 with its default configuration.
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(OpencodeV1Strategy::new(OpencodeV1Config::default()))
}

/// The rows to report: the default, then `opencode-v1/prune` with `compaction.prune = true`
/// (prune is opt-in in the original; the variant shows what it saves, and its prune-only
/// events appear in reports as their own kind).
pub fn variants() -> Vec<Box<dyn Strategy>> {
    let mut prune = OpencodeV1Strategy::new(OpencodeV1Config { prune: true, ..OpencodeV1Config::default() });
    prune.info.id = "opencode-v1/prune".into();
    prune.info.summary = "as opencode-v1, with compaction.prune = true: old tool outputs beyond the newest 40k tokens \
                          are replaced by a placeholder when that frees more than 20k"
        .into();
    vec![strategy(), Box::new(prune)]
}

impl Strategy for OpencodeV1Strategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::new(self, replay::OpencodeView::default()))
    }

    fn decide(&self, log: &Log, _: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        match at {
            // The processor treats a provider `ContextOverflowError` as overflow unless auto
            // compaction is off.
            Moment::Overflow if self.config.auto => Decision::compact("context-overflow"),
            Moment::Overflow => Decision::Skip,
            Moment::BeforeRequest | Moment::TurnEnd if self.overflowed(log, cx.model) => Decision::compact("overflow"),
            // Prune runs after the agent loop exits.
            Moment::TurnEnd if self.prune_due(log) => Decision::compact("prune"),
            Moment::BeforeRequest | Moment::TurnEnd => Decision::Skip,
            Moment::Manual => Decision::compact("manual"),
        }
    }

    fn compact(&self, log: &Log, _: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let auto = match at {
            Moment::Overflow if self.config.auto => Some(Trigger { auto: true, overflow: true }),
            Moment::BeforeRequest | Moment::TurnEnd if self.overflowed(log, cx.model) => {
                Some(Trigger { auto: true, overflow: false })
            }
            _ => None,
        };
        let mut out = Vec::new();
        match auto {
            Some(trigger) => out.push(summarize(&self.config, log, cx, trigger)?),
            None if at == Moment::TurnEnd && self.prune_due(log) => {}
            // Asked to compact with no automatic reason: what `/compact` does.
            None => out.push(summarize(&self.config, log, cx, Trigger { auto: false, overflow: false })?),
        }
        if at == Moment::TurnEnd && self.config.prune {
            // Prune sees the records the compaction just appended.
            let mut after = log.clone();
            for cp in &out {
                after.push_checkpoint(cp.clone());
            }
            let session = Session::new(&after);
            if let Some(plan) = prune::plan(&session) {
                let tokens_before = view_estimate(&session);
                out.push(prune::checkpoint(&session, plan, tokens_before));
            }
        }
        Ok(out)
    }

    fn project(&self, log: &Log) -> View {
        Session::new(log).view()
    }
}
