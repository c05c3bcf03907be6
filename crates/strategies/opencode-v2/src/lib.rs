//! OpenCode core V2 (`packages/core`, the event-sourced `SessionMessage` stack): before every
//! provider turn, estimate the whole built request; when it is too big, summarize everything
//! except a recent suffix and replace the history with **one user-role checkpoint** that
//! carries the summary and the recent suffix as serialized text.
//!
//! # Source
//! Canonical `sst/opencode@31e22f65a23c498639b8cef24b90e6ae193cdcb6`:
//! `packages/core/src/session/compaction.ts` (`settings`, `select`, `serialize`, `buildPrompt`,
//! `compactIfNeeded`, `compactAfterOverflow`), `compaction-suffix.ts` (`SUMMARY_TEMPLATE`,
//! `SUMMARY_UPDATE_INSTRUCTIONS`, `SUMMARY_OUTPUT_TOKENS`), `message-updater.ts`.
//! Runner: `sst/opencode@b9effacf` `packages/core/src/session/runner/llm.ts` (`runTurnAttempt`,
//! `runTurn`, `runAfterOverflowCompaction`). History query: `anomalyco/opencode@643bf6ad`
//! `packages/core/src/session/history.ts`. Converter: `anomalyco/opencode@60ada05b`
//! `packages/core/src/session/runner/to-llm-message.ts`, with the 2.0.21 behaviour of leaving
//! out an empty `<recent-context>` (spec `opencode-v2.md` (e), case 5; the 2.0.15 → 2.0.21
//! change is known from a third-party parser of that message [RE]). No package version is
//! the reference: the spec pins commits, and which released client runs V2 rather than V1
//! is not established.
//!
//! # Token estimator
//! `Token.estimate`: `est_oc(s) = max(0, round(len(s) / 4))` over UTF-16 code units
//! ([`compactbench_core::estimate::chars_div4_round`]), for every decision: the trigger (on
//! the JSON of the whole request), the recent budget (on serialized row text) and the
//! summarizer fit check (on the prompt). Provider-reported usage is never read.
//!
//! # Trigger
//! At [`Moment::BeforeRequest`] (`compactIfNeeded`, run on the already built request before
//! every provider turn, mid-turn included): skip when `auto` is off or the model has no
//! context limit; otherwise compact when
//! `est_oc(JSON.stringify({system, messages, tools})) > context − max(output, buffer)`
//! (strict), with `output = request.generation.maxTokens ?? limits.output ?? 0`
//! (`runTurnAttempt` sets no `maxTokens`, so `limits.output` = [`ModelProfile::max_output`]
//! decides by default) and `buffer = 20_000`.
//! At [`Moment::Overflow`] (`compactAfterOverflow`, when the provider reports a context
//! overflow before any assistant output): compact without the threshold and without
//! looking at `auto`, **once per provider turn**: if the request rebuilt after an overflow
//! compaction overflows again, it is not retried (the log shows this as an overflow
//! checkpoint with no message after it). [`Moment::TurnEnd`] never compacts.
//! At [`Moment::Manual`] (the user's `/compact`): the variants' `compactManual` (reason
//! `"manual"`; the canonical commit names no manual reason, spec (b)) runs the same plan and
//! call without the threshold or `auto`. Nothing the user types reaches the call, whose one user
//! message is the serialized conversation and the template alone \[assume: no variant passes
//! text\]; it has no system prompt (spec (d)), so project memory is not sent either.
//! Either path returns "no compaction" silently (the oversized request is sent) when there is
//! nothing serialized, when the head is empty and there is no previous checkpoint, or when
//! the summarizer prompt does not fit `context − summaryOutput`.
//!
//! # Selection: what is kept, summarized, dropped
//! History is the rows from the latest checkpoint on, plus `system` rows newer than the
//! context baseline. Every row is serialized (`[User]: `, `[Assistant]: `,
//! `[Assistant reasoning]: `, `[Assistant tool call]: name(json)`, `[Tool result]: ` cut at
//! 2,000 characters + `"\n[truncated]"`, `[Tool error]: `, `[System update]: `). Walking
//! newest to oldest, rows join the **recent** suffix while their summed `est_oc` stays
//! `<= keep.tokens` (8,000); there is no turn boundary, so the suffix may start at an
//! assistant row, and a newest row over budget leaves `recent` empty. Everything older (the
//! **head**) plus the previous checkpoint's `recent` text is summarized. Nothing is kept as
//! a structured message: the recent suffix survives only as serialized text inside the
//! checkpoint, with every tool output cut to 2,000 characters. There is no prune.
//!
//! # Summarizer input
//! One user message, no system prompt, no tools (`SummaryRequest::system` is empty):
//! `<conversation>` holding `prev.recent` and the head (blank-line joined); on later passes
//! `<prior-summary>` with the previous summary and the update instructions; then the summary
//! template (headings literal: `## Objective`, `## Important Details`, `## Work State`,
//! `### Completed`, `### Active`, `### Blocked`, `## Next Move`, `## Relevant Files`).
//! Prompt sentences are paraphrased. Output cap `min(output || 4096, 4096)`.
//!
//! # Checkpoint and next request
//! `Compaction.Ended {text, recent}` becomes a `compaction` row. Its checkpoint here is a
//! [`CheckpointKind::Summary`] whose summary is one user message:
//! `<conversation-checkpoint>`, a sentence saying this is historical context and not
//! instructions, `<summary>…</summary>`, a blank line, `<recent-context>…</recent-context>`
//! (left out when `recent` is empty), `</conversation-checkpoint>`. The window keeps only the
//! non-leading system messages (`system` rows, ordered before the checkpoint by `seq`), so
//! the next request is: system prompt; those system rows; the checkpoint message; every later
//! row as a native message. No continue message, no re-injection (the system prompt and
//! context baseline are rebuilt every request anyway). [`default_projection`] expresses this
//! exactly ([`Window::Kept`] + [`SummaryPosition::AfterKept`]), so `project` is not overridden.
//! `details` stores the row: `type`, `reason` (always `"auto"`, as V2 publishes it),
//! `summary`, `recent`, `diagnostics`, plus our `trigger` (`threshold`/`overflow`, needed for
//! the once-per-turn overflow rule) and the entry ids behind head and recent.
//!
//! # Repeated compaction
//! Each pass sees `[checkpoint, newer rows]`: the old summary becomes `<prior-summary>`, the
//! old `recent` is summarized ahead of the new head, and the new checkpoint replaces the old
//! one. With a previous checkpoint a pass runs even when the head is empty.
//!
//! # Failures
//! A summarizer `Err` is `provider_error` (`empty_summary` for [`ErrorKind::EmptySummary`]);
//! a blank reply is `empty_summary`. Either way `Compaction.Failed` is published, no row is
//! written and `compact` returns the error, so the log is unchanged and the runner sends the
//! original oversized request. [`StopReason::Length`] is accepted as a normal reply
//! (canonical; only variant @031a4a9c treats it as a failure). No retry, no fallback.
//!
//! # Differences from V1
//! (V1 = `packages/opencode`, crate `opencode-v1`, spec `opencode-v1.md`.)
//! 1. **Trigger timing:** V2 checks before every provider turn on the built request; V1 checks
//!    after a response, on the last finished assistant's usage.
//! 2. **Trigger measure:** V2 estimates the whole request JSON locally (`est_oc`); V1 reads
//!    provider-reported `tokens.total` and never estimates for the trigger.
//! 3. **Threshold:** V2 `est > context − max(output, buffer)` (strict, `output` = request
//!    `maxTokens ?? limits.output ?? 0`, `buffer` 20,000); V1 `count >= usable` (inclusive),
//!    `usable = context − maxOut − reserved` or `input − reserved`.
//! 4. **Recent suffix form:** V2 keeps it only as serialized text inside the checkpoint (tool
//!    outputs cut at 2,000 characters, no structured call/result pairs); V1 keeps a native,
//!    structured tail after the summary.
//! 5. **Recent budget and cut:** V2 `keep.tokens` 8,000 on serialized row text, row by row,
//!    no turn boundary; V1 `min(15,000, max(2,000, usable/4))` on model-message JSON, whole
//!    turns first, then `splitTurn`.
//! 6. **What is summarized:** V2 sends the previous `recent` plus the new head (the current
//!    recent is folded in on the next pass); V1 sends the head only and never the tail.
//! 7. **Nothing to summarize:** V2 skips (sends the oversized request) when the head is empty
//!    and there is no previous checkpoint; V1 summarizes everything when it all fits the tail
//!    budget.
//! 8. **Checkpoint message:** V2 writes one user message `<conversation-checkpoint>` with
//!    `<summary>` and `<recent-context>`; V1 writes a marker user message
//!    (`What did we do so far?`) plus an assistant summary message.
//! 9. **Continue message:** V2 adds none (the runner just starts the next turn); V1 appends a
//!    synthetic user continue message after auto compactions.
//! 10. **Summarizer request:** V2 sends no system prompt and caps output at
//!     `min(output || 4096, 4096)`; V1 runs the compaction agent (its own system prompt) with
//!     the model's default output cap.
//! 11. **Fit check:** V2 silently skips when `est_oc(prompt) > context − summaryOutput`; V1
//!     has no such check and fails with an overflow error on the summary.
//! 12. **Overflow:** V2 runs `compactAfterOverflow` once per provider turn, ignoring `auto`,
//!     and does not replay the user message; V1 creates an overflow marker and replays the
//!     last real user message after the summary.
//! 13. **Prune:** V2 has none (the `prune` key is read by nothing); V1 has an opt-in prune of
//!     old tool outputs.
//! 14. **View rebuild:** V2 queries rows with `seq >=` the latest checkpoint plus `system` rows
//!     newer than the baseline; V1 runs `filterCompacted` and reorders marker, summary and
//!     tail.
//! 15. **Failures:** V2 publishes `Compaction.Failed` and writes no row; V1 keeps the failed
//!     summary message with its error (and the old view stays in force).
//!
//! # Deviations
//! - **Suffix mode** (`compaction.mode = "suffix"`) is not modelled (deliberate): it sends the
//!   native request to the summarizer, which the one-message [`SummaryRequest`] cannot carry;
//!   the default mode is `"prepend"`, which is reproduced.
//! - **Tool definitions** are not in the seam, so the trigger estimates `tools: []`
//!   (deliberate; the estimate is low by the size of the tool schemas).
//! - **Request JSON details** (deliberate modelling): message ids are 30-character
//!   placeholders, user messages carry `"metadata":{}`, tool results use the @5ea89d13
//!   shapes (`{type:"text",value}` / `{type:"error",value:{error,content:[]}}`), and media
//!   payloads count as `4 × tokens` characters.
//! - **Context baseline:** the leading system messages stand for the agent prompt and the
//!   baseline; re-baselining (folding system updates into the baseline) is not modelled, so
//!   system rows stay visible as rows (deliberate: same content, no epoch data in the seam).
//! - **Failure reasons** `tool_call`, `interrupted` and `invalid_summary` cannot occur: the
//!   seam's summarizer answers text or an error. A summarizer that would emit a tool call is
//!   an `Err` here, with the same outcome (no row, request sent as built).
//! - **Attachment names:** the seam's media carry no name or URI, so user attachments serialize
//!   as `[Attached <mime>: file]` (deliberate).
//! - **Truncation** at 2,000 UTF-16 units that would split a surrogate pair cuts before the
//!   pair, since Rust strings cannot hold a lone surrogate (deliberate, one unit).
//! - **Diagnostics** keep `requested` and `used`; `durationMs` and `tokens` are left out (no
//!   clock; summarizer usage is in [`Checkpoint::summarizer`]).
//! - **Re-check after compaction:** the original re-enters `compactIfNeeded` after every
//!   successful compaction before the same turn's request; whether that happens here is the
//!   runner's call ([`Strategy::decide`] answers the same way whenever asked).
//! - **Manual compaction** exists only in variants and is not modelled.
//! - **Variants** are config switches: [`OpencodeV2Config::snap_to_user`] reproduces only the
//!   selection of @8b9b5784 (not its usage trigger or prompt wording);
//!   [`OpencodeV2Config::omit_empty_recent`] `= false` gives the @60ada05b converter.
//! - **Pairing:** nothing is fixed up. The checkpoint is a user message; if the runner asks
//!   mid-turn, the next request starts with it and the model continues from text.

mod compaction;
mod history;
mod prompt;
mod request;

use compactbench_core::{Checkpoint, CheckpointKind, Cx, Decision, Entry, Error, ErrorKind, Fidelity, Incremental, Log, Message, Moment, Replay, StopReason, Strategy, StrategyInfo, SummarizerUsage, SummaryPosition, View, Window};
#[cfg(doc)]
use compactbench_core::{default_projection, ModelProfile, SummaryRequest};
use serde_json::json;

/// The settings V2 reads (`settings(configDocs)`, the last set value of each key wins),
/// plus the request and variant switches this crate exposes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpencodeV2Config {
    /// `compaction.auto`: the pre-request trigger runs at all. Default `true`. The overflow
    /// path does not read it.
    pub auto: bool,
    /// `compaction.buffer`: room kept free below the context limit. Default `20_000`
    /// (`DEFAULT_BUFFER`).
    pub buffer: u64,
    /// `compaction.keep.tokens`: budget of the recent suffix, on serialized text. Default
    /// `8_000` (`DEFAULT_KEEP_TOKENS`).
    pub keep_tokens: u64,
    /// `request.generation.maxTokens` of the built request. Default `None` (`runTurnAttempt`
    /// sets none), so `limits.output` (the model's `max_output`) is used.
    pub request_max_tokens: Option<u64>,
    /// Variant @8b9b5784 selection: keep the newest row always and snap the split back to a
    /// user row. Default `false` (canonical: no snap).
    pub snap_to_user: bool,
    /// Leave out `<recent-context>` when `recent` is empty (converter of 2.0.21). Default
    /// `true`; `false` always writes the block (@60ada05b).
    pub omit_empty_recent: bool,
}

impl Default for OpencodeV2Config {
    fn default() -> Self {
        OpencodeV2Config {
            auto: true,
            buffer: 20_000,
            keep_tokens: 8_000,
            request_max_tokens: None,
            snap_to_user: false,
            omit_empty_recent: true,
        }
    }
}

/// OpenCode core V2 compaction.
pub struct OpencodeV2Strategy {
    info: StrategyInfo,
    config: OpencodeV2Config,
}

impl OpencodeV2Strategy {
    /// The strategy with `config`.
    pub fn new(config: OpencodeV2Config) -> OpencodeV2Strategy {
        OpencodeV2Strategy {
            info: StrategyInfo {
                id: "opencode-v2".into(),
                harness: "opencode (core V2)".into(),
                source: "sst/opencode@31e22f65a23c498639b8cef24b90e6ae193cdcb6".into(),
                summary: "pre-request estimate > context − max(output, 20k); one user checkpoint with summary \
                          and the serialized recent 8k"
                    .into(),
                fidelity: Fidelity::Source,
            },
            config,
        }
    }
}

/// OpenCode core V2 with its default settings.
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(OpencodeV2Strategy::new(OpencodeV2Config::default()))
}

/// Whether overflow recovery was already used in this provider turn: an overflow checkpoint
/// with no message after it (the turn has produced nothing since, so the request being
/// retried is the one rebuilt after that compaction).
fn overflow_recovery_used(log: &Log) -> bool {
    for (_, entry) in log.entries().rev() {
        match entry {
            Entry::Message(_) => return false,
            Entry::Checkpoint(cp) if cp.details["trigger"] == "overflow" => return true,
            Entry::Checkpoint(_) => {}
        }
    }
    false
}

impl Strategy for OpencodeV2Strategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::default_view(self))
    }

    fn decide(&self, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        let model = cx.model;
        match at {
            Moment::TurnEnd => Decision::Skip,
            Moment::BeforeRequest => {
                if !self.config.auto || model.window == 0 {
                    return Decision::Skip;
                }
                let output = compaction::request_output(&self.config, model);
                let threshold = i128::from(model.window) - i128::from(output.max(self.config.buffer));
                if i128::from(request::estimate_request(log, view)) <= threshold {
                    return Decision::Skip;
                }
                match compaction::plan(log, &self.config, model) {
                    Some(_) => Decision::compact("threshold"),
                    None => Decision::Skip,
                }
            }
            Moment::Overflow => {
                if overflow_recovery_used(log) {
                    return Decision::Skip;
                }
                match compaction::plan(log, &self.config, model) {
                    Some(_) => Decision::compact("overflow"),
                    None => Decision::Skip,
                }
            }
            // `compactManual` (spec (b), from the variants): the same plan and call, no threshold.
            Moment::Manual => match compaction::plan(log, &self.config, model) {
                Some(_) => Decision::compact("manual"),
                None => Decision::Skip,
            },
        }
    }

    fn compact(&self, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let Some(plan) = compaction::plan(log, &self.config, cx.model) else {
            return Ok(Vec::new());
        };
        let failed = |kind: ErrorKind, failure: &str, detail: &str| {
            Error::new(kind, format!("Compaction.Failed {{failure: \"{failure}\"}}: {detail}"))
        };
        let summary = match cx.summarizer.summarize(&plan.request) {
            Err(e) if e.kind == ErrorKind::EmptySummary => return Err(failed(e.kind, "empty_summary", &e.message)),
            Err(e) => return Err(failed(e.kind, "provider_error", &e.message)),
            Ok(s) if s.text.trim().is_empty() => {
                return Err(failed(ErrorKind::EmptySummary, "empty_summary", "the summarizer returned no text"))
            }
            Ok(s) => s,
        };
        let selected = plan.selected;
        let text = prompt::checkpoint_text(&summary.text, &selected.recent, self.config.omit_empty_recent);
        let mut checkpoint = Checkpoint::new(CheckpointKind::Summary, Window::Kept(history::system_rows(log)))
            .with_summary(Message::user(text));
        checkpoint.summary_position = SummaryPosition::AfterKept;
        checkpoint.tokens_before = request::estimate_request(log, view);
        checkpoint.summarizer = SummarizerUsage {
            calls: 1,
            failures: 0,
            input_tokens: summary.input_tokens,
            output_tokens: summary.output_tokens,
        };
        let ids = |ids: &[compactbench_core::EntryId]| ids.iter().map(|id| id.0).collect::<Vec<_>>();
        checkpoint.details = json!({
            "type": "compaction",
            "reason": if at == Moment::Manual { "manual" } else { "auto" },
            "trigger": match at {
                Moment::Overflow => "overflow",
                Moment::Manual => "manual",
                Moment::TurnEnd | Moment::BeforeRequest => "threshold",
            },
            "summary": summary.text,
            "recent": selected.recent,
            "diagnostics": {"requested": "prepend", "used": "prepend"},
            "finish": if summary.stop == StopReason::Length { "length" } else { "stop" },
            "head_entries": ids(&selected.head_ids),
            "recent_entries": ids(&selected.recent_ids),
        });
        Ok(vec![checkpoint])
    }
}

#[cfg(test)]
mod tests;
