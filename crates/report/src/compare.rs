//! `compactbench report --compare A B`: what changed between two runs' `results.json`.

use std::fmt::{self, Write};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A `results.json` that could not be read or parsed.
#[derive(Debug)]
pub struct CompareError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for CompareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for CompareError {}

/// The row fields the comparison reads. A private mirror rather than [`crate::Row`] itself, so
/// that runs written before a column was added (or after one was dropped) still compare:
/// serde ignores the columns not named here.
#[derive(Debug, Deserialize)]
struct CmpRow {
    scenario: String,
    strategy: String,
    /// Runs written before the summary bounds existed have no `summarizer`: all their rows
    /// used the default one.
    #[serde(default = "primary")]
    summarizer: String,
    compactions: f64,
    failed_compactions: f64,
    peak_tokens: u64,
    mean_tokens: f64,
    total_input_tokens: f64,
    cost_usd: f64,
    verbatim_pct: f64,
    recoverable_pct: f64,
    lost_pct: f64,
    violations_openai_chat: u64,
    violations_openai_responses: u64,
    violations_anthropic: u64,
    violations_gemini: u64,
}

fn primary() -> String {
    "extractive".to_owned()
}

#[derive(Deserialize)]
struct Results {
    /// The run's own summarizer (the other rows are its bounds); older runs lack it.
    #[serde(default = "primary")]
    summarizer: String,
    rows: Vec<CmpRow>,
}

/// One run's rows and the summarizer the run was made with.
struct Run {
    path: PathBuf,
    summarizer: String,
    rows: Vec<CmpRow>,
}

impl Run {
    /// Rows pair by scenario, strategy and summarizer, except that the rows of each run's own
    /// summarizer pair with each other: comparing a run through a model with the same matrix
    /// through the extractive summarizer is the point of `cargo xtask local-model`, and the
    /// bound rows (`null`, `oracle`) still pair by name.
    fn key<'r>(&self, r: &'r CmpRow) -> (&'r str, &'r str, Option<&'r str>) {
        let slot = (r.summarizer != self.summarizer).then_some(r.summarizer.as_str());
        (&r.scenario, &r.strategy, slot)
    }
}

impl CmpRow {

    fn violations(&self) -> [u64; 4] {
        [self.violations_openai_chat, self.violations_openai_responses, self.violations_anthropic, self.violations_gemini]
    }

    /// The compared values as the table shows them. Rows differ when these strings differ, so a
    /// change too small to show (below the rounding of `results.json` itself) is no change.
    fn cells(&self) -> [String; 9] {
        let v = self.violations();
        [
            num(self.compactions),
            num(self.failed_compactions),
            self.peak_tokens.to_string(),
            format!("{:.0}", self.mean_tokens),
            format!("{:.0}", self.total_input_tokens),
            format!("{:.3}", self.cost_usd),
            format!("{:.1}", self.verbatim_pct + self.recoverable_pct),
            format!("{:.1}", self.lost_pct),
            format!("{}/{}/{}/{}", v[0], v[1], v[2], v[3]),
        ]
    }
}

fn changed_cell(x: &str, y: &str) -> String {
    if x == y { x.to_owned() } else { format!("{x} → {y}") }
}

fn num(x: f64) -> String {
    if x.fract() == 0.0 { format!("{x:.0}") } else { format!("{x:.1}") }
}

const HEADER: [&str; 9] =
    ["compactions", "failed", "peak tokens", "mean tokens", "total input", "cost $", "retained %", "lost %", "violations chat/resp/anth/gem"];

/// Reads a run's `results.json`; `run` is the run folder or the file itself.
fn load(run: &Path) -> Result<Run, CompareError> {
    // Anything but a `.json` file is taken as a run folder, so a mistyped folder is reported
    // as the results.json that is missing rather than as a folder that cannot be read.
    let is_file = !run.is_dir() && run.extension().is_some_and(|e| e == "json");
    let path = if is_file { run.to_owned() } else { run.join("results.json") };
    let err = |message: String| CompareError { path: path.clone(), message };
    let text = std::fs::read_to_string(&path).map_err(|e| err(format!("cannot read: {e}")))?;
    let results: Results = serde_json::from_str(&text).map_err(|e| err(format!("not a compactbench results.json: {e}")))?;
    Ok(Run { path, summarizer: results.summarizer, rows: results.rows })
}

/// Compares two runs (folders holding `results.json`, or the files) row by row, keyed by
/// scenario, strategy and summarizer (the runs' own summarizers pair with each other), and returns a Markdown table of the rows whose numbers
/// differ (`a → b`) and the rows present in one run only.
pub fn compare(a: &Path, b: &Path) -> Result<String, CompareError> {
    Ok(compare_runs(&load(a)?, &load(b)?))
}

fn compare_runs(a: &Run, b: &Run) -> String {
    let mut lines: Vec<String> = Vec::new();
    let (mut changed, mut only_a, mut only_b) = (0, 0, 0);
    let line = |r: &CmpRow, summarizer: &str, status: &str, cells: &[String]| {
        format!("| {} | {} | {summarizer} | {status} | {} |", r.scenario, r.strategy, cells.join(" | "))
    };
    // A's order first (changed rows and rows it alone has), then the rows B adds, in B's order.
    for ra in &a.rows {
        match b.rows.iter().find(|rb| b.key(rb) == a.key(ra)) {
            Some(rb) => {
                let (ca, cb) = (ra.cells(), rb.cells());
                if ca == cb {
                    continue;
                }
                changed += 1;
                let cells: Vec<String> = ca.iter().zip(&cb).map(|(x, y)| changed_cell(x, y)).collect();
                lines.push(line(ra, &changed_cell(&ra.summarizer, &rb.summarizer), "changed", &cells));
            }
            None => {
                only_a += 1;
                lines.push(line(ra, &ra.summarizer, "only in A", &ra.cells()));
            }
        }
    }
    for rb in b.rows.iter().filter(|rb| !a.rows.iter().any(|ra| a.key(ra) == b.key(rb))) {
        only_b += 1;
        lines.push(line(rb, &rb.summarizer, "only in B", &rb.cells()));
    }
    let mut out = String::new();
    let _ = writeln!(out, "A: {}\nB: {}\n", a.path.display(), b.path.display());
    if a.summarizer != b.summarizer {
        let _ = writeln!(out, "Summarizer: {} → {} (their rows are paired; bound rows pair by name).\n", a.summarizer, b.summarizer);
    }
    let same = a.rows.len() - changed - only_a;
    if lines.is_empty() {
        let _ = writeln!(out, "No differences: {same} rows, all equal.");
        return out;
    }
    let _ = writeln!(out, "{changed} rows changed, {only_a} only in A, {only_b} only in B, {same} equal (not shown).\n");
    let _ = writeln!(out, "| scenario | strategy | summarizer | status | {} |", HEADER.join(" | "));
    let _ = writeln!(out, "|---|---|---|---|{}", "---:|".repeat(HEADER.len() - 1) + "---|");
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    out
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;

    fn row(strategy: &str, peak: u64, lost: f64) -> CmpRow {
        row_by("extractive", strategy, peak, lost)
    }

    fn row_by(summarizer: &str, strategy: &str, peak: u64, lost: f64) -> CmpRow {
        CmpRow {
            scenario: "tiny".into(),
            strategy: strategy.into(),
            summarizer: summarizer.into(),
            compactions: 1.0,
            failed_compactions: 0.0,
            peak_tokens: peak,
            mean_tokens: 1100.0,
            total_input_tokens: 2200.0,
            cost_usd: 0.016,
            verbatim_pct: 100.0 - lost,
            recoverable_pct: 0.0,
            lost_pct: lost,
            violations_openai_chat: 0,
            violations_openai_responses: 0,
            violations_anthropic: 2,
            violations_gemini: 0,
        }
    }

    fn run(path: &str, summarizer: &str, rows: Vec<CmpRow>) -> Run {
        Run { path: path.into(), summarizer: summarizer.into(), rows }
    }

    #[test]
    fn lists_changed_and_one_sided_rows_only() {
        let a = vec![row("none", 2500, 0.0), row("sum", 1500, 50.0), row("gone", 900, 0.0)];
        let b = vec![row("none", 2500, 0.0), row("sum", 1400, 25.0), row("new", 800, 0.0)];
        let out = compare_runs(&run("a/results.json", "extractive", a), &run("b/results.json", "extractive", b));
        expect![[r#"
            A: a/results.json
            B: b/results.json

            1 rows changed, 1 only in A, 1 only in B, 1 equal (not shown).

            | scenario | strategy | summarizer | status | compactions | failed | peak tokens | mean tokens | total input | cost $ | retained % | lost % | violations chat/resp/anth/gem |
            |---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|
            | tiny | sum | extractive | changed | 1 | 0 | 1500 → 1400 | 1100 | 2200 | 0.016 | 50.0 → 75.0 | 50.0 → 25.0 | 0/0/2/0 |
            | tiny | gone | extractive | only in A | 1 | 0 | 900 | 1100 | 2200 | 0.016 | 100.0 | 0.0 | 0/0/2/0 |
            | tiny | new | extractive | only in B | 1 | 0 | 800 | 1100 | 2200 | 0.016 | 100.0 | 0.0 | 0/0/2/0 |
        "#]]
        .assert_eq(&out);
    }

    #[test]
    fn equal_runs_say_so() {
        let a = vec![row("none", 2500, 0.0)];
        let out = compare_runs(&run("a", "extractive", a), &run("b", "extractive", vec![row("none", 2500, 0.0)]));
        assert!(out.ends_with("No differences: 1 rows, all equal.\n"), "{out}");
    }

    #[test]
    fn the_runs_own_summarizers_pair_and_bounds_pair_by_name() {
        let a = vec![row("sum", 1500, 50.0), row_by("null", "sum", 1000, 100.0), row_by("oracle", "sum", 1600, 0.0)];
        let b = vec![row_by("openai:m", "sum", 1500, 75.0), row_by("null", "sum", 1000, 100.0), row_by("oracle", "sum", 1600, 10.0)];
        let out = compare_runs(&run("a", "extractive", a), &run("b", "openai:m", b));
        expect![[r#"
            A: a
            B: b

            Summarizer: extractive → openai:m (their rows are paired; bound rows pair by name).

            2 rows changed, 0 only in A, 0 only in B, 1 equal (not shown).

            | scenario | strategy | summarizer | status | compactions | failed | peak tokens | mean tokens | total input | cost $ | retained % | lost % | violations chat/resp/anth/gem |
            |---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|
            | tiny | sum | extractive → openai:m | changed | 1 | 0 | 1500 | 1100 | 2200 | 0.016 | 50.0 → 25.0 | 50.0 → 75.0 | 0/0/2/0 |
            | tiny | sum | oracle | changed | 1 | 0 | 1600 | 1100 | 2200 | 0.016 | 100.0 → 90.0 | 0.0 → 10.0 | 0/0/2/0 |
        "#]]
        .assert_eq(&out);
    }

    #[test]
    fn errors_name_the_file() {
        let dir = std::env::temp_dir().join(format!("compactbench-compare-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("results.json");
        std::fs::write(&bad, "{\"rows\": [{\"scenario\": 1}]}").unwrap();
        let e = compare(&dir, &dir).unwrap_err();
        assert_eq!(e.path, bad);
        assert!(e.to_string().starts_with(&format!("{}: not a compactbench results.json", bad.display())), "{e}");
        let e = compare(&dir.join("nope"), &dir).unwrap_err();
        assert_eq!(e.path, dir.join("nope/results.json"));
        assert!(e.to_string().contains("cannot read"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
