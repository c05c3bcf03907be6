//! Pi's summarizer calls (`generateSummary`, `generateTurnPrefixSummary`, `compact`) and the
//! conversation serializer (`serializeConversation`). Prompt texts are our paraphrases; the
//! headings, tags and markers are Pi's literals.

use compactbench_core::estimate::utf16_len;
use compactbench_core::{
    Checkpoint, CheckpointKind, Error, ErrorKind, Message, Part, Role, StopReason, Summarizer, SummarizerUsage,
    SummaryContext, SummaryPosition, SummaryRequest, Window,
};
use serde_json::json;

use crate::prepare::{format_file_operations, Preparation};
use crate::session::{
    json_stringify, tool_result_blocks, Context, COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX,
};
use crate::trigger::Trigger;
use crate::Release;

/// `TOOL_RESULT_MAX_CHARS`: the serializer keeps this many UTF-16 units of a tool result.
const TOOL_RESULT_MAX_CHARS: u64 = 2000;

/// Literal history part of a split-turn summary when nothing precedes the turn.
pub(crate) const NO_PRIOR_HISTORY: &str = "No prior history.";

/// Literal separator between the history summary and the turn-prefix summary.
pub(crate) const SPLIT_TURN_SEPARATOR: &str = "\n\n---\n\n**Turn Context (split turn):**\n\n";

/// Paraphrase of `SUMMARIZATION_SYSTEM_PROMPT` (utils.ts) up to 0.73.1.
const SYSTEM_PROMPT: &str = "You are an assistant that condenses conversations between a user and an AI coding \
assistant. Read the conversation and write a structured summary in exactly the format you are asked for.\n\n\
Do not carry the conversation on and do not answer anything asked in it. Output the structured summary and \
nothing else.";

/// Paraphrase of 1.6.0's `SUMMARIZATION_SYSTEM_PROMPT` ("an AI assistant", no longer "coding").
const SYSTEM_PROMPT_1_6: &str = "You are an assistant that condenses conversations between a user and an AI \
assistant. Read the conversation and write a structured summary in exactly the format you are asked for.\n\n\
Do not carry the conversation on and do not answer anything asked in it. Output the structured summary and \
nothing else.";

/// Transient summarizer failures 1.6.0 retries (`retryAssistantCall` with the default
/// `retry.maxRetries`): timeouts, connection and server errors.
const MAX_RETRIES_1_6: u32 = 3;

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

/// Paraphrase of 1.6.0's `TURN_PREFIX_SUMMARIZATION_PROMPT`; headings are Pi's literals.
const TURN_PREFIX_PROMPT_1_6: &str = "The messages above are earlier context of a conversation that is still going \
on. The later messages are kept elsewhere and need not be rebuilt.\n\n\
Write a short checkpoint of what the user asked for and of the progress shown above; it will sit before the \
later messages so that the conversation can go on with the context it needs.\n\n\
## Original Request\n\
[What the user asked for]\n\n\
## Progress So Far\n\
- [Key decisions and work done in these messages]\n\n\
## Context Needed to Continue\n\
- [What from these messages is needed to follow the later work]\n\n\
Summarize only what the messages above say. Do not guess at or rebuild the later messages.";

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
/// each tool result keeps its first 2000 characters. Thinking is serialized up to 0.73.1;
/// 1.6.0 leaves it out (replayed thinking can make the request larger than the context).
pub(crate) fn serialize_conversation(messages: &[Context<'_>], release: Release) -> String {
    let with_thinking = release != Release::Npm1_6_0;
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
                if with_thinking && !thinking.is_empty() {
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

/// Output caps of the two calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Caps {
    pub(crate) history: u64,
    pub(crate) turn_prefix: u64,
}

impl Caps {
    /// Up to 0.73.1 `floor(0.8 × reserveTokens)` and `floor(0.5 × reserveTokens)`; 1.6.0
    /// passes no cap, so pi-ai sends the model's own output limit for both (#9512).
    pub(crate) fn of(release: Release, reserve_tokens: u64, model_max_output: u64) -> Caps {
        let floor = |fraction: f64| (fraction * reserve_tokens as f64).floor() as u64;
        match release {
            Release::Npm1_6_0 => Caps { history: model_max_output, turn_prefix: model_max_output },
            Release::Npm0_73_1 | Release::Canonical0_58 => Caps { history: floor(0.8), turn_prefix: floor(0.5) },
        }
    }
}

fn system_prompt(release: Release) -> &'static str {
    match release {
        Release::Npm1_6_0 => SYSTEM_PROMPT_1_6,
        Release::Npm0_73_1 | Release::Canonical0_58 => SYSTEM_PROMPT,
    }
}

/// The `generateSummary` request: `<conversation>` block, the `<previous-summary>` block if
/// there is one, then the initial or the update prompt, and after it (`/compact
/// [instructions]`) a blank line and `Additional focus: ` with the user's instructions.
pub(crate) fn history_request(
    messages: &[Context<'_>],
    previous_summary: Option<&str>,
    focus: Option<&str>,
    cap: u64,
    release: Release,
) -> SummaryRequest {
    let mut transcript = format!("<conversation>\n{}\n</conversation>", serialize_conversation(messages, release));
    if let Some(prev) = previous_summary {
        transcript.push_str(&format!("\n\n<previous-summary>\n{prev}\n</previous-summary>"));
    }
    let prompt = if previous_summary.is_some() { UPDATE_PROMPT } else { INITIAL_PROMPT };
    SummaryRequest {
        purpose: "history".into(),
        // spec (d): SUMMARIZATION_SYSTEM_PROMPT and one user message from serializeConversation.
        context: SummaryContext::Fresh,
        system: system_prompt(release).into(),
        transcript,
        instructions: match focus.filter(|f| !f.is_empty()) {
            Some(focus) => format!("{prompt}\n\nAdditional focus: {focus}"),
            None => prompt.into(),
        },
        max_output_tokens: cap,
    }
}

/// The `generateTurnPrefixSummary` request: the prefix only (no previous summary). Up to
/// 0.73.1 in a `<conversation>` block; 1.6.0 sends `# Conversation` and `# Instructions`
/// sections.
pub(crate) fn turn_prefix_request(messages: &[Context<'_>], cap: u64, release: Release) -> SummaryRequest {
    let conversation = serialize_conversation(messages, release);
    let (transcript, instructions) = match release {
        Release::Npm1_6_0 => (format!("# Conversation\n{conversation}"), format!("# Instructions\n{TURN_PREFIX_PROMPT_1_6}")),
        Release::Npm0_73_1 | Release::Canonical0_58 => {
            (format!("<conversation>\n{conversation}\n</conversation>"), TURN_PREFIX_PROMPT.to_owned())
        }
    };
    SummaryRequest {
        purpose: "turn-prefix".into(),
        // spec (d): as the history call.
        context: SummaryContext::Fresh,
        system: system_prompt(release).into(),
        transcript,
        instructions,
        max_output_tokens: cap,
    }
}

/// Calls the summarizer. Up to 0.73.1 Pi rejects only a failed call (`stopReason == "error"`)
/// and accepts a reply cut off at the output cap as it is. 1.6.0 retries transient failures
/// (timeouts, transport and server errors) up to three times and rejects a cut-off reply
/// (`getSummarizationFailure`: "generation hit the token cap and the summary is incomplete").
fn call(
    summarizer: &dyn Summarizer,
    request: &SummaryRequest,
    usage: &mut SummarizerUsage,
    label: &str,
    release: Release,
) -> Result<String, Error> {
    let retries = if release == Release::Npm1_6_0 { MAX_RETRIES_1_6 } else { 0 };
    let mut attempt = 0;
    loop {
        usage.calls += 1;
        match summarizer.summarize(request) {
            Ok(summary) => {
                usage.input_tokens += summary.input_tokens;
                usage.output_tokens += summary.output_tokens;
                if release == Release::Npm1_6_0 && summary.stop == StopReason::Length {
                    usage.failures += 1;
                    return Err(Error::new(
                        ErrorKind::Rejected,
                        format!("{label} failed: generation hit the token cap and the summary is incomplete"),
                    ));
                }
                return Ok(summary.text);
            }
            Err(e) => {
                usage.failures += 1;
                let transient = matches!(e.kind, ErrorKind::Timeout | ErrorKind::Transport);
                if transient && attempt < retries {
                    attempt += 1;
                    continue;
                }
                return Err(Error::new(e.kind, format!("{label} failed: {}", e.message)));
            }
        }
    }
}

/// `compact(preparation)`: the summary text (history, or history plus turn prefix for a split
/// turn), the file lists appended, stored as a checkpoint that keeps everything from
/// `firstKeptEntryId` with the summary as a user message right after the system prompt.
pub(crate) fn compact(
    prep: &Preparation<'_>,
    caps: Caps,
    release: Release,
    trigger: Trigger,
    focus: Option<&str>,
    summarizer: &dyn Summarizer,
) -> Result<Checkpoint, Error> {
    // `_runAutoCompaction` reports a failure with one of these literal prefixes.
    let reported = |e: Error| {
        let prefix = match trigger {
            Trigger::Overflow => "Context overflow recovery failed",
            Trigger::Threshold => "Auto-compaction failed",
            // `compact()` throws to the caller, which shows the message as it is.
            Trigger::Manual => return e,
        };
        Error::new(e.kind, format!("{prefix}: {}", e.message))
    };
    let mut usage = SummarizerUsage::default();
    let history_call = |usage: &mut SummarizerUsage| {
        let request = history_request(&prep.to_summarize, prep.previous_summary, focus, caps.history, release);
        call(summarizer, &request, usage, "Summarization", release).map_err(reported)
    };
    let mut summary = if prep.split && !prep.turn_prefix.is_empty() {
        // Up to 0.73.1 both calls run in parallel; the history call is made only if there is
        // history, and without history the previous summary is not passed on at all. 1.6.0
        // calls one after the other and carries the previous summary over instead.
        let history = if !prep.to_summarize.is_empty() {
            history_call(&mut usage)?
        } else if release == Release::Npm1_6_0 {
            prep.previous_summary.unwrap_or(NO_PRIOR_HISTORY).to_owned()
        } else {
            NO_PRIOR_HISTORY.to_owned()
        };
        let request = turn_prefix_request(&prep.turn_prefix, caps.turn_prefix, release);
        let prefix = call(summarizer, &request, &mut usage, "Turn prefix summarization", release).map_err(reported)?;
        format!("{history}{SPLIT_TURN_SEPARATOR}{prefix}")
    } else {
        // Up to 0.73.1 called even when there is nothing new to summarize (the previous
        // summary is then re-sent with an empty conversation block); 1.6.0 prepares nothing.
        history_call(&mut usage)?
    };
    summary.push_str(&format_file_operations(&prep.read_files, &prep.modified_files));

    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::From(prep.first_kept))
        .with_summary(Message::user(format!("{COMPACTION_SUMMARY_PREFIX}{summary}{COMPACTION_SUMMARY_SUFFIX}")));
    cp.summary_position = SummaryPosition::AfterSystem;
    cp.tokens_before = prep.tokens_before;
    cp.summarizer = usage;
    // Pi's entry: `summary`, `firstKeptEntryId`, `tokensBefore`, `details = {readFiles,
    // modifiedFiles}`; `reason` is ours, so the overflow path can tell it already ran;
    // `isSplitTurn` is the preparation's flag, kept for reports (compactbench-fidelity
    // compares it with the original's).
    cp.details = json!({
        "summary": summary,
        "firstKeptEntryId": prep.first_kept.0,
        "tokensBefore": prep.tokens_before,
        "readFiles": prep.read_files,
        "modifiedFiles": prep.modified_files,
        "reason": trigger.as_str(),
        "isSplitTurn": prep.split,
    });
    Ok(cp)
}
