//! Prompts and the summary wrapper, paraphrased from the reverse-engineered `prompt.ts`
//! (`getCompactPrompt`, `formatCompactSummary`, `getCompactUserSummaryMessage`) and from the
//! API's compaction docs. Only the `<analysis>` / `<summary>` tags and the `Summary:` heading
//! are kept literally.

/// Asks for a text-only reply (the fork has the session's tools but must not use them).
const NO_TOOLS_PREAMBLE: &str = "Reply with plain text only. Do not call any tool: tool calls are refused in this turn and would waste it.\n\n";

/// The 9-section compact prompt, paraphrased.
const COMPACT_PROMPT: &str = "\
Write a detailed summary of the conversation so far, so that the work can go on from the summary \
alone. Capture the user's explicit requests and your earlier actions, with the technical details, \
code patterns and design decisions that continuing the work depends on.

First think inside <analysis> tags: walk through the conversation in order and note, for each part, \
what the user asked for and meant, how you went about it, the decisions taken, and the concrete \
details (file names, complete code snippets, function signatures, edits), the errors you ran into and \
how they were fixed. Pay particular attention to feedback where the user told you to do something \
differently. Check that nothing technical is missing or wrong.

Then write the summary inside <summary> tags, with these sections:
1. Primary request and intent: every explicit request and intention of the user, in detail.
2. Key technical concepts: the technologies, frameworks and ideas that came up.
3. Files and code sections: each file looked at, changed or created, why it matters, with complete \
code snippets where they help, and what the most recent edits were.
4. Errors and fixes: each error and how it was fixed, including what the user said about it.
5. Problem solving: problems solved and any troubleshooting still going on.
6. All user messages: every message the user wrote that is not a tool result, because they show how \
the requests and feedback changed.
7. Pending tasks: what you were explicitly asked to do and have not done yet.
8. Current work: exactly what was being worked on right before this summary, with file names and code.
9. Optional next step: the next step, only if it follows directly from the user's latest explicit \
request and the work in section 8; quote the latest messages word for word to show where the work \
stopped, so the task does not drift.";

/// Repeats the text-only rule at the end, where models heed it best.
const NO_TOOLS_TRAILER: &str = "\n\nReminder: answer in text only, an <analysis> block followed by a <summary> block. Any tool call fails the task.";

/// The compact prompt sent as the fork's last user turn, with optional extra instructions.
pub(crate) fn compact_prompt(extra: Option<&str>, manual: Option<&str>) -> String {
    let mut prompt = format!("{NO_TOOLS_PREAMBLE}{COMPACT_PROMPT}");
    if let Some(extra) = extra.filter(|e| !e.trim().is_empty()) {
        prompt.push_str("\n\nFurther instructions for this summary:\n");
        prompt.push_str(extra);
    }
    // `/compact <text>`: the text the user typed, under the literal heading the headless mode
    // shows (spec (e), stream-json); a bare `/compact` adds nothing.
    if let Some(manual) = manual.filter(|m| !m.trim().is_empty()) {
        prompt.push_str("\n\nAdditional Instructions:\n");
        prompt.push_str(manual.trim());
    }
    prompt.push_str(NO_TOOLS_TRAILER);
    prompt
}

/// The API's default compaction prompt, paraphrased from third-party descriptions.
pub(crate) const API_COMPACT_PROMPT: &str = "Summarize the conversation above so that the work can continue from the summary alone: \
the current state, the next steps, and what has been learned along the way. Wrap the summary in <summary></summary> tags.";

/// `formatCompactSummary`: drops the first `<analysis>…</analysis>`, turns the first
/// `<summary>…</summary>` into `Summary:\n…`, squeezes blank-line runs, trims. A reply cut off
/// before a closing tag keeps that part as it is.
pub(crate) fn format_summary(raw: &str) -> String {
    let mut text = raw.to_owned();
    if let Some(start) = text.find("<analysis>") {
        if let Some(len) = text[start..].find("</analysis>") {
            text.replace_range(start..start + len + "</analysis>".len(), "");
        }
    }
    if let Some(start) = text.find("<summary>") {
        let inner_start = start + "<summary>".len();
        if let Some(len) = text[inner_start..].find("</summary>") {
            let inner = text[inner_start..inner_start + len].trim().to_owned();
            text.replace_range(start..inner_start + len + "</summary>".len(), &format!("Summary:\n{inner}"));
        }
    }
    let mut squeezed = String::with_capacity(text.len());
    let mut newlines = 0;
    for c in text.chars() {
        if c == '\n' {
            newlines += 1;
            if newlines <= 2 {
                squeezed.push(c);
            }
        } else {
            newlines = 0;
            squeezed.push(c);
        }
    }
    squeezed.trim().to_owned()
}

/// `getCompactUserSummaryMessage` for auto-compaction (follow-up questions suppressed),
/// paraphrased.
pub(crate) fn summary_message(raw: &str, transcript: Option<&str>, tail_kept: bool) -> String {
    let mut text = format!(
        "This session continues an earlier conversation that ran out of context. The summary below covers that earlier part.\n\n{}",
        format_summary(raw)
    );
    if let Some(path) = transcript {
        text.push_str(&format!(
            "\n\nFor exact details from before the summary (code, error messages, text you wrote), the full transcript is at: {path}"
        ));
    }
    text.push_str(
        "\nPick up where the conversation stopped without asking the user anything further: do not acknowledge or recap \
         the summary and do not announce that you are continuing; carry on with the last task as if nothing had happened.",
    );
    if tail_kept {
        // 2.1.332 says so below the summary when it keeps the newest round (seen in its
        // requests; paraphrased).
        text.push_str(
            "\n\nThe messages after this summary are the newest ones from before it, unchanged. The summary was written \
             without them, so something it calls pending may already be done there.",
        );
    }
    text
}
