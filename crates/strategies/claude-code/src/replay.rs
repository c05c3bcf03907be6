//! The API variant's run: the default view, each log message's estimate (the server
//! estimates the whole prompt at every request) and the edits `decide` found at this log
//! state, for `compact` to apply. The client mode's run keeps only the default view.

use compactbench_core::{Checkpoint, Cx, DefaultView, EntryId, Error, Log, Moment, Plan, Replay, View, ViewState};

use crate::api::{self, Edits, Estimates};
use crate::ClaudeCodeConfig;

pub(crate) struct ApiReplay<'s> {
    config: &'s ClaudeCodeConfig,
    view: DefaultView,
    estimates: Estimates,
    edits: Option<Edits>,
}

impl<'s> ApiReplay<'s> {
    pub(crate) fn new(config: &'s ClaudeCodeConfig) -> ApiReplay<'s> {
        ApiReplay { config, view: DefaultView::new(), estimates: Estimates::default(), edits: None }
    }
}

impl Replay for ApiReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        self.view.push(log, id);
        self.estimates.push(log.get(id).expect("pushed entries are in the log"));
    }

    fn view(&mut self, log: &Log) -> &View {
        self.view.view(log)
    }

    fn decide(&mut self, log: &Log, at: Moment, _: &Cx<'_>) -> Option<Plan> {
        self.edits = api::decide(self.config, log, self.view.view(log), at, &self.estimates);
        let reason = self.edits.as_ref().and_then(Edits::reason)?;
        Some(Plan::new(log, at, reason))
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        // Found by the decide at this log state, unless a later one found nothing to do.
        let view = self.view.view(log);
        let edits = self.edits.take().unwrap_or_else(|| api::edits(self.config, log, view, &self.estimates));
        api::compact(self.config, view, &edits, cx)
    }
}
