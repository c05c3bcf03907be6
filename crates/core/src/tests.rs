//! Tests of the projection and of lowering plus validation.

use serde_json::json;

use crate::request::{lower, validate, Block, Request, Rule, WireMessage};
use crate::*;

fn session() -> Log {
    Log::from_messages([
        Message::system("sys"),
        Message::user("u1"),
        Message::tool_call("c1", "read", json!({"path": "a.rs"})),
        Message::tool_result("c1", "read", "fn a() {}", false),
        Message::assistant("a1"),
        Message::user("u2"),
        Message::assistant("a2"),
    ])
}

fn texts(view: &View) -> Vec<String> {
    view.iter().map(Message::searchable_text).collect()
}

#[test]
fn log_ids_are_positions_and_stable() {
    let mut log = session();
    assert_eq!(log.len(), 7);
    let id = log.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(5))));
    assert_eq!(id, EntryId(7));
    assert_eq!(log.message(EntryId(1)).unwrap().text(), "u1");
    assert!(log.message(id).is_none());
    assert_eq!(log.last_checkpoint().unwrap().0, id);
}

#[test]
fn projection_without_checkpoint_is_the_log() {
    let log = session();
    let view = default_projection(&log);
    assert_eq!(view.len(), 7);
    assert!(view.messages.iter().enumerate().all(|(i, m)| m.origin == Origin::Entry(EntryId(i as u32))));
}

#[test]
fn projection_puts_summary_after_system_then_kept_then_later() {
    let mut log = session();
    let cp = log.push_checkpoint(
        Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(5))).with_summary(Message::user("S")),
    );
    log.push_message(Message::user("u3"));
    let view = default_projection(&log);
    assert_eq!(texts(&view), ["sys", "S", "u2", "a2", "u3"]);
    assert_eq!(view.messages[1].origin, Origin::Summary(cp));
}

#[test]
fn only_the_newest_window_counts_and_replacements_accumulate() {
    let mut log = session();
    let mut prune = Checkpoint::new(CheckpointKind::Prune, Window::Inherit);
    prune.replacements.push(Replacement { entry: EntryId(3), message: Message::tool_result("c1", "read", "[pruned]", false) });
    let p = log.push_checkpoint(prune);
    let view = default_projection(&log);
    assert_eq!(texts(&view), ["sys", "u1", "read {\"path\":\"a.rs\"}", "[pruned]", "a1", "u2", "a2"]);
    assert_eq!(view.messages[3].origin, Origin::Replaced(EntryId(3), p));

    log.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(1))).with_summary(Message::user("S1")));
    log.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::Kept(vec![EntryId(2), EntryId(3)])).with_summary(Message::user("S2")));
    let view = default_projection(&log);
    assert_eq!(texts(&view), ["sys", "S2", "read {\"path\":\"a.rs\"}", "[pruned]"]);
}

#[test]
fn summary_after_kept_and_injected_after_summary() {
    let mut log = session();
    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::Kept(vec![EntryId(1), EntryId(5)]))
        .with_summary(Message::user("S"));
    cp.summary_position = SummaryPosition::AfterKept;
    cp.injected.push(Message::user("AGENTS.md"));
    log.push_checkpoint(cp);
    assert_eq!(texts(&default_projection(&log)), ["sys", "AGENTS.md", "u1", "u2", "S"]);
}

#[test]
fn a_paired_session_is_valid_in_every_shape() {
    let mut log = session();
    log.push_message(Message::new(
        Role::Assistant,
        vec![
            Part::text("two at once"),
            Part::ToolCall { id: "p1".into(), name: "grep".into(), args: json!({}) },
            Part::ToolCall { id: "p2".into(), name: "grep".into(), args: json!({}) },
        ],
    ));
    log.push_message(Message::tool_result("p2", "grep", "x", false));
    log.push_message(Message::tool_result("p1", "grep", "y", false));
    let view = default_projection(&log);
    for shape in Shape::ALL {
        let req = lower(&view, shape);
        assert_eq!(validate(&req), vec![], "{shape:?}: {req:#?}");
    }
    let anthropic = lower(&view, Shape::Anthropic);
    assert_eq!(anthropic.system, [Block::Text { text: "sys" }]);
    assert_eq!(anthropic.messages.last().unwrap().blocks.len(), 2, "both results in one user turn");
}

fn rules_of(view: &View, shape: Shape) -> Vec<Rule> {
    validate(&lower(view, shape)).into_iter().map(|v| v.rule).collect()
}

#[test]
fn a_dropped_call_leaves_an_orphan_result_in_every_shape() {
    let mut log = session();
    log.push_checkpoint(Checkpoint::new(CheckpointKind::Truncate, Window::From(EntryId(3))));
    let view = default_projection(&log);
    for shape in Shape::ALL {
        assert!(rules_of(&view, shape).contains(&Rule::OrphanResult), "{shape:?}");
    }
    // Anthropic and Gemini also see an assistant-free start... of a user turn: fine, first is user.
    assert!(!rules_of(&view, Shape::Anthropic).contains(&Rule::FirstRole));
}

#[test]
fn a_dropped_result_leaves_a_missing_result() {
    let mut log = session();
    log.push_checkpoint(Checkpoint::new(CheckpointKind::Truncate, Window::Kept(vec![EntryId(1), EntryId(2), EntryId(4)])));
    let view = default_projection(&log);
    for shape in Shape::ALL {
        assert_eq!(rules_of(&view, shape), vec![Rule::MissingResult], "{shape:?}");
    }
}

#[test]
fn a_result_separated_from_its_call_breaks_adjacency_but_not_responses() {
    let log = Log::from_messages([
        Message::user("u"),
        Message::tool_call("c1", "read", json!({})),
        Message::user("interjection"),
        Message::tool_result("c1", "read", "r", false),
    ]);
    let view = default_projection(&log);
    assert_eq!(rules_of(&view, Shape::OpenaiChat), vec![Rule::MissingResult, Rule::ResultNotAfterCall]);
    assert_eq!(rules_of(&view, Shape::OpenaiResponses), vec![]);
}

#[test]
fn first_role_empty_content_and_alternation() {
    let log = Log::from_messages([Message::system("s"), Message::assistant(""), Message::user("u")]);
    let view = default_projection(&log);
    assert_eq!(rules_of(&view, Shape::Anthropic), vec![Rule::FirstRole, Rule::EmptyContent]);
    assert_eq!(rules_of(&view, Shape::OpenaiChat), vec![Rule::EmptyContent]);

    let text = |t: &'static str| Block::Text { text: t };
    let req = Request {
        shape: Shape::Gemini,
        system: vec![],
        messages: vec![
            WireMessage { role: "user", blocks: vec![text("a")].into(), from_view: vec![0].into() },
            WireMessage { role: "user", blocks: vec![text("b"), text(" ")].into(), from_view: vec![1].into() },
        ],
    };
    let got: Vec<Rule> = validate(&req).into_iter().map(|v| v.rule).collect();
    assert_eq!(got, vec![Rule::EmptyContent, Rule::ConsecutiveSameRole]);
}

#[test]
fn lowering_merges_same_role_turns_for_anthropic_and_gemini_only() {
    let log = Log::from_messages([Message::user("summary"), Message::user("u2")]);
    let view = default_projection(&log);
    assert_eq!(lower(&view, Shape::Gemini).messages.len(), 1);
    assert_eq!(lower(&view, Shape::Anthropic).messages.len(), 1);
    assert_eq!(lower(&view, Shape::OpenaiChat).messages.len(), 2);
    assert_eq!(lower(&view, Shape::OpenaiResponses).messages.len(), 2);
}

/// Feeds `log` entry by entry to a [`DefaultView`] and checks its view against the projection
/// of each prefix; returns the lengths at which it had to project afresh.
fn default_view_refreshes(log: &Log) -> Vec<usize> {
    let mut state = DefaultView::new();
    let mut prefix = Log::new();
    let mut refreshed = Vec::new();
    for (id, e) in log.entries() {
        match e {
            Entry::Message(m) => prefix.push_message(m.clone()),
            Entry::Checkpoint(cp) => prefix.push_checkpoint((**cp).clone()),
        };
        state.push(&prefix, id);
        if state.is_stale() {
            refreshed.push(prefix.len());
        }
        let view = state.view(&prefix).clone();
        assert_eq!(view, default_projection(&prefix), "at length {}", prefix.len());
    }
    refreshed
}

fn prune(entry: u32, text: &str) -> Checkpoint {
    let mut cp = Checkpoint::new(CheckpointKind::Prune, Window::Inherit);
    cp.replacements.push(Replacement { entry: EntryId(entry), message: Message::tool_result("c1", "read", text, false) });
    cp
}

#[test]
fn default_view_follows_appended_messages_and_replacements_and_refreshes_on_new_windows() {
    let mut log = session();
    // A summary that keeps entries from 3 on, with the summary and an injected message in
    // between the leading system message and the kept ones.
    let mut summary = Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(3))).with_summary(Message::user("S"));
    summary.injected.push(Message::user("re-read a.rs"));
    log.push_checkpoint(summary); // 7
    log.push_message(Message::user("u3")); // 8
    log.push_checkpoint(prune(3, "[pruned once]")); // 9: a kept message, replaced
    log.push_checkpoint(prune(1, "[gone]")); // 10: a message outside the window: no effect
    log.push_message(Message::assistant("a3")); // 11
    log.push_checkpoint(prune(3, "[pruned twice]")); // 12: the later replacement wins
    log.push_checkpoint(prune(8, "[u3 replaced]")); // 13
    // The summary sets a new window: projected afresh there. After it, everything updates.
    assert_eq!(default_view_refreshes(&log), [8]);
    assert_eq!(texts(&default_projection(&log)), ["sys", "S", "re-read a.rs", "[pruned twice]", "a1", "u2", "a2", "[u3 replaced]", "a3"]);

    // A system message after the conversation started is an ordinary message, shown last; one
    // among the leading ones after a summary goes ahead of it: projected afresh.
    let mut log = session();
    log.push_message(Message::system("late"));
    assert_eq!(default_view_refreshes(&log), Vec::<usize>::new());
    let mut log = Log::from_messages([Message::system("sys")]);
    log.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(1))).with_summary(Message::user("S")));
    log.push_message(Message::system("second"));
    log.push_message(Message::user("u"));
    assert_eq!(default_view_refreshes(&log), [2, 3]);
}

/// A message without a failure marker reads and prints as before the marker existed; a marked
/// one keeps its partial usage beside it.
#[test]
fn the_failure_marker_is_left_out_when_absent_and_lowercase_when_set() {
    let mut reply = Message::assistant("partial");
    reply.usage = Some(Usage { input: 900, output: 1, ..Default::default() });
    let plain = serde_json::to_string(&reply).unwrap();
    assert_eq!(plain, r#"{"role":"assistant","parts":[{"type":"text","text":"partial"}],"usage":{"input":900,"output":1,"cache_read":0}}"#);
    assert_eq!(serde_json::from_str::<Message>(&plain).unwrap(), reply);
    for (failure, name) in [(Failure::Aborted, "aborted"), (Failure::Error, "error")] {
        let marked = Message { failure: Some(failure), ..reply.clone() };
        let text = serde_json::to_value(&marked).unwrap();
        assert_eq!((text["failure"].clone(), text["usage"]["input"].clone()), (json!(name), json!(900)));
        assert_eq!(serde_json::from_value::<Message>(text).unwrap(), marked);
    }
}
