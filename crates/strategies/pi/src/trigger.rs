//! When Pi compacts: `AgentSession._checkCompaction` (after each agent run and before a new
//! prompt), `shouldCompact`, and the overflow recovery path with `isContextOverflow`
//! (packages/ai overflow.ts).

use compactbench_core::{Failure, Log, Message, Role};

use crate::session::{
    branch_path, build_session_context, calculate_context_tokens, estimate_context_tokens,
    estimate_projected_context_tokens, is_failed_reply, system_chars, valid_usage, Context, ProviderUsage,
};
use crate::{PiConfig, Release};

/// Why Pi compacts automatically (`_runAutoCompaction(reason)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// Context over `window − reserveTokens`; no retry.
    Threshold,
    /// The provider rejected the request as too long; compact and retry.
    Overflow,
    /// `/compact [instructions]`: `AgentSession.compact(customInstructions)`, no threshold.
    Manual,
}

impl Trigger {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Trigger::Threshold => "threshold",
            Trigger::Overflow => "overflow",
            Trigger::Manual => "manual",
        }
    }
}

/// `shouldCompact`: `enabled && contextTokens > contextWindow − reserveTokens` (strict).
pub(crate) fn should_compact(context_tokens: u64, context_window: u64, config: &PiConfig) -> bool {
    config.enabled && i128::from(context_tokens) > i128::from(context_window) - i128::from(config.reserve_tokens)
}

/// `_overflowRecoveryAttempted`, read back from the log. Pi sets the flag when it starts an
/// overflow recovery and clears it when a user message starts or a reply arrives that is not
/// an error. So recovery was already attempted when an overflow checkpoint lies after the
/// newest user message and after the newest valid reply.
pub(crate) fn overflow_attempted(log: &Log) -> bool {
    // Cleared by a reply whose `stopReason` is not `"error"`: an aborted one too.
    let reset = log
        .messages()
        .filter(|(_, m)| m.role == Role::User || valid_usage(m).is_some() || m.failure == Some(Failure::Aborted))
        .map(|(id, _)| id)
        .next_back();
    log.checkpoints().any(|(id, cp)| {
        Some(id) > reset && cp.details.get("reason").and_then(|r| r.as_str()) == Some(Trigger::Overflow.as_str())
    })
}

/// The check Pi runs on the last assistant message after an agent run (`agent_end`) and
/// again before sending a new prompt. Both happen at the runner's `TurnEnd`, on the same
/// message; the second can only repeat the first, so one check stands for both. An aborted
/// reply is the exception: the first check skips it (`skipAbortedCheck`), the pre-prompt one
/// (`_checkCompaction(lastAssistant, false)`) reads it, so the aborted reply is checked as the
/// pre-prompt check sees it: its partial usage directly (1.6.0: unless it is all zero, then
/// the estimate as for an errored reply; 0.73.1 and 0.58: always directly).
pub(crate) fn check_turn_end(log: &Log, config: &PiConfig, release: Release, window: u64) -> Option<Trigger> {
    if !config.enabled {
        return None;
    }
    let path = branch_path(log);
    let context = build_session_context(&path);
    let (assistant_id, assistant) = context.iter().rev().find_map(|cm| match cm.message {
        Context::Message(m) if m.role == Role::Assistant => Some((cm.id, m)),
        _ => None,
    })?;
    // Stale usage guard: a reply older than the latest compaction describes the context from
    // before it (Pi compares timestamps; log order says the same).
    let latest_compaction = log.last_checkpoint().map(|(id, _)| id);
    if latest_compaction.is_some_and(|c| assistant_id < c) {
        return None;
    }

    if is_context_overflow(assistant, window, release) {
        // A second overflow before any user message or good reply: Pi reports "Context
        // overflow recovery failed after one compact-and-retry attempt…" and stops.
        return (!overflow_attempted(log)).then_some(Trigger::Overflow);
    }

    let direct = assistant.usage.map_or(0, |u| calculate_context_tokens(&ProviderUsage::from(u)));
    let aborted_direct =
        assistant.failure == Some(Failure::Aborted) && (release != Release::Npm1_6_0 || direct > 0);
    let context_tokens = if aborted_direct {
        direct
    } else if is_failed_reply(assistant) {
        // A failed reply has no usage: estimate from the last good reply plus what followed,
        // unless there is none or it predates the latest compaction.
        let estimate = estimate_context_tokens(&context, release);
        let usage_index = estimate.last_usage_index?;
        if latest_compaction.is_some_and(|c| context[usage_index].id < c) {
            return None;
        }
        estimate.tokens
    } else {
        calculate_context_tokens(&ProviderUsage::from(assistant.usage?))
    };
    should_compact(context_tokens, window, config).then_some(Trigger::Threshold)
}

/// 1.6.0's `_compactBeforeNextAssistantResponse`: before each next model call of a run (after
/// tool results; the first call after a user message follows the turn-end check instead), a
/// threshold compaction if the projected context estimate exceeds `window − reserveTokens`.
pub(crate) fn check_next_turn(log: &Log, config: &PiConfig, window: u64) -> Option<Trigger> {
    let (_, newest) = log.messages().next_back()?;
    if !config.enabled || window == 0 || newest.role != Role::Tool {
        return None;
    }
    let path = branch_path(log);
    let tokens = estimate_projected_context_tokens(&path, &build_session_context(&path), system_chars(log));
    should_compact(tokens, window, config).then_some(Trigger::Threshold)
}

/// `isContextOverflow(message, contextWindow)`: a failed reply whose error text matches a
/// provider's overflow message, or a good reply whose prompt (`input + cacheRead`) exceeds
/// the window ("silent overflow"; pi-ai `utils/overflow.js` leaves `cacheWrite` out, so a
/// prompt that only cache writes push past the window is no overflow). A failed reply's error
/// text is its message text here; an aborted reply is never an overflow.
pub(crate) fn is_context_overflow(m: &Message, window: u64, release: Release) -> bool {
    // Pi tests the error text of `stopReason: "error"` and the usage of `"stop"` only.
    if m.failure == Some(Failure::Aborted) {
        return false;
    }
    if is_failed_reply(m) {
        let text = m.text().to_ascii_lowercase();
        // 1.6.0 adds patterns (LiteLLM, Together, z.ai, DashScope, any HTTP 413); not
        // modelled: it reads 0.73.1's list (see the crate docs).
        let excluded = match release {
            Release::Npm1_6_0 | Release::Npm0_73_1 => NON_OVERFLOW_0_73.iter().any(|p| p.matches(&text)),
            Release::Canonical0_58 => false,
        };
        let patterns = match release {
            Release::Npm1_6_0 | Release::Npm0_73_1 => OVERFLOW_0_73,
            Release::Canonical0_58 => OVERFLOW_0_58,
        };
        if !text.is_empty() && !excluded && patterns.iter().any(|p| p.matches(&text)) {
            return true;
        }
        return false;
    }
    match m.usage {
        Some(u) if window > 0 => u.input + u.cache_read > window,
        _ => false,
    }
}

/// A piece of one of Pi's case-insensitive overflow regexes. The handful of regex features
/// they use are matched by hand (the crate takes no regex dependency).
#[derive(Clone, Copy)]
enum Tok {
    /// Literal text (lowercase).
    Lit(&'static str),
    /// `\d+`.
    Digits,
    /// `.*` (not across a newline).
    Any,
    /// `\s*`.
    Spaces,
    /// `(?:a|b)`, with `""` for an optional group.
    OneOf(&'static [&'static str]),
}

/// A regex as a token sequence; `anchored` for a leading `^`.
struct Pattern {
    anchored: bool,
    toks: &'static [Tok],
}

impl Pattern {
    fn matches(&self, text: &str) -> bool {
        let s = text.as_bytes();
        if self.anchored {
            return match_at(self.toks, s);
        }
        (0..=s.len()).any(|i| match_at(self.toks, &s[i..]))
    }
}

fn match_at(toks: &[Tok], s: &[u8]) -> bool {
    let Some((tok, rest)) = toks.split_first() else { return true };
    match *tok {
        Tok::Lit(l) => s.starts_with(l.as_bytes()) && match_at(rest, &s[l.len()..]),
        Tok::Digits => {
            let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
            (1..=n).rev().any(|k| match_at(rest, &s[k..]))
        }
        Tok::Any => {
            let n = s.iter().take_while(|&&b| b != b'\n').count();
            (0..=n).rev().any(|k| match_at(rest, &s[k..]))
        }
        Tok::Spaces => {
            let n = s.iter().take_while(|b| b.is_ascii_whitespace()).count();
            (0..=n).rev().any(|k| match_at(rest, &s[k..]))
        }
        Tok::OneOf(options) => options.iter().any(|o| s.starts_with(o.as_bytes()) && match_at(rest, &s[o.len()..])),
    }
}

const SEP: &[&str] = &["_", " "];

/// `OVERFLOW_PATTERNS` of pi-ai at the canonical commit (17 regexes plus the Cerebras form).
const OVERFLOW_0_58: &[Pattern] = &[
    Pattern { anchored: false, toks: &[Tok::Lit("prompt is too long")] },
    Pattern { anchored: false, toks: &[Tok::Lit("input is too long for requested model")] },
    Pattern { anchored: false, toks: &[Tok::Lit("exceeds the context window")] },
    Pattern { anchored: false, toks: &[Tok::Lit("input token count"), Tok::Any, Tok::Lit("exceeds the maximum")] },
    Pattern { anchored: false, toks: &[Tok::Lit("maximum prompt length is "), Tok::Digits] },
    Pattern { anchored: false, toks: &[Tok::Lit("reduce the length of the messages")] },
    Pattern { anchored: false, toks: &[Tok::Lit("maximum context length is "), Tok::Digits, Tok::Lit(" tokens")] },
    Pattern { anchored: false, toks: &[Tok::Lit("exceeds the limit of "), Tok::Digits] },
    Pattern { anchored: false, toks: &[Tok::Lit("exceeds the available context size")] },
    Pattern { anchored: false, toks: &[Tok::Lit("greater than the context length")] },
    Pattern { anchored: false, toks: &[Tok::Lit("context window exceeds limit")] },
    Pattern { anchored: false, toks: &[Tok::Lit("exceeded model token limit")] },
    Pattern {
        anchored: false,
        toks: &[Tok::Lit("too large for model with "), Tok::Digits, Tok::Lit(" maximum context length")],
    },
    Pattern { anchored: false, toks: &[Tok::Lit("model_context_window_exceeded")] },
    Pattern {
        anchored: false,
        toks: &[Tok::Lit("context"), Tok::OneOf(SEP), Tok::Lit("length"), Tok::OneOf(SEP), Tok::Lit("exceeded")],
    },
    Pattern { anchored: false, toks: &[Tok::Lit("too many tokens")] },
    Pattern { anchored: false, toks: &[Tok::Lit("token limit exceeded")] },
    CEREBRAS,
];

/// Cerebras: `^4(00|13)\s*(status code)?\s*\(no body\)`.
const CEREBRAS: Pattern = Pattern {
    anchored: true,
    toks: &[
        Tok::Lit("4"),
        Tok::OneOf(&["00", "13"]),
        Tok::Spaces,
        Tok::OneOf(&["status code", ""]),
        Tok::Spaces,
        Tok::Lit("(no body)"),
    ],
};

/// `OVERFLOW_PATTERNS` of pi-ai 0.73.1: the canonical ones plus Anthropic's byte-size error
/// and Ollama's explicit overflow message.
const OVERFLOW_0_73: &[Pattern] = &[
    Pattern { anchored: false, toks: &[Tok::Lit("prompt is too long")] },
    Pattern { anchored: false, toks: &[Tok::Lit("request_too_large")] },
    Pattern { anchored: false, toks: &[Tok::Lit("input is too long for requested model")] },
    Pattern { anchored: false, toks: &[Tok::Lit("exceeds the context window")] },
    Pattern { anchored: false, toks: &[Tok::Lit("input token count"), Tok::Any, Tok::Lit("exceeds the maximum")] },
    Pattern { anchored: false, toks: &[Tok::Lit("maximum prompt length is "), Tok::Digits] },
    Pattern { anchored: false, toks: &[Tok::Lit("reduce the length of the messages")] },
    Pattern { anchored: false, toks: &[Tok::Lit("maximum context length is "), Tok::Digits, Tok::Lit(" tokens")] },
    Pattern { anchored: false, toks: &[Tok::Lit("exceeds the limit of "), Tok::Digits] },
    Pattern { anchored: false, toks: &[Tok::Lit("exceeds the available context size")] },
    Pattern { anchored: false, toks: &[Tok::Lit("greater than the context length")] },
    Pattern { anchored: false, toks: &[Tok::Lit("context window exceeds limit")] },
    Pattern { anchored: false, toks: &[Tok::Lit("exceeded model token limit")] },
    Pattern {
        anchored: false,
        toks: &[Tok::Lit("too large for model with "), Tok::Digits, Tok::Lit(" maximum context length")],
    },
    Pattern { anchored: false, toks: &[Tok::Lit("model_context_window_exceeded")] },
    Pattern {
        anchored: false,
        toks: &[Tok::Lit("prompt too long; exceeded "), Tok::OneOf(&["max ", ""]), Tok::Lit("context length")],
    },
    Pattern {
        anchored: false,
        toks: &[Tok::Lit("context"), Tok::OneOf(SEP), Tok::Lit("length"), Tok::OneOf(SEP), Tok::Lit("exceeded")],
    },
    Pattern { anchored: false, toks: &[Tok::Lit("too many tokens")] },
    Pattern { anchored: false, toks: &[Tok::Lit("token limit exceeded")] },
    CEREBRAS,
];

/// `NON_OVERFLOW_PATTERNS` of pi-ai 0.73.1 (throttling and rate limits are not overflows).
const NON_OVERFLOW_0_73: &[Pattern] = &[
    Pattern { anchored: true, toks: &[Tok::OneOf(&["throttling error", "service unavailable"]), Tok::Lit(":")] },
    Pattern { anchored: false, toks: &[Tok::Lit("rate limit")] },
    Pattern { anchored: false, toks: &[Tok::Lit("too many requests")] },
];
