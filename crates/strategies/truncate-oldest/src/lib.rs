//! Baseline `truncate-oldest`: no summary, no model. Before each request, if the estimated
//! context exceeds the budget `window − max_output`, drop whole turns, oldest first, until it
//! fits. A turn is a user message and everything up to the next one. The current turn is
//! never dropped as a whole; if it alone is over budget, its oldest assistant steps (an
//! assistant message together with the tool results answering it) go next, keeping the
//! turn's user message. Tool calls and results therefore always leave together.
//!
//! Estimator: `ceil(chars / 4)` per message over its searchable text (the most common harness
//! estimate). No original harness (baseline), so no source commit applies.

use compactbench_core::estimate::chars_div4_ceil;
use compactbench_core::{Checkpoint, CheckpointKind, Cx, Decision, EntryId, Error, ErrorKind, Fidelity, Incremental, Log, Message, Moment, Replay, Role, Strategy, StrategyInfo, View, Window};

/// The `truncate-oldest` baseline.
pub struct TruncateOldestStrategy {
    info: StrategyInfo,
}

/// The `truncate-oldest` baseline.
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(TruncateOldestStrategy {
        info: StrategyInfo {
            id: "truncate-oldest".into(),
            harness: "baseline".into(),
            source: "baseline".into(),
            summary: "over window − max_output: drop whole oldest turns (pairs intact), no summary".into(),
            fidelity: Fidelity::Baseline,
        },
    })
}

fn estimate(m: &Message) -> u64 {
    chars_div4_ceil(&m.searchable_text())
}

fn budget(cx: &Cx<'_>) -> u64 {
    cx.model.window.saturating_sub(cx.model.max_output)
}

/// Droppable units of the view's non-system messages, oldest first: whole earlier turns,
/// then the steps of the current turn after its user message. Each unit is a list of
/// (log id, estimate).
fn units(view: &View) -> Vec<Vec<(EntryId, u64)>> {
    let body: Vec<(EntryId, &Message)> = view
        .messages
        .iter()
        .filter(|vm| vm.message.role != Role::System)
        .filter_map(|vm| vm.origin.entry().map(|id| (id, &vm.message)))
        .collect();
    let last_user = body.iter().rposition(|(_, m)| m.role == Role::User).unwrap_or(0);
    let mut units: Vec<Vec<(EntryId, u64)>> = Vec::new();
    for (i, (id, m)) in body.iter().enumerate() {
        let starts_unit = if i <= last_user {
            m.role == Role::User || units.is_empty()
        } else {
            // Inside the current turn, every assistant message starts a step.
            m.role == Role::Assistant || i == last_user + 1
        };
        if starts_unit || units.is_empty() {
            units.push(Vec::new());
        }
        units.last_mut().expect("pushed above").push((*id, estimate(m)));
    }
    units
}

impl Strategy for TruncateOldestStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::default_view(self))
    }

    fn decide(&self, _: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        let total: u64 = view.iter().map(estimate).sum();
        match at {
            Moment::BeforeRequest | Moment::Overflow if total > budget(cx) => Decision::compact("over budget"),
            _ => Decision::Skip,
        }
    }

    fn compact(&self, _: &Log, view: &View, _: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let system: u64 = view.iter().filter(|m| m.role == Role::System).map(estimate).sum();
        let units = units(view);
        let mut total: u64 = system + units.iter().flatten().map(|(_, t)| t).sum::<u64>();
        let tokens_before = total;
        // The current turn's user message is pinned: it is the first message of the first
        // unit after the last whole turn, so we never drop the unit that holds it alone.
        let pinned = units.iter().rposition(|u| u.len() == 1 && view_role_is_user(view, u[0].0));
        let mut dropped = vec![false; units.len()];
        for (i, unit) in units.iter().enumerate() {
            if total <= budget(cx) || i + 1 == units.len() {
                break;
            }
            if Some(i) == pinned {
                continue;
            }
            dropped[i] = true;
            total -= unit.iter().map(|(_, t)| t).sum::<u64>();
        }
        if !dropped.contains(&true) {
            return Err(Error::new(ErrorKind::NothingToCompact, "only the newest step is left"));
        }
        let kept: Vec<EntryId> = units
            .iter()
            .zip(&dropped)
            .filter(|(_, d)| !**d)
            .flat_map(|(u, _)| u.iter().map(|(id, _)| *id))
            .collect();
        let mut cp = Checkpoint::new(CheckpointKind::Truncate, Window::Kept(kept));
        cp.tokens_before = tokens_before;
        Ok(vec![cp])
    }
}

fn view_role_is_user(view: &View, id: EntryId) -> bool {
    view.messages.iter().any(|vm| vm.origin.entry() == Some(id) && vm.message.role == Role::User)
}

#[cfg(test)]
mod tests;
