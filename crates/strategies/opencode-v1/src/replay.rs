//! The incremental layer: the working view kept as the log grows. Messages logged since the
//! view was last shown, the first a user or assistant message, add only their own messages to
//! OpenCode's storage (a tool message first would join the stored message before them) and
//! leave `filterCompacted`'s cut where it was (only a summary moves it), so the view grows by
//! their lowering; a checkpoint, or messages that start otherwise, lower the view afresh.

use compactbench_core::{Checkpoint, Cx, Entry, EntryId, Error, Log, Moment, Plan, Replay, Role, Strategy, View};

use crate::session::Session;
use crate::OpencodeV1Strategy;

/// One run of OpenCode V1's compaction.
pub(crate) struct OpencodeReplay<'s> {
    strategy: &'s OpencodeV1Strategy,
    view: View,
    /// Log entries the view was lowered from.
    shown: usize,
    /// Whether an entry pushed since needs the view lowered afresh.
    stale: bool,
}

impl<'s> OpencodeReplay<'s> {
    pub(crate) fn new(strategy: &'s OpencodeV1Strategy) -> OpencodeReplay<'s> {
        OpencodeReplay { strategy, view: View::default(), shown: 0, stale: false }
    }
}

impl Replay for OpencodeReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        self.stale |= match log.get(id).expect("pushed entries are in the log") {
            Entry::Message(m) => id.index() == self.shown && !matches!(m.role, Role::User | Role::Assistant),
            Entry::Checkpoint(_) => true,
        };
    }

    fn view(&mut self, log: &Log) -> &View {
        if self.stale {
            self.view = Session::new(log).view();
            self.stale = false;
        } else if self.shown < log.len() {
            let appended = Session::appended(log, self.shown);
            for msg in &appended.msgs {
                appended.lower(msg, &mut self.view.messages);
            }
        }
        self.shown = log.len();
        &self.view
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        let strategy = self.strategy;
        Plan::from_decision(log, at, strategy.decide(log, self.view(log), at, cx))
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        let strategy = self.strategy;
        strategy.compact(log, self.view(log), plan.at(), cx)
    }
}
