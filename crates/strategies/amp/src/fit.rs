//! Fitting a thread into one summarizer request: the oldest messages leave the request (never
//! the thread) until it fits the window.

use compactbench_core::{Message, Role};

use crate::{count, wire};

/// The request's messages as JSON lines, and how many of the thread's oldest were left out.
pub(crate) struct Fitted {
    pub(crate) transcript: String,
    pub(crate) dropped: usize,
}

/// Drops the oldest messages until `system`, the messages, `instructions` and the output
/// `cap` fit `window` by the crate's estimate, then any tool results whose call went with them;
/// the newest message always stays.
pub(crate) fn fit(system: &str, messages: &[Message], instructions: &str, cap: u64, window: u64) -> Fitted {
    let lines: Vec<String> = messages.iter().map(wire::line).collect();
    let sizes: Vec<u64> = lines.iter().map(|l| count::text_tokens(l) + 1).collect();
    let fixed = count::text_tokens(system) + count::text_tokens(instructions) + cap;
    let mut total: u64 = sizes.iter().sum();
    let mut start = 0;
    while start + 1 < lines.len() && fixed + total > window {
        total -= sizes[start];
        start += 1;
    }
    if start > 0 {
        while start + 1 < lines.len() && messages[start].role == Role::Tool {
            start += 1;
        }
    }
    Fitted { transcript: lines[start..].join("\n"), dropped: start }
}
