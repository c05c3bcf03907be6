//! Comparing the two answers for one case.

use serde::Serialize;

use crate::Answer;

/// How the two sides' answers relate for one case. Strict where a side compacts: a part one
/// side answers and the other does not is a disagreement, not a part left out (see [`compare`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Same trigger decision.
    pub trigger: bool,
    /// Same selection (first kept entry / kept set / split-turn flag); `None` where neither
    /// side selects, `Some(false)` where only one does and a side compacts.
    pub selection: Option<bool>,
    /// Same tokens-before estimate; `None` where neither side gives one, `Some(false)` where
    /// only one does and a side compacts and selects.
    pub tokens_before: Option<bool>,
    /// Same entries rewritten in place, and, where the original's driver reports the text it
    /// wrote there, the same text at each; `None` where the driver does not check in-place
    /// rewrites.
    pub rewrites: Option<bool>,
}

impl Verdict {
    /// Whether every part both sides answered agrees, and neither answered alone.
    pub fn agrees(&self) -> bool {
        self.trigger && self.selection != Some(false) && self.tokens_before != Some(false) && self.rewrites != Some(false)
    }

    /// The parts that disagree, by name (`trigger`, `selection`, `tokens_before`, `rewrites`).
    pub fn disagreeing(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if !self.trigger {
            out.push("trigger");
        }
        if self.selection == Some(false) {
            out.push("selection");
        }
        if self.tokens_before == Some(false) {
            out.push("tokens_before");
        }
        if self.rewrites == Some(false) {
            out.push("rewrites");
        }
        out
    }
}

/// `Some(same)` where both sides have a value, `Some(false)` where one has, `None` where none.
fn both<T: PartialEq>(ours: Option<T>, theirs: Option<T>) -> Option<bool> {
    match (ours, theirs) {
        (None, None) => None,
        (Some(a), Some(b)) => Some(a == b),
        _ => Some(false),
    }
}

/// Compares our answer with the original's.
///
/// Where a side compacts, the selection it answers must be answered alike by the other, and
/// where a side compacts and selects, so must the estimate it compacted from. Otherwise nothing is selected
/// in fact (no compaction, or one that found nothing to cut or only rewrote in place): a driver
/// may still report the cut its original would make and the estimate it weighed (and ours runs
/// the compaction anyway, as a manual one would), so parts both sides offer are compared, and a
/// part only one side offers is a hypothetical left uncompared.
pub fn compare(ours: &Answer, theirs: &Answer) -> Verdict {
    let selected = |a: &Answer| a.first_kept.is_some() || a.kept.is_some() || a.split_turn.is_some();
    let offered = |strict: bool, a: bool, b: bool| if strict { a || b } else { a && b };
    let selection = offered(ours.compact || theirs.compact, selected(ours), selected(theirs)).then(|| {
        both(ours.first_kept, theirs.first_kept) != Some(false)
            && both(ours.kept.as_ref(), theirs.kept.as_ref()) != Some(false)
            && both(ours.split_turn, theirs.split_turn) != Some(false)
    });
    let cuts = |a: &Answer| a.compact && selected(a);
    let tokens_before = offered(cuts(ours) || cuts(theirs), ours.tokens_before.is_some(), theirs.tokens_before.is_some())
        .then(|| both(ours.tokens_before, theirs.tokens_before) == Some(true));
    // In-place rewrites happen whether or not a side cuts: compared wherever the driver
    // reports them (nothing rewritten is an empty list).
    // Where the driver also reports what it wrote, a text only one side has or a different text
    // at an entry disagrees as well (ours has none where our compaction failed: nothing rewritten).
    let rewrites = theirs.rewritten.as_ref().map(|t| {
        ours.rewritten.as_deref().unwrap_or_default() == t.as_slice()
            && theirs.rewritten_text.as_ref().is_none_or(|text| ours.rewritten_text.clone().unwrap_or_default() == *text)
    });
    Verdict { trigger: ours.compact == theirs.compact, selection, tokens_before, rewrites }
}

#[cfg(test)]
mod tests {
    use compactbench_core::EntryId;

    use super::*;

    #[test]
    fn a_part_only_one_side_answers_is_a_disagreement() {
        let ours = Answer { compact: true, first_kept: Some(EntryId(4)), ..Answer::default() };
        let none = Answer { compact: true, ..Answer::default() };
        let v = compare(&ours, &none);
        assert_eq!(v, Verdict { trigger: true, selection: Some(false), tokens_before: None, rewrites: None });
        assert!(!v.agrees());
        assert_eq!(compare(&none, &none), Verdict { trigger: true, selection: None, tokens_before: None, rewrites: None });
        let other = Answer { compact: false, first_kept: Some(EntryId(5)), ..Answer::default() };
        let v = compare(&ours, &other);
        assert_eq!(v, Verdict { trigger: false, selection: Some(false), tokens_before: None, rewrites: None });
        assert_eq!(v.disagreeing(), ["trigger", "selection"]);
        let split = Answer { split_turn: Some(true), ..ours.clone() };
        let whole = Answer { split_turn: Some(false), ..ours.clone() };
        assert_eq!(compare(&split, &whole).selection, Some(false));
        assert!(!compare(&split, &ours).agrees(), "a flag only one side reports disagrees");
        let counted = Answer { tokens_before: Some(100), ..ours.clone() };
        assert_eq!(compare(&counted, &ours).disagreeing(), ["tokens_before"]);
        assert!(compare(&counted, &counted.clone()).agrees());
    }

    /// Where neither side compacts, what both offer is compared and what one offers alone is not.
    #[test]
    fn without_a_compaction_only_parts_both_offer_are_compared() {
        let cut = Answer { first_kept: Some(EntryId(4)), tokens_before: Some(100), ..Answer::default() };
        let silent = Answer::default();
        assert_eq!(compare(&silent, &cut), Verdict { trigger: true, selection: None, tokens_before: None, rewrites: None });
        assert!(compare(&cut, &silent).agrees());
        let other = Answer { first_kept: Some(EntryId(5)), tokens_before: Some(90), ..Answer::default() };
        assert_eq!(compare(&cut, &other).disagreeing(), ["selection", "tokens_before"]);
        // One side compacting makes the selection strict again, and one side compacting with a
        // cut the estimate.
        let fired = Answer { compact: true, ..silent };
        assert_eq!(compare(&fired, &cut).disagreeing(), ["trigger", "selection"]);
        let fired_cut = Answer { compact: true, ..cut.clone() };
        assert_eq!(compare(&fired_cut, &Answer { tokens_before: None, ..fired_cut.clone() }).disagreeing(), ["tokens_before"]);
        // Both fire and neither cuts (nothing to compress): the estimate one side reports is
        // not compared, one both report is.
        let estimated = Answer { compact: true, tokens_before: Some(100), ..Answer::default() };
        assert!(compare(&fired, &estimated).agrees());
        assert_eq!(compare(&Answer { tokens_before: Some(99), ..estimated.clone() }, &estimated).disagreeing(), ["tokens_before"]);
    }

    fn texts(pairs: &[(u32, &str)]) -> Option<std::collections::BTreeMap<EntryId, String>> {
        Some(pairs.iter().map(|&(id, text)| (EntryId(id), text.to_owned())).collect())
    }

    /// The same entries rewritten with other texts disagree, as does a text one side lacks.
    #[test]
    fn rewrites_compare_the_text_written_where_the_driver_reports_it() {
        let rewrote = |t: &[(u32, &str)]| Answer { rewritten: Some(vec![EntryId(3), EntryId(5)]), rewritten_text: texts(t), ..Answer::default() };
        let theirs = rewrote(&[(3, "stub a"), (5, "stub b")]);
        assert!(compare(&theirs.clone(), &theirs).agrees());
        let other = rewrote(&[(3, "stub a"), (5, "other stub")]);
        assert_eq!(compare(&other, &theirs).disagreeing(), ["rewrites"]);
        // Our side without a text (or missing one entry's) against a driver that sends them.
        assert_eq!(compare(&rewrote(&[]), &theirs).disagreeing(), ["rewrites"]);
        assert_eq!(compare(&Answer { rewritten_text: None, ..theirs.clone() }, &theirs).disagreeing(), ["rewrites"]);
        assert_eq!(compare(&rewrote(&[(3, "stub a")]), &theirs).disagreeing(), ["rewrites"]);
        // Nothing rewritten, and no texts: our failed compaction rewrote nothing either.
        let none = Answer { rewritten: Some(vec![]), rewritten_text: texts(&[]), ..Answer::default() };
        assert!(compare(&Answer::default(), &none).agrees());
        // A driver that reports the entries only compares the entries.
        assert!(compare(&other, &Answer { rewritten_text: None, ..theirs.clone() }).agrees());
        // Texts do not excuse other entries.
        let fewer = Answer { rewritten: Some(vec![EntryId(3)]), ..theirs.clone() };
        assert_eq!(compare(&fewer, &theirs).disagreeing(), ["rewrites"]);
    }
}
