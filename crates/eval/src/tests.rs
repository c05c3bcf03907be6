//! Tests of scenarios, the generator, the driver's probes, and the conformance kit that runs
//! every registered strategy.

use std::path::Path;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

use compactbench_core::{Entry, Error, Message, Origin, Summarizer, Summary, SummaryRequest};
use compactbench_summarize::Extractive;
use compactbench_tokens::TokenCounter;

use crate::drive::{run, Env};
use crate::generate::{generate, Session, Step};
use crate::matrix::{run_matrix, run_matrix_skipping, Schedule};
use crate::scenario::Scenario;

/// A small scenario every strategy compacts in: a 100k window (harness defaults such as a 50k
/// reserve assume windows this size or larger), 20 turns of large outputs.
const SMALL: &str = r#"
name = "small"
description = "conformance kit scenario"
[model]
name = "test"
window = 100000
max_output = 8000
provider = "anthropic"
pricing = { input = 3.0, cached_input = 0.3, output = 15.0 }
[session]
turns = 20
steps_per_turn = [2, 7]
parallel_share = 0.3
output_scale = 2.0
[[facts]]
kind = "error_message"
turn = 1
[[facts]]
kind = "user_constraint"
turn = 0
[[facts]]
kind = "file_path"
turn = 2
[[facts]]
kind = "decision"
turn = 3
[[facts]]
kind = "negative_result"
turn = 4
[[facts]]
kind = "identifier"
turn = 5
[[facts]]
kind = "unresolved_step"
turn = 6
"#;

fn small() -> Scenario {
    Scenario::parse(Path::new("small.toml"), SMALL).unwrap()
}

fn parse_err(text: &str) -> String {
    Scenario::parse(Path::new("scenarios/bad.toml"), text).unwrap_err().to_string()
}

#[test]
fn malformed_scenarios_name_the_file_and_the_field() {
    let e = parse_err(&SMALL.replace("window = 100000", "windw = 100000"));
    assert!(e.starts_with("scenarios/bad.toml: "), "{e}");
    assert!(e.contains("windw"), "{e}");
    let e = parse_err(&SMALL.replace("turns = 20", "turns = \"many\""));
    assert!(e.contains("turns") && e.contains("line"), "{e}");
    let e = parse_err(&SMALL.replace("turn = 6", "turn = 60"));
    assert!(e.contains("field `facts[6].turn`"), "{e}");
    let e = parse_err(&SMALL.replace("kind = \"decision\"", "kind = \"opinion\""));
    assert!(e.contains("opinion") && e.contains("decision"), "{e}");
    let e = parse_err(&SMALL.replace("max_output = 8000", "max_output = 500000"));
    assert!(e.contains("field `model.max_output`"), "{e}");
    let e = parse_err(&SMALL.replace("provider = \"anthropic\"", "provider = \"bedrock\""));
    assert!(e.contains("bedrock"), "{e}");
    let e = parse_err("name = [");
    assert!(e.starts_with("scenarios/bad.toml: "), "{e}");
}

#[test]
fn the_shipped_scenarios_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let all = crate::scenario::load_dir(&dir).unwrap();
    assert!(all.len() >= 3, "{} scenarios", all.len());
}

#[test]
fn sessions_are_deterministic_and_needles_unique() {
    let sc = small();
    let a = generate(&sc, 7);
    assert_eq!(a, generate(&sc, 7));
    assert_ne!(a, generate(&sc, 8));
    assert_eq!(a.facts.len(), 7);
    for f in &a.facts {
        let holds = |s: &Step| s.message().searchable_text().contains(&f.needle);
        assert!(holds(&a.steps[f.planted_step]), "{} not in its step", f.needle);
        assert!(!a.steps[..f.planted_step].iter().any(holds), "{} appears before it is planted", f.needle);
        assert!(!a.system.searchable_text().contains(&f.needle));
        assert!(f.needed_from <= f.needed_until);
    }
    // Every call is answered right after its assistant step.
    for (i, s) in a.steps.iter().enumerate() {
        if let Step::Assistant(m) = s {
            let calls: Vec<&str> = m.tool_call_ids().collect();
            let results: Vec<&str> = a.steps[i + 1..i + 1 + calls.len()].iter().flat_map(|s| s.message().tool_result_ids()).collect();
            let (mut c, mut r) = (calls.clone(), results.clone());
            c.sort_unstable();
            r.sort_unstable();
            assert_eq!(c, r);
        }
    }
}

fn env_parts() -> (TokenCounter, Extractive) {
    (TokenCounter::default(), Extractive::default())
}

/// The conformance kit: every registered strategy, on a session where it must compact.
#[test]
fn conformance_kit_over_every_registered_strategy() {
    let sc = small();
    let session = generate(&sc, 1);
    let (counter, summarizer) = env_parts();
    let env = Env { counter: &counter, summarizer: &summarizer };
    for strategy in compactbench_registry::all() {
        let id = strategy.info().id.clone();
        let mut previous: Option<Vec<Entry>> = None;
        let mut final_log = None;
        let mut last_view_len = 0;
        let result = run(strategy.as_ref(), &sc, &session, 1, &env, |snap| {
            let entries: Vec<Entry> = snap.log.entries().map(|(_, e)| e.clone()).collect();
            // The log only grows: the previous log is a prefix of this one.
            if let Some(prev) = &previous {
                assert!(entries.len() >= prev.len() && entries[..prev.len()] == prev[..], "{id}: log rewritten");
            }
            // Projections keep origins honest: an Entry origin shows that log message as it is.
            for vm in &snap.view.messages {
                if let Origin::Entry(e) = vm.origin {
                    assert_eq!(snap.log.message(e), Some(&vm.message), "{id}: view message {e} differs from the log");
                }
            }
            previous = Some(entries);
            final_log = Some(snap.log.clone());
            last_view_len = snap.view.len();
        });
        // Every original message stays reachable by id, unchanged (assistant usage aside).
        let log = final_log.unwrap();
        let mut originals = std::iter::once(&session.system).chain(session.steps.iter().map(Step::message));
        let mut seen = 0;
        for (_, m) in log.messages() {
            let mut m: Message = m.clone();
            m.usage = None;
            assert_eq!(Some(&m), originals.next(), "{id}: message out of order or changed");
            seen += 1;
        }
        // The final log holds everything up to the last request.
        assert!(seen >= result.requests.len(), "{id}");
        // Every strategy but `none` compacts here (or, like OpenHands' V0 recent-events
        // condenser, drops messages at view time), so the checks below cover compaction.
        if id != "none" {
            let compacted = result.compactions.iter().any(|c| c.error.is_none());
            assert!(compacted || last_view_len < log.messages().count(), "{id} never compacted on the kit scenario");
        }
        // Compactions shrink the view, or say why not.
        for c in &result.compactions {
            if c.error.is_none() {
                assert!(c.tokens_after < c.tokens_before, "{id}: compaction at request {} grew the view {} -> {}", c.request, c.tokens_before, c.tokens_after);
            }
        }
        // Same input, same output.
        let again = run(strategy.as_ref(), &sc, &session, 1, &env, |_| {});
        assert_eq!(serde_json::to_string(&result).unwrap(), serde_json::to_string(&again).unwrap(), "{id}: not deterministic");
    }
}

#[test]
fn the_matrix_is_independent_of_thread_count() {
    let sc = vec![small()];
    // Every strategy's own determinism is the conformance kit's job; this checks the matrix's
    // ordering under parallelism, for which a few strategies of different cost suffice.
    let strategies: Vec<_> = ["none", "observation-masking", "pi", "truncate-oldest"].iter().map(|id| compactbench_registry::find(id).unwrap()).collect();
    let counter = TokenCounter::default();
    let go = |threads| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let runs = pool.install(|| run_matrix(&strategies, &sc, 2, &counter, &|_| Box::new(Extractive::default()), Default::default(), &|_| {}));
        serde_json::to_string(&runs).unwrap()
    };
    assert_eq!(go(1), go(2));
}

/// The extractive summarizer behind a 100 ms "model call" marked [`waiting`]; counts the calls
/// waiting and the summaries computing, now and at most: `[waiting, most, computing, most]`.
struct Remote {
    inner: Extractive,
    counts: Arc<[AtomicUsize; 4]>,
}

impl Summarizer for Remote {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let [waiting, most_waiting, computing, most_computing] = &*self.counts;
        crate::matrix::waiting(|| {
            most_waiting.fetch_max(waiting.fetch_add(1, SeqCst) + 1, SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(100));
            waiting.fetch_sub(1, SeqCst);
        });
        most_computing.fetch_max(computing.fetch_add(1, SeqCst) + 1, SeqCst);
        // Long enough for another thread to overlap it, if slots did not keep it out.
        std::thread::sleep(std::time::Duration::from_millis(2));
        let summary = self.inner.summarize(request);
        computing.fetch_sub(1, SeqCst);
        summary
    }
}

/// A scenario whose runs compute little and summarize early: a 6k window, six turns.
const TINY: &str = r#"
name = "tiny"
description = "a few compactions, quickly"
[model]
name = "m"
window = 6000
max_output = 500
provider = "anthropic"
pricing = { input = 3.0, cached_input = 0.3, output = 15.0 }
[session]
turns = 6
steps_per_turn = [2, 4]
[[facts]]
kind = "error_message"
turn = 0
"#;

#[test]
fn a_remote_schedule_waits_on_many_calls_computes_on_the_pool_and_changes_nothing() {
    let sc = vec![Scenario::parse(Path::new("tiny.toml"), TINY).unwrap()];
    let strategies: Vec<_> = ["pi", "codex", "claude-code", "opencode-v1"].iter().map(|id| compactbench_registry::find(id).unwrap()).collect();
    let counter = TokenCounter::default();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let compute = pool.install(|| run_matrix(&strategies, &sc, 2, &counter, &|_| Box::new(Extractive::default()), Default::default(), &|_| {}));
    let counts: Arc<[AtomicUsize; 4]> = Arc::default();
    let remote = |_: &Session| -> Box<dyn Summarizer> { Box::new(Remote { inner: Extractive::default(), counts: counts.clone() }) };
    let schedule = Schedule::Remote { max_inflight: 8 };
    let runs = pool.install(|| run_matrix_skipping(&strategies, &sc, 2, &counter, &remote, Default::default(), schedule, &|_, _, _| false, &|_| {}));
    assert_eq!(serde_json::to_string(&runs).unwrap(), serde_json::to_string(&compute).unwrap());
    let (most_waiting, most_computing) = (counts[1].load(SeqCst), counts[3].load(SeqCst));
    // 8 runs: with one pool thread, all of them can wait at once, and one computes.
    assert!(most_waiting > 4, "at most {most_waiting} calls waited at once");
    assert_eq!(most_computing, 1, "summaries computed at once on a one-thread pool");
}

#[test]
fn none_overflows_and_truncate_oldest_stays_valid() {
    let sc = small();
    let session = generate(&sc, 0);
    let (counter, summarizer) = env_parts();
    let env = Env { counter: &counter, summarizer: &summarizer };
    let none = run(compactbench_registry::find("none").unwrap().as_ref(), &sc, &session, 0, &env, |_| {});
    assert!(none.requests.iter().any(|r| r.tokens > sc.model.window));
    assert!(none.compactions.is_empty());
    assert!(none.facts.iter().all(|f| f.last.is_verbatim()), "nothing is ever dropped");
    let t = run(compactbench_registry::find("truncate-oldest").unwrap().as_ref(), &sc, &session, 0, &env, |_| {});
    assert!(t.requests.iter().all(|r| r.tokens <= sc.model.window));
    assert!(t.requests.iter().all(|r| r.violations == [0; 4]));
    assert!(!t.compactions.is_empty());
}

/// A strategy for probe tests: at the first request after the first turn it replaces all
/// earlier messages by a summary, optionally offloading them to the store first.
struct Probe {
    info: compactbench_core::StrategyInfo,
    mode: ProbeMode,
}

#[derive(Clone, Copy, PartialEq)]
enum ProbeMode {
    Keep,
    Offload,
    Drop,
}

impl compactbench_core::Strategy for Probe {
    fn info(&self) -> &compactbench_core::StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn compactbench_core::Replay + '_> {
        Box::new(compactbench_core::Incremental::default_view(self))
    }

    fn decide(&self, log: &compactbench_core::Log, _: &compactbench_core::View, at: compactbench_core::Moment, _: &compactbench_core::Cx<'_>) -> compactbench_core::Decision {
        let users = log.messages().filter(|(_, m)| m.role == compactbench_core::Role::User).count();
        if self.mode != ProbeMode::Keep && at == compactbench_core::Moment::BeforeRequest && users == 2 && log.last_checkpoint().is_none() {
            compactbench_core::Decision::compact("test")
        } else {
            compactbench_core::Decision::Skip
        }
    }

    fn compact(&self, log: &compactbench_core::Log, _: &compactbench_core::View, _: compactbench_core::Moment, cx: &mut compactbench_core::Cx<'_>) -> Result<Vec<compactbench_core::Checkpoint>, compactbench_core::Error> {
        use compactbench_core::{Checkpoint, CheckpointKind, Offload, Role, Window};
        let last_user = log.messages().filter(|(_, m)| m.role == Role::User).map(|(id, _)| id).next_back().unwrap();
        let dropped: Vec<_> = log.messages().filter(|(id, m)| *id < last_user && m.role != Role::System).collect();
        let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::From(last_user));
        if self.mode == ProbeMode::Offload {
            let text: Vec<String> = dropped.iter().map(|(_, m)| m.searchable_text()).collect();
            cx.store.write("/history/turn-0.md", text.join("\n\n"));
            cp.offloads.push(Offload { path: "/history/turn-0.md".into(), entries: dropped.iter().map(|(id, _)| *id).collect() });
            cp.summary = Some(Message::user("Earlier turns are in /history/turn-0.md."));
        } else {
            cp.summary = Some(Message::user("Earlier turns happened."));
        }
        Ok(vec![cp])
    }
}

/// Every kind that is planted once, in one turn: all but `superseded_value`, which changes in
/// later turns (its probes are tested in `stale_tests`).
fn single_statement_kinds() -> Vec<crate::facts::FactKind> {
    crate::facts::FactKind::ALL.into_iter().filter(|k| *k != crate::facts::FactKind::SupersededValue).collect()
}

/// Three short turns with every single-statement fact kind planted in turn 0 and needed to the end.
fn every_kind_scenario() -> Scenario {
    let text = SMALL.replace("turns = 20", "turns = 3").replace("steps_per_turn = [2, 7]", "steps_per_turn = [1, 2]");
    let facts: String = single_statement_kinds().iter().map(|k| format!("[[facts]]\nkind = \"{}\"\nturn = 0\n", k.as_str())).collect();
    let text = format!("{}\n{facts}", &text[..text.find("[[facts]]").unwrap()]);
    Scenario::parse(Path::new("probe.toml"), &text).unwrap()
}

fn probe_strategy(mode: ProbeMode) -> Probe {
    Probe {
        info: compactbench_core::StrategyInfo {
            id: "probe".into(),
            harness: "test".into(),
            source: "test".into(),
            summary: "test".into(),
            fidelity: compactbench_core::Fidelity::Baseline,
        },
        mode,
    }
}

#[test]
fn every_fact_kind_is_probed_verbatim_recoverable_and_lost() {
    use crate::facts::FactKind;
    use crate::results::Status;
    let sc = every_kind_scenario();
    let session = generate(&sc, 3);
    assert_eq!(session.facts.len(), single_statement_kinds().len());
    let (counter, summarizer) = env_parts();
    let env = Env { counter: &counter, summarizer: &summarizer };
    for (mode, want) in [(ProbeMode::Keep, Status::VerbatimKept), (ProbeMode::Offload, Status::Recoverable), (ProbeMode::Drop, Status::Lost)] {
        let r = run(&probe_strategy(mode), &sc, &session, 3, &env, |_| {});
        let mut kinds: Vec<FactKind> = r.facts.iter().map(|f| f.kind).collect();
        kinds.sort();
        assert_eq!(kinds, single_statement_kinds());
        for f in &r.facts {
            assert_eq!(f.last, want, "{:?} with {:?}", f.kind, want);
            assert_eq!(f.judged, None, "no judge, no judged probe");
            if want == Status::Lost {
                assert_eq!(f.lost_after_rounds, Some(1), "{:?}", f.kind);
                assert!(f.lost_at.is_some());
            } else {
                assert_eq!(f.lost_at, None);
            }
        }
    }
}

/// A judge that answers with the whole conversation it was shown (or fails every call),
/// counting its calls.
struct EchoJudge {
    fail: bool,
    calls: std::sync::atomic::AtomicU32,
}

impl compactbench_core::Summarizer for EchoJudge {
    fn name(&self) -> &str {
        "echo"
    }

    fn summarize(&self, request: &compactbench_core::SummaryRequest) -> Result<compactbench_core::Summary, compactbench_core::Error> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert!(request.purpose.starts_with("judge-") && request.transcript.starts_with("<conversation>"), "{}", request.purpose);
        if self.fail {
            return Err(compactbench_core::Error::new(compactbench_core::ErrorKind::Transport, "judge down"));
        }
        Ok(compactbench_core::Summary { text: request.transcript.clone(), input_tokens: 0, output_tokens: 0, stop: compactbench_core::StopReason::Complete })
    }
}

#[test]
fn the_judge_answers_from_the_request_it_would_see() {
    use crate::drive::{run_with, RunOptions};
    use crate::judge::Answer;
    let sc = every_kind_scenario();
    let session = generate(&sc, 3);
    let (counter, summarizer) = env_parts();
    let env = Env { counter: &counter, summarizer: &summarizer };
    for (mode, fail, want) in [(ProbeMode::Keep, false, Answer::Quoted), (ProbeMode::Drop, false, Answer::Missed), (ProbeMode::Keep, true, Answer::Failed)] {
        let judge = EchoJudge { fail, calls: Default::default() };
        let options = RunOptions { judge: Some(&judge), ..Default::default() };
        let r = run_with(&probe_strategy(mode), &sc, &session, 3, &env, options, |_| {});
        let last_request = r.requests.last().unwrap().index;
        for f in &r.facts {
            let judged = f.judged.as_ref().unwrap_or_else(|| panic!("{:?} not judged", f.kind));
            assert_eq!((judged.answer, judged.request), (want, last_request), "{:?}", f.kind);
        }
        // Every fact is due at the last request: one question per kind.
        assert_eq!(judge.calls.into_inner() as usize, single_statement_kinds().len());
    }
}

#[test]
fn judged_answers_score_by_needle_then_tagged_key() {
    use crate::judge::{key, score, Answer};
    let session = generate(&every_kind_scenario(), 4);
    let keys: std::collections::HashSet<&str> = session.facts.iter().map(|f| key(&f.needle)).collect();
    assert_eq!(keys.len(), session.facts.len(), "one key per fact");
    for f in &session.facts {
        let k = key(&f.needle);
        assert!(k.len() > 5 && f.needle.contains(k) && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{:?}: {k}", f.kind);
        // Nothing before the fact (at most the tool call whose result plants it) holds its
        // key, so the key identifies the fact on its own.
        let first = session.steps.iter().position(|s| s.message().searchable_text().contains(k)).unwrap();
        assert!(first + 1 >= f.planted_step && first <= f.planted_step, "{:?}: {k} first at {first}, planted at {}", f.kind, f.planted_step);
        assert_eq!(score(f, &format!("It said: {}.", f.needle)), Answer::Quoted);
        let named = if k == f.needle { Answer::Quoted } else { Answer::Named };
        assert_eq!(score(f, &format!("Something about {k}, I think.")), named, "{:?}", f.kind);
        assert_eq!(score(f, "not stated"), Answer::Missed);
    }
}

/// A rejected hypothesis is planted in thinking only: the one message holding its needle holds
/// it in a reasoning part, so a strategy that drops thinking loses it.
#[test]
fn rejected_hypotheses_live_only_in_reasoning() {
    use compactbench_core::Part;
    let text = format!("{SMALL}\n[[facts]]\nkind = \"rejected_hypothesis\"\nturn = 2\n");
    let sc = Scenario::parse(Path::new("hypothesis.toml"), &text).unwrap();
    let session = generate(&sc, 5);
    let fact = session.facts.iter().find(|f| f.kind == crate::facts::FactKind::RejectedHypothesis).expect("planted");
    let holders: Vec<(usize, &Part)> = session
        .steps
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.message().parts.iter().map(move |p| (i, p)))
        .filter(|(_, p)| Message::new(compactbench_core::Role::Assistant, vec![(*p).clone()]).searchable_text().contains(&fact.needle))
        .collect();
    assert_eq!(holders.len(), 1, "{holders:?}");
    assert_eq!(holders[0].0, fact.planted_step);
    assert!(matches!(holders[0].1, Part::Reasoning { .. }), "{:?}", holders[0].1);
    assert!(matches!(session.steps[fact.planted_step], Step::Assistant(_)));
}

/// The foundation's must-show numbers on the shipped scenarios (seed 0): `pi` compacts at
/// least three times everywhere, `none` overflows, and `pi` and `truncate-oldest` build
/// only valid requests for all four shapes.
#[test]
fn shipped_scenarios_make_pi_compact_and_none_overflow() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let scenarios = crate::scenario::load_dir(&dir).unwrap();
    let strategies: Vec<_> = ["none", "pi", "truncate-oldest"].iter().map(|id| compactbench_registry::find(id).unwrap()).collect();
    let counter = TokenCounter::default();
    let runs = run_matrix(&strategies, &scenarios, 1, &counter, &|_| Box::new(Extractive::default()), Default::default(), &|_| {});
    for r in &runs {
        let compactions = r.compactions.iter().filter(|c| c.error.is_none()).count();
        let peak = r.requests.iter().map(|q| q.tokens).max().unwrap();
        match r.strategy.as_str() {
            "none" => assert!(peak > r.window, "none stays under the window on {}", r.scenario),
            "pi" => assert!(compactions >= 3, "pi compacts {compactions} times on {}", r.scenario),
            _ => {}
        }
        if r.strategy != "none" {
            assert!(r.requests.iter().all(|q| q.violations == [0; 4]), "{} builds invalid requests on {}", r.strategy, r.scenario);
        }
    }
}

/// Every summarizing strategy against every summarizer fault: the log only grows, nothing
/// panics, and the snapshot records each strategy's fallback (compactions that still went
/// through, attempts that failed, summarizer calls made). Read against each crate's spec
/// section (g).
#[test]
fn summarizer_faults_follow_each_strategys_fallback() {
    use compactbench_summarize::{FaultKind, Faulty, Trigger};
    use expect_test::expect;
    // A shorter session than the kit's, on a smaller window: every summarizing strategy
    // still compacts, and a strategy that retries every request stays cheap to run.
    let text = SMALL.replace("window = 100000", "window = 32000").replace("max_output = 8000", "max_output = 4000").replace("turns = 20", "turns = 8").replace("output_scale = 2.0", "output_scale = 1.0");
    let sc = Scenario::parse(Path::new("faults.toml"), &text).unwrap();
    let session = generate(&sc, 1);
    let counter = TokenCounter::default();
    let mut table = String::new();
    for strategy in compactbench_registry::all() {
        let id = strategy.info().id.clone();
        let clean = Extractive::default();
        let baseline = run(strategy.as_ref(), &sc, &session, 1, &Env { counter: &counter, summarizer: &clean }, |_| {});
        if !baseline.compactions.iter().any(|c| c.summarizer_calls > 0) {
            continue;
        }
        for kind in [FaultKind::Timeout, FaultKind::Http500, FaultKind::Empty, FaultKind::OverCap, FaultKind::Garbage] {
            let faulty = Faulty::new(Box::new(Extractive::default()), kind, Trigger::Always);
            let mut previous = 0;
            let r = run(strategy.as_ref(), &sc, &session, 1, &Env { counter: &counter, summarizer: &faulty }, |snap| {
                assert!(snap.log.len() >= previous, "{id} with {kind}: log shrank");
                previous = snap.log.len();
            });
            let ok = r.compactions.iter().filter(|c| c.error.is_none()).count();
            let failed = r.compactions.len() - ok;
            let over = r.requests.iter().filter(|q| q.overflow).count();
            // Summaries cut off at the cap, and compactions that used one anyway (the
            // truncation loop of the report's failure-mode table).
            let cut: u32 = r.compactions.iter().map(|c| c.summaries_cut_off).sum();
            let used = r.compactions.iter().filter(|c| c.summaries_cut_off > 0 && c.error.is_none()).count();
            let cut = if cut > 0 { format!(", cut off {cut} (used {used})") } else { String::new() };
            table.push_str(&format!("{id} {kind}: ok {ok}, failed {failed}, calls {}, over-window requests {over}{cut}\n", faulty.calls()));
        }
    }
    expect![[r#"
        aider timeout: ok 3, failed 0, calls 6, over-window requests 0
        aider http500: ok 3, failed 0, calls 6, over-window requests 0
        aider empty: ok 4, failed 0, calls 5, over-window requests 0
        aider over-cap: ok 5, failed 0, calls 8, over-window requests 6, cut off 8 (used 5)
        aider garbage: ok 4, failed 0, calls 5, over-window requests 0
        amp timeout: ok 0, failed 39, calls 27, over-window requests 17
        amp http500: ok 0, failed 39, calls 27, over-window requests 17
        amp empty: ok 0, failed 39, calls 27, over-window requests 17
        amp over-cap: ok 2, failed 0, calls 2, over-window requests 0, cut off 2 (used 2)
        amp garbage: ok 1, failed 0, calls 1, over-window requests 0
        amp/compaction timeout: ok 0, failed 39, calls 27, over-window requests 17
        amp/compaction http500: ok 0, failed 39, calls 27, over-window requests 17
        amp/compaction empty: ok 0, failed 39, calls 27, over-window requests 17
        amp/compaction over-cap: ok 2, failed 0, calls 2, over-window requests 0, cut off 2 (used 2)
        amp/compaction garbage: ok 1, failed 0, calls 1, over-window requests 0
        antigravity timeout: ok 0, failed 37, calls 11, over-window requests 17
        antigravity http500: ok 0, failed 37, calls 11, over-window requests 17
        antigravity empty: ok 0, failed 37, calls 11, over-window requests 17
        antigravity over-cap: ok 3, failed 0, calls 3, over-window requests 0, cut off 3 (used 3)
        antigravity garbage: ok 1, failed 0, calls 1, over-window requests 0
        claude-code timeout: ok 0, failed 3, calls 3, over-window requests 17
        claude-code http500: ok 0, failed 3, calls 3, over-window requests 17
        claude-code empty: ok 0, failed 3, calls 3, over-window requests 17
        claude-code over-cap: ok 13, failed 0, calls 13, over-window requests 0, cut off 13 (used 13)
        claude-code garbage: ok 4, failed 0, calls 4, over-window requests 0
        claude-code/v2.1.68 timeout: ok 0, failed 3, calls 3, over-window requests 17
        claude-code/v2.1.68 http500: ok 0, failed 3, calls 3, over-window requests 17
        claude-code/v2.1.68 empty: ok 0, failed 3, calls 3, over-window requests 17
        claude-code/v2.1.68 over-cap: ok 19, failed 0, calls 19, over-window requests 0, cut off 19 (used 19)
        claude-code/v2.1.68 garbage: ok 6, failed 0, calls 6, over-window requests 0
        claude-code/v2.1.20 timeout: ok 0, failed 3, calls 3, over-window requests 17
        claude-code/v2.1.20 http500: ok 0, failed 3, calls 3, over-window requests 17
        claude-code/v2.1.20 empty: ok 0, failed 3, calls 3, over-window requests 17
        claude-code/v2.1.20 over-cap: ok 19, failed 0, calls 19, over-window requests 0, cut off 19 (used 19)
        claude-code/v2.1.20 garbage: ok 6, failed 0, calls 6, over-window requests 0
        cline/sdk timeout: ok 0, failed 27, calls 27, over-window requests 17
        cline/sdk http500: ok 0, failed 27, calls 27, over-window requests 17
        cline/sdk empty: ok 0, failed 27, calls 27, over-window requests 17
        cline/sdk over-cap: ok 12, failed 0, calls 12, over-window requests 0, cut off 12 (used 12)
        cline/sdk garbage: ok 4, failed 0, calls 4, over-window requests 0
        codex timeout: ok 0, failed 21, calls 126, over-window requests 17
        codex http500: ok 0, failed 21, calls 126, over-window requests 17
        codex empty: ok 1, failed 0, calls 1, over-window requests 0
        codex over-cap: ok 1, failed 0, calls 1, over-window requests 0, cut off 1 (used 1)
        codex garbage: ok 1, failed 0, calls 1, over-window requests 0
        codex/remote timeout: ok 0, failed 21, calls 5, over-window requests 17
        codex/remote http500: ok 0, failed 21, calls 5, over-window requests 17
        codex/remote empty: ok 1, failed 0, calls 1, over-window requests 0
        codex/remote over-cap: ok 1, failed 0, calls 1, over-window requests 0, cut off 1 (used 1)
        codex/remote garbage: ok 1, failed 0, calls 1, over-window requests 0
        cursor timeout: ok 3, failed 16, calls 16, over-window requests 3
        cursor http500: ok 3, failed 16, calls 16, over-window requests 3
        cursor empty: ok 3, failed 16, calls 16, over-window requests 3
        cursor over-cap: ok 4, failed 0, calls 1, over-window requests 0, cut off 1 (used 1)
        cursor garbage: ok 4, failed 0, calls 1, over-window requests 0
        deep-agents timeout: ok 0, failed 39, calls 15, over-window requests 17
        deep-agents http500: ok 0, failed 39, calls 15, over-window requests 17
        deep-agents empty: ok 2, failed 0, calls 2, over-window requests 0
        deep-agents over-cap: ok 3, failed 0, calls 3, over-window requests 0, cut off 3 (used 3)
        deep-agents garbage: ok 2, failed 0, calls 2, over-window requests 0
        deepseek-harness timeout: ok 2, failed 35, calls 6, over-window requests 15
        deepseek-harness http500: ok 2, failed 35, calls 6, over-window requests 15
        deepseek-harness empty: ok 2, failed 35, calls 6, over-window requests 15
        deepseek-harness over-cap: ok 2, failed 35, calls 6, over-window requests 15, cut off 6 (used 1)
        deepseek-harness garbage: ok 2, failed 0, calls 1, over-window requests 0
        gemini-cli timeout: ok 0, failed 28, calls 9, over-window requests 17
        gemini-cli http500: ok 0, failed 28, calls 9, over-window requests 17
        gemini-cli empty: ok 0, failed 28, calls 18, over-window requests 17
        gemini-cli over-cap: ok 4, failed 19, calls 25, over-window requests 8, cut off 25 (used 4)
        gemini-cli garbage: ok 3, failed 0, calls 6, over-window requests 0
        goose timeout: ok 0, failed 38, calls 38, over-window requests 17
        goose http500: ok 0, failed 38, calls 38, over-window requests 17
        goose empty: ok 1, failed 0, calls 1, over-window requests 0
        goose over-cap: ok 1, failed 0, calls 1, over-window requests 0, cut off 1 (used 1)
        goose garbage: ok 1, failed 0, calls 1, over-window requests 0
        kimi-cli timeout: ok 0, failed 41, calls 75, over-window requests 17
        kimi-cli http500: ok 0, failed 41, calls 75, over-window requests 17
        kimi-cli empty: ok 0, failed 41, calls 75, over-window requests 17
        kimi-cli over-cap: ok 1, failed 40, calls 1, over-window requests 41, cut off 1 (used 1)
        kimi-cli garbage: ok 41, failed 0, calls 41, over-window requests 0
        kimi-cli/k1 timeout: ok 0, failed 41, calls 75, over-window requests 17
        kimi-cli/k1 http500: ok 0, failed 41, calls 75, over-window requests 17
        kimi-cli/k1 empty: ok 0, failed 41, calls 75, over-window requests 17
        kimi-cli/k1 over-cap: ok 41, failed 0, calls 41, over-window requests 0, cut off 41 (used 41)
        kimi-cli/k1 garbage: ok 41, failed 0, calls 41, over-window requests 0
        opencode-v1 timeout: ok 0, failed 41, calls 41, over-window requests 17
        opencode-v1 http500: ok 0, failed 41, calls 41, over-window requests 17
        opencode-v1 empty: ok 1, failed 0, calls 1, over-window requests 0
        opencode-v1 over-cap: ok 1, failed 0, calls 1, over-window requests 0, cut off 1 (used 1)
        opencode-v1 garbage: ok 1, failed 0, calls 1, over-window requests 0
        opencode-v1/prune timeout: ok 0, failed 41, calls 41, over-window requests 17
        opencode-v1/prune http500: ok 0, failed 41, calls 41, over-window requests 17
        opencode-v1/prune empty: ok 1, failed 0, calls 1, over-window requests 0
        opencode-v1/prune over-cap: ok 1, failed 0, calls 1, over-window requests 0, cut off 1 (used 1)
        opencode-v1/prune garbage: ok 1, failed 0, calls 1, over-window requests 0
        opencode-v2 timeout: ok 0, failed 41, calls 41, over-window requests 17
        opencode-v2 http500: ok 0, failed 41, calls 41, over-window requests 17
        opencode-v2 empty: ok 0, failed 41, calls 41, over-window requests 17
        opencode-v2 over-cap: ok 21, failed 0, calls 21, over-window requests 0, cut off 21 (used 21)
        opencode-v2 garbage: ok 4, failed 0, calls 4, over-window requests 0
        openhands timeout: ok 0, failed 34, calls 204, over-window requests 17
        openhands http500: ok 0, failed 34, calls 204, over-window requests 17
        openhands empty: ok 1, failed 0, calls 1, over-window requests 0
        openhands over-cap: ok 2, failed 0, calls 2, over-window requests 0, cut off 2 (used 2)
        openhands garbage: ok 1, failed 0, calls 1, over-window requests 0
        openhands/llm-summarizing timeout: ok 0, failed 34, calls 204, over-window requests 17
        openhands/llm-summarizing http500: ok 0, failed 34, calls 204, over-window requests 17
        openhands/llm-summarizing empty: ok 1, failed 0, calls 1, over-window requests 0
        openhands/llm-summarizing over-cap: ok 2, failed 0, calls 2, over-window requests 0, cut off 2 (used 2)
        openhands/llm-summarizing garbage: ok 1, failed 0, calls 1, over-window requests 0
        openhands/llm-summarizing-v0 timeout: ok 0, failed 19, calls 19, over-window requests 17
        openhands/llm-summarizing-v0 http500: ok 0, failed 19, calls 19, over-window requests 17
        openhands/llm-summarizing-v0 empty: ok 2, failed 0, calls 2, over-window requests 0
        openhands/llm-summarizing-v0 over-cap: ok 10, failed 0, calls 10, over-window requests 7, cut off 10 (used 10)
        openhands/llm-summarizing-v0 garbage: ok 2, failed 0, calls 2, over-window requests 0
        openhands/structured-summary timeout: ok 0, failed 19, calls 19, over-window requests 17
        openhands/structured-summary http500: ok 0, failed 19, calls 19, over-window requests 17
        openhands/structured-summary empty: ok 2, failed 0, calls 2, over-window requests 0
        openhands/structured-summary over-cap: ok 2, failed 0, calls 2, over-window requests 0, cut off 2 (used 2)
        openhands/structured-summary garbage: ok 2, failed 0, calls 2, over-window requests 0
        pi timeout: ok 0, failed 39, calls 156, over-window requests 17
        pi http500: ok 0, failed 39, calls 156, over-window requests 17
        pi empty: ok 9, failed 0, calls 12, over-window requests 0
        pi over-cap: ok 0, failed 39, calls 39, over-window requests 17, cut off 39 (used 0)
        pi garbage: ok 9, failed 0, calls 12, over-window requests 0
        pi/v0.73 timeout: ok 0, failed 23, calls 23, over-window requests 17
        pi/v0.73 http500: ok 0, failed 23, calls 23, over-window requests 17
        pi/v0.73 empty: ok 6, failed 0, calls 8, over-window requests 0
        pi/v0.73 over-cap: ok 11, failed 25, calls 12, over-window requests 30, cut off 12 (used 11)
        pi/v0.73 garbage: ok 6, failed 0, calls 8, over-window requests 0
        pi/v0.58 timeout: ok 0, failed 23, calls 23, over-window requests 17
        pi/v0.58 http500: ok 0, failed 23, calls 23, over-window requests 17
        pi/v0.58 empty: ok 4, failed 0, calls 4, over-window requests 0
        pi/v0.58 over-cap: ok 14, failed 0, calls 14, over-window requests 2, cut off 14 (used 14)
        pi/v0.58 garbage: ok 4, failed 0, calls 4, over-window requests 0
        pi/v0.14 timeout: ok 4, failed 0, calls 4, over-window requests 0
        pi/v0.14 http500: ok 4, failed 0, calls 4, over-window requests 0
        pi/v0.14 empty: ok 4, failed 0, calls 4, over-window requests 0
        pi/v0.14 over-cap: ok 5, failed 0, calls 3, over-window requests 2, cut off 3 (used 3)
        pi/v0.14 garbage: ok 4, failed 0, calls 4, over-window requests 0
    "#]].assert_eq(&table);
}

/// The null bound is a lower bound: with every planted fact knocked out of the summaries
/// (same size, so the same cadence), no summarizing strategy keeps more facts than with the
/// summaries themselves, on any shipped scenario. And every provider rule any strategy breaks
/// there is one its crate explains (`Strategy::explain_violation`). Sessions are shortened (at
/// most 12 turns, the window scaled with them) to keep the test fast; every strategy still
/// compacts.
#[test]
fn null_bound_never_beats_the_real_summary_and_every_violation_is_explained() {
    use compactbench_summarize::Null;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut scenarios = crate::scenario::load_dir(&dir).unwrap();
    for sc in &mut scenarios {
        let turns = sc.session.turns.min(12);
        sc.model.window = (sc.model.window * u64::from(turns) / u64::from(sc.session.turns)).max(12_000);
        sc.session.turns = turns;
        for f in &mut sc.facts {
            f.turn = f.turn.min(turns - 1);
            f.until_turn = f.until_turn.map(|t| t.clamp(f.turn, turns - 1));
        }
        // A manual command after the last kept turn has no user message to come before.
        sc.manual.retain(|m| m.turn < turns);
    }
    let strategies = compactbench_registry::all();
    let counter = TokenCounter::default();
    let extractive = run_matrix(&strategies, &scenarios, 1, &counter, &|_| Box::new(Extractive::default()), Default::default(), &|_| {});
    for r in &extractive {
        let strategy = strategies.iter().find(|s| s.info().id == r.strategy).unwrap();
        for ex in &r.violation_examples {
            assert!(
                strategy.explain_violation(ex.rule).is_some(),
                "{} on {}: unexplained {} in {} at request {}: {}",
                r.strategy,
                r.scenario,
                ex.rule,
                ex.shape,
                ex.request,
                ex.detail
            );
        }
    }
    let summarizing: Vec<_> = strategies
        .into_iter()
        .filter(|s| extractive.iter().any(|r| r.strategy == s.info().id && r.compactions.iter().any(|c| c.summarizer_calls > 0)))
        .collect();
    assert!(summarizing.len() >= 20, "only {} strategies summarized", summarizing.len());
    let null = run_matrix(
        &summarizing,
        &scenarios,
        1,
        &counter,
        &|session| Box::new(Null::new(Box::new(Extractive::default()), session.facts.iter().map(|f| f.needle.clone()).collect())),
        Default::default(),
        &|_| {},
    );
    let kept = |r: &crate::results::RunResult| r.facts.iter().filter(|f| f.last != crate::results::Status::Lost).count();
    for n in &null {
        let e = extractive.iter().find(|e| e.strategy == n.strategy && e.scenario == n.scenario).unwrap();
        let id = format!("{} on {}", n.strategy, n.scenario);
        assert_eq!(n.compactions.len(), e.compactions.len(), "{id}: the null bound changed the cadence");
        assert!(kept(n) <= kept(e), "{id}: null keeps {} facts, the real summary {}", kept(n), kept(e));
    }
}

/// A summary call is measured as the request its harness sends: one that replays the
/// conversation as its own prefix (Claude Code, Codex) finds nearly all of it in the prompt
/// cache; one that serializes the history into a fresh prompt (Pi, OpenCode) finds at most its
/// fixed system prompt there.
#[test]
fn summary_calls_are_priced_by_how_their_harness_sends_them() {
    let sc = small();
    let session = generate(&sc, 0);
    let (counter, extractive) = env_parts();
    let env = Env { counter: &counter, summarizer: &extractive };
    for (id, context) in [("claude-code", "prefix"), ("codex", "prefix"), ("pi", "fresh"), ("opencode-v1", "fresh")] {
        let strategy = compactbench_registry::find(id).unwrap();
        let r = run(strategy.as_ref(), &sc, &session, 0, &env, |_| {});
        let summarized: Vec<_> = r.compactions.iter().filter(|c| c.summarizer_calls > 0).collect();
        assert!(!summarized.is_empty(), "{id} never summarized");
        for c in summarized {
            assert_eq!(c.summary_context, context, "{id}");
            assert!(c.summary_cached_tokens <= c.summary_request_tokens, "{id}: {c:?}");
            assert!(c.summary_output_tokens > 0, "{id}: {c:?}");
            let cached = c.summary_cached_tokens as f64 / c.summary_request_tokens as f64;
            if context == "prefix" {
                // The view before it, plus the instruction, with the prefix the last request sent.
                assert!(c.summary_request_tokens > c.tokens_before, "{id}: {c:?}");
                assert!(cached > 0.8, "{id} reuses {cached:.2} of its summary request: {c:?}");
            } else {
                assert!(cached < 0.05, "{id} reuses {cached:.2} of its summary request: {c:?}");
            }
        }
    }
}
