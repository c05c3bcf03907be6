//! The deleted range and the view built from it (`getNextTruncationRange`,
//! `getAndAlterTruncatedMessages`, the two truncation notices in `ContextManager.ts`).

use crate::history::{ClineMessage, Speaker};
use crate::state::{BlockEdit, EditType, MessageEdits, State};

/// Start of `formatResponse.contextTruncationNotice()` (literal); the rest is paraphrased.
pub(crate) const TRUNCATION_NOTICE: &str = "[NOTE] Some previous conversation history with the user has been removed to maintain optimal context window length. The user's first task message was kept so the work stays continuous, but the conversation in between is gone. Keep that in mind as you go on helping, and focus on the user's most recent messages.";

/// `formatResponse.processFirstUserMessageForTruncation()` (literal).
pub(crate) const FIRST_USER_REPLACEMENT: &str = "[Continue assisting the user!]";

/// How much of the visible history after the first pair survives a truncation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Remove everything (auto-condense, accepted manual condense).
    None,
    /// Keep the last two messages (manual condense when the last stored message is an
    /// assistant's; no caller in this crate).
    #[cfg_attr(not(test), allow(dead_code))]
    LastTwo,
    /// Remove half, in whole pairs.
    Half,
    /// Remove three quarters, in whole pairs.
    Quarter,
}

/// `getNextTruncationRange`: the new inclusive range, always starting at 2 and growing from
/// the end of the current one; it ends on an assistant message where it can.
pub(crate) fn next_range(speakers: &[Speaker], current: Option<[i64; 2]>, keep: Keep) -> [i64; 2] {
    let start_of_rest = current.map_or(2, |[_, end]| end + 1);
    let n = speakers.len() as i64 - start_of_rest;
    let remove = match keep {
        Keep::None => n.max(0),
        Keep::LastTwo => (n - 2).max(0),
        // `Math.floor` of a possibly negative quotient.
        Keep::Half => n.div_euclid(4) * 2,
        Keep::Quarter => (n * 3).div_euclid(8) * 2,
    };
    let mut end = start_of_rest + remove - 1;
    if let Some(speaker) = usize::try_from(end).ok().and_then(|i| speakers.get(i)) {
        if *speaker != Speaker::Assistant {
            end -= 1;
        }
    }
    [2, end]
}

/// `applyStandardContextTruncationNoticeChange`: the notice replaces block 0 of message 1
/// unless message 1 has an edit already. Returns whether the store changed.
pub(crate) fn apply_truncation_notice(state: &mut State) -> bool {
    if state.edits.contains_key(&1) {
        return false;
    }
    let mut edits = MessageEdits::new(EditType::Undefined);
    edits.blocks.insert(0, vec![BlockEdit { text: TRUNCATION_NOTICE.to_owned(), files: None }]);
    state.edits.insert(1, edits);
    true
}

/// `applyFirstUserMessageReplacement`: the original task text (block 0 of message 0, if it is
/// a non-empty text block) becomes `[Continue assisting the user!]`, unless message 0 has an
/// edit already. Returns whether the store changed.
pub(crate) fn apply_first_user_replacement(history: &[ClineMessage], state: &mut State) -> bool {
    if state.edits.contains_key(&0) {
        return false;
    }
    let is_text = history
        .first()
        .and_then(|m| m.blocks.first())
        .is_some_and(|b| matches!(&b.part, compactbench_core::Part::Text { text } if !text.is_empty()));
    if !is_text {
        return false;
    }
    let mut edits = MessageEdits::new(EditType::Undefined);
    edits.blocks.insert(0, vec![BlockEdit { text: FIRST_USER_REPLACEMENT.to_owned(), files: None }]);
    state.edits.insert(0, edits);
    true
}

/// One message of the truncated view, with its Cline index.
pub(crate) struct Shown {
    pub(crate) index: usize,
    pub(crate) message: ClineMessage,
}

/// `getAndAlterTruncatedMessages` without the tool-result repair (that one runs on the
/// projected view, see `repair.rs`): the first pair, then everything after the deleted range
/// (its start is ignored); tool results stripped from the first message after a range; the
/// latest edit of every block applied.
pub(crate) fn truncated(history: &[ClineMessage], state: &State) -> Vec<Shown> {
    if history.len() <= 1 {
        return history.iter().enumerate().map(|(index, m)| Shown { index, message: m.clone() }).collect();
    }
    let start = state.start_of_rest();
    let mut shown: Vec<Shown> = history
        .iter()
        .enumerate()
        .filter(|(i, _)| *i < 2 || *i >= start)
        .map(|(index, m)| Shown { index, message: m.clone() })
        .collect();
    // Their tool_use blocks were in a removed assistant message.
    if start > 2 {
        if let Some(third) = shown.get_mut(2) {
            if third.message.speaker == Speaker::User && third.message.blocks.iter().any(|b| b.is_tool_result()) {
                third.message.blocks.retain(|b| !b.is_tool_result());
            }
        }
    }
    // Edits address blocks by position, after the strip above (as in source).
    for s in &mut shown {
        if let Some(edits) = state.edits.get(&s.index) {
            for (b, text) in edits.latest() {
                if let Some(block) = s.message.blocks.get_mut(b) {
                    block.set_text(text);
                }
            }
        }
    }
    shown
}
