//! Full compaction (`compactConversation` as reverse engineered): summarize the whole working
//! view, keep nothing of it, re-inject attachments.

use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Error, ErrorKind, Log, Message, Offload, Role, StopReason, View, Window,
};
use serde_json::json;

use crate::ptl::{self, Call};
use crate::trigger::MAX_OUTPUT_TOKENS_FOR_SUMMARY;
use crate::{attach, prompt, wire, ClaudeCodeConfig};

/// The leading system text of `view` and the messages after it.
pub(crate) fn split_system(view: &View) -> (String, Vec<Message>) {
    let leading = view.messages.iter().take_while(|m| m.message.role == Role::System).count();
    let system = view.messages[..leading].iter().map(|m| m.message.text()).collect::<Vec<_>>().join("\n\n");
    (system, view.messages[leading..].iter().map(|m| m.message.clone()).collect())
}

/// Where the kept tail starts among the non-system messages of `view` (`messages.len()`: nothing
/// kept): at the newest assistant message, when [`ClaudeCodeConfig::keep_last_round`] is on,
/// something comes before it and every message from it on is a log entry.
fn tail_start(config: &ClaudeCodeConfig, view: &View) -> usize {
    let leading = view.messages.iter().take_while(|m| m.message.role == Role::System).count();
    let rest = &view.messages[leading..];
    if !config.keep_last_round {
        return rest.len();
    }
    match rest.iter().rposition(|m| m.message.role == Role::Assistant) {
        Some(at) if at > 0 && rest[at..].iter().all(|m| m.origin.entry().is_some()) => at,
        _ => rest.len(),
    }
}

/// Summarizes `view` (the working view, micro-compaction applied) into a checkpoint: all of it,
/// or all but the newest round, which is kept verbatim after the summary.
pub(crate) fn compact(config: &ClaudeCodeConfig, log: &Log, view: &View, trigger: &str, tokens_before: u64, cx: &mut Cx<'_>) -> Result<Checkpoint, Error> {
    let (system, mut messages) = split_system(view);
    if messages.is_empty() {
        return Err(Error::new(ErrorKind::NothingToCompact, "Not enough messages to compact."));
    }
    let leading = view.messages.len() - messages.len();
    let tail = tail_start(config, view);
    let kept: Vec<_> = view.messages[leading + tail..].iter().filter_map(|m| m.origin.entry()).collect();
    messages.truncate(tail);
    let instructions = prompt::compact_prompt(config.compact_instructions.as_deref(), cx.manual);
    let cap = match cx.model.max_output {
        0 => MAX_OUTPUT_TOKENS_FOR_SUMMARY,
        m => m.min(MAX_OUTPUT_TOKENS_FOR_SUMMARY),
    };
    let call = Call {
        purpose: "compact",
        system: &system,
        instructions: &instructions,
        max_output_tokens: cap,
    };
    let outcome = ptl::summarize(cx.summarizer, &call, messages)?;

    let transcript = config.transcript_pointer.then(|| {
        cx.store.write(wire::TRANSCRIPT_PATH, wire::transcript_file(log));
        wire::TRANSCRIPT_PATH
    });
    // A turn starts when the user's new message ends the view (no tool results after it).
    let turn_start = view.messages.last().is_some_and(|m| m.message.role == Role::User);
    let attachments = attach::collect(config, log, turn_start);
    let kept_count = kept.len();
    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::Kept(kept))
        .with_summary(Message::user(prompt::summary_message(&outcome.text, transcript, kept_count > 0)));
    cp.injected = attachments.messages;
    cp.tokens_before = tokens_before;
    cp.summarizer = outcome.usage;
    if let Some(path) = transcript {
        cp.offloads.push(Offload { path: path.to_owned(), entries: log.messages().map(|(id, _)| id).collect() });
    }
    cp.details = json!({
        "trigger": trigger,
        "pre_tokens": tokens_before,
        "ptl_retries": outcome.retries,
        "ptl_dropped_messages": outcome.dropped,
        "cut_off": outcome.stop == StopReason::Length,
        "kept_messages": kept_count,
        "attachments": attachments.details,
    });
    Ok(cp)
}
