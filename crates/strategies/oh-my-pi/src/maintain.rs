//! Session maintenance: the checks that start a pass (`checkCompaction`,
//! `runPrePromptCompactionIfNeeded`, `maintainContextMidRun`), the per-turn prune passes and
//! the method loop of `runAutoCompaction` with its fall-through, `#runAutoShake`, the commit tail
//! (`#commitAutoCompactionResult`) and the dead-end rescue (`#rescueCompactionDeadEnd`),
//! all in coding-agent 18.3.4 `session/session-maintenance.ts`.

use compactbench_core::{Checkpoint, CheckpointKind, Cx, Decision, Error, Failure, Moment, Role, SummaryPosition, Window};
use serde_json::{json, Value};

use crate::branch::{Ctx, Work};
use crate::prepare::{prepare, Preparation};
use crate::prune::{prune_tool_outputs, supersede, DEFAULT_PRUNE};
use crate::shake::{drop_images, shake, DEFAULT_SHAKE, RESCUE_SHAKE};
use crate::summarize::{handoff_message, summary_message, Calls};
use crate::tokens::{context_tokens, valid_usage};
use crate::trigger::{
    budget_reserve, method_order, recovery_band, select, should_compact, Method, Reason, OFFLINE_CAPS,
};
use crate::OhMyPiConfig;

/// What the check oh-my-pi runs at a moment found (see [`check`]).
#[derive(Default)]
pub(crate) struct Check {
    /// A prune pass rewrote history.
    pub(crate) pruned: bool,
    /// The pass to run: `runAutoCompaction`'s reason and trigger figure.
    pub(crate) run: Option<(Reason, Option<u64>)>,
    /// The check before a new prompt, which oh-my-pi has not appended yet.
    pub(crate) pending_prompt: bool,
}

/// The check at `at` (see the crate docs' trigger section): after a turn
/// [`turn_end_checks`], before a request the pre-prompt or mid-run check
/// ([`before_request_tokens`]) against the threshold, on overflow recovery if enabled.
fn check(config: &OhMyPiConfig, work: &mut Work<'_>, at: Moment, window: u64) -> Check {
    match at {
        Moment::TurnEnd => turn_end_checks(work, config, window),
        Moment::BeforeRequest => match before_request_tokens(work, config) {
            Some((t, pending_prompt)) if should_compact(t, window, config) => {
                Check { run: Some((Reason::Threshold, Some(t))), pending_prompt, ..Check::default() }
            }
            _ => Check::default(),
        },
        Moment::Overflow => Check { run: config.enabled.then_some((Reason::Overflow, None)), ..Check::default() },
        // `/compact` is its own pass (`Pass::manual`), not a check.
        Moment::Manual => Check::default(),
    }
}

/// Whether oh-my-pi maintains context at `at`: the check found a pass to run and a usable
/// method for it, or a prune pass rewrote history.
pub(crate) fn decide(config: &OhMyPiConfig, work: &mut Work<'_>, at: Moment, window: u64) -> Decision {
    if at == Moment::Manual {
        // "Nothing to compact" when there is no preparation.
        return if prepare(work, config.keep_recent_tokens, false).is_some() { Decision::compact("manual") } else { Decision::Skip };
    }
    let check = check(config, work, at, window);
    let methods = method_order(&config.method_order);
    match check.run {
        Some((reason, _)) if select(&methods, 0, reason, OFFLINE_CAPS, false).is_some() => {
            Decision::compact(reason.as_str())
        }
        _ if check.pruned => Decision::compact("prune"),
        _ => Decision::Skip,
    }
}

/// The maintenance pass at `at` on `work`: the check, then the method loop if it found a
/// pass to run. Returns the checkpoints to append.
pub(crate) fn maintain(
    config: &OhMyPiConfig,
    work: &mut Work<'_>,
    at: Moment,
    cx: &mut Cx<'_>,
) -> Result<Vec<Checkpoint>, Error> {
    let check = check(config, work, at, cx.model.window);
    let focus = cx.manual;
    let mut pass = Pass { config, work, cx, events: Vec::new(), error: None, pending_prompt: check.pending_prompt };
    if at == Moment::Manual {
        pass.manual(focus);
    } else if let Some((reason, trigger)) = check.run {
        pass.run(reason, trigger);
    }
    pass.finish()
}

/// Literal dead-end warning (`compactionDeadEndWarning("clear large tool output")`), stamped
/// on the compaction entry that could not create headroom.
pub(crate) fn dead_end_warning(remedies: &str) -> String {
    format!(
        "Compaction freed too little context to make progress — pausing automatic maintenance to avoid a compaction loop. \
         The most recent turn alone is too large to reduce further; {remedies} or switch to a larger-context model."
    )
}

/// What a post-commit or no-preparation rescue must restore.
#[derive(Clone, Copy)]
enum Progress {
    /// `prepareCompaction` finds something to summarize.
    Prepare,
    /// The residual is within the recovery band (`#compactionCreatedHeadroom`).
    Headroom,
    /// The residual fits `window − reserve` (`#compactionCreatedRetryFit`).
    RetryFit,
}

/// `#runAutoShake`'s fall-through rule: never on `idle`; on `overflow` when nothing was
/// reclaimed; otherwise when the residual stays over the recovery band — the trigger figure
/// minus what shake freed, compared with `floor(0.8 × threshold)` — or, without a trigger
/// figure, when the post-shake context usage still crosses the threshold.
pub(crate) fn shake_falls_through(
    reason: Reason,
    reclaimed: bool,
    freed: u64,
    trigger: Option<u64>,
    post_shake_usage: u64,
    window: u64,
    config: &OhMyPiConfig,
) -> bool {
    let still_over = if window == 0 {
        false
    } else if let Some(trigger) = trigger {
        trigger.saturating_sub(freed) > recovery_band(window, config)
    } else {
        should_compact(post_shake_usage, window, config)
    };
    reason != Reason::Idle && ((reason == Reason::Overflow && !reclaimed) || still_over)
}

/// One maintenance pass over the branch.
pub(crate) struct Pass<'w, 'a, 'c, 'x> {
    pub(crate) config: &'c OhMyPiConfig,
    pub(crate) work: &'w mut Work<'a>,
    pub(crate) cx: &'c mut Cx<'x>,
    /// `auto_compaction_end` texts and notices, in order (stored in the last checkpoint).
    pub(crate) events: Vec<String>,
    /// The final error when the last method failed.
    pub(crate) error: Option<Error>,
    /// Pre-prompt check: the last context message is the user prompt oh-my-pi has not
    /// appended yet, so the handoff context leaves it out.
    pub(crate) pending_prompt: bool,
}

impl Pass<'_, '_, '_, '_> {
    fn window(&self) -> u64 {
        self.cx.model.window
    }

    /// The checkpoints to append, with the pass's events in the last one.
    pub(crate) fn finish(self) -> Result<Vec<Checkpoint>, Error> {
        let mut out = std::mem::take(&mut self.work.out);
        if let Some(last) = out.last_mut() {
            if !self.events.is_empty() {
                if let Value::Object(map) = &mut last.details {
                    map.insert("events".into(), json!(self.events));
                }
            }
        }
        match (out.is_empty(), self.error) {
            (true, Some(e)) => Err(e),
            _ => Ok(out),
        }
    }

    /// `runAutoCompaction(reason)`: the first usable method from the configured order runs;
    /// a method that fails before committing hands over to the next usable one.
    pub(crate) fn run(&mut self, reason: Reason, trigger: Option<u64>) {
        if !self.config.enabled && reason != Reason::Idle {
            return;
        }
        let methods = method_order(&self.config.method_order);
        let mut start = 0;
        let mut from_shake = false;
        while let Some((index, method)) = select(&methods, start, reason, OFFLINE_CAPS, false) {
            let has_next = index + 1 < methods.len();
            start = index + 1;
            match method {
                Method::Shake => {
                    if !self.auto_shake(reason, trigger) {
                        return;
                    }
                    from_shake = true;
                }
                // Not usable offline (no native route, no endpoint, no image input), so
                // never selected; if they were, they could only fail here.
                Method::Remote | Method::Snapcompact => {
                    let e = Error::new(
                        compactbench_core::ErrorKind::Other,
                        format!("{} is unavailable offline", method.as_str()),
                    );
                    if !self.method_failed(reason, e, has_next) {
                        return;
                    }
                }
                Method::Handoff | Method::Soft => {
                    let Some(prep) = self.prepare_or_rescue(reason, from_shake) else { return };
                    match self.summarize(method, &prep, None) {
                        Ok(Some(cp)) => {
                            self.commit(cp, reason, from_shake);
                            return;
                        }
                        Ok(None) => self.events.push(
                            "Auto-handoff returned no document; trying the next preferred compaction method.".into(),
                        ),
                        Err(e) => {
                            if !self.method_failed(reason, e, has_next) {
                                return;
                            }
                        }
                    }
                }
            }
        }
    }

    /// `/compact [instructions]`: the local summary (the offline route of the method list) of
    /// the preparation, the instructions its additional focus, whatever `enabled` and the
    /// thresholds say; no rescue and no progress check ("Nothing to compact" without a
    /// preparation, an error shown to the user as it is).
    fn manual(&mut self, focus: Option<&str>) {
        let Some(prep) = prepare(self.work, self.config.keep_recent_tokens, false) else { return };
        match self.summarize(Method::Soft, &prep, focus) {
            Ok(Some(mut cp)) => {
                if let Value::Object(map) = &mut cp.details {
                    map.insert("reason".into(), json!("manual"));
                }
                self.work.emit(cp);
            }
            Ok(None) => {}
            Err(e) => self.error = Some(e),
        }
    }

    /// Records a failed method; returns whether the next method gets its turn.
    fn method_failed(&mut self, reason: Reason, e: Error, has_next: bool) -> bool {
        let prefix = match reason {
            Reason::Overflow => "Context overflow recovery failed",
            Reason::Threshold | Reason::Idle => "Auto-compaction failed",
        };
        let text = format!("{prefix}: {}", e.message);
        if has_next {
            self.events.push(format!("{text}; trying the next preferred compaction method."));
            return true;
        }
        self.events.push(text.clone());
        self.error = Some(Error::new(e.kind, text));
        false
    }

    /// `#runAutoShake` with the automatic preset; returns whether the pass falls through to
    /// the next method.
    fn auto_shake(&mut self, reason: Reason, trigger: Option<u64>) -> bool {
        let result = shake(self.work, &DEFAULT_SHAKE, self.cx.store, reason.as_str());
        let usage = self.work.context_usage(&self.work.context());
        let fallback = shake_falls_through(
            reason,
            result.reclaimed(),
            result.tokens_freed,
            trigger,
            usage,
            self.window(),
            self.config,
        );
        if fallback {
            self.events.push(if result.reclaimed() {
                format!(
                    "Auto-shake reclaimed ~{} tokens but context is still above the threshold; trying the next preferred compaction method.",
                    result.tokens_freed
                )
            } else {
                "Auto-shake found nothing eligible to drop; trying the next preferred compaction method.".into()
            });
        }
        fallback
    }

    /// `prepareCompaction`, and when it finds nothing to summarize (one oversized recent
    /// turn), the tiered rescue until it does; `None` is the dead end.
    fn prepare_or_rescue(&mut self, reason: Reason, from_shake: bool) -> Option<Preparation> {
        if let Some(p) = prepare(self.work, self.config.keep_recent_tokens, self.pending_prompt) {
            return Some(p);
        }
        if reason != Reason::Idle {
            self.rescue(from_shake, Progress::Prepare);
            if let Some(p) = prepare(self.work, self.config.keep_recent_tokens, self.pending_prompt) {
                return Some(p);
            }
            self.events.push(dead_end_warning("shrink it (e.g. clear large tool output)"));
        }
        None
    }

    /// Runs `handoff` or `soft` on a preparation; `Ok(None)` is an empty handoff document.
    fn summarize(&mut self, method: Method, prep: &Preparation, focus: Option<&str>) -> Result<Option<Checkpoint>, Error> {
        let mut calls = Calls::new(self.cx.summarizer, self.window(), self.config.reserve_tokens).focused(focus);
        let (kind, summary, short, message) = if method == Method::Handoff {
            let mut context = self.work.context();
            if self.pending_prompt
                && matches!(context.last(), Some(Ctx::Msg(i)) if self.work.msg(*i).role == Role::User)
            {
                context.pop();
            }
            let Some(document) = calls.handoff(self.work, &context, self.cx.model.max_output)? else { return Ok(None) };
            let summary = crate::files::upsert_file_operations(&document, &prep.file_ops);
            let message = handoff_message(&summary);
            (CheckpointKind::Handoff, summary, None, message)
        } else {
            let (summary, short) = calls.soft(self.work, prep)?;
            let message = summary_message(&summary);
            (CheckpointKind::Summary, summary, Some(short), message)
        };
        let (read, modified) = prep.file_ops.lists();
        let mut cp = Checkpoint::new(kind, Window::From(prep.first_kept)).with_summary(message);
        cp.summary_position = SummaryPosition::AfterSystem;
        cp.tokens_before = prep.tokens_before;
        cp.summarizer = calls.usage;
        cp.details = json!({
            "method": method.as_str(),
            "summary": summary,
            "shortSummary": short,
            "firstKeptEntryId": prep.first_kept.0,
            "tokensBefore": prep.tokens_before,
            // The preparation's flag (not stored on oh-my-pi's entry): reported so the
            // fidelity check compares it with `prepareCompaction`'s.
            "isSplitTurn": prep.split,
            "readFiles": read,
            "modifiedFiles": modified,
        });
        Ok(Some(cp))
    }

    /// `#commitAutoCompactionResult`: appends the entry, then checks the rebuilt context — an
    /// overflow retry must fit `window − reserve`, a threshold pass must land within the
    /// recovery band — and runs the rescue if not; a pass that still made no progress stamps
    /// the dead-end warning on the entry.
    fn commit(&mut self, mut cp: Checkpoint, reason: Reason, from_shake: bool) {
        if let Value::Object(map) = &mut cp.details {
            map.insert("reason".into(), json!(reason.as_str()));
        }
        self.work.emit(cp);
        let index = self.work.out.len() - 1;
        let progress = match reason {
            Reason::Overflow => Progress::RetryFit,
            Reason::Threshold => Progress::Headroom,
            Reason::Idle => return,
        };
        if self.progressed(progress) || self.rescue(from_shake, progress) {
            return;
        }
        let warning = dead_end_warning("clear large tool output");
        if let Value::Object(map) = &mut self.work.out[index].details {
            map.insert("warning".into(), json!(warning));
        }
        self.events.push(warning);
    }

    fn progressed(&self, progress: Progress) -> bool {
        let window = self.window();
        let residual = || self.work.residual(&self.work.context());
        match progress {
            Progress::Prepare => prepare(self.work, self.config.keep_recent_tokens, self.pending_prompt).is_some(),
            Progress::Headroom => window == 0 || residual() <= recovery_band(window, self.config),
            Progress::RetryFit => {
                window == 0 || residual() <= window.saturating_sub(budget_reserve(window, self.config))
            }
        }
    }

    /// `#rescueCompactionDeadEnd`: the rescue shake (no protect window) unless this pass
    /// already fell through from a shake, then dropping images; stops at the first tier
    /// after which `progress` holds.
    fn rescue(&mut self, skip_elide: bool, progress: Progress) -> bool {
        if !skip_elide {
            let result = shake(self.work, &RESCUE_SHAKE, self.cx.store, "rescue");
            if result.reclaimed() && self.progressed(progress) {
                self.events.push(format!(
                    "Compaction dead-end recovery: elided {} heavy block{} (~{} tokens) to an artifact so maintenance could make progress.",
                    result.tool_results + result.blocks,
                    if result.tool_results + result.blocks == 1 { "" } else { "s" },
                    result.tokens_freed
                ));
                return true;
            }
        }
        let images = drop_images(self.work);
        images > 0 && self.progressed(progress)
    }
}

/// The trigger figure of the check oh-my-pi runs before the next model request, or `None`
/// when it checks nothing there: before sending a new prompt (`runPrePromptCompactionIfNeeded`:
/// context usage with the prompt, floored by the local estimate; `true`) or between the
/// tool-call steps of a run (`maintainContextMidRun`: the last reply's usage floored by the
/// local estimate, when `midTurnEnabled`).
fn before_request_tokens(work: &Work<'_>, config: &OhMyPiConfig) -> Option<(u64, bool)> {
    let ctx = work.context();
    let Ctx::Msg(i) = *ctx.last()? else { return None };
    match work.msg(i).role {
        Role::User => Some((work.residual(&ctx), true)),
        Role::Tool => {
            if !config.mid_turn_enabled || method_order(&config.method_order).is_empty() {
                return None;
            }
            let reply = ctx.iter().rev().find_map(|&c| match c {
                Ctx::Msg(j) if work.msg(j).role == Role::Assistant => Some(j),
                _ => None,
            })?;
            let usage = valid_usage(work.msg(reply))?;
            Some((context_tokens(&usage).max(work.stored_estimate(&ctx)), false))
        }
        _ => None,
    }
}

/// `checkCompaction` on the reply that ended the run (nothing at all on an aborted one): the
/// stale-read pass (even with compaction disabled), then — with compaction enabled, a method configured and a good
/// reply — the age pass, then the threshold test on the reply's usage floored by the local
/// estimate. The method loop gets the usage minus what the passes freed, floored the same
/// way.
pub(crate) fn turn_end_checks(work: &mut Work<'_>, config: &OhMyPiConfig, window: u64) -> Check {
    let mut out = Check::default();
    let Some(last) = work.items.iter().rposition(|it| it.message().is_some_and(|m| m.role == Role::Assistant)) else {
        return out;
    };
    // `checkCompaction` returns at once on an aborted reply (`stopReason: "aborted"`), before
    // any pass; an errored one still gets the stale-read pass.
    if work.msg(last).failure == Some(Failure::Aborted) {
        return out;
    }
    let mut freed = 0;
    if config.supersede_reads {
        let before = work.out.len();
        freed += supersede(work);
        out.pruned |= work.out.len() > before;
    }
    if !config.enabled || method_order(&config.method_order).is_empty() {
        return out;
    }
    // A failed or aborted reply ends the check.
    let Some(usage) = valid_usage(work.msg(last)) else { return out };
    // Usage from a reply older than the latest compaction describes a prompt no longer
    // sent: it counts 0 and the local estimate decides. (Items are in log order.)
    let stale = work.latest_compaction().is_some_and(|c| last < c);
    let usage = if stale { 0 } else { context_tokens(&usage) };
    let before = work.out.len();
    freed += prune_tool_outputs(work, &DEFAULT_PRUNE);
    out.pruned |= work.out.len() > before;
    let stored = work.stored_estimate(&work.context());
    if should_compact(usage.max(stored), window, config) {
        out.run = Some((Reason::Threshold, Some(usage.saturating_sub(freed).max(stored))));
    }
    out
}
