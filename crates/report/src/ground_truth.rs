//! Recorded compactions as ground truth: where a replayed transcript holds its harness's own
//! compactions, our crate for that harness is shown beside them on the same history.

use std::fmt::Write;

use compactbench_eval::results::RunResult;
use compactbench_eval::scenario::Scenario;
use compactbench_import::Format;
use compactbench_tokens::TokenCounter;

/// The strategy that reproduces the harness a transcript format comes from.
fn harness_strategy(format: Format) -> Option<&'static str> {
    match format {
        Format::Pi => Some("pi"),
        Format::ClaudeCode => Some("claude-code"),
        Format::Codex => Some("codex"),
        Format::OpenHands => Some("openhands"),
        Format::SweAgent => None,
    }
}

fn opt<T: ToString>(x: Option<T>) -> String {
    x.map_or("–".to_owned(), |v| v.to_string())
}

/// Appends, for a replay scenario with recorded compactions, a table pairing each recorded
/// compaction with ours (in order): session step, tokens before (each by its own count),
/// first kept step, and summary size in exact tokens.
pub(crate) fn ground_truth(out: &mut String, scenario: &Scenario, runs: &[&RunResult]) {
    let Some(replay) = scenario.replay.as_ref().and_then(|r| r.imported.as_ref()) else { return };
    if replay.recorded.is_empty() {
        return;
    }
    let Some(id) = harness_strategy(replay.format) else { return };
    let Some(ours) = runs.iter().find(|r| r.strategy == id) else { return };
    let ours: Vec<_> = ours.compactions.iter().filter(|c| c.error.is_none()).collect();
    let counter = TokenCounter::default();
    let _ = writeln!(out, "\nRecorded compactions ({}) against ours (`{id}`) on the same history; tokens before are each side's own count, summaries in exact tokens:\n", replay.format.name());
    let _ = writeln!(out, "| # | recorded step | our step | recorded tokens before | our tokens before | recorded first kept | our first kept | recorded summary | our summary |");
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for i in 0..replay.recorded.len().max(ours.len()) {
        let r = replay.recorded.get(i);
        let o = ours.get(i);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            i + 1,
            opt(r.map(|r| r.step)),
            opt(o.map(|o| o.step)),
            opt(r.and_then(|r| r.tokens_before)),
            opt(o.map(|o| o.estimated_before)),
            opt(r.and_then(|r| r.first_kept_step)),
            opt(o.and_then(|o| o.first_kept_step)),
            opt(r.and_then(|r| r.summary.as_deref()).map(|s| counter.count_text(s))),
            opt(o.map(|o| o.summarizer_output)),
        );
    }
}
