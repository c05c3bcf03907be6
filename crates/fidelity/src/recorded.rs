//! Recorded compactions as ground truth: where a committed transcript holds its harness's own
//! compactions (Pi `compaction` entries, Claude Code compact boundaries), our crate compacts the
//! same history at the same points and we compare what each keeps.
//!
//! At each recorded compaction, in order, the log holds the transcript's messages up to that
//! point (our own earlier compactions in place of the recorded ones), and our strategy is asked
//! to compact now, as the harness did. The first kept session step is compared: Pi records its
//! `firstKeptEntryId`; Claude Code's full compaction keeps no message of the old history in the
//! releases that recorded ours (1.0.53), so the variant of that behaviour replays them.

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

/// The strategy that stands for the release that recorded a transcript's compactions: our
/// crates follow the newest release, and a variant keeps an older behaviour a spec describes.
fn strategy_for(format: Format, release: Option<&str>) -> Option<&'static str> {
    match format {
        // Pi's session files name no release: today's rule stands for all (the report says so).
        Format::Pi => Some("pi"),
        // Up to 2.1.68 a full compaction keeps nothing of the old history verbatim, as the
        // `claude-code/v2.1.68` variant does; the newest release keeps the last tool round.
        Format::ClaudeCode if release.and_then(version).is_some_and(|v| v <= (2, 1, 68)) => Some("claude-code/v2.1.68"),
        Format::ClaudeCode => Some("claude-code"),
        _ => None,
    }
}

/// `major.minor.patch` of a release string such as `1.0.53`.
fn version(release: &str) -> Option<(u64, u64, u64)> {
    let mut parts = release.split('.').map(|p| p.parse::<u64>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

/// Replays every recorded compaction of the replay scenarios in `scenarios`.
pub fn replay(scenarios: &[Scenario], counter: &TokenCounter) -> Vec<Pair> {
    let mut out = Vec::new();
    for sc in scenarios {
        let Some(replay) = sc.replay.as_ref().and_then(|r| r.imported.as_ref()) else { continue };
        // A transcript is replayed by one strategy: the release of its first compaction's.
        let Some(first) = replay.recorded.first() else { continue };
        let Some(id) = strategy_for(replay.format, first.release.as_deref()) else { continue };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A Claude Code transcript is replayed by the variant of the release that recorded it.
    #[test]
    fn the_recording_release_picks_the_strategy() {
        assert_eq!(strategy_for(Format::ClaudeCode, Some("1.0.53")), Some("claude-code/v2.1.68"));
        assert_eq!(strategy_for(Format::ClaudeCode, Some("2.1.68")), Some("claude-code/v2.1.68"));
        assert_eq!(strategy_for(Format::ClaudeCode, Some("2.1.332")), Some("claude-code"));
        assert_eq!(strategy_for(Format::ClaudeCode, Some("dev")), Some("claude-code"));
        assert_eq!(strategy_for(Format::ClaudeCode, None), Some("claude-code"));
        assert_eq!(strategy_for(Format::Pi, None), Some("pi"));
        assert_eq!(strategy_for(Format::Codex, Some("0.50.0")), None);
    }
}
