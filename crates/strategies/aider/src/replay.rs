//! The incremental layer: Aider's lists over one run, kept as the log grows, deciding and
//! compacting with the same functions as the from-scratch layer (`session`).

use compactbench_core::{Checkpoint, Cx, Entry, EntryId, Error, Log, Moment, Origin, Plan, Replay, View, ViewMessage};

use crate::session::{self, Exchanges};
use crate::AiderConfig;

/// The view (leading system messages, done, cur) and the exchanges since the newest
/// checkpoint, extended by each appended message.
pub(crate) struct AiderReplay<'s> {
    config: &'s AiderConfig,
    view: View,
    exchanges: Exchanges,
    /// Each history message's size (`token_count(msg)`) counted so far, in order: the history
    /// only grows between checkpoints, so each is counted once.
    sizes: Vec<u64>,
    /// A checkpoint lays the done list out anew: the view and the exchanges are rebuilt from
    /// the log at their next use.
    stale: bool,
}

impl<'s> AiderReplay<'s> {
    /// Over an empty log.
    pub(crate) fn new(config: &'s AiderConfig) -> AiderReplay<'s> {
        AiderReplay { config, view: View::default(), exchanges: Exchanges::new(0), sizes: Vec::new(), stale: false }
    }
}

impl Replay for AiderReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        match log.get(id).expect("pushed entries are in the log") {
            Entry::Checkpoint(_) => self.stale = true,
            Entry::Message(_) if self.stale => {}
            // After the newest checkpoint every message shows last, as it is.
            Entry::Message(m) => {
                let vm = ViewMessage { origin: Origin::Entry(id), message: m.clone() };
                if session::leading(&self.view) < self.view.messages.len() || !session::is_leading(&vm) {
                    self.exchanges.push(&vm);
                }
                self.view.messages.push(vm);
            }
        }
    }

    fn view(&mut self, log: &Log) -> &View {
        if std::mem::take(&mut self.stale) {
            self.view = session::project(log);
            self.exchanges = session::exchanges(log, &self.view);
            self.sizes.clear();
        }
        &self.view
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        self.view(log);
        let (history, sizes) = (&self.view.messages[session::leading(&self.view)..], &mut self.sizes);
        let done = self.exchanges.done();
        let decision = session::summarize_start(self.config, log, at, self.exchanges.moved(), cx, |counter| {
            sizes.extend(history[sizes.len()..done.max(sizes.len())].iter().map(|vm| session::size(counter, vm)));
            sizes[..done].iter().sum()
        });
        Plan::from_decision(log, at, decision)
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        session::compact(self.config, log, self.view(log), cx)
    }
}
