//! What `GeminiClient.processTurn` does before each request when context management is off
//! (the default): tool-time truncation has already cut new shell output, then
//! `tryCompressChat`, `tryMaskToolOutputs`, and the overflow pre-check.

use compactbench_core::{
    default_projection, Checkpoint, CheckpointKind, Cx, Decision, Error, Log, Moment, View, Window,
};
use serde_json::json;

use crate::compress::{self, Input};
use crate::history::{self, History, Kind, ResponseKey};
use crate::mask;
use crate::rewrite::{self, Rewrite};
use crate::tokens::estimate_contents;
use crate::truncate;
use crate::GeminiCliConfig;

/// Key of the `details` field holding `lastPromptTokenCount` right after a checkpoint that
/// replaced the chat history (`setHistory`, new chat).
const LAST_PROMPT_TOKENS: &str = "last_prompt_tokens";

/// `GeminiChat.getLastPromptTokenCount()`: the prompt size the provider reported for the
/// newest reply, unless a later checkpoint replaced the history, which resets it to the local
/// estimate of that history (kept in the checkpoint's details). Before any reply it is the
/// estimate of the history.
pub(crate) fn prompt_tokens(log: &Log, view: &View, history: &History) -> u64 {
    let reply = view.last_usage().and_then(|(i, u)| view.messages[i].origin.entry().map(|id| (id, u)));
    let reset = log
        .checkpoints()
        .rev()
        .find_map(|(id, cp)| cp.details.get(LAST_PROMPT_TOKENS).and_then(serde_json::Value::as_u64).map(|t| (id, t)));
    match (reply, reset) {
        (Some((reply_id, _)), Some((cp_id, tokens))) if cp_id > reply_id => tokens,
        // `promptTokenCount`: the whole prompt. The API has no cache-write count; a provider
        // that reports writes apart has them in the prompt all the same.
        (Some((_, usage)), _) => usage.prompt(),
        (None, Some((_, tokens))) => tokens,
        (None, None) => estimate_contents(&history.contents),
    }
}

/// The checks of `processTurn`, cheaply: compact when compression is due, when new shell
/// output needs cutting, or when masking would mask something.
pub(crate) fn decide(config: &GeminiCliConfig, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
    // `/compress` (aliases `/summarize`, `/compact`): `tryCompressChat(promptId, force=true)`.
    if at == Moment::Manual {
        return Decision::compact("manual");
    }
    // Gemini CLI checks at the start of every `sendMessageStream`, new prompt or tool-result
    // continuation alike. It has no compaction on a provider overflow error.
    if at != Moment::BeforeRequest {
        return Decision::Skip;
    }
    let modern = history::is_modern(&cx.model.name);
    let limit = cx.model.window;
    let curated = History::from_view(view, modern, true);
    let tokens = prompt_tokens(log, view, &curated);
    if !curated.is_empty() && tokens as f64 >= config.threshold() * limit as f64 {
        return Decision::compact("threshold");
    }
    let max_chars = truncate::truncate_threshold(limit, tokens, config.truncate_tool_output_threshold);
    if !truncate::tool_time(view, curated.pending.clone(), max_chars).is_empty() {
        return Decision::compact("tool output truncation");
    }
    let raw = History::from_view(view, modern, false);
    if !mask::mask(&raw.contents, view, &config.masking()).rewrites.is_empty() {
        return Decision::compact("tool output masking");
    }
    Decision::Skip
}

/// `tryCompressChat(promptId, force)` on the current view.
pub(crate) fn compress_now(
    config: &GeminiCliConfig,
    log: &Log,
    view: &View,
    cx: &mut Cx<'_>,
    force: bool,
) -> Result<Option<Checkpoint>, Error> {
    let history = History::from_view(view, history::is_modern(&cx.model.name), true);
    let input = Input {
        config,
        view,
        history: &history,
        prompt_tokens: prompt_tokens(log, view, &history),
        limit: cx.model.window,
        force,
    };
    let summarizer = cx.summarizer;
    compress::try_compress(&input, summarizer, cx.model.max_output, cx.store)
}

/// Everything `processTurn` changes before a request, as checkpoints in order: the tool-time
/// truncation of the pending shell output (`Offload`), the compression (`Summary` or, once
/// latched, `Truncate`), then masking (`Mask`). A compression error ends it: the original's
/// turn ends there (API errors) or the runner records the rejection (inflation).
pub(crate) fn before_request(
    config: &GeminiCliConfig,
    log: &Log,
    view: &View,
    cx: &mut Cx<'_>,
) -> Result<Vec<Checkpoint>, Error> {
    let modern = history::is_modern(&cx.model.name);
    let limit = cx.model.window;
    let curated = History::from_view(view, modern, true);
    let tokens = prompt_tokens(log, view, &curated);
    let mut out = Vec::new();

    let max_chars = truncate::truncate_threshold(limit, tokens, config.truncate_tool_output_threshold);
    let cut = truncate::tool_time(view, curated.pending.clone(), max_chars);
    if !cut.is_empty() {
        let (replacements, offloads) = rewrite::apply(view, &cut, |_| true, cx.store);
        let mut cp = Checkpoint::new(CheckpointKind::Offload, Window::Inherit);
        cp.replacements = replacements;
        cp.offloads = offloads;
        cp.tokens_before = tokens;
        cp.details = json!({ "status": "TOOL_OUTPUT_TRUNCATED", "threshold_chars": max_chars });
        out.push(cp);
    }

    if let Some(cp) = compress_now(config, log, view, cx, false)? {
        out.push(cp);
    }

    // Masking reads the history as it is after the steps above.
    let projected;
    let view = if out.is_empty() {
        view
    } else {
        let mut next = log.clone();
        for cp in &out {
            next.push_checkpoint(cp.clone());
        }
        projected = default_projection(&next);
        &projected
    };
    let tokens = out
        .iter()
        .rev()
        .find_map(|cp| cp.details.get(LAST_PROMPT_TOKENS).and_then(serde_json::Value::as_u64))
        .unwrap_or(tokens);
    // `remaining` is taken before masking.
    let remaining = limit as i64 - tokens as i64;

    let raw = History::from_view(view, modern, false);
    let masking = mask::mask(&raw.contents, view, &config.masking());
    if !masking.rewrites.is_empty() {
        let (replacements, offloads) = rewrite::apply(view, &masking.rewrites, |_| true, cx.store);
        let mut cp = Checkpoint::new(CheckpointKind::Mask, Window::Inherit);
        cp.replacements = replacements;
        cp.offloads = offloads;
        cp.tokens_before = tokens;
        cp.details = json!({
            "status": "MASKED",
            "masked": masking.rewrites.len(),
            "tokens_saved": masking.tokens_saved,
            LAST_PROMPT_TOKENS: estimate_contents(&masked(&raw.contents, &masking.rewrites)),
        });
        out.push(cp);
    }

    // The pre-check refuses to send a request larger than what was left; the runner sends
    // every request, so the refusal is only recorded.
    let request = history::build(&view.messages, raw.pending.clone(), false, false);
    if let Some((estimated, remaining)) = overflow_precheck(estimate_contents(&request), remaining) {
        if let Some(serde_json::Value::Object(details)) = out.last_mut().map(|cp| &mut cp.details) {
            details.insert(
                "context_window_will_overflow".into(),
                json!({ "estimated_request_tokens": estimated, "remaining_tokens": remaining }),
            );
        }
    }
    Ok(out)
}

/// `ContextWindowWillOverflow {estimatedRequestTokenCount, remainingTokenCount}` when the
/// request's estimate exceeds what the window had left.
pub(crate) fn overflow_precheck(request_tokens: u64, remaining: i64) -> Option<(u64, i64)> {
    (request_tokens as i64 > remaining).then_some((request_tokens, remaining))
}

/// The history after masking, for `setHistory`'s new estimate.
fn masked(contents: &[history::Content], rewrites: &[Rewrite]) -> Vec<history::Content> {
    let mut out = contents.to_vec();
    for part in out.iter_mut().flat_map(|c| c.parts.iter_mut()) {
        let Kind::Response { id, name, .. } = &part.kind else { continue };
        if let Some(r) = rewrites.iter().find(|r| Some(r.at) == part.at) {
            part.kind =
                Kind::Response { id: id.clone(), name: name.clone(), key: ResponseKey::Output, text: r.text.clone() };
        }
    }
    out
}
