//! The seed article's four failure modes, per strategy, across every scenario of the run.
//!
//! Each is measured, never inferred from a strategy's description:
//! - **truncation loop**: summaries that stopped at their output cap, and how many of those
//!   the strategy used anyway (a compaction that appended checkpoints despite a cut-off call);
//! - **reasoning eviction**: `rejected_hypothesis` facts (planted only in thinking) lost;
//! - **negative search loss**: `negative_result` facts (searches that found nothing) lost;
//! - **diagnostic washout**: `error_message` facts (exact compiler errors) lost: a summary
//!   that paraphrases the error misses the needle as surely as one that drops it.
//!
//! "Lost" is the state at the last request that needed the fact (neither in the request nor
//! recoverable from a file it names).

use std::fmt::Write;

use compactbench_eval::facts::FactKind;
use compactbench_eval::results::{RunResult, Status};

/// `lost/planted` of `kind` over `runs`, or `–` when no scenario planted it.
fn lost(runs: &[&RunResult], kind: FactKind) -> String {
    let states = runs.iter().flat_map(|r| r.facts.iter().filter(|f| f.kind == kind).map(|f| f.last));
    let (mut lost, mut all) = (0, 0);
    for s in states {
        all += 1;
        lost += usize::from(s == Status::Lost);
    }
    if all == 0 { "–".to_owned() } else { format!("{lost}/{all}") }
}

/// `cut-off (used)` over `runs`, or `0` when no summary was cut off.
fn cut_off(runs: &[&RunResult]) -> String {
    let (mut all, mut used) = (0, 0);
    for c in runs.iter().flat_map(|r| &r.compactions) {
        all += c.summaries_cut_off;
        if c.summaries_cut_off > 0 && crate::triggers::succeeded(c) {
            used += 1;
        }
    }
    if all == 0 { "0".to_owned() } else { format!("{all} ({used} used)") }
}

/// Appends the failure-mode table for `strategies` (in report order) over `runs`.
pub(crate) fn failure_modes(out: &mut String, runs: &[&RunResult], strategies: &[&str]) {
    let _ = writeln!(out, "\n## Seed failure modes\n");
    let _ = writeln!(
        out,
        "Over every scenario and seed. Truncation loop: summaries cut off at their output cap (compactions that used one anyway). \
         The others: facts lost at the last request that needed them, of those planted — reasoning eviction `rejected_hypothesis` \
         (only in thinking), negative search loss `negative_result`, diagnostic washout `error_message`.\n"
    );
    let _ = writeln!(out, "| strategy | truncation loop | reasoning eviction | negative search loss | diagnostic washout |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for st in strategies {
        let mine: Vec<&RunResult> = runs.iter().copied().filter(|r| r.strategy == *st).collect();
        let _ = writeln!(
            out,
            "| {st} | {} | {} | {} | {} |",
            cut_off(&mine),
            lost(&mine, FactKind::RejectedHypothesis),
            lost(&mine, FactKind::NegativeResult),
            lost(&mine, FactKind::ErrorMessage)
        );
    }
}
