//! The incremental layer: the default projection kept as the log grows (a logged message is
//! shown last unless it is a system message before any other; a checkpoint projects afresh),
//! each view message's share of the main count, and the model facts the newest checkpoint
//! recorded. The trigger and the argument truncation then count the view by adding shares.

use compactbench_core::{
    default_projection, Checkpoint, Cx, Entry, EntryId, Error, Log, Moment, Origin, Plan, Replay, Role, Strategy, View,
    ViewMessage,
};

use crate::config::{ModelFacts, Settings};
use crate::middleware::recorded_facts;
use crate::{count, DeepAgentsStrategy};

/// One run of Deep Agents' middleware.
pub(crate) struct DeepAgentsReplay<'s> {
    strategy: &'s DeepAgentsStrategy,
    /// The default projection of the log.
    view: View,
    shares: Shares,
    /// The model facts the newest checkpoint recorded ([`recorded_facts`]).
    facts: Option<ModelFacts>,
    /// Whether a message other than a system message was pushed.
    conversed: bool,
    /// The view as the request shows it, when argument truncation clips it.
    truncated: Option<View>,
}

/// [`count::tokens`] of the first view messages, at one number of characters per token.
#[derive(Default)]
struct Shares {
    tokens: Vec<f64>,
    chars_per_token: f64,
}

impl Shares {
    /// The main count of `view`, counting only the messages not counted yet.
    fn total(&mut self, view: &View, settings: &Settings) -> u64 {
        if self.chars_per_token != settings.chars_per_token() {
            *self = Shares { tokens: Vec::new(), chars_per_token: settings.chars_per_token() };
        }
        let counted = self.tokens.len();
        self.tokens.extend(view.messages[counted..].iter().map(|vm| count::tokens(&vm.message, self.chars_per_token)));
        count::total(view.iter().zip(self.tokens.iter().copied()), true)
    }
}

impl<'s> DeepAgentsReplay<'s> {
    pub(crate) fn new(strategy: &'s DeepAgentsStrategy) -> DeepAgentsReplay<'s> {
        DeepAgentsReplay { strategy, view: View::default(), shares: Shares::default(), facts: None, conversed: false, truncated: None }
    }
}

impl Replay for DeepAgentsReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        match log.get(id).expect("pushed entries are in the log") {
            Entry::Message(m) if m.role != Role::System || self.conversed => {
                self.conversed = true;
                self.view.messages.push(ViewMessage { origin: Origin::Entry(id), message: m.clone() });
            }
            Entry::Message(_) | Entry::Checkpoint(_) => {
                self.view = default_projection(log);
                self.shares.tokens.clear();
                self.facts = recorded_facts(log);
            }
        }
    }

    fn view(&mut self, log: &Log) -> &View {
        let (view, shares) = (&self.view, &mut self.shares);
        self.truncated = self.strategy.truncated(log, view, self.facts, |settings| shares.total(view, settings));
        self.truncated.as_ref().unwrap_or(&self.view)
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        let (view, shares) = (&self.view, &mut self.shares);
        Plan::from_decision(log, at, self.strategy.decide_on(log, view, |settings| shares.total(view, settings), at, cx))
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        let strategy = self.strategy;
        strategy.compact(log, self.view(log), plan.at(), cx)
    }
}
