//! V2 history rows rebuilt from the log, and their serialization for the summarizer.
//!
//! A V2 session stores one row per `SessionMessage`. An assistant row holds its tool calls
//! together with their results, so one row here is an assistant log message plus the tool
//! messages that directly follow it. Every other message is a row of its own.

use compactbench_core::{estimate, Entry, EntryId, Log, Message, Part, Role};

/// `TOOL_OUTPUT_MAX_CHARS` (literal value): tool output longer than this, in UTF-16 code
/// units, is cut before it reaches the summarizer.
const TOOL_OUTPUT_MAX_CHARS: usize = 2_000;

/// The marker V2 appends to cut tool output (literal).
const TRUNCATED: &str = "\n[truncated]";

/// `Token.estimate`: `max(0, round(len / 4))` over UTF-16 code units.
pub(crate) fn est_oc(text: &str) -> u64 {
    estimate::chars_div4_round(text)
}

/// How many messages open the log with the system role. They stand for the agent prompt and
/// the context baseline, which V2 rebuilds for every request and never stores as rows.
pub(crate) fn leading_system_count(log: &Log) -> usize {
    log.entries()
        .take_while(|(_, e)| matches!(e, Entry::Message(m) if m.role == Role::System))
        .count()
}

/// Ids of the system messages after the leading ones: V2 `system` rows ("system updates").
/// Their `seq` is newer than the context baseline, so the history query keeps them visible
/// even before the latest checkpoint.
pub(crate) fn system_rows(log: &Log) -> Vec<EntryId> {
    let leading = leading_system_count(log);
    log.messages().filter(|(id, m)| id.index() >= leading && m.role == Role::System).map(|(id, _)| id).collect()
}

/// One V2 session row.
pub(crate) struct Row<'a> {
    /// Log ids of the messages the row is made of, oldest first.
    pub(crate) ids: Vec<EntryId>,
    /// The message that opens the row.
    pub(crate) message: &'a Message,
    /// Tool messages folded into an assistant row.
    pub(crate) tools: Vec<&'a Message>,
}

impl Row<'_> {
    /// Whether this is a `user` row (the snap variant looks for these).
    pub(crate) fn is_user(&self) -> bool {
        self.message.role == Role::User
    }
}

/// The rows `entriesForRunner` returns, minus the checkpoint row itself: every row when
/// there is no checkpoint, otherwise the system rows from before `checkpoint` plus every row
/// after it, in log order.
pub(crate) fn rows(log: &Log, checkpoint: Option<EntryId>) -> Vec<Row<'_>> {
    let leading = leading_system_count(log);
    let mut rows: Vec<Row<'_>> = Vec::new();
    // Whether the last row is an assistant row that directly precedes the current entry, so
    // a tool message may join it.
    let mut open_assistant = false;
    for (id, entry) in log.entries().skip(leading) {
        let Entry::Message(m) = entry else {
            open_assistant = false;
            continue;
        };
        let visible = match checkpoint {
            None => true,
            Some(c) => id > c || (id < c && m.role == Role::System),
        };
        if !visible {
            open_assistant = false;
            continue;
        }
        match m.role {
            Role::Tool if open_assistant => {
                let row = rows.last_mut().expect("an open assistant row exists");
                row.ids.push(id);
                row.tools.push(m);
            }
            role => {
                open_assistant = role == Role::Assistant;
                rows.push(Row { ids: vec![id], message: m, tools: Vec::new() });
            }
        }
    }
    rows
}

/// `truncate`: cut at `TOOL_OUTPUT_MAX_CHARS` UTF-16 code units and mark the cut.
pub(crate) fn truncate(value: &str) -> String {
    if estimate::utf16_len(value) <= TOOL_OUTPUT_MAX_CHARS as u64 {
        return value.to_owned();
    }
    let mut units = 0;
    let mut end = 0;
    for (i, ch) in value.char_indices() {
        // A pair split by JavaScript's `slice` would leave a lone surrogate; Rust strings
        // cannot hold one, so the cut falls before the pair instead.
        if units + ch.len_utf16() > TOOL_OUTPUT_MAX_CHARS {
            break;
        }
        units += ch.len_utf16();
        end = i + ch.len_utf8();
    }
    format!("{}{TRUNCATED}", &value[..end])
}

/// `serializeToolContent`: text items as they are, media as `[Attached <mime>]`, one per line.
fn tool_content(text: &str, message: &Message) -> String {
    let mut items = vec![text.to_owned()];
    items.extend(message.parts.iter().filter_map(|p| match p {
        Part::Media { mime, .. } => Some(format!("[Attached {mime}]")),
        _ => None,
    }));
    items.join("\n")
}

/// The serialized lines of one tool result: `[Tool result]: ` with the cut output, or
/// `[Tool error]: ` with the error message (not cut, as in V2).
fn result_line(text: &str, is_error: bool, carrier: &Message) -> String {
    if is_error {
        format!("[Tool error]: {text}")
    } else {
        format!("[Tool result]: {}", truncate(&tool_content(text, carrier)))
    }
}

/// `JSON.stringify` of a tool input, or the input itself when it is a string.
fn tool_input(args: &serde_json::Value) -> String {
    match args {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `serialize`: the text one row contributes to the summarizer (and to `recent`). Prefixes
/// are literal.
pub(crate) fn serialize(row: &Row<'_>) -> String {
    let m = row.message;
    match m.role {
        Role::User => {
            let mut lines = vec![format!("[User]: {}", m.text())];
            // V2 prints `name ?? uri`; the seam carries neither, so a fixed name stands in.
            lines.extend(m.parts.iter().filter_map(|p| match p {
                Part::Media { mime, .. } => Some(format!("[Attached {mime}: file]")),
                _ => None,
            }));
            lines.join("\n")
        }
        Role::System => format!("[System update]: {}", m.text()),
        Role::Assistant => {
            let results: Vec<(&str, &str, bool, &Message)> = row
                .tools
                .iter()
                .flat_map(|t| {
                    t.parts.iter().filter_map(move |p| match p {
                        Part::ToolResult { call_id, text, is_error, .. } => {
                            Some((call_id.as_str(), text.as_str(), *is_error, *t))
                        }
                        _ => None,
                    })
                })
                .collect();
            let mut used = vec![false; results.len()];
            let mut lines = Vec::new();
            for part in &m.parts {
                match part {
                    Part::Text { text } => lines.push(format!("[Assistant]: {text}")),
                    Part::Reasoning { text } if !text.is_empty() => lines.push(format!("[Assistant reasoning]: {text}")),
                    Part::ToolCall { id, name, args } => {
                        lines.push(format!("[Assistant tool call]: {name}({})", tool_input(args)));
                        // A call without a result is a pending or running tool: call line only.
                        if let Some(i) = results.iter().enumerate().position(|(i, r)| !used[i] && r.0 == id) {
                            used[i] = true;
                            let (_, text, is_error, carrier) = results[i];
                            lines.push(result_line(text, is_error, carrier));
                        }
                    }
                    Part::Reasoning { .. } | Part::ToolResult { .. } | Part::Media { .. } => {}
                }
            }
            // Results that answer no call of this message cannot exist in V2 (results live
            // inside their call); they are kept as result lines rather than dropped.
            for (i, (_, text, is_error, carrier)) in results.iter().enumerate() {
                if !used[i] {
                    lines.push(result_line(text, *is_error, carrier));
                }
            }
            lines.join("\n")
        }
        // A tool message with no assistant row before it (cannot happen in V2).
        Role::Tool => m
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolResult { text, is_error, .. } => Some(result_line(text, *is_error, m)),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}
