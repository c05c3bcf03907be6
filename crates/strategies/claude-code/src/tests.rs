//! Tests: one per section (j) case of the spec (`case_NN_…`), the failure paths of section
//! (g), the layout of section (e) and the variants.

use std::collections::VecDeque;
use std::sync::Mutex;

use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Decision, Error, ErrorKind, Log, Message, Moment, Origin, Part, Role, StopReason,
    Strategy, Summarizer, Summary, SummaryRequest, Usage, View, VirtualStore, Window,
};
use compactbench_testkit::{json, model, FakeMode, FakeSummarizer, Harness};

use crate::microcompact::CLEARED;
use crate::prompt::format_summary;
use crate::ptl::{api_round_groups, token_gap, truncate_head, RETRY_MARKER};
use crate::trigger::Thresholds;
use crate::wire::TRANSCRIPT_PATH;
use crate::{variants, ClaudeCodeConfig, ClaudeCodeStrategy};

// ---------------------------------------------------------------------------------------------
// Fixtures.

fn cc() -> ClaudeCodeStrategy {
    ClaudeCodeStrategy::new(ClaudeCodeConfig::default())
}

/// The 2.1.68 behaviour: nothing kept verbatim, recently read files re-attached.
fn v2168() -> ClaudeCodeStrategy {
    ClaudeCodeStrategy::release_2_1_68()
}

fn cc_with(config: ClaudeCodeConfig) -> ClaudeCodeStrategy {
    ClaudeCodeStrategy::new(config)
}

fn api() -> ClaudeCodeStrategy {
    ClaudeCodeStrategy::api_context_management(ClaudeCodeConfig::default()).expect("defaults are valid")
}

fn api_with(config: ClaudeCodeConfig) -> ClaudeCodeStrategy {
    ClaudeCodeStrategy::api_context_management(config).expect("valid config")
}

const SYSTEM: &str = "Project rules: keep the public API stable.";

fn sys() -> Message {
    Message::system(SYSTEM)
}

/// `message` as a reply the runner received for a request of `input` tokens.
fn replied(mut message: Message, input: u64, output: u64) -> Message {
    message.usage = Some(Usage { input, output, ..Default::default() });
    message
}

/// A text of exactly `tokens` tokens by `ceil(chars / 4)`, starting with `tag`.
fn filler(tag: &str, tokens: usize) -> String {
    let mut s = format!("{tag} ");
    s.extend(std::iter::repeat_n('x', (tokens * 4).saturating_sub(s.len())));
    assert_eq!(s.len(), tokens * 4, "tag too long for {tokens} tokens");
    s
}

fn call(id: &str, name: &str, path: &str) -> Message {
    Message::tool_call(id, name, json!({ "path": path }))
}

fn result(id: &str, name: &str, text: impl Into<String>) -> Message {
    Message::tool_result(id, name, text, false)
}

/// Model with the window and output cap of the scenarios: `W_eff` 55,808, `T` 42,808.
fn small() -> compactbench_core::ModelProfile {
    model(64_000, 8_192)
}

const SMALL_T: u64 = 42_808;

fn is_compact(d: &Decision) -> bool {
    matches!(d, Decision::Compact { .. })
}

fn injected_texts(view: &View) -> Vec<String> {
    view.messages.iter().filter(|m| matches!(m.origin, Origin::Injected(_))).map(|m| m.message.text()).collect()
}

/// A summarizer answering from a script, recording requests.
struct Scripted {
    answers: Mutex<VecDeque<Result<Summary, Error>>>,
    requests: Mutex<Vec<SummaryRequest>>,
}

impl Scripted {
    fn new(answers: impl IntoIterator<Item = Result<Summary, Error>>) -> Scripted {
        Scripted { answers: Mutex::new(answers.into_iter().collect()), requests: Mutex::new(Vec::new()) }
    }

    fn requests(&self) -> Vec<SummaryRequest> {
        self.requests.lock().unwrap().clone()
    }
}

fn ok(text: &str, stop: StopReason) -> Result<Summary, Error> {
    Ok(Summary { text: text.into(), input_tokens: 10, output_tokens: 5, stop })
}

fn too_long(actual: u64, limit: u64) -> Result<Summary, Error> {
    Err(Error::new(ErrorKind::Transport, format!("400 invalid_request_error: prompt is too long: {actual} tokens > {limit} maximum")))
}

impl Summarizer for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        self.requests.lock().unwrap().push(request.clone());
        self.answers.lock().unwrap().pop_front().unwrap_or_else(|| ok("<summary>fallback</summary>", StopReason::Complete))
    }
}

/// Runs `strategy.compact` on `log` with `summarizer`, outside the testkit harness.
fn compact_with(
    strategy: &dyn Strategy,
    log: &Log,
    at: Moment,
    profile: &compactbench_core::ModelProfile,
    summarizer: &dyn Summarizer,
) -> Result<Vec<Checkpoint>, Error> {
    let mut store = VirtualStore::new();
    let view = strategy.project(log);
    let mut cx = Cx::new(profile, summarizer, &mut store, compactbench_testkit::tokenizer());
    strategy.compact(log, &view, at, &mut cx)
}

// ---------------------------------------------------------------------------------------------
// Section (j).

#[test]
fn case_01_threshold() {
    let t = Thresholds::new(200_000, 32_000, &ClaudeCodeConfig::default());
    assert_eq!(t, Thresholds { effective: 180_000, auto: 167_000, warning: 147_000, blocking: 177_000 });

    for (tokens, expected) in [(166_999, false), (167_000, true)] {
        let mut h = Harness::new(
            [sys(), Message::user("go"), replied(Message::assistant("working"), tokens - 100, 100)],
            model(200_000, 32_000),
        );
        assert_eq!(is_compact(&h.decide(&cc(), Moment::BeforeRequest)), expected, "{tokens} tokens");
        // Claude Code checks before requests, not at a turn's end.
        assert_eq!(h.decide(&cc(), Moment::TurnEnd), Decision::Skip);
    }

    // Messages after the last reply are added by chars/4: 166,000 + 1,000 = 167,000.
    let mut h = Harness::new(
        [sys(), Message::user("go"), replied(Message::assistant("x"), 165_999, 1), result("c", "read", filler("r", 999))],
        model(200_000, 32_000),
    );
    assert_eq!(h.decide(&cc(), Moment::BeforeRequest), Decision::Skip);
    h.push(Message::user("y"));
    assert_eq!(h.decide(&cc(), Moment::BeforeRequest), Decision::compact("auto"));

    // The usage counted is input + cache_creation_input_tokens + cache_read_input_tokens +
    // output: cache writes count as much as uncached input.
    for (written, expected) in [(116_799, false), (116_800, true)] {
        let mut reply = Message::assistant("working");
        reply.usage = Some(Usage { input: 100, output: 100, cache_read: 50_000, cache_write: written });
        let mut h = Harness::new([sys(), Message::user("go"), reply], model(200_000, 32_000));
        assert_eq!(is_compact(&h.decide(&cc(), Moment::BeforeRequest)), expected, "{written} written");
    }
}

#[test]
fn case_02_small_max_output() {
    let t = Thresholds::new(200_000, 8_000, &ClaudeCodeConfig::default());
    assert_eq!((t.effective, t.auto), (192_000, 179_000));
}

#[test]
fn case_03_percent_override_only_lowers() {
    let with = |pct| Thresholds::new(200_000, 32_000, &ClaudeCodeConfig { autocompact_pct_override: Some(pct), ..ClaudeCodeConfig::default() });
    assert_eq!(with(50).auto, 90_000);
    assert_eq!(with(95).auto, 167_000, "95% of 180,000 is 171,000, capped at the default threshold (#31806)");
    assert_eq!(with(0).auto, 167_000, "out of range: ignored");
    assert_eq!(with(101).auto, 167_000, "out of range: ignored");

    let config = ClaudeCodeConfig { autocompact_pct_override: Some(50), ..ClaudeCodeConfig::default() };
    let mut h = Harness::new([sys(), Message::user("go"), replied(Message::assistant("a"), 89_999, 1)], model(200_000, 32_000));
    assert!(is_compact(&h.decide(&cc_with(config), Moment::BeforeRequest)));
    assert_eq!(h.decide(&cc(), Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn case_04_window_override() {
    let config = ClaudeCodeConfig { auto_compact_window: Some(100_000), ..ClaudeCodeConfig::default() };
    let t = Thresholds::new(1_000_000, 32_000, &config);
    assert_eq!((t.effective, t.auto), (80_000, 67_000));
}

/// Up to 2.1.20 the reservation below the window is the output limit capped at 32,000 (the
/// default of `CLAUDE_CODE_MAX_OUTPUT_TOKENS`), not 20,000: 155,000 on a 200k window, where the
/// recorded 1.0.53–2.1.19 compactions fired.
#[test]
fn release_2_1_20_reserves_up_to_32k_output() {
    let old = ClaudeCodeStrategy::release_2_1_20();
    let t = Thresholds::new(200_000, 32_000, &old.config);
    assert_eq!((t.effective, t.auto), (168_000, 155_000));
    let t = Thresholds::new(200_000, 64_000, &old.config);
    assert_eq!((t.effective, t.auto), (168_000, 155_000), "capped at 32,000");
    let t = Thresholds::new(200_000, 8_000, &old.config);
    assert_eq!((t.effective, t.auto), (192_000, 179_000), "a small output limit is reserved whole, as today");

    for (tokens, expected) in [(154_999, false), (155_000, true)] {
        let mut h = Harness::new(
            [sys(), Message::user("go"), replied(Message::assistant("working"), tokens - 100, 100)],
            model(200_000, 32_000),
        );
        assert_eq!(is_compact(&h.decide(&old, Moment::BeforeRequest)), expected, "{tokens} tokens");
        assert_eq!(h.decide(&v2168(), Moment::BeforeRequest), Decision::Skip, "2.1.68 waits for 167,000");
    }
}

/// A short session over the small model's threshold: a read, an edit, a test run.
fn session() -> Vec<Message> {
    vec![
        sys(),
        Message::user("refactor auth; keep public API; show plan before coding"),
        call("c1", "read", "src/auth.rs"),
        result("c1", "read", "src/auth.rs\n   1\tpub fn login() {}"),
        Message::new(
            Role::Assistant,
            vec![Part::text("Editing now."), Part::ToolCall { id: "c2".into(), name: "edit".into(), args: json!({"path": "src/auth.rs", "oldText": "a", "newText": "b"}) }],
        ),
        result("c2", "edit", "Applied edit to src/auth.rs"),
        Message::tool_call("c3", "bash", json!({"command": "cargo test"})),
        replied(Message::assistant("placeholder"), 0, 0),
    ]
}

/// The session with the last reply replaced by one whose usage is `tokens`.
fn session_at(tokens: u64) -> Vec<Message> {
    let mut s = session();
    s.pop();
    s.push(result("c3", "bash", "test auth::login ... FAILED: error[E0599]: no method named `verify`"));
    s.push(replied(Message::assistant("The test fails; looking into it."), tokens - 10, 10));
    s
}

#[test]
fn case_05_v2_1_68_full_compaction_keeps_nothing_verbatim() {
    let mut h = Harness::new(session_at(SMALL_T + 1), small());
    let cps = h.step(&v2168(), Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Summary);
    assert_eq!(cps[0].window, Window::Kept(vec![]));

    let view = h.view(&v2168());
    assert_eq!(view.messages[0].origin, Origin::Entry(compactbench_core::EntryId(0)), "system prompt stays");
    assert!(matches!(view.messages[1].origin, Origin::Summary(_)));
    assert_eq!(view.messages[1].message.role, Role::User);
    assert!(view.messages[1].message.text().contains("SUMMARY 1 of compact"));
    assert!(view.messages[2..].iter().all(|m| matches!(m.origin, Origin::Injected(_))), "nothing kept verbatim");
    assert!(view.iter().all(|m| m.role != Role::Assistant && m.role != Role::Tool));
    assert!(view.iter().flat_map(|m| &m.parts).all(|p| matches!(p, Part::Text { .. })), "no tool_use or tool_result left");

    // The summarizer got every message after the system prompt, natively serialized.
    let req = &h.summarizer.requests()[0];
    assert_eq!(req.system, SYSTEM);
    assert_eq!(req.transcript.lines().count(), 8, "every non-system message, one JSON object per line");
    for needle in ["keep public API", r#""type":"tool_use","id":"c2""#, r#""tool_use_id":"c3""#, "error[E0599]", "looking into it"] {
        assert!(req.transcript.contains(needle), "{needle}");
    }
    assert!(req.instructions.contains("<analysis>") && req.instructions.contains("<summary>"));
    assert_eq!(req.max_output_tokens, 8_192, "min(20,000, max output)");

    // Second compaction: the previous summary, its attachments and everything since.
    h.push(Message::user("also update docs/auth.md"));
    h.push(replied(Message::assistant("Done."), SMALL_T, 5));
    h.push(Message::user("next"));
    let cps = h.step(&v2168(), Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    let req = &h.summarizer.requests()[1];
    assert!(req.transcript.contains("SUMMARY 1 of compact"), "summary of the summary");
    assert!(req.transcript.contains("Project instructions from CLAUDE.md"), "attachments are conversation too");
    assert!(req.transcript.contains("also update docs/auth.md") && req.transcript.contains(r#""text":"next""#));
    assert!(!req.transcript.contains("show plan before coding"), "earlier messages only through the summary");
    let view = h.view(&v2168());
    assert!(view.messages[1].message.text().contains("SUMMARY 2 of compact"));
    assert!(!view.iter().any(|m| m.text().contains("SUMMARY 1")));
}

#[test]
fn case_05_newest_round_stays_verbatim_after_the_summary() {
    // 2.1.332: the newest assistant message and its results are kept, the summary is written
    // without them and says so; no file is re-attached.
    let mut messages = session_at(SMALL_T + 1);
    let last = messages.pop().unwrap();
    messages.push(replied(Message::tool_call("c4", "read", json!({"path": "src/auth.rs"})), last.usage.unwrap().input, 10));
    messages.push(result("c4", "read", "fn verify() {}"));
    let mut h = Harness::new(messages, small());
    let cps = h.step(&cc(), Moment::BeforeRequest).unwrap();
    let n = h.log.len();
    assert_eq!(cps[0].window, Window::Kept(vec![compactbench_core::EntryId(n as u32 - 3), compactbench_core::EntryId(n as u32 - 2)]));
    assert_eq!(cps[0].details["kept_messages"], json!(2));
    let view = h.view(&cc());
    assert!(matches!(view.messages[1].origin, Origin::Summary(_)));
    assert!(view.messages[1].message.text().contains("newest ones from before it, unchanged"));
    let tail: Vec<&Message> = view.messages[2..].iter().filter(|m| !matches!(m.origin, Origin::Injected(_))).map(|m| &m.message).collect();
    assert_eq!(tail.len(), 2);
    assert_eq!(tail[0].tool_call_ids().collect::<Vec<_>>(), ["c4"]);
    assert_eq!(tail[1].tool_result_ids().collect::<Vec<_>>(), ["c4"]);
    assert!(injected_texts(&view).iter().all(|t| !t.starts_with("Contents of")), "files are not re-attached");
    let req = &h.summarizer.requests()[0];
    assert!(req.transcript.contains("error[E0599]") && !req.transcript.contains("fn verify() {}"), "the kept round is not summarized");

    // A view whose only assistant message comes first keeps nothing.
    let mut h = Harness::new(vec![sys(), replied(Message::assistant("hello"), SMALL_T, 1), Message::user("go on")], small());
    let cps = h.step(&cc(), Moment::BeforeRequest).unwrap();
    assert_eq!(cps[0].window, Window::Kept(vec![]));
}

#[test]
fn case_05_files_come_back_only_when_a_turn_starts() {
    // 2.1.332: a compaction as the user's new message arrives keeps the closing answer and that
    // message, and re-attaches the files read before, a shell `cat` included.
    let mut messages = vec![sys(), Message::user("look around")];
    messages.push(call("r", "read", "src/auth.rs"));
    messages.push(result("r", "read", "fn auth() {}"));
    messages.push(Message::tool_call("b", "Bash", json!({"command": "cat notes.txt"})));
    messages.push(result("b", "Bash", "remember the API"));
    messages.push(Message::tool_call("x", "Bash", json!({"command": "cat a.txt | head"})));
    messages.push(result("x", "Bash", "piped: not a read"));
    messages.push(replied(Message::assistant("Done looking."), SMALL_T, 5));
    messages.push(Message::user("next: fix auth"));
    let mut h = Harness::new(messages, small());
    let cp = h.compact(&cc(), Moment::BeforeRequest).unwrap().remove(0);
    assert_eq!(cp.details["kept_messages"], json!(2), "the closing answer and the new message");
    let files: Vec<&str> = cp.details["attachments"]["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(files, ["notes.txt", "src/auth.rs"]);
    let v2168 = Harness::new(h.log.messages().map(|(_, m)| m.clone()).collect::<Vec<_>>(), small()).compact(&v2168(), Moment::BeforeRequest).unwrap().remove(0);
    let files: Vec<&str> = v2168.details["attachments"]["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(files, ["src/auth.rs"], "2.1.68 counts no shell reads");
}

#[test]
fn case_06_file_reinjection() {
    // Touched oldest first f7 … f1, so f1 is the most recent; then CLAUDE.md read last.
    let sizes = [("f7", 800), ("f6", 500), ("f5", 2_000), ("f4", 1_000), ("f3", 4_000), ("f2", 7_000), ("f1", 3_000)];
    let mut messages = vec![sys(), Message::user("read around")];
    for (i, (name, tokens)) in sizes.iter().enumerate() {
        let id = format!("r{i}");
        messages.push(call(&id, "read", &format!("src/{name}.rs")));
        messages.push(result(&id, "read", filler(&format!("{name}-body"), *tokens)));
    }
    messages.push(Message::tool_call("m", "Read", json!({"file_path": "CLAUDE.md"})));
    messages.push(result("m", "Read", "memory"));
    let mut h = Harness::new(messages, small());
    let cp = h.compact(&v2168(), Moment::BeforeRequest).unwrap().remove(0);

    let texts: Vec<String> = cp.injected.iter().map(Message::text).collect();
    assert!(texts[0].starts_with("Project instructions from CLAUDE.md"));
    assert!(texts[0].contains(SYSTEM));
    let files = &texts[1..];
    assert_eq!(files.len(), 5, "{files:#?}");
    let expect = [("f1", true), ("f2", false), ("f3", true), ("f4", true), ("f5", true)];
    for (text, (name, with_content)) in files.iter().zip(expect) {
        assert!(text.contains(&format!("src/{name}.rs")), "{name}: most recent first");
        assert_eq!(text.contains(&format!("{name}-body")), with_content, "{name}");
    }
    assert!(files[1].contains("too large"), "f2 (7,000 tokens) is a path reference");
    assert!(!texts.iter().any(|t| t.contains("f6") || t.contains("f7")));
    assert!(!files.iter().any(|t| t.contains("memory")), "CLAUDE.md is memory, not a file to restore");
    assert_eq!(cp.details["attachments"]["files"][1], json!({"path": "src/f2.rs", "as": "path_too_large"}));
}

#[test]
fn file_content_is_the_newest_seen_and_edit_only_files_are_references() {
    let messages = vec![
        sys(),
        Message::user("go"),
        call("r1", "read", "src/a.rs"),
        result("r1", "read", "old content of a"),
        Message::tool_call("w1", "write", json!({"path": "src/a.rs", "content": "new content of a"})),
        result("w1", "write", "ok"),
        Message::tool_call("e1", "edit", json!({"file_path": "src/b.rs", "oldText": "x", "newText": "y"})),
        result("e1", "edit", "ok"),
        call("r2", "read", "src/c.rs"),
        Message::tool_result("r2", "read", "ENOENT", true),
    ];
    let mut h = Harness::new(messages, small());
    let cp = h.compact(&v2168(), Moment::BeforeRequest).unwrap().remove(0);
    let texts: Vec<String> = cp.injected.iter().map(Message::text).collect();
    assert_eq!(texts.len(), 4, "instructions + three files");
    assert!(texts[1].contains("src/c.rs") && texts[1].contains("not included"), "a failed read shows no content");
    assert!(texts[2].contains("src/b.rs") && texts[2].contains("not included"), "edited only");
    assert!(texts[3].contains("new content of a") && !texts[3].contains("old content"));
}

#[test]
fn case_07_skill_reinjection() {
    let mut messages = vec![sys(), Message::user("use the skills")];
    for i in 1..=6 {
        let id = format!("s{i}");
        messages.push(Message::tool_call(&id, "Skill", json!({ "skill": format!("s{i}") })));
        let mut body = filler(&format!("s{i}-start"), 6_000);
        body.replace_range(body.len() - 7.., "-s-tail");
        messages.push(result(&id, "Skill", body));
    }
    let mut h = Harness::new(messages, small());
    let cp = h.compact(&cc(), Moment::BeforeRequest).unwrap().remove(0);
    let skills: Vec<&Message> = cp.injected.iter().filter(|m| m.text().contains("was invoked")).collect();
    assert_eq!(skills.len(), 5);
    for (m, i) in skills.iter().zip(2..=6) {
        let text = m.text();
        assert!(text.contains(&format!("s{i}-start")), "s{i} kept, oldest first");
        assert!(!text.contains("-s-tail"), "cut to its start");
        let body = text.split("\n\n").nth(1).unwrap();
        assert_eq!(body.len(), 20_000, "5,000 tokens");
    }
    assert!(!cp.injected.iter().any(|m| m.text().contains("s1-start")), "s1 dropped: 25,000 in total");
    assert_eq!(cp.details["attachments"]["skills_dropped"], json!(["s1"]));
}

/// Eight compactable results (one of them a listing) and one of another tool, then the
/// turn's last reply and the next user message.
fn microcompact_session() -> Vec<Message> {
    let mut m = vec![sys(), Message::user("look around")];
    let tools = ["read", "bash", "TodoWrite", "grep", "read", "Glob", "ls", "edit", "bash"];
    for (i, tool) in tools.iter().enumerate() {
        let id = format!("t{i}");
        m.push(call(&id, tool, &format!("src/m{i}.rs")));
        m.push(result(&id, tool, format!("output {i}")));
    }
    m.push(replied(Message::assistant("done for now"), 1_000, 10));
    m.push(Message::user("back after lunch: continue"));
    m
}

#[test]
fn case_08_microcompact_time_based() {
    let config = |flag, gap| ClaudeCodeConfig { microcompact: flag, microcompact_gap_minutes: gap, ..ClaudeCodeConfig::default() };

    let s = cc_with(config(true, Some(61)));
    let mut h = Harness::new(microcompact_session(), small());
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("microcompact"));
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1, "under the threshold after clearing: no summary");
    assert_eq!(cps[0].kind, CheckpointKind::Prune);
    assert_eq!(cps[0].window, Window::Inherit);
    let view = h.view(&s);
    let results: Vec<(String, String)> = view
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            Part::ToolResult { name, text, .. } => Some((name.clone(), text.clone())),
            _ => None,
        })
        .collect();
    let cleared: Vec<&str> = results.iter().filter(|(_, t)| t == CLEARED).map(|(n, _)| n.as_str()).collect();
    assert_eq!(cleared, ["read", "bash", "grep"], "the oldest 3 of 8 compactable");
    assert_eq!(results[2], ("TodoWrite".to_owned(), "output 2".to_owned()), "not compactable");
    assert!(results[4..].iter().all(|(_, t)| t != CLEARED), "the 5 most recent stay");
    assert_eq!(view.iter().filter(|m| m.has_tool_calls()).count(), 9, "calls untouched");
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip, "nothing new to clear");

    let mut h = Harness::new(microcompact_session(), small());
    assert_eq!(h.decide(&cc_with(config(true, Some(59))), Moment::BeforeRequest), Decision::Skip, "59 minutes");
    assert_eq!(h.decide(&cc_with(config(false, Some(61))), Moment::BeforeRequest), Decision::Skip, "flag off");
    assert_eq!(h.decide(&cc(), Moment::BeforeRequest), Decision::Skip, "default");

    // Mid-turn (the last message is a tool result) there is no idle gap.
    let mut mid = microcompact_session();
    mid.truncate(mid.len() - 2);
    let mut h = Harness::new(mid, small());
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
}

#[test]
fn microcompact_clears_first_then_summarizes_if_still_needed() {
    let config = ClaudeCodeConfig { microcompact: true, microcompact_gap_minutes: Some(90), ..ClaudeCodeConfig::default() };
    let s = cc_with(config);
    let mut messages = microcompact_session();
    let n = messages.len();
    messages[n - 2] = replied(Message::assistant("done for now"), SMALL_T + 100, 10);
    let mut h = Harness::new(messages, small());
    let cps = h.step(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.iter().map(|c| c.kind).collect::<Vec<_>>(), [CheckpointKind::Prune, CheckpointKind::Summary]);
    let req = &h.summarizer.requests()[0];
    assert_eq!(req.transcript.matches(CLEARED).count(), 3, "the summarizer sees the cleared results");
}

#[test]
fn case_09_summarizer_prompt_too_long_retry() {
    // Ten API-round groups: the first user turn, then nine rounds of call + result.
    let mut messages = vec![Message::user(filler("start", 100))];
    for i in 1..10 {
        messages.push(Message::tool_call(format!("c{i}"), "read", json!({"path": format!("f{i}")})));
        messages.push(result(&format!("c{i}"), "read", filler(&format!("round{i}"), 100)));
    }
    let groups = api_round_groups(&messages);
    assert_eq!(groups.len(), 10);
    let group_tokens: Vec<u64> = groups.iter().map(|g| g.iter().map(crate::count::message_tokens).sum()).collect();

    // A gap covered by the oldest three groups.
    let gap = group_tokens[0] + group_tokens[1] + group_tokens[2] - 1;
    let out = truncate_head(&messages, Some(gap)).unwrap();
    assert_eq!(out[0].text(), RETRY_MARKER, "remainder starts with an assistant turn");
    assert_eq!(out[1], groups[3][0]);
    assert_eq!(out.len(), 1 + 7 * 2);

    // Unparseable gap: 20% of the groups.
    let out = truncate_head(&messages, None).unwrap();
    assert_eq!(out[1], groups[2][0]);
    assert_eq!(out.len(), 1 + 8 * 2);

    // Never below one group; a marker from an earlier retry is not a group.
    let out = truncate_head(&messages, Some(u64::MAX)).unwrap();
    assert_eq!(out, [vec![Message::user(RETRY_MARKER)], groups[9].clone()].concat());
    assert_eq!(truncate_head(&out, None), None, "one group left: nothing can go");
    assert_eq!(truncate_head(&messages[..1], None), None);

    assert_eq!(token_gap("prompt is too long: 213462 tokens > 200000 maximum"), Some(13_462));
    assert_eq!(token_gap("Prompt is too long"), None);

    // End to end: rejected once, retried without the oldest rounds.
    let mut log = Log::from_messages([sys()]);
    for m in &messages {
        log.push_message(m.clone());
    }
    let summarizer = Scripted::new([too_long(200_250, 200_000), ok("<summary>S</summary>", StopReason::Complete)]);
    let cp = compact_with(&cc(), &log, Moment::BeforeRequest, &model(200_000, 32_000), &summarizer).unwrap().remove(0);
    let requests = summarizer.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].transcript.contains("start x"));
    assert!(!requests[1].transcript.contains("start x") && !requests[1].transcript.contains("round2 x"));
    assert!(requests[1].transcript.lines().next().unwrap().contains(RETRY_MARKER));
    assert!(requests[1].transcript.contains("round3 x"));
    assert_eq!((cp.summarizer.calls, cp.summarizer.failures), (2, 1));
    assert_eq!(cp.details["ptl_retries"], json!(1));

    // Rejected every time: three retries, then the compaction fails.
    let summarizer = Scripted::new((0..10).map(|_| too_long(200_001, 200_000)));
    let err = compact_with(&cc(), &log, Moment::BeforeRequest, &model(200_000, 32_000), &summarizer).unwrap_err();
    assert_eq!(summarizer.requests().len(), 4);
    assert!(err.message.contains("Conversation too long"), "{err}");
}

#[test]
fn reactive_compaction_at_overflow_fits_the_summary_request_by_dropping_rounds() {
    // 70,000 tokens of rounds against a 64,000 window: the provider rejects the summary
    // request ("prompt is too long: N tokens > 64000 maximum") and the oldest rounds go.
    let mut messages = vec![sys(), Message::user("start")];
    for i in 0..7 {
        messages.push(Message::tool_call(format!("c{i}"), "bash", json!({"command": "cargo test"})));
        messages.push(result(&format!("c{i}"), "bash", filler(&format!("log{i}"), 10_000)));
    }
    let mut h = Harness::new(messages.clone(), small());
    h.summarizer = FakeSummarizer::new(FakeMode::Window(64_000));
    assert_eq!(h.decide(&v2168(), Moment::Overflow), Decision::compact("reactive"));
    let cp = h.step(&v2168(), Moment::Overflow).unwrap().remove(0);
    assert_eq!(cp.details["trigger"], json!("reactive"));
    assert_eq!(cp.details["ptl_retries"], json!(1));
    assert_eq!((cp.summarizer.calls, cp.summarizer.failures), (2, 1), "the rejected attempt is counted");
    let reqs = h.summarizer.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[0].transcript.contains("start"));
    assert!(!reqs[1].transcript.contains("start") && !reqs[1].transcript.contains("log0 x"), "the gap covered by two rounds");
    assert!(reqs[1].transcript.contains("log1 x") && reqs[1].transcript.starts_with(&format!(r#"{{"role":"user","content":[{{"type":"text","text":"{RETRY_MARKER}"#)));

    // Claude Code does not size the request itself: one the provider takes goes out whole,
    // even when its own estimate is over the window.
    let mut h = Harness::new(messages, small());
    let cp = h.step(&v2168(), Moment::Overflow).unwrap().remove(0);
    assert_eq!(cp.details["ptl_retries"], json!(0));
    assert_eq!((cp.summarizer.calls, cp.summarizer.failures), (1, 0));
    assert!(h.summarizer.requests()[0].transcript.contains("log0 x"));
}

#[test]
fn case_10_circuit_breaker_and_thrash_guard() {
    // Three consecutive summarizer failures: auto-compaction stops, the log is unchanged.
    let mut h = Harness::new(session_at(SMALL_T + 1), small());
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    let len = h.log.len();
    for _ in 0..3 {
        assert!(is_compact(&h.decide(&cc(), Moment::BeforeRequest)));
        assert!(h.step(&cc(), Moment::BeforeRequest).is_err());
    }
    assert_eq!((h.failures, h.log.len()), (3, len));
    assert_eq!(h.decide(&cc(), Moment::BeforeRequest), Decision::Skip);
    assert_eq!(h.decide(&cc(), Moment::Overflow), Decision::Skip, "no reactive compaction either");
    // `/compact` still runs, and success closes the breaker.
    h.summarizer = FakeSummarizer::default();
    assert_eq!(h.compact(&cc(), Moment::BeforeRequest).unwrap().len(), 1);
    assert_eq!(h.failures, 0);

    // A summary too long for the window: every compaction refills the context at once.
    let mut h = Harness::new(session_at(SMALL_T + 1), small());
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed(format!("<summary>{}</summary>", filler("long", 45_000))));
    for round in 1..=3 {
        assert!(is_compact(&h.decide(&cc(), Moment::BeforeRequest)), "round {round}");
        h.step(&cc(), Moment::BeforeRequest).unwrap();
        let after = crate::count::context_tokens(&h.view(&cc()));
        assert!(after >= SMALL_T, "refilled: {after}");
        h.push(replied(Message::assistant("still full"), after, 10));
    }
    assert_eq!(h.decide(&cc(), Moment::BeforeRequest), Decision::Skip, "three rapid refills in a row");
    assert_eq!(h.decide(&cc(), Moment::Overflow), Decision::Skip);
    // Three replies after the last compaction, the refill is no longer rapid.
    h.push(replied(Message::assistant("still full"), SMALL_T, 10));
    assert_eq!(h.decide(&cc(), Moment::BeforeRequest), Decision::Skip);
    h.push(replied(Message::assistant("still full"), SMALL_T, 10));
    assert!(is_compact(&h.decide(&cc(), Moment::BeforeRequest)));
}

/// Six tool use/result pairs p1 … p6 with results of `sizes` tokens.
fn api_session(sizes: [usize; 6], tools: [&str; 6]) -> Vec<Message> {
    let mut m = vec![Message::system("sys"), Message::user("work")];
    for (i, (tokens, tool)) in sizes.iter().zip(tools).enumerate() {
        let id = format!("p{}", i + 1);
        m.push(call(&id, tool, &format!("src/p{}.rs", i + 1)));
        m.push(result(&id, tool, filler(&format!("p{}-out", i + 1), *tokens)));
    }
    m
}

fn results_by_call(view: &View) -> Vec<(String, bool)> {
    view.iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            Part::ToolResult { call_id, text, .. } => Some((call_id.clone(), text == crate::api::PLACEHOLDER)),
            _ => None,
        })
        .collect()
}

#[test]
fn case_11_api_tool_result_clearing() {
    let reads = ["read"; 6];
    let mut h = Harness::new(api_session([20_000; 6], reads), model(200_000, 32_000));
    assert_eq!(h.decide(&api(), Moment::BeforeRequest), Decision::compact("clear_tool_uses"));
    let cps = h.step(&api(), Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Prune);
    assert_eq!(cps[0].details["cleared_tool_uses"], json!(3));
    let view = h.view(&api());
    let cleared: Vec<bool> = results_by_call(&view).into_iter().map(|(_, c)| c).collect();
    assert_eq!(cleared, [true, true, true, false, false, false]);
    assert!(view.iter().flat_map(|m| &m.parts).any(|p| matches!(p, Part::ToolCall { id, args, .. } if id == "p1" && args["path"] == "src/p1.rs")), "inputs intact");
    // The client's history (the log) is unchanged; only the model's view is edited.
    assert!(h.log.messages().any(|(_, m)| m.text().is_empty() && m.searchable_text().starts_with("p1-out")));
    assert_eq!(h.decide(&api(), Moment::BeforeRequest), Decision::Skip, "nothing new to clear");
    // The next tool use makes p4 old enough to clear.
    h.push(call("p7", "read", "src/p7.rs"));
    h.push(result("p7", "read", "short"));
    h.step(&api(), Moment::BeforeRequest).unwrap();
    let cleared: Vec<bool> = results_by_call(&h.view(&api())).into_iter().map(|(_, c)| c).collect();
    assert_eq!(cleared, [true, true, true, true, false, false, false]);

    // 90,000 tokens: no edit.
    let mut h = Harness::new(api_session([15_000; 6], reads), model(200_000, 32_000));
    assert_eq!(h.decide(&api(), Moment::BeforeRequest), Decision::Skip);

    // clear_at_least 50,000 with 30,000 clearable: no edit.
    let config = ClaudeCodeConfig { api_clear_at_least: Some(50_000), ..ClaudeCodeConfig::default() };
    let mut h = Harness::new(api_session([10_000, 10_000, 10_000, 30_000, 30_000, 30_000], reads), model(200_000, 32_000));
    assert_eq!(h.decide(&api_with(config.clone()), Moment::BeforeRequest), Decision::Skip);
    assert!(is_compact(&h.decide(&api(), Moment::BeforeRequest)), "without clear_at_least it clears");

    // An excluded tool is never cleared.
    let config = ClaudeCodeConfig { api_exclude_tools: vec!["bash".into()], ..ClaudeCodeConfig::default() };
    let tools = ["read", "bash", "read", "read", "read", "read"];
    let mut h = Harness::new(api_session([20_000; 6], tools), model(200_000, 32_000));
    h.step(&api_with(config), Moment::BeforeRequest).unwrap();
    let cleared: Vec<bool> = results_by_call(&h.view(&api())).into_iter().map(|(_, c)| c).collect();
    assert_eq!(cleared, [true, false, true, false, false, false]);

    // clear_tool_inputs: the cleared calls' inputs go too.
    let config = ClaudeCodeConfig { api_clear_tool_inputs: true, ..ClaudeCodeConfig::default() };
    let mut h = Harness::new(api_session([20_000; 6], reads), model(200_000, 32_000));
    h.step(&api_with(config), Moment::BeforeRequest).unwrap();
    let args: Vec<serde_json::Value> = h
        .view(&api())
        .iter()
        .flat_map(|m| m.parts.clone())
        .filter_map(|p| if let Part::ToolCall { args, .. } = p { Some(args) } else { None })
        .collect();
    assert_eq!(args[0], json!({}));
    assert_eq!(args[3], json!({"path": "src/p4.rs"}));
}

#[test]
fn case_12_api_server_compaction() {
    let session = |tokens: usize| vec![Message::system("sys"), Message::user(filler("plan", tokens - 1))];
    // 1 (system) + 159,999 = 160,000 input tokens.
    let mut h = Harness::new(session(160_000), model(200_000, 32_000));
    assert_eq!(h.decide(&api(), Moment::BeforeRequest), Decision::compact("compaction"));
    let cps = h.step(&api(), Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].details["edit"], json!("compact_20260112"));
    assert_eq!(cps[0].details["stop_reason"], json!(null), "the response continues");
    let req = &h.summarizer.requests()[0];
    assert!(req.transcript.contains("plan x") && req.instructions.contains("<summary>"));
    // The next request: the compaction block first, every earlier block dropped.
    h.push(Message::assistant("continuing"));
    h.push(Message::user("more"));
    let view = h.view(&api());
    let shown: Vec<(Role, String)> = view.iter().map(|m| (m.role, m.text())).collect();
    assert_eq!(
        shown,
        [
            (Role::System, "sys".to_owned()),
            (Role::User, "SUMMARY 1 of compaction".to_owned()),
            (Role::Assistant, "continuing".to_owned()),
            (Role::User, "more".to_owned()),
        ]
    );
    assert!(matches!(view.messages[1].origin, Origin::Summary(_)));

    let mut h = Harness::new(session(149_999), model(200_000, 32_000));
    assert_eq!(h.decide(&api(), Moment::BeforeRequest), Decision::Skip);

    let invalid = ClaudeCodeConfig { api_compact_trigger: Some(49_999), ..ClaudeCodeConfig::default() };
    assert!(ClaudeCodeStrategy::api_context_management(invalid).is_err());
    let lowest = ClaudeCodeConfig { api_compact_trigger: Some(50_000), ..ClaudeCodeConfig::default() };
    assert!(ClaudeCodeStrategy::api_context_management(lowest).is_ok());

    let paused = ClaudeCodeConfig { api_pause_after_compaction: true, ..ClaudeCodeConfig::default() };
    let mut h = Harness::new(session(160_000), model(200_000, 32_000));
    let cps = h.step(&api_with(paused), Moment::BeforeRequest).unwrap();
    assert_eq!(cps[0].details["stop_reason"], json!("compaction"));
}

// ---------------------------------------------------------------------------------------------
// Section (e): the checkpoint.

#[test]
fn summary_then_attachments_in_order() {
    let messages = vec![
        sys(),
        Message::user("plan it"),
        Message::tool_call("p", "ExitPlanMode", json!({"plan": "1. split auth 2. test"})),
        result("p", "ExitPlanMode", "approved"),
        call("r", "read", "src/auth.rs"),
        result("r", "read", "fn auth() {}"),
        Message::tool_call("s", "Skill", json!({"skill": "pdf"})),
        result("s", "Skill", "How to handle PDFs"),
        Message::tool_call("t", "TodoWrite", json!({"todos": [{"content": "split auth", "status": "in_progress"}, {"content": "test", "status": "pending"}]})),
        result("t", "TodoWrite", "ok"),
    ];
    let mut h = Harness::new(messages, small());
    h.compact(&v2168(), Moment::BeforeRequest).unwrap();
    let view = h.view(&v2168());
    let summary = view.messages[1].message.text();
    assert!(summary.starts_with("This session continues an earlier conversation that ran out of context."));
    assert!(summary.contains("Summary:") || summary.contains("SUMMARY 1"));
    assert!(summary.contains(TRANSCRIPT_PATH));
    assert!(summary.contains("without asking the user"));
    let injected = injected_texts(&view);
    let starts: Vec<&str> = injected.iter().map(|t| t.split_whitespace().next().unwrap()).collect();
    assert_eq!(starts, ["Project", "A", "Contents", "The", "The"], "{injected:#?}");
    assert!(injected[1].contains("1. split auth 2. test"));
    assert!(injected[2].contains("src/auth.rs") && injected[2].contains("fn auth() {}"));
    assert!(injected[3].contains("\"pdf\"") && injected[3].contains("How to handle PDFs"));
    assert_eq!(injected[4], "The todo list as it stood before the summary:\n- [in_progress] split auth\n- [pending] test");
    assert!(view.iter().skip(1).all(|m| m.role == Role::User));
}

#[test]
fn the_transcript_pointer_reads_back_every_message() {
    let mut h = Harness::new(session_at(SMALL_T + 1), small());
    let cp = h.step(&cc(), Moment::BeforeRequest).unwrap().remove(0);
    assert_eq!(cp.offloads.len(), 1);
    assert_eq!(cp.offloads[0].path, TRANSCRIPT_PATH);
    assert_eq!(cp.offloads[0].entries.len(), h.log.messages().count());
    let file = h.store.read(TRANSCRIPT_PATH).unwrap();
    assert!(file.contains("show plan before coding") && file.contains("error[E0599]: no method named `verify`"));
    assert_eq!(file.lines().count(), session_at(SMALL_T + 1).len());

    // A second compaction rewrites it with the first boundary and summary in place.
    h.push(Message::user("next"));
    h.push(replied(Message::assistant("ok"), SMALL_T + 1, 1));
    h.step(&cc(), Moment::BeforeRequest).unwrap();
    let file = h.store.read(TRANSCRIPT_PATH).unwrap();
    assert!(file.contains(r#""subtype":"compact_boundary""#) && file.contains("SUMMARY 1 of compact"));

    let off = ClaudeCodeConfig { transcript_pointer: false, ..ClaudeCodeConfig::default() };
    let mut h = Harness::new(session_at(SMALL_T + 1), small());
    let cp = h.step(&cc_with(off), Moment::BeforeRequest).unwrap().remove(0);
    assert!(cp.offloads.is_empty() && h.store.is_empty());
    assert!(!cp.summary.unwrap().text().contains(TRANSCRIPT_PATH));
}

#[test]
fn instructions_file_is_the_system_prompt_or_configured_text() {
    let text = |config: ClaudeCodeConfig| {
        let mut h = Harness::new(session_at(SMALL_T + 1), small());
        let cp = h.compact(&cc_with(config), Moment::BeforeRequest).unwrap().remove(0);
        cp.injected.first().map(Message::text).unwrap_or_default()
    };
    assert!(text(ClaudeCodeConfig::default()).contains(SYSTEM));
    let own = text(ClaudeCodeConfig { claude_md: Some("Always run cargo fmt.".into()), ..ClaudeCodeConfig::default() });
    assert!(own.contains("Always run cargo fmt.") && !own.contains(SYSTEM));
    let none = text(ClaudeCodeConfig { claude_md: Some(String::new()), ..ClaudeCodeConfig::default() });
    assert!(!none.starts_with("Project instructions"));
}

// ---------------------------------------------------------------------------------------------
// Section (g): failures.

#[test]
fn an_empty_summary_fails_and_a_cut_off_one_is_used() {
    let mut h = Harness::new(session_at(SMALL_T + 1), small());
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("   ".into()));
    let err = h.step(&cc(), Moment::BeforeRequest).unwrap_err();
    assert_eq!(err.kind, ErrorKind::EmptySummary);
    assert_eq!(h.failures, 1);

    let log = Log::from_messages(session_at(SMALL_T + 1));
    let summarizer = Scripted::new([ok("<analysis>thinking</analysis>\n<summary>1. Primary request: refac", StopReason::Length)]);
    let cp = compact_with(&cc(), &log, Moment::BeforeRequest, &small(), &summarizer).unwrap().remove(0);
    assert_eq!(cp.details["cut_off"], json!(true));
    let text = cp.summary.unwrap().text();
    assert!(text.contains("<summary>1. Primary request: refac") && !text.contains("thinking"));
}

#[test]
fn summary_formatting_strips_the_analysis() {
    assert_eq!(
        format_summary("<analysis>draft\n\nmore</analysis>\n\n\n<summary>\n1. Intent: x\n\n\n2. Files: y\n</summary>"),
        "Summary:\n1. Intent: x\n\n2. Files: y"
    );
    assert_eq!(format_summary("plain text"), "plain text");
}

#[test]
fn auto_compact_off_never_compacts_but_compact_still_runs() {
    let off = cc_with(ClaudeCodeConfig { auto_compact: false, ..ClaudeCodeConfig::default() });
    let mut h = Harness::new(session_at(SMALL_T + 1), small());
    assert_eq!(h.decide(&off, Moment::BeforeRequest), Decision::Skip);
    assert_eq!(h.decide(&off, Moment::Overflow), Decision::Skip);
    assert_eq!(h.compact(&off, Moment::BeforeRequest).unwrap().len(), 1);
}

#[test]
fn variants_are_named_and_modelled() {
    let v = variants();
    let ids: Vec<&str> = v.iter().map(|s| s.info().id.as_str()).collect();
    assert_eq!(ids, ["claude-code", "claude-code/v2.1.68", "claude-code/v2.1.20", "claude-code/api-context-management"]);
    assert!(v.iter().all(|s| s.info().fidelity == compactbench_core::Fidelity::Modelled && s.info().harness == "claude-code"));
    assert_eq!(crate::strategy().info().id, "claude-code");
}
