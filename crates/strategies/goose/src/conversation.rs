//! Goose's conversation rebuilt from the log: every message ever added, each with its
//! agent-visibility flag, plus the messages compactions added at the point they were added.
//!
//! Goose never deletes: a compaction marks messages agent-invisible (they stay user-visible)
//! and appends new agent-only messages. Replaying the log's checkpoints in order gives the
//! same list; the model sees the agent-visible part of it, which is the view.

use std::collections::HashMap;

use compactbench_core::{Checkpoint, Entry, EntryId, Log, Message, Origin, Part, Role, View, ViewMessage};
use serde_json::Value;

/// `details.op` of a full compaction checkpoint (`compact_messages`).
pub(crate) const OP_COMPACT: &str = "compact";
/// `details.op` of a tool-pair summarization checkpoint.
pub(crate) const OP_TOOL_PAIRS: &str = "tool_pairs";
/// `details.op` of a large-output offload checkpoint.
pub(crate) const OP_OFFLOAD: &str = "offload";

/// The checkpoint's `details.op`.
pub(crate) fn op(cp: &Checkpoint) -> Option<&str> {
    cp.details.get("op").and_then(Value::as_str)
}

/// One message of the conversation, borrowed from the log.
pub(crate) struct Item<'a> {
    pub(crate) origin: Origin,
    pub(crate) message: &'a Message,
    /// Goose's `agent_visible`.
    pub(crate) visible: bool,
    /// A leading system message: Goose's system prompt, rebuilt every turn and never part of
    /// the conversation, so never hidden, counted or summarized.
    pub(crate) system: bool,
}

/// The whole conversation, visible and hidden.
pub(crate) struct Conversation<'a> {
    pub(crate) items: Vec<Item<'a>>,
}

/// The conversation of `log`: messages in order, each checkpoint's effect where it sits.
/// Replacements (offloaded outputs) stand in for their message everywhere, later ones winning,
/// because Goose rewrites a large output before it ever enters the conversation.
pub(crate) fn conversation(log: &Log) -> Conversation<'_> {
    let mut replaced: HashMap<EntryId, (&Message, EntryId)> = HashMap::new();
    for (id, cp) in log.checkpoints() {
        for r in &cp.replacements {
            replaced.insert(r.entry, (&r.message, id));
        }
    }
    let mut items: Vec<Item<'_>> = Vec::new();
    // Item of each log message, by entry: a tool-pair summary hides a few of them by id.
    let mut item_of: Vec<Option<usize>> = vec![None; log.len()];
    // A full compaction hides every item before it but system ones, and nothing ever shows an
    // item again, so only the newest compaction's mark matters: applied once at the end
    // rather than over every item at every compaction.
    let mut compacted_before = 0;
    let mut leading = true;
    for (id, entry) in log.entries() {
        match entry {
            Entry::Message(m) => {
                let system = leading && m.role == Role::System;
                leading = system;
                let (origin, message) = match replaced.get(&id) {
                    Some((r, by)) => (Origin::Replaced(id, *by), *r),
                    None => (Origin::Entry(id), m),
                };
                item_of[id.index()] = Some(items.len());
                items.push(Item { origin, message, visible: true, system });
            }
            Entry::Checkpoint(cp) => match op(cp) {
                Some(OP_COMPACT) => {
                    compacted_before = items.len();
                    if let Some(s) = &cp.summary {
                        items.push(Item { origin: Origin::Summary(id), message: s, visible: true, system: false });
                    }
                    push_injected(&mut items, id, cp);
                }
                Some(OP_TOOL_PAIRS) => {
                    for entry in hidden(cp) {
                        if let Some(i) = item_of.get(entry.index()).copied().flatten() {
                            items[i].visible = false;
                        }
                    }
                    push_injected(&mut items, id, cp);
                }
                _ => {}
            },
        }
    }
    for item in items[..compacted_before].iter_mut().filter(|i| !i.system) {
        item.visible = false;
    }
    Conversation { items }
}

/// The messages of `view`, the agent-visible conversation of `log`, without the system prompt
/// (the log's leading system messages): what Goose's checks read.
pub(crate) fn agent_messages<'v>(log: &Log, view: &'v View) -> Vec<&'v Message> {
    let conversed = log.messages().find(|(_, m)| m.role != Role::System).map(|(id, _)| id);
    let system = |e: EntryId| conversed.is_none_or(|c| e < c);
    view.messages.iter().filter(|m| !m.origin.entry().is_some_and(system)).map(|m| &m.message).collect()
}

/// The log messages a tool-pair summary hides.
pub(crate) fn hidden(cp: &Checkpoint) -> impl Iterator<Item = EntryId> + '_ {
    let entries = cp.details.get("hidden").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_u64);
    entries.filter_map(|e| u32::try_from(e).ok().map(EntryId))
}

fn push_injected<'a>(items: &mut Vec<Item<'a>>, id: EntryId, cp: &'a Checkpoint) {
    items.extend(cp.injected.iter().map(|m| Item {
        origin: Origin::Injected(id),
        message: m,
        visible: true,
        system: false,
    }));
}

impl Conversation<'_> {
    /// What the model sees: the system prompt and every agent-visible message.
    pub(crate) fn view(&self) -> View {
        View {
            messages: self
                .items
                .iter()
                .filter(|i| i.visible)
                .map(|i| ViewMessage { origin: i.origin, message: i.message.clone() })
                .collect(),
        }
    }

    /// The conversation as Goose stores it (system prompt excluded): the tool messages that
    /// answer one assistant message form one user message, as Goose's tool execution batches
    /// a turn's responses into one message.
    pub(crate) fn goose_messages(&self) -> Vec<GooseMessage<'_>> {
        let mut out: Vec<GooseMessage<'_>> = Vec::new();
        for (index, item) in self.items.iter().enumerate().filter(|(_, i)| !i.system) {
            let tool = item.message.role == Role::Tool;
            if let Some(last) = out.last_mut() {
                if tool && last.tool_batch && last.visible == item.visible {
                    last.items.push(index);
                    last.parts.extend(item.message.parts.iter());
                    continue;
                }
            }
            out.push(GooseMessage {
                role: if item.message.role == Role::Assistant { GooseRole::Assistant } else { GooseRole::User },
                items: vec![index],
                parts: item.message.parts.iter().collect(),
                visible: item.visible,
                tool_batch: tool,
                origin: item.origin,
            });
        }
        out
    }
}

/// Goose's roles: tool responses and notices travel in user messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GooseRole {
    User,
    Assistant,
}

impl GooseRole {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            GooseRole::User => "user",
            GooseRole::Assistant => "assistant",
        }
    }
}

/// One Goose message: one log message, or a run of tool messages batched into one.
pub(crate) struct GooseMessage<'a> {
    pub(crate) role: GooseRole,
    /// Indices into [`Conversation::items`].
    pub(crate) items: Vec<usize>,
    pub(crate) parts: Vec<&'a Part>,
    pub(crate) visible: bool,
    tool_batch: bool,
    /// Origin of its first item.
    pub(crate) origin: Origin,
}

impl GooseMessage<'_> {
    /// Has a text part and no tool request or response (`has_text_only`).
    pub(crate) fn text_only(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Text { .. }))
            && !self.parts.iter().any(|p| matches!(p, Part::ToolCall { .. } | Part::ToolResult { .. }))
    }

    pub(crate) fn has_tool_response(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::ToolResult { .. }))
    }

    pub(crate) fn request_ids(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
    }

    pub(crate) fn response_ids(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
    }

    /// Text parts joined by newlines, if any (`extract_text`).
    pub(crate) fn text(&self) -> Option<String> {
        let texts: Vec<&str> = self
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        (!texts.is_empty()).then(|| texts.join("\n"))
    }

    /// `format_message_for_compacting`: `[role]: ` then one line group per part; reasoning is
    /// dropped, media become `[image: <mime>]`.
    pub(crate) fn format(&self) -> String {
        let lines: Vec<String> = self
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.clone()),
                Part::Reasoning { .. } => None,
                Part::ToolCall { name, args, .. } => Some(format!("tool_request({name}): {args}")),
                Part::ToolResult { text, .. } => Some(format!("tool_response: {text}")),
                // Media in a tool message belong to the tool result, whose text is shown.
                Part::Media { .. } if self.tool_batch => None,
                Part::Media { mime, .. } => Some(format!("[image: {mime}]")),
            })
            .collect();
        let role = self.role.as_str();
        if lines.is_empty() {
            format!("[{role}]: <empty message>")
        } else {
            format!("[{role}]: {}", lines.join("\n"))
        }
    }

    /// Log entries of this message (synthetic messages have none).
    pub(crate) fn entries<'c>(&self, conversation: &'c Conversation<'_>) -> impl Iterator<Item = EntryId> + 'c {
        let items: Vec<usize> = self.items.clone();
        items.into_iter().filter_map(|i| conversation.items[i].origin.entry())
    }
}

/// The newest log message that opens a turn: a user message with text and no tool content
/// (Goose's kickoff). `None` when there is none.
pub(crate) fn kickoff(log: &Log) -> Option<EntryId> {
    log.messages()
        .rev()
        .find(|(_, m)| {
            m.role == Role::User
                && m.parts.iter().any(|p| matches!(p, Part::Text { .. }))
                && !m.parts.iter().any(|p| matches!(p, Part::ToolCall { .. } | Part::ToolResult { .. }))
        })
        .map(|(id, _)| id)
}
