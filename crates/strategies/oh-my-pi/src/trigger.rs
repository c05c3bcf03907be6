//! When oh-my-pi maintains context: the threshold (`resolveThresholdTokens`, `shouldCompact`,
//! agent-core `compaction.ts`) and which method a pass runs (`isCompactionMethodUsable`,
//! `resolveCompactionMethodOrder`, coding-agent `session-maintenance.ts` and
//! `compaction-methods.ts`).

use crate::OhMyPiConfig;

/// `DEFAULT_RESERVE_TOKENS`.
pub(crate) const DEFAULT_RESERVE_TOKENS: u64 = 16384;

/// `COMPACTION_RECOVERY_BAND`: a pass resolved threshold pressure only if the residual
/// context is at or below this share of the threshold.
pub(crate) const COMPACTION_RECOVERY_BAND: f64 = 0.8;

/// `Math.floor(window * 0.15)`, in JavaScript's floating point.
fn fifteen_percent(window: u64) -> u64 {
    (window as f64 * 0.15).floor() as u64
}

/// `effectiveReserveTokens`: at least 15% of the window, or the configured reserve
/// (16384 when unset), whichever is larger.
pub(crate) fn effective_reserve(window: u64, config: &OhMyPiConfig) -> u64 {
    fifteen_percent(window).max(config.reserve_tokens.unwrap_or(DEFAULT_RESERVE_TOKENS))
}

/// `resolveBudgetReserveTokens`: the effective reserve, unless it was left unset and leaves
/// (almost) nothing of the window, or exceeds the window — then the proportional 15%.
pub(crate) fn budget_reserve(window: u64, config: &OhMyPiConfig) -> u64 {
    let reserve = effective_reserve(window, config);
    let proportional = fifteen_percent(window).max(1);
    let defaulted_impossible =
        config.reserve_tokens.is_none() && i128::from(reserve) >= i128::from(window) - i128::from(proportional);
    if defaulted_impossible || reserve >= window {
        proportional
    } else {
        reserve
    }
}

/// `resolveThresholdTokens`: fixed tokens (clamped to `[1, window − 1]`) win over a percent
/// (clamped to `[1, 99]`), which wins over `window − reserve`.
pub(crate) fn threshold_tokens(window: u64, config: &OhMyPiConfig) -> u64 {
    if let Some(t) = config.threshold_tokens.filter(|&t| t > 0) {
        return (window.saturating_sub(1)).min(t.max(1));
    }
    match config.threshold_percent.filter(|p| p.is_finite() && *p > 0.0) {
        Some(p) => (window as f64 * (p.clamp(1.0, 99.0) / 100.0)).floor() as u64,
        None => {
            let t = (i128::from(window) - 1).min(i128::from(window) - i128::from(budget_reserve(window, config)));
            t.max(0) as u64
        }
    }
}

/// `shouldCompact`: enabled, a known window, and strictly over the threshold.
pub(crate) fn should_compact(tokens: u64, window: u64, config: &OhMyPiConfig) -> bool {
    config.enabled && window > 0 && tokens > threshold_tokens(window, config)
}

/// `floor(0.8 × threshold)`.
pub(crate) fn recovery_band(window: u64, config: &OhMyPiConfig) -> u64 {
    (threshold_tokens(window, config) as f64 * COMPACTION_RECOVERY_BAND).floor() as u64
}

/// A context-maintenance method (`compaction.methodOrder` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    Remote,
    Snapcompact,
    Handoff,
    Shake,
    Soft,
}

impl Method {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Method::Remote => "remote",
            Method::Snapcompact => "snapcompact",
            Method::Handoff => "handoff",
            Method::Shake => "shake",
            Method::Soft => "soft",
        }
    }

    fn parse(s: &str) -> Option<Method> {
        [Method::Remote, Method::Snapcompact, Method::Handoff, Method::Shake, Method::Soft]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

/// `resolveCompactionMethodOrder`: known names only, first occurrence wins.
pub(crate) fn method_order(names: &[String]) -> Vec<Method> {
    let mut out = Vec::new();
    for m in names.iter().filter_map(|n| Method::parse(n)) {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

/// Why a maintenance pass runs (`runAutoCompaction(reason)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    Threshold,
    Overflow,
    /// The idle timer (`compaction.idleEnabled`, off by default). Sessions replayed by the
    /// runner have no wall clock, so nothing raises it outside the tests of its rules.
    #[cfg_attr(not(test), allow(dead_code))]
    Idle,
}

impl Reason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Threshold => "threshold",
            Reason::Overflow => "overflow",
            Reason::Idle => "idle",
        }
    }
}

/// What the active model and settings offer to the method list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Caps {
    /// The model accepts image input (`model.input` includes `image`): snapcompact possible.
    pub(crate) vision: bool,
    /// A provider-native compaction route exists (OpenAI Responses compact, Anthropic
    /// compaction beta) or `compaction.remoteEndpoint` is set: remote possible.
    pub(crate) remote: bool,
}

/// What this crate runs against: no provider-native route and no endpoint (the benchmark is
/// offline), and no image input (`ModelProfile` carries no capability flags; snapcompact's
/// image frames could not be read back by the runner anyway).
pub(crate) const OFFLINE_CAPS: Caps = Caps { vision: false, remote: false };

/// `isCompactionMethodUsable`.
pub(crate) fn usable(method: Method, reason: Reason, caps: Caps, exclude_media: bool) -> bool {
    match method {
        Method::Remote => caps.remote,
        Method::Snapcompact => !exclude_media && caps.vision,
        Method::Handoff => reason != Reason::Overflow,
        Method::Shake | Method::Soft => true,
    }
}

/// The first usable method at or after `start`, with its index (`runAutoCompaction`'s
/// selection loop).
pub(crate) fn select(
    methods: &[Method],
    start: usize,
    reason: Reason,
    caps: Caps,
    exclude_media: bool,
) -> Option<(usize, Method)> {
    methods.iter().enumerate().skip(start).find(|(_, &m)| usable(m, reason, caps, exclude_media)).map(|(i, &m)| (i, m))
}
