//! The summarizer request of the prepend mode: `serialize` of the head, `buildPrompt`, and the
//! compaction agent's system prompt. Prompt texts are paraphrased from
//! `packages/opencode/src/agent/prompt/compaction.txt` and `packages/core/src/session/compaction.ts`
//! / `compaction-suffix.ts`; the tags `<conversation>`, `<prior-summary>`, the line prefixes and
//! the template headings are literal.

use compactbench_core::estimate::utf16_len;
use compactbench_core::{Message, Part, SummaryContext, SummaryRequest};

use crate::session::{Kind, OcMsg, CLEARED};

/// `TOOL_OUTPUT_MAX_CHARS`: tool output sent to the summarizer is cut here (UTF-16 units).
const TOOL_OUTPUT_MAX_CHARS: u64 = 2_000;

/// The compaction agent's system prompt (paraphrase of `compaction.txt`).
const SYSTEM: &str = "\
You summarize the history of a coding session into an anchored summary that another agent can \
continue from.

Summarize only the history you are given. The newest turns may stay word for word next to your \
summary, so concentrate on the older context that still matters for the work.

When the request contains an earlier summary, treat it as the current anchor: keep what is still \
true, drop what is outdated, and merge in the new facts.

Follow the output structure the request asks for exactly. Keep every section, keep exact file \
paths and identifiers, and prefer short bullets to paragraphs.

Do not reply to the conversation itself and do not say that you are summarizing or compacting. \
Write in the language of the conversation.";

/// Asks for a first summary (paraphrase).
const NEW_SUMMARY: &str = "Write a new anchored summary of the history inside the <conversation> tags above, \
so that another coding agent can carry on with the work.";

/// `SUMMARY_UPDATE_INSTRUCTIONS` (paraphrase).
const UPDATE_INSTRUCTIONS: &str = "\
The <prior-summary> covers everything that happened before the <conversation>. Write one new \
summary that merges both. The <prior-summary> is thrown away afterwards: whatever you leave out is \
gone.

While merging:
- Keep objectives, constraints, user instructions, decisions and parallel threads of work from the \
<prior-summary> even when the <conversation> does not mention them; drop only what is finished and \
no longer needed.
- The <conversation> is newer than the <prior-summary>. Where they disagree the conversation is \
right: state the corrected fact and drop the old one.
- Add the progress, decisions, constraints and context the conversation brings.
- Move finished work from \"Active\" to \"Completed\".
- When a blocker is resolved, say so, keeping any detail still needed to go on.
- Bring \"Objective\" and \"Next Move\" up to date with where the work stands.";

/// `SUMMARY_TEMPLATE` (paraphrase; the headings are literal).
const TEMPLATE: &str = "\
Answer with exactly the Markdown layout inside <template>, sections in the same order, without \
the <template> tags themselves.
<template>
## Objective
- [what the user is trying to achieve, in one or two short sentences]

## Important Details
- [constraints and preferences, decisions and their reasons, key facts and assumptions, exact context needed to go on, or \"(none)\"]

## Work State
### Completed
- [work finished, facts verified, changes made; otherwise \"(none)\"]

### Active
- [work in progress, partial changes, state of an investigation; otherwise \"(none)\"]

### Blocked
- [blockers, failing commands, open questions; otherwise \"(none)\"]

## Next Move
1. [the next concrete step, or \"(none)\"]
2. [the step after it if known, or \"(none)\"]

## Relevant Files
- [file or directory path: why it matters, or \"(none)\"]
</template>

Rules:
- Keep every section, even when it is empty.
- Write short bullets, not paragraphs.
- Keep file paths, symbols, commands, error messages, URLs and identifiers exactly as they appeared.
- Do not mention summarizing or that the context was compacted.";

/// Cuts `value` after 2,000 UTF-16 units and marks the cut (literal marker). A character that
/// straddles the limit is dropped whole; JavaScript would keep half of a surrogate pair.
fn truncate(value: &str) -> String {
    if utf16_len(value) <= TOOL_OUTPUT_MAX_CHARS {
        return value.to_owned();
    }
    let mut units = 0;
    let mut end = 0;
    for (i, c) in value.char_indices() {
        units += c.len_utf16() as u64;
        if units > TOOL_OUTPUT_MAX_CHARS {
            break;
        }
        end = i + c.len_utf8();
    }
    format!("{}\n[truncated]", &value[..end])
}

fn attached(mime: &str) -> String {
    // Media carry no file name here, so OpenCode's fallback name applies.
    format!("[Attached {mime}: file]")
}

fn serialize_user(message: &Message) -> String {
    let text: Vec<&str> = message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } if !text.is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let text = text.join("\n");
    let mut lines = Vec::new();
    if !text.is_empty() {
        lines.push(format!("[User]: {text}"));
    }
    lines.extend(message.parts.iter().filter_map(|p| match p {
        Part::Media { mime, .. } => Some(attached(mime)),
        _ => None,
    }));
    lines.join("\n")
}

fn tool_lines(part: &crate::session::ToolPart<'_>, lines: &mut Vec<String>) {
    let input = part.args.map_or_else(|| "{}".to_owned(), serde_json::Value::to_string);
    lines.push(format!("[Assistant tool call]: {}({input})", part.name));
    match &part.output {
        Some(o) if o.is_error => lines.push(format!("[Tool error]: {}", o.text)),
        Some(o) => {
            let output = if o.compacted {
                CLEARED.to_owned()
            } else {
                let mut all = vec![o.text.to_owned()];
                all.extend(o.media.iter().map(|(mime, _)| attached(mime)));
                truncate(&all.join("\n"))
            };
            lines.push(format!("[Tool result]: {output}"));
        }
        None => {}
    }
}

/// `serialize`: one OpenCode message as summarizer text (empty for a marker).
pub(crate) fn serialize(msg: &OcMsg<'_>) -> String {
    match msg.kind {
        Kind::Marker => String::new(),
        Kind::User | Kind::After => msg.message.map(serialize_user).unwrap_or_default(),
        Kind::Summary | Kind::Assistant => {
            let mut lines = Vec::new();
            let mut done = vec![false; msg.parts.len()];
            for part in msg.message.map(|m| m.parts.as_slice()).unwrap_or_default() {
                match part {
                    Part::Text { text } if !text.is_empty() => lines.push(format!("[Assistant]: {text}")),
                    Part::Reasoning { text } if !text.is_empty() => {
                        lines.push(format!("[Assistant reasoning]: {text}"));
                    }
                    Part::ToolCall { id, .. } => {
                        if let Some(i) = msg.parts.iter().position(|p| p.call_id == id && p.args.is_some()) {
                            done[i] = true;
                            tool_lines(&msg.parts[i], &mut lines);
                        }
                    }
                    _ => {}
                }
            }
            for (i, part) in msg.parts.iter().enumerate() {
                if !done[i] {
                    tool_lines(part, &mut lines);
                }
            }
            lines.join("\n")
        }
    }
}

/// `buildPrompt` split at the seam: the transcript holds the conversation block and, on later
/// compactions, the prior summary; the instructions hold the request and the template. The
/// user message (`transcript`, blank line, `instructions`) is laid out as the original's.
pub(crate) fn request(head: &[&OcMsg<'_>], previous_summary: Option<&str>, max_output_tokens: u64) -> SummaryRequest {
    let conversation: Vec<String> = head.iter().map(|m| serialize(m)).filter(|s| !s.is_empty()).collect();
    let conversation = conversation.join("\n\n");
    let block = format!("The conversation so far follows.\n\n<conversation>\n{conversation}\n</conversation>");
    let (transcript, instructions) = match previous_summary {
        None => (block, format!("{NEW_SUMMARY}\n\n{TEMPLATE}")),
        Some(previous) => (
            format!(
                "{block}\n\nThis is the summary of everything before the <conversation> above:\n\n\
                 <prior-summary>\n{previous}\n</prior-summary>"
            ),
            format!("{UPDATE_INSTRUCTIONS}\n\n{TEMPLATE}"),
        ),
    };
    SummaryRequest {
        purpose: "compaction".into(),
        // spec (d): the compaction agent's prompt as system, one user message with the serialized conversation (a
        // prompt-cache miss: anomalyco/opencode #25120).
        context: SummaryContext::Fresh,
        system: SYSTEM.into(),
        transcript,
        instructions,
        max_output_tokens,
    }
}
