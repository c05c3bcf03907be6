//! Time-based micro-compaction (`microCompact.ts` as reverse engineered): after a long idle
//! gap the prompt cache has expired anyway, so old tool results are cleared without a model
//! call before the threshold is checked.

use compactbench_core::tools::{tool_kind, ToolKind};
use compactbench_core::{Message, Part, Replacement, Role, View};

use crate::count::text_tokens;
use crate::ClaudeCodeConfig;

/// `TIME_BASED_MC_CLEARED_MESSAGE` (literal).
pub(crate) const CLEARED: &str = "[Old tool result content cleared]";
/// Compactable results left intact, newest first.
pub(crate) const KEEP_RECENT: usize = 5;
/// The idle gap (about the prompt cache's lifetime) above which clearing fires.
pub(crate) const GAP_THRESHOLD_MINUTES: u64 = 60;

/// Claude Code's compactable tools (Read, Bash, Grep, Glob, WebSearch, WebFetch, Edit,
/// Write), recognised under any harness's names; a directory listing counts as a search
/// (\[assume\]: Claude Code lists with Glob or Bash).
fn compactable(name: &str) -> bool {
    matches!(
        tool_kind(name),
        ToolKind::Read | ToolKind::Write | ToolKind::Edit | ToolKind::Search | ToolKind::List | ToolKind::Shell
    ) || matches!(name.to_ascii_lowercase().as_str(), "websearch" | "webfetch" | "web_search" | "web_fetch")
}

/// What a clearing pass replaces.
pub(crate) struct Cleared {
    pub(crate) replacements: Vec<Replacement>,
    /// Results newly cleared.
    pub(crate) count: usize,
    /// Estimated tokens saved.
    pub(crate) saved: u64,
}

/// Whether time-based micro-compaction fires before this request: the flag is on, this is the
/// first request after a user message that follows an earlier reply, and the assumed idle gap
/// exceeds the threshold.
pub(crate) fn fires(config: &ClaudeCodeConfig, view: &View) -> bool {
    let first_of_turn = view.messages.last().is_some_and(|m| m.message.role == Role::User)
        && view.iter().any(|m| m.role == Role::Assistant);
    config.microcompact
        && first_of_turn
        && config.microcompact_gap_minutes.is_some_and(|gap| gap > GAP_THRESHOLD_MINUTES)
}

/// Clears every compactable tool result in `view` except the [`KEEP_RECENT`] newest; calls
/// and other tools' results stay as they are.
pub(crate) fn clear(view: &View) -> Cleared {
    let compactable_results = |m: &Message| m.parts.iter().filter(|p| matches!(p, Part::ToolResult { name, .. } if compactable(name))).count();
    let log_messages = || view.messages.iter().filter_map(|vm| vm.origin.entry().map(|entry| (entry, &vm.message)));
    let mut old = log_messages().map(|(_, m)| compactable_results(m)).sum::<usize>().saturating_sub(KEEP_RECENT);
    let mut cleared = Cleared { replacements: Vec::new(), count: 0, saved: 0 };
    for (entry, original) in log_messages().filter(|(_, m)| compactable_results(m) > 0) {
        if old == 0 {
            break;
        }
        let mut message = original.clone();
        let before = cleared.count;
        for part in &mut message.parts {
            let Part::ToolResult { name, text, .. } = part else { continue };
            if old > 0 && compactable(name) {
                old -= 1;
                if text != CLEARED {
                    cleared.saved += text_tokens(text).saturating_sub(text_tokens(CLEARED));
                    cleared.count += 1;
                    *text = CLEARED.to_owned();
                }
            }
        }
        if cleared.count > before {
            cleared.replacements.push(Replacement { entry, message });
        }
    }
    cleared
}

/// `view` with `replacements` applied (what the next steps of the same request see).
pub(crate) fn apply(view: &View, replacements: &[Replacement]) -> View {
    let mut out = view.clone();
    for vm in &mut out.messages {
        if let Some(r) = vm.origin.entry().and_then(|e| replacements.iter().find(|r| r.entry == e)) {
            vm.message = r.message.clone();
        }
    }
    out
}
