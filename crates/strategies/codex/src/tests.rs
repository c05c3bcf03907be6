//! Tests: one per section (j) case of the spec (`case_NN_…`), the worked example of section
//! (i) across two compactions, and the failure paths of section (g).

use std::collections::VecDeque;
use std::sync::Mutex;

use compactbench_core::{
    Checkpoint, Cx, Decision, Error, ErrorKind, Log, Message, Moment, Origin, Part, Role, Shape, StopReason, Strategy,
    Summarizer, Summary, SummaryContext, SummaryRequest, Usage, View, VirtualStore,
};
use compactbench_testkit::{json, model, FakeMode, FakeSummarizer, Harness};

use crate::layout::{anchor, Details, Injection, Path, Slot};
use crate::prompt::{NO_SUMMARY, SUMMARIZATION_PROMPT, SUMMARY_PREFIX};
use crate::truncate::truncate_tokens;
use crate::trigger::auto_compact_limit;
use crate::{variants, CodexConfig, CodexStrategy};

// ---------------------------------------------------------------------------------------------
// Fixtures.

/// Defaults but for the cited commit's pre-turn layout: the initial context is left for the
/// next turn to re-inject (most cases below document that commit's layouts).
fn cited() -> CodexConfig {
    CodexConfig { pre_turn_context_before_last_user: false, ..CodexConfig::default() }
}

fn local() -> CodexStrategy {
    CodexStrategy::new(cited())
}

/// Codex 0.171.0 as the black-box check saw it.
fn current() -> CodexStrategy {
    CodexStrategy::new(CodexConfig::default())
}

fn remote() -> CodexStrategy {
    CodexStrategy::new(CodexConfig { remote: Some(true), ..cited() })
}

fn base() -> Message {
    Message::system("You are Codex, a coding agent.")
}

/// Developer message of the initial context (permissions).
fn dev() -> Message {
    Message::system("<permissions instructions>sandbox: workspace-write</permissions instructions>")
}

/// AGENTS.md instructions, a contextual user message.
fn agents() -> Message {
    Message::user("# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nrun cargo fmt\n</INSTRUCTIONS>")
}

/// Environment context, a contextual user message.
fn env() -> Message {
    Message::user("<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>")
}

/// The session prelude: base instructions, then developer message, AGENTS.md, environment.
fn prelude() -> Vec<Message> {
    vec![base(), dev(), agents(), env()]
}

/// `message` as a reply the runner received for a request of `input` tokens.
fn replied(mut message: Message, input: u64, output: u64) -> Message {
    message.usage = Some(Usage { input, output, ..Default::default() });
    message
}

fn call(id: &str) -> Message {
    Message::tool_call(id, "shell", json!({"cmd": "cargo test"}))
}

fn output(id: &str, text: &str) -> Message {
    Message::tool_result(id, "shell", text, false)
}

/// One line per view message: origin kind, role, first word of the text.
fn shown(view: &View) -> Vec<String> {
    view.messages
        .iter()
        .map(|vm| {
            let kind = match vm.origin {
                Origin::Entry(_) => "entry",
                Origin::Replaced(..) => "replaced",
                Origin::Summary(_) => "summary",
                Origin::Injected(_) => "injected",
            };
            let text = vm.message.searchable_text();
            format!("{kind} {}: {}", vm.message.role.as_str(), text.split_whitespace().next().unwrap_or(""))
        })
        .collect()
}

fn details(log: &Log) -> Details {
    anchor(log).expect("a codex checkpoint").details
}

fn summary_text(view: &View) -> String {
    view.messages.iter().find(|vm| matches!(vm.origin, Origin::Summary(_))).expect("summary in view").message.text()
}

fn compact(h: &mut Harness, s: &CodexStrategy, at: Moment) -> Checkpoint {
    let mut cps = h.compact(s, at).expect("compaction succeeds");
    assert_eq!(cps.len(), 1);
    cps.remove(0)
}

/// A summarizer that answers from a script, records requests, and repeats its last answer.
struct Scripted {
    answers: Mutex<VecDeque<Result<Summary, Error>>>,
    requests: Mutex<Vec<SummaryRequest>>,
}

impl Scripted {
    fn new(answers: Vec<Result<Summary, Error>>) -> Scripted {
        Scripted { answers: Mutex::new(answers.into()), requests: Mutex::new(Vec::new()) }
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
        let mut answers = self.answers.lock().unwrap();
        if answers.len() > 1 {
            answers.pop_front().unwrap()
        } else {
            answers.front().cloned().expect("a scripted answer")
        }
    }
}

fn ok(text: &str, stop: StopReason) -> Result<Summary, Error> {
    Ok(Summary { text: text.into(), input_tokens: 10, output_tokens: 5, stop })
}

/// Runs `compact` against a custom summarizer; returns the result and the log after it.
fn compact_with(
    s: &CodexStrategy,
    messages: Vec<Message>,
    window: u64,
    summarizer: &dyn Summarizer,
    at: Moment,
) -> (Result<Vec<Checkpoint>, Error>, Log) {
    let mut log = Log::from_messages(messages);
    let model = model(window, 8_000);
    let mut store = VirtualStore::new();
    let view = s.project(&log);
    let mut cx = Cx::new(&model, summarizer, &mut store, compactbench_testkit::tokenizer());
    let result = s.compact(&log, &view, at, &mut cx);
    if let Ok(cps) = &result {
        for cp in cps {
            log.push_checkpoint(cp.clone());
        }
    }
    (result, log)
}

// ---------------------------------------------------------------------------------------------
// Section (j).

#[test]
fn case_01_limit_from_window_and_config() {
    assert_eq!(auto_compact_limit(272_000, None, true), 244_800);
    assert_eq!(auto_compact_limit(272_000, Some(200_000), true), 200_000);
    assert_eq!(auto_compact_limit(272_000, Some(300_000), true), 244_800, "current code caps at 90%");
    assert_eq!(auto_compact_limit(272_000, Some(300_000), false), 300_000, "Nov-2025 code does not cap");
    assert_eq!(auto_compact_limit(0, None, true), i64::MAX as u64, "no window, no setting: never");

    // Through the strategy: the configured 200,000 is the threshold, inclusive.
    let s = CodexStrategy::new(CodexConfig { model_auto_compact_token_limit: Some(200_000), ..cited() });
    let at = |total: u64| {
        let mut h = Harness::new(
            [base(), Message::user("u1"), replied(Message::assistant("a1"), total - 1_000, 1_000)],
            model(272_000, 8_000),
        );
        h.decide(&s, Moment::TurnEnd)
    };
    assert_eq!(at(199_999), Decision::Skip);
    assert_eq!(at(200_000), Decision::compact("pre-turn"));

    // No window and no setting: even a huge count never compacts.
    let mut h = Harness::new([base(), Message::user("u1"), replied(Message::assistant("a1"), 9_000_000, 1)], model(0, 8_000));
    assert_eq!(h.decide(&local(), Moment::TurnEnd), Decision::Skip);
}

#[test]
fn case_02_reported_total_plus_bytes_of_items_since_last_model_output() {
    // The item after the last model-generated item is one function_call_output. 0.171.0 counts
    // its model-visible bytes (the output text); the cited commit counts its serialized JSON,
    // this literal with an empty output plus the text.
    let overhead = r#"{"type":"function_call_output","call_id":"c1","output":""}"#.len();
    let session = |text_bytes: usize| {
        Harness::new(
            [
                base(),
                Message::user("fix the failing test"),
                replied(call("c1"), 239_000, 1_000),
                output("c1", &"x".repeat(text_bytes)),
            ],
            model(272_000, 8_000),
        )
    };
    // 240,000 + ceil(19,196 / 4) = 244,799 < 244,800.
    assert_eq!(session(19_196).decide(&local(), Moment::TurnEnd), Decision::Skip);
    // 240,000 + ceil(19,197 / 4) = 244,800 >= 244,800: pre-turn compaction, no injection.
    let mut h = session(19_197);
    assert_eq!(h.decide(&local(), Moment::TurnEnd), Decision::compact("pre-turn"));
    let cp = compact(&mut h, &local(), Moment::TurnEnd);
    assert_eq!(cp.tokens_before, 244_800);
    assert_eq!(details(&h.log).injection, Injection::DoNotInject);

    // Counting the serialized JSON, the same text is `overhead` bytes more.
    let json = CodexStrategy::new(CodexConfig { content_estimate: false, ..cited() });
    assert_eq!(session(19_196 - overhead).decide(&json, Moment::TurnEnd), Decision::Skip);
    assert_eq!(session(19_197 - overhead).decide(&json, Moment::TurnEnd), Decision::compact("pre-turn"));

    // The Responses API has no cache-write count: writes a provider reports apart are in its
    // `input_tokens`, so they count toward the limit.
    let harness = |cache_write| {
        let mut written = call("c1");
        written.usage = Some(Usage { input: 139_000, output: 1_000, cache_read: 100_000, cache_write });
        Harness::new([base(), Message::user("fix the failing test"), written, output("c1", &"x".repeat(19_196))], model(272_000, 8_000))
    };
    assert_eq!(harness(0).decide(&local(), Moment::TurnEnd), Decision::Skip, "240,000 reported");
    assert_ne!(harness(50_000).decide(&local(), Moment::TurnEnd), Decision::Skip, "290,000 reported, writes included");
}

#[test]
fn case_03_mid_turn_only_when_a_follow_up_is_needed() {
    // Window 10,000 -> limit 9,000. The last sample called a tool: mid-turn compaction.
    let mut messages = prelude();
    messages.extend([Message::user("u1 run the tests"), replied(call("c1"), 8_900, 100), output("c1", "ok")]);
    let mut h = Harness::new(messages, model(10_000, 1_000));
    let s = local();
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("mid-turn"));
    compact(&mut h, &s, Moment::BeforeRequest);
    assert_eq!(details(&h.log).injection, Injection::BeforeLastUserMessage);
    // The turn continues on the new history: the next sample is appended after it.
    let view = h.view(&s);
    assert!(summary_text(&view).starts_with(SUMMARY_PREFIX));
    assert_eq!(view.messages.last().unwrap().origin, Origin::Summary(anchor(&h.log).unwrap().id));
    h.push(replied(Message::assistant("done"), 3_000, 50));
    assert_eq!(h.view(&s).messages.last().unwrap().message.text(), "done");

    // Over the limit after a final answer: nothing in this turn, the next pre-turn check compacts.
    let mut h = Harness::new(
        [base(), Message::user("u1"), replied(Message::assistant("final answer"), 9_500, 100)],
        model(10_000, 1_000),
    );
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    assert_eq!(h.decide(&s, Moment::Overflow), Decision::Skip);
    assert_eq!(h.decide(&s, Moment::TurnEnd), Decision::compact("pre-turn"));
    // The first request of the next turn is not checked either.
    h.push(Message::user("u2"));
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn case_04_user_message_collection() {
    let s0 = format!("{SUMMARY_PREFIX}\nS0 earlier summary");
    let mut messages = prelude();
    messages.extend([
        Message::user("U1 port the parser"),
        Message::new(Role::Assistant, vec![Part::Reasoning { text: "R1 think".into() }]),
        Message::assistant("A1 looking"),
        call("c1"),
        output("c1", "O1 output"),
        Message::user(s0.clone()),
        Message::user("U2 now the docs"),
        replied(Message::assistant("A2 done"), 500, 20),
    ]);
    let mut h = Harness::new(messages, model(100_000, 8_000));
    let s = local();
    compact(&mut h, &s, Moment::TurnEnd);

    let d = details(&h.log);
    let kept = &d.layout[..d.reinjected_from.unwrap()];
    assert_eq!(kept, [Slot::Entry(4), Slot::Entry(10), Slot::Summary], "only U1 and U2 are carried");
    assert_eq!(
        shown(&h.view(&s)),
        [
            "entry system: You",
            "entry user: U1",
            "entry user: U2",
            "summary user: An",
            "injected system: <permissions",
            "injected user: #",
            "injected user: <environment_context>",
        ]
    );
    // Everything else only reached the summarizer, as Responses items.
    let request = &h.summarizer.requests()[0];
    for needle in ["R1 think", "A1 looking", r#""type":"function_call""#, "O1 output", "S0 earlier summary", "A2 done"] {
        assert!(request.transcript.contains(needle), "{needle} not sent");
    }
    assert_eq!(request.system, "You are Codex, a coding agent.");
    assert_eq!(request.instructions, SUMMARIZATION_PROMPT);
    assert_eq!(request.max_output_tokens, 8_000, "no compaction-specific cap");
}

#[test]
fn case_05_user_messages_capped_at_20000_tokens() {
    // Sizes by ceil(bytes / 4): U0 3,000, U1 8,000, U2 10,000, U3 5,000.
    let u1 = format!("{}{}", "a".repeat(16_000), "b".repeat(16_000));
    let mut h = Harness::new(
        [
            base(),
            Message::user("0".repeat(12_000)),
            Message::assistant("a0"),
            Message::user(u1.clone()),
            Message::assistant("a1"),
            Message::user("2".repeat(40_000)),
            Message::assistant("a2"),
            Message::user("3".repeat(20_000)),
            replied(Message::assistant("a3"), 1_000, 10),
        ],
        model(1_000_000, 8_000),
    );
    let s = local();
    compact(&mut h, &s, Moment::TurnEnd);
    let d = details(&h.log);
    assert_eq!(d.layout[..4], [Slot::Replaced(3), Slot::Entry(5), Slot::Entry(7), Slot::Summary]);
    let view = h.view(&s);
    // U1 kept as 5,000 tokens of head and tail (10,000 bytes each) around the marker; U0 dropped.
    let u1_cut = &view.messages[1].message.text();
    assert_eq!(*u1_cut, format!("{}…3000 tokens truncated…{}", "a".repeat(10_000), "b".repeat(10_000)));
    assert!(!view.iter().any(|m| m.text().starts_with('0')));

    // One 30,000-token message alone is cut to 20,000.
    let mut h = Harness::new(
        [base(), Message::user("z".repeat(120_000)), replied(Message::assistant("a"), 10, 1)],
        model(1_000_000, 8_000),
    );
    compact(&mut h, &s, Moment::TurnEnd);
    let kept = h.view(&s).messages[1].message.text();
    assert_eq!(kept, format!("{}…10000 tokens truncated…{}", "z".repeat(40_000), "z".repeat(40_000)));
}

fn three_turns_mid_turn() -> Vec<Message> {
    let mut messages = prelude();
    messages.extend([
        Message::user("U1"),
        Message::assistant("A1"),
        Message::user("U2"),
        Message::assistant("A2"),
        Message::user("U3"),
        replied(call("c3"), 5_000, 10),
        output("c3", "O3"),
    ]);
    messages
}

#[test]
fn pre_turn_context_goes_before_the_last_user_message_in_0_171() {
    // 0.171.0: [base, U1, context, U2, summary], then the new prompt; the cited commit leaves
    // the context to the next turn (case 06).
    let mut h = Harness::new(three_turns_mid_turn(), model(100_000, 8_000));
    compact(&mut h, &current(), Moment::TurnEnd);
    assert_eq!(details(&h.log).injection, Injection::BeforeLastUserMessage);
    assert_eq!(details(&h.log).reinjected_from, None);
    assert_eq!(shown(&h.view(&current())), CONTEXT_BEFORE_LAST_USER_MESSAGE);
}

/// A mid-turn compaction of three turns: the initial context just before the last real user
/// message, the summary last.
const CONTEXT_BEFORE_LAST_USER_MESSAGE: [&str; 8] = [
    "entry system: You",
    "entry user: U1",
    "entry user: U2",
    "injected system: <permissions",
    "injected user: #",
    "injected user: <environment_context>",
    "entry user: U3",
    "summary user: An",
];

#[test]
fn case_06_initial_context_by_injection_mode() {
    let s = local();
    // Mid-turn: context just before the last real user message, summary last.
    let mut h = Harness::new(three_turns_mid_turn(), model(100_000, 8_000));
    compact(&mut h, &s, Moment::BeforeRequest);
    assert_eq!(shown(&h.view(&s)), CONTEXT_BEFORE_LAST_USER_MESSAGE);
    assert_eq!(details(&h.log).reinjected_from, None);

    // Pre-turn: no context in the replacement; the next turn re-injects it before its message.
    let mut h = Harness::new(three_turns_mid_turn(), model(100_000, 8_000));
    compact(&mut h, &s, Moment::TurnEnd);
    let d = details(&h.log);
    assert_eq!(d.layout[..d.reinjected_from.unwrap()], [Slot::Entry(4), Slot::Entry(6), Slot::Entry(8), Slot::Summary]);
    h.push(Message::user("U4"));
    assert_eq!(
        shown(&h.view(&s))[1..],
        [
            "entry user: U1",
            "entry user: U2",
            "entry user: U3",
            "summary user: An",
            "injected system: <permissions",
            "injected user: #",
            "injected user: <environment_context>",
            "entry user: U4",
        ]
    );
}

#[test]
fn case_07_no_real_user_message_mid_turn() {
    let mut messages = prelude();
    messages.extend([replied(call("c1"), 5_000, 10), output("c1", "O1")]);
    let mut h = Harness::new(messages, model(100_000, 8_000));
    let s = local();
    compact(&mut h, &s, Moment::BeforeRequest);
    assert_eq!(
        shown(&h.view(&s))[1..],
        [
            "injected system: <permissions",
            "injected user: #",
            "injected user: <environment_context>",
            "summary user: An",
        ]
    );
}

#[test]
fn case_08_empty_summary_gets_the_placeholder() {
    let mut h = Harness::new([base(), Message::user("u1"), replied(Message::assistant("a1"), 10, 1)], model(100_000, 8_000));
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed(String::new()));
    let cp = compact(&mut h, &local(), Moment::TurnEnd);
    let summary = cp.summary.expect("summary message");
    assert_eq!(summary.role, Role::User);
    assert_eq!(summary.text(), format!("{SUMMARY_PREFIX}\n{NO_SUMMARY}"));
    assert_eq!(NO_SUMMARY, "(no summary available)");
}

#[test]
fn case_09_trailing_model_switch_skips_the_summarizer_and_follows_the_summary() {
    let switch = Message::system("<model_switch>\nYou are now a smaller model.");
    let mut messages = prelude();
    messages.extend([
        Message::user("U1"),
        Message::assistant("A1"),
        Message::user("U2"),
        replied(Message::assistant("A2"), 100, 10),
        switch.clone(),
    ]);
    let mut h = Harness::new(messages, model(100_000, 8_000));
    let s = local();
    compact(&mut h, &s, Moment::TurnEnd);
    assert!(!h.summarizer.requests()[0].transcript.contains("model_switch"));
    let d = details(&h.log);
    assert_eq!(d.layout[..d.reinjected_from.unwrap()], [Slot::Entry(4), Slot::Entry(6), Slot::Summary, Slot::Entry(8)]);
    let view = h.view(&s);
    let at = view.messages.iter().position(|vm| matches!(vm.origin, Origin::Summary(_))).unwrap();
    assert_eq!(view.messages[at + 1].message, switch);

    // A model switch before the last real user message is history like any developer item:
    // summarized, not carried.
    let mut messages = prelude();
    messages.extend([switch.clone(), Message::user("U1"), replied(Message::assistant("A1"), 100, 10)]);
    let mut h = Harness::new(messages, model(100_000, 8_000));
    compact(&mut h, &s, Moment::TurnEnd);
    assert!(h.summarizer.requests()[0].transcript.contains("model_switch"));
    assert!(!h.view(&s).iter().any(|m| *m == switch));
}

/// Eleven history items (the prompt makes twelve); the oldest, U1, is about 10,000 tokens.
fn twelve_items() -> Vec<Message> {
    vec![
        base(),
        Message::user(format!("U1 {}", "p".repeat(40_000))),
        Message::assistant("A1"),
        Message::user("U2"),
        call("c2"),
        output("c2", "O2"),
        Message::assistant("A3"),
        Message::user("U3"),
        Message::new(Role::Assistant, vec![Part::Reasoning { text: "R4".into() }, Part::text("A4")]),
        Message::user("U4"),
        replied(Message::assistant("A5"), 100, 10),
    ]
}

#[test]
fn case_10_summarizer_overflow_drops_the_oldest_item_and_retries() {
    let s = local();
    // A provider with a 5,000-token window rejects the request (~10,000 tokens); without the
    // oldest item it fits.
    let mut h = Harness::new(twelve_items(), model(5_000, 1_000));
    h.summarizer = FakeSummarizer::new(FakeMode::Window(5_000));
    let cp = compact(&mut h, &s, Moment::TurnEnd);
    let requests = h.summarizer.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].transcript.lines().count(), 11);
    assert_eq!(requests[1].transcript.lines().count(), 10, "11 items minus the oldest");
    assert!(!requests[1].transcript.contains("U1 "));
    assert!(requests[1].transcript.starts_with(r#"{"type":"message","role":"assistant""#));
    assert_eq!((cp.summarizer.calls, cp.summarizer.failures), (2, 1));
    assert_eq!(details(&h.log).trimmed_items, 1);
    // User messages are still collected from the whole history.
    assert!(h.view(&s).iter().any(|m| m.text().starts_with("U1 ")));

    // A real provider error naming the context window takes the same path.
    let scripted = Scripted::new(vec![
        Err(Error::new(ErrorKind::Transport, "400: context_length_exceeded")),
        ok("S", StopReason::Complete),
    ]);
    let (result, log) = compact_with(&s, twelve_items(), 1_000_000, &scripted, Moment::TurnEnd);
    assert!(result.is_ok());
    let requests = scripted.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].transcript.lines().count(), 11);
    assert_eq!(requests[1].transcript.lines().count(), 10);
    assert_eq!(details(&log).trimmed_items, 1);

    // Nothing left to trim but the prompt: the compaction fails and the log is unchanged.
    let mut messages = twelve_items();
    messages[0] = Message::system("b".repeat(40_000));
    let mut h = Harness::new(messages, model(5_000, 1_000));
    h.summarizer = FakeSummarizer::new(FakeMode::Window(5_000));
    let before = h.log.clone();
    let err = h.compact(&s, Moment::TurnEnd).unwrap_err();
    assert!(err.message.contains("context window exceeded while compacting, nothing left to trim"), "{err}");
    let sizes: Vec<usize> = h.summarizer.requests().iter().map(|r| r.transcript.lines().count()).collect();
    assert_eq!(sizes, [11, 10, 9, 8, 6, 5, 4, 3, 2, 1, 0], "oldest first, a call with its output, then the prompt alone");
    assert_eq!(h.log, before);
}

/// Codex sends the compaction request whatever its own estimate says: a request its bytes / 4
/// puts over the window, which the provider accepts, is summarized whole.
#[test]
fn only_the_provider_rejects_the_compaction_request() {
    let mut h = Harness::new(twelve_items(), model(5_000, 1_000));
    let cp = compact(&mut h, &local(), Moment::TurnEnd);
    let requests = h.summarizer.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].transcript.lines().count(), 11, "every item, the oldest one too");
    assert_eq!((cp.summarizer.calls, cp.summarizer.failures), (1, 0));
    assert_eq!(details(&h.log).trimmed_items, 0);
}

#[test]
fn case_11_remote_result_filter_and_placement() {
    use crate::compact::keep_remote_item;
    // The remote reply of the spec: [U1, U2, A, developer X, reasoning R, call F, output O, C].
    let reply = [
        (Message::user("U1"), false),
        (Message::user("U2"), false),
        (Message::assistant("A"), false),
        (Message::system("X"), false),
        (Message::new(Role::Assistant, vec![Part::Reasoning { text: "R".into() }]), false),
        (call("f"), false),
        (output("f", "O"), false),
        (Message::assistant("C"), true),
        (agents(), false),
    ];
    let kept: Vec<String> =
        reply.iter().filter_map(|(m, c)| keep_remote_item(m, *c)).map(|m| m.searchable_text()).collect();
    assert_eq!(kept, ["U1", "U2", "A", "C"]);

    // End to end, mid-turn: context before the last real user message, compaction item last.
    let s = remote();
    let mut h = Harness::new(three_turns_mid_turn(), model(100_000, 8_000));
    compact(&mut h, &s, Moment::BeforeRequest);
    assert_eq!(details(&h.log).path, Path::Remote);
    assert_eq!(
        shown(&h.view(&s))[1..],
        [
            "entry user: U1",
            "entry user: U2",
            "injected system: <permissions",
            "injected user: #",
            "injected user: <environment_context>",
            "entry user: U3",
            "summary assistant: SUMMARY",
        ]
    );

    // Pre-turn with a trailing model switch: it follows the compaction item; context comes next turn.
    let switch = Message::system("<model_switch>\nsmaller model");
    let mut messages = prelude();
    messages.extend([Message::user("U1"), replied(Message::assistant("A1"), 100, 10), switch.clone()]);
    let mut h = Harness::new(messages, model(100_000, 8_000));
    compact(&mut h, &s, Moment::TurnEnd);
    let d = details(&h.log);
    assert_eq!(d.layout[..d.reinjected_from.unwrap()], [Slot::Entry(4), Slot::Summary, Slot::Entry(6)]);

    // `compact_prompt` only reaches the local path.
    let custom = |remote| CodexConfig { compact_prompt: Some("MARKER-7".into()), remote: Some(remote), ..cited() };
    for (is_remote, expect) in [(true, false), (false, true)] {
        let mut h = Harness::new(three_turns_mid_turn(), model(100_000, 8_000));
        compact(&mut h, &CodexStrategy::new(custom(is_remote)), Moment::TurnEnd);
        assert_eq!(h.summarizer.requests()[0].instructions.contains("MARKER-7"), expect);
    }
}

#[test]
fn case_12_routing_by_provider() {
    let s = CodexStrategy::new(CodexConfig { remote: None, ..cited() });
    for (shape, purpose) in [
        (Shape::OpenaiResponses, "remote-compact"),
        (Shape::OpenaiChat, "compact"),
        (Shape::Anthropic, "compact"),
        (Shape::Gemini, "compact"),
    ] {
        let mut m = model(100_000, 8_000);
        m.provider = shape;
        let mut h = Harness::new(three_turns_mid_turn(), m);
        compact(&mut h, &s, Moment::TurnEnd);
        assert_eq!(h.summarizer.requests()[0].purpose, purpose, "{shape:?}");
    }
    let ids: Vec<String> = variants().iter().map(|v| v.info().id.clone()).collect();
    assert_eq!(ids, ["codex", "codex/remote"]);
}

// ---------------------------------------------------------------------------------------------
// Section (i) and (f): two compactions, summary of summary, accumulated user messages.

#[test]
fn worked_example_two_compactions() {
    // U1 8,000, U2 10,000, U3 5,000, later U4 2,000 (by ceil(bytes / 4)).
    let u1 = format!("{}{}", "a".repeat(16_000), "b".repeat(16_000));
    let mut messages = prelude();
    messages.extend([
        Message::user(u1),
        Message::assistant("A1 parser ported"),
        Message::user("2".repeat(40_000)),
        Message::assistant("A2 spec read"),
        Message::user("3".repeat(20_000)),
        replied(call("c1"), 238_000, 100),
        output("c1", &"o".repeat(36_000)),
    ]);
    let mut h = Harness::new(messages, model(272_000, 8_000));
    let s = local();

    // Compaction 1, mid-turn: 238,100 + ~9,000 >= 244,800 with a follow-up pending.
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("mid-turn"));
    compact(&mut h, &s, Moment::BeforeRequest);
    let view = h.view(&s);
    assert_eq!(
        view.messages.iter().map(|vm| vm.message.text().chars().take(3).collect::<String>()).collect::<Vec<_>>(),
        ["You", "aaa", "222", "<pe", "# A", "<en", "333", "An "]
    );
    assert!(view.messages[1].message.text().contains("…3000 tokens truncated…"));
    let s1 = summary_text(&view);
    // Until the model answers again, the count is Codex's recomputed estimate.
    assert_eq!(crate::trigger::total_tokens(&view, anchor(&h.log).as_ref(), true), details(&h.log).tokens_after);

    // The turn goes on, then the next turn with U4; then a pre-turn compaction.
    h.push(replied(Message::assistant("A3 tests fixed"), 40_000, 100));
    h.push(Message::user("4".repeat(8_000)));
    h.push(replied(Message::assistant("A4 docs updated"), 50_000, 100));
    compact(&mut h, &s, Moment::TurnEnd);

    // The second summarizer saw the first summary (summary of summary)...
    let second = &h.summarizer.requests()[1];
    assert!(second.transcript.contains("SUMMARY 1 of compact"));
    assert!(second.transcript.contains(&s1.replace('\n', "\\n")));
    // ...and the carried user messages are U1″, U2, U3, U4, without the old summary.
    let view = h.view(&s);
    let heads: Vec<String> = view.messages.iter().map(|vm| vm.message.text().chars().take(3).collect()).collect();
    assert_eq!(heads, ["You", "aaa", "222", "333", "444", "An ", "<pe", "# A", "<en"]);
    let u1b = view.messages[1].message.text();
    assert!(u1b.starts_with(&"a".repeat(6_000)) && !u1b.starts_with(&"a".repeat(6_001)));
    assert!(u1b.ends_with(&"b".repeat(6_000)) && !u1b.ends_with(&"b".repeat(6_001)));
    assert!(summary_text(&view).ends_with("SUMMARY 2 of compact"));
    assert_eq!(view.iter().filter(|m| m.text().starts_with(SUMMARY_PREFIX)).count(), 1);
}

// ---------------------------------------------------------------------------------------------
// Section (g): other failures, and the truncation primitive.

#[test]
fn stream_errors_are_retried_five_times_then_fail_with_log_unchanged() {
    let mut h = Harness::new(three_turns_mid_turn(), model(100_000, 8_000));
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    let before = h.log.clone();
    let err = h.compact(&local(), Moment::BeforeRequest).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Transport);
    assert_eq!(h.summarizer.requests().len(), 6, "one attempt and five retries");
    assert_eq!(h.log, before);
}

#[test]
fn remote_failure_is_not_retried_and_leaves_the_log_unchanged() {
    let mut h = Harness::new(three_turns_mid_turn(), model(100_000, 8_000));
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Timeout));
    let before = h.log.clone();
    let err = h.compact(&remote(), Moment::TurnEnd).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(err.message.starts_with("Error running remote compact task"));
    assert_eq!(h.summarizer.requests().len(), 1);
    assert_eq!(h.log, before);
}

#[test]
fn remote_trims_trailing_tool_outputs_until_the_request_fits() {
    let mut messages = three_turns_mid_turn();
    messages.push(call("c4"));
    messages.push(output("c4", &"o".repeat(40_000)));
    let mut h = Harness::new(messages, model(5_000, 1_000));
    compact(&mut h, &remote(), Moment::BeforeRequest);
    let transcript = &h.summarizer.requests()[0].transcript;
    assert!(!transcript.contains("ooo") && !transcript.contains(r#""call_id":"c4""#), "output and its call dropped");
    assert!(transcript.contains(r#""call_id":"c3""#), "earlier pair kept: the trim stops once it fits");
    assert_eq!(details(&h.log).trimmed_items, 1);
    // The call and its output were the view's last two messages: the request holds the rest.
    assert_eq!(h.summarizer.requests()[0].context, SummaryContext::TrimmedPrefix { newest: 2 });
}

#[test]
fn a_cut_off_summary_is_used_as_it_is() {
    let scripted = Scripted::new(vec![ok("partial summ", StopReason::Length)]);
    let (result, log) = compact_with(&local(), three_turns_mid_turn(), 100_000, &scripted, Moment::TurnEnd);
    let cp = &result.unwrap()[0];
    assert_eq!(cp.summary.as_ref().unwrap().text(), format!("{SUMMARY_PREFIX}\npartial summ"));
    assert_eq!(details(&log).summary_text, "partial summ");
}

#[test]
fn truncation_matches_codex() {
    // Codex's own expectations for `truncate_text` with a token policy.
    let content = "this is an example of a long output that should be truncated";
    assert_eq!(truncate_tokens(content, 5), "this is an…10 tokens truncated… truncated");
    assert_eq!(truncate_tokens(content, 100), content);
    let emoji = "😀😀😀😀😀😀😀😀😀😀\nsecond line with text\n";
    assert_eq!(truncate_tokens(emoji, 8), "😀😀😀😀…8 tokens truncated… line with text\n");
}
