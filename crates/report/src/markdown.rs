//! `report.md` and `timing.md`.

use std::fmt::Write;

use compactbench_eval::results::RunResult;
use compactbench_eval::scenario::Scenario;

use crate::{Row, StrategyMeta};

fn num(x: f64) -> String {
    if x.fract() == 0.0 { format!("{x:.0}") } else { format!("{x:.1}") }
}

/// The Markdown report: strategies, then one table per scenario.
pub fn markdown(scenarios: &[Scenario], meta: &[StrategyMeta], rows: &[Row], summarizer: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# compactbench report\n");
    let _ = writeln!(out, "Summarizer: `{summarizer}`. Tokens are exact (tiktoken) per request. Facts: state at the last request that needed each fact. Column dictionary: reports/README.md.\n");
    let _ = writeln!(out, "## Strategies\n");
    let _ = writeln!(out, "| strategy | fidelity | source | what it does |");
    let _ = writeln!(out, "|---|---|---|---|");
    for m in meta {
        let _ = writeln!(out, "| {} | {} | {} | {} |", m.id, m.fidelity, m.source, m.summary);
    }
    for sc in scenarios {
        let here: Vec<&Row> = rows.iter().filter(|r| r.scenario == sc.name).collect();
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
        let _ = writeln!(out, "| strategy | requests | compactions | failed | peak tokens | mean tokens | total input | cached | over window | cost $ | violations chat/resp/anth/gem | facts | verbatim % | recoverable % | lost % | summarizer in/out |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|");
        for r in here {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {:.0}% | {} | {:.2} | {}/{}/{}/{} | {} | {:.0} | {:.0} | {:.0} | {}/{} |",
                r.strategy,
                num(r.requests),
                num(r.compactions),
                num(r.failed_compactions),
                r.peak_tokens,
                num(r.mean_tokens.round()),
                num(r.total_input_tokens.round()),
                100.0 * r.cached_share,
                num(r.over_window_requests),
                r.cost_usd,
                r.violations_openai_chat,
                r.violations_openai_responses,
                r.violations_anthropic,
                r.violations_gemini,
                r.facts,
                r.verbatim_pct,
                r.recoverable_pct,
                r.lost_pct,
                num(r.summarizer_input_tokens.round()),
                num(r.summarizer_output_tokens.round()),
            );
        }
    }
    out
}

/// Wall time spent inside strategies' `compact`, per strategy (not deterministic, so it
/// lives outside report.md and results.json).
pub(crate) fn timing(runs: &[RunResult]) -> String {
    let mut per: Vec<(String, u64, u64)> = Vec::new();
    for r in runs {
        let n = r.compactions.len() as u64;
        match per.iter_mut().find(|p| p.0 == r.strategy) {
            Some(p) => {
                p.1 += r.compact_micros;
                p.2 += n;
            }
            None => per.push((r.strategy.clone(), r.compact_micros, n)),
        }
    }
    let mut out = String::from("# Timing (wall clock, this machine, not deterministic)\n\n| strategy | compactions | total ms in compact | mean µs per compaction |\n|---|---:|---:|---:|\n");
    for (s, micros, n) in per {
        let _ = writeln!(out, "| {s} | {n} | {:.1} | {} |", micros as f64 / 1000.0, micros.checked_div(n).unwrap_or(0));
    }
    out
}
