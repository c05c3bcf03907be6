//! Exporter: our log to Kimi CLI's context (kimi-cli 1.52.0 and 1.15.0, `soul/context.py`).
//!
//! Kimi keeps a session as a JSON-lines context file: a `_system_prompt` record, kosong
//! `Message`s (`role`, `content` parts `text` / `think` / `image_url`, `tool_calls`,
//! `tool_call_id`), `_usage` records (the counter `_grow_context` writes after each reply) and
//! `_checkpoint` markers. The session we write is that file, with three records carrying what
//! the soul had in hand when it wrote them, so the driver replays them through Kimi's own code:
//!
//! - `{"role": "_usage", "usage": TokenUsage}`: the reply's provider usage; the driver writes
//!   `usage.total` with `Context.update_token_count`, as `_grow_context` does.
//! - `{"role": "_tool_result", "tool_call_id", "return_value": ToolReturnValue}`: one tool
//!   result; the driver turns it into the tool message with `tool_result_to_message` and appends
//!   a reply's consecutive results as one batch, as `_grow_context` does.
//! - `{"role": "_compaction", "usage": TokenUsage}`: closes the messages an earlier compaction
//!   wrote (its summary, then the kept tail); the driver sets the counter to that
//!   `CompactionResult.estimated_token_count`, as `compact_context` does (1.15.0, K1: its
//!   `compact_context` runs and clears the counter to 0; the usage is not read).
//!
//! Our leading system messages are Kimi's system prompt (outside the history); later system
//! messages stay in the history with role `system`.

use compactbench_core::{default_projection, EntryId, Message, Origin, Part, Role, Usage, Window};
use serde_json::{json, Value};

use crate::{Case, Export};

pub(crate) fn export(case: &Case) -> Result<Export, String> {
    let log = &case.log;
    let view = default_projection(log);
    let leading = view.messages.iter().take_while(|vm| vm.message.role == Role::System).count();
    let system_prompt = view.messages[..leading].iter().map(|vm| vm.message.text()).collect::<Vec<_>>().join("\n");
    // The newest compaction: the view starts with what it wrote (its summary and kept tail).
    let anchor = log.checkpoints().rev().find(|(_, cp)| cp.window != Window::Inherit);
    let mut compaction = anchor.map(|(id, cp)| {
        let record = json!({"role": "_compaction", "usage": token_usage(cp.summarizer.input_tokens, cp.summarizer.output_tokens, 0, 0)});
        (id, record)
    });
    let mut records = Vec::new();
    let mut ids = Vec::new();
    for vm in &view.messages[leading..] {
        let id = match vm.origin {
            Origin::Entry(e) => e,
            Origin::Summary(cp) | Origin::Injected(cp) => cp,
            Origin::Replaced(..) => return Err("Kimi CLI replaces no messages".into()),
        };
        // An entry newer than the compaction was appended after it: close its batch first.
        if vm.origin.entry().is_some_and(|e| anchor.is_some_and(|(a, _)| e > a)) {
            if let Some((cp, record)) = compaction.take() {
                records.push(record);
                ids.push(cp);
            }
        }
        push_message(&vm.message, id, &mut records, &mut ids)?;
        // Usage of a reply the compaction kept is stale: Kimi rewrote the counter since.
        if let (Some(u), None) = (vm.message.usage, &compaction) {
            records.push(json!({"role": "_usage", "usage": usage(u)}));
            ids.push(id);
        }
    }
    if let Some((cp, record)) = compaction {
        records.push(record);
        ids.push(cp);
    }
    Ok(Export { session: json!({"system_prompt": system_prompt, "records": records}), ids, settings: json!({}) })
}

/// kosong `TokenUsage` from ours: our `input` is the uncached prompt (`input_other`), our
/// cache writes its `input_cache_creation`.
fn usage(u: Usage) -> Value {
    token_usage(u.input, u.output, u.cache_read, u.cache_write)
}

fn token_usage(input_other: u64, output: u64, cache_read: u64, cache_creation: u64) -> Value {
    json!({"input_other": input_other, "output": output, "input_cache_read": cache_read, "input_cache_creation": cache_creation})
}

/// One message as Kimi records it: a kosong `Message`, or for a tool message one
/// `_tool_result` per result.
fn push_message(m: &Message, id: EntryId, records: &mut Vec<Value>, ids: &mut Vec<EntryId>) -> Result<(), String> {
    if m.role == Role::Tool {
        for part in &m.parts {
            // An image a tool returned goes with its result: the output becomes a list of
            // content parts (kosong `ToolReturnValue.output` takes one).
            if let Part::Media { mime, .. } = part {
                let output = records.last_mut().filter(|r| r["role"] == "_tool_result").map(|r| &mut r["return_value"]["output"]);
                let Some(output) = output else { return Err(format!("media before any result in tool entry {id}")) };
                if let Value::String(text) = output {
                    *output = json!([{"type": "text", "text": text}]);
                }
                output.as_array_mut().expect("made a list above").push(image_url(mime));
                continue;
            }
            let Part::ToolResult { call_id, text, is_error, .. } = part else {
                return Err(format!("a tool message part other than a result or media in entry {id}"));
            };
            // Kimi's `ToolError` carries the text as its message; `ToolOk` as its output.
            let (output, message) = if *is_error { ("", text.as_str()) } else { (text.as_str(), "") };
            records.push(json!({
                "role": "_tool_result",
                "tool_call_id": call_id,
                "return_value": {"is_error": is_error, "output": output, "message": message, "display": []},
            }));
            ids.push(id);
        }
        return Ok(());
    }
    let mut content = Vec::new();
    let mut tool_calls = Vec::new();
    for part in &m.parts {
        match part {
            Part::Text { text } => content.push(json!({"type": "text", "text": text})),
            Part::Reasoning { text } => content.push(json!({"type": "think", "think": text})),
            Part::Media { mime, .. } => content.push(image_url(mime)),
            Part::ToolCall { id, name, args } => {
                tool_calls.push(json!({"type": "function", "id": id, "function": {"name": name, "arguments": args.to_string()}}));
            }
            Part::ToolResult { .. } => return Err(format!("a tool result outside a tool message in entry {id}")),
        }
    }
    let mut message = json!({"role": m.role.as_str(), "content": content});
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    records.push(message);
    ids.push(id);
    Ok(())
}

/// A kosong `ImageURLPart` standing for media we know only by its size.
fn image_url(mime: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,")}})
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Checkpoint, CheckpointKind, Log, ModelProfile, Shape};
    use expect_test::expect;

    use super::*;

    fn case(log: Log) -> Case {
        let model = ModelProfile { name: "m".into(), window: 100_000, max_output: 8_192, provider: Shape::Anthropic, pricing: Default::default() };
        Case::new("t", log, model)
    }

    fn turn(log: &mut Log, n: u32) {
        log.push_message(Message::new(Role::User, vec![Part::text(format!("ask {n}"))]));
        let mut call = Message::new(
            Role::Assistant,
            vec![
                Part::Reasoning { text: "hm".into() },
                Part::text("looking"),
                Part::ToolCall { id: format!("c{n}"), name: "read".into(), args: json!({"path": "a.rs"}) },
            ],
        );
        call.usage = Some(Usage { input: 100 * n as u64, output: 10, cache_read: 5, ..Default::default() });
        log.push_message(call);
        log.push_message(Message::new(
            Role::Tool,
            vec![
                Part::ToolResult { call_id: format!("c{n}"), name: "read".into(), text: "fn main() {}".into(), is_error: false },
                Part::ToolResult { call_id: format!("c{n}"), name: "read".into(), text: "denied".into(), is_error: true },
            ],
        ));
    }

    #[test]
    fn a_fresh_log_is_kimis_context_file() {
        let mut log = Log::new();
        log.push_message(Message::new(Role::System, vec![Part::text("be brief")]));
        turn(&mut log, 1);
        let e = export(&case(log)).unwrap();
        expect![[r#"
            {
              "system_prompt": "be brief",
              "records": [
                {
                  "role": "user",
                  "content": [
                    {
                      "type": "text",
                      "text": "ask 1"
                    }
                  ]
                },
                {
                  "role": "assistant",
                  "content": [
                    {
                      "type": "think",
                      "think": "hm"
                    },
                    {
                      "type": "text",
                      "text": "looking"
                    }
                  ],
                  "tool_calls": [
                    {
                      "type": "function",
                      "id": "c1",
                      "function": {
                        "name": "read",
                        "arguments": "{\"path\":\"a.rs\"}"
                      }
                    }
                  ]
                },
                {
                  "role": "_usage",
                  "usage": {
                    "input_other": 100,
                    "output": 10,
                    "input_cache_read": 5,
                    "input_cache_creation": 0
                  }
                },
                {
                  "role": "_tool_result",
                  "tool_call_id": "c1",
                  "return_value": {
                    "is_error": false,
                    "output": "fn main() {}",
                    "message": "",
                    "display": []
                  }
                },
                {
                  "role": "_tool_result",
                  "tool_call_id": "c1",
                  "return_value": {
                    "is_error": true,
                    "output": "",
                    "message": "denied",
                    "display": []
                  }
                }
              ]
            }"#]]
        .assert_eq(&serde_json::to_string_pretty(&e.session).unwrap());
        assert_eq!(e.ids, [1, 2, 2, 3, 3].map(EntryId));
    }

    #[test]
    fn a_compaction_writes_its_batch_without_stale_usage() {
        let mut log = Log::new();
        turn(&mut log, 1);
        turn(&mut log, 2);
        let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(3)))
            .with_summary(Message::new(Role::User, vec![Part::text("<system>compacted</system>"), Part::text("sum")]));
        cp.summarizer.output_tokens = 7;
        log.push_checkpoint(cp);
        turn(&mut log, 3);
        let e = export(&case(log)).unwrap();
        let roles: Vec<&str> = e.session["records"].as_array().unwrap().iter().map(|r| r["role"].as_str().unwrap()).collect();
        // Summary, kept user + reply + results (no `_usage`: stale), the compaction's counter,
        // then the new turn with its usage.
        assert_eq!(
            roles,
            ["user", "user", "assistant", "_tool_result", "_tool_result", "_compaction", "user", "assistant", "_usage", "_tool_result", "_tool_result"]
        );
        assert_eq!(e.ids, [6, 3, 4, 5, 5, 6, 7, 8, 8, 9, 9].map(EntryId));
        assert_eq!(e.session["records"][5]["usage"]["output"], 7);
    }
}
