//! What a run keeps of the session as entries arrive ([`Session`], also built whole from a log
//! by the from-scratch [`Strategy`](compactbench_core::Strategy) methods), and the run's
//! [`Replay`]: the default view plus a [`Session`].

use compactbench_core::{Checkpoint, Cx, Decision, DefaultView, Entry, EntryId, Error, Log, Moment, Plan, Replay, View, ViewState};

use crate::api::{self, Edits, Estimates};
use crate::client;
use crate::wire::TranscriptFile;
use crate::{ClaudeCodeConfig, ClaudeCodeStrategy, Mode};

/// What each mode keeps of the session.
pub(crate) enum Session {
    /// The transcript file, which Claude Code appends to as the session goes and every
    /// compaction writes whole.
    Client { transcript: TranscriptFile },
    /// Each log message's estimate (the server estimates the whole prompt at every request),
    /// and the edits `decide` found at this log state, for `compact` to apply.
    Api { estimates: Estimates, edits: Option<Edits> },
}

impl Session {
    /// The session of `mode` after every entry of `log`.
    pub(crate) fn of(mode: Mode, log: &Log) -> Session {
        let mut session = match mode {
            Mode::Client => Session::Client { transcript: TranscriptFile::default() },
            Mode::Api => Session::Api { estimates: Estimates::default(), edits: None },
        };
        for (_, entry) in log.entries() {
            session.push(entry);
        }
        session
    }

    fn push(&mut self, entry: &Entry) {
        match self {
            Session::Client { transcript } => transcript.push(entry),
            Session::Api { estimates, edits } => {
                estimates.push(entry);
                *edits = None;
            }
        }
    }

    pub(crate) fn decide(&mut self, config: &ClaudeCodeConfig, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        match self {
            Session::Client { .. } => client::decide(config, log, view, at, cx),
            Session::Api { estimates, edits } => {
                *edits = api::decide(config, log, view, at, estimates);
                edits.as_ref().and_then(Edits::reason).map_or(Decision::Skip, Decision::compact)
            }
        }
    }

    pub(crate) fn compact(&mut self, config: &ClaudeCodeConfig, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        match self {
            Session::Client { transcript } => client::compact(config, log, view, at, transcript, cx),
            Session::Api { estimates, edits } => {
                // Found by the decide at this log state, unless there was none (a direct call)
                // or a later one at another moment found nothing to do.
                let edits = edits.take().unwrap_or_else(|| api::edits(config, log, view, estimates));
                api::compact(config, view, &edits, cx)
            }
        }
    }
}

pub(crate) struct ClaudeCodeReplay<'s> {
    config: &'s ClaudeCodeConfig,
    /// The working view (both modes show the default projection).
    view: DefaultView,
    session: Session,
}

impl<'s> ClaudeCodeReplay<'s> {
    pub(crate) fn new(strategy: &'s ClaudeCodeStrategy) -> ClaudeCodeReplay<'s> {
        ClaudeCodeReplay { config: &strategy.config, view: DefaultView::new(), session: Session::of(strategy.mode, &Log::default()) }
    }
}

impl Replay for ClaudeCodeReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        self.view.push(log, id);
        self.session.push(log.get(id).expect("pushed entries are in the log"));
    }

    fn view(&mut self, log: &Log) -> &View {
        self.view.view(log)
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        let decision = self.session.decide(self.config, log, self.view.view(log), at, cx);
        Plan::from_decision(log, at, decision)
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        self.session.compact(self.config, log, self.view.view(log), plan.at(), cx)
    }
}
