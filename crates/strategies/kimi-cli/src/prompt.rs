//! The texts of Kimi CLI's compaction call, paraphrased (`soul/compaction.py`,
//! `prompts/compact.md`, `soul/kimisoul.py`). Only the XML-like section tags, the
//! `## Message` header layout and the summary prefix are literal.

/// Paraphrase of `COMPACTION_SYSTEM_PROMPT`: one sentence, the agent's own system prompt is
/// not sent.
pub(crate) const SYSTEM: &str = "You are an assistant whose job is to compact the context of a conversation.";

/// Literal `COMPACTION_OUTPUT_PREFIX` wrapped by `system()`: the first text part of the summary
/// message.
pub(crate) const SUMMARY_PREFIX: &str =
    "<system>Previous context has been compacted. Here is the compaction output:</system>";

/// Paraphrase of `prompts.COMPACT`. Like the original file it starts with a newline and a
/// horizontal rule; Kimi sends it after one more newline.
pub(crate) const COMPACT: &str = "
---

Everything above is the message list of an agent conversation. Your job now is to compact that conversation context, following the priorities and rules below.

**What to keep, most important first:**
1. **Current task**: what is being done at this moment
2. **Errors and fixes**: every error that came up and how it was resolved
3. **How the code evolved**: only the final versions that work, not the intermediate tries
4. **System context**: layout of the project, its dependencies, how the environment is set up
5. **Design decisions**: architectural choices and the reasons behind them
6. **Open TODOs**: work not finished yet and problems still known

**Rules:**
- ALWAYS KEEP: error messages, stack traces, solutions that worked, the current task
- MERGE: discussions of the same topic into one point
- DROP: explanations given twice, failed attempts (keep what they taught), wordy comments
- SHORTEN: long code, down to signatures plus the essential logic

**Special cases:**
- Code: under 20 lines keep it whole; longer, keep the signature and the essential logic
- Errors: keep the complete message and the fix that finally worked
- Discussions: keep only the decisions and the action items

**Answer with exactly these sections, in this order:**

<current_focus>
[the work in progress right now]
</current_focus>

<environment>
- [important setup or configuration facts]
- ...
</environment>

<completed_tasks>
- [task]: [short result]
- ...
</completed_tasks>

<active_issues>
- [issue]: [state / next step]
- ...
</active_issues>

<code_state>

<file>
[file name]

**Purpose:**
[what the file is for]

**Main parts:**
- [important functions or types]
- ...

**Current code:**
[the essential snippets of its latest version]
</file>

...one <file> block per file...
</code_state>

<important_context>
- [anything essential not covered above]
- ...
</important_context>";

/// Paraphrase of the block `/compact <instruction>` appends to the last part: a bold heading,
/// a sentence giving the instruction precedence, then the instruction itself.
pub(crate) fn custom_instruction(instruction: &str) -> String {
    format!(
        "\n\n**Custom instruction from the user for this compaction:**\n\
         The user asked for the focus below. It takes precedence over the default priorities above:\n\
         {instruction}"
    )
}

/// Paraphrase of the `<system>` note opening the background-task message.
pub(crate) const ACTIVE_TASKS_NOTE: &str = "<system>These background tasks were still running when the context was \
     compacted. Call TaskList to list them again later.</system>";
