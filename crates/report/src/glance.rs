//! The report's opening table: the user's question answered in one row per strategy — how much
//! it keeps (with the primary summarizer, the prompted one and the oracle bound), what a session
//! of every scenario costs, whether its requests stay valid, and how closely it follows its
//! original.

use std::fmt::Write;

use crate::row::retained;
use crate::{Row, StrategyMeta};

/// One strategy at a glance, pooled over scenarios.
pub(crate) struct Glance<'a> {
    pub(crate) strategy: &'a str,
    /// `source`, `modelled` or `baseline` (of the strategy a variant row belongs to).
    pub(crate) fidelity: &'a str,
    /// Verbatim + recoverable, % of all facts: primary summarizer, prompted, oracle (`None`
    /// where the run has no such rows).
    pub(crate) retained: [Option<f64>; 3],
    /// Mean cost per session, summed over scenarios (primary summarizer).
    pub(crate) cost: f64,
    /// Of `cost`, the compactions' summary calls (measured as requests).
    pub(crate) compaction_cost: f64,
    /// Violations over every shape, scenario and seed (primary summarizer).
    pub(crate) violations: u64,
    pub(crate) agreement: Option<&'a str>,
}

/// A row per strategy of the primary summarizer, in report order.
pub(crate) fn glance<'a>(meta: &'a [StrategyMeta], rows: &'a [Row], primary: &'a str) -> Vec<Glance<'a>> {
    crate::row::strategies(rows, primary)
        .into_iter()
        .map(|st| {
            let with = |summarizer: &'a str| rows.iter().filter(move |r| r.strategy == st && r.summarizer == summarizer);
            let meta = meta.iter().find(|m| m.id == compactbench_eval::variant::base(st));
            Glance {
                strategy: st,
                fidelity: meta.map_or("–", |m| m.fidelity),
                retained: [retained(with(primary)), retained(with("prompted")), retained(with("oracle"))],
                cost: with(primary).map(|r| r.cost_usd).sum(),
                compaction_cost: with(primary).map(|r| r.compaction_cost_usd).fold(0.0, |a, b| a + b),
                violations: with(primary).map(|r| r.violations_openai_chat + r.violations_openai_responses + r.violations_anthropic + r.violations_gemini).sum(),
                agreement: meta.and_then(|m| m.agreement.as_deref()),
            }
        })
        .collect()
}

/// The table's header and cells, shared by report.md and report.html.
pub(crate) fn header(primary: &str) -> [String; 9] {
    [
        "strategy".into(),
        "fidelity".into(),
        format!("retained % ({primary})"),
        "prompted".into(),
        "oracle".into(),
        "cost $ (one session of each scenario)".into(),
        "of which compaction $ (share)".into(),
        "violations".into(),
        "agreement with the original's code".into(),
    ]
}

pub(crate) fn cells(g: &Glance<'_>) -> [String; 9] {
    let pct = |x: Option<f64>| x.map_or("–".to_owned(), |x| format!("{x:.0}"));
    [
        g.strategy.to_owned(),
        g.fidelity.to_owned(),
        pct(g.retained[0]),
        pct(g.retained[1]),
        pct(g.retained[2]),
        format!("{:.2}", g.cost),
        if g.compaction_cost == 0.0 { "–".to_owned() } else { format!("{:.2} ({:.0}%)", g.compaction_cost, 100.0 * g.compaction_cost / g.cost) },
        g.violations.to_string(),
        g.agreement.unwrap_or("–").to_owned(),
    ]
}

/// Appends the table to report.md.
pub(crate) fn markdown(out: &mut String, meta: &[StrategyMeta], rows: &[Row], primary: &str) {
    let _ = writeln!(out, "## At a glance\n");
    let _ = writeln!(
        out,
        "Pooled over every scenario and seed. Retained: facts verbatim in, or recoverable from, the last request that needed them (prompted: the offline summarizer that fills the sections the strategy's own prompt asks for; oracle: a summary that keeps every fact that fits). Cost: a session of each scenario under its pricing; of which compaction: its summary calls, each priced as the request its harness sends (the conversation as its own cached prefix, or a fresh prompt that misses the cache). Violations: provider rules broken, all four shapes. `modelled` strategies are closed source: their rows are our reading of their documentation.\n"
    );
    let _ = writeln!(out, "| {} |", header(primary).join(" | "));
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---|");
    for g in glance(meta, rows, primary) {
        let _ = writeln!(out, "| {} |", cells(&g).join(" | "));
    }
    out.push('\n');
}
