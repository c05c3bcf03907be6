//! What the condensers send to their summarizer: the events rendered as OpenHands renders
//! them (`str(event)`), the truncation helpers, and the prompts (paraphrased; only the
//! section keys, tags and markers are the originals').

use compactbench_core::{Log, Part, Role};

use crate::event::{self, Event, Kind};
use crate::tokens::ERROR_HEADER;
use crate::truncate::{self, head};

/// SDK `N_CHAR_PREVIEW`: `str(event)` shows at most this many characters of content.
const N_CHAR_PREVIEW: usize = 500;

/// SDK `maybe_truncate` notice (paraphrased; the `<response clipped>` tag is kept).
const SDK_TRUNCATE_NOTICE: &str =
    "<response clipped><NOTE>The output limit was hit, so only part of the full response is shown.</NOTE>";

/// SDK `maybe_truncate` of an event string (no cap when `after` is `None`).
pub(crate) fn sdk_truncate(content: &str, after: Option<usize>) -> String {
    after.map_or_else(|| content.to_owned(), |after| truncate::sdk(content, after, SDK_TRUNCATE_NOTICE))
}

/// The first `keep` characters of `text` and `...` when it is longer than `N_CHAR_PREVIEW`:
/// message content keeps 497, thoughts and tool output keep 500.
fn preview(text: &str, keep: usize) -> String {
    if truncate::longer_than(text, N_CHAR_PREVIEW) {
        format!("{}...", head(text, keep))
    } else {
        text.to_owned()
    }
}

/// SDK `str(event)`, which is what the SDK summarizer sees of each forgotten event: a class
/// name and a 500-character preview; tool call arguments are not shown.
pub(crate) fn sdk_event_str(log: &Log, e: &Event) -> String {
    match &e.kind {
        Kind::SystemPrompt => {
            let text = event::owned_texts(log, e).join(" ");
            format!("SystemPromptEvent (agent)\n  System: {}\n  Tools: 0 available", preview(&text, N_CHAR_PREVIEW))
        }
        Kind::Message(role) => {
            let (source, role_name) = match role {
                Role::User => ("user", "user"),
                Role::Assistant => ("agent", "assistant"),
                Role::System => ("environment", "system"),
                Role::Tool => ("environment", "tool"),
            };
            let mut texts = Vec::new();
            let mut thinking = 0;
            for part in event::owned_parts(log, e) {
                match part {
                    Part::Text { text } => texts.push(text.as_str()),
                    Part::Media { .. } => texts.push("[Image: 1 URLs]"),
                    Part::Reasoning { .. } => thinking += 1,
                    Part::ToolCall { .. } | Part::ToolResult { .. } => {}
                }
            }
            if texts.is_empty() {
                return format!("MessageEvent ({source})\n  {role_name}: [no text content]");
            }
            let info = if thinking > 0 { format!(" [Thinking blocks: {thinking}]") } else { String::new() };
            format!("MessageEvent ({source})\n  {role_name}: {}{info}", preview(&texts.join(" "), N_CHAR_PREVIEW - 3))
        }
        Kind::Action { name, .. } => {
            let thought = event::owned_texts(log, e).join(" ");
            format!("ActionEvent (agent)\n  Thought: {}\n  Action: {name}", preview(&thought, N_CHAR_PREVIEW))
        }
        Kind::Observation { name, .. } => {
            let (text, is_error) = event::result_of(log, e);
            let content = if is_error { format!("{ERROR_HEADER}{text}") } else { text.to_owned() };
            format!("ObservationEvent (environment)\n  Tool: {name}\n  Result: {}", preview(&content, N_CHAR_PREVIEW))
        }
        Kind::Summary { text, .. } | Kind::Masked { text } => {
            format!("CondensationSummaryEvent (environment)\n  user: {}", preview(text, N_CHAR_PREVIEW - 3))
        }
    }
}

/// V0 `str(event)`. Our tool calls carry a name and JSON arguments, so they render as V0's
/// generic tool action (`MCPAction`) and their results as its observation.
pub(crate) fn v0_event_str(log: &Log, e: &Event) -> String {
    match &e.kind {
        Kind::SystemPrompt => {
            format!(
                "**SystemMessageAction** (source=EventSource.AGENT)\nCONTENT: {}",
                event::owned_texts(log, e).join("\n")
            )
        }
        Kind::Message(role) => {
            let source = match role {
                Role::User => "EventSource.USER",
                Role::Assistant => "EventSource.AGENT",
                Role::System | Role::Tool => "EventSource.ENVIRONMENT",
            };
            format!("**MessageAction** (source={source})\nCONTENT: {}", event::owned_texts(log, e).join("\n"))
        }
        Kind::Action { name, .. } => {
            let thought = event::owned_texts(log, e).join("\n");
            let mut out = String::from("**MCPAction**\n");
            if !thought.is_empty() {
                out.push_str(&format!("THOUGHT: {thought}\n"));
            }
            out.push_str(&format!("NAME: {name}\nARGUMENTS: {}", event::args_of(log, e)));
            out
        }
        Kind::Observation { .. } => {
            let (text, is_error) = event::result_of(log, e);
            if is_error {
                format!("**ErrorObservation**\n{text}")
            } else {
                text.to_owned()
            }
        }
        Kind::Summary { text, .. } | Kind::Masked { text } => text.to_string(),
    }
}

/// V0 `event.message`, what the attention condenser shows per event.
pub(crate) fn v0_event_message(log: &Log, e: &Event) -> String {
    match &e.kind {
        Kind::Action { name, .. } => format!("{name} {}", event::args_of(log, e)),
        Kind::Observation { .. } => event::result_of(log, e).0.to_owned(),
        Kind::Summary { text, .. } | Kind::Masked { text } => text.to_string(),
        Kind::SystemPrompt | Kind::Message(_) => event::owned_texts(log, e).join("\n"),
    }
}

/// The state-summary rules shared by the V0 and SDK summarizing condensers (paraphrased).
/// `sdk` selects the SDK wording, which says earlier summaries arrive as events.
pub(crate) fn summary_rules(sdk: bool) -> String {
    let inputs = if sdk {
        "The events you receive are the agent's actions and observations; earlier summaries may be among them."
    } else {
        "You receive the agent's actions and observations as events, plus the latest earlier summary if there is one."
    };
    format!(
        "You keep a running, context-aware summary of an interactive agent's state.
{inputs}
If any event involves task tracking, your summary must contain a TASK_TRACKING section that carries task IDs and statuses over exactly.

Sections to maintain:

USER_CONTEXT: the user's requirements, goals and clarifications, briefly

TASK_TRACKING: active tasks with their IDs and statuses (keep the IDs unchanged)

COMPLETED: what has been done, with short results
PENDING: what is still left to do
CURRENT_STATE: relevant variables, data structures and other state

For coding work, add:
CODE_STATE: file paths, function signatures, data structures
TESTS: failing cases, error messages, outputs
CHANGES: edits made to code or variables
DEPS: dependencies, imports, external calls
VERSION_CONTROL_STATUS: repository state, current branch, PR status, commits

Priorities:
1. Fit the sections to the kind of task at hand
2. Keep the user's key requirements and goals
3. Keep finished work apart from open work
4. Stay brief and relevant

Leave out details that do not matter for the current task.

Examples:

Coding task:
USER_CONTEXT: Make the CSV exporter keep leading zeros in ZIP codes
COMPLETED: Changed write_row() in export.py to quote string columns; unit tests green
PENDING: Update the changelog, open a PR
CODE_STATE: write_row() in export.py
TESTS: test_zip_leading_zero passes
CHANGES: string columns are now always quoted
DEPS: unchanged
VERSION_CONTROL_STATUS: Branch: fix-zip-zeros, last commit: 9f8e7d6

Other task:
USER_CONTEXT: Translate 12 product blurbs into Spanish
COMPLETED: Blurbs 1-8 translated
PENDING: Blurbs 9-12
CURRENT_STATE: Next blurb: 9, glossary agreed with the user"
    )
}

/// The closing line of both summarizing prompts (paraphrased).
pub(crate) const SUMMARIZE_NOW: &str = "Write the summary of these events, following the rules above.";

/// V0 `StructuredSummaryCondenser` preamble (paraphrased).
pub(crate) const STRUCTURED_RULES: &str =
    "You keep a context-aware summary of the state of an interactive software agent. It matters because it:
1. keeps the essential context once the history grows too long
2. keeps work from being lost when the session outgrows the token limit
3. keeps the agent consistent across interactions

You receive:
- a list of events (the agent's actions)
- the latest previous summary, if there is one

Record everything relevant, in particular:
- requirements the user stated explicitly
- work already done
- tasks still open
- the current state of code, variables and data structures
- the state of any version-control operations";

/// The fields of V0's `StateSummary`, in declaration order.
pub(crate) const STATE_SUMMARY_FIELDS: [&str; 18] = [
    "user_context",
    "completed_tasks",
    "pending_tasks",
    "current_state",
    "files_modified",
    "function_changes",
    "data_structures",
    "tests_written",
    "tests_passing",
    "failing_tests",
    "error_messages",
    "branch_created",
    "branch_name",
    "commits_made",
    "pr_created",
    "pr_status",
    "dependencies",
    "other_relevant_context",
];

/// The forced `create_state_summary` call, asked for as a JSON reply because the summarizer
/// seam returns text (paraphrased).
pub(crate) fn structured_instructions() -> String {
    format!(
        "Answer by calling create_state_summary: reply with one JSON object and nothing else, whose keys are its string arguments: {}. user_context, completed_tasks and pending_tasks must not be empty.",
        STATE_SUMMARY_FIELDS.join(", ")
    )
}

/// V0 `str(StateSummary)`: the summary text the structured condenser stores.
pub(crate) fn render_state_summary(fields: &serde_json::Map<String, serde_json::Value>) -> String {
    let f = |k: &str| fields.get(k).and_then(|v| v.as_str()).unwrap_or("").to_owned();
    [
        "# State Summary".to_owned(),
        "## Core Information".to_owned(),
        format!("**User Context**: {}", f("user_context")),
        format!("**Completed Tasks**: {}", f("completed_tasks")),
        format!("**Pending Tasks**: {}", f("pending_tasks")),
        format!("**Current State**: {}", f("current_state")),
        "## Code Changes".to_owned(),
        format!("**Files Modified**: {}", f("files_modified")),
        format!("**Function Changes**: {}", f("function_changes")),
        format!("**Data Structures**: {}", f("data_structures")),
        format!("**Dependencies**: {}", f("dependencies")),
        "## Testing Status".to_owned(),
        format!("**Tests Written**: {}", f("tests_written")),
        format!("**Tests Passing**: {}", f("tests_passing")),
        format!("**Failing Tests**: {}", f("failing_tests")),
        format!("**Error Messages**: {}", f("error_messages")),
        "## Version Control".to_owned(),
        format!("**Branch Created**: {}", f("branch_created")),
        format!("**Branch Name**: {}", f("branch_name")),
        format!("**Commits Made**: {}", f("commits_made")),
        format!("**PR Created**: {}", f("pr_created")),
        format!("**PR Status**: {}", f("pr_status")),
        "## Additional Context".to_owned(),
        format!("**Other Relevant Context**: {}", f("other_relevant_context")),
    ]
    .join("\n\n")
}

/// V0 `LLMAttentionCondenser` instruction (paraphrased).
pub(crate) const ATTENTION_RULES: &str = "Below is a list of a coding agent's actions, observations and thoughts, each with an identifier. Order the identifiers by how important each item is for the agent's next step, most important first.";

/// The response schema of the attention call, asked for as a JSON reply (paraphrased).
pub(crate) const ATTENTION_INSTRUCTIONS: &str =
    "Reply with one JSON object and nothing else, of the form {\"ids\": [<integer>, ...]}.";
