//! V0 `LLMSummarizingCondenser` (`impl/llm_summarizing_condenser.py`).

use compactbench_core::{Cx, Error, ErrorKind, Log, Summary, SummarizerUsage, SummaryContext, SummaryRequest};

use crate::event::Event;
use crate::prompt;
use crate::truncate;
use crate::v0::condensation::{Condensation, Forgotten};

/// Keeps the head and the newest events and summarizes the rest.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LlmSummarizing {
    /// Events in the view before condensing (config default 100).
    pub(crate) max_size: usize,
    /// Events at the start that are kept (config default 1).
    pub(crate) keep_first: usize,
    /// Characters of each event string sent to the summarizer (10 000).
    pub(crate) max_event_length: usize,
}

impl LlmSummarizing {
    /// `get_condensation`: one summarizer call; errors propagate, as in V0.
    pub(crate) fn get_condensation(&self, log: &Log, view: &[Event], cx: &mut Cx<'_>) -> Result<Condensation, Error> {
        let (forgotten, transcript) = self.forget(log, view)?;
        let request = SummaryRequest {
            purpose: "condensation".to_owned(),
            // spec (d): the condenser LLM (its own config, prompt caching forced off), one user message.
            context: SummaryContext::Fresh,
            // V0 sends one user message that opens with the rules; the seam sends instructions
            // after the material, so the rules go in the system text instead.
            system: prompt::summary_rules(false),
            transcript,
            instructions: prompt::SUMMARIZE_NOW.to_owned(),
            max_output_tokens: cx.model.max_output,
        };
        let reply = cx.summarizer.summarize(&request)?;
        let summary = reply.text.clone();
        Ok(self.condensation(forgotten, summary, &reply))
    }

    /// The events to forget and what the summarizer reads of them: `head = view[:keep_first]`,
    /// `events_from_tail = max_size // 2 - len(head) - 1` (a slot for the summary); the
    /// previous summary is `view[keep_first]` if it is a condensation observation; the
    /// forgotten events are those of `view[keep_first:-events_from_tail]` that are not,
    /// forgotten as the range of their ids.
    pub(crate) fn forget(&self, log: &Log, view: &[Event]) -> Result<(Forgotten, String), Error> {
        let head_len = self.keep_first.min(view.len());
        let from_tail = (self.max_size / 2).saturating_sub(head_len + 1);
        let Some(at_offset) = view.get(self.keep_first) else {
            return Err(Error::new(ErrorKind::NothingToCompact, "list index out of range"));
        };
        let previous = if at_offset.is_condensation_observation() {
            prompt::v0_event_message(log, at_offset)
        } else {
            "No events summarized".to_owned()
        };
        // Python `view[keep_first:-events_from_tail]`, where `[a:-0]` is empty.
        let end = if from_tail == 0 { 0 } else { view.len().saturating_sub(from_tail) };
        let middle = view.get(self.keep_first..end).unwrap_or_default();
        let forgotten: Vec<&Event> = middle.iter().filter(|e| !e.is_condensation_observation()).collect();
        let range = Forgotten::range(forgotten.iter().map(|e| e.id.v0()))?;
        let mut transcript = format!(
            "<PREVIOUS SUMMARY>\n{}\n</PREVIOUS SUMMARY>\n\n\n",
            truncate::v0(&previous, self.max_event_length)
        );
        for e in &forgotten {
            let content = truncate::v0(&prompt::v0_event_str(log, e), self.max_event_length);
            transcript.push_str(&format!("<EVENT id={}>\n{content}\n</EVENT>\n", e.id.v0()));
        }
        Ok((range, transcript))
    }

    /// The condensation forgetting `forgotten`, with `summary` put at `keep_first`.
    pub(crate) fn condensation(&self, forgotten: Forgotten, summary: String, reply: &Summary) -> Condensation {
        let usage = SummarizerUsage { calls: 1, failures: 0, input_tokens: reply.input_tokens, output_tokens: reply.output_tokens };
        Condensation { forgotten, summary: Some(summary), summary_offset: Some(self.keep_first), usage }
    }
}
