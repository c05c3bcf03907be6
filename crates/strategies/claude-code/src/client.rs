//! The Claude Code client: when to compact, and the order of micro-compaction and full
//! compaction within one request.

use std::borrow::Cow;

use compactbench_core::{Checkpoint, CheckpointKind, Cx, Decision, Error, Log, Moment, Role, View, Window};
use serde_json::json;

use crate::trigger::{self, Thresholds};
use crate::{count, full, microcompact, ClaudeCodeConfig};

fn has_conversation(view: &View) -> bool {
    view.iter().any(|m| m.role != Role::System)
}

fn thresholds(config: &ClaudeCodeConfig, cx: &Cx<'_>) -> Thresholds {
    Thresholds::new(cx.model.window, cx.model.max_output, config)
}

pub(crate) fn decide(config: &ClaudeCodeConfig, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
    if !has_conversation(view) {
        return Decision::Skip;
    }
    let auto = || trigger::auto_allowed(config, log, cx.failures);
    match at {
        // The check at the top of the query loop runs before the next request anyway.
        Moment::TurnEnd => Decision::Skip,
        Moment::BeforeRequest => {
            if microcompact::fires(config, view) && microcompact::clear(view).count > 0 {
                Decision::compact("microcompact")
            } else if count::context_tokens(view) >= thresholds(config, cx).auto && auto() {
                Decision::compact("auto")
            } else {
                Decision::Skip
            }
        }
        Moment::Overflow if auto() => Decision::compact("reactive"),
        Moment::Overflow => Decision::Skip,
        // `/compact [focus]` runs whatever the threshold, the auto-compact switch and the
        // circuit breaker say [doc].
        Moment::Manual => Decision::compact("manual"),
    }
}

/// Micro-compaction first (when it fires), then the full compaction if the context is still
/// at the threshold. At [`Moment::Manual`] (or called without a `Compact` decision) this is
/// `/compact`: it summarizes whatever the size and circuit breaker say.
pub(crate) fn compact(config: &ClaudeCodeConfig, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
    let tokens_before = count::context_tokens(view);
    let mut out = Vec::new();
    // The view itself unless micro-compaction edits it (no copy of the whole prompt).
    let mut working = Cow::Borrowed(view);
    let mut tokens = tokens_before;
    if at == Moment::BeforeRequest && microcompact::fires(config, view) {
        let cleared = microcompact::clear(view);
        if cleared.count > 0 {
            working = Cow::Owned(microcompact::apply(view, &cleared.replacements));
            tokens = tokens_before.saturating_sub(cleared.saved);
            let mut cp = Checkpoint::new(CheckpointKind::Prune, Window::Inherit);
            cp.replacements = cleared.replacements;
            cp.tokens_before = tokens_before;
            cp.details = json!({"microcompact": "time_based", "cleared": cleared.count, "saved_tokens": cleared.saved});
            out.push(cp);
            if tokens < thresholds(config, cx).auto || !trigger::auto_allowed(config, log, cx.failures) {
                return Ok(out);
            }
        }
    }
    let trigger = match at {
        Moment::Overflow => "reactive",
        Moment::Manual => "manual",
        Moment::TurnEnd | Moment::BeforeRequest => "auto",
    };
    out.push(full::compact(config, log, &working, trigger, tokens, cx)?);
    Ok(out)
}
