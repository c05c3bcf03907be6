//! When Codex compacts: the auto-compact limit and the token count it is compared with.

use compactbench_core::{Decision, Moment, Role, View};

use crate::history::is_real_user;
use crate::items::{message_content_tokens, message_tokens};
use crate::layout::{is_compaction, Anchor};
use crate::CodexConfig;

/// Whether Codex compacts at `at`, given the view and its anchor: at the pre-turn check
/// when the count reaches the limit; mid-turn when it does and the last reply called tools.
pub(crate) fn decide(config: &CodexConfig, view: &View, anchor: Option<&Anchor>, at: Moment, window: u64) -> Decision {
    let limit = auto_compact_limit(window, config.model_auto_compact_token_limit, config.cap_configured_limit);
    let over = || total_tokens(view, anchor, config.content_estimate) >= limit;
    match at {
        Moment::TurnEnd if over() => Decision::compact("pre-turn"),
        Moment::BeforeRequest if needs_follow_up(view) && over() => Decision::compact("mid-turn"),
        // `/compact` runs `run_compact_task` whatever the count (spec (b)).
        Moment::Manual => Decision::compact("manual"),
        _ => Decision::Skip,
    }
}

/// `auto_compact_token_limit`: `window * 9 / 10` in integer arithmetic; a configured
/// `model_auto_compact_token_limit` replaces it, capped at that 90% by current code and
/// uncapped in the Nov-2025 code. Without a window and without a setting there is no limit
/// (`i64::MAX`, never reached). A window of 0 means "unknown".
pub(crate) fn auto_compact_limit(window: u64, configured: Option<u64>, cap: bool) -> u64 {
    let default = (window > 0).then(|| window * 9 / 10);
    match (configured, default) {
        (Some(c), Some(d)) if cap => c.min(d),
        (Some(c), _) => c,
        (None, Some(d)) => d,
        (None, None) => i64::MAX as u64,
    }
}

/// `get_total_token_usage`: the provider-reported total of the last reply plus Codex's
/// byte estimate of every item added after the last model-generated item: of its
/// model-visible content when `content` (0.171.0: the black-box check's compactions come
/// before the request this predicts in 55 of 55 sessions, where the serialized JSON fires a
/// request early in some), else of its serialized JSON (the cited commit).
///
/// After a compaction and before the next reply, the reported total is the estimate Codex
/// recomputed for the replacement history; the replacement holds no model-generated item
/// (locally), so nothing is added to it until the model answers again.
///
/// The reported total is the Responses API's `total_tokens` (`input_tokens`, cached ones
/// included, plus `output_tokens`). The API has no cache-write count: a provider that reports
/// writes apart has them in `input_tokens` all the same, so they count.
pub(crate) fn total_tokens(view: &View, anchor: Option<&Anchor>, content: bool) -> u64 {
    let reported = match view.last_usage() {
        Some((_, usage)) => usage.total(),
        None => anchor.map_or(0, |a| a.details.tokens_after),
    };
    let Some(last_model) = view.messages.iter().rposition(|m| m.message.role == Role::Assistant) else {
        return reported;
    };
    let added: u64 = view.messages[last_model + 1..]
        .iter()
        .map(|m| if content { message_content_tokens(&m.message, is_compaction(anchor, m.origin)) } else { message_tokens(&m.message, is_compaction(anchor, m.origin)) })
        .sum();
    reported + added
}

/// `needs_follow_up` after a sample: the model's last reply called tools and the turn goes
/// on with their results (no new user turn has started since).
pub(crate) fn needs_follow_up(view: &View) -> bool {
    let Some(last_model) = view.messages.iter().rposition(|m| m.message.role == Role::Assistant) else {
        return false;
    };
    view.messages[last_model].message.has_tool_calls()
        && !view.messages[last_model + 1..].iter().any(|m| is_real_user(&m.message))
}
