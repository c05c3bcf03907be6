//! Claude Code session JSONL. See the crate docs for the mapping.

use std::collections::HashMap;
use std::io::BufRead;

use compactbench_core::{Message, Part, Role, Usage};
use serde_json::Value;

use crate::json::{self, Obj};
use crate::media::media_part;
use crate::{opaque_placeholder, tool_message, usage, Ctx, Fail, ImportError, RecordedCompaction};

/// One parsed line.
enum Line {
    Meta,
    /// A line type Claude Code does not write: metadata, but not evidence of the format.
    Unknown,
    Sidechain {
        tool_calls: usize,
    },
    CompactBoundary {
        trigger: Option<String>,
        pre_tokens: Option<u64>,
    },
    User {
        results: Vec<ResultPart>,
        parts: Vec<Part>,
        compact_summary: bool,
        unknown: usize,
    },
    Assistant {
        id: Option<String>,
        parts: Vec<Part>,
        usage: Option<Usage>,
        unknown: usize,
        opaque: u64,
    },
}

struct ResultPart {
    call_id: String,
    text: String,
    is_error: bool,
    media: Vec<Part>,
}

pub(crate) fn import<R: BufRead>(
    reader: R,
    ctx: &mut Ctx<'_>,
) -> Result<(Vec<Message>, Vec<RecordedCompaction>), ImportError> {
    let mut st = State::default();
    ctx.each_line(reader, |ctx, _line, text| {
        let obj = json::parse_object(text)?;
        // Informational only: a line without a string `version` keeps the last one seen.
        if let Some(version) = obj.get("version").and_then(Value::as_str) {
            st.release = Some(version.to_owned());
        }
        let line = parse(&obj)?;
        st.apply(ctx, line);
        Ok::<(), Fail>(())
    })?;
    Ok((st.messages, st.recorded))
}

fn parse(o: &Obj) -> Result<Line, String> {
    let ty = json::req_str(o, "", "type")?;
    let known = matches!(ty, "user" | "assistant" | "system" | "summary");
    if known && json::opt_bool(o, "", "isSidechain")? == Some(true) {
        let mut tool_calls = 0;
        if let Some(Value::Object(m)) = o.get("message") {
            if let Some(Value::Array(parts)) = m.get("content") {
                tool_calls = parts
                    .iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some("tool_use"))
                    .count();
            }
        }
        return Ok(Line::Sidechain { tool_calls });
    }
    match ty {
        "user" => parse_user(o),
        "assistant" => parse_assistant(o),
        "system" if json::opt_str(o, "", "subtype")? == Some("compact_boundary") => {
            let meta = json::opt_obj(o, "", "compactMetadata")?;
            let (trigger, pre_tokens) = match meta {
                Some(m) => (
                    json::opt_str(m, "compactMetadata", "trigger")?.map(str::to_string),
                    json::opt_u64(m, "compactMetadata", "preTokens")?,
                ),
                None => (None, None),
            };
            Ok(Line::CompactBoundary {
                trigger,
                pre_tokens,
            })
        }
        "system" | "summary" | "file-history-snapshot" | "queue-operation" | "progress" => {
            Ok(Line::Meta)
        }
        _ => Ok(Line::Unknown),
    }
}

fn parse_user(o: &Obj) -> Result<Line, String> {
    let msg = json::req_obj(o, "", "message")?;
    let compact_summary = json::opt_bool(o, "", "isCompactSummary")? == Some(true);
    let mut results = Vec::new();
    let mut parts = Vec::new();
    let mut unknown = 0;
    match json::get(msg, "content") {
        None => return Err("missing field `message.content`".into()),
        Some(Value::String(s)) => parts.push(Part::text(s.clone())),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let at = format!("message.content[{i}]");
                let p = json::elem_obj(item, "message.content", i)?;
                match json::req_str(p, &at, "type")? {
                    "text" => parts.push(Part::text(json::req_str(p, &at, "text")?)),
                    "image" | "document" => parts.push(source_media(p, &at)?),
                    "tool_result" => {
                        let call_id = json::req_str(p, &at, "tool_use_id")?.to_string();
                        let is_error = json::opt_bool(p, &at, "is_error")?.unwrap_or(false);
                        let (text, media, unk) = result_content(p.get("content"), &at)?;
                        unknown += unk;
                        results.push(ResultPart {
                            call_id,
                            text,
                            is_error,
                            media,
                        });
                    }
                    _ => unknown += 1,
                }
            }
        }
        Some(v) => {
            return Err(format!(
                "field `message.content` must be a string or an array, found {}",
                json::kind(v)
            ))
        }
    }
    Ok(Line::User {
        results,
        parts,
        compact_summary,
        unknown,
    })
}

/// Text and media of a `tool_result`'s `content` (string, list of blocks, or absent).
fn result_content(content: Option<&Value>, at: &str) -> Result<(String, Vec<Part>, usize), String> {
    let mut texts: Vec<&str> = Vec::new();
    let mut media = Vec::new();
    let mut unknown = 0;
    match content {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => texts.push(s),
        Some(Value::Array(items)) => {
            let at = format!("{at}.content");
            for (i, item) in items.iter().enumerate() {
                let p = json::elem_obj(item, &at, i)?;
                let at_i = format!("{at}[{i}]");
                match json::req_str(p, &at_i, "type")? {
                    "text" => texts.push(json::req_str(p, &at_i, "text")?),
                    "image" | "document" => media.push(source_media(p, &at_i)?),
                    _ => unknown += 1,
                }
            }
        }
        Some(v) => {
            return Err(format!(
                "field `{at}.content` must be a string or an array, found {}",
                json::kind(v)
            ))
        }
    }
    Ok((texts.join("\n"), media, unknown))
}

/// An Anthropic `image` / `document` block with a `source`.
fn source_media(p: &Obj, at: &str) -> Result<Part, String> {
    let default = if json::opt_str(p, at, "type")? == Some("document") {
        "application/pdf"
    } else {
        "image/png"
    };
    let Some(src) = json::opt_obj(p, at, "source")? else {
        return Ok(media_part(default, None));
    };
    let at = format!("{at}.source");
    let mime = json::opt_str(src, &at, "media_type")?.unwrap_or(default);
    match json::opt_str(src, &at, "type")? {
        Some("base64") => Ok(media_part(mime, json::opt_str(src, &at, "data")?)),
        Some("url") => Ok(crate::media::media_from_url(
            json::opt_str(src, &at, "url")?.unwrap_or(""),
            mime,
        )),
        _ => Ok(media_part(mime, None)),
    }
}

fn parse_assistant(o: &Obj) -> Result<Line, String> {
    let msg = json::req_obj(o, "", "message")?;
    let id = json::opt_str(msg, "message", "id")?.map(str::to_string);
    let mut parts = Vec::new();
    let mut unknown = 0;
    let mut opaque = 0u64;
    match json::get(msg, "content") {
        None => return Err("missing field `message.content`".into()),
        Some(Value::String(s)) => parts.push(Part::text(s.clone())),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let at = format!("message.content[{i}]");
                let p = json::elem_obj(item, "message.content", i)?;
                match json::req_str(p, &at, "type")? {
                    "text" => parts.push(Part::text(json::req_str(p, &at, "text")?)),
                    "thinking" => parts.push(Part::Reasoning {
                        text: json::req_str(p, &at, "thinking")?.to_string(),
                    }),
                    "redacted_thinking" => {
                        let data = json::opt_str(p, &at, "data")?.unwrap_or("");
                        opaque += data.len() as u64;
                        parts.push(Part::Reasoning {
                            text: opaque_placeholder(data.len()),
                        });
                    }
                    "tool_use" => parts.push(Part::ToolCall {
                        id: json::req_str(p, &at, "id")?.to_string(),
                        name: json::req_str(p, &at, "name")?.to_string(),
                        args: p
                            .get("input")
                            .cloned()
                            .unwrap_or_else(|| Value::Object(Default::default())),
                    }),
                    "image" | "document" => parts.push(source_media(p, &at)?),
                    _ => unknown += 1,
                }
            }
        }
        Some(v) => {
            return Err(format!(
                "field `message.content` must be a string or an array, found {}",
                json::kind(v)
            ))
        }
    }
    let usage = json::opt_obj(msg, "message", "usage")?.map(|u| {
        usage(
            json::num(Some(u), "input_tokens"),
            json::num(Some(u), "cache_creation_input_tokens"),
            json::num(Some(u), "cache_read_input_tokens"),
            json::num(Some(u), "output_tokens"),
        )
    });
    Ok(Line::Assistant {
        id,
        parts,
        usage,
        unknown,
        opaque,
    })
}

#[derive(Default)]
struct State {
    messages: Vec<Message>,
    recorded: Vec<RecordedCompaction>,
    /// Tool name by call id.
    names: HashMap<String, String>,
    /// `message.id` and index of the assistant message that streamed lines merge into.
    open_assistant: Option<(String, usize)>,
    /// Index in `recorded` of a 2.x boundary still waiting for its summary line.
    pending_boundary: Option<usize>,
    /// The Claude Code release that wrote the latest line (each line names it).
    release: Option<String>,
}

impl State {
    fn apply(&mut self, ctx: &mut Ctx<'_>, line: Line) {
        match line {
            Line::Meta => {
                ctx.recognized += 1;
                ctx.stats.metadata_lines += 1;
            }
            Line::Unknown => ctx.stats.metadata_lines += 1,
            Line::Sidechain { tool_calls } => {
                ctx.recognized += 1;
                ctx.stats.sidechain_lines += 1;
                ctx.stats.excluded_tool_calls += tool_calls;
            }
            Line::CompactBoundary {
                trigger,
                pre_tokens,
            } => {
                ctx.recognized += 1;
                self.pending_boundary = Some(self.recorded.len());
                self.recorded.push(RecordedCompaction {
                    message_index: self.messages.len(),
                    trigger,
                    tokens_before: pre_tokens,
                    release: self.release.clone(),
                    ..RecordedCompaction::default()
                });
                self.open_assistant = None;
            }
            Line::User {
                results,
                parts,
                compact_summary,
                unknown,
            } => {
                ctx.recognized += 1;
                ctx.stats.unknown_parts += unknown;
                if parts.is_empty() && results.is_empty() && !compact_summary {
                    ctx.stats.dropped_messages += 1;
                }
                for r in results {
                    let name = self.names.get(&r.call_id).cloned().unwrap_or_default();
                    self.messages
                        .push(tool_message(r.call_id, name, r.text, r.is_error, r.media));
                }
                if parts.is_empty() {
                    if compact_summary {
                        self.record_summary(None);
                    }
                    return;
                }
                self.open_assistant = None;
                if compact_summary {
                    let text = Message::new(Role::User, parts.clone()).text();
                    self.record_summary(Some(text));
                }
                self.messages.push(Message::new(Role::User, parts));
            }
            Line::Assistant {
                id,
                parts,
                usage,
                unknown,
                opaque,
            } => {
                ctx.recognized += 1;
                ctx.stats.unknown_parts += unknown;
                ctx.stats.opaque_reasoning_bytes += opaque;
                for p in &parts {
                    if let Part::ToolCall { id, name, .. } = p {
                        self.names.insert(id.clone(), name.clone());
                    }
                }
                if let (Some(id), Some((open_id, idx))) = (&id, &self.open_assistant) {
                    let only_tools_since = self.messages[idx + 1..]
                        .iter()
                        .all(|m| m.role == Role::Tool);
                    if id == open_id && only_tools_since {
                        let m = &mut self.messages[*idx];
                        m.parts.extend(parts);
                        if usage.is_some() {
                            m.usage = usage;
                        }
                        return;
                    }
                }
                self.open_assistant = id.map(|id| (id, self.messages.len()));
                let mut m = Message::new(Role::Assistant, parts);
                m.usage = usage;
                self.messages.push(m);
            }
        }
    }

    /// Records the summary of a compaction: fills a 2.x boundary right before it, or records a
    /// 1.x compaction.
    fn record_summary(&mut self, summary: Option<String>) {
        let index = self.messages.len();
        if let Some(i) = self.pending_boundary.take() {
            if self.recorded[i].message_index == index && self.recorded[i].summary.is_none() {
                self.recorded[i].summary = summary;
                return;
            }
        }
        self.recorded.push(RecordedCompaction {
            message_index: index,
            summary,
            release: self.release.clone(),
            ..RecordedCompaction::default()
        });
    }
}
