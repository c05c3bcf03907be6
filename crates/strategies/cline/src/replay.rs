//! The incremental layer: one run's view and Cline's task, kept as the log grows.
//!
//! The task (the history Cline stored and its context-management state) takes in each entry
//! once; building it from the whole log at every compaction made a long replay quadratic.
//!
//! The view grows by the messages appended since it was shown when it ends with an assistant
//! message or the first new message is one: every run of tool results before that message is
//! closed, so the repair goes on from it over the new messages alone. Otherwise, and after a
//! checkpoint (it moves the window and the repair's attribution) or a system message (it may
//! join the leading ones), the view is projected afresh.

use compactbench_core::{Checkpoint, Cx, Entry, EntryId, Error, Log, Moment, Origin, Plan, Replay, Role, Strategy, View, ViewMessage, ViewState};

use crate::repair::repair;
use crate::task::Task;
use crate::ClineStrategy;

pub(crate) struct ClineView<'s> {
    strategy: &'s ClineStrategy,
    /// The view of the first `shown` log entries.
    view: View,
    shown: usize,
    /// Whether the view must be projected afresh.
    stale: bool,
    /// The newest checkpoint, to which the repair attributes what it invents.
    checkpoint: Option<EntryId>,
}

impl<'s> ClineView<'s> {
    pub(crate) fn new(strategy: &'s ClineStrategy) -> ClineView<'s> {
        ClineView { strategy, view: View::default(), shown: 0, stale: false, checkpoint: None }
    }
}

impl ViewState for ClineView<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        match log.get(id).expect("pushed entries are in the log") {
            Entry::Message(m) => self.stale |= m.role == Role::System,
            Entry::Checkpoint(_) => {
                self.stale = true;
                self.checkpoint = Some(id);
            }
        }
    }

    fn view(&mut self, log: &Log) -> &View {
        if self.shown == log.len() {
            return &self.view;
        }
        let len = self.view.messages.len();
        let from = match self.view.messages.last() {
            Some(m) if m.message.role == Role::Assistant => Some(len - 1),
            _ => log.message(EntryId(self.shown as u32)).filter(|m| m.role == Role::Assistant).map(|_| len),
        };
        match from.filter(|_| !self.stale) {
            Some(from) => {
                let new = log.entries().skip(self.shown);
                self.view.messages.extend(new.filter_map(|(id, e)| match e {
                    Entry::Message(m) => Some(ViewMessage { origin: Origin::Entry(id), message: m.clone() }),
                    Entry::Checkpoint(_) => None,
                }));
                repair(&mut self.view, self.checkpoint, from);
            }
            None => self.view = self.strategy.project(log),
        }
        self.stale = false;
        self.shown = log.len();
        &self.view
    }
}

/// A run of [`ClineStrategy`]: its view, and the task the from-scratch functions build with
/// `Task::of`.
pub(crate) struct ClineReplay<'s> {
    strategy: &'s ClineStrategy,
    view: ClineView<'s>,
    task: Task,
}

impl<'s> ClineReplay<'s> {
    pub(crate) fn new(strategy: &'s ClineStrategy) -> ClineReplay<'s> {
        ClineReplay { strategy, view: ClineView::new(strategy), task: Task::default() }
    }
}

impl Replay for ClineReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        self.view.push(log, id);
        self.task.push(log, id);
    }

    fn view(&mut self, log: &Log) -> &View {
        self.view.view(log)
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        let task = &self.task;
        Plan::from_decision(log, at, self.strategy.decide_with(log, at, cx, || task.too_few_active()))
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        self.strategy.compact_with(log, &self.task, plan.at(), cx)
    }
}
