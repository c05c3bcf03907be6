//! The session as Pi sees it: the branch path, the context rebuilt from it
//! (`buildSessionContext`), Pi's per-message estimate (`estimateTokens`) and its reading of
//! provider usage (`calculateContextTokens`, `estimateContextTokens`).

use compactbench_core::estimate::utf16_len;
use compactbench_core::{Checkpoint, Entry, EntryId, Log, Message, Part, Role, Usage, Window};

use crate::Release;

/// Literal wrapper Pi's `convertToLlm` puts around a compaction summary (messages.ts,
/// `COMPACTION_SUMMARY_PREFIX`).
pub(crate) const COMPACTION_SUMMARY_PREFIX: &str =
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
/// Literal closing wrapper (`COMPACTION_SUMMARY_SUFFIX`).
pub(crate) const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";

/// Pi's estimate for one image block in a tool result (and, in 1.6.0, in a user message):
/// 4800 chars (about 1200 tokens).
const IMAGE_CHARS: u64 = 4800;

/// One entry of the branch path.
#[derive(Clone, Copy)]
pub(crate) enum Item<'a> {
    /// A `message` entry.
    Message(&'a Message),
    /// A `compaction` entry (one of our checkpoints).
    Compaction(&'a Checkpoint),
}

/// An entry of the branch path with its log id.
#[derive(Clone, Copy)]
pub(crate) struct PathEntry<'a> {
    pub(crate) id: EntryId,
    pub(crate) item: Item<'a>,
}

impl PathEntry<'_> {
    pub(crate) fn message(&self) -> Option<&Message> {
        match self.item {
            Item::Message(m) => Some(m),
            Item::Compaction(_) => None,
        }
    }
}

/// Pi keeps its system prompt outside the session file, so the branch path is the log without
/// its leading system messages (the runner's system prompt).
pub(crate) fn branch_path(log: &Log) -> Vec<PathEntry<'_>> {
    let mut leading = true;
    log.entries()
        .filter_map(|(id, entry)| match entry {
            Entry::Message(m) if leading && m.role == Role::System => None,
            Entry::Message(m) => {
                leading = false;
                Some(PathEntry { id, item: Item::Message(m) })
            }
            Entry::Checkpoint(c) => {
                leading = false;
                Some(PathEntry { id, item: Item::Compaction(c) })
            }
        })
        .collect()
}

/// A message of Pi's in-memory context: a session message, or a compaction entry seen as its
/// `compactionSummary` message (raw summary, without the wrapper).
#[derive(Clone, Copy)]
pub(crate) enum Context<'a> {
    Message(&'a Message),
    Summary(&'a str),
}

/// A context message with the log entry it comes from.
#[derive(Clone, Copy)]
pub(crate) struct ContextMessage<'a> {
    pub(crate) id: EntryId,
    pub(crate) message: Context<'a>,
}

/// The summary text Pi stored in a compaction entry (`CompactionEntry.summary`). Our
/// checkpoints keep it in `details.summary`; for a checkpoint without it, the summary
/// message's text minus Pi's wrapper stands in.
pub(crate) fn raw_summary(cp: &Checkpoint) -> &str {
    if let Some(s) = cp.details.get("summary").and_then(|v| v.as_str()) {
        return s;
    }
    let text = cp.summary.as_ref().and_then(|m| {
        m.parts.iter().find_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
    });
    match text {
        Some(t) => t
            .strip_prefix(COMPACTION_SUMMARY_PREFIX)
            .and_then(|t| t.strip_suffix(COMPACTION_SUMMARY_SUFFIX))
            .unwrap_or(t),
        None => "",
    }
}

/// `firstKeptEntryId` of a compaction entry. Pi's entries always name one; a checkpoint of
/// another shape keeps nothing from before it.
pub(crate) fn first_kept_entry_id(cp: &Checkpoint) -> Option<EntryId> {
    match cp.window {
        Window::From(id) => Some(id),
        Window::Inherit | Window::Kept(_) => None,
    }
}

/// `buildSessionContext`: with a compaction, its summary first, then the entries before it from
/// `firstKeptEntryId` on (older compaction entries emit nothing), then everything after it.
pub(crate) fn build_session_context<'a>(path: &[PathEntry<'a>]) -> Vec<ContextMessage<'a>> {
    let latest = path.iter().rposition(|e| matches!(e.item, Item::Compaction(_)));
    let as_message = |e: &PathEntry<'a>| match e.item {
        Item::Message(m) => Some(ContextMessage { id: e.id, message: Context::Message(m) }),
        Item::Compaction(_) => None,
    };
    let Some(ci) = latest else {
        return path.iter().filter_map(as_message).collect();
    };
    let Item::Compaction(cp) = path[ci].item else { unreachable!("rposition found a compaction") };
    let mut out = vec![ContextMessage { id: path[ci].id, message: Context::Summary(raw_summary(cp)) }];
    let first_kept = first_kept_entry_id(cp);
    let mut found = false;
    for e in &path[..ci] {
        found |= Some(e.id) == first_kept;
        if found {
            out.extend(as_message(e));
        }
    }
    out.extend(path[ci + 1..].iter().filter_map(as_message));
    out
}

/// The context messages of these path entries, compaction entries as their summaries (the
/// canonical `tokensBefore` input: `getMessageFromEntry` from the previous compaction on).
pub(crate) fn entry_messages<'a>(path: &[PathEntry<'a>]) -> Vec<ContextMessage<'a>> {
    path.iter()
        .map(|e| ContextMessage {
            id: e.id,
            message: match e.item {
                Item::Message(m) => Context::Message(m),
                Item::Compaction(cp) => Context::Summary(raw_summary(cp)),
            },
        })
        .collect()
}

/// A Pi `toolResult` message inside one of our tool messages. Pi stores one result per
/// message; a tool message of ours with several results is read as several Pi messages, each
/// `ToolResult` part opening one, with any loose text or media joining the current one.
pub(crate) struct ToolResultBlock<'a> {
    /// Text blocks, in order (Pi joins them without a separator).
    pub(crate) texts: Vec<&'a str>,
    /// Image blocks.
    pub(crate) images: u64,
}

impl ToolResultBlock<'_> {
    /// Pi's char count: text plus 4800 per image.
    fn chars(&self) -> u64 {
        self.texts.iter().map(|t| utf16_len(t)).sum::<u64>() + IMAGE_CHARS * self.images
    }
}

pub(crate) fn tool_result_blocks(m: &Message) -> Vec<ToolResultBlock<'_>> {
    let mut blocks: Vec<ToolResultBlock<'_>> = Vec::new();
    for part in &m.parts {
        match part {
            Part::ToolResult { text, .. } => blocks.push(ToolResultBlock { texts: vec![text.as_str()], images: 0 }),
            Part::Text { text } => match blocks.last_mut() {
                Some(b) => b.texts.push(text),
                None => blocks.push(ToolResultBlock { texts: vec![text.as_str()], images: 0 }),
            },
            Part::Media { .. } => match blocks.last_mut() {
                Some(b) => b.images += 1,
                None => blocks.push(ToolResultBlock { texts: Vec::new(), images: 1 }),
            },
            Part::Reasoning { .. } | Part::ToolCall { .. } => {}
        }
    }
    blocks
}

/// `JSON.stringify(arguments)`: serde_json's compact form, which matches it for JSON values.
pub(crate) fn json_stringify(v: &serde_json::Value) -> String {
    v.to_string()
}

/// `estimateTokens`: `ceil(chars / 4)` with Pi's per-role char rules (UTF-16 lengths).
/// User: text blocks, plus 4800 per image in 1.6.0 (`estimateTextAndImageContentChars`;
/// earlier releases count text only). Assistant: text, thinking, and for each tool call its
/// name plus its JSON arguments. Tool result: text, plus 4800 per image. A later system
/// message (Pi's own role for prompt changes): its text in 1.6.0; earlier releases have no
/// such role and count it 0.
pub(crate) fn estimate_tokens(m: &Message, release: Release) -> u64 {
    match m.role {
        Role::User => {
            let image = if release == Release::Npm1_6_0 { IMAGE_CHARS } else { 0 };
            let chars: u64 = m
                .parts
                .iter()
                .map(|p| match p {
                    Part::Text { text } => utf16_len(text),
                    Part::Media { .. } => image,
                    _ => 0,
                })
                .sum();
            chars.div_ceil(4)
        }
        Role::Assistant => {
            let chars: u64 = m
                .parts
                .iter()
                .map(|p| match p {
                    Part::Text { text } | Part::Reasoning { text } => utf16_len(text),
                    Part::ToolCall { name, args, .. } => utf16_len(name) + utf16_len(&json_stringify(args)),
                    Part::ToolResult { .. } | Part::Media { .. } => 0,
                })
                .sum();
            chars.div_ceil(4)
        }
        Role::Tool => tool_result_blocks(m).iter().map(|b| b.chars().div_ceil(4)).sum(),
        Role::System if release == Release::Npm1_6_0 => utf16_len(&m.text()).div_ceil(4),
        Role::System => 0,
    }
}

/// `estimateTokens` of a context message; a compaction summary counts its raw summary text.
pub(crate) fn estimate_context_message(m: Context<'_>, release: Release) -> u64 {
    match m {
        Context::Message(m) => estimate_tokens(m, release),
        Context::Summary(s) => utf16_len(s).div_ceil(4),
    }
}

/// Provider usage as Pi's `Usage` type holds it: [`Usage`]'s four counts field for field
/// (`cacheWrite` is ours `cache_write`), and `totalTokens` their sum, as pi-ai's providers fill
/// it (`input + output + cacheRead + cacheWrite`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProviderUsage {
    pub(crate) input: u64,
    pub(crate) output: u64,
    pub(crate) cache_read: u64,
    pub(crate) cache_write: u64,
    pub(crate) total_tokens: u64,
}

impl From<Usage> for ProviderUsage {
    fn from(u: Usage) -> ProviderUsage {
        ProviderUsage {
            input: u.input,
            output: u.output,
            cache_read: u.cache_read,
            cache_write: u.cache_write,
            total_tokens: u.total(),
        }
    }
}

/// `calculateContextTokens`: `totalTokens`, or the sum of the parts when it is 0.
pub(crate) fn calculate_context_tokens(u: &ProviderUsage) -> u64 {
    if u.total_tokens != 0 {
        u.total_tokens
    } else {
        u.input + u.output + u.cache_read + u.cache_write
    }
}

/// `getAssistantUsage`: the usage of an assistant reply unless it was aborted or failed
/// (`stopReason` `"aborted"` or `"error"`, our [`Message::failure`]), even when it carries
/// partial usage, or its usage is all zero. A reply without usage and without a failure
/// marker stands for a failed one too (the convention from before the marker existed).
/// 0.73.1 reads all-zero usage of a completed reply as 0 instead of skipping it; our
/// completed replies always carry usage, so that difference never shows.
pub(crate) fn valid_usage(m: &Message) -> Option<Usage> {
    if m.role != Role::Assistant || m.failure.is_some() {
        return None;
    }
    m.usage.filter(|u| u.total() > 0)
}

/// Whether an assistant message is a failed or aborted reply (see [`valid_usage`]).
pub(crate) fn is_failed_reply(m: &Message) -> bool {
    m.role == Role::Assistant && valid_usage(m).is_none()
}

/// `getLastAssistantUsage` over context messages: index and usage of the newest valid reply.
pub(crate) fn last_valid_usage(messages: &[ContextMessage<'_>]) -> Option<(usize, Usage)> {
    messages.iter().enumerate().rev().find_map(|(i, cm)| match cm.message {
        Context::Message(m) => valid_usage(m).map(|u| (i, u)),
        Context::Summary(_) => None,
    })
}

/// Result of `estimateContextTokens`.
pub(crate) struct ContextEstimate {
    pub(crate) tokens: u64,
    pub(crate) last_usage_index: Option<usize>,
}

/// `estimateContextTokens`: usage of the newest valid reply plus the estimates of every later
/// message; without any valid usage, the sum of all estimates.
pub(crate) fn estimate_context_tokens(messages: &[ContextMessage<'_>], release: Release) -> ContextEstimate {
    match last_valid_usage(messages) {
        Some((i, usage)) => {
            let trailing: u64 = messages[i + 1..].iter().map(|cm| estimate_context_message(cm.message, release)).sum();
            ContextEstimate {
                tokens: calculate_context_tokens(&ProviderUsage::from(usage)) + trailing,
                last_usage_index: Some(i),
            }
        }
        None => ContextEstimate {
            tokens: messages.iter().map(|cm| estimate_context_message(cm.message, release)).sum(),
            last_usage_index: None,
        },
    }
}

/// The characters of the system prompt (the log's leading system messages) as
/// `getCurrentSystemMessage` joins system texts.
pub(crate) fn system_chars(log: &Log) -> u64 {
    joined_chars(log.messages().take_while(|(_, m)| m.role == Role::System).map(|(_, m)| utf16_len(&m.text())))
}

/// `getCurrentSystemMessage`'s content length: the non-empty texts joined by a blank line.
fn joined_chars(lengths: impl Iterator<Item = u64>) -> u64 {
    let (count, sum) = lengths.filter(|&n| n > 0).fold((0u64, 0u64), |(c, s), n| (c + 1, s + n));
    sum + 2 * count.saturating_sub(1)
}

/// `estimateProjectedContextTokens` (1.6.0): the last valid usage plus estimates of what
/// followed it, but only if that reply is newer than the latest compaction; otherwise the
/// current system message (`getCurrentSystemMessage`: the system prompt of `system_chars`
/// characters and every later system message, joined) plus every other projected message.
pub(crate) fn estimate_projected_context_tokens(
    path: &[PathEntry<'_>],
    context: &[ContextMessage<'_>],
    system_chars: u64,
) -> u64 {
    let estimate = estimate_context_tokens(context, Release::Npm1_6_0);
    let latest_compaction = path.iter().rev().find(|e| matches!(e.item, Item::Compaction(_))).map(|e| e.id);
    if let Some(i) = estimate.last_usage_index {
        if latest_compaction.is_none_or(|c| context[i].id > c) {
            return estimate.tokens;
        }
    }
    let system_text = |cm: &ContextMessage<'_>| match cm.message {
        Context::Message(m) if m.role == Role::System => Some(utf16_len(&m.text())),
        _ => None,
    };
    let system = joined_chars(std::iter::once(system_chars).chain(context.iter().filter_map(system_text))).div_ceil(4);
    system + context.iter().filter(|cm| system_text(cm).is_none()).map(|cm| estimate_context_message(cm.message, Release::Npm1_6_0)).sum::<u64>()
}
