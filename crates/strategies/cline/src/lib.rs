//! Cline (the VS Code extension's classic `ContextManager`, up to the 3.x line).
//!
//! Source: `cline/cline@9fd2b99be45f049ccc35ccbc5f8afcc80f458958` (the last content change of
//! the context manager; it was deleted on 2026-06-05 in favour of the SDK), mainly
//! `src/core/context/context-management/ContextManager.ts` and `context-window-utils.ts`,
//! `src/core/task/index.ts` (the callers), `src/core/task/tools/handlers/SummarizeTaskHandler.ts`,
//! `src/core/prompts/contextManagement.ts` and `responses.ts`, `src/utils/model-utils.ts`.
//! Spec: `shared/specs/cline.md`, part 1.
//!
//! # Trigger
//! Before every model request, from the **provider-reported usage of the previous request**
//! (`tokensIn + tokensOut + cacheWrites + cacheReads`; here the usage on the newest assistant
//! message). The limit is the window minus a per-window reserve: 64k → 37,000; 128k → 98,000;
//! 200k → 160,000; any other window `max(window − 40,000, 0.8 × window)`; a missing window
//! counts as 128k. No local token counting. When the provider rejects a request as too long
//! (the runner's overflow), Cline hides three quarters and retries once.
//!
//! # What happens (default, `useAutoCondense` off: 0 summarizer calls)
//! 1. **Duplicate file-read fold.** Every earlier copy of a file (a `read_file` result, a
//!    `write_to_file` / `replace_in_file` result echoing `<final_file_content>`, a
//!    `<file_content path>` mention in user text) is replaced by a notice; the latest copy per
//!    exact path stays. Messages 0 and 1 and messages edited before are skipped. If the fold
//!    saved at least 30% of the visible characters, nothing else happens this request.
//! 2. **Deleted-range truncation.** The stored history is never shortened; one range
//!    `[2, end]` grows instead. The first user/assistant pair (indices 0 and 1) is kept
//!    forever; of the rest, half is removed (three quarters when half the usage alone exceeds
//!    the limit), in whole pairs, the range ending on an assistant message. The text of the
//!    first assistant message's block 0 becomes the truncation notice (once). Tool results in
//!    the first message after the range lose their results (their calls were removed).
//! 3. Overflow: three quarters removed, the notice written, and the task text (block 0 of
//!    message 0) replaced by `[Continue assisting the user!]`; then the retried request runs the
//!    pre-request check again.
//! 4. On every view, tool results are put right after their calls in call order, and missing
//!    ones are invented as "result missing" (after a truncation this answers the first
//!    assistant message's own calls).
//!
//! Variant `cline/auto-condense` (`useAutoCondense` on, next-gen model families only, others
//! fall back to the above): the same trigger (no threshold at this commit), skipped when at
//! most two messages are visible after the range; the fold first (≥30% saved → no summary);
//! then the summarizer plays the agent model answering the `summarize_task` instruction with
//! the current view; everything after the first pair is hidden, both notices are written, and
//! the result message `[summarize_task] Result:` + continuation text + summary follows the
//! first pair as a user message.
//!
//! Estimators: provider usage for the trigger; JavaScript string length (UTF-16 units) of text
//! blocks for the fold's savings test.
//!
//! # Layers
//! The algorithm is plain functions of the log and of Cline's task (`task.rs`: the history it
//! stored, the `ContextManager` state), which a compaction builds from the whole log: the checks
//! and steps below, the fold (`fold.rs`), the range and view (`truncate.rs`), the repair
//! (`repair.rs`). The trigger reads the previous request's usage off the log; a run keeps the
//! view and the task, entry by entry (`replay.rs`).
//!
//! # Mapping Cline's history onto our model
//! Cline's index space is the Anthropic-format history (see `history.rs`): each assistant log
//! message is one message; each run of user/tool/system log messages is one user message whose
//! blocks are their parts in order (a tool result is a `tool_result` block). Leading system
//! messages are the system prompt, outside the history. The deleted range becomes
//! `Window::Kept` (the first pair's entries plus every entry after the range), the notices and
//! fold edits whole-message `Replacement`s of the log message owning the edited block, the
//! stripped results of the first message after the range entries left out of the window, the
//! condense result the checkpoint's summary placed after the kept pair. The `ContextManager`
//! state (range and edit store) is carried whole in each checkpoint's `details`. A tool result
//! stands for Cline's `[<tool> for '<path>'] Result:` text: for `read_file`, `write_to_file`
//! and `replace_in_file` the header is derived from the tool name and the call's `path`
//! argument (unless the result text already starts with one), counted in the savings test and
//! taken off again when a fold edit is shown. Other tool names are not file reads to the fold.
//!
//! Variant `cline/sdk` (module `sdk`, its own docs): today's Cline, the `prepareTurn` hook of the
//! published `@cline/core` 0.0.86 (what the CLI `cline` 3.0.65 runs), agentic strategy with its
//! own chars/3 estimator; a different algorithm from the classic one above.
//!
//! # Deviations
//! - The classic generation stays the default (`cline`); the SDK's `basic` strategy and its
//!   session sidecar are not reproduced (see `sdk`).
//! - Environment details, mention expansion, rules files and the "Context Window Usage" block
//!   are not modelled: our log has no workspace (deliberate; they are not compaction).
//! - Manual `/compact` and `/smol` ([`Moment::Manual`]) are skipped (deliberate): in Cline the
//!   command rewrites the user's message into an instruction for the main model to call the
//!   `condense` tool, whose summary the user must then accept (spec, "Manual condense"): a
//!   model turn and a user reply the replay does not have. So nothing the user types after the
//!   command reaches a summary call here. Project memory (`.clinerules`) is rebuilt into every
//!   request's system prompt and is no part of the auto-condense instruction.
//! - Auto-condense: the `Required Files` re-read (up to 8 files, 100,000 characters) is not
//!   reproduced, there is no workspace to read (deliberate). The model's other allowed answer,
//!   `attempt_completion`, is not modelled; a failed or empty summary counts as "the model did
//!   not call `summarize_task`": no compaction (the fold's edits stay), and the trigger fires
//!   again next request. A refused one (too long for the window) is the main request's
//!   context-window error, as in `attemptApiRequest`: three quarters removed as at an overflow,
//!   and the `summarize_task` request sent once more; refused again, the truncation stays. A summary cut off at the output cap is used as it is: Cline has no
//!   check either. The `task_progress` (focus chain) parameter is left out of the instruction.
//! - The result message is a text block (Cline's XML-tool path). With native tools Cline would
//!   send it as a `tool_result` and its own view would strip it; the spec asks for the XML path.
//! - The summary message of an auto-condense is not scanned by the fold (it only holds file
//!   contents through the Required Files re-read, which is not reproduced).
//! - Images count four characters per token in the savings test (Cline counts base64 length,
//!   which our media parts do not carry). `cacheWrites` is not in our usage (the runner
//!   reports none). `isAnthropicModelId` uses only its family-name test, not Cline's model table.
//! - The DeepSeek window override applies to models named "deepseek" on the OpenAI Chat shape,
//!   our stand-in for Cline's OpenAI-compatible handler (a modelling choice).
//! - The `PreCompact` hook, checkpoint restore (`truncateContextHistory`) and edit timestamps
//!   are not modelled (deliberate; no hooks or restores in the runner).
//! - The repair pass only runs once a checkpoint exists (before that nothing was removed, and
//!   runner logs carry every result).
//! - Pairing rules are not fixed beyond what Cline itself repairs: e.g. a thinking block at
//!   block 0 of the first assistant message silently swallows the notice, as in source.

mod condense;
mod fold;
mod history;
mod repair;
mod replay;
mod sdk;
mod state;
mod task;
mod trigger;
mod truncate;

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use compactbench_core::{Checkpoint, CheckpointKind, Cx, Decision, EntryId, Error, ErrorKind, Fidelity, Log, Message, ModelProfile, Moment, Part, Replacement, Replay, Role, Strategy, StrategyInfo, Summary, SummarizerUsage, SummaryPosition, View, Window, default_projection};

pub use crate::sdk::{api_messages, api_transcript, stored_messages, SdkConfig, SdkStrategy, CLI_TOOL_DEFINITIONS_CHARS};

use crate::history::{speakers, Src};
use crate::replay::ClineReplay;
use crate::state::State;
use crate::task::Task;
use crate::trigger::{over_limit, previous_usage, quarter, should_compact_context_window, window_info, WindowInfo};
use crate::truncate::{apply_first_user_replacement, apply_truncation_notice, next_range, truncated, Keep};

/// Settings of Cline's classic context management, with the extension's defaults (both off).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClineConfig {
    /// `useAutoCondense` (default `false`): summarize in-band instead of truncating, for
    /// next-gen model families only.
    pub use_auto_condense: bool,
    /// The removed `autoCondenseThreshold` (`0.75` before cline/cline#9396). `None`, as at the
    /// source commit, means the auto-condense trigger equals the truncation limit.
    pub auto_condense_threshold: Option<f64>,
}

/// Cline's classic `ContextManager`.
pub struct ClineStrategy {
    info: StrategyInfo,
    config: ClineConfig,
}

impl ClineStrategy {
    /// The strategy with `config`.
    pub fn new(config: ClineConfig) -> ClineStrategy {
        let (id, summary) = if config.use_auto_condense {
            (
                "cline/auto-condense",
                "previous request's usage >= window minus 27k/30k/40k reserve: fold duplicate file reads, else the agent model summarizes in-band and only the first pair plus the summary stay",
            )
        } else {
            (
                "cline",
                "previous request's usage >= window minus 27k/30k/40k reserve: fold duplicate file reads, else hide half of the history after the first pair",
            )
        };
        ClineStrategy {
            info: StrategyInfo {
                id: id.into(),
                harness: "cline".into(),
                source: "cline/cline@9fd2b99be45f049ccc35ccbc5f8afcc80f458958".into(),
                summary: summary.into(),
                fidelity: Fidelity::Source,
            },
            config,
        }
    }

    /// Whether this request goes through auto-condense rather than truncation.
    fn condenses(&self, model: &ModelProfile) -> bool {
        self.config.use_auto_condense && trigger::is_next_gen(&model.name)
    }

    /// `decide` with auto-condense's guard answered by `too_few_active` (asked only when the
    /// usage is over the threshold: it needs the task).
    pub(crate) fn decide_with(&self, log: &Log, at: Moment, cx: &Cx<'_>, too_few_active: impl FnOnce() -> bool) -> Decision {
        match at {
            // Cline checks per request, once the new user content exists.
            Moment::TurnEnd | Moment::Manual => Decision::Skip,
            // Any context-window error gets one automatic truncate-and-retry.
            Moment::Overflow => Decision::compact("context window exceeded"),
            Moment::BeforeRequest => {
                let Some(usage) = previous_usage(log) else { return Decision::Skip };
                let info = window_info(cx.model);
                if self.condenses(cx.model) {
                    if !should_compact_context_window(usage, info, self.config.auto_condense_threshold) || too_few_active() {
                        return Decision::Skip;
                    }
                    Decision::compact("auto-condense")
                } else if over_limit(usage, info) {
                    Decision::compact(if quarter(usage, info) { "usage over limit, keep quarter" } else { "usage over limit, keep half" })
                } else {
                    Decision::Skip
                }
            }
        }
    }

    /// `compact` given Cline's task at the state of `log`.
    pub(crate) fn compact_with(&self, log: &Log, task: &Task, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let usage = previous_usage(log);
        let info = window_info(cx.model);
        let mut staged = Staged::new(log, task, usage.unwrap_or(0));
        match at {
            Moment::TurnEnd | Moment::Manual => {}
            Moment::Overflow => {
                self.overflow_step(&mut staged);
                // The automatic retry goes through the pre-request check again.
                if !self.condenses(cx.model) {
                    if let Some(usage) = usage.filter(|u| over_limit(*u, info)) {
                        self.truncation_step(&mut staged, usage, info);
                    }
                }
            }
            Moment::BeforeRequest if self.condenses(cx.model) => self.condense_step(&mut staged, cx)?,
            Moment::BeforeRequest => self.truncation_step(&mut staged, usage.unwrap_or(0), info),
        }
        Ok(staged.out)
    }

    /// Truncation mode's step in `getNewContextMessagesAndMetadata`: fold, then truncate
    /// unless the fold saved enough.
    fn truncation_step(&self, staged: &mut Staged<'_>, usage: u64, info: WindowInfo) {
        let keep = if quarter(usage, info) { Keep::Quarter } else { Keep::Half };
        let mut next = staged.state.clone();
        let (folded, need_to_truncate) = fold::attempt(&staged.task.history.messages, &mut next);
        if folded {
            staged.commit(CheckpointKind::Fold, next.clone(), None, SummarizerUsage::default());
        }
        if need_to_truncate {
            apply_truncation_notice(&mut next);
            next.deleted_range = Some(next_range(&speakers(&staged.task.history.messages), next.deleted_range, keep));
            staged.commit(CheckpointKind::Truncate, next, None, SummarizerUsage::default());
        }
    }

    /// `handleContextWindowExceededError`.
    fn overflow_step(&self, staged: &mut Staged<'_>) {
        let mut next = staged.state.clone();
        next.deleted_range = Some(next_range(&speakers(&staged.task.history.messages), next.deleted_range, Keep::Quarter));
        apply_truncation_notice(&mut next);
        apply_first_user_replacement(&staged.task.history.messages, &mut next);
        staged.commit(CheckpointKind::Truncate, next, None, SummarizerUsage::default());
    }

    /// The auto-condense turn: fold, then the in-band summary.
    fn condense_step(&self, staged: &mut Staged<'_>, cx: &mut Cx<'_>) -> Result<(), Error> {
        // Cline decides before the new user content is stored.
        let before_new_content = staged.task.settled_len();
        let mut next = staged.state.clone();
        let (folded, need_summary) = fold::attempt(&staged.task.history.messages[..before_new_content], &mut next);
        if folded {
            staged.commit(CheckpointKind::Fold, next.clone(), None, SummarizerUsage::default());
        }
        if !need_summary {
            return Ok(());
        }
        let mut answer = self.summarize_task(staged, cx);
        if answer.as_ref().is_err_and(|e| e.kind == ErrorKind::ContextOverflow) {
            // The summarize_task request is the main request, so a refusal is its context-window
            // error: `attemptApiRequest` drops a quarter of the history and retries once.
            self.overflow_step(staged);
            if let Some(cp) = staged.out.last_mut() {
                cp.summarizer.add(SummarizerUsage { calls: 1, failures: 1, ..SummarizerUsage::default() });
            }
            next = staged.state.clone();
            answer = self.summarize_task(staged, cx);
        }
        let summary = match answer {
            Ok(summary) => summary,
            Err(e) => {
                // No compaction this turn; edits the fold made stay, as Cline saves them first.
                return match staged.out.last_mut() {
                    Some(cp) => {
                        cp.summarizer.add(SummarizerUsage { calls: 1, failures: 1, ..SummarizerUsage::default() });
                        Ok(())
                    }
                    None => Err(e),
                };
            }
        };
        let usage = SummarizerUsage { calls: 1, failures: 0, input_tokens: summary.input_tokens, output_tokens: summary.output_tokens };
        // Computed on the history ending with the triggering user message; the next request
        // then also hides that message and the assistant's summarize_task call (`end + 2`).
        let [start, end] = next_range(&speakers(&staged.task.history.messages), next.deleted_range, Keep::None);
        next.deleted_range = Some([start, end + 2]);
        apply_truncation_notice(&mut next);
        apply_first_user_replacement(&staged.task.history.messages, &mut next);
        next.condensed = true;
        let message = condense::summary_message(summary.text.trim());
        staged.commit(CheckpointKind::Summary, next, Some(message), usage);
        Ok(())
    }

    /// The request carrying the `summarize_task` instruction, on the view as the staged
    /// checkpoints leave it, and the model's answer (a blank one is a missing `context`).
    fn summarize_task(&self, staged: &Staged<'_>, cx: &mut Cx<'_>) -> Result<Summary, Error> {
        // The log as it will be with the staged checkpoints (copied only when there are some).
        let view = if staged.out.is_empty() {
            self.project(staged.log)
        } else {
            let mut log = staged.log.clone();
            for cp in &staged.out {
                log.push_checkpoint(cp.clone());
            }
            self.project(&log)
        };
        let request = condense::request(&view, cx.model.max_output);
        cx.summarizer.summarize(&request).and_then(|s| {
            if s.text.trim().is_empty() {
                Err(Error::new(ErrorKind::EmptySummary, "summarize_task was called without its context parameter"))
            } else {
                Ok(s)
            }
        })
    }
}

/// Checkpoints being built by one `compact` call, each turning a new `State` into window and
/// replacements relative to everything before it.
struct Staged<'a> {
    log: &'a Log,
    task: &'a Task,
    /// Log message -> what earlier checkpoints (and staged ones) show instead.
    shown: HashMap<EntryId, Message>,
    state: State,
    out: Vec<Checkpoint>,
    tokens_before: u64,
}

impl<'a> Staged<'a> {
    fn new(log: &'a Log, task: &'a Task, tokens_before: u64) -> Staged<'a> {
        Staged { log, task, shown: task.shown.clone(), state: task.state.clone(), out: Vec::new(), tokens_before }
    }

    /// Stages a checkpoint of `kind` moving the state to `next`; does nothing when `next`
    /// changes nothing.
    fn commit(&mut self, kind: CheckpointKind, next: State, summary: Option<Message>, summarizer: SummarizerUsage) {
        if next == self.state {
            return;
        }
        let window_changed = next.deleted_range != self.state.deleted_range || next.condensed;
        let shown = match &summary {
            Some(message) => {
                let mut history = self.task.history.clone();
                history.push_condense(message.text());
                truncated(&history.messages, &next)
            }
            None => truncated(&self.task.history.messages, &next),
        };
        let mut kept = Vec::new();
        let mut replacements = Vec::new();
        for s in shown.iter().filter(|s| !s.message.is_virtual) {
            let mut desired: Vec<(EntryId, Message)> = Vec::new();
            for &entry in &s.message.entries {
                let original = self.log.message(entry).expect("history entries are messages");
                let parts: Vec<Part> = s
                    .message
                    .blocks
                    .iter()
                    .filter(|b| matches!(b.src, Src::Entry(e, _) if e == entry))
                    .map(|b| b.part.clone())
                    .collect();
                if parts.is_empty() && !original.parts.is_empty() {
                    // Every part was a stripped tool result.
                    continue;
                }
                desired.push((entry, Message { role: original.role, parts, usage: original.usage, failure: original.failure }));
            }
            if desired.is_empty() {
                // Cline still sends the stripped message, with empty content; stand it in for
                // the first log message of the group (the repair may fill it, else the
                // validator records the empty message).
                let Some(&first) = s.message.entries.first() else { continue };
                desired.push((first, Message::new(Role::User, Vec::new())));
            }
            for (entry, message) in desired {
                kept.push(entry);
                let original = self.log.message(entry).expect("history entries are messages");
                if self.shown.get(&entry).unwrap_or(original) != &message {
                    self.shown.insert(entry, message.clone());
                    replacements.push(Replacement { entry, message });
                }
            }
        }
        let window = if window_changed { Window::Kept(kept) } else { Window::Inherit };
        let mut cp = Checkpoint::new(kind, window);
        cp.replacements = replacements;
        if let Some(message) = summary {
            cp = cp.with_summary(message);
            cp.summary_position = SummaryPosition::AfterKept;
        }
        cp.tokens_before = self.tokens_before;
        cp.summarizer = summarizer;
        cp.details = next.to_details();
        self.state = State { condensed: false, ..next };
        self.out.push(cp);
    }
}

/// The default Cline strategy (`useAutoCondense` off).
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(ClineStrategy::new(ClineConfig::default()))
}

/// Every configuration to report: the default first, then `cline/auto-condense` and `cline/sdk`.
pub fn variants() -> Vec<Box<dyn Strategy>> {
    vec![strategy(), Box::new(ClineStrategy::new(ClineConfig { use_auto_condense: true, ..ClineConfig::default() })), sdk::strategy()]
}

impl Strategy for ClineStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(ClineReplay::new(self))
    }

    fn decide(&self, log: &Log, _view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        self.decide_with(log, at, cx, || Task::of(log).too_few_active())
    }

    fn compact(&self, log: &Log, _view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        self.compact_with(log, &Task::of(log), at, cx)
    }

    /// The default projection follows the checkpoints' window and replacements; Cline then
    /// repairs tool-result placement on every view it sends.
    fn project(&self, log: &Log) -> View {
        let mut view = default_projection(log);
        repair::repair(&mut view, log.last_checkpoint().map(|(id, _)| id), 0);
        view
    }
}
