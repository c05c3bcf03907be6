//! `SimpleCompaction.prepare`: where the kept tail starts and the summarizer's input message.

use compactbench_core::{Message, Role};

use crate::history::text_parts;
use crate::prompt;

/// What `prepare` found when a summarizer call is needed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Prepared {
    /// Index in the history of the first kept message (`to_preserve = history[cut..]`).
    pub(crate) cut: usize,
    /// The text parts of `compact_message`, in order: per summarized message a header and its
    /// text parts; last, a newline, the compaction prompt and any custom instruction.
    pub(crate) parts: Vec<String>,
}

impl Prepared {
    /// The final part (newline, prompt, custom instruction).
    pub(crate) fn prompt_part(&self) -> &str {
        self.parts.last().map_or("", String::as_str)
    }

    /// Every part but the last, joined without separators, as the original's part list reads
    /// when sent as one string.
    pub(crate) fn transcript(&self) -> String {
        self.parts[..self.parts.len() - 1].concat()
    }
}

/// `prepare(messages, custom_instruction)` with `max_preserved_messages = n`. `None` means no
/// summarizer call: an empty history, `n == 0`, fewer than `n` user/assistant messages, or
/// nothing before the cut. Otherwise the cut is the `n`-th user or assistant message from the
/// end; tool (and system) messages are not counted but stay on their side of it.
pub(crate) fn prepare(history: &[&Message], n: usize, custom_instruction: &str) -> Option<Prepared> {
    if history.is_empty() || n == 0 {
        return None;
    }
    let cut = history
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| matches!(m.role, Role::User | Role::Assistant))
        .nth(n - 1)
        .map(|(i, _)| i)?;
    if cut == 0 {
        return None;
    }
    let mut parts = Vec::new();
    for (i, message) in history[..cut].iter().enumerate() {
        parts.push(format!("## Message {}\nRole: {}\nContent:\n", i + 1, message.role.as_str()));
        parts.extend(text_parts(message).into_iter().map(|t| t.into_owned()));
    }
    let mut last = format!("\n{}", prompt::COMPACT);
    if !custom_instruction.is_empty() {
        last.push_str(&prompt::custom_instruction(custom_instruction));
    }
    parts.push(last);
    Some(Prepared { cut, parts })
}
