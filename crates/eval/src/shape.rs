//! A session in the shape a harness really sends, for strategies whose original never sees
//! native tool calls.
//!
//! [`text_chat`] is the session as such a harness would hold it: its model writes edits and
//! suggests shell commands in plain text, and the harness adds what happened to the chat as
//! user messages. The formats are the harness's own, declared by its strategy crate
//! ([`Strategy::text_chat`]; Aider's, aider-chat 0.86.2, are the only ones so far); which call
//! is an edit and which command a call stands for is decided here. Step for step, with Aider's
//! formats:
//!
//! | session | the harness's shape (Aider's) |
//! |---|---|
//! | user step | unchanged |
//! | edit or write call ([`tool_kind`]) | its edits, [`TextChat::edits`] (SEARCH/REPLACE blocks; a write: one block with an empty `SEARCH`) |
//! | read | [`TextChat::command`] (a ```` ```bash ```` fence) with `cat PATH` (`sed -n 'A,Bp' PATH`, `head -n N PATH` or `tail -n +A PATH` for a range) |
//! | search | `grep -rn PATTERN PATH` (`--include GLOB` when given); `find PATH -name PATTERN` for `glob`, `find`, `file_search` |
//! | list | `ls PATH` |
//! | shell | the command (a `[shell, -lc, script]` array as its script) |
//! | any other call | the call as one command line, `NAME {JSON arguments}` (Aider has no such tools) |
//! | result of an applied edit | user: [`TextChat::edits_applied`] (`I updated the files.`, then the result text) |
//! | result of a failed edit or write (`is_error`) | user: [`TextChat::edits_failed`] (the `# N SEARCH/REPLACE block(s) failed to match!` reflection with its blocks, the error text in place of Aider's "Did you mean" lines) |
//! | any other result | user: [`TextChat::command_output`] (`Output from COMMAND`, the tool's name for other calls, then the result text) |
//!
//! Text, reasoning and media parts stay as they are, in place; each call becomes a text part
//! where it stood, each result a text part. An edit whose arguments give no path or no text
//! (OpenHands' `undo_edit`, a patch with deletions only) is shown as any other call. Shell
//! arguments are single-quoted where needed; a quote never splits a path or pattern, so a
//! needle in one stays verbatim unless it holds a `'` itself.
//!
//! Kept as they were: the number of steps and their kinds (a result is still a [`Step::Tool`],
//! now holding a user message), so facts' planted and needed steps and the exploration spans
//! still point where they did; the facts themselves (needles are never rewritten); the system
//! prompt. Where Aider would differ further, the step count wins: results of parallel calls are
//! one user message each (Aider joins a reply's command outputs in one), and every result gets
//! its step even where Aider adds nothing (an empty output, the result of an edit).
//!
//! What the runner sees differently ([`crate::drive`]): no tool call or result is left, so no
//! request can break a pairing rule, and a strategy that keys on tool calls (recent files,
//! duplicate reads, observation masking) would find none; the shape is for strategies that
//! model such a harness, and only they declare one. Probes search the same needles in the same
//! steps; the virtual store is written only by strategies, so recoverable probes are unchanged.
//! Delegation (`RunOptions::delegate`) still gives the parent a native `task` call and report,
//! as Aider has no subagents to shape them after.

use std::collections::HashMap;

use compactbench_core::tools::{tool_kind, tool_path, ToolKind};
use compactbench_core::{Message, Part, Role, Strategy, TextChat, TextEdit};
use serde_json::Value;

use crate::generate::{Session, Step};

/// `session` in the chat shape `strategy` declares (see the module docs).
///
/// # Panics
/// When `strategy` declares none ([`Strategy::text_chat`] is `None`): its harness sends tool
/// calls, so it has no text shape to run in (no `+text` rows).
pub fn text_chat(session: &Session, strategy: &dyn Strategy) -> Session {
    let id = &strategy.info().id;
    let chat = strategy.text_chat().unwrap_or_else(|| panic!("{id} declares no text chat shape (Strategy::text_chat): no +text rows"));
    let mut calls: HashMap<String, Shown> = HashMap::new();
    let steps = session
        .steps
        .iter()
        .map(|step| match step {
            Step::User(m) => Step::User(m.clone()),
            Step::Assistant(m) => Step::Assistant(reply(chat, m, &mut calls)),
            Step::Tool(m) => Step::Tool(feedback(chat, m, &calls)),
        })
        .collect();
    Session {
        system: session.system.clone(),
        steps,
        facts: session.facts.clone(),
        spans: session.spans.clone(),
        instructions: session.instructions.clone(),
    }
}

/// What a call became in the reply, which decides how its result comes back.
enum Shown {
    /// Edits.
    Edits(Vec<TextEdit>),
    /// A suggested command: the line in the fence, and the one its output is headed with.
    Command { line: String, header: String },
}

impl Shown {
    fn text(&self, chat: &dyn TextChat) -> String {
        match self {
            Shown::Edits(edits) => chat.edits(edits),
            Shown::Command { line, .. } => chat.command(line),
        }
    }
}

/// The assistant message with each call written as the harness's model would write it. A
/// text harness keeps a reply as one string, so a whitespace-only text block (recorded
/// sessions have them, e.g. Claude Code's "\n\n" before a tool call) is no block of its own.
fn reply(chat: &dyn TextChat, message: &Message, calls: &mut HashMap<String, Shown>) -> Message {
    let parts = message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::ToolCall { id, name, args } => {
                let shown = show(name, args);
                let text = shown.text(chat);
                calls.insert(id.clone(), shown);
                Some(Part::text(text))
            }
            Part::Text { text } if text.trim().is_empty() => None,
            other => Some(other.clone()),
        })
        .collect();
    Message { role: Role::Assistant, parts, usage: message.usage, failure: message.failure }
}

/// The tool message as the user message the harness adds for it.
fn feedback(chat: &dyn TextChat, message: &Message, calls: &HashMap<String, Shown>) -> Message {
    let parts = message
        .parts
        .iter()
        .map(|part| match part {
            Part::ToolResult { call_id, name, text, is_error } => Part::text(match calls.get(call_id) {
                Some(Shown::Edits(edits)) if *is_error => chat.edits_failed(edits, text),
                Some(Shown::Edits(_)) => chat.edits_applied(text),
                Some(Shown::Command { header, .. }) => chat.command_output(header, text),
                // A result whose call the session does not hold (a replay cut mid-pair).
                None => chat.command_output(name, text),
            }),
            other => other.clone(),
        })
        .collect();
    Message { role: Role::User, parts, usage: message.usage, failure: message.failure }
}

/// How a model without tools would write the call `name(args)`: as edits, as the shell command
/// it stands for, or else as the call itself on a command line.
fn show(name: &str, args: &Value) -> Shown {
    if let Some(edits) = call_edits(name, args) {
        return Shown::Edits(edits);
    }
    match command_line(name, args) {
        Some(line) => Shown::Command { header: line.clone(), line },
        None => Shown::Command { line: format!("{name} {args}"), header: name.to_owned() },
    }
}

/// What a call does, with OpenHands' `str_replace_editor` `view` read as the read it is.
pub(crate) fn kind(name: &str, args: &Value) -> ToolKind {
    match tool_kind(name) {
        ToolKind::Edit if str_arg(args, &["command"]) == Some("view") => ToolKind::Read,
        kind => kind,
    }
}

fn str_arg<'a>(args: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| args.get(k).and_then(Value::as_str))
}

fn int_arg(args: &Value, key: &str) -> Option<i64> {
    args.get(key).and_then(Value::as_i64)
}

/// Old and new text of one replacement, under the keys of Pi (`oldText`), Claude Code
/// (`old_string`) and OpenHands / Anthropic's editor (`old_str`).
const REPLACEMENT_KEYS: [(&str, &str); 3] =
    [("oldText", "newText"), ("old_string", "new_string"), ("old_str", "new_str")];

fn replacement(args: &Value) -> Option<(String, String)> {
    REPLACEMENT_KEYS
        .iter()
        .find_map(|(old, new)| Some((str_arg(args, &[old])?.to_owned(), str_arg(args, &[new])?.to_owned())))
}

/// A write's content, as the replacement of nothing (`content`: Pi, Claude Code; `file_text`:
/// OpenHands' `create`).
fn new_file(args: &Value) -> Option<(String, String)> {
    Some((String::new(), str_arg(args, &["content", "file_text"])?.to_owned()))
}

/// The edits an edit or write call amounts to, `None` for other calls and for
/// edits whose arguments give no path or no text. Public for the fidelity check, whose Aider
/// exporter writes a call's edits as the blocks Aider's model would write for them.
pub fn call_edits(name: &str, args: &Value) -> Option<Vec<TextEdit>> {
    if !matches!(kind(name, args), ToolKind::Edit | ToolKind::Write) {
        return None;
    }
    if let Some(patch) = args.as_str().or_else(|| str_arg(args, &["input", "patch"])) {
        return patch_edits(patch);
    }
    let path = tool_path(args)?;
    let block = |(original, updated): (String, String)| TextEdit { path: path.to_owned(), original, updated };
    // A multi-edit's replacements, one replacement, an insert (appended: an empty original on
    // an existing file), or the new file's content.
    let pairs: Vec<(String, String)> = match (args.get("edits").and_then(Value::as_array), str_arg(args, &["command"]))
    {
        (Some(edits), _) => edits.iter().filter_map(replacement).collect(),
        (None, Some("insert")) => vec![(String::new(), str_arg(args, &["new_str"])?.to_owned())],
        (None, _) => vec![replacement(args).or_else(|| new_file(args))?],
    };
    (!pairs.is_empty()).then(|| pairs.into_iter().map(block).collect())
}

/// The edits of a Codex `apply_patch` patch: one per hunk of an updated file (context lines in
/// both sections), one with an empty original per added file; deleted files have none.
fn patch_edits(patch: &str) -> Option<Vec<TextEdit>> {
    let mut blocks = Vec::new();
    let mut hunk: Option<TextEdit> = None;
    let flush = |hunk: &mut Option<TextEdit>, blocks: &mut Vec<TextEdit>| {
        if let Some(h) = hunk.take().filter(|h| !(h.original.is_empty() && h.updated.is_empty())) {
            blocks.push(h);
        }
    };
    for line in patch.lines() {
        let file = line.strip_prefix("*** Update File: ").or_else(|| line.strip_prefix("*** Add File: "));
        if let Some(path) = file {
            flush(&mut hunk, &mut blocks);
            hunk = Some(TextEdit { path: path.trim().to_owned(), original: String::new(), updated: String::new() });
        } else if line.starts_with("*** Delete File: ") || line.starts_with("*** End Patch") {
            flush(&mut hunk, &mut blocks);
        } else if line.starts_with("@@") {
            let path = hunk.as_ref().map(|h| h.path.clone());
            flush(&mut hunk, &mut blocks);
            hunk = path.map(|path| TextEdit { path, original: String::new(), updated: String::new() });
        } else if let Some(h) = hunk.as_mut().filter(|_| !line.starts_with("*** ")) {
            let (original, updated) = match line.chars().next() {
                Some('-') => (Some(&line[1..]), None),
                Some('+') => (None, Some(&line[1..])),
                Some(' ') => (Some(&line[1..]), Some(&line[1..])),
                // An empty line is empty context.
                _ => (Some(line), Some(line)),
            };
            for (text, section) in [(original, &mut h.original), (updated, &mut h.updated)] {
                if let Some(text) = text {
                    section.push_str(text);
                    section.push('\n');
                }
            }
        }
    }
    flush(&mut hunk, &mut blocks);
    (!blocks.is_empty()).then_some(blocks)
}

/// The shell command a model without tools would suggest for a read, search, listing or shell
/// call.
fn command_line(name: &str, args: &Value) -> Option<String> {
    match kind(name, args) {
        ToolKind::Read => read_command(args),
        ToolKind::Search => search_command(name, args),
        ToolKind::List => Some(format!("ls {}", quote(tool_path(args).unwrap_or(".")))),
        ToolKind::Shell => shell_command(args),
        _ => None,
    }
}

fn read_command(args: &Value) -> Option<String> {
    let path = quote(tool_path(args)?);
    let range = args
        .get("view_range")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_i64).collect::<Vec<_>>());
    let (offset, limit) = (int_arg(args, "offset"), int_arg(args, "limit"));
    Some(match (range.as_deref(), offset, limit) {
        // OpenHands' `[start, -1]` reads to the end.
        (Some([from, -1]), _, _) => format!("tail -n +{from} {path}"),
        (Some([from, to]), _, _) => format!("sed -n '{from},{to}p' {path}"),
        (_, Some(from), Some(n)) => format!("sed -n '{from},{}p' {path}", from + n - 1),
        (_, Some(from), None) => format!("tail -n +{from} {path}"),
        (_, None, Some(n)) => format!("head -n {n} {path}"),
        _ => format!("cat {path}"),
    })
}

fn search_command(name: &str, args: &Value) -> Option<String> {
    let pattern = quote(str_arg(args, &["pattern", "query", "regex"])?);
    let path = quote(tool_path(args).unwrap_or("."));
    if matches!(name.to_ascii_lowercase().as_str(), "glob" | "find" | "file_search") {
        return Some(format!("find {path} -name {pattern}"));
    }
    let include = str_arg(args, &["glob", "include"]).map(|g| format!(" --include {}", quote(g))).unwrap_or_default();
    Some(format!("grep -rn{include} {pattern} {path}"))
}

fn shell_command(args: &Value) -> Option<String> {
    let command = args.get("command").or_else(|| args.get("cmd"))?;
    if let Some(line) = command.as_str() {
        return Some(line.trim_end().to_owned());
    }
    let words: Vec<&str> = command.as_array()?.iter().filter_map(Value::as_str).collect();
    Some(match words.as_slice() {
        // Codex runs `["bash", "-lc", script]`: the script is the command.
        [_, "-lc" | "-c", script] => script.trim_end().to_owned(),
        _ => words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" "),
    })
}

/// `word` as one shell word: as it is when it needs no quoting, else single-quoted.
fn quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./-:=@%+,".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
