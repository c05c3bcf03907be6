//! The incremental layer: the default projection kept as the log grows (core's [`DefaultView`]),
//! each view message's share of the main count, and the model facts the newest checkpoint
//! recorded. The trigger and the argument truncation then count the view by adding shares.

use compactbench_core::{Checkpoint, Cx, DefaultView, Entry, EntryId, Error, Log, Moment, Origin, Plan, Replay, Strategy, View, ViewState};

use crate::config::{ModelFacts, Settings};
use crate::middleware::recorded_facts;
use crate::{count, DeepAgentsStrategy};

/// One run of Deep Agents' middleware.
pub(crate) struct DeepAgentsReplay<'s> {
    strategy: &'s DeepAgentsStrategy,
    /// The default projection of the log.
    view: DefaultView,
    shares: Shares,
    /// The model facts the newest checkpoint recorded ([`recorded_facts`]).
    facts: Option<ModelFacts>,
    /// The view as the request shows it, when argument truncation clips it.
    truncated: Option<View>,
}

/// [`count::tokens`] of the first view messages, by origin, at one number of characters per
/// token.
#[derive(Default)]
struct Shares {
    tokens: Vec<(Origin, f64)>,
    chars_per_token: f64,
}

impl Shares {
    /// The main count of `view`, counting only the messages after the longest run of origins it
    /// shares with the view counted last: a view shows the n-th message of one origin the same
    /// way throughout a run.
    fn total(&mut self, view: &View, settings: &Settings) -> u64 {
        if self.chars_per_token != settings.chars_per_token() {
            *self = Shares { tokens: Vec::new(), chars_per_token: settings.chars_per_token() };
        }
        let same = self.tokens.iter().zip(&view.messages).take_while(|((origin, _), vm)| *origin == vm.origin).count();
        self.tokens.truncate(same);
        self.tokens.extend(view.messages[same..].iter().map(|vm| (vm.origin, count::tokens(&vm.message, self.chars_per_token))));
        count::total(view.iter().zip(self.tokens.iter().map(|(_, tokens)| *tokens)), true)
    }
}

impl<'s> DeepAgentsReplay<'s> {
    pub(crate) fn new(strategy: &'s DeepAgentsStrategy) -> DeepAgentsReplay<'s> {
        DeepAgentsReplay { strategy, view: DefaultView::new(), shares: Shares::default(), facts: None, truncated: None }
    }
}

impl Replay for DeepAgentsReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        self.view.push(log, id);
        if let Some(Entry::Checkpoint(_)) = log.get(id) {
            self.facts = recorded_facts(log);
        }
    }

    fn view(&mut self, log: &Log) -> &View {
        let (view, shares) = (self.view.view(log), &mut self.shares);
        self.truncated = self.strategy.truncated(log, view, self.facts, |settings| shares.total(view, settings));
        self.truncated.as_ref().unwrap_or(view)
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        let (view, shares) = (self.view.view(log), &mut self.shares);
        Plan::from_decision(log, at, self.strategy.decide_on(log, view, |settings| shares.total(view, settings), at, cx))
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        let strategy = self.strategy;
        strategy.compact(log, self.view(log), plan.at(), cx)
    }
}
