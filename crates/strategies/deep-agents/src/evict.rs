//! Moving large content to the backend with a pointer left behind: the filesystem middleware's
//! tool-result and human-message eviction, and the summarization middleware's overflow-tail
//! clipping. Stub wording is paraphrased; the paths, the line-numbered 5+5-line preview and the
//! literal `... [N lines truncated] ...` marker follow the original.

use std::collections::HashMap;

use compactbench_core::{Message, Offload, Part, Replacement, Role, ViewMessage, VirtualStore};

use crate::config::Settings;
use crate::count;
use crate::paths;

/// `NUM_CHARS_PER_TOKEN`: the filesystem middleware's size thresholds are `4 * limit` chars.
const NUM_CHARS_PER_TOKEN: u64 = 4;
/// Tools whose results are never evicted at tool time (`TOOLS_EXCLUDED_FROM_EVICTION`).
const EXCLUDED_FROM_EVICTION: [&str; 7] = ["ls", "glob", "grep", "read_file", "edit_file", "write_file", "delete"];
/// Preview lines shown from the head and from the tail.
const PREVIEW_LINES: usize = 5;
/// `PREVIEW_LINE_CHAR_LIMIT`.
const PREVIEW_LINE_CHAR_LIMIT: usize = 1000;
/// `MAX_LINE_LENGTH` of the line-number formatter.
const MAX_LINE_LENGTH: usize = 5000;
/// Tool-call ids are shown abbreviated beyond this many characters in stubs.
const VISIBLE_TOOL_CALL_ID_LIMIT: usize = 32;
/// Characters of a `read_file` result kept by the overflow clip.
const READ_FILE_HEAD_CHARS: usize = 4_000;

/// Everything a step changed: view stand-ins and files written.
#[derive(Default)]
pub(crate) struct Evicted {
    pub(crate) replacements: Vec<Replacement>,
    pub(crate) offloads: Vec<Offload>,
}

impl Evicted {
    pub(crate) fn is_empty(&self) -> bool {
        self.replacements.is_empty()
    }
}

/// A backend write; `None` when the (simulated) backend fails.
fn write(store: &mut VirtualStore, settings: &Settings, path: &str, content: &str) -> Option<()> {
    if settings.failing_backend {
        return None;
    }
    store.write(path, content);
    Some(())
}

/// Tool results the filesystem middleware would have evicted when the tool returned: text over
/// `4 * tool_token_limit_before_evict` chars from a tool not on the exclusion list. Only
/// messages still shown as logged are candidates (a replaced one was handled already).
pub(crate) fn pending_tool_evictions(effective: &[ViewMessage], settings: &Settings) -> bool {
    let Some(limit) = settings.tool_limit else { return false };
    effective.iter().any(|vm| {
        matches!(vm.origin, compactbench_core::Origin::Entry(_))
            && vm.message.parts.iter().any(|p| tool_result_too_large(p, limit))
    })
}

fn tool_result_too_large(part: &Part, limit: u64) -> bool {
    // A text has at most as many characters as bytes: only a long one needs counting.
    let too_long = |text: &str| text.len() as u64 > NUM_CHARS_PER_TOKEN * limit && count::len(text) > NUM_CHARS_PER_TOKEN * limit;
    matches!(part, Part::ToolResult { name, text, .. } if !EXCLUDED_FROM_EVICTION.contains(&name.as_str()) && too_long(text))
}

/// `FilesystemMiddleware.wrap_tool_call` eviction: each oversized result is written to
/// `/large_tool_results/<id>` and shown as a stub with the same call id.
pub(crate) fn evict_tool_results(effective: &[ViewMessage], settings: &Settings, store: &mut VirtualStore) -> Evicted {
    let mut out = Evicted::default();
    let Some(limit) = settings.tool_limit else { return out };
    for vm in effective {
        let compactbench_core::Origin::Entry(entry) = vm.origin else { continue };
        if !vm.message.parts.iter().any(|p| tool_result_too_large(p, limit)) {
            continue;
        }
        let mut message = vm.message.clone();
        let mut changed = false;
        for part in &mut message.parts {
            if !tool_result_too_large(part, limit) {
                continue;
            }
            if let Part::ToolResult { call_id, text, .. } = part {
                if let Some(path) = offload_result(call_id, text, settings, store) {
                    out.offloads.push(Offload { path: path.clone(), entries: vec![entry] });
                    *text = too_large_tool_stub(call_id, &path, text);
                    changed = true;
                }
            }
        }
        if changed {
            out.replacements.push(Replacement { entry, message });
        }
    }
    out
}

/// `_offload_tool_message_content`'s write; `None` when the backend write fails.
fn offload_result(call_id: &str, text: &str, settings: &Settings, store: &mut VirtualStore) -> Option<String> {
    let path = paths::large_tool_result(call_id);
    write(store, settings, &path, text)?;
    Some(path)
}

/// Whether the newest message is a human message over `4 * human_message_token_limit` chars
/// that has not been evicted yet.
pub(crate) fn pending_human_eviction(effective: &[ViewMessage], settings: &Settings) -> bool {
    let Some(limit) = settings.human_limit else { return false };
    effective.last().is_some_and(|vm| {
        vm.message.role == Role::User
            && matches!(vm.origin, compactbench_core::Origin::Entry(_))
            && count::len(&vm.message.text()) > NUM_CHARS_PER_TOKEN * limit
    })
}

/// `FilesystemMiddleware.wrap_model_call` eviction of the newest human message: its text goes
/// to `/conversation_history/<uuid>.md` and every later request shows a stub instead.
pub(crate) fn evict_human_message(effective: &[ViewMessage], settings: &Settings, store: &mut VirtualStore) -> Evicted {
    let mut out = Evicted::default();
    if !pending_human_eviction(effective, settings) {
        return out;
    }
    let vm = effective.last().expect("pending eviction has a message");
    let compactbench_core::Origin::Entry(entry) = vm.origin else { return out };
    let text = vm.message.text();
    let path = format!("{}/{}.md", paths::HISTORY_PREFIX, paths::uuid4(&["human", &entry.to_string(), &text]));
    if write(store, settings, &path, &text).is_none() {
        return out;
    }
    let stub = too_large_human_stub(&path, &text);
    // Text parts collapse into the stub; media parts stay after it.
    let mut parts = vec![Part::text(stub)];
    parts.extend(vm.message.parts.iter().filter(|p| !matches!(p, Part::Text { .. })).cloned());
    out.offloads.push(Offload { path, entries: vec![entry] });
    out.replacements.push(Replacement { entry, message: Message { parts, ..vm.message.clone() } });
    out
}

/// `_clip_overflow_tail` as the newest release calls it (`keep=("tokens", 1)`, so any trailing
/// batch qualifies): every tool message of the trailing batch of `request` is shortened — a
/// `read_file` result to its first 4,000 chars plus a pointer to the file it read, any other
/// result offloaded to `/large_tool_results/<id>` behind a stub. Returns the new request and
/// the permanent stand-ins.
pub(crate) fn clip_tail(
    request: &[ViewMessage],
    threshold: u64,
    settings: &Settings,
    store: &mut VirtualStore,
) -> (Vec<ViewMessage>, Evicted) {
    let mut out = Evicted::default();
    let start = request.iter().rposition(|vm| vm.message.role != Role::Tool).map_or(0, |i| i + 1);
    if start == request.len() {
        return (request.to_vec(), out);
    }
    let tail = &request[start..];
    if count::count(tail.iter().map(|vm| &vm.message), settings.chars_per_token(), true) < threshold {
        return (request.to_vec(), out);
    }
    let calls: HashMap<&str, (&str, &serde_json::Value)> = request
        .iter()
        .filter(|vm| vm.message.role == Role::Assistant)
        .flat_map(|vm| vm.message.parts.iter())
        .filter_map(|p| match p {
            Part::ToolCall { id, name, args } if !id.is_empty() => Some((id.as_str(), (name.as_str(), args))),
            _ => None,
        })
        .collect();
    let mut new_tail = Vec::with_capacity(tail.len());
    for vm in tail {
        let Some(entry) = vm.origin.entry() else {
            new_tail.push(vm.clone());
            continue;
        };
        let mut message = vm.message.clone();
        let mut changed = false;
        for part in &mut message.parts {
            let Part::ToolResult { call_id, text, .. } = part else { continue };
            let read_path = calls.get(call_id.as_str()).and_then(|(name, args)| {
                (*name == "read_file")
                    .then(|| args.get("file_path").and_then(|p| p.as_str()))
                    .flatten()
                    .filter(|p| !p.is_empty())
            });
            if let Some(original) = read_path {
                *text = read_file_slice(text, original);
                changed = true;
            } else if let Some(path) = offload_result(call_id, text, settings, store) {
                out.offloads.push(Offload { path: path.clone(), entries: vec![entry] });
                *text = too_large_tool_stub(call_id, &path, text);
                changed = true;
            }
        }
        if changed {
            out.replacements.push(Replacement { entry, message: message.clone() });
        }
        new_tail.push(ViewMessage { origin: vm.origin, message });
    }
    let mut clipped = request[..start].to_vec();
    clipped.extend(new_tail);
    (clipped, out)
}

/// `_slice_read_file_tm`: the head of the result and a pointer back to the file it read.
pub(crate) fn read_file_slice(text: &str, original_path: &str) -> String {
    let head: String = text.chars().take(READ_FILE_HEAD_CHARS).collect();
    format!(
        "{head}\n\n[Output cut short because of the context window's size limits. The full content is at {original_path}. \
         Fetch the parts you need with read_file's offset and limit parameters: for example, call \
         read_file with file_path='{original_path}', offset=0, limit=100 to obtain its first 100 lines.]"
    )
}

/// The large-tool-result stub (`_render_too_large_tool_msg`).
pub(crate) fn too_large_tool_stub(call_id: &str, path: &str, content: &str) -> String {
    let visible = if call_id.chars().count() > VISIBLE_TOOL_CALL_ID_LIMIT {
        format!("{}...", call_id.chars().take(VISIBLE_TOOL_CALL_ID_LIMIT).collect::<String>())
    } else {
        call_id.to_owned()
    };
    render_stub(
        &format!(
            "Tool result too large: the output of tool call {visible} was stored in the filesystem at: {path}\n\n\
             The full result can be read back from the filesystem with the read_file tool; read it in parts \
             rather than all at once, one slice per call.\n\n\
             Each read_file call takes an offset and a limit: offset=0 and limit=100, for instance, return the \
             first 100 lines, and a following call, with offset=100, then continues from line 101."
        ),
        &preview(content),
        "result",
    )
}

/// The large-human-message stub (`_build_truncated_human_message` with `_TOO_LARGE_HUMAN_MSG`).
pub(crate) fn too_large_human_stub(path: &str, content: &str) -> String {
    render_stub(
        &format!(
            "This message was too large; its content was stored in the filesystem at: {path}\n\n\
             Read the complete text with the read_file tool, one page at a time (use offset and limit)."
        ),
        &preview(content),
        "content",
    )
}

/// A rendered preview and what it left out.
pub(crate) struct Preview {
    text: String,
    lines_omitted: bool,
    lines_clipped: bool,
}

/// Stub = header, blank line, the note describing the preview, blank line, the preview.
fn render_stub(header: &str, preview: &Preview, subject: &str) -> String {
    let mut note = if preview.lines_omitted {
        format!("This preview shows the first and last lines of the {subject}")
    } else {
        format!("This is a preview of the {subject}")
    };
    let mut caveats = Vec::new();
    if preview.lines_omitted {
        caveats.push(
            "a line of the form `... [N lines truncated] ...` stands for the lines left out in the middle region".to_owned(),
        );
    }
    if preview.lines_clipped {
        caveats.push(format!(
            "some lines of the output are longer than {PREVIEW_LINE_CHAR_LIMIT} characters; for those, the preview shows the first {PREVIEW_LINE_CHAR_LIMIT} only"
        ));
    }
    if !caveats.is_empty() {
        note.push_str(&format!(" ({})", caveats.join("; ")));
    }
    format!("{header}\n\n{note}:\n\n{}\n", preview.text)
}

/// `_create_content_preview`: all lines when there are at most ten, else the first and last
/// five around the literal `... [N lines truncated] ...` marker; lines cut to 1,000 chars;
/// line-numbered.
pub(crate) fn preview(content: &str) -> Preview {
    let lines = split_lines(content);
    let clip = |shown: &[&str]| -> (Vec<String>, bool) {
        let clipped = shown.iter().any(|l| l.chars().count() > PREVIEW_LINE_CHAR_LIMIT);
        (shown.iter().map(|l| l.chars().take(PREVIEW_LINE_CHAR_LIMIT).collect()).collect(), clipped)
    };
    if lines.len() <= 2 * PREVIEW_LINES {
        let (shown, clipped) = clip(&lines);
        return Preview { text: numbered(&shown, 1), lines_omitted: false, lines_clipped: clipped };
    }
    let (head, head_clipped) = clip(&lines[..PREVIEW_LINES]);
    let (tail, tail_clipped) = clip(&lines[lines.len() - PREVIEW_LINES..]);
    let omitted = lines.len() - 2 * PREVIEW_LINES;
    let text = format!(
        "{}\n... [{omitted} lines truncated] ...\n{}",
        numbered(&head, 1),
        numbered(&tail, lines.len() - PREVIEW_LINES + 1)
    );
    Preview { text, lines_omitted: true, lines_clipped: head_clipped || tail_clipped }
}

/// `format_content_with_line_numbers`: right-aligned line numbers, two spaces, the line; lines
/// over 5,000 chars continue on rows numbered `N.1`, `N.2`, ….
fn numbered(lines: &[String], start: usize) -> String {
    let mut rows: Vec<(String, String)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let n = i + start;
        let chars: Vec<char> = line.chars().collect();
        if chars.is_empty() {
            rows.push((n.to_string(), String::new()));
            continue;
        }
        for (k, chunk) in chars.chunks(MAX_LINE_LENGTH).enumerate() {
            let marker = if k == 0 { n.to_string() } else { format!("{n}.{k}") };
            rows.push((marker, chunk.iter().collect()));
        }
    }
    let width = rows.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    rows.iter().map(|(m, l)| format!("{m:>width$}  {l}")).collect::<Vec<_>>().join("\n")
}

/// Python `str.splitlines()`.
fn split_lines(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut iter = s.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        let is_break = matches!(
            c,
            '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}'
        );
        if !is_break {
            continue;
        }
        out.push(&s[start..i]);
        let mut end = i + c.len_utf8();
        if c == '\r' {
            if let Some(&(j, '\n')) = iter.peek() {
                iter.next();
                end = j + 1;
            }
        }
        start = end;
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}
