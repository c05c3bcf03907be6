//! Chat compression: `ChatCompressionService.compress` and the status handling of
//! `GeminiClient.tryCompressChat` (`context/chatCompressionService.ts`, `core/client.ts`).

use compactbench_core::{
    Checkpoint, CheckpointKind, Error, ErrorKind, Message, SummarizerUsage, SummaryContext, SummaryPosition, SummaryRequest, View,
    VirtualStore, Window,
};
use serde_json::json;

use crate::history::{Content, GPart, History, Kind, Speaker};
use crate::prompt;
use crate::tokens::{content_json, content_json_len, estimate, estimate_contents};
use crate::truncate;
use crate::{rewrite, GeminiCliConfig};

/// `COMPRESSION_PRESERVE_THRESHOLD`: the share of the history (by JSON characters) kept.
pub(crate) const PRESERVE_THRESHOLD: f64 = 0.3;

/// Where the in-memory `hasFailedCompressionAttempt` latch lives. A failed compaction
/// appends nothing to the log and [`compactbench_core::Cx::failures`] does not say why it
/// failed, so the latch is kept as a marker file in the session's virtual store (never named
/// in a request, so probes never read it).
pub(crate) const LATCH_PATH: &str = "compactbench/gemini-cli/hasFailedCompressionAttempt";

/// Whether a non-forced compression failed by inflation earlier in this session.
pub(crate) fn latched(store: &VirtualStore) -> bool {
    store.read(LATCH_PATH) == Some("true")
}

fn set_latch(store: &mut VirtualStore, on: bool) {
    if on || latched(store) {
        store.write(LATCH_PATH, if on { "true" } else { "false" });
    }
}

/// `findCompressSplitPoint(contents, fraction)`: the first user entry without a function
/// response at or after `fraction` of the history's JSON characters; failing that, everything
/// if the history ends with a model entry without a function call, else the last such user
/// entry before the mark (0: compress nothing).
pub(crate) fn find_compress_split_point(contents: &[Content], fraction: f64) -> Result<usize, Error> {
    if fraction <= 0.0 || fraction >= 1.0 {
        return Err(Error::new(ErrorKind::Other, "Fraction must be between 0 and 1"));
    }
    let counts: Vec<u64> = contents.iter().map(content_json_len).collect();
    let target = counts.iter().sum::<u64>() as f64 * fraction;
    let mut last_split_point = 0;
    let mut cumulative = 0u64;
    for (i, content) in contents.iter().enumerate() {
        if content.role == Speaker::User && !content.parts.iter().any(GPart::is_function_response) {
            if cumulative as f64 >= target {
                return Ok(i);
            }
            last_split_point = i;
        }
        cumulative += counts[i];
    }
    match contents.last() {
        Some(last)
            if last.role == Speaker::Model && !last.parts.iter().any(|p| matches!(p.kind, Kind::Call { .. })) =>
        {
            Ok(contents.len())
        }
        _ => Ok(last_split_point),
    }
}

/// What the compression step is working on.
pub(crate) struct Input<'a> {
    pub(crate) config: &'a GeminiCliConfig,
    pub(crate) view: &'a View,
    pub(crate) history: &'a History,
    /// `lastPromptTokenCount`.
    pub(crate) prompt_tokens: u64,
    /// `tokenLimit(model)`.
    pub(crate) limit: u64,
    /// `/compress` (skips the threshold and the latch).
    pub(crate) force: bool,
}

/// The history slice as the summarizer receives it: one Gemini `Content` per line.
fn transcript(contents: &[Content]) -> String {
    contents.iter().map(|c| content_json(c).to_string()).collect::<Vec<_>>().join("\n")
}

/// `tryCompressChat`: `Ok(None)` for `NOOP`; a `Summary` checkpoint for `COMPRESSED` (new chat
/// `[summary (user), ack (model), kept…]`); a `Truncate` checkpoint for `CONTENT_TRUNCATED`.
/// `COMPRESSION_FAILED_EMPTY_SUMMARY`, `COMPRESSION_FAILED_INFLATED_TOKEN_COUNT` and
/// summarizer errors are errors, the log unchanged; inflation latches non-forced calls.
pub(crate) fn try_compress(
    input: &Input<'_>,
    summarizer: &dyn compactbench_core::Summarizer,
    max_output_tokens: u64,
    store: &mut VirtualStore,
) -> Result<Option<Checkpoint>, Error> {
    let Input { config, view, history, prompt_tokens, limit, force } = *input;
    let curated = &history.contents;
    if curated.is_empty() {
        return Ok(None);
    }
    if !force && (prompt_tokens as f64) < config.threshold() * limit as f64 {
        return Ok(None);
    }

    let max_chars = truncate::truncate_threshold(limit, prompt_tokens, config.truncate_tool_output_threshold);
    let mut next_id = truncate::next_truncation_id(store);
    let (truncated, rewrites) = truncate::to_budget(curated, max_chars, &mut next_id);
    truncate::set_truncation_counter(store, next_id);

    if latched(store) && !force {
        // Truncation only: install the budget-truncated history if it is smaller. A pass that
        // changed nothing would install the same history again; it is not recorded.
        let tokens = estimate_contents(&truncated);
        if tokens >= prompt_tokens || rewrites.is_empty() {
            return Ok(None);
        }
        let (replacements, offloads) = rewrite::apply(view, &rewrites, |_| true, store);
        let mut cp = Checkpoint::new(CheckpointKind::Truncate, Window::Inherit);
        cp.replacements = replacements;
        cp.offloads = offloads;
        cp.tokens_before = prompt_tokens;
        cp.details = json!({
            "status": "CONTENT_TRUNCATED",
            "latched": true,
            "last_prompt_tokens": tokens,
        });
        return Ok(Some(cp));
    }

    let split = find_compress_split_point(&truncated, 1.0 - PRESERVE_THRESHOLD)?;
    if split == 0 {
        return Ok(None);
    }
    let keep = &truncated[split..];

    // High fidelity: the original slice unless it alone is over the model's limit.
    let high_fidelity = estimate_contents(&curated[..split]) < limit;
    let for_summarizer = if high_fidelity { &curated[..split] } else { &truncated[..split] };
    let previous_snapshot = for_summarizer
        .iter()
        .flat_map(|c| &c.parts)
        .any(|p| matches!(&p.kind, Kind::Text { text, .. } if text.contains(prompt::SNAPSHOT_TAG)));

    let slice = transcript(for_summarizer);
    let mut usage = SummarizerUsage::default();
    let first = summarizer.summarize(&SummaryRequest {
        purpose: "chat-compression".into(),
        // spec (d): the compression prompt as system instruction; the agent's own system prompt and tools are not sent.
        context: SummaryContext::Fresh,
        system: prompt::SYSTEM.into(),
        transcript: slice.clone(),
        instructions: prompt::snapshot_instruction(previous_snapshot),
        max_output_tokens,
    })?;
    usage.add(SummarizerUsage {
        calls: 1,
        failures: 0,
        input_tokens: first.input_tokens,
        output_tokens: first.output_tokens,
    });
    // The verification pass replays the slice with the draft as the model's answer.
    let draft = Content { role: Speaker::Model, parts: vec![GPart::text(first.text.clone())], members: Vec::new() };
    let verified = summarizer.summarize(&SummaryRequest {
        purpose: "chat-compression-verify".into(),
        // spec (d): the verification call replays call 1's system and slice, then the draft.
        context: SummaryContext::Fresh,
        system: prompt::SYSTEM.into(),
        transcript: format!("{slice}\n{}", content_json(&draft)),
        instructions: prompt::VERIFY.into(),
        max_output_tokens,
    })?;
    usage.add(SummarizerUsage {
        calls: 1,
        failures: 0,
        input_tokens: verified.input_tokens,
        output_tokens: verified.output_tokens,
    });

    // `(verified.trim() || draft).trim()`; neither call's stop reason is looked at.
    let summary = match verified.text.trim() {
        "" => first.text.trim(),
        v => v,
    }
    .to_owned();
    if summary.is_empty() {
        return Err(Error::new(
            ErrorKind::EmptySummary,
            "COMPRESSION_FAILED_EMPTY_SUMMARY: both compression replies were empty",
        ));
    }

    let new_history = [
        vec![
            Content { role: Speaker::User, parts: vec![GPart::text(summary.clone())], members: Vec::new() },
            Content { role: Speaker::Model, parts: vec![GPart::text(prompt::ACK)], members: Vec::new() },
        ],
        keep.to_vec(),
    ]
    .concat();
    let new_tokens = estimate(new_history.iter().flat_map(|c| &c.parts));
    if new_tokens > prompt_tokens {
        if !force {
            set_latch(store, true);
        }
        return Err(Error::new(
            ErrorKind::Rejected,
            format!(
                "COMPRESSION_FAILED_INFLATED_TOKEN_COUNT: compression would grow the history from {prompt_tokens} to \
                 {new_tokens} tokens; history left unchanged"
            ),
        ));
    }

    // The new chat: kept entries and the pending request stay; the kept ones show their
    // budget-truncated tool outputs; every truncated output was saved to a file.
    let kept_views: Vec<usize> = keep.iter().flat_map(|c| c.members.iter().copied()).collect();
    let mut kept_ids: Vec<_> = kept_views
        .iter()
        .copied()
        .chain(history.pending.clone())
        .filter_map(|i| view.messages[i].origin.entry())
        .collect();
    kept_ids.sort();
    kept_ids.dedup();
    let (replacements, offloads) = rewrite::apply(view, &rewrites, |i| kept_views.contains(&i), store);
    if force {
        // `startChat` resets the latch.
        set_latch(store, false);
    }
    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::Kept(kept_ids)).with_summary(Message::user(summary));
    cp.summary_position = SummaryPosition::AfterSystem;
    cp.injected = vec![Message::assistant(prompt::ACK)];
    cp.replacements = replacements;
    cp.offloads = offloads;
    cp.tokens_before = prompt_tokens;
    cp.summarizer = usage;
    cp.details = json!({
        "status": "COMPRESSED",
        "split_point": split,
        "history_entries": curated.len(),
        "previous_snapshot": previous_snapshot,
        "summarizer_input": if high_fidelity { "original" } else { "truncated" },
        "truncated_outputs": rewrites.len(),
        "last_prompt_tokens": new_tokens,
    });
    Ok(Some(cp))
}
