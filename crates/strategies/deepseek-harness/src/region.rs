//! `compactIfNeeded`, `selectCompactableRange` and the compaction transaction
//! (`compaction-basic/src/{index,region}.ts`).

use std::borrow::Cow;

use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Entry, Error, ErrorKind, Log, Role, StopReason, Strategy, SummarizerUsage,
    SummaryContext, SummaryPosition, SummaryRequest, View, Window,
};
use serde_json::{json, Value};

use crate::meter::{estimate_message, measure, system_prompt, Measurement, Node};
use crate::{prompt, prune, DeepseekHarnessConfig, DeepseekHarnessStrategy};

/// `CompactionTrigger`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// Step-boundary pressure (`agent/pre-step`).
    Pressure,
    /// Provider-confirmed context overflow (`agent/request-error`).
    Overflow,
    /// The user's bare `/compact` (`command-compact`).
    Manual,
}

impl Trigger {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Trigger::Pressure => "pressure",
            Trigger::Overflow => "context-overflow",
            Trigger::Manual => "manual",
        }
    }
}

/// Whether the cut before each node (and, last, after the surface) is tool-pairing balanced.
/// A negative count is a corrupt surface, as `toolPairingBalanced*` throws.
pub(crate) fn balanced_cuts(nodes: &[Node]) -> Result<Vec<bool>, Error> {
    let mut cuts = vec![true];
    let mut open = 0i64;
    for (i, n) in nodes.iter().enumerate() {
        open += n.delta;
        if open < 0 {
            return Err(Error::new(
                ErrorKind::Other,
                format!("tool-pairing balance: tool/result at surface position {i} has no matching tool-call (corrupt surface)"),
            ));
        }
        cuts.push(open == 0);
    }
    Ok(cuts)
}

/// `selectCompactableRange`: the index of the first kept node (the range is every node before
/// it), or `None` when nothing can be compacted.
pub(crate) fn select(nodes: &[Node], retain: u64) -> Result<Option<usize>, Error> {
    if nodes.is_empty() {
        return Ok(None);
    }
    let mut accumulated = 0u64;
    let mut keep_from = nodes.len();
    for i in (0..nodes.len()).rev() {
        accumulated += nodes[i].tokens;
        keep_from = i;
        if accumulated >= retain {
            break;
        }
    }
    if keep_from == 0 {
        return Ok(None);
    }
    let balanced = balanced_cuts(nodes)?;
    while keep_from > 0 && !balanced[keep_from] {
        keep_from -= 1;
    }
    Ok((keep_from > 0).then_some(keep_from))
}

/// Overflow recoveries since the newest assistant reply: runs of consecutive overflow
/// checkpoints (one recovery may land a prune and a summary).
pub(crate) fn overflow_recoveries(log: &Log) -> u32 {
    let mut count = 0;
    let mut in_run = false;
    for (_, entry) in log.entries().rev() {
        match entry {
            Entry::Message(m) if m.role == Role::Assistant => break,
            Entry::Message(_) => in_run = false,
            Entry::Checkpoint(cp) => {
                let overflow = cp.details.get("trigger").and_then(Value::as_str) == Some(Trigger::Overflow.as_str());
                if overflow && !in_run {
                    count += 1;
                }
                in_run = overflow;
            }
        }
    }
    count
}

/// A compaction in progress: the log with what has landed so far, and its projection
/// (borrowed from the caller until something lands).
struct Work<'a> {
    strategy: &'a DeepseekHarnessStrategy,
    log: Cow<'a, Log>,
    view: Cow<'a, View>,
    landed: Vec<Checkpoint>,
}

impl Work<'_> {
    fn land(&mut self, checkpoint: Checkpoint) {
        self.log.to_mut().push_checkpoint(checkpoint.clone());
        self.view = Cow::Owned(self.strategy.project(&self.log));
        self.landed.push(checkpoint);
    }

    fn measure(&self) -> Measurement {
        measure(&self.log, &self.view)
    }

    /// What the listener is left with when a later step fails: the landed checkpoints with
    /// the failure noted (the original warns and keeps them), or the error itself.
    fn finish_with(mut self, error: Error) -> Result<Vec<Checkpoint>, Error> {
        match self.landed.last_mut() {
            None => Err(error),
            Some(last) => {
                if let Value::Object(map) = &mut last.details {
                    map.insert("warning".into(), Value::String(error.message));
                }
                Ok(self.landed)
            }
        }
    }

    fn finish(self) -> Result<Vec<Checkpoint>, Error> {
        if self.landed.is_empty() {
            return Err(Error::new(ErrorKind::NothingToCompact, "no safe compactable range"));
        }
        Ok(self.landed)
    }
}

/// `compactIfNeeded(agent, trigger)`.
pub(crate) fn compact_if_needed<'a>(
    strategy: &'a DeepseekHarnessStrategy,
    config: &DeepseekHarnessConfig,
    log: &'a Log,
    view: &'a View,
    trigger: Trigger,
    cx: &mut Cx<'_>,
) -> Result<Vec<Checkpoint>, Error> {
    let mut work = Work { strategy, log: Cow::Borrowed(log), view: Cow::Borrowed(view), landed: Vec::new() };
    let system = system_prompt(log).unwrap_or_default();
    let mut m = work.measure();

    if trigger == Trigger::Overflow {
        // Overflow always qualifies: prune, then keep only the newest indivisible unit.
        if let Some(cp) = prune_checkpoint(&work.view, config, &m, trigger) {
            work.land(cp);
            m = work.measure();
        }
        let Some(keep_from) = select(&m.nodes, 0)? else { return work.finish() };
        return match compact_region(&work.view, &m, keep_from, &system, config, trigger, 1, cx) {
            Ok(cp) => {
                work.land(cp);
                Ok(work.landed)
            }
            Err(e) => work.finish_with(e),
        };
    }

    if trigger == Trigger::Manual {
        // The same function with `retainTokens = 0`, and no pressure to qualify the pruner (spec (c), (b)).
        let Some(keep_from) = select(&m.nodes, 0)? else { return work.finish() };
        return match compact_region(&work.view, &m, keep_from, &system, config, trigger, 1, cx) {
            Ok(cp) => {
                work.land(cp);
                Ok(work.landed)
            }
            Err(e) => work.finish_with(e),
        };
    }

    let budgets = strategy.budgets(cx.model.window)?;
    if m.total < budgets.threshold {
        return Err(Error::new(ErrorKind::NothingToCompact, "pressure below threshold"));
    }
    // Once pressure qualifies, the model-free pass lands first; then re-measure.
    if let Some(cp) = prune_checkpoint(&work.view, config, &m, trigger) {
        work.land(cp);
        m = work.measure();
        if m.total < budgets.threshold {
            return Ok(work.landed);
        }
    }
    let attempts = config.compaction_retries + 1;
    for attempt in 1..=attempts {
        let Some(keep_from) = select(&m.nodes, budgets.retain)? else {
            if work.landed.iter().all(|c| c.kind != CheckpointKind::Summary) {
                return work.finish();
            }
            break;
        };
        match compact_region(&work.view, &m, keep_from, &system, config, trigger, attempt, cx) {
            Ok(cp) => work.land(cp),
            Err(e) => return work.finish_with(e),
        }
        m = work.measure();
        if m.total < budgets.threshold {
            return Ok(work.landed);
        }
    }
    let message = format!(
        "compaction still above threshold after {attempts} compaction attempts ({} estimated tokens >= threshold {})",
        m.total, budgets.threshold
    );
    work.finish_with(Error::new(ErrorKind::Other, message))
}

fn prune_checkpoint(view: &View, config: &DeepseekHarnessConfig, m: &Measurement, trigger: Trigger) -> Option<Checkpoint> {
    if !config.prune_tool_results {
        return None;
    }
    let (replacements, pruned) = prune::prune(view, config)?;
    let mut cp = Checkpoint::new(CheckpointKind::Prune, Window::Inherit);
    cp.replacements = replacements;
    cp.tokens_before = m.total;
    cp.details = json!({ "trigger": trigger.as_str(), "pruned": pruned });
    Some(cp)
}

/// `compactSurfaceRegion` for the nodes before `keep_from`: summarize, frame, apply the
/// shrink rule, and describe the replacement as a checkpoint.
#[allow(clippy::too_many_arguments)]
fn compact_region(
    view: &View,
    m: &Measurement,
    keep_from: usize,
    system: &str,
    config: &DeepseekHarnessConfig,
    trigger: Trigger,
    attempt: u32,
    cx: &mut Cx<'_>,
) -> Result<Checkpoint, Error> {
    let shadowed = &m.nodes[..keep_from];
    let shadowed_tokens: u64 = shadowed.iter().map(|n| n.tokens).sum();
    let request = SummaryRequest {
        purpose: "compaction".into(),
        // spec (d): the last request's system prompt and tools, then the messages verbatim, "designed so the prefix cache is reused".
        context: SummaryContext::Prefix,
        system: system.to_owned(),
        transcript: prompt::transcript(shadowed.iter().map(|n| &view.messages[n.at].message)),
        instructions: prompt::COMPACTION_INSTRUCTION.into(),
        max_output_tokens: config.max_tokens,
    };
    let summary = cx.summarizer.summarize(&request)?;
    if summary.stop == StopReason::Length {
        return Err(Error::new(
            ErrorKind::Rejected,
            "MAX_TOKENS: summarization truncated at the token cap (incomplete checkpoint)",
        ));
    }
    if summary.text.trim().is_empty() {
        return Err(Error::new(ErrorKind::EmptySummary, "summarization produced no text summary content"));
    }
    let message = prompt::checkpoint_message(&summary.text);
    let framed = estimate_message(&message);
    if framed >= shadowed_tokens {
        return Err(Error::new(
            ErrorKind::Rejected,
            format!(
                "summary is not smaller than the shadowed content ({framed} estimated framed tokens >= {shadowed_tokens})"
            ),
        ));
    }
    let first_kept = view.messages[m.nodes[keep_from].at]
        .origin
        .entry()
        .ok_or_else(|| Error::new(ErrorKind::Other, "compaction: the first kept surface node is not a log message"))?;
    let shadowed_ids: Vec<Value> = shadowed
        .iter()
        .map(|n| view.messages[n.at].origin.entry().map_or(Value::String("checkpoint".into()), |e| json!(e.0)))
        .collect();
    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::From(first_kept)).with_summary(message);
    cp.summary_position = SummaryPosition::AfterSystem;
    cp.tokens_before = m.total;
    cp.summarizer = SummarizerUsage {
        calls: 1,
        failures: 0,
        input_tokens: summary.input_tokens,
        output_tokens: summary.output_tokens,
    };
    cp.details = json!({
        "trigger": trigger.as_str(),
        "attempt": attempt,
        "baseline": m.baseline.as_str(),
        "shadowed": shadowed_ids,
        "shadowedTokenCount": shadowed_tokens,
        "framedTokenCount": framed,
        "maxTokens": config.max_tokens,
        "summary": summary.text,
    });
    Ok(cp)
}
