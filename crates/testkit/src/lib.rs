//! Test support for strategy crates.
//!
//! - [`FakeSummarizer`]: deterministic, records every request, can be told to fail.
//! - [`model`]: a model profile with a given window.
//! - [`tokenizer`]: the exact tokenizer to put in a `Cx` (the runner's, memoized).
//! - [`Harness`]: a log plus store plus summarizer, with `check` / `compact` helpers that
//!   apply a strategy the way the runner does and assert the log only grew.
//! - [`law`]: the law every strategy's incremental layer keeps ([`assert_replay_law`]).

use std::sync::{Mutex, OnceLock};

use compactbench_core::{
    Checkpoint, Cx, Decision, Error, ErrorKind, Log, Message, ModelProfile, Moment, Pricing, Shape, StopReason,
    Strategy, Summarizer, Summary, SummaryRequest, Tokenizer, View, VirtualStore,
};
use compactbench_tokens::TokenCounter;

pub mod law;
pub use law::{assert_replay_law, assert_replay_law_instructed, assert_replay_law_with, LawTally};

/// The exact tokenizer for a test's `Cx` (`Cx::new(model, summarizer, store, tokenizer())`):
/// the runner's `TokenCounter`, one per test process, memoized by content.
pub fn tokenizer() -> &'static dyn Tokenizer {
    counter()
}

/// The one exact counter of a test process.
fn counter() -> &'static TokenCounter {
    static COUNTER: OnceLock<TokenCounter> = OnceLock::new();
    COUNTER.get_or_init(TokenCounter::default)
}

/// A model profile with `window` tokens and `max_output` output tokens, Anthropic shape.
pub fn model(window: u64, max_output: u64) -> ModelProfile {
    ModelProfile {
        name: "test-model".into(),
        window,
        max_output,
        provider: Shape::Anthropic,
        pricing: Pricing::default(),
    }
}

/// How the fake summarizer answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FakeMode {
    /// `SUMMARY <n> of <purpose>` (n counts calls from 1).
    Numbered,
    /// Always this text.
    Fixed(String),
    /// Always fail with this kind.
    Fail(ErrorKind),
    /// A provider with a window of this many tokens: a request larger than that (by the
    /// fake's own count, `(system + user message) bytes / 4`, the input it reports) is refused
    /// with [`ErrorKind::ContextOverflow`], as the eval runner refuses one over the scenario's
    /// window; the others are answered as `Numbered`.
    Window(u64),
}

/// A deterministic summarizer that records what it was asked.
pub struct FakeSummarizer {
    mode: FakeMode,
    requests: Mutex<Vec<SummaryRequest>>,
}

impl FakeSummarizer {
    /// A summarizer answering as `mode` says.
    pub fn new(mode: FakeMode) -> FakeSummarizer {
        FakeSummarizer { mode, requests: Mutex::new(Vec::new()) }
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SummaryRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl Default for FakeSummarizer {
    fn default() -> Self {
        FakeSummarizer::new(FakeMode::Numbered)
    }
}

impl Summarizer for FakeSummarizer {
    fn name(&self) -> &str {
        "fake"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let mut requests = self.requests.lock().unwrap();
        requests.push(request.clone());
        let input_tokens = (request.system.len() + request.user_message().len()) as u64 / 4;
        let text = match &self.mode {
            FakeMode::Numbered => format!("SUMMARY {} of {}", requests.len(), request.purpose),
            FakeMode::Fixed(t) => t.clone(),
            FakeMode::Fail(kind) => return Err(Error::new(*kind, "fake summarizer failure")),
            FakeMode::Window(window) if input_tokens > *window => {
                return Err(Error::new(ErrorKind::ContextOverflow, format!("prompt is too long: {input_tokens} tokens > {window} maximum")))
            }
            FakeMode::Window(_) => format!("SUMMARY {} of {}", requests.len(), request.purpose),
        };
        Ok(Summary {
            input_tokens,
            output_tokens: text.len() as u64 / 4,
            text,
            stop: StopReason::Complete,
        })
    }
}

/// A session under test: log, store, model, summarizer.
pub struct Harness {
    /// The log.
    pub log: Log,
    /// The virtual store.
    pub store: VirtualStore,
    /// The model profile.
    pub model: ModelProfile,
    /// The summarizer.
    pub summarizer: FakeSummarizer,
    /// Consecutive failed compactions, as the runner counts them (see `Cx::failures`).
    pub failures: u32,
    /// What the user types after the manual command, handed as `Cx::manual` at
    /// `Moment::Manual` (`""` when unset).
    pub manual: String,
}

impl Harness {
    /// A harness over `messages` with `model` and a numbered fake summarizer.
    pub fn new(messages: impl IntoIterator<Item = Message>, model: ModelProfile) -> Harness {
        Harness {
            log: Log::from_messages(messages),
            store: VirtualStore::new(),
            model,
            summarizer: FakeSummarizer::default(),
            failures: 0,
            manual: String::new(),
        }
    }

    /// Appends a message.
    pub fn push(&mut self, message: Message) {
        self.log.push_message(message);
    }

    /// The strategy's view of the log.
    pub fn view(&self, strategy: &dyn Strategy) -> View {
        strategy.project(&self.log)
    }

    /// The strategy's decision at `at`.
    pub fn decide(&mut self, strategy: &dyn Strategy, at: Moment) -> Decision {
        let view = strategy.project(&self.log);
        let (log, cx) = self.cx(at);
        strategy.decide(log, &view, at, &cx)
    }

    /// The log beside the context a call at `at` gets (the manual command's text only at
    /// [`Moment::Manual`]).
    fn cx(&mut self, at: Moment) -> (&Log, Cx<'_>) {
        let manual = (at == Moment::Manual).then_some(self.manual.as_str());
        let cx = Cx {
            model: &self.model,
            summarizer: &self.summarizer,
            store: &mut self.store,
            tokenizer: tokenizer(),
            failures: self.failures,
            manual,
        };
        (&self.log, cx)
    }

    /// Runs `compact` unconditionally at `at`, appends what it returns, and asserts that the
    /// log kept every earlier entry unchanged. Returns the appended checkpoints.
    #[track_caller]
    pub fn compact(&mut self, strategy: &dyn Strategy, at: Moment) -> Result<Vec<Checkpoint>, Error> {
        let before = self.log.clone();
        let view = strategy.project(&self.log);
        let (log, mut cx) = self.cx(at);
        let checkpoints = match strategy.compact(log, &view, at, &mut cx) {
            Ok(c) => c,
            Err(e) => {
                if e.kind != compactbench_core::ErrorKind::NothingToCompact {
                    self.failures += 1;
                }
                return Err(e);
            }
        };
        if !checkpoints.is_empty() {
            self.failures = 0;
        }
        for cp in &checkpoints {
            self.log.push_checkpoint(cp.clone());
        }
        assert!(before.entries().zip(self.log.entries()).all(|(a, b)| a == b), "compaction rewrote the log");
        Ok(checkpoints)
    }

    /// Decides at `at` and compacts if the strategy says so; returns the appended checkpoints.
    #[track_caller]
    pub fn step(&mut self, strategy: &dyn Strategy, at: Moment) -> Result<Vec<Checkpoint>, Error> {
        match self.decide(strategy, at) {
            Decision::Skip => Ok(Vec::new()),
            Decision::Compact { .. } => self.compact(strategy, at),
        }
    }
}

/// What the user typed after the manual command in [`manual`]'s session.
pub const TYPED: &str = "focus on `cache_port_q7k2`: keep its exact lines verbatim";

/// The user types the manual compaction command followed by `typed` (e.g. [`TYPED`]; `""`:
/// bare) after 40 finished turns
/// of about 1,600 tokens each (a 128k-token window, so no threshold is near): the strategy's
/// decision at `Moment::Manual`, and the summary requests the compaction sent when it decided
/// to compact (it must then append something).
#[track_caller]
pub fn manual(strategy: &dyn Strategy, typed: &str) -> (Decision, Vec<SummaryRequest>) {
    let mut messages = vec![Message::system("You are a coding agent. Use the tools to read, search, edit and test.")];
    for i in 0..40 {
        let words: String = (0..400).map(|w| format!("word{} ", i * 400 + w)).collect();
        messages.push(Message::user(format!("Request {i}: {words}")));
        let mut reply = Message::assistant(format!("Reply {i}: {words}"));
        reply.usage = Some(compactbench_core::Usage { input: 1_700 * (i + 1), output: 800, ..Default::default() });
        messages.push(reply);
    }
    let mut h = Harness::new(messages, model(128_000, 8_192));
    h.manual = typed.to_owned();
    let decision = h.decide(strategy, Moment::Manual);
    if decision != Decision::Skip {
        let appended = h.compact(strategy, Moment::Manual).expect("the manual compaction succeeds");
        assert!(!appended.is_empty(), "{} decided to compact at Moment::Manual and appended nothing", strategy.info().id);
    }
    (decision, h.summarizer.requests())
}

/// Plain-text rendering of a view, one message per line: `role: searchable text` (long texts
/// cut to 60 chars). Handy for expect-test snapshots.
pub fn render(view: &View) -> String {
    let mut out = String::new();
    for vm in &view.messages {
        let text = vm.message.searchable_text().replace('\n', "⏎");
        let text: String = if text.chars().count() > 60 { text.chars().take(60).chain("…".chars()).collect() } else { text };
        out.push_str(&format!("{:?} {}: {}\n", vm.origin, vm.message.role.as_str(), text));
    }
    out
}

/// A message whose text is `n` copies of `ch` (for sizing by chars/4 estimators).
pub fn sized(role: compactbench_core::Role, ch: char, n: usize) -> Message {
    Message::new(role, vec![compactbench_core::Part::text(std::iter::repeat_n(ch, n).collect::<String>())])
}

/// JSON helper re-export so tests need no direct serde_json dependency.
pub use serde_json::json;
