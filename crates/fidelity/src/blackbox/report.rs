//! The black-box results: `blackbox.json` (every session's facts from both sides) and the
//! section of `report.md` that shows them.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::analyze::{SessionResult, PARTS};
use crate::deliberate::{covering, Difference};

/// Where the reviewed list of black-box differences lives, relative to the workspace root.
pub const REVIEWED: &str = "fidelity/black-box.toml";

/// Sessions shown per differing part.
const SHOWN_PER_PART: usize = 3;

/// One harness CLI's run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HarnessReport {
    /// Package and version.
    pub harness: String,
    /// Our strategy's report id.
    pub strategy: String,
    /// Flags, environment and settings the CLI ran with.
    pub settings: String,
    /// What the scripted server reports and how the session maps to the CLI's tools.
    pub script: String,
    /// Every session.
    pub sessions: Vec<SessionResult>,
}

impl HarnessReport {
    /// Sessions that could be analysed.
    pub fn analysed(&self) -> impl Iterator<Item = &SessionResult> {
        self.sessions.iter().filter(|s| s.problem.is_none())
    }

    /// (agreeing, compared) for one part.
    pub fn count(&self, part: &str) -> (usize, usize) {
        let compared = self.analysed().count();
        (self.analysed().filter(|s| !s.differing().contains(&part)).count(), compared)
    }

    /// Sessions with a difference the reviewed list does not cover.
    pub fn unreviewed(&self, reviewed: &[Difference]) -> usize {
        self.analysed().filter(|s| s.differing().iter().any(|p| covering(reviewed, &self.strategy, p, None).is_none())).count()
    }
}

/// The reviewed list of black-box differences under the workspace `root`.
pub fn load_reviewed(root: &Path) -> Result<Vec<Difference>> {
    crate::deliberate::load_parts(&root.join(REVIEWED), &PARTS)
}

/// Writes `blackbox.json` into `dir`.
pub fn write_json(dir: &Path, reports: &[HarnessReport]) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("blackbox.json"), serde_json::to_string_pretty(reports)? + "\n")?;
    Ok(())
}

/// Reads `blackbox.json` from `dir`, if a black-box run left one there.
pub fn read_json(dir: &Path) -> Result<Option<Vec<HarnessReport>>> {
    let path = dir.join("blackbox.json");
    if !path.exists() {
        return Ok(None);
    }
    Ok(Some(serde_json::from_str(&std::fs::read_to_string(path)?)?))
}

/// Puts `report` into `reports` in place of the earlier run of the same CLI (by our strategy id),
/// else at its place in `HARNESSES` order (after the CLIs listed before it, unknown ones last).
pub fn replace(reports: &mut Vec<HarnessReport>, report: HarnessReport) {
    if let Some(at) = reports.iter().position(|r| r.strategy == report.strategy) {
        reports[at] = report;
        return;
    }
    let order = |strategy: &str| crate::HARNESSES.iter().position(|h| h.strategy == strategy).unwrap_or(usize::MAX);
    let at = reports.iter().position(|r| order(&r.strategy) > order(&report.strategy)).unwrap_or(reports.len());
    reports.insert(at, report);
}

/// The report section.
pub fn section(reports: &[HarnessReport], reviewed: &[Difference]) -> String {
    let mut md = String::from(
        "\n## Black box: harness CLIs against a scripted model server\n\n\
         `cargo xtask fidelity --black-box` runs each harness CLI, installed from its registry package by `--setup`, in a scratch \
         HOME and work dir against a model server of ours on 127.0.0.1 that plays a generated session as the model's side: each \
         main-loop request gets the session's next reply (tool calls the CLI really executes on files prepared so that their \
         results are the session's), the compaction request a fixed summary, the request after it a closing text. From the \
         recorded requests: when the CLI compacted, what it measured then, how it asked for the summary, and what the next \
         request held. Our crate replays the history the CLI itself sent (the reported usage on its assistant messages) and \
         answers the same questions. Ids, dates and paths are the session's own or made relative to the work dir.\n",
    );
    for r in reports {
        let analysed = r.analysed().count();
        let compacted = r.analysed().filter(|s| s.theirs.compacted_at.is_some()).count();
        let _ = writeln!(md, "\n### {} (`{}`)\n", r.harness, r.strategy);
        let _ = writeln!(md, "Settings: {}.\n\nScript: {}.\n", r.settings, r.script);
        let _ = writeln!(
            md,
            "{} sessions, {analysed} analysed, {compacted} compacted by the CLI; {} with a difference not in `{REVIEWED}`.\n",
            r.sessions.len(),
            r.unreviewed(reviewed)
        );
        let _ = writeln!(md, "| part | agree | what it compares |\n|---|---:|---|");
        for part in PARTS {
            let (agree, n) = r.count(part);
            // A part the CLI never shows (Codex reports no size at a compaction) is not compared.
            let shown = r.analysed().any(|s| s.theirs.part(part) != "–");
            let agree = if shown { format!("{agree}/{n}") } else { "not shown by the CLI".into() };
            let _ = writeln!(md, "| {part} | {agree} | {} |", meaning(part));
        }
        let _ = writeln!(md, "\nWhat the CLI did (sessions per answer):\n");
        for part in ["compaction_request", "summary_placement", "kept", "files"] {
            let mut seen: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
            for s in r.analysed() {
                *seen.entry(shape(part, &s.theirs)).or_default() += 1;
            }
            let mut seen: Vec<(String, usize)> = seen.into_iter().collect();
            seen.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let shown: Vec<String> = seen.iter().map(|(v, n)| format!("{v} ({n})")).collect();
            let _ = writeln!(md, "- {part}: {}", shown.join("; "));
        }
        for s in r.sessions.iter().filter(|s| s.problem.is_some()) {
            let _ = writeln!(md, "\nNot analysed: `{}`: {}", s.id, s.problem.as_deref().unwrap_or_default());
        }
        for part in PARTS {
            let differing: Vec<&SessionResult> = r.analysed().filter(|s| s.differing().contains(&part)).collect();
            if differing.is_empty() {
                continue;
            }
            let _ = writeln!(md, "\n**{part}** differs in {} sessions.", differing.len());
            match covering(reviewed, &r.strategy, part, None) {
                Some(d) => {
                    let _ = writeln!(md, "Reviewed: {}", d.reason);
                }
                None => md.push_str("Not reviewed: the crate or the list must change.\n"),
            }
            let _ = writeln!(md, "\n| session | {} | ours |\n|---|---|---|", r.harness);
            for s in differing.iter().take(SHOWN_PER_PART) {
                let _ = writeln!(md, "| `{}` | {} | {} |", s.id, s.theirs.part(part), s.ours.part(part));
            }
        }
    }
    md
}

/// A part's answer with the session's own names left out, so that answers group: the kinds
/// of items kept and the number of files.
fn shape(part: &str, facts: &super::analyze::Facts) -> String {
    match (part, &facts.kept, &facts.files) {
        ("kept", Some(kept), _) => {
            if kept.is_empty() {
                return "nothing".into();
            }
            let count = |kind: &str| kept.iter().filter(|k| k.starts_with(kind)).count();
            let named = [("call:", "calls"), ("result:", "results"), ("cleared:", "pruned results"), ("text:", "assistant texts"), ("user:", "user messages")];
            named.iter().filter(|(k, _)| count(k) > 0).map(|(k, name)| format!("{} {name}", count(k))).collect::<Vec<_>>().join(" + ")
        }
        ("files", _, Some(files)) => format!("{} files", files.len()),
        _ => facts.part(part),
    }
}

fn meaning(part: &str) -> &'static str {
    match part {
        "trigger" => "the main-loop request the compaction came before",
        "tokens_before" => "the context size measured then (Claude Code's `compact_boundary` `pre_tokens`, Gemini CLI's `chat_compression` telemetry `tokens_before`, Cline's compaction summary's `tokensBefore`)",
        "compaction_request" => "conversation reused as the prefix or sent fresh; what the instruction asks for",
        "summary_placement" => "role and position of the message holding the summary in the next request",
        "kept" => "tool calls, results (pruned ones apart) and assistant text of before kept verbatim in the next request, and user messages for Codex, OpenCode and Gemini CLI",
        "files" => "files re-attached in the next request",
        _ => "",
    }
}
