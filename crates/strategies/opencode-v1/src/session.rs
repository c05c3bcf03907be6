//! OpenCode's storage, rebuilt from the log: one [`OcMsg`] per message OpenCode would have stored,
//! in storage order, plus `filterCompacted` (the working view) and the lowering of that view to
//! compactbench messages.
//!
//! OpenCode keeps a tool call and its result in one part of one assistant message. The log keeps
//! the call in an assistant message and the result in the tool messages after it, so an assistant
//! message and the tool messages that follow it form one OpenCode assistant message here.
//! A summary checkpoint stands for the three records OpenCode appends when it compacts: the
//! marker user message, the summary assistant message, and the continue or replayed user message.

use std::collections::{HashMap, HashSet};

use compactbench_core::{CheckpointKind, Entry, EntryId, Log, Message, Origin, Part, Role, View, ViewMessage};
use serde::{Deserialize, Serialize};

/// Text the marker user message is sent as (literal, `toModelMessages`).
pub(crate) const MARKER_TEXT: &str = "What did we do so far?";
/// Error result sent for a tool call that never got a result (literal).
pub(crate) const INTERRUPTED: &str = "[Tool execution was interrupted]";
/// Stand-in for a pruned tool output (literal).
pub(crate) const CLEARED: &str = "[Old tool result content cleared]";

/// Identity of an OpenCode message (its `MessageID`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Slot {
    /// A message of the log; for an assistant message with its tool messages, the first entry.
    Entry(EntryId),
    /// The marker user message of the summary checkpoint with this id.
    Marker(EntryId),
    /// The summary assistant message of the summary checkpoint with this id.
    Summary(EntryId),
    /// The continue or replayed user message of the summary checkpoint with this id.
    After(EntryId),
}

/// What a summary checkpoint appended after the summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AfterKind {
    /// The synthetic "continue" user message (auto compaction without replay).
    Continue,
    /// The cut-out user message re-written (overflow replay).
    Replay,
}

/// Private data of a summary checkpoint: the marker's `CompactionPart` fields and what follows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SummaryDetails {
    /// `CompactionPart.auto`.
    pub(crate) auto: bool,
    /// `CompactionPart.overflow`.
    pub(crate) overflow: bool,
    /// `CompactionPart.tail_start_id`; `None` when everything was summarized.
    pub(crate) tail_start: Option<Slot>,
    /// The message after the summary (it is the first entry of `Checkpoint::injected`).
    pub(crate) after: Option<AfterKind>,
    /// The replayed message, when `after` is a replay.
    pub(crate) replay_of: Option<Slot>,
    /// Whether a previous summary was sent in `<prior-summary>`.
    pub(crate) previous_summary: bool,
}

/// One pruned tool output: the tool message holding it and the call id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct PrunedPart {
    pub(crate) entry: EntryId,
    pub(crate) call_id: String,
}

/// Private data of a prune checkpoint: the parts that got `state.time.compacted`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PruneDetails {
    pub(crate) parts: Vec<PrunedPart>,
    /// Estimated output tokens walked (protected budget included).
    pub(crate) total: u64,
    /// Estimated output tokens cleared.
    pub(crate) pruned: u64,
}

/// Role of an OpenCode message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A user message of the log. A system message after the first non-system message is one too:
    /// OpenCode stores no system messages in history, notices arrive as user text.
    User,
    /// An assistant message of the log with its tool messages, or tool messages without one.
    Assistant,
    /// A checkpoint's marker user message (holds the `CompactionPart`).
    Marker,
    /// A checkpoint's summary assistant message (`summary: true`).
    Summary,
    /// A checkpoint's continue or replayed user message.
    After,
}

/// The output of a finished tool part.
#[derive(Clone, Debug)]
pub(crate) struct ToolOutput<'a> {
    /// Tool message carrying it.
    pub(crate) entry: EntryId,
    pub(crate) text: &'a str,
    pub(crate) is_error: bool,
    /// Attachments: MIME types and provider token sizes.
    pub(crate) media: Vec<(&'a str, u64)>,
    /// `state.time.compacted` is set (pruned).
    pub(crate) compacted: bool,
}

/// One tool part: a call and, once it finished, its output.
#[derive(Clone, Debug)]
pub(crate) struct ToolPart<'a> {
    pub(crate) call_id: &'a str,
    pub(crate) name: &'a str,
    /// Call arguments; `None` for a result whose call is not in the same message.
    pub(crate) args: Option<&'a serde_json::Value>,
    /// `None` while pending or running.
    pub(crate) output: Option<ToolOutput<'a>>,
}

impl ToolPart<'_> {
    /// `state.status == "completed"`.
    pub(crate) fn completed(&self) -> bool {
        self.output.as_ref().is_some_and(|o| !o.is_error)
    }
}

/// One message as OpenCode stores it.
#[derive(Clone, Debug)]
pub(crate) struct OcMsg<'a> {
    pub(crate) slot: Slot,
    pub(crate) kind: Kind,
    /// The log message (user, or assistant of an assistant group) or the checkpoint's message
    /// (summary, continue, replay); `None` for markers and tool-only groups.
    pub(crate) message: Option<&'a Message>,
    /// Tool messages of an assistant group.
    pub(crate) tools: Vec<(EntryId, &'a Message)>,
    /// Tool parts of an assistant group, in call order, then results without a call.
    pub(crate) parts: Vec<ToolPart<'a>>,
}

impl<'a> OcMsg<'a> {
    /// A user message that starts a turn (`role == "user"` without a compaction part).
    pub(crate) fn is_real_user(&self) -> bool {
        matches!(self.kind, Kind::User | Kind::After)
    }

    /// `role == "user"`, markers included.
    pub(crate) fn is_user(&self) -> bool {
        matches!(self.kind, Kind::User | Kind::After | Kind::Marker)
    }

    fn attach_tool(&mut self, id: EntryId, message: &'a Message, compacted: &HashSet<(EntryId, String)>) {
        self.tools.push((id, message));
        let mut first_here = None;
        for part in &message.parts {
            match part {
                Part::ToolResult { call_id, name, text, is_error } => {
                    let output = ToolOutput {
                        entry: id,
                        text,
                        is_error: *is_error,
                        media: Vec::new(),
                        compacted: compacted.contains(&(id, call_id.clone())),
                    };
                    let index = match self.parts.iter().position(|p| p.call_id == call_id && p.output.is_none()) {
                        Some(i) => {
                            self.parts[i].output = Some(output);
                            i
                        }
                        None => {
                            self.parts.push(ToolPart { call_id, name, args: None, output: Some(output) });
                            self.parts.len() - 1
                        }
                    };
                    first_here.get_or_insert(index);
                }
                // Media in a tool message are the attachments of its (first) result.
                Part::Media { mime, tokens } => {
                    if let Some(output) = first_here.and_then(|i| self.parts[i].output.as_mut()) {
                        output.media.push((mime, u64::from(*tokens)));
                    }
                }
                Part::Text { .. } | Part::Reasoning { .. } | Part::ToolCall { .. } => {}
            }
        }
    }
}

/// The log seen as OpenCode's storage.
pub(crate) struct Session<'a> {
    pub(crate) log: &'a Log,
    /// Leading system messages: the system prompt, rebuilt for every request, never history.
    pub(crate) leading: Vec<EntryId>,
    /// Stored messages, oldest first.
    pub(crate) msgs: Vec<OcMsg<'a>>,
    /// Pruned outputs: (tool message, call id).
    pub(crate) compacted: HashSet<(EntryId, String)>,
    /// Newest replacement of each log message and the checkpoint that made it.
    replacements: HashMap<EntryId, (&'a Message, EntryId)>,
    /// Details of every summary checkpoint, by checkpoint id.
    details: HashMap<EntryId, SummaryDetails>,
}

impl<'a> Session<'a> {
    /// Rebuilds OpenCode's storage from `log`.
    pub(crate) fn new(log: &'a Log) -> Session<'a> {
        // Prune flags live on parts older than the prune checkpoint, so collect them first.
        let mut compacted = HashSet::new();
        let mut replacements = HashMap::new();
        let mut details = HashMap::new();
        for (id, cp) in log.checkpoints() {
            match cp.kind {
                CheckpointKind::Prune => {
                    if let Ok(d) = PruneDetails::deserialize(&cp.details) {
                        compacted.extend(d.parts.into_iter().map(|p| (p.entry, p.call_id)));
                    }
                }
                CheckpointKind::Summary => {
                    if let Ok(d) = SummaryDetails::deserialize(&cp.details) {
                        details.insert(id, d);
                    }
                }
                _ => {}
            }
            for r in &cp.replacements {
                replacements.insert(r.entry, (&r.message, id));
            }
        }
        let mut session = Session { log, leading: Vec::new(), msgs: Vec::new(), compacted, replacements, details };

        let mut entries = log.entries().peekable();
        while let Some((id, _)) = entries.next_if(|(_, e)| matches!(e, Entry::Message(m) if m.role == Role::System)) {
            session.leading.push(id);
        }
        session.store(entries);
        session
    }

    /// The messages OpenCode stores for the entries of `log` from `from` on, alone: what they
    /// add to the storage of the log before them when they hold no checkpoint (which alone
    /// prunes, replaces or summarizes) and do not start with a tool message (which would join
    /// the assistant message before them).
    pub(crate) fn appended(log: &'a Log, from: usize) -> Session<'a> {
        let (compacted, replacements, details) = (HashSet::new(), HashMap::new(), HashMap::new());
        let mut session = Session { log, leading: Vec::new(), msgs: Vec::new(), compacted, replacements, details };
        session.store(log.entries().skip(from));
        session
    }

    /// Stores `entries` after the messages stored so far.
    fn store(&mut self, entries: impl Iterator<Item = (EntryId, &'a Entry)>) {
        for (id, entry) in entries {
            match entry {
                Entry::Message(m) => match m.role {
                    Role::User | Role::System => self.msgs.push(OcMsg {
                        slot: Slot::Entry(id),
                        kind: Kind::User,
                        message: Some(m),
                        tools: Vec::new(),
                        parts: Vec::new(),
                    }),
                    Role::Assistant => self.msgs.push(OcMsg {
                        slot: Slot::Entry(id),
                        kind: Kind::Assistant,
                        message: Some(m),
                        tools: Vec::new(),
                        parts: m
                            .parts
                            .iter()
                            .filter_map(|p| match p {
                                Part::ToolCall { id, name, args } => {
                                    Some(ToolPart { call_id: id, name, args: Some(args), output: None })
                                }
                                _ => None,
                            })
                            .collect(),
                    }),
                    Role::Tool => {
                        let joins = self
                            .msgs
                            .last()
                            .is_some_and(|last| last.kind == Kind::Assistant && matches!(last.slot, Slot::Entry(_)));
                        if !joins {
                            self.msgs.push(OcMsg {
                                slot: Slot::Entry(id),
                                kind: Kind::Assistant,
                                message: None,
                                tools: Vec::new(),
                                parts: Vec::new(),
                            });
                        }
                        let last = self.msgs.last_mut().expect("pushed above");
                        last.attach_tool(id, m, &self.compacted);
                    }
                },
                Entry::Checkpoint(cp) if self.details.contains_key(&id) => {
                    let after = self.details[&id].after.is_some() && !cp.injected.is_empty();
                    for (slot, kind, message) in [
                        (Slot::Marker(id), Kind::Marker, None),
                        (Slot::Summary(id), Kind::Summary, cp.summary.as_ref()),
                        (Slot::After(id), Kind::After, cp.injected.first()),
                    ] {
                        if kind == Kind::After && !after {
                            continue;
                        }
                        self.msgs.push(OcMsg { slot, kind, message, tools: Vec::new(), parts: Vec::new() });
                    }
                }
                Entry::Checkpoint(_) => {}
            }
        }
    }

    /// Details of the summary checkpoint `cp`.
    pub(crate) fn summary_details(&self, cp: EntryId) -> Option<&SummaryDetails> {
        self.details.get(&cp)
    }

    /// The checkpoint a marker, summary or after message belongs to.
    pub(crate) fn checkpoint_of(msg: &OcMsg<'_>) -> Option<EntryId> {
        match msg.slot {
            Slot::Marker(cp) | Slot::Summary(cp) | Slot::After(cp) => Some(cp),
            Slot::Entry(_) => None,
        }
    }

    /// `filterCompacted`: indices into [`Session::msgs`] of the working view, in the order
    /// OpenCode sends them (`[marker, summary, tail…, everything after the summary]`).
    pub(crate) fn filtered(&self) -> Vec<usize> {
        let mut result = Vec::new();
        let mut completed: HashSet<EntryId> = HashSet::new();
        let mut retain: Option<Slot> = None;
        for i in (0..self.msgs.len()).rev() {
            let msg = &self.msgs[i];
            result.push(i);
            if let Some(r) = retain {
                if msg.slot == r {
                    break;
                }
                continue;
            }
            match msg.slot {
                Slot::Marker(cp) if completed.contains(&cp) => {
                    match self.summary_details(cp).and_then(|d| d.tail_start) {
                        None => break,
                        Some(tail) => {
                            retain = Some(tail);
                            if msg.slot == tail {
                                break;
                            }
                            continue;
                        }
                    }
                }
                // Every recorded summary finished without error: failures are never appended.
                Slot::Summary(cp) => {
                    completed.insert(cp);
                }
                _ => {}
            }
        }
        result.reverse();

        // The reorder step: the newest marker that kept a tail moves before that tail.
        let tail_of = |i: usize| match self.msgs[i].slot {
            Slot::Marker(cp) => self.summary_details(cp).and_then(|d| d.tail_start).map(|t| (cp, t)),
            _ => None,
        };
        let Some(compaction_index) = result.iter().rposition(|&i| tail_of(i).is_some()) else {
            return result;
        };
        let (cp, tail) = tail_of(result[compaction_index]).expect("found above");
        let summary_index = result
            .iter()
            .enumerate()
            .position(|(k, &i)| k > compaction_index && self.msgs[i].slot == Slot::Summary(cp));
        let tail_index = result.iter().position(|&i| self.msgs[i].slot == tail);
        match (summary_index, tail_index) {
            (Some(s), Some(t)) if t < compaction_index && s > compaction_index => result[compaction_index..=s]
                .iter()
                .chain(&result[t..compaction_index])
                .chain(&result[s + 1..])
                .copied()
                .collect(),
            _ => result,
        }
    }

    /// Tool messages in the working view.
    pub(crate) fn visible_tool_messages(&self) -> HashSet<EntryId> {
        self.filtered().into_iter().flat_map(|i| self.msgs[i].tools.iter().map(|(id, _)| *id)).collect()
    }

    fn shown(&self, id: EntryId, message: &Message) -> ViewMessage {
        match self.replacements.get(&id) {
            Some((m, by)) => ViewMessage { origin: Origin::Replaced(id, *by), message: (*m).clone() },
            None => ViewMessage { origin: Origin::Entry(id), message: message.clone() },
        }
    }

    /// The compactbench messages one OpenCode message is sent as.
    pub(crate) fn lower(&self, msg: &OcMsg<'_>, out: &mut Vec<ViewMessage>) {
        match (msg.kind, msg.slot) {
            (Kind::Marker, Slot::Marker(cp)) => {
                out.push(ViewMessage { origin: Origin::Injected(cp), message: Message::user(MARKER_TEXT) });
            }
            (Kind::Summary, Slot::Summary(cp)) => {
                if let Some(m) = msg.message {
                    out.push(ViewMessage { origin: Origin::Summary(cp), message: m.clone() });
                }
            }
            (Kind::After, Slot::After(cp)) => {
                if let Some(m) = msg.message {
                    out.push(ViewMessage { origin: Origin::Injected(cp), message: m.clone() });
                }
            }
            (Kind::User, Slot::Entry(id)) => {
                if let Some(m) = msg.message {
                    out.push(self.shown(id, m));
                }
            }
            (Kind::Assistant, Slot::Entry(id)) => {
                if let Some(m) = msg.message {
                    out.push(self.shown(id, m));
                }
                for (tid, t) in &msg.tools {
                    out.push(self.shown(*tid, t));
                }
                // A call without a result is sent with an error result so the pair is complete.
                // It stands for the assistant message, where OpenCode keeps the tool part, shown
                // through a stand-in no checkpoint made (the request builder makes it).
                for part in msg.parts.iter().filter(|p| p.output.is_none() && p.args.is_some()) {
                    out.push(ViewMessage {
                        origin: Origin::Replaced(id, id),
                        message: Message::tool_result(part.call_id, part.name, INTERRUPTED, true),
                    });
                }
            }
            _ => {}
        }
    }

    /// The working view: the system prompt, then `filterCompacted` lowered.
    pub(crate) fn view(&self) -> View {
        let mut messages = Vec::new();
        for id in &self.leading {
            if let Some(m) = self.log.message(*id) {
                messages.push(self.shown(*id, m));
            }
        }
        for i in self.filtered() {
            self.lower(&self.msgs[i], &mut messages);
        }
        View { messages }
    }
}

/// The newest finished assistant message in storage: a summary, or a received assistant
/// message with its usage. OpenCode's `latest()` picks by message id, i.e. storage order.
pub(crate) enum Finished {
    Summary,
    Assistant(compactbench_core::Usage),
}

/// [`Finished`] for `log`, scanning from the end.
pub(crate) fn last_finished(log: &Log) -> Option<Finished> {
    log.entries().rev().find_map(|(_, e)| match e {
        Entry::Message(m) if m.role == Role::Assistant => m.usage.map(Finished::Assistant),
        Entry::Checkpoint(cp) if cp.kind == CheckpointKind::Summary => Some(Finished::Summary),
        _ => None,
    })
}
