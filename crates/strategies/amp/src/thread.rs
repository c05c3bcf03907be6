//! Threads: deterministic ids, the lineage recorded in handoff checkpoints, and the stored
//! Markdown form of a thread that `read_thread` and the probes read back.

use compactbench_core::{CheckpointKind, Log, Message, Origin, Part, Role, View};

/// Amp's thread URL prefix; a thread is stored under its URL.
pub(crate) const THREAD_URL: &str = "https://ampcode.com/threads/";

const HEADER: &str = "# Amp thread ";
const PARENT: &str = "Parent thread: ";
const MESSAGE: &str = "### message ";
const SEP: &str = " · ";
const SUMMARY_LABEL: &str = "handoff summary (orientation only)";

/// 64-bit FNV-1a, continued from `hash`.
fn fnv(mut hash: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The id of thread number `number` (1 = the session's first) of the session whose first
/// message is `seed`: `T-` and a UUID (version 4 layout) derived from both, so a replay always
/// names the same threads.
pub(crate) fn thread_id(seed: &str, number: u64) -> String {
    let base = fnv(0xcbf2_9ce4_8422_2325, seed.as_bytes());
    let h1 = fnv(base, &number.to_le_bytes());
    let h2 = fnv(h1, b"amp-thread");
    format!(
        "T-{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        h1 >> 32,
        (h1 >> 16) & 0xffff,
        h1 & 0xfff,
        0x8000 | ((h2 >> 48) & 0x3fff),
        h2 & 0xffff_ffff_ffff
    )
}

/// The store key (thread URL) of a thread given by id or URL.
pub(crate) fn url(thread: &str) -> String {
    if thread.starts_with(THREAD_URL) {
        thread.to_owned()
    } else {
        format!("{THREAD_URL}{thread}")
    }
}

/// The active thread of a session, from its newest handoff checkpoint.
pub(crate) struct Lineage {
    /// Id of the active thread.
    pub(crate) current: String,
    /// Its number (1 = the first thread).
    pub(crate) number: u64,
    /// The goal it was started with, if it was started by a handoff.
    pub(crate) goal: Option<String>,
    /// Its parent's id.
    pub(crate) parent: Option<String>,
    /// The session's first message, which seeds every id.
    pub(crate) seed: String,
}

pub(crate) fn lineage(log: &Log) -> Lineage {
    let seed = log.messages().next().map(|(_, m)| m.searchable_text()).unwrap_or_default();
    let last = log.checkpoints().rev().find(|(_, cp)| cp.kind == CheckpointKind::Handoff).map(|(_, cp)| &cp.details);
    match last {
        Some(d) => Lineage {
            current: d["thread_id"].as_str().unwrap_or_default().to_owned(),
            number: d["number"].as_u64().unwrap_or(1),
            goal: d["goal"].as_str().map(str::to_owned),
            parent: d["parent_thread_id"].as_str().map(str::to_owned),
            seed,
        },
        None => Lineage { current: thread_id(&seed, 1), number: 1, goal: None, parent: None, seed },
    }
}

/// Whether the thread holds a message of its own beyond the system prompt and its seed.
pub(crate) fn has_new_messages(view: &View) -> bool {
    view.messages.iter().any(|m| m.origin.entry().is_some() && m.message.role != Role::System)
}

fn body(message: &Message) -> String {
    let parts: Vec<String> = message
        .parts
        .iter()
        .map(|part| match part {
            Part::Text { text } => text.clone(),
            Part::Reasoning { text } => format!("(thinking) {text}"),
            Part::ToolCall { name, args, .. } => format!("tool call, attempted (not an outcome): {name} {args}"),
            Part::ToolResult { name, text, is_error: true, .. } => format!("observed output of {name} (error, the attempt failed): {text}"),
            Part::ToolResult { name, text, .. } => format!("observed output of {name}: {text}"),
            Part::Media { mime, .. } => format!("[{mime}]"),
        })
        .collect();
    parts.join("\n")
}

/// The thread (a working view) as stored: the id and parent, then every message under a
/// heading with its position in the thread and its role.
pub(crate) fn render(id: &str, parent: Option<&str>, view: &View) -> String {
    let mut out = format!("{HEADER}{id}\n{PARENT}{}\n", parent.unwrap_or("none"));
    for (i, vm) in view.messages.iter().enumerate() {
        out.push_str(&format!("\n{MESSAGE}{i}{SEP}{}", vm.message.role.as_str()));
        if matches!(vm.origin, Origin::Summary(_)) {
            out.push_str(SEP);
            out.push_str(SUMMARY_LABEL);
        }
        out.push('\n');
        out.push_str(&body(&vm.message));
        out.push('\n');
    }
    out
}

/// One message of a stored thread.
pub(crate) struct StoredMessage {
    /// Position in its thread.
    pub(crate) index: usize,
    /// Role name.
    pub(crate) role: String,
    /// Whether it is the thread's handoff summary.
    pub(crate) summary: bool,
    /// The rendered content.
    pub(crate) body: String,
}

/// A stored thread read back.
pub(crate) struct StoredThread {
    pub(crate) id: String,
    pub(crate) parent: Option<String>,
    pub(crate) messages: Vec<StoredMessage>,
}

fn heading(line: &str) -> Option<(usize, String, bool)> {
    let rest = line.strip_prefix(MESSAGE)?;
    let mut fields = rest.split(SEP);
    let index = fields.next()?.parse().ok()?;
    let role = fields.next()?;
    if !matches!(role, "system" | "user" | "assistant" | "tool") {
        return None;
    }
    Some((index, role.to_owned(), fields.next() == Some(SUMMARY_LABEL)))
}

/// Parses what [`render`] wrote; `None` if `text` is not a stored thread.
pub(crate) fn parse(text: &str) -> Option<StoredThread> {
    let mut lines = text.lines();
    let id = lines.next()?.strip_prefix(HEADER)?.to_owned();
    let parent = lines.next()?.strip_prefix(PARENT)?;
    let parent = (parent != "none").then(|| parent.to_owned());
    let mut messages: Vec<StoredMessage> = Vec::new();
    for line in lines {
        if let Some((index, role, summary)) = heading(line) {
            messages.push(StoredMessage { index, role, summary, body: String::new() });
        } else if let Some(m) = messages.last_mut() {
            if !m.body.is_empty() || !line.is_empty() {
                m.body.push_str(line);
                m.body.push('\n');
            }
        }
    }
    for m in &mut messages {
        // `render` ends every message with a newline and a blank line before the next heading.
        m.body.truncate(m.body.trim_end_matches('\n').len());
    }
    Some(StoredThread { id, parent, messages })
}
