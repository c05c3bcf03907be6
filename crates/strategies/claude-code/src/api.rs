//! The Anthropic API's server-side context management: `clear_tool_uses_20250919` (beta
//! `context-management-2025-06-27`) and `compact_20260112` (beta `compact-2026-01-12`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use compactbench_core::fold::{fold, Fold, Folds};
use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Decision, Entry, EntryId, Error, ErrorKind, Log, LogVersion, Message, Moment, Origin, Part, Replacement, Role,
    SummarizerUsage, SummaryRequest, View, Window,
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

/// Each log message's estimate, part by part, by entry (empty for checkpoints). The server
/// estimates the whole prompt at every request and a log message's estimate never changes, so
/// it is folded once per message rather than recounted per request.
#[derive(Clone, Default)]
struct PartEstimates(Vec<Vec<u64>>);

impl Fold for PartEstimates {
    fn add(&mut self, _: EntryId, entry: &Entry) {
        self.0.push(match entry {
            Entry::Message(m) => m.parts.iter().map(part_tokens).collect(),
            Entry::Checkpoint(_) => Vec::new(),
        });
    }
}

/// [`plan_now`], kept for the log state it was made at: the runner asks `decide`, then
/// `compact`, at one state with one view (the projection of that state).
fn plan(config: &ClaudeCodeConfig, log: &Log, view: &View) -> Rc<Plan> {
    type Kept = Option<(LogVersion, ClaudeCodeConfig, Rc<Plan>)>;
    thread_local!(static KEPT: RefCell<Kept> = const { RefCell::new(None) });
    let version = log.version();
    if let Some(plan) = KEPT.with_borrow(|k| k.as_ref().filter(|(v, c, _)| *v == version && c == config).map(|(_, _, p)| p.clone())) {
        return plan;
    }
    let plan = Rc::new(plan_now(config, log, view));
    KEPT.set(Some((version, config.clone(), plan.clone())));
    plan
}

fn plan_now(config: &ClaudeCodeConfig, log: &Log, view: &View) -> Plan {
    thread_local!(static ESTIMATES: Folds<PartEstimates> = const { RefCell::new(Vec::new()) });
    let estimates = fold(&ESTIMATES, log);
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
    let mut out = Plan { raw, replacements: Vec::new(), cleared: None, after_clear: raw, compact: false };

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
    // Sets part `k` of view message `i` by `edit` when `stale` says it does not show the edit
    // yet; a part already showing it stays as it is, as the edit would leave it.
    let mut set = |i: usize, k: usize, stale: &dyn Fn(&Part) -> bool, edit: &dyn Fn(&mut Part)| {
        let current = edited.get(&i).unwrap_or(&view.messages[i].message);
        if current.parts.get(k).is_some_and(stale) {
            edit(&mut edited.entry(i).or_insert_with(|| view.messages[i].message.clone()).parts[k]);
        }
    };
    for &(ci, ck, ri, rk, _) in candidates {
        set(
            ri,
            rk,
            &|p| matches!(p, Part::ToolResult { text, .. } if text != PLACEHOLDER),
            &|p| {
                if let Part::ToolResult { text, .. } = p {
                    *text = PLACEHOLDER.to_owned();
                }
            },
        );
        if config.api_clear_tool_inputs {
            set(
                ci,
                ck,
                &|p| matches!(p, Part::ToolCall { args, .. } if *args != json!({})),
                &|p| {
                    if let Part::ToolCall { args, .. } = p {
                        *args = json!({});
                    }
                },
            );
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
