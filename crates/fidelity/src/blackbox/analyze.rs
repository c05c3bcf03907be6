//! What a run's recorded requests say the harness did, and what our crate does on the same
//! history: the same [`Facts`] from both sides.
//!
//! Our side replays the history the harness itself sent (each main request's messages, each
//! assistant message carrying the usage the server reported for that reply), so a difference is
//! a difference of rules, not of tool output formatting. Paths are made relative to the work dir
//! and the session's own call ids (`toolu_cbNNNN`, `call_cbNNNN`) are stable, so facts compare
//! as they are. Claude Code's requests are Anthropic Messages (`claude_session`), Codex's are
//! Responses items (`codex_session`), OpenCode's are Anthropic Messages through its bundled
//! `anthropic` provider (`opencode_session`), Gemini CLI's are Gemini API contents
//! (`gemini_session`).

use std::sync::Mutex;

use compactbench_core::{
    Checkpoint, Cx, Decision, Error, Log, Message, ModelProfile, Moment, Origin, Part, Role, Shape, Strategy, Summarizer, Summary, SummaryContext,
    SummaryRequest, Usage, VirtualStore, Window,
};
use compactbench_strategy_claude_code::{ClaudeCodeConfig, ClaudeCodeStrategy};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::run::{last_message_text, Run, CLAUDE_COMPACT_MARKER};
use super::server::{Record, Wire};
use crate::ours::{tokenizer, FixedSummarizer, FIXED_SUMMARY};

/// What one side did with one session (`None`: it did not compact, or the fact is not known).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    /// Main-loop requests made before the compaction (the compaction came before request N).
    pub compacted_at: Option<usize>,
    /// The context size it measured when it compacted.
    pub tokens_before: Option<u64>,
    /// The compaction request reuses the conversation as its prefix (same system prompt and
    /// messages, the instruction appended).
    pub prefix_reused: Option<bool>,
    /// What the instruction asks for: `analysis+summary` (both tags) or `handoff` (a handoff
    /// summary), plus `text-only` where it forbids tool calls; for Gemini CLI the kind of each of
    /// its compression calls (`snapshot + verify`).
    pub instruction: Option<String>,
    /// Role of the message carrying the summary in the next request.
    pub summary_role: Option<String>,
    /// Index of that message among the next request's non-system messages.
    pub summary_index: Option<usize>,
    /// What the next request keeps verbatim from before: `call:ID`, `result:ID`,
    /// `text:START` (assistant text) and, for Codex, OpenCode and Gemini CLI, `user:START` (real user messages),
    /// in order; OpenCode's pruned tool outputs as `cleared:ID`.
    pub kept: Option<Vec<String>>,
    /// Files re-attached in the next request (work-relative paths, sorted).
    pub files: Option<Vec<String>>,
}

/// The parts of [`Facts`] compared, by name, in report order.
pub const PARTS: [&str; 6] = ["trigger", "tokens_before", "compaction_request", "summary_placement", "kept", "files"];

impl Facts {
    /// The value of one compared part, as text (for tables and the agreement check).
    pub fn part(&self, name: &str) -> String {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "–".into());
        match name {
            "trigger" => opt(self.compacted_at.map(|n| format!("before request {n}"))),
            "tokens_before" => opt(self.tokens_before.map(|n| n.to_string())),
            "compaction_request" => opt(self.prefix_reused.map(|p| {
                format!("{} · {}", if p { "prefix" } else { "fresh" }, self.instruction.as_deref().unwrap_or("?"))
            })),
            "summary_placement" => opt(self.summary_role.as_ref().map(|r| format!("{r} #{}", self.summary_index.map_or("?".into(), |i| i.to_string())))),
            "kept" => opt(self.kept.as_ref().map(|k| if k.is_empty() { "nothing".into() } else { k.join(" ") })),
            "files" => opt(self.files.as_ref().map(|f| if f.is_empty() { "none".into() } else { f.join(" ") })),
            _ => unreachable!("unknown part {name}"),
        }
    }
}

/// One session's result.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SessionResult {
    /// Session id (`scenario/sSEED`).
    pub id: String,
    /// Requests the harness made, by kind (`main`, `compaction`, `after_compaction`, `side`).
    pub requests: Vec<String>,
    /// How the CLI ended.
    pub ended: String,
    /// The harness's facts.
    pub theirs: Facts,
    /// Our crate's facts on the same history.
    pub ours: Facts,
    /// Why the run could not be analysed, if it could not.
    pub problem: Option<String>,
}

impl SessionResult {
    /// What the run alone says of a session: its requests by kind, in order, and how it ended.
    fn of_run(id: &str, run: &Run) -> SessionResult {
        SessionResult { id: id.into(), requests: run.records.iter().map(|r| r.kind.clone()).collect(), ended: run.ended.clone(), ..SessionResult::default() }
    }

    /// This result, not analysed: no model request reached the server.
    fn no_request(mut self, run: &Run) -> SessionResult {
        self.problem = Some(format!("no model request reached the server; stderr: {}", run.stderr_tail.trim()));
        self
    }

    /// The parts that differ.
    pub fn differing(&self) -> Vec<&'static str> {
        if self.problem.is_some() {
            return Vec::new();
        }
        PARTS.iter().copied().filter(|p| self.theirs.part(p) != self.ours.part(p)).collect()
    }

    /// One progress line.
    pub fn line(&self) -> String {
        if let Some(p) = &self.problem {
            return format!("not analysed: {p} ({} requests, {})", self.requests.len(), self.ended);
        }
        let d = self.differing();
        format!(
            "{} requests, compacted {} (ours {}); {}",
            self.requests.len(),
            self.theirs.part("trigger"),
            self.ours.part("trigger"),
            if d.is_empty() { "agrees".to_owned() } else { format!("differs in {}", d.join(", ")) }
        )
    }
}

use super::run::content_text as text_of;

/// Our messages for one Anthropic message. A user message with tool results becomes a user
/// message of its text blocks (the harness's reminders), then a tool message: the results stay
/// last, so a view ending in them reads as a turn going on, not as one starting.
fn convert(message: &Value, names: &mut std::collections::HashMap<String, String>, usage: Option<Usage>) -> Vec<Message> {
    let role = message["role"].as_str().unwrap_or("user");
    let blocks: Vec<Value> = match &message["content"] {
        Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
        Value::Array(b) => b.clone(),
        _ => Vec::new(),
    };
    if role == "assistant" {
        let parts = blocks
            .iter()
            .filter_map(|b| match b["type"].as_str() {
                Some("text") => Some(Part::text(b["text"].as_str().unwrap_or(""))),
                Some("thinking") => Some(Part::Reasoning { text: b["thinking"].as_str().unwrap_or("").into() }),
                Some("tool_use") => {
                    let id = b["id"].as_str().unwrap_or("").to_owned();
                    let name = b["name"].as_str().unwrap_or("").to_owned();
                    names.insert(id.clone(), name.clone());
                    Some(Part::ToolCall { id, name, args: b["input"].clone() })
                }
                _ => None,
            })
            .collect();
        let mut m = Message::new(Role::Assistant, parts);
        m.usage = usage;
        return vec![m];
    }
    let mut results = Vec::new();
    let mut texts = Vec::new();
    for b in &blocks {
        match b["type"].as_str() {
            Some("tool_result") => {
                let call_id = b["tool_use_id"].as_str().unwrap_or("").to_owned();
                let name = names.get(&call_id).cloned().unwrap_or_default();
                results.push(Part::ToolResult { call_id, name, text: text_of(&b["content"]), is_error: b["is_error"].as_bool().unwrap_or(false) });
            }
            Some("text") => texts.push(Part::text(b["text"].as_str().unwrap_or(""))),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if !texts.is_empty() {
        out.push(Message::new(Role::User, texts));
    }
    if !results.is_empty() {
        out.push(Message::new(Role::Tool, results));
    }
    out
}

/// Our log for a request's system prompt and messages; `usage` gives the usage reported for an
/// assistant message, if the server sent it.
pub fn to_log(system: &Value, messages: &[Value], usage: &dyn Fn(&Value) -> Option<Usage>) -> Log {
    let mut log = Log::new();
    let system = text_of(system);
    if !system.is_empty() {
        log.push_message(Message::system(system));
    }
    let mut names = std::collections::HashMap::new();
    for m in messages {
        let reported = if m["role"] == "assistant" { usage(m) } else { None };
        for converted in convert(m, &mut names, reported) {
            log.push_message(converted);
        }
    }
    log
}

/// What identifies a reply in the history: its first tool call id, else its text.
fn reply_key(blocks: &[Value]) -> String {
    blocks
        .iter()
        .find_map(|b| b["id"].as_str().filter(|_| b["type"] == "tool_use").map(|id| format!("call:{id}")))
        .unwrap_or_else(|| format!("text:{}", blocks.iter().filter_map(|b| b["text"].as_str()).collect::<String>()))
}

/// The usage the server reported for each reply of `records`, by [`reply_key`].
fn reported_usage(records: &[&Record]) -> std::collections::HashMap<String, Usage> {
    records
        .iter()
        .map(|r| {
            let blocks: Vec<Value> = r
                .reply
                .blocks
                .iter()
                .map(|b| match b {
                    super::server::Block::Text(t) => serde_json::json!({"type": "text", "text": t}),
                    super::server::Block::Call { id, .. } => serde_json::json!({"type": "tool_use", "id": id}),
                })
                .collect();
            (reply_key(&blocks), usage_of(r))
        })
        .collect()
}

fn usage_of(record: &Record) -> Usage {
    Usage { input: record.reply.input_tokens, output: record.reply.output_tokens, ..Default::default() }
}

/// Kept items of a list of Anthropic messages: every tool call and result, and assistant text.
fn kept_items(messages: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for m in messages {
        let Some(blocks) = m["content"].as_array() else { continue };
        for b in blocks {
            match b["type"].as_str() {
                Some("tool_use") => out.push(format!("call:{}", b["id"].as_str().unwrap_or(""))),
                Some("tool_result") => out.push(format!("result:{}", b["tool_use_id"].as_str().unwrap_or(""))),
                Some("text") if m["role"] == "assistant" => out.push(format!("text:{}", start(b["text"].as_str().unwrap_or("")))),
                _ => {}
            }
        }
    }
    out
}

fn start(text: &str) -> String {
    text.chars().take(24).collect()
}

/// How Claude Code introduces a re-attached file.
const READ_ATTACHMENT: &str = "Called the Read tool with the following input: ";

/// The `file_path` of the Read input a re-attachment reminder names, work-relative.
fn read_input(text: &str, work: &str) -> Option<String> {
    let input = text[text.find(READ_ATTACHMENT)? + READ_ATTACHMENT.len()..].lines().next()?;
    let input: Value = serde_json::from_str(input).ok()?;
    input["file_path"].as_str().map(|p| relative(p, work))
}

/// `path` relative to the work dir when it is under it.
fn relative(path: &str, work: &str) -> String {
    path.strip_prefix(work).map_or(path, |p| p.trim_start_matches('/')).to_owned()
}

/// `value` without `cache_control` keys.
fn uncached(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.iter().filter(|(k, _)| *k != "cache_control").map(|(k, v)| (k.clone(), uncached(v))).collect()),
        Value::Array(items) => Value::Array(items.iter().map(uncached).collect()),
        other => other.clone(),
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

fn instruction_kind(text: &str) -> String {
    let lower = text.to_lowercase();
    let mut kind = if lower.contains("<analysis>") && lower.contains("<summary>") {
        "analysis+summary".to_owned()
    } else if lower.contains("handoff summary") {
        "handoff".to_owned()
    } else if lower.contains("<current_focus>") && lower.contains("<important_context>") {
        // Kimi CLI's sections (`prompts/compact.md`).
        "focus-sections".to_owned()
    } else if lower.contains("## goal") && lower.contains("## state") && lower.contains("## next") {
        // The sections of Cline's SDK continuation note.
        "goal-state-next".to_owned()
    } else if lower.contains("## objective") && lower.contains("## next move") {
        // OpenCode's anchored summary template; `<prior-summary>` when it updates an earlier one.
        if lower.contains("<prior-summary>") { "anchored-update" } else { "anchored" }.to_owned()
    } else {
        "other".to_owned()
    };
    if lower.contains("text only") || lower.contains("plain text only") {
        kind.push_str(" text-only");
    }
    kind
}

/// The harness's facts from its recorded requests; also the history it compacted (for our
/// side), as (system, messages).
fn theirs(run: &Run, work: &str) -> (Facts, Option<(Value, Vec<Value>)>) {
    let mut facts = Facts::default();
    let mains: Vec<&Record> = run.records.iter().filter(|r| r.kind == "main").collect();
    let Some(compaction) = run.records.iter().find(|r| r.kind == "compaction") else { return (facts, None) };
    facts.compacted_at = Some(run.records.iter().take_while(|r| r.kind != "compaction").filter(|r| r.kind == "main").count());
    facts.tokens_before = run.boundaries.first().and_then(|b| b["compact_metadata"]["pre_tokens"].as_u64());
    let mut history: Vec<Value> = compaction.body["messages"].as_array().cloned().unwrap_or_default();
    // The instruction: the last user message's text block with the marker (or the whole
    // message when it holds nothing else).
    let mut instruction = String::new();
    if let Some(last) = history.last_mut() {
        if let Some(blocks) = last["content"].as_array_mut() {
            if let Some(i) = blocks.iter().position(|b| b["text"].as_str().is_some_and(|t| t.contains(CLAUDE_COMPACT_MARKER))) {
                instruction = blocks.remove(i)["text"].as_str().unwrap_or("").to_owned();
            }
            if blocks.is_empty() {
                history.pop();
            }
        } else if last["content"].as_str().is_some_and(|t| t.contains(CLAUDE_COMPACT_MARKER)) {
            instruction = history.pop().map(|m| text_of(&m["content"])).unwrap_or_default();
        }
    }
    facts.instruction = Some(instruction_kind(&instruction));
    let previous = mains.iter().rev().find(|r| r.index < compaction.index);
    // The previous main request's messages but its last (the user message the instruction
    // may be appended to) open the compaction request, under the same system prompt and tools.
    // Prompt-cache breakpoints move from request to request, so they are left out.
    facts.prefix_reused = Some(previous.is_none_or(|p| {
        let before: Vec<Value> = p.body["messages"].as_array().map_or(&[][..], |m| &m[..m.len().saturating_sub(1)]).iter().map(uncached).collect();
        let history: Vec<Value> = history.iter().map(uncached).collect();
        uncached(&p.body["system"]) == uncached(&compaction.body["system"]) && p.body["tools"] == compaction.body["tools"] && history.starts_with(&before)
    }));
    let Some(after) = run.records.iter().find(|r| r.kind == "after_compaction") else { return (facts, Some((compaction.body["system"].clone(), history))) };
    let messages: Vec<Value> = after.body["messages"].as_array().cloned().unwrap_or_default();
    let holder = messages.iter().position(|m| text_of(&m["content"]).contains(FIXED_SUMMARY));
    facts.summary_index = holder;
    facts.summary_role = holder.map(|i| messages[i]["role"].as_str().unwrap_or("?").to_owned());
    let tail = &messages[holder.map_or(0, |i| i + 1)..];
    facts.kept = Some(kept_items(tail));
    // Claude Code re-attaches a file as a reminder naming a Read call and its input.
    let attached: Vec<String> = tail
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|b| b["text"].as_str().filter(|t| t.contains(READ_ATTACHMENT)).and_then(|t| read_input(t, work)))
        .collect();
    facts.files = Some(sorted(attached));
    // What was kept verbatim was in the history the harness had too: after the part it
    // summarized (mid-turn), or overlapping its end (at a turn's start the closing answer is both
    // summarized and kept). Reminders are attached anew after a compaction, so only those the
    // CLI puts on every later prompt (seen on the earlier prompts of the history) are kept with
    // the new prompt.
    let is_reminder = |t: &str| t.trim_start().starts_with("<system-reminder>");
    let prompt_reminders: Vec<String> = history
        .iter()
        .skip(1)
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_array())
        .filter(|b| b.iter().any(|b| b["type"] == "text" && b["text"].as_str().is_some_and(|t| !is_reminder(t))))
        .flat_map(|b| b.iter().filter_map(|b| b["text"].as_str()).filter(|t| is_reminder(t)).map(|t| t.trim().to_owned()).collect::<Vec<_>>())
        .collect();
    let attached_anew = |t: &str| is_reminder(t) && !prompt_reminders.iter().any(|p| p == t.trim());
    let preserved: Vec<Value> = tail
        .iter()
        .filter_map(|m| {
            let mut m = m.clone();
            if let Some(blocks) = m["content"].as_array_mut() {
                blocks.retain(|b| !(b["type"] == "text" && b["text"].as_str().is_some_and(attached_anew)));
                if blocks.is_empty() {
                    return None;
                }
            }
            Some(m)
        })
        .collect();
    let plain: Vec<Value> = history.iter().map(uncached).collect();
    let preserved_plain: Vec<Value> = preserved.iter().map(uncached).collect();
    let overlap = (0..=preserved.len().min(history.len())).rev().find(|&n| plain[plain.len() - n..] == preserved_plain[..n]).unwrap_or(0);
    history.extend(preserved.into_iter().skip(overlap));
    (facts, Some((compaction.body["system"].clone(), history)))
}

/// A summarizer that answers as [`FixedSummarizer`] and keeps how it was asked.
#[derive(Default)]
struct Recording {
    asked: Mutex<Vec<(SummaryContext, String)>>,
}

impl Summarizer for Recording {
    fn name(&self) -> &str {
        "fixed"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        self.asked.lock().expect("recording").push((request.context, request.instructions.clone()));
        FixedSummarizer.summarize(request)
    }
}

/// Our crate as the runs configure Claude Code: the `--autocompact` window, no CLAUDE.md (the
/// scratch work dir has none), and the model the runs name.
pub fn claude_strategy() -> (ClaudeCodeStrategy, ModelProfile) {
    let config = ClaudeCodeConfig { auto_compact_window: Some(super::CLAUDE_AUTOCOMPACT_WINDOW), claude_md: Some(String::new()), ..ClaudeCodeConfig::default() };
    let model = ModelProfile {
        name: super::CLAUDE_MODEL.into(),
        window: super::CLAUDE_MODEL_WINDOW,
        max_output: super::CLAUDE_MODEL_MAX_OUTPUT,
        provider: Shape::Anthropic,
        pricing: Default::default(),
    };
    (ClaudeCodeStrategy::new(config), model)
}

/// Our compaction of `log` at `moment` (`None` if it failed), with the first summary request it
/// made noted in `facts`: whether it reuses the conversation as its prefix, and what its
/// instruction asks for.
fn compact_noting_request(facts: &mut Facts, strategy: &dyn Strategy, log: &Log, model: &ModelProfile, moment: Moment) -> Option<Vec<Checkpoint>> {
    let view = strategy.project(log);
    let recording = Recording::default();
    let mut store = VirtualStore::new();
    let mut cx = Cx::new(model, &recording, &mut store, tokenizer());
    let checkpoints = strategy.compact(log, &view, moment, &mut cx).ok()?;
    if let Some((context, instructions)) = recording.asked.lock().expect("recording").first() {
        facts.prefix_reused = Some(context.reuses_prefix());
        facts.instruction = Some(instruction_kind(instructions));
    }
    Some(checkpoints)
}

fn fires(strategy: &dyn Strategy, log: &Log, model: &ModelProfile) -> bool {
    let view = strategy.project(log);
    let mut store = VirtualStore::new();
    let cx = Cx::new(model, &FixedSummarizer, &mut store, tokenizer());
    matches!(strategy.decide(log, &view, Moment::BeforeRequest, &cx), Decision::Compact { .. })
}

/// Our facts: the first request our trigger fires before (the harness's histories in turn),
/// and our compaction of the history the harness compacted.
fn ours(run: &Run, compacted: Option<&(Value, Vec<Value>)>, work: &str) -> Facts {
    let (strategy, model) = claude_strategy();
    let mut facts = Facts::default();
    let mains = run.mains_before_compaction();
    let reported = reported_usage(&mains);
    let usage = |m: &Value| m["content"].as_array().and_then(|b| reported.get(&reply_key(b)).copied());
    let mut histories: Vec<Log> = mains.iter().map(|r| to_log(&r.body["system"], r.body["messages"].as_array().map_or(&[][..], |m| m), &usage)).collect();
    if let Some((system, messages)) = compacted {
        histories.push(to_log(system, messages, &usage));
    }
    facts.compacted_at = histories.iter().position(|log| fires(&strategy, log, &model));
    let Some(at) = facts.compacted_at else { return facts };
    let log = &histories[at];
    let Some(checkpoints) = compact_noting_request(&mut facts, &strategy, log, &model, Moment::BeforeRequest) else { return facts };
    let Some(cp) = checkpoints.iter().find(|cp| cp.window != Window::Inherit) else { return facts };
    facts.tokens_before = Some(cp.tokens_before);
    let mut after = log.clone();
    for cp in checkpoints.iter().cloned() {
        after.push_checkpoint(cp);
    }
    view_facts(&mut facts, &strategy.project(&after), cp);
    let files = cp.details["attachments"]["files"].as_array().map(|f| f.iter().filter_map(|f| f["path"].as_str()).map(|p| relative(p, work)).collect());
    facts.files = Some(sorted(files.unwrap_or_default()));
    facts
}

fn view_facts(facts: &mut Facts, view: &compactbench_core::View, cp: &Checkpoint) {
    let shown: Vec<&compactbench_core::ViewMessage> = view.messages.iter().skip_while(|m| m.message.role == Role::System).collect();
    let holder = shown.iter().position(|m| matches!(m.origin, Origin::Summary(_)));
    facts.summary_index = holder;
    facts.summary_role = cp.summary.as_ref().map(|s| s.role.as_str().to_owned());
    let mut kept = Vec::new();
    for m in &shown {
        match m.origin {
            Origin::Entry(_) | Origin::Replaced(..) => {
                for p in &m.message.parts {
                    match p {
                        Part::ToolCall { id, .. } => kept.push(format!("call:{id}")),
                        Part::ToolResult { call_id, .. } => kept.push(format!("result:{call_id}")),
                        Part::Text { text } if m.message.role == Role::Assistant => kept.push(format!("text:{}", start(text))),
                        _ => {}
                    }
                }
            }
            Origin::Injected(_) | Origin::Summary(_) => {}
        }
    }
    facts.kept = Some(kept);
}

/// Analyzes one Claude Code run.
pub fn claude_session(id: &str, run: &Run, work: &str) -> SessionResult {
    let mut result = SessionResult::of_run(id, run);
    if !run.records.iter().any(|r| r.kind == "main") {
        return result.no_request(run);
    }
    let (theirs, compacted) = theirs(run, work);
    result.ours = ours(run, compacted.as_ref(), work);
    result.theirs = theirs;
    result
}

// ---------------------------------------------------------------------------------------------
// Codex (OpenAI Responses items).

/// Our messages for Responses `input` items: developer messages as system messages, user and
/// assistant messages as they are, each run of function calls (with the assistant text before
/// it) as one assistant message, each run of outputs as one tool message; reasoning left out.
/// `usage` gives the usage reported for an assistant message, by its first call id or text.
pub fn responses_log(items: &[Value], usage: &dyn Fn(&str) -> Option<Usage>) -> Log {
    let mut log = Log::new();
    let mut names = std::collections::HashMap::new();
    let mut pending: Vec<Part> = Vec::new();
    let mut outputs: Vec<Part> = Vec::new();
    let flush_assistant = |log: &mut Log, pending: &mut Vec<Part>| {
        if pending.is_empty() {
            return;
        }
        let key = pending
            .iter()
            .find_map(|p| if let Part::ToolCall { id, .. } = p { Some(format!("call:{id}")) } else { None })
            .unwrap_or_else(|| format!("text:{}", pending.iter().filter_map(|p| if let Part::Text { text } = p { Some(text.as_str()) } else { None }).collect::<String>()));
        let mut m = Message::new(Role::Assistant, std::mem::take(pending));
        m.usage = usage(&key);
        log.push_message(m);
    };
    let flush_outputs = |log: &mut Log, outputs: &mut Vec<Part>| {
        if !outputs.is_empty() {
            log.push_message(Message::new(Role::Tool, std::mem::take(outputs)));
        }
    };
    for item in items {
        match (item["type"].as_str(), item["role"].as_str()) {
            (Some("function_call"), _) => {
                flush_outputs(&mut log, &mut outputs);
                let id = item["call_id"].as_str().unwrap_or("").to_owned();
                let name = item["name"].as_str().unwrap_or("").to_owned();
                names.insert(id.clone(), name.clone());
                let args = item["arguments"].as_str().and_then(|a| serde_json::from_str(a).ok()).unwrap_or(Value::Null);
                pending.push(Part::ToolCall { id, name, args });
            }
            (Some("function_call_output"), _) => {
                flush_assistant(&mut log, &mut pending);
                let call_id = item["call_id"].as_str().unwrap_or("").to_owned();
                let name = names.get(&call_id).cloned().unwrap_or_default();
                let text = item["output"].as_str().map_or_else(|| text_of(&item["output"]), str::to_owned);
                outputs.push(Part::ToolResult { call_id, name, text, is_error: false });
            }
            (Some("message"), Some("assistant")) => {
                flush_outputs(&mut log, &mut outputs);
                if pending.iter().any(|p| matches!(p, Part::ToolCall { .. })) {
                    flush_assistant(&mut log, &mut pending);
                }
                pending.push(Part::text(text_of(&item["content"])));
            }
            (Some("message"), Some(role)) => {
                flush_assistant(&mut log, &mut pending);
                flush_outputs(&mut log, &mut outputs);
                let role = if matches!(role, "developer" | "system") { Role::System } else { Role::User };
                log.push_message(Message::new(role, vec![Part::text(text_of(&item["content"]))]));
            }
            _ => {}
        }
    }
    flush_assistant(&mut log, &mut pending);
    flush_outputs(&mut log, &mut outputs);
    log
}

/// The key of a reply for [`responses_log`]: its first call id, else its text.
fn responses_reply_key(reply: &super::server::Reply) -> String {
    reply
        .blocks
        .iter()
        .find_map(|b| if let super::server::Block::Call { id, .. } = b { Some(format!("call:{id}")) } else { None })
        .unwrap_or_else(|| format!("text:{}", reply.blocks.iter().filter_map(|b| if let super::server::Block::Text(t) = b { Some(t.as_str()) } else { None }).collect::<String>()))
}

/// A real user message (not the contextual ones Codex writes in the user's name, which start
/// with a tag).
fn real_user(text: &str) -> bool {
    !text.trim_start().starts_with('<')
}

/// Kept items of Responses input items: calls, outputs, assistant text, real user messages.
fn responses_kept(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .filter_map(|item| match (item["type"].as_str(), item["role"].as_str()) {
            (Some("function_call"), _) => Some(format!("call:{}", item["call_id"].as_str().unwrap_or(""))),
            (Some("function_call_output"), _) => Some(format!("result:{}", item["call_id"].as_str().unwrap_or(""))),
            (Some("message"), Some("assistant")) => Some(format!("text:{}", start(&text_of(&item["content"])))),
            (Some("message"), Some("user")) => Some(text_of(&item["content"])).filter(|t| real_user(t)).map(|t| format!("user:{}", start(&t))),
            _ => None,
        })
        .collect()
}

/// The index of the item holding the summary among the items that are not developer messages.
fn responses_summary_index(items: &[Value]) -> Option<(usize, String)> {
    let shown: Vec<&Value> = items.iter().filter(|i| !(i["type"] == "message" && matches!(i["role"].as_str(), Some("developer" | "system")))).collect();
    shown.iter().position(|i| text_of(&i["content"]).contains(FIXED_SUMMARY)).map(|at| (at, shown[at]["role"].as_str().unwrap_or("?").to_owned()))
}

/// Our crate as the runs configure Codex.
pub fn codex_strategy() -> (compactbench_strategy_codex::CodexStrategy, ModelProfile) {
    let config = compactbench_strategy_codex::CodexConfig {
        model_auto_compact_token_limit: Some(super::CODEX_AUTO_COMPACT_LIMIT),
        remote: Some(false),
        ..compactbench_strategy_codex::CodexConfig::default()
    };
    let model = ModelProfile {
        name: super::CODEX_MODEL.into(),
        window: super::CODEX_CONTEXT_WINDOW,
        max_output: super::CODEX_MAX_OUTPUT,
        provider: Shape::OpenaiResponses,
        pricing: Default::default(),
    };
    (compactbench_strategy_codex::CodexStrategy::new(config), model)
}

/// The moment Codex checks at before a request with this input, and how much of the input it
/// has then: mid-turn after tool outputs (all of it); before a turn when the input ends with the
/// new user message (the items from that message on are not recorded yet); before a turn too
/// when it ends with the model's closing answer (a compaction request's history).
fn codex_moment(items: &[Value]) -> (Moment, usize) {
    let is_real_user = |i: &Value| i["type"] == "message" && i["role"] == "user" && real_user(&text_of(&i["content"]));
    match items.last() {
        Some(last) if last["type"] == "function_call_output" => (Moment::BeforeRequest, items.len()),
        Some(last) if last["type"] == "message" && last["role"] == "user" => {
            (Moment::TurnEnd, items.iter().rposition(is_real_user).unwrap_or(items.len()))
        }
        _ => (Moment::TurnEnd, items.len()),
    }
}

/// Analyzes one Codex run.
pub fn codex_session(id: &str, run: &Run) -> SessionResult {
    let mut result = SessionResult::of_run(id, run);
    let mains = run.mains_before_compaction();
    if mains.is_empty() {
        return result.no_request(run);
    }
    let input = |r: &Record| r.body["input"].as_array().cloned().unwrap_or_default();
    // Theirs.
    let compaction = run.records.iter().find(|r| r.kind == "compaction");
    let mut theirs = Facts::default();
    let mut compacted_history = None;
    if let Some(c) = compaction {
        theirs.compacted_at = Some(mains.len());
        let mut history = input(c);
        let instruction = history.pop().map(|i| text_of(&i["content"])).unwrap_or_default();
        theirs.instruction = Some(instruction_kind(&instruction));
        let previous = mains.last().map(|p| input(p));
        theirs.prefix_reused = Some(previous.is_none_or(|p| {
            let before: Vec<Value> = p[..p.len().saturating_sub(1)].iter().map(uncached).collect();
            history.iter().map(uncached).collect::<Vec<_>>().starts_with(&before)
        }));
        if let Some(after) = run.records.iter().find(|r| r.kind == "after_compaction") {
            let items = input(after);
            if let Some((at, role)) = responses_summary_index(&items) {
                theirs.summary_index = Some(at);
                theirs.summary_role = Some(role);
            }
            // Kept: what the next request has of the history it compacted (not the summary, not
            // a new turn's message), item ids aside.
            let plain = |i: &Value| {
                let mut i = uncached(i);
                if let Some(map) = i.as_object_mut() {
                    map.remove("id");
                }
                i
            };
            let before: Vec<Value> = history.iter().map(plain).collect();
            let others: Vec<Value> = items.iter().filter(|i| before.contains(&plain(i))).cloned().collect();
            theirs.kept = Some(responses_kept(&others));
        }
        compacted_history = Some(history);
    }
    // Ours.
    let (strategy, model) = codex_strategy();
    let reported: std::collections::HashMap<String, Usage> = mains.iter().map(|r| (responses_reply_key(&r.reply), usage_of(r))).collect();
    let usage = |key: &str| reported.get(key).copied();
    let mut ours = Facts::default();
    let mut histories: Vec<Vec<Value>> = mains.iter().map(|r| input(r)).collect();
    histories.extend(compacted_history);
    let checks: Vec<(Log, Moment)> = histories
        .iter()
        .map(|items| {
            let (moment, end) = codex_moment(items);
            (responses_log(&items[..end], &usage), moment)
        })
        .collect();
    ours.compacted_at = checks.iter().position(|(log, moment)| {
        let view = strategy.project(log);
        let mut store = VirtualStore::new();
        let cx = Cx::new(&model, &FixedSummarizer, &mut store, tokenizer());
        matches!(strategy.decide(log, &view, *moment, &cx), Decision::Compact { .. })
    });
    if let Some(at) = ours.compacted_at {
        let (log, moment) = &checks[at];
        if let Some(checkpoints) = compact_noting_request(&mut ours, &strategy, log, &model, *moment) {
            let mut after = log.clone();
            for cp in checkpoints {
                after.push_checkpoint(cp);
            }
            let view = strategy.project(&after);
            let shown: Vec<&compactbench_core::ViewMessage> = view.messages.iter().filter(|m| m.message.role != Role::System).collect();
            if let Some(at) = shown.iter().position(|m| m.message.text().contains(FIXED_SUMMARY)) {
                ours.summary_index = Some(at);
                ours.summary_role = Some(shown[at].message.role.as_str().to_owned());
            }
            let mut kept = Vec::new();
            for m in shown.iter().filter(|m| matches!(m.origin, Origin::Entry(_) | Origin::Replaced(..))) {
                for p in &m.message.parts {
                    match p {
                        Part::ToolCall { id, .. } => kept.push(format!("call:{id}")),
                        Part::ToolResult { call_id, .. } => kept.push(format!("result:{call_id}")),
                        Part::Text { text } if m.message.role == Role::Assistant => kept.push(format!("text:{}", start(text))),
                        Part::Text { text } if m.message.role == Role::User && real_user(text) => kept.push(format!("user:{}", start(text))),
                        _ => {}
                    }
                }
            }
            ours.kept = Some(kept);
        }
    }
    result.theirs = theirs;
    result.ours = ours;
    result
}

// ---------------------------------------------------------------------------------------------
// OpenCode (Anthropic Messages through its bundled `anthropic` provider).

/// The auto-continue message OpenCode appends after an automatic compaction (its start).
const OPENCODE_CONTINUE: &str = "Continue if you have next steps";

/// What a pruned tool output reads in OpenCode's requests.
const OPENCODE_CLEARED: &str = "[Old tool result content cleared]";

/// A kept tool result as every CLI but OpenCode shows it: `result:ID`.
fn plain_result(call_id: &str, _text: &str) -> String {
    format!("result:{call_id}")
}

/// A kept tool result of OpenCode: `result:ID`, or `cleared:ID` when prune replaced its output.
fn kept_result(call_id: &str, text: &str) -> String {
    if text == OPENCODE_CLEARED {
        format!("cleared:{call_id}")
    } else {
        format!("result:{call_id}")
    }
}

/// Kept items of OpenCode's Anthropic messages: tool calls and results (pruned ones as
/// `cleared:ID`), assistant text, and the user's own messages (`user:START`; not the
/// auto-continue message, which both sides add anew).
fn opencode_kept(messages: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for m in messages {
        let blocks = match &m["content"] {
            Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
            Value::Array(b) => b.clone(),
            _ => Vec::new(),
        };
        for b in &blocks {
            match (b["type"].as_str(), m["role"].as_str()) {
                (Some("tool_use"), _) => out.push(format!("call:{}", b["id"].as_str().unwrap_or(""))),
                (Some("tool_result"), _) => out.push(kept_result(b["tool_use_id"].as_str().unwrap_or(""), &text_of(&b["content"]))),
                (Some("text"), Some("assistant")) => out.push(format!("text:{}", start(b["text"].as_str().unwrap_or("")))),
                (Some("text"), Some("user")) => {
                    let text = b["text"].as_str().unwrap_or("");
                    if !text.starts_with(OPENCODE_CONTINUE) {
                        out.push(format!("user:{}", start(text)));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The reply the CLI compacted after as Anthropic messages: the assistant message, and the user
/// message with its tool results as OpenCode's `tool_use` events report them (the output its
/// next request sends, or the error of a failed call).
fn opencode_last_round(run: &Run, reply: &super::server::Reply) -> Vec<Value> {
    let mut content = Vec::new();
    let mut results = Vec::new();
    for b in &reply.blocks {
        match b {
            super::server::Block::Text(t) => content.push(serde_json::json!({"type": "text", "text": t})),
            super::server::Block::Call { id, name, input } => {
                content.push(serde_json::json!({"type": "tool_use", "id": id, "name": name, "input": input}));
                let part = run.tools.iter().map(|e| &e["part"]).find(|p| p["callID"] == id.as_str());
                let state = part.map(|p| &p["state"]);
                let (text, is_error) = match state.and_then(|s| s["status"].as_str()) {
                    Some("error") => (state.and_then(|s| s["error"].as_str()).unwrap_or(""), true),
                    _ => (state.and_then(|s| s["output"].as_str()).unwrap_or(""), false),
                };
                results.push(serde_json::json!({"type": "tool_result", "tool_use_id": id, "content": text, "is_error": is_error}));
            }
        }
    }
    let mut out = vec![serde_json::json!({"role": "assistant", "content": content})];
    if !results.is_empty() {
        out.push(serde_json::json!({"role": "user", "content": results}));
    }
    out
}

/// Our crate as the runs configure OpenCode: the defaults (auto on, prune off) and the model's
/// limits.
pub fn opencode_strategy() -> (compactbench_strategy_opencode_v1::OpencodeV1Strategy, ModelProfile) {
    let model = ModelProfile {
        name: super::OPENCODE_MODEL.into(),
        window: super::OPENCODE_CONTEXT,
        max_output: super::OPENCODE_OUTPUT,
        provider: Shape::Anthropic,
        pricing: Default::default(),
    };
    (compactbench_strategy_opencode_v1::OpencodeV1Strategy::new(Default::default()), model)
}

/// Analyzes one OpenCode run. The CLI checks the usage of each finished reply before it goes
/// on, so the history it compacted is its last main request's messages and that request's
/// reply with the reply's tool results; our crate is asked on each main request's history and
/// on that one.
pub fn opencode_session(id: &str, run: &Run) -> SessionResult {
    let mut result = SessionResult::of_run(id, run);
    let mains = run.mains_before_compaction();
    let Some(last) = mains.last() else {
        return result.no_request(run);
    };
    let messages = |r: &Record| r.body["messages"].as_array().cloned().unwrap_or_default();
    // Theirs.
    let compaction = run.records.iter().find(|r| r.kind == "compaction");
    let mut theirs = Facts::default();
    if let Some(c) = compaction {
        theirs.compacted_at = Some(mains.len());
        let request = messages(c);
        theirs.instruction = request.last().map(|m| instruction_kind(&text_of(&m["content"])));
        let before: Vec<Value> = messages(last).iter().map(uncached).collect();
        let sent: Vec<Value> = request.iter().map(uncached).collect();
        theirs.prefix_reused = Some(
            uncached(&last.body["system"]) == uncached(&c.body["system"]) && last.body["tools"] == c.body["tools"] && sent.starts_with(&before[..before.len().saturating_sub(1)]),
        );
        if let Some(after) = run.records.iter().find(|r| r.kind == "after_compaction") {
            let shown = messages(after);
            let holder = shown.iter().position(|m| text_of(&m["content"]).contains(FIXED_SUMMARY));
            theirs.summary_index = holder;
            theirs.summary_role = holder.map(|i| shown[i]["role"].as_str().unwrap_or("?").to_owned());
            // The provider merges consecutive assistant messages: a tail that starts at an
            // assistant message shares the summary's message, after the summary's text.
            let mut tail: Vec<Value> = holder
                .and_then(|i| shown[i]["content"].as_array().map(|blocks| (i, blocks)))
                .map(|(i, blocks)| {
                    let rest: Vec<Value> = blocks.iter().skip_while(|b| !b["text"].as_str().is_some_and(|t| t.contains(FIXED_SUMMARY))).skip(1).cloned().collect();
                    serde_json::json!({"role": shown[i]["role"], "content": rest})
                })
                .into_iter()
                .collect();
            tail.extend(shown[holder.map_or(0, |i| i + 1)..].iter().cloned());
            theirs.kept = Some(opencode_kept(&tail));
        }
    }
    // The history after the last main request's reply: the one the CLI compacted, or the one it
    // went on from without compacting.
    let mut latest = messages(last);
    latest.extend(opencode_last_round(run, &last.reply));
    // Ours.
    let (strategy, model) = opencode_strategy();
    let reported = reported_usage(&mains);
    let usage = |m: &Value| m["content"].as_array().and_then(|b| reported.get(&reply_key(b)).copied());
    let mut histories: Vec<Log> = mains.iter().map(|r| to_log(&r.body["system"], &messages(r), &usage)).collect();
    histories.push(to_log(&last.body["system"], &latest, &usage));
    let mut ours = Facts { compacted_at: histories.iter().position(|log| fires(&strategy, log, &model)), ..Facts::default() };
    if let Some(at) = ours.compacted_at {
        let log = &histories[at];
        if let Some(checkpoints) = compact_noting_request(&mut ours, &strategy, log, &model, Moment::BeforeRequest) {
            summary_and_kept(&mut ours, &strategy, log, &checkpoints, &|_| true, &kept_result);
        }
    }
    result.theirs = theirs;
    result.ours = ours;
    result
}

// ---------------------------------------------------------------------------------------------
// Gemini CLI (Gemini API contents).

/// How Gemini CLI's first history entry starts: the environment and directory listing it puts
/// before the first prompt (`getInitialChatHistory`) and lays out anew after a compression, so
/// never a kept message.
const GEMINI_SESSION_CONTEXT: &str = "<session_context>";

/// The model entry Gemini CLI puts after the summary in a compressed history (both sides add it
/// anew: not kept).
const GEMINI_ACK: &str = "Got it. Thanks for the additional context!";

/// A call id as the session gave it: in the histories Gemini CLI rebuilds from its session file
/// (on `--resume`, and in the compression requests) the scheduler's ids carry the tool's name as
/// a prefix (`read_file__call_cb0001`).
fn gemini_id(id: &str, name: &str) -> String {
    id.strip_prefix(&format!("{name}__")).unwrap_or(id).to_owned()
}

/// The text of a tool response and whether it is an error: `{output}` or `{error}` as a
/// string, anything else as its JSON.
fn gemini_response_text(response: &Value) -> (String, bool) {
    match (&response["output"], &response["error"]) {
        (Value::String(s), _) => (s.clone(), false),
        (Value::Null, Value::String(s)) => (s.clone(), true),
        (Value::Null, Value::Null) => (response.to_string(), false),
        (Value::Null, other) => (other.to_string(), true),
        (other, _) => (other.to_string(), false),
    }
}

/// The key of a model content for [`responses_reply_key`]'s map: its first call id, else its
/// text (thoughts aside).
fn gemini_content_key(content: &Value) -> String {
    let parts = content["parts"].as_array().map_or(&[][..], |p| p);
    parts
        .iter()
        .find_map(|p| p.get("functionCall").map(|c| format!("call:{}", gemini_id(c["id"].as_str().unwrap_or(""), c["name"].as_str().unwrap_or("")))))
        .unwrap_or_else(|| format!("text:{}", parts.iter().filter(|p| p["thought"] != true).filter_map(|p| p["text"].as_str()).collect::<String>()))
}

/// Our log for a Gemini request's system instruction and contents: a model content is an
/// assistant message (thoughts as reasoning; `usage` gives the usage reported for it, if any), a
/// user content a user message of its text parts, then a tool message of its function responses.
pub fn gemini_log(system: &Value, contents: &[Value], usage: &dyn Fn(&Value) -> Option<Usage>) -> Log {
    let mut log = Log::new();
    let system = text_of(&system["parts"]);
    if !system.is_empty() {
        log.push_message(Message::system(system));
    }
    for content in contents {
        let parts = content["parts"].as_array().map_or(&[][..], |p| p);
        if content["role"] == "model" {
            let converted: Vec<Part> = parts
                .iter()
                .filter_map(|p| {
                    if let Some(call) = p.get("functionCall") {
                        let name = call["name"].as_str().unwrap_or("").to_owned();
                        Some(Part::ToolCall { id: gemini_id(call["id"].as_str().unwrap_or(""), &name), name, args: call["args"].clone() })
                    } else if p["thought"] == true {
                        Some(Part::Reasoning { text: p["text"].as_str().unwrap_or("").into() })
                    } else {
                        p["text"].as_str().map(Part::text)
                    }
                })
                .collect();
            let mut m = Message::new(Role::Assistant, converted);
            m.usage = usage(content);
            log.push_message(m);
            continue;
        }
        let texts: Vec<Part> = parts.iter().filter_map(|p| p["text"].as_str()).map(Part::text).collect();
        let results: Vec<Part> = parts
            .iter()
            .filter_map(|p| p.get("functionResponse"))
            .map(|r| {
                let name = r["name"].as_str().unwrap_or("").to_owned();
                let (text, is_error) = gemini_response_text(&r["response"]);
                Part::ToolResult { call_id: gemini_id(r["id"].as_str().unwrap_or(""), &name), name, text, is_error }
            })
            .collect();
        if !texts.is_empty() {
            log.push_message(Message::new(Role::User, texts));
        }
        if !results.is_empty() {
            log.push_message(Message::new(Role::Tool, results));
        }
    }
    log
}

/// The content a reply becomes in the history (the model's side).
fn gemini_reply_content(reply: &super::server::Reply) -> Value {
    let parts: Vec<Value> = reply
        .blocks
        .iter()
        .map(|b| match b {
            super::server::Block::Text(t) => serde_json::json!({"text": t}),
            super::server::Block::Call { id, name, input } => serde_json::json!({"functionCall": {"id": id, "name": name, "args": input}}),
        })
        .collect();
    serde_json::json!({"role": "model", "parts": parts})
}

/// Whether a request starts a turn (its last content a user message, not function responses):
/// with one process per turn, the first request of a process.
fn gemini_starts_turn(contents: &[Value]) -> bool {
    contents.last().is_some_and(|c| {
        c["role"] == "user" && !c["parts"].as_array().is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some()))
    })
}

/// A user text that is the user's own (not the session context, not the summary).
fn gemini_user_text(text: &str) -> bool {
    !text.trim_start().starts_with(GEMINI_SESSION_CONTEXT) && !text.contains(FIXED_SUMMARY)
}

/// Kept items of Gemini contents: calls, responses, model text (not the acknowledgement) and the
/// user's own text.
fn gemini_kept(contents: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for c in contents {
        for p in c["parts"].as_array().map_or(&[][..], |p| p) {
            if let Some(call) = p.get("functionCall") {
                out.push(format!("call:{}", gemini_id(call["id"].as_str().unwrap_or(""), call["name"].as_str().unwrap_or(""))));
            } else if let Some(r) = p.get("functionResponse") {
                out.push(format!("result:{}", gemini_id(r["id"].as_str().unwrap_or(""), r["name"].as_str().unwrap_or(""))));
            } else if let Some(text) = p["text"].as_str().filter(|_| p["thought"] != true) {
                match c["role"].as_str() {
                    Some("model") if text != GEMINI_ACK => out.push(format!("text:{}", start(text))),
                    Some("user") if gemini_user_text(text) => out.push(format!("user:{}", start(text))),
                    _ => {}
                }
            }
        }
    }
    out
}

/// What a compression call asks for: `snapshot` (a new `<state_snapshot>`), `snapshot-update`
/// (one integrating a previous snapshot), `verify` (the check of the draft).
fn snapshot_kind(text: &str) -> &'static str {
    let lower = text.to_lowercase();
    if !lower.contains("<state_snapshot>") {
        "other"
    } else if lower.contains("critically") {
        "verify"
    } else if lower.contains("previous <state_snapshot>") || lower.contains("already contains a <state_snapshot>") {
        "snapshot-update"
    } else {
        "snapshot"
    }
}

/// Our crate as the runs configure Gemini CLI: the defaults, and the token limit of the model the
/// runs name as the window.
pub fn gemini_strategy() -> (compactbench_strategy_gemini_cli::GeminiCliStrategy, ModelProfile) {
    let model = ModelProfile {
        name: super::GEMINI_MODEL.into(),
        window: super::GEMINI_TOKEN_LIMIT,
        max_output: super::GEMINI_MAX_OUTPUT,
        provider: Shape::Gemini,
        pricing: Default::default(),
    };
    (compactbench_strategy_gemini_cli::GeminiCliStrategy::new(Default::default()), model)
}

/// Our compression before one request: its checkpoints, and how the summarizer was asked (each
/// call's context and instructions).
struct Compression {
    checkpoints: Vec<Checkpoint>,
    asked: Vec<(SummaryContext, String)>,
}

/// Our compression of `log` before a request, if our crate compresses there (it may also only
/// cut or mask tool outputs, which sends no summary request).
fn gemini_compression(strategy: &dyn Strategy, log: &Log, model: &ModelProfile) -> Option<Compression> {
    if !fires(strategy, log, model) {
        return None;
    }
    let view = strategy.project(log);
    let recording = Recording::default();
    let mut store = VirtualStore::new();
    let mut cx = Cx::new(model, &recording, &mut store, tokenizer());
    let checkpoints = strategy.compact(log, &view, Moment::BeforeRequest, &mut cx).ok()?;
    let asked = recording.asked.into_inner().expect("recording");
    (!asked.is_empty()).then_some(Compression { checkpoints, asked })
}

/// Analyzes one Gemini CLI run. Gemini CLI checks before every request (`processTurn`) against
/// `lastPromptTokenCount`: the usage reported for the newest reply of the running process, or,
/// in a process that has not had a reply yet (each turn's first request, one process per turn),
/// its local estimate of the resumed history. So our crate is asked on each main request's
/// history with the reported usage on its assistant messages, but on a turn's first request
/// with none (our crate then estimates the history as the CLI does); and on the history the CLI
/// compressed: its last main request's contents, that request's reply and the function
/// responses the request after the compression sends.
pub fn gemini_session(id: &str, run: &Run, _work: &str) -> SessionResult {
    let mut result = SessionResult::of_run(id, run);
    let first_compaction = run.records.iter().position(|r| r.kind == "compaction");
    let mains = run.mains_before_compaction();
    let Some(last) = mains.last() else {
        return result.no_request(run);
    };
    let contents = |r: &Record| r.body["contents"].as_array().cloned().unwrap_or_default();
    let after = run.records.iter().find(|r| r.kind == "after_compaction");
    // Theirs.
    let mut theirs = Facts::default();
    if let Some(at) = first_compaction {
        let calls: Vec<&Record> = run.records[at..].iter().take_while(|r| r.kind == "compaction").collect();
        theirs.compacted_at = Some(mains.len());
        theirs.tokens_before = run.boundaries.first().and_then(|b| b["tokens_before"].as_u64());
        theirs.instruction = Some(calls.iter().map(|c| snapshot_kind(&last_message_text(Wire::Gemini, &c.body))).collect::<Vec<_>>().join(" + "));
        let before = contents(last);
        let sent = contents(calls[0]);
        theirs.prefix_reused = Some(
            last.body["systemInstruction"] == calls[0].body["systemInstruction"]
                && last.body["tools"] == calls[0].body["tools"]
                && sent.starts_with(&before[..before.len().saturating_sub(1)]),
        );
        if let Some(after) = after {
            let shown = contents(after);
            let holder = shown.iter().position(|c| text_of(&c["parts"]).contains(FIXED_SUMMARY));
            theirs.summary_index = holder;
            theirs.summary_role = holder.map(|i| if shown[i]["role"] == "model" { "assistant" } else { "user" }.to_owned());
            theirs.kept = Some(gemini_kept(&shown[holder.map_or(0, |i| i + 1)..]));
        }
    }
    // Ours.
    let (strategy, model) = gemini_strategy();
    let reported: std::collections::HashMap<String, Usage> = mains.iter().map(|r| (responses_reply_key(&r.reply), usage_of(r))).collect();
    let usage = |c: &Value| reported.get(&gemini_content_key(c)).copied();
    let none = |_: &Value| None;
    let log_of = |system: &Value, contents: &[Value]| {
        let usage: &dyn Fn(&Value) -> Option<Usage> = if gemini_starts_turn(contents) { &none } else { &usage };
        gemini_log(system, contents, usage)
    };
    let mut histories: Vec<Log> = mains.iter().map(|r| log_of(&r.body["systemInstruction"], &contents(r))).collect();
    if let (Some(_), Some(after)) = (first_compaction, after) {
        let mut compressed = contents(last);
        compressed.push(gemini_reply_content(&last.reply));
        compressed.extend(contents(after).last().cloned());
        histories.push(log_of(&last.body["systemInstruction"], &compressed));
    }
    let mut ours = Facts::default();
    let found = histories.iter().enumerate().find_map(|(i, log)| gemini_compression(&strategy, log, &model).map(|c| (i, log, c)));
    if let Some((at, log, Compression { checkpoints, asked })) = found {
        ours.compacted_at = Some(at);
        ours.prefix_reused = asked.first().map(|(context, _)| context.reuses_prefix());
        ours.instruction = Some(asked.iter().map(|(_, instructions)| snapshot_kind(instructions)).collect::<Vec<_>>().join(" + "));
        if let Some(cp) = checkpoints.iter().find(|cp| cp.summary.is_some()) {
            ours.tokens_before = theirs.tokens_before.and(Some(cp.tokens_before));
            summary_and_kept(&mut ours, &strategy, log, &checkpoints, &gemini_user_text, &plain_result);
        }
    }
    result.theirs = theirs;
    result.ours = ours;
    result
}

/// Our summary placement and kept items after `checkpoints` are appended to `log`: the summary
/// message's role and index among the non-system messages of the new view, and what follows it
/// as the log has it (calls, results as `result` names them from their call id and text,
/// assistant text and the user texts `user_text` takes for the user's own).
fn summary_and_kept(
    facts: &mut Facts,
    strategy: &dyn Strategy,
    log: &Log,
    checkpoints: &[Checkpoint],
    user_text: &dyn Fn(&str) -> bool,
    result: &dyn Fn(&str, &str) -> String,
) {
    let mut after = log.clone();
    for cp in checkpoints.iter().cloned() {
        after.push_checkpoint(cp);
    }
    let view = strategy.project(&after);
    let shown: Vec<&compactbench_core::ViewMessage> = view.messages.iter().filter(|m| m.message.role != Role::System).collect();
    let holder = shown.iter().position(|m| matches!(m.origin, Origin::Summary(_)));
    facts.summary_index = holder;
    facts.summary_role = holder.map(|i| shown[i].message.role.as_str().to_owned());
    let mut kept = Vec::new();
    for m in shown.iter().skip(holder.map_or(0, |i| i + 1)).filter(|m| matches!(m.origin, Origin::Entry(_) | Origin::Replaced(..))) {
        for p in &m.message.parts {
            match p {
                Part::ToolCall { id, .. } => kept.push(format!("call:{id}")),
                Part::ToolResult { call_id, text, .. } => kept.push(result(call_id, text)),
                Part::Text { text } if m.message.role == Role::Assistant => kept.push(format!("text:{}", start(text))),
                Part::Text { text } if m.message.role == Role::User && user_text(text) => kept.push(format!("user:{}", start(text))),
                _ => {}
            }
        }
    }
    facts.kept = Some(kept);
}

// ---------------------------------------------------------------------------------------------
// Chat Completions (Kimi CLI, Cline CLI).

/// How one Chat Completions CLI is analysed: our crate as its runs configure it, and what the
/// CLI carries from one turn's process to the next.
pub struct ChatCli {
    strategy: Box<dyn Strategy>,
    model: ModelProfile,
    /// A turn's first request is asked with the usage reported before it: Kimi CLI restores its
    /// counter from its context file in a new process; a Cline run starts with no previous
    /// input count.
    turn_start_usage: bool,
    /// The CLI keeps each tool result whole while its requests send it cut (Cline: at 8,000
    /// characters a string): our log gets the whole output of the run's tool events instead.
    whole_results: bool,
}

/// Our crate as the runs configure Kimi CLI: the `[loop_control]` defaults and the model's
/// `max_context_size` as the window.
pub fn kimi_chat() -> ChatCli {
    let model = ModelProfile { name: super::KIMI_MODEL.into(), window: super::KIMI_CONTEXT, max_output: super::KIMI_MAX_OUTPUT, provider: Shape::OpenaiChat, pricing: Default::default() };
    // The runs' provider is not Kimi's own platform: no output cap of Kimi's is applied.
    let config = compactbench_strategy_kimi_cli::KimiCliConfig { kimi_provider: false, ..Default::default() };
    ChatCli { strategy: Box::new(compactbench_strategy_kimi_cli::KimiCliStrategy::new(config)), model, turn_start_usage: true, whole_results: false }
}

/// Our crate as the runs configure Cline: the SDK's defaults (the CLI's tool definitions, the
/// window as the input limit), the model's `contextWindow` and `maxTokens`; the model is
/// configured in the provider settings, not taken from the CLI's catalog, so its model info has
/// no `maxTokens`.
pub fn cline_chat() -> ChatCli {
    let model = ModelProfile { name: super::CLINE_MODEL.into(), window: super::CLINE_CONTEXT, max_output: super::CLINE_MAX_TOKENS, provider: Shape::OpenaiChat, pricing: Default::default() };
    let config = compactbench_strategy_cline::SdkConfig { max_tokens_in_model_info: false, ..Default::default() };
    ChatCli { strategy: Box::new(compactbench_strategy_cline::SdkStrategy::new(config)), model, turn_start_usage: false, whole_results: true }
}

/// The text parts of a Chat Completions content (a string, or `text` parts), in order.
fn chat_texts(content: &Value) -> Vec<String> {
    match content {
        Value::String(s) => vec![s.clone()],
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}

/// A call id and name of a `tool_calls` entry.
fn chat_call(call: &Value) -> (String, String) {
    (call["id"].as_str().unwrap_or("").to_owned(), call["function"]["name"].as_str().unwrap_or("").to_owned())
}

/// What identifies an assistant message in the history (and a reply, [`chat_reply_key`]): its
/// first call id, else its text.
fn chat_key(message: &Value) -> String {
    message["tool_calls"]
        .as_array()
        .and_then(|calls| calls.first())
        .map(|c| format!("call:{}", chat_call(c).0))
        .unwrap_or_else(|| format!("text:{}", chat_texts(&message["content"]).concat()))
}

fn chat_reply_key(reply: &super::server::Reply) -> String {
    chat_key(&chat_reply_message(reply))
}

/// The assistant message a reply becomes in the history, as the server sent it.
fn chat_reply_message(reply: &super::server::Reply) -> Value {
    super::server::chat_completion(reply, "", 0)["choices"][0]["message"].clone()
}

/// Our log for Chat Completions messages: system messages as system, user messages of their
/// text parts, assistant messages with their calls (`usage` gives the usage reported for one,
/// if any), each run of tool messages as one tool message (its text parts joined as they are).
pub fn chat_log(messages: &[Value], usage: &dyn Fn(&Value) -> Option<Usage>) -> Log {
    let mut log = Log::new();
    let mut names = std::collections::HashMap::new();
    let mut results: Vec<Part> = Vec::new();
    for m in messages {
        if m["role"] != "tool" && !results.is_empty() {
            log.push_message(Message::new(Role::Tool, std::mem::take(&mut results)));
        }
        let texts = chat_texts(&m["content"]);
        match m["role"].as_str() {
            Some("tool") => {
                let call_id = m["tool_call_id"].as_str().unwrap_or("").to_owned();
                let name = names.get(&call_id).cloned().unwrap_or_default();
                results.push(Part::ToolResult { call_id, name, text: texts.concat(), is_error: false });
            }
            Some("assistant") => {
                let mut parts: Vec<Part> = texts.iter().filter(|t| !t.is_empty()).map(|t| Part::text(t.as_str())).collect();
                for call in m["tool_calls"].as_array().map_or(&[][..], |c| c) {
                    let (id, name) = chat_call(call);
                    names.insert(id.clone(), name.clone());
                    let args = call["function"]["arguments"].as_str().and_then(|a| serde_json::from_str(a).ok()).unwrap_or(Value::Null);
                    parts.push(Part::ToolCall { id, name, args });
                }
                let mut message = Message::new(Role::Assistant, parts);
                message.usage = usage(m);
                log.push_message(message);
            }
            Some("system") | Some("developer") => {
                log.push_message(Message::system(texts.concat()));
            }
            _ => {
                log.push_message(Message::new(Role::User, texts.iter().map(|t| Part::text(t.as_str())).collect()));
            }
        }
    }
    if !results.is_empty() {
        log.push_message(Message::new(Role::Tool, results));
    }
    log
}

/// A user text that is the user's own: not the summary, not a tag the CLI writes in the user's
/// name (Kimi's `<system>` notes).
fn chat_user_text(text: &str) -> bool {
    !text.contains(FIXED_SUMMARY) && !text.trim_start().starts_with('<')
}

/// Kept items of Chat Completions messages: calls, results, assistant text, the user's own text.
fn chat_kept(messages: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for m in messages {
        match m["role"].as_str() {
            Some("tool") => out.push(format!("result:{}", m["tool_call_id"].as_str().unwrap_or(""))),
            Some("assistant") => {
                out.extend(chat_texts(&m["content"]).iter().filter(|t| !t.is_empty()).map(|t| format!("text:{}", start(t))));
                out.extend(m["tool_calls"].as_array().map_or(&[][..], |c| c).iter().map(|c| format!("call:{}", chat_call(c).0)));
            }
            Some("user") => out.extend(chat_texts(&m["content"]).iter().filter(|t| chat_user_text(t)).map(|t| format!("user:{}", start(t)))),
            _ => {}
        }
    }
    out
}

/// Whether a request starts a turn (its last message the user's, not tool results).
fn chat_starts_turn(messages: &[Value]) -> bool {
    messages.last().is_some_and(|m| m["role"] == "user")
}

/// Analyzes one run of a Chat Completions CLI. The CLI checks before every model request, so
/// our crate is asked on each main request's messages (the reported usage on its assistant
/// messages; none on a turn's first request where the CLI carries none over), and on the
/// history the CLI compacted: its last main request's messages, that request's reply and what
/// the request after the compaction sends after its last assistant message (the reply's results,
/// or a new turn's user message).
pub fn chat_session(id: &str, run: &Run, cli: &ChatCli) -> SessionResult {
    let mut result = SessionResult::of_run(id, run);
    let first_compaction = run.records.iter().position(|r| r.kind == "compaction");
    let mains = run.mains_before_compaction();
    let Some(last) = mains.last() else {
        return result.no_request(run);
    };
    let messages = |r: &Record| r.body["messages"].as_array().cloned().unwrap_or_default();
    let non_system = |all: Vec<Value>| all.into_iter().filter(|m| !matches!(m["role"].as_str(), Some("system" | "developer"))).collect::<Vec<_>>();
    let after = run.records.iter().find(|r| r.kind == "after_compaction");
    // Theirs.
    let mut theirs = Facts::default();
    if let Some(at) = first_compaction {
        let compaction = &run.records[at];
        theirs.compacted_at = Some(mains.len());
        // Cline's compaction summary's own `tokensBefore` (Kimi CLI states none).
        theirs.tokens_before = run.boundaries.first().and_then(|b| b["tokensBefore"].as_u64());
        theirs.instruction = Some(instruction_kind(&super::run::compaction_text(Wire::Chat, &compaction.body)));
        let before = messages(last);
        theirs.prefix_reused =
            Some(last.body["tools"] == compaction.body["tools"] && messages(compaction).starts_with(&before[..before.len().saturating_sub(1)]));
        if let Some(after) = after {
            let shown = non_system(messages(after));
            let holder = shown.iter().position(|m| chat_texts(&m["content"]).concat().contains(FIXED_SUMMARY));
            theirs.summary_index = holder;
            theirs.summary_role = holder.map(|i| shown[i]["role"].as_str().unwrap_or("?").to_owned());
            // Kimi sends adjacent user messages as one (`normalize_history`): a kept user
            // message right after the summary shares its message on the wire, as parts after it.
            let mut kept: Vec<String> = holder
                .map(|i| chat_texts(&shown[i]["content"]).into_iter().skip_while(|t| !t.contains(FIXED_SUMMARY)).skip(1).collect::<Vec<_>>())
                .unwrap_or_default()
                .iter()
                .filter(|t| chat_user_text(t))
                .map(|t| format!("user:{}", start(t)))
                .collect();
            kept.extend(chat_kept(&shown[holder.map_or(0, |i| i + 1)..]));
            theirs.kept = Some(kept);
        }
    }
    // Ours.
    let reported: std::collections::HashMap<String, Usage> = mains.iter().map(|r| (chat_reply_key(&r.reply), usage_of(r))).collect();
    let usage = |m: &Value| reported.get(&chat_key(m)).copied();
    let none = |_: &Value| None;
    // Cline's tool events: each call's whole output, as its JSON text (what the wire sends uncut).
    let whole: std::collections::HashMap<&str, String> = if cli.whole_results {
        run.tools.iter().filter_map(|t| Some((t["toolCallId"].as_str()?, serde_json::to_string(&t["output"]).ok()?))).collect()
    } else {
        Default::default()
    };
    let log_of = |all: &[Value]| {
        let usage: &dyn Fn(&Value) -> Option<Usage> = if cli.turn_start_usage || !chat_starts_turn(all) { &usage } else { &none };
        let mut all = all.to_vec();
        for m in all.iter_mut().filter(|m| m["role"] == "tool") {
            if let Some(text) = m["tool_call_id"].as_str().and_then(|id| whole.get(id)) {
                m["content"] = Value::String(text.clone());
            }
        }
        chat_log(&all, usage)
    };
    let mut histories: Vec<Log> = mains.iter().map(|r| log_of(&messages(r))).collect();
    if let (Some(_), Some(after)) = (first_compaction, after) {
        let mut compacted = messages(last);
        compacted.push(chat_reply_message(&last.reply));
        let sent = messages(after);
        let newer = sent.iter().rposition(|m| m["role"] == "assistant").map_or(sent.len(), |i| i + 1);
        compacted.extend(sent[newer..].iter().cloned());
        histories.push(log_of(&compacted));
    }
    let mut ours = Facts::default();
    let strategy = cli.strategy.as_ref();
    if let Some(at) = histories.iter().position(|log| fires(strategy, log, &cli.model)) {
        ours.compacted_at = Some(at);
        let log = &histories[at];
        if let Some(checkpoints) = compact_noting_request(&mut ours, strategy, log, &cli.model, Moment::BeforeRequest) {
            if let Some(cp) = checkpoints.iter().find(|cp| cp.summary.is_some()) {
                ours.tokens_before = theirs.tokens_before.and(Some(cp.tokens_before));
                summary_and_kept(&mut ours, strategy, log, &checkpoints, &chat_user_text, &plain_result);
            }
        }
    }
    result.theirs = theirs;
    result.ours = ours;
    result
}
