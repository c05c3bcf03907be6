//! Section (j) cases of shared/specs/kimi-cli.md, the section (i) worked example, repeated
//! compaction (f) and the failure rules of (g).

use compactbench_core::request::{lower, validate};
use compactbench_core::{
    Checkpoint, Cx, Decision, EntryId, ErrorKind, Message, Moment, Origin, Part, Role, Shape, StopReason, Strategy,
    Summarizer, Summary, SummaryRequest, Usage, VirtualStore, Window,
};
use compactbench_testkit::{json, model, FakeMode, FakeSummarizer, Harness};

use crate::compact::{estimated_token_count, manual};
use crate::prepare::prepare;
use crate::tokens::{estimate_request_tokens, estimate_text_tokens, text_tokens};
use crate::trigger::{anchor, should_auto_compact, token_count_with_pending};
use crate::{prompt, variants, KimiCliConfig, KimiCliStrategy, Release};

// ---------------------------------------------------------------------------------------------
// Fixtures

fn kimi() -> KimiCliStrategy {
    KimiCliStrategy::new(KimiCliConfig::default())
}

fn k1() -> KimiCliStrategy {
    KimiCliStrategy::k1(KimiCliConfig::default())
}

/// `n` chars: `label`, then `.` padding (so `n / 4` is the Kimi text estimate).
fn padded(label: &str, n: usize) -> String {
    assert!(label.len() <= n, "{label} does not fit in {n} chars");
    format!("{label}{}", ".".repeat(n - label.len()))
}

fn with_usage(mut m: Message, input: u64, output: u64) -> Message {
    m.usage = Some(Usage { input, output, ..Default::default() });
    m
}

/// An assistant message with `tokens` of text (chars / 4) and one tool call `id`.
fn call(id: &str, name: &str, tokens: usize) -> Message {
    let mut parts = Vec::new();
    if tokens > 0 {
        parts.push(Part::text(padded(id, tokens * 4)));
    }
    parts.push(Part::ToolCall { id: id.into(), name: name.into(), args: json!({"secret_arg": id}) });
    Message::new(Role::Assistant, parts)
}

fn result(id: &str, name: &str, tokens: usize) -> Message {
    Message::tool_result(id, name, padded(&format!("out-{id}"), tokens * 4), false)
}

fn media(mime: &str) -> Part {
    Part::Media { mime: mime.into(), tokens: 1_000 }
}

fn texts(view: &compactbench_core::View) -> Vec<String> {
    view.iter().map(Message::searchable_text).collect()
}

fn header(i: usize, role: &str) -> String {
    format!("## Message {i}\nRole: {role}\nContent:\n")
}

fn summary_text(s: &str) -> String {
    format!("{}\n{s}", prompt::SUMMARY_PREFIX)
}

/// Compacts once at `BeforeRequest` and returns the single checkpoint.
#[track_caller]
fn compact_once(h: &mut Harness, s: &KimiCliStrategy) -> Checkpoint {
    let mut cps = h.compact(s, Moment::BeforeRequest).expect("compaction succeeds");
    assert_eq!(cps.len(), 1, "one checkpoint");
    cps.remove(0)
}

fn counter(h: &Harness, s: &KimiCliStrategy) -> u64 {
    token_count_with_pending(anchor(&h.log), &s.project(&h.log), s.release)
}

fn token_count(cp: &Checkpoint) -> u64 {
    cp.details["token_count"].as_u64().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Section (j)

#[test]
fn case_01_too_few_messages() {
    let only = Message::user("Only one message");
    assert_eq!(prepare(&[&only], 2, ""), None);

    let s = kimi();
    let mut h = Harness::new([Message::system("sys"), only.clone()], model(200_000, 8_000));
    let before = texts(&h.view(&s));
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap(), vec![]);
    assert!(h.summarizer.requests().is_empty(), "no summarizer call");
    assert_eq!(texts(&h.view(&s)), before);
}

#[test]
fn case_02_only_the_preserved_pair() {
    let (u, a) = (Message::user("Latest question"), Message::assistant("Latest reply"));
    assert_eq!(prepare(&[&u, &a], 2, ""), None, "the pair is the whole history: nothing before the cut");

    let s = kimi();
    let mut h = Harness::new([Message::system("sys"), u, a], model(200_000, 8_000));
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap(), vec![]);
    assert!(h.summarizer.requests().is_empty());
    assert_eq!(texts(&h.view(&s)), ["sys", "Latest question", "Latest reply"]);
}

#[test]
fn case_03_basic_cut() {
    // As in the original test, the system note is a history message (prepare-level).
    let history = [
        Message::system("System note"),
        Message::new(Role::User, vec![Part::text("Old question"), Part::Reasoning { text: "Hidden thoughts".into() }]),
        Message::assistant("Old answer"),
        Message::user("Latest question"),
        Message::assistant("Latest answer"),
    ];
    let refs: Vec<&Message> = history.iter().collect();
    let prepared = prepare(&refs, 2, "").unwrap();
    assert_eq!(prepared.cut, 3);
    assert_eq!(
        prepared.parts,
        [
            header(1, "system"),
            "System note".into(),
            header(2, "user"),
            "Old question".into(),
            header(3, "assistant"),
            "Old answer".into(),
            format!("\n{}", prompt::COMPACT),
        ]
    );
}

#[test]
fn case_03_basic_cut_through_the_strategy() {
    // In our log a leading system message is the agent's system prompt: kept, never summarized.
    let s = kimi();
    let mut h = Harness::new(
        [
            Message::system("agent prompt"),
            Message::new(Role::User, vec![Part::text("Old question"), Part::Reasoning { text: "Hidden thoughts".into() }]),
            Message::assistant("Old answer"),
            Message::user("Latest question"),
            Message::assistant("Latest answer"),
        ],
        model(200_000, 8_000),
    );
    let cp = compact_once(&mut h, &s);
    assert_eq!(cp.window, Window::From(EntryId(3)));
    let req = &h.summarizer.requests()[0];
    assert_eq!(req.system, prompt::SYSTEM);
    assert_eq!(req.transcript, format!("{}Old question{}Old answer", header(1, "user"), header(2, "assistant")));
    assert_eq!(req.user_message(), format!("{}\n{}", req.transcript, prompt::COMPACT), "Kimi's parts, joined");
    assert!(!req.user_message().contains("Hidden thoughts") && !req.user_message().contains("agent prompt"));

    let view = h.view(&s);
    assert_eq!(texts(&view), ["agent prompt".to_owned(), summary_text("SUMMARY 1 of compaction"), "Latest question".into(), "Latest answer".into()]);
    let summary = &view.messages[1];
    assert_eq!(summary.origin, Origin::Summary(EntryId(5)));
    assert_eq!(summary.message.role, Role::User, "the summary is a user message, first after the system prompt");
    assert_eq!(summary.message.parts[0], Part::text(prompt::SUMMARY_PREFIX));
    assert_eq!(view.messages.len(), 4, "no acknowledgement message");
}

#[test]
fn case_04_custom_instruction() {
    let conversation = || {
        [Message::system("sys"), Message::user("q1"), Message::assistant("a1"), Message::user("q2"), Message::assistant("a2")]
    };
    let s = kimi();
    let mut h = Harness::new(conversation(), model(200_000, 8_000));
    let instruction = "Preserve all discussions about the database";
    let view = h.view(&s);
    let mut cx = Cx::new(&h.model, &h.summarizer, &mut h.store, compactbench_testkit::tokenizer());
    let cps = manual(&s, &h.log, &view, &format!("  {instruction} "), &mut cx).unwrap();
    assert_eq!(cps[0].details["trigger"], "manual-with-prompt");
    let req = &h.summarizer.requests()[0];
    let last_part = req.user_message().strip_prefix(req.transcript.as_str()).unwrap().to_owned();
    assert!(last_part.starts_with(&format!("\n{}", prompt::COMPACT)));
    assert!(last_part.contains("**Custom instruction from the user for this compaction:**"));
    assert!(last_part.ends_with(&format!("\n{instruction}")), "{last_part}");

    let mut h = Harness::new(conversation(), model(200_000, 8_000));
    let view = h.view(&s);
    let mut cx = Cx::new(&h.model, &h.summarizer, &mut h.store, compactbench_testkit::tokenizer());
    let cps = manual(&s, &h.log, &view, "", &mut cx).unwrap();
    assert_eq!(cps[0].details["trigger"], "manual");
    let req = &h.summarizer.requests()[0];
    assert_eq!(req.user_message(), format!("{}\n{}", req.transcript, prompt::COMPACT), "exactly newline + prompt");

    // The automatic path never carries an instruction.
    let mut h = Harness::new(conversation(), model(200_000, 8_000));
    assert_eq!(compact_once(&mut h, &s).details["trigger"], "auto");
    assert!(!h.summarizer.requests()[0].instructions.contains("Custom instruction"));
}

#[test]
fn case_05_text_only_summarizer_input() {
    let mut s = kimi();
    s.max_preserved_messages = 1;
    let mut h = Harness::new(
        [
            Message::system("sys"),
            Message::new(
                Role::User,
                vec![
                    Part::text("Analyze these files:"),
                    media("image/png"),
                    media("audio/wav"),
                    media("video/mp4"),
                    Part::Reasoning { text: "think".into() },
                ],
            ),
            Message::assistant("I can see all the media files."),
            Message::user("What's your conclusion?"),
        ],
        model(200_000, 8_000),
    );
    let cp = compact_once(&mut h, &s);
    let req = &h.summarizer.requests()[0];
    assert_eq!(
        req.transcript,
        format!("{}Analyze these files:{}I can see all the media files.", header(1, "user"), header(2, "assistant"))
    );
    assert_eq!(cp.window, Window::From(EntryId(3)));
    assert_eq!(texts(&h.view(&s))[2..], ["What's your conclusion?"]);
}

#[test]
fn case_06_media_in_the_tail_survives() {
    let s = kimi();
    let mut h = Harness::new(
        [
            Message::system("sys"),
            Message::user("Old question"),
            Message::assistant("Old answer"),
            Message::new(Role::User, vec![Part::text("Look at this video:"), media("video/mp4")]),
            Message::assistant("Nice video!"),
        ],
        model(200_000, 8_000),
    );
    compact_once(&mut h, &s);
    let view = h.view(&s);
    assert_eq!(view.messages[2].origin, Origin::Entry(EntryId(3)));
    assert!(view.messages[2].message.parts.contains(&media("video/mp4")));
    assert!(!h.summarizer.requests()[0].user_message().contains("video"));
}

#[test]
fn case_07_post_compaction_counter() {
    let summary = Message::user("S");
    let preserved = Message::user("x".repeat(80));
    assert_eq!(estimated_token_count(Some(150), &[&summary, &preserved]), 170);
    let (m100, m200) = (Message::user("x".repeat(100)), Message::assistant("y".repeat(200)));
    assert_eq!(estimated_token_count(None, &[&m100, &m200]), 75);
    let thinking = Message::new(Role::Assistant, vec![Part::text("z".repeat(40)), Part::Reasoning { text: "t".repeat(4_000) }]);
    assert_eq!(estimated_token_count(None, &[&thinking]), 10);
    assert_eq!(estimated_token_count(None, &[]), 0);

    // Through the strategy: summary output (600 chars -> 150 by the fake) + the kept tail's text.
    let s = kimi();
    let mut h = Harness::new(
        [Message::system("sys"), Message::user("q1"), Message::assistant("a1"), Message::user("x".repeat(40)), Message::assistant("y".repeat(40))],
        model(200_000, 8_000),
    );
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("s".repeat(600)));
    let cp = compact_once(&mut h, &s);
    assert_eq!(token_count(&cp), 150 + 20);
    assert_eq!(counter(&h, &s), 170, "the next check reads the written estimate");
    h.push(Message::user("z".repeat(400)));
    assert_eq!(counter(&h, &s), 270, "plus pending");
}

#[test]
fn case_08_trigger_table() {
    let auto = |count, window| should_auto_compact(count, window, Some(0.85), 50_000);
    assert!(auto(150_000, 200_000), "reserve side");
    assert!(!auto(140_000, 200_000));
    assert!(auto(850_000, 1_000_000), "ratio side");
    assert!(!auto(840_000, 1_000_000));
    assert!(should_auto_compact(140_000, 200_000, Some(0.7), 50_000));
    assert!(!should_auto_compact(139_999, 200_000, Some(0.7), 50_000));
    assert!(!auto(0, 200_000));
    // K1 has no ratio side: 850k on a 1M window is below 1M - 50k.
    assert!(!should_auto_compact(850_000, 1_000_000, None, 50_000));
    assert!(should_auto_compact(950_000, 1_000_000, None, 50_000));

    // Through the strategy on a 1M window, where only the ratio side fires.
    let mut h = Harness::new(
        [Message::system("sys"), Message::user("q"), with_usage(call("c1", "Shell", 0), 849_000, 1_000), result("c1", "Shell", 10)],
        model(1_000_000, 8_000),
    );
    assert_eq!(h.decide(&kimi(), Moment::BeforeRequest), Decision::compact("auto"));
    assert_eq!(h.decide(&k1(), Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn case_09_pending_estimate() {
    let s = kimi();
    let mut h = Harness::new(
        [Message::system("sys"), Message::user("u".repeat(400)), with_usage(call("c1", "ReadFile", 0), 9_000, 1_000)],
        model(200_000, 8_000),
    );
    assert_eq!(counter(&h, &s), 10_000, "usage resets pending: the user message before it no longer counts");
    h.push(Message::tool_result("c1", "ReadFile", "t".repeat(800), false));
    assert_eq!(counter(&h, &s), 10_200);
    assert_eq!(counter(&h, &k1()), 10_000, "K1 counts provider usage only");

    // A reply's tool results are one batch (one floor); other appends each floor on their own.
    let mut h = Harness::new(
        [Message::system("sys"), Message::user("q"), with_usage(call("c1", "ReadFile", 0), 9_000, 1_000)],
        model(200_000, 8_000),
    );
    h.push(Message::tool_result("c1", "ReadFile", "t".repeat(6), false));
    h.push(Message::tool_result("c2", "ReadFile", "t".repeat(6), false));
    assert_eq!(counter(&h, &s), 10_003, "(6 + 6) / 4, not 6 / 4 + 6 / 4");
    h.push(Message::user("u".repeat(3)));
    h.push(Message::user("u".repeat(3)));
    assert_eq!(counter(&h, &s), 10_003, "3 / 4 = 0 twice");

    // No usage yet: everything after the system prompt is pending.
    let fresh = Harness::new([Message::system("s".repeat(4_000)), Message::user("u".repeat(400))], model(200_000, 8_000));
    assert_eq!(counter(&fresh, &s), 100);

    // `clear()` zeroes both; K1 writes nothing after it, so its counter stays 0 until the next
    // reply. The current release writes its estimate instead (case 7).
    let mut h = Harness::new(
        [Message::system("sys"), Message::user("q1"), Message::assistant("a1"), Message::user("q2"), with_usage(Message::assistant("a2"), 9_000, 1_000), Message::user("u".repeat(400))],
        model(200_000, 8_000),
    );
    let s1 = k1();
    let cp = compact_once(&mut h, &s1);
    assert_eq!(token_count(&cp), 0);
    assert_eq!(counter(&h, &s1), 0, "stale usage of the kept a2 is not read back");
}

#[test]
fn case_10_active_task_snapshot() {
    let mut s = kimi();
    s.active_tasks = vec!["task_id: b3333345\nkind: bash\nstatus: running\ndescription: dev server".into()];
    let mut h = Harness::new(
        [Message::system("sys"), Message::user("q1"), Message::assistant("a1"), Message::user("q2"), Message::assistant("a2")],
        model(200_000, 8_000),
    );
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("s".repeat(400)));
    let cp = compact_once(&mut h, &s);
    let view = h.view(&s);
    let last = &view.messages.last().unwrap();
    assert_eq!(last.origin, Origin::Injected(EntryId(5)), "after the kept tail, as Kimi appends it");
    assert_eq!(last.message.role, Role::User);
    let text = last.message.text();
    assert!(text.contains("<active-background-tasks>") && text.contains("task_id: b3333345"), "{text}");
    assert!(text.contains("active_background_tasks: 1\n\n[1]\ntask_id: b3333345"));
    assert_eq!(texts(&view)[2..4], ["q2", "a2"]);
    assert_eq!(token_count(&cp), 100 + 1 + estimate_text_tokens([&last.message]));

    // K1 predates background tasks.
    let mut s1 = k1();
    s1.active_tasks = s.active_tasks.clone();
    let mut h = Harness::new(
        [Message::system("sys"), Message::user("q1"), Message::assistant("a1"), Message::user("q2"), Message::assistant("a2")],
        model(200_000, 8_000),
    );
    assert!(compact_once(&mut h, &s1).injected.is_empty());
}

#[test]
fn case_10_output_cap_reserves_next_request() {
    let s = kimi();
    let mut h = Harness::new(
        [
            Message::system("s".repeat(16_000)),
            Message::user("Old question"),
            Message::assistant("Old answer"),
            Message::user("Latest question"),
            Message::assistant("Latest answer"),
        ],
        model(8_192, 4_000),
    );
    compact_once(&mut h, &s);
    let cap = h.summarizer.requests()[0].max_output_tokens;
    // Next main request: system 4_000; prefix-only user message 1 + 21; "Latest question"
    // 1 + 4; "Latest answer" 3 + 4. The summarizer request is smaller.
    let prefix_only = Message::new(Role::User, vec![Part::text(prompt::SUMMARY_PREFIX)]);
    let tail = [Message::user("Latest question"), Message::assistant("Latest answer")];
    let post = estimate_request_tokens(&"s".repeat(16_000), std::iter::once(&prefix_only).chain(&tail));
    assert_eq!(post, 4_034);
    assert_eq!(cap, 8_192 - 4_034 - 1_024);
    assert!(post + 1_024 + cap <= 8_192);

    // The per-string estimate: ceil(ascii / 4) + non-ascii.
    assert_eq!(text_tokens("abcde"), 2);
    assert_eq!(text_tokens("é😀ab"), 3);

    // Other providers, and K1, leave the provider default (the model's max output).
    let other = KimiCliStrategy::new(KimiCliConfig { kimi_provider: false, ..KimiCliConfig::default() });
    for strategy in [other, k1()] {
        let mut h = Harness::new(
            [Message::system("sys"), Message::user("q1"), Message::assistant("a1"), Message::user("q2"), Message::assistant("a2")],
            model(8_192, 4_000),
        );
        compact_once(&mut h, &strategy);
        assert_eq!(h.summarizer.requests()[0].max_output_tokens, 4_000);
    }
}

#[test]
fn case_11_tool_pairing() {
    let s = kimi();
    let mut h = Harness::new(
        [
            Message::system("sys"),
            Message::user("u1"),
            call("c1", "ReadFile", 0),
            Message::tool_result("c1", "ReadFile", "t1 output", false),
            call("c2", "Shell", 0),
            Message::tool_result("c2", "Shell", "t2 output", false),
            call("c3", "Grep", 0),
            Message::tool_result("c3", "Grep", "t3 output", true),
        ],
        model(200_000, 8_000),
    );
    let cp = compact_once(&mut h, &s);
    assert_eq!(cp.window, Window::From(EntryId(4)), "cut before a2");
    let req = &h.summarizer.requests()[0];
    assert_eq!(req.transcript, format!("{}u1{}{}t1 output", header(1, "user"), header(2, "assistant"), header(3, "tool")));
    assert!(!req.user_message().contains("secret_arg"), "tool calls are not serialized");

    let view = h.view(&s);
    let origins: Vec<Origin> = view.messages.iter().map(|m| m.origin).collect();
    assert_eq!(
        origins,
        [Origin::Entry(EntryId(0)), Origin::Summary(EntryId(8)), Origin::Entry(EntryId(4)), Origin::Entry(EntryId(5)), Origin::Entry(EntryId(6)), Origin::Entry(EntryId(7))]
    );
    assert!(!texts(&view).iter().any(|t| t == "u1"), "the user prompt is summarized, not kept");
    assert_eq!(view.messages[2].message.tool_call_ids().collect::<Vec<_>>(), ["c2"]);
    for shape in Shape::ALL {
        assert_eq!(validate(&lower(&view, shape)), vec![], "{shape:?}");
    }
}

#[test]
fn case_11_error_results_carry_kimis_error_wrapper() {
    let s = kimi();
    let mut h = Harness::new(
        [
            Message::system("sys"),
            Message::user("u1"),
            call("c1", "Shell", 0),
            Message::tool_result("c1", "Shell", "exit 1", true),
            call("c2", "Shell", 0),
            Message::tool_result("c2", "Shell", "", false),
            call("c3", "Shell", 0),
            Message::tool_result("c3", "Shell", "ok", false),
        ],
        model(200_000, 8_000),
    );
    compact_once(&mut h, &s);
    assert!(h.summarizer.requests()[0].transcript.ends_with(&format!("{}<system>ERROR: exit 1</system>", header(3, "tool"))));
}

#[test]
fn case_12_trigger_placement() {
    let session = |tool_chars: usize| {
        Harness::new(
            [
                Message::system("sys"),
                Message::user("q"),
                with_usage(call("c1", "ReadFile", 0), 40_000, 5_000),
                Message::tool_result("c1", "ReadFile", "t".repeat(tool_chars), false),
            ],
            model(100_000, 8_000),
        )
    };
    let s = kimi();
    let mut h = session(20_000);
    assert_eq!(counter(&h, &s), 50_000);
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("auto"));
    assert_eq!(h.decide(&s, Moment::TurnEnd), Decision::Skip, "no check after the agent loop");
    assert_eq!(h.decide(&s, Moment::Overflow), Decision::Skip, "an overflow error never compacts");
    assert_eq!(h.decide(&k1(), Moment::BeforeRequest), Decision::Skip, "K1 does not see the new tool result");
    assert_eq!(session(19_996).decide(&s, Moment::BeforeRequest), Decision::Skip, "49_999 + 50_000 < 100_000");

    // `/compact` before any step: nothing happens.
    let mut h = Harness::new([Message::system("sys")], model(100_000, 8_000));
    let before = h.log.clone();
    let view = h.view(&s);
    let mut cx = Cx::new(&h.model, &h.summarizer, &mut h.store, compactbench_testkit::tokenizer());
    let err = manual(&s, &h.log, &view, "", &mut cx).unwrap_err();
    assert_eq!((err.kind, err.message.as_str()), (ErrorKind::NothingToCompact, "The context is empty."));
    assert!(h.summarizer.requests().is_empty());
    assert_eq!(h.log, before);
}

// ---------------------------------------------------------------------------------------------
// Section (i): the worked example, both compactions.

#[test]
fn worked_example_two_compactions() {
    let s = kimi();
    let mut h = Harness::new(
        [
            Message::system("agent system prompt"),
            Message::user(padded("m1 fix the failing test", 200)),
            call("m2", "ReadFile", 200),
            result("m2", "ReadFile", 30_000),
            call("m4", "Shell", 150),
            result("m4", "Shell", 40_000),
            Message::assistant(padded("m6 answer", 4_000)),
            Message::user(padded("m7 now add caching", 400)),
            call("m8", "Grep", 120),
            result("m8", "Grep", 35_000),
            call("m10", "StrReplaceFile", 400),
            result("m10", "StrReplaceFile", 20_000),
            with_usage(call("m12", "ReadFile", 300), 139_020, 300),
            result("m12", "ReadFile", 25_000),
        ],
        model(200_000, 32_000),
    );
    assert_eq!(counter(&h, &s), 164_320);
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("auto"), "reserve side: 214_320 >= 200_000");
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("S1".repeat(4_000)));
    let cp = compact_once(&mut h, &s);
    assert_eq!(cp.window, Window::From(EntryId(10)), "cut at m10");
    assert_eq!(cp.tokens_before, 164_320);
    assert_eq!(token_count(&cp), 47_700);
    let req = &h.summarizer.requests()[0];
    assert_eq!(req.transcript.matches("## Message ").count(), 9);
    assert!(req.transcript.contains(&header(7, "user")) && req.transcript.contains("m7 now add caching"));
    let view = h.view(&s);
    assert_eq!(view.len(), 6, "[system] S1, m10, m11, m12, m13");
    assert_eq!(view.messages[2].origin, Origin::Entry(EntryId(10)));

    // Second compaction.
    h.push(with_usage(call("m14", "Shell", 200), 59_720, 200));
    h.push(result("m14", "Shell", 45_000));
    assert_eq!(counter(&h, &s), 104_920);
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    h.push(with_usage(call("m16", "ReadFile", 100), 104_920, 100));
    h.push(result("m16", "ReadFile", 48_000));
    assert_eq!(counter(&h, &s), 153_020);
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("auto"));
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("S2".repeat(4_400)));
    let cp = compact_once(&mut h, &s);
    assert_eq!(cp.window, Window::From(EntryId(15)), "cut at m14");
    assert_eq!(token_count(&cp), 95_500);
    let req = &h.summarizer.requests()[0];
    assert!(req.transcript.starts_with(&format!("{}{}S1S1", header(1, "user"), prompt::SUMMARY_PREFIX)), "S1 is message 1");
    assert_eq!(req.transcript.matches("## Message ").count(), 5, "[S1, m10, m11, m12, m13]");
    let view = h.view(&s);
    let origins: Vec<Origin> = view.messages.iter().map(|m| m.origin).collect();
    assert_eq!(
        origins,
        [Origin::Entry(EntryId(0)), Origin::Summary(EntryId(19)), Origin::Entry(EntryId(15)), Origin::Entry(EntryId(16)), Origin::Entry(EntryId(17)), Origin::Entry(EntryId(18))],
        "summaries never stack"
    );
}

#[test]
fn worked_example_chat_only() {
    let s = kimi();
    let run = |n: usize| {
        let all = [Message::user("u1"), Message::assistant("a1"), Message::user("u2"), Message::assistant("a2"), Message::user("u3")];
        let mut h = Harness::new(std::iter::once(Message::system("sys")).chain(all.into_iter().take(n)), model(200_000, 8_000));
        compact_once(&mut h, &s);
        texts(&h.view(&s))[2..].to_vec()
    };
    assert_eq!(run(5), ["a2", "u3"]);
    assert_eq!(run(3), ["a1", "u2"]);
    assert_eq!(run(4), ["u2", "a2"]);
}

// ---------------------------------------------------------------------------------------------
// Sections (f) and (g)

fn four_turns() -> Harness {
    Harness::new(
        [
            Message::system("sys"),
            Message::user("q1"),
            Message::assistant("a1"),
            Message::user("q2"),
            with_usage(Message::assistant("a2"), 90_000, 1_000),
        ],
        model(100_000, 8_000),
    )
}

#[test]
fn failed_summarizer_is_retried_then_leaves_everything_unchanged() {
    let s = kimi();
    let mut h = four_turns();
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Timeout));
    let before = h.log.clone();
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("auto"));
    let err = h.step(&s, Moment::BeforeRequest).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(err.message.starts_with("Context compaction failed"));
    assert_eq!(h.summarizer.requests().len(), 3, "max_retries_per_step attempts");
    assert_eq!(h.log, before);
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("auto"), "the next step tries again");

    // A non-retryable error (e.g. HTTP 400) fails at the first attempt.
    let mut h = four_turns();
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Other));
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap_err().kind, ErrorKind::Other);
    assert_eq!(h.summarizer.requests().len(), 1);
}

#[test]
fn blank_reply_is_an_empty_response_error() {
    let s = kimi();
    let mut h = four_turns();
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed(" \n ".into()));
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap_err().kind, ErrorKind::EmptySummary);
    assert_eq!(h.summarizer.requests().len(), 3, "retried like any retryable error");
}

#[test]
fn over_long_summary_is_accepted_and_compaction_repeats() {
    let s = kimi();
    let mut h = four_turns();
    let long = "L".repeat(400_000);
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed(long.clone()));
    let cp = compact_once(&mut h, &s);
    assert!(100_000 > h.summarizer.requests()[0].max_output_tokens, "the reply exceeds the cap and the window");
    assert_eq!(cp.summary.as_ref().unwrap().parts[1], Part::text(long.clone()), "accepted as is");
    assert_eq!(token_count(&cp), 100_000 + 1);
    // No loop breaker: the next step compacts again, summarizing the previous summary.
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("auto"));
    h.summarizer = FakeSummarizer::new(FakeMode::Numbered);
    let cp = compact_once(&mut h, &s);
    assert_eq!(cp.window, Window::From(EntryId(3)), "the kept pair again; S1 alone is summarized");
    let req = &h.summarizer.requests()[0];
    assert_eq!(req.transcript, format!("{}{}{long}", header(1, "user"), prompt::SUMMARY_PREFIX));
    assert_eq!(texts(&h.view(&s)), ["sys".to_owned(), summary_text("SUMMARY 1 of compaction"), "q2".into(), "a2".into()]);
}

/// A summarizer whose reply was cut off at the cap.
struct CutOff;

impl Summarizer for CutOff {
    fn name(&self) -> &str {
        "cut-off"
    }

    fn summarize(&self, _: &SummaryRequest) -> Result<Summary, compactbench_core::Error> {
        Ok(Summary { text: "<current_focus>half a sum".into(), input_tokens: 10, output_tokens: 7, stop: StopReason::Length })
    }
}

#[test]
fn reply_stopped_by_the_cap_is_accepted() {
    let s = kimi();
    let h = four_turns();
    let view = s.project(&h.log);
    let mut store = VirtualStore::new();
    let mut cx = Cx::new(&h.model, &CutOff, &mut store, compactbench_testkit::tokenizer());
    let cps = s.compact(&h.log, &view, Moment::BeforeRequest, &mut cx).unwrap();
    assert_eq!(cps[0].summary.as_ref().unwrap().parts[1], Part::text("<current_focus>half a sum"));
    assert_eq!(cps[0].summarizer.calls, 1);
    assert_eq!(cps[0].summarizer.output_tokens, 7);
}

#[test]
fn repeated_compaction_keeps_an_injected_task_note_in_place() {
    let mut s = kimi();
    s.active_tasks = vec!["task_id: b1".into()];
    let mut h = four_turns();
    compact_once(&mut h, &s);
    h.push(Message::assistant("a3"));
    // Counted from the end: a3, then the task note (a user message) -> the cut is the note.
    s.active_tasks = vec!["task_id: b2".into()];
    let cp = compact_once(&mut h, &s);
    assert_eq!(cp.window, Window::From(EntryId(6)));
    assert!(h.summarizer.requests()[1].transcript.contains("a2"));
    let view = h.view(&s);
    let shown = texts(&view);
    assert_eq!(shown.len(), 5, "{shown:?}");
    assert!(shown[2].contains("task_id: b1") && shown[3] == "a3" && shown[4].contains("task_id: b2"), "{shown:?}");
}

#[test]
fn variants_are_the_release_then_k1() {
    let ids: Vec<String> = variants().iter().map(|s| s.info().id.clone()).collect();
    assert_eq!(ids, ["kimi-cli", "kimi-cli/k1"]);
    assert_eq!(crate::strategy().info().id, "kimi-cli");
    assert_eq!(kimi().release, Release::Pypi1_52);
    assert_eq!(KimiCliConfig::default().reserved_context_size, 50_000);
}
