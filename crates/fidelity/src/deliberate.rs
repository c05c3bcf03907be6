//! The reviewed list of deliberate differences (`fidelity/deliberate.toml`): where our crate
//! answers otherwise than its original on purpose, each with its reason. A disagreement the list
//! does not cover fails `cargo xtask fidelity`; one it covers is counted and shown with its
//! reason in the report.
//!
//! An entry covers every disagreement on its part of its strategy's answers, unless it names
//! `lines`: then it covers a `rewrites` disagreement only where both sides rewrote the same
//! entries and every line a line diff of the two texts written at an entry finds on one side
//! only matches one of its patterns, so a new kind of rewrite difference is not counted as
//! reviewed. An entry that names `with` (another part) covers only cases where that part
//! differs too and a reviewed entry covers it: a difference caused by one already explained.
//! An entry that names `outcome` covers only cases where the original's driver reported that
//! outcome (the original's own name for what it did), so a difference in a case where the
//! original did something else is not counted as reviewed.

use std::path::Path;

use anyhow::{bail, Context, Result};
use regex::RegexSet;
use serde::Deserialize;

use crate::compare::compare;
use crate::Answer;

/// The parts of an answer a difference can cover.
pub const PARTS: [&str; 4] = ["trigger", "selection", "tokens_before", "rewrites"];

/// One reviewed difference.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Difference {
    /// Our strategy id.
    pub strategy: String,
    /// Which part of the answer differs: one of [`PARTS`].
    pub part: String,
    /// Why, as the report shows it: what each side does and why ours is kept.
    pub reason: String,
    /// For `rewrites` only: regular expressions, each matched against a whole line; the entry
    /// covers only texts that differ in such lines alone (see the module docs).
    #[serde(default)]
    pub lines: Vec<String>,
    /// Another part: the entry covers only cases where that part differs as well, covered by
    /// a reviewed entry of its own (see the module docs).
    #[serde(default)]
    pub with: Option<String>,
    /// The original's reported outcome: the entry covers only cases where the original's
    /// answer names it ([`Answer::outcome`]).
    #[serde(default)]
    pub outcome: Option<String>,
    /// `lines`, compiled when the list is read.
    #[serde(skip)]
    matcher: Option<RegexSet>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    difference: Vec<Difference>,
}

/// Reads the list from `path`; errors name the file and the field.
pub fn load(path: &Path) -> Result<Vec<Difference>> {
    load_parts(path, &PARTS)
}

/// Reads a list whose parts are `parts` (the black-box check compares other parts).
pub fn load_parts(path: &Path, parts: &[&str]) -> Result<Vec<Difference>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    parse_parts(path, &text, parts)
}

fn parse_parts(path: &Path, text: &str, parts: &[&str]) -> Result<Vec<Difference>> {
    let mut file: File = toml::from_str(text).with_context(|| format!("{}", path.display()))?;
    for (i, d) in file.difference.iter_mut().enumerate() {
        let at = || format!("{}: difference {} (`{}`)", path.display(), i + 1, d.strategy);
        if !parts.contains(&d.part.as_str()) {
            bail!("{}: field `part` is {:?}, not one of {parts:?}", at(), d.part);
        }
        if d.reason.trim().is_empty() {
            bail!("{}: field `reason` is empty", at());
        }
        if d.outcome.as_ref().is_some_and(|o| o.trim().is_empty()) {
            bail!("{}: field `outcome` is empty", at());
        }
        if let Some(with) = &d.with {
            if !parts.contains(&with.as_str()) || *with == d.part {
                bail!("{}: field `with` is {with:?}, not another of {parts:?}", at());
            }
        }
        if !d.lines.is_empty() {
            if d.part != "rewrites" {
                bail!("{}: field `lines` narrows texts written, so only a `rewrites` difference may have it", at());
            }
            let whole = d.lines.iter().map(|l| format!("^(?:{l})$"));
            d.matcher = Some(RegexSet::new(whole).with_context(|| format!("{}: field `lines`", at()))?);
        }
    }
    Ok(file.difference)
}

/// The reviewed difference covering `part` of one case of `strategy`'s answers (`ours`, then
/// the original's), if any. Without the answers, only entries that name no `lines`, `with`
/// or `outcome` cover.
pub fn covering<'a>(list: &'a [Difference], strategy: &str, part: &str, answers: Option<(&Answer, &Answer)>) -> Option<&'a Difference> {
    list.iter().filter(|d| d.strategy == strategy && d.part == part).find(|d| {
        let lines = match &d.matcher {
            None => true,
            Some(lines) => answers.is_some_and(|(ours, theirs)| texts_differ_in(lines, ours, theirs)),
        };
        let with = match &d.with {
            None => true,
            Some(with) => answers.is_some_and(|(ours, theirs)| {
                compare(ours, theirs).disagreeing().contains(&with.as_str()) && covering(list, strategy, with, answers).is_some()
            }),
        };
        let outcome = match &d.outcome {
            None => true,
            Some(outcome) => answers.is_some_and(|(_, theirs)| theirs.outcome.as_ref() == Some(outcome)),
        };
        lines && with && outcome
    })
}

/// Both sides rewrote the same entries, wrote a text at each, and the texts differ only in
/// lines that `lines` matches.
fn texts_differ_in(lines: &RegexSet, ours: &Answer, theirs: &Answer) -> bool {
    let entries = |a: &Answer| a.rewritten.clone().unwrap_or_default();
    let (Some(a), Some(b)) = (&ours.rewritten_text, &theirs.rewritten_text) else { return false };
    entries(ours) == entries(theirs)
        && a.keys().eq(b.keys())
        && a.values().zip(b.values()).all(|(x, y)| {
            // Lines one side has and the other lacks, by a line diff: a preview cut elsewhere
            // by a longer pointer sentence still shares the lines after it.
            similar::TextDiff::from_lines(x.as_str(), y.as_str())
                .iter_all_changes()
                .filter(|c| c.tag() != similar::ChangeTag::Equal)
                .all(|c| lines.is_match(c.value().strip_suffix('\n').unwrap_or(c.value())))
        })
}

/// Where the report counts the cases `d` covered: its part, and its place among its
/// strategy's entries for that part after the first (`rewrites`, `rewrites 2`, ...).
pub fn key(list: &[Difference], d: &Difference) -> String {
    let place = list.iter().filter(|e| e.strategy == d.strategy && e.part == d.part).position(|e| std::ptr::eq(e, d)).unwrap_or(0);
    if place == 0 {
        d.part.clone()
    } else {
        format!("{} {}", d.part, place + 1)
    }
}

#[cfg(test)]
mod tests {
    use compactbench_core::EntryId;

    use super::*;

    #[test]
    fn the_list_names_a_part_and_a_reason_or_is_refused() {
        let ok = "[[difference]]\nstrategy = \"x\"\npart = \"tokens_before\"\nreason = \"because\"\n";
        let list = parse_parts(Path::new("d.toml"), ok, &PARTS).unwrap();
        assert_eq!(covering(&list, "x", "tokens_before", None).map(|d| d.reason.as_str()), Some("because"));
        assert!(covering(&list, "x", "trigger", None).is_none());
        let e = parse_parts(Path::new("d.toml"), &ok.replace("tokens_before", "cut"), &PARTS).unwrap_err().to_string();
        assert!(e.contains("field `part`"), "{e}");
        let e = parse_parts(Path::new("d.toml"), &ok.replace("because", " "), &PARTS).unwrap_err().to_string();
        assert!(e.contains("field `reason` is empty"), "{e}");
        assert!(parse_parts(Path::new("d.toml"), "[[difference]]\nstrategy = \"x\"\n", &PARTS).is_err());
        let e = parse_parts(Path::new("d.toml"), &format!("{ok}lines = [\"a\"]\n"), &PARTS).unwrap_err().to_string();
        assert!(e.contains("field `lines`"), "{e}");
        let bad = ok.replace("tokens_before", "rewrites") + "lines = [\"(\"]\n";
        let e = format!("{:#}", parse_parts(Path::new("d.toml"), &bad, &PARTS).unwrap_err());
        assert!(e.contains("field `lines`") && e.contains("regex"), "{e}");
    }

    /// An entry with `lines` covers texts that differ in matching lines alone: not another line,
    /// not other entries, not a text one side lacks.
    #[test]
    fn an_entry_with_lines_covers_only_texts_that_differ_in_those_lines() {
        let toml = "[[difference]]\nstrategy = \"x\"\npart = \"rewrites\"\nreason = \"pointer\"\nlines = [\"Saved at: .*\", \"Full output: \\\\S+\"]\n";
        let list = parse_parts(Path::new("d.toml"), toml, &PARTS).unwrap();
        let wrote = |entries: &[u32], text: &str| Answer {
            rewritten: Some(entries.iter().map(|&i| EntryId(i)).collect()),
            rewritten_text: Some(entries.iter().map(|&i| (EntryId(i), text.to_owned())).collect()),
            ..Answer::default()
        };
        let theirs = wrote(&[3], "<masked>\nhead\nFull output: /tmp/a_x1.txt\n</masked>");
        let covers = |ours: &Answer| covering(&list, "x", "rewrites", Some((ours, &theirs))).is_some();
        assert!(covers(&wrote(&[3], "<masked>\nhead\nSaved at: ~/out/a_e3.txt\n</masked>")));
        assert!(!covers(&wrote(&[3], "<masked>\nother head\nSaved at: ~/out/a_e3.txt\n</masked>")), "a preview line differs too");
        assert!(covers(&wrote(&[3], "<masked>\nSaved at: ~/a\nhead\nSaved at: ~/out/a_e3.txt\n</masked>")), "a pointer line more");
        assert!(!covers(&wrote(&[3, 5], "<masked>\nhead\nSaved at: ~/out/a_e3.txt\n</masked>")), "other entries");
        assert!(!covers(&Answer { rewritten_text: None, ..wrote(&[3], "") }), "no text on our side");
        assert!(covering(&list, "x", "rewrites", None).is_none());
        assert_eq!(key(&list, &list[0]), "rewrites");
    }

    /// An entry with an `outcome` covers only cases where the original reported that outcome.
    #[test]
    fn an_entry_with_an_outcome_covers_only_answers_naming_it() {
        let toml = "[[difference]]\nstrategy = \"x\"\npart = \"selection\"\nreason = \"inflated\"\noutcome = \"INFLATED\"\n";
        let list = parse_parts(Path::new("d.toml"), toml, &PARTS).unwrap();
        let ours = Answer { compact: true, first_kept: Some(EntryId(4)), ..Answer::default() };
        let theirs = |outcome: Option<&str>| Answer { compact: true, outcome: outcome.map(str::to_owned), ..Answer::default() };
        let covers = |theirs: &Answer| covering(&list, "x", "selection", Some((&ours, theirs))).is_some();
        assert!(covers(&theirs(Some("INFLATED"))));
        assert!(!covers(&theirs(Some("NOOP"))), "another outcome");
        assert!(!covers(&theirs(None)), "no outcome reported");
        assert!(covering(&list, "x", "selection", None).is_none());
        let e = parse_parts(Path::new("d.toml"), &toml.replace("INFLATED", " "), &PARTS).unwrap_err().to_string();
        assert!(e.contains("field `outcome` is empty"), "{e}");
    }

    /// An entry `with` another part covers only cases where that part differs, reviewed.
    #[test]
    fn an_entry_with_another_part_covers_only_alongside_it() {
        let toml = "[[difference]]\nstrategy = \"x\"\npart = \"tokens_before\"\nreason = \"stub\"\nwith = \"rewrites\"\n\n[[difference]]\nstrategy = \"x\"\npart = \"rewrites\"\nreason = \"stub\"\nlines = [\"stub .*\"]\n";
        let list = parse_parts(Path::new("d.toml"), toml, &PARTS).unwrap();
        let answer = |tokens: u64, text: &str| Answer {
            compact: true,
            first_kept: Some(EntryId(2)),
            tokens_before: Some(tokens),
            rewritten: Some(vec![EntryId(1)]),
            rewritten_text: Some([(EntryId(1), text.to_owned())].into()),
            ..Answer::default()
        };
        let theirs = answer(100, "stub theirs\nkept");
        let covers = |ours: &Answer| covering(&list, "x", "tokens_before", Some((ours, &theirs))).is_some();
        assert!(covers(&answer(90, "stub ours\nkept")));
        assert!(!covers(&answer(90, "stub theirs\nkept")), "the rewrites agree: nothing explains the estimate");
        assert!(!covers(&answer(90, "stub ours\nother")), "the rewrites differ unreviewed");
        assert!(covering(&list, "x", "tokens_before", None).is_none());
        let e = parse_parts(Path::new("d.toml"), &toml.replace("with = \"rewrites\"", "with = \"tokens_before\""), &PARTS).unwrap_err().to_string();
        assert!(e.contains("field `with`"), "{e}");
    }
}
