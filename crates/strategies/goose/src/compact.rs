//! Whole-conversation compaction (`compact_messages`, `do_compact`): summarize every
//! agent-visible message, hide them all, append the summary (user), the continuation
//! (assistant) and, for auto compaction, a fresh copy of the latest text-only user message.

use std::collections::HashSet;

use compactbench_core::tools::{tool_kind, tool_path, ToolKind};
use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Error, ErrorKind, Message, Part, SummarizerUsage, SummaryContext, SummaryPosition, SummaryRequest,
    Window,
};
use serde_json::json;

use crate::conversation::{Conversation, GooseMessage, GooseRole, OP_COMPACT};
use crate::prompt::{
    compaction_system, failure_message, threshold_notice, Continuation, COMPLETE_NOTICE, LADDER_EXHAUSTED, SUMMARY_ASK,
    THINKING_NOTICE,
};

/// Why a full compaction runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// Proactive: over `GOOSE_AUTO_COMPACT_THRESHOLD`.
    Threshold,
    /// Reactive: the provider said `ContextLengthExceeded`.
    Overflow,
    /// `/compact`.
    Manual,
}

impl Trigger {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Trigger::Threshold => "threshold",
            Trigger::Overflow => "overflow",
            Trigger::Manual => "manual",
        }
    }
}

/// `do_compact`'s removal ladder: percentages of tool-response messages left out of the
/// summary call after each context-length rejection.
pub(crate) const REMOVAL_PERCENTAGES: [u32; 5] = [0, 10, 20, 50, 100];

/// `READ_TOOLS` of `extract_file_history` (literal).
const READ_TOOLS: [&str; 5] = ["read", "developer__read", "file_read", "view", "text_editor"];
/// `WRITE_TOOLS` of `extract_file_history` (literal).
const WRITE_TOOLS: [&str; 7] =
    ["write", "edit", "developer__write", "developer__edit", "file_write", "file_edit", "str_replace_editor"];

/// `filter_tool_responses`: leaves out `max(1, n * percent / 100)` of the `n` messages that
/// carry a tool response, taken alternately left and right of the middle. As in the
/// original, the walk stops at the ends, so an odd count at 100 % keeps one message and a
/// single tool response is never removed.
pub(crate) fn filter_tool_responses<'m, 'a>(
    messages: &'m [&'m GooseMessage<'a>],
    percent: u32,
) -> Vec<&'m GooseMessage<'a>> {
    if percent == 0 {
        return messages.to_vec();
    }
    let tool: Vec<usize> = messages.iter().enumerate().filter(|(_, m)| m.has_tool_response()).map(|(i, _)| i).collect();
    if tool.is_empty() {
        return messages.to_vec();
    }
    let remove_n = (tool.len() * percent as usize / 100).max(1);
    let middle = tool.len() / 2;
    let mut removed = HashSet::new();
    for i in 0..remove_n {
        let offset = i / 2;
        if i % 2 == 0 {
            if middle > offset {
                removed.insert(tool[middle - offset - 1]);
            }
        } else if middle + offset < tool.len() {
            removed.insert(tool[middle + offset]);
        }
    }
    messages.iter().enumerate().filter(|(i, _)| !removed.contains(i)).map(|(_, m)| *m).collect()
}

/// `extract_file_history`: paths of tool requests, first seen first. A name matches on its
/// whole or on the part after the last `__`; a session recorded with another harness's tool
/// names maps to Goose's read / write tools through [`tool_kind`], and the path comes from
/// [`tool_path`] (Goose reads only `path`). A path written anywhere is only "modified".
pub(crate) fn extract_file_history(messages: &[&GooseMessage<'_>]) -> (Vec<String>, Vec<String>) {
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    let (mut read_set, mut write_set) = (HashSet::new(), HashSet::new());
    for m in messages {
        for part in &m.parts {
            let Part::ToolCall { name, args, .. } = part else { continue };
            let Some(path) = tool_path(args) else { continue };
            let short = name.rsplit_once("__").map_or(name.as_str(), |(_, t)| t);
            let named = |list: &[&str]| list.iter().any(|t| *t == name || *t == short);
            let kind = tool_kind(short);
            let is_write = named(&WRITE_TOOLS) || matches!(kind, ToolKind::Write | ToolKind::Edit);
            let is_read = named(&READ_TOOLS) || kind == ToolKind::Read;
            if is_write {
                if write_set.insert(path.to_owned()) {
                    writes.push(path.to_owned());
                }
            } else if is_read && read_set.insert(path.to_owned()) {
                reads.push(path.to_owned());
            }
        }
    }
    (reads, writes)
}

/// A summary and what it cost.
struct Summarized {
    text: String,
    usage: SummarizerUsage,
    output_tokens: u64,
    removed_percent: u32,
}

/// `do_compact`: the summary call over the agent-visible messages, retried down the removal
/// ladder while the provider answers `ContextLengthExceeded` (the runner's `ContextOverflow`:
/// the call was larger than the window). Goose sends each rung without counting it first.
fn do_compact(visible: &[&GooseMessage<'_>], cx: &Cx<'_>) -> Result<Summarized, Error> {
    let (read_files, modified_files) = extract_file_history(visible);
    let system = compaction_system(&read_files, &modified_files);
    let mut usage = SummarizerUsage::default();
    for percent in REMOVAL_PERCENTAGES {
        let transcript =
            filter_tool_responses(visible, percent).iter().map(|m| m.format()).collect::<Vec<_>>().join("\n");
        let request = SummaryRequest {
            purpose: "compaction".into(),
            // spec (d): system prompt = rendered compaction.md holding the messages, one user ask.
            context: SummaryContext::Fresh,
            system: system.clone(),
            transcript,
            instructions: SUMMARY_ASK.into(),
            // `complete_fast` sets no output cap: the model's own maximum applies.
            max_output_tokens: cx.model.max_output,
        };
        // The provider's `ContextLengthExceeded`: the next rung. Any other error ends the
        // compaction at once; a summary cut off at the output cap is used as it is (Goose
        // checks neither).
        let summary = match cx.summarizer.summarize(&request) {
            Ok(summary) => summary,
            Err(e) if e.kind == ErrorKind::ContextOverflow => {
                usage.add(SummarizerUsage { calls: 1, failures: 1, input_tokens: 0, output_tokens: 0 });
                continue;
            }
            Err(e) => return Err(Error::new(e.kind, failure_message(&e.message))),
        };
        usage.add(SummarizerUsage {
            calls: 1,
            failures: 0,
            input_tokens: summary.input_tokens,
            output_tokens: summary.output_tokens,
        });
        return Ok(Summarized {
            text: summary.text,
            usage,
            output_tokens: summary.output_tokens,
            removed_percent: percent,
        });
    }
    Err(Error::new(ErrorKind::Other, failure_message(LADDER_EXHAUSTED)))
}

/// `compact_messages`: the checkpoint that replaces the conversation.
pub(crate) fn compact_messages(
    conversation: &Conversation<'_>,
    trigger: Trigger,
    threshold: f64,
    tokens_before: u64,
    cx: &Cx<'_>,
) -> Result<Checkpoint, Error> {
    let messages = conversation.goose_messages();
    let manual = trigger == Trigger::Manual;
    // The newest agent-visible user message with text and no tool content. Summaries and
    // earlier preserved copies are such messages too, so they can be picked again.
    let preserved = if manual {
        None
    } else {
        messages.iter().enumerate().rev().find(|(_, m)| m.visible && m.role == GooseRole::User && m.text_only())
    };
    let is_most_recent = preserved.is_some_and(|(i, _)| i + 1 == messages.len());

    let visible: Vec<&GooseMessage<'_>> = messages.iter().filter(|m| m.visible).collect();
    let summarized = do_compact(&visible, cx)?;

    let continuation = if manual {
        Continuation::Manual
    } else if is_most_recent {
        Continuation::Conversation
    } else {
        Continuation::ToolLoop
    };
    let mut injected = vec![Message::assistant(continuation.text())];
    if let Some(text) = preserved.and_then(|(_, m)| m.text()) {
        injected.push(Message::user(text));
    }
    let mut notices = Vec::new();
    if !manual {
        notices.push(threshold_notice(threshold));
    }
    notices.push(THINKING_NOTICE.to_owned());
    notices.push(COMPLETE_NOTICE.to_owned());

    // Nothing from before is kept: every original becomes agent-invisible.
    let mut cp =
        Checkpoint::new(CheckpointKind::Summary, Window::Kept(Vec::new())).with_summary(Message::user(summarized.text));
    cp.summary_position = SummaryPosition::AfterSystem;
    cp.injected = injected;
    cp.tokens_before = tokens_before;
    cp.summarizer = summarized.usage;
    cp.details = json!({
        "op": OP_COMPACT,
        "trigger": trigger.as_str(),
        "continuation": continuation.as_str(),
        "preserved": preserved.and_then(|(_, m)| serde_json::to_value(m.origin).ok()),
        "removed_percent": summarized.removed_percent,
        // `session.total_tokens` after compaction: the summary's output tokens.
        "total_tokens": summarized.output_tokens,
        "notices": notices,
    });
    Ok(cp)
}
