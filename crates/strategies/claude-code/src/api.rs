//! The Anthropic API's server-side context management: `clear_tool_uses_20250919` (beta
//! `context-management-2025-06-27`) and `compact_20260112` (beta `compact-2026-01-12`).

use std::collections::BTreeMap;

use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Decision, Error, ErrorKind, Log, Message, Moment, Origin, Part, Replacement, Role,
    SummarizerUsage, SummaryRequest, View, Window,
};
use serde_json::{json, Value};

use crate::count::{message_tokens, text_tokens};
use crate::full::split_system;
use crate::microcompact::apply;
use crate::{prompt, wire, ClaudeCodeConfig};

/// `clear_tool_uses_20250919` default trigger: 100,000 input tokens.
pub(crate) const CLEAR_TRIGGER: u64 = 100_000;
/// `clear_tool_uses_20250919` default `keep`: 3 tool uses.
pub(crate) const CLEAR_KEEP: u64 = 3;
/// `compact_20260112` default trigger: 150,000 input tokens.
pub(crate) const COMPACT_TRIGGER: u64 = 150_000;
/// `compact_20260112` smallest accepted trigger.
pub(crate) const COMPACT_TRIGGER_MIN: u64 = 50_000;
/// What a cleared result shows (\[assume\]: the API does not document its placeholder).
pub(crate) const PLACEHOLDER: &str = "[cleared]";

/// The prompt as the client sent it: our own earlier clearings undone (the client's history
/// is never edited; the server re-applies the edits to every request).
fn unedited(log: &Log, view: &View) -> View {
    let mut raw = view.clone();
    for vm in &mut raw.messages {
        if let Origin::Replaced(entry, _) = vm.origin {
            if let Some(original) = log.message(entry) {
                vm.message = original.clone();
            }
        }
    }
    raw
}

/// What the server does to this request.
struct Plan {
    /// Estimated input tokens of the unedited prompt.
    raw: u64,
    /// New replacements of a clearing edit that applies (empty when nothing new is cleared).
    replacements: Vec<Replacement>,
    /// `applied_edits` of the clearing: tool uses cleared and tokens removed.
    cleared: Option<(usize, u64)>,
    /// Input tokens after clearing.
    after_clear: u64,
    /// Whether compaction fires.
    compact: bool,
}

fn plan(config: &ClaudeCodeConfig, log: &Log, view: &View) -> Plan {
    let raw_view = unedited(log, view);
    let raw: u64 = raw_view.iter().map(message_tokens).sum();
    let mut out = Plan { raw, replacements: Vec::new(), cleared: None, after_clear: raw, compact: false };

    if config.api_clear_trigger.is_some_and(|t| raw > t) {
        // Tool uses in order: (view index of the call, part index, id, name).
        let mut calls = Vec::new();
        let mut results: BTreeMap<&str, (usize, usize, u64)> = BTreeMap::new();
        for (i, vm) in raw_view.messages.iter().enumerate() {
            for (k, part) in vm.message.parts.iter().enumerate() {
                match part {
                    Part::ToolCall { id, name, .. } => calls.push((i, k, id.as_str(), name.as_str())),
                    Part::ToolResult { call_id, text, .. } => {
                        results.insert(call_id.as_str(), (i, k, text_tokens(text)));
                    }
                    _ => {}
                }
            }
        }
        let keep = usize::try_from(config.api_clear_keep).unwrap_or(usize::MAX);
        let old = calls.len().saturating_sub(keep);
        let candidates: Vec<_> = calls[..old]
            .iter()
            .filter(|(_, _, _, name)| !config.api_exclude_tools.iter().any(|t| t == name))
            .filter_map(|&(ci, ck, id, _)| results.get(id).map(|&(ri, rk, tokens)| (ci, ck, ri, rk, tokens)))
            .collect();
        let clearable: u64 =
            candidates.iter().map(|c| c.4.saturating_sub(text_tokens(PLACEHOLDER))).sum();
        let enough = config.api_clear_at_least.is_none_or(|n| clearable >= n);
        if !candidates.is_empty() && enough {
            out.cleared = Some((candidates.len(), clearable));
            out.after_clear = raw.saturating_sub(clearable);
            out.replacements = clear(config, view, &candidates);
        }
    }
    out.compact = config.api_compact_trigger.is_some_and(|t| out.after_clear > t)
        && view.iter().any(|m| m.role != Role::System);
    out
}

/// Replacements that show `candidates` cleared in `view`, for messages not already showing
/// that.
fn clear(config: &ClaudeCodeConfig, view: &View, candidates: &[(usize, usize, usize, usize, u64)]) -> Vec<Replacement> {
    let mut edited: BTreeMap<usize, Message> = BTreeMap::new();
    for &(ci, ck, ri, rk, _) in candidates {
        let result = edited.entry(ri).or_insert_with(|| view.messages[ri].message.clone());
        if let Part::ToolResult { text, .. } = &mut result.parts[rk] {
            *text = PLACEHOLDER.to_owned();
        }
        if config.api_clear_tool_inputs {
            let call = edited.entry(ci).or_insert_with(|| view.messages[ci].message.clone());
            if let Part::ToolCall { args, .. } = &mut call.parts[ck] {
                *args = json!({});
            }
        }
    }
    edited
        .into_iter()
        .filter(|(i, m)| *m != view.messages[*i].message)
        .filter_map(|(i, message)| view.messages[i].origin.entry().map(|entry| Replacement { entry, message }))
        .collect()
}

fn reason(plan: &Plan) -> Option<&'static str> {
    match (!plan.replacements.is_empty(), plan.compact) {
        (true, true) => Some("clear_tool_uses+compaction"),
        (true, false) => Some("clear_tool_uses"),
        (false, true) => Some("compaction"),
        (false, false) => None,
    }
}

pub(crate) fn decide(config: &ClaudeCodeConfig, log: &Log, view: &View, at: Moment) -> Decision {
    // The server edits each request as it arrives; a prompt still over the window is
    // rejected, and nothing client-side happens at a turn's end.
    if at != Moment::BeforeRequest {
        return Decision::Skip;
    }
    reason(&plan(config, log, view)).map_or(Decision::Skip, Decision::compact)
}

pub(crate) fn compact(config: &ClaudeCodeConfig, log: &Log, view: &View, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
    let plan = plan(config, log, view);
    let mut out = Vec::new();
    if !plan.replacements.is_empty() {
        let (uses, tokens) = plan.cleared.unwrap_or_default();
        let mut cp = Checkpoint::new(CheckpointKind::Prune, Window::Inherit);
        cp.replacements = plan.replacements.clone();
        cp.tokens_before = plan.raw;
        cp.details = json!({
            "edit": "clear_tool_uses_20250919",
            "cleared_tool_uses": uses,
            "cleared_input_tokens": tokens,
        });
        out.push(cp);
    }
    if plan.compact {
        let seen = apply(view, &plan.replacements);
        let (system, messages) = split_system(&seen);
        let request = SummaryRequest {
            purpose: "compaction".into(),
            system,
            transcript: wire::transcript(&messages),
            instructions: config.api_compact_instructions.clone().unwrap_or_else(|| prompt::API_COMPACT_PROMPT.to_owned()),
            max_output_tokens: cx.model.max_output,
        };
        let summary = cx.summarizer.summarize(&request)?;
        if summary.text.trim().is_empty() {
            return Err(Error::new(ErrorKind::EmptySummary, "compaction produced no summary"));
        }
        let mut cp =
            Checkpoint::new(CheckpointKind::Summary, Window::Kept(Vec::new())).with_summary(Message::user(summary.text));
        cp.tokens_before = plan.after_clear;
        cp.summarizer = SummarizerUsage {
            calls: 1,
            failures: 0,
            input_tokens: summary.input_tokens,
            output_tokens: summary.output_tokens,
        };
        cp.details = json!({
            "edit": "compact_20260112",
            "input_tokens": plan.after_clear,
            "pause_after_compaction": config.api_pause_after_compaction,
            "stop_reason": if config.api_pause_after_compaction { Value::from("compaction") } else { Value::Null },
        });
        out.push(cp);
    }
    Ok(out)
}
