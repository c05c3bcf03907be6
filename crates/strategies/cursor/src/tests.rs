//! Tests: one per section (j) case of the spec (`case_NN_…`), the worked example of section
//! (i) and the failure rule of section (g).

use compactbench_core::{
    CheckpointKind, Decision, ErrorKind, Message, ModelProfile, Moment, Origin, Role, Usage, View, Window,
};
use compactbench_testkit::{json, model, FakeMode, FakeSummarizer, Harness};

use crate::count::{context_tokens, message_tokens};
use crate::summarize::{history_path, SUMMARY_MAX_TOKENS};
use crate::{strategy, CursorConfig, CursorStrategy};

// ---------------------------------------------------------------------------------------------
// Fixtures.

fn cursor() -> CursorStrategy {
    CursorStrategy::new(CursorConfig::default())
}

const SYSTEM: &str = "You are Cursor's agent. Rules: use tabs.";

fn sys() -> Message {
    Message::system(SYSTEM)
}

fn w200k() -> ModelProfile {
    model(200_000, 8_192)
}

/// `message` as a reply the runner received for a request of `input` tokens.
fn replied(mut message: Message, input: u64, output: u64) -> Message {
    message.usage = Some(Usage { input, output, ..Default::default() });
    message
}

/// A text of exactly `tokens` tokens by `ceil(chars / 4)`, starting with `tag`.
fn filler(tag: &str, tokens: usize) -> String {
    let mut s = format!("{tag} ");
    s.extend(std::iter::repeat_n('x', (tokens * 4).saturating_sub(s.len())));
    s
}

/// A user turn with one tool pair: request, call, result, reply (`tokens` is the request's size).
fn turn(tag: &str, tokens: usize) -> Vec<Message> {
    let id = format!("call-{tag}");
    vec![
        Message::user(filler(tag, tokens)),
        Message::tool_call(&id, "read", json!({"path": format!("{tag}.rs")})),
        Message::tool_result(&id, "read", format!("{tag}-RESULT"), false),
        Message::assistant(format!("{tag}-DONE")),
    ]
}

fn session(turns: &[(&str, usize)]) -> Vec<Message> {
    let mut out = vec![sys()];
    for (tag, tokens) in turns {
        out.extend(turn(tag, *tokens));
    }
    out
}

fn is_compact(d: &Decision) -> bool {
    matches!(d, Decision::Compact { .. })
}

fn summaries(view: &View) -> Vec<&Message> {
    view.messages.iter().filter(|m| matches!(m.origin, Origin::Summary(_))).map(|m| &m.message).collect()
}

/// The tags of the view's user turns that are log messages, in order.
fn kept_tags(view: &View) -> Vec<String> {
    view.messages
        .iter()
        .filter(|m| m.message.role == Role::User && m.origin.entry().is_some())
        .map(|m| m.message.text().split(' ').next().unwrap().to_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Section (j).

#[test]
fn case_01_trigger_at_90_percent_and_the_observed_59() {
    let history = |input, output| vec![sys(), Message::user("go"), replied(Message::assistant("ok"), input, output)];
    let s = cursor();
    let mut h = Harness::new(history(179_990, 9), w200k());
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip, "179,999 < 180,000");
    let mut h = Harness::new(history(179_990, 10), w200k());
    assert!(is_compact(&h.decide(&s, Moment::BeforeRequest)), "180,000 >= 180,000");
    assert_eq!(h.decide(&s, Moment::TurnEnd), Decision::Skip);

    let early = CursorConfig { trigger_percent: 59, ..CursorConfig::default() };
    assert_eq!(early.threshold(200_000), 118_000);
    let s = CursorStrategy::new(early);
    let mut h = Harness::new(history(117_990, 9), w200k());
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    let mut h = Harness::new(history(117_990, 10), w200k());
    assert!(is_compact(&h.decide(&s, Moment::BeforeRequest)));
}

#[test]
fn case_02_manual_summarize_needs_two_user_turns() {
    let s = cursor();
    let mut h = Harness::new(session(&[("T1", 10), ("T2", 10)]), w200k());
    let cps = h.compact(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Summary);

    let mut h = Harness::new(session(&[("T1", 10)]), w200k());
    let (len, view) = (h.log.len(), h.view(&s));
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap_err().kind, ErrorKind::NothingToCompact);
    assert_eq!((h.log.len(), h.view(&s)), (len, view), "no change");
    assert!(h.summarizer.requests().is_empty() && h.store.is_empty());
}

#[test]
fn case_03_latest_user_turn_kept_verbatim() {
    let s = cursor();
    let mut h = Harness::new(session(&[("T1", 100), ("T2", 100), ("T3", 100), ("T4", 100), ("T5", 100)]), w200k());
    let cps = h.compact(&s, Moment::BeforeRequest).unwrap();
    let view = h.view(&s);
    let roles: Vec<Role> = view.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::System, Role::User, Role::User, Role::Assistant, Role::Tool, Role::Assistant]);
    assert!(matches!(view.messages[1].origin, Origin::Summary(_)));
    assert_eq!(kept_tags(&view), ["T5"]);
    assert!(view.iter().any(|m| m.tool_result_ids().any(|id| id == "call-T5")), "T5's call has its result");
    let text: String = view.iter().map(Message::searchable_text).collect();
    for tag in ["T1", "T2", "T3", "T4"] {
        assert!(!text.contains(&format!("{tag}-RESULT")) && !text.contains(&format!("{tag}-DONE")), "{tag}");
    }
    assert!(matches!(&cps[0].window, Window::Kept(ids) if ids.len() == 4));
    let sent = &h.summarizer.requests()[0];
    assert_eq!(sent.max_output_tokens, SUMMARY_MAX_TOKENS);
    assert!(sent.transcript.contains("Tool result (read): T4-RESULT") && !sent.transcript.contains("T5-"));
}

#[test]
fn case_04_summary_names_a_history_file_holding_everything() {
    let s = cursor();
    let mut h = Harness::new(session(&[("T1", 10), ("T2", 10), ("T3", 10)]), w200k());
    let cps = h.compact(&s, Moment::BeforeRequest).unwrap();
    let path = history_path(1);
    let summary = summaries(&h.view(&s))[0].text();
    assert!(summary.contains(&path), "{summary}");
    assert!(h.summarizer.requests()[0].instructions.contains(&path), "the summarizer is told about the file");
    let hits = s.grep(&h.store, &path, "T1-RESULT");
    assert_eq!(hits.len(), 1, "a search for a string from T1 hits: {hits:?}");
    assert!(hits[0].ends_with("Tool result (read): T1-RESULT"), "{hits:?}");
    assert!(s.grep(&h.store, &path, "not in the history").is_empty());
    assert!(s.grep(&h.store, "no/such/file", "T1").is_empty());
    let file = h.store.read(&path).unwrap();
    assert!(file.contains("T3-DONE"), "the kept turn too: all pre-compaction messages");
    assert_eq!(cps[0].offloads[0].path, path);
    assert_eq!(cps[0].offloads[0].entries.len(), h.log.messages().count());
}

#[test]
fn case_05_long_tool_output_goes_to_a_file() {
    let s = cursor();
    let big: String = "0123456789".repeat(5_000);
    let mut messages = session(&[("T1", 10)]);
    messages.push(Message::user("run the tests"));
    messages.push(Message::tool_call("t1", "bash", json!({"command": "cargo test"})));
    messages.push(Message::tool_result("t1", "bash", big.clone(), false));
    let mut h = Harness::new(messages, w200k());
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("tool output"));
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1, "under the threshold: no summary");
    assert_eq!(cps[0].kind, CheckpointKind::Offload);
    assert_eq!(cps[0].window, Window::Inherit);
    let path = ".cursor/tool-outputs/t1.txt";
    assert_eq!(cps[0].offloads[0].path, path);
    let shown = h.view(&s).messages.last().unwrap().message.searchable_text();
    assert!(shown.starts_with(&big[..1_000]) && shown.contains(path) && shown.contains("50000 characters"));
    assert!(shown.len() < 1_300);
    assert_eq!(h.store.read(path).unwrap(), big, "reading the file returns all 50,000 chars");
    assert_eq!(s.grep(&h.store, path, "789012").len(), 1, "one line, found");
    assert!(matches!(h.view(&s).messages.last().unwrap().origin, Origin::Replaced(..)));
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip, "done once");

    // 5,000 chars stay inline.
    let mut h = Harness::new(
        [sys(), Message::user("run"), Message::tool_call("t2", "bash", json!({})), Message::tool_result("t2", "bash", "y".repeat(5_000), false)],
        w200k(),
    );
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn case_06_attached_files_are_condensed_by_size() {
    let s = cursor();
    let body = |tokens: usize| {
        let mut text = String::from("pub fn parse(input: &str) -> Ast {\n    BODY-LINE\n}\nstruct Ast {\n    nodes: Vec<Node>,\n}\n");
        while text.len() < tokens * 4 {
            text.push_str("    let filler = compute(1, 2, 3);\n");
        }
        text.truncate(tokens * 4);
        text
    };
    let full = s.attach("src/small.rs", &body(5_000)).text();
    assert!(full.contains("BODY-LINE") && full.contains("src/small.rs"));

    let sig = s.attach("src/mid.rs", &body(20_000)).text();
    assert!(sig.contains("pub fn parse(input: &str) -> Ast\nstruct Ast"), "{sig}");
    assert!(!sig.contains("BODY-LINE") && !sig.contains("filler"));
    assert!(sig.contains("read the file to expand it"));

    let name = s.attach("src/big.rs", &body(50_000)).text();
    assert!(name.contains("src/big.rs") && name.contains("read the file to expand it"));
    assert!(!name.contains("pub fn parse") && name.len() < 200);
    assert_eq!(s.attach("a", "").role, Role::User);
}

#[test]
fn case_07_repeat_summarizes_the_summary() {
    let s = cursor();
    let mut h = Harness::new(session(&[("T1", 10), ("T2", 10)]), w200k());
    h.compact(&s, Moment::BeforeRequest).unwrap();
    for m in turn("T3", 10) {
        h.push(m);
    }
    let cps = h.compact(&s, Moment::BeforeRequest).unwrap();
    let view = h.view(&s);
    assert_eq!(summaries(&view).len(), 1);
    assert!(summaries(&view)[0].text().contains("SUMMARY 2 of history") && summaries(&view)[0].text().contains(&history_path(2)));
    assert_eq!(kept_tags(&view), ["T3"]);
    let sent = &h.summarizer.requests()[1].transcript;
    assert!(sent.starts_with("Previous summary:\n") && sent.contains("SUMMARY 1 of history"));
    assert!(sent.contains("T2-RESULT") && !sent.contains("T1-RESULT"), "T1 lives only in the first summary");
    let file = h.store.read(&history_path(2)).unwrap();
    assert!(file.contains("T1-RESULT") && file.contains("SUMMARY 1 of history"), "history-2 holds everything, S1 too");
    assert_eq!(cps[0].offloads[0].path, history_path(2));
}

// ---------------------------------------------------------------------------------------------
// Section (i), (g), and the offload-then-summary step.

#[test]
fn worked_example_two_compactions() {
    let s = cursor();
    let first = [("T1", 40_000), ("T2", 35_000), ("T3", 30_000), ("T4", 45_000), ("T5", 20_000), ("T6", 12_000)];
    let mut h = Harness::new(session(&first), w200k());
    assert!(context_tokens(&h.log, &h.view(&s)) >= 180_000);
    assert!(is_compact(&h.decide(&s, Moment::BeforeRequest)));
    h.step(&s, Moment::BeforeRequest).unwrap();
    let view = h.view(&s);
    assert_eq!(kept_tags(&view), ["T6"]);
    assert!(context_tokens(&h.log, &view) < 13_000);

    for (tag, tokens) in [("T7", 60_000), ("T8", 70_000), ("T9", 40_000)] {
        for m in turn(tag, tokens) {
            h.push(m);
        }
    }
    // S1 + T6 (12k) + 170k ≈ 182k >= 180k.
    assert!(is_compact(&h.decide(&s, Moment::BeforeRequest)));
    h.step(&s, Moment::BeforeRequest).unwrap();
    let view = h.view(&s);
    assert_eq!(kept_tags(&view), ["T9"]);
    assert_eq!(summaries(&view).len(), 1);
    let sent = &h.summarizer.requests()[1].transcript;
    for tag in ["SUMMARY 1 of history", "User: T6 ", "User: T7 ", "User: T8 "] {
        assert!(sent.contains(tag), "{tag}");
    }
    assert!(!sent.contains("User: T9 ") && !sent.contains("User: T2 "));
    // Only the history file still has T2's exact output.
    let file = h.store.read(&history_path(2)).unwrap();
    assert!(file.contains("T2-RESULT") && file.contains("SUMMARY 1 of history"));
}

#[test]
fn summarizer_failure_leaves_history_unchanged() {
    let s = cursor();
    let mut h = Harness::new(session(&[("T1", 10), ("T2", 10)]), w200k());
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    let (len, view) = (h.log.len(), h.view(&s));
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap_err().kind, ErrorKind::Transport);
    assert_eq!((h.log.len(), h.view(&s)), (len, view));
    assert!(h.store.is_empty(), "no history file without a summary");
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed(String::new()));
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap_err().kind, ErrorKind::EmptySummary);
    assert_eq!(h.log.len(), len);
}

#[test]
fn offload_then_summary_when_still_over_the_threshold() {
    let s = cursor();
    let mut messages = session(&[("T1", 1_000)]);
    messages.push(Message::user("run"));
    messages.push(Message::tool_call("t1", "bash", json!({})));
    messages.push(Message::tool_result("t1", "bash", "z".repeat(20_000), false));
    // Window 6,000: threshold 5,400; 1,000-token T1 plus a 5,000-token output, then ≈ 250 after the offload.
    let mut h = Harness::new(messages.clone(), model(6_000, 1_000));
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1, "the offload alone brings it under the threshold");

    let mut h = Harness::new(messages, model(1_200, 500));
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    let kinds: Vec<CheckpointKind> = cps.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [CheckpointKind::Offload, CheckpointKind::Summary]);
    let view = h.view(&s);
    assert_eq!(kept_tags(&view), ["run"]);
    let last = view.messages.last().unwrap();
    assert!(matches!(last.origin, Origin::Replaced(..)), "the kept output stays offloaded");
    assert!(last.message.searchable_text().contains(".cursor/tool-outputs/t1.txt"));
    assert!(h.summarizer.requests()[0].transcript.contains("T1 "));
}

#[test]
fn overflow_compacts_once_per_turn() {
    let s = cursor();
    let mut h = Harness::new(session(&[("T1", 10), ("T2", 10)]), w200k());
    assert!(is_compact(&h.decide(&s, Moment::Overflow)));
    h.compact(&s, Moment::Overflow).unwrap();
    assert_eq!(h.decide(&s, Moment::Overflow), Decision::Skip);
    h.push(Message::user("next"));
    assert!(is_compact(&h.decide(&s, Moment::Overflow)));
}

#[test]
fn usage_from_before_a_summary_is_not_reused() {
    let s = cursor();
    let mut messages = session(&[("T1", 10)]);
    messages.push(Message::user("T2"));
    messages.push(replied(Message::assistant("ok"), 190_000, 10));
    let mut h = Harness::new(messages, w200k());
    assert_eq!(context_tokens(&h.log, &h.view(&s)), 190_010);
    h.step(&s, Moment::BeforeRequest).unwrap();
    let view = h.view(&s);
    assert_eq!(context_tokens(&h.log, &view), view.iter().map(message_tokens).sum::<u64>());
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    assert_eq!(strategy().info().id, "cursor");
}
