//! `results.json` and `requests.csv`, streamed to disk.
//!
//! `results.json` holds the rows and every run (compactions, facts, violations) with one array
//! element a line, so two runs diff line by line and nothing builds the whole file in memory.
//! Per-request records, the bulk of a run, go to `requests.csv`, one request a line.
//!
//! The format is this module's: [`Run`] and the records under it say field by field what a run
//! looks like in `results.json`, whatever the eval's own types hold or how they serialize
//! (eval's serde derives serve its resume journal).

use std::fs::File;
use std::io::{self, BufWriter, Write};

use std::path::Path;

use std::collections::BTreeMap;

use compactbench_core::Shape;
use compactbench_eval::results::{ChildCost, CompactionRecord, FactOutcome, Instructed, RunResult, ViolationExample};
use serde::Serialize;

use crate::Row;

fn array<T: Serialize>(out: &mut impl Write, name: &str, items: &[T]) -> io::Result<()> {
    write!(out, "  \"{name}\": [")?;
    for (i, item) in items.iter().enumerate() {
        out.write_all(if i == 0 { b"\n    " } else { b",\n    " })?;
        serde_json::to_writer(&mut *out, item)?;
    }
    out.write_all(if items.is_empty() { b"]" } else { b"\n  ]" })
}

/// Writes `results.json`: `{"summarizer": .., "rows": [..], "runs": [..]}`.
pub(crate) fn results(path: &Path, summarizer: &str, rows: &[Row], runs: &[RunResult]) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    write!(out, "{{\n  \"summarizer\": {},\n", serde_json::to_string(summarizer)?)?;
    array(&mut out, "rows", rows)?;
    out.write_all(b",\n")?;
    array(&mut out, "runs", &runs.iter().map(Run::from).collect::<Vec<_>>())?;
    out.write_all(b"\n}\n")?;
    out.flush()
}

/// Writes `requests.csv`: every request of every run, keyed by strategy, scenario,
/// summarizer and seed.
pub(crate) fn requests(path: &Path, runs: &[RunResult]) -> io::Result<()> {
    let mut out = csv::Writer::from_path(path)?;
    let mut header = vec!["strategy", "scenario", "summarizer", "seed", "index", "step", "tokens", "cached_tokens", "messages", "overflow", "rounds"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    header.extend(Shape::ALL.iter().map(|s| format!("violations_{}", s.as_str())));
    out.write_record(&header)?;
    for r in runs {
        for q in &r.requests {
            let v = q.violations;
            out.serialize((&r.strategy, &r.scenario, &r.summarizer, r.seed, q.index, q.step, q.tokens, q.cached_tokens, q.messages, q.overflow, q.rounds, v[0], v[1], v[2], v[3]))?;
        }
    }
    out.flush()
}

/// One run in `results.json`: everything but its requests (`requests.csv`) and its wall-time
/// phases (not deterministic: `timing.md`).
#[derive(Serialize)]
struct Run<'a> {
    strategy: &'a str,
    scenario: &'a str,
    seed: u64,
    summarizer: &'a str,
    window: u64,
    compactions: Vec<Compaction<'a>>,
    facts: Vec<Fact<'a>>,
    /// Counts per shape and rule.
    violations: &'a BTreeMap<&'static str, BTreeMap<&'static str, u32>>,
    /// Left out when the run broke no rule.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    violation_examples: Vec<Example<'a>>,
    log_entries: usize,
    output_tokens: u64,
    child: Child,
    /// Where the user's compaction instructions went; left out of runs without any, so their
    /// output does not change.
    #[serde(skip_serializing_if = "Option::is_none")]
    instructed: Option<Reach>,
}

/// Where the user's compaction instructions went in one run (see `Instructed` in the eval).
#[derive(Serialize)]
struct Reach {
    manual_asked: u32,
    manual_ran: u32,
    manual_in_prompt: u32,
    manual_in_context: u32,
    memory_in_prompt: u32,
    memory_in_context: u32,
    summary_calls: u32,
}

impl From<Instructed> for Reach {
    fn from(i: Instructed) -> Reach {
        Reach {
            manual_asked: i.manual_asked,
            manual_ran: i.manual_ran,
            manual_in_prompt: i.manual_in_prompt,
            manual_in_context: i.manual_in_context,
            memory_in_prompt: i.memory_in_prompt,
            memory_in_context: i.memory_in_context,
            summary_calls: i.summary_calls,
        }
    }
}

impl<'a> From<&'a RunResult> for Run<'a> {
    fn from(r: &'a RunResult) -> Run<'a> {
        Run {
            strategy: &r.strategy,
            scenario: &r.scenario,
            seed: r.seed,
            summarizer: &r.summarizer,
            window: r.window,
            compactions: r.compactions.iter().map(Compaction::from).collect(),
            facts: r.facts.iter().map(Fact::from).collect(),
            violations: &r.violations,
            violation_examples: r.violation_examples.iter().map(Example::from).collect(),
            log_entries: r.log_entries,
            output_tokens: r.output_tokens,
            child: Child::from(r.child),
            instructed: crate::instructions::instructed(r).then(|| Reach::from(r.instructed)),
        }
    }
}

#[derive(Serialize)]
struct Compaction<'a> {
    request: u32,
    step: u32,
    first_kept_step: Option<u32>,
    moment: &'a str,
    reason: &'a str,
    kinds: &'a [&'static str],
    tokens_before: u64,
    tokens_after: u64,
    estimated_before: u64,
    injected_tokens: u64,
    summarizer_calls: u32,
    summarizer_input: u64,
    summarizer_output: u64,
    summaries_cut_off: u32,
    error: Option<&'a str>,
    mid_loop: bool,
    /// How the summary calls were sent (`prefix`, `fresh`, `fork`; empty without calls).
    summary_context: &'a str,
    /// Exact tokens the summary calls sent, measured as requests.
    summary_request_tokens: u64,
    /// Of those, served from the prompt cache.
    summary_cached_tokens: u64,
    /// Exact tokens of their answers.
    summary_output_tokens: u64,
    summary_calls_over_window: u32,
}

impl<'a> From<&'a CompactionRecord> for Compaction<'a> {
    fn from(c: &'a CompactionRecord) -> Compaction<'a> {
        Compaction {
            request: c.request,
            step: c.step,
            first_kept_step: c.first_kept_step,
            moment: c.moment,
            reason: &c.reason,
            kinds: &c.kinds,
            tokens_before: c.tokens_before,
            tokens_after: c.tokens_after,
            estimated_before: c.estimated_before,
            injected_tokens: c.injected_tokens,
            summarizer_calls: c.summarizer_calls,
            summarizer_input: c.summarizer_input,
            summarizer_output: c.summarizer_output,
            summaries_cut_off: c.summaries_cut_off,
            error: c.error.as_deref(),
            mid_loop: c.mid_loop,
            summary_context: c.summary_context,
            summary_request_tokens: c.summary_request_tokens,
            summary_cached_tokens: c.summary_cached_tokens,
            summary_output_tokens: c.summary_output_tokens,
            summary_calls_over_window: c.summary_calls_over_window,
        }
    }
}

/// A fact's outcome; states by their snake-case names.
#[derive(Serialize)]
struct Fact<'a> {
    id: &'a str,
    kind: &'static str,
    needed: u32,
    /// Requests per state.
    probes: InOrder,
    last: &'static str,
    lost_at: Option<u32>,
    lost_after_rounds: Option<u32>,
    lost_by: Option<u32>,
    after_round: Vec<&'static str>,
    planted_quarter: u8,
    /// Left out of judge-less runs, so their output does not change.
    #[serde(skip_serializing_if = "Option::is_none")]
    judged: Option<Judged>,
    /// The user's instruction naming it (`memory`, `manual`); left out when none does.
    #[serde(skip_serializing_if = "Option::is_none")]
    named_by: Option<&'static str>,
}

impl<'a> From<&'a FactOutcome> for Fact<'a> {
    fn from(f: &'a FactOutcome) -> Fact<'a> {
        Fact {
            id: &f.id,
            kind: f.kind.as_str(),
            needed: f.needed,
            probes: InOrder(f.probes.iter().map(|(s, n)| (s.as_str(), *n)).collect()),
            last: f.last.as_str(),
            lost_at: f.lost_at,
            lost_after_rounds: f.lost_after_rounds,
            lost_by: f.lost_by,
            after_round: f.after_round.iter().map(|s| s.as_str()).collect(),
            planted_quarter: f.planted_quarter,
            judged: f.judged.as_ref().map(|j| Judged { request: j.request, answer: j.answer.as_str() }),
            named_by: f.named_by.map(|n| n.as_str()),
        }
    }
}

/// A map written in the order given: states in report order (kept, injected, summary,
/// recoverable, lost, stale), not by name.
struct InOrder(Vec<(&'static str, u32)>);

impl Serialize for InOrder {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

#[derive(Serialize)]
struct Judged {
    request: u32,
    answer: &'static str,
}

#[derive(Serialize)]
struct Example<'a> {
    shape: &'a str,
    rule: &'a str,
    request: u32,
    detail: &'a str,
    entries: &'a [u32],
}

impl<'a> From<&'a ViolationExample> for Example<'a> {
    fn from(v: &'a ViolationExample) -> Example<'a> {
        Example { shape: v.shape, rule: v.rule, request: v.request, detail: &v.detail, entries: &v.entries }
    }
}

/// What subagents cost.
#[derive(Serialize)]
struct Child {
    requests: u32,
    input_tokens: u64,
    cached_tokens: u64,
    output_tokens: u64,
}

impl From<ChildCost> for Child {
    fn from(c: ChildCost) -> Child {
        Child { requests: c.requests, input_tokens: c.input_tokens, cached_tokens: c.cached_tokens, output_tokens: c.output_tokens }
    }
}
