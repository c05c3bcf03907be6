//! Exporter: our log to a Pi session branch (`SessionEntry[]` of `pi-coding-agent`
//! `core/session-manager`, messages as in `pi-ai`), the entries `SessionManager.getBranch()`
//! returns and `prepareCompaction` / `buildSessionProjection` read.
//!
//! - Every message is one `{"type": "message"}` entry (id, parentId, ISO timestamp), except a
//!   tool message, which becomes one `toolResult` message per result (Pi stores one result per
//!   message); all of them map back to the same entry of ours.
//! - The system prompt: 1.6.0 keeps it on the branch as `system` message entries (its
//!   `getCurrentSystemMessage` replays them); up to 0.73.1 it lives outside the session, so
//!   the leading system messages are left out (and given as `systemPrompt`, for the record).
//! - A reply marked failed ([`Message::failure`]) is stored as Pi stores one: `stopReason`
//!   `"aborted"` or `"error"` with the usage it reported (partial usage, or all zero), and as
//!   `errorMessage` its text (errored) or `Request was aborted.` (aborted).
//! - An assistant message without usage (or with all-zero usage) and no marker is a failed
//!   reply too: `stopReason: "error"` with zero usage and its text as `errorMessage`.
//! - Our Pi checkpoints are Pi `compaction` entries (summary, firstKeptEntryId, tokensBefore,
//!   file lists as `details`; in 1.6.0 also the `systemMessage` snapshot `appendCompaction`
//!   takes). Checkpoints of another shape are refused.
//! - 0.13.2 (which checks `pi/v0.14`) reads a legacy (v1) session file instead: a `session`
//!   header, entries without ids, and compaction entries that name their first kept entry by
//!   index (`firstKeptEntryIndex`, summary and `tokensBefore`); see [`export_0_13`].
//! - 1.6.0 is asked twice over: at a turn's end (`_checkCompaction`), and before a request
//!   (`Moment::BeforeRequest`), where it checks only between the model calls of a run
//!   (`prepareNextTurnWithContext`, after tool results); there a log ending in the user message
//!   that opens a run is refused: Pi's check before a prompt runs before that message is
//!   appended (`_prepareRun`), which is our `TurnEnd`.

use std::collections::HashMap;

use compactbench_core::{Checkpoint, Entry, EntryId, Failure, Message, Part, Role, Usage, Window};
use serde_json::{json, Value};

use crate::{Case, Export};

/// Which release's session shape to write.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Release {
    /// `@earendil-works/pi-coding-agent` 1.6.0.
    V1_6,
    /// `@mariozechner/pi-coding-agent` 0.73.1.
    V0_73,
}

/// `@earendil-works/pi-coding-agent` 1.6.0, asked before a request (after tool results).
pub(crate) fn export_1_6(case: &Case) -> Result<Export, String> {
    let last = case.log.messages().next_back().map(|(_, m)| m.role);
    if last != Some(Role::Tool) {
        return Err("1.6.0 checks before a request only after tool results (prepareNextTurn); the check before a prompt is our TurnEnd".into());
    }
    export(case, Release::V1_6)
}

/// `@earendil-works/pi-coding-agent` 1.6.0, asked at a turn's end (`_checkCompaction` on
/// `agent_end`, and again before the next prompt).
pub(crate) fn export_1_6_turn_end(case: &Case) -> Result<Export, String> {
    export(case, Release::V1_6)
}

/// `@mariozechner/pi-coding-agent` 0.73.1, asked at a turn's end.
pub(crate) fn export_0_73(case: &Case) -> Result<Export, String> {
    export(case, Release::V0_73)
}

/// `@mariozechner/pi-coding-agent` 0.13.2 (the compaction of 0.13.0–0.14.2), asked before a
/// request: it checks each reply when it ends, which before a request is the reply whose tool
/// results close the log.
pub(crate) fn export_0_13(case: &Case) -> Result<Export, String> {
    let last = case.log.messages().next_back().map(|(_, m)| m.role);
    if last != Some(Role::Tool) {
        return Err("0.13.2 checks a reply when it ends: before a request only after its tool results; a user message last follows the check at the turn's end".into());
    }
    export_legacy(case)
}

/// `@mariozechner/pi-coding-agent` 0.13.2, asked at a turn's end (its final reply ended).
pub(crate) fn export_0_13_turn_end(case: &Case) -> Result<Export, String> {
    export_legacy(case)
}

/// A legacy (v1) session file as 0.13.2 reads it: the `session` header, then one entry per
/// message and compaction, no ids; a compaction names its first kept entry by index
/// (`firstKeptEntryIndex`). The header stands for the first entry of ours on the branch (a
/// first kept index of 0 keeps everything).
fn export_legacy(case: &Case) -> Result<Export, String> {
    let newest_reply = case.log.messages().filter(|(_, m)| m.role == Role::Assistant).map(|(id, _)| id).next_back();
    let latest_compaction = case.log.checkpoints().map(|(id, _)| id).next_back();
    if newest_reply.is_none_or(|r| latest_compaction.is_some_and(|c| c > r)) {
        return Err("no reply since the latest compaction: 0.13.2 checks a reply once, when it ends".into());
    }
    let model = &case.model.name;
    let mut entries = vec![json!({
        "type": "session",
        "id": case.id,
        "timestamp": iso(0),
        "cwd": "/",
        "provider": "compactbench",
        "modelId": model,
        "thinkingLevel": "off",
    })];
    let mut ids = Vec::new();
    // Our entry → its first native index (for `firstKeptEntryIndex`).
    let mut native: HashMap<EntryId, usize> = HashMap::new();
    let mut leading = true;
    for (id, entry) in case.log.entries() {
        let items = match entry {
            // Pi keeps the system prompt outside the session.
            Entry::Message(m) if leading && m.role == Role::System => continue,
            Entry::Message(m) => messages(m, model),
            Entry::Checkpoint(cp) => vec![legacy_compaction(cp, &native)?],
        };
        if leading {
            leading = false;
            ids.push(id);
        }
        for mut item in items {
            let i = entries.len();
            native.entry(id).or_insert(i);
            if item.get("type").is_none() {
                item["timestamp"] = json!(EPOCH_MS + i as u64 * 1000);
                item = json!({ "type": "message", "message": item });
            }
            item["timestamp"] = json!(iso(i));
            entries.push(item);
            ids.push(id);
        }
    }
    Ok(Export { session: json!({ "entries": entries }), ids, settings: json!({}) })
}

/// One of our Pi checkpoints as a legacy `compaction` entry.
fn legacy_compaction(cp: &Checkpoint, native: &HashMap<EntryId, usize>) -> Result<Value, String> {
    let summary = cp.details.get("summary").and_then(Value::as_str).ok_or("a checkpoint that is not Pi's (no details.summary)")?;
    let Window::From(first) = cp.window else { return Err("a Pi checkpoint keeps a suffix (Window::From)".into()) };
    let first_kept = native.get(&first).ok_or_else(|| format!("firstKeptEntryIndex {} is not in the session", first.0))?;
    Ok(json!({ "type": "compaction", "summary": summary, "firstKeptEntryIndex": first_kept, "tokensBefore": cp.tokens_before }))
}

/// Entry timestamps: one second apart from 2023-11-15T00:00:00Z, so `timestamp` order is log
/// order (Pi's stale-usage guard compares a reply's timestamp with a compaction's).
const EPOCH_MS: u64 = 1_700_006_400_000;

fn iso(i: usize) -> String {
    format!("2023-11-15T{:02}:{:02}:{:02}.000Z", i / 3600, (i / 60) % 60, i % 60)
}

fn export(case: &Case, release: Release) -> Result<Export, String> {
    let mut entries: Vec<Value> = Vec::new();
    let mut ids = Vec::new();
    // Our entry → the id of its first native entry (for `firstKeptEntryId`).
    let mut native: HashMap<EntryId, String> = HashMap::new();
    let mut system = Vec::new();
    let mut leading = true;
    let model = &case.model.name;
    for (id, entry) in case.log.entries() {
        let items = match entry {
            Entry::Message(m) if leading && m.role == Role::System => {
                system.push(m.text());
                match release {
                    Release::V1_6 => vec![json!({ "role": "system", "content": m.text() })],
                    Release::V0_73 => continue,
                }
            }
            Entry::Message(m) => {
                leading = false;
                messages(m, model)
            }
            Entry::Checkpoint(cp) => {
                leading = false;
                vec![compaction(cp, &native, &system, release)?]
            }
        };
        for mut item in items {
            let i = entries.len();
            let eid = format!("e{i}");
            native.entry(id).or_insert_with(|| eid.clone());
            let mut e = if item.get("type").is_some() {
                item
            } else {
                item["timestamp"] = json!(EPOCH_MS + i as u64 * 1000);
                json!({ "type": "message", "message": item })
            };
            e["id"] = json!(eid);
            e["parentId"] = if i == 0 { Value::Null } else { json!(format!("e{}", i - 1)) };
            e["timestamp"] = json!(iso(i));
            if let Some(sm) = e.get_mut("systemMessage") {
                sm["timestamp"] = json!(EPOCH_MS + i as u64 * 1000);
            }
            entries.push(e);
            ids.push(id);
        }
    }
    Ok(Export { session: json!({ "systemPrompt": system, "entries": entries }), ids, settings: json!({}) })
}

/// One of our Pi checkpoints as a Pi `compaction` entry (id, parent and timestamp are set by
/// the caller).
fn compaction(cp: &Checkpoint, native: &HashMap<EntryId, String>, system: &[String], release: Release) -> Result<Value, String> {
    let summary = cp.details.get("summary").and_then(Value::as_str).ok_or("a checkpoint that is not Pi's (no details.summary)")?;
    let Window::From(first) = cp.window else { return Err("a Pi checkpoint keeps a suffix (Window::From)".into()) };
    let first_kept = native.get(&first).ok_or_else(|| format!("firstKeptEntryId {} is not on the branch", first.0))?;
    let mut e = json!({
        "type": "compaction",
        "summary": summary,
        "firstKeptEntryId": first_kept,
        "tokensBefore": cp.tokens_before,
        "details": {
            "readFiles": cp.details.get("readFiles").cloned().unwrap_or(json!([])),
            "modifiedFiles": cp.details.get("modifiedFiles").cloned().unwrap_or(json!([])),
        },
    });
    // 1.6.0's `appendCompaction` snapshots the replayed system prompt into the entry (the
    // projection drops system entries before the compaction, so the prompt lives on here).
    if release == Release::V1_6 && !system.is_empty() {
        e["systemMessage"] = json!({ "role": "system", "content": system.join("\n\n") });
    }
    Ok(e)
}

/// One message of ours as Pi messages (several for a tool message with several results).
fn messages(m: &Message, model: &str) -> Vec<Value> {
    match m.role {
        // A later system message: Pi's own role for prompt changes (1.6.0 estimates it; 0.73.1
        // has no such role and counts it 0, as our crate does).
        Role::System => vec![json!({ "role": "system", "content": m.text() })],
        Role::User => vec![json!({ "role": "user", "content": user_content(&m.parts) })],
        Role::Assistant => vec![assistant(m, model)],
        Role::Tool => tool_results(&m.parts),
    }
}

fn user_content(parts: &[Part]) -> Vec<Value> {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(json!({ "type": "text", "text": text })),
            Part::Media { mime, .. } => Some(image(mime)),
            Part::Reasoning { .. } | Part::ToolResult { .. } | Part::ToolCall { .. } => None,
        })
        .collect()
}

/// An image block (Pi and oh-my-pi estimate images by a flat size, whatever their data).
pub(super) fn image(mime: &str) -> Value {
    json!({ "type": "image", "data": "", "mimeType": mime })
}

fn assistant(m: &Message, model: &str) -> Value {
    let mut out = assistant_message(m, model);
    match out["stopReason"].as_str() {
        Some("error") => out["errorMessage"] = json!(m.text()),
        Some("aborted") => out["errorMessage"] = json!(ABORTED),
        _ => {}
    }
    out
}

/// The `errorMessage` an aborted reply gets (the abort signal's error; Pi tests only an
/// errored reply's message for overflow).
const ABORTED: &str = "Request was aborted.";

/// An assistant message as Pi's agent core stores it (oh-my-pi's too): text, thinking and tool
/// calls. A reply marked failed ([`Message::failure`]) has `stopReason` `"aborted"` or
/// `"error"` and keeps the usage it reported (partial, or none: all zero); a reply without
/// usage (or with all-zero usage) and no marker is an errored one with zero usage. The
/// estimators skip the usage of both.
pub(super) fn assistant_message(m: &Message, model: &str) -> Value {
    let mut content = Vec::new();
    let mut calls = false;
    for p in &m.parts {
        match p {
            Part::Text { text } => content.push(json!({ "type": "text", "text": text })),
            Part::Reasoning { text } => content.push(json!({ "type": "thinking", "thinking": text })),
            Part::ToolCall { id, name, args } => {
                calls = true;
                content.push(json!({ "type": "toolCall", "id": id, "name": name, "arguments": args }));
            }
            // An assistant message carries no images or results in this format.
            Part::ToolResult { .. } | Part::Media { .. } => {}
        }
    }
    let good = m.usage.filter(|u| u.total() > 0);
    let (stop, reported) = match (m.failure, good) {
        (Some(Failure::Aborted), _) => ("aborted", m.usage),
        (Some(Failure::Error), _) => ("error", m.usage),
        (None, None) => ("error", None),
        (None, Some(_)) if calls => ("toolUse", good),
        (None, Some(_)) => ("stop", good),
    };
    json!({
        "role": "assistant",
        "content": content,
        "api": "openai-completions",
        "provider": "compactbench",
        "model": model,
        "usage": usage(reported.unwrap_or_default()),
        "stopReason": stop,
    })
}

fn usage(u: Usage) -> Value {
    json!({
        "input": u.input,
        "output": u.output,
        "cacheRead": u.cache_read,
        "cacheWrite": u.cache_write,
        "totalTokens": u.total(),
        "cost": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0 },
    })
}

/// One `toolResult` message per result; loose text and images join the result before them (or
/// open one), as our crate reads a tool message.
fn tool_results(parts: &[Part]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let open = |out: &mut Vec<Value>| {
        if out.is_empty() {
            out.push(json!({ "role": "toolResult", "toolCallId": "", "toolName": "", "content": [], "isError": false }));
        }
    };
    for p in parts {
        match p {
            Part::ToolResult { call_id, name, text, is_error } => out.push(json!({
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": [{ "type": "text", "text": text }],
                "isError": is_error,
            })),
            Part::Text { text } => {
                open(&mut out);
                push_block(&mut out, json!({ "type": "text", "text": text }));
            }
            Part::Media { mime, .. } => {
                open(&mut out);
                push_block(&mut out, image(mime));
            }
            Part::Reasoning { .. } | Part::ToolCall { .. } => {}
        }
    }
    out
}

fn push_block(out: &mut [Value], block: Value) {
    if let Some(last) = out.last_mut() {
        last["content"].as_array_mut().expect("content is an array").push(block);
    }
}

#[cfg(test)]
mod tests {
    use compactbench_core::{CheckpointKind, Log, ModelProfile, Pricing, Shape};
    use expect_test::expect;

    use super::*;

    fn case(log: Log) -> Case {
        let model = ModelProfile { name: "m".into(), window: 1000, max_output: 100, provider: Shape::Anthropic, pricing: Pricing::default() };
        Case::new("t", log, model)
    }

    fn small_log() -> Log {
        let mut log = Log::new();
        log.push_message(Message::system("sys"));
        log.push_message(Message::new(Role::User, vec![Part::text("read a")]));
        let mut a = Message::new(
            Role::Assistant,
            vec![
                Part::Reasoning { text: "hm".into() },
                Part::ToolCall { id: "c1".into(), name: "read".into(), args: json!({"path": "a"}) },
                Part::ToolCall { id: "c2".into(), name: "read".into(), args: json!({"path": "b"}) },
            ],
        );
        a.usage = Some(Usage { input: 10, output: 2, cache_read: 5, ..Default::default() });
        log.push_message(a);
        log.push_message(Message::new(
            Role::Tool,
            vec![
                Part::ToolResult { call_id: "c1".into(), name: "read".into(), text: "A".into(), is_error: false },
                Part::ToolResult { call_id: "c2".into(), name: "read".into(), text: "B".into(), is_error: true },
            ],
        ));
        log
    }

    fn brief(e: &Export) -> Vec<String> {
        e.session["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                let m = &x["message"];
                format!("{} {} {} {} {} {}", x["id"], x["type"], m["role"], m["stopReason"], m["usage"]["totalTokens"], m["content"])
            })
            .collect()
    }

    #[test]
    fn a_small_log_exports_to_a_1_6_branch_with_its_system_entry() {
        let e = export_1_6(&case(small_log())).unwrap();
        assert_eq!(e.ids, [EntryId(0), EntryId(1), EntryId(2), EntryId(3), EntryId(3)]);
        expect![[r#"
            [
                "\"e0\" \"message\" \"system\" null null \"sys\"",
                "\"e1\" \"message\" \"user\" null null [{\"type\":\"text\",\"text\":\"read a\"}]",
                "\"e2\" \"message\" \"assistant\" \"toolUse\" 17 [{\"type\":\"thinking\",\"thinking\":\"hm\"},{\"type\":\"toolCall\",\"id\":\"c1\",\"name\":\"read\",\"arguments\":{\"path\":\"a\"}},{\"type\":\"toolCall\",\"id\":\"c2\",\"name\":\"read\",\"arguments\":{\"path\":\"b\"}}]",
                "\"e3\" \"message\" \"toolResult\" null null [{\"type\":\"text\",\"text\":\"A\"}]",
                "\"e4\" \"message\" \"toolResult\" null null [{\"type\":\"text\",\"text\":\"B\"}]",
            ]
        "#]]
        .assert_debug_eq(&brief(&e));
        assert_eq!(e.session["entries"][2]["parentId"], json!("e1"));
        assert_eq!(e.session["entries"][4]["timestamp"], json!("2023-11-15T00:00:04.000Z"));
    }

    /// A reply marked failed keeps the usage it reported, with Pi's stop reason; the legacy
    /// (0.13.2) and oh-my-pi exports write it the same way.
    #[test]
    fn marked_failed_replies_keep_their_partial_usage() {
        for (failure, stop, error) in [(Failure::Aborted, "aborted", ABORTED), (Failure::Error, "error", "partial")] {
            let mut log = small_log();
            log.push_message(Message::user("go on"));
            let mut reply = Message::assistant("partial");
            reply.usage = Some(Usage { input: 900, output: 1, cache_read: 50, cache_write: 40 });
            reply.failure = Some(failure);
            log.push_message(reply);
            for e in [export_1_6_turn_end(&case(log.clone())).unwrap(), export_0_13_turn_end(&case(log.clone())).unwrap()] {
                let m = &e.session["entries"].as_array().unwrap().last().unwrap()["message"];
                assert_eq!((m["stopReason"].as_str(), m["errorMessage"].as_str()), (Some(stop), Some(error)));
                assert_eq!(m["usage"]["input"], json!(900));
                assert_eq!((m["usage"]["cacheWrite"].clone(), m["usage"]["totalTokens"].clone()), (json!(40), json!(991)));
            }
            let e = super::super::oh_my_pi::export(&case(log)).unwrap();
            let m = &e.session["entries"].as_array().unwrap().last().unwrap()["message"];
            assert_eq!((m["stopReason"].as_str(), m["usage"]["totalTokens"].clone()), (Some(stop), json!(991)));
        }
    }

    #[test]
    fn checkpoints_become_compaction_entries_and_0_73_leaves_the_system_prompt_out() {
        let mut log = small_log();
        let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(2)));
        cp.tokens_before = 99;
        cp.details = json!({ "summary": "S", "firstKeptEntryId": 2, "readFiles": ["a"], "modifiedFiles": [] });
        log.push_checkpoint(cp);
        let mut reply = Message::new(Role::Assistant, vec![Part::text("overloaded")]);
        reply.usage = None;
        log.push_message(reply);
        let e = export_0_73(&case(log.clone())).unwrap();
        assert_eq!(e.ids, [EntryId(1), EntryId(2), EntryId(3), EntryId(3), EntryId(4), EntryId(5)]);
        let c = &e.session["entries"][4];
        assert_eq!(
            (c["type"].clone(), c["firstKeptEntryId"].clone(), c["tokensBefore"].clone(), c["details"]["readFiles"].clone()),
            (json!("compaction"), json!("e1"), json!(99), json!(["a"]))
        );
        assert!(c.get("systemMessage").is_none());
        let failed = &e.session["entries"][5]["message"];
        assert_eq!((failed["stopReason"].clone(), failed["errorMessage"].clone()), (json!("error"), json!("overloaded")));
        // 1.6.0 snapshots the system prompt into the compaction entry (the log must end in a
        // tool result to be asked there).
        log.push_message(Message::new(Role::Tool, vec![Part::ToolResult { call_id: "x".into(), name: "bash".into(), text: "ok".into(), is_error: false }]));
        let e = export_1_6(&case(log)).unwrap();
        assert_eq!(e.session["entries"][5]["systemMessage"]["content"], json!("sys"));
        assert_eq!(e.session["entries"][5]["firstKeptEntryId"], json!("e2"));
    }

    #[test]
    fn foreign_checkpoints_and_1_6_prompt_openings_are_refused() {
        let mut log = small_log();
        log.push_message(Message::new(Role::User, vec![Part::text("next")]));
        assert!(export_1_6(&case(log.clone())).is_err(), "a user message last is the TurnEnd check");
        log.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::Inherit));
        assert!(export_0_73(&case(log)).is_err());
    }
}
