//! The two compaction tasks: local (`compact.rs` `run_compact_task_inner` @e06dd0e5) and the
//! modelled remote one (`compact_remote.rs` `run_remote_compact_task_inner_impl` @683f0a68).

use compactbench_core::{
    Checkpoint, Cx, Error, ErrorKind, Log, Message, Moment, Origin, Role, SummarizerUsage, SummaryContext, SummaryRequest, View,
};

use crate::history::{
    base_instructions, build_compacted_history, collect_user_messages, initial_context, insert_initial_context,
    is_contextual, select_user_messages, take_trailing_model_switch, Built, HistMessage,
};
use crate::items::{items, message_tokens, remove_with_counterpart, text_tokens, transcript, Item};
use crate::layout::{checkpoint, is_compaction, Anchor, Injection, Outcome, Path};
use crate::prompt::{NO_SUMMARY, REMOTE_SERVER_PROMPT, SUMMARY_PREFIX};
use crate::trigger::total_tokens;
use crate::CodexConfig;

/// A compaction at `at`, given the view and its anchor: local or remote as configured, with
/// the initial context placed as at that site, recorded as one checkpoint.
pub(crate) fn run(
    config: &CodexConfig,
    log: &Log,
    view: &View,
    anchor: Option<&Anchor>,
    at: Moment,
    cx: &mut Cx<'_>,
) -> Result<Vec<Checkpoint>, Error> {
    let injection = match at {
        // Manual (`run_compact_task`) compactions: `DoNotInject` (spec (e)).
        Moment::Manual => Injection::DoNotInject,
        Moment::TurnEnd if !config.pre_turn_context_before_last_user => Injection::DoNotInject,
        Moment::TurnEnd => Injection::BeforeLastUserMessage,
        Moment::BeforeRequest | Moment::Overflow => Injection::BeforeLastUserMessage,
    };
    let tokens_before = total_tokens(view, anchor, config.content_estimate);
    let start = start(log, view, anchor);
    let outcome = if config.uses_remote(cx.model.provider) {
        remote(log, start, injection, tokens_before, cx)?
    } else {
        local(config, log, start, injection, tokens_before, cx)?
    };
    Ok(vec![checkpoint(log, outcome)])
}

/// What both tasks start from: the history without the base instructions, split from the
/// trailing model-switch message.
struct Start {
    base: String,
    history: Vec<HistMessage>,
    model_switch: Option<HistMessage>,
}

fn start(log: &Log, view: &View, anchor: Option<&Anchor>) -> Start {
    let base = base_instructions(log);
    let mut history: Vec<HistMessage> = view
        .messages
        .iter()
        .filter(|vm| base.is_none_or(|(id, _)| vm.origin != Origin::Entry(id)))
        .map(|vm| HistMessage {
            entry: vm.origin.entry(),
            message: vm.message.clone(),
            compaction: is_compaction(anchor, vm.origin),
        })
        .collect();
    let model_switch = take_trailing_model_switch(&mut history);
    Start { base: base.map(|(_, m)| m.text()).unwrap_or_default(), history, model_switch }
}

fn history_items(history: &[HistMessage]) -> Vec<Item> {
    history
        .iter()
        .enumerate()
        .flat_map(|(owner, h)| items(&h.message, h.compaction).into_iter().map(move |item| Item { owner, ..item }))
        .collect()
}

/// Whether a summarizer error is the provider's context-window rejection, which Codex maps
/// from the `context_length_exceeded` error code to `ContextWindowExceeded`.
fn is_context_window_exceeded(error: &Error) -> bool {
    let m = error.message.to_ascii_lowercase();
    error.kind == ErrorKind::ContextOverflow || m.contains("context_length_exceeded") || m.contains("context window") || m.contains("maximum context length")
}

/// Where the replacement history ends and how the initial context is placed, shared by both
/// paths: context spliced in (mid-turn) or appended as what the next turn re-injects
/// (pre-turn); then the model-switch message goes back after the summary.
fn finish(
    log: &Log,
    mut history: Vec<Built>,
    injection: Injection,
    model_switch: Option<HistMessage>,
    summary_is_compaction: bool,
) -> (Vec<Built>, Option<usize>) {
    if injection == Injection::BeforeLastUserMessage {
        history = insert_initial_context(history, initial_context(log), summary_is_compaction);
    }
    if let Some(ms) = model_switch {
        history.push(Built::Message { entry: ms.entry, message: ms.message });
    }
    // Ghost snapshots (`/undo`) would follow here; the log has none.
    let mut reinjected_from = None;
    if injection == Injection::DoNotInject {
        // `reference_context_item` is cleared, so the next regular turn records the full
        // initial context before its user message: right after the replacement history.
        reinjected_from = Some(history.len());
        history.extend(initial_context(log).into_iter().map(|message| Built::Message { entry: None, message }));
    }
    (history, reinjected_from)
}

fn tokens_after(base: &str, history: &[Built], upto: usize, summary_is_compaction: bool) -> u64 {
    text_tokens(base)
        + history[..upto]
            .iter()
            .map(|b| match b {
                Built::Message { message, .. } => message_tokens(message, false),
                Built::Summary(message) => message_tokens(message, summary_is_compaction),
            })
            .sum::<u64>()
}

/// Local compaction: summarize the whole history with the compaction prompt as the last user
/// message; replace the history by the newest user messages within the cap plus the summary.
fn local(
    config: &CodexConfig,
    log: &Log,
    Start { base, history, model_switch }: Start,
    injection: Injection,
    tokens_before: u64,
    cx: &mut Cx<'_>,
) -> Result<Outcome, Error> {
    let prompt = config.compact_prompt();

    let mut request_items = history_items(&history);
    let mut usage = SummarizerUsage::default();
    let mut trimmed = 0usize;
    let mut retries = 0u32;
    let summary = loop {
        // The request carries the history items plus the prompt item. Codex sends it whatever
        // its size: only the provider's `ContextWindowExceeded` makes it trim.
        let turn_input_len = request_items.len() + 1;
        let request = SummaryRequest {
            purpose: "compact".into(),
            // spec (d): the full in-memory history with base_instructions, plus one user message with the prompt.
            context: SummaryContext::Prefix,
            system: base.clone(),
            transcript: transcript(&request_items),
            instructions: prompt.to_owned(),
            max_output_tokens: cx.model.max_output,
        };
        let attempt = cx.summarizer.summarize(&request);
        usage.add(match &attempt {
            Ok(s) => SummarizerUsage { calls: 1, failures: 0, input_tokens: s.input_tokens, output_tokens: s.output_tokens },
            Err(_) => SummarizerUsage { calls: 1, failures: 1, ..SummarizerUsage::default() },
        });
        match attempt {
            // A cut-off reply (`StopReason::Length`) is used as it is: Codex takes the last
            // assistant message of the turn without looking at why it ended.
            Ok(summary) => break summary,
            Err(e) if is_context_window_exceeded(&e) => {
                if turn_input_len > 1 {
                    // Drop from the front to keep the cached prefix and the recent items.
                    remove_with_counterpart(&mut request_items, 0);
                    trimmed += 1;
                    retries = 0;
                    continue;
                }
                return Err(Error::new(
                    ErrorKind::Other,
                    format!("context window exceeded while compacting, nothing left to trim: {}", e.message),
                ));
            }
            Err(e) => {
                if retries < config.stream_max_retries {
                    retries += 1;
                    continue;
                }
                return Err(Error::new(e.kind, format!("compaction failed after {retries} retries: {}", e.message)));
            }
        }
    };

    let suffix = if summary.text.is_empty() { NO_SUMMARY } else { summary.text.as_str() };
    let summary_message = Message::user(format!("{SUMMARY_PREFIX}\n{suffix}"));
    // User messages come from the full history, not the trimmed request.
    let selected = select_user_messages(&collect_user_messages(&history), config.user_message_max_tokens);
    let built = build_compacted_history(selected, summary_message);
    let (built, reinjected_from) = finish(log, built, injection, model_switch, false);
    let upto = reinjected_from.unwrap_or(built.len());
    Ok(Outcome {
        path: Path::Local,
        injection,
        tokens_after: tokens_after(&base, &built, upto, false),
        history: built,
        reinjected_from,
        tokens_before,
        trimmed_items: trimmed,
        summary_text: summary.text,
        usage,
    })
}

/// Keeps what Codex keeps of a remote reply (`should_keep_compacted_history_item`): real
/// user messages (earlier summaries included), the text of assistant messages, and
/// compaction items; developer messages, contextual user messages, reasoning and tool items
/// are dropped. Returns the message to keep.
pub(crate) fn keep_remote_item(message: &Message, compaction: bool) -> Option<Message> {
    if compaction {
        return Some(message.clone());
    }
    match message.role {
        Role::User => (!is_contextual(message)).then(|| message.clone()),
        Role::Assistant => {
            let texts: Vec<_> = message
                .parts
                .iter()
                .filter(|p| matches!(p, compactbench_core::Part::Text { .. }))
                .cloned()
                .collect();
            (!texts.is_empty()).then(|| Message::new(Role::Assistant, texts))
        }
        Role::System | Role::Tool => None,
    }
}

/// Remote compaction as modelled: the history (trailing tool outputs trimmed while it does
/// not fit) goes to the summarizer standing in for `/responses/compact`; the modelled reply is
/// the input's user messages followed by one compaction item holding the summary.
fn remote(
    log: &Log,
    Start { base, history, model_switch }: Start,
    injection: Injection,
    tokens_before: u64,
    cx: &mut Cx<'_>,
) -> Result<Outcome, Error> {
    let window = cx.model.window;
    let mut request_items = history_items(&history);
    let mut trimmed = 0usize;
    // `trim_function_call_history_to_fit_context_window`: drop trailing Codex-generated items
    // (tool outputs, developer messages) with their calls while the estimate exceeds the window.
    while window > 0 && text_tokens(&base) + request_items.iter().map(Item::tokens).sum::<u64>() > window {
        match request_items.last() {
            Some(last) if last.codex_generated => {
                let last = request_items.len() - 1;
                remove_with_counterpart(&mut request_items, last);
                trimmed += 1;
            }
            _ => break,
        }
    }
    // What the trim left out is the view's newest messages: the history after the last one
    // with an item left, and the model-switch message after it, which is never sent.
    let context = if trimmed == 0 {
        SummaryContext::Prefix
    } else {
        let sent = request_items.iter().map(|i| i.owner + 1).max().unwrap_or(0);
        SummaryContext::TrimmedPrefix { newest: history.len() - sent + usize::from(model_switch.is_some()) }
    };
    let request = SummaryRequest {
        purpose: "remote-compact".into(),
        // modelled: spec (d) remote sends the same history and base_instructions to /responses/compact.
        context,
        system: base.clone(),
        transcript: transcript(&request_items),
        // `compact_prompt` is not applied on this path.
        instructions: REMOTE_SERVER_PROMPT.into(),
        max_output_tokens: cx.model.max_output,
    };
    let mut usage = SummarizerUsage { calls: 1, ..SummarizerUsage::default() };
    let summary = cx.summarizer.summarize(&request).map_err(|e| {
        Error::new(e.kind, format!("Error running remote compact task: {}", e.message))
    })?;
    usage.input_tokens = summary.input_tokens;
    usage.output_tokens = summary.output_tokens;

    // The modelled server reply, then Codex's filter over it.
    let mut reply: Vec<(Option<compactbench_core::EntryId>, Message, bool)> = history
        .iter()
        .filter(|h| h.message.role == Role::User && !h.compaction)
        .map(|h| (h.entry, h.message.clone(), false))
        .collect();
    reply.push((None, Message::assistant(summary.text.clone()), true));
    let built: Vec<Built> = reply
        .into_iter()
        .filter_map(|(entry, message, compaction)| {
            let kept = keep_remote_item(&message, compaction)?;
            Some(if compaction { Built::Summary(kept) } else { Built::Message { entry, message: kept } })
        })
        .collect();
    let (built, reinjected_from) = finish(log, built, injection, model_switch, true);
    let upto = reinjected_from.unwrap_or(built.len());
    Ok(Outcome {
        path: Path::Remote,
        injection,
        tokens_after: tokens_after(&base, &built, upto, true),
        history: built,
        reinjected_from,
        tokens_before,
        trimmed_items: trimmed,
        summary_text: summary.text,
        usage,
    })
}
