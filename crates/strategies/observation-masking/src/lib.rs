//! Baseline `observation-masking`: keep the newest [`KEEP_RESULTS`] tool results verbatim and
//! replace every older one with a one-line placeholder; no model, no summary, nothing else
//! dropped. This is the baseline of Lindenbauer et al., "The Complexity Trap: Simple
//! Observation Masking Is as Efficient as LLM Summarization for Agent Context Management"
//! (JetBrains Research, 2025), which runs SWE-agent's `LastNObservations` history processor
//! (`sweagent/agent/history_processors.py`, read at
//! `SWE-agent/SWE-agent@669b8f9cbd1e8a368a33d0b1d29eb0987006c9b6`) with N = 10. The placeholder is that processor's
//! text, `Old environment output: (N lines omitted)`. Deliberate simplifications: no
//! `polling` (the window slides every step, which is the processor's default), and the first
//! observation is not exempt (SWE-agent exempts the task instance, which our sessions carry in
//! the user message instead).
//!
//! Each masking is a [`CheckpointKind::Mask`] checkpoint with [`Window::Inherit`] and one
//! replacement per newly masked result. Replacements keep the call id and tool name, so
//! call/result pairing survives in every provider shape. The view can still outgrow the
//! window (a long turn of large results): masking alone has no overflow path, which is the
//! baseline's real behaviour.

use compactbench_core::{Checkpoint, CheckpointKind, Cx, Decision, EntryId, Error, Fidelity, Incremental, Log, Message, Moment, Origin, Part, Replacement, Replay, Strategy, StrategyInfo, View, Window};

/// Tool results kept verbatim, newest first.
const KEEP_RESULTS: usize = 10;

/// The `observation-masking` baseline.
pub struct ObservationMaskingStrategy {
    info: StrategyInfo,
}

/// The `observation-masking` baseline.
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(ObservationMaskingStrategy {
        info: StrategyInfo {
            id: "observation-masking".into(),
            harness: "baseline".into(),
            source: "Lindenbauer et al. 2025 (The Complexity Trap), M = 10".into(),
            summary: "keep the newest 10 tool results, mask older ones with a placeholder".into(),
            fidelity: Fidelity::Baseline,
        },
    })
}

/// View messages that are unmasked tool results, oldest first.
fn unmasked_results(view: &View) -> Vec<(EntryId, &Message)> {
    view.messages
        .iter()
        .filter_map(|vm| match vm.origin {
            Origin::Entry(id) if vm.message.tool_result_ids().next().is_some() => Some((id, &vm.message)),
            _ => None,
        })
        .collect()
}

fn mask(message: &Message) -> Message {
    let parts = message
        .parts
        .iter()
        .map(|p| match p {
            Part::ToolResult { call_id, name, text, is_error } => Part::ToolResult {
                call_id: call_id.clone(),
                name: name.clone(),
                text: format!("Old environment output: ({} lines omitted)", text.lines().count()),
                is_error: *is_error,
            },
            other => other.clone(),
        })
        .collect();
    Message::new(message.role, parts)
}

impl Strategy for ObservationMaskingStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::default_view(self))
    }

    fn decide(&self, _: &Log, view: &View, at: Moment, _: &Cx<'_>) -> Decision {
        if at == Moment::BeforeRequest && unmasked_results(view).len() > KEEP_RESULTS {
            Decision::compact("more than 10 unmasked tool results")
        } else {
            Decision::Skip
        }
    }

    fn compact(&self, _: &Log, view: &View, _: Moment, _: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let results = unmasked_results(view);
        let old = results.len().saturating_sub(KEEP_RESULTS);
        if old == 0 {
            return Ok(Vec::new());
        }
        let mut cp = Checkpoint::new(CheckpointKind::Mask, Window::Inherit);
        cp.replacements = results[..old].iter().map(|(id, m)| Replacement { entry: *id, message: mask(m) }).collect();
        Ok(vec![cp])
    }
}

#[cfg(test)]
mod tests;
