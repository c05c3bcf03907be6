//! The incremental layer: the view and the newest compaction kept as the log grows. A logged
//! message is shown last, as it is (after the tail and the injected messages that follow it),
//! unless it is a system message before any other, which joins the system prompt; a checkpoint
//! projects the view afresh. The counter then reads only what follows the newest reply.

use compactbench_core::{Checkpoint, Cx, Entry, EntryId, Error, Log, Moment, Origin, Plan, Replay, Role, Strategy, View, ViewMessage};

use crate::{trigger, KimiCliStrategy};

/// One run of Kimi CLI's compaction.
pub(crate) struct KimiReplay<'s> {
    strategy: &'s KimiCliStrategy,
    /// The newest compaction ([`trigger::anchor`]).
    anchor: Option<EntryId>,
    /// Whether a message other than a system message was pushed.
    conversed: bool,
    view: View,
}

impl<'s> KimiReplay<'s> {
    pub(crate) fn new(strategy: &'s KimiCliStrategy) -> KimiReplay<'s> {
        KimiReplay { strategy, anchor: None, conversed: false, view: View::default() }
    }

    fn anchor<'l>(&self, log: &'l Log) -> Option<(EntryId, &'l Checkpoint)> {
        let id = self.anchor?;
        match log.get(id)? {
            Entry::Checkpoint(cp) => Some((id, cp)),
            Entry::Message(_) => None,
        }
    }
}

impl Replay for KimiReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        match log.get(id).expect("pushed entries are in the log") {
            Entry::Message(m) if m.role != Role::System || self.conversed => {
                self.conversed = true;
                self.view.messages.push(ViewMessage { origin: Origin::Entry(id), message: m.clone() });
            }
            Entry::Message(_) => self.view = self.strategy.project(log),
            Entry::Checkpoint(_) => {
                self.anchor = trigger::anchor(log).map(|(id, _)| id);
                self.view = self.strategy.project(log);
            }
        }
    }

    fn view(&mut self, _: &Log) -> &View {
        &self.view
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        Plan::from_decision(log, at, self.strategy.check(self.anchor(log), &self.view, at, cx.model.window))
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        self.strategy.compact(log, &self.view, plan.at(), cx)
    }
}
