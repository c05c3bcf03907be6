//! Section (j) cases of shared/specs/oh-my-pi.md (named `case_NN_…`), the worked example of
//! section (i), and the failure rules of section (g).

use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Decision, EntryId, ErrorKind, Failure, Log, Message, Moment, Origin, Part, Role, Strategy,
    Usage, VirtualStore, Window,
};
use compactbench_testkit::{json, model, render, FakeMode, FakeSummarizer, Harness};
use expect_test::expect;

use crate::branch::Work;
use crate::maintain::{shake_falls_through, turn_end_checks};
use crate::prepare::{find_cut_point, prepare, scaled_keep};
use crate::prune::{prune_tool_outputs, pruned_notice, supersede, PruneConfig, DEFAULT_PRUNE, SUPERSEDED_NOTICE};
use crate::shake::{
    apply, artifact_text, block_ranges, collect_regions, placeholder, shake, Region, RegionKind, ShakeConfig,
    AGGRESSIVE_SHAKE, DEFAULT_SHAKE, RESCUE_SHAKE,
};
use crate::summarize::{handoff_message, remote_compaction_summary, summary_message};
use crate::tokens::{context_tokens, count_compaction_summary, count_fragments, count_message, count_text, is_usage_anchor, prompt_tokens};
use crate::trigger::{
    method_order, recovery_band, select, should_compact, threshold_tokens, Caps, Method, Reason, OFFLINE_CAPS,
};
use crate::{OhMyPiConfig, OhMyPiStrategy};

// ---------------------------------------------------------------------------------------------
// Fixtures

/// `n` bytes: `label`, then `.` padding (so `n / 4` tokens when `n` is a multiple of 4).
fn padded(label: &str, n: usize) -> String {
    assert!(label.len() <= n, "{label} does not fit in {n} bytes");
    format!("{label}{}", ".".repeat(n - label.len()))
}

fn user(label: &str, tokens: usize) -> Message {
    Message::user(padded(label, tokens * 4))
}

/// An assistant text reply of `tokens`, with provider usage whose context total is `total`.
fn reply(label: &str, tokens: usize, total: Option<u64>) -> Message {
    let mut m = Message::assistant(padded(label, tokens * 4));
    m.usage = total.map(|t| Usage { input: t - tokens as u64, output: tokens as u64, ..Default::default() });
    m
}

fn call(id: &str, name: &str, path: &str) -> Message {
    Message::tool_call(id, name, json!({ "path": path }))
}

fn result(id: &str, name: &str, label: &str, tokens: usize) -> Message {
    Message::tool_result(id, name, padded(label, tokens * 4), false)
}

fn cfg() -> OhMyPiConfig {
    OhMyPiConfig::default()
}

fn order(methods: &[&str]) -> OhMyPiConfig {
    OhMyPiConfig { method_order: methods.iter().map(|m| (*m).to_owned()).collect(), ..cfg() }
}

/// A shake preset for the region tests (shake.test.ts: protect 0, minSavings 0, fenceMin 50).
fn test_shake() -> ShakeConfig {
    ShakeConfig { name: "test", protect_tokens: 0, min_savings: 0, fence_min_tokens: 50, protect_artifact_reads: true }
}

/// A log-backed session whose entries have names.
struct Session {
    h: Harness,
    names: Vec<(EntryId, String)>,
}

impl Session {
    fn new(window: u64) -> Session {
        Session::with(window, FakeMode::Numbered)
    }

    fn with(window: u64, mode: FakeMode) -> Session {
        let mut h = Harness::new([], model(window, 8192));
        h.summarizer = FakeSummarizer::new(mode);
        let mut s = Session { h, names: Vec::new() };
        s.push("system", Message::system("You are a coding agent."));
        s
    }

    fn push(&mut self, name: &str, m: Message) -> EntryId {
        let id = self.h.log.next_id();
        self.h.push(m);
        self.names.push((id, name.into()));
        id
    }

    fn id(&self, name: &str) -> EntryId {
        self.names.iter().find(|(_, n)| n == name).map(|(id, _)| *id).unwrap()
    }

    fn name(&self, id: EntryId) -> String {
        self.names.iter().find(|(i, _)| *i == id).map(|(_, n)| n.clone()).unwrap()
    }

    /// The view by entry name; a summary shows as `summary`.
    fn labels(&self, s: &dyn Strategy) -> Vec<String> {
        self.h
            .view(s)
            .messages
            .iter()
            .map(|vm| match vm.origin {
                Origin::Summary(_) => "summary".to_owned(),
                o => self.name(o.entry().unwrap()),
            })
            .collect()
    }

    fn step(&mut self, s: &dyn Strategy, at: Moment) -> Vec<Checkpoint> {
        self.h.step(s, at).expect("compaction succeeds")
    }
}

fn events(cp: &Checkpoint) -> Vec<String> {
    cp.details["events"]
        .as_array()
        .map(|a| a.iter().map(|e| e.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

/// The worked-example session of section (i): window 200,000, an old 30,000- or
/// 45,000-token tool result, 20,000 newer tokens, and a reply reporting 175,000.
fn worked_example(old_result_tokens: usize, mode: FakeMode) -> Session {
    let mut s = Session::with(200_000, mode);
    s.push("u1", user("u1 fix the parser", 100));
    s.push("a1", call("c1", "read", "src/parser.rs"));
    s.push("r1", result("c1", "read", "r1 parser source", old_result_tokens));
    s.push("a2", reply("a2 analysis", 20_000, Some(100_000)));
    s.push("u2", user("u2 go on", 100));
    s.push("a3", reply("a3 done", 100, Some(175_000)));
    s
}

// ---------------------------------------------------------------------------------------------
// (j) conformance cases

#[test]
fn case_01_threshold() {
    let d = cfg();
    assert_eq!(threshold_tokens(200_000, &d), 170_000);
    assert_eq!(threshold_tokens(1_000_000, &d), 850_000);
    assert_eq!(threshold_tokens(50_000, &d), 33_616);
    assert_eq!(threshold_tokens(100_000, &OhMyPiConfig { threshold_tokens: Some(120_000), ..cfg() }), 99_999);
    assert_eq!(threshold_tokens(200_000, &OhMyPiConfig { threshold_percent: Some(80.0), ..cfg() }), 160_000);
    assert_eq!(threshold_tokens(200_000, &OhMyPiConfig { threshold_percent: Some(150.0), ..cfg() }), 198_000);
    assert_eq!(threshold_tokens(16_000, &d), 13_600, "unset reserve falls back to 15%");
    assert_eq!(
        threshold_tokens(16_000, &OhMyPiConfig { reserve_tokens: Some(10_000), ..cfg() }),
        6_000,
        "an explicit reserve is honoured"
    );
    assert!(!should_compact(170_000, 200_000, &d));
    assert!(should_compact(170_001, 200_000, &d));
    assert!(!should_compact(170_001, 200_000, &OhMyPiConfig { enabled: false, ..cfg() }));

    // Through the strategy: the post-turn check on a reply reporting 170,000 / 170,001.
    let strategy = OhMyPiStrategy::new(cfg());
    for (total, expected) in [(170_000, Decision::Skip), (170_001, Decision::compact("threshold"))] {
        let mut s = Session::new(200_000);
        s.push("u1", user("u1", 100));
        s.push("a1", reply("a1", 100, Some(total)));
        assert_eq!(s.h.decide(&strategy, Moment::TurnEnd), expected, "{total}");
    }
}

/// oh-my-pi's `getAssistantUsage` and `isTranscriptUsageAnchor` skip a reply whose
/// `stopReason` is `"aborted"` or `"error"` even when it carries (partial) usage: the turn-end
/// check ends on it, and the check before the next prompt anchors on the reply before it.
#[test]
fn failed_replies_with_partial_usage_give_no_usage() {
    let strategy = OhMyPiStrategy::new(cfg());
    let session = |failure: Option<Failure>| {
        let mut s = Session::new(200_000);
        s.push("u1", user("u1", 100));
        s.push("a1", reply("a1", 100, Some(1_000)));
        s.push("u2", user("u2", 100));
        let mut partial = reply("a2", 10, Some(180_000));
        partial.failure = failure;
        assert_eq!(is_usage_anchor(&partial), failure.is_none());
        s.push("a2", partial);
        s
    };
    assert_eq!(session(None).h.decide(&strategy, Moment::TurnEnd), Decision::compact("threshold"));
    for failure in [Failure::Aborted, Failure::Error] {
        let mut s = session(Some(failure));
        assert_eq!(s.h.decide(&strategy, Moment::TurnEnd), Decision::Skip, "{failure:?}");
        s.push("u3", user("u3", 10));
        assert_eq!(s.h.decide(&strategy, Moment::BeforeRequest), Decision::Skip, "{failure:?}: anchored on a1");
    }
    let mut s = session(None);
    s.push("u3", user("u3", 10));
    assert_eq!(s.h.decide(&strategy, Moment::BeforeRequest), Decision::compact("threshold"));

    // `checkCompaction` does nothing on an aborted reply, not even the stale-read pass; an
    // errored one still gets that pass (as `case_13_pruning_placeholders` sets it up).
    for (failure, want) in [(Failure::Aborted, Decision::Skip), (Failure::Error, Decision::compact("prune"))] {
        let mut s = Session::new(200_000);
        s.push("u1", user("u1", 10));
        s.push("a1", call("c1", "read", "src/a.rs"));
        s.push("r1", result("c1", "read", "r1 old", 2_000));
        s.push("a2", call("c2", "read", "src/a.rs"));
        s.push("r2", result("c2", "read", "r2 new", 2_000));
        let mut last = reply("a3", 10, Some(5_000));
        last.failure = Some(failure);
        s.push("a3", last);
        assert_eq!(s.h.decide(&strategy, Moment::TurnEnd), want, "{failure:?}");
    }
}

#[test]
fn case_02_trigger_numerator() {
    // Reply usage 90,000, local estimate ~150,000: the larger one is compared.
    let mut s = Session::new(200_000);
    s.push("u1", user("u1 paste", 150_000));
    s.push("a1", reply("a1", 10, Some(90_000)));
    let mut work = Work::new(&s.h.log);
    let stored = work.stored_estimate(&work.context());
    assert!((150_000..150_020).contains(&stored), "{stored}");
    assert_eq!(turn_end_checks(&mut work, &cfg(), 200_000).run, None, "150,000 < 170,000");

    // The same floor triggers once it crosses the threshold, and is the trigger figure.
    let mut s = Session::new(200_000);
    s.push("u1", user("u1 paste", 175_000));
    s.push("a1", reply("a1", 10, Some(90_000)));
    let mut work = Work::new(&s.h.log);
    let stored = work.stored_estimate(&work.context());
    assert_eq!(turn_end_checks(&mut work, &cfg(), 200_000).run, Some((Reason::Threshold, Some(stored))));

    // A reply older than the latest compaction contributes 0: only the local estimate counts.
    let mut s = Session::new(200_000);
    let u1 = s.push("u1", user("u1", 100));
    s.push("a1", reply("a1", 100, Some(180_000)));
    let mut work = Work::new(&s.h.log);
    assert_eq!(turn_end_checks(&mut work, &cfg(), 200_000).run, Some((Reason::Threshold, Some(180_000))));
    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::From(u1)).with_summary(summary_message("S"));
    cp.details = json!({"summary": "S", "method": "soft"});
    s.h.log.push_checkpoint(cp);
    let mut work = Work::new(&s.h.log);
    assert_eq!(turn_end_checks(&mut work, &cfg(), 200_000).run, None);
}

#[test]
fn case_03_estimator() {
    assert_eq!(count_text("hello world"), 3);
    assert_eq!(count_fragments(["ab", "cd"]), 2, "each fragment rounded up");
    assert_eq!(count_message(&Message::tool_call("c", "read", json!({"path": "a.ts"}))), 1 + 4);
    let image = Message::new(Role::User, vec![Part::Media { mime: "image/png".into(), tokens: 1600 }]);
    assert_eq!(count_message(&image), 1200);
    assert_eq!(count_compaction_summary("S", 2), 1 + 2 * 5024);
    assert_eq!(count_text("é😀"), 2, "UTF-8 bytes, not characters");
}

#[test]
fn case_04_method_selection() {
    let default = method_order(&cfg().method_order);
    assert_eq!(default, vec![Method::Remote, Method::Snapcompact, Method::Handoff, Method::Shake, Method::Soft]);
    assert_eq!(select(&default, 0, Reason::Threshold, OFFLINE_CAPS, false), Some((2, Method::Handoff)));
    assert_eq!(select(&default, 0, Reason::Overflow, OFFLINE_CAPS, false), Some((3, Method::Shake)));
    let handoff_only = method_order(&order(&["handoff"]).method_order);
    assert_eq!(select(&handoff_only, 0, Reason::Overflow, OFFLINE_CAPS, false), None);
    assert_eq!(select(&[], 0, Reason::Threshold, OFFLINE_CAPS, false), None);
    let vision = Caps { vision: true, remote: false };
    assert_eq!(select(&default, 0, Reason::Threshold, vision, false), Some((1, Method::Snapcompact)));
    assert_eq!(
        select(&default, 0, Reason::Overflow, vision, true),
        Some((3, Method::Shake)),
        "a 413 byte-limit recovery skips snapcompact"
    );
    assert_eq!(
        method_order(&["soft".into(), "bogus".into(), "soft".into(), "shake".into()]),
        vec![Method::Soft, Method::Shake]
    );

    // Through the strategy: nothing usable, nothing happens.
    let mut s = Session::new(200_000);
    s.push("u1", user("u1", 100));
    s.push("a1", reply("a1", 100, Some(190_000)));
    assert_eq!(s.h.decide(&OhMyPiStrategy::new(order(&["handoff"])), Moment::Overflow), Decision::Skip);
    assert_eq!(s.h.decide(&OhMyPiStrategy::new(order(&[])), Moment::TurnEnd), Decision::Skip);
    assert_eq!(s.h.decide(&OhMyPiStrategy::new(cfg()), Moment::Overflow), Decision::compact("overflow"));
}

#[test]
fn case_05_shake_fall_through() {
    let d = cfg();
    assert_eq!(recovery_band(200_000, &d), 136_000);
    assert!(shake_falls_through(Reason::Threshold, true, 30_000, Some(175_000), 0, 200_000, &d));
    assert!(!shake_falls_through(Reason::Threshold, true, 45_000, Some(175_000), 0, 200_000, &d));
    assert!(shake_falls_through(Reason::Threshold, false, 0, Some(175_000), 0, 200_000, &d));
    assert!(!shake_falls_through(Reason::Idle, false, 0, Some(175_000), 0, 200_000, &d), "idle never falls through");
    assert!(shake_falls_through(Reason::Overflow, false, 0, None, 0, 200_000, &d), "overflow, nothing reclaimed");
    assert!(!shake_falls_through(Reason::Overflow, true, 10, None, 150_000, 200_000, &d));
    assert!(shake_falls_through(Reason::Overflow, true, 10, None, 180_000, 200_000, &d));

    // End to end (methods shake, soft): 30,000 freed → still above the band → soft.
    let strategy = OhMyPiStrategy::new(order(&["shake", "soft"]));
    let mut s = worked_example(30_000, FakeMode::Numbered);
    let cps = s.step(&strategy, Moment::TurnEnd);
    let kinds: Vec<_> = cps.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, vec![CheckpointKind::Offload, CheckpointKind::Summary]);
    let ev = events(cps.last().unwrap());
    assert!(ev[0].starts_with("Auto-shake reclaimed ~29985 tokens but context is still above the threshold"), "{ev:?}");
    assert_eq!(cps[1].details["method"], "soft");

    // 45,000 freed → 130,000 ≤ 136,000: done, no compaction entry.
    let mut s = worked_example(45_000, FakeMode::Numbered);
    let cps = s.step(&strategy, Moment::TurnEnd);
    assert_eq!(cps.iter().map(|c| c.kind).collect::<Vec<_>>(), vec![CheckpointKind::Offload]);
    assert!(s.h.summarizer.requests().is_empty());

    // Nothing eligible (the only tool result is inside the protect window): fall through.
    let mut s = Session::new(200_000);
    s.push("u1", user("u1", 100));
    s.push("a1", call("c1", "bash", "x"));
    s.push("r1", result("c1", "bash", "r1", 1_000));
    s.push("a2", reply("a2", 100, Some(175_000)));
    let mut work = Work::new(&s.h.log);
    let mut store = VirtualStore::new();
    assert!(!shake(&mut work, &DEFAULT_SHAKE, &mut store, "threshold").reclaimed());
}

#[test]
fn case_06_shake_region_selection() {
    let config = test_shake();
    let mut log = Log::new();
    log.push_message(call("c1", "bash", "x"));
    log.push_message(Message::tool_result("c1", "bash", "x".repeat(400), false));
    let work = Work::new(&log);
    let regions = collect_regions(&work, &config);
    assert_eq!(regions.len(), 1);
    assert_eq!(regions[0].kind, RegionKind::ToolResult { part: 0 });
    assert_eq!(regions[0].tokens, 100);
    let shaken = apply(work.msg(1), &[(&regions[0], "[shaken]".to_owned())]);
    assert_eq!(shaken.parts.len(), 1);
    assert!(
        matches!(&shaken.parts[0], Part::ToolResult { text, call_id, .. } if text == "[shaken]" && call_id == "c1")
    );
    // The full pass stamps prunedAt, so the result is no longer a region.
    let mut work = Work::new(&log);
    let mut store = VirtualStore::new();
    assert!(shake(&mut work, &config, &mut store, "test").reclaimed());
    assert!(work.is_pruned(1, 0));
    assert!(collect_regions(&work, &config).is_empty(), "already pruned");

    // Protected tool.
    let mut log = Log::new();
    log.push_message(Message::tool_call("s1", "skill", json!({"name": "x"})));
    log.push_message(Message::tool_result("s1", "skill", "x".repeat(400), false));
    assert!(collect_regions(&Work::new(&log), &config).is_empty());

    // Three equal results, protect = 1.5 × one: only the oldest has enough after it.
    let mut log = Log::new();
    for i in 0..3 {
        log.push_message(Message::tool_result(format!("c{i}"), "bash", "y".repeat(400), false));
    }
    let per_entry = count_message(log.message(EntryId(0)).unwrap());
    let c = ShakeConfig { protect_tokens: per_entry * 3 / 2, ..config };
    let regions = collect_regions(&Work::new(&log), &c);
    assert_eq!(regions.iter().map(|r| r.item).collect::<Vec<_>>(), vec![0]);

    // Savings below minSavings: nothing.
    let c = ShakeConfig { min_savings: per_entry * 10, ..config };
    assert!(collect_regions(&Work::new(&log), &c).is_empty());
    // (Results flagged `useless` bypass the protect window; our sessions carry no such flag.)
}

#[test]
fn case_07_shake_blocks() {
    let config = test_shake();
    let fence = format!("```\n{}\n```", "z".repeat(472)); // 480 bytes = 120 tokens
    let text = format!("intro line\n{fence}\noutro line");
    assert_eq!(block_ranges(&text), vec![(11, 11 + fence.len())]);
    let mut log = Log::new();
    log.push_message(Message::assistant(text.clone()));
    let work = Work::new(&log);
    let regions = collect_regions(&work, &config);
    assert_eq!(regions.len(), 1);
    assert_eq!(regions[0].original, fence);
    let out = apply(work.msg(0), &[(&regions[0], "[shaken]".to_owned())]);
    assert_eq!(out.text(), "intro line\n[shaken]\noutro line");

    // Below fenceMinTokens, unterminated: nothing.
    let mut log = Log::new();
    log.push_message(Message::assistant("intro\n```\nsmall\n```\noutro"));
    log.push_message(Message::assistant(format!("intro\n```\n{}\nno close", "z".repeat(800))));
    assert!(collect_regions(&Work::new(&log), &config).is_empty());

    // Two fences in one text, replaced highest offset first.
    let block = |c: char| format!("```\n{}\n```", c.to_string().repeat(400));
    let text = format!("head\n{}\nmiddle\n{}\ntail", block('a'), block('b'));
    let mut log = Log::new();
    log.push_message(Message::assistant(text));
    let work = Work::new(&log);
    let regions = collect_regions(&work, &config);
    assert_eq!(regions.len(), 2);
    let out = apply(work.msg(0), &[(&regions[0], "[A]".to_owned()), (&regions[1], "[B]".to_owned())]);
    assert_eq!(out.text(), "head\n[A]\nmiddle\n[B]\ntail");

    // A text block after a tool-call block is addressed by its own index.
    let mut log = Log::new();
    log.push_message(Message::new(
        Role::Assistant,
        vec![
            Part::text("preface"),
            Part::ToolCall { id: "c1".into(), name: "bash".into(), args: json!({}) },
            Part::text(block('q')),
        ],
    ));
    let regions = collect_regions(&Work::new(&log), &config);
    assert!(matches!(regions[0].kind, RegionKind::Block { part: 2, .. }));

    // XML element spanning whole lines; nested fence collapses into it.
    let xml = format!("<output>\n{}\n</output>", block('x'));
    assert_eq!(block_ranges(&format!("a\n{xml}\nb")), vec![(2, 2 + xml.len())]);

    // Aggressive preset: the older result is shaken, the newest kept.
    let mut log = Log::new();
    log.push_message(Message::tool_result("o", "bash", "old-result ".repeat(300), false));
    log.push_message(Message::tool_result("n", "bash", "recent-result ".repeat(3000), false));
    let regions = collect_regions(&Work::new(&log), &AGGRESSIVE_SHAKE);
    assert_eq!(regions.iter().map(|r| r.item).collect::<Vec<_>>(), vec![0]);
    // Rescue preset: a single newest oversized result is shaken.
    let mut log = Log::new();
    log.push_message(Message::tool_result("n", "bash", "recent-result ".repeat(3000), false));
    assert_eq!(collect_regions(&Work::new(&log), &RESCUE_SHAKE).len(), 1);
}

#[test]
fn case_08_shake_placeholder_and_artifact() {
    let region = Region {
        item: 0,
        kind: RegionKind::ToolResult { part: 0 },
        tokens: 10_000,
        original: "ORIGINAL".into(),
        label: "bash".into(),
    };
    assert_eq!(placeholder(&region, 0, Some("7")), "[shaken ~10000 tokens — recover: artifact://7 (region 1)]");
    assert_eq!(placeholder(&region, 0, None), "[shaken ~10000 tokens]");
    assert!(artifact_text(std::slice::from_ref(&region)).starts_with("### region 1 (bash, ~10000 tok)\n\nORIGINAL\n"));

    // Default preset with only 3,000 tokens eligible: savings 2,984 < 4,000, no change.
    let mut log = Log::new();
    log.push_message(Message::tool_result("c", "bash", "x".repeat(12_000), false));
    log.push_message(Message::user("y".repeat(64_000)));
    assert!(collect_regions(&Work::new(&log), &DEFAULT_SHAKE).is_empty());

    // A real pass: the artifact is in the store under the path the placeholder names, and the
    // view shows the placeholder in place of the result, call id kept.
    let strategy = OhMyPiStrategy::new(order(&["shake"]));
    let mut s = worked_example(45_000, FakeMode::Numbered);
    let cps = s.step(&strategy, Moment::TurnEnd);
    assert_eq!(cps[0].offloads[0].path, "artifact://0");
    assert_eq!(cps[0].offloads[0].entries, vec![s.id("r1")]);
    let artifact = s.h.store.read("artifact://0").unwrap();
    assert!(artifact.starts_with("### region 1 (read, ~45000 tok)\n\nr1 parser source"), "{}", &artifact[..60]);
    let view = s.h.view(&strategy);
    let shown = view.messages.iter().find(|m| m.origin.entry() == Some(s.id("r1"))).unwrap();
    assert!(matches!(shown.origin, Origin::Replaced(..)));
    assert!(matches!(&shown.message.parts[0], Part::ToolResult { text, call_id, .. }
        if text == "[shaken ~45000 tokens — recover: artifact://0 (region 1)]" && call_id == "c1"));
    // A second artifact gets the next id.
    let mut s2 = worked_example(45_000, FakeMode::Numbered);
    s2.h.store = s.h.store.clone();
    s2.step(&strategy, Moment::TurnEnd);
    assert!(s2.h.store.read("artifact://1").is_some());
}

#[test]
fn case_09_preparation_keep_budget() {
    assert_eq!(scaled_keep(20_000, 60_000, 40_000), 13_333);
    assert_eq!(scaled_keep(20_000, 30_000, 40_000), 20_000, "ratio ≤ 1 leaves the budget");

    let build = |input: u64| {
        let mut s = Session::new(200_000);
        s.push("u1", user("u1", 10_000));
        s.push("a1", reply("a1", 10_000, None));
        s.push("u2", user("u2", 10_000));
        let mut a2 = reply("a2", 10_000, None);
        a2.usage = Some(Usage { input, output: 10_000, ..Default::default() });
        s.push("a2", a2);
        s
    };
    // Prompt 60,000 over 40,000 local: keep 13,333 → only a2 fits, a split turn.
    let s = build(60_000);
    let work = Work::new(&s.h.log);
    let prep = prepare(&work, 20_000, false).unwrap();
    assert_eq!(prep.first_kept, s.id("a2"));
    assert!(prep.split);
    assert_eq!(prep.tokens_before, 70_000);
    // Prompt ≤ local: keep 20,000 → u2 and a2 fit exactly.
    let s = build(30_000);
    let work = Work::new(&s.h.log);
    let prep = prepare(&work, 20_000, false).unwrap();
    assert_eq!(prep.first_kept, s.id("u2"));
    assert!(!prep.split);

    // findCutPoint checks the budget at cut points only: an assistant group whose results
    // push the suffix over the budget is not kept, the newest group always is.
    let sizes = [(Role::User, 10), (Role::Assistant, 10), (Role::Tool, 5_000), (Role::User, 10), (Role::Assistant, 10)];
    let cut = find_cut_point(&sizes, 1_000);
    assert_eq!((cut.first_kept, cut.split), (3, false));
    let cut = find_cut_point(&[(Role::User, 10), (Role::Assistant, 9_000)], 1_000);
    assert_eq!((cut.first_kept, cut.turn_start, cut.split), (1, Some(0), true));
}

#[test]
fn case_10_repeated_compaction_window() {
    let mut s = Session::new(200_000);
    s.push("u1", user("u1 first", 100));
    s.push("a1", reply("a1", 100, Some(1_000)));
    let u2 = s.push("u2", user("u2 second", 100));
    s.push("a2", reply("a2", 100, Some(1_200)));
    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::From(u2)).with_summary(summary_message("C1 SUMMARY"));
    cp.details = json!({"summary": "C1 SUMMARY", "method": "soft", "readFiles": ["old.rs"], "modifiedFiles": []});
    s.h.log.push_checkpoint(cp);
    s.push("u3", user("u3 third", 100));
    s.push("a3", reply("a3", 100, Some(1_500)));

    // Everything from u2 fits the keep budget: no preparation.
    assert!(prepare(&Work::new(&s.h.log), 20_000, false).is_none());

    // With a tiny budget, the collection starts at u2 (not after C1) and C1 is passed on.
    let work = Work::new(&s.h.log);
    let prep = prepare(&work, 1, false).unwrap();
    assert_eq!(prep.to_summarize.first().map(|&i| work.items[i].id()), Some(u2));
    assert_eq!(prep.previous_summary.as_deref(), Some("C1 SUMMARY"));
    assert_eq!(prep.first_kept, s.id("a3"));

    // The soft request carries the previous summary and u2, not u1.
    let strategy = OhMyPiStrategy::new(OhMyPiConfig { keep_recent_tokens: 1, ..order(&["soft"]) });
    let mut work = Work::new(&s.h.log);
    let mut cx = Cx::new(&s.h.model, &s.h.summarizer, &mut s.h.store, compactbench_testkit::tokenizer());
    let mut pass = crate::maintain::Pass {
        config: &strategy.config,
        work: &mut work,
        cx: &mut cx,
        events: Vec::new(),
        error: None,
        pending_prompt: false,
    };
    pass.run(Reason::Threshold, None);
    let cps = pass.finish().unwrap();
    let requests = s.h.summarizer.requests();
    let history = &requests[0];
    assert!(history.transcript.contains("<previous-summary>\nC1 SUMMARY\n</previous-summary>"));
    assert!(history.transcript.contains("[User]: u2 second") && !history.transcript.contains("u1 first"));
    assert!(history.instructions.contains("<previous-summary>"), "update prompt");
    // The cut splits the last turn (a3 kept, u3 summarized as its prefix).
    let purposes: Vec<&str> = requests.iter().map(|r| r.purpose.as_str()).collect();
    assert_eq!(purposes, ["history", "turn-prefix", "short-summary"]);
    // The previous file list carries over.
    assert!(cps[0].details["summary"].as_str().unwrap().ends_with("<files>\nold.rs (Read)\n</files>"));
}

#[test]
fn case_11_view_rebuild() {
    let strategy = OhMyPiStrategy::new(cfg());
    let mut s = Session::new(200_000);
    s.push("u1", user("u1", 10));
    s.push("a1", reply("a1", 10, Some(100)));
    let u2 = s.push("u2", user("u2", 10));
    s.push("a2", reply("a2", 10, Some(120)));
    let mut c = Checkpoint::new(CheckpointKind::Summary, Window::From(u2)).with_summary(summary_message("S"));
    c.details = json!({"summary": "S", "method": "soft"});
    s.h.log.push_checkpoint(c);
    s.push("u3", user("u3", 10));
    s.push("a3", reply("a3", 10, Some(150)));
    assert_eq!(s.labels(&strategy), ["system", "summary", "u2", "a2", "u3", "a3"]);
    let view = s.h.view(&strategy);
    let summary = &view.messages[1].message;
    assert_eq!(summary.role, Role::User);
    assert!(summary.text().ends_with("\n\n<summary>\nS\n</summary>"));
    assert!(handoff_message("S").text().ends_with("\n\n<handoff>\nS\n</handoff>"));

    // Two compactions: only the latest emits.
    let u3 = s.id("u3");
    let mut c2 = Checkpoint::new(CheckpointKind::Handoff, Window::From(u3)).with_summary(handoff_message("S2"));
    c2.details = json!({"summary": "S2", "method": "handoff"});
    s.h.log.push_checkpoint(c2);
    assert_eq!(s.labels(&strategy), ["system", "summary", "u3", "a3"]);
    assert!(s.h.view(&strategy).messages[1].message.text().contains("<handoff>\nS2\n</handoff>"));
    // (The OpenAI-native shape — summary, then only entries after it — needs `remote`, which
    // never runs offline.)
}

#[test]
fn case_12_remote_placeholder() {
    assert_eq!(
        remote_compaction_summary(12_345),
        "Remote compaction preserved provider-native history for this session. Compaction processed 12345 input tokens."
    );
    assert_eq!(remote_compaction_summary(0), "Remote compaction preserved provider-native history for this session.");
    // Offline, remote is never selected; with a native route it would be first.
    let default = method_order(&cfg().method_order);
    assert_eq!(
        select(&default, 0, Reason::Threshold, Caps { vision: false, remote: true }, false),
        Some((0, Method::Remote))
    );
    assert_ne!(select(&default, 0, Reason::Threshold, OFFLINE_CAPS, false).map(|m| m.1), Some(Method::Remote));
}

/// oh-my-pi stores one message per tool result, so a superseded read's cache-guard suffix
/// counts the results after it in the same tool message of ours. Found by the turn-end
/// fidelity check (`crates/fidelity/tests/oh_my_pi_pruning.rs`, "shared-message"): we measured
/// from the end of the whole tool message and pruned a read that 18.3.4 leaves alone.
#[test]
fn the_cache_guard_counts_later_results_of_the_same_tool_message() {
    let both = |first: (&str, &str, usize), second: (&str, &str, usize)| {
        let results = [first, second].map(|(id, tag, tokens)| Part::ToolResult {
            call_id: id.into(),
            name: "read".into(),
            text: padded(tag, tokens * 4),
            is_error: false,
        });
        Message::new(Role::Tool, results.into())
    };
    let calls = Message::new(
        Role::Assistant,
        vec![
            Part::ToolCall { id: "c1".into(), name: "read".into(), args: json!({"path": "src/a.rs"}) },
            Part::ToolCall { id: "c2".into(), name: "read".into(), args: json!({"path": "src/big.rs"}) },
        ],
    );
    let strategy = OhMyPiStrategy::new(cfg());
    // The older read of a.rs, then 10,000 tokens of big.rs in the same tool message: over the
    // 8,000-token guard, left alone.
    let mut s = Session::new(200_000);
    s.push("u1", user("u1", 10));
    s.push("a1", calls.clone());
    s.push("r1", both(("c1", "r1 a", 100), ("c2", "r1 big", 10_000)));
    s.push("a2", call("c3", "read", "src/a.rs"));
    s.push("r2", result("c3", "read", "r2 a", 100));
    s.push("a3", reply("a3", 10, Some(15_000)));
    assert_eq!(s.h.decide(&strategy, Moment::TurnEnd), Decision::Skip);
    // The same results the other way round: nothing after the older read in its message.
    let mut s = Session::new(200_000);
    s.push("u1", user("u1", 10));
    s.push("a1", calls);
    s.push("r1", both(("c2", "r1 big", 10_000), ("c1", "r1 a", 100)));
    s.push("a2", call("c3", "read", "src/a.rs"));
    s.push("r2", result("c3", "read", "r2 a", 100));
    s.push("a3", reply("a3", 10, Some(15_000)));
    assert_eq!(s.h.decide(&strategy, Moment::TurnEnd), Decision::compact("prune"));
}

#[test]
fn case_13_pruning_placeholders() {
    // A read superseded by a newer read of the same file, inside the warm-cache tail.
    let strategy = OhMyPiStrategy::new(cfg());
    let mut s = Session::new(200_000);
    s.push("u1", user("u1", 10));
    s.push("a1", call("c1", "read", "src/a.rs"));
    s.push("r1", result("c1", "read", "r1 old", 2_000));
    s.push("a2", call("c2", "read", "src/a.rs:10-20"));
    s.push("r2", result("c2", "read", "r2 range", 500));
    s.push("a3", call("c3", "read", "src/a.rs"));
    s.push("r3", result("c3", "read", "r3 new", 2_000));
    s.push("a4", reply("a4", 10, Some(5_000)));
    assert_eq!(s.h.decide(&strategy, Moment::TurnEnd), Decision::compact("prune"));
    let cps = s.step(&strategy, Moment::TurnEnd);
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Prune);
    assert_eq!(cps[0].window, Window::Inherit);
    let replaced: Vec<_> = cps[0].replacements.iter().map(|r| s.name(r.entry)).collect();
    assert_eq!(replaced, ["r1", "r2"], "the bare-path read supersedes the range read too");
    assert!(matches!(&cps[0].replacements[0].message.parts[0], Part::ToolResult { text, call_id, .. }
        if text == SUPERSEDED_NOTICE && call_id == "c1"));
    // Stamped prunedAt: the next turn prunes nothing more.
    s.push("u2", user("u2", 10));
    s.push("a5", reply("a5", 10, Some(5_100)));
    assert_eq!(s.h.decide(&strategy, Moment::TurnEnd), Decision::Skip);

    // Too deep in the warm prefix (more than 8,000 tokens after it): left alone.
    let mut s = Session::new(200_000);
    s.push("a1", call("c1", "read", "a.rs"));
    s.push("r1", result("c1", "read", "r1", 100));
    s.push("a2", call("c2", "read", "a.rs"));
    s.push("r2", result("c2", "read", "r2", 9_000));
    s.push("a3", reply("a3", 10, Some(10_000)));
    let mut work = Work::new(&s.h.log);
    assert_eq!(supersede(&mut work), 0);

    // Age pruning: newest 40,000 tokens of tool output kept, older results of ≥ 50 tokens
    // become `[Output truncated - N tokens]`, only if the batch saves ≥ 20,000.
    let age = |old: &[usize]| {
        let mut log = Log::new();
        for (i, &t) in old.iter().enumerate() {
            log.push_message(Message::tool_result(format!("o{i}"), "bash", "x".repeat(t * 4), false));
        }
        log.push_message(Message::tool_result("new", "bash", "y".repeat(40_000 * 4), false));
        log
    };
    let no_guard = PruneConfig { cache_warm_suffix_tokens: None, ..DEFAULT_PRUNE };
    let log = age(&[30_000, 40]);
    let mut work = Work::new(&log);
    let saved = prune_tool_outputs(&mut work, &no_guard);
    assert_eq!(saved, 30_000 - 9, "the placeholder costs ceil(33 / 4)");
    assert_eq!(work.out[0].replacements.len(), 1, "the 40-token result is too small");
    assert_eq!(work.msg(0).text().len(), 0);
    assert!(matches!(&work.msg(0).parts[0], Part::ToolResult { text, .. } if *text == pruned_notice(30_000)));
    assert_eq!(pruned_notice(30_000), "[Output truncated - 30000 tokens]");
    let log = age(&[10_000]);
    assert_eq!(prune_tool_outputs(&mut Work::new(&log), &no_guard), 0, "saves < 20,000");
    // With the release's cache guard the pass cannot fire.
    let log = age(&[30_000]);
    assert_eq!(prune_tool_outputs(&mut Work::new(&log), &DEFAULT_PRUNE), 0);
    // (Results flagged `useless` — `[Uneventful result elided]` — do not occur in our sessions.)
}

// ---------------------------------------------------------------------------------------------
// (i) worked example and the moments

#[test]
fn worked_example_handoff_first() {
    let strategy = OhMyPiStrategy::new(cfg());
    let mut s = worked_example(30_000, FakeMode::Numbered);
    assert_eq!(s.h.decide(&strategy, Moment::TurnEnd), Decision::compact("threshold"));
    let cps = s.step(&strategy, Moment::TurnEnd);
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Handoff);
    assert_eq!(cps[0].details["method"], "handoff");
    let requests = s.h.summarizer.requests();
    assert_eq!(requests.len(), 1);
    let handoff = &requests[0];
    assert_eq!(handoff.purpose, "handoff");
    assert_eq!(handoff.system, "You are a coding agent.");
    assert_eq!(handoff.max_output_tokens, 8192, "the model's own cap");
    assert!(handoff.transcript.starts_with(r#"{"role":"user","content":[{"type":"text","text":"u1 fix the parser"#));
    assert!(handoff.transcript.contains(r#""role":"toolResult","toolCallId":"c1","toolName":"read""#));
    assert!(handoff.instructions.contains("Additional focus:"));
    // Kept tail ≈ 20,000 provider-scaled tokens: a2 alone is 20,000 local tokens, scaled
    // budget is smaller, so only the last turn stays.
    assert_eq!(s.labels(&strategy), ["system", "summary", "u2", "a3"]);
    expect![[r#"
        Entry(EntryId(0)) system: You are a coding agent.
        Summary(EntryId(7)) user: The context was replaced. The <handoff> below is a handoff d…
        Entry(EntryId(5)) user: u2 go on....................................................…
        Entry(EntryId(6)) assistant: a3 done.....................................................…
    "#]]
    .assert_eq(&render(&s.h.view(&strategy)));
    let summary = cps[0].details["summary"].as_str().unwrap();
    assert_eq!(summary, "SUMMARY 1 of handoff\n\n<files>\n# src/\nparser.rs (Read)\n</files>");
}

#[test]
fn before_request_pre_prompt_and_mid_run() {
    let strategy = OhMyPiStrategy::new(order(&["soft"]));
    // Mid-run: a tool result last, the last reply's usage over the threshold.
    let mut s = Session::new(200_000);
    s.push("u1", user("u1", 100));
    s.push("a1", reply("a1", 100, Some(50_000)));
    s.push("u2", user("u2", 100));
    let mut a2 = call("c1", "bash", "x");
    a2.usage = Some(Usage { input: 171_000, output: 10, ..Default::default() });
    s.push("a2", a2);
    s.push("r1", result("c1", "bash", "r1", 100));
    assert_eq!(s.h.decide(&strategy, Moment::BeforeRequest), Decision::compact("threshold"));
    let no_mid = OhMyPiStrategy::new(OhMyPiConfig { mid_turn_enabled: false, ..order(&["soft"]) });
    assert_eq!(s.h.decide(&no_mid, Moment::BeforeRequest), Decision::Skip);
    let cps = s.step(&strategy, Moment::BeforeRequest);
    assert_eq!(cps[0].kind, CheckpointKind::Summary);
    // Prompt tokens far above the local count shrink the keep budget to a few dozen tokens:
    // only the newest assistant group stays, u2 becomes a turn prefix.
    assert_eq!(s.labels(&strategy), ["system", "summary", "a2", "r1"]);

    // Pre-prompt: the new prompt is last; context usage = the reply's prompt tokens plus the
    // prompt itself.
    let mut s = Session::new(200_000);
    s.push("u1", user("u1", 100));
    s.push("a1", reply("a1", 100, Some(165_000)));
    s.push("u2", user("u2 big paste", 6_000));
    assert_eq!(s.h.decide(&strategy, Moment::BeforeRequest), Decision::compact("threshold"));
    s.h.summarizer = FakeSummarizer::default();
    let handoff = OhMyPiStrategy::new(order(&["handoff"]));
    let cps = s.step(&handoff, Moment::BeforeRequest);
    assert_eq!(cps[0].kind, CheckpointKind::Handoff);
    let request = &s.h.summarizer.requests()[0];
    assert!(!request.transcript.contains("u2 big paste"), "the pending prompt is not in the handoff context");
    // The prompt is not on the branch yet, so the cut is found without it (the keep budget is
    // scaled to a few tokens: only a1 stays, u1 is a turn prefix) and the prompt follows.
    assert_eq!(s.labels(&handoff), ["system", "summary", "a1", "u2"]);
}

/// Measured against the original (`prepareCompaction` of agent-core 18.2.11 through
/// fidelity/oh-my-pi/driver.mjs on this session): before a new prompt of 10,000 tokens, the cut
/// is found on the branch without it — first kept a1 (a split turn), not u3 as when the prompt
/// counted against the 20,000-token keep budget.
#[test]
fn pre_prompt_selection_leaves_the_pending_prompt_out() {
    let mut s = Session::new(40_000);
    for (u, a) in [("u1", "a1"), ("u2", "a2"), ("u3", "a3")] {
        s.push(u, user(u, 4_000));
        s.push(a, reply(a, 4_000, Some(4_100)));
    }
    s.push("p", user("p", 10_000));
    let strategy = OhMyPiStrategy::new(order(&["soft"]));
    assert_eq!(s.h.decide(&strategy, Moment::BeforeRequest), Decision::compact("threshold"));
    let cps = s.step(&strategy, Moment::BeforeRequest);
    assert_eq!(cps[0].window, Window::From(s.id("a1")));
    assert_eq!(cps[0].details["isSplitTurn"], json!(true));
    assert_eq!(cps[0].tokens_before, 4_100);
    assert_eq!(s.labels(&strategy), ["system", "summary", "a1", "u2", "a2", "u3", "a3", "p"]);
}

#[test]
fn shake_keeps_pressure_off_after_it_resolves() {
    // After a shake that resolved the threshold, the context usage anchored on the last reply
    // is reduced by what it removed, so the next pre-prompt check stays quiet.
    let strategy = OhMyPiStrategy::new(order(&["shake", "soft"]));
    let mut s = worked_example(45_000, FakeMode::Numbered);
    s.step(&strategy, Moment::TurnEnd);
    s.push("u3", user("u3", 100));
    assert_eq!(s.h.decide(&strategy, Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn variants_have_distinct_ids() {
    let ids: Vec<String> = crate::variants().iter().map(|v| v.info().id.clone()).collect();
    assert_eq!(ids, ["oh-my-pi", "oh-my-pi/soft", "oh-my-pi/handoff", "oh-my-pi/shake"]);
    assert_eq!(crate::strategy().info().id, "oh-my-pi");
}

// ---------------------------------------------------------------------------------------------
// (g) failures

#[test]
fn failures_fall_through_to_the_last_method() {
    // Every summarizer call fails: handoff fails → shake (reclaims 30,000, not enough) → soft
    // fails. The shake stays; the events record each hand-over and the final error.
    let strategy = OhMyPiStrategy::new(cfg());
    let mut s = worked_example(30_000, FakeMode::Fail(ErrorKind::Transport));
    let cps = s.h.compact(&strategy, Moment::TurnEnd).unwrap();
    assert_eq!(cps.iter().map(|c| c.kind).collect::<Vec<_>>(), vec![CheckpointKind::Offload]);
    let ev = events(&cps[0]);
    assert_eq!(ev.len(), 3, "{ev:?}");
    assert!(ev[0]
        .starts_with("Auto-compaction failed: Handoff generation failed: fake summarizer failure; trying the next"));
    assert!(ev[1].starts_with("Auto-shake reclaimed ~"));
    assert_eq!(ev[2], "Auto-compaction failed: Summarization failed: fake summarizer failure");
    let purposes: Vec<String> = s.h.summarizer.requests().iter().map(|r| r.purpose.clone()).collect();
    assert_eq!(purposes, ["handoff", "history"]);

    // Nothing rewritten before the last failure: the error is the result.
    let mut s = Session::with(200_000, FakeMode::Fail(ErrorKind::Timeout));
    s.push("u1", user("u1", 100));
    s.push("a1", reply("a1", 30_000, Some(30_200)));
    s.push("u2", user("u2", 100));
    s.push("a2", reply("a2", 100, Some(175_000)));
    let err = s.h.compact(&OhMyPiStrategy::new(order(&["soft"])), Moment::TurnEnd).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert_eq!(err.message, "Auto-compaction failed: Summarization failed: fake summarizer failure");
    // Overflow reason: shake finds nothing, soft fails.
    let err = s.h.compact(&OhMyPiStrategy::new(cfg()), Moment::Overflow).unwrap_err();
    assert_eq!(err.message, "Context overflow recovery failed: Summarization failed: fake summarizer failure");
}

/// A summary call the provider refuses as too long (`generateSummary`'s catch): the window is
/// planned again at half of what it sent and folded in those smaller windows, each carrying
/// the previous one's summary; once half would fall below `minSummaryInputTokens` (16,384
/// at a 200,000 window) the refusal fails the compaction.
#[test]
fn refused_summary_call_is_halved_and_folded() {
    let session = |mode: FakeMode| {
        let mut s = Session::with(200_000, mode);
        for (u, a) in [("u1", "a1"), ("u2", "a2"), ("u3", "a3")] {
            s.push(u, user(u, 100));
            s.push(a, reply(a, 30_000, None));
        }
        // The cut falls inside this turn: its prompt goes to the turn-prefix call.
        s.push("u4", user("u4", 30_000));
        s.push("a4", reply("a4", 100, Some(175_000)));
        s
    };
    let strategy = OhMyPiStrategy::new(order(&["soft"]));
    // ~90,000 tokens fit the input budget (130,509) in one call, which a 60,000-token provider
    // refuses; half of what it sent (~45,000) holds one exchange per window.
    let mut s = session(FakeMode::Window(60_000));
    let cps = s.h.compact(&strategy, Moment::TurnEnd).expect("the halved windows fit");
    assert_eq!(cps[0].kind, CheckpointKind::Summary);
    let requests = s.h.summarizer.requests();
    let purposes: Vec<&str> = requests.iter().map(|r| r.purpose.as_str()).collect();
    assert_eq!(purposes, ["history", "history", "history", "history", "turn-prefix", "short-summary"]);
    // The messages each history call holds: the whole span, then windows packed up to half
    // of what it sent (~45,000 tokens).
    let held = |r: &compactbench_core::SummaryRequest| -> Vec<&str> {
        let said = |role: &str, name: &str| r.transcript.contains(&format!("[{role}]: {name}"));
        ["u1", "a1", "u2", "a2", "u3", "a3"].into_iter().filter(|n| said("User", n) || said("Assistant", n)).collect()
    };
    let windows: Vec<Vec<&str>> = requests[..4].iter().map(held).collect();
    assert_eq!(windows, [vec!["u1", "a1", "u2", "a2", "u3", "a3"], vec!["u1", "a1", "u2"], vec!["a2", "u3"], vec!["a3"]]);
    assert!(!requests[1].transcript.contains("<previous-summary>"));
    assert!(requests[2].transcript.contains("<previous-summary>\nSUMMARY 2 of history"));
    assert!(cps[0].details["summary"].as_str().unwrap().starts_with("SUMMARY 4 of history"));
    assert_eq!((cps[0].summarizer.calls, cps[0].summarizer.failures), (6, 1));

    // At 10,000 tokens the first exchange (~30,000) is refused too, and half of it is below
    // 16,384: the refusal is the compaction's error.
    let mut s = session(FakeMode::Window(10_000));
    let err = s.h.compact(&strategy, Moment::TurnEnd).unwrap_err();
    assert_eq!(err.kind, ErrorKind::ContextOverflow);
    assert!(err.message.starts_with("Auto-compaction failed: Summarization failed: prompt is too long"), "{}", err.message);
    assert_eq!(s.h.summarizer.requests().len(), 2);
}

#[test]
fn empty_handoff_falls_through() {
    let strategy = OhMyPiStrategy::new(order(&["handoff", "soft"]));
    let mut s = worked_example(30_000, FakeMode::Fixed("  \n".into()));
    let cps = s.step(&strategy, Moment::TurnEnd);
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Summary, "soft accepts the same blank text");
    assert_eq!(events(&cps[0])[0], "Auto-handoff returned no document; trying the next preferred compaction method.");
}

#[test]
fn oversized_summary_is_accepted_then_rescued_or_flagged() {
    // A summary of ~150,000 tokens is accepted (no length rejection), but leaves the residual
    // above the band: the rescue shake elides the kept tool result, which is not enough, and
    // the entry is stamped with the dead-end warning.
    let long = "L".repeat(600_000);
    let strategy = OhMyPiStrategy::new(order(&["soft"]));
    let mut s = Session::with(200_000, FakeMode::Fixed(long.clone()));
    s.push("u1", user("u1", 100));
    s.push("a1", reply("a1", 170_000, Some(170_200)));
    s.push("u2", user("u2", 100));
    s.push("a2", call("c1", "bash", "x"));
    s.push("r1", result("c1", "bash", "r1", 5_000));
    s.push("a3", reply("a3", 100, Some(175_000)));
    let cps = s.step(&strategy, Moment::TurnEnd);
    assert_eq!(cps.iter().map(|c| c.kind).collect::<Vec<_>>(), vec![CheckpointKind::Summary, CheckpointKind::Offload]);
    assert!(cps[0].details["summary"].as_str().unwrap().starts_with(&long));
    let warning = cps[0].details["warning"].as_str().unwrap();
    assert!(warning.starts_with("Compaction freed too little context to make progress"));
    assert_eq!(cps[1].details["preset"], "rescue");
    // The 170,000-token reply does not fit one summary call (input budget
    // 0.8 × 200,000 − 13,107 − 16,384 = 130,509): a fold over two windows, the second one
    // carrying the first's summary and cut to the budget, then the short summary.
    let requests = s.h.summarizer.requests();
    let purposes: Vec<&str> = requests.iter().map(|r| r.purpose.as_str()).collect();
    assert_eq!(purposes, ["history", "history", "short-summary"]);
    assert_eq!(requests[0].max_output_tokens, 13_107);
    assert!(!requests[0].transcript.contains("<previous-summary>"));
    assert!(requests[1].transcript.contains("<previous-summary>\nLLLL"));
    assert!(requests[1].transcript.contains("more characters truncated]\n</conversation>"));
    assert_eq!(requests[2].max_output_tokens, 512);
}

/// Drives a 60-turn session the way the runner does (decide before each request and at each
/// turn end, replies carrying the prompt size as usage) and checks that the working view
/// stays under the window, that methods alternate as the rules say, and that old tool output
/// stays recoverable from the artifacts.
#[test]
fn long_session_stays_under_the_window() {
    let strategy = OhMyPiStrategy::new(cfg());
    let mut h = Harness::new([Message::system("You are a coding agent.")], model(100_000, 8192));
    let prompt_size = |h: &Harness| {
        let work = Work::new(&h.log);
        work.stored_estimate(&work.context())
    };
    let mut kinds = Vec::new();
    let run = |h: &mut Harness, at: Moment, kinds: &mut Vec<CheckpointKind>| {
        for cp in h.step(&strategy, at).unwrap() {
            kinds.push(cp.kind);
        }
    };
    for turn in 0..60 {
        run(&mut h, Moment::TurnEnd, &mut kinds);
        h.push(user(&format!("turn {turn}: next task"), 50));
        run(&mut h, Moment::BeforeRequest, &mut kinds);
        let mut a = call(&format!("c{turn}"), "read", &format!("src/f{turn}.rs"));
        a.usage = Some(Usage { input: prompt_size(&h), output: 20, ..Default::default() });
        h.push(a);
        h.push(result(&format!("c{turn}"), "read", &format!("NEEDLE-{turn} file body"), 6_000));
        run(&mut h, Moment::BeforeRequest, &mut kinds);
        let mut r = reply(&format!("turn {turn} done"), 200, None);
        r.usage = Some(Usage { input: prompt_size(&h), output: 200, ..Default::default() });
        h.push(r);
        assert!(prompt_size(&h) < 100_000, "turn {turn}: {}", prompt_size(&h));
    }
    assert!(kinds.contains(&CheckpointKind::Handoff), "{kinds:?}");
    // With the numbered summarizer every handoff succeeds, so shake and soft never run.
    assert!(kinds.iter().all(|k| *k == CheckpointKind::Handoff), "{kinds:?}");
    let requests = h.summarizer.requests();
    assert!(requests.iter().all(|r| r.purpose == "handoff"));

    // Shake first: old results are elided to artifacts that hold them verbatim.
    let strategy = OhMyPiStrategy::new(order(&["shake", "soft"]));
    let mut h = Harness::new([Message::system("You are a coding agent.")], model(100_000, 8192));
    let mut kinds = Vec::new();
    for turn in 0..60 {
        for cp in h.step(&strategy, Moment::TurnEnd).unwrap() {
            kinds.push(cp.kind);
        }
        h.push(user(&format!("turn {turn}: next task"), 50));
        let mut a = call(&format!("c{turn}"), "read", &format!("src/f{turn}.rs"));
        a.usage = Some(Usage { input: prompt_size(&h), output: 20, ..Default::default() });
        h.push(a);
        h.push(result(&format!("c{turn}"), "read", &format!("NEEDLE-{turn} file body"), 6_000));
        for cp in h.step(&strategy, Moment::BeforeRequest).unwrap() {
            kinds.push(cp.kind);
        }
        let mut r = reply(&format!("turn {turn} done"), 200, None);
        r.usage = Some(Usage { input: prompt_size(&h), output: 200, ..Default::default() });
        h.push(r);
        assert!(prompt_size(&h) < 100_000, "turn {turn}: {}", prompt_size(&h));
    }
    assert!(kinds.contains(&CheckpointKind::Offload), "{kinds:?}");
    assert!(h.store.read("artifact://0").unwrap().contains("NEEDLE-0 file body"));
}

/// pi-agent-core's `calculateContextTokens`, `calculatePromptTokens` and `hasContextTokenUsage`
/// all count `cacheWrite`.
#[test]
fn usage_counts_cache_writes() {
    let u = Usage { input: 100, output: 20, cache_read: 1_000, cache_write: 300 };
    assert_eq!((context_tokens(&u), prompt_tokens(&u)), (1_420, 1_400));
    let only_written = Usage { output: 20, cache_write: 300, ..Default::default() };
    assert_eq!((context_tokens(&only_written), prompt_tokens(&only_written)), (320, 300));
    let mut reply = Message::assistant("ok");
    reply.usage = Some(Usage { cache_write: 300, ..Default::default() });
    assert!(is_usage_anchor(&reply), "a prompt of cache writes alone carries context numbers");
}
