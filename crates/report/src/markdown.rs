//! `report.md` and `timing.md`.

use std::fmt::Write;

use compactbench_eval::facts::FactKind;
use compactbench_eval::results::{Phases, RunResult, Status};
use compactbench_eval::scenario::Scenario;

use crate::row::share;
use crate::{Row, StrategyMeta};

fn num(x: f64) -> String {
    if x.fract() == 0.0 { format!("{x:.0}") } else { format!("{x:.1}") }
}

/// Rounds shown in the drift table (and the drift chart of report.html).
pub(crate) const DRIFT_ROUNDS: usize = 8;

/// Verbatim or recoverable: not lost, and not a stale value shown as current.
fn retained(s: Status) -> bool {
    s.is_verbatim() || s == Status::Recoverable
}


/// Per strategy: retention by the quarter of the session a fact was planted in.
fn position(out: &mut String, runs: &[&RunResult], strategies: &[&str]) {
    let _ = writeln!(out, "\n## Retention by position in history\n");
    let _ = writeln!(
        out,
        "Over every scenario and seed: facts by the quarter of the session (by step) they were planted in, 1st = oldest; retained (verbatim or recoverable) at the last request that needed them, of those needed.\n"
    );
    let _ = writeln!(out, "| strategy | 1st quarter | 2nd | 3rd | 4th |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for st in strategies {
        let facts = || runs.iter().filter(|r| r.strategy == *st).flat_map(|r| &r.facts);
        let cells: Vec<String> = (1..=4u8).map(|q| share(facts().filter(|f| f.planted_quarter == q).map(|f| &f.last))).collect();
        let _ = writeln!(out, "| {st} | {} |", cells.join(" | "));
    }
}

/// Per strategy: retention by fact kind, then by compaction round (the drift curve).
fn retention_tables(out: &mut String, runs: &[&RunResult], strategies: &[&str]) {
    let kinds: Vec<FactKind> = FactKind::ALL.into_iter().filter(|k| runs.iter().any(|r| r.facts.iter().any(|f| f.kind == *k))).collect();
    let stale = runs.iter().any(|r| r.facts.iter().any(|f| f.last == Status::Stale || f.after_round.contains(&Status::Stale)));
    let _ = writeln!(out, "\nRetained (verbatim or recoverable) at the last request that needed it, by fact kind:\n");
    let _ = writeln!(out, "| strategy | {} |", kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(kinds.len()));
    for st in strategies {
        let mine: Vec<&&RunResult> = runs.iter().filter(|r| r.strategy == *st).collect();
        let cells: Vec<String> = kinds.iter().map(|k| share(mine.iter().flat_map(|r| r.facts.iter().filter(|f| f.kind == *k).map(|f| &f.last)))).collect();
        let _ = writeln!(out, "| {st} | {} |", cells.join(" | "));
    }
    let _ = writeln!(out, "\nRetained after the fact's 1st, 2nd, … compaction (facts that went through that many):\n");
    let _ = writeln!(out, "| strategy | {} |", (1..=DRIFT_ROUNDS).map(|k| format!("r{k}")).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(DRIFT_ROUNDS));
    for st in strategies {
        let mine: Vec<&&RunResult> = runs.iter().filter(|r| r.strategy == *st).collect();
        let cells: Vec<String> = (0..DRIFT_ROUNDS).map(|k| share(mine.iter().flat_map(|r| r.facts.iter().filter_map(|f| f.after_round.get(k))))).collect();
        let _ = writeln!(out, "| {st} | {} |", cells.join(" | "));
    }
    if stale {
        let _ = writeln!(out, "\n`n stale`: of those facts, how many had a request showing a value the fact replaced without the statement that replaced it (`superseded_value` facts): not retained, and worse than lost.");
    }
}

/// Retention of each summarizing strategy with its summarizer, with the prompt-following
/// offline summarizer (`prompted`: the sections the strategy's own prompt asks for, filled
/// extractively) and with the bounds: how much it owes to structure (null: the summary keeps
/// nothing) and what a perfect summary adds (oracle: it keeps every needle that fits).
fn bounds_table(out: &mut String, rows: &[Row], scenario: &str, primary: &str) {
    let bounds: Vec<&Row> = rows.iter().filter(|r| r.scenario == scenario && r.summarizer != primary).collect();
    if bounds.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nSummary bounds — retained % (verbatim + recoverable) with the {primary} summarizer, the prompted summarizer (offline: the sections the strategy's own summary prompt asks for, filled with matching transcript lines), a null summary (the {primary} summary with every planted fact knocked out, same size) and an oracle summary (every planted fact that fits):\n"
    );
    let _ = writeln!(out, "| strategy | {primary} | prompted | null | oracle |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    let mut strategies: Vec<&str> = bounds.iter().map(|r| r.strategy.as_str()).collect();
    strategies.dedup();
    let mut cadence = Vec::new();
    for st in strategies {
        let row = |summarizer: &str| rows.iter().find(|r| r.scenario == scenario && r.strategy == st && r.summarizer == summarizer);
        let base = row(primary);
        let cell = |summarizer: &str| {
            let Some(r) = row(summarizer) else { return "–".to_owned() };
            let pct = format!("{:.0}", r.verbatim_pct + r.recoverable_pct);
            // A bound that compacts a different number of times measures that cadence, not the
            // summary: say so in the cell.
            match base {
                Some(b) if ["null", "oracle"].contains(&summarizer) && b.compactions != r.compactions => format!("{pct} ⚑"),
                _ => pct,
            }
        };
        for s in ["null", "oracle"] {
            if let (Some(b), Some(r)) = (base, row(s)) {
                if b.compactions != r.compactions {
                    cadence.push(format!("{st} with {s}: {} compactions vs {}", num(r.compactions), num(b.compactions)));
                }
            }
        }
        let _ = writeln!(out, "| {st} | {} | {} | {} | {} |", cell(primary), cell("prompted"), cell("null"), cell("oracle"));
    }
    if !cadence.is_empty() {
        let _ = writeln!(out, "\n⚑ The bound changed how often the strategy compacted, so that cell is not a pure bound: {}.", cadence.join("; "));
    }
}

/// Every provider rule broken anywhere in the run, with the first example and the strategy's
/// own explanation, so no violation count in the tables goes unexplained.
fn violations(out: &mut String, meta: &[StrategyMeta], runs: &[RunResult]) {
    // (strategy, rule) -> (shapes, requests in violation, first example).
    let mut found: Vec<(&str, &str, Vec<&str>, u64, String)> = Vec::new();
    for r in runs {
        for ex in &r.violation_examples {
            let n: u64 = r.violations.get(ex.shape).and_then(|m| m.get(ex.rule)).map_or(0, |n| u64::from(*n));
            match found.iter_mut().find(|f| f.0 == r.strategy && f.1 == ex.rule) {
                Some(f) => {
                    if !f.2.contains(&ex.shape) {
                        f.2.push(ex.shape);
                    }
                    f.3 += n;
                }
                None => {
                    let example = format!(
                        "{} seed {} ({}), request {}: {} (log entries {})",
                        r.scenario,
                        r.seed,
                        r.summarizer,
                        ex.request,
                        ex.detail,
                        ex.entries.iter().map(|e| format!("#{e}")).collect::<Vec<_>>().join(", ")
                    );
                    found.push((&r.strategy, ex.rule, vec![ex.shape], n, example));
                }
            }
        }
    }
    let _ = writeln!(out, "\n## Validity violations\n");
    if found.is_empty() {
        let _ = writeln!(out, "No request of any run breaks a provider rule.");
        return;
    }
    let _ = writeln!(out, "| strategy | rule | shapes | violations | first example | why |\n|---|---|---|---:|---|---|");
    for (strategy, rule, shapes, n, example) in &found {
        let base = compactbench_eval::variant::base(strategy);
        let why = meta
            .iter()
            .find(|m| m.id == base)
            .and_then(|m| m.violation_notes.iter().find(|(r, _)| r == rule))
            .map_or("**unexplained**: a bug until shown otherwise".to_owned(), |(_, note)| note.clone());
        let _ = writeln!(out, "| {strategy} | {rule} | {} | {n} | {example} | {why} |", shapes.join(", "));
    }
}

/// Whether some strategy (other than `none`, which never compacts) loses a fact another keeps.
fn discrimination(out: &mut String, runs: &[&RunResult]) {
    let compacting: Vec<&&RunResult> = runs.iter().filter(|r| r.strategy != "none").collect();
    let mut lose: Vec<&str> = Vec::new();
    let mut keep: Vec<&str> = Vec::new();
    for r in &compacting {
        for f in &r.facts {
            let others = compacting.iter().filter(|o| o.seed == r.seed && o.strategy != r.strategy);
            let kept_elsewhere = others.clone().any(|o| o.facts.iter().any(|g| g.id == f.id && retained(g.last)));
            if !retained(f.last) && kept_elsewhere {
                lose.push(&r.strategy);
            }
            if retained(f.last) && others.clone().any(|o| o.facts.iter().any(|g| g.id == f.id && !retained(g.last))) {
                keep.push(&r.strategy);
            }
        }
    }
    lose.sort_unstable();
    lose.dedup();
    keep.sort_unstable();
    keep.dedup();
    if lose.is_empty() {
        let _ = writeln!(out, "\nDiscriminates: **no** — no fact is lost by one compacting strategy and kept by another.");
    } else {
        let _ = writeln!(out, "\nDiscriminates: **yes** — facts kept by some strategies are lost by {}; kept by {}.", lose.join(", "), keep.join(", "));
    }
}

/// Column heads of the per-scenario table (report.md and report.html show the same table).
pub(crate) const MAIN_HEADER: [&str; 19] = [
    "strategy",
    "requests",
    "compactions",
    "events",
    "failed",
    "peak tokens",
    "mean tokens",
    "total input",
    "cached",
    "over window",
    "cost $",
    "compaction $ (share)",
    "violations chat/resp/anth/gem",
    "facts",
    "verbatim %",
    "recoverable %",
    "lost %",
    "stale %",
    "summarizer in/out",
];

/// One row of the per-scenario table, formatted, in [`MAIN_HEADER`] order.
pub(crate) fn main_cells(r: &Row) -> [String; 19] {
    [
        r.strategy.clone(),
        num(r.requests),
        num(r.compactions),
        if r.events.is_empty() { "–".to_owned() } else { r.events.clone() },
        num(r.failed_compactions),
        r.peak_tokens.to_string(),
        num(r.mean_tokens.round()),
        num(r.total_input_tokens.round()),
        format!("{:.0}%", 100.0 * r.cached_share),
        num(r.over_window_requests),
        format!("{:.2}", r.cost_usd),
        if r.compaction_input_tokens == 0.0 { "–".to_owned() } else { format!("{:.3} ({:.0}%)", r.compaction_cost_usd, 100.0 * r.compaction_cost_share) },
        format!("{}/{}/{}/{}", r.violations_openai_chat, r.violations_openai_responses, r.violations_anthropic, r.violations_gemini),
        r.facts.to_string(),
        format!("{:.0}", r.verbatim_pct),
        format!("{:.0}", r.recoverable_pct),
        format!("{:.0}", r.lost_pct),
        format!("{:.0}", r.stale_pct),
        format!("{}/{}", num(r.summarizer_input_tokens.round()), num(r.summarizer_output_tokens.round())),
    ]
}

/// The Markdown report: strategies, then per scenario the main table, retention by fact
/// kind and by round, and whether the scenario tells strategies apart.
///
/// Rows and runs of other summarizers than `summarizer` (the bounds) appear only in the
/// bounds table.
pub fn markdown(scenarios: &[Scenario], meta: &[StrategyMeta], rows: &[Row], runs: &[RunResult], summarizer: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# compactbench report\n");
    let _ = writeln!(out, "Summarizer: `{summarizer}`. Tokens are exact (tiktoken) per request. Facts: state at the last request that needed each fact. Column dictionary: reports/README.md.\n");
    crate::glance::markdown(&mut out, meta, rows, summarizer);
    let _ = writeln!(out, "## Strategies\n");
    let _ = writeln!(out, "| strategy | fidelity | differential check | agreement with the original's code | source | what it does |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for m in meta {
        let (check, agreement) = (m.check.as_deref().unwrap_or("–"), m.agreement.as_deref().unwrap_or("–"));
        let _ = writeln!(out, "| {} | {} | {check} | {agreement} | {} | {} |", m.id, m.fidelity, m.source, m.summary);
    }
    let _ = writeln!(out, "\nDifferential check: what the crate is compared with, the original's own functions from its published package or its CLI run whole against a scripted model server. Agreement: trigger decisions and selections (first kept entry, kept set, split turn) that match the original package's own functions on seeded sessions; `cargo xtask fidelity` measures both (reports/fidelity/report.md).");
    let primary: Vec<&RunResult> = runs.iter().filter(|r| r.summarizer == summarizer).collect();
    violations(&mut out, meta, runs);
    let strategies = crate::row::strategies(rows, summarizer);
    crate::failure_modes::failure_modes(&mut out, &primary, &strategies);
    crate::triggers::triggers(&mut out, &primary, &strategies);
    crate::pressure::pressure_table(&mut out, &primary, &strategies);
    position(&mut out, &primary, &strategies);
    crate::judged::judged(&mut out, &primary, &strategies);
    crate::instructions::instructions(&mut out, runs, summarizer, &strategies);
    for sc in scenarios {
        let here: Vec<&Row> = rows.iter().filter(|r| r.scenario == sc.name && r.summarizer == summarizer).collect();
        if here.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n## {}\n", sc.name);
        let _ = writeln!(
            out,
            "{} Model `{}`: window {}, max output {}, provider {}.\n",
            sc.description,
            sc.model.name,
            sc.model.window,
            sc.model.max_output,
            sc.model.provider.as_str()
        );
        let _ = writeln!(out, "| {} |", MAIN_HEADER.join(" | "));
        let _ = writeln!(out, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|");
        for r in &here {
            let _ = writeln!(out, "| {} |", main_cells(r).join(" | "));
        }
        let scenario_runs: Vec<&RunResult> = runs.iter().filter(|r| r.scenario == sc.name && r.summarizer == summarizer).collect();
        let strategies: Vec<&str> = here.iter().map(|r| r.strategy.as_str()).collect();
        retention_tables(&mut out, &scenario_runs, &strategies);
        discrimination(&mut out, &scenario_runs);
        bounds_table(&mut out, rows, &sc.name, summarizer);
        crate::isolation::isolation_table(&mut out, &here);
        crate::ground_truth::ground_truth(&mut out, sc, &scenario_runs);
    }
    out
}

/// Where the matrix's wall time went, per strategy and phase (not deterministic, so it lives
/// outside report.md and results.json). `run_phases` are the run-level phases the CLI timed
/// (generation, the matrix, each report file), in order.
pub(crate) fn timing(runs: &[RunResult], run_phases: &[(&str, std::time::Duration)]) -> String {
    let mut per: Vec<(String, u64, Phases)> = Vec::new();
    let mut all = Phases::default();
    for r in runs {
        let n = r.compactions.len() as u64;
        all.add(&r.phases);
        match per.iter_mut().find(|p| p.0 == r.strategy) {
            Some(p) => {
                p.1 += n;
                p.2.add(&r.phases);
            }
            None => per.push((r.strategy.clone(), n, r.phases)),
        }
    }
    let ms = |us: u64| format!("{:.1}", us as f64 / 1000.0);
    let mut out = String::from("# Timing (wall clock, this machine, not deterministic)\n\n");
    if !run_phases.is_empty() {
        out.push_str("## Run\n\n| phase | seconds |\n|---|---:|\n");
        for (name, d) in run_phases {
            let _ = writeln!(out, "| {name} | {:.2} |", d.as_secs_f64());
        }
        out.push('\n');
    }
    out.push_str("## Inside the runs (summed over worker threads)\n\n");
    out.push_str("Milliseconds per phase: `project` builds views, `decide` asks the trigger, `compact` runs the compaction (its summarizer calls in `summarize`), `measure` counts exact tokens (tiktoken, memoized per message), `validate` lowers to the four provider shapes and validates, `probe` searches needles and reads offloads.\n\n");
    out.push_str("| strategy | compactions | project | decide | compact | of which summarize | measure | validate | probe | mean µs per compaction |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (s, n, p) in per.iter().chain(std::iter::once(&("**all**".to_owned(), runs.iter().map(|r| r.compactions.len() as u64).sum(), all))) {
        let _ = writeln!(
            out,
            "| {s} | {n} | {} | {} | {} | {} | {} | {} | {} | {} |",
            ms(p.project),
            ms(p.decide),
            ms(p.compact),
            ms(p.summarize),
            ms(p.measure),
            ms(p.validate),
            ms(p.probe),
            p.compact.checked_div(*n).unwrap_or(0)
        );
    }
    out
}
