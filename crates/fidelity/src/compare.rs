//! Comparing the two answers for one case.

use serde::Serialize;

use crate::Answer;

/// How the two sides' answers relate for one case.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Same trigger decision.
    pub trigger: bool,
    /// Same selection (first kept entry / kept set / split-turn flag), where both selected.
    pub selection: Option<bool>,
    /// Same tokens-before estimate, where both gave one.
    pub tokens_before: Option<bool>,
}

impl Verdict {
    /// Whether trigger and selection agree (tokens-before is reported, not required: several
    /// originals estimate the context from the provider's usage plus a trailing estimate,
    /// which the checks on trigger and selection already exercise).
    pub fn agrees(&self) -> bool {
        self.trigger && self.selection != Some(false)
    }
}

/// Compares our answer with the original's.
pub fn compare(ours: &Answer, theirs: &Answer) -> Verdict {
    let selected = |a: &Answer| a.first_kept.is_some() || a.kept.is_some();
    let selection = (selected(ours) && selected(theirs)).then(|| {
        let mut same = ours.first_kept == theirs.first_kept && ours.kept == theirs.kept;
        if ours.split_turn.is_some() && theirs.split_turn.is_some() {
            same &= ours.split_turn == theirs.split_turn;
        }
        same
    });
    let tokens_before = (ours.tokens_before.is_some() && theirs.tokens_before.is_some()).then(|| ours.tokens_before == theirs.tokens_before);
    Verdict { trigger: ours.compact == theirs.compact, selection, tokens_before }
}

#[cfg(test)]
mod tests {
    use compactbench_core::EntryId;

    use super::*;

    #[test]
    fn selection_is_compared_only_where_both_select() {
        let ours = Answer { compact: true, first_kept: Some(EntryId(4)), ..Answer::default() };
        let none = Answer { compact: true, ..Answer::default() };
        assert_eq!(compare(&ours, &none), Verdict { trigger: true, selection: None, tokens_before: None });
        let other = Answer { compact: false, first_kept: Some(EntryId(5)), ..Answer::default() };
        let v = compare(&ours, &other);
        assert_eq!(v, Verdict { trigger: false, selection: Some(false), tokens_before: None });
        assert!(!v.agrees());
        let split = Answer { split_turn: Some(true), ..ours.clone() };
        let whole = Answer { split_turn: Some(false), ..ours.clone() };
        assert_eq!(compare(&split, &whole).selection, Some(false));
        assert!(compare(&split, &ours).agrees(), "a flag only one side reports is not compared");
    }
}
