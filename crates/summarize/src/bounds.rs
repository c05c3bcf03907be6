//! Bounds: summarizers that keep nothing, or everything that matters.
//!
//! Run beside the extractive summarizer, they show how much of a strategy's retention comes
//! from structure (what it keeps, offloads, re-injects) and how much from summary quality.

use compactbench_core::{Error, StopReason, Summarizer, Summary, SummaryRequest};
use compactbench_tokens::TokenCounter;

/// The lower bound: every summary is empty, so nothing survives through a summary.
pub struct Null;

impl Summarizer for Null {
    fn name(&self) -> &str {
        "null"
    }

    fn summarize(&self, _: &SummaryRequest) -> Result<Summary, Error> {
        Ok(Summary { text: String::new(), input_tokens: 0, output_tokens: 0, stop: StopReason::Complete })
    }
}

/// The upper bound: the summary is every planted needle found in the request (system,
/// transcript or instructions), one per line in order of first appearance, as many as fit
/// `max_output_tokens` (exact count). It knows the needles, so it is only a bound.
pub struct Oracle {
    needles: Vec<String>,
    counter: TokenCounter,
}

impl Oracle {
    /// An oracle for a session whose planted needles are `needles`.
    pub fn new(needles: Vec<String>, counter: TokenCounter) -> Oracle {
        Oracle { needles, counter }
    }
}

impl Summarizer for Oracle {
    fn name(&self) -> &str {
        "oracle"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let input = format!("{}\n{}", request.system, request.user_message());
        let mut found: Vec<(usize, &str)> = self.needles.iter().filter_map(|n| input.find(n.as_str()).map(|at| (at, n.as_str()))).collect();
        found.sort_unstable();
        let mut used = 0;
        let mut kept = Vec::new();
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
        let text = kept.join("\n");
        Ok(Summary { output_tokens: self.counter.count_text_segmented(&text), input_tokens: self.counter.count_text_segmented(&input), text, stop })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(transcript: &str, cap: u64) -> SummaryRequest {
        SummaryRequest { purpose: "history".into(), system: String::new(), transcript: transcript.into(), instructions: "Summarize.".into(), max_output_tokens: cap }
    }

    #[test]
    fn null_keeps_nothing() {
        let s = Null.summarize(&request("error E42 happened", 100)).unwrap();
        assert_eq!(s.text, "");
    }

    #[test]
    fn oracle_keeps_present_needles_in_order_within_the_cap() {
        let oracle = Oracle::new(vec!["beta q1".into(), "alpha z9".into(), "absent x0".into()], TokenCounter::default());
        let s = oracle.summarize(&request("... alpha z9 ... beta q1 ...", 100)).unwrap();
        assert_eq!(s.text, "alpha z9\nbeta q1");
        assert_eq!(s.stop, StopReason::Complete);
        let tight = oracle.summarize(&request("... alpha z9 ... beta q1 ...", 5)).unwrap();
        assert_eq!(tight.text, "alpha z9");
        assert_eq!(tight.stop, StopReason::Length);
    }
}
