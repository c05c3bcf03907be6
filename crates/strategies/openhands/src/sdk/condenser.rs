//! SDK `LLMSummarizingCondenser` (`openhands/sdk/context/condenser/llm_summarizing_condenser.py`,
//! `base.py`, `utils.py`): the reasons and requirement, the forgotten events cut at
//! manipulation indices, the summarizer call and the hard context reset.

use std::collections::HashSet;

use compactbench_core::{Checkpoint, Cx, Error, ErrorKind, Log, SummarizerUsage, SummaryContext, SummaryRequest};
use serde_json::json;

use crate::condensation::{self, CONDENSATION, DETAILS_TAG};
use crate::event::{Event, EventId, Kind};
use crate::prompt;
use crate::sdk::view::{find_next, manipulation_indices};
use crate::tokens::Counter;

/// Why the SDK condenser wants to condense.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reason {
    Request,
    Tokens,
    Events,
}

impl Reason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Request => "request",
            Reason::Tokens => "tokens",
            Reason::Events => "events",
        }
    }
}

/// `CondensationRequirement`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Requirement {
    Soft,
    Hard,
}

/// SDK `LLMSummarizingCondenser` settings (validated).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Summarizing {
    pub(crate) max_size: usize,
    pub(crate) keep_first: usize,
    pub(crate) max_tokens: Option<u64>,
    pub(crate) minimum_progress: f64,
    pub(crate) hard_reset_max_retries: usize,
    pub(crate) hard_reset_scaling: f64,
}

/// `NoCondensationAvailableException`, with the error that caused it.
struct NoCondensation(Error);

/// A condensation before it becomes a checkpoint.
struct Condensation {
    forgotten: Vec<EventId>,
    summary: Option<String>,
    offset: usize,
}

impl Summarizing {
    /// `min(max_tokens, agent_llm.effective_max_input_tokens)`: the agent model's window
    /// always applies, since the agent passes its LLM to the condenser.
    fn effective_max(&self, window: u64) -> u64 {
        self.max_tokens.map_or(window, |m| m.min(window))
    }

    /// Why to condense `view`, whose `get_total_token_count` is `tokens`.
    pub(crate) fn reasons(&self, view: &[Event], tokens: u64, request: bool, window: u64) -> Vec<Reason> {
        let mut reasons = Vec::new();
        if request {
            reasons.push(Reason::Request);
        }
        if tokens > self.effective_max(window) {
            reasons.push(Reason::Tokens);
        }
        if view.len() > self.max_size {
            reasons.push(Reason::Events);
        }
        reasons
    }

    pub(crate) fn requirement(reasons: &[Reason]) -> Option<Requirement> {
        if reasons.is_empty() {
            None
        } else if reasons.contains(&Reason::Tokens) || reasons.contains(&Reason::Request) {
            Some(Requirement::Hard)
        } else {
            Some(Requirement::Soft)
        }
    }

    /// `RollingCondenser.condense` for this condenser: a checkpoint, nothing (soft
    /// requirement that cannot be met now), or the error a failed hard reset raises.
    /// `view`'s `get_total_token_count` is `tokens`.
    pub(crate) fn condense(&self, log: &Log, view: &[Event], tokens: u64, request: bool, cx: &mut Cx<'_>) -> Result<Option<Checkpoint>, Error> {
        let reasons = self.reasons(view, tokens, request, cx.model.window);
        let Some(requirement) = Self::requirement(&reasons) else { return Ok(None) };
        let mut usage = SummarizerUsage::default();
        let mut hard_reset = false;
        let condensation = match self.get_condensation(log, view, tokens, &reasons, cx, &mut usage) {
            Ok(c) => c,
            Err(NoCondensation(e)) => match requirement {
                Requirement::Soft => return Ok(None),
                Requirement::Hard => {
                    hard_reset = true;
                    match self.hard_context_reset(log, view, cx, &mut usage) {
                        Some(c) => c,
                        None => return Err(e),
                    }
                }
            },
        };
        Ok(Some(checkpoint(view, tokens, condensation, &reasons, hard_reset, usage)))
    }

    /// `_get_forgotten_events`: the strictest tail length over all reasons, then both ends
    /// moved forward to manipulation indices.
    fn forgotten(
        &self,
        log: &Log,
        view: &[Event],
        tokens: u64,
        reasons: &[Reason],
        window: u64,
        count: &Counter<'_>,
    ) -> Option<(Vec<Event>, usize)> {
        let n = view.len() as i64;
        let k = self.keep_first as i64;
        let mut suffixes = Vec::new();
        if reasons.contains(&Reason::Request) {
            suffixes.push(n / 2 - k - 1);
        }
        if reasons.contains(&Reason::Events) {
            suffixes.push(self.max_size as i64 / 2 - k - 1);
        }
        if reasons.contains(&Reason::Tokens) {
            let reduce = tokens as i64 - (self.effective_max(window) / 2) as i64;
            let split = self.keep_first.min(view.len());
            suffixes.push(suffix_for_reduction(log, &view[..split], &view[split..], reduce, count) as i64);
        }
        let from_tail = suffixes.into_iter().min()?;
        let naive_end = n - from_tail;
        // The leading system prompt is never forgotten.
        let protected = match view.iter().position(|e| e.kind == Kind::SystemPrompt) {
            Some(i) => k.max(i as i64 + 1),
            None => k,
        };
        let ok = manipulation_indices(view);
        let start = find_next(&ok, protected)?;
        let end = find_next(&ok, naive_end)?;
        let forgotten = if start < end { view[start..end].to_vec() } else { Vec::new() };
        Some((forgotten, start))
    }

    fn get_condensation(
        &self,
        log: &Log,
        view: &[Event],
        tokens: u64,
        reasons: &[Reason],
        cx: &mut Cx<'_>,
        usage: &mut SummarizerUsage,
    ) -> Result<Condensation, NoCondensation> {
        let count = Counter::new(cx.tokenizer, &cx.model.name);
        let Some((forgotten, offset)) = self.forgotten(log, view, tokens, reasons, cx.model.window, &count) else {
            return Err(NoCondensation(Error::new(ErrorKind::NothingToCompact, "Unable to compute forgotten events")));
        };
        if forgotten.is_empty() {
            return Err(NoCondensation(Error::new(ErrorKind::NothingToCompact, "Cannot condense 0 events")));
        }
        if (forgotten.len() as f64) < view.len() as f64 * self.minimum_progress {
            return Err(NoCondensation(Error::new(
                ErrorKind::NothingToCompact,
                "events forgotten below minimum progress threshold",
            )));
        }
        generate(log, &forgotten, offset, None, "condensation", cx, usage)
    }

    /// `hard_context_reset`: summarize every event after the system prompt; on failure,
    /// cap each event string at the longest one's length scaled down, and retry.
    fn hard_context_reset(
        &self,
        log: &Log,
        view: &[Event],
        cx: &mut Cx<'_>,
        usage: &mut SummarizerUsage,
    ) -> Option<Condensation> {
        let preserve = view.iter().position(|e| e.kind == Kind::SystemPrompt).map_or(0, |i| i + 1);
        let forgotten = &view[preserve.min(view.len())..];
        let mut max_len: Option<usize> = None;
        for _ in 0..self.hard_reset_max_retries {
            let attempt = if forgotten.is_empty() {
                // The original asserts on an empty batch; the assertion is caught like any
                // other failure.
                Err(NoCondensation(Error::new(ErrorKind::NothingToCompact, "No events to condense.")))
            } else {
                generate(log, forgotten, preserve, max_len, "hard-context-reset", cx, usage)
            };
            match attempt {
                Ok(c) => return Some(c),
                Err(_) => {
                    let longest = match max_len {
                        Some(m) => m,
                        None => view.iter().map(|e| prompt::sdk_event_str(log, e).chars().count()).max()?,
                    };
                    max_len = Some((longest as f64 * self.hard_reset_scaling) as usize);
                }
            }
        }
        None
    }
}

/// `get_suffix_length_for_token_reduction(events, reduce, base_events=base)`: how many
/// trailing events can stay once the shortest prefix whose tokens exceed `reduce` is removed.
/// A prefix's tokens are `count(base + prefix) - count(base)`, and `count(base)` is 0 for an
/// empty base, so the reply's 3 tokens count then. Every event adds a non-negative amount, so
/// the SDK's binary search finds the first prefix a running sum finds.
fn suffix_for_reduction(log: &Log, base: &[Event], events: &[Event], reduce: i64, count: &Counter<'_>) -> usize {
    if events.is_empty() {
        return 0;
    }
    if reduce <= 0 {
        return events.len();
    }
    let mut sum: i64 = if base.is_empty() { 3 } else { 0 };
    let mut previous = base.last();
    for (i, e) in events.iter().enumerate() {
        sum += count.event(log, previous, e) as i64;
        previous = Some(e);
        if sum > reduce {
            return events.len() - (i + 1);
        }
    }
    0
}

/// `_generate_condensation`: one summarizer call over the forgotten events' strings.
fn generate(
    log: &Log,
    forgotten: &[Event],
    offset: usize,
    max_len: Option<usize>,
    purpose: &str,
    cx: &mut Cx<'_>,
    usage: &mut SummarizerUsage,
) -> Result<Condensation, NoCondensation> {
    let blocks: Vec<String> = forgotten
        .iter()
        .map(|e| format!("<EVENT>\n{}\n</EVENT>", prompt::sdk_truncate(&prompt::sdk_event_str(log, e), max_len)))
        .collect();
    let request = SummaryRequest {
        purpose: purpose.to_owned(),
        // spec (d): the condenser LLM gets one message of rules and <EVENT> blocks.
        context: SummaryContext::Fresh,
        system: prompt::summary_rules(true),
        // The template leaves a blank line between blocks and two before the closing line.
        transcript: format!("{}\n", blocks.join("\n\n")),
        instructions: prompt::SUMMARIZE_NOW.to_owned(),
        // No output cap is set: the summary LLM's own default applies.
        max_output_tokens: cx.model.max_output,
    };
    usage.calls += 1;
    match cx.summarizer.summarize(&request) {
        Ok(s) => {
            usage.input_tokens += s.input_tokens;
            usage.output_tokens += s.output_tokens;
            // A cut-off reply is used as it is; an empty reply has no text content, so the
            // condensation carries no summary.
            let summary = (!s.text.is_empty()).then_some(s.text);
            Ok(Condensation { forgotten: forgotten.iter().map(|e| e.id).collect(), summary, offset })
        }
        Err(e) => {
            usage.failures += 1;
            Err(NoCondensation(Error::new(e.kind, format!("Summarization LLM call failed: {}", e.message))))
        }
    }
}

fn checkpoint(
    view: &[Event],
    tokens: u64,
    c: Condensation,
    reasons: &[Reason],
    hard_reset: bool,
    usage: SummarizerUsage,
) -> Checkpoint {
    let stream: Vec<i64> = c.forgotten.iter().filter(|id| matches!(id, EventId::Stream(_))).map(|id| id.v0()).collect();
    let summaries: Vec<u32> =
        c.forgotten.iter().filter_map(|id| if let EventId::Summary(e) = id { Some(e.0) } else { None }).collect();
    let details = json!({
        DETAILS_TAG: CONDENSATION,
        "condenser": "llm_summarizing",
        "forgotten": stream,
        "forgotten_summaries": summaries,
        "summary_offset": c.offset,
        "reasons": reasons.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
        "hard_reset": hard_reset,
    });
    let forgotten: HashSet<EventId> = c.forgotten.into_iter().collect();
    condensation::checkpoint(view, |e| forgotten.contains(&e.id), c.summary, tokens, usage, details)
}
