//! `KimiSoul.compact_context` with `SimpleCompaction.compact`: prepare, cap, summarizer call
//! with retries, summary message, post-compaction counter, background-task note.

use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Error, ErrorKind, Log, Message, Part, Role, Summarizer, SummarizerUsage, Summary,
    SummaryContext, SummaryRequest, View, ViewMessage, Window,
};
use serde_json::json;

use crate::history;
use crate::prepare::{prepare, Prepared};
use crate::tokens::{estimate_request_tokens, estimate_text_tokens};
use crate::trigger::{anchor, token_count_with_pending, TOKEN_COUNT};
use crate::{prompt, tasks, KimiCliStrategy, Release};

/// Key in a checkpoint's `details`: how many of its `injected` messages go before the kept
/// tail (messages the previous compaction injected and this one keeps at the tail's start);
/// the rest go after it.
pub(crate) const LEADING_INJECTED: &str = "leading_injected";

/// `DEFAULT_COMPLETION_TOKEN_SAFETY_MARGIN`, added to the input estimate before sizing the cap.
const SAFETY_MARGIN: u64 = 1_024;

/// Why a compaction runs (the trigger reasons Kimi reports to hooks and telemetry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// Step 2c's threshold check.
    Auto,
    /// `/compact [instruction]`.
    Manual { instruction: String },
}

impl Trigger {
    fn reason(&self) -> &'static str {
        match self {
            Trigger::Auto => "auto",
            Trigger::Manual { instruction } if instruction.is_empty() => "manual",
            Trigger::Manual { .. } => "manual-with-prompt",
        }
    }

    fn instruction(&self) -> &str {
        match self {
            Trigger::Auto => "",
            Trigger::Manual { instruction } => instruction,
        }
    }
}

/// `/compact [instruction]`: "The context is empty." while no step has run yet (Kimi's
/// `n_checkpoints == 0`: no history and no earlier compaction), else a compaction without any
/// threshold check ([`Moment::Manual`](compactbench_core::Moment::Manual)).
pub(crate) fn manual(
    strategy: &KimiCliStrategy,
    log: &Log,
    view: &View,
    instruction: &str,
    cx: &mut Cx<'_>,
) -> Result<Vec<Checkpoint>, Error> {
    if is_empty(log, view) {
        return Err(Error::new(ErrorKind::NothingToCompact, "The context is empty."));
    }
    let trigger = Trigger::Manual { instruction: instruction.trim().to_owned() };
    compact_context(strategy, log, view, &trigger, cx)
}

/// Kimi's `n_checkpoints == 0`: no history and no earlier compaction.
pub(crate) fn is_empty(log: &Log, view: &View) -> bool {
    history::split(view).1.is_empty() && log.last_checkpoint().is_none()
}

/// One compaction. An empty result means `prepare` found nothing to summarize (Kimi rewrites
/// the same messages; see the crate docs). Errors leave everything unchanged.
pub(crate) fn compact_context(
    strategy: &KimiCliStrategy,
    log: &Log,
    view: &View,
    trigger: &Trigger,
    cx: &mut Cx<'_>,
) -> Result<Vec<Checkpoint>, Error> {
    let (system, items) = history::split(view);
    let messages: Vec<&Message> = items.iter().map(|it| &it.message).collect();
    // K1 had no `/compact <instruction>`.
    let instruction = if strategy.release == Release::K1 { "" } else { trigger.instruction() };
    let Some(prepared) = prepare(&messages, strategy.max_preserved_messages, instruction) else {
        return Ok(Vec::new());
    };
    let to_preserve = &items[prepared.cut..];
    let kept: Vec<&Message> = to_preserve.iter().map(|it| &it.message).collect();
    // Background tasks (and the note) arrived after K1.
    let active = match strategy.release {
        Release::Pypi1_52 => tasks::active_task_message(&strategy.active_tasks),
        Release::K1 => None,
    };

    let request = SummaryRequest {
        purpose: "compaction".into(),
        // spec (d): COMPACTION_SYSTEM_PROMPT, one user message; the agent's system prompt is not sent.
        context: SummaryContext::Fresh,
        system: prompt::SYSTEM.into(),
        transcript: prepared.transcript(),
        // `user_message()` puts a blank line between transcript and instructions; Kimi's last
        // part starts with exactly that (a newline, then the prompt's own leading newline).
        instructions: prepared.prompt_part().strip_prefix("\n\n").unwrap_or(prepared.prompt_part()).to_owned(),
        max_output_tokens: output_cap(strategy, cx, &system, &kept, active.as_ref(), &prepared),
    };
    let (summary, usage) = summarize_with_retry(cx.summarizer, &request, strategy.config.max_retries_per_step)?;

    let summary_message = Message::new(Role::User, vec![Part::text(prompt::SUMMARY_PREFIX), Part::text(summary.text)]);
    let token_count = match strategy.release {
        Release::Pypi1_52 => {
            let result: Vec<&Message> = std::iter::once(&summary_message).chain(kept.iter().copied()).collect();
            estimated_token_count(Some(summary.output_tokens), &result) + active.iter().map(|m| estimate_text_tokens([m])).sum::<u64>()
        }
        // K1's `clear()` zeroed the counter and nothing wrote it again before the next call.
        Release::K1 => 0,
    };

    // The kept tail is log entries, except messages an earlier compaction injected: those at
    // its start stay before the entries, any others after them.
    let first_entry = to_preserve.iter().position(|it| it.origin.entry().is_some()).unwrap_or(to_preserve.len());
    let is_injected = |it: &&ViewMessage| it.origin.entry().is_none();
    let leading: Vec<Message> = to_preserve[..first_entry].iter().filter(is_injected).map(|it| it.message.clone()).collect();
    let trailing = to_preserve[first_entry..].iter().filter(is_injected).map(|it| it.message.clone());
    let window = Window::From(to_preserve.get(first_entry).and_then(|it| it.origin.entry()).unwrap_or(log.next_id()));

    let mut checkpoint = Checkpoint::new(CheckpointKind::Summary, window).with_summary(summary_message);
    checkpoint.injected = leading.iter().cloned().chain(trailing).chain(active).collect();
    checkpoint.tokens_before = token_count_with_pending(anchor(log), view, strategy.release);
    checkpoint.summarizer = usage;
    checkpoint.details = json!({
        TOKEN_COUNT: token_count,
        LEADING_INJECTED: leading.len(),
        "trigger": trigger.reason(),
        "summarized_messages": prepared.cut,
    });
    Ok(vec![checkpoint])
}

/// `CompactionResult.estimated_token_count`: with usage of the summarizer call, its output
/// tokens plus the text estimate of the kept messages (all but the first, the summary);
/// without, the text estimate of every message.
pub(crate) fn estimated_token_count(summary_output: Option<u64>, messages: &[&Message]) -> u64 {
    match summary_output {
        Some(output) if !messages.is_empty() => output + estimate_text_tokens(messages[1..].iter().copied()),
        _ => estimate_text_tokens(messages.iter().copied()),
    }
}

/// The summary's `max_completion_tokens` (`_compute_completion_overrides`): only for Kimi's
/// own provider; the room the window leaves after the larger of the next main request and the
/// summarizer request, less a safety margin. Other providers (and K1, before PR #2494) set no
/// cap, so the model's default maximum applies.
fn output_cap(
    strategy: &KimiCliStrategy,
    cx: &Cx<'_>,
    system: &str,
    kept: &[&Message],
    active: Option<&Message>,
    prepared: &Prepared,
) -> u64 {
    if strategy.release == Release::K1 || !strategy.config.kimi_provider {
        return cx.model.max_output;
    }
    let window = cx.model.window;
    if window == 0 {
        return strategy.config.reserved_context_size.max(1);
    }
    let prefix_only = Message::new(Role::User, vec![Part::text(prompt::SUMMARY_PREFIX)]);
    let post = estimate_request_tokens(system, std::iter::once(&prefix_only).chain(kept.iter().copied()).chain(active));
    let compact_message = Message::new(Role::User, prepared.parts.iter().map(Part::text).collect());
    let req = estimate_request_tokens(prompt::SYSTEM, [&compact_message]);
    let input = post.max(req) + SAFETY_MARGIN;
    window.min(window.saturating_sub(input).max(1)).max(1)
}

/// Whether Kimi's `_is_retryable_error` retries this kind: connection and timeout errors,
/// HTTP 429/5xx and empty responses; anything else (400, 401, …) fails at once.
fn retryable(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::Timeout | ErrorKind::Transport | ErrorKind::EmptySummary)
}

/// The summarizer call under `tenacity`: up to `attempts` tries on retryable errors, then the
/// last error. A blank reply is kosong's `APIEmptyResponseError`. A reply stopped by the cap is
/// accepted as it is.
fn summarize_with_retry(
    summarizer: &dyn Summarizer,
    request: &SummaryRequest,
    attempts: u32,
) -> Result<(Summary, SummarizerUsage), Error> {
    let mut usage = SummarizerUsage::default();
    loop {
        usage.calls += 1;
        let result = summarizer.summarize(request).and_then(|s| {
            if s.text.trim().is_empty() {
                Err(Error::new(ErrorKind::EmptySummary, "the summarizer returned an empty response"))
            } else {
                Ok(s)
            }
        });
        match result {
            Ok(summary) => {
                usage.input_tokens += summary.input_tokens;
                usage.output_tokens += summary.output_tokens;
                return Ok((summary, usage));
            }
            Err(e) => {
                usage.failures += 1;
                if !retryable(e.kind) || usage.calls >= attempts.max(1) {
                    return Err(Error::new(e.kind, format!("Context compaction failed: {}", e.message)));
                }
            }
        }
    }
}
