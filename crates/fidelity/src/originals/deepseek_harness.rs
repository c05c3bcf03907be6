//! Exporter: our log to DeepSeek Harness's session event log (vendored source of
//! `deepseek-ai/deepseek-harness@b150a551`, `packages/core/session/src/types.ts`).
//!
//! A DeepSeek Harness session is an append-only list of events, each `{type, seq, time, data}`
//! and, for the three message events, a `surfaceOp` (`append` here). The token meter replays
//! it: `step/start` records the surface the step began with, `assistant/message` anchors
//! pressure to the reply's provider usage, and `request/header` holds the envelope (system
//! prompt, routed provider and model). The agent loop opens a step before it appends the
//! step's own user message, so a turn is `turn/start`, `step/start`, `user/message`, the reply
//! and its `tool/result`s, `step/end`; later steps start after the tool results. The session
//! ends with the newest step closed and its turn open, as the loop has it at a pre-step.
//!
//! Our leading system messages are the header's system prompt (joined by a blank line, as our
//! crate reads them); a later system message is a surface message of role `system`. A tool
//! message is one `tool/result` event per result. Every event maps to the message it carries
//! or, for a structural one, to the next message (the last one at the end).

use compactbench_core::{EntryId, Message, Part, Role, Usage};
use serde_json::{json, Value};

use crate::{Case, Export};

/// The pre-step check before a request inside a turn. The check before a turn's first request
/// runs before its user message is appended, at the previous turn's end: those cases are the
/// turn-end row's ([`export_turn_end`]).
pub(crate) fn export_pre_step(case: &Case) -> Result<Export, String> {
    if case.log.messages().next_back().is_some_and(|(_, m)| m.role == Role::User) {
        return Err("the check before a turn's first request runs before its user message (the turn-end row asks it)".into());
    }
    export(case)
}

/// The pre-step check at a turn's end (the next turn's first request, before its user message).
pub(crate) fn export_turn_end(case: &Case) -> Result<Export, String> {
    export(case)
}

fn export(case: &Case) -> Result<Export, String> {
    let log = &case.log;
    if log.checkpoints().next().is_some() {
        return Err("the exporter writes no compaction events".into());
    }
    let messages: Vec<(EntryId, &Message)> = log.messages().collect();
    let leading = messages.iter().take_while(|(_, m)| m.role == Role::System).count();
    let system = messages[..leading].iter().map(|(_, m)| m.text()).collect::<Vec<_>>().join("\n\n");
    let mut w = Writer { events: Vec::new(), ids: Vec::new(), pending: 0, turn: 0, step: 0, step_open: false, replied: false, turn_over: true };
    let mut header = false;
    for &(id, m) in &messages[leading..] {
        match m.role {
            Role::User | Role::System => {
                if w.turn_over {
                    w.end_turn();
                    w.turn += 1;
                    w.step = 0;
                    w.turn_over = false;
                    w.push("turn/start", json!({"turn": w.turn}), false);
                }
                if w.replied {
                    w.end_step();
                }
                w.start_step();
                let source = if m.role == Role::User { json!({"kind": "user"}) } else { json!({"kind": "plugin", "plugin": "compactbench"}) };
                let message = json!({"id": format!("e{}", id.0), "role": m.role.as_str(), "content": content(m, id)?, "source": source});
                w.push("user/message", message, true);
            }
            Role::Assistant => {
                if w.turn == 0 {
                    w.turn = 1;
                    w.turn_over = false;
                    w.push("turn/start", json!({"turn": 1}), false);
                }
                if w.replied {
                    w.end_step();
                }
                w.start_step();
                if !header {
                    header = true;
                    let mut h = json!({"config": {"provider": "compactbench", "model": case.model.name}});
                    if !system.is_empty() {
                        h["system"] = json!(system);
                    }
                    w.push("request/header", json!({"header": h, "reason": "initial"}), false);
                }
                let message = json!({
                    "id": format!("e{}", id.0),
                    "role": "assistant",
                    "content": content(m, id)?,
                    "source": {"kind": "model", "provider": "compactbench", "model": case.model.name},
                });
                let mut data = json!({"turn": w.turn, "step": w.step, "message": message});
                if let Some(u) = m.usage {
                    data["usage"] = usage(u);
                }
                w.push("assistant/message", data, true);
                w.replied = true;
                w.turn_over = !m.has_tool_calls();
            }
            Role::Tool => {
                for part in &m.parts {
                    let Part::ToolResult { call_id, text, is_error, .. } = part else {
                        return Err(format!("a tool message part other than a result in entry {id}"));
                    };
                    let mut result = json!({"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}]});
                    if *is_error {
                        result["isError"] = json!(true);
                    }
                    let message = json!({
                        "id": format!("e{}", id.0),
                        "role": "user",
                        "content": [result],
                        "source": {"kind": "tool", "callId": call_id},
                    });
                    w.push("tool/result", json!({"turn": w.turn, "step": w.step, "message": message}), true);
                }
            }
        }
        w.settle(id);
    }
    // The step that produced the newest reply (or results) is over by the next pre-step; the
    // turn is not: the loop checks inside it (the closing pre-step of a turn, or the opening
    // one of the next after its `turn/start`), and the engine compacts only in an open turn.
    w.end_step();
    let last = messages.last().map_or(EntryId(0), |(id, _)| *id);
    w.settle(last);
    Ok(Export { session: json!({"events": w.events}), ids: w.ids, settings: json!({}) })
}

/// The event list being written, with the turn and step it is in.
struct Writer {
    events: Vec<Value>,
    ids: Vec<EntryId>,
    /// Events pushed since the last [`Writer::settle`] (their entry is the next message's).
    pending: usize,
    turn: u32,
    step: u32,
    step_open: bool,
    /// The open step has its reply.
    replied: bool,
    /// The newest reply made no tool call: the next user message opens a turn.
    turn_over: bool,
}

impl Writer {
    fn push(&mut self, kind: &str, data: Value, surface: bool) {
        let mut event = json!({"type": kind, "seq": self.events.len(), "time": 0, "data": data});
        if surface {
            event["surfaceOp"] = json!("append");
        }
        self.events.push(event);
        self.pending += 1;
    }

    /// Gives the events pushed since the last call to entry `id`.
    fn settle(&mut self, id: EntryId) {
        self.ids.extend(std::iter::repeat_n(id, self.pending));
        self.pending = 0;
    }

    fn start_step(&mut self) {
        if !self.step_open {
            self.step += 1;
            self.step_open = true;
            self.replied = false;
            self.push("step/start", json!({"turn": self.turn, "step": self.step}), false);
        }
    }

    fn end_step(&mut self) {
        if self.step_open {
            self.step_open = false;
            self.replied = false;
            self.push("step/end", json!({"turn": self.turn, "step": self.step}), false);
        }
    }

    fn end_turn(&mut self) {
        self.end_step();
        if self.turn > 0 {
            self.push("turn/end", json!({"turn": self.turn, "reason": {"kind": "completed"}}), false);
        }
    }
}

/// `TokenUsage`: our `input` is the uncached prompt; the meter sums every bucket.
fn usage(u: Usage) -> Value {
    json!({"inputTokens": u.input, "outputTokens": u.output, "cacheReadTokens": u.cache_read})
}

/// A message's content blocks (`text`, `reasoning`, `tool-call` with its arguments as a JSON
/// string, `image` with an attachment reference of fixed shape: ours records only the media
/// type).
fn content(m: &Message, id: EntryId) -> Result<Vec<Value>, String> {
    m.parts
        .iter()
        .map(|part| match part {
            Part::Text { text } => Ok(json!({"type": "text", "text": text})),
            Part::Reasoning { text } => Ok(json!({"type": "reasoning", "text": text})),
            Part::ToolCall { id, name, args } => Ok(json!({"type": "tool-call", "id": id, "name": name, "arguments": args.to_string()})),
            Part::Media { mime, .. } => Ok(json!({
                "type": "image",
                "attachment": {
                    "attachmentId": "00000000-0000-4000-8000-000000000000",
                    "mediaType": mime,
                    "bytes": 100000,
                    "width": 1000,
                    "height": 1000,
                },
            })),
            Part::ToolResult { .. } => Err(format!("a tool result outside a tool message in entry {id}")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Log, ModelProfile, Shape};

    use super::*;

    fn case(log: Log) -> Case {
        let model = ModelProfile { name: "m".into(), window: 100_000, max_output: 8_192, provider: Shape::Anthropic, pricing: Default::default() };
        Case { id: "t".into(), log, model }
    }

    fn turn(log: &mut Log, n: u32) {
        log.push_message(Message::new(Role::User, vec![Part::text(format!("ask {n}"))]));
        let mut call = Message::new(Role::Assistant, vec![Part::ToolCall { id: format!("c{n}"), name: "read".into(), args: json!({"path": "a.rs"}) }]);
        call.usage = Some(Usage { input: 100, output: 10, cache_read: 5 });
        log.push_message(call);
        log.push_message(Message::new(
            Role::Tool,
            vec![
                Part::ToolResult { call_id: format!("c{n}"), name: "read".into(), text: "fn main() {}".into(), is_error: false },
                Part::ToolResult { call_id: format!("c{n}"), name: "read".into(), text: "denied".into(), is_error: true },
            ],
        ));
        log.push_message(Message::new(Role::Assistant, vec![Part::text("done")]));
    }

    fn shape(e: &Export) -> Vec<String> {
        e.session["events"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap().to_owned()).collect()
    }

    #[test]
    fn a_turn_is_steps_of_the_agent_loop() {
        let mut log = Log::new();
        log.push_message(Message::new(Role::System, vec![Part::text("be brief")]));
        turn(&mut log, 1);
        turn(&mut log, 2);
        let e = export_turn_end(&case(log)).unwrap();
        let one = [
            "turn/start",
            "step/start",
            "user/message",
            "assistant/message",
            "tool/result",
            "tool/result",
            "step/end",
            "step/start",
            "assistant/message",
            "step/end",
        ];
        let mut expected = vec!["turn/start", "step/start", "user/message", "request/header"];
        expected.extend(&one[3..]);
        expected.push("turn/end");
        expected.extend(one);
        assert_eq!(shape(&e), expected);
        let events = e.session["events"].as_array().unwrap();
        assert!(events.iter().enumerate().all(|(i, e)| e["seq"] == i));
        assert_eq!(events[3]["data"]["header"]["system"], "be brief");
        assert_eq!(events[4]["data"]["usage"], json!({"inputTokens": 100, "outputTokens": 10, "cacheReadTokens": 5}));
        assert_eq!(events[4]["data"]["message"]["content"][0]["arguments"], r#"{"path":"a.rs"}"#);
        assert_eq!(events[6]["data"]["message"]["content"][0]["isError"], true);
        assert_eq!((events[9]["data"]["turn"].clone(), events[9]["data"]["step"].clone()), (json!(1), json!(2)));
        // Structural events take the next message's entry; the closing one the last message's.
        assert_eq!(e.ids.len(), events.len());
        assert_eq!(e.ids[..7], [1, 1, 1, 2, 2, 3, 3].map(EntryId));
        assert_eq!(e.ids[e.ids.len() - 2..], [8, 8].map(EntryId));
    }

    #[test]
    fn a_pre_step_case_inside_a_turn_only() {
        let mut log = Log::new();
        turn(&mut log, 1);
        log.push_message(Message::new(Role::User, vec![Part::text("next")]));
        assert!(export_pre_step(&case(log.clone())).unwrap_err().contains("turn-end row"));
        let mut call = Message::new(Role::Assistant, vec![Part::ToolCall { id: "c9".into(), name: "read".into(), args: json!({}) }]);
        call.usage = None;
        log.push_message(call);
        log.push_message(Message::new(
            Role::Tool,
            vec![Part::ToolResult { call_id: "c9".into(), name: "read".into(), text: "x".into(), is_error: false }],
        ));
        let e = export_pre_step(&case(log)).unwrap();
        let tail: Vec<String> = shape(&e).split_off(11);
        assert_eq!(tail, ["turn/end", "turn/start", "step/start", "user/message", "assistant/message", "tool/result", "step/end"]);
        assert!(e.session["events"][15]["data"].get("usage").is_none());
    }
}
