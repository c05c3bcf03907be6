//! SWE-agent `.traj` (one JSON document). See the crate docs for the mapping.

use std::collections::HashMap;
use std::io::Read;

use compactbench_core::{Message, Part, Role};
use serde_json::Value;

use crate::json::{self, Obj};
use crate::{tool_message, Ctx, Fail, ImportError, RecordedCompaction};

/// Name given to text actions: SWE-agent runs every action in the container's shell.
const ACTION_TOOL: &str = "bash";

enum Item {
    Message(Message),
    /// A text action: the thought and the command.
    Action {
        thought: String,
        action: String,
    },
    /// A user message: an observation when it follows an action.
    User(String),
    /// A structured (1.x) tool result.
    ToolResult {
        call_id: String,
        text: String,
    },
}

pub(crate) fn import<R: Read>(
    mut reader: R,
    ctx: &mut Ctx<'_>,
) -> Result<(Vec<Message>, Vec<RecordedCompaction>), ImportError> {
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .map_err(|e| ctx.error(None, format!("read error: {e}")))?;
    ctx.stats.lines = bytes.iter().filter(|&&b| b == b'\n').count()
        + usize::from(!bytes.is_empty() && !bytes.ends_with(b"\n"));
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) => t,
        Err(e) => {
            let line = bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            return Err(ctx.error(
                Some(line),
                format!("invalid UTF-8 at byte {}", e.valid_up_to()),
            ));
        }
    };
    let doc: Obj = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) => o,
        Ok(v) => {
            // Name the line the document starts on.
            let start = text.len() - text.trim_start().len();
            let line = text[..start].matches('\n').count() + 1;
            return Err(ctx.error(
                Some(line),
                format!("expected a JSON object, found {}", json::kind(&v)),
            ));
        }
        Err(e) => return Err(ctx.error(Some(e.line().max(1)), format!("invalid JSON: {e}"))),
    };
    let history = json::req_arr(&doc, "", "history").map_err(|m| ctx.error(None, m))?;
    ctx.recognized += 1;
    let trajectory = json::opt_arr(&doc, "", "trajectory")
        .map_err(|m| ctx.error(None, m))?
        .unwrap_or_default();

    let mut messages = Vec::new();
    let mut names: HashMap<String, String> = HashMap::new();
    // Call id of a text action still waiting for its observation.
    let mut waiting: Option<String> = None;
    let mut actions = 0usize;
    for (i, v) in history.iter().enumerate() {
        let at = format!("history[{i}]");
        let item = match v
            .as_object()
            .ok_or_else(|| format!("must be an object, found {}", json::kind(v)))
            .and_then(|o| parse(o, &at))
        {
            Ok(item) => item,
            Err(msg) => {
                ctx.fail(None, Fail::Line(format!("{at}: {msg}")))?;
                continue;
            }
        };
        if !matches!(item, Item::User(_)) {
            close(&mut messages, &mut waiting, trajectory, actions);
        }
        match item {
            Item::Message(m) => {
                for p in &m.parts {
                    if let Part::ToolCall { id, name, .. } = p {
                        names.insert(id.clone(), name.clone());
                    }
                }
                messages.push(m);
            }
            Item::Action { thought, action } => {
                actions += 1;
                let id = format!("swe-agent-{actions}");
                let mut parts = Vec::new();
                if !thought.is_empty() {
                    parts.push(Part::text(thought));
                }
                parts.push(Part::ToolCall {
                    id: id.clone(),
                    name: ACTION_TOOL.into(),
                    args: serde_json::json!({ "command": action }),
                });
                messages.push(Message::new(Role::Assistant, parts));
                waiting = Some(id);
            }
            Item::User(text) => match waiting.take() {
                Some(id) => messages.push(tool_message(
                    id,
                    ACTION_TOOL.into(),
                    text,
                    false,
                    Vec::new(),
                )),
                None => messages.push(Message::user(text)),
            },
            Item::ToolResult { call_id, text } => {
                let name = names.get(&call_id).cloned().unwrap_or_default();
                messages.push(tool_message(call_id, name, text, false, Vec::new()));
            }
        }
    }
    close(&mut messages, &mut waiting, trajectory, actions);
    Ok((messages, Vec::new()))
}

/// Answers a text action that got no observation in `history` (the final `submit`) with the
/// observation recorded in `trajectory[n]`, if there is one.
fn close(
    messages: &mut Vec<Message>,
    waiting: &mut Option<String>,
    trajectory: &[Value],
    actions: usize,
) {
    let Some(id) = waiting.take() else { return };
    let observation = actions
        .checked_sub(1)
        .and_then(|n| trajectory.get(n))
        .and_then(|step| step.get("observation"))
        .and_then(Value::as_str);
    if let Some(text) = observation {
        messages.push(tool_message(
            id,
            ACTION_TOOL.into(),
            text.to_string(),
            false,
            Vec::new(),
        ));
    }
}

/// `content` as text: a string or a list of `{type:"text", text}`.
fn content(o: &Obj, at: &str) -> Result<String, String> {
    match json::get(o, "content") {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(items)) => {
            let mut texts = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let p = json::elem_obj(item, &format!("{at}.content"), i)?;
                if let Some(t) = json::opt_str(p, &format!("{at}.content[{i}]"), "text")? {
                    texts.push(t);
                }
            }
            Ok(texts.join("\n"))
        }
        Some(v) => Err(format!(
            "field `content` must be a string or an array, found {}",
            json::kind(v)
        )),
    }
}

fn parse(o: &Obj, at: &str) -> Result<Item, String> {
    let role = json::req_str(o, "", "role")?;
    let text = content(o, at)?;
    match role {
        "system" => Ok(Item::Message(Message::system(text))),
        "user" => Ok(Item::User(text)),
        "assistant" => {
            if let Some(calls) = json::opt_arr(o, "", "tool_calls")?.filter(|c| !c.is_empty()) {
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(Part::text(text));
                }
                for (i, c) in calls.iter().enumerate() {
                    let c = json::elem_obj(c, "tool_calls", i)?;
                    let c_at = format!("tool_calls[{i}]");
                    let f = json::req_obj(c, &c_at, "function")?;
                    let f_at = format!("{c_at}.function");
                    let args = match json::get(f, "arguments") {
                        Some(Value::String(s)) => json::parse_args(s),
                        Some(v) => v.clone(),
                        None => Value::Object(Default::default()),
                    };
                    parts.push(Part::ToolCall {
                        id: json::req_str(c, &c_at, "id")?.to_string(),
                        name: json::req_str(f, &f_at, "name")?.to_string(),
                        args,
                    });
                }
                return Ok(Item::Message(Message::new(Role::Assistant, parts)));
            }
            match json::opt_str(o, "", "action")? {
                Some(action) => {
                    let thought = json::opt_str(o, "", "thought")?
                        .map(str::to_string)
                        .unwrap_or(text);
                    Ok(Item::Action {
                        thought,
                        action: action.to_string(),
                    })
                }
                None => Ok(Item::Message(Message::assistant(text))),
            }
        }
        "tool" => {
            let id = match json::opt_arr(o, "", "tool_call_ids")? {
                Some(ids) => ids.first().and_then(Value::as_str).map(str::to_string),
                None => None,
            };
            let id = match id {
                Some(id) => id,
                None => json::req_str(o, "", "tool_call_id")?.to_string(),
            };
            Ok(Item::ToolResult { call_id: id, text })
        }
        other => Err(format!("field `role` has unknown value \"{other}\"")),
    }
}
