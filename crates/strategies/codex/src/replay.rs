//! The incremental layer: the view and its anchor kept as the log grows. Codex records what
//! follows a compaction after the replacement history, so a logged message is shown last as
//! it is; a checkpoint lays the view out afresh from the new anchor.

use compactbench_core::{Checkpoint, Cx, Entry, EntryId, Error, Log, Moment, Origin, Plan, Replay, Role, View, ViewMessage};

use crate::layout::{anchor, project, Anchor};
use crate::{compact, trigger, CodexConfig};

/// One run of Codex's compaction.
pub(crate) struct CodexReplay<'s> {
    config: &'s CodexConfig,
    /// The newest window-setting checkpoint when it is ours (`None` before the first).
    anchor: Option<Anchor>,
    view: View,
}

impl<'s> CodexReplay<'s> {
    pub(crate) fn new(config: &'s CodexConfig) -> CodexReplay<'s> {
        CodexReplay { config, anchor: None, view: View::default() }
    }
}

impl Replay for CodexReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        match log.get(id).expect("pushed entries are in the log") {
            // Without an anchor of ours the view is the default projection, where a system
            // message may join the leading ones instead.
            Entry::Message(m) if self.anchor.is_some() || m.role != Role::System => {
                self.view.messages.push(ViewMessage { origin: Origin::Entry(id), message: m.clone() })
            }
            Entry::Message(_) => self.view = project(log, self.anchor.as_ref()),
            Entry::Checkpoint(_) => {
                self.anchor = anchor(log);
                self.view = project(log, self.anchor.as_ref());
            }
        }
    }

    fn view(&mut self, _: &Log) -> &View {
        &self.view
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        Plan::from_decision(log, at, trigger::decide(self.config, &self.view, self.anchor.as_ref(), at, cx.model.window))
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        compact::run(self.config, log, &self.view, self.anchor.as_ref(), plan.at(), cx)
    }
}
