//! When compactions fire and what they achieve, per strategy over every scenario and seed:
//! the context usage at each compaction (the runner's exact count as % of the window), the
//! share that interrupted the agent's loop, and compactions that did not shrink the context.
//!
//! A strategy triggers on its own estimate (bytes / 4, reported usage, message counts), so the
//! spread of exact usage shows how early, how late and how unpredictably it fires.

use std::fmt::Write;

use compactbench_eval::results::{CompactionRecord, RunResult};

/// Usage at compaction, % of the window, over a strategy's successful compactions.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Spread {
    pub(crate) compactions: usize,
    pub(crate) min: f64,
    pub(crate) p10: f64,
    pub(crate) median: f64,
    pub(crate) p90: f64,
    pub(crate) max: f64,
    /// Of `compactions`, those whose newest message was a tool result.
    pub(crate) mid_loop: usize,
    /// Of `compactions`, those after which the context was no smaller.
    pub(crate) no_reduction: usize,
    /// Of `no_reduction`, those followed by another attempt at the same or the next request.
    pub(crate) loops: usize,
}

/// A compaction attempt that appended checkpoints (no error, not empty).
pub(crate) fn succeeded(c: &CompactionRecord) -> bool {
    c.error.is_none() && !c.kinds.is_empty()
}

/// The value at percentile `p` of sorted `xs` (nearest rank).
fn percentile(xs: &[f64], p: f64) -> f64 {
    let rank = (p / 100.0 * xs.len() as f64).ceil() as usize;
    xs[rank.clamp(1, xs.len()) - 1]
}

/// One decimal, so tables and chart data stay short and stable.
fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The spread of `runs` (one strategy's), or `None` when it never compacted.
pub(crate) fn spread(runs: &[&RunResult]) -> Option<Spread> {
    let mut usage = Vec::new();
    let (mut mid_loop, mut no_reduction, mut loops) = (0, 0, 0);
    for r in runs {
        for (i, c) in r.compactions.iter().enumerate().filter(|(_, c)| succeeded(c)) {
            usage.push(round1(100.0 * c.tokens_before as f64 / r.window.max(1) as f64));
            mid_loop += usize::from(c.mid_loop);
            if c.tokens_after >= c.tokens_before {
                no_reduction += 1;
                loops += usize::from(r.compactions.get(i + 1).is_some_and(|next| next.request <= c.request + 1));
            }
        }
    }
    if usage.is_empty() {
        return None;
    }
    usage.sort_by(f64::total_cmp);
    Some(Spread {
        compactions: usage.len(),
        min: usage[0],
        p10: percentile(&usage, 10.0),
        median: percentile(&usage, 50.0),
        p90: percentile(&usage, 90.0),
        max: usage[usage.len() - 1],
        mid_loop,
        no_reduction,
        loops,
    })
}

/// Appends the trigger table for `strategies` (in report order) over `runs`.
pub(crate) fn triggers(out: &mut String, runs: &[&RunResult], strategies: &[&str]) {
    let _ = writeln!(out, "\n## When compactions fire\n");
    let _ = writeln!(
        out,
        "Over every scenario and seed, successful compactions only. Usage: the context just before the compaction by the runner's exact count, \
         % of the scenario's window (min / p10 / median / p90 / max). Mid-loop: the newest message was a tool result, so the compaction \
         interrupted the agent's loop (TraceLab's traces of real Claude Code and Codex sessions: 86.5%). No reduction: the context was not \
         smaller after it; loops: such a compaction followed by another attempt at the same or the next request (refused summary \
         requests and failed attempts: the next section).\n"
    );
    let _ = writeln!(out, "| strategy | compactions | usage min | p10 | median | p90 | max | mid-loop | no reduction | loops |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for st in strategies {
        let mine: Vec<&RunResult> = runs.iter().copied().filter(|r| r.strategy == *st).collect();
        match spread(&mine) {
            None => {
                let _ = writeln!(out, "| {st} | 0 | – | – | – | – | – | – | – | – |");
            }
            Some(s) => {
                let pct = |x: f64| format!("{x:.1}%");
                let _ = writeln!(
                    out,
                    "| {st} | {} | {} | {} | {} | {} | {} | {:.0}% | {} | {} |",
                    s.compactions,
                    pct(s.min),
                    pct(s.p10),
                    pct(s.median),
                    pct(s.p90),
                    pct(s.max),
                    100.0 * s.mid_loop as f64 / s.compactions as f64,
                    s.no_reduction,
                    s.loops
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Usage by exact tokens over the window, nearest-rank percentiles, failed attempts left
    /// out, and a compaction that did not shrink the context counted as a loop only when
    /// another attempt follows at once.
    #[test]
    fn spread_counts_usage_mid_loop_and_loops() {
        let mut run = crate::tests::runs().swap_remove(1);
        let base = run.compactions[0].clone();
        let at = |request: u32, before: u64, after: u64, mid_loop: bool| CompactionRecord { request, tokens_before: before, tokens_after: after, mid_loop, ..base.clone() };
        run.window = 1000;
        run.compactions = vec![
            at(3, 500, 200, true),
            at(7, 900, 900, true),
            // Right after a compaction that did nothing: a loop.
            CompactionRecord { error: Some("no reduction".into()), kinds: vec![], ..at(8, 900, 900, false) },
            at(20, 1000, 1200, false),
            at(30, 700, 100, false),
        ];
        let s = spread(&[&run]).expect("it compacted");
        assert_eq!((s.compactions, s.min, s.p10, s.median, s.p90, s.max), (4, 50.0, 50.0, 70.0, 100.0, 100.0));
        assert_eq!((s.mid_loop, s.no_reduction, s.loops), (2, 2, 1));
        run.compactions.clear();
        assert_eq!(spread(&[&run]), None);
    }
}
