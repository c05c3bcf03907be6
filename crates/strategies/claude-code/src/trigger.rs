//! Thresholds (`autoCompact.ts` as reverse engineered), the circuit breaker and the thrash
//! guard.

use compactbench_core::{CheckpointKind, Entry, Log, Role};

use crate::ClaudeCodeConfig;

/// `MAX_OUTPUT_TOKENS_FOR_SUMMARY`: the most output reserved below the window since 2.1.21, and
/// the summary call's output cap.
pub(crate) const MAX_OUTPUT_TOKENS_FOR_SUMMARY: u64 = 20_000;
/// The default of `CLAUDE_CODE_MAX_OUTPUT_TOKENS`: the most output reserved below the window up
/// to 2.1.20, which reserved the model's whole output limit under that setting (npm 2.1.20
/// `cli.js`: `contextWindow − min(CLAUDE_CODE_MAX_OUTPUT_TOKENS ?? 32000, modelMaxOutput)`).
pub(crate) const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 32_000;
/// `AUTOCOMPACT_BUFFER_TOKENS`.
const AUTOCOMPACT_BUFFER_TOKENS: u64 = 13_000;
/// `WARNING_THRESHOLD_BUFFER_TOKENS`.
const WARNING_THRESHOLD_BUFFER_TOKENS: u64 = 20_000;
/// `MANUAL_COMPACT_BUFFER_TOKENS`.
const MANUAL_COMPACT_BUFFER_TOKENS: u64 = 3_000;
/// `MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES`.
pub(crate) const MAX_CONSECUTIVE_FAILURES: u32 = 3;
/// `AUTO_COMPACT_THRASHING_THRESHOLD`: rapid refills in a row that stop auto-compaction.
const THRASHING_THRESHOLD: u32 = 3;
/// `AUTO_COMPACT_RAPID_REFILL_TURN_WINDOW`: a refill within this many model replies of the
/// previous compaction is rapid.
const RAPID_REFILL_TURN_WINDOW: usize = 3;

/// The limits Claude Code derives from the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Thresholds {
    /// `W − min(max_output, reservation cap)`.
    pub(crate) effective: u64,
    /// Auto-compaction fires at or above this.
    pub(crate) auto: u64,
    /// The UI warns from here.
    pub(crate) warning: u64,
    /// With auto-compaction off, requests are blocked from here.
    pub(crate) blocking: u64,
}

impl Thresholds {
    pub(crate) fn new(window: u64, max_output: u64, config: &ClaudeCodeConfig) -> Thresholds {
        let window = config.auto_compact_window.map_or(window, |w| w.min(window));
        let effective = window.saturating_sub(max_output.min(config.output_reservation_cap));
        let base = effective.saturating_sub(AUTOCOMPACT_BUFFER_TOKENS);
        let auto = match config.autocompact_pct_override {
            Some(pct) if (1..=100).contains(&pct) => (effective * pct / 100).min(base),
            _ => base,
        };
        Thresholds {
            effective,
            auto,
            warning: auto.saturating_sub(WARNING_THRESHOLD_BUFFER_TOKENS),
            blocking: effective.saturating_sub(MANUAL_COMPACT_BUFFER_TOKENS),
        }
    }
}

/// Consecutive rapid refills if auto-compaction fired now: the trailing run of summary
/// checkpoints each followed by the next trigger within [`RAPID_REFILL_TURN_WINDOW`] model
/// replies (the last one's interval ends now). Claude Code keeps this count in memory
/// (`consecutiveRapidRefills`); every piece of it is in the log.
pub(crate) fn rapid_refills(log: &Log) -> u32 {
    let summaries: Vec<usize> = log
        .checkpoints()
        .filter(|(_, cp)| cp.kind == CheckpointKind::Summary)
        .map(|(id, _)| id.index())
        .collect();
    let replies_between = |from: usize, to: usize| {
        log.entries()
            .skip(from + 1)
            .take(to.saturating_sub(from + 1))
            .filter(|(_, e)| matches!(e, Entry::Message(m) if m.role == Role::Assistant && m.usage.is_some()))
            .count()
    };
    let mut count = 0;
    let mut end = log.len();
    for &at in summaries.iter().rev() {
        if replies_between(at, end) >= RAPID_REFILL_TURN_WINDOW {
            break;
        }
        count += 1;
        end = at;
    }
    count
}

/// Whether the thrash guard refuses an automatic compaction now.
pub(crate) fn thrashing(log: &Log) -> bool {
    rapid_refills(log) >= THRASHING_THRESHOLD
}

/// Whether automatic compaction may run: enabled, the circuit breaker closed, no thrashing.
pub(crate) fn auto_allowed(config: &ClaudeCodeConfig, log: &Log, failures: u32) -> bool {
    config.auto_compact && failures < MAX_CONSECUTIVE_FAILURES && !thrashing(log)
}
