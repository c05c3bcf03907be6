//! The summary: everything before the latest user turn, written in full to a chat-history file
//! and summarized into one user message that names the file.

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

/// The message's parts as role-prefixed lines.
pub(crate) fn serialize(message: &Message) -> String {
    let who = match message.role {
        Role::System => "System",
        Role::User => "User",
        Role::Assistant => "Assistant",
        Role::Tool => "Tool",
    };
    let lines: Vec<String> = message
        .parts
        .iter()
        .map(|part| match part {
            Part::Text { text } => format!("{who}: {text}"),
            Part::Reasoning { text } => format!("{who} (thinking): {text}"),
            Part::ToolCall { name, args, .. } => format!("Tool call: {name} {args}"),
            Part::ToolResult { name, text, is_error: true, .. } => format!("Tool result ({name}, error): {text}"),
            Part::ToolResult { name, text, .. } => format!("Tool result ({name}): {text}"),
            Part::Media { mime, .. } => format!("{who}: [{mime}]"),
        })
        .collect();
    lines.join("\n")
}

/// The chat-history file's content: every log message in full, and each earlier summary where
/// it happened, one block each, blank-line separated. Every summary writes it whole.
fn history_file(log: &Log) -> String {
    let mut file = String::new();
    for (_, entry) in log.entries() {
        let block = match entry {
            Entry::Message(m) => serialize(m),
            Entry::Checkpoint(cp) if cp.kind == CheckpointKind::Summary => match &cp.summary {
                Some(s) => format!("[Summarized conversation]\n{}", s.text()),
                None => continue,
            },
            Entry::Checkpoint(_) => continue,
        };
        if !file.is_empty() {
            file.push_str("\n\n");
        }
        file.push_str(&block);
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
    let lines: Vec<String> = summarized.iter().map(|&i| serialize(&view.messages[i].message)).collect();
    transcript.push_str(&lines.join("\n"));
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
