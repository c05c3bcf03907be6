//! Reports of an eval run.
//!
//! Only this crate knows the output formats. It turns the eval's [`RunResult`]s into flat
//! [`Row`]s (one per strategy and scenario, averaged over seeds) and writes
//! `results.csv`, `results.json` (rows plus every run in full), `report.md` and `report.html`
//! (charts). The column dictionary is in `reports/README.md`. [`compare`] diffs two runs'
//! `results.json`.

mod charts;
mod compare;
mod failure_modes;
mod judged;
mod ground_truth;
mod html;
mod isolation;
mod markdown;
mod row;

use std::io;
use std::path::Path;

use compactbench_eval::results::RunResult;
use compactbench_eval::scenario::Scenario;

pub use compare::{compare, CompareError};
pub use markdown::markdown;
pub use row::{rows, Row, StrategyMeta};

/// Writes `results.csv`, `results.json`, `report.md`, `report.html` and `timing.md` into `dir`.
pub fn write(dir: &Path, scenarios: &[Scenario], meta: &[StrategyMeta], runs: &[RunResult], summarizer: &str) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let rows = rows(scenarios, runs);
    let mut csv = csv::Writer::from_path(dir.join("results.csv"))?;
    for r in &rows {
        csv.serialize(r)?;
    }
    csv.flush()?;
    let json = serde_json::json!({ "summarizer": summarizer, "rows": rows, "runs": runs });
    std::fs::write(dir.join("results.json"), serde_json::to_string_pretty(&json)? + "\n")?;
    std::fs::write(dir.join("report.md"), markdown(scenarios, meta, &rows, runs, summarizer))?;
    let charts = charts::Charts::new(scenarios, &rows, runs, summarizer);
    std::fs::write(dir.join("report.html"), html::html(scenarios, &rows, &charts, summarizer)?)?;
    std::fs::write(dir.join("timing.md"), markdown::timing(runs))?;
    Ok(())
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod html_tests;
