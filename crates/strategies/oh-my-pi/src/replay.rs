//! The incremental layer: every check reads the whole branch, so rebuilding it from the log
//! at each request would make a replay quadratic; the replay folds each entry into a
//! [`Branch`] once and calls the same [`decide`] and [`maintain`] as the from-scratch layer.

use compactbench_core::{Checkpoint, Cx, DefaultView, EntryId, Error, Log, Moment, Plan, Replay, View, ViewState};

use crate::branch::{Branch, Work};
use crate::maintain::{decide, maintain};
use crate::OhMyPiConfig;

/// oh-my-pi over one run: the default view and the branch, kept entry by entry.
pub(crate) struct OhMyPiReplay<'s> {
    pub(crate) config: &'s OhMyPiConfig,
    pub(crate) view: DefaultView,
    pub(crate) branch: Branch,
}

impl Replay for OhMyPiReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        self.view.push(log, id);
        self.branch.push(log, id);
    }

    fn view(&mut self, log: &Log) -> &View {
        self.view.view(log)
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        let decision = decide(self.config, &mut Work::from_branch(log, &self.branch), at, cx.model.window);
        Plan::from_decision(log, at, decision)
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        maintain(self.config, &mut Work::from_branch(log, &self.branch), plan.at(), cx)
    }
}
