//! One compaction: summarize everything before the retained turns (the previous summary
//! included) into one user message at the start of the history.

use std::fmt::Write;

use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Entry, Error, ErrorKind, Log, Message, Part, Role, StopReason, SummarizerUsage,
    SummaryContext, SummaryRequest, View, Window,
};
use serde_json::json;

use crate::turns::select;

/// Output cap of the summary call \[assume: DeepSeek's 8,192, a mid value\].
pub(crate) const SUMMARY_MAX_TOKENS: u64 = 8_192;

const SYSTEM: &str = "You compact the history of a coding agent's conversation so that the agent can go on from your summary.";

/// A generic structured-summary instruction \[assume\].
const INSTRUCTIONS: &str = "Summarize the conversation above (and fold in the previous summary, if one is given) \
so that the work can continue without it. Use these sections:
- Goal: what the user wants overall.
- Constraints: every requirement, preference and prohibition the user stated.
- Progress: what has been done, with the results that matter.
- Files: the files read, changed or created, and why each matters.
- Open problems: errors, failing checks and questions still unresolved, with exact messages.
- Next step: what to do next.";

/// Appends `messages` to `out`, each as its parts' role-prefixed lines, one line break between
/// messages.
pub(crate) fn write_lines<'m>(out: &mut String, messages: impl IntoIterator<Item = &'m Message>) {
    for (i, message) in messages.into_iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        serialize_into(out, message);
    }
}

/// Appends the message's parts to `out` as role-prefixed lines. A transcript is written in
/// place rather than joined from per-message strings: a refused summary request is rebuilt at
/// every request after it.
fn serialize_into(out: &mut String, message: &Message) {
    let who = match message.role {
        Role::System => "System",
        Role::User => "User",
        Role::Assistant => "Assistant",
        Role::Tool => "Tool",
    };
    for (i, part) in message.parts.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        // Writing to a String cannot fail.
        let _ = match part {
            Part::Text { text } => write!(out, "{who}: {text}"),
            Part::Reasoning { text } => write!(out, "{who} (thinking): {text}"),
            Part::ToolCall { name, args, .. } => write!(out, "Tool call: {name} {args}"),
            Part::ToolResult { name, text, is_error: true, .. } => write!(out, "Tool result ({name}, error): {text}"),
            Part::ToolResult { name, text, .. } => write!(out, "Tool result ({name}): {text}"),
            Part::Media { mime, .. } => write!(out, "{who}: [{mime}]"),
        };
    }
}

/// The leading system text of `view`.
pub(crate) fn system_text(view: &View) -> String {
    let texts: Vec<String> =
        view.messages.iter().take_while(|m| m.message.role == Role::System).map(|m| m.message.text()).collect();
    texts.join("\n\n")
}

/// The summary message: user role, at the start of the history \[assume\].
fn summary_message(text: &str) -> Message {
    Message::user(format!("Summary of the earlier conversation, which was compacted:\n\n{}", text.trim()))
}

/// Whether an overflow compaction already ran since the newest user message (the overflow
/// path fires once per turn).
pub(crate) fn overflow_handled_this_turn(log: &Log) -> bool {
    let turn = log.messages().rev().find(|(_, m)| m.role == Role::User).map(|(id, _)| id);
    log.entries()
        .rev()
        .take_while(|(id, _)| turn.is_none_or(|t| *id > t))
        .any(|(_, e)| matches!(e, Entry::Checkpoint(cp) if cp.details["trigger"] == "overflow"))
}

pub(crate) fn run(view: &View, retain: u64, trigger: &str, tokens_before: u64, cx: &mut Cx<'_>) -> Result<Checkpoint, Error> {
    let selection =
        select(view, retain).ok_or_else(|| Error::new(ErrorKind::NothingToCompact, "nothing before the retained turns"))?;
    let mut transcript = String::new();
    if let Some(i) = selection.previous {
        transcript.push_str("Previous summary:\n");
        transcript.push_str(&view.messages[i].message.text());
        transcript.push_str("\n\nConversation since then:\n");
    }
    write_lines(&mut transcript, selection.summarized.iter().map(|&i| &view.messages[i].message));
    let request = SummaryRequest {
        purpose: "history".into(),
        // modelled, spec (d) [assume]: compacted messages serialized as role-prefixed text.
        context: SummaryContext::Fresh,
        system: SYSTEM.into(),
        transcript,
        instructions: INSTRUCTIONS.into(),
        max_output_tokens: SUMMARY_MAX_TOKENS,
    };
    let summary = cx.summarizer.summarize(&request)?;
    if summary.text.trim().is_empty() {
        return Err(Error::new(ErrorKind::EmptySummary, "the summary was empty"));
    }
    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::Kept(selection.kept)).with_summary(summary_message(&summary.text));
    cp.tokens_before = tokens_before;
    cp.summarizer = SummarizerUsage { calls: 1, failures: 0, input_tokens: summary.input_tokens, output_tokens: summary.output_tokens };
    cp.details = json!({
        "trigger": trigger,
        "summarized_messages": selection.summarized.len(),
        "kept_turns": selection.kept_turns,
        "kept_tokens": selection.kept_tokens,
        "cut_off": summary.stop == StopReason::Length,
    });
    Ok(cp)
}
