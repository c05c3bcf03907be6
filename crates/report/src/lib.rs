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
mod glance;
mod judged;
mod ground_truth;
mod html;
mod instructions;
mod isolation;
mod json;
mod markdown;
mod pressure;
mod row;
mod triggers;

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use compactbench_eval::results::RunResult;
use compactbench_eval::scenario::Scenario;

pub use compare::{compare, CompareError};
pub use markdown::markdown;
pub use row::{rows, Row, StrategyMeta};

/// Writes `results.csv`, `results.json`, `requests.csv`, `report.md`, `report.html` and
/// `timing.md` into `dir`. `run_phases` are the phases the caller timed before (generation,
/// the matrix); the time each file takes to write is added to them in `timing.md`.
pub fn write(
    dir: &Path,
    scenarios: &[Scenario],
    meta: &[StrategyMeta],
    runs: &[RunResult],
    summarizer: &str,
    run_phases: &[(&'static str, Duration)],
) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut phases = run_phases.to_vec();
    let mut timed = |name: &'static str, f: &mut dyn FnMut() -> io::Result<()>| {
        let started = Instant::now();
        let r = f();
        phases.push((name, started.elapsed()));
        r
    };
    let rows = rows(scenarios, runs);
    timed("write results.csv", &mut || {
        let mut csv = csv::Writer::from_path(dir.join("results.csv"))?;
        for r in &rows {
            csv.serialize(r)?;
        }
        csv.flush()
    })?;
    timed("write results.json", &mut || json::results(&dir.join("results.json"), summarizer, &rows, runs))?;
    timed("write requests.csv", &mut || json::requests(&dir.join("requests.csv"), runs))?;
    timed("write report.md", &mut || std::fs::write(dir.join("report.md"), markdown(scenarios, meta, &rows, runs, summarizer)))?;
    timed("write report.html", &mut || {
        let charts = charts::Charts::new(scenarios, &rows, runs, summarizer);
        std::fs::write(dir.join("report.html"), html::html(scenarios, meta, &rows, &charts, summarizer)?)
    })?;
    std::fs::write(dir.join("timing.md"), markdown::timing(runs, &phases))
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod html_tests;
