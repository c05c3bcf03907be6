//! Conformance cases of `shared/specs/gemini-cli.md` section (j), plus the failure paths.

use std::sync::Mutex;

use compactbench_core::request::{lower, validate};
use compactbench_core::{
    default_projection, CheckpointKind, Cx, Decision, Error, ErrorKind, Log, Message, ModelProfile, Moment, Origin,
    Part, Role, Shape, StopReason, Strategy, Summarizer, Summary, SummaryPosition, SummaryRequest, Usage, View,
    VirtualStore, Window,
};
use compactbench_testkit::{json, render, FakeMode, FakeSummarizer, Harness};
use expect_test::expect;

use crate::compress::{find_compress_split_point, latched, LATCH_PATH};
use crate::history::{self, Content, History, Kind, ResponseKey, Speaker};
use crate::mask::{mask, MaskConfig};
use crate::prompt::ACK;
use crate::tokens::{content_json_len, estimate, estimate_text, part_json, part_json_len, text_tokens};
use crate::truncate::{format_truncated_tool_output, next_truncation_id};
use crate::turn::{compress_now, overflow_precheck, prompt_tokens};
use crate::{GeminiCliConfig, GeminiCliStrategy};

const GEMINI_LIMIT: u64 = 1_048_576;

fn gemini() -> GeminiCliStrategy {
    GeminiCliStrategy::new(GeminiCliConfig::default())
}

fn with_threshold(t: f64) -> GeminiCliStrategy {
    GeminiCliStrategy::new(GeminiCliConfig { compression_threshold: t, ..GeminiCliConfig::default() })
}

/// A model profile; `name` decides whether the history is coalesced (see `is_modern`).
fn profile(name: &str, window: u64) -> ModelProfile {
    let mut m = compactbench_testkit::model(window, 8192);
    m.name = name.into();
    m.provider = Shape::Gemini;
    m
}

/// An assistant text reply produced by a request of `input` prompt tokens.
fn reply(text: &str, input: u64) -> Message {
    let mut m = Message::assistant(text);
    m.usage = Some(Usage { input, output: 0, ..Default::default() });
    m
}

/// An assistant tool call produced by a request of `input` prompt tokens.
fn call(id: &str, name: &str, input: u64) -> Message {
    let mut m = Message::tool_call(id, name, json!({"q": id}));
    m.usage = Some(Usage { input, output: 0, ..Default::default() });
    m
}

fn result(id: &str, name: &str, text: impl Into<String>) -> Message {
    Message::tool_result(id, name, text, false)
}

fn system() -> Message {
    Message::system("You are Gemini CLI.")
}

fn view_of(messages: Vec<Message>) -> View {
    default_projection(&Log::from_messages(messages))
}

/// Every message as history (none pending), as `getHistory` builds it.
fn contents(messages: Vec<Message>, modern: bool) -> (View, Vec<Content>) {
    let view = view_of(messages);
    let all = history::build(&view.messages, 0..view.len(), modern, false);
    (view, all)
}

fn texts(view: &View) -> Vec<(Origin, Role, String)> {
    view.messages.iter().map(|vm| (vm.origin, vm.message.role, vm.message.searchable_text())).collect()
}

fn tool_text(view: &View, call_id: &str) -> String {
    view.iter()
        .flat_map(|m| &m.parts)
        .find_map(|p| match p {
            Part::ToolResult { call_id: c, text, .. } if c == call_id => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {call_id}"))
}

/// A summarizer answering from a script, one reply per call, recording the requests.
struct Scripted {
    replies: Mutex<Vec<Result<String, ErrorKind>>>,
    requests: Mutex<Vec<SummaryRequest>>,
}

impl Scripted {
    fn new(replies: &[Result<&str, ErrorKind>]) -> Scripted {
        Scripted {
            replies: Mutex::new(replies.iter().rev().map(|r| r.map(str::to_owned)).collect()),
            requests: Mutex::new(Vec::new()),
        }
    }

    fn requests(&self) -> Vec<SummaryRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl Summarizer for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        self.requests.lock().unwrap().push(request.clone());
        match self.replies.lock().unwrap().pop().expect("script ran out") {
            Ok(text) => Ok(Summary { input_tokens: 10, output_tokens: 5, text, stop: StopReason::Complete }),
            Err(kind) => Err(Error::new(kind, "scripted failure")),
        }
    }
}

/// `tryCompressChat(force)` with a scripted summarizer on `log`.
fn compress_with(
    log: &Log,
    model: &ModelProfile,
    summarizer: &dyn Summarizer,
    store: &mut VirtualStore,
    force: bool,
) -> Result<Option<compactbench_core::Checkpoint>, Error> {
    let view = default_projection(log);
    let mut cx = Cx { model, summarizer, store, tokenizer: compactbench_testkit::tokenizer(), failures: 0, manual: None };
    compress_now(&GeminiCliConfig::default(), log, &view, &mut cx, force)
}

fn five_messages() -> Vec<Message> {
    vec![
        Message::user("This is the first message."),
        Message::assistant("This is the second message."),
        Message::user("This is the third message."),
        Message::assistant("This is the fourth message."),
        Message::user("This is the fifth message."),
    ]
}

// ---------------------------------------------------------------------------------------
// Split point (`findCompressSplitPoint`).

#[test]
fn case_01_split_rejects_fractions_outside_0_1_and_handles_tiny_histories() {
    for fraction in [0.0, 1.0] {
        let err = find_compress_split_point(&[], fraction).unwrap_err();
        assert_eq!(err.message, "Fraction must be between 0 and 1");
    }
    assert_eq!(find_compress_split_point(&[], 0.5).unwrap(), 0);
    let (_, one) = contents(vec![Message::user("Message 1")], false);
    assert_eq!(find_compress_split_point(&one, 0.5).unwrap(), 0);
}

#[test]
fn case_02_split_at_first_user_entry_past_the_fraction() {
    let (_, h) = contents(five_messages(), false);
    // The upstream test's comments say 66/68/66/68/65; JSON.stringify gives these.
    assert_eq!(h.iter().map(content_json_len).collect::<Vec<_>>(), vec![63, 65, 63, 65, 63]);
    // Target 159.5: index 2 has 128 before it, index 4 has 256.
    assert_eq!(find_compress_split_point(&h, 0.5).unwrap(), 4);
}

#[test]
fn case_03_split_falls_back_to_last_candidate_when_history_ends_with_user() {
    let (_, h) = contents(five_messages(), false);
    assert_eq!(find_compress_split_point(&h, 0.9).unwrap(), 4);
}

#[test]
fn case_04_split_compresses_everything_after_a_plain_model_reply() {
    let mut m = five_messages();
    m.pop();
    let (_, h) = contents(m, false);
    assert_eq!(find_compress_split_point(&h, 0.8).unwrap(), 4, "= length");
}

#[test]
fn case_05_split_never_compresses_a_trailing_function_call() {
    let mut m = five_messages();
    m.truncate(3);
    m.push(Message::tool_call("c1", "foo", json!({})));
    let (_, h) = contents(m, false);
    assert_eq!(find_compress_split_point(&h, 0.99).unwrap(), 2);
}

#[test]
fn case_06_split_with_a_media_part() {
    let media = Message::new(Role::Assistant, vec![Part::Media { mime: "text/plain".into(), tokens: 1 }]);
    let (_, h) = contents(vec![Message::user("Message 1"), media, Message::user("Message 2")], false);
    assert_eq!(find_compress_split_point(&h, 0.5).unwrap(), 2);
}

// ---------------------------------------------------------------------------------------
// Compression service.

#[test]
fn case_07_noop_on_empty_history_and_under_threshold() {
    // Only the pending first prompt: the history is empty.
    let mut h = Harness::new([system(), Message::user("hi")], profile("gemini-2.5-pro", 1000));
    assert_eq!(h.decide(&gemini(), Moment::BeforeRequest), Decision::Skip);
    assert_eq!(h.compact(&gemini(), Moment::BeforeRequest).unwrap(), vec![]);

    // 600 < 0.7 × 1000.
    let s = with_threshold(0.7);
    let mut h = Harness::new(
        [system(), Message::user("hi"), reply("hello", 600), Message::user("next")],
        profile("gemini-2.5-pro", 1000),
    );
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap(), vec![]);
    assert!(h.summarizer.requests().is_empty());
    // The same count crosses the default 0.5.
    assert_eq!(h.decide(&gemini(), Moment::BeforeRequest), Decision::compact("threshold"));
}

fn msg1_to_msg4(count: u64) -> Vec<Message> {
    vec![
        system(),
        Message::user("msg1"),
        Message::assistant("msg2"),
        Message::user("msg3"),
        reply("msg4", count),
        Message::user("next prompt"),
    ]
}

#[test]
fn case_08_compressed_with_verified_summary_then_ack_then_tail() {
    let mut h = Harness::new(msg1_to_msg4(600_000), profile("gemini-2.5-pro", GEMINI_LIMIT));
    assert_eq!(h.decide(&gemini(), Moment::BeforeRequest), Decision::compact("threshold"));
    let cps = h.compact(&gemini(), Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    let cp = &cps[0];
    assert_eq!(cp.kind, CheckpointKind::Summary);
    assert_eq!(cp.details["status"], "COMPRESSED");
    assert_eq!(cp.summarizer.calls, 2);
    let reqs = h.summarizer.requests();
    assert_eq!(
        reqs.iter().map(|r| r.purpose.as_str()).collect::<Vec<_>>(),
        ["chat-compression", "chat-compression-verify"]
    );
    // Call 2 replays the slice plus the draft as the model's answer.
    assert!(reqs[1].transcript.starts_with(&reqs[0].transcript));
    assert!(reqs[1].transcript.ends_with(r#"{"role":"model","parts":[{"text":"SUMMARY 1 of chat-compression"}]}"#));
    assert_eq!(
        reqs[0].transcript.lines().collect::<Vec<_>>(),
        [
            r#"{"role":"user","parts":[{"text":"msg1"}]}"#,
            r#"{"role":"model","parts":[{"text":"msg2"}]}"#,
            r#"{"role":"user","parts":[{"text":"msg3"}]}"#,
            r#"{"role":"model","parts":[{"text":"msg4"}]}"#,
        ]
    );
    // The verification reply is the summary: a bare user message after the system prompt,
    // then the acknowledgement, then (everything was compressed) the pending prompt.
    assert_eq!(cp.summary_position, SummaryPosition::AfterSystem);
    expect![[r#"
        Entry(EntryId(0)) system: You are Gemini CLI.
        Summary(EntryId(6)) user: SUMMARY 2 of chat-compression-verify
        Injected(EntryId(6)) assistant: Got it. Thanks for the additional context!
        Entry(EntryId(5)) user: next prompt
    "#]]
    .assert_eq(&render(&h.view(&gemini())));
    for shape in Shape::ALL {
        assert_eq!(validate(&lower(&h.view(&gemini()), shape)), vec![], "{shape:?}");
    }

    // A blank verification reply falls back to the draft.
    let log = Log::from_messages(msg1_to_msg4(600_000));
    let model = profile("gemini-2.5-pro", GEMINI_LIMIT);
    let s = Scripted::new(&[Ok("Initial Summary"), Ok("   ")]);
    let cp = compress_with(&log, &model, &s, &mut VirtualStore::new(), false).unwrap().unwrap();
    assert_eq!(cp.summary.unwrap().text(), "Initial Summary");

    // Both blank: COMPRESSION_FAILED_EMPTY_SUMMARY, nothing appended, nothing latched.
    let mut h = Harness::new(msg1_to_msg4(600_000), profile("gemini-2.5-pro", GEMINI_LIMIT));
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("  \n ".into()));
    let err = h.compact(&gemini(), Moment::BeforeRequest).unwrap_err();
    assert_eq!(err.kind, ErrorKind::EmptySummary);
    assert!(h.log.checkpoints().next().is_none());
    assert!(!latched(&h.store));
}

#[test]
fn case_09_previous_snapshot_anchors_the_first_call() {
    let messages = |first: &str| {
        vec![
            system(),
            Message::user(first),
            Message::assistant("msg2"),
            Message::user("msg3"),
            reply("msg4", 800),
            Message::user("go"),
        ]
    };
    let mut h = Harness::new(messages("<state_snapshot>old</state_snapshot>"), profile("gemini-2.5-pro", 1000));
    h.compact(&gemini(), Moment::BeforeRequest).unwrap();
    let first = &h.summarizer.requests()[0];
    assert!(first.instructions.contains("already contains a <state_snapshot>"), "{}", first.instructions);
    assert!(first.instructions.ends_with("Reason in your scratchpad first, then output the updated <state_snapshot>."));
    // The approved-plan add-on needs a plan path, which the bench never has.
    assert!(!first.system.to_lowercase().contains("approved"));

    let mut h = Harness::new(messages("msg1"), profile("gemini-2.5-pro", 1000));
    h.compact(&gemini(), Moment::BeforeRequest).unwrap();
    assert!(h.summarizer.requests()[0].instructions.starts_with("Write a new <state_snapshot>"));
}

#[test]
fn case_10_forced_compression_and_inflation_rejection() {
    let model = profile("gemini-2.5-pro", GEMINI_LIMIT);
    let log = Log::from_messages(msg1_to_msg4(100));
    // Forced: under the threshold, still compressed.
    let mut store = VirtualStore::new();
    let s = Scripted::new(&[Ok("S1"), Ok("S2")]);
    let cp = compress_with(&log, &model, &s, &mut store, true).unwrap().unwrap();
    assert_eq!(cp.details["status"], "COMPRESSED");
    // Not forced: NOOP, no call.
    let s = Scripted::new(&[]);
    assert_eq!(compress_with(&log, &model, &s, &mut store, false).unwrap(), None);

    // A 10 000-token summary against a count of 100: rejected, no new history, and a forced
    // call does not latch.
    let long = "a".repeat(40_000);
    let s = Scripted::new(&[Ok(&long), Ok(&long)]);
    let err = compress_with(&log, &model, &s, &mut store, true).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Rejected);
    assert!(err.message.starts_with("COMPRESSION_FAILED_INFLATED_TOKEN_COUNT"), "{}", err.message);
    assert!(err.message.contains("from 100 to 10010 tokens"), "{}", err.message);
    assert!(!latched(&store));
}

/// `[u old msg, m old resp, u msg 1, m fc, fr grep(170k), m fc, fr grep(170k), m fc]`, the
/// last call's result pending.
fn budget_session(count: u64, model_name: &str) -> Harness {
    let big = "a".repeat(170_000);
    Harness::new(
        [
            system(),
            Message::user("old msg"),
            Message::assistant("old resp"),
            Message::user("msg 1"),
            call("g1", "grep", 1000),
            result("g1", "grep", big.clone()),
            call("g2", "grep", 2000),
            result("g2", "grep", big),
            call("r3", "read", count),
            result("r3", "read", "small"),
        ],
        profile(model_name, GEMINI_LIMIT),
    )
}

#[test]
fn case_11_reverse_budget_truncates_older_tool_output_in_the_kept_tail() {
    let mut h = budget_session(600_000, "gemini-2.5-pro");
    let cps = h.compact(&gemini(), Moment::BeforeRequest).unwrap();
    let cp = &cps[0];
    assert_eq!(cp.details["status"], "COMPRESSED");
    // Kept from the first real user message: msg 1 onwards, plus the pending result.
    assert_eq!(cp.window, Window::Kept((3..=9).map(compactbench_core::EntryId).collect()));
    let view = h.view(&gemini());
    let older = tool_text(&view, "g1");
    assert!(
        older.starts_with("Output too large. Showing first 8,000 and last 32,000 characters."),
        "{}",
        &older[..120]
    );
    assert!(older.contains("... [130,000 characters omitted] ..."));
    let path = "~/.gemini/tmp/project/tool-outputs/grep_1.txt";
    assert!(older.contains(path));
    assert_eq!(h.store.read(path).map(str::len), Some(170_000));
    assert_eq!(cp.offloads[0].path, path);
    // The newest grep output (within the 50 000-token budget) is intact.
    assert_eq!(tool_text(&view, "g2").len(), 170_000);
    assert!(matches!(
        view.messages.iter().find(|vm| vm.message.tool_result_ids().any(|i| i == "g2")).unwrap().origin,
        Origin::Entry(_)
    ));
    // A second compression numbers its files on.
    assert_eq!(next_truncation_id(&h.store), 2);
    // Saving never fails in the virtual store, so the "keep the original" path has no case.
}

/// A 300 000-character grep output before the split and another in the kept tail.
fn fidelity_session(window: u64, count: u64) -> Harness {
    let massive = "a".repeat(300_000);
    Harness::new(
        [
            system(),
            Message::user("start"),
            call("g1", "grep", 100),
            result("g1", "grep", massive.clone()),
            Message::user("msg 2"),
            Message::assistant("resp 2"),
            Message::user("preserved msg"),
            call("m1", "massive_preserved", 200),
            result("m1", "massive_preserved", massive),
            call("r3", "read", count),
            result("r3", "read", "small"),
        ],
        // A Gemini 1.x name: no merging of consecutive user entries, as in the upstream test.
        profile("gemini-1.5-pro", window),
    )
}

#[test]
fn case_12_high_fidelity_summarizer_input_unless_over_the_limit() {
    let mut h = fidelity_session(1_000_000, 600_000);
    let cp = h.compact(&gemini(), Moment::BeforeRequest).unwrap().remove(0);
    assert_eq!(cp.details["summarizer_input"], "original");
    let sent = &h.summarizer.requests()[0].transcript;
    assert!(sent.contains(&"a".repeat(300_000)));
    assert!(!sent.contains("Output too large"));
    // The kept tail uses the truncated copy.
    assert!(tool_text(&h.view(&gemini()), "m1").starts_with("Output too large."));

    // The compressed part alone (≈ 75 000 tokens) is over a 60 000-token limit.
    let mut h = fidelity_session(60_000, 50_000);
    let cp = h.compact(&gemini(), Moment::BeforeRequest).unwrap().remove(0);
    assert_eq!(cp.details["summarizer_input"], "truncated");
    let sent = &h.summarizer.requests()[0].transcript;
    assert!(sent.contains("Output too large. Showing first 8,000 and last 32,000 characters"));
    assert!(!sent.contains(&"a".repeat(300_000)));
}

// ---------------------------------------------------------------------------------------
// Masking.

const MASKING: MaskConfig = MaskConfig {
    protection_threshold_tokens: 50_000,
    min_prunable_threshold_tokens: 30_000,
    protect_latest_turn: true,
};

/// A tool output whose part estimates exactly `tokens`: `(name + 13 + n) / 4`.
fn output_of(name: &str, tokens: usize) -> String {
    "A".repeat(tokens * 4 - 13 - name.len())
}

/// `[m call, u result]` per output (Gemini 1.x: no merging), all in the history.
fn tool_history(outputs: &[(&str, String)]) -> (View, Vec<Content>) {
    let mut messages = Vec::new();
    for (name, text) in outputs {
        messages.push(Message::tool_call(format!("id-{name}"), *name, json!({})));
        messages.push(result(&format!("id-{name}"), name, text.clone()));
    }
    contents(messages, false)
}

fn masked_names(view: &View, contents: &[Content], config: &MaskConfig) -> Vec<String> {
    let m = mask(contents, view, config);
    m.rewrites
        .iter()
        .map(|r| match &view.messages[r.at.0].message.parts[r.at.1] {
            Part::ToolResult { name, .. } => name.clone(),
            other => panic!("masked {other:?}"),
        })
        .collect()
}

#[test]
fn case_13_small_output_is_not_masked() {
    let (view, h) = tool_history(&[("test_tool", output_of("test_tool", 100))]);
    assert!(mask(&h, &view, &MASKING).rewrites.is_empty());
    let mut harness = Harness::new(
        [
            system(),
            Message::user("q"),
            call("c", "test_tool", 500),
            result("c", "test_tool", output_of("test_tool", 100)),
            reply("done", 700),
            Message::user("next"),
        ],
        profile("gemini-2.5-pro", GEMINI_LIMIT),
    );
    assert_eq!(harness.decide(&gemini(), Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn case_14_latest_entry_skipped_newest_50k_protected_older_masked() {
    let (view, h) = tool_history(&[
        ("t1", output_of("t1", 60_000)),
        ("t2", output_of("t2", 20_000)),
        ("t3", output_of("t3", 10_000)),
    ]);
    let m = mask(&h, &view, &MASKING);
    assert_eq!(masked_names(&view, &h, &MASKING), ["t1"]);
    let snippet = &m.rewrites[0].text;
    assert!(snippet.starts_with("<tool_output_masked>\n{\n  \"output\": \"AAAA"), "{}", &snippet[..60]);
    assert!(snippet.contains("\n... [TRUNCATED] ...\n"));
    // The stored call id is `t1__id-t1` (`{name}__{id}`, as the CLI stores it).
    assert!(snippet
        .ends_with("~/.gemini/tmp/project/tool-outputs/session-compactbench/t1_t1__id-t1_e1.txt\n</tool_output_masked>"));
    assert_eq!(m.rewrites[0].saved, serde_json::to_string_pretty(&json!({"output": output_of("t1", 60_000)})).unwrap());
}

#[test]
fn case_15_exactly_50k_is_still_protected() {
    let outputs: Vec<(String, String)> = (0..12).map(|i| (format!("t{i:02}"), output_of("t00", 10_000))).collect();
    let refs: Vec<(&str, String)> = outputs.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let (view, h) = tool_history(&refs);
    // t11 is the newest entry; t10…t06 sum to exactly 50 000; t05 crosses.
    assert_eq!(masked_names(&view, &h, &MASKING), ["t05", "t04", "t03", "t02", "t01", "t00"]);
}

#[test]
fn case_16_exempt_already_masked_no_savings_and_overrides() {
    // An exempt tool deep in history is never masked; the others beyond 50k are.
    let (view, h) = tool_history(&[
        ("activate_skill", "High value instructions for skill".into()),
        ("bulky_tool", output_of("bulky_tool", 60_000)),
        ("padding", output_of("padding", 60_000)),
        ("latest", "l".into()),
    ]);
    assert_eq!(masked_names(&view, &h, &MASKING), ["padding", "bulky_tool"]);

    // Already masked: neither counted nor masked again; the other is the newest entry.
    let (view, h) = tool_history(&[
        ("tool1", "<tool_output_masked>...</tool_output_masked>".into()),
        ("tool2", output_of("tool2", 60_000)),
    ]);
    assert!(mask(&h, &view, &MASKING).rewrites.is_empty());

    // A tiny output past the line would grow if masked, so it stays.
    let (view, h) = tool_history(&[
        ("tiny_tool", "tiny".into()),
        ("padding", output_of("padding", 60_000)),
        ("latest", "l".into()),
    ]);
    assert_eq!(masked_names(&view, &h, &MASKING), ["padding"]);

    // Protection 100, prunable 50, latest not protected: the only entry is masked.
    let low =
        MaskConfig { protection_threshold_tokens: 100, min_prunable_threshold_tokens: 50, protect_latest_turn: false };
    let view = view_of(vec![result("c", "test_tool", "A".repeat(2000))]);
    let h = history::build(&view.messages, 0..1, false, false);
    assert_eq!(masked_names(&view, &h, &low), ["test_tool"]);
}

#[test]
fn masking_runs_before_a_request_and_offloads_the_output() {
    // Four outputs of 30k behind the newest entry: the newest is protected (30k), the next
    // crosses 50k and it and the older two (90k ≥ 30k) are masked.
    let mut messages = vec![system(), Message::user("explore")];
    for i in 0..4 {
        let id = format!("r{i}");
        messages.push(call(&id, "read", 1000 + i));
        messages.push(result(&id, "read", output_of("read", 30_000)));
    }
    messages.push(reply("done", 130_000));
    messages.push(Message::user("next"));
    let mut h = Harness::new(messages, profile("gemini-2.5-pro", GEMINI_LIMIT));
    assert_eq!(h.decide(&gemini(), Moment::BeforeRequest), Decision::compact("tool output masking"));
    let cps = h.compact(&gemini(), Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Mask);
    assert_eq!(cps[0].window, Window::Inherit);
    assert_eq!(cps[0].details["masked"], 3);
    let view = h.view(&gemini());
    for id in ["r0", "r1", "r2"] {
        let text = tool_text(&view, id);
        assert!(text.starts_with("<tool_output_masked>"), "{id}");
        let path =
            cps[0].offloads.iter().find(|o| text.contains(&o.path)).expect("the pointer names the file").path.clone();
        assert!(h.store.read(&path).unwrap().contains(&output_of("read", 30_000)));
    }
    assert_eq!(tool_text(&view, "r3"), output_of("read", 30_000));
    // Masked outputs are not masked again.
    assert_eq!(h.decide(&gemini(), Moment::BeforeRequest), Decision::Skip);
}

// ---------------------------------------------------------------------------------------
// Client: latch, fallback, overflow pre-check.

#[test]
fn case_17_inflation_latches_only_unforced_and_a_forced_success_clears_it() {
    let model = profile("gemini-2.5-pro", 1000);
    let messages = vec![
        system(),
        Message::user("msg1"),
        Message::assistant("msg2"),
        Message::user("msg3"),
        reply("msg4", 600),
        Message::user("go"),
    ];
    let long = "x".repeat(8000);

    // Non-forced inflated failure: rejected, chat not replaced, latch set.
    let mut h = Harness::new(messages.clone(), model.clone());
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed(long.clone()));
    let err = h.compact(&gemini(), Moment::BeforeRequest).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Rejected);
    assert!(h.log.checkpoints().next().is_none());
    assert!(latched(&h.store));

    // A forced failure leaves it set.
    let s = Scripted::new(&[Ok(&long), Ok(&long)]);
    assert_eq!(compress_with(&h.log, &model, &s, &mut h.store, true).unwrap_err().kind, ErrorKind::Rejected);
    assert!(latched(&h.store));

    // A forced success compresses and the new chat clears it.
    let s = Scripted::new(&[Ok("short"), Ok("short")]);
    let cp = compress_with(&h.log, &model, &s, &mut h.store, true).unwrap().unwrap();
    assert_eq!(cp.details["status"], "COMPRESSED");
    assert!(!latched(&h.store));
    assert_eq!(h.store.read(LATCH_PATH), Some("false"));
}

#[test]
fn case_18_overflow_precheck_reports_and_never_compresses() {
    // Limit 1000, count 900, a 404-character request.
    let view = view_of(vec![system(), Message::user("q"), reply("a", 900), Message::user("a".repeat(404))]);
    let pending = History::from_view(&view, true, false).pending;
    let request = history::build(&view.messages, pending, false, false);
    let estimated = estimate(request.iter().flat_map(|c| &c.parts));
    assert_eq!(estimated, 101);
    assert_eq!(overflow_precheck(estimated, 1000 - 900), Some((101, 100)));
    assert_eq!(overflow_precheck(100, 100), None);
    // No compression path on an overflow error.
    let mut h = Harness::new(
        [system(), Message::user("q"), reply("a", 900), Message::user("a".repeat(404))],
        profile("gemini-2.5-pro", 1000),
    );
    assert_eq!(h.decide(&gemini(), Moment::Overflow), Decision::Skip);
    assert_eq!(h.decide(&gemini(), Moment::TurnEnd), Decision::Skip);
}

#[test]
fn case_19_compression_runs_before_the_precheck() {
    let session = |request: String| {
        Harness::new(
            [system(), Message::user("b".repeat(2000)), reply("ok", 950), Message::user(request)],
            profile("gemini-2.5-pro", 1000),
        )
    };
    // 950 ≥ 500: compressed first; the new count leaves room for a 60-token request.
    let mut h = session("c".repeat(240));
    let cp = h.compact(&gemini(), Moment::BeforeRequest).unwrap().remove(0);
    assert_eq!(cp.details["status"], "COMPRESSED");
    assert!(cp.details["last_prompt_tokens"].as_u64().unwrap() < 400);
    assert!(cp.details.get("context_window_will_overflow").is_none());
    // The counter is the new estimate until the next reply reports.
    let history = History::from_view(&h.view(&gemini()), true, true);
    assert_eq!(prompt_tokens(&h.log, &h.view(&gemini()), &history), cp.details["last_prompt_tokens"].as_u64().unwrap());

    // A request still too big after compression is what the original would refuse to send.
    let mut h = session("c".repeat(4000));
    let cp = h.compact(&gemini(), Moment::BeforeRequest).unwrap().remove(0);
    assert_eq!(cp.details["context_window_will_overflow"]["estimated_request_tokens"], 1000);
}

// ---------------------------------------------------------------------------------------
// The issue's paths: rejection, fallback, failing summarizer, repeated compression.

#[test]
fn too_long_summary_is_a_rejected_compaction_and_the_log_is_unchanged() {
    let mut h = Harness::new(msg1_to_msg4(600_000), profile("gemini-2.5-pro", GEMINI_LIMIT));
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("y".repeat(3_000_000)));
    let before = h.log.clone();
    assert_eq!(h.decide(&gemini(), Moment::BeforeRequest), Decision::compact("threshold"));
    let err = h.compact(&gemini(), Moment::BeforeRequest).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Rejected);
    assert!(err.message.contains("from 600000 to 750010 tokens"), "{}", err.message);
    assert_eq!(h.log, before);
    assert_eq!(h.failures, 1);
    assert_eq!(h.summarizer.requests().len(), 2);
}

#[test]
fn after_an_inflation_failure_only_truncation_runs() {
    let mut h = budget_session(600_000, "gemini-2.5-pro");
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("y".repeat(3_000_000)));
    assert_eq!(h.compact(&gemini(), Moment::BeforeRequest).unwrap_err().kind, ErrorKind::Rejected);
    assert_eq!(h.summarizer.requests().len(), 2);

    // Next request, still over the threshold: no summarizer call, the budget-truncated
    // history is installed because it is smaller (CONTENT_TRUNCATED).
    h.push(reply("more", 650_000));
    h.push(Message::user("go on"));
    h.summarizer = FakeSummarizer::default();
    assert_eq!(h.decide(&gemini(), Moment::BeforeRequest), Decision::compact("threshold"));
    let cps = h.compact(&gemini(), Moment::BeforeRequest).unwrap();
    assert!(h.summarizer.requests().is_empty());
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Truncate);
    assert_eq!(cps[0].details["status"], "CONTENT_TRUNCATED");
    assert_eq!(cps[0].window, Window::Inherit);
    let view = h.view(&gemini());
    assert!(tool_text(&view, "g1").starts_with("Output too large."));
    // The failed pass had already saved g1 as `grep_1.txt` and moved the CLI's counter on,
    // though its history was never installed.
    assert!(tool_text(&view, "g1").contains("tool-outputs/grep_2.txt"));
    assert_eq!(tool_text(&view, "g2").len(), 170_000);
    assert!(view.iter().any(|m| m.text() == "old msg"), "nothing summarized");

    // Every later due request truncates again without a summary. The older output, already
    // cut, still falls outside the budget, so it is cut once more and the notices nest
    // (upstream does the same).
    h.push(reply("again", 640_000));
    h.push(Message::user("and on"));
    let cps = h.compact(&gemini(), Moment::BeforeRequest).unwrap();
    assert!(h.summarizer.requests().is_empty());
    assert_eq!(cps[0].details["status"], "CONTENT_TRUNCATED");
    let g1 = tool_text(&h.view(&gemini()), "g1");
    assert_eq!(g1.matches("Output too large.").count(), 2);
    assert!(g1.len() < 41_000);
}

#[test]
fn failing_summarizer_fails_the_compaction_without_latching() {
    for kind in [ErrorKind::Transport, ErrorKind::Timeout] {
        let mut h = Harness::new(msg1_to_msg4(600_000), profile("gemini-2.5-pro", GEMINI_LIMIT));
        h.summarizer = FakeSummarizer::new(FakeMode::Fail(kind));
        let before = h.log.clone();
        let err = h.compact(&gemini(), Moment::BeforeRequest).unwrap_err();
        assert_eq!(err.kind, kind, "the summarizer's error propagates");
        assert_eq!(h.log, before);
        assert_eq!(h.summarizer.requests().len(), 1, "the first call fails; no verification call");
        assert!(!latched(&h.store));
        assert_eq!(h.failures, 1);

        // The next request tries the full compression again, and succeeds.
        h.summarizer = FakeSummarizer::default();
        assert_eq!(h.decide(&gemini(), Moment::BeforeRequest), Decision::compact("threshold"));
        let cps = h.compact(&gemini(), Moment::BeforeRequest).unwrap();
        assert_eq!(cps[0].kind, CheckpointKind::Summary);
        assert_eq!(h.failures, 0);
    }
}

#[test]
fn failing_verification_call_fails_the_compaction() {
    let log = Log::from_messages(msg1_to_msg4(600_000));
    let s = Scripted::new(&[Ok("draft"), Err(ErrorKind::Transport)]);
    let err =
        compress_with(&log, &profile("gemini-2.5-pro", GEMINI_LIMIT), &s, &mut VirtualStore::new(), false).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Transport);
    assert_eq!(s.requests().len(), 2);
}

#[test]
fn second_compression_integrates_the_previous_snapshot() {
    // Worked example (i) in small: after a first compression, the next one summarizes the
    // summary (anchored) and keeps from the newest real user message.
    let snapshot = "<state_snapshot><overall_goal>refactor auth</overall_goal></state_snapshot>";
    let mut h = Harness::new(
        [
            system(),
            Message::user(format!("refactor the auth module {}", "r".repeat(400))),
            call("c1", "read", 100),
            result("c1", "read", "x".repeat(4000)),
            reply("plan", 2000),
            Message::user("go ahead"),
            call("c2", "edit", 2500),
            result("c2", "edit", "ok"),
            reply("2 tests fail", 2600),
            Message::user("fix them"),
        ],
        profile("gemini-2.5-pro", 5000),
    );
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed(snapshot.into()));
    let first = h.step(&gemini(), Moment::BeforeRequest).unwrap().remove(0);
    assert_eq!(first.details["previous_snapshot"], false);
    // "fix them" is pending; "go ahead" is the first real user message past 70 % of the
    // history: it and everything after it stay.
    assert_eq!(first.window, Window::Kept((5..=9).map(compactbench_core::EntryId).collect()));

    h.push(call("c3", "run_shell_command", 1500));
    h.push(result("c3", "run_shell_command", "z".repeat(8000)));
    h.push(call("c4", "read", 3000));
    h.push(result("c4", "read", "small"));
    let second = h.step(&gemini(), Moment::BeforeRequest).unwrap().remove(0);
    assert_eq!(second.details["previous_snapshot"], true);
    let reqs = h.summarizer.requests();
    assert!(reqs[2].instructions.contains("already contains a <state_snapshot>"));
    // The old summary entry is the first content sent; the acknowledgement follows it.
    assert!(reqs[2].transcript.starts_with(&format!("{{\"role\":\"user\",\"parts\":[{{\"text\":\"{snapshot}\"}}]}}\n{{\"role\":\"model\",\"parts\":[{{\"text\":\"{ACK}\"}}]}}")));
    // No real user message after "fix them": the tail from it (with the large shell
    // output, 90 % of the history) is kept again, plus the pending result.
    let kept = [9, 11, 12, 13, 14].map(compactbench_core::EntryId).to_vec();
    assert_eq!(second.window, Window::Kept(kept));
    let view = h.view(&gemini());
    assert_eq!(texts(&view)[1], (Origin::Summary(compactbench_core::EntryId(15)), Role::User, snapshot.to_owned()));
    assert_eq!(view.iter().filter(|m| m.text() == ACK).count(), 1, "one summary and one ack at a time");
}

/// Gemini CLI stores call and response ids as `{name}__{id}` and measures its split point on
/// them: the JSON length of a call grows by the name and two underscores.
#[test]
fn stored_call_ids_carry_the_tool_name() {
    use crate::history::stored_call_id;
    assert_eq!(stored_call_id("run_shell_command", "call_1"), "run_shell_command__call_1");
    assert_eq!(stored_call_id("run_shell_command", "run_shell_command__call_1"), "run_shell_command__call_1");
    assert_eq!(stored_call_id(" read_file ", "c"), "read_file__c");
    assert_eq!(stored_call_id("", "c"), "generic_tool__c");
    assert_eq!(stored_call_id("read_file", ""), "");
    let call = Kind::Call { id: stored_call_id("read", "c1"), name: "read".into(), args: json!({}) };
    let raw = Kind::Call { id: "c1".into(), name: "read".into(), args: json!({}) };
    assert_eq!(part_json_len(&call), part_json_len(&raw) + 6);
}

#[test]
fn tool_time_truncation_cuts_new_shell_output() {
    let out = "L".repeat(50_000);
    let mut h = Harness::new(
        [system(), Message::user("run tests"), call("s1", "bash", 1000), result("s1", "bash", out.clone())],
        profile("gemini-2.5-pro", GEMINI_LIMIT),
    );
    assert_eq!(h.decide(&gemini(), Moment::BeforeRequest), Decision::compact("tool output truncation"));
    let cps = h.compact(&gemini(), Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Offload);
    let text = tool_text(&h.view(&gemini()), "s1");
    // The stored call id `bash__s1` starts with the tool's name, so it is the file name as is.
    let path = "~/.gemini/tmp/project/tool-outputs/session-compactbench/bash__s1.txt";
    assert!(text.starts_with(&format!(
        "Output too large. Showing first 8,000 and last 32,000 characters. For full output see: {path}\n"
    )));
    assert_eq!(h.store.read(path), Some(out.as_str()));
    // Not cut again; a non-shell tool is never cut at tool time.
    assert_eq!(h.decide(&gemini(), Moment::BeforeRequest), Decision::Skip);
    let mut h = Harness::new(
        [system(), Message::user("read"), call("r1", "read", 1000), result("r1", "read", "L".repeat(50_000))],
        profile("gemini-2.5-pro", GEMINI_LIMIT),
    );
    assert_eq!(h.decide(&gemini(), Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn a_tool_result_continuation_is_checked_and_keeps_its_call() {
    // The check runs mid-turn too; the pending tool result is not history, and the tail
    // (which ends with the pending call) keeps call and result paired.
    let mut h = Harness::new(
        [
            system(),
            Message::user("a".repeat(3000)),
            reply(&"b".repeat(3000), 100),
            Message::user("do it"),
            call("c1", "read", 1800),
            result("c1", "read", "content"),
        ],
        profile("gemini-2.5-pro", 3000),
    );
    let cp = h.step(&gemini(), Moment::BeforeRequest).unwrap().remove(0);
    assert_eq!(cp.window, Window::Kept((3..=5).map(compactbench_core::EntryId).collect()));
    for shape in Shape::ALL {
        assert_eq!(validate(&lower(&h.view(&gemini()), shape)), vec![], "{shape:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Estimator and formats.

#[test]
fn json_string_lengths_are_those_of_the_serialized_string() {
    // JSON.stringify and serde_json escape alike: short forms for \b \f \n \r \t " \\,
    // `\u00XX` for the other controls, nothing else (not DEL, not U+2028).
    let texts = ["", "plain", "quote \" and \\ slash", "\u{8}\u{c}\n\r\t", "\u{0}\u{1f}\u{7f}", "é日本😀\u{2028}", "mixed\n\"é\u{1}😀"];
    for text in texts {
        let serialized = serde_json::to_string(text).unwrap();
        assert_eq!(crate::tokens::json_str_len(text), serialized.encode_utf16().count() as u64, "{text:?}");
        let ascii = text.encode_utf16().filter(|&u| u <= 127).count() as f64;
        assert_eq!(text_tokens(text), ascii / 4.0 + (text.encode_utf16().count() as f64 - ascii) * 1.5, "{text:?}");
    }
}

#[test]
fn estimator_matches_estimate_token_count_sync() {
    assert_eq!(text_tokens("abcd"), 1.0);
    assert_eq!(text_tokens("é"), 1.5);
    assert_eq!(text_tokens("日本"), 3.0);
    assert_eq!(estimate_text(&"é".repeat(100_001)), 25_000, "over 100 000 units: length / 4");
    assert_eq!(estimate_text("abc"), 0, "floored");
    let image = [crate::history::GPart { kind: Kind::Media { mime: "image/png".into(), tokens: 7 }, at: None }];
    assert_eq!(estimate(&image), 3000);
    // Function response: (name + JSON of {output}) / 4.
    let fr = Kind::Response { id: "1".into(), name: "grep".into(), key: ResponseKey::Output, text: "hit".into() };
    assert_eq!(crate::tokens::part_tokens(&fr), (4.0 + 16.0) / 4.0);
}

#[test]
fn json_lengths_match_json_stringify() {
    let parts = [
        Kind::Text { text: "line\n\"q\" \\ é 😀 \u{1}".into(), thought: false },
        Kind::Text { text: "think".into(), thought: true },
        Kind::Call { id: "c1".into(), name: "read".into(), args: json!({"path": "a.rs", "n": [1, 2]}) },
        Kind::Response { id: "c1".into(), name: "read".into(), key: ResponseKey::Error, text: "boom\t".into() },
        Kind::Media { mime: "image/png".into(), tokens: 3 },
    ];
    for part in &parts {
        let mut value = part_json(part);
        if let Kind::Media { tokens, .. } = part {
            value["inlineData"]["data"] = json!("A".repeat(*tokens as usize * 4));
        }
        assert_eq!(part_json_len(part), compactbench_core::estimate::utf16_len(&value.to_string()), "{value}");
    }
    let content = Content {
        role: Speaker::Model,
        parts: parts[..4].iter().map(|k| crate::history::GPart { kind: k.clone(), at: None }).collect(),
        members: vec![],
    };
    assert_eq!(
        content_json_len(&content),
        compactbench_core::estimate::utf16_len(&crate::tokens::content_json(&content).to_string())
    );
}

#[test]
fn truncated_format_follows_javascript_slicing() {
    let s = "0123456789".repeat(10);
    assert_eq!(format_truncated_tool_output(&s, "f", 100), s);
    let t = format_truncated_tool_output(&s, "f", 10);
    assert_eq!(t, format!("Output too large. Showing first 2 and last 8 characters. For full output see: f\n01\n\n... [90 characters omitted] ...\n\n23456789"));
    // A prompt count above the window gives a negative size; JavaScript's slice semantics
    // make the "truncated" text longer than the original, as upstream.
    let t = format_truncated_tool_output(&s, "f", -10);
    assert_eq!(
        t,
        format!(
            "Output too large. Showing first -2 and last -8 characters. For full output see: f\n{}\n\n... [110 characters omitted] ...\n\n{}",
            &s[..98],
            &s[8..]
        )
    );
}

#[test]
fn history_merges_roles_for_modern_models_and_curates_invalid_replies() {
    let messages = vec![
        Message::user("u1"),
        Message::new(Role::Assistant, vec![Part::Reasoning { text: "hmm".into() }, Part::text("a1")]),
        Message::assistant(""),
        Message::user("u2"),
        Message::tool_call("c", "read", json!({})),
        result("c", "read", "r"),
        Message::user("u3"),
    ];
    let view = view_of(messages);
    let modern = history::build(&view.messages, 0..view.len(), true, true);
    // The empty reply drops its whole model run (with a1); u1 and u2 then merge; the tool
    // result and u3 merge into one entry carrying a function response.
    let roles: Vec<(Speaker, Vec<usize>)> = modern.iter().map(|c| (c.role, c.members.clone())).collect();
    assert_eq!(roles, vec![(Speaker::User, vec![0, 3]), (Speaker::Model, vec![4]), (Speaker::User, vec![5, 6])]);
    let legacy = history::build(&view.messages, 0..view.len(), false, false);
    assert_eq!(legacy.len(), 7);
    assert!(matches!(legacy[1].parts[0].kind, Kind::Text { thought: true, .. }), "thoughts kept for Gemini 1.x");
    assert!(
        history::is_modern("claude-sonnet-4")
            && history::is_modern("gemini-2.5-pro")
            && history::is_modern("gemini-3-pro-preview")
    );
    assert!(!history::is_modern("gemini-1.5-pro"));
}

#[test]
fn strategy_identity() {
    let s: Box<dyn Strategy> = crate::strategy();
    assert_eq!(s.info().id, "gemini-cli");
    assert!(s.info().source.contains("0.61.0"));
    assert_eq!(
        GeminiCliConfig { compression_threshold: 0.0, ..GeminiCliConfig::default() }.threshold(),
        0.5,
        "0 is unset"
    );
}

/// `lastPromptTokenCount` is `usageMetadata.promptTokenCount`, the whole prompt, cached part
/// included. The API has no cache-write count: writes a provider reports apart are prompt
/// tokens all the same.
#[test]
fn the_prompt_size_counts_cache_writes() {
    let session = |usage: Usage| {
        let mut answer = reply("ok", 0);
        answer.usage = Some(usage);
        Harness::new([system(), Message::user("hi"), answer, Message::user("go on")], profile("gemini-2.5-pro", 1000))
    };
    let mut written = session(Usage { input: 300, output: 0, cache_read: 100, cache_write: 400 });
    let history = History::from_view(&written.view(&gemini()), true, true);
    assert_eq!(prompt_tokens(&written.log, &written.view(&gemini()), &history), 800);
    assert_ne!(written.decide(&gemini(), Moment::BeforeRequest), Decision::Skip);
    let mut read = session(Usage { input: 300, output: 0, cache_read: 100, ..Default::default() });
    assert_eq!(read.decide(&gemini(), Moment::BeforeRequest), Decision::Skip, "400 of the 500 threshold");
}
