//! The handoff: draft a first message for a new thread from the current one, store the old
//! thread, and start the new thread with nothing but that message.

use compactbench_core::tools::{tool_kind, tool_path, ToolKind};
use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, Error, ErrorKind, Log, Message, Offload, Part, Role, StopReason, SummarizerUsage,
    SummaryContext, SummaryRequest, View, Window,
};
use serde_json::json;

use crate::fit::fit;
use crate::thread::{self, Lineage};

/// Output cap of the draft request \[assume, spec (d)\].
pub(crate) const DRAFT_MAX_TOKENS: u64 = 4_000;

/// What the draft request asks, paraphrasing the spec's (d); `{goal}` is the goal verbatim.
fn instructions(goal: &str) -> String {
    format!(
        "The conversation above will be closed and the work continued in a new thread that cannot see it. \
         Write the first message of that new thread, addressed to the agent that will pick the work up, \
         so that it can pursue this goal:\n\n{goal}\n\n\
         Keep only the context the new thread needs for that goal: decisions already taken, constraints \
         the user set, the current state of the work, and problems still open. Leave out everything else. \
         End with the paths of the files that matter for the goal, one per line."
    )
}

/// The leading system text of `view`.
pub(crate) fn system_text(view: &View) -> String {
    let texts: Vec<String> =
        view.messages.iter().take_while(|m| m.message.role == Role::System).map(|m| m.message.text()).collect();
    texts.join("\n\n")
}

/// The thread's messages after its system prompt (the seed message included).
pub(crate) fn thread_messages(view: &View) -> Vec<&Message> {
    view.messages.iter().skip_while(|m| m.message.role == Role::System).map(|m| &m.message).collect()
}

/// The newest user request the thread received (not its seed message).
fn latest_request(view: &View) -> Option<String> {
    view.messages
        .iter()
        .rev()
        .find(|m| m.message.role == Role::User && m.origin.entry().is_some())
        .map(|m| m.message.text())
        .filter(|t| !t.trim().is_empty())
}

/// Paths of files the thread read, wrote or edited, in the order first touched.
pub(crate) fn touched_files(view: &View) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in view.iter().flat_map(|m| &m.parts) {
        if let Part::ToolCall { name, args, .. } = part {
            if matches!(tool_kind(name), ToolKind::Read | ToolKind::Write | ToolKind::Edit) {
                if let Some(p) = tool_path(args) {
                    if !out.iter().any(|o| o == p) {
                        out.push(p.to_owned());
                    }
                }
            }
        }
    }
    out
}

fn path_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '/' | '\\' | '.')
}

/// Whether `text` names `path` as a whole token: not inside a longer path (`ba.ts`,
/// `src/a.ts` for `a.ts`, `a.tsx`); a sentence's full stop after it is fine.
pub(crate) fn names(text: &str, path: &str) -> bool {
    text.match_indices(path).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let mut after = text[at + path.len()..].chars();
        let next = after.next();
        let before_ok = before.is_none_or(|c| !path_char(c));
        let after_ok = match next {
            None => true,
            Some('.') => after.next().is_none_or(|c| !path_char(c)),
            Some(c) => !path_char(c),
        };
        before_ok && after_ok
    })
}

/// The new thread's only message: the goal, the draft, the relevant files, the parent.
fn seed_message(goal: &str, draft: &str, files: &[String], parent: &str) -> Message {
    let mut text = format!("Goal: {goal}\n\n{}\n\nRelevant files:\n", draft.trim());
    if files.is_empty() {
        text.push_str("(none)\n");
    }
    for f in files {
        text.push_str(&format!("- {f}\n"));
    }
    text.push_str(&format!(
        "\nContinued from thread {}. Use read_thread on it for anything this message leaves out.",
        thread::url(parent)
    ));
    Message::user(text)
}

/// Hands the thread in `view` off to a new thread pursuing `goal` (or the latest request).
pub(crate) fn run(
    log: &Log,
    view: &View,
    goal: Option<&str>,
    trigger: &str,
    tokens_before: u64,
    cx: &mut Cx<'_>,
) -> Result<Checkpoint, Error> {
    if !thread::has_new_messages(view) {
        return Err(Error::new(ErrorKind::NothingToCompact, "the thread has nothing to hand off"));
    }
    let Lineage { current, number, goal: previous_goal, parent, seed } = thread::lineage(log);
    let goal = goal
        .map(str::to_owned)
        .or_else(|| latest_request(view))
        .or(previous_goal)
        .unwrap_or_else(|| "Continue the task in progress.".to_owned());

    let system = system_text(view);
    let messages = thread_messages(view);
    let instructions = instructions(&goal);
    let fitted = fit(&system, &messages, &instructions, DRAFT_MAX_TOKENS, cx.model.window);
    let request = SummaryRequest {
        purpose: "handoff".into(),
        // spec (d) [assume]: the whole old thread (native messages) plus a final instruction seeds a new thread.
        context: SummaryContext::Fork,
        system,
        transcript: fitted.transcript,
        instructions,
        max_output_tokens: DRAFT_MAX_TOKENS,
    };
    let mut usage = SummarizerUsage { calls: 1, ..SummarizerUsage::default() };
    let draft = cx.summarizer.summarize(&request).map_err(|e| {
        Error::new(e.kind, format!("handoff draft failed, staying in thread {current}: {}", e.message))
    })?;
    if draft.text.trim().is_empty() {
        return Err(Error::new(ErrorKind::EmptySummary, format!("empty handoff draft, staying in thread {current}")));
    }
    usage.input_tokens = draft.input_tokens;
    usage.output_tokens = draft.output_tokens;

    let touched = touched_files(view);
    let files: Vec<String> = touched.into_iter().filter(|p| names(&draft.text, p)).collect();

    let key = thread::url(&current);
    cx.store.write(key.clone(), thread::render(&current, parent.as_deref(), view));
    let next = thread::thread_id(&seed, number + 1);

    let mut cp = Checkpoint::new(CheckpointKind::Handoff, Window::Kept(Vec::new()))
        .with_summary(seed_message(&goal, &draft.text, &files, &current));
    cp.offloads.push(Offload { path: key, entries: view.messages.iter().filter_map(|m| m.origin.entry()).collect() });
    cp.tokens_before = tokens_before;
    cp.summarizer = usage;
    cp.details = json!({
        "trigger": trigger,
        "thread_id": next,
        "number": number + 1,
        "parent_thread_id": current,
        "goal": goal,
        "files": files,
        "dropped_from_draft": fitted.dropped,
        "cut_off": draft.stop == StopReason::Length,
    });
    Ok(cp)
}
