//! What a tool call does, whatever a harness named the tool.
//!
//! A session is recorded with one harness's tool names (generated sessions use Pi's: `read`,
//! `edit`, `write`, `grep`, `ls`, `bash`). Strategies whose original keys behaviour on its own
//! tool names (Pi's file lists, Cline's duplicate-read fold, Claude Code's recent files) map a
//! call through [`tool_kind`], so the same action is recognized whichever harness recorded it.

/// What a tool does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolKind {
    /// Reads a file.
    Read,
    /// Creates or overwrites a file.
    Write,
    /// Edits part of a file.
    Edit,
    /// Searches file contents or names.
    Search,
    /// Lists a directory.
    List,
    /// Runs a shell command.
    Shell,
    /// Anything else.
    Other,
}

/// The kind of the tool named `name`, from the names used by Pi, Claude Code, Codex, OpenCode,
/// Cline, Gemini CLI, Goose, Kimi CLI, OpenHands and Cursor (case-insensitive).
pub fn tool_kind(name: &str) -> ToolKind {
    match name.to_ascii_lowercase().as_str() {
        "read" | "read_file" | "readfile" | "view" | "cat" | "read_many_files" | "view_file" => ToolKind::Read,
        "write" | "write_file" | "write_to_file" | "create_file" | "create" => ToolKind::Write,
        "edit" | "multiedit" | "edit_file" | "replace_in_file" | "replace" | "str_replace" | "str_replace_editor"
        | "str_replace_based_edit_tool" | "apply_patch" | "patch" | "search_replace" => ToolKind::Edit,
        "grep" | "glob" | "rg" | "ripgrep" | "find" | "search" | "search_files" | "search_file_content"
        | "codebase_search" | "file_search" | "grep_search" => ToolKind::Search,
        "ls" | "list" | "list_files" | "list_directory" | "list_dir" => ToolKind::List,
        "bash" | "shell" | "sh" | "execute_command" | "run_shell_command" | "exec_command" | "run_terminal_cmd"
        | "terminal" | "local_shell" | "execute_bash" | "cmd_run" => ToolKind::Shell,
        _ => ToolKind::Other,
    }
}

/// The file path a call's arguments name, under the keys harnesses use for it.
pub fn tool_path(args: &serde_json::Value) -> Option<&str> {
    ["path", "file_path", "filePath", "absolute_path", "absolutePath", "target_file"]
        .iter()
        .find_map(|k| args.get(k).and_then(|v| v.as_str()))
        .filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_action_under_other_harnesses_names() {
        for n in ["read", "Read", "read_file"] {
            assert_eq!(tool_kind(n), ToolKind::Read, "{n}");
        }
        for n in ["edit", "MultiEdit", "replace_in_file", "apply_patch"] {
            assert_eq!(tool_kind(n), ToolKind::Edit, "{n}");
        }
        assert_eq!(tool_kind("write_to_file"), ToolKind::Write);
        assert_eq!(tool_kind("Grep"), ToolKind::Search);
        assert_eq!(tool_kind("execute_command"), ToolKind::Shell);
        assert_eq!(tool_kind("todo_write"), ToolKind::Other);
        assert_eq!(tool_path(&serde_json::json!({"file_path": "a.rs"})), Some("a.rs"));
        assert_eq!(tool_path(&serde_json::json!({"path": ""})), None);
    }
}
