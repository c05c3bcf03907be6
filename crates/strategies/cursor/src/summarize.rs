//! The summary: everything before the latest user turn, written in full to a chat-history file
//! and summarized into one user message that names the file.

use std::fmt::Write;

use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Entry, Error, ErrorKind, Log, Message, Offload, Origin, Part, Role, StopReason,
    SummarizerUsage, SummaryContext, SummaryRequest, View, Window,
};
use serde_json::json;

/// Output cap of the summary call \[assume: users see ≈ 1k-token summaries\].
pub(crate) const SUMMARY_MAX_TOKENS: u64 = 2_000;

const SYSTEM: &str = "You summarize the earlier part of a conversation between a user and a coding agent.";

/// A generic structured-summary instruction \[assume\].
const INSTRUCTIONS: &str = "Summarize the conversation above (and fold in the previous summary, if one is given) \
so the agent can continue from the summary and the latest request. Cover:
- Goal: what the user is trying to achieve.
- Decisions: what was decided, and the user's instructions and constraints.
- Files: the files read, created or changed.
- Errors: errors met and whether they were resolved.
- Next step: what remains to be done.
Be brief.";

/// The chat-history file of the `n`th summary \[assume\].
pub(crate) fn history_path(n: usize) -> String {
    format!(".cursor/chat-history/history-{n}.md")
}

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

/// The chat-history file's content: every log message in full, and each earlier summary where
/// it happened, one block each, blank-line separated. Every summary writes it whole.
fn history_file(log: &Log) -> String {
    let mut file = String::new();
    let separate = |file: &mut String| {
        if !file.is_empty() {
            file.push_str("\n\n");
        }
    };
    for (_, entry) in log.entries() {
        match entry {
            Entry::Message(m) => {
                separate(&mut file);
                serialize_into(&mut file, m);
            }
            Entry::Checkpoint(cp) if cp.kind == CheckpointKind::Summary => {
                if let Some(s) = &cp.summary {
                    separate(&mut file);
                    file.push_str("[Summarized conversation]\n");
                    file.push_str(&s.text());
                }
            }
            Entry::Checkpoint(_) => {}
        }
    }
    file + "\n"
}

fn summary_message(text: &str, path: &str) -> Message {
    Message::user(format!(
        "Summary of the earlier conversation:\n\n{}\n\nThe full conversation before this summary is saved in {path}; \
         search it for exact details the summary leaves out.",
        text.trim()
    ))
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

/// Summarizes all of `view` before its latest user turn.
pub(crate) fn run(log: &Log, view: &View, trigger: &str, tokens_before: u64, cx: &mut Cx<'_>) -> Result<Checkpoint, Error> {
    let body = view.messages.iter().take_while(|m| m.message.role == Role::System).count();
    let latest = (body..view.len())
        .rev()
        .find(|&i| view.messages[i].message.role == Role::User && view.messages[i].origin.entry().is_some())
        .ok_or_else(|| Error::new(ErrorKind::NothingToCompact, "no user turn"))?;
    let is_summary = |i: usize| matches!(view.messages[i].origin, Origin::Summary(_));
    let summarized: Vec<usize> = (body..latest).filter(|&i| !is_summary(i)).collect();
    if summarized.is_empty() {
        return Err(Error::new(ErrorKind::NothingToCompact, "nothing before the latest user turn"));
    }
    let n = log.checkpoints().filter(|(_, cp)| cp.kind == CheckpointKind::Summary).count() + 1;
    let path = history_path(n);

    let mut transcript = String::new();
    if let Some(i) = (body..latest).find(|&i| is_summary(i)) {
        transcript.push_str("Previous summary:\n");
        transcript.push_str(&view.messages[i].message.text());
        transcript.push_str("\n\nConversation since then:\n");
    }
    write_lines(&mut transcript, summarized.iter().map(|&i| &view.messages[i].message));
    let request = SummaryRequest {
        purpose: "history".into(),
        // modelled, spec (d) [assume]: summarized messages as role-prefixed text under a generic instruction.
        context: SummaryContext::Fresh,
        system: SYSTEM.into(),
        transcript,
        instructions: format!("{INSTRUCTIONS}\nThe complete conversation is saved in {path} for later reference."),
        max_output_tokens: SUMMARY_MAX_TOKENS,
    };
    let summary = cx.summarizer.summarize(&request)?;
    if summary.text.trim().is_empty() {
        return Err(Error::new(ErrorKind::EmptySummary, "the summary was empty"));
    }
    cx.store.write(path.clone(), history_file(log));

    let kept = view.messages[latest..].iter().filter_map(|m| m.origin.entry()).collect();
    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::Kept(kept)).with_summary(summary_message(&summary.text, &path));
    cp.offloads.push(Offload { path, entries: log.messages().map(|(id, _)| id).collect() });
    cp.tokens_before = tokens_before;
    cp.summarizer = SummarizerUsage { calls: 1, failures: 0, input_tokens: summary.input_tokens, output_tokens: summary.output_tokens };
    cp.details = json!({
        "trigger": trigger,
        "summarized_messages": summarized.len(),
        "cut_off": summary.stop == StopReason::Length,
    });
    Ok(cp)
}
