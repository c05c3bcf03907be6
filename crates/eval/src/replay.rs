//! Real transcripts as sessions: imported messages become steps, and probes are mined from
//! them by a fixed, documented rule (no fact is planted; the session is what it was).
//!
//! Mining rules, in session order, each fact taken at its first occurrence:
//! - **error_message**: for every failed tool result (`is_error`), its first line containing
//!   "error" (any case), else its first non-empty line, if 12–200 characters long. Needed until
//!   the next successful result of a call with the same tool name and arguments (the same
//!   command succeeding), else to the end.
//! - **user_constraint**: every sentence (split at `.`, `!`, `?` and newlines) of a user message
//!   that contains "do not", "don't", "never", "must", "always", "make sure" or "avoid"
//!   (any case), 20–200 characters long. Needed to the end.
//! - **file_path**: every path a write or edit call names (by [`tool_kind`]). Needed to the
//!   end (the artifact trail).
//! - **unresolved_step**: the items of the last todo/plan call (`TodoWrite`, `todowrite`,
//!   `todo_write`, `update_plan`) whose status is not `completed`, 8–200 characters. Needed
//!   to the end.

use std::collections::HashSet;

use compactbench_core::tools::{tool_kind, tool_path, ToolKind};
use compactbench_core::{Message, Part, Role};

use crate::facts::{Fact, FactKind};
use crate::session::{Session, Step};

/// The system prompt used when a transcript does not record one (most do not): short, so
/// request sizes understate the original's by its real system prompt.
pub const UNRECORDED_SYSTEM_PROMPT: &str = "You are a coding agent. (The original system prompt was not recorded in this transcript.)";

const CONSTRAINT_MARKERS: [&str; 7] = ["do not", "don't", "never", "must", "always", "make sure", "avoid"];
const TODO_TOOLS: [&str; 4] = ["todowrite", "todo_write", "update_plan", "todowrite_tool"];

/// A session replaying `messages` (the first one is the system prompt if it has that role).
pub fn session(messages: &[Message]) -> Session {
    let (system, rest) = match messages.split_first() {
        Some((first, rest)) if first.role == Role::System => (first.clone(), rest),
        _ => (Message::system(UNRECORDED_SYSTEM_PROMPT), messages),
    };
    let steps: Vec<Step> = rest
        .iter()
        .map(|m| match m.role {
            Role::Assistant => Step::Assistant(m.clone()),
            Role::Tool => Step::Tool(m.clone()),
            // A later system message opens a turn like a user message; its role is kept.
            Role::User | Role::System => Step::User(m.clone()),
        })
        .collect();
    let facts = mine(&steps);
    Session { system, steps, facts, spans: Vec::new(), instructions: Default::default() }
}

fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split(['.', '!', '?', '\n']).map(str::trim)
}

fn within(s: &str, lo: usize, hi: usize) -> bool {
    (lo..=hi).contains(&s.chars().count())
}

/// The facts of a replayed session, by the rules in the module docs.
pub fn mine(steps: &[Step]) -> Vec<Fact> {
    let end = steps.len().saturating_sub(1);
    let mut facts: Vec<Fact> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut add = |facts: &mut Vec<Fact>, kind: FactKind, needle: &str, step: usize, until: usize| {
        if seen.insert(needle.to_owned()) && step < end {
            facts.push(Fact {
                id: format!("f{}", facts.len()),
                kind,
                needle: needle.to_owned(),
                planted_step: step,
                needed_from: step + 1,
                needed_until: until.max(step + 1),
                stale: Vec::new(),
                named_by: None,
            });
        }
    };
    // Calls by id: (tool name, arguments as JSON text).
    let mut calls: std::collections::HashMap<&str, (&str, String)> = std::collections::HashMap::new();
    let mut last_todo: Option<(usize, Vec<String>)> = None;
    for (i, step) in steps.iter().enumerate() {
        let m = step.message();
        for part in &m.parts {
            match part {
                Part::Text { text } if m.role == Role::User => {
                    for s in sentences(text) {
                        let lower = s.to_lowercase();
                        if within(s, 20, 200) && CONSTRAINT_MARKERS.iter().any(|k| lower.contains(k)) {
                            add(&mut facts, FactKind::UserConstraint, s, i, end);
                        }
                    }
                }
                Part::ToolCall { id, name, args } => {
                    calls.insert(id, (name, args.to_string()));
                    if matches!(tool_kind(name), ToolKind::Write | ToolKind::Edit) {
                        if let Some(path) = tool_path(args) {
                            add(&mut facts, FactKind::FilePath, path, i, end);
                        }
                    }
                    if TODO_TOOLS.contains(&name.to_lowercase().as_str()) {
                        last_todo = Some((i, open_items(args)));
                    }
                }
                Part::ToolResult { call_id, text, is_error: true, .. } => {
                    let line = text
                        .lines()
                        .map(str::trim)
                        .find(|l| l.to_lowercase().contains("error"))
                        .or_else(|| text.lines().map(str::trim).find(|l| !l.is_empty()));
                    if let Some(line) = line.filter(|l| within(l, 12, 200)) {
                        let until = calls.get(call_id.as_str()).and_then(|call| next_success(steps, i, call, &calls)).unwrap_or(end);
                        add(&mut facts, FactKind::ErrorMessage, line, i, until);
                    }
                }
                _ => {}
            }
        }
    }
    if let Some((i, items)) = last_todo {
        for item in items {
            add(&mut facts, FactKind::UnresolvedStep, &item, i, end);
        }
    }
    facts
}

/// Open items of a todo/plan call: entries of its first array argument whose `status` is not
/// `completed`, by their `content`, `step` or `text` field.
fn open_items(args: &serde_json::Value) -> Vec<String> {
    let Some(list) = args.as_object().and_then(|o| o.values().find_map(|v| v.as_array())) else { return Vec::new() };
    list.iter()
        .filter(|item| item.get("status").and_then(|s| s.as_str()) != Some("completed"))
        .filter_map(|item| ["content", "step", "text"].iter().find_map(|k| item.get(k).and_then(|v| v.as_str())))
        .filter(|s| within(s, 8, 200))
        .map(str::to_owned)
        .collect()
}

/// The step of the next successful result of a call like `call` (same name and arguments)
/// after step `after`.
fn next_success(steps: &[Step], after: usize, call: &(&str, String), calls: &std::collections::HashMap<&str, (&str, String)>) -> Option<usize> {
    // Calls made after `after` are not in `calls` yet, so collect them as we go.
    let mut later: std::collections::HashMap<&str, (&str, String)> = std::collections::HashMap::new();
    for (j, step) in steps.iter().enumerate().skip(after + 1) {
        for part in &step.message().parts {
            match part {
                Part::ToolCall { id, name, args } => {
                    later.insert(id, (name, args.to_string()));
                }
                Part::ToolResult { call_id, is_error: false, .. } => {
                    let c = later.get(call_id.as_str()).or_else(|| calls.get(call_id.as_str()));
                    if c.is_some_and(|c| c.0 == call.0 && c.1 == call.1) {
                        return Some(j);
                    }
                }
                _ => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use compactbench_core::Message;
    use serde_json::json;

    use super::*;

    #[test]
    fn mines_each_kind_by_its_rule() {
        let messages = vec![
            Message::user("Fix the build. Do not change the public API of the parser crate! ok"),
            Message::tool_call("c1", "Bash", json!({"command": "cargo test"})),
            Message::tool_result("c1", "Bash", "compiling\nerror[E0308]: mismatched types in parser.rs\nmore", true),
            Message::tool_call("c2", "Edit", json!({"file_path": "src/parser.rs"})),
            Message::tool_result("c2", "Edit", "ok", false),
            Message::tool_call("c3", "Bash", json!({"command": "cargo test"})),
            Message::tool_result("c3", "Bash", "test result: ok", false),
            Message::tool_call("c4", "TodoWrite", json!({"todos": [{"content": "update the changelog", "status": "pending"}, {"content": "fix parser", "status": "completed"}]})),
            Message::tool_result("c4", "TodoWrite", "ok", false),
            Message::assistant("done"),
        ];
        let s = session(&messages);
        assert_eq!(s.system.text(), UNRECORDED_SYSTEM_PROMPT);
        let got: Vec<(FactKind, &str, usize, usize)> = s.facts.iter().map(|f| (f.kind, f.needle.as_str(), f.planted_step, f.needed_until)).collect();
        assert_eq!(
            got,
            vec![
                (FactKind::UserConstraint, "Do not change the public API of the parser crate", 0, 9),
                (FactKind::ErrorMessage, "error[E0308]: mismatched types in parser.rs", 2, 6),
                (FactKind::FilePath, "src/parser.rs", 3, 9),
                (FactKind::UnresolvedStep, "update the changelog", 7, 9),
            ]
        );
    }
}
