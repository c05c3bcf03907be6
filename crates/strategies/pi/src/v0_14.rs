//! Pi 0.13.0–0.14.2 (`pi/v0.14`): `compaction.ts` at tag v0.14.2 (`calculateContextTokens`,
//! `getLastAssistantUsage`, `shouldCompact`, `findTurnBoundaries`, `findCutPoint`,
//! `generateSummary`, `compact`) and the TUI's `checkAutoCompaction` and
//! `handleCompactCommand` (`tui/tui-renderer.ts`). Its view (`loadSessionFromEntries`) is the
//! default projection.
//!
//! Everything is measured by provider usage: the trigger reads the reply that just ended, and
//! the cut walks the replies' usage back from the newest until it has dropped by
//! `keepRecentTokens`, then moves to the user message that opens that turn. Only entries after
//! the previous compaction are looked at: what it kept before it is neither kept nor summarized
//! again.

use compactbench_core::{
    Checkpoint, CheckpointKind, Failure, Log, Message, Moment, Part, Role, Summarizer, SummarizerUsage, SummaryContext,
    SummaryPosition, SummaryRequest, Window,
};
use serde_json::{json, Value};

use crate::session::{
    branch_path, calculate_context_tokens, raw_summary, Item, PathEntry, ProviderUsage, COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
};
use crate::trigger::{should_compact, Trigger};
use crate::PiConfig;

/// Paraphrase of 0.14.2's `SUMMARIZATION_PROMPT`, sent as the last user message after the
/// messages to summarize.
const SUMMARIZATION_PROMPT: &str = "This is a context checkpoint: the conversation above is being compacted. \
Write a handoff summary that lets another model pick the task up where it stands.\n\n\
Cover:\n\
- Progress so far and the key decisions taken\n\
- Context that matters: constraints and the user's preferences\n\
- Absolute paths of the relevant files read or modified\n\
- What is left to do, as clear next steps\n\
- Critical data, examples or references needed to go on\n\n\
Keep it short and structured, aimed at carrying the work on without a break.";

/// Literal opening of the user message that carries the previous summary into the next call.
const PREVIOUS_SUMMARY_PREFIX: &str = "Previous session summary:\n";

/// When 0.14.2 compacts at `at`, or `None`. Its TUI checks each assistant reply when it ends
/// (`message_end`): a reply with tool calls before the runner's next request after its
/// results, a final reply at the turn's end. There is no overflow recovery (that came with
/// 0.17.0), and `/compact` needs two messages ("Nothing to compact (no messages yet)").
pub(crate) fn trigger(log: &Log, at: Moment, config: &PiConfig, window: u64) -> Option<Trigger> {
    match at {
        Moment::TurnEnd => check_auto_compaction(log, config, window).then_some(Trigger::Threshold),
        Moment::BeforeRequest => {
            let after_results = log.messages().next_back().is_some_and(|(_, m)| m.role == Role::Tool);
            (after_results && check_auto_compaction(log, config, window)).then_some(Trigger::Threshold)
        }
        Moment::Overflow => None,
        Moment::Manual => (branch_path(log).iter().filter(|e| e.message().is_some()).count() >= 2).then_some(Trigger::Manual),
    }
}

/// `checkAutoCompaction`: the newest reply's context tokens over `window − reserveTokens`.
/// Pi runs it once per reply, as the reply ends; a reply a compaction followed was checked
/// then, and a compaction does not make it new.
pub(crate) fn check_auto_compaction(log: &Log, config: &PiConfig, window: u64) -> bool {
    if !config.enabled {
        return false;
    }
    let path = branch_path(log);
    // The newest reply that was not aborted (`stopReason !== "aborted"`).
    let Some(newest) = path.iter().rposition(|e| e.message().and_then(assistant_tokens).is_some()) else {
        return false;
    };
    if path[newest + 1..].iter().any(|e| matches!(e.item, Item::Compaction(_))) {
        return false;
    }
    let tokens = path[newest].message().and_then(assistant_tokens).unwrap_or(0);
    should_compact(tokens, window, config)
}

/// `getAssistantUsage` and `calculateContextTokens`: an assistant message's context tokens.
/// Pi skips aborted replies only (`stopReason !== "aborted"`), even when they carry partial
/// usage; an errored one counts the usage it has (all zero unless the provider reported some
/// before failing). A reply without usage and without a failure marker stands for an errored
/// one (as the exporter of compactbench-fidelity writes it), so it counts 0.
fn assistant_tokens(m: &Message) -> Option<u64> {
    (m.role == Role::Assistant && m.failure != Some(Failure::Aborted))
        .then(|| m.usage.map_or(0, |u| calculate_context_tokens(&ProviderUsage::from(u))))
}

/// `getLastAssistantUsage` over every entry: the context tokens of the newest reply.
fn last_assistant_tokens(path: &[PathEntry<'_>]) -> Option<u64> {
    path.iter().rev().find_map(|e| e.message().and_then(assistant_tokens))
}

/// `findTurnBoundaries`: the user messages in `[start, end)`.
fn find_turn_boundaries(path: &[PathEntry<'_>], start: usize, end: usize) -> Vec<usize> {
    (start..end).filter(|&i| path[i].message().is_some_and(|m| m.role == Role::User)).collect()
}

/// `findCutPoint(entries, start, end, keepRecentTokens)`: the index of the first entry kept.
///
/// Without a user message in range everything in it is kept (`start`); without a reply with
/// usage, the last turn. Otherwise the replies' usage is read newest first; at the first one
/// `keepRecentTokens` or more below the newest, the cut is the user message at or before the
/// reply after it (the oldest one kept), so whole turns are kept. If usage never drops that
/// far, everything in range is kept.
pub(crate) fn find_cut_point(path: &[PathEntry<'_>], start: usize, end: usize, keep_recent_tokens: u64) -> usize {
    let boundaries = find_turn_boundaries(path, start, end);
    let Some(&last_boundary) = boundaries.last() else { return start };
    let usages: Vec<(usize, u64)> =
        (start..end).rev().filter_map(|i| path[i].message().and_then(assistant_tokens).map(|t| (i, t))).collect();
    let Some(&(_, newest)) = usages.first() else { return last_boundary };
    for pair in usages.windows(2) {
        let [(last_kept, _), (_, older)] = pair else { unreachable!("windows of two") };
        // JavaScript numbers: the difference may be negative (an older reply used more).
        if i128::from(newest) - i128::from(*older) >= i128::from(keep_recent_tokens) {
            return boundaries.iter().rev().find(|&&b| b <= *last_kept).copied().unwrap_or(start);
        }
    }
    start
}

/// What `compact` summarizes: the previous summary, then session messages.
#[derive(Clone, Copy)]
enum Summarized<'a> {
    PreviousSummary(&'a str),
    Message(&'a Message),
}

/// `compact(entries, model, settings, …, customInstructions)`: the compaction entry, or `None`
/// when the last entry already is a compaction ("Already compacted", thrown to the user;
/// nothing is appended).
pub(crate) fn compact(
    log: &Log,
    config: &PiConfig,
    focus: Option<&str>,
    summarizer: &dyn Summarizer,
) -> Option<Checkpoint> {
    let path = branch_path(log);
    if !matches!(path.last()?.item, Item::Message(_)) {
        return None;
    }
    let previous = path.iter().rposition(|e| matches!(e.item, Item::Compaction(_)));
    let boundary_start = previous.map_or(0, |i| i + 1);
    let tokens_before = last_assistant_tokens(&path).unwrap_or(0);
    let first_kept = find_cut_point(&path, boundary_start, path.len(), config.keep_recent_tokens);

    let mut messages: Vec<Summarized<'_>> = Vec::new();
    if let Some(Item::Compaction(cp)) = previous.map(|i| path[i].item) {
        messages.push(Summarized::PreviousSummary(raw_summary(cp)));
    }
    messages.extend(path[boundary_start..first_kept].iter().filter_map(|e| e.message().map(Summarized::Message)));

    let (summary, usage) = generate_summary(&messages, config.reserve_tokens, focus, summarizer);
    let first_kept_id = path[first_kept].id;
    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::From(first_kept_id))
        .with_summary(Message::user(format!("{COMPACTION_SUMMARY_PREFIX}{summary}{COMPACTION_SUMMARY_SUFFIX}")));
    cp.summary_position = SummaryPosition::AfterSystem;
    cp.tokens_before = tokens_before;
    cp.summarizer = usage;
    // Pi's entry: `summary`, `firstKeptEntryIndex` (our entry id here), `tokensBefore`.
    cp.details = json!({ "summary": summary, "firstKeptEntryId": first_kept_id.0, "tokensBefore": tokens_before });
    Some(cp)
}

/// `generateSummary`: the messages as they are (no system prompt), the prompt as a last user
/// message, capped at `floor(0.8 × reserveTokens)`. pi-ai answers a failed call with an
/// errored reply rather than an error, whose (absent) text is the summary: a failed call still
/// compacts, with an empty summary. A reply cut off at the cap is used as it is.
fn generate_summary(
    messages: &[Summarized<'_>],
    reserve_tokens: u64,
    focus: Option<&str>,
    summarizer: &dyn Summarizer,
) -> (String, SummarizerUsage) {
    let request = SummaryRequest {
        purpose: "summary".into(),
        // The messages before the cut without the system prompt: no prefix of the
        // conversation's requests, so nothing of their cache is reused.
        context: SummaryContext::Fresh,
        system: String::new(),
        transcript: messages.iter().flat_map(|m| pi_messages(*m)).map(|v| v.to_string()).collect::<Vec<_>>().join("\n"),
        instructions: match focus.filter(|f| !f.is_empty()) {
            Some(focus) => format!("{SUMMARIZATION_PROMPT}\n\nAdditional focus: {focus}"),
            None => SUMMARIZATION_PROMPT.into(),
        },
        max_output_tokens: (0.8 * reserve_tokens as f64).floor() as u64,
    };
    match summarizer.summarize(&request) {
        Ok(s) => {
            let usage = SummarizerUsage { calls: 1, failures: 0, input_tokens: s.input_tokens, output_tokens: s.output_tokens };
            (s.text, usage)
        }
        Err(_) => (String::new(), SummarizerUsage { calls: 1, failures: 1, input_tokens: 0, output_tokens: 0 }),
    }
}

/// A message as pi-ai's `complete` receives it, one JSON object per message (a tool message
/// of ours is one `toolResult` message per result, as Pi stores them). Later system messages
/// are not in Pi's session and pass nothing on.
fn pi_messages(m: Summarized<'_>) -> Vec<Value> {
    let m = match m {
        Summarized::PreviousSummary(s) => {
            return vec![json!({ "role": "user", "content": format!("{PREVIOUS_SUMMARY_PREFIX}{s}") })];
        }
        Summarized::Message(m) => m,
    };
    match m.role {
        Role::User => {
            let content: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text } => Some(json!({ "type": "text", "text": text })),
                    Part::Media { mime, .. } => Some(json!({ "type": "image", "mimeType": mime })),
                    Part::Reasoning { .. } | Part::ToolCall { .. } | Part::ToolResult { .. } => None,
                })
                .collect();
            vec![json!({ "role": "user", "content": content })]
        }
        Role::Assistant => {
            let content: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text } => Some(json!({ "type": "text", "text": text })),
                    Part::Reasoning { text } => Some(json!({ "type": "thinking", "thinking": text })),
                    Part::ToolCall { id, name, args } => Some(json!({ "type": "toolCall", "id": id, "name": name, "arguments": args })),
                    Part::ToolResult { .. } | Part::Media { .. } => None,
                })
                .collect();
            vec![json!({ "role": "assistant", "content": content })]
        }
        Role::Tool => {
            // Loose text and images join the result before them, as our crate reads a tool
            // message elsewhere (`tool_result_blocks`).
            let mut out: Vec<Value> = Vec::new();
            for p in &m.parts {
                let block = match p {
                    Part::ToolResult { call_id, name, text, is_error } => {
                        out.push(json!({
                            "role": "toolResult",
                            "toolCallId": call_id,
                            "toolName": name,
                            "content": [{ "type": "text", "text": text }],
                            "isError": is_error,
                        }));
                        continue;
                    }
                    Part::Text { text } => json!({ "type": "text", "text": text }),
                    Part::Media { mime, .. } => json!({ "type": "image", "mimeType": mime }),
                    Part::Reasoning { .. } | Part::ToolCall { .. } => continue,
                };
                if out.is_empty() {
                    out.push(json!({ "role": "toolResult", "toolCallId": "", "toolName": "", "content": [], "isError": false }));
                }
                if let Some(content) = out.last_mut().and_then(|r| r["content"].as_array_mut()) {
                    content.push(block);
                }
            }
            out
        }
        Role::System => Vec::new(),
    }
}
