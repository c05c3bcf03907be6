//! Section (j) conformance cases of `shared/specs/opencode-v2.md`, the (i) worked example,
//! and a few checks of the serialization the cases rely on.

use compactbench_core::{Checkpoint, Decision, EntryId, ErrorKind, Message, Moment, Origin, Part, Role, Strategy, View};
use compactbench_testkit::{json, model, FakeMode, FakeSummarizer, Harness};

use crate::history::{est_oc, rows, serialize, truncate};
use crate::prompt::checkpoint_text;
use crate::request::{estimate_request, request_json};
use crate::{OpencodeV2Config, OpencodeV2Strategy};

// ---------------------------------------------------------------------------------------
// Builders. Sizes are `est_oc` of the serialized row (S) unless a native size (N) is given.

fn v2() -> OpencodeV2Strategy {
    OpencodeV2Strategy::new(OpencodeV2Config::default())
}

fn with(config: OpencodeV2Config) -> OpencodeV2Strategy {
    OpencodeV2Strategy::new(config)
}

fn pad(n: usize) -> String {
    "x".repeat(n)
}

/// A system message of about `tokens` tokens.
fn system(tokens: usize) -> Message {
    Message::system(pad(4 * tokens))
}

/// A user row whose serialization (`[User]: ` + text) is exactly `s` tokens.
fn user(s: usize) -> Message {
    Message::user(pad(4 * s - "[User]: ".len()))
}

/// An assistant text row whose serialization is exactly `s` tokens.
fn text(s: usize) -> Message {
    Message::assistant(pad(4 * s - "[Assistant]: ".len()))
}

/// An assistant tool call plus its result: the serialized row is exactly `s` tokens (the
/// output is cut to 2,000 characters), while the output itself is `4 × n` characters.
fn tool(id: &str, s: usize, n: usize) -> [Message; 2] {
    assert!(4 * n > 2_000, "the output must be long enough to be cut");
    // `[Assistant tool call]: bash(` + args + `)` + `\n[Tool result]: ` + 2000 + `\n[truncated]`.
    let fixed = "[Assistant tool call]: bash(".len() + ")".len() + "\n[Tool result]: ".len() + 2_000 + "\n[truncated]".len();
    let args_len = 4 * s - fixed;
    let args = json!({ "p": pad(args_len - r#"{"p":""}"#.len()) });
    [Message::tool_call(id, "bash", args), Message::tool_result(id, "bash", pad(4 * n), false)]
}

/// Serialized size of every row of `log` (no checkpoint), oldest first.
fn row_sizes(log: &compactbench_core::Log) -> Vec<u64> {
    rows(log, None).iter().map(|r| est_oc(&serialize(r))).collect()
}

fn ids(range: std::ops::RangeInclusive<u32>) -> Vec<u64> {
    range.map(u64::from).collect()
}

fn only(checkpoints: Vec<Checkpoint>) -> Checkpoint {
    assert_eq!(checkpoints.len(), 1, "one checkpoint per compaction");
    checkpoints.into_iter().next().unwrap()
}

fn entries(cp: &Checkpoint, key: &str) -> Vec<u64> {
    cp.details[key].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect()
}

fn summary_text(view: &View) -> String {
    view.messages.iter().find(|m| matches!(m.origin, Origin::Summary(_))).expect("a checkpoint message").message.text()
}

fn origins(view: &View) -> Vec<Origin> {
    view.messages.iter().map(|m| m.origin).collect()
}

fn compacts(d: Decision) -> bool {
    matches!(d, Decision::Compact { .. })
}

/// A harness whose request estimate (by the strategy's own estimator) is exactly `target`:
/// `messages` follow a system prompt padded to make up the difference.
fn harness_with_request_estimate(messages: Vec<Message>, target: u64, window: u64, max_output: u64) -> Harness {
    let build = |sys_len: usize| {
        let mut all = vec![Message::system(pad(sys_len))];
        all.extend(messages.iter().cloned());
        Harness::new(all, model(window, max_output))
    };
    let s = v2();
    let probe = build(1);
    let base = request_json(&probe.log, &s.project(&probe.log)).encode_utf16().count() as u64;
    let sys_len = 1 + (4 * target - base) as usize;
    let h = build(sys_len);
    assert_eq!(estimate_request(&h.log, &s.project(&h.log)), target);
    h
}

// ---------------------------------------------------------------------------------------
// Serialization the cases rely on.

#[test]
fn builders_have_the_sizes_they_claim() {
    let mut msgs = vec![system(10), user(300), text(5_000)];
    msgs.extend(tool("c1", 600, 150_000));
    let h = Harness::new(msgs, model(200_000, 32_000));
    assert_eq!(row_sizes(&h.log), [300, 5_000, 600]);
}

#[test]
fn serialize_uses_the_literal_prefixes_and_cuts_tool_output() {
    let log = compactbench_core::Log::from_messages([
        Message::system("sys"),
        Message::user("fix it"),
        Message::new(
            Role::Assistant,
            vec![
                Part::Reasoning { text: "think".into() },
                Part::Reasoning { text: String::new() },
                Part::text("on it"),
                Part::ToolCall { id: "a".into(), name: "read".into(), args: json!({"path": "x.rs"}) },
                Part::ToolCall { id: "b".into(), name: "bash".into(), args: json!("ls") },
                Part::ToolCall { id: "c".into(), name: "grep".into(), args: json!({}) },
            ],
        ),
        Message::tool_result("b", "bash", "boom", true),
        Message::tool_result("a", "read", pad(5_000), false),
        Message::system("cwd changed"),
    ]);
    let rows = rows(&log, None);
    assert_eq!(rows.len(), 3, "the tool messages fold into their assistant row; the leading system is no row");
    assert_eq!(serialize(&rows[0]), "[User]: fix it");
    let assistant = serialize(&rows[1]);
    let expected = format!(
        "[Assistant reasoning]: think\n[Assistant]: on it\n[Assistant tool call]: read({{\"path\":\"x.rs\"}})\n\
         [Tool result]: {}\n[truncated]\n[Assistant tool call]: bash(ls)\n[Tool error]: boom\n[Assistant tool call]: grep({{}})",
        pad(2_000)
    );
    assert_eq!(assistant, expected);
    assert_eq!(serialize(&rows[2]), "[System update]: cwd changed");
    assert_eq!(truncate(&pad(2_000)), pad(2_000), "exactly 2,000 is not cut");
    assert_eq!(truncate("é".repeat(2_001).as_str()), format!("{}\n[truncated]", "é".repeat(2_000)));
}

// ---------------------------------------------------------------------------------------
// (j) conformance cases.

/// (j) 1: `est > context − max(output, buffer)`, strict; `output` = maxTokens ?? limits.output ?? 0.
#[test]
fn case_01_threshold_strict() {
    let decides = |config: OpencodeV2Config, estimate: u64, max_output: u64| {
        // The 9,000-token user row is over `keep.tokens`, so there is a head to summarize.
        let mut h = harness_with_request_estimate(vec![user(9_000)], estimate, 200_000, max_output);
        compacts(h.decide(&with(config), Moment::BeforeRequest))
    };
    let request_32k = OpencodeV2Config { request_max_tokens: Some(32_000), ..Default::default() };
    assert!(!decides(request_32k.clone(), 168_000, 8_000), "maxTokens 32,000 → threshold 168,000, equal is no");
    assert!(decides(request_32k, 168_001, 8_000));

    // maxTokens unset: limits.output (the model's max_output) decides.
    assert!(!decides(OpencodeV2Config::default(), 168_000, 32_000));
    assert!(decides(OpencodeV2Config::default(), 168_001, 32_000));
    assert!(!decides(OpencodeV2Config::default(), 180_000, 8_000), "limits.output 8,000 → buffer wins → 180,000");
    assert!(decides(OpencodeV2Config::default(), 180_001, 8_000));
    assert!(!decides(OpencodeV2Config::default(), 180_000, 0), "no output info → output 0 → 180,000");
    assert!(decides(OpencodeV2Config::default(), 180_001, 0));

    let buffer_50k = OpencodeV2Config { buffer: 50_000, ..Default::default() };
    assert!(!decides(buffer_50k.clone(), 150_000, 32_000), "buffer 50,000 → 150,000");
    assert!(decides(buffer_50k, 150_001, 32_000));
}

/// (j) 2: `auto = false` or no context limit → the pre-request trigger never fires.
#[test]
fn case_02_disabled() {
    let off = with(OpencodeV2Config { auto: false, ..Default::default() });
    let mut h = harness_with_request_estimate(vec![user(9_000)], 199_000, 200_000, 32_000);
    assert_eq!(h.decide(&off, Moment::BeforeRequest), Decision::Skip);
    assert!(compacts(h.decide(&v2(), Moment::BeforeRequest)), "the same request compacts with auto on");

    let mut h = Harness::new([system(10), user(9_000), user(9_000)], model(0, 32_000));
    for at in [Moment::BeforeRequest, Moment::Overflow, Moment::TurnEnd] {
        assert_eq!(h.decide(&v2(), at), Decision::Skip, "{at:?} without a context limit");
    }
    assert_eq!(h.compact(&v2(), Moment::Overflow).unwrap(), vec![]);
    assert!(h.summarizer.requests().is_empty());
}

/// Source detail behind case 2: `compactAfterOverflow` never reads `auto`, so a provider
/// overflow is still recovered with auto compaction off.
#[test]
fn overflow_path_ignores_auto() {
    let off = with(OpencodeV2Config { auto: false, ..Default::default() });
    let mut h = Harness::new([system(10), user(9_000)], model(200_000, 32_000));
    assert_eq!(h.decide(&off, Moment::Overflow), Decision::compact("overflow"));
    assert_eq!(h.decide(&off, Moment::TurnEnd), Decision::Skip, "V2 never checks at turn end");
}

/// (j) 3: the recent budget adds rows newest first while the total stays `<= keep.tokens`.
#[test]
fn case_03_recent_budget() {
    // Newest → oldest 3,000, 2,000, 2,500, 4,000, 1,000.
    let mut h = Harness::new([system(10), user(1_000), user(4_000), user(2_500), user(2_000), user(3_000)], model(200_000, 32_000));
    let cp = only(h.compact(&v2(), Moment::BeforeRequest).unwrap());
    assert_eq!(entries(&cp, "recent_entries"), ids(3..=5), "newest three, 7,500");
    assert_eq!(entries(&cp, "head_entries"), ids(1..=2));
    let sent = h.summarizer.requests()[0].user_message();
    let expected_head = format!("[User]: {}\n\n[User]: {}", pad(4 * 1_000 - 8), pad(4 * 4_000 - 8));
    assert!(sent.contains(&format!("<conversation>\n{expected_head}\n</conversation>")), "the head alone is summarized");

    // Newest → oldest 5,000, 3,000, 1,000: exactly 8,000 is kept.
    let mut h = Harness::new([system(10), user(1_000), user(3_000), user(5_000)], model(200_000, 32_000));
    let cp = only(h.compact(&v2(), Moment::BeforeRequest).unwrap());
    assert_eq!(entries(&cp, "recent_entries"), ids(2..=3));
    assert_eq!(entries(&cp, "head_entries"), ids(1..=1));
}

/// (j) 4: canonical selection starts the suffix at whatever row the budget reaches; the
/// @8b9b5784 switch moves it back to a user row.
#[test]
fn case_04_no_user_snap_canonical_vs_snap_variant() {
    let session = || {
        let mut m = vec![system(10), user(300), text(5_000), user(200)];
        m.extend(tool("t1", 600, 1_000));
        m.push(text(3_000));
        m.extend(tool("t2", 600, 1_000));
        m.push(text(4_000));
        // ids: U1 1, A 2, U2 3, A-tool 4+5, A-text 6, A-tool 7+8, A-text 9.
        Harness::new(m, model(200_000, 32_000))
    };
    let mut h = session();
    assert_eq!(row_sizes(&h.log), [300, 5_000, 200, 600, 3_000, 600, 4_000]);
    let cp = only(h.compact(&v2(), Moment::BeforeRequest).unwrap());
    assert_eq!(entries(&cp, "recent_entries"), ids(6..=9), "A-text 3,000, A-tool 600, A-text 4,000 = 7,600");
    assert_eq!(entries(&cp, "head_entries"), ids(1..=5), "U1 … the first A-tool");
    assert!(cp.details["recent"].as_str().unwrap().starts_with("[Assistant]: "), "the suffix starts at an assistant row");

    let mut h = session();
    let snap = with(OpencodeV2Config { snap_to_user: true, ..Default::default() });
    let cp = only(h.compact(&snap, Moment::BeforeRequest).unwrap());
    assert_eq!(entries(&cp, "recent_entries"), ids(3..=9), "split moved back to U2");
    assert_eq!(entries(&cp, "head_entries"), ids(1..=2));
}

/// (j) 5: a newest row over the budget leaves `recent` empty; the newest converter then
/// writes no `<recent-context>` block.
#[test]
fn case_05_newest_entry_too_big() {
    let mut h = Harness::new([system(10), user(1_000), user(9_000)], model(200_000, 32_000));
    let cp = only(h.compact(&v2(), Moment::BeforeRequest).unwrap());
    assert_eq!(cp.details["recent"], "");
    assert_eq!(entries(&cp, "head_entries"), ids(1..=2), "head = all");
    let text = summary_text(&h.view(&v2()));
    assert!(!text.contains("<recent-context>"), "{text}");
    assert!(text.ends_with("<summary>\nSUMMARY 1 of compaction\n</summary>\n</conversation-checkpoint>"), "{text}");

    // The @60ada05b converter always writes the block.
    let old = with(OpencodeV2Config { omit_empty_recent: false, ..Default::default() });
    let mut h = Harness::new([system(10), user(1_000), user(9_000)], model(200_000, 32_000));
    h.compact(&old, Moment::BeforeRequest).unwrap();
    assert!(summary_text(&h.view(&old)).ends_with("</summary>\n\n<recent-context>\n\n</recent-context>\n</conversation-checkpoint>"));
}

/// (j) 6: over the threshold, but every serialized row fits `keep.tokens` and there is no
/// previous checkpoint → no compaction, the request goes out as built.
#[test]
fn case_06_over_threshold_but_nothing_to_summarize() {
    let mut msgs = vec![user(200)];
    msgs.extend(tool("t1", 600, 150_000));
    msgs.push(text(1_000));
    let mut h = harness_with_request_estimate(msgs, 170_000, 200_000, 32_000);
    assert_eq!(row_sizes(&h.log), [200, 600, 1_000]);
    assert_eq!(h.decide(&v2(), Moment::BeforeRequest), Decision::Skip);
    assert_eq!(h.decide(&v2(), Moment::Overflow), Decision::Skip, "the overflow path skips for the same reason");
    assert_eq!(h.compact(&v2(), Moment::BeforeRequest).unwrap(), vec![]);
    assert!(h.summarizer.requests().is_empty(), "no summarizer call");
    assert!(h.log.checkpoints().next().is_none());
}

/// (j) 7: one user message, no system prompt, output `min(output || 4096, 4096)`, and the
/// prompt must fit `context − summaryOutput`.
#[test]
fn case_07_summarizer_request_shape() {
    let cap = |max_output: u64| {
        let mut h = Harness::new([system(10), user(9_000)], model(200_000, max_output));
        h.compact(&v2(), Moment::Overflow).unwrap();
        h.summarizer.requests()[0].max_output_tokens
    };
    assert_eq!(cap(32_000), 4_096);
    assert_eq!(cap(1_000), 1_000);
    assert_eq!(cap(0), 4_096);

    let mut h = Harness::new([system(10), user(9_000)], model(200_000, 32_000));
    h.compact(&v2(), Moment::Overflow).unwrap();
    let request = &h.summarizer.requests()[0];
    assert_eq!(request.system, "", "no system prompt");
    let prompt = request.user_message();
    assert!(prompt.starts_with("This is the conversation so far:\n\n<conversation>\n[User]: xxx"));
    assert!(!prompt.contains("<prior-summary>"));
    let headings = ["## Objective", "## Important Details", "## Work State", "### Completed", "### Active", "### Blocked", "## Next Move", "## Relevant Files"];
    let at: Vec<usize> = headings.iter().map(|h| prompt.find(&format!("\n{h}\n")).expect(h)).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "template headings in order");

    // Fit check with context 200,000 and summaryOutput 4,096: the prompt may be 195,904.
    let with_prompt_estimate = |target: u64| {
        let probe_len = 40_000;
        let probe = Harness::new([system(10), Message::user(pad(probe_len))], model(200_000, 32_000));
        let base = crate::compaction::plan(&probe.log, &OpencodeV2Config::default(), &probe.model)
            .unwrap()
            .request
            .user_message()
            .len() as u64;
        let len = probe_len as u64 + 4 * target - base;
        Harness::new([system(10), Message::user(pad(len as usize))], model(200_000, 32_000))
    };
    let mut h = with_prompt_estimate(195_904);
    assert!(compacts(h.decide(&v2(), Moment::BeforeRequest)));
    only(h.compact(&v2(), Moment::BeforeRequest).unwrap());
    assert_eq!(est_oc(&h.summarizer.requests()[0].user_message()), 195_904);

    let mut h = with_prompt_estimate(195_905);
    assert_eq!(h.decide(&v2(), Moment::BeforeRequest), Decision::Skip, "does not fit → no compaction");
    assert_eq!(h.compact(&v2(), Moment::BeforeRequest).unwrap(), vec![]);
    assert!(h.summarizer.requests().is_empty());
}

/// (j) 8: the checkpoint row becomes one user message in the literal layout, first after the
/// system prompt; later rows follow natively; no continue message.
#[test]
fn case_08_checkpoint_rendering() {
    let text = checkpoint_text("S", "R", true);
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines.len(), 11, "{text}");
    assert_eq!(lines[0], "<conversation-checkpoint>");
    assert!(lines[1].contains("not instructions"), "the historical-context line");
    assert_eq!(lines[2..], ["", "<summary>", "S", "</summary>", "", "<recent-context>", "R", "</recent-context>", "</conversation-checkpoint>"]);

    let mut h = Harness::new([system(10), user(9_000), user(100)], model(200_000, 32_000));
    let cp = only(h.compact(&v2(), Moment::BeforeRequest).unwrap());
    let cp_id = EntryId(3);
    let summary = cp.summary.as_ref().unwrap();
    assert_eq!(summary.role, Role::User);
    assert_eq!(summary.text(), checkpoint_text("SUMMARY 1 of compaction", &format!("[User]: {}", pad(4 * 100 - 8)), true));
    h.push(Message::assistant("next"));
    h.push(Message::tool_call("c9", "read", json!({})));
    h.push(Message::tool_result("c9", "read", "ok", false));
    let view = h.view(&v2());
    assert_eq!(
        origins(&view),
        [Origin::Entry(EntryId(0)), Origin::Summary(cp_id), Origin::Entry(EntryId(4)), Origin::Entry(EntryId(5)), Origin::Entry(EntryId(6))],
        "system, checkpoint, then native rows; nothing else"
    );
}

/// (j) 9: history = `system` rows newer than the baseline, the latest checkpoint, and every
/// row after it, ordered by seq; all other old rows are invisible.
#[test]
fn case_09_history_query() {
    // e0 is the baseline (leading system prompt); e1–e20 rows with a system row at e5.
    let mut msgs = vec![system(10)];
    for i in 1..=20 {
        msgs.push(if i == 5 { Message::system("tool policy changed") } else { user(600) });
    }
    let mut h = Harness::new(msgs, model(200_000, 32_000));
    only(h.compact(&v2(), Moment::BeforeRequest).unwrap()); // e21
    for _ in 22..=25 {
        h.push(user(10));
    }
    let view = h.view(&v2());
    let mut expected = vec![Origin::Entry(EntryId(0)), Origin::Entry(EntryId(5)), Origin::Summary(EntryId(21))];
    expected.extend((22..=25).map(|i| Origin::Entry(EntryId(i))));
    assert_eq!(origins(&view), expected);

    // The next pass sees the same rows: the system row is serialized again, e1–e4 and
    // e6–e20 are not.
    let history: Vec<Vec<EntryId>> = rows(&h.log, Some(EntryId(21))).into_iter().map(|r| r.ids).collect();
    assert_eq!(history, [vec![EntryId(5)], vec![EntryId(22)], vec![EntryId(23)], vec![EntryId(24)], vec![EntryId(25)]]);
}

/// (j) 10: a later pass summarizes the old `recent` ahead of the new head, with the old
/// summary as `<prior-summary>`.
#[test]
fn case_10_second_pass_folds_the_old_recent() {
    let mut h = Harness::new([system(10), user(5_000), user(3_000), user(4_000)], model(200_000, 32_000));
    let c1 = only(h.compact(&v2(), Moment::BeforeRequest).unwrap());
    let r1 = c1.details["recent"].as_str().unwrap().to_owned();
    assert_eq!(entries(&c1, "recent_entries"), ids(2..=3));
    // e12 … e16 (here e5 … e9): 3,000, 3,000, 3,000, 2,000, 1,000, so the head is e5–e6.
    for s in [3_000, 3_000, 3_000, 2_000, 1_000] {
        h.push(user(s));
    }
    let c2 = only(h.compact(&v2(), Moment::BeforeRequest).unwrap());
    assert_eq!(entries(&c2, "head_entries"), ids(5..=6));
    let h2 = format!("[User]: {}\n\n[User]: {}", pad(4 * 3_000 - 8), pad(4 * 3_000 - 8));
    let sent = h.summarizer.requests()[1].user_message();
    assert!(sent.contains(&format!("<conversation>\n{r1}\n\n{h2}\n</conversation>")), "old recent first, then H2");
    assert!(sent.contains("<prior-summary>\nSUMMARY 1 of compaction\n</prior-summary>"));
    let conversation = &sent[..sent.find("</conversation>").unwrap()];
    assert!(!conversation.contains("SUMMARY 1"), "the prior summary is not inside <conversation>");
    // The new checkpoint replaces the old one.
    let view = h.view(&v2());
    assert_eq!(origins(&view), [Origin::Entry(EntryId(0)), Origin::Summary(EntryId(10))]);
}

/// (j) 11: a summarizer failure (a tool call from the summarizer is an error in this seam)
/// publishes `Failed`: no row, view unchanged, the oversized request is sent.
#[test]
fn case_11_summarizer_emits_a_tool_call() {
    let mut h = harness_with_request_estimate(vec![user(9_000), user(100)], 190_000, 200_000, 32_000);
    let before = h.view(&v2());
    assert!(compacts(h.decide(&v2(), Moment::BeforeRequest)));
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Other));
    let err = h.compact(&v2(), Moment::BeforeRequest).unwrap_err();
    assert!(err.message.contains("provider_error"), "{err}");
    assert!(h.log.checkpoints().next().is_none(), "no row");
    assert_eq!(h.view(&v2()), before, "view unchanged");

    // A blank reply is `empty_summary`, same outcome.
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed(" \n ".into()));
    let err = h.compact(&v2(), Moment::BeforeRequest).unwrap_err();
    assert_eq!(err.kind, ErrorKind::EmptySummary);
    assert!(err.message.contains("empty_summary"));
    assert_eq!(h.view(&v2()), before);

    // A reply cut at the output cap is accepted (canonical ignores the finish reason).
    struct Cut;
    impl compactbench_core::Summarizer for Cut {
        fn name(&self) -> &str {
            "cut"
        }
        fn summarize(&self, _: &compactbench_core::SummaryRequest) -> Result<compactbench_core::Summary, compactbench_core::Error> {
            Ok(compactbench_core::Summary { text: "## Objective\n- half".into(), input_tokens: 1, output_tokens: 1, stop: compactbench_core::StopReason::Length })
        }
    }
    let view = v2().project(&h.log);
    let mut cx = compactbench_core::Cx::new(&h.model, &Cut, &mut h.store, compactbench_testkit::tokenizer());
    let cps = v2().compact(&h.log, &view, Moment::BeforeRequest, &mut cx).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].details["finish"], "length");
}

/// (j) 12: overflow recovery runs once per provider turn; a second overflow of the rebuilt
/// request surfaces as an error.
#[test]
fn case_12_overflow_recovery_once() {
    let mut h = Harness::new([system(10), user(9_000)], model(200_000, 32_000));
    assert_eq!(h.decide(&v2(), Moment::Overflow), Decision::compact("overflow"));
    let cp = only(h.compact(&v2(), Moment::Overflow).unwrap());
    assert_eq!(cp.details["trigger"], "overflow");
    assert_eq!(cp.details["reason"], "auto", "V2 publishes reason auto on both paths");
    assert_eq!(h.decide(&v2(), Moment::Overflow), Decision::Skip, "the rebuilt request overflowed again: no second compaction");

    // The next provider turn (after the model answered) may recover again.
    h.push(Message::assistant("done"));
    h.push(user(100));
    assert_eq!(h.decide(&v2(), Moment::Overflow), Decision::compact("overflow"));
}

// ---------------------------------------------------------------------------------------
// (i) worked example.

#[test]
fn worked_example() {
    let s = v2();
    // context 200,000, limits.output 32,000 → threshold 168,000; system ≈ 13,000.
    let mut msgs = vec![system(13_000)];
    msgs.push(user(200)); // e1
    msgs.extend(tool("read", 600, 40_000)); // e2
    msgs.extend(tool("grep", 600, 30_000)); // e3
    msgs.push(text(3_000)); // e4
    msgs.push(user(100)); // e5
    msgs.extend(tool("edit", 600, 20_000)); // e6
    msgs.extend(tool("bash", 600, 60_000)); // e7
    msgs.push(text(4_000)); // e8
    msgs.push(user(2_500)); // e9
    msgs.push(text(2_000)); // e10
    msgs.push(user(3_000)); // e11
    let mut h = Harness::new(msgs, model(200_000, 32_000));
    assert_eq!(row_sizes(&h.log), [200, 600, 600, 3_000, 100, 600, 600, 4_000, 2_500, 2_000, 3_000]);
    let estimate = estimate_request(&h.log, &s.project(&h.log));
    assert!(estimate > 177_800 && estimate < 179_000, "13,000 + 164,800 + JSON framing: {estimate}");

    // Compaction 1, before the turn that answers e11.
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("threshold"));
    let c1 = only(h.compact(&s, Moment::BeforeRequest).unwrap());
    assert_eq!(entries(&c1, "recent_entries"), ids(13..=15), "e9 e10 e11 (7,500)");
    assert_eq!(entries(&c1, "head_entries"), ids(1..=12), "e1 … e8");
    let first = &h.summarizer.requests()[0];
    assert_eq!((first.system.as_str(), first.max_output_tokens), ("", 4_096));
    assert!(!first.user_message().contains("<prior-summary>"));
    let view = h.view(&s);
    assert_eq!(origins(&view), [Origin::Entry(EntryId(0)), Origin::Summary(EntryId(16))]);
    let checkpoint = summary_text(&view);
    assert!(checkpoint.contains(&format!("<recent-context>\n{}\n</recent-context>", c1.details["recent"].as_str().unwrap())));
    assert!(checkpoint.contains(&format!("[User]: {}", pad(4 * 3_000 - 8))), "e11 now exists only as text in the checkpoint");
    let after = estimate_request(&h.log, &view);
    assert!((20_000..23_000).contains(&after), "≈ 13,000 + the checkpoint: {after}");
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);

    // Work continues: e12 … e16.
    for m in tool("t12", 600, 50_000) {
        h.push(m);
    }
    for m in tool("t13", 600, 70_000) {
        h.push(m);
    }
    h.push(text(1_000)); // e14
    h.push(user(500)); // e15
    for m in tool("t16", 600, 30_000) {
        h.push(m);
    }
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("threshold"));

    // Compaction 2: head empty, but a previous checkpoint exists.
    let c2 = only(h.compact(&s, Moment::BeforeRequest).unwrap());
    assert_eq!(entries(&c2, "head_entries"), Vec::<u64>::new());
    assert_eq!(entries(&c2, "recent_entries"), ids(17..=24), "e12 … e16 (3,300)");
    let second = h.summarizer.requests()[1].user_message();
    assert!(second.contains(&format!("<conversation>\n{}\n</conversation>", c1.details["recent"].as_str().unwrap())), "C1.recent only");
    assert!(second.contains("<prior-summary>\nSUMMARY 1 of compaction\n</prior-summary>"));
    let view = h.view(&s);
    assert_eq!(origins(&view), [Origin::Entry(EntryId(0)), Origin::Summary(EntryId(25))], "no native rows remain");
    let checkpoint = summary_text(&view);
    assert!(checkpoint.contains("<summary>\nSUMMARY 2 of compaction\n</summary>"));
    assert!(checkpoint.contains(&format!("[Tool result]: {}\n[truncated]", pad(2_000))), "outputs survive as their first 2,000 chars");
    assert!(!checkpoint.contains(&pad(4_000)), "full tool outputs are gone from the view");
}
