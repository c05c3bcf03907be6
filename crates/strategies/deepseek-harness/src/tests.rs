//! Section (j) cases of shared/specs/deepseek-harness.md, the section (i) worked example, and
//! the meter's usage anchoring.

use std::sync::Mutex;

use compactbench_core::request::{lower, validate};
use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, EntryId, Error, ErrorKind, Message, Moment, Origin, Part, Role, Shape, StopReason,
    Strategy, Summarizer, Summary, SummaryPosition, SummaryRequest, Usage, View, Window,
};
use compactbench_testkit::{json, model, FakeMode, FakeSummarizer, Harness};

use crate::meter::{estimate_message, measure, Baseline, Node};
use crate::prompt::{checkpoint_message, CHECKPOINT_PREAMBLE, COMPACTION_INSTRUCTION, SUMMARY_CLOSE_TAG, SUMMARY_OPEN_TAG};
use crate::prune::{prune_text, PRUNE_MARKER};
use crate::region::select;
use crate::{Budgets, DeepseekHarnessConfig, DeepseekHarnessStrategy};

// ---------------------------------------------------------------------------------------------
// Fixtures: messages of an exact meter price.

/// `n` chars: `label`, then `.` padding.
fn padded(label: &str, n: usize) -> String {
    assert!(label.len() <= n, "{label} does not fit in {n} chars");
    format!("{label}{}", ".".repeat(n - label.len()))
}

#[track_caller]
fn priced(m: Message, tokens: u64) -> Message {
    assert_eq!(estimate_message(&m), tokens, "fixture price");
    m
}

/// The system prompt, priced `tokens` as the envelope's system part (`ceil(len / 4) + 4`).
fn system(tokens: usize) -> Message {
    Message::system(padded("SYS", (tokens - 4) * 4))
}

/// A user message priced `tokens` (text block + role).
fn user(label: &str, tokens: usize) -> Message {
    priced(Message::user(padded(label, (tokens - 8) * 4)), tokens as u64)
}

/// An assistant text reply priced `tokens`.
fn reply(label: &str, tokens: usize) -> Message {
    priced(Message::assistant(padded(label, (tokens - 8) * 4)), tokens as u64)
}

/// An assistant message with a text part and one `read` call per id, priced `tokens`
/// (each call is `ceil(4 / 4) + ceil(15 / 4) + 4 = 9`).
fn calls(label: &str, ids: &[&str], tokens: usize) -> Message {
    let mut parts = vec![Part::text(padded(label, (tokens - 8 - 9 * ids.len()) * 4))];
    parts.extend(ids.iter().map(|id| Part::ToolCall { id: (*id).into(), name: "read".into(), args: json!({"path": "a.rs"}) }));
    priced(Message::new(Role::Assistant, parts), tokens as u64)
}

/// The result of call `id`, priced `tokens` (text + result block + role).
fn result(id: &str, label: &str, tokens: usize) -> Message {
    priced(Message::tool_result(id, "read", padded(label, (tokens - 12) * 4), false), tokens as u64)
}

fn strategy_with(config: DeepseekHarnessConfig) -> DeepseekHarnessStrategy {
    DeepseekHarnessStrategy::new(config).expect("valid config")
}

fn default_strategy() -> DeepseekHarnessStrategy {
    strategy_with(DeepseekHarnessConfig::default())
}

/// The engine without the pruner service (the spec's worked example has none).
fn without_pruner() -> DeepseekHarnessStrategy {
    strategy_with(DeepseekHarnessConfig { prune_tool_results: false, ..DeepseekHarnessConfig::default() })
}

/// One short name per view message: the checkpoint is `C`, others their text label.
fn labels(view: &View) -> Vec<String> {
    view.messages
        .iter()
        .map(|vm| match vm.origin {
            Origin::Summary(_) => "C".to_owned(),
            _ => vm.message.searchable_text().split(['.', '\n']).next().unwrap_or_default().to_owned(),
        })
        .collect()
}

fn id_of(h: &Harness, label: &str) -> EntryId {
    h.log
        .messages()
        .find(|(_, m)| m.searchable_text().split(['.', '\n']).next() == Some(label))
        .map(|(id, _)| id)
        .unwrap_or_else(|| panic!("no message {label}"))
}

fn pressure(h: &Harness, s: &DeepseekHarnessStrategy) -> u64 {
    measure(&h.log, &s.project(&h.log)).total
}

/// A summarizer that answers from a script, in order, and records what it was asked.
struct Scripted {
    answers: Vec<Result<Summary, Error>>,
    requests: Mutex<Vec<SummaryRequest>>,
}

impl Scripted {
    fn texts(texts: &[&str]) -> Scripted {
        Scripted::new(texts.iter().map(|t| Ok(answer(t, StopReason::Complete))).collect())
    }

    fn new(answers: Vec<Result<Summary, Error>>) -> Scripted {
        Scripted { answers, requests: Mutex::new(Vec::new()) }
    }

    fn requests(&self) -> Vec<SummaryRequest> {
        self.requests.lock().unwrap().clone()
    }
}

fn answer(text: &str, stop: StopReason) -> Summary {
    Summary { text: text.into(), input_tokens: 1000, output_tokens: 100, stop }
}

impl Summarizer for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let mut requests = self.requests.lock().unwrap();
        requests.push(request.clone());
        self.answers.get(requests.len() - 1).cloned().expect("script exhausted: an unexpected summarizer call")
    }
}

/// Compacts with `summarizer` the way the runner does, appending what lands.
#[track_caller]
fn compact_with(
    h: &mut Harness,
    s: &DeepseekHarnessStrategy,
    at: Moment,
    summarizer: &dyn Summarizer,
) -> Result<Vec<Checkpoint>, Error> {
    let before = h.log.clone();
    let view = s.project(&h.log);
    let mut cx = Cx::new(&h.model, summarizer, &mut h.store, compactbench_testkit::tokenizer());
    let out = s.compact(&h.log, &view, at, &mut cx);
    if let Ok(cps) = &out {
        for cp in cps {
            h.log.push_checkpoint(cp.clone());
        }
    }
    assert!(before.entries().zip(h.log.entries()).all(|(a, b)| a == b), "compaction rewrote the log");
    out
}

fn nodes(prices: &[(u64, i64)]) -> Vec<Node> {
    prices.iter().enumerate().map(|(at, &(tokens, delta))| Node { at, tokens, delta }).collect()
}

/// The surface of cases 3 and 4: `[U1, A1(2 calls), R1a, R1b, A2, U2, A3(1 call), R3]`.
fn case_3_surface(r3: usize) -> Vec<Message> {
    vec![
        user("U1", 500),
        calls("A1", &["a", "b"], 300),
        result("a", "R1a", 20_000),
        result("b", "R1b", 15_000),
        reply("A2", 1_000),
        user("U2", 200),
        calls("A3", &["c"], 200),
        result("c", "R3", r3),
    ]
}

// ---------------------------------------------------------------------------------------------
// (j) conformance cases

#[test]
fn case_01_budgets() {
    let s = default_strategy();
    assert_eq!(s.budgets(128_000).unwrap(), Budgets { threshold: 102_400, retain: 20_480 });
    assert_eq!(s.budgets(1_000_000).unwrap(), Budgets { threshold: 800_000, retain: 160_000 });

    let absolute = |t| strategy_with(DeepseekHarnessConfig { retain_tokens: Some(t), ..DeepseekHarnessConfig::default() });
    assert_eq!(absolute(100_000).budgets(128_000).unwrap(), Budgets { threshold: 102_400, retain: 100_000 });
    let err = absolute(102_400).budgets(128_000).unwrap_err();
    assert!(err.message.contains("retainTokens (102400) must be less than threshold tokens 102400"), "{err}");

    // A ratio conflict fails at load, before any window is known.
    let load = DeepseekHarnessStrategy::new(DeepseekHarnessConfig { retain_ratio: 0.8, ..DeepseekHarnessConfig::default() });
    assert!(load.is_err());

    // Unknown window (0): warn and never compact on pressure, however full the context.
    let mut h = Harness::new([system(100), user("U1", 5_000), reply("A1", 900_000)], model(0, 8_192));
    assert!(s.budgets(0).is_err());
    assert_eq!(h.decide(&s, Moment::TurnEnd), compactbench_core::Decision::Skip);
    h.push(calls("A2", &["x"], 100));
    h.push(result("x", "R2", 100));
    assert_eq!(h.decide(&s, Moment::BeforeRequest), compactbench_core::Decision::Skip);
    // The same over-full context with a known window compacts.
    h.model = model(1_000_000, 8_192);
    assert!(matches!(h.decide(&s, Moment::BeforeRequest), compactbench_core::Decision::Compact { .. }));
}

#[test]
fn case_02_trigger() {
    use compactbench_core::Decision;
    let s = default_strategy();
    // threshold 80,000; estimate = system 1,000 + U1 500 + A1.
    let at = |a1: usize| Harness::new([system(1_000), user("U1", 500), reply("A1", a1)], model(100_000, 8_192));
    let mut h = at(78_499);
    assert_eq!(pressure(&h, &s), 79_999);
    assert_eq!(h.decide(&s, Moment::TurnEnd), Decision::Skip);
    let mut h2 = at(78_500);
    assert_eq!(pressure(&h2, &s), 80_000);
    assert_eq!(h2.decide(&s, Moment::TurnEnd), Decision::compact("pressure"));

    // The new user message lands after the pre-step hook: the first request of a turn was
    // checked at TurnEnd and is not checked again at BeforeRequest.
    h2.push(user("U2", 100));
    assert_eq!(h2.decide(&s, Moment::BeforeRequest), Decision::Skip);
    h.push(user("U2", 100));
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);

    // Before the first routed request: never.
    let mut first = Harness::new([system(1_000), user("U1", 95_000)], model(100_000, 8_192));
    assert_eq!(first.decide(&s, Moment::TurnEnd), Decision::Skip);
    assert_eq!(first.decide(&s, Moment::BeforeRequest), Decision::Skip);

    // Between an assistant tool call and its result: never checked, although a balanced range exists.
    let mut open = Harness::new([system(1_000), user("U1", 500), calls("A1", &["x"], 85_000)], model(100_000, 8_192));
    assert_eq!(open.decide(&s, Moment::BeforeRequest), Decision::Skip);
    open.push(result("x", "R1", 100));
    assert_eq!(open.decide(&s, Moment::BeforeRequest), Decision::compact("pressure"));
}

#[test]
fn case_03_retain_walk_and_balance() {
    let surface = nodes(&[(500, 0), (300, 2), (20_000, -1), (15_000, -1), (1_000, 0), (200, 0), (200, 1), (25_000, -1)]);
    assert_eq!(select(&surface, 16_000).unwrap(), Some(6), "walk stops at R3 (7), snaps to A3 (6)");

    // End to end: retain 16,000 absolute, threshold 56,000 of a 70,000 window; total 62,200.
    let s = strategy_with(DeepseekHarnessConfig {
        retain_tokens: Some(16_000),
        prune_tool_results: false,
        ..DeepseekHarnessConfig::default()
    });
    let mut h = Harness::new(case_3_surface(25_000), model(70_000, 8_192));
    assert_eq!(pressure(&h, &s), 62_200);
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].window, Window::From(id_of(&h, "A3")));
    assert_eq!(labels(&h.view(&s)), ["C", "A3", "R3"]);
    let requests = h.summarizer.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].transcript.lines().count(), 6, "U1..U2, one line per message");
    assert!(requests[0].transcript.contains("\"U2"));
    assert!(!requests[0].transcript.contains("\"A3"));
    assert_eq!(cps[0].details["shadowedTokenCount"], 37_000);
}

#[test]
fn case_04_snap_through_parallel_batch() {
    let surface = nodes(&[(500, 0), (300, 2), (20_000, -1), (15_000, -1), (1_000, 0), (200, 0), (200, 1), (5_000, -1)]);
    assert_eq!(select(&surface, 20_000).unwrap(), Some(1), "R1b (3) -> R1a (2) -> A1 (1)");

    // End to end: retain 20,000, window 52,500 (threshold 42,000); total 42,200.
    let s = strategy_with(DeepseekHarnessConfig {
        retain_tokens: Some(20_000),
        prune_tool_results: false,
        ..DeepseekHarnessConfig::default()
    });
    let mut h = Harness::new(case_3_surface(5_000), model(52_500, 8_192));
    assert_eq!(pressure(&h, &s), 42_200);
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].window, Window::From(id_of(&h, "A1")));
    assert_eq!(labels(&h.view(&s)), ["C", "A1", "R1a", "R1b", "A2", "U2", "A3", "R3"]);
    assert_eq!(h.summarizer.requests()[0].transcript.lines().count(), 1, "only U1 is summarized");
    assert!(pressure(&h, &s) < 42_000);
}

#[test]
fn case_05_nothing_to_compact() {
    // The walk never reaches the retained budget.
    let small = nodes(&[(500, 0), (300, 0), (200, 0)]);
    assert_eq!(select(&small, 16_000).unwrap(), None);
    // Snapping reaches the head: the only cut is inside an open call.
    let open = nodes(&[(300, 1), (20_000, -1)]);
    assert_eq!(select(&open, 16_000).unwrap(), None);
    assert_eq!(select(&[], 0).unwrap(), None);

    // End to end: over threshold, but the surface is one indivisible unit.
    let s = without_pruner();
    let mut h = Harness::new([system(100), calls("A1", &["x"], 300), result("x", "R1", 90_000)], model(100_000, 8_192));
    assert!(pressure(&h, &s) >= 80_000);
    assert_eq!(h.decide(&s, Moment::BeforeRequest), compactbench_core::Decision::Skip);
    let err = h.compact(&s, Moment::BeforeRequest).unwrap_err();
    assert_eq!(err.kind, ErrorKind::NothingToCompact);
}

#[test]
fn case_06_manual_overflow_retain_zero() {
    let s = default_strategy();
    let mut h = Harness::new(
        [system(100), user("U1", 1_000), reply("A1", 1_000), user("U2", 1_000), calls("A9", &["x"], 100), result("x", "R9", 1_000)],
        model(100_000, 8_192),
    );
    assert_eq!(h.decide(&s, Moment::Overflow), compactbench_core::Decision::compact("context-overflow"));
    let cps = h.compact(&s, Moment::Overflow).unwrap();
    assert_eq!(cps.len(), 1, "nothing over the pruner's budget");
    assert_eq!(cps[0].window, Window::From(id_of(&h, "A9")));
    assert_eq!(cps[0].details["trigger"], "context-overflow");
    assert_eq!(labels(&h.view(&s)), ["SYS", "C", "A9", "R9"]);

    // A surface ending with an assistant text keeps only that node.
    let mut h = Harness::new(
        [system(100), user("U1", 1_000), reply("A1", 1_000), user("U2", 1_000), reply("A2", 500)],
        model(100_000, 8_192),
    );
    h.compact(&s, Moment::Overflow).unwrap();
    assert_eq!(labels(&h.view(&s)), ["SYS", "C", "A2"]);
}

#[test]
fn case_07_checkpoint_shape() {
    let s = without_pruner();
    let messages = vec![
        system(1_000),
        user("U1", 5_000),
        calls("A1", &["x"], 200),
        result("x", "R1", 60_000),
        reply("A2", 10_000),
        user("U2", 300),
        calls("A3", &["y"], 200),
        result("y", "R3", 20_000),
    ];
    let mut h = Harness::new(messages.clone(), model(100_000, 8_192));
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Summary);
    assert_eq!(cps[0].summary_position, SummaryPosition::AfterSystem);

    let view = h.view(&s);
    assert_eq!(view.messages[0].origin, Origin::Entry(EntryId(0)));
    assert_eq!(view.messages[0].message, messages[0], "system prompt unchanged");
    let checkpoint = &view.messages[1];
    assert!(matches!(checkpoint.origin, Origin::Summary(_)));
    assert_eq!(checkpoint.message.role, Role::User);
    assert_eq!(
        checkpoint.message.parts,
        vec![
            Part::text(format!("{CHECKPOINT_PREAMBLE}\n\n{SUMMARY_OPEN_TAG}")),
            Part::text("SUMMARY 1 of compaction"),
            Part::text(SUMMARY_CLOSE_TAG),
        ]
    );
    assert_eq!(checkpoint.message.text(), format!("{CHECKPOINT_PREAMBLE}\n\n<compacted-summary>\nSUMMARY 1 of compaction\n</compacted-summary>"));
    // Retained nodes follow unchanged: A3 and R3 (R3 alone reaches 16,000; A3 opens its call).
    let kept: Vec<&Message> = view.messages[2..].iter().map(|vm| &vm.message).collect();
    assert_eq!(kept, [&messages[6], &messages[7]]);
    assert!(view.messages[2..].iter().all(|vm| matches!(vm.origin, Origin::Entry(_))));
    for shape in Shape::ALL {
        assert_eq!(validate(&lower(&view, shape)), vec![], "{shape:?}");
    }

    // What the summarizer was sent: system prompt, shadowed messages verbatim, instruction.
    let request = &h.summarizer.requests()[0];
    assert_eq!(request.purpose, "compaction");
    assert_eq!(request.system, messages[0].text());
    assert_eq!(request.instructions, COMPACTION_INSTRUCTION);
    assert_eq!(request.max_output_tokens, 8_192);
    let lines: Vec<serde_json::Value> = request.transcript.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["role"], "user");
    assert_eq!(lines[1]["role"], "assistant");
    assert_eq!(lines[1]["content"][1], json!({"type": "tool-call", "id": "x", "name": "read", "arguments": "{\"path\":\"a.rs\"}"}));
    assert_eq!(lines[2]["role"], "user");
    assert_eq!(lines[2]["content"][0]["type"], "tool-result");
    assert_eq!(lines[2]["content"][0]["toolCallId"], "x");
    assert_eq!(lines[2]["content"][0]["content"][0]["text"].as_str().unwrap().len(), (60_000 - 12) * 4, "verbatim");

    // Shadowed messages stay in the append-only log.
    assert_eq!(h.log.messages().count(), messages.len());
    assert_eq!(h.log.message(EntryId(1)), Some(&messages[1]));
}

#[test]
fn case_08_shrink_rule_and_summary_errors() {
    let s = default_strategy();
    // Range = U1 alone (900 tokens): A1 reaches the retained budget by itself.
    let session = || Harness::new([system(100), user("U1", 900), reply("A1", 90_000)], model(100_000, 8_192));
    let frame_overhead = estimate_message(&checkpoint_message(""));
    // A summary of `ceil(len / 4)` tokens frames to overhead + that.
    let summary_of = |framed: u64| "s".repeat(((framed - frame_overhead) * 4) as usize);
    assert_eq!(estimate_message(&checkpoint_message(&summary_of(1_000))), 1_000);

    // Framed 1,000 >= shadowed 900: rejected, log unchanged, one summarizer call.
    for framed in [1_000, 900] {
        let mut h = session();
        h.summarizer = FakeSummarizer::new(FakeMode::Fixed(summary_of(framed)));
        let before = h.log.clone();
        let err = h.compact(&s, Moment::TurnEnd).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Rejected);
        assert_eq!(
            err.message,
            format!("summary is not smaller than the shadowed content ({framed} estimated framed tokens >= 900)")
        );
        assert_eq!(h.log, before);
        assert_eq!(h.summarizer.requests().len(), 1, "a failed region is not retried");
        assert_eq!(h.failures, 1);
    }
    // Framed 899 < 900: accepted.
    let mut h = session();
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed(summary_of(899)));
    let cps = h.compact(&s, Moment::TurnEnd).unwrap();
    assert_eq!(cps[0].details["framedTokenCount"], 899);

    // A very long summary (the issue's "not smaller" case).
    let mut h = session();
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("long summary text. ".repeat(2_000)));
    assert_eq!(h.compact(&s, Moment::TurnEnd).unwrap_err().kind, ErrorKind::Rejected);
    assert_eq!(h.log.len(), 3);

    // Finish `max-tokens`: MAX_TOKENS, incomplete checkpoint rejected.
    let mut h = session();
    let cut = Scripted::new(vec![Ok(answer("partial", StopReason::Length))]);
    let err = compact_with(&mut h, &s, Moment::TurnEnd, &cut).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Rejected);
    assert!(err.message.starts_with("MAX_TOKENS"), "{err}");
    assert_eq!(h.log.len(), 3);

    // Empty summary.
    let mut h = session();
    let empty = Scripted::texts(&[" \n "]);
    assert_eq!(compact_with(&mut h, &s, Moment::TurnEnd, &empty).unwrap_err().kind, ErrorKind::EmptySummary);
    assert_eq!(h.log.len(), 3);

    // Summarizer failure passes through.
    let mut h = session();
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    assert_eq!(h.compact(&s, Moment::TurnEnd).unwrap_err().kind, ErrorKind::Transport);
    assert_eq!(h.log.len(), 3);
}

#[test]
fn case_09_recompacting_a_lone_checkpoint() {
    let s = without_pruner();
    // An earlier compaction left [C1, A, R]; window 60,000 (threshold 48,000, retain 9,600).
    let mut h = Harness::new([user("U0", 3_000), calls("A", &["x"], 100), result("x", "R", 47_500)], model(60_000, 8_192));
    let first = format!("FIRST {}", "f".repeat(2_000));
    let mut c1 = Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(1))).with_summary(checkpoint_message(&first));
    c1.details = json!({ "trigger": "pressure" });
    h.log.push_checkpoint(c1);
    assert_eq!(labels(&h.view(&s)), ["C", "A", "R"]);
    assert!(pressure(&h, &s) >= 48_000);

    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].window, Window::From(EntryId(1)), "range = [C1] alone");
    assert_eq!(cps[0].details["shadowed"], json!(["checkpoint"]));
    let request = &h.summarizer.requests()[0];
    assert_eq!(request.transcript.lines().count(), 1);
    assert!(request.transcript.contains(SUMMARY_OPEN_TAG) && request.transcript.contains("FIRST"));
    let view = h.view(&s);
    assert_eq!(labels(&view), ["C", "A", "R"]);
    assert!(view.messages[0].message.text().contains("SUMMARY 1 of compaction"));
    assert!(pressure(&h, &s) < 48_000);
}

#[test]
fn case_10_attempt_limit() {
    let s = without_pruner();
    // Window 60,000 (threshold 48,000); R alone is past the threshold, so two compactions
    // cannot bring pressure down.
    let mut h = Harness::new([user("U1", 3_000), calls("A", &["x"], 100), result("x", "R", 50_000)], model(60_000, 8_192));
    let long = "l".repeat(2_000);
    let script = Scripted::texts(&[&long, "short", "never asked"]);
    let cps = compact_with(&mut h, &s, Moment::BeforeRequest, &script).unwrap();
    assert_eq!(script.requests().len(), 2, "no third attempt");
    assert_eq!(cps.len(), 2);
    assert_eq!(cps[0].details["attempt"], 1);
    assert_eq!(cps[1].details["attempt"], 2);
    assert_eq!(cps[1].details["shadowed"], json!(["checkpoint"]), "the second attempt re-summarizes C1 (CBR-001)");
    let warning = cps[1].details["warning"].as_str().unwrap();
    assert!(warning.starts_with("compaction still above threshold after 2 compaction attempts"), "{warning}");
    // The turn continues with the current surface.
    assert_eq!(labels(&h.view(&s)), ["C", "A", "R"]);
    assert!(pressure(&h, &s) >= 48_000);

    // A failed second attempt keeps the first (the listener only warns).
    let mut h = Harness::new([user("U1", 3_000), calls("A", &["x"], 100), result("x", "R", 50_000)], model(60_000, 8_192));
    let script = Scripted::new(vec![Ok(answer(&long, StopReason::Complete)), Err(Error::new(ErrorKind::Timeout, "slow"))]);
    let cps = compact_with(&mut h, &s, Moment::BeforeRequest, &script).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].details["warning"], "slow");
}

#[test]
fn case_11_pruner() {
    // 10,000 code points (two-byte chars, so bytes would disagree): head 4096 + marker + tail 1024.
    let text: String = (0..10_000).map(|i| if i < 5_000 { 'é' } else { 'z' }).collect();
    let pruned = prune_text(&text, 8_192, 4_096, 1_024).unwrap();
    let expected: String = text.chars().take(4_096).collect::<String>() + PRUNE_MARKER + &"z".repeat(1_024);
    assert_eq!(pruned, expected);
    assert_eq!(PRUNE_MARKER, "\n\n[... tool result middle pruned ...]\n\n");
    assert_eq!(prune_text(&"x".repeat(8_192), 8_192, 4_096, 1_024), None);
    assert_eq!(prune_text(&pruned, 8_192, 4_096, 1_024), None, "idempotent");

    // End to end: pressure qualifies, pruning brings it below: no summary call.
    let s = default_strategy();
    let big = Message::tool_result("x", "read", format!("R1.{}", "r".repeat(39_997)), false);
    let mut h = Harness::new([system(100), user("U1", 200), calls("A1", &["x"], 100), big], model(12_000, 8_192));
    assert!(pressure(&h, &s) >= 9_600);
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Prune);
    assert_eq!(cps[0].window, Window::Inherit);
    assert_eq!(cps[0].details["pruned"][0]["charsBefore"], 40_000);
    assert!(h.summarizer.requests().is_empty());
    assert!(pressure(&h, &s) < 9_600);
    let view = h.view(&s);
    assert_eq!(labels(&view), ["SYS", "U1", "A1", "R1"]);
    assert!(matches!(view.messages[3].origin, Origin::Replaced(EntryId(3), _)));
    assert!(view.messages[3].message.searchable_text().contains("[... tool result middle pruned ...]"));
    assert_eq!(h.decide(&s, Moment::BeforeRequest), compactbench_core::Decision::Skip, "applying it twice changes nothing");

    // Below the threshold the pruner does not run, however long a result is.
    let big = Message::tool_result("x", "read", "r".repeat(40_000), false);
    let mut h = Harness::new([system(100), user("U1", 200), calls("A1", &["x"], 100), big], model(100_000, 8_192));
    assert_eq!(h.decide(&s, Moment::BeforeRequest), compactbench_core::Decision::Skip);
}

#[test]
fn case_12_overflow_recovery() {
    use compactbench_core::Decision;
    let s = default_strategy();
    let big = || Message::tool_result("x", "read", format!("R2.{}", "r".repeat(39_997)), false);
    let mut h = Harness::new(
        [system(100), user("U1", 2_000), reply("A1", 500), user("U2", 1_000), calls("A2", &["x"], 100), big()],
        model(100_000, 8_192),
    );
    assert_eq!(h.decide(&s, Moment::Overflow), Decision::compact("context-overflow"));
    let cps = h.compact(&s, Moment::Overflow).unwrap();
    assert_eq!(cps.iter().map(|c| c.kind).collect::<Vec<_>>(), [CheckpointKind::Prune, CheckpointKind::Summary]);
    assert!(cps.iter().all(|c| c.details["trigger"] == "context-overflow"));
    assert_eq!(labels(&h.view(&s)), ["SYS", "C", "A2", "R2"]);

    // A second overflow before a successful reply: the original error propagates.
    assert_eq!(h.decide(&s, Moment::Overflow), Decision::Skip);
    // A successful reply resets the counter.
    let mut ok = reply("A3", 100);
    ok.usage = Some(Usage { input: 5_000, output: 100, ..Default::default() });
    h.push(ok);
    h.push(user("U4", 300));
    assert_eq!(h.decide(&s, Moment::Overflow), Decision::compact("context-overflow"));

    // Neither pruning nor compaction can advance the surface: no retry.
    let mut lone = Harness::new([system(100), user("U1", 90_000)], model(100_000, 8_192));
    assert_eq!(lone.decide(&s, Moment::Overflow), Decision::Skip);
    // A failed summary with nothing pruned: the error stands.
    let mut h = Harness::new([system(100), user("U1", 2_000), reply("A1", 500), user("U2", 1_000)], model(100_000, 8_192));
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    assert_eq!(h.compact(&s, Moment::Overflow).unwrap_err().kind, ErrorKind::Transport);
    assert_eq!(h.log.len(), 4);
    // A failed summary after a landed prune: the prune is progress, so the request is retried.
    let mut h = Harness::new(
        [system(100), user("U1", 2_000), reply("A1", 500), user("U2", 1_000), calls("A2", &["x"], 100), big()],
        model(100_000, 8_192),
    );
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    let cps = h.compact(&s, Moment::Overflow).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Prune);
    assert_eq!(cps[0].details["warning"], "fake summarizer failure");
    // `maxOverflowRetries = 0` disables recovery.
    let off = strategy_with(DeepseekHarnessConfig { max_overflow_retries: 0, ..DeepseekHarnessConfig::default() });
    let mut h = Harness::new([system(100), user("U1", 2_000), reply("A1", 500), user("U2", 1_000)], model(100_000, 8_192));
    assert_eq!(h.decide(&off, Moment::Overflow), Decision::Skip);
}

// ---------------------------------------------------------------------------------------------
// Section (i) and the meter

#[test]
fn worked_example_two_compactions() {
    let s = without_pruner();
    let mut h = Harness::new(
        [
            system(5_000),
            user("n0", 500),
            calls("n1", &["a", "b"], 300),
            result("a", "n2", 20_000),
            result("b", "n3", 15_000),
            reply("n4", 1_000),
            user("n5", 200),
            calls("n6", &["c"], 200),
            result("c", "n7", 25_000),
            calls("n8", &["d"], 200),
            result("d", "n9", 12_000),
            reply("n10", 800),
        ],
        model(100_000, 8_192),
    );
    assert_eq!(pressure(&h, &s), 80_200);
    let cps = h.step(&s, Moment::TurnEnd).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].window, Window::From(id_of(&h, "n6")));
    assert_eq!(cps[0].details["shadowedTokenCount"], 37_000);
    assert_eq!(labels(&h.view(&s)), ["SYS", "C", "n6", "n7", "n8", "n9", "n10"]);
    let c1 = cps[0].details["framedTokenCount"].as_u64().unwrap();
    // n6..n10 sum to 38,200 (the spec's table says 38,400; its own prices give 38,200).
    assert_eq!(pressure(&h, &s), 5_000 + c1 + 38_200);

    for m in [
        user("n11", 300),
        calls("n12", &["e"], 200),
        result("e", "n13", 30_000),
        reply("n14", 1_000),
        calls("n15", &["f"], 200),
        result("f", "n16", 6_000),
    ] {
        h.push(m);
    }
    assert_eq!(pressure(&h, &s), 5_000 + c1 + 38_200 + 37_700);
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].window, Window::From(id_of(&h, "n12")));
    assert_eq!(cps[0].details["shadowed"][0], "checkpoint", "head-anchored: C1 is re-summarized");
    let second = &h.summarizer.requests()[1];
    assert!(second.transcript.lines().next().unwrap().contains("SUMMARY 1 of compaction"));
    assert_eq!(second.transcript.lines().count(), 7, "C1, n6..n11");
    assert_eq!(labels(&h.view(&s)), ["SYS", "C", "n12", "n13", "n14", "n15", "n16"]);
}

#[test]
fn meter_anchors_on_provider_usage() {
    let s = default_strategy();
    let with_usage = |mut m: Message, input: u64, output: u64| {
        m.usage = Some(Usage { input, output, ..Default::default() });
        m
    };
    // The anchor is the step's start (before its own user message) plus the reply, so U1 counts
    // in the provider's input and again in the delta.
    let h = Harness::new([system(100), user("U1", 500), with_usage(reply("A1", 200), 10_000, 200)], model(100_000, 8_192));
    let m = measure(&h.log, &s.project(&h.log));
    assert_eq!(m.baseline, Baseline::Usage);
    assert_eq!(m.total, 10_200 + 500);

    // Mid-turn: the tool result is the only delta.
    let mut h = Harness::new([system(100), user("U1", 500), with_usage(calls("A1", &["x"], 200), 10_000, 200)], model(100_000, 8_192));
    h.push(result("x", "R1", 3_000));
    assert_eq!(pressure(&h, &s), 10_200 + 500 + 3_000);

    // Usage below the heuristic price of the same request: the heuristic wins.
    let h = Harness::new([system(100), user("U1", 500), with_usage(reply("A1", 200), 10, 5)], model(100_000, 8_192));
    let m = measure(&h.log, &s.project(&h.log));
    assert_eq!(m.baseline, Baseline::Estimated);
    assert_eq!(m.total, 100 + 500 + 200);

    // A compaction after the anchor moves the figure by its surface delta.
    let mut h = Harness::new(
        [
            system(100),
            user("U0", 20_000),
            reply("A0", 500),
            user("U1", 15_000),
            with_usage(calls("A1", &["x"], 200), 69_800, 200),
            result("x", "R1", 2_000),
        ],
        model(100_000, 8_192),
    );
    // Anchor surface = U0 + A0 (step start, before U1) + A1 = 20,700; surface now 37,700.
    let before = pressure(&h, &s);
    assert_eq!(before, 70_000 + 37_700 - 20_700);
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].tokens_before, before);
    assert_eq!(cps[0].details["baseline"], "usage");
    let framed = cps[0].details["framedTokenCount"].as_u64().unwrap();
    assert_eq!(pressure(&h, &s), before - 20_500 + framed);
}

#[test]
fn images_and_multi_result_tool_messages_are_priced_as_the_original() {
    let image = Message::new(Role::User, vec![Part::Media { mime: "image/png".into(), tokens: 1_500 }]);
    let json_len = crate::meter::image_block_json("image/png").to_string().encode_utf16().count() as u64;
    assert_eq!(estimate_message(&image), 4 + json_len.div_ceil(4) + 4);

    let both = Message::new(
        Role::Tool,
        vec![
            Part::ToolResult { call_id: "a".into(), name: "read".into(), text: "abcd".into(), is_error: false },
            Part::ToolResult { call_id: "b".into(), name: "read".into(), text: "abcd".into(), is_error: false },
        ],
    );
    assert_eq!(estimate_message(&both), 2 * (1 + 4 + 4 + 4));
    let lines = crate::prompt::transcript([&both]);
    assert_eq!(lines.lines().count(), 2, "one user-role message per result");
}

#[test]
fn default_strategy_identity() {
    let s = crate::strategy();
    assert_eq!(s.info().id, "deepseek-harness");
    assert!(s.info().source.contains("b150a551b8d465e31e418e1b2eaf5e79bbb7d28e"));
}
