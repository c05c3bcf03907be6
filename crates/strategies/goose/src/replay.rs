//! The incremental layer: one run's view and outputs waiting for offload, kept as the log
//! grows. The view is the agent-visible conversation, rebuilt after a checkpoint
//! ([`Reprojected`]); the checks and the compactions are the from-scratch ones.

use compactbench_core::{Checkpoint, Cx, EntryId, Error, Log, Moment, Plan, Replay, Reprojected, View, ViewState};

use crate::offload::Waiting;
use crate::GooseStrategy;

pub(crate) struct GooseReplay<'s> {
    strategy: &'s GooseStrategy,
    view: Reprojected<'s>,
    waiting: Waiting,
}

impl<'s> GooseReplay<'s> {
    pub(crate) fn new(strategy: &'s GooseStrategy) -> GooseReplay<'s> {
        GooseReplay { strategy, view: Reprojected::new(strategy), waiting: Waiting::default() }
    }
}

impl Replay for GooseReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        self.view.push(log, id);
        self.waiting.push(id, log.get(id).expect("pushed entries are in the log"));
    }

    fn view(&mut self, log: &Log) -> &View {
        self.view.view(log)
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        let decision = self.strategy.decide_in(log, self.view.view(log), &self.waiting, at, cx.model.window);
        Plan::from_decision(log, at, decision)
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        self.strategy.compact_in(log, self.view.view(log), &self.waiting, plan.at(), cx)
    }
}
