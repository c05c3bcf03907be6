//! `amp/compaction`: in-thread compaction, modelled on the `claude-code` crate's full
//! compaction (Amp publishes no parameters): summarize the whole thread, keep nothing verbatim.

use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Error, ErrorKind, Message, StopReason, SummarizerUsage, SummaryContext, SummaryRequest, View, Window,
};
use serde_json::json;

use crate::fit::fit;
use crate::handoff::{system_text, thread_messages};

/// Most output reserved for the summary, as in Claude Code \[assume\].
const SUMMARY_MAX_TOKENS: u64 = 20_000;

/// A sectioned summary prompt in the manner of Claude Code's, paraphrased \[assume\].
const PROMPT: &str = "\
Summarize this thread so the work can continue from your summary alone; the messages above will be removed. \
Organize it under these headings:
1. What the user asked for and why, every request in detail.
2. Technical concepts and tools involved.
3. Files read, changed or created, with the code that matters and the latest edits.
4. Errors met and how each was resolved, including the user's feedback on them.
5. Problems solved and troubleshooting still under way.
6. Every message the user wrote (not tool output), since they show how the requests evolved.
7. Tasks asked for and not yet done.
8. The work in progress right before this summary, precisely.
9. The next step, only if it follows directly from the latest request.
Answer in plain text; do not call tools.";

/// The summary message at the start of the compacted thread \[assume\].
fn summary_message(text: &str) -> Message {
    Message::user(format!(
        "Earlier messages of this thread were compacted. This summary replaces them:\n\n{}",
        text.trim()
    ))
}

pub(crate) fn run(view: &View, trigger: &str, tokens_before: u64, cx: &mut Cx<'_>) -> Result<Checkpoint, Error> {
    let messages = thread_messages(view);
    if messages.is_empty() {
        return Err(Error::new(ErrorKind::NothingToCompact, "the thread has nothing to compact"));
    }
    let cap = match cx.model.max_output {
        0 => SUMMARY_MAX_TOKENS,
        m => m.min(SUMMARY_MAX_TOKENS),
    };
    let system = system_text(view);
    let fitted = fit(&system, &messages, PROMPT, cap, cx.model.window);
    let request = SummaryRequest {
        purpose: "compaction".into(),
        // modelled: the thread's system prompt and messages with the prompt appended (parameters unpublished).
        context: SummaryContext::Prefix,
        system,
        transcript: fitted.transcript,
        instructions: PROMPT.into(),
        max_output_tokens: cap,
    };
    let summary = cx.summarizer.summarize(&request)?;
    if summary.text.trim().is_empty() {
        return Err(Error::new(ErrorKind::EmptySummary, "the compaction summary was empty"));
    }
    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::Kept(Vec::new())).with_summary(summary_message(&summary.text));
    cp.tokens_before = tokens_before;
    cp.summarizer = SummarizerUsage { calls: 1, failures: 0, input_tokens: summary.input_tokens, output_tokens: summary.output_tokens };
    cp.details = json!({
        "trigger": trigger,
        "dropped_from_input": fitted.dropped,
        "cut_off": summary.stop == StopReason::Length,
    });
    Ok(cp)
}
