//! The Anthropic API's server-side context management: `clear_tool_uses_20250919` (beta
//! `context-management-2025-06-27`) and `compact_20260112` (beta `compact-2026-01-12`).

use std::collections::BTreeMap;

use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Entry, Error, ErrorKind, Log, Message, Moment, Origin, Part, Replacement, Role, SummarizerUsage,
    SummaryContext, SummaryRequest, View, Window,
};
use rustc_hash::FxHashMap;
use serde_json::{json, Value};

use crate::count::{part_tokens, text_tokens};
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

/// The prompt as the client sent it, message by message: our own earlier clearings undone (the
/// client's history is never edited; the server re-applies the edits to every request).
/// Borrowed from the view and the log rather than built as a cloned view: the server plans
/// every request, and copying the whole prompt each time was most of this variant's cost.
fn unedited<'a>(log: &'a Log, view: &'a View) -> impl Iterator<Item = &'a Message> + 'a {
    view.messages.iter().map(move |vm| match vm.origin {
        Origin::Replaced(entry, _) => log.message(entry).unwrap_or(&vm.message),
        _ => &vm.message,
    })
}

/// What the server does to this request.
pub(crate) struct Edits {
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

/// Each log message's estimate, part by part, by entry (empty for checkpoints). The server
/// estimates the whole prompt at every request and a log message's estimate never changes, so
/// a replay adds each message's once rather than recounting the prompt per request.
#[derive(Default)]
pub(crate) struct Estimates(Vec<Vec<u64>>);

impl Estimates {
    /// The estimates of every entry of `log`.
    pub(crate) fn of(log: &Log) -> Estimates {
        let mut estimates = Estimates::default();
        log.entries().for_each(|(_, entry)| estimates.push(entry));
        estimates
    }

    /// Adds the estimate of the next entry.
    pub(crate) fn push(&mut self, entry: &Entry) {
        self.0.push(match entry {
            Entry::Message(m) => m.parts.iter().map(part_tokens).collect(),
            Entry::Checkpoint(_) => Vec::new(),
        });
    }
}

/// What the server does to the prompt `view` shows (of `log`, whose messages `estimates`
/// holds): clearing, then compaction.
pub(crate) fn edits(config: &ClaudeCodeConfig, log: &Log, view: &View, estimates: &Estimates) -> Edits {
    // One estimating pass: the prompt's total, and each tool result's own estimate (its part's
    // share of that total), kept in prompt order for the clearing edit below.
    let mut raw = 0;
    let mut result_tokens = Vec::new();
    for (vm, message) in view.messages.iter().zip(unedited(log, view)) {
        // A log message shown as it is, or through a replacement (undone here), is estimated
        // already; summaries and injected messages are not log messages.
        let known = vm.origin.entry().map(|e| &estimates.0[e.index()]).filter(|parts| parts.len() == message.parts.len());
        for (k, part) in message.parts.iter().enumerate() {
            let tokens = known.map_or_else(|| part_tokens(part), |parts| parts[k]);
            raw += tokens;
            if matches!(part, Part::ToolResult { .. }) {
                result_tokens.push(tokens);
            }
        }
    }
    let mut out = Edits { raw, replacements: Vec::new(), cleared: None, after_clear: raw, compact: false };

    if config.api_clear_trigger.is_some_and(|t| raw > t) {
        // Tool uses in order: (view index of the call, part index, id, name).
        let mut calls = Vec::new();
        let mut results: FxHashMap<&str, (usize, usize, u64)> = FxHashMap::default();
        let mut result_tokens = result_tokens.into_iter();
        for (i, message) in unedited(log, view).enumerate() {
            for (k, part) in message.parts.iter().enumerate() {
                match part {
                    Part::ToolCall { id, name, .. } => calls.push((i, k, id.as_str(), name.as_str())),
                    Part::ToolResult { call_id, .. } => {
                        let tokens = result_tokens.next().expect("one estimate per tool result");
                        results.insert(call_id.as_str(), (i, k, tokens));
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
/// that. A message is copied only when an edit changes it: the view already shows every
/// earlier clearing, so most candidates are no-ops, and copying their messages only to find
/// them unchanged cost as much as the estimate.
fn clear(config: &ClaudeCodeConfig, view: &View, candidates: &[(usize, usize, usize, usize, u64)]) -> Vec<Replacement> {
    let mut edited: BTreeMap<usize, Message> = BTreeMap::new();
    // Each candidate's result, then its call when inputs are cleared too: (view index, part).
    let parts = candidates.iter().flat_map(|&(ci, ck, ri, rk, _)| [Some((ri, rk)), config.api_clear_tool_inputs.then_some((ci, ck))]);
    for (i, k) in parts.flatten() {
        let shown = |p: &Part| match p {
            Part::ToolResult { text, .. } => text == PLACEHOLDER,
            Part::ToolCall { args, .. } => args.as_object().is_some_and(|o| o.is_empty()),
            _ => true,
        };
        if edited.get(&i).unwrap_or(&view.messages[i].message).parts.get(k).is_some_and(|p| !shown(p)) {
            match &mut edited.entry(i).or_insert_with(|| view.messages[i].message.clone()).parts[k] {
                Part::ToolResult { text, .. } => *text = PLACEHOLDER.to_owned(),
                Part::ToolCall { args, .. } => *args = json!({}),
                _ => {}
            }
        }
    }
    edited.into_iter().filter_map(|(i, message)| view.messages[i].origin.entry().map(|entry| Replacement { entry, message })).collect()
}

impl Edits {
    /// Why the request is edited, or `None` when it goes out as the client sent it.
    pub(crate) fn reason(&self) -> Option<&'static str> {
        match (!self.replacements.is_empty(), self.compact) {
            (true, true) => Some("clear_tool_uses+compaction"),
            (true, false) => Some("clear_tool_uses"),
            (false, true) => Some("compaction"),
            (false, false) => None,
        }
    }
}

/// The edits the server applies to the request about to go out at `at`, if any. The server
/// edits each request as it arrives; a prompt still over the window is rejected, and nothing
/// client-side happens at a turn's end.
pub(crate) fn decide(config: &ClaudeCodeConfig, log: &Log, view: &View, at: Moment, estimates: &Estimates) -> Option<Edits> {
    if at != Moment::BeforeRequest {
        return None;
    }
    Some(edits(config, log, view, estimates)).filter(|e| e.reason().is_some())
}

/// The checkpoints of `edits` (this request's): a prune for the clearing, then the
/// compaction block's summary.
pub(crate) fn compact(config: &ClaudeCodeConfig, view: &View, edits: &Edits, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
    let mut out = Vec::new();
    if !edits.replacements.is_empty() {
        let (uses, tokens) = edits.cleared.unwrap_or_default();
        let mut cp = Checkpoint::new(CheckpointKind::Prune, Window::Inherit);
        cp.replacements = edits.replacements.clone();
        cp.tokens_before = edits.raw;
        cp.details = json!({
            "edit": "clear_tool_uses_20250919",
            "cleared_tool_uses": uses,
            "cleared_input_tokens": tokens,
        });
        out.push(cp);
    }
    if edits.compact {
        let seen = apply(view, &edits.replacements);
        let (system, messages) = split_system(&seen);
        let request = SummaryRequest {
            purpose: "compaction".into(),
            // server-side compaction of the request as sent: the request is its own prefix.
            context: SummaryContext::Prefix,
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
        cp.tokens_before = edits.after_clear;
        cp.summarizer = SummarizerUsage {
            calls: 1,
            failures: 0,
            input_tokens: summary.input_tokens,
            output_tokens: summary.output_tokens,
        };
        cp.details = json!({
            "edit": "compact_20260112",
            "input_tokens": edits.after_clear,
            "pause_after_compaction": config.api_pause_after_compaction,
            "stop_reason": if config.api_pause_after_compaction { Value::from("compaction") } else { Value::Null },
        });
        out.push(cp);
    }
    Ok(out)
}
