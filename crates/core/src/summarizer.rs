//! The summarizer seam: strategies ask, implementations (offline, bounds, HTTP) answer.

use crate::Error;

/// What a strategy sends to its summarizer, shaped as the original harness shapes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryRequest {
    /// Short name of the call (e.g. `history`, `turn-prefix`), for logs and caches.
    pub purpose: String,
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
