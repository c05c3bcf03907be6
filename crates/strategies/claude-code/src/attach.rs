//! What Claude Code re-injects after a compaction: the instructions file, the plan, recently
//! touched files, invoked skills and the todo list, each as a user message.

use std::collections::HashMap;

use compactbench_core::tools::{tool_kind, tool_path, ToolKind};
use compactbench_core::{Log, Message, Part, Role};
use serde_json::{json, Value};

use crate::count::{message_tokens, text_tokens};
use crate::{ClaudeCodeConfig, RestoreFiles};

/// `POST_COMPACT_MAX_FILES_TO_RESTORE`.
pub(crate) const MAX_FILES: usize = 5;
/// `POST_COMPACT_MAX_TOKENS_PER_FILE`: larger files become a path reference.
pub(crate) const MAX_TOKENS_PER_FILE: u64 = 5_000;
/// `POST_COMPACT_TOKEN_BUDGET`: all file attachments together.
pub(crate) const FILE_BUDGET: u64 = 50_000;
/// `POST_COMPACT_MAX_TOKENS_PER_SKILL`: each skill body is cut to its start.
pub(crate) const MAX_TOKENS_PER_SKILL: u64 = 5_000;
/// `POST_COMPACT_SKILLS_TOKEN_BUDGET`: all skills together, newest first.
pub(crate) const SKILLS_BUDGET: u64 = 25_000;

/// File names Claude Code loads as memory and therefore never restores as files.
const MEMORY_FILES: [&str; 3] = ["CLAUDE.md", "CLAUDE.local.md", "MEMORY.md"];
/// Where plan mode keeps its plans (\[assume\]: `~/.claude/plans/<name>.md`).
const PLAN_DIR: &str = ".claude/plans/";
/// The path the instructions file is announced under.
const CLAUDE_MD_PATH: &str = "CLAUDE.md";

/// A position in the log: (entry index, part index).
type Pos = (usize, usize);

#[derive(Default)]
struct FileState {
    touched: Pos,
    content: Option<(Pos, String)>,
}

/// Re-injected messages in order, and what they hold (for the checkpoint details).
pub(crate) struct Attachments {
    pub(crate) messages: Vec<Message>,
    pub(crate) details: Value,
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn is_plan_path(path: &str) -> bool {
    path.contains(PLAN_DIR)
}

/// The first `max_units` UTF-16 units of `text`, never splitting a character.
fn truncate_utf16(text: &str, max_units: u64) -> &str {
    let mut units = 0u64;
    for (i, c) in text.char_indices() {
        units += c.len_utf16() as u64;
        if units > max_units {
            return &text[..i];
        }
    }
    text
}

fn written_content(args: &Value) -> Option<&str> {
    ["content", "file_text", "contents"].iter().find_map(|k| args.get(k).and_then(Value::as_str))
}

fn skill_name(args: &Value) -> String {
    ["skill", "command", "name"]
        .iter()
        .find_map(|k| args.get(k).and_then(Value::as_str))
        .unwrap_or("skill")
        .to_owned()
}

/// Everything the log tells about files, skills, the plan and the todo list.
#[derive(Default)]
struct Seen {
    files: HashMap<String, FileState>,
    skills: Vec<(Pos, String, String)>,
    plan: Option<String>,
    todos: Option<Value>,
}

/// The file a shell command prints whole: `cat <path>` (then, at most, `; exit N`), no pipes,
/// redirections or globs.
fn cat_path(args: &Value) -> Option<&str> {
    let command = args.get("command").and_then(Value::as_str)?;
    let first = command.split(';').next()?.trim();
    let mut words = first.split_whitespace();
    let (Some("cat"), Some(path), None) = (words.next(), words.next(), words.next()) else { return None };
    (!path.starts_with('-') && !path.contains(['*', '?', '|', '>', '<', '$', '`'])).then_some(path)
}

fn scan(config: &ClaudeCodeConfig, log: &Log) -> Seen {
    let mut seen = Seen::default();
    let mut reads: HashMap<String, String> = HashMap::new();
    let mut skill_calls: HashMap<String, String> = HashMap::new();
    for (id, m) in log.messages() {
        for (k, part) in m.parts.iter().enumerate() {
            let pos = (id.index(), k);
            match part {
                Part::ToolCall { id: call, name, args } => {
                    if name.eq_ignore_ascii_case("ExitPlanMode") {
                        if let Some(plan) = args.get("plan").and_then(Value::as_str) {
                            seen.plan = Some(plan.to_owned());
                        }
                    } else if name.eq_ignore_ascii_case("TodoWrite") {
                        seen.todos = args.get("todos").cloned();
                    } else if name.eq_ignore_ascii_case("Skill") {
                        skill_calls.insert(call.clone(), skill_name(args));
                    }
                    let (kind, path) = match tool_kind(name) {
                        ToolKind::Shell if config.cat_reads => (ToolKind::Read, cat_path(args)),
                        kind @ (ToolKind::Read | ToolKind::Write | ToolKind::Edit) => (kind, tool_path(args)),
                        _ => continue,
                    };
                    let Some(path) = path else { continue };
                    if is_plan_path(path) {
                        if kind == ToolKind::Write {
                            seen.plan = written_content(args).map(str::to_owned).or(seen.plan.take());
                        }
                        continue;
                    }
                    let state = seen.files.entry(path.to_owned()).or_default();
                    state.touched = pos;
                    match kind {
                        ToolKind::Write => {
                            if let Some(text) = written_content(args) {
                                state.content = Some((pos, text.to_owned()));
                            }
                        }
                        ToolKind::Read => {
                            reads.insert(call.clone(), path.to_owned());
                        }
                        _ => {}
                    }
                }
                Part::ToolResult { call_id, text, is_error: false, .. } => {
                    if let Some(path) = reads.get(call_id) {
                        if let Some(state) = seen.files.get_mut(path) {
                            state.content = Some((pos, text.clone()));
                        }
                    }
                    if let Some(name) = skill_calls.get(call_id) {
                        seen.skills.push((pos, name.clone(), text.clone()));
                    }
                }
                _ => {}
            }
        }
    }
    seen
}

fn instructions_text(config: &ClaudeCodeConfig, log: &Log) -> String {
    match &config.claude_md {
        Some(text) => text.clone(),
        None => log
            .messages()
            .take_while(|(_, m)| m.role == Role::System)
            .map(|(_, m)| m.text())
            .collect::<Vec<_>>()
            .join("\n\n"),
    }
}

/// File attachments: the 5 most recently touched files (memory and plan files skipped),
/// with content up to 5,000 tokens each, else a path reference; within the 50,000 budget.
fn files(seen: &Seen) -> (Vec<Message>, Vec<Value>) {
    let mut ranked: Vec<(&String, &FileState)> =
        seen.files.iter().filter(|(p, _)| !MEMORY_FILES.contains(&file_name(p))).collect();
    ranked.sort_by_key(|f| std::cmp::Reverse(f.1.touched));
    let mut used = 0;
    let mut messages = Vec::new();
    let mut listed = Vec::new();
    for (path, state) in ranked.into_iter().take(MAX_FILES) {
        let (message, how) = match &state.content {
            Some((_, content)) if text_tokens(content) <= MAX_TOKENS_PER_FILE => (
                Message::user(format!("Contents of {path}, read again after the conversation was summarized:\n{content}")),
                "content",
            ),
            Some(_) => (
                Message::user(format!(
                    "{path} was read before the conversation was summarized, but it is too large to include here. \
                     Read it again if you need it."
                )),
                "path_too_large",
            ),
            None => (
                Message::user(format!(
                    "{path} was read or changed before the conversation was summarized; its contents are not included \
                     here. Read it again if you need it."
                )),
                "path_no_content",
            ),
        };
        let tokens = message_tokens(&message);
        if used + tokens > FILE_BUDGET {
            continue;
        }
        used += tokens;
        messages.push(message);
        listed.push(json!({"path": path, "as": how}));
    }
    (messages, listed)
}

/// Skill attachments: newest invocation per skill, each cut to 5,000 tokens, newest first
/// within 25,000 tokens; shown oldest first.
fn skills(seen: &Seen) -> (Vec<Message>, Vec<String>, Vec<String>) {
    let mut newest: Vec<&(Pos, String, String)> = Vec::new();
    for s in seen.skills.iter().rev() {
        if !newest.iter().any(|n| n.1 == s.1) {
            newest.push(s);
        }
    }
    let mut used = 0;
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for (_, name, body) in newest {
        let body = truncate_utf16(body, MAX_TOKENS_PER_SKILL * 4);
        let tokens = text_tokens(body);
        if used + tokens > SKILLS_BUDGET {
            dropped.push(name.clone());
            continue;
        }
        used += tokens;
        kept.push((name, body));
    }
    kept.reverse();
    let messages = kept
        .iter()
        .map(|(name, body)| {
            Message::user(format!("The skill \"{name}\" was invoked earlier in this session. Its instructions (possibly cut short):\n\n{body}"))
        })
        .collect();
    (messages, kept.iter().map(|(n, _)| (*n).clone()).collect(), dropped)
}

fn todo_list(todos: &Value) -> Option<Message> {
    let items = todos.as_array()?;
    if items.is_empty() {
        return None;
    }
    let lines: Vec<String> = items
        .iter()
        .map(|t| {
            let content = t.get("content").and_then(Value::as_str).unwrap_or("");
            let status = t.get("status").and_then(Value::as_str).unwrap_or("pending");
            format!("- [{status}] {content}")
        })
        .collect();
    Some(Message::user(format!("The todo list as it stood before the summary:\n{}", lines.join("\n"))))
}

/// The attachments of a compaction of `log`, in the order
/// `[instructions file, plan, files, skills, todo list]`; `turn_start`: the compaction runs as
/// a turn starts.
pub(crate) fn collect(config: &ClaudeCodeConfig, log: &Log, turn_start: bool) -> Attachments {
    let seen = scan(config, log);
    let mut messages = Vec::new();
    let instructions = instructions_text(config, log);
    let has_instructions = !instructions.trim().is_empty();
    if has_instructions {
        messages.push(Message::user(format!(
            "Project instructions from {CLAUDE_MD_PATH}, read again after the conversation was summarized. Follow them:\n\n{instructions}"
        )));
    }
    if let Some(plan) = seen.plan.as_ref().filter(|p| !p.trim().is_empty()) {
        messages.push(Message::user(format!("A plan was made in plan mode; keep working to it:\n\n{plan}")));
    }
    let restore = match config.restore_files {
        RestoreFiles::Always => true,
        RestoreFiles::AtTurnStart => turn_start,
        RestoreFiles::Never => false,
    };
    let (file_messages, file_list) = if restore { files(&seen) } else { (Vec::new(), Vec::new()) };
    messages.extend(file_messages);
    let (skill_messages, kept_skills, dropped_skills) = skills(&seen);
    messages.extend(skill_messages);
    let todo = seen.todos.as_ref().and_then(todo_list);
    let has_todo = todo.is_some();
    messages.extend(todo);
    Attachments {
        messages,
        details: json!({
            "instructions_file": has_instructions,
            "plan": seen.plan.is_some(),
            "files": file_list,
            "skills": kept_skills,
            "skills_dropped": dropped_skills,
            "todo": has_todo,
        }),
    }
}
