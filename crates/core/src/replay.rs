//! The incremental side of the Strategy seam: one strategy's state over one run.
//!
//! A [`Strategy`] holds the original's algorithm as functions of the whole log (its
//! `project`, `decide` and `compact`). A run replays a session through it entry by entry, and
//! recomputing from the whole log at every request would make a replay quadratic in its length.
//! So a run asks the strategy to [`Strategy::start`] a [`Replay`]: an ordinary value, owned by
//! the run and dropped with it, that is given each appended log entry once and keeps whatever
//! the strategy needs to answer the next request without walking the session again (the view,
//! folded history, running token totals, event streams).
//!
//! The law every replay keeps (checked for every strategy by the testkit's
//! `assert_replay_matches`): fed a log entry by entry, it shows the view, makes the decisions
//! and appends the checkpoints that the strategy's from-scratch functions give on the same log.

use crate::{Checkpoint, Cx, Decision, Entry, EntryId, Error, Log, Moment, Role, Strategy, View, ViewMessage};
use crate::view::{default_projection, position_of, Origin};
use crate::Window;

/// A compaction a [`Replay`] decided on, at one log state. Only [`Replay::decide`] makes one and
/// only [`Replay::compact`] takes it, so "compact" cannot happen without "decide" at the same
/// state: the order is a type, not a convention.
#[derive(Debug)]
pub struct Plan {
    reason: String,
    at: Moment,
    /// Log length when decided.
    entries: usize,
}

impl Plan {
    /// A plan to compact `log` as it is now, at `at`, for `reason` (e.g. `threshold`).
    pub fn new(log: &Log, at: Moment, reason: impl Into<String>) -> Plan {
        Plan { reason: reason.into(), at, entries: log.len() }
    }

    /// The plan for a from-scratch [`Decision`], if it says compact.
    pub fn from_decision(log: &Log, at: Moment, decision: Decision) -> Option<Plan> {
        match decision {
            Decision::Skip => None,
            Decision::Compact { reason } => Some(Plan::new(log, at, reason)),
        }
    }

    /// Why, as shown in reports.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The moment it was decided at.
    pub fn at(&self) -> Moment {
        self.at
    }

    /// Panics when `log` is no longer the state the plan was made at (an entry was appended
    /// between decide and compact): a plan stands for what decide saw, which would then be
    /// stale. That is a bug in the caller, not an outcome to report.
    #[track_caller]
    pub fn check(&self, log: &Log) {
        assert_eq!(log.len(), self.entries, "a plan made at {} log entries was used at {}", self.entries, log.len());
    }
}

/// One strategy's state over one run (see the module docs). Object safe; the runner holds a
/// `Box<dyn Replay>` from [`Strategy::start`].
pub trait Replay: Send {
    /// Takes in entry `id`, which `log` just appended (messages and checkpoints alike). Called
    /// once per entry, in order, from the first.
    fn push(&mut self, log: &Log, id: EntryId);

    /// The working view of `log` as pushed so far: what the next request is built from.
    fn view(&mut self, log: &Log) -> &View;

    /// Whether to compact at `at`. Must not change what the view shows.
    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan>;

    /// Performs `plan` (returned by `decide` at this log state), returning the checkpoints to
    /// append in order; the caller appends and pushes them. An empty list means nothing was
    /// done; errors leave the log unchanged.
    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error>;
}

/// The view a strategy shows, kept up to date entry by entry: the part of an incremental layer
/// that differs between strategies whose decisions are cheap functions of the log and view.
/// [`Incremental`] pairs one with the strategy's from-scratch `decide` and `compact`.
pub trait ViewState: Send {
    /// Takes in entry `id`, which `log` just appended.
    fn push(&mut self, log: &Log, id: EntryId);
    /// The view of `log` as pushed so far.
    fn view(&mut self, log: &Log) -> &View;
}

/// [`default_projection`], kept entry by entry: a message is shown last as it is (unless it is
/// a system message that would join the leading ones ahead of a summary), and a checkpoint that
/// keeps the window ([`Window::Inherit`]) swaps its replacements into the messages they
/// replace; anything else (a new window) projects afresh at the next [`ViewState::view`].
///
/// Why: a strategy that masks one old tool output per turn over a view that is never cut
/// (observation masking, tool-result clearing) would otherwise rebuild the whole session at
/// every request.
#[derive(Debug, Default)]
pub struct DefaultView {
    view: View,
    /// Whether `view` needs projecting afresh.
    stale: bool,
    /// Whether a checkpoint set a window: a system message with only system messages before it
    /// then goes ahead of the summary, not last.
    windowed: bool,
    /// Whether a non-system message was pushed: later system messages are ordinary ones.
    conversed: bool,
}

impl DefaultView {
    /// The default view of an empty log.
    pub fn new() -> DefaultView {
        DefaultView::default()
    }

    /// Whether the next [`ViewState::view`] projects afresh.
    #[cfg(test)]
    pub(crate) fn is_stale(&self) -> bool {
        self.stale
    }
}

impl ViewState for DefaultView {
    fn push(&mut self, log: &Log, id: EntryId) {
        let entry = log.get(id).expect("pushed entries are in the log");
        match entry {
            Entry::Message(m) => self.conversed |= m.role != Role::System,
            Entry::Checkpoint(cp) => self.windowed |= cp.window != Window::Inherit,
        }
        if self.stale {
            return;
        }
        match entry {
            Entry::Message(m) if m.role != Role::System || self.conversed || !self.windowed => {
                self.view.messages.push(ViewMessage { origin: Origin::Entry(id), message: m.clone() })
            }
            Entry::Checkpoint(cp) if cp.window == Window::Inherit && cp.replacements.iter().all(|r| r.entry < id) => {
                for r in &cp.replacements {
                    if let Some(at) = position_of(&self.view, r.entry) {
                        self.view.messages[at] = ViewMessage { origin: Origin::Replaced(r.entry, id), message: r.message.clone() };
                    }
                }
            }
            Entry::Message(_) | Entry::Checkpoint(_) => self.stale = true,
        }
    }

    fn view(&mut self, log: &Log) -> &View {
        if self.stale {
            self.view = default_projection(log);
            self.stale = false;
        }
        &self.view
    }
}

/// A strategy's own [`Strategy::project`], kept entry by entry: a message is shown last as it
/// is (unless it is a system message before any other, which may join the leading ones), and
/// anything else projects afresh at the next [`ViewState::view`].
///
/// Why: a strategy whose view is what its newest checkpoint laid out, then every message
/// logged after it, would otherwise lay the view out again at every request.
pub struct Reprojected<'s> {
    strategy: &'s dyn Strategy,
    view: View,
    /// Whether `view` needs projecting afresh.
    stale: bool,
    /// Whether a non-system message was pushed: later system messages are ordinary ones.
    conversed: bool,
}

impl<'s> Reprojected<'s> {
    /// The view of `strategy` over an empty log.
    pub fn new(strategy: &'s dyn Strategy) -> Reprojected<'s> {
        Reprojected { strategy, view: View::default(), stale: false, conversed: false }
    }
}

impl ViewState for Reprojected<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        match log.get(id).expect("pushed entries are in the log") {
            Entry::Message(m) if !self.stale && (m.role != Role::System || self.conversed) => {
                self.conversed = true;
                self.view.messages.push(ViewMessage { origin: Origin::Entry(id), message: m.clone() });
            }
            Entry::Message(m) => {
                self.conversed |= m.role != Role::System;
                self.stale = true;
            }
            Entry::Checkpoint(_) => self.stale = true,
        }
    }

    fn view(&mut self, log: &Log) -> &View {
        if self.stale {
            self.view = self.strategy.project(log);
            self.stale = false;
        }
        &self.view
    }
}

/// The incremental layer of a strategy whose decisions are its from-scratch `decide` and
/// `compact` given the log and the view: only the view is kept, by `V`.
pub struct Incremental<'s, V> {
    strategy: &'s dyn Strategy,
    view: V,
}

impl<'s, V: ViewState> Incremental<'s, V> {
    /// `strategy` over an empty log, its view kept by `view`.
    pub fn new(strategy: &'s dyn Strategy, view: V) -> Incremental<'s, V> {
        Incremental { strategy, view }
    }
}

impl<'s> Incremental<'s, DefaultView> {
    /// `strategy`, whose view is the [`default_projection`].
    pub fn default_view(strategy: &'s dyn Strategy) -> Incremental<'s, DefaultView> {
        Incremental::new(strategy, DefaultView::new())
    }
}

impl<'s> Incremental<'s, Reprojected<'s>> {
    /// `strategy`, whose view is its own [`Strategy::project`], kept by [`Reprojected`].
    pub fn reprojected(strategy: &'s dyn Strategy) -> Incremental<'s, Reprojected<'s>> {
        Incremental::new(strategy, Reprojected::new(strategy))
    }
}

impl<V: ViewState> Replay for Incremental<'_, V> {
    fn push(&mut self, log: &Log, id: EntryId) {
        self.view.push(log, id);
    }

    fn view(&mut self, log: &Log) -> &View {
        self.view.view(log)
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        let decision = self.strategy.decide(log, self.view.view(log), at, cx);
        Plan::from_decision(log, at, decision)
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        self.strategy.compact(log, self.view.view(log), plan.at(), cx)
    }
}
