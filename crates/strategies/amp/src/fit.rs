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
/// the newest message always stays. Each message's size is its JSON line's estimate plus one
/// for the newline that joins it to the next.
pub(crate) fn fit(system: &str, messages: &[&Message], instructions: &str, cap: u64, window: u64) -> Fitted {
    // Every line is written once into one text, each followed by its newline: the transcript
    // is then a suffix of it (the last newline cut) instead of lines copied into a join.
    let mut text = Vec::new();
    let mut starts = Vec::with_capacity(messages.len() + 1);
    for m in messages {
        starts.push(text.len());
        wire::write_line(&mut text, m);
        text.push(b'\n');
    }
    starts.push(text.len());
    let mut text = String::from_utf8(text).expect("JSON of valid strings is UTF-8");
    // Line `i` without its newline; every start is a line start, so a character boundary.
    let sizes: Vec<u64> = starts.windows(2).map(|w| count::text_tokens(&text[w[0]..w[1] - 1]) + 1).collect();
    let fixed = count::text_tokens(system) + count::text_tokens(instructions) + cap;
    let mut total: u64 = sizes.iter().sum();
    let mut start = 0;
    while start + 1 < messages.len() && fixed + total > window {
        total -= sizes[start];
        start += 1;
    }
    if start > 0 {
        while start + 1 < messages.len() && messages[start].role == Role::Tool {
            start += 1;
        }
    }
    text.pop();
    text.drain(..starts[start].min(text.len()));
    Fitted { transcript: text, dropped: start }
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Message, Part, Role};

    use crate::{count, wire};

    /// The lines-and-join form `fit` must reproduce: each line built on its own, the oldest
    /// dropped while over the window, then leading tool results.
    fn reference(system: &str, messages: &[&Message], instructions: &str, cap: u64, window: u64) -> (String, usize) {
        let lines: Vec<String> = messages
            .iter()
            .map(|m| {
                let mut out = Vec::new();
                wire::write_line(&mut out, m);
                String::from_utf8(out).unwrap()
            })
            .collect();
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
        (lines[start..].join("\n"), start)
    }

    #[test]
    fn fit_matches_the_joined_lines() {
        let tool = |t: &str| {
            Message::new(Role::Tool, vec![Part::ToolResult { call_id: "c".into(), name: "read".into(), text: t.into(), is_error: false }])
        };
        let owned = [
            Message::user("first é😀 \"quoted\"\n"),
            Message::assistant("ok"),
            tool("x".repeat(40).as_str()),
            tool("日本語".repeat(9).as_str()),
            Message::assistant(""),
            Message::user("last"),
        ];
        for n in 0..=owned.len() {
            let messages: Vec<&Message> = owned[..n].iter().collect();
            for window in [0, 10, 20, 30, 40, 50, 60, 80, 1_000] {
                let fitted = super::fit("sys", &messages, "do", 5, window);
                assert_eq!((fitted.transcript, fitted.dropped), reference("sys", &messages, "do", 5, window), "{n} {window}");
            }
        }
    }
}
