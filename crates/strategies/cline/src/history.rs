//! Cline's API conversation history, rebuilt from the log.
//!
//! Cline stores Anthropic-format messages that strictly alternate: one assistant message per
//! model response, and one user message per request holding every tool result of the previous
//! response followed by any user text. Every index rule of the `ContextManager` (the first
//! pair at 0 and 1, the deleted range, the edit store) counts in that index space, so the log
//! is grouped the same way here:
//!
//! - every assistant log message is one Cline message (its parts are the content blocks, in
//!   order: reasoning = a thinking block, text, tool_use);
//! - every maximal run of user, tool and (non-leading) system log messages is one Cline user
//!   message; its blocks are the parts of those log messages in order, so a tool result is a
//!   `tool_result` block whose text is its content's first text item;
//! - leading system messages are the system prompt, which Cline rebuilds per request and never
//!   stores, so they are not part of the history;
//! - an auto-condense checkpoint adds the two messages Cline stores that our log does not:
//!   the assistant's `summarize_task` call and the user message carrying its result (the
//!   summary), at the checkpoint's position.

use std::collections::HashMap;

use compactbench_core::tools::{tool_kind, tool_path, ToolKind};
use compactbench_core::{EntryId, Message, Part, Role};

/// Role of a Cline (Anthropic) message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Speaker {
    User,
    Assistant,
}

/// Where a content block comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    /// Part `.1` of log message `.0`.
    Entry(EntryId, usize),
    /// A message our log does not hold (auto-condense).
    Virtual,
}

/// One content block of a Cline message.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Block {
    pub(crate) part: Part,
    pub(crate) src: Src,
    /// The `[<tool> for '<path>'] Result:` line Cline writes in front of every tool result,
    /// plus its newline, when the log's result text does not carry it itself (see
    /// [`tool_header`]). Empty otherwise.
    prefix: String,
}

impl Block {
    fn new(part: Part, src: Src, prefix: String) -> Block {
        Block { part, src, prefix }
    }

    /// Cline's `getTextFromBlock`: the text of a text block, or the first text item of a
    /// `tool_result`. Empty text counts as none, as JavaScript's truthiness test does.
    pub(crate) fn text(&self) -> Option<String> {
        let text = match &self.part {
            Part::Text { text } => text.clone(),
            Part::ToolResult { text, .. } => format!("{}{}", self.prefix, text),
            _ => return None,
        };
        (!text.is_empty()).then_some(text)
    }

    /// Cline's `setTextInBlock`: replaces the text of a text or `tool_result` block; other
    /// blocks (tool_use, thinking, images) are left alone and `false` is returned. A derived
    /// tool header is taken off again, because our model shows it through the call instead.
    pub(crate) fn set_text(&mut self, new: &str) -> bool {
        match &mut self.part {
            Part::Text { text } => {
                *text = new.to_owned();
                true
            }
            Part::ToolResult { text, .. } => {
                *text = new.strip_prefix(self.prefix.as_str()).unwrap_or(new).to_owned();
                true
            }
            _ => false,
        }
    }

    pub(crate) fn is_tool_result(&self) -> bool {
        matches!(self.part, Part::ToolResult { .. })
    }
}

/// One Cline message.
#[derive(Clone, Debug)]
pub(crate) struct ClineMessage {
    pub(crate) speaker: Speaker,
    pub(crate) blocks: Vec<Block>,
    /// Log messages it was built from, in order (empty for virtual messages).
    pub(crate) entries: Vec<EntryId>,
    /// Whether our log lacks this message (auto-condense's call and result).
    pub(crate) is_virtual: bool,
}

/// Cline's `parseToolCallWithFormat`: matches `^\[([^\s]+) for '([^']+)'\] Result:` and
/// returns (tool, path, content block index, header). The content is in the same block when
/// the text goes on after the header (index 0), else in the next block (index 1, the old format).
pub(crate) fn parse_tool_header(text: &str) -> Option<(&str, &str, usize, &str)> {
    let rest = text.strip_prefix('[')?;
    let name_end = rest.find(char::is_whitespace)?;
    let name = &rest[..name_end];
    if name.is_empty() {
        return None;
    }
    let rest = rest[name_end..].strip_prefix(" for '")?;
    let path_end = rest.find('\'')?;
    let path = &rest[..path_end];
    if path.is_empty() {
        return None;
    }
    let rest = rest[path_end + 1..].strip_prefix("] Result:")?;
    let header = &text[..text.len() - rest.len()];
    let content_block = if rest.is_empty() { 1 } else { 0 };
    Some((name, path, content_block, header))
}

/// The header Cline's `ToolResultUtils.pushToolResult` puts in front of a file tool's result
/// (`getDescription` of the read and write handlers, then ` Result:` and a newline), derived
/// from the result's tool and its call's path argument. The session may have been recorded
/// with another harness's tool names, so the tool is mapped to Cline's own name by what it
/// does (`read_file`, `write_to_file`, `replace_in_file`). Results whose text already starts
/// with a header (transcripts recorded from Cline) get none; other tools get none because the
/// fold ignores them.
fn tool_header(name: &str, args: Option<&serde_json::Value>, text: &str) -> String {
    let cline_name = match tool_kind(name) {
        ToolKind::Read => "read_file",
        ToolKind::Write => "write_to_file",
        ToolKind::Edit => "replace_in_file",
        _ => return String::new(),
    };
    if parse_tool_header(text).is_some() {
        return String::new();
    }
    match args.and_then(tool_path) {
        Some(path) => format!("[{cline_name} for '{path}'] Result:\n"),
        None => String::new(),
    }
}

/// The history Cline would have stored for a log, built one log entry at a time (`task.rs`).
#[derive(Clone, Default)]
pub(crate) struct History {
    pub(crate) messages: Vec<ClineMessage>,
    /// Tool call arguments by call id, for the headers of their results.
    calls: HashMap<String, serde_json::Value>,
    /// Whether the last Cline message is a user message still collecting log messages.
    open_user: bool,
    /// Whether a message other than a leading system message (the system prompt, which Cline
    /// never stores) was seen.
    past_leading: bool,
}

impl History {
    /// Takes in log message `id`, the log's entries before it taken in already.
    pub(crate) fn push(&mut self, id: EntryId, m: &Message) {
        if !self.past_leading && m.role == Role::System {
            return;
        }
        self.past_leading = true;
        let calls = &self.calls;
        let blocks = m.parts.iter().enumerate().map(|(i, part)| {
            let prefix = match part {
                Part::ToolResult { call_id, name, text, .. } => tool_header(name, calls.get(call_id), text),
                _ => String::new(),
            };
            Block::new(part.clone(), Src::Entry(id, i), prefix)
        });
        let out = &mut self.messages;
        if m.role == Role::Assistant {
            let blocks = blocks.collect();
            for part in &m.parts {
                if let Part::ToolCall { id, args, .. } = part {
                    self.calls.insert(id.clone(), args.clone());
                }
            }
            out.push(ClineMessage { speaker: Speaker::Assistant, blocks, entries: vec![id], is_virtual: false });
            self.open_user = false;
        } else if self.open_user {
            let last = out.last_mut().expect("an open user message exists");
            last.blocks.extend(blocks);
            last.entries.push(id);
        } else {
            let blocks = blocks.collect();
            out.push(ClineMessage { speaker: Speaker::User, blocks, entries: vec![id], is_virtual: false });
            self.open_user = true;
        }
    }

    /// Takes in an auto-condense: the two messages it adds to Cline's history, the assistant's
    /// `summarize_task` call and the user message with its result (`summary`, as sent).
    pub(crate) fn push_condense(&mut self, summary: String) {
        let (blocks, entries) = (Vec::new(), Vec::new());
        self.messages.push(ClineMessage { speaker: Speaker::Assistant, blocks, entries, is_virtual: true });
        let blocks = vec![Block::new(Part::text(summary), Src::Virtual, String::new())];
        self.messages.push(ClineMessage { speaker: Speaker::User, blocks, entries: Vec::new(), is_virtual: true });
        self.open_user = false;
    }
}

/// Roles only, for the range arithmetic.
pub(crate) fn speakers(history: &[ClineMessage]) -> Vec<Speaker> {
    history.iter().map(|m| m.speaker).collect()
}
