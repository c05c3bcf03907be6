//! Snapshot tests of the Markdown report and the CSV rows, on hand-built runs.

use std::collections::BTreeMap;
use std::path::Path;

use compactbench_eval::facts::FactKind;
use compactbench_eval::results::{CompactionRecord, FactOutcome, RequestRecord, RunResult, Status};
use compactbench_eval::scenario::Scenario;
use expect_test::expect;

use crate::{markdown, rows, StrategyMeta};

pub(crate) fn scenario() -> Scenario {
    let text = r#"
name = "tiny"
description = "A hand-built scenario."
[model]
name = "m"
window = 2000
max_output = 100
provider = "anthropic"
pricing = { input = 3.0, cached_input = 0.3, output = 15.0 }
[session]
turns = 2
steps_per_turn = [1, 1]
"#;
    Scenario::parse(Path::new("tiny.toml"), text).unwrap()
}

fn request(index: u32, tokens: u64, cached: u64, rounds: u32) -> RequestRecord {
    RequestRecord { index, step: index * 2 + 1, tokens, cached_tokens: cached, messages: 3, overflow: tokens > 2000, rounds, violations: [0, 0, 1, 0] }
}

fn fact(id: &str, kind: FactKind, last: Status, after_round: Vec<Status>) -> FactOutcome {
    let lost = last == Status::Lost;
    FactOutcome {
        id: id.into(),
        kind,
        planted_quarter: if id == "f0" { 1 } else { 3 },
        needed: 2,
        probes: BTreeMap::from([(last, 2)]),
        last,
        lost_at: lost.then_some(1),
        lost_after_rounds: lost.then_some(1),
        lost_by: lost.then_some(0),
        after_round,
        judged: None,
        named_by: None,
    }
}

pub(crate) fn runs() -> Vec<RunResult> {
    let compaction = CompactionRecord {
        request: 1,
        step: 3,
        first_kept_step: Some(2),
        moment: "turn_end",
        mid_loop: false,
        reason: "threshold".into(),
        kinds: vec!["summary"],
        tokens_before: 1900,
        tokens_after: 600,
        estimated_before: 1850,
        injected_tokens: 0,
        summarizer_calls: 1,
        summarizer_input: 1800,
        summarizer_output: 200,
        // Used although cut off: the failure-mode table must say so.
        summaries_cut_off: 1,
        // The view as the request's own prefix (1,900) plus the instruction (100), 1,500 of it
        // shared with the last main request.
        summary_context: "prefix",
        summary_request_tokens: 2000,
        summary_cached_tokens: 1500,
        summary_output_tokens: 200,
        summary_calls_over_window: 0,
        error: None,
    };
    let base = |strategy: &str| RunResult {
        strategy: strategy.into(),
        scenario: "tiny".into(),
        seed: 0,
        summarizer: "extractive".into(),
        window: 2000,
        requests: vec![],
        compactions: vec![],
        facts: vec![],
        violations: BTreeMap::new(),
        violation_examples: Vec::new(),
        log_entries: 5,
        output_tokens: 50,
        instructed: Default::default(),
        child: Default::default(),
        phases: Default::default(),
    };
    let mut none = base("none");
    none.requests = vec![request(0, 1500, 0, 0), request(1, 2500, 1500, 0)];
    none.facts = vec![
        fact("f0", FactKind::ErrorMessage, Status::VerbatimKept, vec![]),
        fact("f1", FactKind::Decision, Status::VerbatimKept, vec![]),
        fact("f2", FactKind::SupersededValue, Status::VerbatimKept, vec![]),
    ];
    let mut s = base("sum");
    s.requests = vec![request(0, 1500, 0, 0), request(1, 700, 0, 1)];
    s.compactions = vec![compaction];
    s.facts = vec![
        fact("f0", FactKind::ErrorMessage, Status::VerbatimSummary, vec![Status::VerbatimSummary]),
        fact("f1", FactKind::Decision, Status::Lost, vec![Status::Lost]),
        // The summary kept an old value without the change that replaced it.
        fact("f2", FactKind::SupersededValue, Status::Stale, vec![Status::Stale]),
    ];
    let mut t = base("trunc");
    t.requests = vec![request(0, 1500, 0, 0), request(1, 900, 0, 1)];
    t.compactions = vec![CompactionRecord { kinds: vec!["truncate"], summarizer_calls: 0, summarizer_input: 0, summarizer_output: 0, summaries_cut_off: 0, summary_context: "", summary_request_tokens: 0, summary_cached_tokens: 0, summary_output_tokens: 0, ..s.compactions[0].clone() }];
    t.facts = vec![
        fact("f0", FactKind::ErrorMessage, Status::Lost, vec![Status::Lost]),
        fact("f1", FactKind::Decision, Status::Recoverable, vec![Status::Recoverable]),
        fact("f2", FactKind::SupersededValue, Status::Lost, vec![Status::Lost]),
    ];
    let mut oracle = s.clone();
    oracle.summarizer = "oracle".into();
    oracle.facts[1].last = Status::VerbatimSummary;
    let mut delegated = s.clone();
    delegated.strategy = "sum+delegate".into();
    delegated.child = compactbench_eval::results::ChildCost { requests: 2, input_tokens: 900, cached_tokens: 400, output_tokens: 120 };
    vec![none, s, oracle, delegated, t]
}

#[test]
fn markdown_report_snapshot() {
    let meta = vec![StrategyMeta { id: "sum".into(), source: "owner/repo@abc1234".into(), fidelity: "source", summary: "summarizes".into(), agreement: None, check: None, violation_notes: Vec::new() }];
    let runs = runs();
    let md = markdown(&[scenario()], &meta, &rows(&[scenario()], &runs), &runs, "extractive");
    expect![[r#"
        # compactbench report

        Summarizer: `extractive`. Tokens are exact (tiktoken) per request. Facts: state at the last request that needed each fact. Column dictionary: reports/README.md.

        ## At a glance

        Pooled over every scenario and seed. Retained: facts verbatim in, or recoverable from, the last request that needed them (prompted: the offline summarizer that fills the sections the strategy's own prompt asks for; oracle: a summary that keeps every fact that fits). Cost: a session of each scenario under its pricing; of which compaction: its summary calls, each priced as the request its harness sends (the conversation as its own cached prefix, or a fresh prompt that misses the cache). Violations: provider rules broken, all four shapes. `modelled` strategies are closed source: their rows are our reading of their documentation.

        | strategy | fidelity | retained % (extractive) | prompted | oracle | cost $ (one session of each scenario) | of which compaction $ (share) | violations | agreement with the original's code |
        |---|---|---:|---:|---:|---:|---:|---:|---|
        | none | – | 100 | – | – | 0.01 | – | 2 | – |
        | sum | source | 33 | – | 67 | 0.01 | 0.01 (42%) | 2 | – |
        | sum+delegate | source | 33 | – | – | 0.02 | 0.01 (31%) | 2 | – |
        | trunc | – | 33 | – | – | 0.01 | – | 2 | – |

        ## Strategies

        | strategy | fidelity | differential check | agreement with the original's code | source | what it does |
        |---|---|---|---|---|---|
        | sum | source | – | – | owner/repo@abc1234 | summarizes |

        Differential check: what the crate is compared with, the original's own functions from its published package or its CLI run whole against a scripted model server. Agreement: trigger decisions and selections (first kept entry, kept set, split turn) that match the original package's own functions on seeded sessions; `cargo xtask fidelity` measures both (reports/fidelity/report.md).

        ## Validity violations

        No request of any run breaks a provider rule.

        ## Seed failure modes

        Over every scenario and seed. Truncation loop: summaries cut off at their output cap (compactions that used one anyway). The others: facts lost at the last request that needed them, of those planted — reasoning eviction `rejected_hypothesis` (only in thinking), negative search loss `negative_result`, diagnostic washout `error_message`.

        | strategy | truncation loop | reasoning eviction | negative search loss | diagnostic washout |
        |---|---:|---:|---:|---:|
        | none | 0 | – | – | 0/1 |
        | sum | 1 (1 used) | – | – | 0/1 |
        | sum+delegate | 1 (1 used) | – | – | 0/1 |
        | trunc | 0 | – | – | 1/1 |

        ## When compactions fire

        Over every scenario and seed, successful compactions only. Usage: the context just before the compaction by the runner's exact count, % of the scenario's window (min / p10 / median / p90 / max). Mid-loop: the newest message was a tool result, so the compaction interrupted the agent's loop (TraceLab's traces of real Claude Code and Codex sessions: 86.5%). No reduction: the context was not smaller after it; loops: such a compaction followed by another attempt at the same or the next request (refused summary requests and failed attempts: the next section).

        | strategy | compactions | usage min | p10 | median | p90 | max | mid-loop | no reduction | loops |
        |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
        | none | 0 | – | – | – | – | – | – | – | – |
        | sum | 1 | 95.0% | 95.0% | 95.0% | 95.0% | 95.0% | 0% | 0 | 0 |
        | sum+delegate | 1 | 95.0% | 95.0% | 95.0% | 95.0% | 95.0% | 0% | 0 | 0 |
        | trunc | 1 | 95.0% | 95.0% | 95.0% | 95.0% | 95.0% | 0% | 0 | 0 |

        ## Compaction under pressure

        No summary request exceeded the window and no compaction attempt failed.

        ## Retention by position in history

        Over every scenario and seed: facts by the quarter of the session (by step) they were planted in, 1st = oldest; retained (verbatim or recoverable) at the last request that needed them, of those needed.

        | strategy | 1st quarter | 2nd | 3rd | 4th |
        |---|---:|---:|---:|---:|
        | none | 1/1 | – | 2/2 | – |
        | sum | 1/1 | – | 0/2, 1 stale | – |
        | sum+delegate | 1/1 | – | 0/2, 1 stale | – |
        | trunc | 0/1 | – | 1/2 | – |

        ## tiny

        A hand-built scenario. Model `m`: window 2000, max output 100, provider anthropic.

        | strategy | requests | compactions | events | failed | peak tokens | mean tokens | total input | cached | over window | cost $ | compaction $ (share) | violations chat/resp/anth/gem | facts | verbatim % | recoverable % | lost % | stale % | summarizer in/out |
        |---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|
        | none | 2 | 0 | – | 0 | 2500 | 2000 | 4000 | 38% | 1 | 0.01 | – | 0/0/2/0 | 3 | 100 | 0 | 0 | 0 | 0/0 |
        | sum | 2 | 1 | summary 1 | 0 | 1500 | 1100 | 2200 | 0% | 0 | 0.01 | 0.005 (40%) | 0/0/2/0 | 3 | 33 | 0 | 33 | 33 | 1800/200 |
        | sum+delegate | 2 | 1 | summary 1 | 0 | 1500 | 1100 | 2200 | 0% | 0 | 0.02 | 0.005 (32%) | 0/0/2/0 | 3 | 33 | 0 | 33 | 33 | 1800/200 |
        | trunc | 2 | 1 | truncate 1 | 0 | 1500 | 1200 | 2400 | 0% | 0 | 0.01 | – | 0/0/2/0 | 3 | 0 | 33 | 67 | 0 | 0/0 |

        Retained (verbatim or recoverable) at the last request that needed it, by fact kind:

        | strategy | error_message | decision | superseded_value |
        |---|---:|---:|---:|
        | none | 1/1 | 1/1 | 1/1 |
        | sum | 1/1 | 0/1 | 0/1, 1 stale |
        | sum+delegate | 1/1 | 0/1 | 0/1, 1 stale |
        | trunc | 0/1 | 1/1 | 0/1 |

        Retained after the fact's 1st, 2nd, … compaction (facts that went through that many):

        | strategy | r1 | r2 | r3 | r4 | r5 | r6 | r7 | r8 |
        |---|---:|---:|---:|---:|---:|---:|---:|---:|
        | none | – | – | – | – | – | – | – | – |
        | sum | 1/3, 1 stale | – | – | – | – | – | – | – |
        | sum+delegate | 1/3, 1 stale | – | – | – | – | – | – | – |
        | trunc | 1/3 | – | – | – | – | – | – | – |

        `n stale`: of those facts, how many had a request showing a value the fact replaced without the statement that replaced it (`superseded_value` facts): not retained, and worse than lost.

        Discriminates: **yes** — facts kept by some strategies are lost by sum, sum+delegate, trunc; kept by sum, sum+delegate, trunc.

        Summary bounds — retained % (verbatim + recoverable) with the extractive summarizer, the prompted summarizer (offline: the sections the strategy's own summary prompt asks for, filled with matching transcript lines), a null summary (the extractive summary with every planted fact knocked out, same size) and an oracle summary (every planted fact that fits):

        | strategy | extractive | prompted | null | oracle |
        |---|---:|---:|---:|---:|
        | sum | 33 | – | – | 67 |

        Thread isolation vs in-place compaction (per session; cost includes subagents and prompt caching):

        | strategy | parent input tokens | subagent input tokens | cached | cost $ | retained % | compactions | handoffs |
        |---|---:|---:|---:|---:|---:|---:|---:|
        | sum | 2200 | 0 | 0% | 0.01 | 33 | 1.0 | 0 |
        | sum+delegate | 2200 | 900 | 0% | 0.02 | 33 | 1.0 | 0 |
    "#]].assert_eq(&md);
}

#[test]
fn judged_probes_sit_beside_the_needle_probes() {
    use compactbench_eval::judge::{Answer, Judged};
    let mut runs = runs();
    let md = |runs: &[RunResult]| markdown(&[scenario()], &[], &rows(&[scenario()], runs), runs, "extractive");
    assert!(!md(&runs).contains("Model-judged"), "no judge, no section");
    let judged = |answer| Some(Judged { request: 1, answer });
    // `sum`: the kept error quoted; the lost decision named all the same (rephrased).
    runs[1].facts[0].judged = judged(Answer::Quoted);
    runs[1].facts[1].judged = judged(Answer::Named);
    // `trunc`: the lost error missed; the recoverable decision's call failed.
    runs[4].facts[0].judged = judged(Answer::Missed);
    runs[4].facts[1].judged = judged(Answer::Failed);
    // `none`: a needle in the request that the model missed anyway.
    runs[0].facts[0].judged = judged(Answer::Missed);
    let out = md(&runs);
    let section = &out[out.find("## Model-judged probes").unwrap()..];
    let section = &section[..section.find("\n## tiny").unwrap()];
    expect![[r#"
        ## Model-judged probes

        The judge model answered one question per fact kind at the last request that needed each fact; its answer quoted the needle, named the fact's tagged key, missed, or the call failed. The last two columns compare with the needle probe of the same request.

        | strategy | judged | quoted | named | missed | failed | in request, missed | not in request, named |
        |---|---:|---:|---:|---:|---:|---:|---:|
        | none | 1 | 0% | 0% | 100% | 0 | 1 | 0 |
        | sum | 2 | 50% | 50% | 0% | 0 | 0 | 1 |
        | trunc | 2 | 0% | 0% | 50% | 1 | 0 | 0 |
    "#]]
    .assert_eq(section);
}

#[test]
fn csv_rows_snapshot() {
    let runs = runs();
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows(&[scenario()], &runs) {
        w.serialize(r).unwrap();
    }
    expect![[r#"
        scenario,strategy,summarizer,seeds,requests,compactions,events,failed_compactions,peak_tokens,mean_tokens,total_input_tokens,cached_share,over_window_requests,cost_usd,violations_openai_chat,violations_openai_responses,violations_anthropic,violations_gemini,facts,verbatim_pct,recoverable_pct,lost_pct,stale_pct,summarizer_input_tokens,summarizer_output_tokens,injected_tokens,child_input_tokens,compaction_input_tokens,compaction_cached_share,compaction_cost_usd,compaction_cost_share
        tiny,none,extractive,1,2.0,0.0,,0.0,2500,2000.0,4000.0,0.375,1.0,0.009,0,0,2,0,3,100.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0
        tiny,sum,extractive,1,2.0,1.0,summary 1,0.0,1500,1100.0,2200.0,0.0,0.0,0.012,0,0,2,0,3,33.333,0.0,33.333,33.333,1800.0,200.0,0.0,0.0,2000.0,0.75,0.005,0.402
        tiny,sum,oracle,1,2.0,1.0,summary 1,0.0,1500,1100.0,2200.0,0.0,0.0,0.012,0,0,2,0,3,66.667,0.0,0.0,33.333,1800.0,200.0,0.0,0.0,2000.0,0.75,0.005,0.402
        tiny,sum+delegate,extractive,1,2.0,1.0,summary 1,0.0,1500,1100.0,2200.0,0.0,0.0,0.016,0,0,2,0,3,33.333,0.0,33.333,33.333,1800.0,200.0,0.0,900.0,2000.0,0.75,0.005,0.315
        tiny,trunc,extractive,1,2.0,1.0,truncate 1,0.0,1500,1200.0,2400.0,0.0,0.0,0.008,0,0,2,0,3,0.0,33.333,66.667,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0
    "#]].assert_eq(&String::from_utf8(w.into_inner().unwrap()).unwrap());
}

/// Every violation in a run gets a row with its first example, explained by the strategy's own
/// note or marked unexplained.
#[test]
fn violations_are_listed_with_their_example_and_explanation() {
    use compactbench_eval::results::ViolationExample;
    let mut runs = runs();
    let example = |rule: &'static str| ViolationExample { shape: "anthropic", rule, request: 7, detail: "result for c1 has no call".into(), entries: vec![12] };
    runs[1].violations.entry("anthropic").or_default().insert("orphan_result", 3);
    runs[1].violation_examples = vec![example("orphan_result")];
    runs[4].violations.entry("anthropic").or_default().insert("empty_content", 1);
    runs[4].violation_examples = vec![example("empty_content")];
    // A variant's row (here on Aider's text shape) takes its strategy's explanation.
    runs[3].strategy = "sum+text".into();
    runs[3].violations.entry("anthropic").or_default().insert("orphan_result", 2);
    runs[3].violation_examples = vec![example("orphan_result")];
    let meta = vec![
        StrategyMeta {
            id: "sum".into(),
            source: "s".into(),
            fidelity: "source",
            summary: "summarizes".into(),
            agreement: Some("trigger 100.0% · selection 100.0% (9 cases)".into()),
            check: Some("library functions: sum 1.0".into()),
            violation_notes: vec![("orphan_result", "the original does it too".into())],
        },
        StrategyMeta { id: "trunc".into(), source: "s".into(), fidelity: "baseline", summary: "truncates".into(), agreement: None, check: None, violation_notes: Vec::new() },
    ];
    let md = markdown(&[scenario()], &meta, &rows(&[scenario()], &runs), &runs, "extractive");
    assert!(md.contains("| sum | source | library functions: sum 1.0 | trigger 100.0% · selection 100.0% (9 cases) | s | summarizes |"), "{md}");
    assert!(
        md.contains("| sum | orphan_result | anthropic | 3 | tiny seed 0 (extractive), request 7: result for c1 has no call (log entries #12) | the original does it too |"),
        "{md}"
    );
    let text_row = md.lines().find(|l| l.starts_with("| sum+text | orphan_result | anthropic | 2 |")).unwrap_or_else(|| panic!("{md}"));
    assert!(text_row.ends_with("| the original does it too |"), "{text_row}");
    assert!(md.contains("| trunc | empty_content | anthropic | 1 |") && md.contains("**unexplained**"), "{md}");
}

/// `results.json` is this crate's format: one run with a failed compaction, a judged fact and a
/// violation example, written as the report writes it.
#[test]
fn results_json_snapshot() {
    use compactbench_eval::judge::{Answer, Judged};
    use compactbench_eval::results::ViolationExample;
    let mut run = runs().swap_remove(1);
    run.facts[0].judged = Some(Judged { request: 1, answer: Answer::Named });
    run.compactions[0].error = Some("summarizer timed out".into());
    // States in report order, not by name.
    run.facts[1].probes = BTreeMap::from([(Status::VerbatimKept, 1), (Status::Lost, 1)]);
    run.facts[2].probes = BTreeMap::from([(Status::Stale, 1), (Status::VerbatimSummary, 1)]);
    run.violations.entry("anthropic").or_default().insert("orphan_result", 3);
    run.violation_examples = vec![ViolationExample { shape: "anthropic", rule: "orphan_result", request: 1, detail: "result for c1 has no call".into(), entries: vec![4] }];
    let dir = std::env::temp_dir().join(format!("compactbench-report-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("results.json");
    crate::json::results(&path, "extractive", &[], &[run]).unwrap();
    let written = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    expect![[r#"
        {
          "summarizer": "extractive",
          "rows": [],
          "runs": [
            {"strategy":"sum","scenario":"tiny","seed":0,"summarizer":"extractive","window":2000,"compactions":[{"request":1,"step":3,"first_kept_step":2,"moment":"turn_end","reason":"threshold","kinds":["summary"],"tokens_before":1900,"tokens_after":600,"estimated_before":1850,"injected_tokens":0,"summarizer_calls":1,"summarizer_input":1800,"summarizer_output":200,"summaries_cut_off":1,"error":"summarizer timed out","mid_loop":false,"summary_context":"prefix","summary_request_tokens":2000,"summary_cached_tokens":1500,"summary_output_tokens":200,"summary_calls_over_window":0}],"facts":[{"id":"f0","kind":"error_message","needed":2,"probes":{"verbatim_summary":2},"last":"verbatim_summary","lost_at":null,"lost_after_rounds":null,"lost_by":null,"after_round":["verbatim_summary"],"planted_quarter":1,"judged":{"request":1,"answer":"named"}},{"id":"f1","kind":"decision","needed":2,"probes":{"verbatim_kept":1,"lost":1},"last":"lost","lost_at":1,"lost_after_rounds":1,"lost_by":0,"after_round":["lost"],"planted_quarter":3},{"id":"f2","kind":"superseded_value","needed":2,"probes":{"verbatim_summary":1,"stale":1},"last":"stale","lost_at":null,"lost_after_rounds":null,"lost_by":null,"after_round":["stale"],"planted_quarter":3}],"violations":{"anthropic":{"orphan_result":3}},"violation_examples":[{"shape":"anthropic","rule":"orphan_result","request":1,"detail":"result for c1 has no call","entries":[4]}],"log_entries":5,"output_tokens":50,"child":{"requests":0,"input_tokens":0,"cached_tokens":0,"output_tokens":0}}
          ]
        }
    "#]].assert_eq(&written);
}

/// A summary call's dollars: the input the cache did not hold at the input price, what it held at
/// the cached price, the answer at the output price; a call sent as the conversation's prefix is
/// cheaper than the same tokens sent as a fresh prompt.
#[test]
fn compaction_cost_prices_uncached_cached_and_output_tokens() {
    let pricing = scenario().model.pricing;
    let prefix = runs()[1].compactions[0].clone();
    // 500 uncached × $3 + 1,500 cached × $0.30 + 200 out × $15, per million.
    let expected = (500.0 * 3.0 + 1500.0 * 0.3 + 200.0 * 15.0) / 1e6;
    assert!((crate::row::compaction_cost(&prefix, pricing) - expected).abs() < 1e-12);
    let fresh = CompactionRecord { summary_context: "fresh", summary_cached_tokens: 100, ..prefix.clone() };
    let expected = (1900.0 * 3.0 + 100.0 * 0.3 + 200.0 * 15.0) / 1e6;
    assert!((crate::row::compaction_cost(&fresh, pricing) - expected).abs() < 1e-12);
    assert!(crate::row::compaction_cost(&prefix, pricing) < crate::row::compaction_cost(&fresh, pricing));
    // The share in a row is of the session's whole cost, which includes it.
    let row = rows(&[scenario()], &runs()).into_iter().find(|r| r.strategy == "sum" && r.summarizer == "extractive").unwrap();
    assert_eq!(row.compaction_cost_usd, 0.005);
    assert!(row.compaction_cost_share > 0.0 && row.compaction_cost_share < 1.0);
    let session = crate::row::cost(&runs()[1], &scenario());
    assert_eq!(row.compaction_cost_share, ((0.00495 / session) * 1000.0_f64).round() / 1000.0);
}
