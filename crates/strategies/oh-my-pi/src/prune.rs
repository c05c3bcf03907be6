//! The per-turn pruning passes (agent-core `compaction/pruning.ts`: `pruneSupersededToolResults`,
//! `pruneToolOutputs`, `readToolSupersedeKey`; called from coding-agent
//! `session-maintenance.ts` `#pruneStaleToolResults` and `#pruneToolOutputs` after every reply).

use std::collections::HashSet;

use compactbench_core::tools::{tool_kind, tool_path, ToolKind};
use compactbench_core::{CheckpointKind, Message};
use serde_json::{json, Value};

use crate::branch::{result_units, Item, ResultUnit, Rewrite, Work};
use crate::files::split_read_selector;
use crate::shake::is_protected_for_prune;

/// Literal placeholder over a read superseded by a newer read of the same file.
pub(crate) const SUPERSEDED_NOTICE: &str = "[Superseded by a newer read of this file]";

/// Literal placeholder over an age-pruned result.
pub(crate) fn pruned_notice(tokens: u64) -> String {
    format!("[Output truncated - {tokens} tokens]")
}

/// `MIN_PRUNE_TOKENS`: smaller results are never age-pruned.
const MIN_PRUNE_TOKENS: u64 = 50;

/// `DEFAULT_SUFFIX_TOKEN_LIMIT` of the supersede pass, and `PRUNE_CACHE_WARM_SUFFIX_TOKENS`
/// of the age pass: a result with more than this many tokens of messages after it sits in
/// the warm prompt-cache prefix and is left alone.
pub(crate) const CACHE_WARM_SUFFIX_TOKENS: u64 = 8_000;

/// The age pass's settings (`DEFAULT_PRUNE_CONFIG` plus the caller's cache guard).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PruneConfig {
    /// Newest tool output kept intact.
    pub(crate) protect_tokens: u64,
    /// The whole batch must save at least this much.
    pub(crate) minimum_savings: u64,
    /// `cacheWarmSuffixTokens` (`None`: no guard).
    pub(crate) cache_warm_suffix_tokens: Option<u64>,
}

/// `DEFAULT_PRUNE_CONFIG` as `#pruneToolOutputs` passes it.
pub(crate) const DEFAULT_PRUNE: PruneConfig = PruneConfig {
    protect_tokens: 40_000,
    minimum_savings: 20_000,
    cache_warm_suffix_tokens: Some(CACHE_WARM_SUFFIX_TOKENS),
};

/// `estimatePrunedSavings`: the result's tokens minus the placeholder's `ceil(length / 4)`.
fn pruned_savings(tokens: u64, notice: &str) -> u64 {
    tokens.saturating_sub(compactbench_core::estimate::chars_div4_ceil(notice))
}

/// `readToolSupersedeKey`: for a file read (oh-my-pi's `read`, mapped through
/// [`tool_kind`]), its path without selector, or `path\0selector` with one; internal and web
/// URLs are exempt.
pub(crate) fn read_key(name: &str, args: &Value) -> Option<String> {
    if tool_kind(name) != ToolKind::Read {
        return None;
    }
    let path = tool_path(args)?;
    if path.contains("://") {
        return None;
    }
    match split_read_selector(path) {
        (base, None) => Some(base.to_owned()),
        (base, Some(sel)) => Some(format!("{base}\u{0}{sel}")),
    }
}

/// A tool result chosen for pruning: item, result part, tokens, placeholder.
struct Candidate {
    item: usize,
    part: usize,
    tokens: u64,
    notice: String,
}

/// The tokens of every message after each result of item `i`'s tool message, newest result
/// first (the order the passes walk in): oh-my-pi stores one message per tool result, so the
/// results after it in the same tool message of ours count towards the cache guard's suffix as
/// well as the messages after that tool message (`suffix`).
fn result_suffixes(msg: &Message, suffix: u64) -> Vec<(ResultUnit, u64)> {
    let mut after = suffix;
    let mut out = Vec::new();
    for unit in result_units(msg).into_iter().rev() {
        let tokens = unit.tokens(msg);
        out.push((unit, after));
        after += tokens;
    }
    out
}

/// Writes the placeholders (the whole result content becomes the notice) and appends one
/// prune checkpoint.
fn apply(work: &mut Work<'_>, candidates: &[Candidate], step: &str, saved: u64) {
    let tokens_before = work.residual(&work.context());
    let mut rw = Rewrite::default();
    for c in candidates {
        let m = work.msg(c.item);
        let Some(unit) = result_units(m).into_iter().find(|u| u.part == c.part) else { continue };
        let message = unit.rewrite(m, &c.notice, false);
        work.replace(c.item, message, &mut rw);
        work.mark_pruned(c.item, c.part, &mut rw);
    }
    let mut cp = work.rewrite_checkpoint(
        CheckpointKind::Prune,
        &rw,
        json!({"step": step, "prunedCount": candidates.len(), "tokensSaved": saved}),
    );
    cp.tokens_before = tokens_before;
    work.emit(cp);
}

/// `pruneSupersededToolResults` with the release's per-turn settings (supersede keys on
/// reads, cache-aware): an older read of a file is superseded by a newer successful read of
/// the same file, and is pruned now only if it lies at or after the compaction boundary and
/// the messages after it total at most 8,000 tokens. (The idle flush after 90 minutes needs
/// timestamps our messages lack; results flagged useless do not occur.) Returns the tokens
/// saved.
pub(crate) fn supersede(work: &mut Work<'_>) -> u64 {
    let calls = work.tool_calls();
    let boundary = work.boundary_index();
    let suffix = work.message_suffix_tokens();
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for i in (0..work.items.len()).rev() {
        let Item::Msg { msg, .. } = &work.items[i] else { continue };
        for (unit, after) in result_suffixes(msg, suffix[i]) {
            if work.is_pruned(i, unit.part) {
                continue;
            }
            let (name, call_id) = unit.call(msg);
            let Some(call) = calls.get(call_id) else { continue };
            if is_protected_for_prune(name, Some(call)) {
                continue;
            }
            let Some(key) = read_key(call.0, call.1) else { continue };
            let superseded =
                seen.contains(&key) || key.split_once('\u{0}').is_some_and(|(base, _)| seen.contains(base));
            seen.insert(key);
            if superseded && i >= boundary && after <= CACHE_WARM_SUFFIX_TOKENS {
                candidates.push(Candidate {
                    item: i,
                    part: unit.part,
                    tokens: unit.tokens(msg),
                    notice: SUPERSEDED_NOTICE.to_owned(),
                });
            }
        }
    }
    candidates.reverse();
    if candidates.is_empty() {
        return 0;
    }
    let saved = candidates.iter().map(|c| pruned_savings(c.tokens, &c.notice)).sum();
    apply(work, &candidates, "supersede", saved);
    saved
}

/// `pruneToolOutputs`: walking back from the newest tool result, results older than the
/// newest `protect_tokens` of tool output (and at least 50 tokens, not protected) become
/// `[Output truncated - N tokens]`, but only if the whole batch saves at least
/// `minimum_savings`. Results in the warm cache prefix (more than 8,000 tokens of messages
/// after them) or before the compaction boundary are skipped. Returns the tokens saved.
///
/// With the release's settings the cache guard and the 40,000-token protect window exclude
/// each other (a result with 40,000 tokens of newer tool output after it always has more than
/// 8,000 tokens of messages after it), so this pass never fires there; it is reproduced as
/// written.
pub(crate) fn prune_tool_outputs(work: &mut Work<'_>, config: &PruneConfig) -> u64 {
    let calls = work.tool_calls();
    let boundary = work.boundary_index();
    let suffix = work.message_suffix_tokens();
    let mut accumulated = 0u64;
    let mut candidates: Vec<Candidate> = Vec::new();
    for i in (0..work.items.len()).rev() {
        let Item::Msg { msg, .. } = &work.items[i] else { continue };
        for (unit, after) in result_suffixes(msg, suffix[i]) {
            let tokens = unit.tokens(msg);
            if work.is_pruned(i, unit.part) {
                accumulated += tokens;
                continue;
            }
            let warm = config.cache_warm_suffix_tokens.is_some_and(|limit| after > limit);
            if warm || i < boundary {
                accumulated += tokens;
                continue;
            }
            let (name, call_id) = unit.call(msg);
            let protected = is_protected_for_prune(name, calls.get(call_id));
            if accumulated < config.protect_tokens || protected || tokens < MIN_PRUNE_TOKENS {
                accumulated += tokens;
                continue;
            }
            candidates.push(Candidate { item: i, part: unit.part, tokens, notice: pruned_notice(tokens) });
            accumulated += tokens;
        }
    }
    let saved: u64 = candidates.iter().map(|c| pruned_savings(c.tokens, &c.notice)).sum();
    if saved < config.minimum_savings || candidates.is_empty() {
        return 0;
    }
    candidates.reverse();
    apply(work, &candidates, "prune-tool-outputs", saved);
    saved
}
