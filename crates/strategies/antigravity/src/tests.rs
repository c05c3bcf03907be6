//! Tests: one per section (j) case of the spec (`case_NN_…`), the worked example of section
//! (i) and the failure rule of section (g).

use compactbench_core::request::{lower, validate};
use compactbench_core::{
    CheckpointKind, Decision, EntryId, ErrorKind, Message, ModelProfile, Moment, Origin, Role, Shape, Strategy, Usage,
    View, Window,
};
use compactbench_testkit::{json, model, FakeMode, FakeSummarizer, Harness};

use crate::compact::SUMMARY_MAX_TOKENS;
use crate::count::{history_tokens, message_tokens};
use crate::{AntigravityConfig, AntigravityStrategy};

// ---------------------------------------------------------------------------------------------
// Fixtures.

fn agy() -> AntigravityStrategy {
    AntigravityStrategy::new(AntigravityConfig::default())
}

fn agy_with(config: AntigravityConfig) -> AntigravityStrategy {
    AntigravityStrategy::new(config)
}

const SYSTEM: &str = "You are Antigravity. Keep changes minimal.";

fn sys() -> Message {
    Message::system(SYSTEM)
}

fn w1m() -> ModelProfile {
    model(1_000_000, 65_536)
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

/// A user turn of exactly `tokens` tokens: the request and a one-token reply.
fn turn(tag: &str, tokens: usize) -> Vec<Message> {
    vec![Message::user(filler(tag, tokens - 1)), Message::assistant("ok")]
}

/// Threshold 4,750, retained window 1,000.
fn small() -> ModelProfile {
    model(5_000, 1_000)
}

fn is_compact(d: &Decision) -> bool {
    matches!(d, Decision::Compact { .. })
}

/// The tags of the view's user turns that are log messages, in order.
fn kept_tags(view: &View) -> Vec<String> {
    view.messages
        .iter()
        .filter(|m| m.message.role == Role::User && matches!(m.origin, Origin::Entry(_)))
        .map(|m| m.message.text().split(' ').next().unwrap().to_owned())
        .collect()
}

fn summaries(view: &View) -> Vec<&Message> {
    view.messages.iter().filter(|m| matches!(m.origin, Origin::Summary(_))).map(|m| &m.message).collect()
}

fn session(turns: &[(&str, usize)]) -> Vec<Message> {
    let mut out = vec![sys()];
    for (tag, tokens) in turns {
        out.extend(turn(tag, *tokens));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Section (j).

#[test]
fn case_01_threshold_config_and_deprecated_alias() {
    let history = |input, output| vec![sys(), Message::user("go"), replied(Message::assistant("ok"), input, output)];
    let s = agy_with(AntigravityConfig { token_threshold: Some(500_000), ..AntigravityConfig::default() });
    let mut h = Harness::new(history(499_990, 9), w1m());
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip, "499,999 < 500,000");
    let mut h = Harness::new(history(499_990, 10), w1m());
    assert!(is_compact(&h.decide(&s, Moment::BeforeRequest)), "500,000 >= 500,000");
    assert_eq!(h.decide(&s, Moment::TurnEnd), Decision::Skip, "checked before requests only");

    // Unset: the backend default, 95% of the window.
    let c = AntigravityConfig::default();
    assert_eq!(c.threshold(1_000_000), 950_000);
    let mut h = Harness::new(history(949_990, 9), w1m());
    assert_eq!(h.decide(&agy(), Moment::BeforeRequest), Decision::Skip);
    let mut h = Harness::new(history(949_990, 10), w1m());
    assert!(is_compact(&h.decide(&agy(), Moment::BeforeRequest)));

    // Only the deprecated alias set.
    let alias = AntigravityConfig { checkpoint_interval_tokens: Some(400_000), ..AntigravityConfig::default() };
    assert_eq!(alias.threshold(1_000_000), 400_000);
    let mut h = Harness::new(history(399_990, 10), w1m());
    assert!(is_compact(&h.decide(&agy_with(alias), Moment::BeforeRequest)));
    // Both set: the current name wins.
    let both = AntigravityConfig { token_threshold: Some(600_000), checkpoint_interval_tokens: Some(400_000), ..c };
    assert_eq!(both.threshold(1_000_000), 600_000);
}

#[test]
fn case_02_retained_window_keeps_whole_turns_within_20_percent() {
    let s = agy();
    let mut h = Harness::new(session(&[("T0", 5_000), ("T1", 60_000), ("T2", 70_000), ("T3", 80_000)]), w1m());
    let cps = h.compact(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps[0].details["kept_turns"], 2);
    assert_eq!(cps[0].details["kept_tokens"], 150_000);
    let view = h.view(&s);
    assert_eq!(kept_tags(&view), ["T2", "T3"]);
    let sent = &h.summarizer.requests()[0].transcript;
    assert!(sent.contains("User: T0 ") && sent.contains("User: T1 "));
    assert!(!sent.contains("T2 ") && !sent.contains("T3 "), "the retained turns are not summarized");
}

#[test]
fn case_03_latest_turn_kept_even_when_larger_than_the_budget() {
    let s = agy();
    let mut h = Harness::new(session(&[("T1", 10_000), ("T2", 20_000), ("T3", 300_000)]), w1m());
    let cps = h.compact(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(kept_tags(&h.view(&s)), ["T3"]);
    assert_eq!(cps[0].details["kept_tokens"], 300_000);
    assert_eq!(cps[0].details["summarized_messages"], 4, "T1 and T2, both messages each");
}

#[test]
fn case_04_cut_never_splits_a_tool_call_from_its_result() {
    let s = agy();
    let mut messages = session(&[("T1", 10_000)]);
    // T2 straddles the 200k boundary: 150k (T3) + 10k fits, + its 60k tool result does not.
    messages.push(Message::user(filler("T2", 10_000)));
    messages.push(Message::tool_call("c1", "read", json!({"path": "big.log"})));
    messages.push(Message::tool_result("c1", "read", filler("LOG", 60_000), false));
    messages.push(Message::assistant("read it"));
    messages.extend(turn("T3", 150_000));
    let mut h = Harness::new(messages, w1m());
    h.compact(&s, Moment::BeforeRequest).unwrap();
    let view = h.view(&s);
    assert_eq!(kept_tags(&view), ["T3"], "the whole of T2 is summarized");
    assert!(view.iter().all(|m| m.role != Role::Tool && !m.has_tool_calls()));
    let sent = &h.summarizer.requests()[0].transcript;
    assert!(sent.contains("Tool call: read {\"path\":\"big.log\"}") && sent.contains("Tool result (read): LOG "));
    for shape in Shape::ALL {
        let violations = validate(&lower(&view, shape));
        assert!(violations.is_empty(), "{shape:?}: {violations:?}");
    }
}

#[test]
fn case_05_summary_first_and_exactly_one_after_repeat() {
    let s = agy();
    let mut h = Harness::new(session(&[("T1", 100_000), ("T2", 150_000), ("T3", 150_000)]), w1m());
    h.compact(&s, Moment::BeforeRequest).unwrap();
    let view = h.view(&s);
    assert_eq!(view.messages[0].message.role, Role::System);
    assert!(matches!(view.messages[1].origin, Origin::Summary(_)));
    assert_eq!(view.messages[1].message.role, Role::User);
    assert!(view.messages[1].message.text().ends_with("SUMMARY 1 of history"));

    for m in turn("T4", 150_000) {
        h.push(m);
    }
    h.compact(&s, Moment::BeforeRequest).unwrap();
    let view = h.view(&s);
    assert_eq!(summaries(&view).len(), 1);
    assert!(matches!(view.messages[1].origin, Origin::Summary(_)));
    assert!(view.messages[1].message.text().ends_with("SUMMARY 2 of history"));
    let sent = &h.summarizer.requests()[1].transcript;
    assert!(sent.starts_with("Previous summary:\n") && sent.contains("SUMMARY 1 of history"), "{}", &sent[..200]);
    assert_eq!(kept_tags(&view), ["T4"]);
}

#[test]
fn case_06_btw_leaves_history_unchanged() {
    let s = agy();
    let mut h = Harness::new(session(&[("T1", 1_000), ("T2", 1_000)]), w1m());
    let (log, view) = (h.log.clone(), h.view(&s));
    let tokens = history_tokens(&h.log, &view);
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("foo parses the config".into()));
    let answer = s.btw(&h.log, "what does foo do?", &h.summarizer).unwrap();
    assert_eq!(answer, "foo parses the config");
    assert_eq!(h.log, log, "no added entries");
    assert_eq!(h.view(&s), view);
    assert_eq!(history_tokens(&h.log, &h.view(&s)), tokens);
    let r = &h.summarizer.requests()[0];
    assert_eq!(r.purpose, "btw");
    assert!(r.instructions.ends_with("what does foo do?"));
    assert!(r.transcript.contains("User: T2 "), "answered from the current conversation");
}

#[test]
fn case_07_rewind_truncates_the_conversation() {
    let s = agy();
    let mut messages = vec![sys()];
    for i in 1..=10 {
        messages.push(if i % 2 == 1 { Message::user(format!("m{i}")) } else { Message::assistant(format!("m{i}")) });
    }
    let mut h = Harness::new(messages, w1m());
    for cp in s.rewind(&h.log, EntryId(4)).unwrap() {
        assert_eq!(cp.kind, CheckpointKind::Truncate);
        assert!(cp.offloads.is_empty(), "nothing to recover the dropped part from");
        h.log.push_checkpoint(cp);
    }
    let texts: Vec<String> = h.view(&s).iter().map(Message::text).collect();
    assert_eq!(texts, [SYSTEM, "m1", "m2", "m3", "m4"]);
    h.push(Message::user("after the rewind"));
    assert_eq!(h.view(&s).iter().last().unwrap().text(), "after the rewind");
    assert_eq!(h.view(&s).len(), 6);
    // Rewinding to a message no longer in view fails.
    assert_eq!(s.rewind(&h.log, EntryId(7)).unwrap_err().kind, ErrorKind::Other);
}

#[test]
fn case_08_fork_copies_and_diverges() {
    let s = agy();
    let mut a = Harness::new(session(&[("T1", 100), ("T2", 100)]), w1m());
    let a_before = a.log.clone();
    let mut b = s.fork(&a.log);
    assert_eq!(s.project(&b), a.view(&s), "B starts with A's conversation");
    b.push_message(Message::user("only in B"));
    assert_eq!(a.log, a_before, "A unchanged");
    assert!(a.view(&s).iter().all(|m| m.text() != "only in B"));
    a.push(Message::user("only in A"));
    assert!(s.project(&b).iter().all(|m| m.text() != "only in A"));
}

// ---------------------------------------------------------------------------------------------
// Section (i), (g) and the estimator.

#[test]
fn worked_example_two_compactions() {
    let s = agy();
    let turns = [("T1", 150_000), ("T2", 120_000), ("T3", 130_000), ("T4", 110_000), ("T5", 140_000), ("T6", 100_000), ("T7", 90_000), ("T8", 115_000)];
    let mut h = Harness::new(session(&turns), w1m());
    assert_eq!(history_tokens(&h.log, &h.view(&s)), 955_000 + message_tokens(&sys()));
    assert!(is_compact(&h.decide(&s, Moment::BeforeRequest)));
    h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(kept_tags(&h.view(&s)), ["T8"]);

    for (tag, tokens) in [("T9", 300_000), ("T10", 200_000), ("T11", 440_000)] {
        for m in turn(tag, tokens) {
            h.push(m);
        }
    }
    assert!(is_compact(&h.decide(&s, Moment::BeforeRequest)));
    h.step(&s, Moment::BeforeRequest).unwrap();
    let view = h.view(&s);
    assert_eq!(kept_tags(&view), ["T11"]);
    assert_eq!(summaries(&view).len(), 1);
    let sent = &h.summarizer.requests()[1];
    assert_eq!(sent.max_output_tokens, SUMMARY_MAX_TOKENS);
    for tag in ["SUMMARY 1 of history", "User: T8 ", "User: T9 ", "User: T10 "] {
        assert!(sent.transcript.contains(tag), "{tag}");
    }
    assert!(!sent.transcript.contains("User: T11 ") && !sent.transcript.contains("User: T7 "));
}

#[test]
fn summarizer_failure_leaves_history_unchanged() {
    let s = agy();
    let mut h = Harness::new(session(&[("T1", 1_000), ("T2", 1_000)]), small());
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    let (len, view) = (h.log.len(), h.view(&s));
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap_err().kind, ErrorKind::Transport);
    assert_eq!(h.summarizer.requests().len(), 1, "no retry");
    assert_eq!((h.log.len(), h.view(&s)), (len, view));
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed(" ".into()));
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap_err().kind, ErrorKind::EmptySummary);
    assert_eq!(h.log.len(), len);
}

#[test]
fn a_single_turn_has_nothing_to_summarize() {
    let s = agy();
    let mut h = Harness::new(session(&[("T1", 1_000)]), w1m());
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap_err().kind, ErrorKind::NothingToCompact);
    assert!(h.summarizer.requests().is_empty());
}

#[test]
fn overflow_compacts_once_per_turn() {
    let s = agy();
    let mut h = Harness::new(session(&[("T1", 1_000), ("T2", 1_000)]), small());
    assert!(is_compact(&h.decide(&s, Moment::Overflow)));
    h.compact(&s, Moment::Overflow).unwrap();
    assert_eq!(h.decide(&s, Moment::Overflow), Decision::Skip, "already handled this turn");
    h.push(Message::user("next turn"));
    assert!(is_compact(&h.decide(&s, Moment::Overflow)));
}

#[test]
fn usage_from_before_a_compaction_is_not_reused() {
    let s = agy();
    let mut messages = session(&[("T1", 1_000)]);
    messages.push(Message::user("T2"));
    messages.push(replied(Message::assistant("ok"), 4_800, 10));
    let mut h = Harness::new(messages, small());
    assert_eq!(history_tokens(&h.log, &h.view(&s)), 4_810);
    h.compact(&s, Moment::BeforeRequest).unwrap();
    let view = h.view(&s);
    assert_eq!(view.messages.last().unwrap().message.usage.map(|u| u.input), Some(4_800), "the kept reply");
    assert_eq!(history_tokens(&h.log, &view), view.iter().map(message_tokens).sum::<u64>());
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    // A reply received after the compaction counts again.
    h.push(Message::user("T3"));
    h.push(replied(Message::assistant("ok"), 4_760, 0));
    assert!(is_compact(&h.decide(&s, Moment::BeforeRequest)));
    assert!(matches!(h.log.last_checkpoint().unwrap().1.window, Window::Kept(_)));
}
