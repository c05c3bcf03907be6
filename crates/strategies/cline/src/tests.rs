//! Conformance cases of `shared/specs/cline.md` section (j), part 1, plus the checks.

use compactbench_core::{
    CheckpointKind, Decision, EntryId, Message, Moment, Origin, Part, Role, Strategy, SummarizerUsage, SummaryPosition, Usage,
    View, Window,
};
use compactbench_testkit::{assert_replay_law, json, model, FakeMode, FakeSummarizer, Harness};

use crate::fold::{optimize, DUPLICATE_FILE_READ_NOTICE};
use crate::history::{parse_tool_header, speakers, Speaker};
use crate::state::State;
use crate::task::Task;
use crate::trigger::is_next_gen;
use crate::truncate::{next_range, truncated, Keep, FIRST_USER_REPLACEMENT, TRUNCATION_NOTICE};
use crate::{ClineConfig, ClineStrategy, Staged};

// ---- helpers -------------------------------------------------------------------------------

/// Cline's test helper `createMessages(n)`: "Initial task message", then alternating
/// assistant / user "Message i" (odd indices are assistant messages).
fn msgs(n: usize) -> Vec<Message> {
    (0..n)
        .map(|i| match i {
            0 => Message::user("Initial task message"),
            i if i % 2 == 1 => Message::assistant(format!("Message {i}")),
            i => Message::user(format!("Message {i}")),
        })
        .collect()
}

/// Sets provider usage (all as uncached input) on the newest assistant message.
fn with_usage(mut messages: Vec<Message>, total: u64) -> Vec<Message> {
    let last = messages.iter_mut().rev().find(|m| m.role == Role::Assistant).expect("an assistant message");
    last.usage = Some(Usage { input: total, output: 0, ..Default::default() });
    messages
}

fn default_cline() -> ClineStrategy {
    ClineStrategy::new(ClineConfig::default())
}

fn condensing(threshold: Option<f64>) -> ClineStrategy {
    ClineStrategy::new(ClineConfig { use_auto_condense: true, auto_condense_threshold: threshold })
}

/// The log entries a view shows, in order (summaries and injected messages as `None`).
fn entries(view: &View) -> Vec<Option<u32>> {
    view.messages.iter().map(|m| m.origin.entry().map(|e| e.0)).collect()
}

fn shown(ids: &[u32]) -> Vec<Option<u32>> {
    ids.iter().map(|i| Some(*i)).collect()
}

/// The deleted range stored by the newest checkpoint.
fn range(h: &Harness) -> Option<[i64; 2]> {
    Task::of(&h.log).state.deleted_range
}

/// Compacts before a request, as the runner does after a `Compact` decision.
#[track_caller]
fn compact_now(h: &mut Harness, s: &ClineStrategy) -> Vec<compactbench_core::Checkpoint> {
    assert!(matches!(h.decide(s, Moment::BeforeRequest), Decision::Compact { .. }), "the trigger should fire");
    h.compact(s, Moment::BeforeRequest).expect("compaction succeeds")
}

/// The view of `messages` with a deleted range set directly (for ranges Cline's own
/// arithmetic never produces), through the same checkpoint data `compact` writes.
fn view_with_range(messages: Vec<Message>, deleted: [i64; 2]) -> View {
    let mut log = compactbench_core::Log::from_messages(messages);
    let task = Task::of(&log);
    let mut staged = Staged::new(&log, &task, 0);
    let next = State { deleted_range: Some(deleted), ..State::default() };
    staged.commit(CheckpointKind::Truncate, next, None, SummarizerUsage::default());
    for cp in staged.out {
        log.push_checkpoint(cp);
    }
    default_cline().project(&log)
}

fn text_of(view: &View, i: usize) -> String {
    view.messages[i].message.searchable_text()
}

// ---- (j) cases ------------------------------------------------------------------------------

#[test]
fn case_01_half_and_quarter_of_eleven() {
    // 128k window: limit 98,000. 100,000 / 2 is not over it -> half.
    let s = default_cline();
    let mut h = Harness::new(with_usage(msgs(11), 100_000), model(128_000, 8_192));
    let cps = compact_now(&mut h, &s);
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Truncate);
    assert_eq!(range(&h), Some([2, 5]));
    let view = h.view(&s);
    assert_eq!(entries(&view), shown(&[0, 1, 6, 7, 8, 9, 10]));
    assert_eq!(text_of(&view, 0), "Initial task message", "plain truncation keeps the task text");
    assert_eq!(text_of(&view, 1), TRUNCATION_NOTICE);
    assert_eq!(cps[0].window, Window::Kept([0, 1, 6, 7, 8, 9, 10].map(EntryId).to_vec()));

    // 200,000 / 2 > 98,000 -> quarter.
    let mut h = Harness::new(with_usage(msgs(11), 200_000), model(128_000, 8_192));
    compact_now(&mut h, &s);
    assert_eq!(range(&h), Some([2, 7]));
    assert_eq!(entries(&h.view(&s)), shown(&[0, 1, 8, 9, 10]));
}

#[test]
fn case_02_sequential_truncations_extend_one_range() {
    let s = default_cline();
    let mut h = Harness::new(with_usage(msgs(21), 100_000), model(128_000, 8_192));
    compact_now(&mut h, &s);
    assert_eq!(range(&h), Some([2, 9]));
    // The previous request's usage is still over the limit: the next request truncates again.
    let cps = compact_now(&mut h, &s);
    assert_eq!(range(&h), Some([2, 13]));
    assert!(cps[0].replacements.is_empty(), "the notice is written once");
    assert_eq!(entries(&h.view(&s)), shown(&[0, 1, 14, 15, 16, 17, 18, 19, 20]));

    let mut h = Harness::new(with_usage(msgs(41), 250_000), model(128_000, 8_192));
    compact_now(&mut h, &s);
    let [start1, end1] = range(&h).unwrap();
    compact_now(&mut h, &s);
    let [start2, end2] = range(&h).unwrap();
    assert_eq!((start1, start2), (2, 2));
    assert!(end2 > end1);
    assert_eq!((end1, end2), (29, 37));
}

#[test]
fn case_03_small_histories() {
    let s = default_cline();
    let mut h = Harness::new(with_usage(msgs(3), 100_000), model(128_000, 8_192));
    compact_now(&mut h, &s);
    assert_eq!(range(&h), Some([2, 1]), "an empty range");
    let view = h.view(&s);
    assert_eq!(entries(&view), shown(&[0, 1, 2]), "nothing removed");
    assert_eq!(text_of(&view, 1), TRUNCATION_NOTICE, "the notice is still written");

    let mut h = Harness::new(with_usage(msgs(14), 100_000), model(128_000, 8_192));
    compact_now(&mut h, &s);
    assert_eq!(range(&h), Some([2, 7]));
    let log_msgs: Vec<Role> = h.log.messages().map(|(_, m)| m.role).collect();
    assert_eq!(log_msgs[7], Role::Assistant);
    assert_eq!(log_msgs[8], Role::User);
    let view = h.view(&s);
    assert_eq!(view.messages[2].origin, Origin::Entry(EntryId(8)));
    // Alternation survives.
    assert!(view.iter().zip(view.iter().skip(1)).all(|(a, b)| a.role != b.role));
}

#[test]
fn case_04_none_and_last_two_back_off_from_a_final_user_message() {
    let roles = speakers(&Task::of(&compactbench_core::Log::from_messages(msgs(13))).history.messages);
    assert_eq!(roles[12], Speaker::User);
    assert_eq!(next_range(&roles, None, Keep::None), [2, 11]);
    assert_eq!(next_range(&roles, None, Keep::LastTwo), [2, 9]);
}

#[test]
fn case_04_auto_condense_hides_everything_up_to_the_summarize_call() {
    // The same 13 messages, ending with the user message that triggers the summary.
    let s = condensing(None);
    let mut messages = vec![Message::system("You are Cline.")];
    messages.extend(with_usage(msgs(13), 160_000));
    let mut m = model(200_000, 16_000);
    m.name = "claude-sonnet-4-5".into();
    let mut h = Harness::new(messages, m);
    let cps = compact_now(&mut h, &s);
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Summary);
    // [2, 11] from "none", then + 2 for the user message and the summarize_task call.
    assert_eq!(range(&h), Some([2, 13]));

    let requests = h.summarizer.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].system, "You are Cline.");
    assert!(requests[0].transcript.contains("Initial task message") && requests[0].transcript.contains("Message 12"));
    assert!(requests[0].instructions.starts_with("<explicit_instructions type=\"summarize_task\">"));
    assert!(requests[0].instructions.contains("9. Required Files:"));
    assert_eq!(requests[0].max_output_tokens, 16_000);
    assert_eq!(cps[0].summarizer.calls, 1);

    let view = h.view(&s);
    assert_eq!(view.len(), 4);
    assert_eq!(view.messages[0].message.role, Role::System);
    assert_eq!(text_of(&view, 1), FIRST_USER_REPLACEMENT);
    assert_eq!(text_of(&view, 2), TRUNCATION_NOTICE);
    let summary = &view.messages[3];
    assert_eq!(summary.origin, Origin::Summary(EntryId(14)));
    assert_eq!(summary.message.role, Role::User);
    assert_eq!(cps[0].summary_position, SummaryPosition::AfterKept);
    assert!(summary.message.text().starts_with("[summarize_task] Result:\n"));
    assert!(summary.message.text().contains("SUMMARY 1 of summarize_task"));

    // Work goes on; the next check sees only two active messages and does not summarize the
    // summary again, however high the usage.
    h.push(Message { usage: Some(Usage { input: 190_000, output: 0, ..Default::default() }), ..Message::assistant("next") });
    h.push(Message::user("more"));
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    let view = h.view(&s);
    assert_eq!(view.len(), 6, "system, first pair, summary, then the new messages");
    assert_eq!(view.messages[3].origin, Origin::Summary(EntryId(14)));
}

#[test]
fn case_05_view_keeps_the_first_pair_and_ignores_the_range_start() {
    let state = State::default();
    let hist = Task::of(&compactbench_core::Log::from_messages(msgs(3))).history.messages.clone();
    assert_eq!(truncated(&hist, &state).iter().map(|s| s.index).collect::<Vec<_>>(), [0, 1, 2]);

    assert_eq!(entries(&view_with_range(msgs(5), [1, 3])), shown(&[0, 1, 4]));
    assert_eq!(entries(&view_with_range(msgs(4), [1, 2])), shown(&[0, 1, 3]));
    let view = view_with_range(msgs(5), [2, 3]);
    assert_eq!(entries(&view), shown(&[0, 1, 4]));
    let roles: Vec<Role> = view.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::User]);
    assert_eq!(text_of(&view, 1), "Message 1", "setting a range alone writes no notice");
}

fn orphan_log() -> Vec<Message> {
    vec![
        Message::user("Initial task"),
        Message::assistant("Response 1"),
        Message::new(
            Role::Assistant,
            vec![Part::text("Using a tool"), Part::ToolCall { id: "tool_123".into(), name: "read_file".into(), args: json!({"path": "test.ts"}) }],
        ),
        Message::tool_result("tool_123", "read_file", "file content here", false),
        Message::user("Additional user text"),
        Message::assistant("Response 2"),
    ]
}

#[test]
fn case_06_orphaned_tool_results_are_stripped() {
    // The Cline test's range [2, 2], set directly.
    let view = view_with_range(orphan_log(), [2, 2]);
    assert_eq!(view.len(), 4);
    assert_eq!(view.messages[2].origin, Origin::Entry(EntryId(4)));
    assert_eq!(view.messages[2].message.role, Role::User);
    assert_eq!(view.messages[2].message.parts, vec![Part::text("Additional user text")]);

    // The same range is what the overflow path's "quarter" computes on this history.
    let s = default_cline();
    let mut h = Harness::new(orphan_log(), model(128_000, 8_192));
    assert!(matches!(h.decide(&s, Moment::Overflow), Decision::Compact { .. }));
    h.compact(&s, Moment::Overflow).unwrap();
    assert_eq!(range(&h), Some([2, 2]));
    let view = h.view(&s);
    assert_eq!(entries(&view), shown(&[0, 1, 4, 5]));
    assert_eq!(text_of(&view, 0), FIRST_USER_REPLACEMENT, "the overflow path also replaces the task text");
    assert_eq!(text_of(&view, 1), TRUNCATION_NOTICE);
    assert_eq!(text_of(&view, 2), "Additional user text");
}

const ENV: &str = "<environment_details>\n# Current Mode\nACT MODE\n</environment_details>";

fn xml_fold_log() -> Vec<Message> {
    let write = "[write_to_file for 'test.txt'] Result:\nThe content was successfully saved to test.txt.\n\nHere is the full, updated content of the file that was saved:\n\n<final_file_content path=\"test.txt\">\ntest\n\n</final_file_content>";
    let replace = "[replace_in_file for 'test.txt'] Result:\nThe content was successfully saved to test.txt.\n\nHere is the full, updated content of the file that was saved:\n\n<final_file_content path=\"test.txt\">\ntest 2\n\n</final_file_content>";
    vec![
        Message::user("Initial task"),
        Message::assistant("Response"),
        Message::new(Role::User, vec![Part::text(write), Part::text(ENV)]),
        Message::assistant("Response"),
        Message::new(Role::User, vec![Part::text(replace), Part::text(ENV)]),
        Message::assistant("Response"),
        Message::new(
            Role::User,
            vec![
                Part::text("[TASK RESUMPTION] This task was interrupted just now. The conversation may have been incomplete."),
                Part::text("New message to respond to:\n<user_message>\n'test.txt' (see below for file content) tell me whats in this file\n</user_message>\n\n<file_content path=\"test.txt\">\ntest 2\n\n</file_content>"),
            ],
        ),
    ]
}

#[test]
fn case_07_fold_detects_writes_and_mentions_in_xml_tool_results() {
    let log = compactbench_core::Log::from_messages(xml_fold_log());
    let mut state = State::default();
    let (changed, updated) = optimize(&Task::of(&log).history.messages, 2, &mut state);
    assert!(changed);
    assert_eq!(updated.into_iter().collect::<Vec<_>>(), [2, 4], "the latest mention (6) is kept");

    // Through the strategy: a fold checkpoint replacing exactly those two messages.
    let s = default_cline();
    let mut messages = xml_fold_log();
    messages[5].usage = Some(Usage { input: 100_000, output: 0, ..Default::default() });
    let mut h = Harness::new(messages, model(128_000, 8_192));
    let cps = compact_now(&mut h, &s);
    assert_eq!(cps[0].kind, CheckpointKind::Fold);
    assert_eq!(cps[0].window, Window::Inherit);
    let folded: Vec<u32> = cps[0].replacements.iter().map(|r| r.entry.0).collect();
    assert_eq!(folded, [2, 4]);
    let first = cps[0].replacements[0].message.parts[0].clone();
    let Part::Text { text } = first else { panic!("text block") };
    assert!(text.starts_with("[write_to_file for 'test.txt'] Result:\nThe content was successfully saved"));
    assert!(text.ends_with(&format!("<final_file_content path=\"test.txt\"> {DUPLICATE_FILE_READ_NOTICE} </final_file_content>")));
    assert_eq!(cps[0].replacements[0].message.parts[1], Part::text(ENV), "other blocks untouched");
}

fn native_fold_log(second_path: &str) -> Vec<Message> {
    let p = "/Users/toshi/Desktop/cline_testing_repo/test2.txt";
    let call = |id: &str, name: &str| Message::tool_call(id, name, json!({}));
    vec![
        Message::user("Initial task"),
        call("toolu_001", "plan_mode_respond"),
        Message::tool_result(
            "toolu_001",
            "plan_mode_respond",
            format!("[plan_mode_respond] Result:\n<user_message>\n'test2.txt' (see below for file content)\n</user_message>\n\n<file_content path=\"{p}\">\ntest\n\n</file_content>"),
            false,
        ),
        call("toolu_002", "write_to_file"),
        Message::tool_result(
            "toolu_002",
            "write_to_file",
            format!("[write_to_file for '{p}'] Result:\nThe content was successfully saved.\n\n<final_file_content path=\"{p}\">\ntest\n\n</final_file_content>"),
            false,
        ),
        Message::user(ENV),
        call("toolu_003", "text"),
        Message::new(
            Role::User,
            vec![
                Part::text("[TASK RESUMPTION] This task was interrupted just now. The conversation may have been incomplete."),
                Part::text("New message to respond to with plan_mode_respond tool"),
            ],
        ),
        call("toolu_004", "replace_in_file"),
        Message::tool_result(
            "toolu_004",
            "replace_in_file",
            format!("[replace_in_file for '{second_path}'] Result:\nThe content was successfully saved.\n\n<final_file_content path=\"{second_path}\">\ntest2\n\n</final_file_content>"),
            false,
        ),
        Message::user(ENV),
    ]
}

#[test]
fn case_08_fold_detects_reads_inside_native_tool_results() {
    let same = "/Users/toshi/Desktop/cline_testing_repo/test2.txt";
    let log = compactbench_core::Log::from_messages(native_fold_log(same));
    let hist = Task::of(&log).history.messages.clone();
    assert_eq!(hist.len(), 9, "tool result plus environment text form one user message");
    let mut state = State::default();
    let (changed, updated) = optimize(&hist, 2, &mut state);
    assert!(changed);
    assert_eq!(updated.into_iter().collect::<Vec<_>>(), [2, 4], "not 8, the latest");
    // Message 4's edit lands on the tool result (log entry 4), not on the environment text.
    let mut h = Harness::new(with_usage(native_fold_log(same), 100_000), model(128_000, 8_192));
    let cps = compact_now(&mut h, &default_cline());
    let folded: Vec<u32> = cps[0].replacements.iter().map(|r| r.entry.0).collect();
    assert_eq!(folded, [2, 4]);

    // Two different paths: nothing to fold.
    let no_dupes = vec![
        Message::user("Initial task"),
        Message::assistant("Response"),
        Message::user("[write_to_file for 'test.txt'] Result:\n<final_file_content path=\"test.txt\">\ntest\n\n</final_file_content>"),
        Message::assistant("Response"),
        Message::user("[write_to_file for 'other.txt'] Result:\n<final_file_content path=\"other.txt\">\nother content\n\n</final_file_content>"),
    ];
    let mut state = State::default();
    let (changed, updated) = optimize(&Task::of(&compactbench_core::Log::from_messages(no_dupes)).history.messages, 2, &mut state);
    assert!(!changed && updated.is_empty());
    assert_eq!(state, State::default());

    // Only the first pair.
    let mut state = State::default();
    let pair = vec![Message::user("Initial task"), Message::assistant("Response")];
    let (changed, updated) = optimize(&Task::of(&compactbench_core::Log::from_messages(pair)).history.messages, 2, &mut state);
    assert!(!changed && updated.is_empty());
}

#[test]
fn case_09_auto_condense_trigger_thresholds() {
    let mut m = model(200_000, 16_000);
    m.name = "claude-sonnet-4".into();
    let decide = |threshold: Option<f64>, usage: Option<Usage>| {
        let mut messages = vec![Message::user("task"), Message::assistant("answer"), Message::user("go on")];
        messages[1].usage = usage;
        let mut h = Harness::new(messages, m.clone());
        h.decide(&condensing(threshold), Moment::BeforeRequest) != Decision::Skip
    };
    let u = |input: u64, output: u64, cache_read: u64| Some(Usage { input, output, cache_read, ..Default::default() });
    assert!(!decide(Some(0.75), u(30_000, 3_000, 0)));
    assert!(decide(Some(0.75), u(140_000, 15_000, 0)));
    assert!(decide(Some(0.05), u(9_000, 1_500, 0)), "floor(200,000 x 0.05) = 10,000 <= 10,500");
    assert!(!decide(None, u(150_000, 5_000, 0)), "no threshold: the 160,000 limit");
    assert!(!decide(Some(0.0), u(150_000, 5_000, 0)), "0 is falsy: the limit");
    assert!(decide(Some(0.75), u(5_000, 500, 150_000)), "cache reads count");
    let written = Some(Usage { input: 5_000, output: 500, cache_read: 0, cache_write: 150_000 });
    assert!(decide(Some(0.75), written), "cache writes count");
    assert!(!decide(Some(0.75), Some(Usage { cache_write: 144_499, ..written.unwrap() })), "149,999 < 150,000");
    assert!(!decide(Some(0.75), None), "no previous request");
    assert!(decide(Some(1.0), u(165_000, 0, 0)), "capped at the limit");
}

#[test]
fn case_10_reserve_per_window() {
    let s = default_cline();
    let fires = |window: u64, usage: u64| {
        let mut h = Harness::new(with_usage(msgs(5), usage), model(window, 8_192));
        h.decide(&s, Moment::BeforeRequest) != Decision::Skip
    };
    for (window, limit) in [(64_000, 37_000), (128_000, 98_000), (200_000, 160_000), (1_000_000, 960_000), (0, 98_000)] {
        assert!(fires(window, limit), "window {window} fires at {limit}");
        assert!(!fires(window, limit - 1), "window {window} waits below {limit}");
    }
    // 32,768 -> 26,214.4.
    assert!(fires(32_768, 26_215));
    assert!(!fires(32_768, 26_214));

    // 250,000 on a 128k window: 125,000 > 98,000, so three quarters go.
    let mut h = Harness::new(with_usage(msgs(11), 250_000), model(128_000, 8_192));
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::compact("usage over limit, keep quarter"));
    h.compact(&s, Moment::BeforeRequest).unwrap();
    assert_eq!(range(&h), Some([2, 7]));
}

/// A session reading `f.rs` twice, the copies `body` characters long, and a user message of
/// `filler` characters at the end; the previous request used 100,000 tokens (128k window).
fn double_read(body: usize, filler: usize) -> Vec<Message> {
    let content: String = "x".repeat(body);
    let read = |id: &str| Message::tool_call(id, "read_file", json!({"path": "f.rs"}));
    with_usage(
        vec![
            Message::user("task"),
            read("c1"),
            Message::tool_result("c1", "read_file", content.clone(), false),
            read("c2"),
            Message::tool_result("c2", "read_file", content, false),
            Message::assistant("ok"),
            Message::user("y".repeat(filler)),
        ],
        100_000,
    )
}

/// Characters of `double_read` without the filler: Cline counts the derived result header.
fn double_read_fixed(body: usize) -> usize {
    let header = "[read_file for 'f.rs'] Result:\n".len();
    "task".len() + 2 * (header + body) + "ok".len()
}

#[test]
fn case_11_fold_savings_gate_at_thirty_percent() {
    let s = default_cline();
    let body = DUPLICATE_FILE_READ_NOTICE.len() + 3_000; // the fold saves exactly 3,000
    // 3,000 of 10,000 = 30%: no truncation this request.
    let mut h = Harness::new(double_read(body, 10_000 - double_read_fixed(body)), model(128_000, 8_192));
    let cps = compact_now(&mut h, &s);
    assert_eq!(cps.iter().map(|c| c.kind).collect::<Vec<_>>(), [CheckpointKind::Fold]);
    assert_eq!(range(&h), None);
    let view = h.view(&s);
    assert_eq!(entries(&view), shown(&[0, 1, 2, 3, 4, 5, 6]));
    assert_eq!(
        view.messages[2].message.parts,
        vec![Part::ToolResult { call_id: "c1".into(), name: "read_file".into(), text: DUPLICATE_FILE_READ_NOTICE.into(), is_error: false }],
        "the older copy is folded, its call stays paired"
    );
    assert_eq!(view.messages[4].message.searchable_text().len(), body, "the latest copy stays");

    // 3,000 of 10,345 = 29%: the fold is kept and truncation still happens.
    let mut h = Harness::new(double_read(body, 10_345 - double_read_fixed(body)), model(128_000, 8_192));
    let cps = compact_now(&mut h, &s);
    assert_eq!(cps.iter().map(|c| c.kind).collect::<Vec<_>>(), [CheckpointKind::Fold, CheckpointKind::Truncate]);
    assert_eq!(range(&h), Some([2, 3]));
    let view = h.view(&s);
    // The first assistant message is a bare tool call: the notice has no text block to land
    // in. The results message after the range loses its result and Cline's repair answers
    // the first call with "result missing".
    assert_eq!(entries(&view), vec![Some(0), Some(1), None, Some(5), Some(6)]);
    assert_eq!(view.messages[1].message, h.log.message(EntryId(1)).unwrap().clone());
    assert_eq!(view.messages[2].origin, Origin::Injected(EntryId(8)));
    assert_eq!(
        view.messages[2].message.parts,
        vec![Part::ToolResult { call_id: "c1".into(), name: "read_file".into(), text: "result missing".into(), is_error: false }]
    );
}

// ---- further checks -------------------------------------------------------------------------

#[test]
fn cline_compacts_with_zero_summarizer_tokens() {
    for s in [default_cline(), condensing(None)] {
        // The auto-condense variant falls back to truncation on a model outside the next-gen
        // families ("test-model").
        let mut h = Harness::new(with_usage(msgs(21), 100_000), model(128_000, 8_192));
        let cps = compact_now(&mut h, &s);
        assert!(!cps.is_empty());
        assert!(cps.iter().all(|c| c.summarizer == SummarizerUsage::default()));
        assert!(h.summarizer.requests().is_empty());
    }
}

#[test]
fn no_previous_request_or_turn_end_means_no_compaction() {
    let s = default_cline();
    let mut h = Harness::new(msgs(21), model(128_000, 8_192));
    assert_eq!(h.decide(&s, Moment::BeforeRequest), Decision::Skip);
    let mut h = Harness::new(with_usage(msgs(21), 100_000), model(128_000, 8_192));
    assert_eq!(h.decide(&s, Moment::TurnEnd), Decision::Skip);
    assert!(h.compact(&s, Moment::TurnEnd).unwrap().is_empty());
}

#[test]
fn worked_example_ranges_grow_from_the_previous_end() {
    // Spec (i), compactions 2 and 3: 19 messages -> [2, 9]; 25 messages -> [2, 15].
    let s = default_cline();
    let mut h = Harness::new(with_usage(msgs(19), 100_500), model(128_000, 8_192));
    compact_now(&mut h, &s);
    assert_eq!(range(&h), Some([2, 9]));
    assert_eq!(entries(&h.view(&s))[..3], shown(&[0, 1, 10]));
    for m in with_usage(msgs(25), 101_000).into_iter().skip(19) {
        h.push(m);
    }
    let cps = compact_now(&mut h, &s);
    assert_eq!(range(&h), Some([2, 15]));
    assert!(cps[0].replacements.is_empty(), "notice already there");
    // Cline indices 16..=24; the first checkpoint is log entry 19, so index 19 is entry 20.
    assert_eq!(entries(&h.view(&s)), shown(&[0, 1, 16, 17, 18, 20, 21, 22, 23, 24, 25]));
    assert_eq!(text_of(&h.view(&s), 1), TRUNCATION_NOTICE);
    assert_eq!(cps[0].tokens_before, 101_000, "the provider usage the decision used");
}

#[test]
fn auto_condense_failure_leaves_the_log_alone() {
    let s = condensing(None);
    let mut m = model(200_000, 16_000);
    m.name = "gpt-5".into();
    let mut h = Harness::new(with_usage(msgs(13), 170_000), m);
    h.summarizer = FakeSummarizer::new(FakeMode::Fail(compactbench_core::ErrorKind::Transport));
    let before = h.log.len();
    assert!(h.step(&s, Moment::BeforeRequest).is_err());
    assert_eq!(h.log.len(), before);
    // An empty answer is no summarize_task call either.
    h.summarizer = FakeSummarizer::new(FakeMode::Fixed("  ".into()));
    assert!(h.step(&s, Moment::BeforeRequest).is_err());
    assert_eq!(h.log.len(), before);
}

/// A refused summarize_task request is the main request's context-window error: Cline drops
/// three quarters of the middle of the history and asks once more, and keeps that truncation
/// if the retry is refused too.
#[test]
fn refused_summarize_task_truncates_and_retries_once() {
    let s = condensing(None);
    let mut m = model(200_000, 16_000);
    m.name = "gpt-5".into();
    let long = |i: usize, text: &str| format!("{text} {i} {}", "word ".repeat(200));
    let messages: Vec<Message> = (0..25)
        .map(|i| match i {
            0 => Message::user("Initial task message"),
            i if i % 2 == 1 => Message::assistant(long(i, "Message")),
            i => Message::user(long(i, "Message")),
        })
        .collect();
    let mut h = Harness::new(with_usage(messages.clone(), 170_000), m.clone());
    h.summarizer = FakeSummarizer::new(FakeMode::Window(4_000));
    let cps = h.step(&s, Moment::BeforeRequest).expect("the retry fits");
    let kinds: Vec<CheckpointKind> = cps.iter().map(|cp| cp.kind).collect();
    assert_eq!(kinds, [CheckpointKind::Truncate, CheckpointKind::Summary]);
    assert_eq!((cps[0].summarizer.calls, cps[0].summarizer.failures), (1, 1));
    let requests = h.summarizer.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].transcript.len() * 2 < requests[0].transcript.len(), "the retry holds a quarter of the middle");
    assert!(requests[1].transcript.contains(TRUNCATION_NOTICE));

    // Refused again: the truncation stays, and there is no summary.
    let mut h = Harness::new(with_usage(messages, 170_000), m);
    h.summarizer = FakeSummarizer::new(FakeMode::Window(500));
    let cps = h.step(&s, Moment::BeforeRequest).expect("the truncation is kept");
    assert_eq!(cps.iter().map(|cp| cp.kind).collect::<Vec<_>>(), [CheckpointKind::Truncate]);
    assert_eq!((cps[0].summarizer.calls, cps[0].summarizer.failures), (2, 2));
    assert_eq!(h.summarizer.requests().len(), 2);
}

#[test]
fn variants_are_default_first_with_distinct_ids() {
    let ids: Vec<String> = crate::variants().iter().map(|v| v.info().id.clone()).collect();
    assert_eq!(ids, ["cline", "cline/auto-condense", "cline/sdk"]);
    assert_eq!(crate::strategy().info().id, "cline");
}

/// Replays a runner-like session: each turn a user prompt, three tool calls (`read_file` of
/// five files over and over, and test runs) and a final answer, with exact-ish usage (chars / 4 of the view).
fn drive(s: &ClineStrategy, m: compactbench_core::ModelProfile, turns: usize) -> (Harness, Vec<Vec<compactbench_core::request::Violation>>) {
    use compactbench_core::request::{lower, validate};
    use compactbench_core::Shape;
    let mut h = Harness::new([Message::system("You are Cline."), Message::user("Fix the parser.")], m);
    let mut violations = Vec::new();
    let mut request = |h: &mut Harness, reply: Message| {
        if let Decision::Compact { .. } = h.decide(s, Moment::BeforeRequest) {
            h.compact(s, Moment::BeforeRequest).unwrap();
        }
        let view = h.view(s);
        violations.push(validate(&lower(&view, Shape::Anthropic)));
        let tokens: u64 = view.iter().map(|m| m.searchable_text().len() as u64 / 4).sum();
        h.push(Message { usage: Some(Usage { input: tokens, output: 50, ..Default::default() }), ..reply });
    };
    let mut call = 0;
    for turn in 0..turns {
        for _ in 0..3 {
            call += 1;
            let id = format!("c{call}");
            if call % 3 == 0 {
                request(&mut h, Message::tool_call(&id, "execute_command", json!({ "command": "cargo test" })));
                h.push(Message::tool_result(&id, "execute_command", format!("run {call}\n{}", "t".repeat(6_000)), false));
            } else {
                let path = format!("src/f{}.rs", call % 5);
                request(&mut h, Message::tool_call(&id, "read_file", json!({ "path": path })));
                h.push(Message::tool_result(&id, "read_file", format!("// {path} v{call}\n{}", "x".repeat(4_000)), false));
            }
        }
        request(&mut h, Message::assistant(format!("turn {turn} done")));
        assert_eq!(h.decide(s, Moment::TurnEnd), Decision::Skip);
        h.push(Message::user(format!("Next step {turn}.")));
    }
    (h, violations)
}

#[test]
fn simulated_session_compacts_repeatedly_and_stays_paired() {
    let (h, violations) = drive(&default_cline(), model(64_000, 8_192), 40);
    let kinds: Vec<CheckpointKind> = h.log.checkpoints().map(|(_, c)| c.kind).collect();
    assert!(kinds.contains(&CheckpointKind::Fold) && kinds.contains(&CheckpointKind::Truncate), "{kinds:?}");
    assert!(violations.iter().all(Vec::is_empty), "{:?}", violations.iter().find(|v| !v.is_empty()));
    let view = h.view(&default_cline());
    let size: usize = view.iter().map(|m| m.searchable_text().len() / 4).sum();
    assert!(size < 64_000, "the view stays under the window: {size}");
    assert_eq!(view.messages[1].origin, Origin::Entry(EntryId(1)), "the task message is never dropped");

    let mut m = model(64_000, 8_192);
    m.name = "claude-sonnet-4".into();
    let (h, violations) = drive(&condensing(None), m, 40);
    let kinds: Vec<CheckpointKind> = h.log.checkpoints().map(|(_, c)| c.kind).collect();
    assert!(kinds.contains(&CheckpointKind::Summary), "{kinds:?}");
    assert!(violations.iter().all(Vec::is_empty), "{:?}", violations.iter().find(|v| !v.is_empty()));
}

/// Found by the strategy property suite (crates/eval/tests/fuzz_strategies.rs): the repair split
/// a tool message holding a result and an image into two messages that both claimed to show
/// the log message as it is (`Origin::Entry`), which the runner's token cache relies on.
#[test]
fn repair_labels_a_split_tool_message_as_replaced() {
    let log = vec![
        Message::user("Initial task"),
        Message::new(
            Role::Assistant,
            vec![
                Part::ToolCall { id: "a".into(), name: "read_file".into(), args: json!({}) },
                Part::ToolCall { id: "b".into(), name: "read_file".into(), args: json!({}) },
            ],
        ),
        // Results out of call order, the first with an image attached.
        Message::new(
            Role::Tool,
            vec![
                Part::ToolResult { call_id: "b".into(), name: "read_file".into(), text: "B".into(), is_error: false },
                Part::Media { mime: "image/png".into(), tokens: 100 },
            ],
        ),
        Message::tool_result("a", "read_file", "A", false),
        Message::assistant("Done"),
    ];
    // A range that hides nothing: the checkpoint alone turns the repair on.
    let view = view_with_range(log.clone(), [1, 1]);
    let cp = EntryId(5);
    let origins: Vec<Origin> = view.messages.iter().map(|m| m.origin).collect();
    assert_eq!(
        origins,
        [
            Origin::Entry(EntryId(0)),
            Origin::Entry(EntryId(1)),
            Origin::Entry(EntryId(3)),
            Origin::Replaced(EntryId(2), cp),
            Origin::Replaced(EntryId(2), cp),
            Origin::Entry(EntryId(4)),
        ]
    );
    for m in &view.messages {
        if let Origin::Entry(e) = m.origin {
            assert_eq!(m.message, log[e.index()], "{e} is shown as it is");
        }
    }
}

#[test]
fn header_parse_follows_the_regex() {
    assert_eq!(parse_tool_header("[read_file for 'a.rs'] Result:\nx"), Some(("read_file", "a.rs", 0, "[read_file for 'a.rs'] Result:")));
    assert_eq!(parse_tool_header("[read_file for 'a.rs'] Result:").map(|h| h.2), Some(1));
    assert_eq!(parse_tool_header("[read_file for ''] Result:"), None);
    assert_eq!(parse_tool_header("[read_file\tfor 'a'] Result:"), None);
    assert_eq!(parse_tool_header("[summarize_task] Result:\nx"), None);
}

#[test]
fn next_gen_families() {
    assert!(is_next_gen("claude-sonnet-4-20250514"));
    assert!(is_next_gen("claude-opus-4.5"));
    assert!(is_next_gen("sonnet"));
    assert!(!is_next_gen("claude-3-5-sonnet-20241022"));
    assert!(!is_next_gen("claude-3.7-sonnet"));
    assert!(is_next_gen("gpt-5-mini"));
    assert!(is_next_gen("deepseek-v3.2"));
    assert!(!is_next_gen("deepseek-v3.2-speciale"));
    assert!(!is_next_gen("gpt-4o"));
    assert!(!is_next_gen("test-model"));
}

/// The replay, fed entry by entry, agrees with the from-scratch functions at every request,
/// through folds, truncations and auto-condenses.
#[test]
fn replay_keeps_the_law() {
    let mut session = vec![Message::system("You are Cline."), Message::user("Fix the parser.")];
    for call in 1..=120 {
        let id = format!("c{call}");
        if call % 2 == 0 {
            session.push(Message::tool_call(&id, "execute_command", json!({ "command": "cargo test" })));
            session.push(Message::tool_result(&id, "execute_command", format!("run {call}\n{}", "t ".repeat(3_000)), false));
        } else {
            let path = format!("src/f{}.rs", call % 7);
            session.push(Message::tool_call(&id, "read_file", json!({ "path": path })));
            session.push(Message::tool_result(&id, "read_file", format!("// {path} v{call}\n{}", "x ".repeat(2_000)), false));
        }
        if call % 3 == 0 {
            session.push(Message::assistant(format!("step {call} done")));
            session.push(Message::user(format!("Next step {call}.")));
        }
    }
    let mut m = model(64_000, 8_192);
    let tally = assert_replay_law(&default_cline(), &m, &session, 1);
    assert!(tally.compactions > 2, "{tally:?}");
    m.name = "claude-sonnet-4".into();
    let tally = assert_replay_law(&condensing(None), &m, &session, 1);
    assert!(tally.compactions > 2, "{tally:?}");
}
