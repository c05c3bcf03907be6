//! The data behind every chart of `report.html`, computed before anything is drawn.
//!
//! The drawing code (`html.rs`) reads only these structs, so a snapshot of their text rendering
//! ([`Charts::text`]) pins what each chart says without pinning SVG pixels, which would break on
//! any cosmetic change.

use compactbench_eval::facts::FactKind;
use compactbench_eval::results::{RunResult, Status};
use compactbench_eval::scenario::Scenario;

use crate::markdown::DRIFT_ROUNDS;
use crate::triggers::Spread;
use crate::Row;

/// Facts by state: the stacks of a retention bar.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Split {
    pub(crate) verbatim: u32,
    pub(crate) recoverable: u32,
    pub(crate) lost: u32,
    /// An old value shown as current (`superseded_value` facts).
    pub(crate) stale: u32,
}

impl Split {
    fn add(&mut self, s: Status) {
        match s {
            Status::VerbatimKept | Status::VerbatimInjected | Status::VerbatimSummary => self.verbatim += 1,
            Status::Recoverable => self.recoverable += 1,
            Status::Lost => self.lost += 1,
            Status::Stale => self.stale += 1,
        }
    }

    pub(crate) fn total(self) -> u32 {
        self.verbatim + self.recoverable + self.lost + self.stale
    }

    /// `verbatim/recoverable/lost`, with `/stale` when any.
    #[cfg(test)]
    fn text(self) -> String {
        match (self.total(), self.stale) {
            (0, _) => "–".to_owned(),
            (_, 0) => format!("{}/{}/{}", self.verbatim, self.recoverable, self.lost),
            _ => format!("{}/{}/{}/{}", self.verbatim, self.recoverable, self.lost, self.stale),
        }
    }
}

/// A compaction attempt on a timeline.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Mark {
    /// The request it preceded (its x).
    pub(crate) request: u32,
    /// That request's tokens (its y: the mark sits on the line).
    pub(crate) tokens: u64,
    /// Exact tokens of the view just before it.
    pub(crate) before: u64,
    /// It returned an error and appended nothing.
    pub(crate) failed: bool,
}

/// One strategy's request sizes on one scenario and seed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Panel {
    pub(crate) strategy: String,
    /// Tokens of request 0, 1, ….
    pub(crate) tokens: Vec<u64>,
    pub(crate) marks: Vec<Mark>,
    /// The smallest view (exact tokens) at which it compacted proactively, before any request
    /// overflowed. It is what the run shows of the trigger: strategies trigger on their own
    /// estimates (not exact counts), and some on message counts, so their configured threshold
    /// cannot be drawn honestly in exact tokens; this line is the lowest observed firing point.
    pub(crate) lowest_trigger: Option<u64>,
}

/// The saw-tooth of every strategy on one scenario.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Timeline {
    pub(crate) scenario: String,
    pub(crate) window: u64,
    /// The seed shown: the lowest one run (timelines of different seeds do not average).
    pub(crate) seed: u64,
    pub(crate) panels: Vec<Panel>,
}

/// A strategy on the cost / retention plane, pooled over scenarios.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Point {
    pub(crate) strategy: String,
    /// Sum over scenarios of the mean cost per session: one session of each scenario.
    pub(crate) cost: f64,
    /// Verbatim + recoverable, % of all facts of all scenarios.
    pub(crate) retained: f64,
    /// No other strategy is as cheap and retains as much, with one of the two strictly better.
    pub(crate) front: bool,
}

/// Everything report.html draws. Only rows and runs of the primary summarizer take part; the
/// bounds (null, oracle) are in report.md's bounds table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Charts {
    /// Strategies in report order; a strategy's colour is its position here.
    pub(crate) strategies: Vec<String>,
    pub(crate) timelines: Vec<Timeline>,
    /// Kinds with at least one fact, in report order.
    pub(crate) kinds: Vec<FactKind>,
    /// Per strategy: a split per kind of `kinds`, then one over all kinds.
    pub(crate) by_kind: Vec<Vec<Split>>,
    /// Per strategy: a split per round `1..=DRIFT_ROUNDS` (facts that went through that many
    /// compactions, at the first request after the last of them).
    pub(crate) drift: Vec<Vec<Split>>,
    pub(crate) scatter: Vec<Point>,
    /// Per strategy: violations per provider shape (`Shape::ALL` order), all scenarios.
    pub(crate) violations: Vec<[u64; 4]>,
    /// Per strategy: usage at compaction, all scenarios (`None`: it never compacted).
    pub(crate) triggers: Vec<Option<Spread>>,
}

impl Charts {
    pub(crate) fn new(scenarios: &[Scenario], rows: &[Row], runs: &[RunResult], summarizer: &str) -> Charts {
        let strategies: Vec<String> = crate::row::strategies(rows, summarizer).into_iter().map(str::to_owned).collect();
        let rows: Vec<&Row> = rows.iter().filter(|r| r.summarizer == summarizer).collect();
        let runs: Vec<&RunResult> = runs.iter().filter(|r| r.summarizer == summarizer).collect();
        let timelines = scenarios.iter().filter_map(|sc| timeline(sc, &strategies, &runs)).collect();
        let kinds: Vec<FactKind> = FactKind::ALL.into_iter().filter(|k| runs.iter().any(|r| r.facts.iter().any(|f| f.kind == *k))).collect();
        let mine = |st: &String| runs.iter().copied().filter(|r| &r.strategy == st).collect::<Vec<_>>();
        let by_kind = strategies
            .iter()
            .map(|st| {
                let mut splits = vec![Split::default(); kinds.len() + 1];
                for f in mine(st).iter().flat_map(|r| &r.facts) {
                    let k = kinds.iter().position(|k| *k == f.kind).expect("kinds holds every kind seen");
                    splits[k].add(f.last);
                    splits[kinds.len()].add(f.last);
                }
                splits
            })
            .collect();
        let drift = strategies
            .iter()
            .map(|st| {
                let mut splits = vec![Split::default(); DRIFT_ROUNDS];
                for f in mine(st).iter().flat_map(|r| &r.facts) {
                    for (split, s) in splits.iter_mut().zip(&f.after_round) {
                        split.add(*s);
                    }
                }
                splits
            })
            .collect();
        let mut scatter: Vec<Point> = strategies
            .iter()
            .map(|st| {
                let here = rows.iter().copied().filter(|r| &r.strategy == st);
                Point {
                    strategy: st.clone(),
                    cost: round3(here.clone().map(|r| r.cost_usd).sum()),
                    retained: crate::row::retained(here).map_or(0.0, round3),
                    front: false,
                }
            })
            .collect();
        for i in 0..scatter.len() {
            let p = &scatter[i];
            let dominated = scatter.iter().any(|q| q.cost <= p.cost && q.retained >= p.retained && (q.cost < p.cost || q.retained > p.retained));
            scatter[i].front = !dominated;
        }
        let violations = strategies
            .iter()
            .map(|st| {
                let mut v = [0u64; 4];
                for r in rows.iter().filter(|r| &r.strategy == st) {
                    let w = [r.violations_openai_chat, r.violations_openai_responses, r.violations_anthropic, r.violations_gemini];
                    for (a, b) in v.iter_mut().zip(w) {
                        *a += b;
                    }
                }
                v
            })
            .collect();
        let triggers = strategies.iter().map(|st| crate::triggers::spread(&mine(st))).collect();
        Charts { strategies, timelines, kinds, by_kind, drift, scatter, violations, triggers }
    }

    /// A compact text rendering of every number the charts draw (for snapshot tests).
    #[cfg(test)]
    pub(crate) fn text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for t in &self.timelines {
            let _ = writeln!(out, "timeline {} (window {}, seed {}): tokens per request | compactions request:before>on-line (x failed) | lowest trigger", t.scenario, t.window, t.seed);
            for p in &t.panels {
                let tokens: Vec<String> = p.tokens.iter().map(u64::to_string).collect();
                let marks: Vec<String> =
                    p.marks.iter().map(|m| format!("{}:{}>{}{}", m.request, m.before, m.tokens, if m.failed { "x" } else { "" })).collect();
                let trigger = p.lowest_trigger.map_or("–".to_owned(), |t| t.to_string());
                let _ = writeln!(out, "  {}: {} | {} | {trigger}", p.strategy, tokens.join(" "), if marks.is_empty() { "–".to_owned() } else { marks.join(" ") });
            }
        }
        let kinds: Vec<&str> = self.kinds.iter().map(|k| k.as_str()).chain(["all"]).collect();
        let _ = writeln!(out, "retention by kind, verbatim/recoverable/lost[/stale]: {}", kinds.join(" "));
        for (st, splits) in self.strategies.iter().zip(&self.by_kind) {
            let _ = writeln!(out, "  {st}: {}", splits.iter().map(|s| s.text()).collect::<Vec<_>>().join(" "));
        }
        let _ = writeln!(out, "drift, verbatim/recoverable/lost[/stale] after round 1..{DRIFT_ROUNDS}");
        for (st, splits) in self.strategies.iter().zip(&self.drift) {
            let _ = writeln!(out, "  {st}: {}", splits.iter().map(|s| s.text()).collect::<Vec<_>>().join(" "));
        }
        let _ = writeln!(out, "cost $ vs retained % (* Pareto front)");
        for p in &self.scatter {
            let _ = writeln!(out, "  {}: {:.3} {:.1}{}", p.strategy, p.cost, p.retained, if p.front { " *" } else { "" });
        }
        let _ = writeln!(out, "violations chat/resp/anth/gem");
        for (st, v) in self.strategies.iter().zip(&self.violations) {
            let _ = writeln!(out, "  {st}: {}/{}/{}/{}", v[0], v[1], v[2], v[3]);
        }
        let _ = writeln!(out, "usage at compaction % min/p10/median/p90/max, mid-loop of n");
        for (st, t) in self.strategies.iter().zip(&self.triggers) {
            let t = t.as_ref().map_or("–".to_owned(), |t| format!("{}/{}/{}/{}/{}, {} of {}", t.min, t.p10, t.median, t.p90, t.max, t.mid_loop, t.compactions));
            let _ = writeln!(out, "  {st}: {t}");
        }
        out
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The scenario's timeline at its lowest seed, one panel per strategy that ran on it.
fn timeline(sc: &Scenario, strategies: &[String], runs: &[&RunResult]) -> Option<Timeline> {
    let here: Vec<&&RunResult> = runs.iter().filter(|r| r.scenario == sc.name).collect();
    let seed = here.iter().map(|r| r.seed).min()?;
    let panels = strategies
        .iter()
        .filter_map(|st| here.iter().find(|r| &r.strategy == st && r.seed == seed))
        .map(|r| {
            let tokens: Vec<u64> = r.requests.iter().map(|q| q.tokens).collect();
            let marks = r
                .compactions
                .iter()
                .map(|c| Mark {
                    request: c.request,
                    tokens: r.requests.iter().find(|q| q.index == c.request).map_or(c.tokens_after, |q| q.tokens),
                    before: c.tokens_before,
                    failed: c.error.is_some(),
                })
                .collect();
            // Overflow compactions fire at the window, not at the strategy's own trigger.
            let lowest_trigger = r.compactions.iter().filter(|c| c.error.is_none() && c.moment != "overflow").map(|c| c.tokens_before).min();
            Panel { strategy: r.strategy.clone(), tokens, marks, lowest_trigger }
        })
        .collect();
    Some(Timeline { scenario: sc.name.clone(), window: sc.model.window, seed, panels })
}
