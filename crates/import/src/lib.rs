//! Imports real agent transcripts into compactbench's message model.
//!
//! One entry point, [`import`], reads a transcript file written by a real harness and returns the
//! conversation as [`compactbench_core::Message`]s, counts ([`Stats`]) and the compactions the
//! harness itself recorded ([`RecordedCompaction`]). Supported formats ([`Format`]):
//!
//! | format | file | read as |
//! |---|---|---|
//! | [`Format::ClaudeCode`] | `~/.claude/projects/<dir>/<uuid>.jsonl` (1.x and 2.x) | JSONL, streamed |
//! | [`Format::Codex`] | Codex CLI rollout `rollout-*.jsonl` | JSONL, streamed |
//! | [`Format::Pi`] | Pi session JSONL (legacy v1 and v2/v3 trees) | JSONL, streamed (v3 buffered to find the branch) |
//! | [`Format::OpenHands`] | OpenHands eval `output.jsonl` (one row per line) | JSONL, one row |
//! | [`Format::SweAgent`] | SWE-agent `.traj` | one JSON document, read whole |
//!
//! # Common rules
//!
//! * Roles: system, user, assistant, tool. Tool calls are [`Part::ToolCall`] (id, name, JSON
//!   arguments); every tool result is a [`Part::ToolResult`] (call id, tool name, text,
//!   `is_error`) in a [`Role::Tool`] message of its own, placed after the assistant message that
//!   made the call. Media attached to a result (images returned by a read tool) are extra
//!   [`Part::Media`] parts of that same tool message.
//! * `messages` holds what the file records as conversation, in file order. Where the harness
//!   wrote its compaction summary as a message line (Claude Code) that message is in `messages`
//!   at [`RecordedCompaction::message_index`]; where the summary lives only in a compaction record
//!   (Pi, Codex) it is not turned into a message and only [`RecordedCompaction::summary`] holds
//!   it.
//! * Reasoning is kept as [`Part::Reasoning`]. Opaque reasoning (Anthropic `redacted_thinking`,
//!   OpenAI `encrypted_content`, Pi redacted thinking) becomes a short placeholder
//!   (`[encrypted reasoning: N bytes]`) and its bytes are added to
//!   [`Stats::opaque_reasoning_bytes`]. Anthropic thinking *signatures* are not counted.
//! * Images and documents become [`Part::Media`] with a size estimate: for PNG, JPEG, GIF and
//!   WebP given inline (base64 or `data:` URL) the dimensions are read from the header and
//!   Anthropic's rule is applied (fit into a 1568 px long edge and 1.15 megapixels, then
//!   `ceil(width × height / 750)` tokens); anything else (URLs, unreadable headers, PDFs and
//!   other documents) counts [`MEDIA_FALLBACK_TOKENS`] per item, about the rule's ceiling.
//! * Provider usage recorded on assistant messages is copied into [`Message::usage`]
//!   (`input` = uncached prompt tokens, `cache_read`, `cache_write`, `output`): Claude Code's
//!   `cache_creation_input_tokens` and Pi's `cacheWrite` fill `cache_write`; Codex and
//!   OpenHands (OpenAI-style `prompt_tokens`, cached ones included) record none.
//! * Errors: a malformed line (bad JSON, not an object, a required field missing or of the
//!   wrong type, invalid UTF-8) is an [`ImportError`] naming the file, the 1-based line and the
//!   field. With [`Options::lenient`] the line is skipped and counted in
//!   [`Stats::skipped_lines`]. A file with no entry of the chosen format (empty, or another
//!   format) is always an error. No input makes the importer panic.
//! * [`Stats`] counts pairing after import: every call should have exactly one later result.
//!
//! # Claude Code (session JSONL)
//!
//! * `type:"user"` / `type:"assistant"` lines carry an Anthropic message in `message`. Content
//!   parts: `text`, `thinking` (→ reasoning), `redacted_thinking` (→ opaque), `tool_use`
//!   (→ call; `input` is the arguments), `tool_result` (→ tool message; string or list content,
//!   `is_error`), `image` / `document` (→ media). Other part types are counted in
//!   [`Stats::unknown_parts`] and dropped.
//! * A streamed reply is written as several assistant lines with the same `message.id`, one
//!   content block each; they are merged into one assistant message (the last line's usage
//!   wins), also when tool-result lines sit between them.
//! * A tool result is stored twice: in `message.content[].tool_result` (what the model saw) and
//!   in the top-level `toolUseResult` (structured copy for the UI). Only the former is read.
//!   When a user line mixes tool results and text, the results come first, then one user
//!   message with the remaining parts.
//! * `isSidechain:true` lines are a sub-agent's (Task tool) own conversation: kept out of
//!   `messages`, counted in [`Stats::sidechain_lines`], their tool calls in
//!   [`Stats::excluded_tool_calls`]. The Task call and its result in the main chain stay.
//! * Compaction, 1.x: a user line with `isCompactSummary:true` ("This session is being continued
//!   from a previous conversation…") is the summary; it stays in `messages` and is recorded with
//!   `summary` set and no trigger or token count. 2.x: a `type:"system",
//!   subtype:"compact_boundary"` line with `compactMetadata{trigger, preTokens}` is recorded and
//!   the summary user line that follows fills in its `summary`.
//! * `summary` (session title), other `system` lines (UI notices such as model fallback),
//!   `file-history-snapshot` and other types are metadata ([`Stats::metadata_lines`]). `isMeta`
//!   user lines (the local-command caveat) are sent to the model and are kept. Lines are taken in
//!   file order (the `parentUuid` chain is not re-walked).
//!
//! # Codex CLI (rollout JSONL)
//!
//! * Only `response_item` lines are conversation (the Responses API items the model saw):
//!   `message` (role user/assistant; developer/system → system), `reasoning` (summary text, or
//!   raw `content` text when present; `encrypted_content` → opaque bytes), `function_call`
//!   (`arguments` is a JSON string, parsed; kept as a JSON string if it does not parse),
//!   `custom_tool_call` (free-form `input`, kept as a JSON string), `local_shell_call` (its
//!   `action` as arguments), and their `*_output` items (→ tool messages; `is_error` when the
//!   shell reports a non-zero `exit_code` or the payload says `success:false`). Consecutive
//!   assistant-side items (reasoning, text, calls) form one assistant message, as one Responses
//!   turn becomes one chat message.
//! * `session_meta`, `turn_context` and `event_msg` lines (UI echoes of the same items, token
//!   counts) are metadata; an `event_msg` `token_count` with `last_token_usage` is attached as
//!   usage to the latest assistant message without one. Other `response_item` types
//!   (`web_search_call`, `ghost_snapshot`, …) are metadata too.
//! * `compacted` lines are recorded with their `message` as summary. Codex rebuilds the history
//!   in memory, so nothing is added to `messages`. The base instructions are not in the rollout,
//!   so there is no system message unless the rollout has developer items.
//!
//! # Pi (session JSONL)
//!
//! * The first entry must be the `session` header. v1 files (no `version`, no `id`/`parentId`)
//!   are linear; v2/v3 entries form a tree and the active branch is the path from the root to
//!   the last entry (as Pi's `buildSessionContext` does with no explicit leaf); only that path is
//!   imported (v3 files are buffered for this; v1 files stream).
//! * `message` entries: `user`, `assistant` (text, thinking, toolCall, usage), `toolResult`
//!   (→ tool message), `bashExecution` (a user `!command`: rendered as a user message the way
//!   Pi's `bashExecutionToText` does, unless `excludeFromContext`), `custom`/`hookMessage`,
//!   `branchSummary`, `compactionSummary` (→ user messages, with Pi's prefixes for summaries).
//!   `custom_message` and `branch_summary` entries likewise become user messages;
//!   `model_change`, `thinking_level_change`, `custom`, `label`, `session_info` are metadata.
//! * Like Pi's `transformMessages`, assistant turns with `stopReason` `error` or `aborted` are
//!   dropped ([`Stats::dropped_messages`], their calls in [`Stats::excluded_tool_calls`]), and a
//!   call left without a result gets a synthetic error result "No result provided" before the
//!   next user or assistant message, compaction, or the end ([`Stats::synthetic_results`]).
//! * `compaction` entries are recorded with `summary`, `tokensBefore`, `timestamp`
//!   ([`RecordedCompaction::recorded_at`]) and the first kept entry (`firstKeptEntryIndex` in
//!   v1, an index into the file's entries with the header at 0; `firstKeptEntryId` in v2/v3)
//!   mapped to [`RecordedCompaction::first_kept_message`].
//!
//! # OpenHands (evaluation `output.jsonl`)
//!
//! * Each line is one evaluation row; [`Options::row`] picks which (default 0, the first). Its
//!   `history[]` events are converted the way OpenHands' `ConversationMemory` builds the prompt:
//!   the `system` action → system message; user `message` actions → user messages; agent
//!   `message` actions → assistant messages; an action with `tool_call_metadata` → its
//!   `model_response` message (text plus all tool calls of that response), emitted together
//!   with its results once every call of the response has an observation (so messages logged
//!   in between move before it); observations with `tool_call_metadata` (linked by `cause`
//!   and `tool_call_id`) → tool results; `finish` → assistant text (its thought plus the
//!   response text); an `error` observation without metadata → user message ending in
//!   "[Error occurred in processing last action]"; `recall` observations → a user message with
//!   the workspace context (an approximation of OpenHands' template: runtime hosts, repository
//!   and microagent knowledge). Calls whose results never came are dropped, as OpenHands does.
//! * Command observations render like `CmdOutputObservation.to_agent_observation` (prefix,
//!   content, suffix, working directory, interpreter, exit code); a non-zero exit code or an
//!   error observation sets `is_error`.
//! * Error positions are the row's line plus `history[i]` in the message. In lenient mode a bad
//!   event is skipped and counted in [`Stats::skipped_lines`].
//!
//! # SWE-agent (`.traj`)
//!
//! * The file is one JSON document; `history[]` is what the model saw. 0.x trajectories use
//!   text actions: an assistant message with an `action` becomes its `thought` as text plus one
//!   [`Part::ToolCall`] named `bash` with arguments `{"command": action}` (SWE-agent runs every
//!   action, its own commands included, in the container's shell), id `swe-agent-<n>`; the user
//!   message that follows (the observation) becomes that call's result. The last action
//!   (`submit`) has no observation in `history`; its result is taken from `trajectory[n]`.
//!   Demonstration messages (`is_demo`) stay as user messages. 1.x histories with `tool_calls`
//!   and `role:"tool"` messages are read as structured calls and results.
//! * Errors name `history[i]` (no line numbers, except for JSON syntax errors).

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use compactbench_core::{Message, Part, Role, Usage};
use serde::{Deserialize, Serialize};

mod claude_code;
mod codex;
mod json;
mod media;
mod openhands;
mod pi;
mod swe_agent;

#[cfg(test)]
mod tests;

pub use media::MEDIA_FALLBACK_TOKENS;

/// A transcript format. Serializes as its [`Format::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Claude Code session JSONL (1.x and 2.x).
    ClaudeCode,
    /// Codex CLI rollout JSONL.
    Codex,
    /// Pi coding agent session JSONL (v1 linear, v2/v3 tree).
    Pi,
    /// OpenHands evaluation `output.jsonl` (one row per line, `history[]` events).
    OpenHands,
    /// SWE-agent `.traj` JSON document.
    SweAgent,
}

impl Format {
    /// All formats, in a stable order.
    pub const ALL: [Format; 5] = [
        Format::ClaudeCode,
        Format::Codex,
        Format::Pi,
        Format::OpenHands,
        Format::SweAgent,
    ];

    /// Canonical name, as accepted by [`FromStr`]: `claude-code`, `codex`, `pi`, `openhands`,
    /// `swe-agent`.
    pub fn name(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::Pi => "pi",
            Format::OpenHands => "openhands",
            Format::SweAgent => "swe-agent",
        }
    }

    /// Guesses the format from the first bytes of a file (a few KiB are enough; [`import`] passes
    /// up to 64 KiB). Looks at the first line as JSON when it is complete, else at key names.
    /// Returns `None` when nothing matches.
    pub fn detect(head: &[u8]) -> Option<Format> {
        let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
        let start = head.iter().position(|b| !b.is_ascii_whitespace())?;
        let head = &head[start..];
        if let Some(end) = head.iter().position(|&b| b == b'\n') {
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&head[..end]) {
                if let Some(f) = detect_value(&v) {
                    return Some(f);
                }
            }
        } else if let Ok(v) = serde_json::from_slice::<serde_json::Value>(head) {
            if let Some(f) = detect_value(&v) {
                return Some(f);
            }
        }
        let text = String::from_utf8_lossy(&head[..head.len().min(64 * 1024)]);
        let has_type = |t: &str| {
            text.contains(&format!("\"type\":\"{t}\""))
                || text.contains(&format!("\"type\": \"{t}\""))
        };
        if text.starts_with('{')
            && text.contains("\"instance_id\"")
            && !text.contains("\"trajectory\"")
        {
            Some(Format::OpenHands)
        } else if text.contains("\"trajectory\"") {
            Some(Format::SweAgent)
        } else if has_type("session_meta") || has_type("response_item") || has_type("turn_context")
        {
            Some(Format::Codex)
        } else if text.contains("\"isSidechain\"") || text.contains("\"sessionId\"") {
            Some(Format::ClaudeCode)
        } else if has_type("session") {
            Some(Format::Pi)
        } else if text.starts_with('{') && text.contains("\"history\"") && text.contains("\"role\"")
        {
            Some(Format::SweAgent)
        } else {
            None
        }
    }
}

fn detect_value(v: &serde_json::Value) -> Option<Format> {
    let obj = v.as_object()?;
    if let Some(t) = obj.get("type").and_then(|t| t.as_str()) {
        match t {
            "session_meta" | "response_item" | "turn_context" | "event_msg" | "compacted" => {
                return Some(Format::Codex)
            }
            _ => {}
        }
        if obj.contains_key("sessionId")
            || obj.contains_key("isSidechain")
            || obj.contains_key("leafUuid")
        {
            return Some(Format::ClaudeCode);
        }
        return match t {
            "session" | "message" | "model_change" | "thinking_level_change" | "compaction" => {
                Some(Format::Pi)
            }
            "user" | "assistant" | "system" | "summary" => Some(Format::ClaudeCode),
            _ => None,
        };
    }
    if obj.contains_key("history")
        && (obj.contains_key("instance_id") || obj.contains_key("instance"))
    {
        return Some(Format::OpenHands);
    }
    if obj.contains_key("trajectory") || obj.contains_key("history") {
        return Some(Format::SweAgent);
    }
    None
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;

    /// Parses a format name (case-insensitive; `_` and `-` interchangeable). Accepts the
    /// canonical names plus `claude`, `cc`, `codex-cli`, `pi-mono`, `open-hands`, `sweagent`,
    /// `swe`. `auto` is not a format: the caller handles it by passing `None`.
    fn from_str(s: &str) -> Result<Format, String> {
        let norm = s.trim().to_ascii_lowercase().replace('_', "-");
        Ok(match norm.as_str() {
            "claude-code" | "claude" | "cc" | "claudecode" => Format::ClaudeCode,
            "codex" | "codex-cli" => Format::Codex,
            "pi" | "pi-mono" => Format::Pi,
            "openhands" | "open-hands" => Format::OpenHands,
            "swe-agent" | "sweagent" | "swe" => Format::SweAgent,
            _ => {
                return Err(format!(
                    "unknown transcript format `{s}` (expected one of: claude-code, codex, pi, openhands, swe-agent)"
                ))
            }
        })
    }
}

/// How to import.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// The format, or `None` to detect it from the file's first bytes.
    pub format: Option<Format>,
    /// Skip malformed lines (counting them in [`Stats::skipped_lines`]) instead of failing.
    pub lenient: bool,
    /// OpenHands only: which row (0-based line) of a multi-row `output.jsonl` to import.
    pub row: usize,
}

/// The result of an import.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Imported {
    /// The format read.
    pub format: Format,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Counts.
    pub stats: Stats,
    /// Compactions the harness recorded, in order.
    pub recorded: Vec<RecordedCompaction>,
}

/// Counts gathered while importing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Physical lines read, blank lines included (for a SWE-agent `.traj`, the document's lines).
    pub lines: usize,
    /// Messages imported (`messages.len()`).
    pub messages: usize,
    /// Tool calls in `messages`.
    pub tool_calls: usize,
    /// Calls answered by exactly one later result.
    pub tool_pairs: usize,
    /// Calls in `messages` without a result.
    pub unpaired_calls: usize,
    /// Results in `messages` without an earlier call.
    pub unpaired_results: usize,
    /// Claude Code sub-agent (`isSidechain`) lines, kept out of `messages`.
    pub sidechain_lines: usize,
    /// Malformed lines (or OpenHands / SWE-agent events) skipped in lenient mode.
    pub skipped_lines: usize,
    /// [`Part::Reasoning`] parts in `messages`.
    pub reasoning_parts: usize,
    /// Bytes of opaque (encrypted or redacted) reasoning, replaced by placeholders.
    pub opaque_reasoning_bytes: u64,
    /// [`Part::Media`] parts in `messages`.
    pub media_parts: usize,
    /// Well-formed lines or items that carry no message (headers, settings, UI events, titles).
    pub metadata_lines: usize,
    /// Tool calls present in the file but not imported: sidechain lines, dropped turns.
    pub excluded_tool_calls: usize,
    /// Messages present in the file but not imported: Pi aborted/errored turns and entries off
    /// the active branch, OpenHands responses or results that never paired, empty user lines.
    pub dropped_messages: usize,
    /// Tool results the importer made up, as the harness does, for calls left unanswered.
    pub synthetic_results: usize,
    /// Content parts of unknown type, dropped.
    pub unknown_parts: usize,
}

/// A compaction the harness itself performed, as recorded in the file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedCompaction {
    /// Index in `messages` of the first message after the compaction (for Claude Code, the
    /// summary message itself).
    pub message_index: usize,
    /// What triggered it (`auto`, `manual`) when the format says.
    pub trigger: Option<String>,
    /// Context size in tokens before compacting, when the format says.
    pub tokens_before: Option<u64>,
    /// The summary text, when the format holds it.
    pub summary: Option<String>,
    /// Index in `messages` of the first message kept verbatim, when the format says which entry
    /// was kept first (Pi).
    pub first_kept_message: Option<usize>,
    /// The harness release that made it, when the format says (Claude Code's `version`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// When it was made, as the format writes it (Pi: the compaction entry's `timestamp`, ISO
    /// 8601 in UTC); Pi's files name no release, and this dates the one that made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_at: Option<String>,
}

/// Why an import failed. Displays as `path:line: message` (or `path: message`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, when the error belongs to one.
    pub line: Option<usize>,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.path.display(), line, self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for ImportError {}

/// Bytes read for format detection.
const HEAD_BYTES: u64 = 64 * 1024;

/// Imports one transcript file.
///
/// With `options.format == None` the format is detected from the first 64 KiB
/// ([`Format::detect`]). See the crate docs for each format's mapping.
pub fn import(path: &Path, options: &Options) -> Result<Imported, ImportError> {
    let err = |line: Option<usize>, message: String| ImportError {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut file = File::open(path).map_err(|e| err(None, format!("cannot open: {e}")))?;
    let mut head = Vec::new();
    (&mut file)
        .take(HEAD_BYTES)
        .read_to_end(&mut head)
        .map_err(|e| err(None, format!("cannot read: {e}")))?;
    if head.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(err(None, "empty file".into()));
    }
    let format = match options.format {
        Some(f) => f,
        None => Format::detect(&head).ok_or_else(|| {
            err(None, "cannot detect the transcript format (pass one of: claude-code, codex, pi, openhands, swe-agent)".into())
        })?,
    };
    let reader = BufReader::new(Cursor::new(head).chain(file));
    let mut ctx = Ctx {
        path,
        lenient: options.lenient,
        stats: Stats::default(),
        recognized: 0,
    };
    let (messages, recorded) = match format {
        Format::ClaudeCode => claude_code::import(reader, &mut ctx)?,
        Format::Codex => codex::import(reader, &mut ctx)?,
        Format::Pi => pi::import(reader, &mut ctx)?,
        Format::OpenHands => openhands::import(reader, &mut ctx, options.row)?,
        Format::SweAgent => swe_agent::import(reader, &mut ctx)?,
    };
    if ctx.recognized == 0 {
        let what = if ctx.stats.skipped_lines > 0 {
            "no valid entries"
        } else {
            "no entries"
        };
        return Err(err(
            None,
            format!("{what} of format {format} found (is this a {format} file?)"),
        ));
    }
    let mut stats = ctx.stats;
    finalize(&messages, &mut stats);
    Ok(Imported {
        format,
        messages,
        stats,
        recorded,
    })
}

/// Per-import state shared by the format modules.
pub(crate) struct Ctx<'a> {
    pub(crate) path: &'a Path,
    pub(crate) lenient: bool,
    pub(crate) stats: Stats,
    /// Entries of the expected format seen; 0 at the end means "not this format".
    pub(crate) recognized: usize,
}

/// Why a line could not be used.
pub(crate) enum Fail {
    /// The line is malformed: an error, or skipped in lenient mode.
    Line(String),
    /// The file cannot be imported at all.
    Fatal(String),
}

impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail::Line(s)
    }
}

impl Ctx<'_> {
    pub(crate) fn error(&self, line: Option<usize>, message: impl Into<String>) -> ImportError {
        ImportError {
            path: self.path.to_path_buf(),
            line,
            message: message.into(),
        }
    }

    /// Handles a failed line: in lenient mode counts it, else returns the error.
    pub(crate) fn fail(&mut self, line: Option<usize>, fail: Fail) -> Result<(), ImportError> {
        match fail {
            Fail::Line(_) if self.lenient => {
                self.stats.skipped_lines += 1;
                Ok(())
            }
            Fail::Line(msg) | Fail::Fatal(msg) => Err(self.error(line, msg)),
        }
    }

    /// Reads `reader` line by line, calling `f(ctx, line_no, text)` for every non-blank line
    /// (1-based numbers, `\r` stripped). Invalid UTF-8 and read errors are line failures.
    pub(crate) fn each_line<R: BufRead>(
        &mut self,
        mut reader: R,
        mut f: impl FnMut(&mut Self, usize, &str) -> Result<(), Fail>,
    ) -> Result<(), ImportError> {
        let mut buf = Vec::new();
        let mut line_no = 0usize;
        loop {
            buf.clear();
            let n = match reader.read_until(b'\n', &mut buf) {
                Ok(n) => n,
                Err(e) => return Err(self.error(Some(line_no + 1), format!("read error: {e}"))),
            };
            if n == 0 {
                return Ok(());
            }
            line_no += 1;
            self.stats.lines += 1;
            let mut bytes = &buf[..];
            if let Some(b) = bytes.strip_suffix(b"\n") {
                bytes = b;
            }
            if let Some(b) = bytes.strip_suffix(b"\r") {
                bytes = b;
            }
            if line_no == 1 {
                if let Some(b) = bytes.strip_prefix(b"\xEF\xBB\xBF") {
                    bytes = b;
                }
            }
            if bytes.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            let result = match std::str::from_utf8(bytes) {
                Ok(text) => f(self, line_no, text),
                Err(e) => Err(Fail::Line(format!(
                    "invalid UTF-8 at byte {}",
                    e.valid_up_to()
                ))),
            };
            if let Err(fail) = result {
                self.fail(Some(line_no), fail)?;
            }
        }
    }
}

/// Fills the counts that follow from `messages`.
fn finalize(messages: &[Message], stats: &mut Stats) {
    use std::collections::HashMap;
    stats.messages = messages.len();
    let mut open: HashMap<&str, usize> = HashMap::new();
    for m in messages {
        for p in &m.parts {
            match p {
                Part::ToolCall { id, .. } => {
                    stats.tool_calls += 1;
                    *open.entry(id.as_str()).or_default() += 1;
                }
                Part::ToolResult { call_id, .. } => match open.get_mut(call_id.as_str()) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        stats.tool_pairs += 1;
                    }
                    _ => stats.unpaired_results += 1,
                },
                Part::Reasoning { .. } => stats.reasoning_parts += 1,
                Part::Media { .. } => stats.media_parts += 1,
                Part::Text { .. } => {}
            }
        }
    }
    stats.unpaired_calls = open.values().sum();
}

/// Placeholder text for opaque reasoning of `bytes` bytes.
pub(crate) fn opaque_placeholder(bytes: usize) -> String {
    format!("[encrypted reasoning: {bytes} bytes]")
}

/// A tool message with one result and any media returned with it.
pub(crate) fn tool_message(
    call_id: String,
    name: String,
    text: String,
    is_error: bool,
    media: Vec<Part>,
) -> Message {
    let mut parts = vec![Part::ToolResult {
        call_id,
        name,
        text,
        is_error,
    }];
    parts.extend(media);
    Message::new(Role::Tool, parts)
}

/// Usage from uncached input, cache writes, cache reads and output.
pub(crate) fn usage(input: u64, cache_write: u64, cache_read: u64, output: u64) -> Usage {
    Usage {
        input,
        output,
        cache_read,
        cache_write,
    }
}
