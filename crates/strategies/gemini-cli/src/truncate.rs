//! Truncation of tool output to a head and a tail, with the full text saved to a file:
//! `formatTruncatedToolOutput` and `saveTruncatedToolOutput` (`utils/fileUtils.ts`), the
//! reverse token budget run inside every compression (`truncateHistoryToBudget`), and the
//! tool-time truncation of shell output (`ToolExecutor.truncateOutputIfNeeded`).

use compactbench_core::estimate::utf16_len;
use compactbench_core::tools::{tool_kind, ToolKind};
use compactbench_core::{Part, View, VirtualStore};
use serde_json::json;

use crate::history::{stored_call_id, Content, Kind, ResponseKey};
use crate::rewrite::Rewrite;
use crate::tokens::estimate_text;

/// `config.storage.getProjectTempDir()` in the virtual store.
pub(crate) const PROJECT_TEMP_DIR: &str = "~/.gemini/tmp/project";
/// `TOOL_OUTPUTS_DIR` under the project temp dir.
pub(crate) const TOOL_OUTPUTS_DIR: &str = "tool-outputs";
/// Session id used in the per-session output folders.
pub(crate) const SESSION_ID: &str = "compactbench";
/// `COMPRESSION_FUNCTION_RESPONSE_TOKEN_BUDGET`.
pub(crate) const FUNCTION_RESPONSE_TOKEN_BUDGET: u64 = 50_000;

/// `sanitizeFilenamePart`: anything but `[A-Za-z0-9_-]` becomes `_`.
pub(crate) fn sanitize(part: &str) -> String {
    part.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// `saveTruncatedToolOutput`'s path: `<tmp>/tool-outputs[/session-<id>]/<tool>_<id>.txt`
/// (just `<id>.txt` when the id already starts with the tool name).
pub(crate) fn saved_output_path(tool: &str, id: &str, session: Option<&str>) -> String {
    let tool = sanitize(if tool.is_empty() { "unknown_tool" } else { tool }).to_lowercase();
    let id = sanitize(id).to_lowercase();
    let file = if id.starts_with(&tool) { format!("{id}.txt") } else { format!("{tool}_{id}.txt") };
    match session {
        Some(s) => format!("{PROJECT_TEMP_DIR}/{TOOL_OUTPUTS_DIR}/session-{}/{file}", sanitize(s)),
        None => format!("{PROJECT_TEMP_DIR}/{TOOL_OUTPUTS_DIR}/{file}"),
    }
}

/// Where `Config.compressionTruncationCounter` lives: like the compression latch, in-memory
/// state of the CLI kept as a marker file of the session's virtual store (never named in a
/// request, so probes never read it).
pub(crate) const TRUNCATION_COUNTER_PATH: &str = "compactbench/gemini-cli/compressionTruncationCounter";

/// `config.getNextCompressionTruncationId()` (`++this.compressionTruncationCounter`): the id
/// the next truncation of a compression pass saves its file under.
pub(crate) fn next_truncation_id(store: &VirtualStore) -> u64 {
    store.read(TRUNCATION_COUNTER_PATH).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0) + 1
}

/// Records the ids a pass took (`next_id` is the one after them). The counter moves whether or
/// not the pass's history is installed: `truncateHistoryToBudget` takes an id for every
/// response it saves, before compression decides anything.
pub(crate) fn set_truncation_counter(store: &mut VirtualStore, next_id: u64) {
    if next_id > next_truncation_id(store) {
        store.write(TRUNCATION_COUNTER_PATH, (next_id - 1).to_string());
    }
}

/// JavaScript's `String.prototype.slice` over UTF-16 code units.
pub(crate) fn js_slice(units: &[u16], start: i64, end: Option<i64>) -> String {
    let len = units.len() as i64;
    let norm = |x: i64| if x < 0 { (len + x).max(0) } else { x.min(len) };
    let (a, b) = (norm(start), end.map_or(len, norm));
    if a >= b {
        return String::new();
    }
    String::from_utf16_lossy(&units[a as usize..b as usize])
}

/// `Number.prototype.toLocaleString()` in `en-US` for integers: thousands separated by commas.
pub(crate) fn locale(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// `formatTruncatedToolOutput(content, file, maxChars)`: unchanged if it fits, else a notice
/// line, the first 20 % and the last 80 % of `maxChars` code units around an omission marker.
/// A negative `maxChars` (prompt count above the window) behaves as JavaScript's `slice` does.
pub(crate) fn format_truncated_tool_output(content: &str, file: &str, max_chars: i64) -> String {
    let len = utf16_len(content) as i64;
    if len <= max_chars {
        return content.to_owned();
    }
    let head_chars = (max_chars as f64 * 0.2).floor() as i64;
    let tail_chars = max_chars - head_chars;
    let units: Vec<u16> = content.encode_utf16().collect();
    let head = js_slice(&units, 0, Some(head_chars));
    // `slice(-tailChars)`: `-0` is `0`, so a zero tail keeps the whole text, as in the original.
    let tail = js_slice(&units, -tail_chars, None);
    let omitted = len - head_chars - tail_chars;
    // "Output too large. Showing first" and the omission marker are literal (spec (c)), and so
    // is the pointer sentence: the budget walk counts the replacement's tokens.
    format!(
        "Output too large. Showing first {} and last {} characters. For full output see: {file}\n{head}\n\n... [{} characters omitted] ...\n\n{tail}",
        locale(head_chars),
        locale(tail_chars),
        locale(omitted),
    )
}

/// `getTruncateToolOutputThreshold()`: `min(4 × (tokenLimit − lastPromptTokenCount), setting)`.
pub(crate) fn truncate_threshold(limit: u64, prompt_tokens: u64, setting: i64) -> i64 {
    (4 * (limit as i64 - prompt_tokens as i64)).min(setting)
}

/// The string `truncateHistoryToBudget` measures and saves: the `output` string, else the
/// pretty-printed response object (a failed tool's `{error}`).
fn response_string(key: ResponseKey, text: &str) -> String {
    match key {
        ResponseKey::Output => text.to_owned(),
        ResponseKey::Error => {
            serde_json::to_string_pretty(&json!({ "error": text })).expect("a JSON object serializes")
        }
    }
}

/// `truncateHistoryToBudget`: newest entry and part first, function responses count against
/// a 50 000-token budget; every response that would exceed it is saved to
/// `tool-outputs/<tool>_<n>.txt` and replaced by `{output: formatTruncatedToolOutput(…)}`,
/// whose own size then counts. Returns the truncated history and what changed.
pub(crate) fn to_budget(contents: &[Content], max_chars: i64, next_id: &mut u64) -> (Vec<Content>, Vec<Rewrite>) {
    let mut counter = 0u64;
    let mut out = contents.to_vec();
    let mut rewrites = Vec::new();
    for content in out.iter_mut().rev() {
        for part in content.parts.iter_mut().rev() {
            let Kind::Response { id, name, key, text } = &part.kind else { continue };
            let s = response_string(*key, text);
            let tokens = estimate_text(&s);
            if counter + tokens <= FUNCTION_RESPONSE_TOKEN_BUDGET {
                counter += tokens;
                continue;
            }
            let file = saved_output_path(name, &next_id.to_string(), None);
            *next_id += 1;
            let truncated = format_truncated_tool_output(&s, &file, max_chars);
            counter += estimate_text(&truncated);
            if let Some(at) = part.at {
                rewrites.push(Rewrite { at, text: truncated.clone(), is_error: false, file, saved: s });
            }
            part.kind =
                Kind::Response { id: id.clone(), name: name.clone(), key: ResponseKey::Output, text: truncated };
        }
    }
    rewrites.reverse();
    (out, rewrites)
}

/// Tool-time truncation of shell output that is about to enter the history: a result of the
/// shell tool longer than `max_chars` code units (when `max_chars > 0`) is saved to
/// `tool-outputs/session-<id>/<tool>_<callId>.txt` and cut to the head/tail form.
/// Results already rewritten by an earlier checkpoint were handled at their tool time.
pub(crate) fn tool_time(view: &View, pending: std::ops::Range<usize>, max_chars: i64) -> Vec<Rewrite> {
    if max_chars <= 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for i in pending {
        let vm = &view.messages[i];
        if !matches!(vm.origin, compactbench_core::Origin::Entry(_)) {
            continue;
        }
        for (j, part) in vm.message.parts.iter().enumerate() {
            let Part::ToolResult { call_id, name, text, is_error } = part else { continue };
            // The original keys on its own shell tool (`run_shell_command`); sessions recorded
            // with other harnesses' names are mapped through `tool_kind`.
            if tool_kind(name) != ToolKind::Shell || utf16_len(text) as i64 <= max_chars {
                continue;
            }
            let file = saved_output_path(name, &stored_call_id(name, call_id), Some(SESSION_ID));
            out.push(Rewrite {
                at: (i, j),
                text: format_truncated_tool_output(text, &file, max_chars),
                is_error: *is_error,
                file,
                saved: text.clone(),
            });
        }
    }
    out
}
