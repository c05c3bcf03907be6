//! `compactbench merge`: the journals of an eval's shards (`eval --shard I/N`) joined into the
//! reports of one run, byte for byte those of the whole matrix run on one machine.
//!
//! A shard's journal holds every cell it ran in full (the run, its requests and phases) and a
//! header with the eval's configuration, so the journals alone decide the cells; the scenarios
//! are loaded again (the reports describe them) and must be the ones the shards ran.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use compactbench_core::Strategy;
use compactbench_eval::results::RunResult;
use compactbench_eval::scenario::Scenario;
use compactbench_eval::variant;
use serde::Deserialize;
use serde_json::Value;

use crate::cells;
use crate::journal::{self, fingerprint};
use crate::shard::Shard;
use crate::ScenarioSource;

/// What merge reads of a journal header's configuration (the rest only has to match).
#[derive(Deserialize)]
struct Matrix {
    strategies: Vec<String>,
    scenarios: Vec<Named>,
    seeds: u64,
    bounds: bool,
    delegate: Vec<String>,
    text_chat: Vec<String>,
    summarizer: Primary,
}

#[derive(Deserialize)]
struct Named {
    name: String,
    fingerprint: String,
}

#[derive(Deserialize)]
struct Primary {
    name: String,
}

/// One shard's output folder, read.
struct Part {
    dir: PathBuf,
    shard: Shard,
    /// The header's configuration without what may differ between shards: the shard itself
    /// and the binary (each machine builds its own; its size and time are not the code).
    matrix: Value,
    runs: Vec<RunResult>,
}

/// A cell: scenario, report id, seed, summarizer.
type Cell = (String, String, u64, String);

fn cell_of(r: &RunResult) -> Cell {
    (r.scenario.clone(), r.strategy.clone(), r.seed, r.summarizer.clone())
}

fn describe((scenario, id, seed, summarizer): &Cell) -> String {
    format!("{id} on {scenario} seed {seed} with {summarizer}")
}

impl Part {
    fn read(dir: &Path) -> Result<Part> {
        let Some(read) = journal::read(dir)? else {
            bail!("{}: no journal ({}): not the output folder of `compactbench eval --shard I/N`", dir.display(), journal::FILE);
        };
        let mut matrix = read.config;
        let shard = match matrix.as_object_mut().and_then(|m| m.remove("shard")) {
            Some(Value::String(s)) => s.parse::<Shard>().map_err(|e| anyhow::anyhow!("{}: shard {s:?} in its header: {e}", read.path.display()))?,
            _ => bail!(
                "{}: written by an eval without --shard (a whole run writes its own reports); merge joins the outputs of `eval --shard I/N`",
                read.path.display()
            ),
        };
        if let Some(m) = matrix.as_object_mut() {
            m.remove("binary");
        }
        Ok(Part { dir: dir.to_owned(), shard, matrix, runs: read.runs })
    }
}

/// Joins the shards in `dirs` and writes the reports into `out`.
pub(crate) fn merge(dirs: &[PathBuf], out: &Path, source: &ScenarioSource) -> Result<()> {
    let started = Instant::now();
    let parts = dirs.iter().map(|d| Part::read(d)).collect::<Result<Vec<Part>>>()?;
    let first = &parts[0];
    for p in &parts[1..] {
        if p.matrix != first.matrix {
            bail!(
                "{} and {} are shards of different matrices ({}): run every shard with the same flags and scenarios",
                first.dir.display(),
                p.dir.display(),
                journal::differences(&first.matrix, &p.matrix, [&first.dir.display().to_string(), &p.dir.display().to_string()])
            );
        }
        if p.shard.count() != first.shard.count() {
            bail!("{} is shard {} but {} is shard {}: the shards of one matrix split it the same number of ways", first.dir.display(), first.shard, p.dir.display(), p.shard);
        }
    }
    let matrix: Matrix = serde_json::from_value(first.matrix.clone())
        .with_context(|| format!("{}: the configuration in its header", first.dir.join(journal::FILE).display()))?;
    let scenarios = scenarios(&matrix, source, &first.dir)?;
    let strategies = matrix
        .strategies
        .iter()
        .map(|id| compactbench_registry::find(id).with_context(|| format!("{}: strategy {id:?} is not registered in this build", first.dir.display())))
        .collect::<Result<Vec<Box<dyn Strategy>>>>()?;
    let primary = matrix.summarizer.name.as_str();

    let expected = expected_cells(&matrix);
    let count = first.shard.count();
    // Where each cell was found: part and run index.
    let mut found: HashMap<Cell, (usize, usize)> = HashMap::new();
    for (p, part) in parts.iter().enumerate() {
        let path = part.dir.join(journal::FILE);
        for (i, run) in part.runs.iter().enumerate() {
            let cell = cell_of(run);
            if !expected.contains(&cell) {
                bail!("{} holds {}, which is not a cell of the matrix in its header", path.display(), describe(&cell));
            }
            let owner = Shard::of(count, &cell.0, &cell.1, cell.2);
            if owner != part.shard {
                bail!("{} (shard {}) holds {}, a cell of shard {owner}", path.display(), part.shard, describe(&cell));
            }
            match found.get(&cell) {
                None => {
                    found.insert(cell, (p, i));
                }
                // The same shard given twice, or resumed into a copy: harmless if it agrees.
                Some(&(q, j)) => {
                    if content(run)? != content(&parts[q].runs[j])? {
                        bail!(
                            "{} differs between {} and {}: one of them was run by another build or with other scenarios",
                            describe(&cell),
                            parts[q].dir.join(journal::FILE).display(),
                            path.display()
                        );
                    }
                }
            }
        }
    }
    missing(&parts, &expected, &found, count)?;

    let mut runs: Vec<RunResult> = Vec::with_capacity(found.len());
    let mut taken: Vec<Vec<Option<RunResult>>> = parts.into_iter().map(|p| p.runs.into_iter().map(Some).collect()).collect();
    for &(p, i) in found.values() {
        runs.extend(taken[p][i].take());
    }
    let ran = runs.len();
    cells::drop_idle_bounds(&mut runs, primary);
    let phases = [("merge shard journals", started.elapsed())];
    crate::write_reports(out, &scenarios, &strategies, &mut runs, primary, &phases)?;
    eprintln!(
        "merged {} runs from {} shard folders ({} bound runs of strategies that never summarized dropped) in {:.1}s; wrote {}",
        runs.len(),
        dirs.len(),
        ran - runs.len(),
        started.elapsed().as_secs_f64(),
        out.join("report.md").display()
    );
    Ok(())
}

/// The scenarios the shards ran, in their order, loaded from `source` and checked against the
/// fingerprints in the header.
fn scenarios(matrix: &Matrix, source: &ScenarioSource, shard: &Path) -> Result<Vec<Scenario>> {
    let all = source.scenarios()?;
    let from = if source.transcripts.is_empty() { source.dir().display().to_string() } else { "the --transcript files".to_owned() };
    matrix
        .scenarios
        .iter()
        .map(|want| {
            let Some(s) = all.iter().find(|s| s.name == want.name) else {
                bail!(
                    "the shards ran scenario {:?} (says {}), which {from} does not hold: pass the --scenarios, --suite, --transcript and --session-scale the shards ran with",
                    want.name,
                    shard.display()
                );
            };
            if fingerprint(s) != want.fingerprint {
                bail!(
                    "scenario {:?} in {from} is not the one the shards ran (says {}): merge with the scenario files and --session-scale they ran with",
                    want.name,
                    shard.display()
                );
            }
            Ok(s.clone())
        })
        .collect()
}

/// Every cell of the matrix as the shards run it: the bounds of every strategy (see
/// [`cells::drop_idle_bounds`]).
fn expected_cells(m: &Matrix) -> HashSet<Cell> {
    let primary = m.summarizer.name.as_str();
    let mut sections: Vec<(&[String], bool, bool, &str)> =
        vec![(&m.strategies, false, false, primary), (&m.delegate, false, true, primary), (&m.text_chat, true, false, primary)];
    if m.bounds {
        sections.extend(cells::BOUNDS.map(|b| (m.strategies.as_slice(), false, false, b)));
    }
    let mut out = HashSet::new();
    for (ids, text, delegate, summarizer) in sections {
        for sc in &m.scenarios {
            for seed in 0..m.seeds {
                for id in ids {
                    out.insert((sc.name.clone(), variant::run_id(id, text, delegate), seed, summarizer.to_owned()));
                }
            }
        }
    }
    out
}

/// Refuses, shard by shard, when cells are missing: a shard not given, or one that did not finish.
fn missing(parts: &[Part], expected: &HashSet<Cell>, found: &HashMap<Cell, (usize, usize)>, count: u64) -> Result<()> {
    let mut problems = Vec::new();
    for shard in Shard::all(count) {
        let mut mine: Vec<&Cell> = expected.iter().filter(|c| Shard::of(count, &c.0, &c.1, c.2) == shard).collect();
        let total = mine.len();
        mine.retain(|c| !found.contains_key(*c));
        let Some(example) = mine.iter().min() else { continue };
        let dirs: Vec<String> = parts.iter().filter(|p| p.shard == shard).map(|p| p.dir.display().to_string()).collect();
        if dirs.is_empty() {
            problems.push(format!("shard {shard} ({total} cells): none of the folders given is its output"));
        } else {
            problems.push(format!(
                "shard {shard} in {}: {} of its {total} cells are missing (e.g. {}): it did not finish; `eval --shard {shard} --resume --out {}` with its other flags completes it",
                dirs.join(", "),
                mine.len(),
                describe(example),
                dirs[0]
            ));
        }
    }
    if !problems.is_empty() {
        bail!("cannot merge: cells of the matrix are missing\n  {}", problems.join("\n  "));
    }
    Ok(())
}

/// What a cell's result is, timing aside (a rerun takes other milliseconds).
fn content(run: &RunResult) -> Result<Vec<u8>> {
    Ok(serde_json::to_vec(&(run, &run.requests))?)
}
