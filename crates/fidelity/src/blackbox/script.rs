//! A generated session as the model's side of a harness run: per turn, the user message the
//! runner types and the replies the server gives, each with the files its tool calls need so
//! that what the harness really executes yields the session's own tool results.

use compactbench_core::{Message, Part, Role};
use compactbench_eval::session::{Session, Step};
use compactbench_tokens::TokenCounter;
use serde_json::{json, Value};

use super::server::{Block, Reply};

/// Where the per-call output files live, relative to the work dir.
pub const OUT_DIR: &str = ".compactbench";

/// A reply and the files (work-dir-relative path, content) written right before it is sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    /// What the model answers.
    pub reply: Reply,
    /// Files its tool calls read.
    pub files: Vec<(String, String)>,
}

/// One user turn.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    /// What the user types.
    pub user: String,
    /// The model's replies in order; the last one is text only unless the session's turn ends
    /// on tool results.
    pub replies: Vec<Planned>,
}

/// The whole session as a script.
#[derive(Clone, Debug, PartialEq)]
pub struct Script {
    /// Turns in order.
    pub turns: Vec<Turn>,
    /// Tokens reported on top of the session's own prefix (stands for the harness's system
    /// prompt and tools, and places the threshold crossing).
    pub overhead: u64,
}

/// How the session's tool calls become the harness's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tools {
    /// Claude Code: `Read {file_path}` of a file holding the result for a read, `Bash
    /// {command}` printing a prepared file for everything else (and a failed read).
    ClaudeCode,
    /// Codex: `exec_command {cmd}` printing a prepared file for every call (Codex reads files
    /// through the shell too).
    Codex,
    /// OpenCode: `read {filePath}` of a file holding the result for a read, `bash {command,
    /// description}` printing a prepared file for everything else (and a failed read).
    OpenCode,
    /// Gemini CLI: `read_file {file_path}` of a file holding the result for a read,
    /// `run_shell_command {command, description}` printing a prepared file for everything else
    /// (and a failed read).
    Gemini,
    /// Kimi CLI: `ReadFile {path}` of a file holding the result for a read, `Shell {command}`
    /// printing a prepared file for everything else (and a failed read).
    Kimi,
    /// Cline CLI: `read_files {files: [{path}]}` of a file holding the result for a read,
    /// `run_commands {commands: [..]}` printing a prepared file for everything else (and a failed
    /// read).
    Cline,
}

fn call_tokens(counter: &TokenCounter, m: &Message) -> u64 {
    counter.count_message(m)
}

/// The harness call and files standing for one session call.
fn map_call(tools: Tools, work: &str, n: usize, name: &str, args: &Value, result: Option<(&str, bool)>) -> (Block, Vec<(String, String)>) {
    let id = match tools {
        Tools::ClaudeCode | Tools::OpenCode => format!("toolu_cb{n:04}"),
        Tools::Codex | Tools::Gemini | Tools::Kimi | Tools::Cline => format!("call_cb{n:04}"),
    };
    let (text, is_error) = result.unwrap_or(("", false));
    let path = args.get("path").and_then(Value::as_str);
    if let (Tools::ClaudeCode | Tools::OpenCode | Tools::Gemini | Tools::Kimi | Tools::Cline, true, Some(path), false) = (tools, name == "read", path, is_error) {
        let call = match tools {
            Tools::Kimi => Block::Call { id, name: "ReadFile".into(), input: json!({"path": format!("{work}/{path}")}) },
            Tools::Cline => Block::Call { id, name: "read_files".into(), input: json!({"files": [{"path": format!("{work}/{path}")}]}) },
            Tools::OpenCode => Block::Call { id, name: "read".into(), input: json!({"filePath": format!("{work}/{path}")}) },
            Tools::Gemini => Block::Call { id, name: "read_file".into(), input: json!({"file_path": format!("{work}/{path}")}) },
            _ => Block::Call { id, name: "Read".into(), input: json!({"file_path": format!("{work}/{path}")}) },
        };
        return (call, vec![(path.to_owned(), text.to_owned())]);
    }
    let file = format!("{OUT_DIR}/{n:04}.out");
    let command = if is_error { format!("cat {file}; exit 1") } else { format!("cat {file}") };
    let what = match name {
        "bash" => args.get("command").and_then(Value::as_str).unwrap_or("command").to_owned(),
        other => format!("{other} {}", args),
    };
    let call = match tools {
        Tools::ClaudeCode => Block::Call { id, name: "Bash".into(), input: json!({"command": command, "description": format!("Show the output of: {what}")}) },
        Tools::Codex => Block::Call { id, name: "exec_command".into(), input: json!({"cmd": command}) },
        Tools::OpenCode => Block::Call { id, name: "bash".into(), input: json!({"command": command, "description": format!("Show the output of: {what}")}) },
        Tools::Gemini => {
            Block::Call { id, name: "run_shell_command".into(), input: json!({"command": command, "description": format!("Show the output of: {what}")}) }
        }
        Tools::Kimi => Block::Call { id, name: "Shell".into(), input: json!({"command": command}) },
        Tools::Cline => Block::Call { id, name: "run_commands".into(), input: json!({"commands": [command]}) },
    };
    (call, vec![(file, text.to_owned())])
}

/// Builds the script of `session`: `work` is the absolute work dir the harness runs in (read
/// calls name absolute paths under it).
pub fn build(session: &Session, tools: Tools, work: &str, counter: &TokenCounter) -> Script {
    let mut turns: Vec<Turn> = Vec::new();
    let mut prefix = call_tokens(counter, &session.system);
    let mut calls = 0usize;
    for (k, step) in session.steps.iter().enumerate() {
        match step {
            Step::User(m) => turns.push(Turn { user: m.text(), replies: Vec::new() }),
            Step::Assistant(m) => {
                let results: Vec<&Message> =
                    session.steps[k + 1..].iter().map_while(|s| if let Step::Tool(r) = s { Some(r) } else { None }).collect();
                let result_of = |id: &str| {
                    results.iter().flat_map(|r| r.parts.iter()).find_map(|p| match p {
                        Part::ToolResult { call_id, text, is_error, .. } if call_id == id => Some((text.as_str(), *is_error)),
                        _ => None,
                    })
                };
                let mut blocks = Vec::new();
                let mut files = Vec::new();
                for part in &m.parts {
                    match part {
                        Part::Text { text } if !text.is_empty() => blocks.push(Block::Text(text.clone())),
                        Part::ToolCall { id, name, args } => {
                            let (block, f) = map_call(tools, work, calls, name, args, result_of(id));
                            calls += 1;
                            blocks.push(block);
                            files.extend(f);
                        }
                        _ => {}
                    }
                }
                if blocks.is_empty() {
                    blocks.push(Block::Text("Continuing.".into()));
                }
                let reply = Reply { blocks, input_tokens: prefix, output_tokens: call_tokens(counter, m) };
                let Some(turn) = turns.last_mut() else { continue };
                turn.replies.push(Planned { reply, files });
            }
            Step::Tool(_) => {}
        }
        if step.message().role != Role::System {
            prefix += call_tokens(counter, step.message());
        }
    }
    Script { turns, overhead: 0 }
}

impl Script {
    /// Session-prefix tokens of every reply in order (before the overhead).
    pub fn prefixes(&self) -> Vec<u64> {
        self.turns.iter().flat_map(|t| t.replies.iter().map(|p| p.reply.input_tokens)).collect()
    }

    /// Sets the overhead so that the prompt of reply `target` reports about `threshold`
    /// tokens, less `slack` (the crossing then falls on that reply's request or just after).
    pub fn place(&mut self, threshold: u64, target: usize, slack: u64) {
        let prefixes = self.prefixes();
        let at = prefixes.get(target).or(prefixes.last()).copied().unwrap_or(0);
        self.overhead = threshold.saturating_sub(at).saturating_sub(slack);
    }

    /// Model requests the session makes.
    pub fn requests(&self) -> usize {
        self.turns.iter().map(|t| t.replies.len()).sum()
    }
}
