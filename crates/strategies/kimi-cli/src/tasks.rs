//! The background-task note Kimi CLI appends after a compaction in the root agent
//! (`build_active_task_snapshot`, `background/summary.py`; `KimiSoul.compact_context`).

use compactbench_core::{Message, Part, Role};

use crate::prompt;

/// `build_active_task_snapshot` keeps at most this many running tasks.
const LIMIT: usize = 20;

/// The user message listing the running tasks (each given as its `task_id: …` block), or
/// `None` when no task runs.
pub(crate) fn active_task_message(tasks: &[String]) -> Option<Message> {
    if tasks.is_empty() {
        return None;
    }
    let tasks = &tasks[..tasks.len().min(LIMIT)];
    let mut lines = vec![format!("active_background_tasks: {}", tasks.len()), String::new()];
    for (i, task) in tasks.iter().enumerate() {
        lines.extend([format!("[{}]", i + 1), task.clone(), String::new()]);
    }
    let list = lines.join("\n").trim_end().to_owned();
    let snapshot = format!("<active-background-tasks>\n{list}\n</active-background-tasks>");
    Some(Message::new(Role::User, vec![Part::text(prompt::ACTIVE_TASKS_NOTE), Part::text(snapshot)]))
}
