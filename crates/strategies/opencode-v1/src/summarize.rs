//! `processCompaction` of `compaction.ts` (prepend mode): overflow replay, hidden earlier
//! compactions, `select`, the summarizer call, and the records appended after it.

use std::collections::{HashMap, HashSet};

use compactbench_core::{
    Checkpoint, CheckpointKind, Cx, EntryId, Error, ErrorKind, Log, Message, Part, Role, SummarizerUsage,
    SummaryPosition, Window,
};

use crate::prompt;
use crate::select::select;
use crate::session::{AfterKind, Kind, OcMsg, Session, Slot, SummaryDetails};
use crate::sizing::{estimate, size};
use crate::trigger::{max_output_tokens, tail_budget};
use crate::OpencodeV1Config;

/// The auto-continue message (literal).
const CONTINUE: &str =
    "Continue if you have next steps, or stop and ask for clarification if you are unsure how to proceed.";

/// Put before [`CONTINUE`] after an overflow compaction without replay (paraphrase).
const MEDIA_NOTE: &str = "The last request was too large for the provider because of large media attachments. \
The conversation was compacted and the media files were taken out of the context. If the user asked about \
attached images or files, explain that they were too large to process and suggest trying again with fewer or \
smaller files.";

/// Summary step overflowed, with a replayed message (literal error text).
const TOO_LARGE_REPLAY: &str = "Conversation history too large to compact - exceeds model context limit";
/// Summary step overflowed, without replay (literal error text).
const TOO_LARGE: &str = "Session too large to compact - context exceeds model limit even after stripping media";

/// How the compaction was requested: the marker's `auto` and `overflow` fields.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Trigger {
    pub(crate) auto: bool,
    pub(crate) overflow: bool,
}

/// `est_oc` of the current working view as model messages (the system prompt excluded).
pub(crate) fn view_estimate(session: &Session<'_>) -> u64 {
    let sizes: Vec<_> = session.filtered().into_iter().map(|i| size(&session.msgs[i])).collect();
    estimate(&sizes)
}

/// Text of a summary message as `summaryText` reads it: trimmed text parts, or nothing.
fn summary_text(msg: &OcMsg<'_>) -> Option<String> {
    let message = msg.message?;
    let texts: Vec<&str> = message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.trim()),
            _ => None,
        })
        .filter(|t| !t.is_empty())
        .collect();
    let text = texts.join("\n\n");
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The replayed user message: the original's parts, media turned into a text line.
fn replayed(msg: &OcMsg<'_>) -> Message {
    let parts = msg
        .message
        .map(|m| m.parts.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|p| match p {
            Part::Media { mime, .. } => Part::text(format!("[Attached {mime}: file]")),
            other => other.clone(),
        })
        .collect();
    Message::new(Role::User, parts)
}

/// Runs one compaction and returns its summary checkpoint.
pub(crate) fn summarize(
    config: &OpencodeV1Config,
    log: &Log,
    cx: &mut Cx<'_>,
    trigger: Trigger,
) -> Result<Checkpoint, Error> {
    let session = Session::new(log);
    let view = session.filtered();
    let msgs: Vec<&OcMsg<'_>> = view.iter().map(|&i| &session.msgs[i]).collect();

    // The marker is the newest message; the history is the view before it.
    let mut history: &[&OcMsg<'_>] = &msgs;
    let mut replay = None;
    if trigger.overflow {
        if let Some(i) = msgs.iter().rposition(|m| m.is_real_user()) {
            replay = Some(msgs[i]);
            history = &msgs[..i];
        }
        if !history.iter().any(|m| m.is_real_user()) {
            replay = None;
            history = &msgs;
        }
    }

    // `completedCompactions`: (marker, summary) pairs in the history are hidden; the last one in
    // history order supplies the previous summary.
    let markers: HashMap<EntryId, usize> = history
        .iter()
        .enumerate()
        .filter_map(|(i, m)| match m.slot {
            Slot::Marker(cp) => Some((cp, i)),
            _ => None,
        })
        .collect();
    let mut hidden = HashSet::new();
    let mut previous_summary = None;
    for (i, m) in history.iter().enumerate() {
        if let (Kind::Summary, Some(cp)) = (m.kind, Session::checkpoint_of(m)) {
            if let Some(&marker) = markers.get(&cp) {
                hidden.extend([marker, i]);
                previous_summary = summary_text(m);
            }
        }
    }
    let visible: Vec<&OcMsg<'_>> =
        history.iter().enumerate().filter(|(i, _)| !hidden.contains(i)).map(|(_, m)| *m).collect();
    let selected = select(&visible, config.tail_turns, tail_budget(config, cx.model));

    let request =
        prompt::request(&visible[..selected.head], previous_summary.as_deref(), max_output_tokens(config, cx.model));
    // The provider rejects a summary request larger than the context (the runner says so, or
    // the summarizer reports more input than the window): the summary step ends in
    // `ContextOverflowError` and the loop stops.
    let too_large = || Error::new(ErrorKind::Rejected, if replay.is_some() { TOO_LARGE_REPLAY } else { TOO_LARGE });
    let summary = match cx.summarizer.summarize(&request) {
        Err(e) if e.kind == ErrorKind::ContextOverflow => return Err(too_large()),
        result => result?,
    };
    if cx.model.window > 0 && summary.input_tokens > cx.model.window {
        return Err(too_large());
    }

    let (after, injected) = match (trigger.auto, replay) {
        (false, _) => (None, None),
        (true, Some(r)) => (Some(AfterKind::Replay), Some(replayed(r))),
        (true, None) if config.autocontinue => {
            let text = if trigger.overflow { format!("{MEDIA_NOTE}\n\n{CONTINUE}") } else { CONTINUE.to_owned() };
            (Some(AfterKind::Continue), Some(Message::user(text)))
        }
        (true, None) => (None, None),
    };

    let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::Kept(Vec::new()));
    cp.summary = Some(Message::assistant(summary.text));
    cp.summary_position = SummaryPosition::AfterSystem;
    cp.injected = injected.into_iter().collect();
    cp.tokens_before = view_estimate(&session);
    cp.summarizer = SummarizerUsage {
        calls: 1,
        failures: 0,
        input_tokens: summary.input_tokens,
        output_tokens: summary.output_tokens,
    };
    cp.details = serde_json::to_value(SummaryDetails {
        auto: trigger.auto,
        overflow: trigger.overflow,
        tail_start: selected.tail_start,
        after,
        replay_of: replay.filter(|_| after == Some(AfterKind::Replay)).map(|r| r.slot),
        previous_summary: previous_summary.is_some(),
    })
    .expect("summary details serialize");

    // The window names the log messages the new view keeps from before the checkpoint; the
    // projection does not read it, reports may.
    let mut next_log = log.clone();
    next_log.push_checkpoint(cp.clone());
    let next = Session::new(&next_log);
    let leading: HashSet<EntryId> = next.leading.iter().copied().collect();
    let mut kept: Vec<EntryId> =
        next.view().messages.iter().filter_map(|m| m.origin.entry()).filter(|id| !leading.contains(id)).collect();
    kept.sort();
    kept.dedup();
    cp.window = Window::Kept(kept);
    Ok(cp)
}
