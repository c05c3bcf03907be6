//! Recorded compactions as ground truth: where a committed transcript holds its harness's own
//! compactions (Pi `compaction` entries, Claude Code compact boundaries), our crate compacts the
//! same history at the same points and we compare what each keeps.
//!
//! At each recorded compaction, in order, the log holds the transcript's messages up to that
//! point (our own earlier compactions in place of the recorded ones), and our strategy is asked
//! to compact now, as the harness did. The first kept session step is compared: Pi records its
//! first kept entry; Claude Code's full compaction keeps no message of the old history in the
//! releases that recorded ours (1.0.53), so the variant of that behaviour replays them, and
//! Pi's fixture was recorded by the usage-based compaction of 0.13.0–0.14.2, which `pi/v0.14`
//! follows.
//!
//! Where the transcript says the compaction was automatic (Claude Code's `compact_boundary`
//! `trigger: auto`), the trigger is compared too: our `decide` is asked before every request
//! since the previous compaction (each assistant message answers one, and the compaction point
//! is one), and must first fire before the same request as the harness did.

use compactbench_core::{Cx, Decision, EntryId, Log, Moment, Role, Strategy, VirtualStore, Window};
use compactbench_eval::scenario::Scenario;
use compactbench_import::Format;
use compactbench_tokens::TokenCounter;

use crate::ours::FixedSummarizer;

/// One recorded compaction beside ours.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    /// The replay scenario.
    pub scenario: String,
    /// The harness release that recorded it, where the transcript says.
    pub release: Option<String>,
    /// Our strategy id.
    pub strategy: &'static str,
    /// Session step before which the harness compacted.
    pub step: usize,
    /// The first step it kept (`None`: none kept, or not recorded).
    pub recorded_first_kept: Option<usize>,
    /// The first step our crate kept, or why it did not compact.
    pub ours: Result<Option<usize>, String>,
    /// What triggered the recorded compaction (`auto`, `manual`), where the transcript says.
    pub recorded_trigger: Option<String>,
    /// The harness's own count of context tokens before it (Claude Code's `preTokens`).
    pub recorded_tokens_before: Option<u64>,
    /// The first request since the previous compaction, up to this one, before which our
    /// trigger fires: the session step of the message that would answer it (`None`: it does
    /// not fire).
    pub ours_fires_before: Option<usize>,
    /// What our strategy counted when it compacted here.
    pub ours_tokens_before: Option<u64>,
}

impl Pair {
    /// Whether both sides keep from the same step.
    pub fn agrees(&self) -> bool {
        self.ours.as_ref().is_ok_and(|o| *o == self.recorded_first_kept)
    }

    /// Whether the kept step agrees and, for an automatic compaction, the trigger.
    pub fn same(&self) -> bool {
        self.agrees() && self.trigger_agrees() != Some(false)
    }

    /// For an automatic compaction, whether our trigger first fires before the same request
    /// (`None`: not recorded as automatic, so not compared).
    pub fn trigger_agrees(&self) -> Option<bool> {
        (self.recorded_trigger.as_deref() == Some("auto")).then_some(self.ours_fires_before == Some(self.step))
    }
}

/// When Pi 0.15.0 was released (its release commit, badlogic/pi-mono@dcf81a6a), the first
/// release with pi-mono 4227fd59's cut rule: every earlier release back to 0.13.0 compacts as
/// `pi/v0.14` does.
const PI_0_15_RELEASED: &str = "2025-12-09T12:41:12";

/// The strategy that stands for the release that recorded a transcript's compactions
/// (`release` where the format names it, else `recorded_at`, when it was made): our crates
/// follow the newest release, and a variant keeps an older behaviour.
fn strategy_for(format: Format, release: Option<&str>, recorded_at: Option<&str>) -> Option<&'static str> {
    match format {
        // Pi's session files name no release, but each compaction entry carries its time (ISO
        // 8601, UTC). One made before 0.15.0 was released was made by 0.14.x or earlier (or by
        // a pi-mono build before 4227fd59, which compacts the same way): `pi/v0.14`. A later
        // one is replayed by today's rule; the releases in between have no variant.
        Format::Pi if recorded_at.and_then(utc_seconds).is_some_and(|t| t < PI_0_15_RELEASED) => Some("pi/v0.14"),
        Format::Pi => Some("pi"),
        // Up to 2.1.68 a full compaction keeps nothing of the old history verbatim, as the
        // `claude-code/v2.1.68` variant does; the newest release keeps the last tool round.
        // Up to 2.1.20 the threshold reserved up to 32,000 output tokens, not 20,000.
        Format::ClaudeCode if release.and_then(version).is_some_and(|v| v <= (2, 1, 20)) => Some("claude-code/v2.1.20"),
        Format::ClaudeCode if release.and_then(version).is_some_and(|v| v <= (2, 1, 68)) => Some("claude-code/v2.1.68"),
        Format::ClaudeCode => Some("claude-code"),
        _ => None,
    }
}

/// `YYYY-MM-DDTHH:MM:SS` of a UTC timestamp such as `2025-12-08T23:22:54.411Z` (fixed width,
/// so its order is the time order), or `None` for any other shape.
fn utc_seconds(timestamp: &str) -> Option<&str> {
    let seconds = timestamp.get(..19)?;
    let shape = seconds.bytes().enumerate().all(|(i, b)| match i {
        4 | 7 => b == b'-',
        10 => b == b'T',
        13 | 16 => b == b':',
        _ => b.is_ascii_digit(),
    });
    (shape && timestamp.ends_with('Z')).then_some(seconds)
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
        let Some(id) = strategy_for(replay.format, first.release.as_deref(), first.recorded_at.as_deref()) else { continue };
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
            let mut ours_fires_before = None;
            while next_step < rec.step {
                let Some(m) = messages.next() else { break };
                if ours_fires_before.is_none() && m.role == Role::Assistant && fires(strategy.as_ref(), &log, sc, counter) {
                    ours_fires_before = Some(next_step);
                }
                step_of.push((log.push_message(m.clone()), next_step));
                next_step += 1;
            }
            if ours_fires_before.is_none() && fires(strategy.as_ref(), &log, sc, counter) {
                ours_fires_before = Some(rec.step);
            }
            let compacted = compact_now(strategy.as_ref(), &mut log, sc, counter);
            let ours_tokens_before = compacted.as_ref().ok().map(|(_, tokens)| *tokens);
            let ours = compacted.map(|(window, _)| match window {
                Some(Window::From(id)) => step_of.iter().find(|(e, _)| *e >= id).map(|(_, s)| *s),
                Some(Window::Kept(ids)) => ids.iter().filter_map(|id| step_of.iter().find(|(e, _)| e == id)).map(|(_, s)| *s).min(),
                Some(Window::Inherit) | None => None,
            });
            out.push(Pair {
                scenario: sc.name.clone(),
                release: rec.release.clone(),
                strategy: id,
                step: rec.step,
                recorded_first_kept: rec.first_kept_step,
                ours,
                recorded_trigger: rec.trigger.clone(),
                recorded_tokens_before: rec.tokens_before,
                ours_fires_before,
                ours_tokens_before,
            });
        }
    }
    out
}

/// Whether our strategy's trigger fires before a request on `log` as it stands.
fn fires(strategy: &dyn Strategy, log: &Log, sc: &Scenario, counter: &TokenCounter) -> bool {
    let view = strategy.project(log);
    let mut store = VirtualStore::new();
    let cx = Cx::new(&sc.model, &FixedSummarizer, &mut store, counter);
    matches!(strategy.decide(log, &view, Moment::BeforeRequest, &cx), Decision::Compact { .. })
}

/// Runs our strategy's compaction on `log` now (as the harness did at this point), appends its
/// checkpoints, and returns the window the first window-setting one keeps and the context size
/// the first one counted.
fn compact_now(strategy: &dyn Strategy, log: &mut Log, sc: &Scenario, counter: &TokenCounter) -> Result<(Option<Window>, u64), String> {
    let view = strategy.project(log);
    let mut store = VirtualStore::new();
    let mut cx = Cx::new(&sc.model, &FixedSummarizer, &mut store, counter);
    let checkpoints = strategy.compact(log, &view, Moment::TurnEnd, &mut cx).map_err(|e| e.to_string())?;
    let Some(first) = checkpoints.first() else { return Err("did not compact".into()) };
    let tokens_before = first.tokens_before;
    let window = checkpoints.iter().map(|cp| cp.window.clone()).find(|w| *w != Window::Inherit);
    for cp in checkpoints {
        log.push_checkpoint(cp);
    }
    Ok((window, tokens_before))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Claude Code transcript is replayed by the variant of the release that recorded it.
    #[test]
    fn the_recording_release_picks_the_strategy() {
        assert_eq!(strategy_for(Format::ClaudeCode, Some("1.0.53"), None), Some("claude-code/v2.1.20"));
        assert_eq!(strategy_for(Format::ClaudeCode, Some("2.1.20"), None), Some("claude-code/v2.1.20"));
        assert_eq!(strategy_for(Format::ClaudeCode, Some("2.1.21"), None), Some("claude-code/v2.1.68"));
        assert_eq!(strategy_for(Format::ClaudeCode, Some("2.1.68"), None), Some("claude-code/v2.1.68"));
        assert_eq!(strategy_for(Format::ClaudeCode, Some("2.1.332"), None), Some("claude-code"));
        assert_eq!(strategy_for(Format::ClaudeCode, Some("dev"), None), Some("claude-code"));
        assert_eq!(strategy_for(Format::ClaudeCode, None, None), Some("claude-code"));
        assert_eq!(strategy_for(Format::Codex, Some("0.50.0"), None), None);
    }

    /// A Pi compaction is dated: before 0.15.0 was released, `pi/v0.14`; after, or undated,
    /// today's rule.
    #[test]
    fn the_recording_date_picks_the_pi_strategy() {
        let pi = |at| strategy_for(Format::Pi, None, at);
        assert_eq!(pi(Some("2025-12-08T23:22:54.411Z")), Some("pi/v0.14"));
        assert_eq!(pi(Some("2025-12-09T12:41:11.999Z")), Some("pi/v0.14"));
        assert_eq!(pi(Some("2025-12-09T12:41:12.000Z")), Some("pi"));
        assert_eq!(pi(Some("2026-03-01T08:00:00.000Z")), Some("pi"));
        assert_eq!(pi(Some("2025-12-08T23:22:54+01:00")), Some("pi"), "not UTC");
        assert_eq!(pi(Some("t")), Some("pi"));
        assert_eq!(pi(None), Some("pi"));
    }

    /// Pi's fixture, recorded on 2025-12-08 by Pi 0.14.x, replayed by `pi/v0.14`: both of its
    /// compactions keep from the step Pi kept from.
    #[test]
    fn the_pi_fixture_agrees_with_the_release_that_recorded_it() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let scenario = Scenario::load(&root.join("scenarios/real/pi__pi-mono__before-compaction.toml")).expect("scenario");
        let pairs = replay(&[scenario], &TokenCounter::default());
        let kept: Vec<_> = pairs.iter().map(|p| (p.strategy, p.step, p.recorded_first_kept, p.ours.clone())).collect();
        assert_eq!(kept, [("pi/v0.14", 351, Some(285), Ok(Some(285))), ("pi/v0.14", 611, Some(533), Ok(Some(533)))]);
        assert!(pairs.iter().all(|p| p.trigger_agrees().is_none()), "Pi records no trigger");
    }

    /// Every automatic compaction in the committed Claude Code transcripts: our trigger, asked
    /// before each request, first fires before the one the release fired before. The 2.0.76
    /// and 2.1.19 ones fire near 155k, which only the 32,000-token reservation of
    /// `claude-code/v2.1.20` reaches; 2.1.19's count is ours to the token.
    #[test]
    fn claude_code_auto_compactions_fire_before_the_recorded_request() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let real = compactbench_eval::scenario::load_dir(&root.join("scenarios/real")).expect("scenarios");
        let pairs = replay(&real, &TokenCounter::new(compactbench_tokens::Encoding::O200kBase));
        let auto: Vec<&Pair> = pairs.iter().filter(|p| p.trigger_agrees().is_some()).collect();
        assert!(auto.len() >= 4, "{} automatic compactions", auto.len());
        for p in &auto {
            assert_eq!(p.ours_fires_before, Some(p.step), "{} before step {}", p.scenario, p.step);
        }
        let old = auto.iter().find(|p| p.release.as_deref() == Some("2.1.19")).expect("the 2.1.19 transcript");
        assert_eq!((old.strategy, old.recorded_tokens_before, old.ours_tokens_before), ("claude-code/v2.1.20", Some(155_577), Some(155_577)));
    }
}
