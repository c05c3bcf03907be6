//! Large tool output offload (`large_response_handler.rs`): a tool result text longer than
//! 200,000 characters (50,000 for shell tools) is written to a file and replaced by a
//! redirect naming the file.
//!
//! Goose does this as the output arrives, before it enters the conversation; here it is done
//! at the first check after the output is in the log, which is always before the next model
//! request, and recorded as replacements so every later view and summary sees the redirect.

use compactbench_core::tools::{tool_kind, ToolKind};
use compactbench_core::{
    Checkpoint, CheckpointKind, EntryId, Log, Message, Offload, Origin, Part, Replacement, View, ViewMessage, VirtualStore,
    Window,
};
use serde_json::json;

use crate::conversation::OP_OFFLOAD;
use crate::prompt::redirect;

/// `DEFAULT_LARGE_TEXT_THRESHOLD`, in characters.
pub(crate) const DEFAULT_LARGE_TEXT_THRESHOLD: usize = 200_000;
/// `SHELL_TOOL_THRESHOLD`, in characters.
pub(crate) const SHELL_TOOL_THRESHOLD: usize = 50_000;

/// `threshold_for_tool`: names ending in `shell` get the tight threshold. A session recorded
/// with another harness's shell tool (`bash`, `execute_command`, …) maps to Goose's
/// `developer__shell` through [`tool_kind`].
pub(crate) fn threshold_for_tool(name: &str) -> usize {
    if name.ends_with("shell") || tool_kind(name) == ToolKind::Shell {
        SHELL_TOOL_THRESHOLD
    } else {
        DEFAULT_LARGE_TEXT_THRESHOLD
    }
}

/// Whether a result text is over its tool's threshold (characters are code points, as
/// Rust's `chars().count()`). Bytes bound characters from above and no threshold is below the
/// shell tools': most texts are settled without counting or looking at the tool's name.
fn oversized(name: &str, text: &str) -> bool {
    let threshold = || threshold_for_tool(name);
    text.len() > SHELL_TOOL_THRESHOLD && text.len() > threshold() && text.chars().count() > threshold()
}

/// The log messages `view` shows as they were logged (no checkpoint replaced them) that have
/// an oversized result: the outputs waiting for their offload, in log order. Every compaction
/// offloads them first, so none is hidden before its offload.
pub(crate) fn waiting(view: &View) -> Vec<EntryId> {
    let oversized = |m: &Message| m.parts.iter().any(|p| matches!(p, Part::ToolResult { name, text, .. } if oversized(name, text)));
    let shown_as_logged = |m: &ViewMessage| match m.origin {
        Origin::Entry(id) if oversized(&m.message) => Some(id),
        _ => None,
    };
    view.messages.iter().filter_map(shown_as_logged).collect()
}

/// The file a part's output goes to: `<temp dir>/goose_mcp_responses/mcp_response_<timestamp>.txt`,
/// the timestamp (`%Y%m%d_%H%M%S%.6f`) taken from a clock that starts at 2025-01-01 00:00:00
/// and ticks one second per log entry and one microsecond per part, so paths are unique and
/// runs reproducible.
pub(crate) fn path_for(entry: EntryId, part: usize) -> String {
    let seconds = u64::from(entry.0);
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    let (y, m, d) = civil_from_days(days_from_civil(2025, 1, 1) + days as i64);
    format!(
        "/tmp/goose_mcp_responses/mcp_response_{y:04}{m:02}{d:02}_{:02}{:02}{:02}.{:06}.txt",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        part
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { yoe + era * 400 + 1 } else { yoe + era * 400 }, m, d)
}

/// Offloads every output `waiting` in `log`: writes the files to `store` and returns the
/// checkpoint that shows the redirects, or `None` when nothing is pending.
pub(crate) fn offload(log: &Log, waiting: &[EntryId], store: &mut VirtualStore, tokens_before: u64) -> Option<Checkpoint> {
    let mut replacements = Vec::new();
    let mut offloads = Vec::new();
    for &id in waiting {
        let m = log.message(id).expect("waiting entries are messages");
        let mut changed = false;
        let mut parts = m.parts.clone();
        for (index, part) in parts.iter_mut().enumerate() {
            let Part::ToolResult { name, text, .. } = part else { continue };
            if !oversized(name, text) {
                continue;
            }
            let path = path_for(id, index);
            store.write(path.clone(), text.clone());
            *text = redirect(text.chars().count(), &path);
            offloads.push(Offload { path, entries: vec![id] });
            changed = true;
        }
        if changed {
            replacements.push(Replacement { entry: id, message: Message { role: m.role, parts, usage: m.usage, failure: m.failure } });
        }
    }
    if replacements.is_empty() {
        return None;
    }
    let mut cp = Checkpoint::new(CheckpointKind::Offload, Window::Inherit);
    cp.replacements = replacements;
    cp.offloads = offloads;
    cp.tokens_before = tokens_before;
    cp.details = json!({ "op": OP_OFFLOAD });
    Some(cp)
}
