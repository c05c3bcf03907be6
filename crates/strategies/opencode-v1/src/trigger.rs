//! `overflow.ts`: the usable context and the overflow predicate, plus the tail budget derived
//! from it (`preserveRecentBudget` in `compaction.ts`).

use compactbench_core::ModelProfile;

use crate::OpencodeV1Config;

/// `COMPACTION_BUFFER`.
const COMPACTION_BUFFER: u64 = 20_000;
/// `MIN_PRESERVE_RECENT_TOKENS`.
const MIN_PRESERVE_RECENT_TOKENS: u64 = 2_000;
/// `MAX_PRESERVE_RECENT_TOKENS`.
const MAX_PRESERVE_RECENT_TOKENS: u64 = 15_000;

/// `ProviderTransform.maxOutputTokens`: `min(limit.output, OUTPUT_TOKEN_MAX) || OUTPUT_TOKEN_MAX`.
pub(crate) fn max_output_tokens(config: &OpencodeV1Config, model: &ModelProfile) -> u64 {
    match model.max_output.min(config.output_token_max) {
        0 => config.output_token_max,
        n => n,
    }
}

/// `usable(cfg, model)`: the context a request may use before compaction is due. The reserved
/// buffer counts against an input limit; without one the release subtracts only the max output
/// tokens, and `sst/opencode@31e22f65` the buffer too ([`OpencodeV1Config::reserve_without_input_limit`]).
pub(crate) fn usable(config: &OpencodeV1Config, model: &ModelProfile) -> u64 {
    if model.window == 0 {
        return 0;
    }
    let max_output = max_output_tokens(config, model);
    let reserved = config.reserved.unwrap_or(COMPACTION_BUFFER.min(max_output));
    match config.input_limit {
        Some(input) if input > 0 => input.saturating_sub(reserved),
        _ if config.reserve_without_input_limit => model.window.saturating_sub(max_output).saturating_sub(reserved),
        _ => model.window.saturating_sub(max_output),
    }
}

/// `isOverflow`: `count >= usable`, off when auto compaction is off or the context is unknown.
pub(crate) fn is_overflow(config: &OpencodeV1Config, model: &ModelProfile, count: u64) -> bool {
    if !config.auto || model.window == 0 {
        return false;
    }
    count >= usable(config, model)
}

/// `preserveRecentBudget`: a quarter of the usable context, clamped to 2,000..15,000, unless
/// `preserve_recent_tokens` is set.
pub(crate) fn tail_budget(config: &OpencodeV1Config, model: &ModelProfile) -> u64 {
    config
        .preserve_recent_tokens
        .unwrap_or_else(|| (usable(config, model) / 4).clamp(MIN_PRESERVE_RECENT_TOKENS, MAX_PRESERVE_RECENT_TOKENS))
}
