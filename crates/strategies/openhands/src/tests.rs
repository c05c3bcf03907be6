//! Conformance cases from the spec's section (j), the worked example of section (i), and
//! the behaviours the crate docs promise.

use std::sync::Mutex;

use compactbench_core::{
    Checkpoint, Decision, Error, ErrorKind, Log, Message, ModelProfile, Moment, Origin, Part, Role, StopReason,
    Strategy, Summarizer, Summary, SummaryRequest, View,
};
use compactbench_testkit::{json, model, FakeMode, FakeSummarizer, Harness};

use crate::condensation::{Forgetting, Recorded, CONDENSATION, DETAILS_TAG};
use crate::event::{Event, EventId, Kind};
use crate::stream::Stream;
use crate::{render, sdk, strategy, v0, variants, Condensers, OpenhandsConfig, OpenhandsStrategy};

fn openhands(config: OpenhandsConfig) -> OpenhandsStrategy {
    OpenhandsStrategy::new(config).expect("valid configuration")
}

fn sdk_config(max_size: i64, keep_first: i64) -> OpenhandsConfig {
    OpenhandsConfig::llm_summarizing(max_size, keep_first, None)
}

/// `llm_summarizing` leaves what it is not given at `LLMSummarizingCondenser`'s class
/// defaults (openhands-sdk 1.58.2), so `default_condenser` and the settings row differ from
/// the class only in the settings they name.
#[test]
fn llm_summarizing_takes_the_class_defaults_for_the_rest() {
    let spelled_out = |max_size, keep_first, max_tokens| OpenhandsConfig::LlmSummarizing {
        max_size,
        keep_first,
        max_tokens,
        minimum_progress: 0.1,
        hard_context_reset_max_retries: 5,
        hard_context_reset_context_scaling: 0.8,
    };
    assert_eq!(OpenhandsConfig::llm_summarizing(240, 2, Some(8_000)), spelled_out(240, 2, Some(8_000)));
    assert_eq!(OpenhandsConfig::default(), spelled_out(80, 4, None));
}

/// A window so large that only event counts matter.
fn roomy() -> ModelProfile {
    model(10_000_000, 4_096)
}

fn user(n: usize) -> Message {
    Message::user(format!("Event {n}"))
}

fn call(id: &str) -> Message {
    Message::tool_call(id, "bash", json!({ "command": format!("run {id}") }))
}

fn result(id: &str) -> Message {
    Message::tool_result(id, "bash", format!("output of {id}"), false)
}

/// `e<entry>` for log messages, `S<checkpoint>` for summaries.
fn ids(view: &View) -> Vec<String> {
    view.messages
        .iter()
        .map(|m| match m.origin {
            Origin::Entry(e) => format!("e{}", e.0),
            Origin::Summary(c) => format!("S{}", c.0),
            Origin::Replaced(e, _) => format!("r{}", e.0),
            Origin::Injected(c) => format!("i{}", c.0),
        })
        .collect()
}

/// The V0 event view (after the pipeline's transforms) that V0's own tests measure.
fn v0_events(s: &OpenhandsStrategy, log: &Log) -> Vec<Event> {
    let Condensers::V0(pipeline) = &s.condensers else { panic!("not a V0 strategy") };
    let stream = Stream::of(log);
    v0::pipeline::view(log, &stream, &v0::view::from_events(log, &stream), pipeline).into_owned()
}

/// The SDK event view.
fn sdk_events(log: &Log) -> Vec<Event> {
    sdk::view::from_events(log, &Stream::of(log))
}

/// A condensation checkpoint as the SDK would record it.
fn recorded_checkpoint(forgotten: &[i64], summary: Option<&str>, offset: Option<usize>) -> Checkpoint {
    let mut cp = Checkpoint::new(compactbench_core::CheckpointKind::Summary, compactbench_core::Window::Kept(Vec::new()));
    cp.summary = summary.map(Message::user);
    cp.details = json!({ DETAILS_TAG: CONDENSATION, "forgotten": forgotten, "summary_offset": offset });
    cp
}

/// Whether a step condensed.
fn condensed(cps: &[Checkpoint]) -> bool {
    !cps.is_empty()
}

/// Log entry numbers of V0 events.
fn entries(events: &[Event]) -> Vec<Option<u32>> {
    events.iter().map(|e| e.entry.map(|id| id.0)).collect()
}

fn details(cp: &Checkpoint) -> &serde_json::Value {
    &cp.details
}

/// V0 test harness formula: view size after the i-th yielded view.
fn expected_size(i: usize, max_size: usize) -> usize {
    if i < max_size {
        return i + 1;
    }
    let target = max_size / 2;
    (i - max_size) % target + target + 1
}

fn expected_condensations(i: usize, max_size: usize) -> usize {
    if i < max_size {
        return 0;
    }
    (i - max_size) / (max_size / 2) + 1
}

/// A summarizer that fails its first `failures` calls, then answers.
struct Flaky {
    failures: usize,
    requests: Mutex<Vec<SummaryRequest>>,
}

impl Flaky {
    fn new(failures: usize) -> Flaky {
        Flaky { failures, requests: Mutex::new(Vec::new()) }
    }
}

impl Summarizer for Flaky {
    fn name(&self) -> &str {
        "flaky"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let mut requests = self.requests.lock().unwrap();
        requests.push(request.clone());
        if requests.len() <= self.failures {
            return Err(Error::new(ErrorKind::Transport, "down"));
        }
        Ok(Summary { text: "RESET SUMMARY".into(), input_tokens: 1, output_tokens: 1, stop: StopReason::Complete })
    }
}

/// Compacts with a custom summarizer (the testkit harness owns a `FakeSummarizer`).
fn compact_with(
    s: &OpenhandsStrategy,
    log: &mut Log,
    summarizer: &dyn Summarizer,
    at: Moment,
) -> Result<Vec<Checkpoint>, Error> {
    let mut store = compactbench_core::VirtualStore::new();
    let profile = roomy();
    let mut cx = compactbench_core::Cx::new(&profile, summarizer, &mut store, compactbench_testkit::tokenizer());
    let view = s.project(log);
    let cps = s.compact(log, &view, at, &mut cx)?;
    for cp in &cps {
        log.push_checkpoint(cp.clone());
    }
    Ok(cps)
}

#[test]
fn case_01_noop_returns_same_events() {
    let s = openhands(OpenhandsConfig::NoOp);
    let msgs = vec![Message::system("sys"), user(1), call("c1"), result("c1"), Message::assistant("done")];
    let mut h = Harness::new(msgs.clone(), roomy());
    let view = h.view(&s);
    assert_eq!(view.iter().cloned().collect::<Vec<_>>(), msgs);
    assert_eq!(ids(&view), ["e0", "e1", "e2", "e3", "e4"]);
    for at in [Moment::TurnEnd, Moment::BeforeRequest, Moment::Overflow] {
        assert_eq!(h.decide(&s, at), Decision::Skip);
        assert!(h.compact(&s, at).unwrap().is_empty());
    }
}

#[test]
fn case_02_observation_masking_respects_attention_window() {
    // V0's test: [E1, O1, E3, E4, O2] with a window of 3; only O1 (index 1 < 5 - 3) is masked.
    let s = openhands(OpenhandsConfig::ObservationMasking { attention_window: 3 });
    let log = Log::from_messages([user(1), result("c1"), user(3), user(4), result("c2")]);
    let base = v0::view::from_events(&log, &Stream::of(&log));
    let masked = v0_events(&s, &log);
    assert_eq!(masked.len(), base.len());
    assert_eq!(masked[1].kind, Kind::Masked { text: "<MASKED>".into() });
    assert_eq!(masked[0], base[0]);
    assert_eq!(masked[2..], base[2..]);

    // What reaches the model: the masked result is a user message and its call, whose
    // result never arrives, is not sent at all. Nothing is stored, as in V0: the stand-in is
    // shown through the message of its call.
    let mut h = Harness::new(
        [Message::system("sys"), user(1), call("c1"), result("c1"), call("c2"), result("c2"), call("c3"), result("c3")],
        roomy(),
    );
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    assert!(h.step(&s, Moment::BeforeRequest).unwrap().is_empty());
    let view = h.view(&s);
    assert_eq!(ids(&view), ["e0", "e1", "r3", "e4", "e5", "e6", "e7"]);
    assert_eq!(view.messages[2].origin, Origin::Replaced(compactbench_core::EntryId(3), compactbench_core::EntryId(2)));
    assert_eq!(view.messages[2].message, Message::user("<MASKED>"));
    assert!(view.iter().all(|m| !m.tool_call_ids().any(|id| id == "c1")), "c1's call is dropped");
}

/// V0 stores none of its stand-ins, so the two a long result goes through (middle-truncated by
/// the message builder, then masked) must have different origins: the runner keys what it
/// measures of a view message by its origin.
#[test]
fn v0_stand_ins_of_one_result_have_different_origins() {
    let s = openhands(OpenhandsConfig::ObservationMasking { attention_window: 2 });
    let long = Message::tool_result("c1", "bash", "x".repeat(40_000), false);
    let mut h = Harness::new([Message::system("sys"), user(1), call("c1"), long], roomy());
    let e = compactbench_core::EntryId;
    let view = h.view(&s);
    assert_eq!(view.messages[3].origin, Origin::Replaced(e(3), e(3)), "truncated by the builder");
    assert!(view.messages[3].message.searchable_text().contains("[... Observation truncated due to length ...]"));
    h.push(user(4));
    h.push(user(5));
    let view = h.view(&s);
    assert_eq!(ids(&view), ["e0", "e1", "r3", "e4", "e5"]);
    assert_eq!(view.messages[2].origin, Origin::Replaced(e(3), e(2)), "masked: shown through its call");
    assert_eq!(view.messages[2].message, Message::user("<MASKED>"));
}

#[test]
fn case_03_recent_events_keeps_head_and_tail() {
    let log = Log::from_messages((1..=5).map(user));
    let recent =
        |keep_first, max_events| openhands(OpenhandsConfig::RecentEvents { keep_first, max_events }).project(&log);
    assert_eq!(ids(&recent(1, 5)), ["e0", "e1", "e2", "e3", "e4"]);
    assert_eq!(ids(&recent(1, 3)), ["e0", "e3", "e4"]);
    assert_eq!(ids(&recent(1, 2)), ["e0", "e4"]);
    assert_eq!(ids(&recent(2, 3)), ["e0", "e1", "e4"]);
    // Bug-compatible: a view shorter than max_events repeats its head (`view[-99:]` is the
    // whole view).
    assert_eq!(ids(&recent(1, 100)), ["e0", "e0", "e1", "e2", "e3", "e4"]);
}

#[test]
fn case_04_browser_output_keeps_newest_k() {
    let browse = |n: usize| {
        let id = format!("b{n}");
        [
            Message::tool_call(id.clone(), "browser", json!({ "url": format!("https://site/{n}") })),
            Message::tool_result(id, "browser", format!("page {n} content"), false),
        ]
    };
    let mut msgs = vec![Message::system("sys"), user(0)];
    msgs.extend(browse(1));
    msgs.extend(browse(2));
    msgs.push(user(3));
    msgs.push(call("c4"));
    msgs.push(result("c4"));
    msgs.extend(browse(5));
    msgs.extend(browse(6));
    let log = Log::from_messages(msgs);
    let s = openhands(OpenhandsConfig::BrowserOutput { attention_window: 3 });
    let events = v0_events(&s, &log);
    let outputs: Vec<&Event> = events
        .iter()
        .filter(|e| match &e.kind {
            Kind::Masked { .. } => true,
            Kind::Observation { name, .. } => &**name == "browser",
            _ => false,
        })
        .collect();
    assert_eq!(outputs.len(), 4);
    assert_eq!(outputs[0].kind, Kind::Masked { text: "Visited URL https://site/1\nContent omitted".into() });
    assert!(outputs[1..].iter().all(|e| matches!(e.kind, Kind::Observation { .. })), "the newest 3 keep their content");
    assert!(events.iter().any(|e| e.call_id() == Some("c4") && e.is_observation()), "other results are untouched");

    let mut h = Harness::new(
        log.entries().filter_map(|(_, e)| match e {
            compactbench_core::Entry::Message(m) => Some(m.clone()),
            compactbench_core::Entry::Checkpoint(_) => None,
        }),
        roomy(),
    );
    h.step(&s, Moment::BeforeRequest).unwrap();
    let view = h.view(&s);
    assert_eq!(view.messages[2].message, Message::user("Visited URL https://site/1\nContent omitted"));
    assert!(matches!(view.messages[2].origin, Origin::Replaced(..)));
    assert!(view.iter().all(|m| !m.tool_call_ids().any(|id| id == "b1")), "the masked output's call is not sent");
    assert!(view.iter().any(|m| m.searchable_text().contains("page 2 content")));
}

#[test]
fn case_05_rolling_condensers_keep_view_size() {
    let max_size = 10;
    let configs = [
        (
            OpenhandsConfig::V0LlmSummarizing { max_size: 10, keep_first: 1, max_event_length: 10_000 },
            FakeMode::Numbered,
        ),
        (
            OpenhandsConfig::StructuredSummary { max_size: 10, keep_first: 1, max_event_length: 10_000 },
            FakeMode::Numbered,
        ),
        (OpenhandsConfig::AmortizedForgetting { max_size: 10, keep_first: 0 }, FakeMode::Numbered),
        (OpenhandsConfig::LlmAttention { max_size: 10, keep_first: 1 }, FakeMode::Fixed(r#"{"ids": []}"#.into())),
    ];
    for (config, mode) in configs {
        let s = openhands(config.clone());
        let mut h = Harness::new([], roomy());
        h.summarizer = FakeSummarizer::new(mode);
        let mut i = 0;
        for n in 0..max_size * 10 {
            h.push(user(n));
            if !condensed(&h.step(&s, Moment::BeforeRequest).unwrap()) {
                assert_eq!(v0_events(&s, &h.log).len(), expected_size(i, max_size), "{config:?} at view {i}");
                i += 1;
            }
        }
    }

    // AmortizedForgetting(max_size 12, keep_first 4) over 120 events: the first 4 events and
    // the newest event are always in view.
    let s = openhands(OpenhandsConfig::AmortizedForgetting { max_size: 12, keep_first: 4 });
    let mut h = Harness::new([], roomy());
    let mut i = 0;
    for n in 0..120 {
        h.push(user(n));
        if !condensed(&h.step(&s, Moment::BeforeRequest).unwrap()) {
            let events = v0_events(&s, &h.log);
            assert_eq!(events.len(), expected_size(i, 12));
            assert_eq!(events.last().unwrap().entry, Some(h.log.messages().next_back().unwrap().0));
            let first: Vec<Option<u32>> = entries(&events).into_iter().take(4).collect();
            let want: Vec<Option<u32>> = (0..(n as u32 + 1).min(4)).map(Some).collect();
            assert_eq!(first, want, "the first four events stay");
            i += 1;
        }
    }
}

#[test]
fn case_06_invalid_config_is_rejected() {
    let bad = [
        OpenhandsConfig::V0LlmSummarizing { max_size: 10, keep_first: 5, max_event_length: 10_000 },
        OpenhandsConfig::V0LlmSummarizing { max_size: 10, keep_first: -1, max_event_length: 10_000 },
        OpenhandsConfig::StructuredSummary { max_size: 0, keep_first: 0, max_event_length: 10_000 },
        OpenhandsConfig::AmortizedForgetting { max_size: 4, keep_first: 2 },
        OpenhandsConfig::LlmAttention { max_size: -3, keep_first: -4 },
        sdk_config(10, 4),
        sdk_config(0, 0),
        OpenhandsConfig::Pipeline(vec![sdk_config(80, 4)]),
    ];
    for config in bad {
        let err = OpenhandsStrategy::new(config.clone()).err().unwrap_or_else(|| panic!("{config:?} was accepted"));
        assert_eq!(err.kind, ErrorKind::Other);
    }
    let err =
        OpenhandsStrategy::new(OpenhandsConfig::AmortizedForgetting { max_size: 10, keep_first: 5 }).err().unwrap();
    assert!(err.message.contains("must be less than half of max_size"), "{}", err.message);
    assert!(OpenhandsStrategy::new(sdk_config(10, 3)).is_ok());
    assert!(OpenhandsStrategy::new(OpenhandsConfig::AmortizedForgetting { max_size: 10, keep_first: 4 }).is_ok());
}

#[test]
fn case_07_llm_summarizing_keeps_first_and_summary_events() {
    let (max_size, keep_first) = (10, 3);
    let s = openhands(OpenhandsConfig::V0LlmSummarizing { max_size: 10, keep_first: 3, max_event_length: 10_000 });
    let mut h = Harness::new([], roomy());
    let mut i = 0;
    for n in 0..max_size * 10 {
        h.push(user(n));
        if condensed(&h.step(&s, Moment::BeforeRequest).unwrap()) {
            continue;
        }
        let events = v0_events(&s, &h.log);
        assert_eq!(events.len(), expected_size(i, max_size));
        assert_eq!(h.summarizer.requests().len(), expected_condensations(i, max_size));
        let head: Vec<Option<u32>> = entries(&events).into_iter().take(keep_first).collect();
        let want: Vec<Option<u32>> = (0..(n as u32 + 1).min(keep_first as u32)).map(Some).collect();
        assert_eq!(head, want, "the first keep_first events stay");
        if i > max_size {
            assert!(matches!(events[keep_first].kind, Kind::Summary { .. }), "summary at keep_first");
            assert_eq!(s.project(&h.log).messages[keep_first].message.role, Role::User);
        }
        i += 1;
    }
    let requests = h.summarizer.requests();
    assert!(requests[0].transcript.contains("<PREVIOUS SUMMARY>\nNo events summarized\n</PREVIOUS SUMMARY>"));
    assert!(requests[0]
        .transcript
        .contains("<EVENT id=3>\n**MessageAction** (source=EventSource.USER)\nCONTENT: Event 3\n</EVENT>"));
    assert!(requests[1].transcript.contains("<PREVIOUS SUMMARY>\nSUMMARY 1 of condensation\n</PREVIOUS SUMMARY>"));
    assert!(requests[0].transcript.starts_with("<PREVIOUS SUMMARY>"), "the rules are the system text");
    assert!(requests[0].system.contains("TASK_TRACKING"));
}

#[test]
fn case_08_pipeline_chains_and_stops_at_first_condensation() {
    // V0's test: AmortizedForgetting(10) then BrowserOutput(2); every third event is a
    // browser output.
    let s = openhands(OpenhandsConfig::Pipeline(vec![
        OpenhandsConfig::AmortizedForgetting { max_size: 10, keep_first: 0 },
        OpenhandsConfig::BrowserOutput { attention_window: 2 },
    ]));
    let mut h = Harness::new([], roomy());
    let mut i = 0;
    for n in 0..30 {
        h.push(if n % 3 == 0 {
            Message::tool_result(format!("b{n}"), "browser", format!("Observation {n}"), false)
        } else {
            user(n)
        });
        if condensed(&h.step(&s, Moment::BeforeRequest).unwrap()) {
            continue;
        }
        let events = v0_events(&s, &h.log);
        assert_eq!(events.len(), expected_size(i, 10));
        let outputs: Vec<&Event> = events.iter().filter(|e| e.is_v0_observation()).collect();
        let split = outputs.len().saturating_sub(2);
        assert!(outputs[..split]
            .iter()
            .all(|e| matches!(&e.kind, Kind::Masked { text } if text.contains("Content omitted"))));
        assert!(outputs[split..].iter().all(|e| e.is_observation()));
        i += 1;
    }

    // The first condenser that condenses wins: on a request the conversation window answers
    // and the summarizer behind it is never called.
    let s = openhands(OpenhandsConfig::Pipeline(vec![
        OpenhandsConfig::ConversationWindow,
        OpenhandsConfig::V0LlmSummarizing { max_size: 10, keep_first: 1, max_event_length: 10_000 },
    ]));
    let mut msgs = vec![Message::system("sys")];
    msgs.extend((1..12).map(user));
    let mut h = Harness::new(msgs.clone(), roomy());
    let cps = h.step(&s, Moment::Overflow).unwrap();
    assert_eq!(details(&cps[0])["condenser"], "conversation_window");
    assert!(h.summarizer.requests().is_empty());
    let mut h = Harness::new(msgs, roomy());
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(details(&cps[0])["condenser"], "llm_summarizing");
    assert_eq!(h.summarizer.requests().len(), 1);
}

#[test]
fn case_09_view_inserts_summary_at_offset() {
    let s = openhands(sdk_config(80, 4));
    for k in 0..5 {
        let mut log = Log::from_messages((0..5).map(user));
        log.push_checkpoint(recorded_checkpoint(&[], Some("My Summary"), Some(k)));
        let view = s.project(&log);
        assert_eq!(view.len(), 6);
        assert_eq!(view.messages[k].message, Message::user("My Summary"));
        assert_eq!(view.messages[k].origin, Origin::Summary(compactbench_core::EntryId(5)));
        let rest: Vec<Message> =
            view.messages.iter().enumerate().filter(|(i, _)| *i != k).map(|(_, m)| m.message.clone()).collect();
        assert_eq!(rest, (0..5).map(user).collect::<Vec<_>>(), "events before it unchanged, after it shifted by one");
    }
    // Without a summary (or an offset) nothing is inserted.
    let mut log = Log::from_messages((0..5).map(user));
    log.push_checkpoint(recorded_checkpoint(&[1], None, Some(2)));
    assert_eq!(ids(&s.project(&log)), ["e0", "e2", "e3", "e4"]);
}

#[test]
fn case_10_condensation_events_stay_out_of_view_and_requests_are_handled() {
    let s = openhands(sdk_config(10, 2));
    let mut msgs = vec![Message::system("sys")];
    msgs.extend((1..8).map(user));
    let mut h = Harness::new(msgs, roomy());
    // No pressure, no request: nothing to do.
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    // An overflow is a condensation request, which this condenser handles.
    assert_eq!(h.decide(&s, Moment::Overflow), Decision::compact("request"));
    let cps = h.step(&s, Moment::Overflow).unwrap();
    assert_eq!(details(&cps[0])["reasons"], json!(["request"]));
    // The condensation handled the request: the next step has nothing pending.
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    // The checkpoint itself never shows; only its summary does.
    let view = h.view(&s);
    assert!(view.messages.iter().all(|m| matches!(m.origin, Origin::Entry(_) | Origin::Summary(_))));
    assert_eq!(view.messages.iter().filter(|m| matches!(m.origin, Origin::Summary(_))).count(), 1);

    // V0: the conversation window acts on requests only.
    let s = openhands(OpenhandsConfig::ConversationWindow);
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    assert_eq!(h.decide(&s, Moment::Overflow), Decision::compact("request"));
    // Condensers without a request handler leave an overflow alone.
    let s = openhands(OpenhandsConfig::ObservationMasking { attention_window: 100 });
    assert_eq!(h.decide(&s, Moment::Overflow), Decision::Skip);
}

#[test]
fn case_11_sdk_max_size_10_keep_first_3() {
    let s = openhands(sdk_config(10, 3));
    let mut h = Harness::new((0..11).map(user), roomy());
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("events"));
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    let d = details(&cps[0]);
    assert_eq!(d["summary_offset"], 3);
    assert_eq!(d["forgotten"], json!([3, 4, 5, 6, 7, 8, 9]));
    assert_eq!(h.summarizer.requests().len(), 1);
    assert_eq!(ids(&h.view(&s)), ["e0", "e1", "e2", "S11", "e10"]);
}

#[test]
fn case_12_requirements_soft_hard_and_hard_reset() {
    // No reason: nothing.
    let s = openhands(sdk_config(10, 2));
    let mut h = Harness::new((0..5).map(user), roomy());
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    assert!(h.compact(&s, Moment::BeforeRequest).unwrap().is_empty());

    // Events only: soft. A failing summarizer leaves the view as it is, without a reset.
    assert_eq!(sdk::condenser::Summarizing::requirement(&[sdk::condenser::Reason::Events]), Some(sdk::condenser::Requirement::Soft));
    let mut h = Harness::new((0..11).map(user), roomy());
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    let before = h.view(&s);
    assert!(h.step(&s, Moment::BeforeRequest).unwrap().is_empty());
    assert_eq!(h.view(&s), before);
    assert_eq!(h.summarizer.requests().len(), 1);

    // Tokens and requests: hard.
    assert_eq!(
        sdk::condenser::Summarizing::requirement(&[sdk::condenser::Reason::Tokens, sdk::condenser::Reason::Events]),
        Some(sdk::condenser::Requirement::Hard)
    );
    assert_eq!(sdk::condenser::Summarizing::requirement(&[sdk::condenser::Reason::Request]), Some(sdk::condenser::Requirement::Hard));
    assert_eq!(sdk::condenser::Summarizing::requirement(&[]), None);
    let mut msgs = vec![Message::system("sys")];
    msgs.extend((0..6).map(|n| Message::user(format!("{n}{}", " word".repeat(100)))));
    let mut h = Harness::new(msgs.clone(), model(500, 100));
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("tokens"));
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(details(&cps[0])["reasons"], json!(["tokens"]));
    // LiteLLM's count (cl100k_base for "test-model"): 3 for the reply, 3 + 1 + 1 for the
    // system prompt, 3 + 1 + 101 for the first user message and 101 for each later one (plain
    // user messages merge into one turn): 618 over a cap of 500. After the head (2 events),
    // cut the shortest prefix worth more than 618 - 250 tokens (four events of 101), keeping one.
    assert_eq!(details(&cps[0])["forgotten"], json!([2, 3, 4, 5]));

    // Hard, but no regular condensation is possible (the request's tail length is negative):
    // hard context reset, the summary right after the system prompt.
    let s = openhands(sdk_config(10, 3));
    let mut h = Harness::new(msgs.clone(), roomy());
    let cps = h.step(&s, Moment::Overflow).unwrap();
    assert_eq!(details(&cps[0])["hard_reset"], true);
    assert_eq!(details(&cps[0])["summary_offset"], 1);
    assert_eq!(ids(&h.view(&s)), ["e0", "S7"]);
    assert_eq!(h.summarizer.requests()[0].purpose, "hard-context-reset");
    // Without a system prompt the summary goes to offset 0.
    let mut h = Harness::new((0..6).map(user), roomy());
    let cps = h.step(&s, Moment::Overflow).unwrap();
    assert_eq!(details(&cps[0])["summary_offset"], 0);
    assert_eq!(ids(&h.view(&s)), ["S6"]);

    // Hard with a failing summarizer: the reset retries and succeeds.
    let s = openhands(sdk_config(10, 2));
    let mut log = Log::from_messages(msgs.clone());
    let flaky = Flaky::new(2);
    let cps = compact_with(&s, &mut log, &flaky, Moment::Overflow).unwrap();
    assert_eq!(details(&cps[0])["hard_reset"], true);
    assert_eq!(cps[0].summarizer.calls, 3);
    assert_eq!(cps[0].summarizer.failures, 2);
    assert_eq!(ids(&s.project(&log)), ["e0", "S7"]);

    // Hard with a summarizer that always fails: 1 + 5 attempts, later ones with event
    // strings capped, then the original error.
    let mut log = Log::from_messages(msgs.clone());
    let down = Flaky::new(usize::MAX);
    let err = compact_with(&s, &mut log, &down, Moment::Overflow).unwrap_err();
    assert!(err.message.starts_with("Summarization LLM call failed"), "{}", err.message);
    let requests = down.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 6);
    assert!(!requests[1].transcript.contains("<response clipped>"));
    assert!(requests[2].transcript.contains("<response clipped>"));
    assert!(requests[5].transcript.len() < requests[2].transcript.len());
    assert_eq!(log.len(), msgs.len(), "a failed compaction appends nothing");

    // Forgetting less than minimum_progress of the view: no condensation.
    let s = openhands(OpenhandsConfig::LlmSummarizing {
        max_size: 10,
        keep_first: 3,
        max_tokens: None,
        minimum_progress: 0.9,
        hard_context_reset_max_retries: 5,
        hard_context_reset_context_scaling: 0.8,
    });
    let mut h = Harness::new((0..11).map(user), roomy());
    assert!(h.step(&s, Moment::BeforeRequest).unwrap().is_empty());
    assert!(h.summarizer.requests().is_empty());
}

/// The log of the spec's worked example, up to `e10`.
fn worked_example() -> Vec<Message> {
    let mut msgs = vec![Message::system("system prompt"), Message::user("the task")];
    for n in 1..=4 {
        let id = format!("a{n}");
        msgs.push(call(&id));
        msgs.push(result(&id));
    }
    msgs.push(Message::user("a user message"));
    msgs
}

#[test]
fn case_i_worked_example_sdk() {
    let s = openhands(sdk_config(10, 2));
    let mut h = Harness::new(worked_example(), roomy());
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    // The cut may not fall between A4 (e8) and O4 (e9), so it ends at e10.
    assert_eq!(details(&cps[0])["forgotten"], json!([2, 3, 4, 5, 6, 7, 8, 9]));
    assert_eq!(details(&cps[0])["summary_offset"], 2);
    assert_eq!(ids(&h.view(&s)), ["e0", "e1", "S11", "e10"]);
    let request = &h.summarizer.requests()[0];
    assert_eq!(request.transcript.matches("<EVENT>").count(), 8);
    assert!(request.transcript.contains("<EVENT>\nActionEvent (agent)\n  Thought: \n  Action: bash\n</EVENT>"));
    assert!(request
        .transcript
        .contains("<EVENT>\nObservationEvent (environment)\n  Tool: bash\n  Result: output of a1\n</EVENT>"));
    assert!(request.transcript.ends_with("</EVENT>\n"));
    assert!(request.system.contains("TASK_TRACKING"));

    for n in 5..=8 {
        let id = format!("a{n}");
        h.push(call(&id));
        h.push(result(&id));
    }
    assert_eq!(h.view(&s).len(), 12);
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    // The old summary is forgotten too and fed back as one of the events.
    assert_eq!(details(&cps[0])["forgotten_summaries"], json!([11]));
    assert_eq!(details(&cps[0])["forgotten"], json!([10, 12, 13, 14, 15, 16, 17]));
    assert_eq!(ids(&h.view(&s)), ["e0", "e1", "S20", "e18", "e19"]);
    assert!(h.summarizer.requests()[1]
        .transcript
        .starts_with("<EVENT>\nCondensationSummaryEvent (environment)\n  user: SUMMARY 1 of condensation\n</EVENT>"));
}

#[test]
fn case_i_worked_example_v0_orphans_an_observation() {
    let s = openhands(OpenhandsConfig::V0LlmSummarizing { max_size: 10, keep_first: 2, max_event_length: 10_000 });
    let mut h = Harness::new(worked_example(), roomy());
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(details(&cps[0])["forgotten_range"], json!([2, 8]));
    let events = v0_events(&s, &h.log);
    assert_eq!(events.len(), 5, "[e0, e1, summary, O4, e10]");
    assert!(events[3].is_observation());
    // O4 has no visible action, so V0's message builder never sends it.
    assert_eq!(ids(&h.view(&s)), ["e0", "e1", "S11", "e10"]);
}

#[test]
fn sdk_cuts_keep_batches_and_thinking_loops_whole() {
    // A parallel batch: one assistant message with two calls, then two results.
    let batch = Message::new(
        Role::Assistant,
        vec![
            Part::text("two at once"),
            Part::ToolCall { id: "p1".into(), name: "bash".into(), args: json!({}) },
            Part::ToolCall { id: "p2".into(), name: "bash".into(), args: json!({}) },
        ],
    );
    let log = Log::from_messages([user(0), batch.clone(), result("p1"), result("p2"), user(4)]);
    let events = sdk_events(&log);
    assert_eq!(events.len(), 6, "two action events, two observations");
    let ok = sdk::view::manipulation_indices(&events);
    assert_eq!(ok, [true, true, false, false, false, true, true]);

    // A thinking tool loop: cuts only before its first action or after its last event.
    let thinking = Message::new(
        Role::Assistant,
        vec![
            Part::Reasoning { text: "hmm".into() },
            Part::ToolCall { id: "t1".into(), name: "bash".into(), args: json!({}) },
        ],
    );
    let log = Log::from_messages([user(0), thinking, result("t1"), call("t2"), result("t2"), user(5)]);
    let ok = sdk::view::manipulation_indices(&sdk_events(&log));
    assert_eq!(ok, [true, true, false, false, false, true, true]);

    // The view renders the batch back as the one message it was.
    let s = openhands(sdk_config(80, 4));
    let log = Log::from_messages([user(0), batch.clone(), result("p1"), result("p2")]);
    assert_eq!(s.project(&log).messages[1].message, batch);
}

#[test]
fn sdk_property_enforcement_drops_orphans() {
    // A condensation recorded by hand that forgets only an action: its observation would
    // be orphaned, so the view drops it too.
    let s = openhands(sdk_config(80, 4));
    let mut log = Log::from_messages([user(0), call("c1"), result("c1"), user(3)]);
    log.push_checkpoint(recorded_checkpoint(&[1], None, None));
    assert_eq!(ids(&s.project(&log)), ["e0", "e3"]);
}

#[test]
fn v0_request_on_short_view_fails_like_v0() {
    // A request while the view is far below max_size: the tail is longer than the view, the
    // forgotten range is empty, and V0's `min()` raises (OpenHands#11332's scenario).
    let s = openhands(OpenhandsConfig::V0LlmSummarizing { max_size: 100, keep_first: 1, max_event_length: 10_000 });
    let mut h = Harness::new((0..8).map(user), roomy());
    assert_eq!(h.decide(&s, Moment::Overflow), Decision::compact("request"));
    let err = h.step(&s, Moment::Overflow).unwrap_err();
    assert_eq!(err.kind, ErrorKind::NothingToCompact);
}

#[test]
fn v0_pipeline_transforms_drop_the_condensation_request() {
    // V0's masking, browser output and recent events condensers return a new
    // `View(events=...)`, which carries no `unhandled_condensation_request` (openhands-ai 1.0.0,
    // `observation_masking_condenser.py`, `view.py`): a summarizer after one condenses on
    // max_size only. The no-op condenser returns the view it got, request and all.
    let summarizing = OpenhandsConfig::V0LlmSummarizing { max_size: 100, keep_first: 1, max_event_length: 10_000 };
    let masked = openhands(OpenhandsConfig::Pipeline(vec![
        OpenhandsConfig::ObservationMasking { attention_window: 100 },
        summarizing.clone(),
    ]));
    let mut h = Harness::new((0..8).map(user), roomy());
    assert_eq!(h.decide(&masked, Moment::Overflow), Decision::Skip);
    assert!(h.step(&masked, Moment::Overflow).unwrap().is_empty());
    let noop = openhands(OpenhandsConfig::Pipeline(vec![OpenhandsConfig::NoOp, summarizing]));
    assert_eq!(h.decide(&noop, Moment::Overflow), Decision::compact("request"));
}

#[test]
fn v0_keep_first_one_puts_the_first_user_message_back() {
    // keep_first 1 keeps only the system prompt; the summary lands second, so V0's message
    // builder re-inserts the first user message before it.
    let s = openhands(OpenhandsConfig::V0LlmSummarizing { max_size: 10, keep_first: 1, max_event_length: 10_000 });
    let mut msgs = vec![Message::system("sys")];
    msgs.extend((1..=10).map(user));
    let mut h = Harness::new(msgs, roomy());
    h.step(&s, Moment::BeforeRequest).unwrap();
    let view = h.view(&s);
    assert_eq!(ids(&view), ["e0", "e1", "S11", "e8", "e9", "e10"]);
}

#[test]
fn v0_conversation_window_keeps_essentials_and_half() {
    let s = openhands(OpenhandsConfig::ConversationWindow);
    let mut msgs = vec![Message::system("sys"), user(1)];
    for n in 0..4 {
        let id = format!("c{n}");
        msgs.push(call(&id));
        msgs.push(result(&id));
    }
    let mut h = Harness::new(msgs, roomy());
    let cps = h.step(&s, Moment::Overflow).unwrap();
    // 8 non-essential events: keep the newest 4, which start on a call (e6).
    assert_eq!(details(&cps[0])["forgotten_range"], json!([2, 5]));
    assert_eq!(ids(&h.view(&s)), ["e0", "e1", "e6", "e7", "e8", "e9"]);

    // Only essentials left: the condensation forgets nothing (OpenHands#10873).
    let mut h = Harness::new([Message::system("sys"), user(1)], roomy());
    let cps = h.step(&s, Moment::Overflow).unwrap();
    assert_eq!(details(&cps[0])["forgotten"], json!([]));
    assert_eq!(ids(&h.view(&s)), ["e0", "e1"]);
}

#[test]
fn v0_structured_summary_renders_state_summary() {
    let s = openhands(OpenhandsConfig::StructuredSummary { max_size: 10, keep_first: 1, max_event_length: 10_000 });
    let mut h = Harness::new((0..11).map(user), roomy());
    h.summarizer =
        FakeSummarizer::new(FakeMode::Fixed(r#"{"user_context": "build X", "pending_tasks": "tests"}"#.into()));
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    let summary = cps[0].summary.as_ref().unwrap().text();
    assert!(summary.starts_with("# State Summary\n\n## Core Information\n\n**User Context**: build X"));
    assert!(summary.contains("**Pending Tasks**: tests"));
    assert!(h.summarizer.requests()[0].instructions.contains("create_state_summary"));

    // Not the function's arguments: an empty state summary, still applied.
    let mut h = Harness::new((0..11).map(user), roomy());
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert!(cps[0].summary.as_ref().unwrap().text().contains("**User Context**: \n"));
}

#[test]
fn variants_have_unique_ids_default_first() {
    let all = variants();
    assert_eq!(all[0].info().id, "openhands");
    assert_eq!(strategy().info().id, "openhands");
    let mut ids: Vec<&str> = all.iter().map(|s| s.info().id.as_str()).collect();
    assert!(ids[1..].iter().all(|id| id.starts_with("openhands/")));
    assert!(ids.contains(&"openhands/llm-summarizing"));
    assert!(ids.contains(&"openhands/pipeline"));
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n);
}

/// Found by the strategy property suite (crates/eval/tests/fuzz_strategies.rs): when the SDK
/// view keeps only some events of a batch (a condensation forgot the observations of two of
/// three parallel calls, so tool-call matching dropped those calls), the rest of the assistant
/// message was still labelled `Origin::Entry`, which promises the log message as it is (the
/// runner caches token counts on that promise).
#[test]
fn sdk_render_labels_a_message_shown_in_part_as_replaced() {
    let both = Message::new(
        Role::Assistant,
        vec![
            Part::ToolCall { id: "a".into(), name: "bash".into(), args: json!({ "command": "ls" }) },
            Part::ToolCall { id: "b".into(), name: "bash".into(), args: json!({ "command": "pwd" }) },
        ],
    );
    let log = Log::from_messages([Message::system("sys"), user(1), both, result("a"), result("b"), Message::assistant("done")]);
    let e = compactbench_core::EntryId;
    // The view's rules dropped call `b` and its result.
    let events: Vec<Event> = Stream::of(&log)
        .events()
        .filter(|ev| !matches!(&ev.kind, Kind::Observation { call_id, .. } if &**call_id == "b"))
        .filter(|ev| !(ev.entry == Some(e(2)) && *ev.parts == [1]))
        .cloned()
        .collect();
    let view = render::materialize(&log, &sdk::messages::events_to_messages(&log, &events));
    let shown: Vec<(Origin, usize)> = view.messages.iter().map(|m| (m.origin, m.message.parts.len())).collect();
    // Shown through the message itself, as no checkpoint exists yet.
    assert_eq!(shown, [(Origin::Entry(e(0)), 1), (Origin::Entry(e(1)), 1), (Origin::Replaced(e(2), e(2)), 1), (Origin::Entry(e(3)), 1), (Origin::Entry(e(5)), 1)]);
    for m in &view.messages {
        if let Origin::Entry(id) = m.origin {
            assert_eq!(log.message(id), Some(&m.message), "{id} is shown as it is");
        }
    }
}

#[test]
fn merged_forgetting_forgets_what_any_condensation_forgets() {
    let e = compactbench_core::EntryId;
    let recorded = |details: serde_json::Value| {
        let mut cp = Checkpoint::new(compactbench_core::CheckpointKind::Truncate, compactbench_core::Window::Inherit);
        cp.details = details;
        cp.details[DETAILS_TAG] = json!(CONDENSATION);
        Recorded::read(&cp).expect("a condensation")
    };
    let recorded = [
        recorded(json!({ "forgotten": [3, 40], "forgotten_range": [5, 9] })),
        // Overlapping, adjacent and empty ranges, a summary forgotten.
        recorded(json!({ "forgotten_range": [8, 12], "forgotten_summaries": [7] })),
        recorded(json!({ "forgotten_range": [13, 13] })),
        recorded(json!({ "forgotten_range": [30, 20] })),
        recorded(json!({ "forgotten_range": [-1, 0], "forgotten": [25] })),
    ];
    let merged = Forgetting::of(&recorded);
    let mut forgotten = Vec::new();
    for n in 0..50 {
        let id = EventId::Stream(n);
        assert_eq!(merged.forgets(id), recorded.iter().any(|r| r.forgotten.forgets(id)), "stream {n}");
        if merged.forgets(id) {
            forgotten.push(n);
        }
    }
    assert_eq!(forgotten, [0, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 25, 40]);
    for (id, expected) in [(EventId::Summary(e(7)), true), (EventId::Summary(e(8)), false), (EventId::Invalid, false)] {
        assert_eq!(merged.forgets(id), expected, "{id:?}");
    }
}

/// The SDK's token count (`tokens.rs`).
mod tokens {
    use compactbench_core::{Log, Message, Part, Role};
    use serde_json::json;

    use compactbench_core::Encoding;

    use crate::event::Event;
    use crate::tokens::{encoding, Counter, TOOL_TEXT_LIMIT, TRUNCATE_NOTICE};
    use crate::truncate;

    fn total(model: &str, messages: Vec<Message>) -> u64 {
        let log = Log::from_messages(messages);
        let events: Vec<Event> = crate::stream::Stream::of(&log).events().cloned().collect();
        Counter::new(compactbench_testkit::tokenizer(), model).total(&log, &events)
    }

    fn turn() -> Vec<Message> {
        vec![
            Message::system("be brief"),
            Message::user("Καλημέρα κόσμε"),
            Message::new(
                Role::Assistant,
                vec![
                    Part::Reasoning { text: "hm, long thinking here".into() },
                    Part::text("looking"),
                    Part::ToolCall { id: "a1".into(), name: "read".into(), args: json!({"path": "a.rs"}) },
                    Part::ToolCall { id: "b1".into(), name: "grep".into(), args: json!({"q": "x"}) },
                ],
            ),
            Message::tool_result("a1", "read", "fn main() {}", false),
            Message::tool_result("b1", "grep", "denied", true),
        ]
    }

    #[test]
    fn counts_match_the_sdk_on_the_scenario_models() {
        // Measured with openhands-sdk 1.58.2 (LiteLLM 1.105.7, tiktoken 0.14.0):
        // get_total_token_count(events, LLM(model=…)) over the same events as the exporter
        // writes them (fidelity/openhands/driver.py reads them back).
        assert_eq!(total("claude-sonnet-4", turn()), 73);
        assert_eq!(total("gpt-4.1", turn()), 64);
        // Two plain user messages are one turn.
        let users = || vec![Message::user("Καλημέρα κόσμε"), Message::user("Καλημέρα κόσμε")];
        assert_eq!(total("claude-sonnet-4", users()), 35);
        assert_eq!(total("gpt-4.1", users()), 19);
        // A tool output of 76 890 code points: truncated to 50 000 with the SDK's notice, then
        // counted in 1024-code-point chunks.
        let big: String = (0..3000).map(|i| format!("line {i}: ünïcode 😀 text\n")).collect();
        let out = || vec![Message::tool_result("a1", "read", big.clone(), false)];
        assert_eq!(total("claude-sonnet-4", out()), 22597);
        assert_eq!(total("gpt-4.1", out()), 20638);
    }

    #[test]
    fn encodings_follow_litellm() {
        assert_eq!(encoding("gpt-5"), Encoding::O200kBase);
        assert_eq!(encoding("gpt-4o-mini"), Encoding::O200kBase);
        assert_eq!(encoding("o3"), Encoding::O200kBase);
        assert_eq!(encoding("claude-sonnet-4"), Encoding::Cl100kBase);
        assert_eq!(encoding("gemini-2.5-pro"), Encoding::Cl100kBase);
        assert_eq!(encoding("openai/gpt-4o"), Encoding::Cl100kBase);
    }

    #[test]
    fn tool_text_truncation_keeps_head_notice_and_tail() {
        let text = "a".repeat(60_000) + "z";
        let t = truncate::sdk(&text, TOOL_TEXT_LIMIT, TRUNCATE_NOTICE);
        assert_eq!(t.chars().count(), TOOL_TEXT_LIMIT);
        assert!(t.ends_with('z') && t.contains(TRUNCATE_NOTICE));
        assert_eq!(t.find(TRUNCATE_NOTICE), Some(24_944));
        assert_eq!(truncate::sdk("short", TOOL_TEXT_LIMIT, TRUNCATE_NOTICE), "short");
    }
}

/// The replay law on a session that reaches what the shipped scenarios do not: browser
/// outputs, parallel calls, thinking tool loops, several results in one tool message, long
/// results, and condensers outside the report rows.
#[test]
fn replay_equals_the_from_scratch_functions_on_every_condenser() {
    let mut session = vec![Message::system("sys"), user(0)];
    for n in 0..40 {
        let (a, b) = (format!("a{n}"), format!("b{n}"));
        let text = if n % 7 == 0 { "y".repeat(31_000) } else { format!("out {n}") };
        match n % 4 {
            0 => {
                session.push(Message::tool_call(&*a, "browser", json!({ "url": format!("https://site/{n}") })));
                session.push(Message::tool_result(&*a, "browser", text, false));
            }
            1 => {
                let parts = vec![
                    Part::Reasoning { text: "hm".into() },
                    Part::ToolCall { id: a.clone(), name: "bash".into(), args: json!({}) },
                    Part::ToolCall { id: b.clone(), name: "bash".into(), args: json!({}) },
                ];
                session.push(Message::new(Role::Assistant, parts));
                let results = vec![
                    Part::ToolResult { call_id: a, name: "bash".into(), text, is_error: false },
                    Part::ToolResult { call_id: b, name: "bash".into(), text: "done".into(), is_error: true },
                ];
                session.push(Message::new(Role::Tool, results));
            }
            2 => {
                session.push(call(&a));
                session.push(Message::tool_result(&*a, "bash", text, false));
            }
            _ => {
                session.push(Message::assistant(format!("step {n}")));
                session.push(user(n));
            }
        }
    }
    let configs = [
        sdk_config(20, 2),
        OpenhandsConfig::NoOp,
        OpenhandsConfig::V0LlmSummarizing { max_size: 20, keep_first: 2, max_event_length: 10_000 },
        OpenhandsConfig::StructuredSummary { max_size: 20, keep_first: 1, max_event_length: 10_000 },
        OpenhandsConfig::AmortizedForgetting { max_size: 20, keep_first: 1 },
        OpenhandsConfig::LlmAttention { max_size: 20, keep_first: 1 },
        OpenhandsConfig::ObservationMasking { attention_window: 5 },
        OpenhandsConfig::BrowserOutput { attention_window: 1 },
        OpenhandsConfig::RecentEvents { keep_first: 1, max_events: 12 },
        OpenhandsConfig::ConversationWindow,
        OpenhandsConfig::Pipeline(vec![
            OpenhandsConfig::BrowserOutput { attention_window: 2 },
            OpenhandsConfig::ObservationMasking { attention_window: 8 },
            OpenhandsConfig::V0LlmSummarizing { max_size: 24, keep_first: 4, max_event_length: 10_000 },
        ]),
    ];
    for config in configs {
        let s = openhands(config);
        // A window small enough that overflow requests happen too.
        compactbench_testkit::assert_replay_law(&s, &model(30_000, 4_096), &session, 2);
    }
}
