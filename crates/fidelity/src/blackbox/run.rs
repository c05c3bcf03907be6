//! Running a harness CLI on one scripted session: scratch HOME and work dir, the scripted
//! server, the CLI process (bounded in time), and what it recorded.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::script::{Script, OUT_DIR};
use super::server::{Limits, Record, Reply, Responder, Server, Wire};
use crate::ours::FIXED_SUMMARY;

/// The marker of Claude Code's compaction request (the start of its summary instruction).
pub const CLAUDE_COMPACT_MARKER: &str = "CRITICAL: Respond with TEXT ONLY";

/// What the scripted model answers a compaction request with.
pub fn summary_reply_text() -> String {
    format!("<analysis>\nFixed analysis.\n</analysis>\n\n<summary>\n{FIXED_SUMMARY}\n</summary>")
}

/// The text of a request's last message (all its text blocks).
pub fn last_message_text(body: &Value) -> String {
    let Some(last) = body.get("messages").and_then(Value::as_array).and_then(|m| m.last()) else { return String::new() };
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

fn has_tool(body: &Value, name: &str) -> bool {
    body.get("tools").and_then(Value::as_array).is_some_and(|t| t.iter().any(|t| t.get("name").and_then(Value::as_str) == Some(name)))
}

/// Whether the request's last message answers tool calls (a turn goes on) rather than
/// starting a turn.
fn continues_turn(body: &Value) -> bool {
    let Some(last) = body.get("messages").and_then(Value::as_array).and_then(|m| m.last()) else { return false };
    last["content"].as_array().is_some_and(|blocks| blocks.iter().any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result")))
}

/// Plays a [`Script`] for Claude Code: the main loop's requests get the session's replies in
/// order, the compaction request the fixed summary, the request after a compaction a closing
/// text (the run stops there), anything else a short text.
pub struct Player {
    script: Script,
    work: PathBuf,
    turn: Option<usize>,
    step: usize,
    compacted: bool,
}

impl Player {
    /// A player of `script` writing tool files under `work`.
    pub fn new(script: Script, work: PathBuf) -> Player {
        Player { script, work, turn: None, step: 0, compacted: false }
    }

    fn write_files(&self, files: &[(String, String)]) {
        for (path, content) in files {
            let path = self.work.join(path);
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = std::fs::write(path, content);
        }
    }
}

impl Responder for Player {
    fn respond(&mut self, _wire: Wire, body: &Value) -> (String, Reply) {
        let overhead = self.script.overhead;
        let here = |p: &Player| {
            let t = p.turn.and_then(|t| p.script.turns.get(t));
            t.and_then(|t| t.replies.get(p.step.min(t.replies.len().saturating_sub(1)))).map_or(0, |p| p.reply.input_tokens)
        };
        if last_message_text(body).contains(CLAUDE_COMPACT_MARKER) {
            self.compacted = true;
            return ("compaction".into(), Reply::text(summary_reply_text(), overhead + here(self), 40));
        }
        if !has_tool(body, "Bash") {
            return ("side".into(), Reply::text("OK", 8, 1));
        }
        if self.compacted {
            return ("after_compaction".into(), Reply::text("Done.", overhead, 2));
        }
        if !continues_turn(body) {
            self.turn = Some(self.turn.map_or(0, |t| t + 1));
            self.step = 0;
        }
        let planned = self.turn.and_then(|t| self.script.turns.get(t)).and_then(|t| t.replies.get(self.step)).cloned();
        self.step += 1;
        match planned {
            Some(p) => {
                self.write_files(&p.files);
                let mut reply = p.reply;
                reply.input_tokens += overhead;
                ("main".into(), reply)
            }
            None => ("main".into(), Reply::text("Done with this step.", overhead + here(self), 4)),
        }
    }
}

/// A harness CLI as installed by `--setup`.
#[derive(Clone, Debug)]
pub struct Cli {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before any per-run ones.
    pub args: Vec<String>,
    /// Environment set on top of a cleared one (PATH and LANG kept).
    pub env: Vec<(String, String)>,
    /// Longest a run may take.
    pub timeout: Duration,
}

/// What one run left.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Run {
    /// Every request the server got.
    pub records: Vec<Record>,
    /// The CLI's `compact_boundary` events (stream-json), in order.
    pub boundaries: Vec<Value>,
    /// How the CLI ended (`exit 0`, `killed after 300 s`, ...).
    pub ended: String,
    /// The end of its stderr, when it failed.
    pub stderr_tail: String,
}

/// Runs Claude Code (`claude -p --input-format stream-json`) on `script` in `scratch` (HOME
/// and work dir made fresh there), typing each turn's user message after the previous turn's
/// result, until the run compacted and made its next request, or the turns ran out.
pub fn run_claude(cli: &Cli, script: Script, scratch: &Path, limits: Limits) -> Result<Run> {
    let _ = std::fs::remove_dir_all(scratch);
    let home = scratch.join("home");
    let work = scratch.join("work");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(work.join(OUT_DIR))?;
    let users: Vec<String> = script.turns.iter().map(|t| t.user.clone()).collect();
    let server = Server::start(Box::new(Player::new(script, work.clone())), limits)?;
    let mut cmd = Command::new(&cli.program);
    cmd.args(&cli.args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("ANTHROPIC_BASE_URL", server.url())
        .envs(cli.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(&work)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(scratch.join("stderr.log"))?);
    let mut child = cmd.spawn().with_context(|| format!("starting {}", cli.program.display()))?;
    let mut stdin = child.stdin.take();
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let user_line = |text: &str| json!({"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": null, "session_id": ""}).to_string();
    let mut turn = 0;
    if let (Some(first), Some(input)) = (users.first(), stdin.as_mut()) {
        writeln!(input, "{}", user_line(first))?;
        input.flush()?;
    }
    let start = Instant::now();
    let mut run = Run::default();
    let mut transcript = std::fs::File::create(scratch.join("stdout.jsonl"))?;
    let ended = loop {
        let left = cli.timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            let _ = child.kill();
            break format!("killed after {} s", cli.timeout.as_secs());
        }
        match rx.recv_timeout(left.min(Duration::from_millis(500))) {
            Ok(line) => {
                let _ = writeln!(transcript, "{line}");
                let Ok(event) = serde_json::from_str::<Value>(&line) else { continue };
                if event["type"] == "system" && event["subtype"] == "compact_boundary" {
                    run.boundaries.push(event);
                } else if event["type"] == "result" {
                    let finished = server.records().iter().any(|r| r.kind == "after_compaction");
                    turn += 1;
                    match (finished, users.get(turn), stdin.as_mut()) {
                        (false, Some(next), Some(input)) => {
                            writeln!(input, "{}", user_line(next))?;
                            input.flush()?;
                        }
                        _ => drop(stdin.take()),
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait()?;
                break format!("{status}");
            }
        }
    };
    let _ = child.wait();
    let _ = reader.join();
    run.ended = ended;
    run.records = server.records();
    if !run.ended.contains("exit status: 0") {
        let stderr = std::fs::read_to_string(scratch.join("stderr.log")).unwrap_or_default();
        run.stderr_tail = stderr.chars().rev().take(2000).collect::<Vec<_>>().into_iter().rev().collect();
    }
    drop(server);
    std::fs::write(scratch.join("records.json"), serde_json::to_string_pretty(&run)?)?;
    Ok(run)
}
