//! The replay driver: one strategy through one session, request by request.
//!
//! The driver holds the run's log and the strategy's [`Replay`], and appends every entry
//! through one place ([`Run::push_message`], [`Run::push_checkpoint`]) so the replay sees each
//! once. Each request then goes one way through stages that each own their state:
//! [`measure`] (exact tokens of the view), [`validate`] (every provider shape) and [`probe`]
//! (where each needed fact is). [`compact`] asks the strategy to compact at a moment and
//! records the attempt; [`delegate`] runs an exploration span in a subagent. [`timed`] takes
//! every stage's wall time into the run's [`Phases`].

mod compact;
mod delegate;
mod measure;
mod probe;
mod validate;

use std::time::Instant;

use compactbench_core::{Checkpoint, EntryId, Log, Message, Moment, Replay, Strategy, Summarizer, Usage, View, VirtualStore};
use compactbench_tokens::TokenCounter;

pub use delegate::SUBAGENT_REPORT_TOKENS;
pub use probe::MAX_POINTER_HOPS;
#[cfg(test)]
pub(crate) use probe::leaks;

use crate::generate::{Session, Step};
use crate::judge::Judged;
use crate::results::{ChildCost, CompactionRecord, FactOutcome, Instructed, Phases, RequestRecord, RunResult};
use crate::scenario::Scenario;
use measure::{Contents, Key, Measured};
use probe::{Probe, Prober};
use validate::Validity;

/// What the driver needs besides the strategy and session.
pub struct Env<'a> {
    /// Exact counter shared by all runs.
    pub counter: &'a TokenCounter,
    /// Summarizer injected into strategies.
    pub summarizer: &'a dyn Summarizer,
}

/// A request as it is about to be sent, for observers (`compactbench inspect`).
pub struct Snapshot<'a> {
    /// Request index.
    pub index: u32,
    /// The view.
    pub view: &'a View,
    /// Exact tokens per view message.
    pub tokens: &'a [u64],
    /// The log so far.
    pub log: &'a Log,
}

/// How a run treats the session beyond the strategy itself.
#[derive(Clone, Copy, Default)]
pub struct RunOptions<'a> {
    /// Hand each exploration span of the session to an isolated subagent: the parent sees
    /// one `task` call and a bounded report instead of the span's steps; the child's own
    /// requests are counted as child cost. The run's strategy id gets a `+delegate` suffix.
    pub delegate: bool,
    /// Replay the session in the strategy's own chat shape ([`crate::shape::text_chat`]): edits as
    /// SEARCH/REPLACE text, tool output as user messages. The run's strategy id gets a `+text`
    /// suffix.
    pub aider_chat: bool,
    /// Ask this model about each fact at the last request that needs it
    /// ([`crate::judge`]). A fact whose last needed request falls inside a delegated span
    /// is not judged (the parent makes no request there).
    pub judge: Option<&'a dyn Summarizer>,
}

/// Runs `f`, adding its wall time in microseconds to `phase` (a field of the run's [`Phases`]).
fn timed<T>(phase: &mut u64, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    *phase += started.elapsed().as_micros() as u64;
    out
}

struct Run<'a> {
    scenario: &'a Scenario,
    session: &'a Session,
    env: &'a Env<'a>,
    judge: Option<&'a dyn Summarizer>,
    log: Log,
    /// The strategy's state over this run, given every entry appended to `log`.
    replay: Box<dyn Replay + 'a>,
    store: VirtualStore,
    /// Log entry -> the session step whose message it holds.
    entry_step: rustc_hash::FxHashMap<EntryId, usize>,
    /// The session step being replayed.
    step: usize,
    /// Requests so far.
    request: u32,
    /// Successful compactions so far.
    rounds: u32,
    /// Consecutive failed compactions (handed to strategies as `Cx::failures`).
    failures: u32,
    /// Whether the user's compaction instructions reached the summary calls.
    instructed: Instructed,
    /// The run's last summary call sent as a fresh prompt (system prompt, user message): what
    /// the next fresh call can find in the prompt cache.
    last_fresh: Option<(String, String)>,

    // The stages' own state.
    contents: Contents,
    measured: Measured,
    /// The keys of the previous request's view (the prefix shared with it is cached).
    prev_keys: Vec<Key>,
    validity: Validity,
    prober: Prober,

    // What the run reports.
    requests: Vec<RequestRecord>,
    compactions: Vec<CompactionRecord>,
    probes: Vec<Vec<Probe>>,
    /// The judge's verdict per fact, when a judge is set.
    judged: Vec<Option<Judged>>,
    /// Compactions completed when each fact was planted (set when its step is appended).
    planted_round: Vec<u32>,
    output_tokens: u64,
    child: ChildCost,
    phases: Phases,
}

impl Run<'_> {
    /// Appends `message` to the log and hands it to the strategy.
    fn push_message(&mut self, message: Message) -> EntryId {
        let id = self.log.push_message(message);
        self.replay.push(&self.log, id);
        id
    }

    /// Appends `checkpoint` to the log and hands it to the strategy.
    fn push_checkpoint(&mut self, checkpoint: Checkpoint) {
        let id = self.log.push_checkpoint(checkpoint);
        self.replay.push(&self.log, id);
    }

    /// Brings the strategy's view up to date with the log (timed as projection), so that the
    /// next look at it costs nothing.
    fn project(&mut self) {
        timed(&mut self.phases.project, || {
            self.replay.view(&self.log);
        });
    }

    /// Measures the strategy's view and returns the request's exact total.
    fn measure(&mut self) -> u64 {
        self.project();
        let view = self.replay.view(&self.log);
        timed(&mut self.phases.measure, || self.measured.update(view, &mut self.contents, self.env.counter))
    }

    /// Messages at the start of the view measured last that the previous request also began
    /// with. Equal keys mean equal content, so this is known without comparing messages: the
    /// prompt cache holds them, and revalidation resumes after them.
    fn shared_with_previous(&self) -> usize {
        self.measured.keys.iter().zip(&self.prev_keys).take_while(|(a, b)| a == b).count()
    }

    /// Builds, measures, validates and probes the request answered by `answer` at `step`,
    /// then appends `answer` with its usage.
    fn request(&mut self, step: usize, answer: &Message, observe: &mut dyn FnMut(&Snapshot<'_>)) {
        let window = self.scenario.model.window;
        self.maybe_compact(Moment::BeforeRequest, None);
        let mut total = self.measure();
        if total > window && self.maybe_compact(Moment::Overflow, None) {
            total = self.measure();
        }
        let shared = self.shared_with_previous();
        let view = self.replay.view(&self.log);
        let violations = timed(&mut self.phases.validate, || self.validity.check(self.request, view, shared));
        let probed =
            timed(&mut self.phases.probe, || self.prober.probe(&self.session.facts, step, &self.measured, &mut self.contents, &self.store));
        for (f, s) in probed.into_iter().enumerate() {
            if let Some(s) = s {
                self.probes[f].push((self.request, s, self.rounds - self.planted_round[f]));
            }
        }
        if let Some(judge) = self.judge {
            let facts = &self.session.facts;
            let due: Vec<usize> = (0..facts.len()).filter(|&f| facts[f].needed_until == step).collect();
            if !due.is_empty() {
                for (f, answer) in crate::judge::ask(judge, view, facts, &due) {
                    self.judged[f] = Some(Judged { request: self.request, answer });
                }
            }
        }
        observe(&Snapshot { index: self.request, view, tokens: &self.measured.tokens, log: &self.log });
        self.requests.push(RequestRecord {
            index: self.request,
            step: step as u32,
            tokens: total,
            cached_tokens: self.measured.tokens[..shared].iter().sum(),
            messages: view.len() as u32,
            overflow: total > window,
            rounds: self.rounds,
            violations,
        });
        self.prev_keys.clone_from(&self.measured.keys);
        let out = self.env.counter.count_message(answer);
        self.output_tokens += out;
        let mut answer = answer.clone();
        answer.usage = Some(Usage { input: total, output: out, ..Default::default() });
        self.push_message(answer);
        self.request += 1;
    }
}

/// Replays `session` through `strategy`, calling `observe` before each request is sent.
pub fn run(
    strategy: &dyn Strategy,
    scenario: &Scenario,
    session: &Session,
    seed: u64,
    env: &Env<'_>,
    observe: impl FnMut(&Snapshot<'_>),
) -> RunResult {
    run_with(strategy, scenario, session, seed, env, RunOptions::default(), observe)
}

/// [`run`] with options.
pub fn run_with(
    strategy: &dyn Strategy,
    scenario: &Scenario,
    session: &Session,
    seed: u64,
    env: &Env<'_>,
    options: RunOptions<'_>,
    mut observe: impl FnMut(&Snapshot<'_>),
) -> RunResult {
    let shaped = options.aider_chat.then(|| crate::shape::text_chat(session, strategy));
    let session = shaped.as_ref().unwrap_or(session);
    let facts = &session.facts;
    let mut run = Run {
        scenario,
        session,
        env,
        judge: options.judge,
        log: Log::new(),
        replay: strategy.start(),
        store: VirtualStore::new(),
        entry_step: Default::default(),
        step: 0,
        request: 0,
        rounds: 0,
        failures: 0,
        instructed: Instructed::default(),
        last_fresh: None,
        contents: Contents::new(facts),
        measured: Measured::default(),
        prev_keys: Vec::new(),
        validity: Validity::default(),
        prober: Prober::default(),
        requests: Vec::new(),
        compactions: Vec::new(),
        probes: vec![Vec::new(); facts.len()],
        judged: vec![None; facts.len()],
        planted_round: vec![0; facts.len()],
        output_tokens: 0,
        child: ChildCost::default(),
        phases: Phases::default(),
    };
    run.push_message(session.system.clone());
    let mut any_assistant = false;
    let mut step = 0;
    while step < session.steps.len() {
        run.step = step;
        let span = options.delegate.then(|| session.spans.iter().position(|s| s.start == step)).flatten();
        let last = match span {
            Some(n) => {
                let sp = session.spans[n];
                let steps = &session.steps[sp.start..=sp.end];
                let (call, report) = delegate::delegate(session, steps, n, env.counter, env.summarizer, &mut run.child);
                run.request(step, &call, &mut observe);
                run.push_message(report);
                sp.end
            }
            None => {
                match &session.steps[step] {
                    Step::User(m) => {
                        if any_assistant {
                            run.maybe_compact(Moment::TurnEnd, None);
                            // The user types the manual command at the prompt, then this message.
                            for manual in session.instructions.manual.iter().filter(|m| m.step == step) {
                                run.maybe_compact(Moment::Manual, Some(&manual.text));
                            }
                        }
                        let id = run.push_message(m.clone());
                        run.entry_step.insert(id, step);
                    }
                    Step::Tool(m) => {
                        let id = run.push_message(m.clone());
                        run.entry_step.insert(id, step);
                    }
                    Step::Assistant(m) => {
                        let id = run.log.next_id();
                        run.request(step, m, &mut observe);
                        run.entry_step.insert(id, step);
                        any_assistant = true;
                    }
                }
                step
            }
        };
        for (f, fact) in facts.iter().enumerate() {
            if (step..=last).contains(&fact.planted_step) {
                run.planted_round[f] = run.rounds;
            }
        }
        step = last + 1;
    }

    RunResult {
        strategy: crate::variant::run_id(&strategy.info().id, options.aider_chat, options.delegate),
        scenario: scenario.name.clone(),
        seed,
        summarizer: env.summarizer.name().to_owned(),
        window: scenario.model.window,
        facts: facts
            .iter()
            .zip(&run.probes)
            .zip(run.judged)
            .filter(|((_, p), _)| !p.is_empty())
            .map(|((f, p), judged)| FactOutcome { judged, ..probe::outcome(f, p, &run.compactions, session.steps.len()) })
            .collect(),
        requests: run.requests,
        compactions: run.compactions,
        violations: run.validity.violations,
        violation_examples: run.validity.examples,
        log_entries: run.log.len(),
        output_tokens: run.output_tokens,
        instructed: run.instructed,
        child: run.child,
        phases: run.phases,
    }
}
