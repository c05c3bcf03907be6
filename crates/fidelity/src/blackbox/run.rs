//! Running a harness CLI on one scripted session: scratch HOME and work dir, the scripted
//! server, the CLI process (bounded in time), and what it recorded.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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
/// The marker of Codex's local compaction request (the start of its handoff prompt).
pub const CODEX_COMPACT_MARKER: &str = "CONTEXT CHECKPOINT COMPACTION";

/// The marker of OpenCode's compaction request (the start of the prompt its `buildPrompt` lays
/// out before the serialized conversation).
pub const OPENCODE_COMPACT_MARKER: &str = "Here is the conversation so far:";

/// The marker of Gemini CLI's two compression requests: both closing user messages (the
/// snapshot request and its verification) name the tag.
pub const GEMINI_COMPACT_MARKER: &str = "<state_snapshot>";

/// The marker of Kimi CLI's compaction request: its prompt (`prompts/compact.md`), after the
/// serialized messages in the one user message.
pub const KIMI_COMPACT_MARKER: &str = "compact this conversation context";

/// The marker of Cline's compaction request (the SDK's continuation-note prompt).
pub const CLINE_COMPACT_MARKER: &str = "continuation note";

/// What the scripted model answers Claude Code's compaction request with.
pub fn summary_reply_text() -> String {
    format!("<analysis>\nFixed analysis.\n</analysis>\n\n<summary>\n{FIXED_SUMMARY}\n</summary>")
}

/// The text of a content value: a string, or the text of its blocks (Messages `text`,
/// Responses `input_text` / `output_text`, Gemini `parts`' `text`).
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// The conversation of a request: Messages or Chat Completions `messages`, Responses `input` or
/// Gemini `contents`.
pub fn conversation(wire: Wire, body: &Value) -> &[Value] {
    let key = match wire {
        Wire::Anthropic | Wire::Chat => "messages",
        Wire::Responses => "input",
        Wire::Gemini => "contents",
    };
    body.get(key).and_then(Value::as_array).map_or(&[], |m| m)
}

/// The text of a request's last message (all its text blocks).
pub fn last_message_text(wire: Wire, body: &Value) -> String {
    let field = if wire == Wire::Gemini { "parts" } else { "content" };
    conversation(wire, body).last().map(|m| content_text(&m[field])).unwrap_or_default()
}

/// Where a compaction request says what it is: its last message, and on the Chat Completions
/// wire its system message too (a harness may put the summary instruction there).
pub fn compaction_text(wire: Wire, body: &Value) -> String {
    let mut text = last_message_text(wire, body);
    if let (Wire::Chat, Some(first)) = (wire, conversation(wire, body).first().filter(|m| m["role"] == "system")) {
        text.push('\n');
        text.push_str(&content_text(&first["content"]));
    }
    text
}

/// Whether the request offers the tool `name` (Messages and Responses list tools by name, Chat
/// Completions as `function.name`, Gemini as `functionDeclarations` of its tool groups).
fn has_tool(body: &Value, name: &str) -> bool {
    let named = |t: &Value| t.get("name").or_else(|| t.get("function").and_then(|f| f.get("name"))).and_then(Value::as_str) == Some(name);
    body.get("tools").and_then(Value::as_array).is_some_and(|tools| {
        tools.iter().any(|t| named(t) || t.get("functionDeclarations").and_then(Value::as_array).is_some_and(|d| d.iter().any(named)))
    })
}

/// Whether the request's last item answers tool calls (a turn goes on) rather than starting a
/// turn.
fn continues_turn(wire: Wire, body: &Value) -> bool {
    let Some(last) = conversation(wire, body).last() else { return false };
    match wire {
        Wire::Anthropic => last["content"].as_array().is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result")),
        Wire::Responses => last["type"] == "function_call_output",
        Wire::Chat => last["role"] == "tool",
        Wire::Gemini => last["parts"].as_array().is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some())),
    }
}

/// The harness a [`Player`] plays for: how it recognises the main loop and the compaction
/// request, and what the summary reply looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Claude Code: the main loop has the `Bash` tool; the summary comes in `<summary>` tags.
    ClaudeCode,
    /// Codex: the main loop has `exec_command`; the summary is plain text.
    Codex,
    /// OpenCode: the main loop has `bash`; the summary is plain text (the template's headings
    /// are not checked in prepend mode).
    OpenCode,
    /// Gemini CLI: the main loop has `run_shell_command`; both compression calls (the snapshot
    /// and its verification) get the summary as plain text.
    Gemini,
    /// Kimi CLI: the main loop has `Shell`; the summary is plain text.
    Kimi,
    /// Cline CLI: the main loop has `run_commands`; the summary is plain text.
    Cline,
}

impl Flavor {
    fn marker(self) -> &'static str {
        match self {
            Flavor::ClaudeCode => CLAUDE_COMPACT_MARKER,
            Flavor::Codex => CODEX_COMPACT_MARKER,
            Flavor::OpenCode => OPENCODE_COMPACT_MARKER,
            Flavor::Gemini => GEMINI_COMPACT_MARKER,
            Flavor::Kimi => KIMI_COMPACT_MARKER,
            Flavor::Cline => CLINE_COMPACT_MARKER,
        }
    }

    fn main_tool(self) -> &'static str {
        match self {
            Flavor::ClaudeCode => "Bash",
            Flavor::Codex => "exec_command",
            Flavor::OpenCode => "bash",
            Flavor::Gemini => "run_shell_command",
            Flavor::Kimi => "Shell",
            Flavor::Cline => "run_commands",
        }
    }

    fn summary(self) -> String {
        match self {
            Flavor::ClaudeCode => summary_reply_text(),
            Flavor::Codex | Flavor::OpenCode | Flavor::Gemini | Flavor::Kimi | Flavor::Cline => FIXED_SUMMARY.to_owned(),
        }
    }
}

/// Plays a [`Script`]: the main loop's requests get the session's replies in order, the
/// compaction request the fixed summary, the request after a compaction a closing text (the
/// run stops there), anything else a short text.
pub struct Player {
    script: Script,
    work: PathBuf,
    flavor: Flavor,
    turn: Option<usize>,
    step: usize,
    compacted: bool,
}

impl Player {
    /// A player of `script` for `flavor`, writing tool files under `work`.
    pub fn new(script: Script, work: PathBuf, flavor: Flavor) -> Player {
        Player { script, work, flavor, turn: None, step: 0, compacted: false }
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
    fn respond(&mut self, wire: Wire, body: &Value) -> (String, Reply) {
        let overhead = self.script.overhead;
        let here = |p: &Player| {
            let t = p.turn.and_then(|t| p.script.turns.get(t));
            t.and_then(|t| t.replies.get(p.step.min(t.replies.len().saturating_sub(1)))).map_or(0, |p| p.reply.input_tokens)
        };
        if compaction_text(wire, body).contains(self.flavor.marker()) {
            self.compacted = true;
            return ("compaction".into(), Reply::text(self.flavor.summary(), overhead + here(self), 40));
        }
        if !has_tool(body, self.flavor.main_tool()) {
            return ("side".into(), Reply::text("OK", 8, 1));
        }
        if self.compacted {
            return ("after_compaction".into(), Reply::text("Done.", overhead, 2));
        }
        if !continues_turn(wire, body) {
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
    /// The CLI's own word on its compactions, in order: Claude Code's `compact_boundary` events
    /// (stream-json), the attributes of Gemini CLI's `gemini_cli.chat_compression` telemetry
    /// events, the metadata of Cline's compaction summaries (from its session's compaction
    /// record).
    pub boundaries: Vec<Value>,
    /// OpenCode's `tool_use` events (a finished tool part each, with the output the next request
    /// sends): the results of a reply the CLI compacted after, which no recorded request holds
    /// whole. Cline's `content_end` events of its tools (each with the whole output, which its
    /// requests send cut to 8,000 characters a string).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
    /// How the CLI ended (`exit 0`, `killed after 300 s`, ...).
    pub ended: String,
    /// The end of its stderr, when it failed.
    pub stderr_tail: String,
}

impl Run {
    /// The main requests the CLI made before its first compaction request, in order (a
    /// record's index is its place in `records`).
    pub fn mains_before_compaction(&self) -> Vec<&Record> {
        self.records.iter().take_while(|r| r.kind != "compaction").filter(|r| r.kind == "main").collect()
    }
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
    let server = Server::start(Box::new(Player::new(script, work.clone(), Flavor::ClaudeCode)), limits)?;
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
    finish(run, ended, server, scratch)
}

/// The folders of a one-process-per-turn run and the scripted server's base URL.
pub struct Scratch<'a> {
    /// The run's scratch folder.
    pub dir: &'a Path,
    /// The CLI's HOME, made fresh (`dir/home`).
    pub home: &'a Path,
    /// Its work dir, made fresh (`dir/work`).
    pub work: &'a Path,
    /// The scripted server's base URL.
    pub url: &'a str,
}

/// Which processes of a turn are killed once its process has exited (or was killed at the
/// timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leftovers {
    /// None: the process runs in our process group.
    Keep,
    /// Its group: the process leads a group of its own (`process_group(0)`).
    Group,
    /// Its group, and every process whose command line names the scratch folder (what the CLI
    /// started in a group of its own).
    GroupAndScratch,
}

/// [`PerTurn::prepare`]: writes settings into the scratch folder.
pub type Prepare = Box<dyn Fn(&Scratch<'_>) -> Result<()> + Sync>;
/// [`PerTurn::command`]: adds a turn's arguments and environment (turn index, user message).
pub type TurnCommand = Box<dyn Fn(&mut Command, &Scratch<'_>, usize, &str) + Sync>;
/// [`PerTurn::event`]: keeps what the run needs of one stdout event.
pub type OnEvent = Box<dyn Fn(&Value, &mut Run) + Sync>;
/// [`PerTurn::after`]: keeps what the run needs from the scratch folder.
pub type After = Box<dyn Fn(&Scratch<'_>, &mut Run) + Sync>;

/// What differs between the CLIs [`run_per_turn`] runs one process per turn: their settings,
/// command line and environment, where the user message goes, what they leave running, and
/// where their own word on a compaction (or anything else the analysis needs) is read.
pub struct PerTurn {
    /// Writes the settings into the scratch folder, before the first turn.
    pub prepare: Prepare,
    /// Adds turn `turn`'s arguments (after the CLI's own) and environment (on top of PATH and
    /// HOME, under the CLI's own); `prompt` is the turn's user message.
    pub command: TurnCommand,
    /// Whether the user message goes on stdin (otherwise stdin is empty).
    pub prompt_on_stdin: bool,
    /// What is killed after each turn.
    pub leftovers: Leftovers,
    /// Takes what the run keeps of one JSON event the CLI printed on stdout.
    pub event: OnEvent,
    /// Takes what the run keeps from the scratch folder after the last turn.
    pub after: After,
}

impl Default for PerTurn {
    /// No settings, arguments or environment of its own, stdin empty, nothing killed, nothing
    /// read.
    fn default() -> PerTurn {
        PerTurn {
            prepare: Box::new(|_| Ok(())),
            command: Box::new(|_, _, _, _| {}),
            prompt_on_stdin: false,
            leftovers: Leftovers::Keep,
            event: Box::new(|_, _| {}),
            after: Box::new(|_, _| {}),
        }
    }
}

/// Runs a CLI one process per turn on `script` in `scratch` (HOME and work dir made fresh
/// there), as `per_turn` says, until the run compacted and made its next request, or the turns
/// ran out.
pub fn run_per_turn(cli: &Cli, script: Script, scratch: &Path, flavor: Flavor, per_turn: &PerTurn, limits: Limits) -> Result<Run> {
    use std::os::unix::process::CommandExt;
    let _ = std::fs::remove_dir_all(scratch);
    let home = scratch.join("home");
    let work = scratch.join("work");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(work.join(OUT_DIR))?;
    let users: Vec<String> = script.turns.iter().map(|t| t.user.clone()).collect();
    let server = Server::start(Box::new(Player::new(script, work.clone(), flavor)), limits)?;
    let url = server.url();
    let place = Scratch { dir: scratch, home: &home, work: &work, url: &url };
    (per_turn.prepare)(&place)?;
    let start = Instant::now();
    let mut run = Run::default();
    let mut events = std::fs::File::create(scratch.join("stdout.jsonl"))?;
    let mut ended = String::from("no turn");
    for (turn, prompt) in users.iter().enumerate() {
        if start.elapsed() >= cli.timeout {
            ended = format!("stopped after {} s", cli.timeout.as_secs());
            break;
        }
        let mut cmd = Command::new(&cli.program);
        cmd.args(&cli.args).env_clear().env("PATH", std::env::var("PATH").unwrap_or_default()).env("HOME", &home);
        (per_turn.command)(&mut cmd, &place, turn, prompt);
        cmd.envs(cli.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(&work)
            .stdin(if per_turn.prompt_on_stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(std::fs::OpenOptions::new().create(true).append(true).open(scratch.join("stderr.log"))?);
        if per_turn.leftovers != Leftovers::Keep {
            cmd.process_group(0);
        }
        let mut child = cmd.spawn().with_context(|| format!("starting {}", cli.program.display()))?;
        if let Some(mut input) = child.stdin.take() {
            input.write_all(prompt.as_bytes())?;
        }
        let result = wait_for_exit(child, start, cli.timeout);
        if per_turn.leftovers == Leftovers::GroupAndScratch {
            kill_left_behind(scratch);
        }
        let (status, lines) = result?;
        for line in lines {
            let _ = writeln!(events, "{line}");
            if let Ok(event) = serde_json::from_str::<Value>(&line) {
                (per_turn.event)(&event, &mut run);
            }
        }
        ended = status;
        if run_is_over(&ended, &server) {
            break;
        }
    }
    (per_turn.after)(&place, &mut run);
    finish(run, ended, server, scratch)
}

/// Whether a JSON event of Codex or OpenCode is their own word on a compaction: its `type`, or
/// that of its `field` (Codex's `item`, OpenCode's `part`), names one. (Codex 0.171.0's events
/// carry none.)
pub fn is_compaction_event(event: &Value, field: &str) -> bool {
    let kind = |v: &Value| v.as_str().is_some_and(|t| t.contains("compact"));
    kind(&event["type"]) || kind(&event[field]["type"])
}

/// The metadata of the compaction summaries in Cline's session compaction records under
/// `home` (`.cline/data/sessions/ID/ID.compaction.json`: `messages[].metadata` of kind
/// `compaction_summary`, with `tokensBefore`, the estimate of the stored messages it
/// compacted), in the records' name order.
pub fn cline_summaries(home: &Path) -> Vec<Value> {
    let Ok(sessions) = std::fs::read_dir(home.join(".cline/data/sessions")) else { return Vec::new() };
    let mut records: Vec<PathBuf> = sessions
        .flatten()
        .filter_map(|session| std::fs::read_dir(session.path()).ok())
        .flat_map(|files| files.flatten().map(|f| f.path()))
        .filter(|path| path.to_string_lossy().ends_with(".compaction.json"))
        .collect();
    records.sort();
    records
        .iter()
        .filter_map(|path| serde_json::from_str::<Value>(&std::fs::read_to_string(path).ok()?).ok())
        .flat_map(|record| record["messages"].as_array().cloned().unwrap_or_default())
        .map(|message| message["metadata"].clone())
        .filter(|metadata| metadata["kind"] == "compaction_summary")
        .collect()
}

/// A finished tool of Cline's `--json` events (`agent_event` `content_end` of a tool: its call
/// id and its whole output, which the requests send cut at the CLI's per-result limit).
pub fn cline_tool_result(event: &Value) -> Option<Value> {
    let event = &event["event"];
    (event["type"] == "content_end" && event["contentType"] == "tool").then(|| event.clone())
}

/// Whether a run of one process per turn stops after a process that ended `ended`: it failed,
/// or the compaction and the request after it are recorded.
fn run_is_over(ended: &str, server: &Server) -> bool {
    !ended.contains("exit status: 0") || server.records().iter().any(|r| r.kind == "after_compaction")
}

/// Completes `run` with how the CLI ended, the server's records and, after a failure, the tail
/// of its stderr; stops the server and writes `records.json` into `scratch`.
fn finish(mut run: Run, ended: String, server: Server, scratch: &Path) -> Result<Run> {
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

/// Waits for `child` (its stdout piped) until it exits or `timeout` since `start` is spent,
/// killing it then. When it leads its own process group (`process_group(0)`), the rest of the
/// group is killed too before its output is collected: a process it left behind would hold
/// stdout open. (For a child in our group there is no group of its pid, and the kill does
/// nothing.) Returns how it ended and the lines it printed.
fn wait_for_exit(mut child: Child, start: Instant, timeout: Duration) -> Result<(String, Vec<String>)> {
    let stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || BufReader::new(stdout).lines().map_while(Result::ok).collect::<Vec<String>>());
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break format!("{status}");
        }
        if start.elapsed() >= timeout {
            let _ = child.kill();
            let _ = child.wait();
            break format!("killed after {} s", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // A group the child leads has the child's pid as its id.
    let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).stderr(Stdio::null()).status();
    Ok((status, reader.join().unwrap_or_default()))
}

/// The `gemini_cli.chat_compression` events (their attributes: `tokens_before`, `tokens_after`)
/// of a Gemini CLI telemetry file: the local exporter writes one pretty-printed JSON object per
/// record, one after another.
pub fn gemini_compressions(telemetry: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(telemetry)
        .into_iter::<Value>()
        .map_while(Result::ok)
        .filter(|record| record["attributes"]["event.name"] == "gemini_cli.chat_compression")
        .map(|record| record["attributes"].clone())
        .collect()
}

/// Kills (by pid) every process whose command line names `scratch`: what a CLI started in a
/// group of its own and left running (Cline's hub daemon, started with `--cwd` on the work dir).
fn kill_left_behind(scratch: &Path) {
    let needle = scratch.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else { return };
    let me = std::process::id();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if String::from_utf8_lossy(&cmdline).split('\0').any(|arg| arg.contains(&needle)) {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).stderr(Stdio::null()).status();
        }
    }
}
