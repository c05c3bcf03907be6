//! The one error type of the workspace's strategy and summarizer seams.

use std::fmt;

/// What went wrong, coarsely, so the runner can count failures by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The summarizer did not answer in time.
    Timeout,
    /// The summarizer's transport or server failed.
    Transport,
    /// The request is larger than the model's context window: the provider rejected it
    /// ("prompt is too long", `context_length_exceeded`) without answering. Sending it again
    /// cannot help; sending less can.
    ContextOverflow,
    /// The summarizer answered with nothing usable (empty, garbage).
    EmptySummary,
    /// The summary was rejected (too long, cut off) by the strategy's own rule.
    Rejected,
    /// There was nothing to compact (degenerate input); not a bug.
    NothingToCompact,
    /// Anything else.
    Other,
}

/// An error from a strategy or summarizer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// Coarse kind.
    pub kind: ErrorKind,
    /// Human-readable detail, as the original harness would report it where known.
    pub message: String,
}

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl std::error::Error for Error {}
