//! The incremental layer: one run's view, outputs waiting for offload and current turn, kept
//! as the log grows.
//!
//! The view is the agent-visible conversation ([`crate::conversation`]) changed entry by entry
//! as each one changes the conversation: a message is appended, a replacement swaps in for the
//! message it replaces, a full compaction hides everything but the system prompt, a tool-pair
//! summary hides its pairs, and both append what they add. The checks read the view; a
//! compaction rebuilds the conversation of the log, as the from-scratch functions do.

use compactbench_core::{Checkpoint, Cx, Entry, EntryId, Error, Log, Message, Moment, Origin, Plan, Replay, Role, View, ViewMessage};

use crate::conversation::{hidden, op, OP_COMPACT, OP_TOOL_PAIRS};
use crate::offload::Waiting;
use crate::{GooseStrategy, Turn};

pub(crate) struct GooseReplay<'s> {
    strategy: &'s GooseStrategy,
    view: View,
    /// The first log message that is not a leading system message: messages before it are
    /// Goose's system prompt, never hidden.
    conversed: Option<EntryId>,
    waiting: Waiting,
    turn: Turn,
}

impl<'s> GooseReplay<'s> {
    pub(crate) fn new(strategy: &'s GooseStrategy) -> GooseReplay<'s> {
        GooseReplay { strategy, view: View::default(), conversed: None, waiting: Waiting::default(), turn: Turn::default() }
    }
}

/// Whether `m` stands for part of the system prompt, the log's messages before `conversed`.
fn is_system(m: &ViewMessage, conversed: Option<EntryId>) -> bool {
    m.origin.entry().is_some_and(|e| conversed.is_none_or(|c| e < c))
}

impl Replay for GooseReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        let entry = log.get(id).expect("pushed entries are in the log");
        self.waiting.push(id, entry);
        self.turn.push(entry);
        let cp = match entry {
            Entry::Message(m) => {
                if self.conversed.is_none() && m.role != Role::System {
                    self.conversed = Some(id);
                }
                self.view.messages.push(ViewMessage { origin: Origin::Entry(id), message: m.clone() });
                return;
            }
            Entry::Checkpoint(cp) => cp,
        };
        for r in &cp.replacements {
            if let Some(shown) = self.view.messages.iter_mut().find(|m| m.origin.entry() == Some(r.entry)) {
                *shown = ViewMessage { origin: Origin::Replaced(r.entry, id), message: r.message.clone() };
            }
        }
        match op(cp) {
            Some(OP_COMPACT) => {
                let conversed = self.conversed;
                self.view.messages.retain(|m| is_system(m, conversed));
                let summary = cp.summary.iter().map(|s| ViewMessage { origin: Origin::Summary(id), message: s.clone() });
                self.view.messages.extend(summary);
            }
            Some(OP_TOOL_PAIRS) => {
                let hidden: Vec<EntryId> = hidden(cp).collect();
                self.view.messages.retain(|m| m.origin.entry().is_none_or(|e| !hidden.contains(&e)));
            }
            _ => return,
        }
        let injected = cp.injected.iter().map(|m| ViewMessage { origin: Origin::Injected(id), message: m.clone() });
        self.view.messages.extend(injected);
    }

    fn view(&mut self, _: &Log) -> &View {
        &self.view
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        let agent: Vec<&Message> = self.view.messages.iter().filter(|m| !is_system(m, self.conversed)).map(|m| &m.message).collect();
        let decision = self.strategy.decide_in(log, &agent, &self.waiting, &self.turn, at, cx.model.window);
        Plan::from_decision(log, at, decision)
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        self.strategy.compact_in(log, &self.waiting, &self.turn, plan.at(), cx)
    }
}
