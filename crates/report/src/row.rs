//! Flat report rows, converted by hand from run results.

use compactbench_core::Shape;
use compactbench_core::Pricing;
use compactbench_eval::results::{CompactionRecord, RunResult, Status};
use compactbench_eval::scenario::Scenario;
use serde::Serialize;

/// What the report says about a strategy besides its numbers.
#[derive(Clone, Debug)]
pub struct StrategyMeta {
    /// Report id.
    pub id: String,
    /// Source it follows.
    pub source: String,
    /// `source`, `modelled` or `baseline`.
    pub fidelity: &'static str,
    /// One line.
    pub summary: String,
    /// Measured agreement with the original's own code (`compactbench-fidelity`), e.g.
    /// `trigger 100.0% · selection 100.0% (346 cases)`; `None` where not measured.
    pub agreement: Option<String>,
    /// Which differential check its crate has (`compactbench_fidelity::checks`), e.g.
    /// `black box: @openai/codex 0.171.0` or `none (closed source; ...)`; `None` for a baseline.
    pub check: Option<String>,
    /// The strategy's own explanation of each provider rule its requests break by design
    /// (`Strategy::explain_violation`), by rule name.
    pub violation_notes: Vec<(&'static str, String)>,
}

/// One strategy on one scenario, averaged over seeds. Column meanings: reports/README.md.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub scenario: String,
    pub strategy: String,
    /// The summarizer the strategy was given (`extractive`, the prompt-following `prompted`, or a
    /// bound: `null`, `oracle`).
    pub summarizer: String,
    pub seeds: u32,
    pub requests: f64,
    pub compactions: f64,
    /// Appended checkpoints by kind, summed over seeds, e.g. `summary 4; prune 1`.
    pub events: String,
    pub failed_compactions: f64,
    pub peak_tokens: u64,
    pub mean_tokens: f64,
    pub total_input_tokens: f64,
    pub cached_share: f64,
    pub over_window_requests: f64,
    pub cost_usd: f64,
    pub violations_openai_chat: u64,
    pub violations_openai_responses: u64,
    pub violations_anthropic: u64,
    pub violations_gemini: u64,
    pub facts: u32,
    pub verbatim_pct: f64,
    pub recoverable_pct: f64,
    pub lost_pct: f64,
    /// Share of facts whose last request showed a value they replaced as if it were current
    /// (`superseded_value` facts only).
    pub stale_pct: f64,
    pub summarizer_input_tokens: f64,
    pub summarizer_output_tokens: f64,
    pub injected_tokens: f64,
    /// Subagent requests' input tokens per session (delegation rows), mean.
    pub child_input_tokens: f64,
    /// Exact tokens the compactions' summary calls sent per session, measured as requests
    /// ([`CompactionRecord::summary_request_tokens`]), mean.
    pub compaction_input_tokens: f64,
    /// Share of those served from the prompt cache.
    pub compaction_cached_share: f64,
    /// Dollar cost of the summary calls per session (uncached input, cached input, output), mean.
    pub compaction_cost_usd: f64,
    /// `compaction_cost_usd` as a share of `cost_usd` (pooled over seeds).
    pub compaction_cost_share: f64,
}

/// The strategies of `summarizer`'s rows, in report order (first appearance).
pub(crate) fn strategies<'a>(rows: &'a [Row], summarizer: &str) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| r.summarizer == summarizer) {
        if !out.contains(&r.strategy.as_str()) {
            out.push(&r.strategy);
        }
    }
    out
}

/// Retained % (verbatim + recoverable), pooled over the facts of `rows`; `None` without facts.
pub(crate) fn retained<'r>(rows: impl Iterator<Item = &'r Row>) -> Option<f64> {
    let (mut kept, mut facts) = (0.0, 0u32);
    for r in rows {
        kept += (r.verbatim_pct + r.recoverable_pct) / 100.0 * f64::from(r.facts);
        facts += r.facts;
    }
    (facts > 0).then(|| 100.0 * kept / f64::from(facts))
}

fn mean(xs: impl Iterator<Item = f64>, n: usize) -> f64 {
    round3(xs.sum::<f64>() / n.max(1) as f64)
}

/// Three decimals, so JSON and CSV stay short and stable.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Dollars for `tokens` at `price` per million.
fn per(tokens: u64, price: f64) -> f64 {
    tokens as f64 * price / 1e6
}

/// Dollar cost of one compaction's summary calls, measured as requests: the input the prompt
/// cache did not hold at the input price, the input it held at the cached price, the answers at
/// the output price.
pub(crate) fn compaction_cost(c: &CompactionRecord, p: Pricing) -> f64 {
    let cached = c.summary_cached_tokens.min(c.summary_request_tokens);
    per(c.summary_request_tokens - cached, p.input) + per(cached, p.cached_input) + per(c.summary_output_tokens, p.output)
}

/// Dollar cost of a run under `scenario`'s pricing: uncached input, cached input, output of
/// the session's own replies, the compactions' summary calls measured as requests
/// ([`compaction_cost`]), and any subagents' input (cached and not) and output.
pub(crate) fn cost(run: &RunResult, scenario: &Scenario) -> f64 {
    let p = scenario.model.pricing;
    let input: f64 = run.requests.iter().map(|r| per(r.tokens - r.cached_tokens, p.input) + per(r.cached_tokens, p.cached_input)).sum();
    let c = run.child;
    let child = per(c.input_tokens - c.cached_tokens, p.input) + per(c.cached_tokens, p.cached_input) + per(c.output_tokens, p.output);
    input + run_compaction_cost(run, p) + child + per(run.output_tokens, p.output)
}

/// Dollar cost of a run's summary calls.
fn run_compaction_cost(run: &RunResult, p: Pricing) -> f64 {
    // Folded from +0.0: an empty `sum` of floats is -0.0.
    run.compactions.iter().fold(0.0, |total, c| total + compaction_cost(c, p))
}

/// Rows for every (scenario, strategy, summarizer) present in `runs`, in run order (runs of
/// one row must be adjacent).
pub fn rows(scenarios: &[Scenario], runs: &[RunResult]) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    let mut i = 0;
    while i < runs.len() {
        let same = |r: &RunResult| r.scenario == runs[i].scenario && r.strategy == runs[i].strategy && r.summarizer == runs[i].summarizer;
        let j = runs[i..].iter().position(|r| !same(r)).map_or(runs.len(), |k| i + k);
        let group = &runs[i..j];
        let scenario = scenarios.iter().find(|s| s.name == group[0].scenario).expect("runs come from these scenarios");
        out.push(row(scenario, group));
        i = j;
    }
    out
}

/// Checkpoints appended, counted by kind (in first-seen order), e.g. `summary 4; prune 1`.
fn events(group: &[RunResult]) -> String {
    let mut counts: Vec<(&str, u32)> = Vec::new();
    for kind in group.iter().flat_map(|r| &r.compactions).flat_map(|c| &c.kinds) {
        match counts.iter_mut().find(|(k, _)| k == kind) {
            Some((_, n)) => *n += 1,
            None => counts.push((kind, 1)),
        }
    }
    counts.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join("; ")
}

fn row(scenario: &Scenario, group: &[RunResult]) -> Row {
    let n = group.len();
    let all_requests = || group.iter().flat_map(|r| &r.requests);
    let successful = |r: &RunResult| r.compactions.iter().filter(|c| c.error.is_none()).count() as f64;
    let violations = |shape: Shape| {
        let k = Shape::ALL.iter().position(|s| *s == shape).expect("in ALL");
        all_requests().map(|r| u64::from(r.violations[k])).sum()
    };
    let facts: Vec<Status> = group.iter().flat_map(|r| r.facts.iter().map(|f| f.last)).collect();
    let pct = |pred: &dyn Fn(Status) -> bool| {
        if facts.is_empty() {
            0.0
        } else {
            round3(100.0 * facts.iter().filter(|s| pred(**s)).count() as f64 / facts.len() as f64)
        }
    };
    let total_tokens: u64 = all_requests().map(|r| r.tokens).sum();
    let cached: u64 = all_requests().map(|r| r.cached_tokens).sum();
    let all_compactions = || group.iter().flat_map(|r| &r.compactions);
    let summary_sent: u64 = all_compactions().map(|c| c.summary_request_tokens).sum();
    let summary_cached: u64 = all_compactions().map(|c| c.summary_cached_tokens).sum();
    let session_cost: f64 = group.iter().map(|r| cost(r, scenario)).sum();
    let compaction_cost: f64 = group.iter().map(|r| run_compaction_cost(r, scenario.model.pricing)).sum();
    Row {
        scenario: scenario.name.clone(),
        strategy: group[0].strategy.clone(),
        summarizer: group[0].summarizer.clone(),
        seeds: n as u32,
        requests: mean(group.iter().map(|r| r.requests.len() as f64), n),
        compactions: mean(group.iter().map(successful), n),
        events: events(group),
        failed_compactions: mean(group.iter().map(|r| r.compactions.len() as f64 - successful(r)), n),
        peak_tokens: all_requests().map(|r| r.tokens).max().unwrap_or(0),
        mean_tokens: round3(total_tokens as f64 / all_requests().count().max(1) as f64),
        total_input_tokens: mean(group.iter().map(|r| r.requests.iter().map(|q| q.tokens).sum::<u64>() as f64), n),
        cached_share: if total_tokens == 0 { 0.0 } else { round3(cached as f64 / total_tokens as f64) },
        over_window_requests: mean(group.iter().map(|r| r.requests.iter().filter(|q| q.overflow).count() as f64), n),
        cost_usd: mean(group.iter().map(|r| cost(r, scenario)), n),
        violations_openai_chat: violations(Shape::OpenaiChat),
        violations_openai_responses: violations(Shape::OpenaiResponses),
        violations_anthropic: violations(Shape::Anthropic),
        violations_gemini: violations(Shape::Gemini),
        facts: facts.len() as u32,
        verbatim_pct: pct(&|s| s.is_verbatim()),
        recoverable_pct: pct(&|s| s == Status::Recoverable),
        lost_pct: pct(&|s| s == Status::Lost),
        stale_pct: pct(&|s| s == Status::Stale),
        summarizer_input_tokens: mean(group.iter().map(|r| r.compactions.iter().map(|c| c.summarizer_input).sum::<u64>() as f64), n),
        summarizer_output_tokens: mean(group.iter().map(|r| r.compactions.iter().map(|c| c.summarizer_output).sum::<u64>() as f64), n),
        injected_tokens: mean(group.iter().map(|r| r.compactions.iter().map(|c| c.injected_tokens).sum::<u64>() as f64), n),
        child_input_tokens: mean(group.iter().map(|r| r.child.input_tokens as f64), n),
        compaction_input_tokens: mean(group.iter().map(|r| r.compactions.iter().map(|c| c.summary_request_tokens).sum::<u64>() as f64), n),
        compaction_cached_share: if summary_sent == 0 { 0.0 } else { round3(summary_cached as f64 / summary_sent as f64) },
        compaction_cost_usd: mean(group.iter().map(|r| run_compaction_cost(r, scenario.model.pricing)), n),
        compaction_cost_share: if session_cost == 0.0 { 0.0 } else { round3(compaction_cost / session_cost) },
    }
}

/// `kept/needed` for facts matching `pred`, with the stale ones named (`1/4, 2 stale`), or `–`
/// when none.
pub(crate) fn share<'a>(facts: impl Iterator<Item = &'a Status>) -> String {
    let (mut kept, mut stale, mut all) = (0, 0, 0);
    for s in facts {
        all += 1;
        kept += usize::from(s.is_verbatim() || *s == Status::Recoverable);
        stale += usize::from(*s == Status::Stale);
    }
    match (all, stale) {
        (0, _) => "–".to_owned(),
        (_, 0) => format!("{kept}/{all}"),
        _ => format!("{kept}/{all}, {stale} stale"),
    }
}
