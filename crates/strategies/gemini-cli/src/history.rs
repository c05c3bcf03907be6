//! The view as Gemini CLI's chat history: `Content` entries of role `user` or `model`.
//!
//! `GeminiChat.getHistory(curated)` is what compression and masking read. Our view maps to it
//! as follows: an assistant message is one `model` entry (text, thought and `functionCall`
//! parts); a run of tool messages is one `user` entry of `functionResponse` parts (Gemini CLI
//! sends the responses of one batch together); a user message, and a system message after
//! the leading system prompt, is one `user` entry. The leading system messages are the system
//! instruction, not history. Everything after the newest assistant message is the pending
//! request: `sendMessageStream` checks compression before appending it to the history.

use std::ops::Range;

use compactbench_core::{Part, Role, View, ViewMessage};

/// Role of a Gemini `Content`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Speaker {
    User,
    Model,
}

impl Speaker {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Speaker::User => "user",
            Speaker::Model => "model",
        }
    }
}

/// The key of a `functionResponse.response` object: `{output}` for results, `{error}` for
/// failed tools (`createErrorResponse`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResponseKey {
    Output,
    Error,
}

impl ResponseKey {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ResponseKey::Output => "output",
            ResponseKey::Error => "error",
        }
    }
}

/// One Gemini part.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kind {
    /// `{text}`, or `{text, thought: true}` for reasoning.
    Text { text: String, thought: bool },
    /// `{functionCall: {id, name, args}}`.
    Call { id: String, name: String, args: serde_json::Value },
    /// `{functionResponse: {id, name, response: {<key>: text}}}`.
    Response { id: String, name: String, key: ResponseKey, text: String },
    /// `{inlineData: {mimeType, data}}`, present only by its size.
    Media { mime: String, tokens: u32 },
}

/// A part and where it comes from: (view index, part index), `None` for parts the strategy
/// made up (the summary and the acknowledgement of a new history).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GPart {
    pub(crate) kind: Kind,
    pub(crate) at: Option<(usize, usize)>,
}

impl GPart {
    pub(crate) fn text(text: impl Into<String>) -> GPart {
        GPart { kind: Kind::Text { text: text.into(), thought: false }, at: None }
    }

    pub(crate) fn is_function_response(&self) -> bool {
        matches!(self.kind, Kind::Response { .. })
    }
}

/// One history entry with the view messages it was built from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Content {
    pub(crate) role: Speaker,
    pub(crate) parts: Vec<GPart>,
    pub(crate) members: Vec<usize>,
}

/// The history of a view and the pending request after it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct History {
    pub(crate) contents: Vec<Content>,
    /// View indices of the pending request (not yet in the history).
    pub(crate) pending: Range<usize>,
}

impl History {
    /// `getHistory(curated)` of `view` for a model whose history is thought-stripped and
    /// coalesced when `modern`.
    pub(crate) fn from_view(view: &View, modern: bool, curated: bool) -> History {
        let lead = leading_system(view);
        let pending_start =
            view.messages.iter().rposition(|vm| vm.message.role == Role::Assistant).map_or(lead, |i| i + 1).max(lead);
        History {
            contents: build(&view.messages, lead..pending_start, modern, curated),
            pending: pending_start..view.messages.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.contents.is_empty()
    }
}

/// Number of leading system messages (the system instruction).
pub(crate) fn leading_system(view: &View) -> usize {
    view.messages.iter().take_while(|vm| vm.message.role == Role::System).count()
}

/// Whether `getHistory` strips thoughts and merges same-role entries for `model`
/// (`isGemini2Model || supportsModernFeatures`: Gemini 2.x, Gemini 3 and any model whose name
/// does not start with `gemini-`, i.e. every non-Gemini model the bench runs).
pub(crate) fn is_modern(model: &str) -> bool {
    let m = model.trim();
    let gemini2 = m == "gemini-2" || m.starts_with("gemini-2.");
    let gemini3 = m == "gemini-3" || m.starts_with("gemini-3.") || m.starts_with("gemini-3-");
    gemini2 || gemini3 || !m.starts_with("gemini-")
}

/// The id Gemini CLI stores for a call and its response: `{name}__{id}` (name trimmed, or
/// `generic_tool`), unless it already starts so or is empty. `Turn.handlePendingFunctionCall`
/// and the stream consolidation of `GeminiChat` prefix it; only main-loop requests strip it
/// again (`stripToolCallIdPrefixes`), so compression's split point, its transcript, masking and
/// truncation all read the prefixed id. Found by the black-box run of the CLI: without the
/// prefix our split point differed in 1 of 55 sessions.
pub(crate) fn stored_call_id(name: &str, id: &str) -> String {
    let name = match name.trim() {
        "" => "generic_tool",
        n => n,
    };
    if id.is_empty() || id.starts_with(&format!("{name}__")) {
        id.to_owned()
    } else {
        format!("{name}__{id}")
    }
}

fn convert(part: &Part) -> Kind {
    match part {
        Part::Text { text } => Kind::Text { text: text.clone(), thought: false },
        Part::Reasoning { text } => Kind::Text { text: text.clone(), thought: true },
        Part::ToolCall { id, name, args } => Kind::Call { id: stored_call_id(name, id), name: name.clone(), args: args.clone() },
        Part::ToolResult { call_id, name, text, is_error } => Kind::Response {
            id: stored_call_id(name, call_id),
            name: name.clone(),
            key: if *is_error { ResponseKey::Error } else { ResponseKey::Output },
            text: text.clone(),
        },
        Part::Media { mime, tokens } => Kind::Media { mime: mime.clone(), tokens: *tokens },
    }
}

/// `isValidContent`: a model entry with no parts, or with an empty non-thought text part, is
/// invalid (safety-filtered or empty responses).
fn is_valid(content: &Content) -> bool {
    !content.parts.is_empty()
        && content.parts.iter().all(|p| !matches!(&p.kind, Kind::Text { text, thought: false } if text.is_empty()))
}

/// Builds the history entries of `messages[range]`.
pub(crate) fn build(messages: &[ViewMessage], range: Range<usize>, modern: bool, curated: bool) -> Vec<Content> {
    let mut entries: Vec<Content> = Vec::new();
    let mut previous_was_tool = false;
    for i in range {
        let m = &messages[i].message;
        let role = if m.role == Role::Assistant { Speaker::Model } else { Speaker::User };
        let parts = m.parts.iter().enumerate().map(|(j, p)| GPart { kind: convert(p), at: Some((i, j)) });
        let is_tool = m.role == Role::Tool;
        match entries.last_mut() {
            Some(last) if is_tool && previous_was_tool => {
                last.parts.extend(parts);
                last.members.push(i);
            }
            _ => entries.push(Content { role, parts: parts.collect(), members: vec![i] }),
        }
        previous_was_tool = is_tool;
    }

    if curated {
        // `extractCuratedHistory`: a run of model entries is dropped whole if one is invalid.
        let mut kept = Vec::with_capacity(entries.len());
        let mut run: Vec<Content> = Vec::new();
        let flush = |run: &mut Vec<Content>, kept: &mut Vec<Content>| {
            if run.iter().all(is_valid) {
                kept.append(run);
            }
            run.clear();
        };
        for e in entries {
            if e.role == Speaker::Model {
                run.push(e);
            } else {
                flush(&mut run, &mut kept);
                kept.push(e);
            }
        }
        flush(&mut run, &mut kept);
        entries = kept;
    }

    if !modern {
        return entries;
    }
    // `coalesceConsecutiveRoles(stripThoughts(history))`.
    let mut out: Vec<Content> = Vec::with_capacity(entries.len());
    for mut e in entries {
        e.parts.retain(|p| !matches!(p.kind, Kind::Text { thought: true, .. }));
        match out.last_mut() {
            Some(last) if last.role == e.role => {
                last.parts.append(&mut e.parts);
                last.members.append(&mut e.members);
            }
            _ => out.push(e),
        }
    }
    out
}
