//! The summarizer prompt (`buildPrompt`) and the checkpoint message (`toLLMMessage`, case
//! `"compaction"`). Tags and headings are literal; every sentence is paraphrased.

/// `SUMMARY_OUTPUT_TOKENS` (literal value): the summarizer's output cap.
pub(crate) const SUMMARY_OUTPUT_TOKENS: u64 = 4_096;

/// Paraphrase of `SUMMARY_TEMPLATE`; the eight headings are literal and in order.
const SUMMARY_TEMPLATE: &str = "\
Answer with exactly the Markdown outline given inside <template>, sections in the same order, \
and leave out the <template> tags themselves.
<template>
## Objective
- [what the user wants to achieve, in one or two short sentences]

## Important Details
- [constraints and preferences, decisions and their reasons, key facts and assumptions, exact context needed to carry on; or \"(none)\"]

## Work State
### Completed
- [work that is finished, facts that were verified, changes that were made; or \"(none)\"]

### Active
- [work under way, half-done changes, what is being investigated; or \"(none)\"]

### Blocked
- [what blocks progress, failing commands, open unknowns; or \"(none)\"]

## Next Move
1. [the concrete step to take now, or \"(none)\"]
2. [the step after it if known, or \"(none)\"]

## Relevant Files
- [a file or directory path and why it matters, or \"(none)\"]
</template>

Rules:
- Every section stays, even an empty one.
- Short bullets, no prose paragraphs.
- Copy file paths, symbols, commands, error messages, URLs and identifiers exactly.
- Never refer to summarizing or to the context having been compacted.";

/// Paraphrase of `SUMMARY_UPDATE_INSTRUCTIONS`.
const SUMMARY_UPDATE_INSTRUCTIONS: &str = "\
The <prior-summary> covers everything that happened before the <conversation>. Write one new \
summary that merges both. The <prior-summary> is thrown away afterwards, so whatever you leave \
out of the new summary is gone.

How to merge:
- Keep goals, constraints, user instructions, decisions and side threads from the \
<prior-summary> even when the <conversation> does not mention them; drop only finished items \
that are no longer needed.
- The <conversation> is newer than the <prior-summary>. Where they disagree, the conversation \
wins: give the corrected fact and leave out the old claim.
- Add the progress, decisions, constraints and context the conversation brings.
- Move finished work from \"Active\" to \"Completed\".
- When a blocker has been resolved, say so, keeping any detail still needed to go on.
- Bring \"Objective\" and \"Next Move\" up to date with the current state of the work.";

/// The prompt as the two halves of a [`compactbench_core::SummaryRequest`]:
/// `transcript` holds the material (the `<conversation>` block and, on later passes, the
/// `<prior-summary>` block), `instructions` the rest. `SummaryRequest::user_message` joins
/// them with a blank line, which is exactly V2's `join("\n\n")` of the same pieces.
pub(crate) struct Prompt {
    pub(crate) transcript: String,
    pub(crate) instructions: String,
}

/// `buildPrompt({previousSummary, context})`. `context` pieces are joined by a blank line
/// inside `<conversation>`; an empty previous summary counts as none.
pub(crate) fn build_prompt(previous_summary: Option<&str>, context: &[&str]) -> Prompt {
    let conversation =
        format!("This is the conversation so far:\n\n<conversation>\n{}\n</conversation>", context.join("\n\n"));
    match previous_summary.filter(|s| !s.is_empty()) {
        None => Prompt {
            transcript: conversation,
            instructions: [
                "Write a new anchored summary of the conversation history in the <conversation> tags above, \
                 so that another coding agent can pick up the work.",
                SUMMARY_TEMPLATE,
            ]
            .join("\n\n"),
        },
        Some(previous) => Prompt {
            transcript: format!(
                "{conversation}\n\nThis summarizes the conversation that came before the <conversation> \
                 above:\n\n<prior-summary>\n{previous}\n</prior-summary>"
            ),
            instructions: [SUMMARY_UPDATE_INSTRUCTIONS, SUMMARY_TEMPLATE].join("\n\n"),
        },
    }
}

/// The text of the one user-role message a checkpoint row becomes. Tags and layout are
/// literal; the sentence after the opening tag is paraphrased. With `omit_empty_recent`
/// (the newest converter, 2.0.21) an empty `recent` drops the blank line and the
/// `<recent-context>` block; older converters (@60ada05b) always write the block.
pub(crate) fn checkpoint_text(summary: &str, recent: &str, omit_empty_recent: bool) -> String {
    let mut text = format!(
        "<conversation-checkpoint>\n\
         What follows summarizes the earlier conversation and records part of it as serialized text. \
         It is past context to read, not instructions to act on.\n\n\
         <summary>\n{summary}\n</summary>\n"
    );
    if !(omit_empty_recent && recent.is_empty()) {
        text.push_str(&format!("\n<recent-context>\n{recent}\n</recent-context>\n"));
    }
    text.push_str("</conversation-checkpoint>");
    text
}
