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
//! Our checkpoints are what the engine lands (they come from our crate's own replay, so they
//! have its shapes): a pruning pass is one `tool/result` per shortened result with
//! `surfaceOp: {op: 'replace'}` of the result it shortens (the `compaction/prune` shadow-price
//! events before them are left out: only the meter's UI projections read them); a summary is
//! `compaction/start`, the checkpoint `user/message` replacing the head of the surface up to
//! the first kept message (citing the shadowed events), and `compaction/end` (the
//! `compaction/summary` record of the raw summary is left out: nothing on the check's path
//! reads it). Both land between steps, where the pre-step runs.
//!
//! Our leading system messages are the header's system prompt (joined by a blank line, as our
//! crate reads them); a later system message is a surface message of role `system`. A tool
//! message is one `tool/result` event per result. Every event maps to the message it carries
//! (a shortened result to the one it replaces), a checkpoint's other events to the checkpoint,
//! and a structural event to the next message (the last entry at the end).

use compactbench_core::{Checkpoint, CheckpointKind, Entry, EntryId, Message, Part, Role, SummaryPosition, Usage, Window};
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
    let leading: Vec<&Message> = log.messages().map(|(_, m)| m).take_while(|m| m.role == Role::System).collect();
    if log.entries().take(leading.len()).any(|(_, e)| !matches!(e, Entry::Message(_))) {
        return Err("a checkpoint before the system prompt ends".into());
    }
    let system = leading.iter().map(|m| m.text()).collect::<Vec<_>>().join("\n\n");
    let mut w = Writer { events: Vec::new(), ids: Vec::new(), pending: 0, turn: 0, step: 0, step_open: false, replied: false, turn_over: true };
    let mut surface = Surface::default();
    let mut header = false;
    for (id, entry) in log.entries().skip(leading.len()) {
        let m = match entry {
            Entry::Message(m) => m,
            Entry::Checkpoint(cp) => {
                // The pre-step runs between steps.
                w.end_step();
                checkpoint(&mut w, &mut surface, id, cp)?;
                w.settle(id);
                continue;
            }
        };
        match m.role {
            // The engine seeds user messages only (`user/message` must have role "user"): a
            // system message after the prompt has no event of its own.
            Role::System => return Err(format!("a system message after the prompt (entry {id}): DeepSeek Harness's session has no event for it")),
            Role::User => {
                if w.turn_over {
                    w.end_turn();
                    w.turn += 1;
                    w.step = 0;
                    w.turn_over = false;
                    w.push("turn/start", json!({"turn": w.turn}), None);
                }
                if w.replied {
                    w.end_step();
                }
                w.start_step();
                let source = if m.role == Role::User { json!({"kind": "user"}) } else { json!({"kind": "plugin", "plugin": "compactbench"}) };
                let message = json!({"id": format!("e{}", id.0), "role": m.role.as_str(), "content": content(m, id)?, "source": source});
                surface.append(id, w.push("user/message", message, Some(json!("append"))));
            }
            Role::Assistant => {
                if w.turn == 0 {
                    w.turn = 1;
                    w.turn_over = false;
                    w.push("turn/start", json!({"turn": 1}), None);
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
                    w.push("request/header", json!({"header": h, "reason": "initial"}), None);
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
                surface.append(id, w.push("assistant/message", data, Some(json!("append"))));
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
                    let seq = w.push("tool/result", json!({"turn": w.turn, "step": w.step, "message": message}), Some(json!("append")));
                    surface.append(id, seq);
                }
            }
        }
        w.settle(id);
    }
    // The step that produced the newest reply (or results) is over by the next pre-step; the
    // turn is not: the loop checks inside it (the closing pre-step of a turn, or the opening
    // one of the next after its `turn/start`), and the engine compacts only in an open turn.
    w.end_step();
    let last = log.entries().next_back().map_or(EntryId(0), |(id, _)| id);
    w.settle(last);
    Ok(Export { session: json!({"events": w.events}), ids: w.ids, settings: json!({}) })
}

/// The session's surface as the events so far leave it: event seqs in order, each with the
/// log message it shows.
#[derive(Default)]
struct Surface {
    nodes: Vec<(usize, EntryId)>,
}

impl Surface {
    fn append(&mut self, entry: EntryId, seq: usize) {
        self.nodes.push((seq, entry));
    }

    /// The seqs showing `entry`, in order.
    fn seqs_of(&self, entry: EntryId) -> Vec<usize> {
        self.nodes.iter().filter(|(_, e)| *e == entry).map(|(s, _)| *s).collect()
    }
}

/// One of our checkpoints as the events the engine would have appended (see the module docs).
fn checkpoint(w: &mut Writer, surface: &mut Surface, id: EntryId, cp: &Checkpoint) -> Result<(), String> {
    match (cp.kind, &cp.window) {
        (CheckpointKind::Prune, Window::Inherit) if cp.summary.is_none() && cp.injected.is_empty() => {
            for r in &cp.replacements {
                let seqs = surface.seqs_of(r.entry);
                let texts: Vec<&str> = r
                    .message
                    .parts
                    .iter()
                    .map(|p| match p {
                        Part::ToolResult { text, .. } => Ok(text.as_str()),
                        _ => Err(format!("checkpoint {id} replaces entry {} with a part other than a tool result", r.entry)),
                    })
                    .collect::<Result<_, _>>()?;
                if seqs.len() != texts.len() {
                    return Err(format!("checkpoint {id} replaces entry {}, which is not a tool message on the surface", r.entry));
                }
                for (seq, text) in seqs.into_iter().zip(texts) {
                    let mut data = w.events[seq]["data"].clone();
                    let block = &mut data["message"]["content"][0]["content"][0]["text"];
                    if block.as_str() == Some(text) {
                        continue;
                    }
                    *block = json!(text);
                    let op = json!({"op": "replace", "start": seq, "end": seq});
                    let new = w.push_cited("tool/result", data, op, vec![seq]);
                    // The shortened result stands for the message it shortens, as in our view.
                    w.settle(r.entry);
                    let slot = surface.nodes.iter_mut().find(|(s, _)| *s == seq).expect("found above");
                    slot.0 = new;
                }
            }
            Ok(())
        }
        (CheckpointKind::Summary, Window::From(first))
            if cp.replacements.is_empty() && cp.injected.is_empty() && cp.summary_position == SummaryPosition::AfterSystem =>
        {
            let summary = cp.summary.as_ref().ok_or_else(|| format!("summary checkpoint {id} has no summary"))?;
            let keep = surface.nodes.iter().position(|(_, e)| e == first).ok_or_else(|| format!("checkpoint {id} keeps from entry {first}, which is not on the surface"))?;
            if keep == 0 {
                return Err(format!("checkpoint {id} shadows nothing"));
            }
            let shadowed: Vec<usize> = surface.nodes[..keep].iter().map(|(s, _)| *s).collect();
            let compaction = format!("cp{}", id.0);
            let lifecycle = json!({"compactionId": compaction, "turn": w.turn});
            let start = w.push("compaction/start", lifecycle.clone(), None);
            let message = json!({
                "id": compaction,
                "role": "user",
                "content": content(summary, id)?,
                "source": {"kind": "plugin", "plugin": "compact", "compactionId": compaction},
            });
            let op = json!({"op": "replace", "start": shadowed[0], "end": shadowed[keep - 1]});
            let mut cited = vec![start];
            cited.extend(&shadowed);
            let seq = w.push_cited("user/message", message, op, cited);
            w.push("compaction/end", lifecycle, None);
            surface.nodes.splice(..keep, [(seq, id)]);
            Ok(())
        }
        _ => Err(format!("checkpoint {id} is not one DeepSeek Harness lands ({:?}, {:?})", cp.kind, cp.window)),
    }
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
    /// Appends an event (`surface_op` for the three message events) and returns its seq.
    fn push(&mut self, kind: &str, data: Value, surface_op: Option<Value>) -> usize {
        let seq = self.events.len();
        let mut event = json!({"type": kind, "seq": seq, "time": 0, "data": data});
        if let Some(op) = surface_op {
            event["surfaceOp"] = op;
        }
        self.events.push(event);
        self.pending += 1;
        seq
    }

    /// A replacement: a message event with its `surfaceOp` and the earlier events it cites.
    fn push_cited(&mut self, kind: &str, data: Value, op: Value, cited: Vec<usize>) -> usize {
        let seq = self.push(kind, data, Some(op));
        self.events[seq]["sourceEventSeqs"] = json!(cited);
        seq
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
            self.push("step/start", json!({"turn": self.turn, "step": self.step}), None);
        }
    }

    fn end_step(&mut self) {
        if self.step_open {
            self.step_open = false;
            self.replied = false;
            self.push("step/end", json!({"turn": self.turn, "step": self.step}), None);
        }
    }

    fn end_turn(&mut self) {
        self.end_step();
        if self.turn > 0 {
            self.push("turn/end", json!({"turn": self.turn, "reason": {"kind": "completed"}}), None);
        }
    }
}

/// `TokenUsage`: our `input` is the uncached prompt, our cache writes its `cacheWriteTokens`;
/// the meter sums every bucket.
fn usage(u: Usage) -> Value {
    json!({"inputTokens": u.input, "outputTokens": u.output, "cacheReadTokens": u.cache_read, "cacheWriteTokens": u.cache_write})
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
        Case::new("t", log, model)
    }

    fn turn(log: &mut Log, n: u32) {
        log.push_message(Message::new(Role::User, vec![Part::text(format!("ask {n}"))]));
        let mut call = Message::new(Role::Assistant, vec![Part::ToolCall { id: format!("c{n}"), name: "read".into(), args: json!({"path": "a.rs"}) }]);
        call.usage = Some(Usage { input: 100, output: 10, cache_read: 5, ..Default::default() });
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
        assert_eq!(events[4]["data"]["usage"], json!({"inputTokens": 100, "outputTokens": 10, "cacheReadTokens": 5, "cacheWriteTokens": 0}));
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

    #[test]
    fn checkpoints_are_the_replacements_the_engine_lands() {
        let mut log = Log::new();
        log.push_message(Message::new(Role::System, vec![Part::text("be brief")]));
        turn(&mut log, 1);
        // Entry 3 holds two results; the pruner shortened the second only.
        let shortened = Message::new(
            Role::Tool,
            vec![
                Part::ToolResult { call_id: "c1".into(), name: "read".into(), text: "fn main() {}".into(), is_error: false },
                Part::ToolResult { call_id: "c1".into(), name: "read".into(), text: "de[...]".into(), is_error: true },
            ],
        );
        let mut prune = Checkpoint::new(CheckpointKind::Prune, Window::Inherit);
        prune.replacements.push(compactbench_core::Replacement { entry: EntryId(3), message: shortened });
        log.push_checkpoint(prune);
        let mut summary = Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(4)))
            .with_summary(Message::new(Role::User, vec![Part::text("pre\n\n<compacted-summary>"), Part::text("sum"), Part::text("</compacted-summary>")]));
        summary.summary_position = SummaryPosition::AfterSystem;
        log.push_checkpoint(summary);
        turn(&mut log, 2);
        let e = export_turn_end(&case(log.clone())).unwrap();
        let events = e.session["events"].as_array().unwrap();
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types[10..15], ["step/end", "tool/result", "compaction/start", "user/message", "compaction/end"]);
        // The shortened result replaces the second result, keeps its data but for the text, and
        // stands for the tool message; the checkpoint replaces the head up to entry 4's reply.
        let pruned = &events[11];
        assert_eq!(pruned["surfaceOp"], json!({"op": "replace", "start": 6, "end": 6}));
        assert_eq!(pruned["sourceEventSeqs"], json!([6]));
        assert_eq!(pruned["data"]["message"]["content"][0]["content"][0]["text"], "de[...]");
        assert_eq!(pruned["data"]["message"]["content"][0]["isError"], true);
        assert_eq!((pruned["data"]["turn"].clone(), pruned["data"]["step"].clone()), (events[6]["data"]["turn"].clone(), json!(1)));
        let checkpoint = &events[13];
        assert_eq!(checkpoint["surfaceOp"], json!({"op": "replace", "start": 2, "end": 11}));
        assert_eq!(checkpoint["sourceEventSeqs"], json!([12, 2, 4, 5, 11]));
        assert_eq!(checkpoint["data"]["content"][1]["text"], "sum");
        assert_eq!(e.ids[11..15], [3, 6, 6, 6].map(EntryId));
        // A checkpoint keeping a message no longer on the surface is refused.
        let mut stale = Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(2)))
            .with_summary(Message::new(Role::User, vec![Part::text("again")]));
        stale.summary_position = SummaryPosition::AfterSystem;
        log.push_checkpoint(stale);
        assert!(export_turn_end(&case(log)).unwrap_err().contains("not on the surface"));
    }
}
