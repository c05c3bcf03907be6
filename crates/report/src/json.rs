//! `results.json` and `requests.csv`, streamed to disk.
//!
//! `results.json` holds the rows and every run (compactions, facts, violations) with one array
//! element a line, so two runs diff line by line and nothing builds the whole file in memory.
//! Per-request records, the bulk of a run, go to `requests.csv`, one request a line.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use std::path::Path;

use compactbench_core::Shape;
use compactbench_eval::results::RunResult;
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
    array(&mut out, "runs", runs)?;
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
