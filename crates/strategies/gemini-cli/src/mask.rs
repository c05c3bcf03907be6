//! Tool output masking (`context/toolOutputMaskingService.ts`), run before every request.
//!
//! Newest entry first (the newest entry itself skipped while `protectLatestTurn`), function
//! responses of non-exempt tools that are not masked yet add up their estimates; the newest
//! 50 000 tokens are protected, the response that crosses that line and every older one are
//! prunable. If at least 30 000 tokens are prunable, each prunable response is saved to a file
//! and replaced by a `<tool_output_masked>` preview, where that saves tokens.

use compactbench_core::estimate::utf16_len;
use compactbench_core::tools::{tool_kind, ToolKind};
use compactbench_core::View;
use serde_json::json;

use crate::history::{Content, Kind, ResponseKey};
use crate::rewrite::Rewrite;
use crate::tokens::{part_tokens, response_json_len};
use crate::truncate::{js_slice, sanitize, PROJECT_TEMP_DIR, SESSION_ID, TOOL_OUTPUTS_DIR};

/// Tools whose outputs are never masked (interaction and mode tools).
const EXEMPT_TOOLS: [&str; 4] = ["activate_skill", "ask_user", "enter_plan_mode", "exit_plan_mode"];
/// `MASKING_INDICATOR_TAG` (literal).
const MASKING_INDICATOR_TAG: &str = "tool_output_masked";
/// The tag's opening, as `mask` looks for it.
const MASKED_OPEN: &str = "<tool_output_masked";

/// `getToolOutputMaskingConfig()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MaskConfig {
    pub(crate) protection_threshold_tokens: u64,
    pub(crate) min_prunable_threshold_tokens: u64,
    pub(crate) protect_latest_turn: bool,
}

/// What one masking pass changes.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Masking {
    pub(crate) rewrites: Vec<Rewrite>,
    pub(crate) tokens_saved: u64,
}

struct Prunable<'a> {
    at: (usize, usize),
    id: &'a str,
    name: &'a str,
    key: ResponseKey,
    text: &'a str,
    tokens: u64,
}

/// `JSON.stringify(response, null, 2)`.
fn pretty(key: ResponseKey, text: &str) -> String {
    serde_json::to_string_pretty(&json!({ key.as_str(): text })).expect("a JSON object serializes")
}

/// `ToolOutputMaskingService.mask` over `contents` (parts located in `view`).
pub(crate) fn mask(contents: &[Content], view: &View, config: &MaskConfig) -> Masking {
    let n = contents.len();
    if n == 0 {
        return Masking::default();
    }
    let scan = if config.protect_latest_turn { n - 1 } else { n };
    let mut cumulative = 0u64;
    let mut boundary_reached = false;
    let mut total_prunable = 0u64;
    let mut prunable = Vec::new();
    for content in contents[..scan].iter().rev() {
        for part in content.parts.iter().rev() {
            let Kind::Response { id, name, key, text } = &part.kind else { continue };
            if EXEMPT_TOOLS.contains(&name.as_str()) {
                continue;
            }
            // `pretty(key, text).includes("<tool_output_masked")`: the tag has no character
            // JSON escapes and the framing around the text cannot contain it, so the text
            // holds it exactly when its pretty JSON does (and is not serialized per request).
            if text.contains(MASKED_OPEN) {
                continue;
            }
            let Some(at) = part.at else { continue };
            let tokens = part_tokens(&part.kind).floor() as u64;
            if !boundary_reached {
                cumulative += tokens;
                if cumulative <= config.protection_threshold_tokens {
                    continue;
                }
                boundary_reached = true;
            }
            total_prunable += tokens;
            prunable.push(Prunable { at, id, name, key: *key, text, tokens });
        }
    }
    if total_prunable < config.min_prunable_threshold_tokens {
        return Masking::default();
    }

    let mut out = Masking::default();
    for p in prunable {
        let content = pretty(p.key, p.text);
        let file = masked_output_path(p.name, p.id, view, p.at.0);
        let preview = if tool_kind(p.name) == ToolKind::Shell {
            shell_preview(p.key, p.text)
        } else if utf16_len(&content) > 500 {
            let units: Vec<u16> = content.encode_utf16().collect();
            format!("{}\n... [TRUNCATED] ...\n{}", js_slice(&units, 0, Some(250)), js_slice(&units, -250, None))
        } else {
            content.clone()
        };
        // Tags and pointer sentence literal: whether masking saves tokens turns on the
        // snippet's length, so a paraphrase of another length flips outputs near the margin.
        let snippet = format!(
            "<{MASKING_INDICATOR_TAG}>\n{preview}\n\nOutput too large. Full output available at: {file}\n</{MASKING_INDICATOR_TAG}>"
        );
        let new_tokens =
            ((utf16_len(p.name) + response_json_len(ResponseKey::Output, &snippet)) as f64 / 4.0).floor() as u64;
        if new_tokens >= p.tokens {
            continue;
        }
        out.tokens_saved += p.tokens - new_tokens;
        out.rewrites.push(Rewrite { at: p.at, text: snippet, is_error: false, file, saved: content });
    }
    out
}

/// `<tmp>/tool-outputs/session-<id>/<tool>_<callId>_<random>.txt`; the random suffix is the
/// log entry id here, so runs are reproducible.
fn masked_output_path(tool: &str, call_id: &str, view: &View, at: usize) -> String {
    let origin = view.messages[at].origin;
    let suffix = origin.entry().map_or_else(|| format!("v{at}"), |e| e.to_string());
    let call_id = if call_id.is_empty() { suffix.clone() } else { call_id.to_owned() };
    let tool = sanitize(if tool.is_empty() { "unknown_tool" } else { tool }).to_lowercase();
    format!(
        "{PROJECT_TEMP_DIR}/{TOOL_OUTPUTS_DIR}/session-{}/{tool}_{}_{suffix}.txt",
        sanitize(SESSION_ID),
        sanitize(&call_id).to_lowercase()
    )
}

const SHELL_SECTIONS: [&str; 6] = ["Output", "Error", "Exit Code", "Signal", "Background PIDs", "Process Group PGID"];

/// `formatShellPreview`: the shell tool's `Output:` section cut to its first and last ten
/// lines, other sections kept whole; plain output is cut the same way.
fn shell_preview(key: ResponseKey, text: &str) -> String {
    // `response.output || response.stdout || ''`: a failed tool's `{error}` response previews
    // as empty. The extra `[Exit Code: …]` / `[Error: …]` notes read response fields that only
    // exist next to a sectioned `output`, which our results never have.
    let content = if key == ResponseKey::Output { text } else { "" };
    let parts = split_sections(content);
    if parts.len() < 3 {
        return simple_preview(content);
    }
    let mut preview = Vec::new();
    if !parts[0].trim().is_empty() {
        preview.push(simple_preview(parts[0].trim()));
    }
    for pair in parts[1..].chunks(2) {
        let name = pair[0];
        let section = pair.get(1).map_or("", |s| s.trim());
        if name == "Output" {
            preview.push(format!("Output: {}", simple_preview(section)));
        } else {
            preview.push(format!("{name}: {section}"));
        }
    }
    preview.join("\n")
}

/// `content.split(/^(Output|Error|…): /m)`: the text before the first section header, then
/// each header name and the text up to the next header.
fn split_sections(content: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut last = 0;
    let mut pos = 0;
    let bytes = content.as_bytes();
    while pos < content.len() {
        let line_start = pos == 0 || matches!(bytes[pos - 1], b'\n' | b'\r');
        if line_start {
            if let Some(name) = SHELL_SECTIONS.iter().find(|n| content[pos..].starts_with(&format!("{n}: "))) {
                out.push(&content[last..pos]);
                out.push(*name);
                pos += name.len() + 2;
                last = pos;
                continue;
            }
        }
        pos += content[pos..].chars().next().map_or(1, char::len_utf8);
    }
    out.push(&content[last..]);
    out
}

/// `formatSimplePreview`: more than 20 lines become the first and last ten around a marker.
fn simple_preview(content: &str) -> String {
    let lines: Vec<&str> = content.split('\n').collect();
    if lines.len() <= 20 {
        return content.to_owned();
    }
    format!(
        "{}\n\n... [{} lines omitted] ...\n\n{}",
        lines[..10].join("\n"),
        lines.len() - 20,
        lines[lines.len() - 10..].join("\n")
    )
}
