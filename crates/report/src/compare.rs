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
    rows: Vec<CmpRow>,
}

impl CmpRow {
    fn key(&self) -> (&str, &str, &str) {
        (&self.scenario, &self.strategy, &self.summarizer)
    }

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

fn num(x: f64) -> String {
    if x.fract() == 0.0 { format!("{x:.0}") } else { format!("{x:.1}") }
}

const HEADER: [&str; 9] =
    ["compactions", "failed", "peak tokens", "mean tokens", "total input", "cost $", "retained %", "lost %", "violations chat/resp/anth/gem"];

/// Reads a run's `results.json`; `run` is the run folder or the file itself.
fn load(run: &Path) -> Result<(PathBuf, Vec<CmpRow>), CompareError> {
    // Anything but a `.json` file is taken as a run folder, so a mistyped folder is reported
    // as the results.json that is missing rather than as a folder that cannot be read.
    let is_file = !run.is_dir() && run.extension().is_some_and(|e| e == "json");
    let path = if is_file { run.to_owned() } else { run.join("results.json") };
    let err = |message: String| CompareError { path: path.clone(), message };
    let text = std::fs::read_to_string(&path).map_err(|e| err(format!("cannot read: {e}")))?;
    let results: Results = serde_json::from_str(&text).map_err(|e| err(format!("not a compactbench results.json: {e}")))?;
    Ok((path, results.rows))
}

/// Compares two runs (folders holding `results.json`, or the files) row by row, keyed by
/// scenario, strategy and summarizer, and returns a Markdown table of the rows whose numbers
/// differ (`a → b`) and the rows present in one run only.
pub fn compare(a: &Path, b: &Path) -> Result<String, CompareError> {
    let (path_a, rows_a) = load(a)?;
    let (path_b, rows_b) = load(b)?;
    Ok(compare_rows(&path_a, &rows_a, &path_b, &rows_b))
}

fn compare_rows(path_a: &Path, a: &[CmpRow], path_b: &Path, b: &[CmpRow]) -> String {
    let mut lines: Vec<String> = Vec::new();
    let (mut changed, mut only_a, mut only_b) = (0, 0, 0);
    let line = |r: &CmpRow, status: &str, cells: &[String]| {
        format!("| {} | {} | {} | {status} | {} |", r.scenario, r.strategy, r.summarizer, cells.join(" | "))
    };
    // A's order first (changed rows and rows it alone has), then the rows B adds, in B's order.
    for ra in a {
        match b.iter().find(|rb| rb.key() == ra.key()) {
            Some(rb) => {
                let (ca, cb) = (ra.cells(), rb.cells());
                if ca == cb {
                    continue;
                }
                changed += 1;
                let cells: Vec<String> = ca.iter().zip(&cb).map(|(x, y)| if x == y { x.clone() } else { format!("{x} → {y}") }).collect();
                lines.push(line(ra, "changed", &cells));
            }
            None => {
                only_a += 1;
                lines.push(line(ra, "only in A", &ra.cells()));
            }
        }
    }
    for rb in b.iter().filter(|rb| !a.iter().any(|ra| ra.key() == rb.key())) {
        only_b += 1;
        lines.push(line(rb, "only in B", &rb.cells()));
    }
    let mut out = String::new();
    let _ = writeln!(out, "A: {}\nB: {}\n", path_a.display(), path_b.display());
    let same = a.len() - changed - only_a;
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
        CmpRow {
            scenario: "tiny".into(),
            strategy: strategy.into(),
            summarizer: "extractive".into(),
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

    #[test]
    fn lists_changed_and_one_sided_rows_only() {
        let a = vec![row("none", 2500, 0.0), row("sum", 1500, 50.0), row("gone", 900, 0.0)];
        let b = vec![row("none", 2500, 0.0), row("sum", 1400, 25.0), row("new", 800, 0.0)];
        let out = compare_rows(Path::new("a/results.json"), &a, Path::new("b/results.json"), &b);
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
        let out = compare_rows(Path::new("a"), &a, Path::new("b"), &[row("none", 2500, 0.0)]);
        assert!(out.ends_with("No differences: 1 rows, all equal.\n"), "{out}");
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
