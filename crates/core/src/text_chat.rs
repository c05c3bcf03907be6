//! A harness's own chat shape, for harnesses whose model sends no native tool calls.
//!
//! Some originals (Aider) give their model no tools: it writes its edits and the commands it
//! wants run as plain text, and the harness adds what happened to the chat as user messages.
//! A strategy crate reproducing such a harness declares those formats through
//! [`Strategy::text_chat`](crate::Strategy::text_chat), so that a runner can replay a session
//! recorded with tool calls in the shape the original really sends, without knowing the
//! harness. Which call is an edit and which command a call stands for is the runner's to
//! decide; how each is written is the harness's.

/// One edit written as text: replace `original` by `updated` in `path` (an empty `original`
/// creates the file, or appends to it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextEdit {
    /// The file, as the edit names it.
    pub path: String,
    /// The lines to find.
    pub original: String,
    /// The lines to put in their place.
    pub updated: String,
}

/// How a harness's model writes tool calls as assistant text, and how the harness writes their
/// results as user messages, in the harness's own formats. Object safe.
pub trait TextChat: Send + Sync {
    /// The text of one call's `edits`, as the model writes them in its reply.
    fn edits(&self, edits: &[TextEdit]) -> String;

    /// A shell command the model suggests running, as it writes it in its reply.
    fn command(&self, line: &str) -> String;

    /// The user message with the `output` of `command`.
    fn command_output(&self, command: &str, output: &str) -> String;

    /// The user message after a reply's edits were applied; `output` is what the edit reported.
    fn edits_applied(&self, output: &str) -> String;

    /// The user message after `edits` failed to apply; `error` is what the tool reported.
    fn edits_failed(&self, edits: &[TextEdit], error: &str) -> String;

    /// The files the harness reads `reply` as editing, as it parses a reply; `None` when it
    /// reads the reply as malformed (and applies nothing). What [`TextChat::edits`] writes reads
    /// back here as its edits' paths.
    fn edited_files(&self, reply: &str) -> Option<Vec<String>>;
}
