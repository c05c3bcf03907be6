//! Tool-pair summarization (`compute_tool_call_cutoff`, `tool_ids_to_summarize`,
//! `summarize_tool_call`, `ToolPairCompactionOperation`): once the agent sees more than
//! `cutoff + 10` tool calls outside the current turn, the oldest 10 pairs are each replaced
//! by a one-message summary: both messages of the pair become agent-invisible and the
//! summary (a user message) is appended to the conversation.

use std::collections::HashSet;

use compactbench_core::{Checkpoint, CheckpointKind, Cx, EntryId, Log, Message, Part, SummarizerUsage, SummaryContext, SummaryRequest, Window};
use serde_json::json;

use crate::conversation::{kickoff, Conversation, GooseMessage, OP_TOOL_PAIRS};
use crate::prompt::TOOL_PAIR_SYSTEM;

/// `TOOLCALL_SUMMARIZATION_BATCH_SIZE`.
pub(crate) const BATCH_SIZE: usize = 10;

/// `compute_tool_call_cutoff`: 3 per 20,000 tokens of the compaction point, clamped to
/// 10..=500; a threshold outside (0, 1] counts as the default 0.8.
pub(crate) fn compute_tool_call_cutoff(context_limit: u64, threshold: f64) -> usize {
    let threshold = if threshold > 0.0 && threshold <= 1.0 { threshold } else { crate::DEFAULT_COMPACTION_THRESHOLD };
    let effective = (context_limit as f64 * threshold) as usize;
    (3 * effective / 20_000).clamp(10, 500)
}

/// `tool_ids_to_summarize`: the ids of the oldest 10 agent-visible tool requests, once more
/// than `cutoff + 10` are eligible (the newest `protect_last_n` are the current turn's).
pub(crate) fn tool_ids_to_summarize(
    messages: &[GooseMessage<'_>],
    cutoff: usize,
    protect_last_n: usize,
) -> Vec<String> {
    let ids: Vec<&str> = messages.iter().filter(|m| m.visible).flat_map(|m| m.request_ids()).collect();
    if !due(ids.len(), cutoff, protect_last_n) {
        return Vec::new();
    }
    ids.into_iter().take(BATCH_SIZE).map(str::to_owned).collect()
}

/// Tool requests of the current turn (since the newest kickoff user message), which the
/// operation protects.
pub(crate) fn current_turn_requests(log: &Log) -> usize {
    let from = kickoff(log).unwrap_or(EntryId(0));
    log.messages().rev().take_while(|(id, _)| *id >= from).map(|(_, m)| m.tool_call_ids().count()).sum()
}

/// Whether `requests` agent-visible tool requests make a batch due, the newest
/// `protect_last_n` of them (the current turn's) not counting.
pub(crate) fn due(requests: usize, cutoff: usize, protect_last_n: usize) -> bool {
    requests.saturating_sub(protect_last_n) > cutoff + BATCH_SIZE
}

/// `ToolPairCompactionOperation::run`: summarizes the batch, pair by pair. A pair must be
/// exactly two messages (request and response), not already hidden by this batch, with the
/// same call ids on both sides (parallel siblings answered elsewhere are skipped). A failed
/// summary skips its pair. `None` when no pair was summarized.
pub(crate) fn summarize_pairs(
    log: &Log,
    conversation: &Conversation<'_>,
    cutoff: usize,
    tokens_before: u64,
    cx: &Cx<'_>,
) -> Option<Checkpoint> {
    let messages = conversation.goose_messages();
    let ids = tool_ids_to_summarize(&messages, cutoff, current_turn_requests(log));
    let mut hidden_messages: HashSet<usize> = HashSet::new();
    let mut hidden_entries: Vec<EntryId> = Vec::new();
    let mut summaries = Vec::new();
    let (mut done, mut skipped, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    let mut usage = SummarizerUsage::default();
    for id in ids {
        let pair: Vec<(usize, &GooseMessage<'_>)> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| {
                m.parts.iter().any(|p| match p {
                    Part::ToolCall { id: c, .. } => *c == id,
                    Part::ToolResult { call_id, .. } => *call_id == id,
                    _ => false,
                })
            })
            .collect();
        if pair.len() != 2 || pair.iter().any(|(i, _)| hidden_messages.contains(i)) {
            skipped.push(id);
            continue;
        }
        let requests: HashSet<&str> = pair.iter().flat_map(|(_, m)| m.request_ids()).collect();
        let responses: HashSet<&str> = pair.iter().flat_map(|(_, m)| m.response_ids()).collect();
        if requests != responses {
            skipped.push(id);
            continue;
        }
        let request = SummaryRequest {
            purpose: "tool-pair".into(),
            // `summarize_tool_call`: its own system prompt over one formatted tool pair.
            context: SummaryContext::Fresh,
            system: TOOL_PAIR_SYSTEM.into(),
            transcript: pair.iter().map(|(_, m)| m.format()).collect::<Vec<_>>().join("\n"),
            instructions: String::new(),
            max_output_tokens: cx.model.max_output,
        };
        match cx.summarizer.summarize(&request) {
            Ok(s) => {
                usage.add(SummarizerUsage {
                    calls: 1,
                    failures: 0,
                    input_tokens: s.input_tokens,
                    output_tokens: s.output_tokens,
                });
                for (i, m) in &pair {
                    hidden_messages.insert(*i);
                    hidden_entries.extend(m.entries(conversation));
                }
                // Role rewritten to user, agent-only, appended to the conversation.
                summaries.push(Message::user(s.text));
                done.push(id);
            }
            Err(_) => {
                // Goose logs a warning and goes on with the next pair.
                usage.add(SummarizerUsage { calls: 1, failures: 1, input_tokens: 0, output_tokens: 0 });
                failed.push(id);
            }
        }
    }
    if summaries.is_empty() {
        return None;
    }
    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::Inherit);
    cp.injected = summaries;
    cp.tokens_before = tokens_before;
    cp.summarizer = usage;
    cp.details = json!({
        "op": OP_TOOL_PAIRS,
        "hidden": hidden_entries.iter().map(|e| e.0).collect::<Vec<_>>(),
        "summarized": done,
        "skipped": skipped,
        "failed": failed,
    });
    Some(cp)
}
