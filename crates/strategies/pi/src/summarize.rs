//! Pi's summarizer calls (`generateSummary`, `generateTurnPrefixSummary`, `compact`) and the
//! conversation serializer (`serializeConversation`). Prompt texts are our paraphrases; the
//! headings, tags and markers are Pi's literals.

use compactbench_core::estimate::utf16_len;
use compactbench_core::{
    Checkpoint, CheckpointKind, Error, Message, Part, Role, Summarizer, SummarizerUsage, SummaryPosition,
    SummaryRequest, Window,
};
use serde_json::json;

use crate::prepare::{format_file_operations, Preparation};
use crate::session::{
    json_stringify, tool_result_blocks, Context, COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX,
};
use crate::trigger::Trigger;

/// `TOOL_RESULT_MAX_CHARS`: the serializer keeps this many UTF-16 units of a tool result.
const TOOL_RESULT_MAX_CHARS: u64 = 2000;

/// Literal history part of a split-turn summary when nothing precedes the turn.
pub(crate) const NO_PRIOR_HISTORY: &str = "No prior history.";

/// Literal separator between the history summary and the turn-prefix summary.
pub(crate) const SPLIT_TURN_SEPARATOR: &str = "\n\n---\n\n**Turn Context (split turn):**\n\n";

/// Paraphrase of `SUMMARIZATION_SYSTEM_PROMPT` (utils.ts).
const SYSTEM_PROMPT: &str = "You are an assistant that condenses conversations between a user and an AI coding \
assistant. Read the conversation and write a structured summary in exactly the format you are asked for.\n\n\
Do not carry the conversation on and do not answer anything asked in it. Output the structured summary and \
nothing else.";

/// Paraphrase of `SUMMARIZATION_PROMPT` (first compaction); headings are Pi's literals.
const INITIAL_PROMPT: &str = "The messages above are a conversation to condense. Write a structured checkpoint \
summary that another model will read to carry on the work.\n\n\
Use exactly this layout:\n\n\
## Goal\n\
[What the user wants to achieve; list several goals if the session spans several tasks.]\n\n\
## Constraints & Preferences\n\
- [Requirements, constraints or preferences the user stated]\n\
- [Or \"(none)\" if there were none]\n\n\
## Progress\n\
### Done\n\
- [x] [Finished tasks and changes]\n\n\
### In Progress\n\
- [ ] [Work under way]\n\n\
### Blocked\n\
- [Anything stopping progress]\n\n\
## Key Decisions\n\
- **[Decision]**: [Short reason]\n\n\
## Next Steps\n\
1. [What should happen next, in order]\n\n\
## Critical Context\n\
- [Data, examples or references needed to continue]\n\
- [Or \"(none)\" if nothing applies]\n\n\
Keep every section short. Keep file paths, function names and error messages exactly as they appear.";

/// Paraphrase of `UPDATE_SUMMARIZATION_PROMPT` (a previous summary exists).
const UPDATE_PROMPT: &str = "The messages above are NEW messages of the conversation. Merge them into the existing \
summary given between the <previous-summary> tags.\n\n\
Revise that structured summary with what is new. Rules:\n\
- KEEP everything the previous summary already records\n\
- ADD the new progress, decisions and context\n\
- MOVE items from \"In Progress\" to \"Done\" once they are finished\n\
- REVISE \"Next Steps\" to match what has been done\n\
- KEEP file paths, function names and error messages exactly as they appear\n\
- You may drop items that no longer matter\n\n\
Use exactly this layout:\n\n\
## Goal\n\
[Earlier goals, plus new ones if the task grew]\n\n\
## Constraints & Preferences\n\
- [Earlier ones, plus any newly found]\n\n\
## Progress\n\
### Done\n\
- [x] [Items done before AND items finished since]\n\n\
### In Progress\n\
- [ ] [Current work, brought up to date]\n\n\
### Blocked\n\
- [Current blockers; drop resolved ones]\n\n\
## Key Decisions\n\
- **[Decision]**: [Short reason] (keep the earlier ones, add new ones)\n\n\
## Next Steps\n\
1. [Brought up to date]\n\n\
## Critical Context\n\
- [Keep what matters, add what is new]\n\n\
Keep every section short. Keep file paths, function names and error messages exactly as they appear.";

/// Paraphrase of `TURN_PREFIX_SUMMARIZATION_PROMPT` (split turn).
const TURN_PREFIX_PROMPT: &str = "This is the BEGINNING (prefix) of a turn that was too large to keep whole. The END \
(suffix) of the turn, the recent work, is kept verbatim.\n\n\
Summarize the prefix so that the kept suffix can be understood:\n\n\
## Original Request\n\
[What the user asked for in this turn]\n\n\
## Early Progress\n\
- [Key decisions and work done in the prefix]\n\n\
## Context for Suffix\n\
- [What is needed to follow the kept recent work]\n\n\
Be brief; cover only what the kept suffix needs.";

/// `truncateForSummary`: the first `max` UTF-16 units and a literal marker naming how many
/// were dropped.
fn truncate_for_summary(text: &str, max: u64) -> String {
    let len = utf16_len(text);
    if len <= max {
        return text.to_owned();
    }
    // Cut on a char boundary at or below `max` units (JavaScript could split a surrogate
    // pair here; a Rust string cannot hold half of one).
    let mut units = 0u64;
    let mut end = 0usize;
    for (i, c) in text.char_indices() {
        let w = c.len_utf16() as u64;
        if units + w > max {
            break;
        }
        units += w;
        end = i + c.len_utf8();
    }
    format!("{}\n\n[... {} more characters truncated]", &text[..end], len - max)
}

/// `serializeConversation` after `convertToLlm`: one block per message, blocks joined by a
/// blank line, with the literal role labels. User and assistant text is never truncated;
/// each tool result keeps its first 2000 characters.
pub(crate) fn serialize_conversation(messages: &[Context<'_>]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for m in messages {
        let m = match m {
            Context::Message(m) => *m,
            // `convertToLlm` turns a compaction summary into a user message with its wrapper.
            Context::Summary(s) => {
                parts.push(format!("[User]: {COMPACTION_SUMMARY_PREFIX}{s}{COMPACTION_SUMMARY_SUFFIX}"));
                continue;
            }
        };
        match m.role {
            Role::User => {
                let content: String = m
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                if !content.is_empty() {
                    parts.push(format!("[User]: {content}"));
                }
            }
            Role::Assistant => {
                let mut text = Vec::new();
                let mut thinking = Vec::new();
                let mut calls = Vec::new();
                for part in &m.parts {
                    match part {
                        Part::Text { text: t } => text.push(t.as_str()),
                        Part::Reasoning { text: t } => thinking.push(t.as_str()),
                        Part::ToolCall { name, args, .. } => calls.push(format_call(name, args)),
                        Part::ToolResult { .. } | Part::Media { .. } => {}
                    }
                }
                if !thinking.is_empty() {
                    parts.push(format!("[Assistant thinking]: {}", thinking.join("\n")));
                }
                if !text.is_empty() {
                    parts.push(format!("[Assistant]: {}", text.join("\n")));
                }
                if !calls.is_empty() {
                    parts.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
                }
            }
            Role::Tool => {
                for block in tool_result_blocks(m) {
                    let content = block.texts.concat();
                    if !content.is_empty() {
                        parts.push(format!("[Tool result]: {}", truncate_for_summary(&content, TOOL_RESULT_MAX_CHARS)));
                    }
                }
            }
            // Pi has no system messages in its session; `convertToLlm` would pass nothing on.
            Role::System => {}
        }
    }
    parts.join("\n\n")
}

/// `name(key=<JSON>, key2=<JSON>)`, keys in argument order.
fn format_call(name: &str, args: &serde_json::Value) -> String {
    let args = match args.as_object() {
        Some(map) => map.iter().map(|(k, v)| format!("{k}={}", json_stringify(v))).collect::<Vec<_>>().join(", "),
        None => String::new(),
    };
    format!("{name}({args})")
}

/// `Math.floor(fraction * reserveTokens)`.
fn cap(fraction: f64, reserve_tokens: u64) -> u64 {
    (fraction * reserve_tokens as f64).floor() as u64
}

/// The `generateSummary` request: `<conversation>` block, the `<previous-summary>` block if
/// there is one, then the initial or the update prompt; output cap `floor(0.8 × reserve)`.
pub(crate) fn history_request(
    messages: &[Context<'_>],
    previous_summary: Option<&str>,
    reserve_tokens: u64,
) -> SummaryRequest {
    let mut transcript = format!("<conversation>\n{}\n</conversation>", serialize_conversation(messages));
    if let Some(prev) = previous_summary {
        transcript.push_str(&format!("\n\n<previous-summary>\n{prev}\n</previous-summary>"));
    }
    SummaryRequest {
        purpose: "history".into(),
        system: SYSTEM_PROMPT.into(),
        transcript,
        instructions: if previous_summary.is_some() { UPDATE_PROMPT } else { INITIAL_PROMPT }.into(),
        max_output_tokens: cap(0.8, reserve_tokens),
    }
}

/// The `generateTurnPrefixSummary` request: the prefix only (no previous summary), output cap
/// `floor(0.5 × reserve)`.
pub(crate) fn turn_prefix_request(messages: &[Context<'_>], reserve_tokens: u64) -> SummaryRequest {
    SummaryRequest {
        purpose: "turn-prefix".into(),
        system: SYSTEM_PROMPT.into(),
        transcript: format!("<conversation>\n{}\n</conversation>", serialize_conversation(messages)),
        instructions: TURN_PREFIX_PROMPT.into(),
        max_output_tokens: cap(0.5, reserve_tokens),
    }
}

/// Calls the summarizer. Pi rejects only a failed call (`stopReason == "error"`); a reply cut
/// off at the output cap is accepted as it is, at the canonical commit and in 0.73.1.
fn call(
    summarizer: &dyn Summarizer,
    request: &SummaryRequest,
    usage: &mut SummarizerUsage,
    failure: &str,
) -> Result<String, Error> {
    usage.calls += 1;
    match summarizer.summarize(request) {
        Ok(summary) => {
            usage.input_tokens += summary.input_tokens;
            usage.output_tokens += summary.output_tokens;
            Ok(summary.text)
        }
        Err(e) => {
            usage.failures += 1;
            Err(Error::new(e.kind, format!("{failure}: {}", e.message)))
        }
    }
}

/// `compact(preparation)`: the summary text (history, or history plus turn prefix for a split
/// turn), the file lists appended, stored as a checkpoint that keeps everything from
/// `firstKeptEntryId` with the summary as a user message right after the system prompt.
pub(crate) fn compact(
    prep: &Preparation<'_>,
    reserve_tokens: u64,
    trigger: Trigger,
    summarizer: &dyn Summarizer,
) -> Result<Checkpoint, Error> {
    // `_runAutoCompaction` reports a failure with one of these literal prefixes.
    let reported = |e: Error| {
        let prefix = match trigger {
            Trigger::Overflow => "Context overflow recovery failed",
            Trigger::Threshold => "Auto-compaction failed",
        };
        Error::new(e.kind, format!("{prefix}: {}", e.message))
    };
    let mut usage = SummarizerUsage::default();
    let mut summary = if prep.split && !prep.turn_prefix.is_empty() {
        // Pi runs both calls in parallel; the history call is made only if there is history,
        // and without history the previous summary is not passed on at all.
        let history = if prep.to_summarize.is_empty() {
            NO_PRIOR_HISTORY.to_owned()
        } else {
            let request = history_request(&prep.to_summarize, prep.previous_summary, reserve_tokens);
            call(summarizer, &request, &mut usage, "Summarization failed").map_err(reported)?
        };
        let request = turn_prefix_request(&prep.turn_prefix, reserve_tokens);
        let prefix = call(summarizer, &request, &mut usage, "Turn prefix summarization failed").map_err(reported)?;
        format!("{history}{SPLIT_TURN_SEPARATOR}{prefix}")
    } else {
        // Called even when there is nothing new to summarize (the previous summary is then
        // re-sent with an empty conversation block).
        let request = history_request(&prep.to_summarize, prep.previous_summary, reserve_tokens);
        call(summarizer, &request, &mut usage, "Summarization failed").map_err(reported)?
    };
    summary.push_str(&format_file_operations(&prep.read_files, &prep.modified_files));

    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::From(prep.first_kept))
        .with_summary(Message::user(format!("{COMPACTION_SUMMARY_PREFIX}{summary}{COMPACTION_SUMMARY_SUFFIX}")));
    cp.summary_position = SummaryPosition::AfterSystem;
    cp.tokens_before = prep.tokens_before;
    cp.summarizer = usage;
    // Pi's entry: `summary`, `firstKeptEntryId`, `tokensBefore`, `details = {readFiles,
    // modifiedFiles}`; `reason` is ours, so the overflow path can tell it already ran.
    cp.details = json!({
        "summary": summary,
        "firstKeptEntryId": prep.first_kept.0,
        "tokensBefore": prep.tokens_before,
        "readFiles": prep.read_files,
        "modifiedFiles": prep.modified_files,
        "reason": trigger.as_str(),
    });
    Ok(cp)
}
