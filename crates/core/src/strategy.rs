//! The Strategy seam.

use crate::{default_projection, Checkpoint, Replay, Error, Log, ModelProfile, Summarizer, TextChat, Tokenizer, View, VirtualStore};

/// How faithfully a strategy reproduces its original.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fidelity {
    /// Reimplemented from the original's source; differences are bugs or documented.
    Source,
    /// The original is closed; modelled from documentation and reports. Choices are marked
    /// in the crate docs and shown in reports.
    Modelled,
    /// A plain baseline with no original.
    Baseline,
}

/// What a strategy is, for listings and reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrategyInfo {
    /// Report id, `harness` or `harness/variant` (e.g. `pi`, `openhands/llm-summarizing`).
    pub id: String,
    /// The harness it reproduces (or `baseline`).
    pub harness: String,
    /// Source it follows: `owner/repo@commit` or a package version.
    pub source: String,
    /// One line: trigger and what is kept.
    pub summary: String,
    /// How faithful it is.
    pub fidelity: Fidelity,
}

/// When the runner asks a strategy whether to compact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moment {
    /// A turn just ended (last assistant reply is in the log) and a new user message is about
    /// to be appended. Harnesses that check after the agent loop or before a prompt act here.
    TurnEnd,
    /// A model request is about to be built (also mid-turn, between tool calls).
    BeforeRequest,
    /// The request just built exceeds the model's window: the provider would reject it.
    /// A strategy with an overflow path compacts here and the runner retries once.
    Overflow,
    /// The user typed the harness's manual compaction command (Claude Code's `/compact <text>`,
    /// Pi's `/compact [instructions]`) at the prompt, after a turn ended and before the next
    /// user message; what they typed after it is [`Cx::manual`]. A strategy whose original has
    /// such a command decides to compact here, with no threshold; one without it skips (its
    /// crate docs say so).
    Manual,
}

/// A strategy's answer to "compact now?".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Do nothing.
    Skip,
    /// Compact, for this reason (e.g. `threshold`, `overflow`).
    Compact {
        /// Short reason, shown in reports.
        reason: String,
    },
}

impl Decision {
    /// `Compact` with `reason`.
    pub fn compact(reason: impl Into<String>) -> Decision {
        Decision::Compact { reason: reason.into() }
    }
}

/// What a harness has at hand when it compacts.
pub struct Cx<'a> {
    /// The model profile.
    pub model: &'a ModelProfile,
    /// The summarizer (the model call of the original, injected).
    pub summarizer: &'a dyn Summarizer,
    /// The virtual file store for offloads; persists across compactions of one session.
    pub store: &'a mut VirtualStore,
    /// Exact BPE counts, for strategies whose original decides with a real tokenizer (aider
    /// through litellm); see [`Tokenizer`]. Others use [`crate::estimate`] and ignore it.
    pub tokenizer: &'a dyn Tokenizer,
    /// Consecutive failed compaction attempts since the last successful one in this session.
    /// Failures append nothing to the log, so this is the one piece of in-memory harness
    /// state the runner keeps for strategies (e.g. Claude Code's circuit breaker).
    pub failures: u32,
    /// At [`Moment::Manual`], the text the user typed after the command (`""` for a bare
    /// `/compact`); `None` at every other moment. A strategy passes it to its summary call where
    /// its original puts it, or drops it where the original's command takes no arguments.
    pub manual: Option<&'a str>,
}

impl<'a> Cx<'a> {
    /// A context with no failures so far, at a moment other than [`Moment::Manual`].
    pub fn new(
        model: &'a ModelProfile,
        summarizer: &'a dyn Summarizer,
        store: &'a mut VirtualStore,
        tokenizer: &'a dyn Tokenizer,
    ) -> Cx<'a> {
        Cx { model, summarizer, store, tokenizer, failures: 0, manual: None }
    }
}

/// A compaction strategy.
///
/// Object safe: the registry and runner hold `Box<dyn Strategy>`. A strategy decides with
/// its original's own token estimator ([`crate::estimate`], the injected [`Cx::tokenizer`] in
/// the original's encoding when the original counts with a real BPE, or provider usage carried
/// on assistant messages), never with the runner's exact counts.
pub trait Strategy: Send + Sync {
    /// Identity and provenance.
    fn info(&self) -> &StrategyInfo;

    /// Whether to compact at `at`, given the log and its projection, from scratch. Must not
    /// mutate anything; returning `Skip` is always safe.
    fn decide(&self, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision;

    /// Performs a compaction the strategy just decided on, from scratch, returning the checkpoints to
    /// append in order (several when the original does several steps, e.g. prune then
    /// summarize). An empty list means nothing was done. Errors leave the log unchanged.
    fn compact(&self, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error>;

    /// Starts a run: the strategy's incremental layer over an empty log (see [`Replay`]). It
    /// must show the views, make the decisions and return the checkpoints that `project`,
    /// `decide` and `compact` give on the same log (the law the testkit checks for every
    /// strategy). A strategy whose decisions need only the log and its view returns an
    /// [`crate::Incremental`]; one that keeps more (folded history, running totals) its own.
    fn start(&self) -> Box<dyn Replay + '_>;

    /// The working view of `log`, from scratch. The default follows checkpoint data; a
    /// strategy that overrides it keeps its view its own way in [`Strategy::start`].
    fn project(&self, log: &Log) -> View {
        default_projection(log)
    }

    /// Why requests built from this strategy's views break `rule` (a
    /// [`crate::request::Rule`] name such as `orphan_result`), when they do by design:
    /// whether the original sends the same request, and what the report should read into it.
    /// `None` (the default) means such a violation is unexplained, which the eval reports and
    /// its tests treat as a bug.
    fn explain_violation(&self, rule: &str) -> Option<&str> {
        let _ = rule;
        None
    }

    /// The harness's own chat shape when its model sends no native tool calls (see
    /// [`TextChat`]): the formats a session is replayed in for the original's text view of it.
    /// `None` (the default): the harness sends tool calls, and has no text shape to replay in.
    fn text_chat(&self) -> Option<&dyn TextChat> {
        None
    }
}
