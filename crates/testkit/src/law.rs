//! The law every strategy's incremental layer keeps: fed a session entry by entry, its
//! [`Replay`] shows the views, makes the decisions and returns the checkpoints that the
//! strategy's from-scratch functions (`project`, `decide`, `compact`) give on the same log.
//!
//! [`assert_replay_law`] drives a session the way the eval's runner does (a decision before
//! each request and at each turn's end, an overflow decision when the request is over the
//! window, provider usage on each reply) and compares both layers at every compaction and at
//! every `sample`-th request. Both layers get their own summarizer and store, so a difference
//! in what they ask or write shows as a difference in what they return.

use std::sync::Mutex;

use compactbench_core::{
    Checkpoint, Cx, Decision, Error, Log, Message, ModelProfile, Moment, Replay, Role, Strategy, Summarizer, Summary,
    SummaryRequest, Usage, VirtualStore,
};
use compactbench_tokens::{TokenCounter, PER_REQUEST_OVERHEAD};

use crate::{counter, FakeSummarizer};

/// What a law check compared, for tests that want to show it compared something.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LawTally {
    /// Requests made.
    pub requests: u32,
    /// Decisions compared (sampled ones and every one the replay said compact at).
    pub decisions: u32,
    /// Views compared.
    pub views: u32,
    /// Compactions compared (each side's checkpoints or error).
    pub compactions: u32,
}

/// A summarizer that records what it was asked, around another.
struct Recording {
    inner: Box<dyn Summarizer>,
    requests: Mutex<Vec<SummaryRequest>>,
}

impl Summarizer for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.summarize(request)
    }
}

/// One side of the comparison: its summarizer, store and failure count.
struct Side {
    summarizer: Recording,
    store: VirtualStore,
    failures: u32,
}

impl Side {
    fn new(summarizer: Box<dyn Summarizer>) -> Side {
        Side { summarizer: Recording { inner: summarizer, requests: Mutex::new(Vec::new()) }, store: VirtualStore::new(), failures: 0 }
    }

    fn requests(&self) -> Vec<SummaryRequest> {
        self.summarizer.requests.lock().unwrap().clone()
    }

    fn cx<'a>(&'a mut self, model: &'a ModelProfile, counter: &'a TokenCounter, typed: Option<&'a str>) -> Cx<'a> {
        Cx { model, summarizer: &self.summarizer, store: &mut self.store, tokenizer: counter, failures: self.failures, manual: typed }
    }

    fn count(&mut self, result: &Result<Vec<Checkpoint>, Error>) {
        match result {
            Ok(cps) if !cps.is_empty() => self.failures = 0,
            Ok(_) => {}
            Err(e) if e.kind == compactbench_core::ErrorKind::NothingToCompact => {}
            Err(_) => self.failures += 1,
        }
    }
}

/// Drives `messages` (a session: system prompt, then user, assistant and tool messages in
/// order) through `strategy` as the runner does, and panics at the first request where its
/// [`Replay`] differs from its from-scratch functions. Compares at every compaction and at
/// every `sample`-th request (1 compares at every request). Summaries come from a
/// [`FakeSummarizer`] numbering its answers.
#[track_caller]
pub fn assert_replay_law(strategy: &dyn Strategy, model: &ModelProfile, messages: &[Message], sample: u32) -> LawTally {
    assert_replay_law_with(strategy, model, messages, sample, &|| Box::new(FakeSummarizer::default()))
}

/// [`assert_replay_law`] with summaries from `summarizer()`, a new one for each side (so a
/// summarizer that answers by how often it was asked answers both sides alike).
#[track_caller]
pub fn assert_replay_law_with(
    strategy: &dyn Strategy,
    model: &ModelProfile,
    messages: &[Message],
    sample: u32,
    summarizer: &dyn Fn() -> Box<dyn Summarizer>,
) -> LawTally {
    assert_replay_law_instructed(strategy, model, messages, sample, summarizer, &[])
}

/// [`assert_replay_law_with`] on a session whose user compacts by hand: at each `(i, text)` of
/// `manual` the user types the manual command with `text` (`Cx::manual`) before message `i` (a
/// user message), which is compared at [`Moment::Manual`] (after the turn-end decision there).
#[track_caller]
pub fn assert_replay_law_instructed(
    strategy: &dyn Strategy,
    model: &ModelProfile,
    messages: &[Message],
    sample: u32,
    summarizer: &dyn Fn() -> Box<dyn Summarizer>,
    manual: &[(usize, String)],
) -> LawTally {
    let counter = counter();
    let id = &strategy.info().id;
    let mut log = Log::new();
    let mut replay = strategy.start();
    let (mut ours, mut theirs) = (Side::new(summarizer()), Side::new(summarizer()));
    let mut tally = LawTally::default();
    let mut replied = false;
    for (i, message) in messages.iter().enumerate() {
        let at = match message.role {
            Role::User if replied => Some(Moment::TurnEnd),
            Role::Assistant => Some(Moment::BeforeRequest),
            _ => None,
        };
        if let Some(at) = at {
            let sampled = at == Moment::BeforeRequest && tally.requests % sample.max(1) == 0;
            step(strategy, &mut *replay, &mut log, at, sampled, model, counter, (&mut ours, &mut theirs), &mut tally, id, None);
        }
        for (_, typed) in manual.iter().filter(|(at, _)| *at == i) {
            step(strategy, &mut *replay, &mut log, Moment::Manual, true, model, counter, (&mut ours, &mut theirs), &mut tally, id, Some(typed));
        }
        let mut message = message.clone();
        if message.role == Role::Assistant {
            let total = request_tokens(replay.view(&log), counter);
            if total > model.window {
                step(strategy, &mut *replay, &mut log, Moment::Overflow, true, model, counter, (&mut ours, &mut theirs), &mut tally, id, None);
            }
            let input = request_tokens(replay.view(&log), counter);
            message.usage = Some(Usage { input, output: counter.count_message(&message), ..Default::default() });
            tally.requests += 1;
            replied = true;
        }
        let entry = log.push_message(message);
        replay.push(&log, entry);
    }
    tally
}

/// The exact size of a request built from `view`, as the runner counts it.
fn request_tokens(view: &compactbench_core::View, counter: &TokenCounter) -> u64 {
    view.iter().map(|m| counter.count_message(m)).sum::<u64>() + PER_REQUEST_OVERHEAD
}

/// One decision point: the replay decides (and compacts when it says so); the from-scratch
/// functions are asked the same where `sampled` or where the replay compacts.
#[allow(clippy::too_many_arguments)]
#[track_caller]
fn step(
    strategy: &dyn Strategy,
    replay: &mut dyn Replay,
    log: &mut Log,
    at: Moment,
    sampled: bool,
    model: &ModelProfile,
    counter: &TokenCounter,
    (ours, theirs): (&mut Side, &mut Side),
    tally: &mut LawTally,
    id: &str,
    typed: Option<&str>,
) {
    let request = tally.requests;
    let plan = replay.decide(log, at, &ours.cx(model, counter, typed));
    if !sampled && plan.is_none() {
        return;
    }
    let view = strategy.project(log);
    tally.views += 1;
    assert!(*replay.view(log) == view, "{id}: the replay's view differs from project() before request {request} ({at:?})");
    let decision = strategy.decide(log, &view, at, &theirs.cx(model, counter, typed));
    tally.decisions += 1;
    let replayed = match &plan {
        Some(plan) => Decision::compact(plan.reason()),
        None => Decision::Skip,
    };
    assert_eq!(replayed, decision, "{id}: the replay decides otherwise than decide() before request {request} ({at:?})");
    let Some(plan) = plan else { return };
    let replayed = replay.compact(log, plan, &mut ours.cx(model, counter, typed));
    let from_scratch = strategy.compact(log, &view, at, &mut theirs.cx(model, counter, typed));
    ours.count(&replayed);
    theirs.count(&from_scratch);
    tally.compactions += 1;
    assert_eq!(replayed, from_scratch, "{id}: the replay compacts otherwise than compact() before request {request} ({at:?})");
    assert_eq!(ours.requests(), theirs.requests(), "{id}: summary requests differ before request {request}");
    assert!(ours.store == theirs.store, "{id}: the store differs after the compaction before request {request}");
    for cp in replayed.unwrap_or_default() {
        let entry = log.push_checkpoint(cp);
        replay.push(log, entry);
    }
    assert!(*replay.view(log) == strategy.project(log), "{id}: the replay's view differs from project() after the compaction before request {request}");
}

#[cfg(test)]
mod tests {
    use compactbench_core::{
        Checkpoint, CheckpointKind, Cx, Decision, EntryId, Error, Fidelity, Incremental, Log, Message, Moment, Replay, Role,
        Strategy, StrategyInfo, View, ViewState, Window,
    };

    use super::assert_replay_law;
    use crate::model;

    /// Drops everything before the newest user message once the view holds more than six
    /// messages. Its replay is correct unless `broken`, when its view ignores checkpoints.
    struct KeepLastTurn {
        info: StrategyInfo,
        broken: bool,
    }

    /// A view that only appends messages: wrong as soon as a checkpoint sets a window.
    #[derive(Default)]
    struct AppendOnly(View);

    impl ViewState for AppendOnly {
        fn push(&mut self, log: &Log, id: EntryId) {
            if let Some(m) = log.message(id) {
                self.0.messages.push(compactbench_core::ViewMessage { origin: compactbench_core::Origin::Entry(id), message: m.clone() });
            }
        }

        fn view(&mut self, _: &Log) -> &View {
            &self.0
        }
    }

    impl Strategy for KeepLastTurn {
        fn info(&self) -> &StrategyInfo {
            &self.info
        }

        fn start(&self) -> Box<dyn Replay + '_> {
            if self.broken {
                Box::new(Incremental::new(self, AppendOnly::default()))
            } else {
                Box::new(Incremental::default_view(self))
            }
        }

        fn decide(&self, _: &Log, view: &View, at: Moment, _: &Cx<'_>) -> Decision {
            if at == Moment::BeforeRequest && view.len() > 6 { Decision::compact("long") } else { Decision::Skip }
        }

        fn compact(&self, log: &Log, _: &View, _: Moment, _: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
            let last_user = log.messages().filter(|(_, m)| m.role == Role::User).map(|(id, _)| id).next_back().unwrap();
            Ok(vec![Checkpoint::new(CheckpointKind::Summary, Window::From(last_user))])
        }
    }

    fn session() -> Vec<Message> {
        let mut messages = vec![Message::system("sys")];
        for turn in 0..4 {
            messages.push(Message::user(format!("turn {turn}")));
            for step in 0..3 {
                messages.push(Message::assistant(format!("step {turn}.{step}")));
            }
        }
        messages
    }

    fn strategy(broken: bool) -> KeepLastTurn {
        let info = StrategyInfo { id: "keep-last-turn".into(), harness: "test".into(), source: "test".into(), summary: String::new(), fidelity: Fidelity::Baseline };
        KeepLastTurn { info, broken }
    }

    #[test]
    fn a_replay_that_follows_its_strategy_keeps_the_law() {
        let tally = assert_replay_law(&strategy(false), &model(100_000, 1_000), &session(), 1);
        assert_eq!(tally.requests, 12);
        assert!(tally.compactions >= 2, "{tally:?}");
        assert!(tally.views > tally.compactions && tally.decisions >= 12, "{tally:?}");
    }

    #[test]
    #[should_panic(expected = "keep-last-turn: the replay's view differs from project() after the compaction")]
    fn a_replay_that_misses_a_checkpoint_breaks_the_law() {
        assert_replay_law(&strategy(true), &model(100_000, 1_000), &session(), 1);
    }
}
