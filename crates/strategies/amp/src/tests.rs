//! Tests: one per section (j) case of the spec (`case_NN_…`), the failure rules of section (g),
//! and the compaction variant.

use compactbench_core::{
    CheckpointKind, Cx, Decision, ErrorKind, Message, Moment, Origin, Role, Strategy, Usage, View, Window,
};
use compactbench_testkit::{json, model, FakeMode, FakeSummarizer, Harness};

use crate::handoff::{names, DRAFT_MAX_TOKENS};
use crate::read::ANSWER_MAX_TOKENS;
use crate::thread::{self, thread_id, url};
use crate::{count, variants, AmpConfig, AmpStrategy};

// ---------------------------------------------------------------------------------------------
// Fixtures.

fn amp() -> AmpStrategy {
    AmpStrategy::new(AmpConfig::default())
}

fn compaction() -> AmpStrategy {
    AmpStrategy::compaction(AmpConfig::default())
}

const SYSTEM: &str = "You are Amp. Project rules: run the tests before committing.";

fn sys() -> Message {
    Message::system(SYSTEM)
}

/// `message` as a reply the runner received for a request of `input` tokens.
fn replied(mut message: Message, input: u64, output: u64) -> Message {
    message.usage = Some(Usage { input, output, ..Default::default() });
    message
}

fn call(id: &str, name: &str, path: &str) -> Message {
    Message::tool_call(id, name, json!({ "path": path }))
}

fn result(id: &str, name: &str, text: &str) -> Message {
    Message::tool_result(id, name, text, false)
}

fn w200k() -> compactbench_core::ModelProfile {
    model(200_000, 8_192)
}

fn is_compact(d: &Decision) -> bool {
    matches!(d, Decision::Compact { .. })
}

fn fixed(h: &mut Harness, text: &str) {
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed(text.into()));
}

/// The OAuth thread of the spec's worked example, small.
fn oauth_thread() -> Vec<Message> {
    vec![
        sys(),
        Message::user("add OAuth login; no new deps"),
        call("c1", "read", "src/auth/oauth.ts"),
        result("c1", "read", "export function login() { /* OAUTH-BODY */ }"),
        call("c2", "edit", "src/auth/csrf.ts"),
        result("c2", "edit", "ok"),
        call("c3", "read", "test/auth.spec.ts"),
        result("c3", "read", "it('rejects a missing CSRF token')"),
        Message::assistant("Login flow implemented; the CSRF test fails with `csrf token mismatch`."),
        Message::user("fix the CSRF failure"),
    ]
}

const DRAFT: &str = "Fix the CSRF failure in src/auth/csrf.ts: the test test/auth.spec.ts fails with \
                     `csrf token mismatch`. Constraint: no new deps. Login flow in src/auth/oauth.ts is done.";

fn seed_text(view: &View) -> String {
    view.messages.iter().find(|m| matches!(m.origin, Origin::Summary(_))).expect("a seed message").message.text()
}

// ---------------------------------------------------------------------------------------------
// Section (j).

#[test]
fn case_01_trigger_at_85_percent_of_the_window() {
    let s = amp();
    assert_eq!(AmpConfig::default().threshold(200_000), 170_000);
    // Provider usage: the reply answered a 169,990-token prompt with 9 (then 10) tokens.
    let mut h = Harness::new([sys(), Message::user("go"), replied(Message::assistant("ok"), 169_990, 9)], w200k());
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip, "169,999 < 170,000");
    let mut h2 = Harness::new([sys(), Message::user("go"), replied(Message::assistant("ok"), 169_990, 10)], w200k());
    assert!(is_compact(&h2.decide(&s, Moment::BeforeRequest)), "170,000 >= 170,000");
    assert_eq!(h2.decide(&s, Moment::TurnEnd), Decision::Skip, "only before a request");
    // Overflow hands off too.
    assert!(is_compact(&h.decide(&s, Moment::Overflow)));
    // Without usage the whole view is estimated with ceil(chars / 4).
    let view = h.view(&s);
    let h3 = Harness::new(view.iter().map(|m| Message { usage: None, ..m.clone() }), w200k());
    assert_eq!(count::context_tokens(&h3.view(&s)), view.iter().map(count::message_tokens).sum::<u64>());
    // The compaction variant uses the same trigger.
    assert_eq!(h.decide(&compaction(), Moment::BeforeRequest), Decision::Skip);
    assert!(is_compact(&h2.decide(&compaction(), Moment::BeforeRequest)));
}

#[test]
fn case_02_new_thread_holds_system_and_one_seed_message() {
    let s = amp();
    let mut h = Harness::new(oauth_thread(), w200k());
    fixed(&mut h, DRAFT);
    let cps = h.compact(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Handoff);
    assert_eq!(cps[0].window, Window::Kept(Vec::new()));

    let view = h.view(&s);
    assert_eq!(view.len(), 2, "{view:?}");
    assert_eq!(view.messages[0].origin, Origin::Entry(compactbench_core::EntryId(0)));
    assert_eq!(view.messages[0].message.text(), SYSTEM);
    assert!(matches!(view.messages[1].origin, Origin::Summary(_)));
    assert_eq!(view.messages[1].message.role, Role::User);
    assert!(view.iter().all(|m| !m.has_tool_calls() && m.tool_result_ids().next().is_none()));

    let parent = cps[0].details["parent_thread_id"].as_str().unwrap();
    let text = seed_text(&view);
    assert!(text.contains(DRAFT), "{text}");
    assert!(text.contains("Relevant files:\n- src/auth/oauth.ts\n- src/auth/csrf.ts\n- test/auth.spec.ts\n"), "{text}");
    assert!(text.contains(&url(parent)), "the seed names the parent thread: {text}");
    // The parent's URL is recorded as an offload, so probes find and read it.
    assert_eq!(cps[0].offloads.len(), 1);
    assert_eq!(cps[0].offloads[0].path, url(parent));
}

#[test]
fn case_03_old_thread_is_untouched_and_addressable() {
    let s = amp();
    let mut h = Harness::new(oauth_thread(), w200k());
    fixed(&mut h, DRAFT);
    let before_log = h.log.clone();
    let before = h.view(&s);
    let before_tokens: u64 = before.iter().map(count::message_tokens).sum();
    let cps = h.compact(&s, Moment::BeforeRequest).unwrap(); // the harness asserts the log only grew

    // The old thread, projected from the log as it was, is the same as before.
    assert_eq!(s.project(&before_log), before);
    assert_eq!(s.project(&before_log).iter().map(count::message_tokens).sum::<u64>(), before_tokens);
    // Addressable by id: the stored copy holds every message, in order, with its content.
    let parent = cps[0].details["parent_thread_id"].as_str().unwrap();
    let stored = thread::parse(h.store.read(&url(parent)).unwrap()).unwrap();
    assert_eq!(stored.id, parent);
    assert_eq!(stored.parent, None);
    assert_eq!(stored.messages.len(), before.len());
    for (i, (m, vm)) in stored.messages.iter().zip(&before.messages).enumerate() {
        assert_eq!(m.index, i);
        assert_eq!(m.role, vm.message.role.as_str());
        for part in vm.message.searchable_text().lines() {
            assert!(m.body.contains(part), "message {i} lost {part:?}");
        }
    }
    // A needle only the old thread holds is recoverable by reading the URL the seed names.
    let seed = seed_text(&h.view(&s));
    assert!(!seed.contains("OAUTH-BODY"));
    let named = h.store.paths().find(|p| seed.contains(p)).unwrap();
    assert!(h.store.read(named).unwrap().contains("OAUTH-BODY"));
    assert_eq!(cps[0].offloads[0].entries.len(), before.len());
}

#[test]
fn case_04_goal_is_carried_verbatim() {
    let s = amp();
    let mut h = Harness::new(oauth_thread(), w200k());
    h.compact(&s, Moment::BeforeRequest).unwrap();
    let seed = seed_text(&h.view(&s));
    assert!(seed.starts_with("Goal: fix the CSRF failure\n"), "{seed}");
    let request = &h.summarizer.requests()[0];
    assert!(request.instructions.contains("fix the CSRF failure"), "the draft pursues the goal");

    // Manual `/handoff <goal>`.
    let mut h = Harness::new(oauth_thread(), w200k());
    let goal = "Also add logout, keeping the session cookie name `sid`.";
    let cps = {
        let mut cx = Cx::new(&h.model, &h.summarizer, &mut h.store, compactbench_testkit::tokenizer());
        s.handoff(&h.log, goal, &mut cx).unwrap()
    };
    assert_eq!(cps[0].details["trigger"], "manual");
    assert_eq!(cps[0].details["goal"], goal);
    assert!(cps[0].summary.as_ref().unwrap().text().contains(goal));
    assert!(h.summarizer.requests()[0].instructions.contains(goal));
}

#[test]
fn case_05_relevant_files_are_named_and_touched_paths_only() {
    let s = amp();
    let mut h = Harness::new(
        [
            sys(),
            Message::user("tidy the docs"),
            call("c1", "read", "a.ts"),
            result("c1", "read", "A-CONTENT"),
            call("c2", "edit", "b.ts"),
            result("c2", "edit", "ok"),
            call("c3", "write", "c.md"),
            result("c3", "write", "ok"),
            Message::user("next"),
        ],
        w200k(),
    );
    fixed(&mut h, "Continue with a.ts and c.md; create z.ts later.");
    let cps = h.compact(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps[0].details["files"], json!(["a.ts", "c.md"]));
    let seed = seed_text(&h.view(&s));
    assert!(seed.contains("Relevant files:\n- a.ts\n- c.md\n\n"), "{seed}");
    assert!(!seed.contains("- b.ts") && !seed.contains("- z.ts"));
    assert!(!seed.contains("A-CONTENT"), "paths only, no contents");

    // Whole-token matching.
    assert!(names("edit a.ts.", "a.ts"));
    assert!(names("(a.ts)", "a.ts"));
    assert!(!names("edit ba.ts", "a.ts"));
    assert!(!names("edit src/a.ts", "a.ts"));
    assert!(!names("edit a.tsx", "a.ts"));
}

/// A thread with "use port 8080" at message 10 and "switch to port 9090" at message 40,
/// handed off; returns the harness and the old thread's id.
fn port_thread() -> (Harness, String) {
    let mut messages = vec![sys()];
    for i in 1..=45 {
        let text = match i {
            10 => "Use port 8080 for the dev server.".to_owned(),
            40 => "Switch to port 9090 for the dev server.".to_owned(),
            _ => format!("Step {i} done."),
        };
        messages.push(if i % 2 == 0 { Message::user(text) } else { Message::assistant(text) });
    }
    let mut h = Harness::new(messages, w200k());
    let cps = h.compact(&amp(), Moment::BeforeRequest).unwrap();
    let id = cps[0].details["parent_thread_id"].as_str().unwrap().to_owned();
    (h, id)
}

#[test]
fn case_06_read_thread_prefers_the_newer_message() {
    let (h, id) = port_thread();
    let extractor = FakeSummarizer::new(FakeMode::Fixed("Port 9090 (message 40 revises message 10).".into()));
    let answer = amp().read_thread(&h.store, &id, "Which port?", false, &extractor).unwrap();
    assert!(answer.starts_with("Port 9090"), "{answer}");
    assert!(answer.ends_with(&format!("Sources (newest first): {id} message 40; {id} message 10")), "{answer}");

    let request = &extractor.requests()[0];
    assert_eq!(request.purpose, "read_thread");
    assert_eq!(request.max_output_tokens, ANSWER_MAX_TOKENS);
    let at_40 = request.transcript.find(&format!("[{id} message 40]")).unwrap();
    let at_10 = request.transcript.find(&format!("[{id} message 10]")).unwrap();
    assert!(at_40 < at_10, "newest first");
    assert!(request.transcript[at_40..at_10].contains("9090"));
    assert!(request.instructions.contains("newer one holds"));
    // The URL works as well as the id.
    assert!(amp().read_thread(&h.store, &url(&id), "Which port?", false, &FakeSummarizer::default()).is_ok());
}

#[test]
fn case_07_read_thread_reports_tool_calls_as_attempts() {
    let mut h = Harness::new(
        [
            sys(),
            Message::user("deploy to staging"),
            Message::tool_call("d1", "deploy", json!({"env": "staging"})),
            Message::tool_result("d1", "deploy", "permission denied for staging", true),
            Message::user("leave it for now"),
        ],
        w200k(),
    );
    let cps = h.compact(&amp(), Moment::BeforeRequest).unwrap();
    let id = cps[0].details["parent_thread_id"].as_str().unwrap();
    let extractor = FakeSummarizer::default();
    let answer = amp().read_thread(&h.store, id, "Was it deployed?", false, &extractor).unwrap();
    let t = &extractor.requests()[0].transcript;
    assert!(t.contains("tool call, attempted (not an outcome): deploy {\"env\":\"staging\"}"), "{t}");
    assert!(t.contains("observed output of deploy (error, the attempt failed): permission denied for staging"), "{t}");
    assert!(!t.contains("deployed successfully"));
    assert!(extractor.requests()[0].instructions.contains("A tool call is an attempt, not an outcome"));
    assert!(answer.contains(&format!("{id} message 3")), "the failed result is cited: {answer}");
}

#[test]
fn case_08_chain_reaches_the_grandparent_through_the_parent() {
    let s = amp();
    let mut h = Harness::new(
        [sys(), Message::user("build the importer; never add new deps"), Message::assistant("Importer skeleton written.")],
        w200k(),
    );
    let a = h.compact(&s, Moment::BeforeRequest).unwrap()[0].details.clone();
    h.push(Message::user("now add CSV export"));
    h.push(Message::assistant("CSV export added."));
    let b = h.compact(&s, Moment::BeforeRequest).unwrap()[0].details.clone();
    h.push(Message::user("and JSON export"));

    let (a_id, b_id, c_id) = (a["parent_thread_id"].as_str().unwrap(), b["parent_thread_id"].as_str().unwrap(), b["thread_id"].as_str().unwrap());
    assert_eq!(a["thread_id"], b_id, "B is A's child");
    assert_eq!((a["number"].as_u64(), b["number"].as_u64()), (Some(2), Some(3)));
    assert_ne!(a_id, b_id);
    assert_ne!(b_id, c_id);

    // C's view: system, C's seed (naming B, not A), C's own messages.
    let view = h.view(&s);
    let roles: Vec<_> = view.messages.iter().map(|m| (m.origin, m.message.text())).collect();
    assert_eq!(view.len(), 3, "{roles:?}");
    assert!(matches!(view.messages[1].origin, Origin::Summary(_)));
    assert_eq!(view.messages[2].message.text(), "and JSON export");
    let seed = view.messages[1].message.text();
    assert!(seed.contains(&url(b_id)) && !seed.contains(a_id));

    // B's stored copy names A as its parent; read_thread on B with ancestors reaches A.
    assert_eq!(thread::parse(h.store.read(&url(b_id)).unwrap()).unwrap().parent.as_deref(), Some(a_id));
    let extractor = FakeSummarizer::default();
    let answer = s.read_thread(&h.store, b_id, "Which deps were rejected?", true, &extractor).unwrap();
    assert!(answer.contains(&format!("{a_id} message 1")), "{answer}");
    assert!(extractor.requests()[0].transcript.contains("never add new deps"));
    // Without ancestors, only B is searched: its seed is orientation, never evidence.
    let extractor = FakeSummarizer::default();
    let answer = s.read_thread(&h.store, b_id, "Which deps were rejected?", false, &extractor).unwrap();
    assert!(!answer.contains(a_id), "{answer}");
    assert!(extractor.requests().is_empty(), "nothing matched in B's own messages");
}

#[test]
fn case_09_draft_failure_keeps_the_active_thread() {
    let s = amp();
    let mut h = Harness::new(oauth_thread(), w200k());
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Transport));
    let before = h.view(&s);
    let len = h.log.len();
    let err = h.compact(&s, Moment::BeforeRequest).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Transport);
    assert_eq!(h.log.len(), len, "no new thread");
    assert_eq!(h.view(&s), before);
    assert!(h.store.is_empty(), "nothing stored");
    // An empty draft is no draft either.
    fixed(&mut h, "  ");
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap_err().kind, ErrorKind::EmptySummary);
    assert_eq!(h.log.len(), len);
}

// ---------------------------------------------------------------------------------------------
// Draft request, fitting, repeated handoff.

#[test]
fn draft_request_replays_the_thread_natively() {
    let s = amp();
    let mut h = Harness::new(oauth_thread(), w200k());
    h.compact(&s, Moment::BeforeRequest).unwrap();
    let r = &h.summarizer.requests()[0];
    assert_eq!(r.purpose, "handoff");
    assert_eq!(r.system, SYSTEM);
    assert_eq!(r.max_output_tokens, DRAFT_MAX_TOKENS);
    let lines: Vec<&str> = r.transcript.lines().collect();
    assert_eq!(lines.len(), oauth_thread().len() - 1, "every message but the system prompt");
    assert_eq!(lines[0], r#"{"role":"user","content":[{"type":"text","text":"add OAuth login; no new deps"}]}"#);
    assert!(lines[1].contains(r#""type":"tool_use""#) && lines[2].contains(r#""type":"tool_result""#));
}

#[test]
fn too_large_thread_drops_oldest_messages_from_the_draft_input_only() {
    let s = amp();
    let big = |tag: &str| format!("{tag} {}", "x".repeat(8_000));
    let mut h = Harness::new(
        [
            sys(),
            Message::user(big("OLDEST")),
            Message::tool_call("c1", "bash", json!({ "command": big("CALLARG") })),
            result("c1", "bash", "RESULT-SMALL"),
            Message::assistant(big("MIDDLE")),
            Message::user("finish it"),
        ],
        model(8_000, 4_096),
    );
    let cps = h.compact(&s, Moment::BeforeRequest).unwrap();
    let t = &h.summarizer.requests()[0].transcript;
    assert!(!t.contains("OLDEST") && !t.contains("CALLARG"), "oldest dropped until it fits");
    assert!(!t.contains("RESULT-SMALL"), "then the result whose call went");
    assert!(t.contains("MIDDLE") && t.contains("finish it"));
    assert_eq!(cps[0].details["dropped_from_draft"], 3);
    let parent = cps[0].details["parent_thread_id"].as_str().unwrap();
    let stored = h.store.read(&url(parent)).unwrap();
    assert!(stored.contains("OLDEST") && stored.contains("RESULT-SMALL"), "the stored thread is whole");
}

#[test]
fn a_thread_holding_only_its_seed_is_not_handed_off_again() {
    let s = amp();
    let mut h = Harness::new(oauth_thread(), model(1_000, 100));
    fixed(&mut h, &"long draft ".repeat(500));
    h.compact(&s, Moment::BeforeRequest).unwrap();
    assert!(count::context_tokens(&h.view(&s)) >= AmpConfig::default().threshold(1_000));
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    assert_eq!(h.decide(&s, Moment::Overflow), Decision::Skip);
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap_err().kind, ErrorKind::NothingToCompact);
}

#[test]
fn next_draft_is_written_from_the_current_thread_only() {
    let s = amp();
    let mut h = Harness::new(oauth_thread(), w200k());
    h.compact(&s, Moment::BeforeRequest).unwrap();
    h.push(Message::assistant("CSRF fixed."));
    h.push(Message::user("also add logout"));
    h.compact(&s, Moment::BeforeRequest).unwrap();
    let t = &h.summarizer.requests()[1].transcript;
    assert!(t.contains("SUMMARY 1 of handoff"), "thread B starts with its seed");
    assert!(!t.contains("add OAuth login"), "thread A's messages are not in B's draft input");
    assert!(h.summarizer.requests()[1].instructions.contains("also add logout"));
}

#[test]
fn thread_ids_are_deterministic_and_shaped_like_amps() {
    let a = thread_id("seed", 1);
    assert_eq!(a, thread_id("seed", 1));
    assert_ne!(a, thread_id("seed", 2));
    assert_ne!(a, thread_id("other", 1));
    assert!(a.starts_with("T-") && a.len() == 38, "{a}");
    let groups: Vec<usize> = a[2..].split('-').map(str::len).collect();
    assert_eq!(groups, [8, 4, 4, 4, 12]);
    assert_eq!(&a[16..17], "4", "version nibble");
}

// ---------------------------------------------------------------------------------------------
// `amp/compaction`.

#[test]
fn compaction_summarizes_everything_and_keeps_nothing() {
    let s = compaction();
    let mut h = Harness::new(oauth_thread(), model(200_000, 64_000));
    let cps = h.compact(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(cps[0].kind, CheckpointKind::Summary);
    assert_eq!(cps[0].window, Window::Kept(Vec::new()));
    assert!(cps[0].offloads.is_empty());
    let r = &h.summarizer.requests()[0];
    assert_eq!(r.purpose, "compaction");
    assert_eq!(r.max_output_tokens, 20_000, "min(20,000, max_output)");
    let view = h.view(&s);
    assert_eq!(view.len(), 2);
    assert_eq!(view.messages[1].message.role, Role::User);
    assert!(view.messages[1].message.text().ends_with("SUMMARY 1 of compaction"));

    // The second compaction summarizes the first summary with what followed.
    h.push(Message::user("next task"));
    h.compact(&s, Moment::BeforeRequest).unwrap();
    let t = &h.summarizer.requests()[1].transcript;
    assert!(t.contains("SUMMARY 1 of compaction") && t.contains("next task"));
    assert_eq!(h.view(&s).len(), 2, "one summary in view");
}

#[test]
fn compaction_failure_leaves_the_thread_as_it_is() {
    let s = compaction();
    let mut h = Harness::new(oauth_thread(), w200k());
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(ErrorKind::Timeout));
    let len = h.log.len();
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap_err().kind, ErrorKind::Timeout);
    assert_eq!(h.log.len(), len);
    fixed(&mut h, "");
    assert_eq!(h.compact(&s, Moment::BeforeRequest).unwrap_err().kind, ErrorKind::EmptySummary);
    assert_eq!(h.log.len(), len);
}

#[test]
fn variants_are_handoff_first_then_compaction() {
    let ids: Vec<String> = variants().iter().map(|s| s.info().id.clone()).collect();
    assert_eq!(ids, ["amp", "amp/compaction"]);
    assert!(variants().iter().all(|s| s.info().fidelity == compactbench_core::Fidelity::Modelled));
    assert_eq!(crate::strategy().info().id, "amp");
}
