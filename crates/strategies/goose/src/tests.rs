//! Section (j) cases of `shared/specs/goose.md`, the section (i) worked example, the
//! failure rules of section (g), and the middle-out removal of `filter_tool_responses`.
//!
//! Sizes: a `filler(tag, n)` text is `4n` bytes, so Goose's count of it is `n` and a text
//! message costs `n + 7` in the fallback estimate.

use compactbench_core::request::{lower, validate};
use compactbench_core::{
    Checkpoint, CheckpointKind, Decision, EntryId, ErrorKind, Log, Message, Moment, Origin, Part, Role, Shape, Usage,
    View,
};
use compactbench_testkit::{json, model, FakeMode, FakeSummarizer, Harness};

use crate::compact::filter_tool_responses;
use crate::conversation::{conversation, GooseMessage};
use crate::offload::path_for;
use crate::prompt::{Continuation, COMPLETE_NOTICE};
use crate::tool_pairs::{compute_tool_call_cutoff, tool_ids_to_summarize, BATCH_SIZE};
use crate::{GooseConfig, GooseStrategy};

// ---------------------------------------------------------------------------------------------
// Fixtures

/// `tag`, a space, then padding up to `4 * tokens` bytes.
fn filler(tag: &str, tokens: usize) -> String {
    let mut s = format!("{tag} ");
    while s.len() < tokens * 4 {
        s.push('x');
    }
    s
}

fn goose() -> GooseStrategy {
    GooseStrategy::new(GooseConfig::default())
}

fn with_threshold(threshold: f64) -> GooseStrategy {
    GooseStrategy::new(GooseConfig { threshold, ..GooseConfig::default() })
}

/// `m` with provider usage, as the runner sets it on a received assistant message.
fn used(mut m: Message, input: u64, output: u64) -> Message {
    m.usage = Some(Usage { input, output, ..Default::default() });
    m
}

fn call(id: &str, tool: &str, path: &str) -> Message {
    Message::tool_call(id, tool, json!({ "path": path }))
}

fn result(id: &str, tool: &str, text: &str) -> Message {
    Message::tool_result(id, tool, text, false)
}

/// `user "hello"` then `n` request/response pairs `call0..`.
fn pairs(n: usize) -> Vec<Message> {
    let mut out = vec![Message::user("hello")];
    for i in 0..n {
        out.push(call(&format!("call{i}"), "read_file", &format!("f{i}.txt")));
        out.push(result(&format!("call{i}"), "read_file", "content"));
    }
    out
}

fn roles(view: &View) -> Vec<(Role, String)> {
    view.messages.iter().map(|m| (m.message.role, m.message.text())).collect()
}

fn only(checkpoints: &[Checkpoint]) -> &Checkpoint {
    assert_eq!(checkpoints.len(), 1, "{checkpoints:#?}");
    &checkpoints[0]
}

fn details<'a>(cp: &'a Checkpoint, key: &str) -> &'a serde_json::Value {
    &cp.details[key]
}

#[track_caller]
fn assert_valid(view: &View) {
    for shape in Shape::ALL {
        let violations = validate(&lower(view, shape));
        assert!(violations.is_empty(), "{shape:?}: {violations:#?}");
    }
}

// ---------------------------------------------------------------------------------------------
// (j) 1-2: trigger

#[test]
fn case_01_threshold_is_strict_and_out_of_range_disables() {
    for (output, expect) in [(10, false), (11, true)] {
        // 7,990 + 10 = 8,000 tokens of 10,000: exactly 0.8 does not compact.
        let mut h = Harness::new(
            [Message::user("go"), used(Message::assistant("ok"), 7_990, output), Message::user("next")],
            model(10_000, 1_000),
        );
        let d = h.decide(&goose(), Moment::BeforeRequest);
        assert_eq!(d == Decision::compact("threshold"), expect, "{output}: {d:?}");
    }
    for threshold in [0.0, 1.0, -0.5, 1.5] {
        let mut h = Harness::new(
            [Message::user("go"), used(Message::assistant("ok"), 9_990, 9), Message::user("next")],
            model(10_000, 1_000),
        );
        assert_eq!(h.decide(&with_threshold(threshold), Moment::BeforeRequest), Decision::Skip, "{threshold}");
    }
    // The check belongs to the next model call: a turn that just ended is not checked.
    let mut h = Harness::new([Message::user("go"), used(Message::assistant("ok"), 9_990, 9)], model(10_000, 1_000));
    assert_eq!(h.decide(&goose(), Moment::TurnEnd), Decision::Skip);
}

#[test]
fn case_02_reported_usage_wins_over_the_estimate() {
    // Estimate ~30 tokens, reported 9,000: compact.
    let mut h = Harness::new(
        [Message::user("go"), used(Message::assistant("ok"), 8_990, 10), Message::user("next")],
        model(10_000, 1_000),
    );
    assert_eq!(h.decide(&goose(), Moment::BeforeRequest), Decision::compact("threshold"));
    assert_eq!(only(&h.compact(&goose(), Moment::BeforeRequest).unwrap()).tokens_before, 9_000);

    // Without any reported usage the estimate decides: n + 7 per message.
    for (n, expect) in [(7_993, Decision::Skip), (7_994, Decision::compact("threshold"))] {
        let mut h = Harness::new([Message::user(filler("big", n))], model(10_000, 1_000));
        assert_eq!(h.decide(&goose(), Moment::BeforeRequest), expect, "{n}");
    }
}

// ---------------------------------------------------------------------------------------------
// (j) 3-5: tool-pair summarization

#[test]
fn case_03_tool_call_cutoff_scales_with_context() {
    for (limit, threshold, cutoff) in [
        (128_000, 0.8, 15),
        (200_000, 0.8, 24),
        (1_000_000, 0.8, 120),
        (50_000, 0.8, 10),
        (10_000, 0.8, 10),
        (10_000_000, 0.8, 500),
        (200_000, 0.3, 10),
        (1_000_000, 0.5, 75),
        (200_000, 0.0, 24),
        (200_000, -1.0, 24),
    ] {
        assert_eq!(compute_tool_call_cutoff(limit, threshold), cutoff, "({limit}, {threshold})");
    }
}

fn ids_for(log: &Log, cutoff: usize, protect: usize) -> Vec<String> {
    let conversation = conversation(log);
    tool_ids_to_summarize(&conversation.goose_messages(), cutoff, protect)
}

#[test]
fn case_04_tool_pair_batch_triggers_above_cutoff_plus_batch() {
    assert!(ids_for(&Log::from_messages(pairs(15)), 5, 0).is_empty(), "exactly cutoff + batch does not trigger");
    let ids = ids_for(&Log::from_messages(pairs(16)), 5, 0);
    assert_eq!(ids.len(), BATCH_SIZE);
    assert_eq!(ids.first().map(String::as_str), Some("call0"));
    assert_eq!(ids.last().map(String::as_str), Some("call9"));
}

#[test]
fn case_05_current_turn_is_protected() {
    let log = Log::from_messages(pairs(20));
    assert_eq!(ids_for(&log, 2, 0).len(), BATCH_SIZE);
    assert!(ids_for(&log, 2, 8).is_empty(), "12 eligible <= 2 + 10");

    // Through the strategy (window 10,000: cutoff 10, so more than 20 eligible calls):
    // 22 pairs in the current turn are all protected.
    let mut h = Harness::new(pairs(22), model(10_000, 1_000));
    assert_eq!(h.decide(&goose(), Moment::BeforeRequest), Decision::Skip);
    // Once a new turn starts they are old: the oldest ten pairs are summarized.
    h.push(Message::user("next task"));
    assert_eq!(h.decide(&goose(), Moment::BeforeRequest), Decision::compact("tool-pairs"));
    let cps = h.compact(&goose(), Moment::BeforeRequest).unwrap();
    let cp = only(&cps);
    assert_eq!(cp.kind, CheckpointKind::Summary);
    assert_eq!(cp.injected.len(), 10);
    assert!(cp.injected.iter().all(|m| m.role == Role::User));
    assert_eq!(details(cp, "hidden").as_array().unwrap().len(), 20, "both messages of ten pairs");
    let requests = h.summarizer.requests();
    assert_eq!(requests.len(), 10);
    assert!(requests.iter().all(|r| r.purpose == "tool-pair"));
    assert_eq!(
        requests[0].transcript,
        "[assistant]: tool_request(read_file): {\"path\":\"f0.txt\"}\n[user]: tool_response: content"
    );

    // The pairs are gone from the view; their summaries follow the newest message.
    let view = h.view(&goose());
    let calls: Vec<&str> = view.iter().flat_map(|m| m.tool_call_ids()).collect();
    assert_eq!(calls.first(), Some(&"call10"));
    assert_eq!(calls.len(), 12);
    let tail: Vec<&Origin> = view.messages.iter().rev().take(10).map(|m| &m.origin).collect();
    assert!(tail.iter().all(|o| matches!(o, Origin::Injected(_))), "{tail:?}");
    assert_eq!(view.messages[view.len() - 11].message.text(), "next task");
    assert_valid(&view);
}

#[test]
fn tool_pairs_batch_parallel_results_and_skip_failed_summaries() {
    // Two parallel calls answered by two tool messages are one Goose pair: the first id
    // summarizes both messages, the sibling id is then skipped.
    let mut log = vec![Message::user("old")];
    log.push(Message::new(
        Role::Assistant,
        vec![
            Part::ToolCall { id: "p1".into(), name: "read".into(), args: json!({ "path": "a" }) },
            Part::ToolCall { id: "p2".into(), name: "read".into(), args: json!({ "path": "b" }) },
        ],
    ));
    log.push(result("p1", "read", "A"));
    log.push(result("p2", "read", "B"));
    log.extend(pairs(20).into_iter().skip(1));
    log.push(Message::user("now"));
    let mut h = Harness::new(log, model(10_000, 1_000));
    let cps = h.compact(&goose(), Moment::BeforeRequest).unwrap();
    let cp = only(&cps);
    assert_eq!(details(cp, "summarized")[0], "p1");
    assert_eq!(details(cp, "skipped")[0], "p2");
    assert_eq!(
        h.summarizer.requests()[0].transcript,
        concat!(
            "[assistant]: tool_request(read): {\"path\":\"a\"}\ntool_request(read): {\"path\":\"b\"}\n",
            "[user]: tool_response: A\ntool_response: B"
        )
    );
    let hidden: Vec<u64> = details(cp, "hidden").as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(&hidden[..3], &[1, 2, 3]);
    assert_valid(&h.view(&goose()));

    // A summarizer that always fails: every pair is skipped, nothing is appended.
    let mut h = Harness::new(pairs(22).into_iter().chain([Message::user("now")]), model(10_000, 1_000));
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    assert!(h.compact(&goose(), Moment::BeforeRequest).unwrap().is_empty());
    assert_eq!(h.summarizer.requests().len(), 10);
}

// ---------------------------------------------------------------------------------------------
// (j) 6-8: full compaction

#[test]
fn case_06_valid_conversation_after_compaction() {
    let mut h = Harness::new(
        [
            Message::user("read hello.txt"),
            used(Message::tool_call("tool_0", "read_file", json!({})), 9_000, 10),
            result("tool_0", "read_file", "hello, world"),
        ],
        model(10_000, 1_000),
    );
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("<mock summary>".into()));
    assert_eq!(h.decide(&goose(), Moment::BeforeRequest), Decision::compact("threshold"));
    let cps = h.compact(&goose(), Moment::BeforeRequest).unwrap();
    let cp = only(&cps);
    assert_eq!(details(cp, "continuation"), Continuation::ToolLoop.as_str());
    let view = h.view(&goose());
    assert_eq!(
        roles(&view),
        vec![
            (Role::User, "<mock summary>".to_owned()),
            (Role::Assistant, Continuation::ToolLoop.text().to_owned()),
            (Role::User, "read hello.txt".to_owned()),
        ]
    );
    assert!(matches!(view.messages[0].origin, Origin::Summary(_)));
    assert!(matches!(view.messages[2].origin, Origin::Injected(_)));
    assert_valid(&view);
    // What the summarizer was sent.
    let request = &h.summarizer.requests()[0];
    assert_eq!(
        request.transcript,
        "[user]: read hello.txt\n[assistant]: tool_request(read_file): {}\n[user]: tool_response: hello, world"
    );
    assert!(request.system.contains("### Goal") && request.system.contains("<read-files>"));
    assert_eq!(request.max_output_tokens, 1_000);
}

#[test]
fn latest_user_message_last_gets_the_conversation_text() {
    // The preserved message is the newest message: the conversation continuation is used and
    // the message appears once, as the fresh copy.
    let mut h = Harness::new(
        [Message::user("first"), used(Message::assistant("done"), 8_500, 10), Message::user("second")],
        model(10_000, 1_000),
    );
    h.step(&goose(), Moment::BeforeRequest).unwrap();
    let view = h.view(&goose());
    assert_eq!(view.len(), 3);
    assert_eq!(view.messages[1].message.text(), Continuation::Conversation.text());
    assert_eq!(view.messages[2].message.text(), "second");
    // The reported total is now the summary's output tokens: no second compaction.
    assert_eq!(h.decide(&goose(), Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn case_07_progressive_removal_when_the_summary_call_overflows() {
    // Ten pairs with 1,000-token responses; a provider with a window of 4,000 takes the
    // summary call only once every tool response is left out (10, 9, 8 and 5 responses
    // overflow).
    let mut log = vec![Message::user("start")];
    for i in 0..10 {
        log.push(call(&format!("tool_{i}"), "read_file", &format!("f{i}")));
        log.push(result(&format!("tool_{i}"), "read_file", &filler(&format!("response{i}"), 1_000)));
    }
    let mut h = Harness::new(log.clone(), model(4_000, 1_000));
    h.summarizer = FakeSummarizer::new(FakeMode::Window(4_000));
    let before = h.log.clone();
    let cps = h.compact(&goose(), Moment::Overflow).expect("succeeds at the 100 % step");
    let cp = only(&cps);
    assert_eq!(details(cp, "removed_percent"), 100);
    assert_eq!((cp.summarizer.calls, cp.summarizer.failures), (5, 4));
    let requests = h.summarizer.requests();
    let responses: Vec<usize> = requests.iter().map(|r| r.transcript.matches("tool_response:").count()).collect();
    assert_eq!(responses, [10, 9, 8, 5, 0]);
    assert_eq!(requests[4].transcript.matches("tool_request(read_file)").count(), 10);
    // History is untouched: every original is still in the log.
    assert!(before.entries().zip(h.log.entries()).all(|(a, b)| a == b));

    // Goose does not count the call first: one the provider takes goes out whole, whatever
    // the model's window says.
    let mut h = Harness::new(log, model(4_000, 1_000));
    let cp = only(&h.compact(&goose(), Moment::Overflow).unwrap()).clone();
    assert_eq!(details(&cp, "removed_percent"), 0);
    assert_eq!((cp.summarizer.calls, cp.summarizer.failures), (1, 0));
    assert_eq!(h.summarizer.requests()[0].transcript.matches("tool_response:").count(), 10);
}

#[test]
fn removal_ladder_exhausted_fails_and_leaves_the_log() {
    let mut log = vec![Message::user(filler("huge", 5_000))];
    log.push(call("t", "read_file", "f"));
    log.push(result("t", "read_file", "r"));
    let mut h = Harness::new(log, model(4_000, 1_000));
    h.summarizer = FakeSummarizer::new(FakeMode::Window(4_000));
    let len = h.log.len();
    let err = h.compact(&goose(), Moment::Overflow).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Other);
    assert!(err.message.contains("after removing every tool response"), "{}", err.message);
    assert_eq!(h.summarizer.requests().len(), 5, "one refused call per rung");
    assert_eq!(h.log.len(), len);
}

#[test]
fn filter_tool_responses_removes_middle_out() {
    let kept = |n: usize, percent: u32| -> Vec<String> {
        let log = Log::from_messages(pairs(n));
        let conversation = conversation(&log);
        let messages = conversation.goose_messages();
        let refs: Vec<&GooseMessage<'_>> = messages.iter().collect();
        filter_tool_responses(&refs, percent)
            .iter()
            .flat_map(|m| m.response_ids().map(str::to_owned).collect::<Vec<_>>())
            .collect()
    };
    let all: Vec<String> = (0..10).map(|i| format!("call{i}")).collect();
    assert_eq!(kept(10, 0), all);
    // 10 %: one, just left of the middle; 20 %: then just right of it.
    assert_eq!(kept(10, 10), all.iter().filter(|c| *c != "call4").cloned().collect::<Vec<_>>());
    assert_eq!(
        kept(10, 20),
        all.iter().filter(|c| !["call4", "call5"].contains(&c.as_str())).cloned().collect::<Vec<_>>()
    );
    // 50 %: five, alternating outwards from the middle.
    assert_eq!(kept(10, 50), vec!["call0", "call1", "call7", "call8", "call9"]);
    assert!(kept(10, 100).is_empty());
    // The walk stops at the ends: odd counts keep one, a single response is never removed.
    assert_eq!(kept(3, 100), vec!["call2"]);
    assert_eq!(kept(1, 100), vec!["call0"]);
}

#[test]
fn case_08_manual_compaction() {
    let mut h = Harness::new(
        [Message::user("fix the parser"), used(Message::assistant("fixed"), 100, 10), Message::user("/compact")],
        model(10_000, 1_000),
    );
    assert_eq!(h.decide(&goose(), Moment::BeforeRequest), Decision::compact("manual"));
    let cps = h.compact(&goose(), Moment::BeforeRequest).unwrap();
    let cp = only(&cps);
    assert_eq!(details(cp, "trigger"), "manual");
    assert!(details(cp, "preserved").is_null());
    assert!(details(cp, "notices").as_array().unwrap().iter().any(|n| n == COMPLETE_NOTICE));
    let view = h.view(&goose());
    assert_eq!(
        roles(&view),
        vec![
            (Role::User, "SUMMARY 1 of compaction".to_owned()),
            (Role::Assistant, Continuation::Manual.text().to_owned())
        ]
    );
    assert!(h.summarizer.requests()[0].transcript.ends_with("[user]: /compact"));
    // No compaction is pending afterwards.
    assert_eq!(h.decide(&goose(), Moment::BeforeRequest), Decision::Skip);
}

// ---------------------------------------------------------------------------------------------
// (j) 9: large outputs

#[test]
fn case_09_large_outputs_are_offloaded_by_tool_threshold() {
    let text_60k = "a".repeat(60_000);
    let mut h = Harness::new(
        [
            Message::user("go"),
            call("s", "developer__shell", "x"),
            result("s", "developer__shell", &text_60k),
            call("r", "read", "big.txt"),
            result("r", "read", &text_60k),
            call("b", "bash", "x"),
            result("b", "bash", &text_60k),
            call("o", "some_extension__tool", "x"),
            result("o", "some_extension__tool", &"é".repeat(200_001)),
            call("e", "some_extension__tool", "x"),
            result("e", "some_extension__tool", &"b".repeat(200_000)),
        ],
        model(1_000_000, 1_000),
    );
    assert_eq!(h.decide(&goose(), Moment::TurnEnd), Decision::compact("large-output"));
    let cps = h.compact(&goose(), Moment::BeforeRequest).unwrap();
    let cp = only(&cps);
    assert_eq!(cp.kind, CheckpointKind::Offload);
    let entries: Vec<EntryId> = cp.offloads.iter().flat_map(|o| o.entries.clone()).collect();
    // developer__shell and bash (Goose's shell) over 50,000; any tool over 200,000 chars.
    assert_eq!(entries, vec![EntryId(2), EntryId(6), EntryId(8)]);
    for o in &cp.offloads {
        let original = h.log.message(o.entries[0]).unwrap().searchable_text();
        assert_eq!(h.store.read(&o.path), Some(original.as_str()), "the file holds the output");
        assert!(o.path.starts_with("/tmp/goose_mcp_responses/mcp_response_") && o.path.ends_with(".txt"));
    }
    assert_eq!(cp.offloads[0].path, path_for(EntryId(2), 0));
    assert_eq!(cp.offloads[0].path, "/tmp/goose_mcp_responses/mcp_response_20250101_000002.000000.txt");
    let view = h.view(&goose());
    let shown = |i: usize| view.messages[i].message.searchable_text();
    assert!(shown(2).starts_with("Tool output was 60000 characters and is saved to "));
    assert!(shown(2).contains(&cp.offloads[0].path) && shown(2).contains("Do NOT re-run"));
    assert!(matches!(view.messages[2].origin, Origin::Replaced(EntryId(2), _)));
    assert_eq!(shown(4), text_60k, "read stays inline below 200,000");
    assert!(shown(8).starts_with("Tool output was 200001 characters"), "characters, not bytes");
    assert_eq!(shown(10).len(), 200_000, "exactly 200,000 stays inline");
    // The call ids survive the rewrite, and nothing is pending any more.
    assert_valid(&view);
    assert_eq!(h.decide(&goose(), Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn offload_comes_before_the_summary_in_one_compaction() {
    let mut h = Harness::new(
        [
            Message::user("go"),
            used(call("s", "shell", "x"), 9_000, 10),
            result("s", "shell", &format!("NEEDLE {}", "z".repeat(60_000))),
        ],
        model(10_000, 1_000),
    );
    let cps = h.compact(&goose(), Moment::BeforeRequest).unwrap();
    assert_eq!(cps.iter().map(|c| c.kind).collect::<Vec<_>>(), vec![CheckpointKind::Offload, CheckpointKind::Summary]);
    // The summarizer saw the redirect, not the output; the file keeps the needle.
    let transcript = &h.summarizer.requests()[0].transcript;
    assert!(transcript.contains("tool_response: Tool output was 60007 characters"), "{transcript}");
    assert!(!transcript.contains("NEEDLE"));
    assert!(h.store.read(&cps[0].offloads[0].path).unwrap().starts_with("NEEDLE"));
}

// ---------------------------------------------------------------------------------------------
// (j) 10: reactive cap

#[test]
fn case_10_reactive_compactions_are_capped_per_turn() {
    let mut h = Harness::new(
        [Message::user("kickoff"), call("t", "read", "f"), result("t", "read", "r")],
        model(10_000, 1_000),
    );
    for round in 0..3 {
        assert_eq!(h.decide(&goose(), Moment::Overflow), Decision::compact("overflow"), "round {round}");
        let cps = h.compact(&goose(), Moment::Overflow).unwrap();
        assert_eq!(details(only(&cps), "trigger"), "overflow");
        h.push(call(&format!("t{round}"), "read", "f"));
        h.push(result(&format!("t{round}"), "read", "r"));
    }
    // Three hidden context-length errors this turn: the error surfaces.
    assert_eq!(h.decide(&goose(), Moment::Overflow), Decision::Skip);
    assert!(h.compact(&goose(), Moment::Overflow).unwrap().is_empty());
    // A new turn resets the count.
    h.push(Message::user("again"));
    assert_eq!(h.decide(&goose(), Moment::Overflow), Decision::compact("overflow"));
}

// ---------------------------------------------------------------------------------------------
// (g) failures

#[test]
fn summarizer_error_fails_at_once_and_leaves_the_log() {
    let mut h = Harness::new(
        [Message::user("go"), used(Message::assistant("ok"), 9_000, 10), Message::user("next")],
        model(10_000, 1_000),
    );
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    let len = h.log.len();
    let err = h.compact(&goose(), Moment::BeforeRequest).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Transport);
    assert!(err.message.starts_with("Compaction ran into an error: fake summarizer failure"), "{}", err.message);
    assert_eq!(h.summarizer.requests().len(), 1, "no ladder for other errors");
    assert_eq!(h.log.len(), len);
    assert_eq!(h.failures, 1);
    // Nothing was recorded, so the next request tries again.
    assert_eq!(h.decide(&goose(), Moment::BeforeRequest), Decision::compact("threshold"));
}

#[test]
fn summary_text_is_used_as_returned() {
    let mut h = Harness::new(
        [Message::user("go"), used(Message::assistant("ok"), 9_000, 10), Message::user("next")],
        model(10_000, 1_000),
    );
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("### Goal\nship it".into()));
    let cps = h.compact(&goose(), Moment::BeforeRequest).unwrap();
    let summary = only(&cps).summary.clone().unwrap();
    assert_eq!((summary.role, summary.text()), (Role::User, "### Goal\nship it".to_owned()));
    assert_eq!(details(&cps[0], "total_tokens"), "### Goal\nship it".len() as u64 / 4);
}

// ---------------------------------------------------------------------------------------------
// (i) worked example

/// A tool call whose Goose count is close to `tokens` (the arguments carry the padding).
fn sized_call(id: &str, tool: &str, path: &str, tokens: usize) -> Message {
    Message::tool_call(id, tool, json!({ "path": path, "pad": filler("", tokens.saturating_sub(20)) }))
}

#[test]
fn worked_example_two_compactions() {
    let s1 = filler("S1", 600);
    let mut h = Harness::new(
        [
            Message::user(filler("fix the parser, keep the API", 13)),
            sized_call("m1", "read", "a.py", 30),
            result("m1", "read", &filler("file a", 2_993)),
            sized_call("m3", "edit", "a.py", 600),
            result("m3", "edit", &filler("ok", 3)),
            sized_call("m5", "shell", "x", 30),
            result("m5", "shell", &filler("failure log", 2_493)),
            Message::assistant(filler("analysis", 293)),
            Message::user(filler("try the other approach", 13)),
            sized_call("m9", "read", "b.py", 30),
        ],
        model(10_000, 4_000),
    );
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed(s1.clone()));
    // m0..m9 estimate to about 6,540: no compaction yet.
    assert_eq!(h.decide(&goose(), Moment::BeforeRequest), Decision::Skip);
    h.push(result("m9", "read", &filler("file b", 1_593)));
    assert_eq!(h.decide(&goose(), Moment::BeforeRequest), Decision::compact("threshold"));
    let cp1 = h.compact(&goose(), Moment::BeforeRequest).unwrap();
    assert_eq!(details(only(&cp1), "continuation"), "tool_loop", "the preserved m8 is not the last message");
    let request = &h.summarizer.requests()[0];
    assert!(request.system.contains("re-read them only if they may have changed):**\na.py\nb.py\n"));
    assert!(request.system.contains("**Files modified in this session:**\na.py\n"));
    assert!(request.transcript.starts_with("[user]: fix the parser"));
    let view = h.view(&goose());
    assert_eq!(view.len(), 3);
    assert_eq!(view.messages[2].message.text(), filler("try the other approach", 13));

    // The loop goes on; every response now reports its usage, as the runner's do. The
    // reported total lags one message (m18 is not in m17's usage), so the check after m18
    // passes and compaction 2 waits for the next response.
    let base = 600 + 7 + 90 + 20;
    let steps: Vec<(Message, u64)> = vec![
        (used(sized_call("m11", "shell", "x", 30), base, 30), 30),
        (result("m11", "shell", &filler("log", 2_993)), 3_000),
        (used(Message::assistant(filler("text", 193)), base + 3_030, 200), 200),
        (Message::user(filler("add docs", 13)), 20),
        (used(sized_call("m15", "write", "docs.md", 3_400), base + 3_250, 3_400), 3_400),
        (result("m15", "write", &filler("ok", 3)), 10),
        (used(sized_call("m17", "shell", "x", 30), base + 6_660, 30), 30),
        (result("m17", "shell", &filler("out", 793)), 800),
    ];
    for (m, _) in steps {
        h.push(m);
        assert_eq!(h.decide(&goose(), Moment::BeforeRequest), Decision::Skip, "at {}", h.log.len());
    }
    h.push(used(sized_call("m19", "read", "c.py", 30), base + 7_490, 30));
    h.push(result("m19", "read", &filler("file c", 100)));
    assert_eq!(h.decide(&goose(), Moment::BeforeRequest), Decision::compact("threshold"));
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("S2".into()));
    h.compact(&goose(), Moment::BeforeRequest).unwrap();
    // Summary of the summary: the old summary, continuation and copy lead the transcript.
    let transcript = &h.summarizer.requests()[0].transcript;
    let expected_head =
        format!("[user]: {s1}\n[assistant]: {}\n[user]: try the other approach", Continuation::ToolLoop.text());
    assert!(transcript.starts_with(&expected_head), "{}", &transcript[..200]);
    let view = h.view(&goose());
    assert_eq!(
        roles(&view),
        vec![
            (Role::User, "S2".to_owned()),
            (Role::Assistant, Continuation::ToolLoop.text().to_owned()),
            (Role::User, filler("add docs", 13)),
        ]
    );
    assert_valid(&view);
}

#[test]
fn system_prompt_is_never_hidden_or_summarized() {
    let mut h = Harness::new(
        [
            Message::system("You are goose."),
            Message::user("go"),
            used(Message::assistant("ok"), 9_000, 10),
            Message::user("next"),
        ],
        model(10_000, 1_000),
    );
    h.compact(&goose(), Moment::BeforeRequest).unwrap();
    let view = h.view(&goose());
    assert_eq!(view.messages[0].message.text(), "You are goose.");
    assert!(matches!(view.messages[1].origin, Origin::Summary(_)));
    assert!(!h.summarizer.requests()[0].transcript.contains("You are goose."));
}

#[test]
fn info_names_the_source() {
    let s = crate::strategy();
    assert_eq!(s.info().id, "goose");
    assert!(s.info().source.contains("006bd233c78aeea0a4026700cd27b3c478431672"));
}

#[test]
fn estimator_counts_goose_framing() {
    // A tool request is counted as `id:name:<Debug of Option<JsonObject>>`.
    let log = Log::from_messages([call("c1", "read", "a.py"), result("c1", "read", &filler("r", 10))]);
    let conversation = conversation(&log);
    let messages = conversation.goose_messages();
    let debug = "c1:read:Some({\"path\": String(\"a.py\")})";
    assert_eq!(crate::tokens::message_tokens(&messages[0]), 4 + (debug.len() as u64).div_ceil(4));
    assert_eq!(crate::tokens::message_tokens(&messages[1]), 4 + 10);
    assert_eq!(crate::tokens::estimate(&messages), 4 + (debug.len() as u64).div_ceil(4) + 3 + 14 + 3);
}

/// The replay, fed entry by entry, agrees with the from-scratch functions at every request,
/// through offloads, tool-pair summaries and full compactions.
#[test]
fn replay_keeps_the_law() {
    // Distinct words, so that the exact counts the law reports as usage grow with the text.
    let words = |n: usize| (0..n).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
    let mut session = vec![Message::system("You are goose."), Message::user("Fix the parser.")];
    for call_no in 0..90 {
        let id = format!("c{call_no}");
        if call_no % 15 == 7 {
            session.push(Message::tool_call(&id, "developer__shell", json!({ "command": "cargo test" })));
            session.push(result(&id, "developer__shell", &words(12_000)));
        } else {
            session.push(call(&id, "read_file", &format!("src/f{}.rs", call_no % 4)));
            // Small reads first (tool-pair summaries keep up), then large ones (the threshold).
            let step = if call_no < 60 { 60 } else { 300 };
            session.push(result(&id, "read_file", &words(100 + step * (call_no % 9))));
        }
        if call_no % 6 == 5 {
            session.push(Message::assistant(format!("step {call_no} done")));
            session.push(Message::user(format!("Next step {call_no}.")));
        }
    }
    let tally = compactbench_testkit::assert_replay_law(&goose(), &model(32_000, 4_000), &session, 1);
    assert!(tally.compactions > 3, "{tally:?}");
}
