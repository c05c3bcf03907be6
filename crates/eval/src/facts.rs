//! Planted facts: kinds, needles, and the span of requests in which each is needed.

use serde::{Deserialize, Serialize};

/// What a planted fact is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactKind {
    /// An exact error line from a failing tool run.
    ErrorMessage,
    /// A constraint the user stated.
    UserConstraint,
    /// A step the assistant said is still open.
    UnresolvedStep,
    /// A search that found nothing (so it need not be repeated).
    NegativeResult,
    /// A file the assistant modified (the artifact trail).
    FilePath,
    /// A decision with its reason.
    Decision,
    /// A function or flag name defined in code the assistant read.
    Identifier,
    /// A hypothesis the assistant ruled out in its reasoning (thinking), never in its visible
    /// text: what a strategy that drops thinking loses (the seed article's "reasoning
    /// eviction").
    RejectedHypothesis,
    /// A value (a port, a version, a path, a policy) set early and changed later, once or more,
    /// among look-alike values of other settings. Its needle is the current value; the values
    /// it replaced are [`Fact::stale`], each kept honest only beside the statement that
    /// superseded it.
    SupersededValue,
}

impl FactKind {
    /// Every kind, in report order.
    pub const ALL: [FactKind; 9] = [
        FactKind::ErrorMessage,
        FactKind::UserConstraint,
        FactKind::UnresolvedStep,
        FactKind::NegativeResult,
        FactKind::FilePath,
        FactKind::Decision,
        FactKind::Identifier,
        FactKind::RejectedHypothesis,
        FactKind::SupersededValue,
    ];

    /// Snake-case name as in scenario files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FactKind::ErrorMessage => "error_message",
            FactKind::UserConstraint => "user_constraint",
            FactKind::UnresolvedStep => "unresolved_step",
            FactKind::NegativeResult => "negative_result",
            FactKind::FilePath => "file_path",
            FactKind::Decision => "decision",
            FactKind::Identifier => "identifier",
            FactKind::RejectedHypothesis => "rejected_hypothesis",
            FactKind::SupersededValue => "superseded_value",
        }
    }
}

/// A fact planted in a generated session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Fact {
    /// `f<n>`, unique in the session.
    pub id: String,
    /// Kind.
    pub kind: FactKind,
    /// The exact string whose presence in a request means the fact is there verbatim.
    /// Needles carry a random tag no generated filler contains, so they are unique.
    pub needle: String,
    /// Session step (index into `Session::steps`) holding the needle first.
    pub planted_step: usize,
    /// The fact is needed by every request whose step lies in `needed_from..=needed_until`.
    pub needed_from: usize,
    /// Last step at which it is needed.
    pub needed_until: usize,
    /// The values this fact's needle replaced, oldest first (`superseded_value` facts only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stale: Vec<Stale>,
    /// The user's compaction instruction that names this fact's key, if one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub named_by: Option<NamedBy>,
}

/// Which of the user's compaction instructions names a fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NamedBy {
    /// The standing instruction in project memory.
    Memory,
    /// The text typed after a manual compaction command.
    Manual,
}

impl NamedBy {
    /// Snake-case name, as in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            NamedBy::Memory => "memory",
            NamedBy::Manual => "manual",
        }
    }
}

/// The tagged name a fact's needle is about (`cache_port_q7k2`, `parse_token_q7k2`,
/// `src/net/auth_q7k2.rs`): the word of the needle that ends in its tag (`_`, a letter, a digit,
/// a letter, a digit, then perhaps a file extension), which is what a user names when asking to
/// keep it. `None` for a needle without one (a replayed transcript's).
pub fn key(needle: &str) -> Option<&str> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '/' | '.');
    needle.split(|c: char| !is_word(c)).map(|w| w.trim_end_matches('.')).find(|w| {
        let stem = w.rfind('.').filter(|&dot| w[..dot].contains('_') && !w[dot + 1..].is_empty() && w[dot + 1..].chars().all(|c| c.is_ascii_lowercase())).map_or(*w, |dot| &w[..dot]);
        let b = stem.as_bytes();
        b.len() >= 6
            && b[b.len() - 5] == b'_'
            && b[b.len() - 4].is_ascii_lowercase()
            && b[b.len() - 3].is_ascii_digit()
            && b[b.len() - 2].is_ascii_lowercase()
            && b[b.len() - 1].is_ascii_digit()
    })
}

/// A value a later statement replaced. A request that shows `value` without `superseded_by`
/// presents the old value as if it were current (the probe's `stale` state).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Stale {
    /// The old value as the session asserted it, e.g. ``server_port_q7k2 = `8431` ``.
    pub value: String,
    /// The statement that replaced it, naming both values, e.g.
    /// ``server_port_q7k2 = `9172` (was `8431`)``.
    pub superseded_by: String,
}

impl Fact {
    /// Whether the request made at `step` needs this fact.
    pub fn needed_at(&self, step: usize) -> bool {
        (self.needed_from..=self.needed_until).contains(&step)
    }
}
