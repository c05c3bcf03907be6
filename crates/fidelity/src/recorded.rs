//! Recorded compactions as ground truth: where a committed transcript holds its harness's own
//! compactions (Pi `compaction` entries, Claude Code compact boundaries), our crate compacts the
//! same history at the same points and we compare what each keeps.
//!
//! At each recorded compaction, in order, the log holds the transcript's messages up to that
//! point (our own earlier compactions in place of the recorded ones), and our strategy is asked
//! to compact now, as the harness did. The first kept session step is compared: Pi records its
//! `firstKeptEntryId`; Claude Code's full compaction keeps no message of the old history.

use compactbench_core::{Cx, EntryId, Log, Moment, Role, Strategy, VirtualStore, Window};
use compactbench_eval::scenario::Scenario;
use compactbench_import::Format;
use compactbench_tokens::TokenCounter;

use crate::ours::FixedSummarizer;

/// One recorded compaction beside ours.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    /// The replay scenario.
    pub scenario: String,
    /// Our strategy id.
    pub strategy: &'static str,
    /// Session step before which the harness compacted.
    pub step: usize,
    /// The first step it kept (`None`: none kept, or not recorded).
    pub recorded_first_kept: Option<usize>,
    /// The first step our crate kept, or why it did not compact.
    pub ours: Result<Option<usize>, String>,
}

impl Pair {
    /// Whether both sides keep from the same step.
    pub fn agrees(&self) -> bool {
        self.ours.as_ref().is_ok_and(|o| *o == self.recorded_first_kept)
    }
}

fn strategy_for(format: Format) -> Option<&'static str> {
    match format {
        Format::Pi => Some("pi"),
        Format::ClaudeCode => Some("claude-code"),
        _ => None,
    }
}

/// Replays every recorded compaction of the replay scenarios in `scenarios`.
pub fn replay(scenarios: &[Scenario], counter: &TokenCounter) -> Vec<Pair> {
    let mut out = Vec::new();
    for sc in scenarios {
        let Some(replay) = sc.replay.as_ref().and_then(|r| r.imported.as_ref()) else { continue };
        let Some(id) = strategy_for(replay.format) else { continue };
        if replay.recorded.is_empty() {
            continue;
        }
        let strategy = compactbench_registry::find(id).expect("registered");
        let mut messages = replay.messages.iter();
        let mut log = Log::new();
        // Session steps count messages after a leading system prompt.
        let leading_system = replay.messages.first().is_some_and(|m| m.role == Role::System);
        if leading_system {
            log.push_message(messages.next().expect("checked").clone());
        }
        let mut step_of: Vec<(EntryId, usize)> = Vec::new();
        let mut next_step = 0;
        for rec in &replay.recorded {
            while next_step < rec.step {
                let Some(m) = messages.next() else { break };
                step_of.push((log.push_message(m.clone()), next_step));
                next_step += 1;
            }
            let ours = compact_now(strategy.as_ref(), &mut log, sc, counter).map(|window| match window {
                Some(Window::From(id)) => step_of.iter().find(|(e, _)| *e >= id).map(|(_, s)| *s),
                Some(Window::Kept(ids)) => ids.iter().filter_map(|id| step_of.iter().find(|(e, _)| e == id)).map(|(_, s)| *s).min(),
                Some(Window::Inherit) | None => None,
            });
            out.push(Pair { scenario: sc.name.clone(), strategy: id, step: rec.step, recorded_first_kept: rec.first_kept_step, ours });
        }
    }
    out
}

/// Runs our strategy's compaction on `log` now (as the harness did at this point), appends its
/// checkpoints, and returns the window the first window-setting one keeps.
fn compact_now(strategy: &dyn Strategy, log: &mut Log, sc: &Scenario, counter: &TokenCounter) -> Result<Option<Window>, String> {
    let view = strategy.project(log);
    let mut store = VirtualStore::new();
    let mut cx = Cx::new(&sc.model, &FixedSummarizer, &mut store, counter);
    let checkpoints = strategy.compact(log, &view, Moment::TurnEnd, &mut cx).map_err(|e| e.to_string())?;
    if checkpoints.is_empty() {
        return Err("did not compact".into());
    }
    let window = checkpoints.iter().map(|cp| cp.window.clone()).find(|w| *w != Window::Inherit);
    for cp in checkpoints {
        log.push_checkpoint(cp);
    }
    Ok(window)
}
