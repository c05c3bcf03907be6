//! Pi session JSONL (v1 linear, v2/v3 tree). See the crate docs for the mapping.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;

use compactbench_core::{Message, Part, Role, Usage};
use serde_json::Value;

use crate::json::{self, Obj};
use crate::media::media_part;
use crate::{opaque_placeholder, tool_message, usage, Ctx, Fail, ImportError, RecordedCompaction};

/// Pi's prefix for a compaction summary shown to the model (`COMPACTION_SUMMARY_PREFIX`).
const COMPACTION_PREFIX: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
const COMPACTION_SUFFIX: &str = "\n</summary>";
/// Pi's prefix for a branch summary (`BRANCH_SUMMARY_PREFIX`).
const BRANCH_PREFIX: &str =
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
const BRANCH_SUFFIX: &str = "</summary>";
/// Pi's text for a call that got no result.
const NO_RESULT: &str = "No result provided";

struct Entry {
    id: Option<String>,
    parent: Option<String>,
    kind: Kind,
}

enum Kind {
    Header {
        version: u64,
    },
    Meta,
    Compaction {
        summary: String,
        tokens_before: Option<u64>,
        first_kept_index: Option<u64>,
        first_kept_id: Option<String>,
        timestamp: Option<String>,
    },
    /// A message the model sees as user input.
    User {
        parts: Vec<Part>,
        unknown: usize,
    },
    Assistant {
        parts: Vec<Part>,
        usage: Option<Usage>,
        dropped: bool,
        unknown: usize,
        opaque: u64,
    },
    ToolResult {
        call_id: String,
        name: Option<String>,
        text: String,
        is_error: bool,
        media: Vec<Part>,
    },
    /// A message kept out of the model's context (`!!` bash).
    Hidden,
}

pub(crate) fn import<R: BufRead>(
    reader: R,
    ctx: &mut Ctx<'_>,
) -> Result<(Vec<Message>, Vec<RecordedCompaction>), ImportError> {
    let mut st = State::default();
    // Tree sessions (v2+) are buffered until the branch is known; v1 sessions stream.
    let mut tree: Option<Vec<Entry>> = None;
    let mut entry_index = 0usize;
    ctx.each_line(reader, |ctx, _line, text| {
        let obj = json::parse_object(text)?;
        let entry = parse(&obj, tree.is_some())?;
        if entry_index == 0 {
            let Kind::Header { version } = entry.kind else {
                return Err(Fail::Fatal(
                    "not a Pi session: the first entry is not a `session` header".into(),
                ));
            };
            ctx.recognized += 1;
            ctx.stats.metadata_lines += 1;
            if version >= 2 {
                tree = Some(Vec::new());
            }
            entry_index = 1;
            return Ok(());
        }
        if matches!(entry.kind, Kind::Header { .. }) {
            return Err(Fail::Line("a second `session` header".into()));
        }
        ctx.recognized += 1;
        match &mut tree {
            Some(entries) => entries.push(entry),
            None => st.apply(ctx, entry_index, entry),
        }
        entry_index += 1;
        Ok(())
    })?;
    if let Some(entries) = tree {
        let path = active_branch(&entries);
        let mut on_path = vec![false; entries.len()];
        for &i in &path {
            on_path[i] = true;
        }
        let mut entries: Vec<Option<Entry>> = entries.into_iter().map(Some).collect();
        for (i, e) in entries.iter().enumerate() {
            if !on_path[i] {
                if let Some(Entry {
                    kind: Kind::Assistant { parts, .. },
                    ..
                }) = e
                {
                    ctx.stats.excluded_tool_calls += parts
                        .iter()
                        .filter(|p| matches!(p, Part::ToolCall { .. }))
                        .count();
                }
                if matches!(
                    e,
                    Some(Entry {
                        kind: Kind::Meta
                            | Kind::Hidden
                            | Kind::Compaction { .. }
                            | Kind::Header { .. },
                        ..
                    })
                ) {
                    ctx.stats.metadata_lines += 1;
                } else {
                    ctx.stats.dropped_messages += 1;
                }
            }
        }
        for i in path {
            if let Some(e) = entries[i].take() {
                st.apply(ctx, i + 1, e);
            }
        }
    }
    st.flush(ctx);
    Ok((st.messages, st.recorded))
}

/// Entry positions from the root to the last entry, following `parentId`.
fn active_branch(entries: &[Entry]) -> Vec<usize> {
    let by_id: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some((e.id.as_deref()?, i)))
        .collect();
    let mut path = Vec::new();
    let mut current = entries.len().checked_sub(1);
    let mut seen = HashSet::new();
    while let Some(i) = current {
        if !seen.insert(i) {
            break; // a cycle: stop rather than loop
        }
        path.push(i);
        current = entries[i]
            .parent
            .as_deref()
            .and_then(|p| by_id.get(p).copied());
    }
    path.reverse();
    path
}

fn parse(o: &Obj, tree: bool) -> Result<Entry, String> {
    let ty = json::req_str(o, "", "type")?;
    let (id, parent) = if tree && ty != "session" {
        (
            Some(json::req_str(o, "", "id")?.to_string()),
            json::opt_str(o, "", "parentId")?.map(str::to_string),
        )
    } else {
        (None, None)
    };
    let kind = match ty {
        "session" => Kind::Header {
            version: json::opt_u64(o, "", "version")?.unwrap_or(1),
        },
        "message" => parse_message(json::req_obj(o, "", "message")?)?,
        "compaction" => Kind::Compaction {
            summary: json::req_str(o, "", "summary")?.to_string(),
            tokens_before: json::opt_u64(o, "", "tokensBefore")?,
            first_kept_index: json::opt_u64(o, "", "firstKeptEntryIndex")?,
            first_kept_id: json::opt_str(o, "", "firstKeptEntryId")?.map(str::to_string),
            timestamp: json::opt_str(o, "", "timestamp")?.map(str::to_string),
        },
        "custom_message" => {
            let (parts, unknown) = user_content(o.get("content"), "content")?;
            Kind::User { parts, unknown }
        }
        "branch_summary" => match json::opt_str(o, "", "summary")? {
            Some(s) if !s.is_empty() => Kind::User {
                parts: vec![Part::text(format!("{BRANCH_PREFIX}{s}{BRANCH_SUFFIX}"))],
                unknown: 0,
            },
            _ => Kind::Meta,
        },
        _ => Kind::Meta,
    };
    Ok(Entry { id, parent, kind })
}

fn parse_message(m: &Obj) -> Result<Kind, String> {
    let at = "message";
    Ok(match json::req_str(m, at, "role")? {
        "user" | "custom" | "hookMessage" => {
            let (parts, unknown) = user_content(m.get("content"), "message.content")?;
            Kind::User { parts, unknown }
        }
        "assistant" => {
            let mut parts = Vec::new();
            let (mut unknown, mut opaque) = (0, 0u64);
            for (i, item) in json::req_arr(m, at, "content")?.iter().enumerate() {
                let p = json::elem_obj(item, "message.content", i)?;
                let at = format!("message.content[{i}]");
                match json::req_str(p, &at, "type")? {
                    "text" => parts.push(Part::text(json::req_str(p, &at, "text")?)),
                    "thinking" => {
                        let thinking = json::opt_str(p, &at, "thinking")?.unwrap_or("");
                        if json::opt_bool(p, &at, "redacted")? == Some(true) {
                            let data =
                                json::opt_str(p, &at, "thinkingSignature")?.unwrap_or(thinking);
                            opaque += data.len() as u64;
                            parts.push(Part::Reasoning {
                                text: opaque_placeholder(data.len()),
                            });
                        } else {
                            parts.push(Part::Reasoning {
                                text: thinking.to_string(),
                            });
                        }
                    }
                    "toolCall" => parts.push(Part::ToolCall {
                        id: json::req_str(p, &at, "id")?.to_string(),
                        name: json::req_str(p, &at, "name")?.to_string(),
                        args: p
                            .get("arguments")
                            .cloned()
                            .unwrap_or_else(|| Value::Object(Default::default())),
                    }),
                    "image" => parts.push(media_part(
                        json::opt_str(p, &at, "mimeType")?.unwrap_or("image/png"),
                        json::opt_str(p, &at, "data")?,
                    )),
                    _ => unknown += 1,
                }
            }
            let stop = json::opt_str(m, at, "stopReason")?;
            let usage = json::opt_obj(m, at, "usage")?.map(|u| {
                let u = Some(u);
                usage(
                    json::num(u, "input"),
                    json::num(u, "cacheWrite"),
                    json::num(u, "cacheRead"),
                    json::num(u, "output"),
                )
            });
            Kind::Assistant {
                parts,
                usage,
                dropped: matches!(stop, Some("error" | "aborted")),
                unknown,
                opaque,
            }
        }
        "toolResult" => {
            let call_id = json::req_str(m, at, "toolCallId")?.to_string();
            let name = json::opt_str(m, at, "toolName")?.map(str::to_string);
            let is_error = json::opt_bool(m, at, "isError")?.unwrap_or(false);
            let (parts, _) = user_content(m.get("content"), "message.content")?;
            let text = Message::new(Role::Tool, parts.clone()).text();
            let media = parts
                .into_iter()
                .filter(|p| matches!(p, Part::Media { .. }))
                .collect();
            Kind::ToolResult {
                call_id,
                name,
                text,
                is_error,
                media,
            }
        }
        "bashExecution" => {
            if json::opt_bool(m, at, "excludeFromContext")? == Some(true) {
                return Ok(Kind::Hidden);
            }
            Kind::User {
                parts: vec![Part::text(bash_execution_text(m)?)],
                unknown: 0,
            }
        }
        "branchSummary" => {
            let s = json::req_str(m, at, "summary")?;
            Kind::User {
                parts: vec![Part::text(format!("{BRANCH_PREFIX}{s}{BRANCH_SUFFIX}"))],
                unknown: 0,
            }
        }
        "compactionSummary" => {
            let s = json::req_str(m, at, "summary")?;
            Kind::User {
                parts: vec![Part::text(format!(
                    "{COMPACTION_PREFIX}{s}{COMPACTION_SUFFIX}"
                ))],
                unknown: 0,
            }
        }
        other => {
            return Err(format!(
                "field `message.role` has unknown value \"{other}\""
            ))
        }
    })
}

/// Pi's `bashExecutionToText`.
fn bash_execution_text(m: &Obj) -> Result<String, String> {
    let at = "message";
    let command = json::req_str(m, at, "command")?;
    let output = json::opt_str(m, at, "output")?.unwrap_or("");
    let mut text = format!("Ran `{command}`\n");
    if output.is_empty() {
        text.push_str("(no output)");
    } else {
        text.push_str(&format!("```\n{output}\n```"));
    }
    if json::opt_bool(m, at, "cancelled")? == Some(true) {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(code) = json::opt_i64(m, at, "exitCode")?.filter(|c| *c != 0) {
        text.push_str(&format!("\n\nCommand exited with code {code}"));
    }
    if json::opt_bool(m, at, "truncated")? == Some(true) {
        if let Some(path) = json::opt_str(m, at, "fullOutputPath")? {
            text.push_str(&format!("\n\n[Output truncated. Full output: {path}]"));
        }
    }
    Ok(text)
}

/// User-like content: a string or a list of `text` / `image` parts.
fn user_content(content: Option<&Value>, at: &str) -> Result<(Vec<Part>, usize), String> {
    let mut parts = Vec::new();
    let mut unknown = 0;
    match content {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => parts.push(Part::text(s.clone())),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let p = json::elem_obj(item, at, i)?;
                let at_i = format!("{at}[{i}]");
                match json::req_str(p, &at_i, "type")? {
                    "text" => parts.push(Part::text(json::req_str(p, &at_i, "text")?)),
                    "image" => parts.push(media_part(
                        json::opt_str(p, &at_i, "mimeType")?.unwrap_or("image/png"),
                        json::opt_str(p, &at_i, "data")?,
                    )),
                    _ => unknown += 1,
                }
            }
        }
        Some(v) => {
            return Err(format!(
                "field `{at}` must be a string or an array, found {}",
                json::kind(v)
            ))
        }
    }
    Ok((parts, unknown))
}

#[derive(Default)]
struct State {
    messages: Vec<Message>,
    recorded: Vec<RecordedCompaction>,
    names: HashMap<String, String>,
    /// Calls of the last kept assistant message, and the results seen for them.
    pending: Vec<(String, String)>,
    answered: HashSet<String>,
    /// Message index at each entry (v1: by entry index; v2+: by id).
    at_index: HashMap<usize, usize>,
    at_id: HashMap<String, usize>,
}

impl State {
    /// Synthetic results for unanswered calls, as Pi's `transformMessages` inserts them.
    fn flush(&mut self, ctx: &mut Ctx<'_>) {
        for (id, name) in std::mem::take(&mut self.pending) {
            if !self.answered.contains(&id) {
                ctx.stats.synthetic_results += 1;
                self.messages
                    .push(tool_message(id, name, NO_RESULT.into(), true, Vec::new()));
            }
        }
        self.answered.clear();
    }

    fn apply(&mut self, ctx: &mut Ctx<'_>, entry_index: usize, entry: Entry) {
        if matches!(
            entry.kind,
            Kind::User { .. } | Kind::Assistant { .. } | Kind::Compaction { .. }
        ) {
            self.flush(ctx);
        }
        let here = self.messages.len();
        self.at_index.insert(entry_index, here);
        if let Some(id) = entry.id {
            self.at_id.insert(id, here);
        }
        match entry.kind {
            Kind::Header { .. } | Kind::Meta | Kind::Hidden => ctx.stats.metadata_lines += 1,
            Kind::Compaction {
                summary,
                tokens_before,
                first_kept_index,
                first_kept_id,
                timestamp,
            } => {
                let first_kept_message = match (first_kept_id, first_kept_index) {
                    (Some(id), _) => self.at_id.get(&id).copied(),
                    (None, Some(i)) if i > 0 => usize::try_from(i)
                        .ok()
                        .and_then(|i| self.at_index.get(&i).copied()),
                    _ => None,
                };
                self.recorded.push(RecordedCompaction {
                    message_index: here,
                    trigger: None,
                    tokens_before,
                    summary: Some(summary),
                    first_kept_message,
                    // Pi's session files do not name the release that wrote them.
                    release: None,
                    recorded_at: timestamp,
                });
            }
            Kind::User { parts, unknown } => {
                ctx.stats.unknown_parts += unknown;
                self.messages.push(Message::new(Role::User, parts));
            }
            Kind::Assistant {
                parts,
                usage,
                dropped,
                unknown,
                opaque,
            } => {
                let calls: Vec<(String, String)> = parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::ToolCall { id, name, .. } => Some((id.clone(), name.clone())),
                        _ => None,
                    })
                    .collect();
                if dropped {
                    ctx.stats.dropped_messages += 1;
                    ctx.stats.excluded_tool_calls += calls.len();
                    return;
                }
                ctx.stats.unknown_parts += unknown;
                ctx.stats.opaque_reasoning_bytes += opaque;
                for (id, name) in &calls {
                    self.names.insert(id.clone(), name.clone());
                }
                if !calls.is_empty() {
                    self.pending = calls;
                    self.answered.clear();
                }
                let mut m = Message::new(Role::Assistant, parts);
                m.usage = usage;
                self.messages.push(m);
            }
            Kind::ToolResult {
                call_id,
                name,
                text,
                is_error,
                media,
            } => {
                let name = name
                    .or_else(|| self.names.get(&call_id).cloned())
                    .unwrap_or_default();
                self.answered.insert(call_id.clone());
                self.messages
                    .push(tool_message(call_id, name, text, is_error, media));
            }
        }
    }
}
