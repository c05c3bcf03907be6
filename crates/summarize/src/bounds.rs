//! Bounds: summarizers that keep nothing, or everything that matters.
//!
//! Run beside the extractive summarizer, they show how much of a strategy's retention comes
//! from structure (what it keeps, offloads, re-injects) and how much from summary quality.

use compactbench_core::{Error, StopReason, Summarizer, Summary, SummaryRequest};
use compactbench_tokens::TokenCounter;
use memchr::memmem::Finder;

/// The lower bound: the run's own summarizer writes the summary, then every planted needle in
/// it is overwritten with filler of the same length, so no fact passes through a summary.
///
/// Why not an empty (or fixed) summary: strategies decide when to compact again from the
/// size of what they kept, summary included, and several reject empty summaries as their
/// originals do. A summary of another size changes how often a strategy compacts, and the
/// "bound" then measures that cadence instead of what structure alone keeps. The same
/// summary with its facts knocked out keeps the size (in characters and bytes; exact token
/// counts may move by a few tokens where a needle was) and the cadence, and the report flags
/// any row whose compaction count still differs from the primary run's.
pub struct Null {
    inner: Box<dyn Summarizer>,
    needles: Vec<String>,
}

impl Null {
    /// A null bound over `inner` (the run's primary summarizer) for a session whose planted
    /// needles are `needles`.
    pub fn new(inner: Box<dyn Summarizer>, needles: Vec<String>) -> Null {
        Null { inner, needles }
    }
}

/// Filler for a knocked-out needle: plain lowercase letters, as long as the needle in
/// characters and in bytes when the needle is ASCII (needles are).
fn filler(needle: &str) -> String {
    "redacted".chars().cycle().take(needle.chars().count()).collect()
}

impl Summarizer for Null {
    fn name(&self) -> &str {
        "null"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let mut summary = self.inner.summarize(request)?;
        for needle in &self.needles {
            if summary.text.contains(needle.as_str()) {
                summary.text = summary.text.replace(needle.as_str(), &filler(needle));
            }
        }
        Ok(summary)
    }
}

/// The upper bound: every planted needle found in the request (system, transcript or
/// instructions), one per line in order of first appearance, as many as fit
/// `max_output_tokens` (exact count); then the run's own summary, line by line, while the
/// whole stays within the size of that summary (or the cap, if larger). It knows the needles,
/// so it is only a bound.
///
/// Why the fill: a summary of needles alone is a few dozen tokens (and empty where a span has
/// none, which providers reject as empty content), so the strategy would compact at another
/// cadence and the bound would measure that. Filled to the run's own summary size, it keeps
/// (nearly) the same cadence as the run it bounds.
pub struct Oracle {
    inner: Box<dyn Summarizer>,
    needles: Vec<String>,
    /// A searcher for each needle, built once: every call searches the whole request, and
    /// std's two-way search there was most of the oracle's own time.
    finders: Vec<Finder<'static>>,
    counter: TokenCounter,
}

impl Oracle {
    /// An oracle over `inner` (the run's primary summarizer) for a session whose planted
    /// needles are `needles`.
    pub fn new(inner: Box<dyn Summarizer>, needles: Vec<String>, counter: TokenCounter) -> Oracle {
        let finders = needles.iter().map(|n| Finder::new(n.as_bytes()).into_owned()).collect();
        Oracle { inner, needles, finders, counter }
    }
}

impl Summarizer for Oracle {
    fn name(&self) -> &str {
        "oracle"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let own = self.inner.summarize(request)?;
        let input = format!("{}\n{}", request.system, request.user_message());
        let mut found: Vec<(usize, &str)> =
            self.needles.iter().zip(&self.finders).filter_map(|(n, f)| f.find(input.as_bytes()).map(|at| (at, n.as_str()))).collect();
        found.sort_unstable();
        let mut used = 0;
        let mut kept: Vec<&str> = Vec::new();
        let mut stop = StopReason::Complete;
        for (_, needle) in found {
            let cost = self.counter.count_text_cached(needle) + 1;
            if used + cost > request.max_output_tokens {
                stop = StopReason::Length;
                continue;
            }
            used += cost;
            kept.push(needle);
        }
        // The own summary's size, measured as lines are weighed here (tokens plus one per line).
        let line_cost = |line: &str| self.counter.count_text_cached(line) + 1;
        let size = own.text.lines().map(line_cost).sum::<u64>().min(request.max_output_tokens).max(used);
        let mut taken: std::collections::HashSet<&str> = kept.iter().copied().collect();
        for line in own.text.lines() {
            let cost = line_cost(line);
            // Skip what does not fit; later, shorter lines may still (as the extractive does).
            if used + cost > size || taken.contains(line) {
                continue;
            }
            used += cost;
            taken.insert(line);
            kept.push(line);
        }
        let text = kept.join("\n");
        Ok(Summary { output_tokens: self.counter.count_text_segmented(&text), input_tokens: own.input_tokens, text, stop })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(transcript: &str, cap: u64) -> SummaryRequest {
        SummaryRequest { purpose: "history".into(), context: compactbench_core::SummaryContext::Fresh, system: String::new(), transcript: transcript.into(), instructions: "Summarize.".into(), max_output_tokens: cap }
    }

    #[test]
    fn null_knocks_the_needles_out_of_the_inner_summary_and_keeps_its_size() {
        let inner = crate::Extractive::default();
        let transcript = "[Tool result]: error E42q7 happened\n\n[User]: keep the API stable k9z1";
        let full = inner.summarize(&request(transcript, 100)).unwrap();
        let null = Null::new(Box::new(crate::Extractive::default()), vec!["E42q7".into(), "k9z1".into(), "absent".into()]);
        let s = null.summarize(&request(transcript, 100)).unwrap();
        assert!(!s.text.contains("E42q7") && !s.text.contains("k9z1"), "{}", s.text);
        assert_eq!(s.text.len(), full.text.len());
        assert_eq!(s.text.chars().count(), full.text.chars().count());
        assert_eq!(s.text.replace("redac", "E42q7").replace("reda", "k9z1"), full.text, "only the needles changed");
        assert_eq!((s.input_tokens, s.stop), (full.input_tokens, full.stop));
    }

    #[test]
    fn oracle_keeps_present_needles_in_order_within_the_cap_then_fills_with_the_own_summary() {
        let oracle = Oracle::new(Box::new(crate::Extractive::default()), vec!["beta q1".into(), "alpha z9".into(), "absent x0".into()], TokenCounter::default());
        let transcript = "... alpha z9 ... beta q1 ...\n\nsecond paragraph";
        let s = oracle.summarize(&request(transcript, 100)).unwrap();
        assert!(s.text.starts_with("alpha z9\nbeta q1\n"), "{}", s.text);
        assert!(s.text.contains("second paragraph"), "filled with the own summary: {}", s.text);
        assert_eq!(s.stop, StopReason::Complete);
        let tight = oracle.summarize(&request(transcript, 5)).unwrap();
        assert_eq!(tight.text, "alpha z9");
        assert_eq!(tight.stop, StopReason::Length);
        let none = oracle.summarize(&request("nothing planted here", 100)).unwrap();
        assert_eq!(none.text, "nothing planted here", "never empty where the own summary is not");
    }
}
