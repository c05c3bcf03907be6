//! The replay driver: one strategy through one session, request by request.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use memchr::memmem::Finder;
use rustc_hash::FxHashMap;

use compactbench_core::request::{lower, validate, Rule};
use compactbench_core::{
    Checkpoint, Cx, EntryId, Error, ErrorKind, Log, Message, Moment, Origin, Replay, Shape, StopReason, Strategy, Summarizer,
    Summary, SummaryRequest, Usage, View, VirtualStore, Window,
};
use compactbench_tokens::{TokenCounter, PER_REQUEST_OVERHEAD};

use crate::generate::{Session, Step};
use crate::judge::Judged;
use crate::offload_paths::OffloadPaths;
use crate::revalidate::Revalidator;
use crate::results::{ChildCost, CompactionRecord, FactOutcome, Phases, RequestRecord, RunResult, Status, ViolationExample};
use crate::scenario::Scenario;

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

/// Identifies a view message's content across requests: views are rebuilt each request, but
/// a message with the same origin (and position among messages of that origin) has the same
/// content. The conformance kit checks that projections keep origins honest.
type Key = (Origin, u32);

/// What is known about a view message's content.
struct Info {
    tokens: u64,
    /// Indices of facts whose needle it contains.
    needles: Vec<usize>,
    /// Indices of offload paths it names (checked lazily as paths appear).
    paths_checked: usize,
    paths: Vec<usize>,
    /// Its searchable text, kept for the path checks to come (compactions add paths).
    text: String,
}

struct Run<'a> {
    scenario: &'a Scenario,
    session: &'a Session,
    env: &'a Env<'a>,
    log: Log,
    /// The strategy's state over this run, given every entry appended to `log`.
    replay: Box<dyn Replay + 'a>,
    store: VirtualStore,
    /// What is known of each content seen in this run, by key ([`Run::describe`]).
    info: FxHashMap<Key, usize>,
    infos: Vec<Info>,
    measured: Measured,
    /// Offload paths seen in checkpoints, in order of appearance.
    paths: OffloadPaths,
    /// A searcher for each planted fact's needle.
    needle_finders: Vec<Finder<'static>>,
    /// (path index, file length) -> the facts whose needle that version of the file holds.
    reads: FxHashMap<(usize, usize), Vec<usize>>,
    /// (path index, file length) -> indices of the other paths the file names.
    links: FxHashMap<(usize, usize), Vec<usize>>,
    rounds: u32,
    /// Rounds completed when each fact was planted (set when its step is appended).
    compactions: Vec<CompactionRecord>,
    phases: Phases,
    request: u32,
    /// Consecutive failed compactions (handed to strategies as `Cx::failures`).
    failures: u32,
    /// The session step being replayed.
    step: usize,
    /// Log entry -> the session step whose message it holds.
    entry_step: FxHashMap<EntryId, usize>,
    judge: Option<&'a dyn Summarizer>,
}

/// The keys and exact tokens of the view measured last, kept so that the next measure only
/// does the messages after the prefix the two views share (a view mostly grows by a message
/// or two, and redoing all of it made a long replay quadratic).
#[derive(Default)]
struct Measured {
    keys: Vec<Key>,
    tokens: Vec<u64>,
    /// Each message's [`Info`] (an index into [`Run::infos`]).
    infos: Vec<usize>,
    /// Messages per origin among `keys` (the next occurrence number of each).
    occurrences: FxHashMap<Origin, u32>,
}

impl Measured {
    /// Drops the messages from `at` on.
    fn truncate(&mut self, at: usize) {
        for (origin, _) in self.keys.drain(at..) {
            *self.occurrences.get_mut(&origin).expect("counted when kept") -= 1;
        }
        self.tokens.truncate(at);
        self.infos.truncate(at);
    }

    /// The key of `origin` appended after the kept messages.
    fn push(&mut self, origin: Origin) -> Key {
        let n = self.occurrences.entry(origin).or_default();
        *n += 1;
        let key = (origin, *n - 1);
        self.keys.push(key);
        key
    }
}

/// The index in `infos` of what is known of the content `key` names (`message`), described
/// when first seen.
fn describe(
    info: &mut FxHashMap<Key, usize>,
    infos: &mut Vec<Info>,
    needle_finders: &[Finder<'static>],
    counter: &TokenCounter,
    key: Key,
    message: &Message,
) -> usize {
    *info.entry(key).or_insert_with(|| {
        let text = message.searchable_text();
        let needles = needle_finders.iter().enumerate().filter(|(_, f)| f.find(text.as_bytes()).is_some()).map(|(i, _)| i).collect();
        infos.push(Info { tokens: counter.count_message(message), needles, paths_checked: 0, paths: Vec::new(), text });
        infos.len() - 1
    })
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
        let started = Instant::now();
        self.replay.view(&self.log);
        self.phases.project += micros(started);
    }

    /// Exact tokens per message of the strategy's view (filling the content cache) and the
    /// request total.
    fn measure(&mut self) -> (Vec<Key>, Vec<u64>, u64) {
        self.project();
        let started = Instant::now();
        let view = self.replay.view(&self.log);
        let mut measured = std::mem::take(&mut self.measured);
        // Keys are origins numbered by occurrence, so equal origins up to here mean equal keys.
        let same = measured.keys.iter().zip(&view.messages).take_while(|((origin, _), vm)| *origin == vm.origin).count();
        measured.truncate(same);
        for vm in &view.messages[same..] {
            let key = measured.push(vm.origin);
            let info = describe(&mut self.info, &mut self.infos, &self.needle_finders, self.env.counter, key, &vm.message);
            measured.tokens.push(self.infos[info].tokens);
            measured.infos.push(info);
        }
        let (keys, tokens) = (measured.keys.clone(), measured.tokens.clone());
        self.measured = measured;
        let total = tokens.iter().sum::<u64>() + PER_REQUEST_OVERHEAD;
        self.phases.measure += micros(started);
        (keys, tokens, total)
    }

    fn maybe_compact(&mut self, at: Moment) -> bool {
        self.project();
        let started = Instant::now();
        let plan = {
            let cx = Cx { model: &self.scenario.model, summarizer: self.env.summarizer, store: &mut self.store, tokenizer: self.env.counter, failures: self.failures };
            self.replay.decide(&self.log, at, &cx)
        };
        self.phases.decide += micros(started);
        let Some(plan) = plan else { return false };
        let reason = plan.reason().to_owned();
        let tokens_before = self.measure().2;
        let started = Instant::now();
        let observed = CutOffCounter { inner: self.env.summarizer, cut_off: AtomicU32::new(0), micros: AtomicU64::new(0) };
        let result = {
            let mut cx = Cx { model: &self.scenario.model, summarizer: &observed, store: &mut self.store, tokenizer: self.env.counter, failures: self.failures };
            self.replay.compact(&self.log, plan, &mut cx)
        };
        self.phases.compact += micros(started);
        self.phases.summarize += observed.micros.load(Ordering::Relaxed);
        let mut record = CompactionRecord {
            request: self.request,
            step: self.step as u32,
            first_kept_step: None,
            moment: match at {
                Moment::TurnEnd => "turn_end",
                Moment::BeforeRequest => "before_request",
                Moment::Overflow => "overflow",
            },
            reason,
            kinds: Vec::new(),
            tokens_before,
            tokens_after: tokens_before,
            estimated_before: 0,
            injected_tokens: 0,
            summarizer_calls: 0,
            summarizer_input: 0,
            summarizer_output: 0,
            summaries_cut_off: observed.cut_off.into_inner(),
            error: None,
        };
        let compacted = match result {
            Ok(checkpoints) if checkpoints.is_empty() => return false,
            Ok(checkpoints) => {
                for cp in checkpoints {
                    let first_kept = match &cp.window {
                        Window::From(id) => self.entry_step.get(id).copied(),
                        Window::Kept(ids) => ids.iter().filter_map(|id| self.entry_step.get(id)).min().copied(),
                        Window::Inherit => None,
                    };
                    if cp.window != Window::Inherit {
                        record.first_kept_step = first_kept.map(|s| s as u32);
                    }
                    record.kinds.push(cp.kind.as_str());
                    record.estimated_before = record.estimated_before.max(cp.tokens_before);
                    record.injected_tokens += cp.injected.iter().map(|m| self.env.counter.count_message(m)).sum::<u64>();
                    record.summarizer_calls += cp.summarizer.calls;
                    record.summarizer_input += cp.summarizer.input_tokens;
                    record.summarizer_output += cp.summarizer.output_tokens;
                    self.push_checkpoint(cp);
                }
                self.rounds += 1;
                self.failures = 0;
                self.paths.sync(&self.log);
                record.tokens_after = self.measure().2;
                true
            }
            // Degenerate input is a normal outcome, not a failure worth a row.
            Err(e) if e.kind == ErrorKind::NothingToCompact => return false,
            Err(e) => {
                self.failures += 1;
                record.error = Some(e.to_string());
                false
            }
        };
        self.compactions.push(record);
        compacted
    }

    /// Marks the store files that the marked ones name, transitively up to
    /// [`MAX_POINTER_HOPS`] reads deep: an agent that reads a file naming another (Amp's
    /// parent thread naming its own parent) can read that one too.
    fn follow_pointers(&mut self, mentioned: &mut [bool]) {
        let mut frontier: Vec<usize> = (0..mentioned.len()).filter(|&p| mentioned[p]).collect();
        for _ in 0..MAX_POINTER_HOPS {
            let mut next = Vec::new();
            for p in frontier {
                let Some(content) = self.store.read(self.paths.get(p)) else { continue };
                let paths = &self.paths;
                let named = self.links.entry((p, content.len())).or_insert_with(|| {
                    paths.named_in(content, 0).into_iter().filter(|&q| q != p).collect()
                });
                for &q in named.iter() {
                    if !mentioned[q] {
                        mentioned[q] = true;
                        next.push(q);
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            frontier = next;
        }
    }

    /// The state of every fact in `view`, the view measured last (None where not needed at
    /// `step`).
    fn probe(&mut self, step: usize) -> Vec<Option<Status>> {
        let facts = &self.session.facts;
        let needed: Vec<usize> = (0..facts.len()).filter(|&i| facts[i].needed_at(step)).collect();
        let mut out = vec![None; facts.len()];
        if needed.is_empty() {
            return out;
        }
        for (&info, (origin, _)) in self.measured.infos.iter().zip(&self.measured.keys) {
            let here = match origin {
                Origin::Entry(_) | Origin::Replaced(..) => Status::VerbatimKept,
                Origin::Injected(_) => Status::VerbatimInjected,
                Origin::Summary(_) => Status::VerbatimSummary,
            };
            for &f in &self.infos[info].needles {
                // Status orders kept < injected < summary: keep the most direct place.
                out[f] = Some(out[f].map_or(here, |s: Status| s.min(here)));
            }
        }
        let missing: Vec<usize> = needed.iter().copied().filter(|&f| out[f].is_none()).collect();
        if !missing.is_empty() {
            // The offload paths the view names, each message checked against paths that
            // appeared since it was last checked.
            let mut mentioned = vec![false; self.paths.len()];
            for &info in &self.measured.infos {
                let info = &mut self.infos[info];
                if info.paths_checked < self.paths.len() {
                    info.paths.extend(self.paths.named_in(&info.text, info.paths_checked));
                    info.paths_checked = self.paths.len();
                }
                for &p in &info.paths {
                    mentioned[p] = true;
                }
            }
            self.follow_pointers(&mut mentioned);
            // One pass over the mentioned files, each file's needles looked up once per
            // version of it, rather than every missing fact asking every file.
            let mut recoverable = vec![false; facts.len()];
            for p in (0..mentioned.len()).filter(|&p| mentioned[p]) {
                let Some(content) = self.store.read(self.paths.get(p)) else { continue };
                let finders = &self.needle_finders;
                let holds = self.reads.entry((p, content.len())).or_insert_with(|| {
                    finders.iter().enumerate().filter(|(_, n)| n.find(content.as_bytes()).is_some()).map(|(f, _)| f).collect()
                });
                for &f in holds.iter() {
                    recoverable[f] = true;
                }
            }
            for f in missing {
                out[f] = Some(if recoverable[f] { Status::Recoverable } else { Status::Lost });
            }
        }
        for (i, s) in out.iter_mut().enumerate() {
            if !needed.contains(&i) {
                *s = None;
            }
        }
        out
    }
}

/// One probe of one fact: (request, state, compactions since the fact was planted).
type Probe = (u32, Status, u32);

fn outcome(fact: &crate::facts::Fact, probes: &[Probe], compactions: &[CompactionRecord]) -> FactOutcome {
    let mut counts = BTreeMap::new();
    for (_, s, _) in probes {
        *counts.entry(*s).or_default() += 1;
    }
    let first_lost = probes.iter().find(|(_, s, _)| *s == Status::Lost);
    let max_rounds = probes.last().map_or(0, |p| p.2);
    let after_round = (1..=max_rounds)
        .filter_map(|k| probes.iter().find(|p| p.2 >= k).map(|p| p.1))
        .collect();
    FactOutcome {
        id: fact.id.clone(),
        kind: fact.kind,
        needed: probes.len() as u32,
        probes: counts,
        last: probes.last().expect("only needed facts get an outcome").1,
        lost_at: first_lost.map(|p| p.0),
        lost_after_rounds: first_lost.map(|p| p.2),
        // The newest successful compaction before the first request that lost it.
        lost_by: first_lost.and_then(|p| compactions.iter().rposition(|c| c.error.is_none() && c.request <= p.0)).map(|i| i as u32),
        after_round,
        judged: None,
    }
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

/// How many reads deep the probe follows pointers from one store file to another.
pub const MAX_POINTER_HOPS: usize = 3;

/// Output cap of a subagent's final report, in tokens.
pub const SUBAGENT_REPORT_TOKENS: u64 = 2_000;

/// The part of a run that concerns requests, kept apart from the strategy's state so the
/// same request path serves replayed and synthetic (delegation) assistant steps.
struct Tally {
    requests: Vec<RequestRecord>,
    violations: BTreeMap<&'static str, BTreeMap<&'static str, u32>>,
    /// The first violation of each (shape, rule), as it happened.
    examples: Vec<ViolationExample>,
    prev_keys: Vec<Key>,
    /// Validity of this run's requests, kept from one request to the next.
    validity: Revalidator,
    probes: Vec<Vec<Probe>>,
    /// The judge's verdict per fact, when a judge is set.
    judged: Vec<Option<Judged>>,
    /// Compactions completed when each fact was planted.
    planted_round: Vec<u32>,
    output_tokens: u64,
    child: ChildCost,
}

impl Run<'_> {
    /// Builds, measures, validates and probes the request answered by `answer` at `step`,
    /// then appends `answer` with its usage.
    fn request(&mut self, tally: &mut Tally, step: usize, answer: &Message, observe: &mut dyn FnMut(&Snapshot<'_>)) {
        let window = self.scenario.model.window;
        self.maybe_compact(Moment::BeforeRequest);
        let (mut keys, mut tokens, mut total) = self.measure();
        if total > window && self.maybe_compact(Moment::Overflow) {
            (keys, tokens, total) = self.measure();
        }
        // Equal keys mean equal content, so the prefix shared with the previous request is
        // known without comparing messages (and revalidation resumes after it).
        let shared = keys.iter().zip(&tally.prev_keys).take_while(|(a, b)| a == b).count();
        let view = self.replay.view(&self.log);
        let started = Instant::now();
        let mut per_shape = [0u32; 4];
        for ((i, shape), counts) in Shape::ALL.into_iter().enumerate().zip(tally.validity.update(&view, shared)) {
            per_shape[i] = counts.iter().sum();
            let seen = tally.violations.get(shape.as_str());
            let first = Rule::ALL.iter().zip(counts).any(|(rule, n)| n > 0 && seen.and_then(|s| s.get(rule.as_str())).is_none());
            if first {
                // A rule broken for the first time in this run: its example is the first
                // violation in validation order, so validate this request in full.
                for v in validate(&lower(&view, shape)) {
                    let count = tally.violations.entry(shape.as_str()).or_default().entry(v.rule.as_str()).or_default();
                    if *count == 0 {
                        tally.examples.push(example(self.request, shape, &v, &view));
                    }
                    *count += 1;
                }
            } else {
                for (rule, n) in Rule::ALL.iter().zip(counts).filter(|(_, n)| *n > 0) {
                    *tally.violations.entry(shape.as_str()).or_default().entry(rule.as_str()).or_default() += n;
                }
            }
        }
        self.phases.validate += micros(started);
        let cached: u64 = tokens[..shared].iter().sum();
        let started = Instant::now();
        for (f, s) in self.probe(step).into_iter().enumerate() {
            if let Some(s) = s {
                tally.probes[f].push((self.request, s, self.rounds - tally.planted_round[f]));
            }
        }
        self.phases.probe += micros(started);
        let view = self.replay.view(&self.log);
        if let Some(judge) = self.judge {
            let facts = &self.session.facts;
            let due: Vec<usize> = (0..facts.len()).filter(|&f| facts[f].needed_until == step).collect();
            if !due.is_empty() {
                for (f, answer) in crate::judge::ask(judge, view, facts, &due) {
                    tally.judged[f] = Some(Judged { request: self.request, answer });
                }
            }
        }
        observe(&Snapshot { index: self.request, view, tokens: &tokens, log: &self.log });
        tally.requests.push(RequestRecord {
            index: self.request,
            step: step as u32,
            tokens: total,
            cached_tokens: cached,
            messages: view.len() as u32,
            overflow: total > window,
            rounds: self.rounds,
            violations: per_shape,
        });
        tally.prev_keys = keys;
        let out = self.env.counter.count_message(answer);
        tally.output_tokens += out;
        let mut answer = answer.clone();
        answer.usage = Some(Usage { input: total, output: out, cache_read: 0 });
        self.push_message(answer);
        self.request += 1;
    }

    /// Runs `steps` (an exploration span) in an isolated child context and returns the
    /// parent's `task` call and the child's bounded report. The child starts from the
    /// system prompt and a task message, makes one request per assistant step and one for
    /// its report, and never compacts (spans are short).
    fn delegate(&mut self, tally: &mut Tally, steps: &[Step], n: usize) -> (Message, Message) {
        let counter = self.env.counter;
        let description = format!("Explore the code this step depends on and report what you find (span {n}).");
        let mut child: Vec<&Message> = vec![&self.session.system];
        let task = Message::user(description.clone());
        child.push(&task);
        let mut previous = 0u64;
        let mut charge = |context: &[&Message], output: u64| {
            let tokens: u64 = context.iter().map(|m| counter.count_message(m)).sum::<u64>() + PER_REQUEST_OVERHEAD;
            tally.child.requests += 1;
            tally.child.input_tokens += tokens;
            tally.child.cached_tokens += previous;
            tally.child.output_tokens += output;
            previous = tokens - PER_REQUEST_OVERHEAD;
        };
        let mut transcript = Vec::new();
        for step in steps {
            let m = step.message();
            if let Step::Assistant(_) = step {
                charge(&child, counter.count_message(m));
            }
            transcript.push(m.searchable_text());
            child.push(m);
        }
        let request = SummaryRequest {
            purpose: "subagent-report".into(),
            system: "You are a subagent. Your final answer is the only thing the parent agent will see.".into(),
            transcript: transcript.join("\n\n"),
            instructions: "Report what the parent needs from this exploration: exact paths, names, errors, and what was searched for and not found.".into(),
            max_output_tokens: SUBAGENT_REPORT_TOKENS,
        };
        let report = match self.env.summarizer.summarize(&request) {
            Ok(summary) => summary.text,
            Err(e) => format!("Subagent failed: {}", e.message),
        };
        let report = Message::tool_result(format!("task_{n}"), "task", report, false);
        charge(&child, counter.count_message(&report));
        let call = Message::tool_call(format!("task_{n}"), "task", serde_json::json!({ "description": description }));
        (call, report)
    }
}

/// The first violation of a rule in a shape: where, what, and which log messages are involved
/// (those whose tool calls or results the violation names; the view message at the violation's
/// position where it names none).
fn example(request: u32, shape: Shape, v: &compactbench_core::request::Violation, view: &View) -> ViolationExample {
    let named = |m: &Message| m.tool_call_ids().chain(m.tool_result_ids()).any(|id| v.detail.contains(id));
    let mut entries: Vec<u32> = view.messages.iter().filter(|vm| named(&vm.message)).filter_map(|vm| vm.origin.entry()).map(|e| e.0).collect();
    if entries.is_empty() {
        entries.extend(view.messages.get(v.at).and_then(|vm| vm.origin.entry()).map(|e| e.0));
    }
    ViolationExample { shape: shape.as_str(), rule: v.rule.as_str(), request, detail: v.detail.clone(), entries }
}

/// The run's summarizer, counting the summaries that stopped at their output cap: strategies
/// report calls and tokens in their checkpoints, but a cut-off summary they rejected leaves no
/// checkpoint, and the report must count it all the same.
struct CutOffCounter<'a> {
    inner: &'a dyn Summarizer,
    cut_off: AtomicU32,
    /// Time spent in the summarizer (for the phase profile).
    micros: AtomicU64,
}

fn micros(since: Instant) -> u64 {
    since.elapsed().as_micros() as u64
}

impl Summarizer for CutOffCounter<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let started = Instant::now();
        let summary = self.inner.summarize(request);
        self.micros.fetch_add(micros(started), Ordering::Relaxed);
        let summary = summary?;
        if summary.stop == StopReason::Length {
            self.cut_off.fetch_add(1, Ordering::Relaxed);
        }
        Ok(summary)
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
    let mut run = Run {
        scenario,
        session,
        env,
        log: Log::new(),
        replay: strategy.start(),
        store: VirtualStore::new(),
        info: FxHashMap::default(),
        infos: Vec::new(),
        measured: Measured::default(),
        paths: OffloadPaths::default(),
        needle_finders: session.facts.iter().map(|f| Finder::new(f.needle.as_bytes()).into_owned()).collect(),
        reads: FxHashMap::default(),
        links: FxHashMap::default(),
        rounds: 0,
        compactions: Vec::new(),
        phases: Phases::default(),
        request: 0,
        failures: 0,
        step: 0,
        entry_step: FxHashMap::default(),
        judge: options.judge,
    };
    run.push_message(session.system.clone());
    let facts = &session.facts;
    let mut tally = Tally {
        requests: Vec::new(),
        violations: BTreeMap::new(),
        examples: Vec::new(),
        prev_keys: Vec::new(),
        validity: Revalidator::new(),
        probes: vec![Vec::new(); facts.len()],
        judged: vec![None; facts.len()],
        planted_round: vec![0; facts.len()],
        output_tokens: 0,
        child: ChildCost::default(),
    };
    let mut any_assistant = false;
    let mut step = 0;
    while step < session.steps.len() {
        run.step = step;
        let span = options.delegate.then(|| session.spans.iter().position(|s| s.start == step)).flatten();
        let last = match span {
            Some(n) => {
                let sp = session.spans[n];
                let (call, report) = run.delegate(&mut tally, &session.steps[sp.start..=sp.end], n);
                run.request(&mut tally, step, &call, &mut observe);
                run.push_message(report);
                sp.end
            }
            None => {
                match &session.steps[step] {
                    Step::User(m) => {
                        if any_assistant {
                            run.maybe_compact(Moment::TurnEnd);
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
                        run.request(&mut tally, step, m, &mut observe);
                        run.entry_step.insert(id, step);
                        any_assistant = true;
                    }
                }
                step
            }
        };
        for (f, fact) in facts.iter().enumerate() {
            if (step..=last).contains(&fact.planted_step) {
                tally.planted_round[f] = run.rounds;
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
            .zip(&tally.probes)
            .zip(tally.judged)
            .filter(|((_, p), _)| !p.is_empty())
            .map(|((f, p), judged)| FactOutcome { judged, ..outcome(f, p, &run.compactions) })
            .collect(),
        requests: tally.requests,
        compactions: run.compactions,
        violations: tally.violations,
        violation_examples: tally.examples,
        log_entries: run.log.len(),
        output_tokens: tally.output_tokens,
        child: tally.child,
        phases: run.phases,
    }
}
