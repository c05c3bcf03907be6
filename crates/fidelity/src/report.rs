//! The fidelity report: `report.md` for people, `agreement.json` for `compactbench list` and
//! the main report.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use compactbench_core::{Entry, Log, Part};
use serde::{Deserialize, Serialize};

use crate::deliberate::Difference;
use crate::Answer;

/// Agreement of one strategy with its original, as `agreement.json` stores it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agreement {
    /// Our strategy's report id.
    pub strategy: String,
    /// The original: package and version.
    pub original: String,
    /// Arguments the driver ran with (e.g. a switch that swaps one of the original's functions
    /// for ours), shown so the agreement is read for what it is.
    #[serde(default)]
    pub driver_args: String,
    /// Cases asked.
    pub cases: u32,
    /// Distinct sessions the cases were cut from.
    #[serde(default)]
    pub sessions: u32,
    /// Answered cases and disagreements per input class ([`crate::classes`]).
    #[serde(default)]
    pub classes: std::collections::BTreeMap<String, ClassCount>,
    /// Cases the exporter could not write in the original's format.
    pub not_exported: u32,
    /// Cases where the original threw.
    pub errors: u32,
    /// Cases with the same trigger decision.
    pub trigger_agree: u32,
    /// Cases where both sides selected.
    pub selection_compared: u32,
    /// Of those, cases with the same selection.
    pub selection_agree: u32,
    /// Cases where both sides estimated tokens before.
    pub tokens_compared: u32,
    /// Of those, cases with the same estimate.
    pub tokens_agree: u32,
    /// Cases where the original's driver reported its in-place rewrites.
    #[serde(default)]
    pub rewrites_compared: u32,
    /// Of those, cases with the same entries rewritten.
    #[serde(default)]
    pub rewrites_agree: u32,
    /// Of those, cases where our crate rewrote something, and where the original did (so an
    /// agreement on "nothing rewritten" everywhere shows as such).
    #[serde(default)]
    pub rewrites_ours: u32,
    #[serde(default)]
    pub rewrites_theirs: u32,
    /// Of the compared cases, those where the driver also reported the text it wrote, and of
    /// those the cases with the same entries rewritten whatever the texts (so a text that
    /// differs on purpose does not hide which entries were rewritten).
    #[serde(default)]
    pub rewrite_texts_compared: u32,
    #[serde(default)]
    pub rewrite_entries_agree: u32,
    /// Cases that disagree on each part (`trigger`, `selection`, `tokens_before`).
    #[serde(default)]
    pub differing: std::collections::BTreeMap<String, u32>,
    /// Cases each reviewed difference covered, by [`crate::deliberate::key`].
    #[serde(default)]
    pub covered: std::collections::BTreeMap<String, u32>,
    /// Cases whose every disagreeing part is in the reviewed list of deliberate differences.
    #[serde(default)]
    pub reviewed: u32,
    /// Cases with a disagreement the list does not cover: each fails the check.
    #[serde(default)]
    pub unreviewed: u32,
    /// [`crate::source::digest`] of the strategy's crate when this was measured.
    #[serde(default)]
    pub source: Option<String>,
}

/// Answered cases of one input class, and how many of them disagree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassCount {
    pub cases: u32,
    pub disagree: u32,
}

impl Agreement {
    /// Cases answered by both sides.
    pub fn answered(&self) -> u32 {
        self.cases - self.not_exported - self.errors
    }

    /// `trigger 100.0% · selection 98.5%`, the form `list` and the main report show.
    pub fn short(&self) -> String {
        let pct = |a: u32, n: u32| if n == 0 { "n/a".to_owned() } else { format!("{:.1}%", 100.0 * f64::from(a) / f64::from(n)) };
        format!("trigger {} · selection {} ({} cases)", pct(self.trigger_agree, self.answered()), pct(self.selection_agree, self.selection_compared), self.answered())
    }
}

/// One disagreement, shrunk.
#[derive(Clone, Debug)]
pub struct Disagreement {
    /// The case it was found on.
    pub case: String,
    /// The part it is shown for (`trigger`, `selection`, `tokens_before`).
    pub part: &'static str,
    /// The smallest case that still disagrees.
    pub minimized: String,
    /// Its log, rendered one entry a line.
    pub session: String,
    /// The window of that case.
    pub window: u64,
    /// Our answer and the original's.
    pub ours: Answer,
    /// The original's answer.
    pub theirs: Answer,
}

/// Everything measured for one original.
#[derive(Clone, Debug, Default)]
pub struct OriginalReport {
    /// The counts.
    pub agreement: Agreement,
    /// Why cases could not be exported or the original threw (first few, with counts).
    pub problems: Vec<(String, u32)>,
    /// Shrunk disagreements (the first few of each kind).
    pub disagreements: Vec<Disagreement>,
}

/// A log rendered one entry a line, long texts cut, for the report.
pub fn render_log(log: &Log) -> String {
    let mut out = String::new();
    for (id, e) in log.entries() {
        match e {
            Entry::Message(m) => {
                let parts: Vec<String> = m
                    .parts
                    .iter()
                    .map(|p| match p {
                        Part::Text { text } => format!("text {}", cut(text)),
                        Part::Reasoning { text } => format!("thinking {}", cut(text)),
                        Part::ToolCall { id, name, .. } => format!("call {name} {id}"),
                        Part::ToolResult { call_id, text, is_error, .. } => {
                            format!("result {call_id}{} {} chars", if *is_error { " (error)" } else { "" }, text.len())
                        }
                        Part::Media { mime, tokens } => format!("media {mime} {tokens} tokens"),
                    })
                    .collect();
                let usage = m.usage.map(|u| format!(" [usage in {} out {}]", u.input, u.output)).unwrap_or_default();
                let _ = writeln!(out, "#{} {}{usage}: {}", id.0, m.role.as_str(), parts.join("; "));
            }
            Entry::Checkpoint(cp) => {
                let _ = writeln!(out, "#{} checkpoint {} window {:?}", id.0, cp.kind.as_str(), cp.window);
            }
        }
    }
    out
}

fn cut(text: &str) -> String {
    let one_line = text.replace('\n', " ");
    match one_line.char_indices().nth(60) {
        Some((i, _)) => format!("{:?}… ({} chars)", &one_line[..i], text.len()),
        None => format!("{one_line:?}"),
    }
}

/// Writes `report.md` and `agreement.json` into `dir`; `black_box` (the black-box section, or
/// nothing) ends the report.
pub fn write(dir: &Path, reports: &[OriginalReport], recorded: &[crate::recorded::Pair], deliberate: &[Difference], header: &str, black_box: &str) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let agreements: Vec<&Agreement> = reports.iter().map(|r| &r.agreement).collect();
    std::fs::write(dir.join("agreement.json"), serde_json::to_string_pretty(&agreements)? + "\n")?;
    let mut md = markdown(reports, header);
    deliberate_section(&mut md, reports, deliberate);
    recorded_section(&mut md, recorded);
    md.push_str(black_box);
    std::fs::write(dir.join("report.md"), md)?;
    Ok(())
}

fn recorded_section(md: &mut String, pairs: &[crate::recorded::Pair]) {
    if pairs.is_empty() {
        return;
    }
    let agree = pairs.iter().filter(|p| p.agrees()).count();
    let auto: Vec<bool> = pairs.iter().filter_map(|p| p.trigger_agrees()).collect();
    let _ = writeln!(
        md,
        "\n## Recorded compactions in the committed transcripts\n\nAt each compaction a transcript records, our crate compacts the same history (its own earlier compactions in place of the recorded ones) and keeps from a session step; {agree} of {} agree with the recorded first kept step (`–`: nothing of the old history kept). Where the transcript records the compaction as automatic (Claude Code's `compact_boundary` `trigger: auto`), our trigger is asked before every request since the previous compaction and must first fire before the same one; {} of {} do. A disagreement in either fails `cargo xtask fidelity`.\n\nA transcript is replayed by the strategy that stands for the release that recorded it. Claude Code transcripts name theirs: a release up to 2.1.20 is replayed by `claude-code/v2.1.20`, whose threshold reserves up to 32,000 output tokens below the window as those releases did (155,000 on a 200k window), and a later one up to 2.1.68 by `claude-code/v2.1.68` (up to 20,000 reserved, 167,000); both keep nothing verbatim, as those releases did. Pi's session files name none, but each compaction entry is dated: one made before Pi 0.15.0 was released (2025-12-09), the first release with pi-mono 4227fd59's cut rule, is replayed by `pi/v0.14`, the usage-based compaction of 0.13.0–0.14.2 (checked against npm 0.13.2's own code); its fixture was recorded on 2025-12-08. Tokens before: the harness's own count (Claude Code's `preTokens`, Pi's `tokensBefore`) and what ours counted when it compacted there.\n",
        pairs.len(),
        auto.iter().filter(|a| **a).count(),
        auto.len(),
    );
    let _ = writeln!(
        md,
        "| transcript | release | strategy | compacted before step | recorded trigger | ours fires before step | tokens before: recorded / ours | first kept: recorded / ours | same |\n|---|---|---|---:|---|---:|---:|---:|---|"
    );
    let step = |s: Option<usize>| s.map_or("–".to_owned(), |s| s.to_string());
    let tokens = |t: Option<u64>| t.map_or("–".to_owned(), |t| t.to_string());
    for p in pairs {
        let ours = match &p.ours {
            Ok(s) => step(*s),
            Err(why) => format!("({why})"),
        };
        let _ = writeln!(
            md,
            "| {} | {} | `{}` | {} | {} | {} | {} / {} | {} / {ours} | {} |",
            p.scenario,
            p.release.as_deref().unwrap_or("–"),
            p.strategy,
            p.step,
            p.recorded_trigger.as_deref().unwrap_or("–"),
            step(p.ours_fires_before),
            tokens(p.recorded_tokens_before),
            tokens(p.ours_tokens_before),
            step(p.recorded_first_kept),
            if p.same() { "yes" } else { "**no**" }
        );
    }
}

/// The reviewed differences, each with its reason and the cases it covered in this run.
fn deliberate_section(md: &mut String, reports: &[OriginalReport], deliberate: &[Difference]) {
    let _ = writeln!(
        md,
        "\n## Deliberate differences\n\nThe reviewed list (`fidelity/deliberate.toml`): where our crate answers otherwise on purpose. A disagreement it does not cover fails `cargo xtask fidelity`.\n"
    );
    if deliberate.is_empty() {
        md.push_str("None: every part of every answered case must agree.\n");
        return;
    }
    let _ = writeln!(md, "| strategy | part | cases now | reason |\n|---|---|---:|---|");
    for d in deliberate {
        let key = crate::deliberate::key(deliberate, d);
        let n = reports.iter().find(|r| r.agreement.strategy == d.strategy).and_then(|r| r.agreement.covered.get(&key)).copied().unwrap_or(0);
        let mut narrowed = String::new();
        if !d.lines.is_empty() {
            let lines: Vec<String> = d.lines.iter().map(|l| format!("`{}`", l.replace('|', "\\|"))).collect();
            let _ = write!(narrowed, " Covers texts that differ only in lines matching {}.", lines.join(", "));
        }
        if let Some(with) = &d.with {
            let _ = write!(narrowed, " Covers only cases whose {with} differ too, reviewed.");
        }
        if let Some(outcome) = &d.outcome {
            let _ = write!(narrowed, " Covers only cases where the original reported `{outcome}`.");
        }
        let _ = writeln!(md, "| `{}` | {} | {n} | {}{narrowed} |", d.strategy, d.part, d.reason.replace('\n', " "));
    }
}

fn markdown(reports: &[OriginalReport], header: &str) -> String {
    let mut md = String::from("# Fidelity: our crates against their originals' own code\n\n");
    md.push_str(header);
    md.push_str("\n\nStrict: where either side compacts, a selection (first kept entry, kept set, split-turn flag) one side answers and the other does not counts as a disagreement, and where either side selects, so does a tokens-before estimate only one side gives. Where nothing is selected in fact (no compaction, or one that found nothing to cut or rewrote only in place), the cut and estimate both sides report anyway are compared, and one reported by one side alone is not. In-place rewrites (masked, truncated, pruned entries) are compared on every case where the original's driver reports them (nothing rewritten is an empty list), with the cases where each side rewrote anything; \"not checked\": its driver does not report them yet.\n\n| strategy | original | driver args | sessions | cases | trigger agrees | selection agrees | tokens-before agrees | in-place rewrites agree | disagree: reviewed / not reviewed | not exported | original threw |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in reports {
        let a = &r.agreement;
        let frac = |x: u32, n: u32| if n == 0 { "–".to_owned() } else { format!("{x}/{n} ({:.1}%)", 100.0 * f64::from(x) / f64::from(n)) };
        let _ = writeln!(
            md,
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} |",
            a.strategy,
            a.original,
            if a.driver_args.is_empty() { "–".to_owned() } else { format!("`{}`", a.driver_args) },
            a.sessions,
            a.cases,
            frac(a.trigger_agree, a.answered()),
            frac(a.selection_agree, a.selection_compared),
            frac(a.tokens_agree, a.tokens_compared),
            if a.rewrites_compared == 0 {
                "not checked".to_owned()
            } else {
                let texts = if a.rewrite_texts_compared == 0 {
                    String::new()
                } else {
                    format!("; texts on {}, same entries on {}", a.rewrite_texts_compared, a.rewrite_entries_agree)
                };
                format!("{} (rewritten: ours {}, original {}{texts})", frac(a.rewrites_agree, a.rewrites_compared), a.rewrites_ours, a.rewrites_theirs)
            },
            a.reviewed,
            if a.unreviewed == 0 { "0".to_owned() } else { format!("**{}**", a.unreviewed) },
            a.not_exported,
            a.errors
        );
    }
    classes_table(&mut md, reports);
    for r in reports {
        let a = &r.agreement;
        let _ = writeln!(md, "\n## `{}` vs {}\n", a.strategy, a.original);
        let settings: Vec<&str> = crate::ORIGINALS.iter().filter(|o| o.name == a.original).flat_map(|o| o.settings.iter().map(|s| s.name)).collect();
        if !settings.is_empty() {
            let _ = writeln!(md, "Non-default settings asked: {}.\n", settings.join("; "));
        }
        if r.problems.is_empty() && r.disagreements.is_empty() {
            md.push_str("Every answered case agrees on trigger, selection and tokens before.\n");
        }
        for (problem, n) in &r.problems {
            let _ = writeln!(md, "- {n} case(s): {problem}");
        }
        for d in &r.disagreements {
            let _ = writeln!(md, "\n### {} ({})\n\nShrunk to `{}` (window {}):\n\n```text\n{}```\n", d.case, d.part, d.minimized, d.window, d.session);
            let _ = writeln!(md, "| | trigger | first kept | kept | split turn | tokens before | rewritten |\n|---|---|---|---|---|---|---|");
            for (who, ans) in [("ours", &d.ours), ("original", &d.theirs)] {
                let _ = writeln!(
                    md,
                    "| {who} | {} | {} | {} | {} | {} | {} |",
                    ans.compact,
                    ans.first_kept.map_or("–".into(), |id| format!("#{}", id.0)),
                    ans.kept.as_ref().map_or("–".into(), |k| k.iter().map(|id| format!("#{}", id.0)).collect::<Vec<_>>().join(" ")),
                    ans.split_turn.map_or("–".into(), |b| b.to_string()),
                    ans.tokens_before.map_or("–".into(), |t| t.to_string()),
                    ans.rewritten.as_ref().map_or("–".into(), |r| r.iter().map(|id| format!("#{}", id.0)).collect::<Vec<_>>().join(" ")),
                );
            }
            rewrite_texts(&mut md, d);
        }
    }
    md
}

/// Characters of a rewritten text shown in a disagreement.
const SHOWN_TEXT: usize = 600;

/// The texts written at each rewritten entry where the two sides' differ (or one side has none):
/// the lines that differ, with the count of leading and trailing lines both share.
fn rewrite_texts(md: &mut String, d: &Disagreement) {
    let Some(theirs) = &d.theirs.rewritten_text else { return };
    let empty = std::collections::BTreeMap::new();
    let ours = d.ours.rewritten_text.as_ref().unwrap_or(&empty);
    let clip = |lines: &[&str]| {
        let t = lines.join("\n");
        if t.chars().count() > SHOWN_TEXT {
            format!("{}…", t.chars().take(SHOWN_TEXT).collect::<String>())
        } else {
            t
        }
    };
    let entries: std::collections::BTreeSet<_> = ours.keys().chain(theirs.keys()).collect();
    for id in entries.into_iter().filter(|id| ours.get(id) != theirs.get(id)) {
        let (Some(a), Some(b)) = (ours.get(id), theirs.get(id)) else {
            let who = if ours.contains_key(id) { "ours alone" } else { "the original's alone" };
            let _ = writeln!(md, "\nText written at #{}: {who}.", id.0);
            continue;
        };
        let (a, b): (Vec<&str>, Vec<&str>) = (a.split('\n').collect(), b.split('\n').collect());
        let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        let tail = a[head..].iter().rev().zip(b[head..].iter().rev()).take_while(|(x, y)| x == y).count();
        let _ = writeln!(
            md,
            "\nText written at #{} ({head} leading and {tail} trailing lines the same), ours:\n\n```text\n{}\n```\n\noriginal's:\n\n```text\n{}\n```",
            id.0,
            clip(&a[head..a.len() - tail]),
            clip(&b[head..b.len() - tail])
        );
    }
}

/// Answered cases per input class and original, with the disagreements among them.
fn classes_table(md: &mut String, reports: &[OriginalReport]) {
    use crate::classes::{FOUND, SETTINGS_CLASS, VARIATIONS_WITH_FAILED};
    let names: Vec<&str> = VARIATIONS_WITH_FAILED.iter().map(|v| v.name()).chain(FOUND).chain([SETTINGS_CLASS]).collect();
    let _ = writeln!(
        md,
        "\n### Input classes\n\nEach case log is changed by one class in turn ([`classes.rs`](../../crates/fidelity/src/classes.rs)): provider usage under or over our count with cache reads, the same with cache writes too, images in a user and a tool message, reasoning before every reply, a later system message, a text reply without usage (a failed reply, or a provider that reports none), and, for Pi and oh-my-pi only, a text reply aborted mid-stream that reports partial usage (its prompt and one output token, stored as `stopReason: \"aborted\"`: the other originals' session formats have no place for the marker, so their rotation leaves the class out and their cells read 0); two more are found in the logs as they are; the last counts cases asked with a non-default setting the original documents (named per original below), on sessions of their own. A cell is answered cases (disagreeing ones, if any).\n"
    );
    let _ = writeln!(md, "| strategy | original | {} |\n|---|---|{}", names.join(" | "), "---:|".repeat(names.len()));
    for r in reports {
        let a = &r.agreement;
        let cells: Vec<String> = names
            .iter()
            .map(|n| match a.classes.get(*n) {
                None => "0".to_owned(),
                Some(c) if c.disagree == 0 => c.cases.to_string(),
                Some(c) => format!("{} ({})", c.cases, c.disagree),
            })
            .collect();
        let _ = writeln!(md, "| `{}` | {} | {} |", a.strategy, a.original, cells.join(" | "));
    }
}

/// The measured agreement of strategy `id` with its original(s), as `compactbench list` and
/// the main report show it, from the `agreement.json` in `dir` of the workspace at `root`;
/// flagged when the strategy's crate is no longer the source it was measured on.
pub fn agreement_of(root: &Path, dir: &Path, id: &str) -> Option<String> {
    let mine: Vec<Agreement> = read_agreements(dir).into_iter().filter(|a| a.strategy == id).collect();
    let now = crate::source::digest(root, id);
    let changed = mine.iter().any(|a| a.source.is_none() || a.source != now);
    let short: Vec<String> = mine.iter().map(Agreement::short).collect();
    (!mine.is_empty()).then(|| {
        let joined = short.join("; ");
        if changed { format!("{joined} (crate changed since measured: rerun `cargo xtask fidelity`)") } else { joined }
    })
}

/// Reads `agreement.json` from `dir` (empty when there is none yet).
pub fn read_agreements(dir: &Path) -> Vec<Agreement> {
    std::fs::read_to_string(dir.join("agreement.json")).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agreement_is_flagged_once_its_crate_changes() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        let lib = root.join("crates/strategies/pi/src/lib.rs");
        std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
        std::fs::write(root.join("crates/strategies/pi/Cargo.toml"), "[package]\n").unwrap();
        std::fs::write(&lib, "pub fn cut() {}\n").unwrap();
        let dir = root.join("reports/fidelity");
        std::fs::create_dir_all(&dir).unwrap();
        let measured = Agreement {
            strategy: "pi/v0.73".into(),
            cases: 4,
            trigger_agree: 4,
            source: crate::source::digest(root, "pi/v0.73"),
            ..Agreement::default()
        };
        std::fs::write(dir.join("agreement.json"), serde_json::to_string(&[&measured]).unwrap()).unwrap();
        let fresh = "trigger 100.0% · selection n/a (4 cases)";
        assert_eq!(agreement_of(root, &dir, "pi/v0.73").as_deref(), Some(fresh));
        assert_eq!(agreement_of(root, &dir, "pi"), None, "another strategy of the crate was not measured");
        std::fs::write(&lib, "pub fn cut() { todo!() }\n").unwrap();
        let stale = agreement_of(root, &dir, "pi/v0.73").unwrap();
        assert!(stale.starts_with(fresh) && stale.contains("crate changed since measured"), "{stale}");
    }
}
