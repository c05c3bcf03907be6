//! Section (j) cases of shared/specs/pi.md, the section (i) worked example (canonical and
//! 0.73.1), and the failure rules of section (g).

use compactbench_core::request::{lower, validate};
use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Decision, EntryId, ErrorKind, Failure, Message, Moment, Origin, Part, Role, Shape,
    StopReason, Strategy, Summarizer, Summary, SummaryRequest, Usage, VirtualStore, Window,
};
use compactbench_testkit::{json, model, FakeMode, FakeSummarizer, Harness};

use crate::cut::find_cut_point;
use crate::prepare::prepare_compaction;
use crate::session::{
    branch_path, build_session_context, calculate_context_tokens, estimate_context_tokens, last_valid_usage,
    ProviderUsage, COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX,
};
use crate::summarize::serialize_conversation;
use crate::trigger::{is_context_overflow, should_compact};
use crate::{PiConfig, PiStrategy, Release};

// ---------------------------------------------------------------------------------------------
// Fixtures

/// `n` chars: `label`, then `.` padding.
fn padded(label: &str, n: usize) -> String {
    assert!(label.len() <= n, "{label} does not fit in {n} chars");
    format!("{label}{}", ".".repeat(n - label.len()))
}

/// A user message of exactly `tokens` Pi estimate.
fn user(label: &str, tokens: usize) -> Message {
    Message::user(padded(label, tokens * 4))
}

/// An assistant text reply of exactly `tokens`, with provider usage `total` if given.
fn reply(label: &str, tokens: usize, total: Option<u64>) -> Message {
    let mut m = Message::assistant(padded(label, tokens * 4));
    m.usage = total.map(|t| Usage { input: t - tokens as u64, output: tokens as u64, ..Default::default() });
    m
}

/// An assistant tool call of exactly `tokens` (text + name + JSON arguments).
fn call(label: &str, name: &str, args: serde_json::Value, tokens: usize) -> Message {
    let fixed = name.len() + args.to_string().len();
    Message::new(
        Role::Assistant,
        vec![
            Part::text(padded(label, tokens * 4 - fixed)),
            Part::ToolCall { id: label.into(), name: name.into(), args },
        ],
    )
}

/// The result of the call labelled `call_label`, of exactly `tokens`.
fn result(call_label: &str, name: &str, label: &str, tokens: usize) -> Message {
    Message::tool_result(call_label, name, padded(label, tokens * 4), false)
}

fn with_usage(mut m: Message, input: u64, output: u64) -> Message {
    m.usage = Some(Usage { input, output, ..Default::default() });
    m
}

/// A failed reply: no usage; its text stands for the provider's error message.
fn failed(error: &str) -> Message {
    Message::new(Role::Assistant, if error.is_empty() { vec![] } else { vec![Part::text(error)] })
}

/// A checkpoint shaped as Pi's compaction entry.
fn pi_checkpoint(summary: &str, first_kept: EntryId) -> Checkpoint {
    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::From(first_kept))
        .with_summary(Message::user(format!("{COMPACTION_SUMMARY_PREFIX}{summary}{COMPACTION_SUMMARY_SUFFIX}")));
    cp.details = json!({ "summary": summary, "readFiles": [], "modifiedFiles": [] });
    cp
}

/// A harness whose entries have names, so views can be compared by name.
struct Session {
    h: Harness,
    names: Vec<(EntryId, String)>,
}

impl Session {
    fn new(window: u64) -> Session {
        let mut s = Session { h: Harness::new([], model(window, 8192)), names: Vec::new() };
        s.push("system", Message::system("You are a coding agent."));
        s
    }

    fn push(&mut self, name: &str, m: Message) -> EntryId {
        let id = self.h.log.next_id();
        self.h.push(m);
        self.names.push((id, name.into()));
        id
    }

    fn checkpoint(&mut self, cp: Checkpoint) -> EntryId {
        self.h.log.push_checkpoint(cp)
    }

    fn id(&self, name: &str) -> EntryId {
        self.names.iter().find(|(_, n)| n == name).map(|(id, _)| *id).unwrap()
    }

    fn name(&self, id: EntryId) -> &str {
        self.names.iter().find(|(i, _)| *i == id).map(|(_, n)| n.as_str()).unwrap()
    }

    /// The strategy's view by name; a summary shows as `summary`.
    fn labels(&self, s: &dyn Strategy) -> Vec<String> {
        self.h
            .view(s)
            .messages
            .iter()
            .map(|vm| match vm.origin {
                Origin::Summary(_) => "summary".to_owned(),
                o => self.name(o.entry().unwrap()).to_owned(),
            })
            .collect()
    }

    fn decide(&mut self, s: &dyn Strategy, at: Moment) -> Decision {
        self.h.decide(s, at)
    }

    fn compact(&mut self, s: &dyn Strategy, at: Moment) -> Vec<Checkpoint> {
        self.h.compact(s, at).unwrap()
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn pi(config: PiConfig) -> PiStrategy {
    PiStrategy::new(config)
}

/// The last release under the old package name, which the spec's worked example and several
/// (j) cases were checked against (caps from `reserveTokens`, length stops accepted).
fn v073(config: PiConfig) -> PiStrategy {
    PiStrategy::v0_73(config)
}

fn canonical(config: PiConfig) -> PiStrategy {
    PiStrategy::v0_58(config)
}

fn threshold() -> Decision {
    Decision::compact("threshold")
}

fn overflow() -> Decision {
    Decision::compact("overflow")
}

/// The text of the summary message a checkpoint stores, without Pi's wrapper.
fn stored_summary(cp: &Checkpoint) -> String {
    cp.details["summary"].as_str().unwrap().to_owned()
}

// ---------------------------------------------------------------------------------------------
// Section (j)

#[test]
fn case_01_threshold() {
    // A small keep budget: 1.6.0 only compacts when there is something to summarize.
    let config = PiConfig { enabled: true, reserve_tokens: 10_000, keep_recent_tokens: 10 };
    assert!(should_compact(95_000, 100_000, &config));
    assert!(!should_compact(89_000, 100_000, &config));
    assert!(!should_compact(90_000, 100_000, &config), "strict >");
    assert!(!should_compact(95_000, 100_000, &PiConfig { enabled: false, ..config.clone() }));

    // The same through decide at the end of a turn, for both versions.
    for (total, enabled, want) in [
        (95_000, true, threshold()),
        (89_000, true, Decision::Skip),
        (90_000, true, Decision::Skip),
        (90_001, true, threshold()),
        (95_000, false, Decision::Skip),
    ] {
        for s in [pi(PiConfig { enabled, ..config.clone() }), canonical(PiConfig { enabled, ..config.clone() })] {
            let mut session = Session::new(100_000);
            session.push("u", user("question", 10));
            session.push("a", reply("answer", 10, Some(total)));
            assert_eq!(session.decide(&s, Moment::TurnEnd), want, "{} total {total} enabled {enabled}", s.info().id);
        }
    }
}

#[test]
fn case_02_usage_total() {
    let u = ProviderUsage { input: 1000, output: 500, cache_read: 200, cache_write: 100, total_tokens: 1800 };
    assert_eq!(calculate_context_tokens(&u), 1800);
    let zero = ProviderUsage { input: 0, output: 0, cache_read: 0, cache_write: 0, total_tokens: 0 };
    assert_eq!(calculate_context_tokens(&zero), 0);
    // Without `totalTokens` the parts are summed.
    assert_eq!(calculate_context_tokens(&ProviderUsage { total_tokens: 0, ..u }), 1800);
    // Runner usage: total = input + output + cache read + cache write.
    let runner = ProviderUsage::from(Usage { input: 1000, output: 500, cache_read: 200, ..Default::default() });
    assert_eq!(calculate_context_tokens(&runner), 1700);
    let written = ProviderUsage::from(Usage { input: 1000, output: 500, cache_read: 200, cache_write: 100 });
    assert_eq!((written.cache_write, written.total_tokens), (100, 1800));
    assert_eq!(calculate_context_tokens(&written), 1800);
}

#[test]
fn case_03_last_usage_skips_aborted() {
    let mut s = Session::new(100_000);
    s.push("u1", Message::user("Hello"));
    s.push("a1", with_usage(Message::assistant("Hi"), 100, 50));
    s.push("u2", Message::user("How are you?"));
    s.push("a2", failed("Aborted"));
    let path = branch_path(&s.h.log);
    let context = build_session_context(&path);
    let (index, usage) = last_valid_usage(&context).unwrap();
    assert_eq!(usage.input, 100);
    assert_eq!(context[index].id, s.id("a1"));

    // Not aborted: the newest reply counts.
    s.push("u3", Message::user("And now?"));
    s.push("a3", with_usage(Message::assistant("Good"), 200, 100));
    let path = branch_path(&s.h.log);
    assert_eq!(last_valid_usage(&build_session_context(&path)).unwrap().1.input, 200);

    let mut none = Session::new(100_000);
    none.push("u1", Message::user("Hello"));
    let path = branch_path(&none.h.log);
    assert!(last_valid_usage(&build_session_context(&path)).is_none());
}

/// A reply marked failed (`stopReason` `"aborted"` / `"error"`) gives no usage to
/// `getAssistantUsage` even when it carries partial usage (Anthropic reports the prompt at
/// `message_start`).
#[test]
fn marked_failed_replies_with_partial_usage_are_skipped_by_the_usage_lookup() {
    for failure in [Failure::Aborted, Failure::Error] {
        let mut s = Session::new(100_000);
        s.push("u1", Message::user("Hello"));
        s.push("a1", with_usage(Message::assistant("Hi"), 100, 50));
        s.push("u2", Message::user("How are you?"));
        let mut partial = with_usage(Message::assistant("I am"), 5_000, 1);
        partial.failure = Some(failure);
        s.push("a2", partial);
        let path = branch_path(&s.h.log);
        let context = build_session_context(&path);
        let (index, usage) = last_valid_usage(&context).unwrap();
        assert_eq!((context[index].id, usage.input), (s.id("a1"), 100), "{failure:?}");
        // The estimate anchors on a1 and counts the failed reply's content after it.
        let estimate = estimate_context_tokens(&context, Release::Npm1_6_0);
        assert_eq!(estimate.last_usage_index, Some(index), "{failure:?}");
        assert!(estimate.tokens < 1_000, "{failure:?}: {}", estimate.tokens);
    }
}

/// Pi's check before the next prompt (`_checkCompaction(lastAssistant, false)`) reads an
/// aborted reply's partial usage directly; an errored reply's is skipped for the estimate.
#[test]
fn the_turn_end_check_reads_an_aborted_replys_partial_usage_as_the_pre_prompt_check_does() {
    let config = PiConfig { keep_recent_tokens: 1, ..PiConfig::default() };
    let session = |failure: Failure, input: u64| {
        let mut s = Session::new(200_000);
        s.push("u1", Message::user("hello"));
        s.push("a1", reply("ok", 1, Some(1_000)));
        s.push("u2", Message::user("another prompt"));
        let mut partial = with_usage(Message::assistant("partial"), input, 1);
        partial.failure = Some(failure);
        s.push("a2", partial);
        s
    };
    for strategy in [pi(config.clone()), v073(config.clone()), canonical(config.clone())] {
        let id = strategy.info().id.clone();
        // Aborted with a prompt over the threshold: compacts (the estimate from a1 would not).
        assert_eq!(session(Failure::Aborted, 190_000).decide(&strategy, Moment::TurnEnd), threshold(), "{id}");
        assert_eq!(session(Failure::Aborted, 100_000).decide(&strategy, Moment::TurnEnd), Decision::Skip, "{id}");
        // Errored: the estimate from a1, under the threshold.
        assert_eq!(session(Failure::Error, 190_000).decide(&strategy, Moment::TurnEnd), Decision::Skip, "{id}");
    }
    // An aborted reply is never an overflow, whatever its text or prompt; an errored one's
    // text is tested.
    let mut aborted = with_usage(Message::assistant("prompt is too long: 213462 tokens > 200000 maximum"), 250_000, 1);
    aborted.failure = Some(Failure::Aborted);
    assert!(!is_context_overflow(&aborted, 200_000, Release::Npm1_6_0));
    let mut errored = aborted.clone();
    errored.failure = Some(Failure::Error);
    assert!(is_context_overflow(&errored, 200_000, Release::Npm1_6_0));
}

/// Measured against `@earendil-works/pi-coding-agent` 1.6.0 (`estimateTokens` →
/// `estimateTextAndImageContentChars`): an image in a user message counts 4800 chars there;
/// 0.73.1 counts a user message's text only.
#[test]
fn user_images_count_in_1_6_0_estimates() {
    let mut s = Session::new(100_000);
    s.push("u1", Message::user("1"));
    s.push("a1", Message::assistant("a"));
    s.push("u2", Message::new(Role::User, vec![Part::text("look"), Part::Media { mime: "image/png".into(), tokens: 1500 }]));
    s.push("a2", Message::assistant("b"));
    let path = branch_path(&s.h.log);
    // 1.6.0: a2 (1) + u2 (1 + 1200) crosses 1000 at u2, which is kept.
    let cut = find_cut_point(&path, 0, path.len(), 1000, Release::Npm1_6_0);
    assert_eq!((cut.first_kept, cut.split), (2, false));
    // 0.73.1: u2 is 1 token; the budget is never reached, everything is kept.
    let cut = find_cut_point(&path, 0, path.len(), 1000, Release::Npm0_73_1);
    assert_eq!((cut.first_kept, cut.split), (0, false));
}

/// Measured against 1.6.0 (fidelity, the late-system input class): a later system message is
/// Pi's own role for a prompt change, which `estimateTokens` counts (`case "system"`), so it
/// moves the cut; no earlier release has the role. Without fresh usage, `tokensBefore` counts
/// it once, joined into the current system message (`getCurrentSystemMessage`).
#[test]
fn a_later_system_message_counts_in_1_6_0() {
    let mut s = Session::new(100_000);
    s.push("u1", Message::user("1"));
    s.push("a1", Message::assistant("a"));
    s.push("late", Message::system("n".repeat(4000)));
    s.push("u2", Message::user("2"));
    s.push("a2", Message::assistant("b"));
    let path = branch_path(&s.h.log);
    // 1.6.0: a2 (1) + u2 (1) + the notice (1000) crosses 1000 at the notice, which is no cut
    // point: the cut is the next one after it, u2.
    let cut = find_cut_point(&path, 0, path.len(), 1000, Release::Npm1_6_0);
    assert_eq!((cut.first_kept, cut.split), (3, false));
    // 0.73.1: the notice counts 0; the budget is never reached, everything is kept.
    let cut = find_cut_point(&path, 0, path.len(), 1000, Release::Npm0_73_1);
    assert_eq!((cut.first_kept, cut.split), (0, false));
    // The current system message: the prompt (23 chars), a blank line and the notice (4000),
    // 1007 tokens; then u1, a1, u2 and a2, one each.
    let context = build_session_context(&path);
    assert_eq!(crate::session::estimate_projected_context_tokens(&path, &context, crate::session::system_chars(&s.h.log)), 1007 + 4);
}

#[test]
fn case_04_degenerate_cuts() {
    let mut s = Session::new(100_000);
    s.push("a", Message::assistant("a"));
    let path = branch_path(&s.h.log);
    let cut = find_cut_point(&path, 0, path.len(), 1000, Release::Npm0_73_1);
    assert_eq!((cut.first_kept, cut.turn_start, cut.split), (0, None, false));

    let mut s = Session::new(100_000);
    s.push("u1", Message::user("1"));
    s.push("a1", with_usage(Message::assistant("a"), 500, 50));
    s.push("u2", Message::user("2"));
    s.push("a2", with_usage(Message::assistant("b"), 1000, 50));
    let path = branch_path(&s.h.log);
    let cut = find_cut_point(&path, 0, path.len(), 50_000, Release::Npm0_73_1);
    assert_eq!((cut.first_kept, cut.split), (0, false));

    // No valid cut point in range: the range start.
    let mut s = Session::new(100_000);
    s.push("r", Message::tool_result("c", "bash", "orphan output", false));
    let path = branch_path(&s.h.log);
    assert_eq!(find_cut_point(&path, 0, path.len(), 1, Release::Npm0_73_1).first_kept, 0);
}

/// The session of case 5; indices 0..=5 are path indices (the system prompt is not on the path).
fn case_05_session() -> Session {
    case_05_session_with(None)
}

/// The session of case 5; with `earlier`, a compaction made mid-turn right after the first
/// message, whose summary is `earlier` and which kept it all.
fn case_05_session_with(earlier: Option<&str>) -> Session {
    let mut s = Session::new(100_000);
    let first = s.push("0 user", user("fix a.ts", 100));
    if let Some(summary) = earlier {
        s.checkpoint(pi_checkpoint(summary, first));
    }
    s.push("1 call", Message::tool_call("1 call", "read", json!({"path": "a.ts"})));
    s.push("2 result", result("1 call", "read", "contents of a.ts", 10_000));
    s.push("3 assistant", reply("a.ts is fixed", 100, None));
    s.push("4 user", user("now the tests", 1_000));
    s.push("5 assistant", reply("tests pass", 100, None));
    s
}

#[test]
fn case_05_cut_after_tool_result_split_turn() {
    let strategy = v073(PiConfig { keep_recent_tokens: 5_000, ..PiConfig::default() });
    let mut s = case_05_session();
    let path = branch_path(&s.h.log);
    let cut = find_cut_point(&path, 0, path.len(), 5_000, Release::Npm0_73_1);
    assert_eq!((cut.first_kept, cut.turn_start, cut.split), (3, Some(0), true), "crossed at the result, cut at 3");

    let cps = s.compact(&strategy, Moment::TurnEnd);
    assert_eq!(cps[0].window, Window::From(s.id("3 assistant")));
    assert_eq!(cps[0].details["isSplitTurn"], true, "the flag is kept for reports");
    assert_eq!(s.labels(&strategy), names(&["system", "summary", "3 assistant", "4 user", "5 assistant"]));

    // No complete turn before the split turn: one call, for the prefix [0, 1, 2]; the call and
    // its result go together into it.
    let requests = s.h.summarizer.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].purpose, "turn-prefix");
    assert_eq!(requests[0].max_output_tokens, 8192);
    assert!(requests[0].transcript.starts_with("<conversation>\n[User]: fix a.ts"));
    assert!(requests[0]
        .transcript
        .contains("[Assistant tool calls]: read(path=\"a.ts\")\n\n[Tool result]: contents of a.ts"));
    assert!(!requests[0].transcript.contains("a.ts is fixed"), "the kept suffix is not summarized");
    assert_eq!(
        stored_summary(&cps[0]),
        "No prior history.\n\n---\n\n**Turn Context (split turn):**\n\nSUMMARY 1 of turn-prefix\n\n<read-files>\na.ts\n</read-files>"
    );
    for shape in Shape::ALL {
        assert_eq!(validate(&lower(&s.h.view(&strategy), shape)), vec![], "{shape:?}");
    }

    // keep 1,100: crossed at the user message 4, which is kept; no split.
    let strategy = pi(PiConfig { keep_recent_tokens: 1_100, ..PiConfig::default() });
    let mut s = case_05_session();
    let path = branch_path(&s.h.log);
    let cut = find_cut_point(&path, 0, path.len(), 1_100, Release::Npm0_73_1);
    assert_eq!((cut.first_kept, cut.split), (4, false));
    let cps = s.compact(&strategy, Moment::TurnEnd);
    assert_eq!(cps[0].details["isSplitTurn"], false);
    assert_eq!(s.labels(&strategy), names(&["system", "summary", "4 user", "5 assistant"]));
    let requests = s.h.summarizer.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].purpose, "history");
    assert!(requests[0].transcript.contains("[Assistant]: a.ts is fixed"), "0..=3 summarized");
    assert!(!requests[0].transcript.contains("now the tests"));
}

#[test]
fn case_06_single_compaction_view() {
    let mut s = Session::new(100_000);
    s.push("u1", Message::user("1"));
    s.push("a1", Message::assistant("a"));
    let u2 = s.push("u2", Message::user("2"));
    s.push("a2", Message::assistant("b"));
    s.checkpoint(pi_checkpoint("Summary of 1,a,2,b", u2));
    s.push("u3", Message::user("3"));
    s.push("a3", Message::assistant("c"));
    let strategy = pi(PiConfig::default());
    assert_eq!(s.labels(&strategy), names(&["system", "summary", "u2", "a2", "u3", "a3"]));
    let view = s.h.view(&strategy);
    assert_eq!(view.messages[1].message.role, Role::User);
    assert!(view.messages[1].message.text().contains("Summary of 1,a,2,b"));
}

#[test]
fn case_07_only_latest_compaction_counts() {
    let mut s = Session::new(100_000);
    let u1 = s.push("u1", Message::user("1"));
    s.push("a1", Message::assistant("a"));
    s.checkpoint(pi_checkpoint("First summary", u1));
    s.push("u2", Message::user("2"));
    s.push("b", Message::assistant("b"));
    let u3 = s.push("u3", Message::user("3"));
    s.push("c", Message::assistant("c"));
    s.checkpoint(pi_checkpoint("Second summary", u3));
    s.push("u4", Message::user("4"));
    s.push("d", Message::assistant("d"));
    let strategy = pi(PiConfig::default());
    assert_eq!(s.labels(&strategy), names(&["system", "summary", "u3", "c", "u4", "d"]));
    let text = s.h.view(&strategy).messages[1].message.text();
    assert!(text.contains("Second summary") && !text.contains("First summary"));
}

#[test]
fn case_08_keep_from_first_entry() {
    let mut s = Session::new(100_000);
    let u1 = s.push("u1", Message::user("1"));
    s.push("a1", Message::assistant("a"));
    s.checkpoint(pi_checkpoint("First summary", u1));
    s.push("u2", Message::user("2"));
    s.push("b", Message::assistant("b"));
    assert_eq!(s.labels(&pi(PiConfig::default())), names(&["system", "summary", "u1", "a1", "u2", "b"]));
}

#[test]
fn case_09_summary_lowering() {
    // 1.6.0 prepares nothing for a session this short (all of it is kept): see
    // `release_1_6_prepares_nothing_without_history`.
    let strategy = v073(PiConfig::default());
    let mut s = Session::new(100_000);
    s.push("u1", Message::user("hello"));
    s.push("a1", Message::assistant("hi"));
    s.h.summarizer = FakeSummarizer::new(FakeMode::Fixed("S".into()));
    let cps = s.compact(&strategy, Moment::TurnEnd);
    let summary = cps[0].summary.as_ref().unwrap();
    assert_eq!(summary.role, Role::User);
    assert_eq!(
        summary.parts,
        vec![Part::text(
            "The conversation history before this point was compacted into the following summary:\n\n<summary>\nS\n</summary>"
        )]
    );
    assert_eq!(cps[0].summary_position, compactbench_core::SummaryPosition::AfterSystem);
    let view = s.h.view(&strategy);
    assert_eq!(view.messages[1].origin, Origin::Summary(EntryId(3)), "first after the system prompt");
}

#[test]
fn case_10_serializer_truncation() {
    let long = Message::tool_result("c", "bash", "x".repeat(5000), false);
    let got = serialize_conversation(&[crate::session::Context::Message(&long)], Release::Npm0_73_1);
    assert_eq!(got, format!("[Tool result]: {}\n\n[... 3000 more characters truncated]", "x".repeat(2000)));

    let short = Message::tool_result("c", "bash", "x".repeat(1500), false);
    assert_eq!(
        serialize_conversation(&[crate::session::Context::Message(&short)], Release::Npm0_73_1),
        format!("[Tool result]: {}", "x".repeat(1500))
    );

    let u = Message::user("u".repeat(5000));
    let a = Message::assistant("a".repeat(5000));
    let got = serialize_conversation(&[crate::session::Context::Message(&u), crate::session::Context::Message(&a)], Release::Npm0_73_1);
    assert_eq!(got, format!("[User]: {}\n\n[Assistant]: {}", "u".repeat(5000), "a".repeat(5000)));

    // Thinking, text and calls in Pi's order, calls as name(key=<JSON>).
    let mixed = Message::new(
        Role::Assistant,
        vec![
            Part::text("plan"),
            Part::Reasoning { text: "think".into() },
            Part::ToolCall { id: "1".into(), name: "edit".into(), args: json!({"path": "a.ts", "n": 2}) },
            Part::ToolCall { id: "2".into(), name: "bash".into(), args: json!({"command": "ls"}) },
        ],
    );
    assert_eq!(
        serialize_conversation(&[crate::session::Context::Message(&mixed)], Release::Npm0_73_1),
        "[Assistant thinking]: think\n\n[Assistant]: plan\n\n[Assistant tool calls]: edit(path=\"a.ts\", n=2); bash(command=\"ls\")"
    );
    // 1.6.0 leaves thinking out of the transcript.
    assert_eq!(
        serialize_conversation(&[crate::session::Context::Message(&mixed)], Release::Npm1_6_0),
        "[Assistant]: plan\n\n[Assistant tool calls]: edit(path=\"a.ts\", n=2); bash(command=\"ls\")"
    );
}

#[test]
fn case_11_already_compacted() {
    let strategy = pi(PiConfig::default());
    let mut s = Session::new(1_000);
    let u1 = s.push("u1", Message::user("hello"));
    s.push("a1", reply("hi", 1, Some(5_000)));
    s.checkpoint(pi_checkpoint("S", u1));
    let path = branch_path(&s.h.log);
    assert!(prepare_compaction(&path, 0, 20_000, Release::Npm0_73_1).is_none());
    assert!(prepare_compaction(&path, 0, 20_000, Release::Canonical0_58).is_none());
    assert_eq!(s.decide(&strategy, Moment::Overflow), Decision::Skip);
    assert_eq!(s.decide(&strategy, Moment::TurnEnd), Decision::Skip);
    assert_eq!(s.h.compact(&strategy, Moment::TurnEnd).unwrap(), vec![]);
    assert!(s.h.summarizer.requests().is_empty());
}

#[test]
fn case_12_overflow_recovery_once() {
    // A failed reply whose error says the prompt is too long, checked after the run. (1.6.0
    // needs something to summarize: a small keep budget.)
    for strategy in [pi(PiConfig { keep_recent_tokens: 10, ..PiConfig::default() }), v073(PiConfig::default()), canonical(PiConfig::default())] {
        let mut s = Session::new(200_000);
        s.push("u1", user("hello", 10));
        s.push("a1", reply("hi", 10, Some(1_000)));
        s.push("u2", user("paste", 10));
        s.push("err1", failed("prompt is too long: 213462 tokens > 200000 maximum"));
        assert_eq!(s.decide(&strategy, Moment::TurnEnd), overflow(), "{}", strategy.info().id);
        let cps = s.compact(&strategy, Moment::TurnEnd);
        assert_eq!(cps[0].details["reason"], "overflow");

        // The retry fails the same way (a newer message): no second compaction.
        s.push("err2", failed("prompt is too long: 213462 tokens > 200000 maximum"));
        assert_eq!(s.decide(&strategy, Moment::TurnEnd), Decision::Skip);

        // A new user message clears the flag.
        s.push("u3", user("try again", 10));
        s.push("err3", failed("prompt is too long"));
        assert_eq!(s.decide(&strategy, Moment::TurnEnd), overflow());
    }

    // The runner's overflow moment: compact once, then not again until a good reply.
    let strategy = pi(PiConfig { keep_recent_tokens: 10, ..PiConfig::default() });
    let mut s = Session::new(200_000);
    s.push("u1", user("hello", 10));
    s.push("a1", call("a1", "bash", json!({"command": "cat big.log"}), 20));
    s.push("r1", result("a1", "bash", "big", 100));
    assert_eq!(s.decide(&strategy, Moment::Overflow), overflow());
    let cps = s.compact(&strategy, Moment::Overflow);
    assert_eq!(cps[0].details["reason"], "overflow");
    s.push("err", failed("529 overloaded"));
    assert_eq!(s.decide(&strategy, Moment::Overflow), Decision::Skip, "already attempted");
    s.push("a2", reply("done", 10, Some(150_000)));
    assert_eq!(s.decide(&strategy, Moment::Overflow), overflow(), "a good reply clears the flag");
    let off = pi(PiConfig { enabled: false, ..PiConfig::default() });
    assert_eq!(s.decide(&off, Moment::Overflow), Decision::Skip, "enabled = false also stops overflow recovery");
}

#[test]
fn case_13_threshold_from_error_reply() {
    // A keep budget of 1 so that 1.6.0 has something to summarize.
    let strategy = pi(PiConfig { keep_recent_tokens: 1, ..PiConfig::default() });
    let mut s = Session::new(200_000);
    s.push("u1", Message::user("hello"));
    s.push("a1", reply("ok", 1, Some(190_000)));
    s.push("u2", Message::user("another prompt"));
    let mut err = failed("");
    err.usage = Some(Usage::default());
    s.push("err", err.clone());
    let path = branch_path(&s.h.log);
    assert_eq!(estimate_context_tokens(&build_session_context(&path), Release::Npm0_73_1).tokens, 190_000 + 4);
    assert_eq!(s.decide(&strategy, Moment::TurnEnd), threshold());

    // Without the successful reply there is no usage at all.
    let mut s = Session::new(200_000);
    s.push("u2", Message::user("another prompt"));
    s.push("err", err.clone());
    assert_eq!(s.decide(&strategy, Moment::TurnEnd), Decision::Skip);

    // The only usage predates the latest compaction.
    let mut s = Session::new(200_000);
    let u1 = s.push("u1", Message::user("hello"));
    s.push("a1", reply("ok", 1, Some(190_000)));
    s.checkpoint(pi_checkpoint("S", u1));
    s.push("u2", Message::user("another prompt"));
    s.push("err", err);
    assert_eq!(s.decide(&strategy, Moment::TurnEnd), Decision::Skip);
}

#[test]
fn case_14_stale_usage_after_compaction() {
    let strategy = pi(PiConfig { keep_recent_tokens: 1, ..PiConfig::default() });
    let mut s = Session::new(200_000);
    let u1 = s.push("u1", Message::user("hello"));
    s.push("a1", reply("ok", 1, Some(610_000)));
    assert_eq!(s.decide(&strategy, Moment::TurnEnd), overflow(), "before the compaction it would trigger");
    s.checkpoint(pi_checkpoint("S", u1));
    assert_eq!(s.decide(&strategy, Moment::TurnEnd), Decision::Skip);
    assert_eq!(s.decide(&canonical(PiConfig::default()), Moment::TurnEnd), Decision::Skip);
}

/// The fixture of earendil-works/pi@247ad32f test/compaction.test.ts "prepareCompaction with
/// previous compaction": texts repeated `short`/`long` times.
fn case_15_session(repeat_short: usize, repeat_long: usize) -> Session {
    let mut s = Session::new(200_000);
    let mock = |m: Message| with_usage(m, 100, 50);
    s.push("u1", Message::user("user msg 1 (summarized by compaction1)".repeat(repeat_short)));
    s.push("a1", mock(Message::assistant("assistant msg 1".repeat(repeat_short))));
    let u2 = s.push("u2", Message::user("user msg 2 - kept by compaction1 ".repeat(repeat_long)));
    s.push("a2", mock(Message::assistant("assistant msg 2 ".repeat(repeat_long))));
    s.push("u3", Message::user("user msg 3 - kept by compaction1 ".repeat(repeat_long)));
    s.push("a3", with_usage(Message::assistant("assistant msg 3 ".repeat(repeat_long)), 5000, 1000));
    s.checkpoint(pi_checkpoint("First summary", u2));
    s.push("u4", Message::user("user msg 4 (new after compaction1) ".repeat(repeat_long)));
    s.push("a4", with_usage(Message::assistant("assistant msg 4 ".repeat(repeat_long)), 8000, 2000));
    s
}

#[test]
fn case_15_repeated_compaction_moving_window() {
    // 0.73.1 (V1): the previous kept messages are still candidates and still fit.
    let mut s = case_15_session(1, 1);
    let path = branch_path(&s.h.log);
    let prep = prepare_compaction(&path, 0, 20_000, Release::Npm0_73_1).unwrap();
    assert_eq!(prep.first_kept, s.id("u2"));
    assert_eq!(prep.previous_summary, Some("First summary"));
    assert!(!serialize_conversation(&prep.to_summarize, Release::Npm0_73_1).contains("First summary"));
    let rebuilt = estimate_context_tokens(&build_session_context(&path), Release::Npm0_73_1).tokens;
    assert_eq!((prep.tokens_before, rebuilt), (10_000, 10_000));
    let strategy = pi(PiConfig::default());
    s.compact(&strategy, Moment::TurnEnd);
    let text: String = s.h.view(&strategy).iter().map(Message::text).collect();
    assert!(text.contains("user msg 2 - kept by compaction1"));
    assert!(text.contains("user msg 3 - kept by compaction1"));
    assert_eq!(s.labels(&strategy), names(&["system", "summary", "u2", "a2", "u3", "a3", "u4", "a4"]));

    // With a 100-token window the old kept messages move into the summary input.
    let s = case_15_session(4, 12);
    let path = branch_path(&s.h.log);
    let prep = prepare_compaction(&path, 0, 100, Release::Npm0_73_1).unwrap();
    let summarized = serialize_conversation(&prep.to_summarize, Release::Npm0_73_1);
    assert!(summarized.contains("user msg 2 - kept by compaction1"));
    assert!(summarized.contains("user msg 3 - kept by compaction1"));
    assert!(!summarized.contains("First summary"));
    assert_eq!(prep.previous_summary, Some("First summary"));
    assert_eq!(prep.first_kept, s.id("u4"));

    // Canonical: only entries after the previous compaction; u2..a3 are dropped.
    let mut s = case_15_session(1, 1);
    let path = branch_path(&s.h.log);
    let prep = prepare_compaction(&path, 0, 20_000, Release::Canonical0_58).unwrap();
    assert_eq!(prep.first_kept, s.id("u4"));
    assert!(prep.to_summarize.is_empty());
    let strategy = canonical(PiConfig::default());
    s.compact(&strategy, Moment::TurnEnd);
    assert_eq!(s.labels(&strategy), names(&["system", "summary", "u4", "a4"]));
    let text: String = s.h.view(&strategy).iter().map(Message::text).collect();
    assert!(!text.contains("user msg 2 - kept by compaction1"), "#2608: lost");
}

// ---------------------------------------------------------------------------------------------
// Section (i): the worked example

/// Entries e1..e14 of the worked example (window 50,000; threshold 33,616).
fn worked_example() -> Session {
    let mut s = Session::new(50_000);
    s.push("e1", user("Fix empty-input crash in parser; do not change the public API", 100));
    s.push("e2", call("e2", "read", json!({"path": "src/parser.ts"}), 50));
    s.push("e3", result("e2", "read", "content of src/parser.ts", 9_000));
    s.push("e4", call("e4", "grep", json!({"pattern": "parse("}), 50));
    s.push("e5", result("e4", "grep", "grep hits", 3_000));
    s.push("e6", reply("plan", 400, None));
    s.push("e7", user("tests still fail + pasted log", 1_500));
    s.push("e8", call("e8", "bash", json!({"command": "npm test"}), 60));
    s.push("e9", result("e8", "bash", "test output", 6_000));
    s.push("e10", call("e10", "edit", json!({"path": "src/parser.ts", "oldText": "a", "newText": "b"}), 300));
    s.push("e11", result("e10", "edit", "edited", 100));
    s.push("e12", call("e12", "bash", json!({"command": "npm test"}), 60));
    s.push("e13", result("e12", "bash", "test output with the remaining failure", 12_000));
    s.push("e14", reply("status", 500, Some(36_000)));
    s
}

/// Entries e15..e22, after the first compaction.
fn worked_example_continued(s: &mut Session) {
    s.push("e15", user("also handle whitespace-only input", 100));
    s.push("e16", call("e16", "read", json!({"path": "src/lexer.ts"}), 50));
    s.push("e17", result("e16", "read", "lexer source", 10_000));
    s.push("e18", call("e18", "edit", json!({"path": "src/parser.ts", "oldText": "c", "newText": "d"}), 300));
    s.push("e19", result("e18", "edit", "edited", 100));
    s.push("e20", call("e20", "bash", json!({"command": "npm test"}), 60));
    s.push("e21", result("e20", "bash", "test output", 4_000));
    s.push("e22", reply("whitespace handled", 400, Some(38_500)));
}

/// Compaction 1 is the same in both versions.
fn worked_example_first_compaction(strategy: &PiStrategy) -> Session {
    let mut s = worked_example();
    assert_eq!(s.decide(strategy, Moment::BeforeRequest), Decision::Skip, "no mid-run check");
    assert_eq!(s.decide(strategy, Moment::TurnEnd), threshold(), "36,000 > 33,616");
    let cps = s.compact(strategy, Moment::TurnEnd);
    assert_eq!(cps[0].window, Window::From(s.id("e7")));
    assert_eq!(cps[0].tokens_before, 36_000);
    assert_eq!(stored_summary(&cps[0]), "SUMMARY 1 of history\n\n<read-files>\nsrc/parser.ts\n</read-files>");
    let request = &s.h.summarizer.requests()[0];
    assert_eq!((request.purpose.as_str(), request.max_output_tokens), ("history", 13_107));
    assert!(request.transcript.starts_with("<conversation>\n[User]: Fix empty-input crash"));
    assert!(request.transcript.contains("[Assistant tool calls]: read(path=\"src/parser.ts\")"));
    assert!(request.transcript.contains("[... 34000 more characters truncated]"), "e3 cut to 2000 chars");
    assert!(!request.transcript.contains("<previous-summary>"));
    assert!(request.instructions.contains("## Goal") && request.instructions.contains("## Critical Context"));
    assert_eq!(s.labels(strategy), names(&["system", "summary", "e7", "e8", "e9", "e10", "e11", "e12", "e13", "e14"]));
    // e14 predates the checkpoint: no second compaction before the user continues.
    assert_eq!(s.decide(strategy, Moment::TurnEnd), Decision::Skip);
    worked_example_continued(&mut s);
    assert_eq!(s.decide(strategy, Moment::TurnEnd), threshold(), "38,500 > 33,616");
    s
}

#[test]
fn worked_example_canonical() {
    let strategy = canonical(PiConfig::default());
    let mut s = worked_example_first_compaction(&strategy);
    let cps = s.compact(&strategy, Moment::TurnEnd);
    assert_eq!(cps[0].window, Window::From(s.id("e15")));
    assert_eq!(cps[0].tokens_before, 38_500);
    assert_eq!(stored_summary(&cps[0]), "SUMMARY 2 of history\n\n<read-files>\nsrc/parser.ts\n</read-files>");
    let requests = s.h.summarizer.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].transcript,
        "<conversation>\n\n</conversation>\n\n<previous-summary>\nSUMMARY 1 of history\n\n<read-files>\nsrc/parser.ts\n</read-files>\n</previous-summary>"
    );
    assert!(requests[1].instructions.contains("<previous-summary>"), "update prompt");
    assert_eq!(
        s.labels(&strategy),
        names(&["system", "summary", "e15", "e16", "e17", "e18", "e19", "e20", "e21", "e22"]),
        "e7..e14 are gone (#2608)"
    );
}

#[test]
fn worked_example_release() {
    let strategy = v073(PiConfig::default());
    let mut s = worked_example_first_compaction(&strategy);
    let cps = s.compact(&strategy, Moment::TurnEnd);
    // Crossed at e13 (a tool result) -> cut at e14, split turn starting at e7.
    assert_eq!(cps[0].window, Window::From(s.id("e14")));
    assert_eq!(cps[0].tokens_before, 38_500);
    assert_eq!(
        stored_summary(&cps[0]),
        "No prior history.\n\n---\n\n**Turn Context (split turn):**\n\nSUMMARY 2 of turn-prefix\n\n\
         <modified-files>\nsrc/parser.ts\n</modified-files>"
    );
    let requests = s.h.summarizer.requests();
    assert_eq!(requests.len(), 2, "no history call");
    assert_eq!((requests[1].purpose.as_str(), requests[1].max_output_tokens), ("turn-prefix", 8_192));
    assert!(requests[1].transcript.starts_with("<conversation>\n[User]: tests still fail"));
    assert!(requests[1].transcript.contains("[Tool result]: test output with the remaining failure"));
    assert!(!requests[1].user_message().contains("SUMMARY 1"), "S1 reaches no call and is lost");
    assert_eq!(
        s.labels(&strategy),
        names(&["system", "summary", "e14", "e15", "e16", "e17", "e18", "e19", "e20", "e21", "e22"])
    );
    for shape in Shape::ALL {
        assert_eq!(validate(&lower(&s.h.view(&strategy), shape)), vec![], "{shape:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Section (g) and the rest

#[test]
fn summarizer_error_appends_nothing() {
    let strategy = pi(PiConfig::default());
    let mut s = worked_example();
    s.h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    let before = s.h.log.len();
    let err = s.h.compact(&strategy, Moment::TurnEnd).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Transport);
    assert!(err.message.starts_with("Auto-compaction failed: Summarization failed: "), "{}", err.message);
    assert_eq!(s.h.log.len(), before);

    let err = s.h.compact(&strategy, Moment::Overflow).unwrap_err();
    assert!(err.message.starts_with("Context overflow recovery failed: "), "{}", err.message);
}

/// A summarizer that always stops at its output cap.
struct CutOff;

impl Summarizer for CutOff {
    fn name(&self) -> &str {
        "cut-off"
    }

    fn summarize(&self, _: &SummaryRequest) -> Result<Summary, compactbench_core::Error> {
        Ok(Summary {
            text: "## Goal\nFix the pars".into(),
            input_tokens: 10,
            output_tokens: 5,
            stop: StopReason::Length,
        })
    }
}

#[test]
fn length_stopped_summary_is_accepted_up_to_0_73_and_rejected_by_1_6() {
    for strategy in [v073(PiConfig::default()), canonical(PiConfig::default())] {
        let s = worked_example();
        let mut store = VirtualStore::new();
        let model = model(50_000, 8192);
        let mut cx = Cx::new(&model, &CutOff, &mut store, compactbench_testkit::tokenizer());
        let view = strategy.project(&s.h.log);
        let cps = strategy.compact(&s.h.log, &view, Moment::TurnEnd, &mut cx).unwrap();
        assert!(stored_summary(&cps[0]).starts_with("## Goal\nFix the pars\n\n<read-files>"));
        assert_eq!(cps[0].summarizer.calls, 1);
    }
    let strategy = pi(PiConfig::default());
    let s = worked_example();
    let mut store = VirtualStore::new();
    let model = model(50_000, 8192);
    let mut cx = Cx::new(&model, &CutOff, &mut store, compactbench_testkit::tokenizer());
    let view = strategy.project(&s.h.log);
    let e = strategy.compact(&s.h.log, &view, Moment::TurnEnd, &mut cx).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Rejected);
    assert_eq!(
        e.message,
        "Auto-compaction failed: Summarization failed: generation hit the token cap and the summary is incomplete"
    );
}

#[test]
fn file_lists_are_carried_and_modified_leaves_read() {
    let strategy = pi(PiConfig { keep_recent_tokens: 10, ..PiConfig::default() });
    let mut s = Session::new(100_000);
    s.push("u1", user("look", 10));
    s.push("c1", call("c1", "read", json!({"path": "b.ts"}), 10));
    s.push("r1", result("c1", "read", "b", 10));
    s.push("c2", call("c2", "write", json!({"path": "z.ts"}), 10));
    s.push("r2", result("c2", "write", "ok", 10));
    s.push("a1", reply("done", 10, None));
    s.push("u2", user("next", 10));
    s.push("a2", reply("ok", 20, None));
    let cps = s.compact(&strategy, Moment::TurnEnd);
    assert_eq!(cps[0].details["readFiles"], json!(["b.ts"]));
    assert_eq!(cps[0].details["modifiedFiles"], json!(["z.ts"]));

    s.push("u3", user("edit b", 10));
    s.push("c3", call("c3", "edit", json!({"path": "b.ts"}), 10));
    s.push("r3", result("c3", "edit", "ok", 10));
    s.push("c4", call("c4", "grep", json!({"path": "ignored.ts"}), 10));
    s.push("r4", result("c4", "grep", "hit", 10));
    s.push("a3", reply("edited", 10, None));
    s.push("u4", user("thanks", 10));
    s.push("a4", reply("bye", 20, None));
    let cps = s.compact(&strategy, Moment::TurnEnd);
    assert_eq!(cps[0].details["readFiles"], json!([]));
    assert_eq!(cps[0].details["modifiedFiles"], json!(["b.ts", "z.ts"]));
    assert!(stored_summary(&cps[0]).ends_with("\n\n<modified-files>\nb.ts\nz.ts\n</modified-files>"));
}

#[test]
fn overflow_patterns_follow_each_release() {
    let check = |text: &str, release| is_context_overflow(&failed(text), 200_000, release);
    for text in [
        "Prompt is too long",
        "input token count 300000 exceeds the maximum of 200000",
        "This model's maximum context length is 128000 tokens",
        "context_length_exceeded",
        "413 status code (no body)",
    ] {
        assert!(check(text, Release::Npm0_73_1), "{text}");
        assert!(check(text, Release::Canonical0_58), "{text}");
    }
    assert!(!check("prefix 413 (no body)", Release::Npm0_73_1), "anchored");
    assert!(!check("maximum context length is many tokens", Release::Npm0_73_1), "needs digits");
    assert!(check("request_too_large", Release::Npm0_73_1));
    assert!(!check("request_too_large", Release::Canonical0_58));
    assert!(check("too many tokens; rate limit reached", Release::Canonical0_58));
    assert!(!check("too many tokens; rate limit reached", Release::Npm0_73_1), "0.73.1 excludes rate limits");
    assert!(!check("529 overloaded", Release::Npm0_73_1));
    // Silent overflow: a good reply whose prompt was larger than the window.
    assert!(is_context_overflow(&reply("ok", 1, Some(200_002)), 200_000, Release::Npm0_73_1));
    assert!(!is_context_overflow(&reply("ok", 1, Some(200_001)), 200_000, Release::Npm0_73_1));
    // pi-ai reads `input + cacheRead` only: cache writes that push the prompt past the window
    // are no overflow (though `calculateContextTokens` counts them).
    let mut written = reply("ok", 1, None);
    written.usage = Some(Usage { input: 150_000, output: 1, cache_read: 40_000, cache_write: 20_000 });
    for release in [Release::Npm1_6_0, Release::Npm0_73_1, Release::Canonical0_58] {
        assert!(!is_context_overflow(&written, 200_000, release));
        assert!(is_context_overflow(&written, 189_999, release));
    }
    assert_eq!(calculate_context_tokens(&ProviderUsage::from(written.usage.unwrap())), 210_001);
}

#[test]
fn variants_name_the_release_and_the_commit() {
    let all = crate::variants();
    let ids: Vec<&str> = all.iter().map(|s| s.info().id.as_str()).collect();
    assert_eq!(ids, ["pi", "pi/v0.73", "pi/v0.58", "pi/v0.14"]);
    assert_eq!(crate::strategy().info().id, "pi");
    assert!(all[0].info().source.contains("@earendil-works/pi-coding-agent@1.6.0"));
    assert!(all[1].info().source.contains("@mariozechner/pi-coding-agent@0.73.1"));
    assert!(all[2].info().source.contains("badlogic/pi-mono@83378aad7e74a0e2bb8f37c007a9685fb4609d8a"));
    assert!(all[3].info().source.contains("badlogic/pi-mono@33a2bcf2031f732a1305b19721b97c69e9bf2c02 (v0.14.2;"));
}

// ---------------------------------------------------------------------------------------------
// What 1.6.0 changed (npm @earendil-works/pi-coding-agent 1.6.0 against 0.73.1)

/// A summarizer that fails its first call with `kind`, then answers.
struct FailsOnce {
    kind: ErrorKind,
    calls: std::sync::atomic::AtomicU32,
}

impl Summarizer for FailsOnce {
    fn name(&self) -> &str {
        "fails-once"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, compactbench_core::Error> {
        if self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0 {
            return Err(compactbench_core::Error::new(self.kind, "first call fails"));
        }
        Ok(Summary { text: format!("ok {}", request.purpose), input_tokens: 10, output_tokens: 2, stop: StopReason::Complete })
    }
}

#[test]
fn release_1_6_checks_between_model_calls() {
    // Threshold 100,000 − 16,384 = 83,616; a keep budget the tool result alone exceeds.
    let config = PiConfig { keep_recent_tokens: 1_000, ..PiConfig::default() };
    let mut s = Session::new(100_000);
    s.push("u1", user("build it", 10));
    s.push("a1", with_usage(call("a1", "bash", json!({"command": "make"}), 20), 80_000, 20));
    s.push("r1", result("a1", "bash", "make output", 4_000));
    // 80,020 of usage + 4,000 estimated after it > 83,616: 1.6.0 compacts before the next
    // call; 0.73.1 and the canonical commit check nothing mid-run.
    assert_eq!(s.decide(&pi(config.clone()), Moment::BeforeRequest), threshold());
    assert_eq!(s.decide(&v073(config.clone()), Moment::BeforeRequest), Decision::Skip);
    assert_eq!(s.decide(&canonical(config.clone()), Moment::BeforeRequest), Decision::Skip);
    let cps = s.compact(&pi(config.clone()), Moment::BeforeRequest);
    assert_eq!(cps[0].details["reason"], "threshold");
    assert_eq!(cps[0].tokens_before, 84_020, "usage plus the estimate of what followed");
    // Right after the compaction the usage predates it: the estimate is rebuilt from the
    // messages (system prompt included), far below the threshold.
    assert_eq!(s.decide(&pi(config.clone()), Moment::BeforeRequest), Decision::Skip);
    // The first call after a user message is not checked here (the turn-end check was).
    let mut s = Session::new(100_000);
    s.push("u1", user("hello", 10));
    s.push("a1", reply("hi", 10, Some(90_000)));
    s.push("u2", user("more", 10));
    assert_eq!(s.decide(&pi(config), Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn release_1_6_caps_at_the_model_limit_and_sends_the_new_turn_prefix_request() {
    let strategy = pi(PiConfig { keep_recent_tokens: 5_000, ..PiConfig::default() });
    let mut s = case_05_session_with(Some("Earlier summary"));
    let cps = s.compact(&strategy, Moment::TurnEnd);
    let requests = s.h.summarizer.requests();
    assert_eq!(requests.len(), 1, "no history call without complete turns");
    assert_eq!((requests[0].purpose.as_str(), requests[0].max_output_tokens), ("turn-prefix", 8192), "the model's output limit");
    assert!(requests[0].transcript.starts_with("# Conversation\n[User]: fix a.ts"), "{}", requests[0].transcript);
    assert!(requests[0].instructions.starts_with("# Instructions\n"));
    assert!(requests[0].instructions.contains("## Progress So Far"));
    // Without complete turns the previous summary is carried over, not lost.
    assert!(stored_summary(&cps[0]).starts_with("Earlier summary\n\n---\n\n**Turn Context (split turn):**"), "{}", stored_summary(&cps[0]));

    // 0.73.1 caps by the reserve and loses the previous summary.
    let mut s = case_05_session_with(Some("Earlier summary"));
    let cps = s.compact(&v073(PiConfig { keep_recent_tokens: 5_000, ..PiConfig::default() }), Moment::TurnEnd);
    assert_eq!(s.h.summarizer.requests()[0].max_output_tokens, 8192, "floor(0.5 × 16,384)");
    assert!(stored_summary(&cps[0]).starts_with("No prior history."));
}

#[test]
fn release_1_6_retries_transient_failures_only() {
    let s = worked_example();
    let model = model(50_000, 8192);
    for (kind, retried) in [(ErrorKind::Timeout, true), (ErrorKind::Transport, true), (ErrorKind::EmptySummary, false)] {
        for (strategy, retries) in [(pi(PiConfig::default()), retried), (v073(PiConfig::default()), false)] {
            let fails = FailsOnce { kind, calls: Default::default() };
            let mut store = VirtualStore::new();
            let mut cx = Cx::new(&model, &fails, &mut store, compactbench_testkit::tokenizer());
            let view = strategy.project(&s.h.log);
            let got = strategy.compact(&s.h.log, &view, Moment::TurnEnd, &mut cx);
            assert_eq!(got.is_ok(), retries, "{} {kind:?}", strategy.info().id);
            if let Ok(cps) = got {
                assert_eq!((cps[0].summarizer.calls, cps[0].summarizer.failures), (2, 1));
            }
        }
    }
}

#[test]
fn release_1_6_prepares_nothing_without_history_and_cuts_at_the_last_call() {
    // All of it fits the keep budget: 0.73.1 still summarizes (an empty conversation), 1.6.0
    // has nothing to summarize and does not compact.
    let mut s = Session::new(100_000);
    s.push("u1", Message::user("hello"));
    s.push("a1", reply("hi", 10, Some(95_000)));
    assert_eq!(s.decide(&v073(PiConfig::default()), Moment::TurnEnd), threshold());
    assert_eq!(s.decide(&pi(PiConfig::default()), Moment::TurnEnd), Decision::Skip);
    assert!(s.compact(&pi(PiConfig::default()), Moment::TurnEnd).is_empty());

    // Trailing tool results over the budget with no cut point after them: 0.73.1 falls back
    // to the first cut point, 1.6.0 to the last (the call of those results).
    let s = case_05_session();
    let path = branch_path(&s.h.log);
    let end = 3; // [0 user, 1 call, 2 result]
    let old = find_cut_point(&path, 0, end, 5_000, Release::Npm0_73_1);
    let new = find_cut_point(&path, 0, end, 5_000, Release::Npm1_6_0);
    assert_eq!((old.first_kept, old.split), (0, false));
    assert_eq!((new.first_kept, new.turn_start, new.split), (1, Some(0), true));
}

// ---------------------------------------------------------------------------------------------
// Pi 0.13.0–0.14.2 (`pi/v0.14`, badlogic/pi-mono tag v0.14.2, before 4227fd59)

fn v014(config: PiConfig) -> PiStrategy {
    PiStrategy::v0_14(config)
}

/// A call of `tokens` estimate whose reply reported `total` context tokens.
fn call_with_usage(label: &str, tokens: usize, total: u64) -> Message {
    with_usage(call(label, "bash", json!({"command": label}), tokens), total - 10, 10)
}

/// Two turns whose replies report `totals` (u1's reply, then c2, c3 and a3 of the second
/// turn), a third turn whose reply reports 45,000; the texts are the same whatever `totals`.
fn v014_session(totals: [u64; 4]) -> Session {
    let mut s = Session::new(200_000);
    s.push("u1", user("first task", 100));
    s.push("a1", reply("first done", 100, Some(totals[0])));
    s.push("u2", user("second task", 100));
    s.push("c2", call_with_usage("c2", 100, totals[1]));
    s.push("r2", result("c2", "bash", "out2", 20_000));
    s.push("c3", call_with_usage("c3", 100, totals[2]));
    s.push("r3", result("c3", "bash", "out3", 100));
    s.push("a3", reply("second done", 100, Some(totals[3])));
    s.push("u4", user("third task", 100));
    s.push("a4", reply("third done", 100, Some(45_000)));
    s
}

/// The cut is the user message opening the turn of the oldest reply kept, and usage alone
/// decides where that is: the same texts with other usage cut elsewhere.
#[test]
fn v0_14_cuts_at_user_messages_by_usage() {
    let strategy = v014(PiConfig::default());
    // Newest 45,000; 40,000, 30,000 are within 20,000 of it, c2's 20,000 is not: the oldest
    // reply kept is c3, inside the second turn, which is kept whole from u2.
    let mut s = v014_session([10_000, 20_000, 30_000, 40_000]);
    let cps = s.compact(&strategy, Moment::TurnEnd);
    assert_eq!(cps[0].window, Window::From(s.id("u2")));
    assert_eq!(cps[0].tokens_before, 45_000, "tokensBefore is the newest reply's usage");
    assert_eq!(s.labels(&strategy), names(&["system", "summary", "u2", "c2", "r2", "c3", "r3", "a3", "u4", "a4"]));
    let transcript = &s.h.summarizer.requests()[0].transcript;
    assert!(transcript.contains("first task") && !transcript.contains("second task"), "{transcript}");
    // By estimates the 20,000-token result alone fills the keep budget: 0.73.1 cuts at c3.
    let mut estimated = v014_session([10_000, 20_000, 30_000, 40_000]);
    let cps = estimated.compact(&v073(PiConfig::default()), Moment::TurnEnd);
    assert_eq!(cps[0].window, Window::From(estimated.id("c3")));

    // Usage within 20,000 of the newest all the way back: everything is kept.
    let mut s = v014_session([30_000, 31_000, 32_000, 33_000]);
    let cps = s.compact(&strategy, Moment::TurnEnd);
    assert_eq!(cps[0].window, Window::From(s.id("u1")));
    assert_eq!(s.h.summarizer.requests()[0].transcript, "", "nothing to summarize, and Pi still asks");

    // An older reply that used more than the newest never makes the drop.
    let mut s = v014_session([90_000, 20_000, 30_000, 40_000]);
    assert_eq!(s.compact(&strategy, Moment::TurnEnd)[0].window, Window::From(s.id("u2")));

    // Failed replies count 0, so usage never drops; without any reply, the last turn; without
    // a user message, everything in range.
    let mut s = Session::new(200_000);
    s.push("u1", user("a", 10));
    s.push("a1", failed("overloaded"));
    s.push("u2", user("c", 10));
    s.push("a2", failed("overloaded"));
    let path = branch_path(&s.h.log);
    assert_eq!(crate::v0_14::find_cut_point(&path, 0, path.len(), 20_000), 0);
    let only = |role: Role| path.iter().filter(|e| e.message().is_some_and(|m| m.role == role)).copied().collect::<Vec<_>>();
    let (users, replies) = (only(Role::User), only(Role::Assistant));
    assert_eq!(crate::v0_14::find_cut_point(&users, 0, users.len(), 20_000), 1);
    assert_eq!(crate::v0_14::find_cut_point(&replies, 0, replies.len(), 20_000), 0);
}

/// 0.13.2 skips aborted replies only (`getAssistantUsage`, `checkAutoCompaction`), even with
/// partial usage; an errored reply counts the usage it has.
#[test]
fn v0_14_skips_aborted_replies_and_counts_errored_ones() {
    let strategy = v014(PiConfig::default());
    let session = |failure: Option<Failure>| {
        let mut s = Session::new(200_000);
        s.push("u1", user("a", 10));
        s.push("a1", reply("b", 10, Some(1_000)));
        s.push("u2", user("c", 10));
        let mut partial = with_usage(Message::assistant("d"), 190_000, 1);
        partial.failure = failure;
        s.push("a2", partial);
        s
    };
    assert_eq!(session(None).decide(&strategy, Moment::TurnEnd), threshold());
    assert_eq!(session(Some(Failure::Error)).decide(&strategy, Moment::TurnEnd), threshold());
    assert_eq!(session(Some(Failure::Aborted)).decide(&strategy, Moment::TurnEnd), Decision::Skip, "a1's 1,000 is read");
}

/// Only entries after the previous compaction are cut or summarized: what it kept before it
/// is dropped, and its summary opens the next call.
#[test]
fn v0_14_searches_only_after_the_previous_compaction() {
    let strategy = v014(PiConfig::default());
    let mut s = Session::new(200_000);
    s.push("u1", user("one", 10));
    s.push("a1", reply("first", 10, Some(10_000)));
    let u2 = s.push("u2", user("two kept by the first compaction", 10));
    s.push("a2", reply("second", 10, Some(30_000)));
    s.checkpoint(pi_checkpoint("S1", u2));
    s.push("u3", user("three", 10));
    s.push("a3", reply("third", 10, Some(50_000)));
    s.push("u4", user("four", 10));
    s.push("a4", reply("fourth", 10, Some(75_000)));
    let cps = s.compact(&strategy, Moment::TurnEnd);
    assert_eq!(cps[0].window, Window::From(s.id("u4")));
    assert_eq!(s.labels(&strategy), names(&["system", "summary", "u4", "a4"]));
    let transcript = &s.h.summarizer.requests()[0].transcript;
    let lines: Vec<&str> = transcript.lines().collect();
    assert_eq!(lines[0], r#"{"role":"user","content":"Previous session summary:\nS1"}"#);
    assert!(lines[1].starts_with(r#"{"role":"user","content":[{"type":"text","text":"three"#), "{}", lines[1]);
    assert_eq!(lines.len(), 3, "S1, u3 and a3; u2 and a2 are neither kept nor summarized");

    // No user message after the previous compaction: everything after it is kept, and what
    // it kept before it is dropped.
    let mut s = Session::new(200_000);
    let u1 = s.push("u1", user("one", 10));
    s.push("a1", reply("first", 10, Some(10_000)));
    s.checkpoint(pi_checkpoint("S1", u1));
    s.push("c2", call_with_usage("c2", 10, 50_000));
    s.push("r2", result("c2", "bash", "out", 10));
    s.push("a2", reply("done", 10, Some(90_000)));
    let cps = s.compact(&strategy, Moment::TurnEnd);
    assert_eq!(cps[0].window, Window::From(s.id("c2")));
    assert_eq!(s.labels(&strategy), names(&["system", "summary", "c2", "r2", "a2"]));
}

/// Each reply is checked once, as it ends (a call's reply before the request after its
/// results), against `window − reserveTokens`; there is no overflow recovery.
#[test]
fn v0_14_checks_each_reply_when_it_ends() {
    let strategy = v014(PiConfig::default());
    // 200,000 − 16,384 = 183,616, strict.
    for (total, want) in [(183_617, threshold()), (183_616, Decision::Skip)] {
        let mut s = Session::new(200_000);
        s.push("u1", user("go", 10));
        s.push("a1", reply("done", 10, Some(total)));
        assert_eq!(s.decide(&strategy, Moment::TurnEnd), want, "{total}");
    }
    let mut s = Session::new(200_000);
    s.push("u1", user("go", 10));
    s.push("c1", call_with_usage("c1", 10, 190_000));
    assert_eq!(s.decide(&strategy, Moment::BeforeRequest), Decision::Skip, "the results are not in yet");
    s.push("r1", result("c1", "bash", "out", 10));
    assert_eq!(s.decide(&strategy, Moment::BeforeRequest), threshold(), "the call's reply ended over the line");
    assert_eq!(s.decide(&strategy, Moment::Overflow), Decision::Skip, "no overflow recovery before 0.17.0");
    assert_eq!(s.decide(&v014(PiConfig { enabled: false, ..PiConfig::default() }), Moment::BeforeRequest), Decision::Skip);
    s.compact(&strategy, Moment::BeforeRequest);
    assert_eq!(s.decide(&strategy, Moment::BeforeRequest), Decision::Skip, "a reply is checked once");
    s.push("a1", reply("done", 10, Some(20_000)));
    s.push("u2", user("next", 10));
    assert_eq!(s.decide(&strategy, Moment::BeforeRequest), Decision::Skip, "a prompt is not checked");
    // A failed reply is the newest: its (zero) usage is read, not the one before it.
    s.push("err", failed("overloaded"));
    assert_eq!(s.decide(&strategy, Moment::TurnEnd), Decision::Skip);
    // A compaction does not make the reply before it new.
    let mut s = Session::new(200_000);
    let u1 = s.push("u1", user("go", 10));
    s.push("a1", reply("done", 10, Some(190_000)));
    s.checkpoint(pi_checkpoint("S", u1));
    s.push("u2", user("next", 10));
    assert_eq!(s.decide(&strategy, Moment::TurnEnd), Decision::Skip);

    // `/compact` needs two messages, and runs with automatic compaction off.
    let off = v014(PiConfig { enabled: false, ..PiConfig::default() });
    let mut s = Session::new(200_000);
    s.push("u1", user("go", 10));
    assert_eq!(s.decide(&off, Moment::Manual), Decision::Skip);
    s.push("a1", reply("done", 10, Some(1_000)));
    assert_eq!(s.decide(&off, Moment::Manual), Decision::compact("manual"));
}

/// One call: the messages as they are (thinking, full tool results), no system prompt, the
/// prompt last with the user's focus, capped at 0.8 × reserve; a failed call still compacts,
/// with an empty summary.
#[test]
fn v0_14_sends_the_messages_and_keeps_an_empty_summary_on_failure() {
    let strategy = v014(PiConfig { keep_recent_tokens: 10, ..PiConfig::default() });
    let mut s = Session::new(200_000);
    s.push("u1", user("fix it", 10));
    s.push("c1", Message::new(Role::Assistant, vec![Part::Reasoning { text: "maybe the lexer".into() }, Part::ToolCall { id: "c1".into(), name: "read".into(), args: json!({"path": "a.rs"}) }]));
    s.push("r1", result("c1", "read", "long file", 3_000));
    s.push("a1", reply("done", 10, Some(5_000)));
    s.push("u2", user("next", 10));
    s.push("a2", reply("ok", 10, Some(20_000)));
    s.h.manual = "keep the lexer notes".into();
    let cps = s.compact(&strategy, Moment::Manual);
    assert_eq!(cps[0].window, Window::From(s.id("u2")));
    let request = &s.h.summarizer.requests()[0];
    assert_eq!((request.system.as_str(), request.context, request.max_output_tokens), ("", compactbench_core::SummaryContext::Fresh, 13_107));
    assert!(request.transcript.contains(r#"{"type":"thinking","thinking":"maybe the lexer"}"#));
    assert!(request.transcript.contains(&padded("long file", 12_000)), "tool results are sent whole");
    assert!(request.instructions.ends_with("\n\nAdditional focus: keep the lexer notes"));
    assert_eq!(stored_summary(&cps[0]), "SUMMARY 1 of summary", "no file lists");

    s.h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Timeout));
    s.push("u3", user("more", 10));
    s.push("a3", reply("fine", 10, Some(30_000)));
    let cps = s.compact(&strategy, Moment::TurnEnd);
    assert_eq!(stored_summary(&cps[0]), "");
    assert_eq!((cps[0].summarizer.calls, cps[0].summarizer.failures), (1, 1));
    assert_eq!(s.labels(&strategy), names(&["system", "summary", "u3", "a3"]));
}

/// The replay keeps the law through repeated compactions, mid-run and at turn ends.
#[test]
fn v0_14_replay_keeps_the_law() {
    let words = |n: usize| (0..n).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
    let mut session = vec![Message::system("You are a coding agent.")];
    for turn in 0..12 {
        session.push(Message::user(format!("Task {turn}: fix module {turn}.")));
        for step in 0..4 {
            let id = format!("c{turn}_{step}");
            session.push(Message::tool_call(&id, "bash", json!({ "command": format!("cat src/m{turn}_{step}.rs") })));
            session.push(Message::tool_result(&id, "bash", words(900), false));
        }
        session.push(Message::assistant(format!("Module {turn} fixed.")));
    }
    let tally = compactbench_testkit::assert_replay_law(&v014(PiConfig { reserve_tokens: 4_000, keep_recent_tokens: 8_000, ..PiConfig::default() }), &model(30_000, 4_096), &session, 1);
    assert!(tally.compactions > 3, "{tally:?}");
}
