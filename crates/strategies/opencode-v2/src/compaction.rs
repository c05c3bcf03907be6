//! `select`, the previous checkpoint, and the plan `compactAfterOverflow` makes before it
//! publishes `Compaction.Started` (every early `return false` of the original lives here).

use compactbench_core::{Entry, EntryId, Log, ModelProfile, SummaryContext, SummaryRequest};

use crate::history::{est_oc, rows, serialize, Row};
use crate::prompt::{build_prompt, SUMMARY_OUTPUT_TOKENS};
use crate::OpencodeV2Config;

/// What `select` returns: the serialized head and recent texts, and which log entries each
/// stands for (for reports; V2 keeps only the text).
pub(crate) struct Selected {
    pub(crate) head: String,
    pub(crate) recent: String,
    pub(crate) head_ids: Vec<EntryId>,
    pub(crate) recent_ids: Vec<EntryId>,
}

/// `select(entries, keep.tokens)`. Serializes every row, drops empty texts, and walks newest
/// to oldest adding `est_oc(text)` while the total stays `<= keep` (`next > keep` stops).
/// Canonical: no turn boundary. `snap` applies variant @8b9b5784's selection instead: the
/// newest row is always kept, then the split moves back to the nearest `user` row; a split
/// at 0 moves to the latest user row instead.
pub(crate) fn select(rows: &[Row<'_>], keep: u64, snap: bool) -> Option<Selected> {
    let conversation: Vec<(&Row<'_>, String)> =
        rows.iter().map(|r| (r, serialize(r))).filter(|(_, text)| !text.is_empty()).collect();
    if conversation.is_empty() {
        return None;
    }
    let mut total = 0;
    let mut split = conversation.len();
    for index in (0..conversation.len()).rev() {
        let next = total + est_oc(&conversation[index].1);
        let newest_forced = snap && split == conversation.len();
        if next > keep && !newest_forced {
            break;
        }
        total = next;
        split = index;
    }
    if snap {
        while split > 0 && !conversation[split].0.is_user() {
            split -= 1;
        }
        if split == 0 {
            if let Some(latest) = conversation.iter().rposition(|(r, _)| r.is_user()) {
                if latest > 0 {
                    split = latest;
                }
            }
        }
    }
    let texts = |range: &[(&Row<'_>, String)]| range.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>().join("\n\n");
    let ids = |range: &[(&Row<'_>, String)]| range.iter().flat_map(|(r, _)| r.ids.iter().copied()).collect();
    Some(Selected {
        head: texts(&conversation[..split]),
        recent: texts(&conversation[split..]),
        head_ids: ids(&conversation[..split]),
        recent_ids: ids(&conversation[split..]),
    })
}

/// The latest `compaction` row: its log id and the `summary` and `recent` it stored.
pub(crate) struct Previous {
    pub(crate) id: EntryId,
    pub(crate) summary: String,
    pub(crate) recent: String,
}

/// The newest checkpoint this strategy wrote (history starts there).
pub(crate) fn previous(log: &Log) -> Option<Previous> {
    log.entries().rev().find_map(|(id, e)| match e {
        Entry::Checkpoint(cp) if cp.details["type"] == "compaction" => Some(Previous {
            id,
            summary: cp.details["summary"].as_str()?.to_owned(),
            recent: cp.details["recent"].as_str()?.to_owned(),
        }),
        _ => None,
    })
}

/// `request.generation.maxTokens ?? limits.output ?? 0`.
pub(crate) fn request_output(config: &OpencodeV2Config, model: &ModelProfile) -> u64 {
    config.request_max_tokens.unwrap_or(model.max_output)
}

/// `min(output || SUMMARY_OUTPUT_TOKENS, SUMMARY_OUTPUT_TOKENS)`.
pub(crate) fn summary_output(output: u64) -> u64 {
    if output == 0 {
        SUMMARY_OUTPUT_TOKENS
    } else {
        output.min(SUMMARY_OUTPUT_TOKENS)
    }
}

/// Everything `compactAfterOverflow` settles before `Compaction.Started`.
pub(crate) struct Plan {
    pub(crate) request: SummaryRequest,
    pub(crate) selected: Selected,
}

/// The plan, or `None` where `compactAfterOverflow` returns false without an event: no
/// context limit, nothing serialized, an empty head with no previous checkpoint, or a
/// prompt that does not fit `context − summaryOutput` (prepend mode).
pub(crate) fn plan(log: &Log, config: &OpencodeV2Config, model: &ModelProfile) -> Option<Plan> {
    let context = model.window;
    if context == 0 {
        return None;
    }
    let previous = previous(log);
    let rows = rows(log, previous.as_ref().map(|p| p.id));
    let selected = select(&rows, config.keep_tokens, config.snap_to_user)?;
    if selected.head.is_empty() && previous.is_none() {
        return None;
    }
    // The previous `recent` is summarized now, ahead of the new head.
    let context_pieces: Vec<&str> = [previous.as_ref().map_or("", |p| p.recent.as_str()), selected.head.as_str()]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    let prompt = build_prompt(previous.as_ref().map(|p| p.summary.as_str()), &context_pieces);
    let max_output_tokens = summary_output(request_output(config, model));
    let request = SummaryRequest {
        purpose: "compaction".into(),
        // spec (d) prepend mode: one user message with the serialized conversation, no system prompt.
        context: SummaryContext::Fresh,
        // V2 sends one user message and no system prompt.
        system: String::new(),
        transcript: prompt.transcript,
        instructions: prompt.instructions,
        max_output_tokens,
    };
    let fits = i128::from(est_oc(&request.user_message())) <= i128::from(context) - i128::from(max_output_tokens);
    if !fits {
        return None;
    }
    Some(Plan { request, selected })
}
