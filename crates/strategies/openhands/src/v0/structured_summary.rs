//! V0 `StructuredSummaryCondenser` (`impl/structured_summary_condenser.py`).

use compactbench_core::{Cx, Error, Log, SummaryContext, SummaryRequest};

use crate::event::Event;
use crate::prompt;
use crate::v0::condensation::Condensation;
use crate::v0::llm_summarizing::LlmSummarizing;

/// [`LlmSummarizing`]'s selection and settings; the summary is a `StateSummary` that the
/// model fills in through a forced `create_state_summary` call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StructuredSummary(pub(crate) LlmSummarizing);

impl StructuredSummary {
    /// `get_condensation`: the call is asked for as a JSON reply, since the summarizer seam
    /// returns text; a reply that is not the function's arguments becomes an empty state
    /// summary (as an unparsable tool call does).
    pub(crate) fn get_condensation(&self, log: &Log, view: &[Event], cx: &mut Cx<'_>) -> Result<Condensation, Error> {
        let (forgotten, transcript) = self.0.forget(log, view)?;
        let request = SummaryRequest {
            purpose: "structured-summary".to_owned(),
            // spec (d): as LLMSummarizing, with a forced function call.
            context: SummaryContext::Fresh,
            system: prompt::STRUCTURED_RULES.to_owned(),
            transcript,
            instructions: prompt::structured_instructions(),
            max_output_tokens: cx.model.max_output,
        };
        let reply = cx.summarizer.summarize(&request)?;
        let fields = serde_json::from_str::<serde_json::Value>(reply.text.trim())
            .ok()
            .and_then(|v| v.as_object().cloned())
            .filter(|o| o.iter().all(|(k, v)| !prompt::STATE_SUMMARY_FIELDS.contains(&k.as_str()) || v.is_string()))
            .unwrap_or_default();
        Ok(self.0.condensation(forgotten, prompt::render_state_summary(&fields), &reply))
    }
}
