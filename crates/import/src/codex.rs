//! Codex CLI rollout JSONL. See the crate docs for the mapping.

use std::collections::HashMap;
use std::io::BufRead;

use compactbench_core::{Message, Part, Role, Usage};
use serde_json::Value;

use crate::json::{self, Obj};
use crate::media::media_from_url;
use crate::{opaque_placeholder, tool_message, usage, Ctx, Fail, ImportError, RecordedCompaction};

enum Line {
    Meta,
    /// A line type this importer does not know: metadata, but not evidence of the format.
    Unknown,
    TokenCount(Option<Usage>),
    Compacted(Option<String>),
    /// A user / system message.
    Message {
        role: Role,
        parts: Vec<Part>,
        unknown: usize,
    },
    /// Assistant-side parts (text, reasoning, calls) that join the open assistant message.
    Assistant {
        parts: Vec<Part>,
        unknown: usize,
        opaque: u64,
    },
    Output {
        call_id: String,
        text: String,
        is_error: bool,
        media: Vec<Part>,
    },
}

pub(crate) fn import<R: BufRead>(
    reader: R,
    ctx: &mut Ctx<'_>,
) -> Result<(Vec<Message>, Vec<RecordedCompaction>), ImportError> {
    let mut messages: Vec<Message> = Vec::new();
    let mut recorded = Vec::new();
    let mut names: HashMap<String, String> = HashMap::new();
    ctx.each_line(reader, |ctx, _line, text| {
        let obj = json::parse_object(text)?;
        let line = parse(&obj)?;
        if !matches!(line, Line::Unknown) {
            ctx.recognized += 1;
        }
        match line {
            Line::Meta | Line::Unknown => ctx.stats.metadata_lines += 1,
            Line::TokenCount(u) => {
                ctx.stats.metadata_lines += 1;
                if let (Some(u), Some(m)) = (
                    u,
                    messages
                        .iter_mut()
                        .rev()
                        .find(|m| m.role == Role::Assistant),
                ) {
                    if m.usage.is_none() {
                        m.usage = Some(u);
                    }
                }
            }
            Line::Compacted(summary) => recorded.push(RecordedCompaction {
                message_index: messages.len(),
                summary,
                ..RecordedCompaction::default()
            }),
            Line::Message {
                role,
                parts,
                unknown,
            } => {
                ctx.stats.unknown_parts += unknown;
                messages.push(Message::new(role, parts));
            }
            Line::Assistant {
                parts,
                unknown,
                opaque,
            } => {
                ctx.stats.unknown_parts += unknown;
                ctx.stats.opaque_reasoning_bytes += opaque;
                for p in &parts {
                    if let Part::ToolCall { id, name, .. } = p {
                        names.insert(id.clone(), name.clone());
                    }
                }
                match messages.last_mut() {
                    Some(m) if m.role == Role::Assistant => m.parts.extend(parts),
                    _ => messages.push(Message::new(Role::Assistant, parts)),
                }
            }
            Line::Output {
                call_id,
                text,
                is_error,
                media,
            } => {
                let name = names.get(&call_id).cloned().unwrap_or_default();
                messages.push(tool_message(call_id, name, text, is_error, media));
            }
        }
        Ok::<(), Fail>(())
    })?;
    Ok((messages, recorded))
}

fn parse(o: &Obj) -> Result<Line, String> {
    match json::req_str(o, "", "type")? {
        "response_item" => parse_item(json::req_obj(o, "", "payload")?),
        "compacted" => {
            let p = json::req_obj(o, "", "payload")?;
            Ok(Line::Compacted(
                json::opt_str(p, "payload", "message")?.map(str::to_string),
            ))
        }
        "event_msg" => {
            let p = json::req_obj(o, "", "payload")?;
            if json::opt_str(p, "payload", "type")? != Some("token_count") {
                return Ok(Line::Meta);
            }
            let last = json::get(p, "info")
                .and_then(Value::as_object)
                .and_then(|i| i.get("last_token_usage"))
                .and_then(Value::as_object);
            Ok(Line::TokenCount(last.map(|u| {
                let input = json::num(Some(u), "input_tokens");
                let cached = json::num(Some(u), "cached_input_tokens").min(input);
                usage(
                    input - cached,
                    0,
                    cached,
                    json::num(Some(u), "output_tokens"),
                )
            })))
        }
        "session_meta" | "turn_context" => Ok(Line::Meta),
        _ => Ok(Line::Unknown),
    }
}

fn parse_item(p: &Obj) -> Result<Line, String> {
    let at = "payload";
    match json::req_str(p, at, "type")? {
        "message" => {
            let role = json::req_str(p, at, "role")?;
            let (parts, unknown) = content_parts(p, at)?;
            match role {
                "assistant" => Ok(Line::Assistant {
                    parts,
                    unknown,
                    opaque: 0,
                }),
                "user" => Ok(Line::Message {
                    role: Role::User,
                    parts,
                    unknown,
                }),
                "developer" | "system" => Ok(Line::Message {
                    role: Role::System,
                    parts,
                    unknown,
                }),
                other => Err(format!(
                    "field `payload.role` has unknown value \"{other}\""
                )),
            }
        }
        "reasoning" => {
            let mut texts: Vec<String> = Vec::new();
            if let Some(content) = json::opt_arr(p, at, "content")? {
                for (i, c) in content.iter().enumerate() {
                    let c = json::elem_obj(c, "payload.content", i)?;
                    texts.push(
                        json::req_str(c, &format!("payload.content[{i}]"), "text")?.to_string(),
                    );
                }
            }
            if texts.is_empty() {
                for (i, s) in json::opt_arr(p, at, "summary")?
                    .unwrap_or_default()
                    .iter()
                    .enumerate()
                {
                    let s = json::elem_obj(s, "payload.summary", i)?;
                    texts.push(
                        json::req_str(s, &format!("payload.summary[{i}]"), "text")?.to_string(),
                    );
                }
            }
            let mut opaque = 0;
            if let Some(enc) = json::opt_str(p, at, "encrypted_content")? {
                opaque = enc.len() as u64;
                texts.push(opaque_placeholder(enc.len()));
            }
            Ok(Line::Assistant {
                parts: vec![Part::Reasoning {
                    text: texts.join("\n\n"),
                }],
                unknown: 0,
                opaque,
            })
        }
        "function_call" => Ok(call(
            json::req_str(p, at, "call_id")?,
            json::req_str(p, at, "name")?,
            json::parse_args(json::req_str(p, at, "arguments")?),
        )),
        "custom_tool_call" => Ok(call(
            json::req_str(p, at, "call_id")?,
            json::req_str(p, at, "name")?,
            Value::String(json::req_str(p, at, "input")?.to_string()),
        )),
        "local_shell_call" => {
            let id = match json::opt_str(p, at, "call_id")? {
                Some(id) => id,
                None => json::req_str(p, at, "id")?,
            };
            Ok(call(
                id,
                "local_shell",
                p.get("action").cloned().unwrap_or(Value::Null),
            ))
        }
        "function_call_output" | "custom_tool_call_output" => {
            let call_id = json::req_str(p, at, "call_id")?.to_string();
            let (text, is_error, media) = output(p)?;
            Ok(Line::Output {
                call_id,
                text,
                is_error,
                media,
            })
        }
        _ => Ok(Line::Meta),
    }
}

fn call(id: &str, name: &str, args: Value) -> Line {
    Line::Assistant {
        parts: vec![Part::ToolCall {
            id: id.to_string(),
            name: name.to_string(),
            args,
        }],
        unknown: 0,
        opaque: 0,
    }
}

/// `content[]` of a message item.
fn content_parts(p: &Obj, at: &str) -> Result<(Vec<Part>, usize), String> {
    let mut parts = Vec::new();
    let mut unknown = 0;
    match json::get(p, "content") {
        None => {}
        Some(Value::String(s)) => parts.push(Part::text(s.clone())),
        Some(Value::Array(items)) => {
            for (i, c) in items.iter().enumerate() {
                let name = format!("{at}.content");
                let c = json::elem_obj(c, &name, i)?;
                let at_i = format!("{name}[{i}]");
                match json::req_str(c, &at_i, "type")? {
                    "input_text" | "output_text" | "text" => {
                        parts.push(Part::text(json::req_str(c, &at_i, "text")?))
                    }
                    "refusal" => parts.push(Part::text(
                        json::opt_str(c, &at_i, "refusal")?.unwrap_or(""),
                    )),
                    "input_image" => parts.push(media_from_url(
                        json::opt_str(c, &at_i, "image_url")?.unwrap_or(""),
                        "image/png",
                    )),
                    _ => unknown += 1,
                }
            }
        }
        Some(v) => {
            return Err(format!(
                "field `{at}.content` must be an array, found {}",
                json::kind(v)
            ))
        }
    }
    Ok((parts, unknown))
}

/// Text, error flag and media of a call output.
fn output(p: &Obj) -> Result<(String, bool, Vec<Part>), String> {
    match json::get(p, "output") {
        None => Err("missing field `payload.output`".into()),
        Some(Value::String(s)) => Ok((s.clone(), string_output_failed(s), Vec::new())),
        Some(Value::Object(o)) => {
            let failed = json::opt_bool(o, "payload.output", "success")? == Some(false);
            match json::get(o, "content") {
                Some(Value::String(s)) => {
                    Ok((s.clone(), failed || string_output_failed(s), Vec::new()))
                }
                _ => {
                    let (parts, _) = content_parts(o, "payload.output")?;
                    Ok(split(parts, failed))
                }
            }
        }
        Some(Value::Array(_)) => {
            let mut wrapper = Obj::new();
            wrapper.insert("content".into(), p["output"].clone());
            let (parts, _) = content_parts(&wrapper, "payload.output")?;
            Ok(split(parts, false))
        }
        Some(v) => Err(format!(
            "field `payload.output` must be a string, an object or an array, found {}",
            json::kind(v)
        )),
    }
}

fn split(parts: Vec<Part>, failed: bool) -> (String, bool, Vec<Part>) {
    let text = Message::new(Role::Tool, parts.clone()).text();
    let media = parts
        .into_iter()
        .filter(|p| matches!(p, Part::Media { .. }))
        .collect();
    (text, failed, media)
}

/// Whether a shell output string (`{"output":…,"metadata":{"exit_code":N}}`) reports failure.
fn string_output_failed(s: &str) -> bool {
    if !s.starts_with('{') {
        return false;
    }
    let Ok(Value::Object(o)) = serde_json::from_str::<Value>(s) else {
        return false;
    };
    let exit = o
        .get("metadata")
        .and_then(|m| m.get("exit_code"))
        .and_then(Value::as_i64);
    matches!(exit, Some(code) if code != 0)
}
