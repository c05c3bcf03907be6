//! What decides the rows of an eval's reports once its cells have run: which strategies get
//! bound rows, and the one order every report lists runs in. `eval` and `merge` both end here,
//! so a merged run's reports are a single run's byte for byte.

use std::collections::HashSet;

use compactbench_eval::results::RunResult;
use compactbench_eval::variant;

/// The bound summarizers, run beside the primary for every strategy that called it.
pub(crate) const BOUNDS: [&str; 3] = ["null", "oracle", "prompted"];

/// The report ids of `runs` under the `primary` summarizer that called it: bounds only mean
/// something for a strategy whose own id (not a variant's) is among them.
pub(crate) fn summarizing(runs: &[RunResult], primary: &str) -> HashSet<String> {
    runs.iter()
        .filter(|r| r.summarizer == primary && r.compactions.iter().any(|c| c.summarizer_calls > 0))
        .map(|r| r.strategy.clone())
        .collect()
}

/// Keeps the bound runs only of strategies that called the summarizer. A shard cannot tell
/// which those are (their primary runs are spread over every shard), so shards run the
/// bounds of every strategy and this drops the ones a single run would not have run; a
/// cell's result does not depend on which others run, so what is left is the single run's.
pub(crate) fn drop_idle_bounds(runs: &mut Vec<RunResult>, primary: &str) {
    let keep = summarizing(runs, primary);
    runs.retain(|r| !BOUNDS.contains(&r.summarizer.as_str()) || keep.contains(&r.strategy));
}

/// Sorts runs into the order of every report: scenario and strategy as selected, the
/// strategy's variants, summarizer (primary first), seed.
pub(crate) fn sort(runs: &mut [RunResult], scenarios: &[&str], strategies: &[&str], primary: &str) {
    runs.sort_by_key(|r| {
        (
            scenarios.iter().position(|s| *s == r.scenario),
            strategies.iter().position(|s| variant::base(&r.strategy) == *s),
            variant::rank(&r.strategy),
            [primary, "prompted", "null", "oracle"].iter().position(|n| *n == r.summarizer),
            r.seed,
        )
    });
}
