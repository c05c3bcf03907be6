//! Side paths of the CLI that touch the conversation: `/btw` (answered out of band, nothing
//! added) and `/rewind` (the view truncated at a message).

use compactbench_core::{Checkpoint, CheckpointKind, EntryId, Error, ErrorKind, Origin, Role, Summarizer, SummaryContext, SummaryRequest, View, Window};
use serde_json::json;

use crate::compact::{system_text, write_lines};

/// Output cap of a side answer \[assume\].
pub(crate) const BTW_MAX_TOKENS: u64 = 4_096;

pub(crate) fn btw(view: &View, question: &str, summarizer: &dyn Summarizer) -> Result<String, Error> {
    let mut transcript = String::new();
    write_lines(&mut transcript, view.messages.iter().skip_while(|m| m.message.role == Role::System).map(|m| &m.message));
    let request = SummaryRequest {
        purpose: "btw".into(),
        // modelled: `/btw` answers beside the task from the conversation as it stands.
        context: SummaryContext::Fork,
        system: system_text(view),
        transcript,
        instructions: format!(
            "A side question from the user, asked without interrupting the task above. Answer it briefly from the \
             conversation; the answer is shown to the user only and is not added to the conversation.\n\n{question}"
        ),
        max_output_tokens: BTW_MAX_TOKENS,
    };
    summarizer.summarize(&request).map(|s| s.text)
}

pub(crate) fn rewind(view: &View, to: EntryId) -> Result<Checkpoint, Error> {
    let at = view
        .messages
        .iter()
        .position(|m| m.origin.entry() == Some(to))
        .ok_or_else(|| Error::new(ErrorKind::Other, format!("{to} is not in the current conversation")))?;
    if at + 1 == view.len() {
        return Err(Error::new(ErrorKind::NothingToCompact, format!("{to} is already the newest message")));
    }
    let kept = &view.messages[..=at];
    let mut cp = Checkpoint::new(CheckpointKind::Truncate, Window::Kept(kept.iter().filter_map(|m| m.origin.entry()).collect()));
    // A summary before the rewind point stays: it is part of the conversation up to there.
    cp.summary = kept.iter().find(|m| matches!(m.origin, Origin::Summary(_))).map(|m| m.message.clone());
    cp.details = json!({ "rewind_to": to.0, "dropped": view.len() - at - 1 });
    Ok(cp)
}
