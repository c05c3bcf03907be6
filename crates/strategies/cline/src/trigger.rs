//! When Cline acts: provider-reported usage of the previous request against the per-window
//! reserve (`context-window-utils.ts`, `ContextManager.shouldCompactContextWindow`), and which
//! models get auto-condense (`isNextGenModelFamily` in `src/utils/model-utils.ts`).

use compactbench_core::{Log, ModelProfile, Role, Shape};

/// `getContextWindowInfo`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct WindowInfo {
    pub(crate) context_window: u64,
    /// Fractional for odd windows (`contextWindow * 0.8`), as in source.
    pub(crate) max_allowed: f64,
}

/// The reserve per window: 27k for 64k, 30k for 128k, 40k for 200k, else the larger of
/// `window - 40k` and 80% of the window. A missing window counts as 128k, and so does any
/// DeepSeek model behind the OpenAI-compatible handler (which we take to be OpenAI Chat).
pub(crate) fn window_info(model: &ModelProfile) -> WindowInfo {
    let mut window = if model.window == 0 { 128_000 } else { model.window };
    if model.provider == Shape::OpenaiChat && model.name.to_lowercase().contains("deepseek") {
        window = 128_000;
    }
    let max_allowed = match window {
        64_000 => 37_000.0,
        128_000 => 98_000.0,
        200_000 => 160_000.0,
        w => (w as f64 - 40_000.0).max(w as f64 * 0.8),
    };
    WindowInfo { context_window: window, max_allowed }
}

/// `tokensIn + tokensOut + cacheWrites + cacheReads` of the previous request (read from the
/// last `api_req_started` UI message): the usage on the newest assistant message that carries
/// one ([`Usage::total`](compactbench_core::Usage::total), cache writes included). `None` when no request
/// has been made, which makes every check say no.
pub(crate) fn previous_usage(log: &Log) -> Option<u64> {
    log.messages().rev().find_map(|(_, m)| (m.role == Role::Assistant).then_some(m.usage).flatten()).map(|u| u.total())
}

/// Truncation mode's test in `getNewContextMessagesAndMetadata`.
pub(crate) fn over_limit(usage: u64, info: WindowInfo) -> bool {
    usage as f64 >= info.max_allowed
}

/// Truncation mode removes three quarters instead of half when even half the usage exceeds
/// the limit (a switch to a much smaller model).
pub(crate) fn quarter(usage: u64, info: WindowInfo) -> bool {
    usage as f64 / 2.0 > info.max_allowed
}

/// `shouldCompactContextWindow`: a threshold share of the window, capped at the limit; a
/// missing or zero threshold means the limit itself.
pub(crate) fn should_compact_context_window(usage: u64, info: WindowInfo, threshold: Option<f64>) -> bool {
    let rounded = match threshold {
        Some(t) if t != 0.0 && !t.is_nan() => (info.context_window as f64 * t).floor(),
        _ => info.max_allowed,
    };
    usage as f64 >= rounded.min(info.max_allowed)
}

/// `isAnthropicModelId` without Cline's model table: the family names it also accepts.
fn is_anthropic(id: &str) -> bool {
    ["sonnet", "opus", "haiku"].iter().any(|s| id.contains(s))
}

/// The first match of `/[-_ ]([\d](?:\.[05])?)[-_ ]?/`, as a number.
fn claude_version(id: &str) -> Option<f64> {
    let b = id.as_bytes();
    (0..b.len()).find_map(|i| {
        if !matches!(b[i], b'-' | b'_' | b' ') || !b.get(i + 1)?.is_ascii_digit() {
            return None;
        }
        let digit = f64::from(b[i + 1] - b'0');
        match (b.get(i + 2), b.get(i + 3)) {
            (Some(b'.'), Some(d @ (b'0' | b'5'))) => Some(digit + f64::from(d - b'0') / 10.0),
            _ => Some(digit),
        }
    })
}

fn is_claude4_plus(id: &str) -> bool {
    if id == "sonnet" || id == "opus" {
        return true;
    }
    is_anthropic(id) && claude_version(id).is_some_and(|v| v >= 4.0)
}

/// `isNextGenModelFamily`: Claude 4+, Gemini 2.5 and 3, Grok 4, GPT-5, MiniMax, Kimi K2,
/// DeepSeek 3.2 and native DeepSeek. Only these get auto-condense.
pub(crate) fn is_next_gen(name: &str) -> bool {
    let id = name.trim().to_lowercase();
    let has = |s: &str| id.contains(s);
    is_claude4_plus(&id)
        || has("gemini-2.5")
        || has("grok-4")
        || has("gpt-5")
        || has("gpt5")
        || has("minimax")
        || has("gemini3")
        || has("gemini-3")
        || has("kimi-k2")
        || (has("deepseek") && has("3.2") && !has("speciale"))
        || has("deepseek-chat")
        || has("deepseek-reasoner")
}
