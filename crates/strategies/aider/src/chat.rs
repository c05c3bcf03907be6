//! Aider's chat as plain text: the SEARCH/REPLACE blocks its model writes, the shell blocks it
//! suggests, and the user-role messages aider itself adds to the chat (command output, edit
//! confirmations, the failed-match reflection). Aider sends no native tool calls; [`AiderChat`]
//! writes these formats (the chat shape the strategy declares, `Strategy::text_chat`, in which a
//! runner replays sessions) and this module reads them back the way aider does (for
//! [`crate::session`]'s turn split).
//!
//! Sources, aider-chat 0.86.2:
//! - `aider/coders/editblock_prompts.py` (`EditBlockPrompts.system_reminder`, rules 1–8 and the
//!   empty-`SEARCH` rule for new files; `example_messages`).
//! - `aider/coders/editblock_coder.py`: `find_original_update_blocks`, `find_filename`,
//!   `strip_filename` and the `HEAD` / `DIVIDER` / `UPDATED` patterns (reading a reply);
//!   `EditBlockCoder.apply_edits` (the `# N SEARCH/REPLACE block(s) failed to match!`
//!   reflection).
//! - `aider/coders/base_coder.py`: `handle_shell_commands` (`Output from {command}`),
//!   `move_back_cur_messages` with `aider/coders/base_prompts.py`
//!   (`files_content_gpt_edits_no_repo`, the confirmation after applied edits).

use compactbench_core::{TextChat, TextEdit};

/// The fence aider uses unless a file in the chat holds triple backticks itself
/// (`DEFAULT_FENCE` in `editblock_coder.py`).
const FENCE: &str = "```";
const HEAD: &str = "<<<<<<< SEARCH";
const DIVIDER: &str = "=======";
const UPDATED: &str = ">>>>>>> REPLACE";

/// The opening of a command's output in the chat (`handle_shell_commands`).
const OUTPUT_FROM: &str = "Output from ";

/// The note aider adds as a user message once a reply's edits were applied, without git
/// (`files_content_gpt_edits_no_repo`, appended by `move_back_cur_messages`).
const EDITS_APPLIED: &str = "I updated the files.";

/// Fence openings `find_original_update_blocks` reads as a shell block.
const SHELL_STARTS: [&str; 12] =
    ["```bash", "```sh", "```shell", "```cmd", "```batch", "```powershell", "```ps1", "```zsh", "```fish", "```ksh", "```csh", "```tcsh"];

/// `text` as a block section holds it: whole lines, the last one newline-terminated
/// (`prep` in `editblock_coder.py`).
fn section(text: &str) -> String {
    if text.is_empty() || text.ends_with('\n') {
        text.to_owned()
    } else {
        format!("{text}\n")
    }
}

/// The language after the opening fence, from the file's extension (aider's model names the
/// language, `{fence[0]}python` in the prompt's examples; aider's parser ignores it).
fn fence_language(path: &str) -> &str {
    let extension = path.rsplit_once('.').map_or("", |(_, e)| e);
    match extension {
        "rs" => "rust",
        "py" => "python",
        "ts" | "tsx" => "typescript",
        "js" | "mjs" => "javascript",
        "md" => "markdown",
        "tex" => "latex",
        "h" => "c",
        e if e.contains('/') => "",
        e => e,
    }
}

/// One block as the prompt's rules ask for it: the path alone on a line, the opening fence
/// with the language, `<<<<<<< SEARCH`, the original lines, `=======`, the updated lines,
/// `>>>>>>> REPLACE`, the closing fence.
fn edit_block(edit: &TextEdit) -> String {
    let (path, original, updated) = (&edit.path, section(&edit.original), section(&edit.updated));
    format!("{path}\n{FENCE}{}\n{HEAD}\n{original}{DIVIDER}\n{updated}{UPDATED}\n{FENCE}", fence_language(path))
}

/// Aider's chat shape: the formats above, as aider-chat 0.86.2 writes them.
pub(crate) struct AiderChat;

impl TextChat for AiderChat {
    /// One SEARCH/REPLACE block per edit, a blank line apart.
    fn edits(&self, edits: &[TextEdit]) -> String {
        edits.iter().map(edit_block).collect::<Vec<_>>().join("\n\n")
    }

    /// In the fence `find_original_update_blocks` collects as a shell block.
    fn command(&self, line: &str) -> String {
        format!("{FENCE}bash\n{line}\n{FENCE}")
    }

    fn command_output(&self, command: &str, output: &str) -> String {
        format!("{OUTPUT_FROM}{command}\n{output}\n")
    }

    /// Aider's confirmation, then what the edit reported.
    fn edits_applied(&self, output: &str) -> String {
        format!("{EDITS_APPLIED}\n{output}")
    }

    /// The reflection aider sends when blocks failed to match. `error` stands where aider puts
    /// what it found in the file instead (`find_similar_lines`' "Did you mean" section), which
    /// a replayed session does not have.
    fn edits_failed(&self, edits: &[TextEdit], error: &str) -> String {
        let blocks = if edits.len() == 1 { "block" } else { "blocks" };
        let mut out = format!("# {} SEARCH/REPLACE {blocks} failed to match!\n", edits.len());
        for edit in edits {
            out.push_str(&format!(
                "\n## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in {}\n{HEAD}\n{}{DIVIDER}\n{}{UPDATED}\n\n",
                edit.path,
                section(&edit.original),
                section(&edit.updated),
            ));
        }
        if !error.trim().is_empty() {
            out.push_str(&section(error));
            out.push('\n');
        }
        out.push_str(
            "The SEARCH section must exactly match an existing block of lines including all white space, comments, indentation, docstrings, etc\n",
        );
        out
    }

    fn edited_files(&self, reply: &str) -> Option<Vec<String>> {
        edited_files(reply)
    }
}

/// Whether a user message is one aider adds itself in the course of one exchange (command
/// output, the confirmation of applied edits, the failed-match reflection), not a new request.
pub(crate) fn is_aider_feedback(text: &str) -> bool {
    text.starts_with(OUTPUT_FROM) || text.starts_with(EDITS_APPLIED) || is_failed_match(text)
}

/// `# N SEARCH/REPLACE block(s) failed to match!` opens the text.
fn is_failed_match(text: &str) -> bool {
    let Some(rest) = text.strip_prefix("# ") else { return false };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let rest = &rest[digits..];
    digits > 0
        && (rest.starts_with(" SEARCH/REPLACE block failed to match!")
            || rest.starts_with(" SEARCH/REPLACE blocks failed to match!"))
}

/// `line` (stripped) is 5 to 9 `mark`s followed by exactly `tail`.
fn marker(line: &str, mark: char, tails: &[&str]) -> bool {
    let run = line.chars().take_while(|c| *c == mark).count();
    (5..=9).contains(&run) && tails.contains(&&line[run..])
}

fn is_head(line: &str) -> bool {
    marker(line.trim(), '<', &[" SEARCH", " SEARCH>"])
}

fn is_divider(line: &str) -> bool {
    marker(line.trim(), '=', &[""])
}

fn is_updated(line: &str) -> bool {
    marker(line.trim(), '>', &[" REPLACE"])
}

/// `strip_filename`: the file a line before a block names, if any.
fn strip_filename(line: &str) -> Option<&str> {
    let line = line.trim();
    if line == "..." {
        return None;
    }
    if let Some(candidate) = line.strip_prefix(FENCE) {
        return (!candidate.is_empty() && (candidate.contains('.') || candidate.contains('/'))).then_some(candidate);
    }
    let name = line.trim_end_matches(':').trim_start_matches('#').trim().trim_matches('`').trim_matches('*');
    (!name.is_empty()).then_some(name)
}

/// `find_filename`: up to three lines back from a block's head, past fence lines.
fn find_filename(before: &[&str]) -> Option<String> {
    for line in before.iter().rev().take(3) {
        if let Some(name) = strip_filename(line) {
            return Some(name.to_owned());
        }
        if !line.starts_with(FENCE) {
            break;
        }
    }
    None
}

/// The files a reply edits, read as `find_original_update_blocks` reads it: one path per
/// SEARCH/REPLACE block; shell blocks are skipped. `None` when the reply is malformed (a block
/// without a file, `=======` or `>>>>>>> REPLACE`): aider then raises `ValueError` in
/// `get_edits` and applies nothing.
pub(crate) fn edited_files(reply: &str) -> Option<Vec<String>> {
    let lines: Vec<&str> = reply.split_inclusive('\n').collect();
    let mut files = Vec::new();
    let mut current: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let next_is_block =
            lines.get(i + 1).is_some_and(|l| is_head(l)) || lines.get(i + 2).is_some_and(|l| is_head(l));
        if SHELL_STARTS.iter().any(|s| line.trim().starts_with(s)) && !next_is_block {
            i += 1;
            while i < lines.len() && !lines[i].trim().starts_with(FENCE) {
                i += 1;
            }
            // Past the closing fence, if there is one.
            i += 1;
            continue;
        }
        if is_head(line) {
            let file = find_filename(&lines[i.saturating_sub(3)..i]).or_else(|| current.clone())?;
            current = Some(file.clone());
            i += 1;
            while i < lines.len() && !is_divider(lines[i]) {
                i += 1;
            }
            i += 1;
            while i < lines.len() && !(is_updated(lines[i]) || is_divider(lines[i])) {
                i += 1;
            }
            if i >= lines.len() {
                return None;
            }
            files.push(file);
        }
        i += 1;
    }
    Some(files)
}
