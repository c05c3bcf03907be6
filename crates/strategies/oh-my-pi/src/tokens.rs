//! oh-my-pi's local token estimator (`Tokenizer` in `@oh-my-pi/pi-agent-core` `src/tokenizer.ts`)
//! and its reading of provider usage (`calculateContextTokens`, `calculatePromptTokens`,
//! `hasContextTokenUsage` in `src/compaction/compaction.ts`).
//!
//! Models without a catalog tokenizer family (and every model under test) use the byte
//! heuristic: each text fragment counts `ceil(utf8_bytes / 4)` (written `(bytes + 3) >> 2`),
//! fragments rounded separately and summed; an image adds a fixed 1200.

use compactbench_core::{Message, Part, Role, Usage};

/// `IMAGE_TOKEN_ESTIMATE`: what one image block is charged.
pub(crate) const IMAGE_TOKEN_ESTIMATE: u64 = 1200;

/// `FRAME_TOKEN_ESTIMATE` (`@oh-my-pi/snapcompact`): what one snapcompact frame attached to a
/// compaction summary is charged.
pub(crate) const FRAME_TOKEN_ESTIMATE: u64 = 5024;

/// `countTokens(text)` for one fragment: `(utf8_bytes + 3) >> 2`.
pub(crate) fn count_text(text: &str) -> u64 {
    (text.len() as u64 + 3) >> 2
}

/// `countTokens(fragments)`: each fragment rounded up on its own, then summed.
pub(crate) fn count_fragments<'s>(fragments: impl IntoIterator<Item = &'s str>) -> u64 {
    fragments.into_iter().map(count_text).sum()
}

/// `countMessage(message)` with oh-my-pi's per-role fragments.
///
/// - user (and a mid-log system message, read as oh-my-pi's `developer` role): non-empty text
///   blocks, plus 1200 per image;
/// - assistant: every text block, thinking text, and for each tool call its name and
///   `JSON.stringify(arguments)` (our messages carry no thinking signatures or redacted
///   thinking, so `excludeEncryptedReasoning` changes nothing here);
/// - tool results: non-empty text blocks, plus 1200 per image.
pub(crate) fn count_message(m: &Message) -> u64 {
    let mut extra = 0;
    let mut fragments: Vec<&str> = Vec::new();
    match m.role {
        Role::User | Role::System | Role::Tool => {
            for part in &m.parts {
                match part {
                    Part::Text { text } | Part::ToolResult { text, .. } if !text.is_empty() => fragments.push(text),
                    Part::Media { .. } => extra += IMAGE_TOKEN_ESTIMATE,
                    _ => {}
                }
            }
        }
        Role::Assistant => {
            let mut args = Vec::new();
            for part in &m.parts {
                match part {
                    Part::Text { text } | Part::Reasoning { text } => fragments.push(text),
                    Part::ToolCall { name, args: a, .. } => {
                        fragments.push(name);
                        args.push(a.to_string());
                    }
                    Part::ToolResult { .. } | Part::Media { .. } => {}
                }
            }
            return extra + count_fragments(fragments) + args.iter().map(|a| count_text(a)).sum::<u64>();
        }
    }
    extra + count_fragments(fragments)
}

/// `countMessage` of a `compactionSummary` message: its raw summary text plus 5024 per
/// snapcompact frame (this crate never produces frames, so callers pass 0).
pub(crate) fn count_compaction_summary(summary: &str, frames: u64) -> u64 {
    count_text(summary) + frames * FRAME_TOKEN_ESTIMATE
}

/// `calculateContextTokens(usage)`: our usage has no `contextTokens`, no `totalTokens` apart
/// from its parts and no orchestration tokens, so this is `input + output + cacheRead +
/// cacheWrite` (pi-agent-core `compaction/compaction.ts`).
pub(crate) fn context_tokens(u: &Usage) -> u64 {
    u.total()
}

/// `calculatePromptTokens(usage)`: `input + cacheRead + cacheWrite` when positive, else the
/// context tokens.
pub(crate) fn prompt_tokens(u: &Usage) -> u64 {
    let prompt = u.prompt();
    if prompt > 0 {
        prompt
    } else {
        context_tokens(u)
    }
}

/// `hasContextTokenUsage(usage)`.
fn has_context_usage(u: &Usage) -> bool {
    u.prompt() > 0 || context_tokens(u) > u.output
}

/// `getAssistantUsage`: an assistant reply's usage unless it failed or was aborted
/// (`stopReason` `"aborted"` or `"error"`, our [`Message::failure`]), skipped even when it
/// carries partial usage (unlike Pi's pre-prompt check, oh-my-pi never reads it). A reply
/// without usage (or with all-zero usage) and without a failure marker stands for a failed
/// one too, the convention from before the marker existed; oh-my-pi itself skips no
/// all-zero usage of a completed reply, but our completed replies always carry usage.
pub(crate) fn valid_usage(m: &Message) -> Option<Usage> {
    if m.role != Role::Assistant || m.failure.is_some() {
        return None;
    }
    m.usage.filter(|u| u.total() > 0)
}

/// `isTranscriptUsageAnchor`: a good reply whose usage carries context numbers.
pub(crate) fn is_usage_anchor(m: &Message) -> bool {
    valid_usage(m).is_some_and(|u| has_context_usage(&u))
}
