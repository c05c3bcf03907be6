//! Section (j) cases of shared/specs/opencode-v1.md, the section (i) worked example, and the
//! failure rules of section (g).
//!
//! Sizes are `est_oc` values as in the spec: a fixture of `n` tokens holds `4n` characters, so a
//! message's model-message JSON comes out a few tokens above `n`; every case keeps its margin.

use compactbench_core::request::{lower, validate, Rule};
use compactbench_core::{
    Checkpoint, CheckpointKind, Decision, EntryId, ErrorKind, Message, Moment, Origin, Part, Role, Shape, Strategy,
    Usage, View, Window,
};
use compactbench_testkit::{json, model, FakeMode, FakeSummarizer, Harness};

use crate::session::{AfterKind, PruneDetails, PrunedPart, Slot, SummaryDetails, CLEARED, INTERRUPTED, MARKER_TEXT};
use crate::{OpencodeV1Config, OpencodeV1Strategy};

const CONTINUE: &str =
    "Continue if you have next steps, or stop and ask for clarification if you are unsure how to proceed.";

// ---------------------------------------------------------------------------------------------
// Fixtures

/// `tag`, a space, then padding up to `4 * tokens` characters.
fn filler(tag: &str, tokens: usize) -> String {
    let mut s = format!("{tag} ");
    while s.len() < tokens * 4 {
        s.push('x');
    }
    s
}

fn u(tag: &str, tokens: usize) -> Vec<Message> {
    vec![Message::user(filler(tag, tokens))]
}

fn a(tag: &str, tokens: usize) -> Vec<Message> {
    vec![Message::assistant(filler(tag, tokens))]
}

/// An assistant tool call `id` of `tool` and its result of `tokens`.
fn t(id: &str, tool: &str, tokens: usize) -> Vec<Message> {
    vec![Message::tool_call(id, tool, json!({ "path": id })), Message::tool_result(id, tool, filler(id, tokens), false)]
}

/// Parallel calls in one assistant message, then one tool message per result.
fn parallel(calls: &[(&str, &str, usize)]) -> Vec<Message> {
    let call = Message::new(
        Role::Assistant,
        calls
            .iter()
            .map(|(id, tool, _)| Part::ToolCall { id: (*id).into(), name: (*tool).into(), args: json!({ "path": id }) })
            .collect(),
    );
    let mut out = vec![call];
    out.extend(calls.iter().map(|(id, tool, n)| Message::tool_result(*id, *tool, filler(id, *n), false)));
    out
}

/// `msgs` with provider usage (`input` prompt tokens) on its assistant message.
fn used(mut msgs: Vec<Message>, input: u64, output: u64) -> Vec<Message> {
    let m = msgs.iter_mut().find(|m| m.role == Role::Assistant).expect("an assistant message");
    m.usage = Some(Usage { input, output, ..Default::default() });
    msgs
}

fn log(parts: Vec<Vec<Message>>) -> Vec<Message> {
    let mut out = vec![Message::system("sys")];
    out.extend(parts.into_iter().flatten());
    out
}

fn oc(config: OpencodeV1Config) -> OpencodeV1Strategy {
    OpencodeV1Strategy::new(config)
}

fn default() -> OpencodeV1Strategy {
    oc(OpencodeV1Config::default())
}

/// 180,000 context, 32,000 output: usable 148,000 (the spec's worked example), tail budget 15,000.
fn big() -> compactbench_core::ModelProfile {
    model(180_000, 32_000)
}

fn first_word(s: &str) -> String {
    s.split_whitespace().next().unwrap_or("").to_owned()
}

/// One word per view message: `system`, `marker`, `summary`, `continue`, `replay:<tag>`, the
/// message's tag, `call:<id>`, `result:<id>` (with `cleared` / `interrupted`).
fn shape(view: &View) -> Vec<String> {
    view.messages
        .iter()
        .map(|vm| {
            let m = &vm.message;
            match (vm.origin, m.role) {
                (Origin::Summary(_), _) => "summary".into(),
                (Origin::Injected(_), _) if m.text() == MARKER_TEXT => "marker".into(),
                (Origin::Injected(_), _) if m.text().ends_with(CONTINUE) => "continue".into(),
                (Origin::Injected(_), _) => format!("replay:{}", first_word(&m.text())),
                (_, Role::System) => "system".into(),
                (_, Role::Tool) => match &m.parts[0] {
                    Part::ToolResult { call_id, text, .. } if text == CLEARED => format!("result:{call_id} cleared"),
                    Part::ToolResult { call_id, text, .. } if text == INTERRUPTED => {
                        format!("result:{call_id} interrupted")
                    }
                    Part::ToolResult { call_id, .. } => format!("result:{call_id}"),
                    _ => "tool?".into(),
                },
                (_, Role::Assistant) if m.has_tool_calls() => {
                    format!("call:{}", m.tool_call_ids().collect::<Vec<_>>().join("+"))
                }
                _ => first_word(&m.text()),
            }
        })
        .collect()
}

fn view_shape(h: &Harness, s: &dyn Strategy) -> Vec<String> {
    shape(&h.view(s))
}

/// Id of the first log message whose text starts with `tag` or that calls `tag`.
fn id(h: &Harness, tag: &str) -> EntryId {
    h.log
        .messages()
        .find(|(_, m)| first_word(&m.text()) == tag || m.tool_call_ids().any(|c| c == tag))
        .map(|(id, _)| id)
        .unwrap_or_else(|| panic!("no message {tag}"))
}

/// Id of the tool message answering `call`.
fn result_id(h: &Harness, call: &str) -> EntryId {
    h.log.messages().find(|(_, m)| m.tool_result_ids().any(|c| c == call)).map(|(id, _)| id).unwrap()
}

fn details(cp: &Checkpoint) -> SummaryDetails {
    serde_json::from_value(cp.details.clone()).expect("summary details")
}

fn kinds(cps: &[Checkpoint]) -> Vec<CheckpointKind> {
    cps.iter().map(|c| c.kind).collect()
}

fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// The `<conversation>` block of a summarizer request.
fn conversation(transcript: &str) -> &str {
    let start = transcript.find("<conversation>").expect("conversation block");
    let end = transcript.find("</conversation>").expect("conversation end");
    &transcript[start..end]
}

// ---------------------------------------------------------------------------------------------
// (i) Worked example

#[test]
fn worked_example_two_compactions() {
    let s = default();
    let mut h = Harness::new(
        log(vec![
            u("u1", 100),
            t("a1", "read", 30_000),
            a("a2", 500),
            u("u2", 100),
            t("a3", "grep", 25_000),
            u("u3", 100),
            t("a4", "bash", 40_000),
            u("u4", 100),
            t("a5", "read", 18_000),
            a("a6", 1_500),
            u("u5", 100),
            t("a7", "edit", 8_900),
            u("u6", 100),
            used(t("a8", "bash", 3_900), 146_000, 2_500),
        ]),
        big(),
    );

    // Compaction 1: 148,500 >= 148,000.
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("overflow"));
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(kinds(&cps), [CheckpointKind::Summary]);
    let d = details(&cps[0]);
    assert!(d.auto && !d.overflow);
    assert_eq!(d.tail_start, Some(Slot::Entry(id(&h, "a6"))));
    assert_eq!(d.after, Some(AfterKind::Continue));
    assert_eq!(
        view_shape(&h, &s),
        strings(&[
            "system",
            "marker",
            "summary",
            "a6",
            "u5",
            "call:a7",
            "result:a7",
            "u6",
            "call:a8",
            "result:a8",
            "continue"
        ])
    );
    let view = h.view(&s);
    assert_eq!(view.messages[1].message, Message::user("What did we do so far?"));
    assert_eq!(view.messages[2].message, Message::assistant("SUMMARY 1 of compaction"));
    assert_eq!(view.messages[10].message, Message::user(CONTINUE));
    let kept = [id(&h, "a6"), id(&h, "u5"), id(&h, "a7"), result_id(&h, "a7"), id(&h, "u6"), id(&h, "a8")];
    assert_eq!(cps[0].window, Window::Kept([&kept[..], &[result_id(&h, "a8")]].concat()));

    let first = &h.summarizer.requests()[0];
    assert_eq!(first.max_output_tokens, 32_000);
    assert!(!first.transcript.contains("<prior-summary>"));
    let conv = conversation(&first.transcript);
    assert!(conv.contains("[User]: u1 x"));
    assert!(conv.contains("[Assistant tool call]: read({\"path\":\"a1\"})\n[Tool result]: a1 x"));
    assert!(conv.contains("x\n[truncated]"));
    assert!(conv.contains("[Assistant tool call]: read({\"path\":\"a5\"})"));
    assert!(!conv.contains("a6 x"), "the tail is not sent to the summarizer");
    // The summary never re-triggers.
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);

    // Work continues.
    for m in [used(t("a9", "read", 60_000), 20_000, 100), u("u7", 100), used(t("a10", "read", 50_000), 90_000, 100)]
        .into_iter()
        .flatten()
    {
        h.push(m);
        assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    }
    for m in used(a("a11", 2_000), 148_000, 2_000) {
        h.push(m);
    }

    // Compaction 2: 150,000 >= 148,000.
    let cps = h.step(&s, Moment::TurnEnd).unwrap();
    assert_eq!(kinds(&cps), [CheckpointKind::Summary]);
    let d = details(&cps[0]);
    assert_eq!(d.tail_start, Some(Slot::Entry(id(&h, "a11"))));
    assert!(d.previous_summary);
    assert_eq!(view_shape(&h, &s), strings(&["system", "marker", "summary", "a11", "continue"]));
    assert_eq!(h.view(&s).messages[2].message, Message::assistant("SUMMARY 2 of compaction"));

    let second = &h.summarizer.requests()[1];
    let conv = conversation(&second.transcript);
    assert!(conv.contains("[Assistant]: a6 x"), "the old tail is summarized now");
    assert!(conv.contains(&format!("[User]: {CONTINUE}")));
    assert!(conv.contains("[Assistant tool call]: read({\"path\":\"a10\"})"));
    assert!(!conv.contains("a11 x"));
    assert!(!conv.contains("SUMMARY 1"));
    assert!(second.transcript.contains("<prior-summary>\nSUMMARY 1 of compaction\n</prior-summary>"));
}

// ---------------------------------------------------------------------------------------------
// (j) Conformance cases

/// Whether the strategy compacts before a request after a reply reporting `total` tokens.
fn triggers(config: OpencodeV1Config, m: compactbench_core::ModelProfile, total: u64) -> bool {
    let mut h = Harness::new(log(vec![u("u1", 10), used(a("a1", 10), total, 0)]), m);
    match h.decide(&oc(config), Moment::BeforeRequest) {
        Decision::Compact { reason } => {
            assert_eq!(reason, "overflow");
            true
        }
        Decision::Skip => false,
    }
}

#[test]
fn case_01_usable_formula() {
    let d = OpencodeV1Config::default;
    // context 200,000, output 64,000, no input limit: 200,000 - 32,000 (opencode-ai 1.18.33).
    assert!(triggers(d(), model(200_000, 64_000), 168_000));
    assert!(!triggers(d(), model(200_000, 64_000), 167_999));
    // output 8,000: max output 8,000.
    assert!(triggers(d(), model(200_000, 8_000), 192_000));
    assert!(!triggers(d(), model(200_000, 8_000), 191_999));
    // input limit 180,000: 180,000 - 20,000.
    let input = OpencodeV1Config { input_limit: Some(180_000), ..d() };
    assert!(triggers(input.clone(), model(200_000, 64_000), 160_000));
    assert!(!triggers(input, model(200_000, 64_000), 159_999));
    // reserved 10,000 counts against an input limit only.
    let reserved = OpencodeV1Config { reserved: Some(10_000), ..d() };
    assert!(triggers(reserved.clone(), model(200_000, 64_000), 168_000));
    assert!(!triggers(reserved.clone(), model(200_000, 64_000), 167_999));
    let reserved_input = OpencodeV1Config { input_limit: Some(180_000), ..reserved };
    assert!(triggers(reserved_input.clone(), model(200_000, 64_000), 170_000));
    assert!(!triggers(reserved_input, model(200_000, 64_000), 169_999));
    // sst/opencode@31e22f65 subtracts the buffer without an input limit too: 200,000 - 32,000
    // - 20,000; with output 8,000: max output 8,000, reserved 8,000; reserved 10,000.
    let buffer = OpencodeV1Config { reserve_without_input_limit: true, ..d() };
    assert!(triggers(buffer.clone(), model(200_000, 64_000), 148_000));
    assert!(!triggers(buffer.clone(), model(200_000, 64_000), 147_999));
    assert!(triggers(buffer.clone(), model(200_000, 8_000), 184_000));
    assert!(!triggers(buffer.clone(), model(200_000, 8_000), 183_999));
    let buffer_reserved = OpencodeV1Config { reserved: Some(10_000), ..buffer };
    assert!(triggers(buffer_reserved.clone(), model(200_000, 64_000), 158_000));
    assert!(!triggers(buffer_reserved, model(200_000, 64_000), 157_999));
    // context 0: usable 0 and never an overflow.
    assert!(!triggers(d(), model(0, 64_000), 0));
    assert!(!triggers(d(), model(0, 64_000), 10_000_000));
}

#[test]
fn case_02_trigger_inclusive_reported_usage_only() {
    let d = OpencodeV1Config::default;
    assert!(triggers(d(), big(), 148_000));
    assert!(!triggers(d(), big(), 147_999));
    // No `total`: input + output + cache read + cache write.
    let mut reply = a("a1", 10);
    reply[0].usage = Some(Usage { input: 137_001, output: 5_000, cache_read: 3_000, cache_write: 2_999 });
    let mut h = Harness::new(log(vec![u("u1", 10), reply]), big());
    assert_eq!(h.decide(&default(), Moment::BeforeRequest), Decision::compact("overflow"), "148,000");
    let mut reply = a("a1", 10);
    reply[0].usage = Some(Usage { input: 140_000, output: 5_000, cache_read: 2_000, cache_write: 999 });
    let mut h = Harness::new(log(vec![u("u1", 10), reply]), big());
    assert_eq!(h.decide(&default(), Moment::BeforeRequest), Decision::Skip, "147,999");
    let mut reply = a("a1", 10);
    reply[0].usage = Some(Usage { input: 140_000, output: 5_000, cache_read: 3_000, ..Default::default() });
    let mut h = Harness::new(log(vec![u("u1", 10), reply]), big());
    assert_eq!(h.decide(&default(), Moment::BeforeRequest), Decision::compact("overflow"));
    // The compaction appends a marker with `auto: true`, sent as a user message.
    let cps = h.step(&default(), Moment::BeforeRequest).unwrap();
    assert!(details(&cps[0]).auto);
    assert_eq!(view_shape(&h, &default())[1], "marker");
    // The newest finished message is the summary now: no trigger, even though the kept reply
    // still carries 148,000.
    assert_eq!(h.decide(&default(), Moment::BeforeRequest), Decision::Skip);
    assert_eq!(h.decide(&default(), Moment::TurnEnd), Decision::Skip);
    // Auto compaction off: neither the usage check nor a provider overflow compacts.
    let off = oc(OpencodeV1Config { auto: false, ..d() });
    let mut h = Harness::new(log(vec![u("u1", 10), used(a("a1", 10), 190_000, 0)]), big());
    assert_eq!(h.decide(&off, Moment::BeforeRequest), Decision::Skip);
    assert_eq!(h.decide(&off, Moment::TurnEnd), Decision::Skip);
    assert_eq!(h.decide(&off, Moment::Overflow), Decision::Skip);
    // No usage, however large the messages: local estimates play no part.
    let mut h = Harness::new(log(vec![u("u1", 100_000), a("a1", 100_000)]), big());
    assert_eq!(h.decide(&default(), Moment::BeforeRequest), Decision::Skip);
}

/// Manual compaction of one turn `[u 100, a1 n1, a2 n2]`; returns where the tail starts.
fn tail_of_turn(config: OpencodeV1Config, m: compactbench_core::ModelProfile, n1: usize, n2: usize) -> Vec<String> {
    let s = oc(config);
    let mut h = Harness::new(log(vec![u("u", 100), a("a1", n1), a("a2", n2)]), m);
    h.compact(&s, Moment::BeforeRequest).unwrap();
    view_shape(&h, &s)
}

#[test]
fn case_03_tail_budget() {
    let d = OpencodeV1Config::default;
    let split = strings(&["system", "marker", "summary", "a2"]);
    let all = strings(&["system", "marker", "summary"]);
    // usable 148,000 -> 15,000: a 16.1k turn splits, a 14.6k turn is kept whole (start 0: all summarized).
    assert_eq!(tail_of_turn(d(), big(), 6_000, 10_000), split);
    assert_eq!(tail_of_turn(d(), big(), 6_000, 8_500), all);
    // usable 40,000 -> 10,000 (72,000 - 32,000).
    assert_eq!(tail_of_turn(d(), model(72_000, 32_000), 6_000, 6_000), split);
    assert_eq!(tail_of_turn(d(), model(72_000, 32_000), 4_000, 5_800), all);
    // usable 4,000 -> 2,000 (the minimum, not 1,000).
    assert_eq!(tail_of_turn(d(), model(36_000, 32_000), 1_000, 1_500), split);
    // preserve_recent_tokens = 5,000.
    let preserve = OpencodeV1Config { preserve_recent_tokens: Some(5_000), ..d() };
    assert_eq!(tail_of_turn(preserve.clone(), big(), 4_000, 4_500), split);
    assert_eq!(tail_of_turn(preserve, big(), 4_000, 5_200), all, "from a2 5.2k > 5k: nothing fits");
}

#[test]
fn case_04_whole_turn_tail() {
    let s = default();
    let mut h = Harness::new(
        log(vec![
            u("t1u", 200),
            a("t1a", 10_000),
            a("t1b", 9_800),
            u("t2u", 100),
            a("t2a", 7_900),
            u("t3u", 100),
            used(a("t3a", 5_900), 148_000, 0),
        ]),
        big(),
    );
    let cps = h.step(&s, Moment::TurnEnd).unwrap();
    assert_eq!(details(&cps[0]).tail_start, Some(Slot::Entry(id(&h, "t2u"))));
    assert_eq!(view_shape(&h, &s), strings(&["system", "marker", "summary", "t2u", "t2a", "t3u", "t3a", "continue"]));
    let conv = h.summarizer.requests()[0].transcript.clone();
    let conv = conversation(&conv);
    for tag in ["[User]: t1u", "[Assistant]: t1a", "[Assistant]: t1b"] {
        assert!(conv.contains(tag), "{tag} is summarized");
    }
    assert!(!conv.contains("t2u"));
}

#[test]
fn case_05_split_turn_tail_starts_at_assistant() {
    let s = oc(OpencodeV1Config { preserve_recent_tokens: Some(8_000), ..OpencodeV1Config::default() });
    let mut h = Harness::new(log(vec![u("u", 100), a("a1", 6_000), a("a2", 6_000), a("a3", 1_000)]), big());
    let cps = h.compact(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(details(&cps[0]).tail_start, Some(Slot::Entry(id(&h, "a2"))));
    assert_eq!(view_shape(&h, &s), strings(&["system", "marker", "summary", "a2", "a3"]));
    let conv = h.summarizer.requests()[0].transcript.clone();
    assert!(conv.contains("[User]: u x") && conv.contains("[Assistant]: a1 x"));
    assert!(!conv.contains("a2 x"));
    // The tail has no user prompt: the summary (assistant) is followed by an assistant message.
    let view = h.view(&s);
    assert_eq!((view.messages[2].message.role, view.messages[3].message.role), (Role::Assistant, Role::Assistant));
}

#[test]
fn case_06_history_fits_everything_summarized() {
    for config in [OpencodeV1Config::default(), OpencodeV1Config { tail_turns: Some(0), ..OpencodeV1Config::default() }]
    {
        let s = oc(config);
        let mut h = Harness::new(log(vec![u("u", 100), used(a("a", 4_900), 148_000, 0)]), big());
        let cps = h.step(&s, Moment::TurnEnd).unwrap();
        assert_eq!(details(&cps[0]).tail_start, None);
        assert_eq!(cps[0].window, Window::Kept(Vec::new()));
        assert_eq!(view_shape(&h, &s), strings(&["system", "marker", "summary", "continue"]));
        assert!(h.summarizer.requests()[0].transcript.contains("[Assistant]: a x"));
    }
}

fn case_07_log(last_usage: u64) -> Vec<Message> {
    log(vec![
        u("m1", 100),
        t("m2", "read", 20_000),
        a("m3", 500),
        u("m4", 100),
        a("m5", 12_000),
        u("m6", 100),
        t("m7", "bash", 3_000),
        used(a("m8", 200), last_usage, 0),
    ])
}

#[test]
fn case_07_working_view_order() {
    let s = default();
    let mut h = Harness::new(case_07_log(150_000), big());
    let cps = h.step(&s, Moment::TurnEnd).unwrap();
    assert_eq!(details(&cps[0]).tail_start, Some(Slot::Entry(id(&h, "m6"))));
    // Storage is `m1 … m8, checkpoint`; the view puts marker and summary before the tail.
    assert_eq!(
        view_shape(&h, &s),
        strings(&["system", "marker", "summary", "m6", "call:m7", "result:m7", "m8", "continue"])
    );
    // As model messages: system, user marker, assistant summary, the tail in structure, user continue.
    let view = h.view(&s);
    let request = lower(&view, Shape::OpenaiChat);
    let roles: Vec<&str> = request.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user", "assistant", "tool", "assistant", "user"]);
    assert!(validate(&request).is_empty());

    // Manual `/compact` (auto: false): the same view without the continue message.
    let mut h = Harness::new(case_07_log(1_000), big());
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    let cps = h.compact(&s, Moment::BeforeRequest).unwrap();
    let d = details(&cps[0]);
    assert!(!d.auto);
    assert_eq!(d.after, None);
    assert!(cps[0].injected.is_empty());
    assert_eq!(view_shape(&h, &s), strings(&["system", "marker", "summary", "m6", "call:m7", "result:m7", "m8"]));
}

fn case_08_log(p1: usize) -> Vec<Message> {
    log(vec![
        u("U1", 10),
        parallel(&[("p1", "read", p1), ("p2", "read", 15_000)]),
        u("U2", 10),
        t("p3", "read", 20_000),
        u("U3", 10),
        t("p4", "read", 10_000),
        u("U4", 10),
        t("p5", "read", 50_000),
    ])
}

fn pruning() -> OpencodeV1Strategy {
    oc(OpencodeV1Config { prune: true, ..OpencodeV1Config::default() })
}

/// Call ids whose results a checkpoint cleared.
fn cleared(cp: &Checkpoint) -> Vec<String> {
    let d: PruneDetails = serde_json::from_value(cp.details.clone()).unwrap();
    d.parts.into_iter().map(|p| p.call_id).collect()
}

#[test]
fn case_08_prune_counts_and_strict_minimum() {
    let s = pruning();
    let mut h = Harness::new(case_08_log(30_000), big());
    assert_eq!(h.decide(&s, Moment::TurnEnd), Decision::compact("prune"));
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip, "prune runs only after the loop");
    let cps = h.step(&s, Moment::TurnEnd).unwrap();
    assert_eq!(kinds(&cps), [CheckpointKind::Prune]);
    let cp = &cps[0];
    assert_eq!(cp.window, Window::Inherit);
    assert!(cp.summary.is_none());
    assert_eq!(cleared(cp), ["p1"]);
    assert_eq!(cp.replacements.len(), 1);
    assert_eq!(cp.replacements[0].entry, result_id(&h, "p1"));
    assert_eq!(cp.replacements[0].message, Message::tool_result("p1", "read", CLEARED, false));
    assert_eq!(
        view_shape(&h, &s),
        strings(&[
            "system",
            "U1",
            "call:p1+p2",
            "result:p1 cleared",
            "result:p2",
            "U2",
            "call:p3",
            "result:p3",
            "U3",
            "call:p4",
            "result:p4",
            "U4",
            "call:p5",
            "result:p5",
        ])
    );
    // The call id survives, so pairing does.
    for shape in Shape::ALL {
        let bad: Vec<_> = validate(&lower(&h.view(&s), shape))
            .into_iter()
            .filter(|v| matches!(v.rule, Rule::OrphanResult | Rule::MissingResult | Rule::ResultNotAfterCall))
            .collect();
        assert!(bad.is_empty(), "{shape:?}: {bad:?}");
    }
    // Nothing more to prune: the walk now stops at p1.
    assert_eq!(h.decide(&s, Moment::TurnEnd), Decision::Skip);

    // p1 = 20,000: 20,000 would be cleared, which is not more than 20,000.
    let mut h = Harness::new(case_08_log(20_000), big());
    assert_eq!(h.decide(&s, Moment::TurnEnd), Decision::Skip);
}

#[test]
fn case_09_prune_stops_and_protections() {
    let s = pruning();

    // (a) A `skill` output is neither counted nor cleared.
    let mut h = Harness::new(
        log(vec![
            u("U0", 10),
            t("old", "read", 25_000),
            u("U1", 10),
            t("sk", "skill", 100_000),
            u("U2", 10),
            t("p", "read", 30_000),
            u("U3", 10),
            t("q", "read", 10),
            u("U4", 10),
            t("r", "read", 10),
        ]),
        big(),
    );
    let cps = h.step(&s, Moment::TurnEnd).unwrap();
    assert_eq!(kinds(&cps), [CheckpointKind::Prune]);
    assert_eq!(cleared(&cps[0]), ["old"], "30k + 25k crosses 40k; the skill output is not counted");

    // (b) An output already cleared stops the walk; older outputs stay.
    let mut h =
        Harness::new(log(vec![u("U0", 10), t("p0", "read", 30_000), u("U1", 10), t("p1", "read", 30_000)]), big());
    let mut earlier = Checkpoint::new(CheckpointKind::Prune, Window::Inherit);
    earlier.details = serde_json::to_value(PruneDetails {
        parts: vec![PrunedPart { entry: result_id(&h, "p1"), call_id: "p1".into() }],
        total: 0,
        pruned: 0,
    })
    .unwrap();
    h.log.push_checkpoint(earlier);
    for m in [u("U2", 10), t("p2", "read", 45_000), u("U3", 10), t("q", "read", 10), u("U4", 10), t("r", "read", 10)]
        .into_iter()
        .flatten()
    {
        h.push(m);
    }
    let cps = h.step(&s, Moment::TurnEnd).unwrap();
    assert_eq!(cleared(&cps[0]), ["p2"], "p0 is behind the cleared p1");

    // (c) A summary stops the walk.
    let mut h = Harness::new(log(vec![u("U0", 10), t("p0", "read", 100_000)]), big());
    assert_eq!(kinds(&h.compact(&s, Moment::BeforeRequest).unwrap()), [CheckpointKind::Summary]);
    for m in
        [u("U1", 10), t("p1", "read", 10_000), u("U2", 10), t("p2", "read", 10_000), u("U3", 10), t("p3", "read", 10)]
            .into_iter()
            .flatten()
    {
        h.push(m);
    }
    assert_eq!(h.decide(&s, Moment::TurnEnd), Decision::Skip, "p0's 100k lies behind the summary");

    // (d) Prune is off by default.
    let mut h = Harness::new(case_08_log(30_000), big());
    assert_eq!(h.decide(&default(), Moment::TurnEnd), Decision::Skip);
}

fn screenshot(tag: &str) -> Vec<Message> {
    vec![Message::new(
        Role::User,
        vec![Part::text(filler(tag, 100)), Part::Media { mime: "image/png".into(), tokens: 1_500 }],
    )]
}

#[test]
fn case_10_overflow_replay() {
    let s = default();
    // U5 is cut out, the rest is summarized, U5 is written again after the summary.
    let mut h = Harness::new(
        log(vec![
            u("U1", 100),
            used(t("a1", "read", 30_000), 40_000, 100),
            screenshot("U5"),
            used(t("a5", "read", 100), 100_000, 100),
        ]),
        big(),
    );
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    assert_eq!(h.decide(&s, Moment::Overflow), Decision::compact("context-overflow"));
    let cps = h.step(&s, Moment::Overflow).unwrap();
    let d = details(&cps[0]);
    assert!(d.auto && d.overflow);
    assert_eq!(d.after, Some(AfterKind::Replay));
    assert_eq!(d.replay_of, Some(Slot::Entry(id(&h, "U5"))));
    assert_eq!(view_shape(&h, &s), strings(&["system", "marker", "summary", "replay:U5"]));
    let replay = &h.view(&s).messages[3].message;
    assert_eq!(replay.role, Role::User);
    assert_eq!(replay.parts[1], Part::text("[Attached image/png: file]"));
    let conv = h.summarizer.requests()[0].transcript.clone();
    assert!(conv.contains("[User]: U1 x"));
    assert!(!conv.contains("U5") && !conv.contains("a5"), "the replayed turn is not summarized");

    // U5 is the only real user message: no replay, U5 is summarized, continue with the media note.
    let mut h = Harness::new(log(vec![screenshot("U5"), used(t("a5", "read", 30_000), 100_000, 100)]), big());
    let cps = h.step(&s, Moment::Overflow).unwrap();
    let d = details(&cps[0]);
    assert_eq!((d.after, d.replay_of), (Some(AfterKind::Continue), None));
    assert_eq!(view_shape(&h, &s), strings(&["system", "marker", "summary", "continue"]));
    let text = h.view(&s).messages[3].message.text();
    assert!(text.ends_with(&format!("\n\n{CONTINUE}")) && text.len() > CONTINUE.len() + 100);
    let conv = h.summarizer.requests()[0].transcript.clone();
    assert!(conv.contains("[User]: U5 x") && conv.contains("\n[Attached image/png: file]"));
}

#[test]
fn case_10_overflow_replay_with_a_tail_shows_the_cut_turn_twice() {
    // The original's `filterCompacted` keeps everything between the tail start and the marker,
    // so the cut-out turn stays in view and its replay follows.
    let s = default();
    let mut h = Harness::new(
        log(vec![
            u("U1", 100),
            t("a1", "read", 30_000),
            u("U2", 100),
            a("a2", 2_000),
            u("U5", 100),
            t("a5", "read", 100),
        ]),
        big(),
    );
    h.step(&s, Moment::Overflow).unwrap();
    assert_eq!(
        view_shape(&h, &s),
        strings(&["system", "marker", "summary", "U2", "a2", "U5", "call:a5", "result:a5", "replay:U5"])
    );
}

#[test]
fn case_11_interrupted_tool_in_tail() {
    let s = default();
    let mut h = Harness::new(
        log(vec![
            u("U1", 100),
            a("a1", 30_000),
            u("U2", 100),
            vec![Message::tool_call("c9", "bash", json!({ "cmd": "make" }))],
            used(a("a3", 100), 150_000, 0),
        ]),
        big(),
    );
    h.step(&s, Moment::TurnEnd).unwrap();
    assert_eq!(
        view_shape(&h, &s),
        strings(&["system", "marker", "summary", "U2", "call:c9", "result:c9 interrupted", "a3", "continue"])
    );
    let view = h.view(&s);
    assert_eq!(view.messages[5].message, Message::tool_result("c9", "bash", INTERRUPTED, true));
    assert_eq!(view.messages[5].origin, Origin::Replaced(id(&h, "c9"), id(&h, "c9")));
    let bad: Vec<_> = validate(&lower(&view, Shape::Anthropic))
        .into_iter()
        .filter(|v| matches!(v.rule, Rule::OrphanResult | Rule::MissingResult | Rule::ResultNotAfterCall))
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
}

#[test]
fn case_12_summarizer_serialization() {
    let s = pruning();
    let mut h = Harness::new(
        log(vec![
            u("U0", 10),
            t("gone", "read", 30_000),
            u("U1", 10),
            vec![
                Message::tool_call("long", "read", json!({ "path": "src/lib.rs" })),
                Message::tool_result("long", "read", "y".repeat(5_000), false),
            ],
            vec![
                Message::tool_call("bad", "bash", json!({ "cmd": "make" })),
                Message::tool_result("bad", "bash", "exit 2", true),
            ],
            t("p1", "read", 38_000),
            u("U2", 10),
            a("a2", 10),
            u("U3", 10),
            a("a3", 10),
        ]),
        big(),
    );
    // 38,000 + 1,250 stay under 40,000; `gone` crosses it and 30,000 > 20,000 is cleared.
    let cps = h.step(&s, Moment::TurnEnd).unwrap();
    assert_eq!(cleared(&cps[0]), ["gone"]);

    h.compact(&s, Moment::BeforeRequest).unwrap();
    let first = h.summarizer.requests()[0].clone();
    let conv = conversation(&first.transcript);
    let cut = format!("[Tool result]: {}\n[truncated]", "y".repeat(2_000));
    assert!(conv.contains(&format!("[Assistant tool call]: read({{\"path\":\"src/lib.rs\"}})\n{cut}")));
    assert!(!conv.contains(&"y".repeat(2_001)));
    assert!(conv.contains(&format!("[Assistant tool call]: read({{\"path\":\"gone\"}})\n[Tool result]: {CLEARED}")));
    assert!(conv.contains("[Assistant tool call]: bash({\"cmd\":\"make\"})\n[Tool error]: exit 2"));

    // A second compaction sends the first summary in <prior-summary>, outside <conversation>.
    for m in [u("U4", 10), a("a4", 10)].into_iter().flatten() {
        h.push(m);
    }
    h.compact(&s, Moment::BeforeRequest).unwrap();
    let second = h.summarizer.requests()[1].clone();
    assert!(!conversation(&second.transcript).contains("SUMMARY 1"));
    let prior = second.transcript.find("<prior-summary>\nSUMMARY 1 of compaction\n</prior-summary>").unwrap();
    assert!(prior > second.transcript.find("</conversation>").unwrap());
    assert!(!first.transcript.contains("<prior-summary>"));
    for heading in ["## Objective", "## Important Details", "### Completed", "## Next Move", "## Relevant Files"] {
        assert!(second.instructions.contains(heading), "{heading}");
    }
}

// ---------------------------------------------------------------------------------------------
// Order of prune and summary, and (g) failures

#[test]
fn turn_end_prunes_after_the_compaction_of_that_turn() {
    // Prune runs when the loop exits, after the compaction: the continue and marker messages are
    // then the two newest user turns, so the walk passes the new summary and reaches the tail.
    let s = oc(OpencodeV1Config { prune: true, preserve_recent_tokens: Some(100_000), ..OpencodeV1Config::default() });
    let mut h = Harness::new(
        log(vec![
            u("U0", 10),
            t("p0", "read", 60_000),
            u("U1", 10),
            t("p1", "read", 25_000),
            u("U2", 10),
            used(t("p2", "read", 45_000), 148_000, 0),
        ]),
        big(),
    );
    let cps = h.step(&s, Moment::TurnEnd).unwrap();
    assert_eq!(kinds(&cps), [CheckpointKind::Summary, CheckpointKind::Prune]);
    assert_eq!(details(&cps[0]).tail_start, Some(Slot::Entry(id(&h, "U1"))));
    assert_eq!(cleared(&cps[1]), ["p2", "p1", "p0"]);
    assert_eq!(
        view_shape(&h, &s),
        strings(&[
            "system",
            "marker",
            "summary",
            "U1",
            "call:p1",
            "result:p1 cleared",
            "U2",
            "call:p2",
            "result:p2 cleared",
            "continue"
        ])
    );
}

#[test]
fn prune_that_would_clear_only_summarized_outputs_is_skipped() {
    // With the default tail budget the walk right after a compaction reaches only outputs that
    // were just summarized; clearing them would change nothing, so no prune event is recorded.
    let s = pruning();
    let mut h = Harness::new(
        log(vec![u("U1", 10), t("p1", "read", 50_000), u("U2", 10), used(t("p2", "read", 30_000), 148_000, 0)]),
        big(),
    );
    let cps = h.step(&s, Moment::TurnEnd).unwrap();
    assert_eq!(kinds(&cps), [CheckpointKind::Summary]);
    assert_eq!(view_shape(&h, &s), strings(&["system", "marker", "summary", "continue"]));
}

#[test]
fn summarizer_error_leaves_the_log_unchanged() {
    let s = default();
    let mut h = Harness::new(case_07_log(150_000), big());
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    let before = h.log.clone();
    let err = h.step(&s, Moment::TurnEnd).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Transport);
    assert_eq!(h.log, before);
}

#[test]
fn summary_step_overflow_stops_with_the_original_error() {
    let s = default();
    // A 3,000-token window: the serialized head alone is larger.
    let many: Vec<Vec<Message>> = (0..20).flat_map(|i| [u(&format!("U{i}"), 500), a(&format!("a{i}"), 500)]).collect();
    let mut h = Harness::new(log(many.clone()), model(3_000, 500));
    let err = h.compact(&s, Moment::BeforeRequest).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Rejected);
    assert_eq!(err.message, "Session too large to compact - context exceeds model limit even after stripping media");

    let mut with_replay = many;
    with_replay.push(u("U99", 10));
    let mut h = Harness::new(log(with_replay), model(3_000, 500));
    let err = h.compact(&s, Moment::Overflow).unwrap_err();
    assert_eq!(err.message, "Conversation history too large to compact - exceeds model context limit");
}

#[test]
fn default_strategy_is_the_source_fidelity_opencode_v1() {
    let s = crate::strategy();
    assert_eq!(s.info().id, "opencode-v1");
    assert_eq!(s.info().fidelity, compactbench_core::Fidelity::Source);
}

#[test]
fn tail_reaching_past_an_older_compaction_keeps_its_marker_and_summary_in_view() {
    // The second tail starts before the first marker in storage: `filterCompacted` keeps every
    // stored message from there, the first marker and summary included, and the reorder moves
    // only the newest pair. The third compaction then takes the older summary as the previous
    // one, since it comes last in the view.
    let s = default();
    let mut h = Harness::new(
        log(vec![
            u("U0", 10),
            t("p0", "read", 30_000),
            u("U1", 10),
            a("a1", 7_000),
            u("U2", 10),
            used(a("a2", 7_000), 148_000, 0),
        ]),
        big(),
    );
    let first = h.step(&s, Moment::TurnEnd).unwrap();
    assert_eq!(details(&first[0]).tail_start, Some(Slot::Entry(id(&h, "U1"))));
    for m in [u("U3", 10), used(a("a3", 1_500), 148_000, 0)].into_iter().flatten() {
        h.push(m);
    }
    let second = h.step(&s, Moment::TurnEnd).unwrap();
    assert_eq!(details(&second[0]).tail_start, Some(Slot::Entry(id(&h, "U2"))));
    assert_eq!(
        view_shape(&h, &s),
        strings(&["system", "marker", "summary", "U2", "a2", "marker", "summary", "continue", "U3", "a3", "continue"])
    );
    for m in [u("U4", 10), used(a("a4", 10), 148_000, 0)].into_iter().flatten() {
        h.push(m);
    }
    h.step(&s, Moment::TurnEnd).unwrap();
    let third = &h.summarizer.requests()[2];
    assert!(third.transcript.contains("<prior-summary>\nSUMMARY 1 of compaction\n</prior-summary>"));
}

#[test]
fn truncated_summary_is_accepted() {
    struct Cut;
    impl compactbench_core::Summarizer for Cut {
        fn name(&self) -> &str {
            "cut"
        }
        fn summarize(
            &self,
            _: &compactbench_core::SummaryRequest,
        ) -> Result<compactbench_core::Summary, compactbench_core::Error> {
            Ok(compactbench_core::Summary {
                text: "## Objective\n- half".into(),
                input_tokens: 10,
                output_tokens: 32_000,
                stop: compactbench_core::StopReason::Length,
            })
        }
    }
    let s = default();
    let log = compactbench_core::Log::from_messages(case_07_log(150_000));
    let m = big();
    let mut store = compactbench_core::VirtualStore::new();
    let mut cx = compactbench_core::Cx::new(&m, &Cut, &mut store, compactbench_testkit::tokenizer());
    let view = s.project(&log);
    let cps = s.compact(&log, &view, Moment::TurnEnd, &mut cx).unwrap();
    assert_eq!(cps[0].summary, Some(Message::assistant("## Objective\n- half")));
}
