//! The thread-isolation comparison: in-place compaction against subagent delegation and Amp's
//! thread handoff, on the same sessions.

use std::fmt::Write;

use compactbench_eval::variant::DELEGATE;

use crate::Row;

/// Whether a row takes part: delegation rows and their in-place twins, and Amp's rows.
fn isolating(row: &Row, rows: &[&Row]) -> bool {
    let id = row.strategy.as_str();
    id.ends_with(DELEGATE)
        || id == "amp"
        || id.starts_with("amp/")
        || rows.iter().any(|r| r.strategy.strip_suffix(DELEGATE) == Some(id))
}

/// Thread boundaries a row crossed: Amp's handoff events, summed over seeds.
fn boundaries(row: &Row) -> u64 {
    row.events
        .split("; ")
        .filter_map(|e| e.strip_prefix("handoff "))
        .filter_map(|n| n.parse::<u64>().ok())
        .sum()
}

/// Appends the comparison for one scenario's primary-summarizer rows, if it has any.
pub(crate) fn isolation_table(out: &mut String, here: &[&Row]) {
    let rows: Vec<&&Row> = here.iter().filter(|r| isolating(r, here)).collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nThread isolation vs in-place compaction (per session; cost includes subagents and prompt caching):\n");
    let _ = writeln!(out, "| strategy | parent input tokens | subagent input tokens | cached | cost $ | retained % | compactions | handoffs |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.0} | {:.0}% | {:.2} | {:.0} | {:.1} | {} |",
            r.strategy,
            r.total_input_tokens,
            r.child_input_tokens,
            100.0 * r.cached_share,
            r.cost_usd,
            r.verbatim_pct + r.recoverable_pct,
            r.compactions,
            boundaries(r),
        );
    }
}
