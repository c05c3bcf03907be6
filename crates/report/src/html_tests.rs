//! report.html: snapshots of the chart data (what each chart draws, as text; pixels are not
//! pinned), and the page's self-containment and determinism.

use compactbench_eval::results::{CompactionRecord, RunResult};
use expect_test::expect;

use crate::charts::Charts;
use crate::html::html;
use crate::rows;
use crate::tests::{runs, scenario};

/// The shared hand-built runs, plus a failed compaction attempt on `trunc` (so the timeline
/// data shows one) and a second seed of `none` (so the timeline shows seed 0 only).
fn chart_runs() -> Vec<RunResult> {
    let mut runs = runs();
    let trunc = runs.iter_mut().find(|r| r.strategy == "trunc").unwrap();
    let failed = CompactionRecord { request: 0, kinds: vec![], tokens_after: 1400, error: Some("boom".into()), ..trunc.compactions[0].clone() };
    trunc.compactions.insert(0, failed);
    let mut none1 = runs[0].clone();
    none1.seed = 1;
    none1.requests[1].tokens = 3000;
    runs.insert(1, none1);
    runs
}

#[test]
fn chart_data_snapshot() {
    let runs = chart_runs();
    let charts = Charts::new(&[scenario()], &rows(&[scenario()], &runs), &runs, "extractive");
    expect![[r#"
        timeline tiny (window 2000, seed 0): tokens per request | compactions request:before>on-line (x failed) | lowest trigger
          none: 1500 2500 | – | –
          sum: 1500 700 | 1:1900>700 | 1900
          sum+delegate: 1500 700 | 1:1900>700 | 1900
          trunc: 1500 900 | 0:1900>1500x 1:1900>900 | 1900
        retention by kind, verbatim/recoverable/lost[/stale]: error_message decision superseded_value all
          none: 2/0/0 2/0/0 2/0/0 6/0/0
          sum: 1/0/0 0/0/1 0/0/0/1 1/0/1/1
          sum+delegate: 1/0/0 0/0/1 0/0/0/1 1/0/1/1
          trunc: 0/0/1 0/1/0 0/0/1 0/1/2
        drift, verbatim/recoverable/lost[/stale] after round 1..8
          none: – – – – – – – –
          sum: 1/0/1/1 – – – – – – –
          sum+delegate: 1/0/1/1 – – – – – – –
          trunc: 0/1/2 – – – – – – –
        cost $ vs retained % (* Pareto front)
          none: 0.009 100.0 *
          sum: 0.012 33.3
          sum+delegate: 0.016 33.3
          trunc: 0.008 33.3 *
        violations chat/resp/anth/gem
          none: 0/0/4/0
          sum: 0/0/2/0
          sum+delegate: 0/0/2/0
          trunc: 0/0/2/0
        usage at compaction % min/p10/median/p90/max, mid-loop of n
          none: –
          sum: 95/95/95/95/95, 0 of 1
          sum+delegate: 95/95/95/95/95, 0 of 1
          trunc: 95/95/95/95/95, 0 of 1
    "#]]
    .assert_eq(&charts.text());
}

#[test]
fn page_is_self_contained_and_deterministic() {
    let runs = chart_runs();
    let page = || {
        let rows = rows(&[scenario()], &runs);
        html(&[scenario()], &[], &rows, &Charts::new(&[scenario()], &rows, &runs, "extractive"), "extractive").unwrap()
    };
    let a = page();
    assert_eq!(a, page());
    // Scatter, retention by kind, drift, triggers, violations, one timeline per scenario.
    assert_eq!(a.matches("<svg").count(), 6);
    // Nothing to fetch: the SVG namespace is an identifier, not a load.
    let loads = a.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for absent in ["<script", "http:", "https:", "@import", "url("] {
        assert!(!loads.contains(absent), "{absent}");
    }
    for family in a.split("font-family=\"").skip(1).map(|s| s.split('"').next().unwrap()) {
        assert_eq!(family, "sans-serif");
    }
    // The table repeats report.md's numbers.
    assert!(a.contains("<td>sum</td><td class=\"n\">2</td><td class=\"n\">1</td><td class=\"n\">summary 1</td>"), "{a}");
}
