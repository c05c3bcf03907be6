//! Conformance cases of `shared/specs/deep-agents.md` section (j), plus read-back of offloaded
//! content and the estimator and serializer against values computed with langchain-core 1.8.4.

use compactbench_core::{
    Checkpoint, CheckpointKind, Decision, ErrorKind, Message, ModelProfile, Moment, Origin, Part, Role, Shape, Usage,
    View, ViewMessage, Window,
};
use compactbench_testkit::{json, model, FakeMode, FakeSummarizer, Harness};

use crate::config::{Clause, Config, ModelFacts, Settings, Size, TruncateArgs};
use crate::{count, cutoff, middleware, xml, DeepAgentsStrategy};

fn openai(window: u64, max_output: u64) -> ModelProfile {
    ModelProfile { provider: Shape::OpenaiChat, ..model(window, max_output) }
}

/// The direct constructor with `trigger` and `keep` (argument truncation disabled).
fn config(trigger: Size, keep: Size) -> Config {
    Config {
        trigger: Some(vec![trigger.into()]),
        keep: Some(keep),
        truncate: Some(TruncateArgs::with(None, Size::Messages(20))),
        ..Config::default()
    }
}

fn with(trigger: Size, keep: Size) -> DeepAgentsStrategy {
    DeepAgentsStrategy::with_config(config(trigger, keep))
}

fn h(text: &str) -> Message {
    Message::user(text)
}

fn a(text: &str) -> Message {
    Message::assistant(text)
}

fn res(id: &str, name: &str, text: &str) -> Message {
    Message::tool_result(id, name, text, false)
}

fn calls(calls: &[(&str, &str, serde_json::Value)]) -> Message {
    Message::new(
        Role::Assistant,
        calls
            .iter()
            .map(|(id, name, args)| Part::ToolCall { id: (*id).into(), name: (*name).into(), args: args.clone() })
            .collect(),
    )
}

fn with_usage(mut m: Message, input: u64, output: u64) -> Message {
    m.usage = Some(Usage { input, output, ..Default::default() });
    m
}

/// `S0`, `S1`, … alternating human and AI messages.
fn numbered(range: std::ops::Range<usize>) -> Vec<Message> {
    range.map(|i| if i % 2 == 0 { h(&format!("S{i}")) } else { a(&format!("S{i}")) }).collect()
}

fn texts(view: &View) -> Vec<String> {
    view.messages.iter().map(|vm| vm.message.searchable_text()).collect()
}

fn details(cp: &Checkpoint) -> &serde_json::Value {
    &cp.details["deep_agents"]
}

fn only<T>(mut items: Vec<T>) -> T {
    assert_eq!(items.len(), 1, "expected exactly one item");
    items.pop().unwrap()
}

/// The first `prefix…` path in `text`, up to whitespace or a closing punctuation mark.
fn path_in(text: &str, prefix: &str) -> String {
    let start = text.find(prefix).unwrap_or_else(|| panic!("no {prefix} path in {text:?}"));
    text[start..].split(|c: char| c.is_whitespace() || c == ';' || c == ']' || c == '\'').next().unwrap().to_owned()
}

fn resolved(config: &Config, window: u64) -> Settings {
    Settings::resolve(config, ModelFacts { max_input_tokens: Some(window), max_output: 0, anthropic: false })
}

#[test]
fn case_01_factory_defaults() {
    let with_profile = Settings::resolve(
        &Config::default(),
        ModelFacts { max_input_tokens: Some(120_000), max_output: 0, anthropic: false },
    );
    assert_eq!(with_profile.trigger, vec![Clause { fraction: Some(0.85), ..Clause::default() }]);
    assert_eq!(with_profile.keep, Size::Fraction(0.10));
    assert_eq!(with_profile.truncate, TruncateArgs::with(Some(Size::Fraction(0.85)), Size::Fraction(0.10)));
    assert_eq!(with_profile.truncate.max_length, 2000);
    assert_eq!(with_profile.truncate.truncation_text, "...(argument truncated)");
    assert_eq!(with_profile.fraction_tokens(0.85), Some(102_000));
    assert_eq!(with_profile.fraction_tokens(0.10), Some(12_000));

    let no_profile = Config { model_has_profile: false, ..Config::default() };
    let facts = ModelFacts::of(&openai(120_000, 0), &no_profile);
    assert_eq!(facts.max_input_tokens, None);
    let without = Settings::resolve(&no_profile, facts);
    assert_eq!(without.trigger, vec![Clause { tokens: Some(170_000), ..Clause::default() }]);
    assert_eq!(without.keep, Size::Messages(6));
    assert_eq!(without.truncate, TruncateArgs::with(Some(Size::Messages(20)), Size::Messages(20)));
    assert_eq!(without.input_budget(), None, "no profile, no input budget");

    // The default strategy uses the window as the profile: at 0.85 of it, it summarizes.
    let strategy = crate::strategy();
    let big = "x".repeat(4 * 1_200);
    let mut harness = Harness::new([h(&big), a(&big), h(&big)], openai(4_000, 0));
    assert_eq!(harness.decide(strategy.as_ref(), Moment::BeforeRequest), Decision::compact("threshold"));
    let mut harness = Harness::new([h(&big), a(&big)], openai(4_000, 0));
    assert_eq!(harness.decide(strategy.as_ref(), Moment::BeforeRequest), Decision::Skip);
    assert_eq!(harness.decide(strategy.as_ref(), Moment::TurnEnd), Decision::Skip, "nothing happens at turn end");
}

#[test]
fn case_02_tool_pair_safe_point() {
    let messages = [
        h("q"),
        calls(&[("call1", "search", json!({}))]),
        res("call1", "search", "r1"),
        res("call2", "search", "orphan"),
        h("next"),
    ];
    let refs: Vec<&Message> = messages.iter().collect();
    let len = refs.len();
    let points: Vec<usize> = [0, 1, 2, 3, 4, 5, len + 5].iter().map(|&c| cutoff::safe_point(&refs, c)).collect();
    assert_eq!(points, vec![0, 1, 1, 4, 4, 5, len + 5]);

    // Through the strategy: keep one message, which is a tool result, so its call is kept too.
    let strategy = with(Size::Messages(3), Size::Messages(1));
    let mut harness = Harness::new(
        [h("read it"), calls(&[("c1", "read_file", json!({"file_path": "a.py"}))]), res("c1", "read_file", "body")],
        openai(100_000, 0),
    );
    let cp = only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    assert_eq!(cp.window, Window::From(compactbench_core::EntryId(1)));
    let view = harness.view(&strategy);
    assert_eq!(view.messages[0].origin, Origin::Summary(compactbench_core::EntryId(3)));
    assert_eq!(texts(&view)[1..], ["read_file {\"file_path\":\"a.py\"}".to_owned(), "body".to_owned()]);
}

#[test]
fn case_03_chained_cutoff_arithmetic() {
    let strategy = with(Size::Messages(5), Size::Messages(2));
    let mut harness = Harness::new(numbered(0..8), openai(1_000_000, 0));

    let cp1 = only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    assert_eq!(details(&cp1)["cutoff_index"], 6);
    let view = harness.view(&strategy);
    assert_eq!(texts(&view)[1..], ["S6", "S7"]);
    assert_eq!(
        (view.messages[0].message.role, matches!(view.messages[0].origin, Origin::Summary(_))),
        (Role::User, true)
    );
    let path = details(&cp1)["file_path"].as_str().unwrap().to_owned();
    assert!(path.starts_with("/conversation_history/session_") && path.ends_with(".md"));
    let archive = harness.store.read(&path).unwrap().to_owned();
    assert!(archive.contains("<message type=\"ai\">S5</message>") && !archive.contains("S6"));

    for m in numbered(8..14) {
        harness.push(m);
    }
    let cp2 = only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    assert_eq!(details(&cp2)["cutoff_index"], 6 + 7 - 1);
    assert_eq!(texts(&harness.view(&strategy))[1..], ["S12", "S13"]);
    // The previous summary was summarized again, first, as a human message.
    let sent = &harness.summarizer.requests()[1].transcript;
    assert!(sent.contains("<message type=\"human\">This conversation is already under way"));
    assert!(sent.find("SUMMARY 1 of history").unwrap() < sent.find("S6").unwrap());
    let archive = harness.store.read(&path).unwrap().to_owned();
    assert_eq!(archive.matches("## Summarized at ").count(), 2, "one section appended per summary, same file");
    let second = archive.split("## Summarized at ").nth(2).unwrap();
    assert!(
        second.contains(">S6<")
            && second.contains(">S11<")
            && !second.contains(">S12<")
            && !second.contains("SUMMARY 1")
    );

    for m in numbered(14..20) {
        harness.push(m);
    }
    let cp3 = only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    assert_eq!(details(&cp3)["cutoff_index"], 18);
    assert_eq!(texts(&harness.view(&strategy))[1..], ["S18", "S19"]);
    assert_eq!(details(&cp3)["file_path"], path.as_str());
}

#[test]
fn case_04_cut_zero_means_no_compaction() {
    let strategy = with(Size::Messages(3), Size::Messages(10));
    let mut harness = Harness::new(numbered(0..3), openai(1_000_000, 0));
    assert_eq!(harness.decide(&strategy, Moment::BeforeRequest), Decision::Skip);
    assert!(harness.compact(&strategy, Moment::BeforeRequest).unwrap().is_empty());
    assert!(harness.store.is_empty());
    assert!(harness.summarizer.requests().is_empty());
}

#[test]
fn case_05_argument_truncation_is_request_only() {
    let truncate = TruncateArgs { max_length: 100, ..TruncateArgs::with(Some(Size::Messages(5)), Size::Messages(2)) };
    let strategy = DeepAgentsStrategy::with_config(Config {
        truncate: Some(truncate),
        ..config(Size::Messages(100), Size::Messages(20))
    });
    let big = "x".repeat(200);
    let log = |tool: &str| {
        vec![
            calls(&[("tc1", tool, json!({"file_path": "/a.txt", "content": big}))]),
            res("tc1", tool, "ok"),
            h("h1"),
            a("a1"),
            h("h2"),
            a("a2"),
        ]
    };
    let mut harness = Harness::new(log("write_file"), openai(1_000_000, 0));
    assert_eq!(harness.decide(&strategy, Moment::BeforeRequest), Decision::compact("truncate-args"));
    let cp = only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    assert!(cp.summary.is_none() && cp.offloads.is_empty() && cp.replacements.is_empty());
    assert_eq!(cp.kind, CheckpointKind::Prune);
    let view = harness.view(&strategy);
    let Part::ToolCall { args, .. } = &view.messages[0].message.parts[0] else { panic!() };
    assert_eq!(args["content"], format!("{}...(argument truncated)", "x".repeat(20)));
    assert_eq!(args["file_path"], "/a.txt", "short arguments stay");
    let logged = harness.log.message(compactbench_core::EntryId(0)).unwrap();
    assert_eq!(
        logged.parts[0],
        Part::ToolCall {
            id: "tc1".into(),
            name: "write_file".into(),
            args: json!({"file_path": "/a.txt", "content": big})
        }
    );
    assert!(harness.summarizer.requests().is_empty() && harness.store.is_empty());
    // Recomputed on later requests without new checkpoints.
    harness.push(h("h3"));
    assert_eq!(harness.decide(&strategy, Moment::BeforeRequest), Decision::Skip);
    let Part::ToolCall { args, .. } = &harness.view(&strategy).messages[0].message.parts[0] else { panic!() };
    assert!(args["content"].as_str().unwrap().ends_with("...(argument truncated)"));

    // Other tools' arguments are never touched.
    let mut harness = Harness::new(log("execute"), openai(1_000_000, 0));
    assert_eq!(harness.decide(&strategy, Moment::BeforeRequest), Decision::Skip);
    assert!(harness.step(&strategy, Moment::BeforeRequest).unwrap().is_empty());
    let Part::ToolCall { args, .. } = &harness.view(&strategy).messages[0].message.parts[0] else { panic!() };
    assert_eq!(args["content"], big.as_str());
}

#[test]
fn case_06_overflow_falls_back_to_summarization_once() {
    let strategy = with(Size::Messages(100), Size::Messages(2));
    let padded: Vec<Message> = numbered(0..8)
        .into_iter()
        .map(|m| Message::new(m.role, vec![Part::text(format!("{} {}", m.text(), "p".repeat(400)))]))
        .collect();
    let mut harness = Harness::new(padded, openai(1_000_000, 0));
    assert_eq!(harness.decide(&strategy, Moment::BeforeRequest), Decision::Skip);
    assert_eq!(harness.decide(&strategy, Moment::Overflow), Decision::compact("overflow"));
    let cp = only(harness.compact(&strategy, Moment::Overflow).unwrap());
    assert_eq!(cp.kind, CheckpointKind::Summary);
    assert_eq!(details(&cp)["overflow"], true);
    assert_eq!(harness.summarizer.requests().len(), 1);
    assert_eq!(harness.store.len(), 1, "one history write");
    let shown = texts(&harness.view(&strategy));
    assert!(shown.len() == 3 && shown[1].starts_with("S6 ") && shown[2].starts_with("S7 "));
    // The retried request overflows too: no further attempt.
    let err = harness.compact(&strategy, Moment::Overflow).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Other);
    assert_eq!(harness.summarizer.requests().len(), 1);

    // The retry must be strictly smaller than the rejected request: a summary longer than the
    // few words it replaces fails the recovery, and nothing is recorded.
    let mut harness = Harness::new(numbered(0..8), openai(1_000_000, 0));
    let err = harness.compact(&strategy, Moment::Overflow).unwrap_err();
    assert!(err.message.starts_with("Model input still does not fit after recovery"));
    assert_eq!(harness.log.checkpoints().count(), 0);
}

/// `[H, A[tc_0..tc_3 tool], 4 × T(25,000 chars)]` on a 200,000-token profile.
fn parallel_batch(tool: &str) -> Vec<Message> {
    let mut messages = vec![h("inspect the four inputs")];
    let args = |i: usize| {
        if tool == "read_file" {
            json!({"file_path": format!("/big_{i}.txt")})
        } else {
            json!({"path": format!("/d{i}")})
        }
    };
    let batch: Vec<(String, serde_json::Value)> = (0..4).map(|i| (format!("tc_{i}"), args(i))).collect();
    messages.push(calls(&batch.iter().map(|(id, args)| (id.as_str(), tool, args.clone())).collect::<Vec<_>>()));
    for i in 0..4 {
        let body: String = (0..500).map(|l| format!("{i}:{l:04}:{}\n", "z".repeat(42))).collect();
        assert_eq!(body.len(), 25_000);
        messages.push(res(&format!("tc_{i}"), tool, &body));
    }
    messages
}

#[test]
fn case_07_overflow_tail_clip_generic_tool() {
    let strategy = crate::strategy();
    let mut harness = Harness::new(parallel_batch("ls"), model(200_000, 0));
    assert_eq!(
        harness.decide(strategy.as_ref(), Moment::BeforeRequest),
        Decision::Skip,
        "ls is never evicted at tool time"
    );
    let cp = only(harness.compact(strategy.as_ref(), Moment::Overflow).unwrap());
    assert_eq!(cp.window, Window::From(compactbench_core::EntryId(1)), "cut backs up from the results to their call");
    assert_eq!(harness.summarizer.requests().len(), 1);
    let view = harness.view(strategy.as_ref());
    assert_eq!(view.len(), 6);
    for i in 0..4 {
        let path = format!("/large_tool_results/tc_{i}");
        let shown = view.messages[2 + i].message.searchable_text();
        assert!(shown.starts_with(&format!(
            "Tool result too large: the output of tool call tc_{i} was stored in the filesystem at: {path}"
        )));
        assert!(shown.contains("... [490 lines truncated] ..."), "5+5-line preview");
        assert_eq!(
            view.messages[2 + i].message.tool_result_ids().collect::<Vec<_>>(),
            [format!("tc_{i}")],
            "pairing intact"
        );
        let original = harness.log.message(compactbench_core::EntryId(2 + i as u32)).unwrap().searchable_text();
        assert_eq!(harness.store.read(&path), Some(original.as_str()));
    }
}

#[test]
fn case_08_overflow_tail_clip_read_file() {
    let strategy = crate::strategy();
    let mut harness = Harness::new(parallel_batch("read_file"), model(200_000, 0));
    let cp = only(harness.compact(strategy.as_ref(), Moment::Overflow).unwrap());
    assert_eq!(cp.window, Window::From(compactbench_core::EntryId(1)));
    let view = harness.view(strategy.as_ref());
    for i in 0..4 {
        let original = harness.log.message(compactbench_core::EntryId(2 + i as u32)).unwrap().searchable_text();
        let shown = view.messages[2 + i].message.searchable_text();
        let head: String = original.chars().take(4_000).collect();
        assert!(shown.starts_with(&format!(
            "{head}\n\n[Output cut short because of the context window's size limits. The full content is at /big_{i}.txt."
        )));
    }
    assert!(harness.store.paths().all(|p| !p.starts_with("/large_tool_results/")));
    assert_eq!(harness.store.len(), 1, "only the history file");
}

/// The stubs paraphrase the original's wording (no prompt text copied) at the original's length
/// in characters, since the middleware's estimate counts characters: a stub of another length
/// moves the budget checks that decide the trigger and the overflow error. The lengths are those
/// deepagents 0.7.32 renders for the same inputs (`_render_too_large_tool_msg`,
/// `_build_truncated_human_message`, `_slice_read_file_tm`).
#[test]
fn stubs_have_the_originals_lengths() {
    let plain = "line\n".repeat(3);
    let omitted: String = (0..500).map(|i| format!("row {i}\n")).collect();
    let clipped = format!("{}\n", "x".repeat(1500)).repeat(20);
    for (content, tool, human) in [(&plain, 495, 252), (&omitted, 739, 496), (&clipped, 10_781, 10_538)] {
        let stub = crate::evict::too_large_tool_stub("tc_1", "/large_tool_results/tc_1", content);
        assert_eq!(stub.chars().count(), tool, "{stub}");
        let stub = crate::evict::too_large_human_stub("/conversation_history/h.md", content);
        assert_eq!(stub.chars().count(), human, "{stub}");
    }
    assert_eq!(crate::evict::read_file_slice(&omitted, "/src/big.txt").chars().count(), 4_173);
}

#[test]
fn case_09_offload_failure_keeps_summarizing() {
    let strategy = DeepAgentsStrategy::with_config(Config {
        failing_backend: true,
        ..config(Size::Messages(5), Size::Messages(2))
    });
    let mut harness = Harness::new(numbered(0..6), openai(1_000_000, 0));
    let cp = only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    assert_eq!(
        cp.summary.as_ref().unwrap().text(),
        "Here is a summary of the conversation to date:\n\nSUMMARY 1 of history"
    );
    assert_eq!(details(&cp)["file_path"], serde_json::Value::Null);
    assert!(details(&cp)["warnings"][0]
        .as_str()
        .unwrap()
        .starts_with("Offloading conversation history to backend failed"));
    assert!(cp.offloads.is_empty() && harness.store.is_empty());
    assert_eq!(texts(&harness.view(&strategy))[1..], ["S4", "S5"]);
}

#[test]
fn case_10_previous_summary_not_rearchived() {
    let mut harness = Harness::new([h("old question"), a("old answer"), h("New question 1")], openai(1_000_000, 0));
    harness.summarizer = FakeSummarizer::new(FakeMode::Fixed("First summary".into()));
    only(harness.step(&with(Size::Messages(3), Size::Messages(1)), Moment::BeforeRequest).unwrap());
    for m in [a("A1"), h("H2"), a("A2"), h("H3"), a("A3")] {
        harness.push(m);
    }
    let strategy = with(Size::Messages(5), Size::Messages(2));
    assert_eq!(harness.view(&strategy).len(), 7, "[S, H1, A1, H2, A2, H3, A3]");
    let cp = only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    let path = details(&cp)["file_path"].as_str().unwrap();
    let archive = harness.store.read(path).unwrap();
    let second = archive.split("## Summarized at ").nth(2).unwrap();
    assert!(second.contains("New question 1"));
    assert!(!archive.contains("First summary"));
    assert!(harness.summarizer.requests()[1].transcript.contains("First summary"), "but the summarizer sees it");
}

#[test]
fn case_11_reported_usage_trigger() {
    let strategy = with(Size::Tokens(10_000), Size::Messages(4));
    let short =
        |last_total: u64| vec![h("h1"), a("a1"), h("h2"), a("a2"), h("h3"), with_usage(a("a3"), last_total - 1, 1)];
    let mut harness = Harness::new(short(10_001), model(1_000_000, 0));
    assert_eq!(harness.decide(&strategy, Moment::BeforeRequest), Decision::compact("threshold"));
    let cp = only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    assert!(cp.tokens_before < 100, "the estimate itself is tiny");
    let mut harness = Harness::new(short(9_999), model(1_000_000, 0));
    assert_eq!(harness.decide(&strategy, Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn case_12_manual_tool_gate() {
    let settings = resolved(&config(Size::Tokens(10_000), Size::Messages(2)), 1_000_000);
    let vm = |m: Message| ViewMessage { origin: Origin::Entry(compactbench_core::EntryId(0)), message: m };
    let gate = |last: Message| middleware::compact_tool_eligible(&[vm(h("q")), vm(last)], &settings);
    assert!(gate(with_usage(a("x"), 4_000, 1_000)), "5,000 = half of 10,000");
    assert!(!gate(with_usage(a("x"), 4_000, 999)));
    assert!(!gate(a("x")), "no usage metadata: nothing to compact");

    let strategy = with(Size::Tokens(10_000), Size::Messages(2));
    let session = |usage: bool| {
        let call = calls(&[("cc", "compact_conversation", json!({}))]);
        let call = if usage { with_usage(call, 5_990, 10) } else { call };
        vec![
            h("H0"),
            a("A0"),
            h("H1"),
            a("A1"),
            h("H2"),
            call,
            res("cc", "compact_conversation", "Conversation compacted."),
        ]
    };
    let mut harness = Harness::new(session(true), openai(1_000_000, 0));
    assert_eq!(harness.decide(&strategy, Moment::BeforeRequest), Decision::compact("compact_conversation"));
    let cp = only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    assert_eq!(details(&cp)["step"], "compact_tool");
    assert_eq!(details(&cp)["cutoff_index"], 4, "cut on the list as it was when the tool ran");
    assert_eq!(texts(&harness.view(&strategy))[1..], ["H2", "compact_conversation {}", "Conversation compacted."]);

    let mut harness = Harness::new(session(false), openai(1_000_000, 0));
    assert_eq!(harness.decide(&strategy, Moment::BeforeRequest), Decision::Skip);
    assert!(harness.compact(&strategy, Moment::BeforeRequest).unwrap().is_empty(), "no event");
}

#[test]
fn offloaded_tool_result_reads_back_from_the_path_in_the_view() {
    let strategy = crate::strategy();
    let needle = "NEEDLE-7f3a: migration 0042 failed on column user_id";
    let body: String = (0..2_000)
        .map(|i| if i == 1_000 { format!("{needle}\n") } else { format!("log line {i:05} {}\n", "-".repeat(30)) })
        .collect();
    assert!(body.len() > 80_000);
    let mut harness = Harness::new(
        [
            h("run the migration"),
            calls(&[("call.1/x", "execute", json!({"command": "make migrate"}))]),
            res("call.1/x", "execute", &body),
        ],
        openai(1_000_000, 0),
    );
    assert_eq!(harness.decide(strategy.as_ref(), Moment::BeforeRequest), Decision::compact("large-tool-result"));
    let cp = only(harness.step(strategy.as_ref(), Moment::BeforeRequest).unwrap());
    assert_eq!(cp.kind, CheckpointKind::Offload);
    assert_eq!(cp.offloads[0].path, "/large_tool_results/call_1_x");
    let view = harness.view(strategy.as_ref());
    let shown = view.messages[2].message.searchable_text();
    assert!(!shown.contains(needle));
    assert_eq!(view.messages[2].message.tool_result_ids().collect::<Vec<_>>(), ["call.1/x"]);
    let path = path_in(&shown, "/large_tool_results/");
    assert!(harness.store.read(&path).unwrap().contains(needle));
    // Once evicted, the stub is what every later request shows.
    assert_eq!(harness.decide(strategy.as_ref(), Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn summarized_history_reads_back_from_the_path_in_the_summary() {
    let strategy = with(Size::Messages(6), Size::Messages(2));
    let needle = "NEEDLE-91c2: never touch the public API of parser.rs";
    let mut harness =
        Harness::new([h(needle), a("ok"), h("step 2"), a("done 2"), h("step 3"), a("done 3")], openai(1_000_000, 0));
    let cp = only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    let view = harness.view(&strategy);
    let summary = view.messages[0].message.text();
    assert!(summary.contains("<summary>\nSUMMARY 1 of history\n</summary>"));
    let path = path_in(&summary, "/conversation_history/");
    assert!(path.ends_with(".md"));
    assert_eq!(cp.offloads[0].path, path);
    assert_eq!(cp.offloads[0].entries.len(), 4);
    assert!(harness.store.read(&path).unwrap().contains(needle));
    assert!(!texts(&view).iter().any(|t| t.contains(needle)));
}

#[test]
fn large_human_message_is_evicted_behind_a_stub() {
    let strategy = crate::strategy();
    let text: String = (0..5_000).map(|i| format!("requirement {i:05}: {}\n", "r".repeat(30))).collect();
    assert!(text.len() > 200_000);
    let mut harness = Harness::new([Message::system("sys"), h(&text)], openai(1_000_000, 0));
    assert_eq!(harness.decide(strategy.as_ref(), Moment::BeforeRequest), Decision::compact("large-human-message"));
    let cp = only(harness.step(strategy.as_ref(), Moment::BeforeRequest).unwrap());
    let shown = harness.view(strategy.as_ref()).messages[1].message.text();
    let path = path_in(&shown, "/conversation_history/");
    assert_eq!(cp.offloads[0].path, path);
    assert_eq!(harness.store.read(&path), Some(text.as_str()));
    assert!(shown.contains("... [4990 lines truncated] ..."));
}

#[test]
fn input_budget_triggers_before_the_fraction() {
    // Window 10,000, output 2,000: budget int(9,500) - 2,000 = 7,500 < trigger 8,500.
    let strategy = crate::strategy();
    let chunk = "y".repeat(4 * 1_990);
    let messages = vec![h(&chunk), a(&chunk), h(&chunk), a(&chunk)];
    let mut harness = Harness::new(messages, openai(10_000, 2_000));
    assert_eq!(harness.decide(strategy.as_ref(), Moment::BeforeRequest), Decision::compact("input-budget"));
    let mut harness = Harness::new(vec![h(&chunk), a(&chunk), h(&chunk), a(&chunk)], openai(10_000, 0));
    assert_eq!(harness.decide(strategy.as_ref(), Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn summarizer_failure_is_retried_then_fails_with_history_written() {
    let strategy = with(Size::Messages(4), Size::Messages(2));
    let mut harness = Harness::new(numbered(0..4), openai(1_000_000, 0));
    harness.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    let err = harness.step(&strategy, Moment::BeforeRequest).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Transport);
    assert_eq!(harness.summarizer.requests().len(), 3, "with_retry: three attempts");
    assert_eq!(harness.log.checkpoints().count(), 0, "no event");
    assert_eq!(harness.store.len(), 1, "the history was offloaded before summarizing");
}

#[test]
fn summarizer_request_is_the_prompt_with_xml_messages() {
    let strategy = with(Size::Messages(5), Size::Messages(2));
    let mut harness = Harness::new(
        [
            h("fix <parser> & tests"),
            calls(&[("c1", "read_file", json!({"file_path": "a.py"}))]),
            res("c1", "read_file", "x"),
            a("done"),
            h("next"),
        ],
        openai(1_000_000, 8_192),
    );
    only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    let request = only(harness.summarizer.requests());
    assert_eq!((request.system.as_str(), request.instructions.as_str(), request.max_output_tokens), ("", "", 8_192));
    let expected_xml = "<message type=\"human\">fix &lt;parser&gt; &amp; tests</message>\n<message type=\"ai\">\n  <tool_call id=\"c1\" name=\"read_file\">{\"file_path\": \"a.py\"}</tool_call>\n</message>\n<message type=\"tool\">x</message>";
    assert!(request.transcript.ends_with(&format!("<messages>\nMessages to summarize:\n{expected_xml}\n</messages>")));
    for heading in ["## SESSION INTENT", "## SUMMARY", "## ARTIFACTS", "## NEXT STEPS", "<media_reference_information>"]
    {
        assert!(request.transcript.contains(heading), "{heading}");
    }
}

#[test]
fn claude_reasoning_is_dropped_from_messages_kept_across_a_summary() {
    let strategy = with(Size::Messages(4), Size::Messages(2));
    let thinking = Message::new(Role::Assistant, vec![Part::Reasoning { text: "hmm".into() }, Part::text("answer")]);
    let mut harness = Harness::new([h("q1"), a("a1"), h("q2"), thinking.clone()], model(1_000_000, 0));
    only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    assert_eq!(harness.view(&strategy).messages[2].message.parts, vec![Part::text("answer")]);
    // Other providers keep it.
    let mut harness = Harness::new([h("q1"), a("a1"), h("q2"), thinking.clone()], openai(1_000_000, 0));
    only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    assert_eq!(harness.view(&strategy).messages[2].message, thinking);
}

/// Values computed with langchain-core 1.8.4 on the same messages.
#[test]
fn estimator_and_serializer_match_langchain_core() {
    let messages = [
        Message::system("You are helpful."),
        h("hello <world> & \"q\""),
        calls(&[("c1", "read_file", json!({"file_path": "a.py", "n": [1, 2.5, null, true]}))]),
        res("c1", "read_file", "line1\nline2"),
        with_usage(a("done it's"), 90, 10),
    ];
    let per_message: Vec<(u64, u64)> = messages.iter().map(|m| (count::one(m, 4.0), count::one(m, 3.3))).collect();
    assert_eq!(per_message, [(9, 10), (9, 10), (34, 41), (10, 11), (8, 9)]);
    assert_eq!(count::count(&messages, 4.0, false), 70);
    assert_eq!(count::count(&messages, 4.0, true), 88);
    assert_eq!(count::count(&messages, 3.3, true), 100);
    let view: Vec<ViewMessage> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| ViewMessage { origin: Origin::Entry(compactbench_core::EntryId(i as u32)), message: m.clone() })
        .collect();
    assert_eq!(
        xml::buffer_string(&view, &Default::default(), false),
        "<message type=\"system\">You are helpful.</message>\n<message type=\"human\">hello &lt;world&gt; &amp; \"q\"</message>\n<message type=\"ai\">\n  <tool_call id=\"c1\" name=\"read_file\">{\"file_path\": \"a.py\", \"n\": [1, 2.5, null, true]}</tool_call>\n</message>\n<message type=\"tool\">line1\nline2</message>\n<message type=\"ai\">done it's</message>"
    );
}

#[test]
fn token_keep_binary_search_keeps_the_newest_message_and_the_pairing() {
    let settings = resolved(&config(Size::Messages(1), Size::Tokens(100)), 1_000_000);
    let small = [h("a"), a("b"), h("c")];
    let refs: Vec<&Message> = small.iter().collect();
    assert_eq!(cutoff::cutoff(&refs, &settings), 0, "everything fits");
    let big = "w".repeat(1_000);
    let messages = [h("q"), calls(&[("c", "grep", json!({}))]), res("c", "grep", &big)];
    let refs: Vec<&Message> = messages.iter().collect();
    assert_eq!(cutoff::cutoff(&refs, &settings), 1, "newest alone is over budget: kept, with its call");
}

#[test]
fn over_budget_with_nothing_to_summarize_clips_the_trailing_results() {
    // Budget int(9,500) - 2,000 = 7,500; three messages, keep ten: the cut is 0.
    let strategy = DeepAgentsStrategy::with_config(config(Size::Messages(100), Size::Messages(10)));
    let output = "o".repeat(30_000);
    let mut harness = Harness::new(
        [h("build"), calls(&[("c1", "execute", json!({"command": "make"}))]), res("c1", "execute", &output)],
        openai(10_000, 2_000),
    );
    assert_eq!(harness.decide(&strategy, Moment::BeforeRequest), Decision::compact("input-budget"));
    let cp = only(harness.step(&strategy, Moment::BeforeRequest).unwrap());
    assert_eq!((cp.kind, &cp.window, details(&cp)["step"].as_str()), (CheckpointKind::Offload, &Window::Inherit, Some("tail_clip")));
    assert_eq!(harness.store.read("/large_tool_results/c1"), Some(output.as_str()));
    assert!(harness.view(&strategy).messages[2].message.searchable_text().contains("/large_tool_results/c1"));
    assert!(harness.summarizer.requests().is_empty());
    // The clipped request is the one recovery attempt: a provider overflow now fails.
    assert!(harness.compact(&strategy, Moment::Overflow).is_err());

    // Without a trailing tool batch there is nothing to clip, and the request fails.
    let mut harness = Harness::new([h(&output)], openai(10_000, 2_000));
    assert_eq!(harness.decide(&strategy, Moment::BeforeRequest), Decision::compact("input-budget"));
    let err = harness.step(&strategy, Moment::BeforeRequest).unwrap_err();
    assert!(err.message.starts_with("Context is still over the input budget"));
}

/// A replayed session as the runner drives it: every view keeps each tool result after its
/// call, and every offload pointer in a view resolves in the store.
#[test]
fn long_session_keeps_pairs_and_resolvable_pointers() {
    let strategy = crate::strategy();
    let mut harness = Harness::new([Message::system("You are a coding agent.")], openai(40_000, 4_000));
    let mut seed = 7u64;
    let mut next = move |n: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut summaries = 0;
    for turn in 0..60 {
        harness.push(h(&format!("turn {turn}: please continue {}", "u".repeat(next(400) as usize))));
        for step in 0..3 {
            for cp in harness.step(strategy.as_ref(), Moment::BeforeRequest).unwrap() {
                summaries += usize::from(cp.summary.is_some());
            }
            let view = harness.view(strategy.as_ref());
            let sent = count::count(view.iter(), 4.0, false);
            let id = format!("t{turn}_{step}");
            let tool = ["read_file", "execute", "grep", "write_file"][next(4) as usize];
            let args = json!({"file_path": format!("/src/f{turn}.rs"), "content": "c".repeat(next(3_000) as usize)});
            harness.push(with_usage(calls(&[(&id, tool, args)]), sent, 20));
            let size = if next(10) == 0 { 90_000 } else { next(6_000) as usize };
            harness.push(res(&id, tool, &format!("NEEDLE-{turn}-{step} {}", "r".repeat(size))));
        }
        harness.push(with_usage(a(&format!("turn {turn} done")), 1_000, 5));
        let view = harness.view(strategy.as_ref());
        let mut seen = std::collections::HashSet::new();
        for vm in &view.messages {
            seen.extend(vm.message.tool_call_ids().map(str::to_owned));
            for id in vm.message.tool_result_ids() {
                assert!(seen.contains(id), "result {id} without its call in turn {turn}");
            }
            let text = vm.message.searchable_text();
            for prefix in ["/large_tool_results/", "/conversation_history/session_"] {
                if text.contains(prefix) {
                    assert!(harness.store.read(&path_in(&text, prefix)).is_some(), "dangling pointer in turn {turn}");
                }
            }
        }
    }
    assert!(summaries >= 3, "the session compacts repeatedly ({summaries})");
    assert!(harness.store.paths().any(|p| p.starts_with("/large_tool_results/")));
}
