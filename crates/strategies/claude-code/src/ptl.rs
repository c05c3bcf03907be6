//! The summarizer call with Claude Code's prompt-too-long recovery
//! (`truncateHeadForPTLRetry`, `groupMessagesByApiRound`, `MAX_PTL_RETRIES`, as reverse
//! engineered).

use compactbench_core::{Error, ErrorKind, Message, Role, StopReason, Summarizer, SummarizerUsage, SummaryContext, SummaryRequest};

use crate::count::message_tokens;
use crate::wire;

/// `MAX_PTL_RETRIES`.
pub(crate) const MAX_PTL_RETRIES: u32 = 3;

/// The synthetic user turn put before a remainder that starts with an assistant message
/// (paraphrased).
pub(crate) const RETRY_MARKER: &str = "[The oldest part of the conversation was left out so that this summary request fits.]";

/// What the summarizer produced, and what it cost.
pub(crate) struct Outcome {
    pub(crate) text: String,
    pub(crate) usage: SummarizerUsage,
    /// Prompt-too-long retries it took.
    pub(crate) retries: u32,
    pub(crate) stop: StopReason,
    /// Messages dropped from the head in total.
    pub(crate) dropped: usize,
}

/// One summarizer call.
pub(crate) struct Call<'a> {
    pub(crate) purpose: &'a str,
    pub(crate) system: &'a str,
    pub(crate) instructions: &'a str,
    pub(crate) max_output_tokens: u64,
}

/// Whether an error is the provider's prompt-too-long rejection.
pub(crate) fn is_prompt_too_long(message: &str) -> bool {
    message.to_ascii_lowercase().contains("prompt is too long")
}

/// The gap `N − M` of an error reading `prompt is too long: N tokens > M maximum`.
pub(crate) fn token_gap(message: &str) -> Option<u64> {
    let lower = message.to_ascii_lowercase();
    let rest = &lower[lower.find("prompt is too long")? + "prompt is too long".len()..];
    let start = rest.find(|c: char| c.is_ascii_digit())?;
    let rest = &rest[start..];
    let (actual, rest) = split_number(rest)?;
    let rest = rest.trim_start().strip_prefix("token")?;
    let rest = rest.strip_prefix('s').unwrap_or(rest).trim_start().strip_prefix('>')?.trim_start();
    let (limit, _) = split_number(rest)?;
    actual.checked_sub(limit).filter(|g| *g > 0)
}

fn split_number(s: &str) -> Option<(u64, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    Some((s[..end].parse().ok()?, &s[end..]))
}

/// `groupMessagesByApiRound`: a new group starts at each assistant message (one API
/// response), so a call and the results answering it stay together.
pub(crate) fn api_round_groups(messages: &[Message]) -> Vec<Vec<Message>> {
    let mut groups: Vec<Vec<Message>> = Vec::new();
    for m in messages {
        match groups.last_mut() {
            Some(group) if m.role != Role::Assistant => group.push(m.clone()),
            _ => groups.push(vec![m.clone()]),
        }
    }
    groups
}

fn is_marker(m: &Message) -> bool {
    m.role == Role::User && m.text() == RETRY_MARKER
}

/// `truncateHeadForPTLRetry`: drops the oldest groups, enough to cover `gap` when known or
/// else a fifth of them (at least one), always keeping one; `None` when nothing can go.
pub(crate) fn truncate_head(messages: &[Message], gap: Option<u64>) -> Option<Vec<Message>> {
    // A marker from an earlier retry is not conversation.
    let input = match messages.first() {
        Some(first) if messages.len() > 1 && is_marker(first) => &messages[1..],
        _ => messages,
    };
    if input.len() < 2 {
        return None;
    }
    let groups = api_round_groups(input);
    if groups.len() < 2 {
        return None;
    }
    let drop = match gap {
        Some(gap) => {
            let mut covered = 0;
            let mut n = 0;
            for g in &groups {
                covered += g.iter().map(message_tokens).sum::<u64>();
                n += 1;
                if covered >= gap {
                    break;
                }
            }
            n
        }
        None => (groups.len() / 5).max(1),
    };
    let drop = drop.min(groups.len() - 1);
    let remaining: Vec<Message> = groups.into_iter().skip(drop).flatten().collect();
    if remaining.first().is_some_and(|m| m.role == Role::Assistant) {
        let mut out = vec![Message::user(RETRY_MARKER)];
        out.extend(remaining);
        return Some(out);
    }
    Some(remaining)
}

/// Calls the summarizer on `messages`, retrying after prompt-too-long rejections with the
/// head truncated, at most [`MAX_PTL_RETRIES`] times. The request is sent whatever its size:
/// only the provider's rejection (the runner's, by exact count) truncates.
pub(crate) fn summarize(summarizer: &dyn Summarizer, call: &Call<'_>, messages: Vec<Message>) -> Result<Outcome, Error> {
    let mut messages = messages;
    let mut usage = SummarizerUsage::default();
    let mut retries = 0;
    let original = messages.len();
    loop {
        let request = SummaryRequest {
            purpose: call.purpose.into(),
            // spec (d): a forked call that replays the conversation (prompt-cache reuse) with the instruction appended.
            context: SummaryContext::Prefix,
            system: call.system.into(),
            transcript: wire::transcript(&messages),
            instructions: call.instructions.into(),
            max_output_tokens: call.max_output_tokens,
        };
        match summarizer.summarize(&request) {
            Ok(summary) => {
                usage.add(SummarizerUsage { calls: 1, failures: 0, input_tokens: summary.input_tokens, output_tokens: summary.output_tokens });
                if summary.text.trim().is_empty() {
                    return Err(Error::new(
                        ErrorKind::EmptySummary,
                        "Failed to generate conversation summary: the response held no text",
                    ));
                }
                let dropped = original.saturating_sub(messages.iter().filter(|m| !is_marker(m)).count());
                return Ok(Outcome { text: summary.text, usage, retries, stop: summary.stop, dropped });
            }
            Err(e) if e.kind == ErrorKind::ContextOverflow || is_prompt_too_long(&e.message) => {
                usage.add(SummarizerUsage { calls: 1, failures: 1, ..SummarizerUsage::default() });
                retries += 1;
                let truncated = (retries <= MAX_PTL_RETRIES)
                    .then(|| truncate_head(&messages, token_gap(&e.message)))
                    .flatten();
                match truncated {
                    Some(t) => messages = t,
                    None => {
                        return Err(Error::new(
                            ErrorKind::Other,
                            format!("Conversation too long for a summary even after dropping its oldest turns ({})", e.message),
                        ))
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
}
