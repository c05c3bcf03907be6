//! The texts Codex sends around a compaction, paraphrased (the originals are templates in
//! `codex-rs/core/templates/compact/`; no template text is copied here).

/// Stands in for `SUMMARY_PREFIX` (`summary_prefix.md` @50a53333): it tells the model that an
/// earlier model worked on the task, that the tool state is still there, and that the summary
/// below should be built on rather than redone. Codex writes it, a newline, then the summary,
/// as one user message, and recognises earlier summaries by `prefix + "\n"`.
pub(crate) const SUMMARY_PREFIX: &str = "An earlier model was already working on this task and wrote the summary below \
before its context was compacted. The tools it used are still in the state it left them. Continue from its results \
instead of repeating its work. The earlier model's summary:";

/// Placeholder after the prefix when the summarizer returned no text (literal).
pub(crate) const NO_SUMMARY: &str = "(no summary available)";

/// Stands in for `SUMMARIZATION_PROMPT` (`prompt.md` @11baefb5), the last user message of the
/// local compaction request: a checkpoint handoff for another model covering the goal,
/// progress and decisions, constraints and preferences, next steps, and the data needed to
/// continue, kept brief and structured.
pub(crate) const SUMMARIZATION_PROMPT: &str = "Context checkpoint. Write a handoff summary so that a different model \
can take over this task where it stands. Cover:\n\
- what the user is trying to achieve;\n\
- what has been done so far and which decisions were made;\n\
- context that matters: constraints, conventions, user preferences;\n\
- what is still left to do, as concrete next steps;\n\
- any data, examples or references the next model needs to carry on.\n\
Keep it short and well organised; its only job is to let the next model continue smoothly.";

/// Modelling choice for the remote variant: the prompt OpenAI's `/responses/compact` endpoint
/// uses server-side is not public, so the modelled server summarizes with this neutral request.
pub(crate) const REMOTE_SERVER_PROMPT: &str = "Compact this conversation: replace everything except the user's own \
messages with a summary that lets the model continue the work without the dropped items.";

/// Start of the developer message Codex inserts when the model changes between turns (literal).
pub(crate) const MODEL_SWITCH_OPEN: &str = "<model_switch>\n";

/// Start and end markers of user messages Codex treats as context rather than user input
/// (`is_contextual_user_message`, literal): AGENTS.md instructions, environment context,
/// skills, shell commands the user ran, aborted-turn notes, subagent notices, and the older
/// `<user_instructions>` wrapper.
pub(crate) const CONTEXTUAL_MARKERS: &[(&str, &str)] = &[
    ("# AGENTS.md instructions for ", "</INSTRUCTIONS>"),
    ("<user_instructions>", "</user_instructions>"),
    ("<environment_context>", "</environment_context>"),
    ("<skill>", "</skill>"),
    ("<user_shell_command>", "</user_shell_command>"),
    ("<turn_aborted>", "</turn_aborted>"),
    ("<subagent_notification>", "</subagent_notification>"),
];
