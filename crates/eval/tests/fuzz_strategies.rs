//! Property suite over every registered strategy (`compactbench_registry::all()`): generated
//! sessions replayed through the eval's own driver (`drive::run`, the path `compactbench eval`
//! takes), with a fake summarizer and small model windows so that strategies compact often.
//!
//! Sessions: turns of a user message (sometimes with media), assistant steps with text,
//! reasoning, and single or parallel tool calls, results from empty to huge (up to 200k
//! chars), repeated reads, errors, media in results, planted facts for the probes; a quarter
//! of the sessions are also malformed the way imported transcripts can be (a call without a
//! result, an orphan result, a reused call id, an empty assistant message, two user messages
//! in a row). The summarizer answers normally, empty, huge, cut off at its cap, flakily, or
//! always fails.
//!
//! Invariants, per strategy and session: no panic (in decide, compact or project); the log
//! only grows (never shorter; checkpoints never change once appended; at the end every
//! message entry is the original message, in order, so every original message stays
//! reachable by id); every view origin points at the right kind of log entry and an
//! `Entry` origin shows its message unchanged; checkpoints refer only to earlier messages;
//! lowering and validation never panic for any shape and the driver records exactly the
//! violations the validators find; one request per assistant step; and the replay law
//! (`compactbench_testkit::law`): the strategy's replay, fed the session entry by entry, shows
//! the views, makes the decisions and appends the checkpoints of its from-scratch functions.
//!
//! Cases: 100 sessions per strategy by default (fewer large results and turns, for the debug
//! build); `COMPACTBENCH_FUZZ_CASES` in the long mode (`cargo xtask fuzz`, release). The
//! strategies are split in two tests so the two halves run in parallel. Each test prints, per
//! strategy, sessions, panics, and what happened (compactions, failed ones, ones that grew the
//! view, requests that break the provider shape's rules: measured, not asserted).

/// The long run allocates as heavily as an eval; the eval binary's allocator keeps it as fast.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use compactbench_core::request::{lower, validate};
use compactbench_core::{
    Entry, EntryId, Error, ErrorKind, Log, Message, ModelProfile, Origin, Part, Pricing, Role, Shape, StopReason,
    Strategy as CompactionStrategy, Summarizer, Summary, SummaryRequest, Window,
};
use compactbench_eval::drive::{run, Env};
use compactbench_eval::facts::{Fact, FactKind};
use compactbench_eval::generate::{Session, Step};
use compactbench_eval::scenario::{Scenario, SessionSpec};
use compactbench_testkit::{assert_replay_law_with, FakeMode, FakeSummarizer};
use compactbench_tokens::TokenCounter;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngSeed, TestRunner};

/// Sessions per strategy in the default run.
const DEFAULT_CASES: u32 = 100;

/// The replay law compares both layers at every compaction and at every this many requests.
const LAW_SAMPLE: u32 = 4;

// ---------------------------------------------------------------------------------------------
// Session specs (what proptest generates and shrinks) and building sessions from them.

#[derive(Clone, Debug)]
enum SummarizerMode {
    Numbered,
    Empty,
    /// A summary of this many chars.
    Huge(usize),
    /// Numbered text, reported as cut off at its cap.
    CutOff,
    /// Fails every k-th call.
    Flaky(u32),
    Fail(ErrorKind),
}

#[derive(Clone, Debug)]
struct CallSpec {
    tool: Index,
    /// Arguments: the usual object, or odd JSON.
    odd_args: Option<Index>,
    result_chars: usize,
    is_error: bool,
    media: bool,
    /// Return the same content as an earlier result (a re-read).
    repeat: Option<Index>,
}

#[derive(Clone, Debug)]
struct StepSpec {
    reasoning: Option<usize>,
    text: Option<usize>,
    /// Empty: a text-only step (the turn goes on after it only if more steps follow).
    calls: Vec<CallSpec>,
}

#[derive(Clone, Debug)]
struct TurnSpec {
    user_chars: usize,
    user_media: bool,
    steps: Vec<StepSpec>,
    closing_chars: Option<usize>,
}

#[derive(Clone, Debug)]
enum Chaos {
    /// Remove a tool result (its call stays unanswered).
    DropResult(Index),
    /// Add a result for a call that was never made.
    OrphanResult(Index),
    /// Give a call the id of an earlier one.
    ReuseCallId(Index, Index),
    /// Replace an assistant message's parts with nothing.
    EmptyAssistant(Index),
    /// Insert a second user message right after a user message.
    DoubleUser(Index),
    /// An empty-text part at the front of a message.
    BlankPart(Index),
}

#[derive(Clone, Debug)]
struct Spec {
    window: u64,
    max_output_percent: u64,
    provider: Shape,
    summarizer: SummarizerMode,
    system_lines: usize,
    turns: Vec<TurnSpec>,
    chaos: Vec<Chaos>,
    /// (step, needed until step), as indices into the steps.
    facts: Vec<(Index, Index)>,
}

const TOOLS: &[&str] = &[
    "read", "grep", "bash", "edit", "ls", "write", "glob", "Read", "Bash", "Edit", "Grep", "task", "todo_write", "web_fetch",
    "read_file", "run_shell_command", "execute_bash", "str_replace_editor", "apply_patch", "shell", "",
];

/// Whether this is the long mode (`COMPACTBENCH_FUZZ_CASES` set, release build).
fn long() -> bool {
    std::env::var_os("COMPACTBENCH_FUZZ_CASES").is_some()
}

/// Result sizes in chars. The default run (a debug build, where the strategies' char-level
/// estimators are slow) draws huge and large results less often; the long mode as often as
/// the original distribution.
fn size() -> impl Strategy<Value = usize> {
    let (large, huge) = if long() { (3, 1) } else { (1, 1) };
    let tiers = if long() { 14 } else { 40 };
    prop_oneof![
        3 * tiers / 14 => 0usize..60,
        6 * tiers / 14 => 60usize..2_000,
        3 * tiers / 14 => 2_000usize..12_000,
        large => 12_000usize..40_000,
        // Huge: many times the smaller windows.
        huge => 40_000usize..200_000,
    ]
}

fn call_spec() -> impl Strategy<Value = CallSpec> {
    (any::<Index>(), prop::option::weighted(0.05, any::<Index>()), size(), prop::bool::weighted(0.15), prop::bool::weighted(0.05), prop::option::weighted(0.15, any::<Index>()))
        .prop_map(|(tool, odd_args, result_chars, is_error, media, repeat)| CallSpec { tool, odd_args, result_chars, is_error, media, repeat })
}

fn step_spec() -> impl Strategy<Value = StepSpec> {
    let calls = prop_oneof![
        2 => Just(0usize..1),
        10 => Just(1usize..2),
        3 => Just(2usize..5),
    ]
    .prop_flat_map(|n| prop::collection::vec(call_spec(), n));
    (prop::option::weighted(0.3, 0usize..1_500), prop::option::weighted(0.6, 0usize..800), calls)
        .prop_map(|(reasoning, text, calls)| StepSpec { reasoning, text, calls })
}

fn turn_spec() -> impl Strategy<Value = TurnSpec> {
    (0usize..1_500, prop::bool::weighted(0.1), prop::collection::vec(step_spec(), 0..7), prop::option::weighted(0.8, 0usize..1_200))
        .prop_map(|(user_chars, user_media, steps, closing_chars)| TurnSpec { user_chars, user_media, steps, closing_chars })
}

fn chaos() -> impl Strategy<Value = Chaos> {
    let ix = any::<Index>;
    prop_oneof![
        ix().prop_map(Chaos::DropResult),
        ix().prop_map(Chaos::OrphanResult),
        (ix(), ix()).prop_map(|(a, b)| Chaos::ReuseCallId(a, b)),
        ix().prop_map(Chaos::EmptyAssistant),
        ix().prop_map(Chaos::DoubleUser),
        ix().prop_map(Chaos::BlankPart),
    ]
}

fn summarizer_mode() -> impl Strategy<Value = SummarizerMode> {
    prop_oneof![
        12 => Just(SummarizerMode::Numbered),
        1 => Just(SummarizerMode::Empty),
        1 => (1usize..120_000).prop_map(SummarizerMode::Huge),
        1 => Just(SummarizerMode::CutOff),
        1 => (1u32..4).prop_map(SummarizerMode::Flaky),
        1 => prop_oneof![
            Just(ErrorKind::Timeout),
            Just(ErrorKind::Transport),
            Just(ErrorKind::EmptySummary),
            Just(ErrorKind::Rejected),
            Just(ErrorKind::NothingToCompact),
            Just(ErrorKind::Other),
        ]
        .prop_map(SummarizerMode::Fail),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    let window = prop_oneof![
        1 => Just(1_024u64),
        4 => 1_500u64..8_000,
        4 => 8_000u64..40_000,
        1 => 40_000u64..130_000,
    ];
    let provider = prop_oneof![Just(Shape::OpenaiChat), Just(Shape::OpenaiResponses), Just(Shape::Anthropic), Just(Shape::Gemini)];
    let chaos = prop_oneof![3 => Just(0usize..1), 1 => Just(1usize..4)].prop_flat_map(|n| prop::collection::vec(chaos(), n));
    (
        window,
        1u64..60,
        provider,
        summarizer_mode(),
        0usize..60,
        prop::collection::vec(turn_spec(), 1..if long() { 9 } else { 6 }),
        chaos,
        prop::collection::vec((any::<Index>(), any::<Index>()), 0..4),
    )
        .prop_map(|(window, max_output_percent, provider, summarizer, system_lines, turns, chaos, facts)| Spec {
            window,
            max_output_percent,
            provider,
            summarizer,
            system_lines,
            turns,
            chaos,
            facts,
        })
}

/// Code-like filler: `n` chars of lines, varied by `seed`.
fn filler(seed: usize, n: usize) -> String {
    const WORDS: &[&str] = &[
        "fn", "let", "parse", "config", "error", "Result", "Vec", "self", "match", "Some", "None", "impl", "pub", "struct",
        "token", "window", "request", "=>", "{", "}", "(", ")", "&mut", "iter", "map", "collect", "0", "42", "\"ok\"",
        "src/lib.rs", "// TODO", "assert_eq!", "unwrap", "é", "日本", "🙂",
    ];
    let mut out = String::with_capacity(n + 16);
    let mut k = seed.wrapping_mul(2_654_435_761);
    let mut line = 0;
    while out.len() < n {
        if out.len() % 64 < 6 {
            line += 1;
            out.push_str(&format!("\n{line:>4}: "));
        }
        k = k.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        out.push_str(WORDS[(k >> 33) % WORDS.len()]);
        out.push(' ');
    }
    let mut cut = n.min(out.len());
    while !out.is_char_boundary(cut) {
        cut -= 1;
    }
    out.truncate(cut);
    out
}

struct Built {
    scenario: Scenario,
    session: Session,
}

fn build(spec: &Spec) -> Built {
    let mut steps: Vec<Step> = Vec::new();
    let mut results: Vec<String> = Vec::new();
    let mut call_no = 0;
    let mut seed = 0;
    let mut next = |n: usize| {
        seed += 1;
        filler(seed, n)
    };
    for (t, turn) in spec.turns.iter().enumerate() {
        let mut parts = vec![Part::text(format!("Turn {t}: {}", next(turn.user_chars)))];
        if turn.user_media {
            parts.push(Part::Media { mime: "image/png".into(), tokens: 1_500 });
        }
        steps.push(Step::User(Message::new(Role::User, parts)));
        for s in &turn.steps {
            let mut parts = Vec::new();
            if let Some(n) = s.reasoning {
                parts.push(Part::Reasoning { text: next(n) });
            }
            if let Some(n) = s.text {
                parts.push(Part::text(next(n)));
            }
            let mut answers = Vec::new();
            for c in &s.calls {
                call_no += 1;
                let id = format!("call_{call_no}");
                let name = TOOLS[c.tool.index(TOOLS.len())].to_owned();
                let args = match c.odd_args {
                    None => serde_json::json!({ "path": format!("src/m{}.rs", call_no % 7), "command": "cargo test" }),
                    Some(i) => [serde_json::json!(null), serde_json::json!("raw"), serde_json::json!([1, {"a": []}]), serde_json::json!({})][i.index(4)].clone(),
                };
                parts.push(Part::ToolCall { id: id.clone(), name: name.clone(), args });
                let text = match c.repeat {
                    Some(i) if !results.is_empty() => results[i.index(results.len())].clone(),
                    _ => next(c.result_chars),
                };
                results.push(text.clone());
                let mut result = vec![Part::ToolResult { call_id: id, name, text, is_error: c.is_error }];
                if c.media {
                    result.push(Part::Media { mime: "image/jpeg".into(), tokens: 800 });
                }
                answers.push(Message::new(Role::Tool, result));
            }
            if parts.is_empty() {
                parts.push(Part::text("Continuing."));
            }
            steps.push(Step::Assistant(Message::new(Role::Assistant, parts)));
            steps.extend(answers.into_iter().map(Step::Tool));
        }
        if let Some(n) = turn.closing_chars {
            steps.push(Step::Assistant(Message::assistant(format!("Done: {}", next(n)))));
        }
    }
    for c in &spec.chaos {
        let n = steps.len();
        let positions = |want: fn(&Step) -> bool| -> Vec<usize> { (0..n).filter(|&i| want(&steps[i])).collect() };
        match c {
            Chaos::DropResult(i) => {
                let tools = positions(|s| matches!(s, Step::Tool(_)));
                if !tools.is_empty() {
                    steps.remove(tools[i.index(tools.len())]);
                }
            }
            Chaos::OrphanResult(i) => {
                steps.insert(i.index(n + 1), Step::Tool(Message::tool_result("call_never_made", "read", "orphan output", false)));
            }
            Chaos::ReuseCallId(a, b) => {
                let assistants: Vec<usize> = positions(|s| s.message().has_tool_calls());
                if assistants.len() >= 2 {
                    let from = assistants[a.index(assistants.len())];
                    let to = assistants[b.index(assistants.len())];
                    let id = steps[from].message().tool_call_ids().next().unwrap().to_owned();
                    if let Step::Assistant(m) = &mut steps[to] {
                        if let Some(Part::ToolCall { id: old, .. }) = m.parts.iter_mut().find(|p| matches!(p, Part::ToolCall { .. })) {
                            *old = id;
                        }
                    }
                }
            }
            Chaos::EmptyAssistant(i) => {
                let assistants = positions(|s| matches!(s, Step::Assistant(_)));
                if !assistants.is_empty() {
                    if let Step::Assistant(m) = &mut steps[assistants[i.index(assistants.len())]] {
                        m.parts.clear();
                    }
                }
            }
            Chaos::DoubleUser(i) => {
                let users = positions(|s| matches!(s, Step::User(_)));
                let at = users[i.index(users.len())];
                steps.insert(at + 1, Step::User(Message::user("And one more thing.")));
            }
            Chaos::BlankPart(i) => {
                let (Step::User(m) | Step::Assistant(m) | Step::Tool(m)) = &mut steps[i.index(n)];
                m.parts.insert(0, Part::text(""));
            }
        }
    }
    // Plant each fact's needle in its step and need it until a later step.
    let mut facts = Vec::new();
    for (k, (at, until)) in spec.facts.iter().enumerate() {
        let planted = at.index(steps.len());
        let needle = format!("NEEDLE_{k}_qzx{}", planted * 7 + 3);
        let m = match &mut steps[planted] {
            Step::User(m) | Step::Assistant(m) | Step::Tool(m) => m,
        };
        match m.parts.iter_mut().find_map(|p| match p {
            Part::Text { text } | Part::Reasoning { text } | Part::ToolResult { text, .. } => Some(text),
            _ => None,
        }) {
            Some(text) => text.push_str(&format!(" {needle} ")),
            None => m.parts.push(Part::text(needle.clone())),
        }
        let needed_from = planted + 1;
        let needed_until = needed_from + until.index(steps.len() - planted);
        facts.push(Fact {
            id: format!("f{k}"),
            kind: FactKind::ALL[k % FactKind::ALL.len()],
            needle,
            planted_step: planted,
            needed_from,
            needed_until,
            stale: Vec::new(),
            named_by: None,
        });
    }
    let system_text: String =
        std::iter::once("You are a coding agent.".to_owned()).chain((0..spec.system_lines).map(|i| format!("- rule {i}: keep changes small."))).collect::<Vec<_>>().join("\n");
    let window = spec.window;
    let max_output = (window * spec.max_output_percent / 100).clamp(1, window - 1);
    let scenario = Scenario {
        name: "fuzz".into(),
        description: "generated by the strategy property suite".into(),
        model: ModelProfile { name: "fuzz-model".into(), window, max_output, provider: spec.provider, pricing: Pricing::default() },
        session: SessionSpec::default(),
        replay: None,
        facts: Vec::new(),
        memory: None,
        manual: Vec::new(),
    };
    Built { scenario, session: Session { system: Message::system(system_text), steps, facts, spans: Vec::new(), instructions: Default::default() } }
}

// ---------------------------------------------------------------------------------------------
// The summarizer: testkit's fake, with failure and cut-off modes layered on top.

struct FuzzSummarizer {
    mode: SummarizerMode,
    inner: FakeSummarizer,
    calls: AtomicU32,
}

impl FuzzSummarizer {
    fn new(mode: &SummarizerMode) -> FuzzSummarizer {
        let inner = match mode {
            SummarizerMode::Empty => FakeSummarizer::new(FakeMode::Fixed(String::new())),
            SummarizerMode::Huge(n) => FakeSummarizer::new(FakeMode::Fixed(filler(*n, *n))),
            SummarizerMode::Fail(kind) => FakeSummarizer::new(FakeMode::Fail(*kind)),
            _ => FakeSummarizer::default(),
        };
        FuzzSummarizer { mode: mode.clone(), inner, calls: AtomicU32::new(0) }
    }
}

impl Summarizer for FuzzSummarizer {
    fn name(&self) -> &str {
        "fuzz"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        if let SummarizerMode::Flaky(k) = self.mode {
            if n % k == 0 {
                return Err(Error::new(ErrorKind::Transport, "flaky summarizer"));
            }
        }
        let mut summary = self.inner.summarize(request)?;
        if let SummarizerMode::CutOff = self.mode {
            summary.stop = StopReason::Length;
        }
        Ok(summary)
    }
}

// ---------------------------------------------------------------------------------------------
// Invariants.

#[derive(Default)]
struct Tally {
    sessions: u64,
    panics: u64,
    requests: u64,
    compactions: u64,
    failed: u64,
    /// Successful compactions after which the view had more tokens than before.
    grew: u64,
    /// Requests whose view broke a rule of the session's provider shape.
    invalid: u64,
    /// Compactions the replay law compared (replay against from-scratch).
    law: u64,
    /// Time spent, in milliseconds.
    millis: u128,
}

/// Role and parts of a message, without their (possibly huge) texts.
fn brief(m: &Message) -> String {
    let parts: Vec<String> = m
        .parts
        .iter()
        .map(|p| match p {
            Part::Text { text } => format!("text({})", text.len()),
            Part::Reasoning { text } => format!("reasoning({})", text.len()),
            Part::ToolCall { id, name, .. } => format!("call({id}, {name})"),
            Part::ToolResult { call_id, text, .. } => format!("result({call_id}, {})", text.len()),
            Part::Media { tokens, .. } => format!("media({tokens})"),
        })
        .collect();
    format!("{} [{}] usage {:?}", m.role.as_str(), parts.join(", "), m.usage)
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned())).unwrap_or_default()
}

/// Runs one strategy over one session through the eval's driver and checks the invariants.
fn check(strategy: &dyn CompactionStrategy, built: &Built, mode: &SummarizerMode, counter: &TokenCounter, tally: &mut Tally) {
    let id = strategy.info().id.clone();
    let summarizer = FuzzSummarizer::new(mode);
    let env = Env { counter, summarizer: &summarizer };
    let provider = Shape::ALL.iter().position(|&s| s == built.scenario.model.provider).unwrap();
    let originals: Vec<&Message> = std::iter::once(&built.session.system).chain(built.session.steps.iter().map(Step::message)).collect();
    // Entries seen at earlier requests: how many, the roles and part counts of the messages
    // (each compared in full with the session's when first seen), and the checkpoints.
    let mut seen_len = 0usize;
    let mut messages: Vec<(Role, usize)> = Vec::new();
    let mut checkpoints: Vec<(EntryId, compactbench_core::Checkpoint)> = Vec::new();
    let mut found: Vec<[u32; 4]> = Vec::new();
    let result = run(strategy, &built.scenario, &built.session, 0, &env, |snap| {
        let log = snap.log;
        // The log only grows: earlier entries are still there, unchanged.
        assert!(log.len() >= seen_len, "{id}: the log shrank from {seen_len} to {} entries", log.len());
        let mut k = 0;
        for (eid, entry) in log.entries().take(seen_len) {
            match entry {
                Entry::Message(m) => {
                    assert_eq!((m.role, m.parts.len()), messages[k], "{id}: message entry {eid} changed");
                    k += 1;
                }
                Entry::Checkpoint(_) => {}
            }
        }
        for (cid, cp) in &checkpoints {
            assert!(matches!(log.get(*cid), Some(Entry::Checkpoint(c)) if **c == *cp), "{id}: checkpoint {cid} changed");
        }
        // New entries: messages are the session's own, in order (so every original message
        // stays reachable by its id); checkpoints refer only to earlier messages.
        for (eid, entry) in log.entries().skip(seen_len) {
            match entry {
                Entry::Message(m) => {
                    let original = originals.get(messages.len()).unwrap_or_else(|| panic!("{id}: more messages than the session has"));
                    assert!(
                        m.role == original.role && m.parts == original.parts,
                        "{id}: log message {eid} is not the session's message {}: {} vs {}",
                        messages.len(),
                        brief(m),
                        brief(original)
                    );
                    messages.push((m.role, m.parts.len()));
                }
                Entry::Checkpoint(cp) => {
                    check_checkpoint(&id, log, eid, cp);
                    checkpoints.push((eid, (**cp).clone()));
                }
            }
        }
        seen_len = log.len();
        // Origins point at the right kind of entry; an Entry origin shows its message as is.
        assert_eq!(snap.tokens.len(), snap.view.len(), "{id}");
        for vm in &snap.view.messages {
            match vm.origin {
                Origin::Entry(e) => assert!(
                    log.message(e) == Some(&vm.message),
                    "{id}: view message {e} differs from the log: shows {}, logged {}",
                    brief(&vm.message),
                    log.message(e).map_or("nothing".into(), brief)
                ),
                Origin::Replaced(e, by) => {
                    assert!(log.message(e).is_some(), "{id}: replaced {e} is not a message");
                    // Usually a checkpoint; opencode-v1 documents `Replaced(call, call)` for the
                    // error result it makes up for an unanswered call.
                    assert!(log.get(by).is_some(), "{id}: replacement by {by}, not a log entry");
                }
                Origin::Summary(c) | Origin::Injected(c) => {
                    assert!(matches!(log.get(c), Some(Entry::Checkpoint(_))), "{id}: {:?} names no checkpoint", vm.origin)
                }
            }
        }
        // Lowering and validation never panic; the driver must record what they find.
        let mut per_shape = [0u32; 4];
        for (i, shape) in Shape::ALL.into_iter().enumerate() {
            per_shape[i] = validate(&lower(snap.view, shape)).len() as u32;
        }
        found.push(per_shape);
    });
    // One request per assistant step, each with the violations the validators found.
    let assistant_steps = built.session.steps.iter().filter(|s| matches!(s, Step::Assistant(_))).count();
    assert_eq!(result.requests.len(), assistant_steps, "{id}: requests");
    assert_eq!(found.len(), result.requests.len(), "{id}: every request observed");
    for (r, f) in result.requests.iter().zip(&found) {
        assert_eq!(r.violations, *f, "{id}: request {} records other violations than the validators find", r.index);
        tally.invalid += u64::from(f[provider] > 0);
    }
    let recorded: u32 = result.violations.values().flat_map(|m| m.values()).sum();
    assert_eq!(recorded, found.iter().flatten().sum::<u32>(), "{id}: violation totals");
    // The final log holds every step and the checkpoints of every successful compaction.
    assert_eq!(result.log_entries, originals.len() + result.compactions.iter().filter(|c| c.error.is_none()).map(|c| c.kinds.len()).sum::<usize>(), "{id}: log entries");
    // The law: the strategy's replay, fed the same session entry by entry, agrees with its
    // from-scratch functions at every compaction and at every fourth request.
    let session: Vec<Message> = originals.iter().map(|m| (*m).clone()).collect();
    let mode = mode.clone();
    tally.law += assert_replay_law_with(strategy, &built.scenario.model, &session, LAW_SAMPLE, &|| Box::new(FuzzSummarizer::new(&mode))).compactions as u64;
    tally.sessions += 1;
    tally.requests += result.requests.len() as u64;
    for c in &result.compactions {
        if c.error.is_some() {
            tally.failed += 1;
        } else {
            tally.compactions += 1;
            tally.grew += u64::from(c.tokens_after > c.tokens_before);
        }
    }
}

/// A checkpoint refers only to messages logged before it.
fn check_checkpoint(id: &str, log: &Log, at: EntryId, cp: &compactbench_core::Checkpoint) {
    let earlier_message = |e: EntryId| e < at && log.message(e).is_some();
    match &cp.window {
        Window::Inherit => {}
        Window::From(first) => assert!(*first <= at, "{id}: checkpoint {at} keeps from {first}, after itself"),
        Window::Kept(ids) => {
            for e in ids {
                assert!(earlier_message(*e), "{id}: checkpoint {at} keeps {e}, not an earlier message");
            }
        }
    }
    for r in &cp.replacements {
        assert!(earlier_message(r.entry), "{id}: checkpoint {at} replaces {}, not an earlier message", r.entry);
    }
    for o in &cp.offloads {
        for e in &o.entries {
            assert!(*e < at, "{id}: checkpoint {at} offloads {e}, not an earlier entry");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The runner.

fn cases() -> u32 {
    std::env::var("COMPACTBENCH_FUZZ_CASES").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(DEFAULT_CASES)
}

/// Runs every `parts`-th registered strategy (from `part`) over the generated sessions.
fn fuzz_strategies(part: usize, parts: usize) {
    // `COMPACTBENCH_FUZZ_ONLY=id,id` narrows the suite (to chase one strategy's failure).
    let only: Option<Vec<String>> = std::env::var("COMPACTBENCH_FUZZ_ONLY").ok().map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
    let strategies: Vec<Box<dyn CompactionStrategy>> = compactbench_registry::all()
        .into_iter()
        .skip(part)
        .step_by(parts)
        .filter(|s| only.as_ref().is_none_or(|o| o.contains(&s.info().id)))
        .collect();
    let tallies: Mutex<BTreeMap<String, Tally>> = Mutex::new(strategies.iter().map(|s| (s.info().id.clone(), Tally::default())).collect());
    let long = std::env::var_os("COMPACTBENCH_FUZZ_CASES").is_some();
    let rng_seed = match std::env::var("COMPACTBENCH_FUZZ_SEED").ok().and_then(|v| v.trim().parse().ok()) {
        Some(s) => RngSeed::Fixed(s),
        None if long => RngSeed::Random,
        None => RngSeed::Fixed(0x5e55_1075),
    };
    // Each shrink step replays a session through every strategy of the part: keep it bounded.
    let config = Config { cases: cases(), failure_persistence: None, rng_seed, max_shrink_iters: 256, ..Config::default() };
    let mut runner = TestRunner::new(config);
    let started = std::time::Instant::now();
    let done = std::sync::atomic::AtomicU64::new(0);
    // After the first failure every call is a shrink step, not a new session.
    let shrinking = std::sync::atomic::AtomicBool::new(false);
    let result = runner.run(&spec(), |spec| {
        // Progress in the long mode, so a run cut short still says what it covered.
        let n = if shrinking.load(Ordering::Relaxed) { done.load(Ordering::Relaxed) } else { done.fetch_add(1, Ordering::Relaxed) };
        if long && n > 0 && n % 1_000 == 0 && !shrinking.load(Ordering::Relaxed) {
            let panics: u64 = tallies.lock().unwrap_or_else(|e| e.into_inner()).values().map(|t| t.panics).sum();
            eprintln!("fuzz strategies part {}/{parts}: {n} sessions per strategy so far, {panics} panics, {:.0}s", part + 1, started.elapsed().as_secs_f64());
        }
        let built = build(&spec);
        // One counter per session, as one per run in the eval: each message is tokenized once.
        let counter = TokenCounter::default();
        for s in &strategies {
            let id = s.info().id.clone();
            let mut tally = Tally::default();
            let t0 = std::time::Instant::now();
            let outcome = catch_unwind(AssertUnwindSafe(|| check(s.as_ref(), &built, &spec.summarizer, &counter, &mut tally)));
            let mut all = tallies.lock().unwrap_or_else(|e| e.into_inner());
            let t = all.get_mut(&id).unwrap();
            if shrinking.load(Ordering::Relaxed) {
                // Shrink steps: only panics are counted.
                if let Err(p) = outcome {
                    drop(all);
                    resume_unwind(p);
                }
                continue;
            }
            t.sessions += tally.sessions;
            t.requests += tally.requests;
            t.compactions += tally.compactions;
            t.failed += tally.failed;
            t.grew += tally.grew;
            t.invalid += tally.invalid;
            t.law += tally.law;
            t.millis += t0.elapsed().as_millis();
            if let Err(p) = outcome {
                t.panics += 1;
                shrinking.store(true, Ordering::Relaxed);
                drop(all);
                let text = panic_text(p.as_ref());
                if text.starts_with(&id) {
                    resume_unwind(p);
                }
                panic!("{id} panicked: {text}");
            }
        }
        Ok(())
    });
    let all = tallies.into_inner().unwrap_or_else(|e| e.into_inner());
    for (id, t) in &all {
        eprintln!(
            "fuzz strategies/{id}: {} sessions, {} panics ({} requests, {} compactions, {} failed, {} grew the view, {} requests invalid for the provider, {} compactions replayed = from scratch; {:.1}s)",
            t.sessions, t.panics, t.requests, t.compactions, t.failed, t.grew, t.invalid, t.law, t.millis as f64 / 1000.0
        );
    }
    eprintln!("fuzz strategies part {}/{parts}: {} strategies, {:.1}s", part + 1, all.len(), started.elapsed().as_secs_f64());
    if let Err(e) = result {
        panic!("fuzz strategies part {}/{parts}: {e}", part + 1);
    }
}

#[test]
fn fuzz_strategies_part_1_of_2() {
    fuzz_strategies(0, 2);
}

#[test]
fn fuzz_strategies_part_2_of_2() {
    fuzz_strategies(1, 2);
}
