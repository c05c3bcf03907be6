//! Shrinking a disagreeing case to the smallest session that still disagrees.
//!
//! A session is cut into blocks that stay valid on their own: the system prompt (never
//! removed), a user message, or an assistant message with the tool results that answer it.
//! Blocks are removed by halving chunk sizes (delta debugging's complement step) while the
//! predicate still holds, up to a budget of predicate calls (each one is a driver round trip).

use compactbench_core::{Entry, Log, Role};

use crate::Case;

/// Predicate calls allowed per minimization.
pub const BUDGET: usize = 300;

/// Blocks of entry indices: system and checkpoints first (kept), then removable blocks.
fn blocks(log: &Log) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut fixed = Vec::new();
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (id, e) in log.entries() {
        let i = id.index();
        match e {
            Entry::Checkpoint(_) => fixed.push(i),
            Entry::Message(m) if m.role == Role::System && out.is_empty() => fixed.push(i),
            Entry::Message(m) if m.role == Role::Tool && !out.is_empty() => out.last_mut().expect("checked").push(i),
            Entry::Message(_) => out.push(vec![i]),
        }
    }
    (fixed, out)
}

/// The case with only the entries in `keep` (sorted), renumbered.
fn with_entries(case: &Case, keep: &[usize]) -> Option<Case> {
    // Checkpoints point at entry ids; renumbering would break them, so sessions with
    // checkpoints are shrunk only in their messages after the last checkpoint.
    let mut log = Log::new();
    for &i in keep {
        match case.log.entries().nth(i)?.1 {
            Entry::Message(m) => {
                log.push_message(m.clone());
            }
            Entry::Checkpoint(_) => return None,
        }
    }
    Some(Case {
        id: format!("{}/min{}", case.id, keep.len()),
        log,
        model: case.model.clone(),
        session: case.session.clone(),
        classes: case.classes.clone(),
        setting: case.setting,
    })
}

/// The smallest case found that still satisfies `still_fails`, and the number of calls made.
pub fn minimize(case: &Case, mut still_fails: impl FnMut(&Case) -> bool) -> (Case, usize) {
    if case.log.checkpoints().next().is_some() {
        return (case.clone(), 0);
    }
    let (fixed, mut blocks) = blocks(&case.log);
    let mut calls = 0;
    let mut chunk = blocks.len().div_ceil(2).max(1);
    let mut best = case.clone();
    while chunk >= 1 && calls < BUDGET {
        let mut start = 0;
        let mut shrunk = false;
        while start < blocks.len() && calls < BUDGET {
            let end = (start + chunk).min(blocks.len());
            let mut trial: Vec<usize> = fixed.clone();
            trial.extend(blocks[..start].iter().chain(&blocks[end..]).flatten().copied());
            trial.sort_unstable();
            if blocks.len() - (end - start) == 0 {
                start = end;
                continue;
            }
            if let Some(candidate) = with_entries(case, &trial) {
                calls += 1;
                if still_fails(&candidate) {
                    blocks.drain(start..end);
                    best = candidate;
                    shrunk = true;
                    continue;
                }
            }
            start = end;
        }
        if !shrunk {
            if chunk == 1 {
                break;
            }
            chunk = chunk.div_ceil(2).min(chunk - 1).max(1);
        } else {
            chunk = chunk.min(blocks.len().div_ceil(2)).max(1);
        }
    }
    (best, calls)
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Message, ModelProfile, Shape};

    use super::*;

    fn case(n: usize) -> Case {
        let mut messages = vec![Message::system("sys")];
        for i in 0..n {
            messages.push(Message::user(format!("u{i}")));
            messages.push(Message::tool_call(format!("c{i}"), "read", serde_json::json!({})));
            messages.push(Message::tool_result(format!("c{i}"), "read", format!("r{i}"), false));
        }
        let model = ModelProfile { name: "m".into(), window: 1000, max_output: 100, provider: Shape::Anthropic, pricing: Default::default() };
        Case::new("t", Log::from_messages(messages), model)
    }

    #[test]
    fn shrinks_to_the_blocks_the_predicate_needs_and_keeps_pairs_whole() {
        let big = case(20);
        let needs = |c: &Case| {
            let texts: Vec<String> = c.log.messages().map(|(_, m)| m.searchable_text()).collect();
            texts.iter().any(|t| t.contains("u7")) && texts.iter().any(|t| t.contains("r13"))
        };
        let (small, calls) = minimize(&big, needs);
        assert!(calls > 0 && calls <= BUDGET);
        let roles: Vec<Role> = small.log.messages().map(|(_, m)| m.role).collect();
        assert_eq!(roles, [Role::System, Role::User, Role::Assistant, Role::Tool], "u7 alone, and the call whose result is r13");
        assert!(needs(&small));
    }
}
