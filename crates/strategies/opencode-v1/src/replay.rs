//! The incremental layer: the working view kept as the log grows. Messages logged since the
//! view was last shown, the first a user or assistant message, add only their own messages to
//! OpenCode's storage (a tool message first would join the stored message before them) and
//! leave `filterCompacted`'s cut where it was (only a summary moves it), so the view grows by
//! their lowering; a checkpoint, or messages that start otherwise, lower the view afresh.

use compactbench_core::{Entry, EntryId, Log, Role, View, ViewState};

use crate::session::Session;

/// The working view of one run.
#[derive(Default)]
pub(crate) struct OpencodeView {
    view: View,
    /// Log entries the view was lowered from.
    shown: usize,
    /// Whether an entry pushed since needs the view lowered afresh.
    stale: bool,
}

impl ViewState for OpencodeView {
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
}
