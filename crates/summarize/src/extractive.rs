//! The deterministic extractive summarizer.
//!
//! Rule (documented in README and ARCHITECTURE.md, and the only rule):
//! 1. Split the transcript into paragraphs at blank lines, and paragraphs into lines. A line
//!    longer than [`MAX_LINE_CHARS`] is a record of its own (JSON-lines transcripts put a whole
//!    message on one line, with its newlines escaped as `\n`): it is split at those escapes,
//!    and its first piece counts as a lead like a paragraph's first line.
//! 2. Rank lines: first the leads, newest first; then all other lines, newest first.
//!    (Lead-plus-recency is the classic extractive baseline: the opening of each message says
//!    what it is, and recent detail matters most to the next step.) Each line is trimmed and
//!    cut to [`MAX_LINE_CHARS`] characters; repeated lines are taken once.
//! 3. Take lines in rank order while the summary stays within the budget
//!    `min(max_output_tokens, TARGET_TOKENS)`, counted exactly with the runner's tokenizer.
//!    A line that does not fit is skipped and later, shorter lines are still tried.
//! 4. Emit the taken lines in transcript order, one per line.
//!
//! The instructions are not read: an extractive summarizer cannot follow them. The stop
//! reason is `Length` when lines were left out because of the caller's own cap (not the
//! target), so strategies' "summary hit its output cap" paths still fire.

use compactbench_core::{Error, StopReason, Summarizer, Summary, SummaryRequest};
use compactbench_tokens::TokenCounter;
use rustc_hash::FxHashSet;

/// Longest line kept, in characters.
pub const MAX_LINE_CHARS: usize = 400;
/// Length a model's compaction summary typically has, in tokens; the extractive summary
/// stops there even when the caller allows more.
pub const TARGET_TOKENS: u64 = 2_000;

/// The deterministic extractive summarizer.
pub struct Extractive {
    counter: TokenCounter,
}

impl Extractive {
    /// A summarizer counting with `counter`'s encoding.
    pub fn new(counter: TokenCounter) -> Extractive {
        Extractive { counter }
    }
}

impl Default for Extractive {
    fn default() -> Self {
        Extractive::new(TokenCounter::default())
    }
}

/// `text.split(separator)`, found with `memchr`'s substring search (std's two-way search was a
/// visible share of summarizing): paragraphs at `\n\n`, a JSON record's lines at escaped `\\n`.
fn split<'t>(text: &'t str, separator: &'static str) -> impl Iterator<Item = &'t str> {
    let mut start = 0;
    let mut ends = memchr::memmem::find_iter(text.as_bytes(), separator.as_bytes());
    std::iter::from_fn(move || {
        if start > text.len() {
            return None;
        }
        let end = ends.next().unwrap_or(text.len());
        let piece = &text[start..end];
        start = end + separator.len();
        Some(piece)
    })
}

/// `line` cut to [`MAX_LINE_CHARS`] characters.
pub(crate) fn cut(line: &str) -> &str {
    // Bytes bound characters from above: most lines are settled without walking them.
    if line.len() <= MAX_LINE_CHARS {
        return line;
    }
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((i, _)) => &line[..i],
        None => line,
    }
}

impl Summarizer for Extractive {
    fn name(&self) -> &str {
        "extractive"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let input_tokens = self.counter.count_text_segmented(&request.system) + self.counter.count_text_segmented(&request.user_message());

        // (position in transcript, text), lead lines then the rest, newest first.
        let mut leads = Vec::new();
        let mut rest = Vec::new();
        let mut position = 0usize;
        for paragraph in split(&request.transcript, "\n\n") {
            let mut first = true;
            for line in paragraph.lines().map(str::trim).filter(|l| !l.is_empty()) {
                // Bytes bound characters from above: most lines are settled without counting.
                let record = line.len() > MAX_LINE_CHARS && line.chars().count() > MAX_LINE_CHARS;
                if record {
                    for (i, piece) in split(line, "\\n").map(str::trim).filter(|p| !p.is_empty()).enumerate() {
                        if i == 0 { &mut leads } else { &mut rest }.push((position, cut(piece)));
                        position += 1;
                    }
                } else {
                    // A line short enough needs no cut.
                    if first { &mut leads } else { &mut rest }.push((position, line));
                    position += 1;
                }
                first = false;
            }
        }
        let ranked = leads.iter().rev().chain(rest.iter().rev());

        let budget = request.max_output_tokens.min(TARGET_TOKENS);
        let mut used = 0u64;
        let mut seen = FxHashSet::default();
        let mut taken = Vec::new();
        let mut left_out = false;
        for &(pos, line) in ranked {
            if !seen.insert(line) {
                continue;
            }
            // Every line costs at least 2 (a token and its newline): with less left, this
            // line and every later one is left out, and counting them would change nothing.
            if budget - used < 2 {
                left_out = true;
                break;
            }
            // +1 for the newline joining it to the others.
            let cost = self.counter.count_text_cached(line) + 1;
            if used + cost > budget {
                left_out = true;
                continue;
            }
            used += cost;
            taken.push((pos, line));
        }
        taken.sort_unstable_by_key(|&(pos, _)| pos);
        let text: Vec<&str> = taken.into_iter().map(|(_, l)| l).collect();
        let text = text.join("\n");
        let stop = if left_out && request.max_output_tokens < TARGET_TOKENS { StopReason::Length } else { StopReason::Complete };
        Ok(Summary { output_tokens: self.counter.count_text_segmented(&text), text, input_tokens, stop })
    }
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;

    fn request(transcript: &str, cap: u64) -> SummaryRequest {
        SummaryRequest {
            purpose: "history".into(),
            context: compactbench_core::SummaryContext::Fresh,
            system: "You summarize.".into(),
            transcript: transcript.into(),
            instructions: "Write a summary.".into(),
            max_output_tokens: cap,
        }
    }

    const TRANSCRIPT: &str = "[User]: fix the parser\nit crashes on empty input\n\n[Assistant]: reading src/parser.rs\n\n[Tool result]: fn parse() {}\nfn lex() {}\nfn lex() {}\n\n[Assistant]: done";

    #[test]
    fn keeps_everything_when_it_fits_in_order_without_repeats() {
        let s = Extractive::default().summarize(&request(TRANSCRIPT, 1000)).unwrap();
        expect![[r#"
            [User]: fix the parser
            it crashes on empty input
            [Assistant]: reading src/parser.rs
            [Tool result]: fn parse() {}
            fn lex() {}
            [Assistant]: done"#]]
        .assert_eq(&s.text);
        assert_eq!(s.stop, StopReason::Complete);
        assert!(s.input_tokens > s.output_tokens);
    }

    #[test]
    fn under_a_tight_cap_prefers_leads_newest_first_and_reports_length() {
        let s = Extractive::default().summarize(&request(TRANSCRIPT, 16)).unwrap();
        expect![[r#"
            [Tool result]: fn parse() {}
            [Assistant]: done"#]]
        .assert_eq(&s.text);
        assert!(s.output_tokens <= 16);
        assert_eq!(s.stop, StopReason::Length);
    }

    #[test]
    fn long_json_lines_are_records_split_at_escaped_newlines() {
        let body: String = (0..30).map(|i| format!("line {i} of the output\\n")).collect();
        let transcript = format!("{{\"role\":\"user\",\"content\":\"fix it\"}}\n{{\"role\":\"tool\",\"content\":\"head\\n{body}tail\"}}");
        let s = Extractive::default().summarize(&request(&transcript, 30)).unwrap();
        // Both records' leads come first; then the newest pieces of the long one.
        assert!(s.text.starts_with("{\"role\":\"user\",\"content\":\"fix it\"}\n{\"role\":\"tool\",\"content\":\"head"), "{}", s.text);
        assert!(s.text.contains("tail"), "{}", s.text);
        assert!(!s.text.contains("line 0 of"), "{}", s.text);
    }

    #[test]
    fn splits_as_std_does() {
        for text in ["", "a", "\n\n", "a\n\nb", "a\n\n\nb\n\n", "\n\n\n\n", "é\n\n日本\n"] {
            assert_eq!(split(text, "\n\n").collect::<Vec<_>>(), text.split("\n\n").collect::<Vec<_>>(), "{text:?}");
            let escaped = text.replace('\n', "\\n");
            assert_eq!(split(&escaped, "\\n").collect::<Vec<_>>(), escaped.split("\\n").collect::<Vec<_>>(), "{escaped:?}");
        }
    }

    #[test]
    fn is_deterministic_and_bounded_by_the_target() {
        let long: String = (0..3000).map(|i| format!("[Tool result]: line number {i} of a very long log\n\n")).collect();
        let a = Extractive::default().summarize(&request(&long, 100_000)).unwrap();
        let b = Extractive::default().summarize(&request(&long, 100_000)).unwrap();
        assert_eq!(a, b);
        assert!(a.output_tokens <= TARGET_TOKENS, "{}", a.output_tokens);
        assert_eq!(a.stop, StopReason::Complete, "the target is ours, not the caller's cap");
    }
}
