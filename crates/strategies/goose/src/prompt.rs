//! Texts Goose sends or leaves behind, paraphrased from the original (literal markers kept:
//! the section headings, the `<read-files>` / `<modified-files>` tags, `Awaiting user input`,
//! the notices `goose is compacting the conversation...` and `Compaction complete`, and the
//! redirect markers `Tool output was`, `saved to`, `Do NOT re-run`).

/// Which continuation text follows the summary (`compact_messages`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Continuation {
    /// Auto compaction whose preserved user message was the last message
    /// (`CONVERSATION_CONTINUATION_TEXT`).
    Conversation,
    /// Auto compaction in the middle of a tool loop (`TOOL_LOOP_CONTINUATION_TEXT`).
    ToolLoop,
    /// `/compact` (`MANUAL_COMPACT_CONTINUATION_TEXT`).
    Manual,
}

impl Continuation {
    /// Name recorded in checkpoint details.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Continuation::Conversation => "conversation",
            Continuation::ToolLoop => "tool_loop",
            Continuation::Manual => "manual",
        }
    }

    /// The assistant message Goose appends after the summary (paraphrased).
    pub(crate) fn text(self) -> &'static str {
        match self {
            Continuation::Conversation => {
                "The message before this one is a structured summary of an earlier part of this session that \
no longer fits in your context. The original messages are gone and the summary is all you remember of \
them. Take it as authoritative for what it covers; if the user asks about something specific that it \
does not contain, say so plainly and ask instead of guessing. Go on with the session."
            }
            Continuation::ToolLoop => {
                "The message before this one is a structured summary of an earlier part of this session that \
no longer fits in your context. The original messages and tool outputs are gone and the summary is all \
you remember of them. Take it as authoritative for what it covers; if you need a tool result it does not \
contain, run the tool again instead of guessing. Keep calling tools as needed to finish the task."
            }
            Continuation::Manual => {
                "The message before this one is a structured summary of the session so far, written at the \
user's request because the context was growing long. The original messages are gone and the summary is \
all you remember of them. Take it as authoritative for what it covers; if the user asks about specifics \
it does not contain, say so plainly and ask instead of guessing. Go on with the session."
            }
        }
    }
}

/// The single user message of the summary call (paraphrased). Goose renders the history into
/// the system prompt and asks for it in this message; here the history travels as the
/// request's transcript, which comes first in the user message.
pub(crate) const SUMMARY_ASK: &str =
    "Summarize the conversation history given above, following the format set out in the system prompt.";

/// `compaction.md` rendered (paraphrased), minus the history itself: the task, where the
/// history is, the optional file blocks, and the required sections.
pub(crate) fn compaction_system(read_files: &[String], modified_files: &[String]) -> String {
    let mut s = String::from(
        "## Task\n\n\
This goose session is being compacted because its context window is nearly full. Read the transcript \
of the conversation and write a structured summary; another instance of you will carry on the session \
from it.\n\n\
The summary will be the only record of what happened: the original messages will be gone. Be \
specific, and favour concrete facts (file paths, function names, command output, decisions) over \
general description.\n\n\
Do not invent facts the transcript does not contain, and mark what is uncertain. The next instance may \
say that something is missing from its context and ask for it again, which is better than guessing.\n\n\
**Conversation History:** in the user message.\n\n",
    );
    if !read_files.is_empty() {
        s.push_str("**Files read so far in this session (re-read them only if they may have changed):**\n");
        s.push_str(&read_files.join("\n"));
        s.push('\n');
    }
    if !modified_files.is_empty() {
        s.push_str("**Files modified in this session:**\n");
        s.push_str(&modified_files.join("\n"));
        s.push('\n');
    }
    s.push_str(
        "\n## Format\n\n\
Use these sections, in this order, in markdown. Keep it short but specific and prefer bullet points to \
prose. Leave out any section with nothing concrete in it.\n\n\
### Goal\n\
The user's overall aim for the session.\n\n\
### Constraints & Preferences\n\
- Requirements, conventions and preferences the user stated, including standing rules.\n\
- Rules of the repository or project that came up (style, build, tests).\n\n\
### Progress\n\
#### Done\n\
- [x] Work that is finished and checked.\n\n\
#### In Progress\n\
- [ ] Work under way now, described precisely enough to pick it up again.\n\n\
#### Blocked / Open Questions\n\
- What waits on the user, on another system, or on an open decision.\n\n\
### Key Decisions\n\
- **Decision**: why it was taken, with any alternatives that were rejected.\n\n\
### Critical Context\n\
- Paths and symbol names the next step needs.\n\
- Exact error messages, commands, environment variables, URLs and ids.\n\
- Code, configuration or output the next instance needs: short pieces (under 20 lines) verbatim, long \
ones summarized with the path to re-read them from.\n\n\
### Next Step\n\
One sentence: the most concrete next action and the file, command or tool for it. If there is none, \
write \"Awaiting user input\" and nothing more.\n\n\
<read-files>\n\
Every file path read in this session, one per line, from the list above and from the transcript; \
absolute paths preferred.\n\
</read-files>\n\n\
<modified-files>\n\
Every file path written or edited in this session, one per line; absolute paths preferred.\n\
</modified-files>\n",
    );
    s
}

/// System prompt of a tool-pair summary call (`summarize_tool_call`, paraphrased).
pub(crate) const TOOL_PAIR_SYSTEM: &str = "Summarize one tool call and its response so that the pair \
takes fewer tokens.\n\nAnswer with a single message saying what happened. A call usually asks for \
something with a set of parameters and gets structured output back; for example, a lookup on GitHub \
answered with a JSON document could be summed up as \"A call to GitHub fetched the project status\".";

/// `redirect_message` of `large_response_handler.rs` (paraphrased, markers literal).
pub(crate) fn redirect(chars: usize, path: &str) -> String {
    format!(
        "Tool output was {chars} characters and is saved to {path}. To look at parts of it, use the `read` \
tool with `path: {path}` (`line`/`limit` for a range) if you have it, or `sed -n 'A,Bp' {path}` in the \
shell. Do NOT re-run the tool to see other parts."
    )
}

/// Literal notice while Goose compacts.
pub(crate) const THINKING_NOTICE: &str = "goose is compacting the conversation...";
/// Literal notice after a successful compaction.
pub(crate) const COMPLETE_NOTICE: &str = "Compaction complete";

/// The inline notice of an auto compaction (paraphrased).
pub(crate) fn threshold_notice(threshold: f64) -> String {
    format!("Auto-compact threshold of {}% exceeded; compacting the conversation.", (threshold * 100.0) as u32)
}

/// The failure message Goose shows (paraphrased) after a failed compaction.
pub(crate) fn failure_message(error: &str) -> String {
    format!("Compaction ran into an error: {error}. Try again, or start a new session.")
}

/// The error after the last rung of the removal ladder still overflows (paraphrased).
pub(crate) const LADDER_EXHAUSTED: &str =
    "Failed to compact: the context limit was still exceeded after removing every tool response";
