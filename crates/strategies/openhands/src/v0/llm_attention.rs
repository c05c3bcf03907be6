//! V0 `LLMAttentionCondenser` (`impl/llm_attention_condenser.py`): keeps the head and the
//! events the model ranks most important.

use compactbench_core::{Cx, Error, ErrorKind, Log, SummarizerUsage, SummaryContext, SummaryRequest};

use crate::event::Event;
use crate::prompt;
use crate::v0::condensation::{Condensation, Forgotten};

/// `get_condensation`: the model orders every event's id by importance; keep the head and
/// the first `max_size // 2 - len(head)` other ids it returns, filled up from the newest
/// events when it returns fewer; forget the rest as a list. The response schema is asked
/// for as a JSON reply (the summarizer seam returns text); any other reply is an error, as
/// V0's validation error is.
pub(crate) fn get_condensation(log: &Log, view: &[Event], max_size: usize, keep_first: usize, cx: &mut Cx<'_>) -> Result<Condensation, Error> {
    let head: Vec<i64> = view.iter().take(keep_first).map(|e| e.id.v0()).collect();
    let from_tail = (max_size / 2).saturating_sub(head.len());
    let items: Vec<String> = view
        .iter()
        .map(|e| format!("<ID>{}</ID>\n<CONTENT>{}</CONTENT>", e.id.v0(), prompt::v0_event_message(log, e)))
        .collect();
    let request = SummaryRequest {
        purpose: "attention".to_owned(),
        // spec (d): the condenser LLM (its own config, prompt caching forced off).
        context: SummaryContext::Fresh,
        // V0 sends the rules as the first user message, then one message per event.
        system: prompt::ATTENTION_RULES.to_owned(),
        transcript: items.join("\n\n"),
        instructions: prompt::ATTENTION_INSTRUCTIONS.to_owned(),
        max_output_tokens: cx.model.max_output,
    };
    let reply = cx.summarizer.summarize(&request)?;
    let ids: Vec<i64> = serde_json::from_str::<serde_json::Value>(reply.text.trim())
        .ok()
        .and_then(|v| v.get("ids")?.as_array()?.iter().map(|x| x.as_i64()).collect::<Option<Vec<i64>>>())
        .ok_or_else(|| Error::new(ErrorKind::Rejected, "response is not an ImportantEventSelection"))?;
    let mut keep: Vec<i64> = ids.into_iter().filter(|id| !head.contains(id)).take(from_tail).collect();
    for e in view.iter().rev() {
        if keep.len() >= from_tail {
            break;
        }
        if !keep.contains(&e.id.v0()) {
            keep.push(e.id.v0());
        }
    }
    let forgotten = view.iter().map(|e| e.id.v0()).filter(|id| !keep.contains(id) && !head.contains(id)).collect();
    let usage = SummarizerUsage { calls: 1, failures: 0, input_tokens: reply.input_tokens, output_tokens: reply.output_tokens };
    Ok(Condensation { forgotten: Forgotten::List(forgotten), summary: None, summary_offset: None, usage })
}
