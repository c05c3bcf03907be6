//! Exploration spans handed to an isolated subagent: the parent sees one `task` call and a
//! bounded report; the child's own requests are counted as child cost.

use compactbench_core::{Message, Summarizer, SummaryContext, SummaryRequest};
use compactbench_tokens::{TokenCounter, PER_REQUEST_OVERHEAD};

use crate::generate::{Session, Step};
use crate::results::ChildCost;

/// Output cap of a subagent's final report, in tokens.
pub const SUBAGENT_REPORT_TOKENS: u64 = 2_000;

/// Runs `steps` (exploration span `n` of `session`) in an isolated child context, adding its
/// requests to `child`, and returns the parent's `task` call and the child's report. The child
/// starts from the system prompt and a task message, makes one request per assistant step and
/// one for its report, and never compacts (spans are short).
pub(super) fn delegate(
    session: &Session,
    steps: &[Step],
    n: usize,
    counter: &TokenCounter,
    summarizer: &dyn Summarizer,
    child_cost: &mut ChildCost,
) -> (Message, Message) {
    let description = format!("Explore the code this step depends on and report what you find (span {n}).");
    let mut child: Vec<&Message> = vec![&session.system];
    let task = Message::user(description.clone());
    child.push(&task);
    let mut previous = 0u64;
    let mut charge = |context: &[&Message], output: u64| {
        let tokens: u64 = context.iter().map(|m| counter.count_message(m)).sum::<u64>() + PER_REQUEST_OVERHEAD;
        child_cost.requests += 1;
        child_cost.input_tokens += tokens;
        child_cost.cached_tokens += previous;
        child_cost.output_tokens += output;
        previous = tokens - PER_REQUEST_OVERHEAD;
    };
    let mut transcript = Vec::new();
    for step in steps {
        let m = step.message();
        if let Step::Assistant(_) = step {
            charge(&child, counter.count_message(m));
        }
        transcript.push(m.searchable_text());
        child.push(m);
    }
    let request = SummaryRequest {
        purpose: "subagent-report".into(),
        // The child's last request, in its own thread: `charge` below prices it with the prefix it
        // shares with the child's previous request.
        context: SummaryContext::Prefix,
        system: "You are a subagent. Your final answer is the only thing the parent agent will see.".into(),
        transcript: transcript.join("\n\n"),
        instructions:
            "Report what the parent needs from this exploration: exact paths, names, errors, and what was searched for and not found."
                .into(),
        max_output_tokens: SUBAGENT_REPORT_TOKENS,
    };
    let report = match summarizer.summarize(&request) {
        Ok(summary) => summary.text,
        Err(e) => format!("Subagent failed: {}", e.message),
    };
    let report = Message::tool_result(format!("task_{n}"), "task", report, false);
    charge(&child, counter.count_message(&report));
    let call = Message::tool_call(format!("task_{n}"), "task", serde_json::json!({ "description": description }));
    (call, report)
}
