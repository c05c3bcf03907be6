//! OpenHands evaluation `output.jsonl`. See the crate docs for the mapping.

use std::collections::HashMap;
use std::io::BufRead;

use compactbench_core::{Message, Part, Role};
use serde_json::Value;

use crate::json::{self, Obj};
use crate::media::media_from_url;
use crate::{tool_message, usage, Ctx, Fail, ImportError, RecordedCompaction};

/// OpenHands' suffix for an error observation.
const ERROR_SUFFIX: &str = "\n[Error occurred in processing last action]";

enum Event {
    /// A message emitted as is.
    Emit(Message),
    /// An action made through a tool call: the response's assistant message and its call ids.
    ToolAction {
        event_id: Option<u64>,
        response_id: String,
        message: Message,
        own: (String, String),
        calls: Vec<String>,
    },
    /// An observation answering a call.
    ToolObs {
        call_id: Option<String>,
        name: Option<String>,
        cause: Option<u64>,
        text: String,
        is_error: bool,
    },
    /// An event that adds nothing to the prompt.
    Skip,
}

pub(crate) fn import<R: BufRead>(
    reader: R,
    ctx: &mut Ctx<'_>,
    row: usize,
) -> Result<(Vec<Message>, Vec<RecordedCompaction>), ImportError> {
    let mut rows = 0usize;
    let mut out: Option<Vec<Message>> = None;
    ctx.each_line(reader, |ctx, _line, text| {
        let this = rows;
        rows += 1;
        if this != row {
            return Ok(());
        }
        let obj = json::parse_object(text)?;
        let history = json::req_arr(&obj, "", "history")?;
        ctx.recognized += 1;
        out = Some(convert(ctx, history)?);
        Ok(())
    })?;
    match out {
        Some(messages) => Ok((messages, Vec::new())),
        None if rows <= row && ctx.stats.skipped_lines == 0 => Err(ctx.error(
            None,
            format!("row {row} not found: the file has {rows} row(s)"),
        )),
        None => Ok((Vec::new(), Vec::new())),
    }
}

struct Pending {
    response_id: String,
    message: Message,
    calls: Vec<String>,
}

fn convert(ctx: &mut Ctx<'_>, history: &[Value]) -> Result<Vec<Message>, Fail> {
    let mut messages = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut results: HashMap<String, Message> = HashMap::new();
    // Tool action event id -> (call id, tool name), for observations linked only by `cause`.
    let mut by_event: HashMap<u64, (String, String)> = HashMap::new();
    for (i, ev) in history.iter().enumerate() {
        let at = format!("history[{i}]");
        let event = match ev
            .as_object()
            .ok_or_else(|| format!("`{at}` must be an object, found {}", json::kind(ev)))
            .and_then(|o| parse_event(o, &at))
        {
            Ok(e) => e,
            Err(_) if ctx.lenient => {
                ctx.stats.skipped_lines += 1;
                continue;
            }
            Err(msg) => return Err(Fail::Line(format!("{at}: {msg}"))),
        };
        match event {
            Event::Skip => ctx.stats.metadata_lines += 1,
            Event::Emit(m) => messages.push(m),
            Event::ToolAction {
                event_id,
                response_id,
                message,
                own,
                calls: ids,
            } => {
                if let Some(id) = event_id {
                    by_event.insert(id, own);
                }
                match pending.iter_mut().find(|p| p.response_id == response_id) {
                    Some(p) => {
                        p.message = message;
                        p.calls = ids;
                    }
                    None => pending.push(Pending {
                        response_id,
                        message,
                        calls: ids,
                    }),
                }
            }
            Event::ToolObs {
                call_id,
                name,
                cause,
                text,
                is_error,
            } => {
                let linked = cause.and_then(|c| by_event.get(&c));
                let call_id = call_id.or_else(|| linked.map(|(c, _)| c.clone()));
                let name = name.or_else(|| linked.map(|(_, n)| n.clone()));
                match call_id {
                    Some(call_id) => {
                        let m = tool_message(
                            call_id.clone(),
                            name.unwrap_or_default(),
                            text,
                            is_error,
                            Vec::new(),
                        );
                        results.insert(call_id, m);
                    }
                    // Not answering a call: shown to the model as a user message.
                    None => messages.push(Message::user(text)),
                }
            }
        }
        // Emit every response whose calls all have results, followed by those results.
        let mut k = 0;
        while k < pending.len() {
            if pending[k].calls.iter().all(|c| results.contains_key(c)) {
                let p = pending.remove(k);
                messages.push(p.message);
                for c in &p.calls {
                    if let Some(r) = results.remove(c) {
                        messages.push(r);
                    }
                }
            } else {
                k += 1;
            }
        }
    }
    // Calls that never got results are dropped, as OpenHands' `_filter_unmatched_tool_calls` does.
    for p in pending {
        ctx.stats.dropped_messages += 1;
        ctx.stats.excluded_tool_calls += p.calls.len();
    }
    ctx.stats.dropped_messages += results.len();
    Ok(messages)
}

fn parse_event(o: &Obj, at: &str) -> Result<Event, String> {
    let event_id = json::opt_u64(o, at, "id")?;
    if let Some(action) = json::opt_str(o, at, "action")? {
        let args = json::opt_obj(o, at, "args")?;
        let args_at = format!("{at}.args");
        let content = |key: &str| -> Result<String, String> {
            let from_args = match args {
                Some(a) => json::opt_str(a, &args_at, key)?,
                None => None,
            };
            Ok(match from_args {
                Some(s) => s.to_string(),
                None => json::opt_str(o, at, "message")?.unwrap_or("").to_string(),
            })
        };
        let tcm = json::opt_obj(o, at, "tool_call_metadata")?;
        let source = json::opt_str(o, at, "source")?.unwrap_or("agent");
        return match action {
            "system" => Ok(Event::Emit(Message::system(content("content")?))),
            "message" => {
                let mut parts = vec![Part::text(content("content")?)];
                if let Some(urls) = args
                    .map(|a| json::opt_arr(a, &args_at, "image_urls"))
                    .transpose()?
                    .flatten()
                {
                    for u in urls.iter().filter_map(Value::as_str) {
                        parts.push(media_from_url(u, "image/png"));
                    }
                }
                let role = if source == "user" {
                    Role::User
                } else {
                    Role::Assistant
                };
                Ok(Event::Emit(Message::new(role, parts)))
            }
            "finish" => {
                let mut thought = match args {
                    Some(a) => json::opt_str(a, &args_at, "thought")?
                        .unwrap_or("")
                        .to_string(),
                    None => String::new(),
                };
                let response_text = match tcm {
                    Some(t) => response_message(t, &format!("{at}.tool_call_metadata"))?.1,
                    None => String::new(),
                };
                if thought.is_empty() {
                    thought = response_text;
                } else if thought != response_text && !response_text.is_empty() {
                    thought = format!("{thought}\n{response_text}");
                }
                let role = if source == "user" {
                    Role::User
                } else {
                    Role::Assistant
                };
                Ok(Event::Emit(Message::new(role, vec![Part::text(thought)])))
            }
            "recall" => Ok(Event::Skip),
            _ => match tcm {
                Some(t) => {
                    let t_at = format!("{at}.tool_call_metadata");
                    let call_id = json::req_str(t, &t_at, "tool_call_id")?.to_string();
                    let name = json::req_str(t, &t_at, "function_name")?.to_string();
                    let (mut response_id, text, mut calls, usage) = response_message(t, &t_at)?;
                    if response_id.is_empty() {
                        response_id = format!("call:{call_id}");
                    }
                    if !calls
                        .iter()
                        .any(|p| matches!(p, Part::ToolCall { id, .. } if *id == call_id))
                    {
                        let args = args
                            .map(|a| Value::Object(a.clone()))
                            .unwrap_or(Value::Null);
                        calls.push(Part::ToolCall {
                            id: call_id.clone(),
                            name: name.clone(),
                            args,
                        });
                    }
                    let ids = calls
                        .iter()
                        .filter_map(|p| match p {
                            Part::ToolCall { id, .. } => Some(id.clone()),
                            _ => None,
                        })
                        .collect::<Vec<_>>();
                    let mut parts = Vec::new();
                    if !text.trim().is_empty() {
                        parts.push(Part::text(text));
                    }
                    parts.extend(calls);
                    let mut message = Message::new(Role::Assistant, parts);
                    message.usage = usage;
                    Ok(Event::ToolAction {
                        event_id,
                        response_id,
                        message,
                        own: (call_id, name),
                        calls: ids,
                    })
                }
                None if action == "run" && source == "user" => Ok(Event::Emit(Message::user(
                    format!("User executed the command:\n{}", content("command")?),
                ))),
                None => Ok(Event::Skip),
            },
        };
    }
    if let Some(kind) = json::opt_str(o, at, "observation")? {
        let content = match json::opt_str(o, at, "content")? {
            Some(c) => c.to_string(),
            None => json::opt_str(o, at, "message")?.unwrap_or("").to_string(),
        };
        let extras = json::opt_obj(o, at, "extras")?;
        let (text, is_error) = match kind {
            "run" => run_text(&content, extras),
            "error" => (format!("{content}{ERROR_SUFFIX}"), true),
            "recall" => match recall_text(extras) {
                Some(t) => return Ok(Event::Emit(Message::user(t))),
                None => return Ok(Event::Skip),
            },
            _ => (content, false),
        };
        let cause = json::opt_u64(o, at, "cause")?;
        let tcm = json::opt_obj(o, at, "tool_call_metadata")?;
        let (call_id, name) = match tcm {
            Some(t) => {
                let t_at = format!("{at}.tool_call_metadata");
                (
                    Some(json::req_str(t, &t_at, "tool_call_id")?.to_string()),
                    Some(json::req_str(t, &t_at, "function_name")?.to_string()),
                )
            }
            None => (None, None),
        };
        if call_id.is_none() && cause.is_none() {
            // Not answering anything: errors reach the model as user messages; others are UI.
            return Ok(if kind == "error" {
                Event::Emit(Message::user(text))
            } else {
                Event::Skip
            });
        }
        return Ok(Event::ToolObs {
            call_id,
            name,
            cause,
            text,
            is_error,
        });
    }
    Err("event has neither `action` nor `observation`".into())
}

/// The `model_response` of a tool call: its id, text, tool calls and usage.
fn response_message(
    t: &Obj,
    at: &str,
) -> Result<(String, String, Vec<Part>, Option<compactbench_core::Usage>), String> {
    let resp = json::req_obj(t, at, "model_response")?;
    let r_at = format!("{at}.model_response");
    let id = json::opt_str(resp, &r_at, "id")?.unwrap_or("").to_string();
    let choices = json::req_arr(resp, &r_at, "choices")?;
    let choice = match choices.first() {
        Some(c) => json::elem_obj(c, &format!("{r_at}.choices"), 0)?,
        None => return Err(format!("field `{r_at}.choices` is empty")),
    };
    let c_at = format!("{r_at}.choices[0]");
    let msg = json::req_obj(choice, &c_at, "message")?;
    let m_at = format!("{c_at}.message");
    let text = json::opt_str(msg, &m_at, "content")?
        .unwrap_or("")
        .to_string();
    let mut calls = Vec::new();
    for (i, c) in json::opt_arr(msg, &m_at, "tool_calls")?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let tc_at = format!("{m_at}.tool_calls[{i}]");
        let c = json::elem_obj(c, &format!("{m_at}.tool_calls"), i)?;
        let f = json::req_obj(c, &tc_at, "function")?;
        let f_at = format!("{tc_at}.function");
        let args = match json::get(f, "arguments") {
            Some(Value::String(s)) => json::parse_args(s),
            Some(v) => v.clone(),
            None => Value::Object(Default::default()),
        };
        calls.push(Part::ToolCall {
            id: json::req_str(c, &tc_at, "id")?.to_string(),
            name: json::req_str(f, &f_at, "name")?.to_string(),
            args,
        });
    }
    let u = json::opt_obj(resp, &r_at, "usage")?;
    let usage = u.map(|u| {
        let prompt = json::num(Some(u), "prompt_tokens");
        let cached = json::num(
            u.get("prompt_tokens_details").and_then(Value::as_object),
            "cached_tokens",
        )
        .min(prompt);
        usage(
            prompt - cached,
            0,
            cached,
            json::num(Some(u), "completion_tokens"),
        )
    });
    Ok((id, text, calls, usage))
}

/// `CmdOutputObservation.to_agent_observation`, and whether the exit code reports failure.
fn run_text(content: &str, extras: Option<&Obj>) -> (String, bool) {
    let meta = extras
        .and_then(|e| e.get("metadata"))
        .and_then(Value::as_object);
    let s = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let mut text = format!("{}{}{}", s("prefix"), content, s("suffix"));
    if !s("working_dir").is_empty() {
        text.push_str(&format!(
            "\n[Current working directory: {}]",
            s("working_dir")
        ));
    }
    if !s("py_interpreter_path").is_empty() {
        text.push_str(&format!(
            "\n[Python interpreter: {}]",
            s("py_interpreter_path")
        ));
    }
    let code = meta
        .and_then(|m| m.get("exit_code"))
        .and_then(Value::as_i64)
        .unwrap_or(-1);
    if code != -1 {
        text.push_str(&format!("\n[Command finished with exit code {code}]"));
    }
    (text, code != -1 && code != 0)
}

/// Approximate rendering of a recall observation (workspace context, microagent knowledge).
fn recall_text(extras: Option<&Obj>) -> Option<String> {
    let e = extras?;
    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
    let mut blocks = Vec::new();
    if !s("repo_name").is_empty() {
        blocks.push(format!(
            "<REPOSITORY_INFO>\nAt the user's request, repository {} has been cloned to {} in the current working directory.\n</REPOSITORY_INFO>",
            s("repo_name"),
            s("repo_directory")
        ));
    }
    if !s("repo_instructions").is_empty() {
        blocks.push(format!(
            "<REPOSITORY_INSTRUCTIONS>\n{}\n</REPOSITORY_INSTRUCTIONS>",
            s("repo_instructions")
        ));
    }
    let hosts = e
        .get("runtime_hosts")
        .and_then(Value::as_object)
        .filter(|h| !h.is_empty());
    if hosts.is_some() || !s("additional_agent_instructions").is_empty() || !s("date").is_empty() {
        let mut r = String::from("<RUNTIME_INFORMATION>\n");
        if let Some(h) = hosts {
            r.push_str("The user has access to the following hosts for accessing a web application,\neach of which has a corresponding port:\n");
            for (host, port) in h {
                r.push_str(&format!("* {host} (port {port})\n"));
            }
        }
        if !s("additional_agent_instructions").is_empty() {
            r.push_str(&format!("{}\n", s("additional_agent_instructions")));
        }
        if !s("date").is_empty() {
            r.push_str(&format!("Today's date is {}\n", s("date")));
        }
        r.push_str("</RUNTIME_INFORMATION>");
        blocks.push(r);
    }
    for k in e
        .get("microagent_knowledge")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let content = k.get("content").and_then(Value::as_str).unwrap_or("");
        let trigger = k.get("trigger").and_then(Value::as_str).unwrap_or("");
        blocks.push(format!(
            "<EXTRA_INFO>\nThe following information has been included based on a keyword match for \"{trigger}\".\nIt may or may not be relevant to the user's request.\n\n{content}\n</EXTRA_INFO>"
        ));
    }
    (!blocks.is_empty()).then(|| blocks.join("\n\n"))
}
