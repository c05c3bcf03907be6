//! The summarizer seam: strategies ask, implementations (offline, bounds, HTTP) answer.

use crate::Error;

/// How the harness sends a summary call, which decides what of it a provider's prompt cache
/// already holds. The text a summarizer reads is the same whichever it is (so it is no part of
/// a cached answer's key); the eval prices the call by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SummaryContext {
    /// The conversation as the call's own prefix: the same system prompt and messages as the
    /// main request before it, the summary instruction appended as a final user turn (Claude
    /// Code, Codex local compaction). The provider's cache holds that prefix.
    Prefix,
    /// The conversation's own prefix, as [`SummaryContext::Prefix`], with the view's `newest`
    /// trailing messages left out to make it fit (Codex's remote compaction drops trailing tool
    /// outputs with their calls). It holds a prefix of what the main request sent, so the
    /// provider counts those messages and its cache serves them as far as they go: the
    /// harness's own rendering of the call (`transcript`) is not what the provider counts.
    TrimmedPrefix {
        /// View messages left out at the end.
        newest: usize,
    },
    /// A fresh prompt: its own system prompt (or none) and the history serialized into one user
    /// message (Pi, OpenCode). Nothing of the conversation's cached prefix is reused; at most
    /// the fixed start it shares with the run's previous summary call.
    Fresh,
    /// A forked or handoff thread that starts from the conversation as it stands (a handoff
    /// draft, a side question): its first request replays the parent's messages, so it reuses
    /// the parent's cached prefix as [`SummaryContext::Prefix`] does, and its answer seeds a new
    /// thread.
    Fork,
}

impl SummaryContext {
    /// Snake-case name (`prefix`, `fresh`, `fork`).
    pub fn as_str(self) -> &'static str {
        match self {
            SummaryContext::Prefix | SummaryContext::TrimmedPrefix { .. } => "prefix",
            SummaryContext::Fresh => "fresh",
            SummaryContext::Fork => "fork",
        }
    }

    /// Whether the call replays the conversation's own prefix (`Prefix`, `TrimmedPrefix` and
    /// `Fork`).
    pub fn reuses_prefix(self) -> bool {
        matches!(self, SummaryContext::Prefix | SummaryContext::TrimmedPrefix { .. } | SummaryContext::Fork)
    }
}

/// What a strategy sends to its summarizer, shaped as the original harness shapes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryRequest {
    /// Short name of the call (e.g. `history`, `turn-prefix`), for logs and caches.
    pub purpose: String,
    /// How the harness sends it: as the conversation's own prefix, as a fresh prompt, or in a
    /// forked thread. Each strategy sets it from its original (the reason cited beside it).
    pub context: SummaryContext,
    /// The system prompt of the summarization call.
    pub system: String,
    /// The material to summarize, serialized as the harness serializes it (conversation,
    /// previous summary, delimiters).
    pub transcript: String,
    /// The harness's instructions (paraphrased from its spec), sent after the transcript.
    pub instructions: String,
    /// Output cap the harness sets for this call.
    pub max_output_tokens: u64,
}

impl SummaryRequest {
    /// The single user message a chat model receives: transcript, blank line, instructions.
    pub fn user_message(&self) -> String {
        if self.instructions.is_empty() {
            return self.transcript.clone();
        }
        format!("{}\n\n{}", self.transcript, self.instructions)
    }
}

/// Why the summarizer stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// It finished.
    Complete,
    /// It hit `max_output_tokens`.
    Length,
}

/// A summarizer's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Summary text.
    pub text: String,
    /// Input tokens of the call.
    pub input_tokens: u64,
    /// Output tokens of the call.
    pub output_tokens: u64,
    /// Why it stopped.
    pub stop: StopReason,
}

/// Produces summaries. Implementations must be deterministic for a given request when they
/// claim to be (the default offline one is).
pub trait Summarizer: Send + Sync {
    /// Stable name, shown in reports.
    fn name(&self) -> &str;
    /// Summarizes `request`.
    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error>;
}
