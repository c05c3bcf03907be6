//! The incremental layer: a run's default view and chat-history file, kept as entries arrive,
//! with the strategy's own decide and compact.

use compactbench_core::{Checkpoint, Cx, DefaultView, EntryId, Error, Log, Moment, Plan, Replay, Strategy, View, ViewState};

use crate::summarize::History;
use crate::CursorStrategy;

pub(crate) struct CursorReplay<'s> {
    strategy: &'s CursorStrategy,
    view: DefaultView,
    history: History,
}

impl<'s> CursorReplay<'s> {
    pub(crate) fn new(strategy: &'s CursorStrategy) -> CursorReplay<'s> {
        CursorReplay { strategy, view: DefaultView::new(), history: History::default() }
    }
}

impl Replay for CursorReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        self.view.push(log, id);
        self.history.push(log.get(id).expect("pushed entries are in the log"));
    }

    fn view(&mut self, log: &Log) -> &View {
        self.view.view(log)
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        Plan::from_decision(log, at, self.strategy.decide(log, self.view.view(log), at, cx))
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        self.strategy.compact_with(log, self.view.view(log), plan.at(), &self.history, cx)
    }
}
