//! Whether each strategy passes the user's compaction instructions on as its original does, and
//! whether the facts they name survive: a manual compaction command with instructions
//! (`/compact focus on …`) and a standing instruction in project memory (CLAUDE.md, AGENTS.md).
//!
//! Only the scenarios whose sessions carry such instructions count. Retention is shown for the
//! run's summarizer and for `prompted` (which follows what a summary prompt asks, the named keys
//! included), beside the facts of the same sessions no instruction names.

use std::fmt::Write;

use compactbench_eval::facts::NamedBy;
use compactbench_eval::results::{Instructed, RunResult};

use crate::row::share;

/// Whether `run`'s session carried compaction instructions (a memory names at least one fact).
pub(crate) fn instructed(run: &RunResult) -> bool {
    run.instructed.manual_asked > 0 || run.facts.iter().any(|f| f.named_by.is_some())
}

/// What happened to the typed text of the manual commands, over `runs`' totals.
fn manual_cell(i: &Instructed) -> &'static str {
    if i.manual_asked == 0 {
        "–"
    } else if i.manual_ran == 0 {
        "no command"
    } else if i.manual_in_prompt > 0 {
        "in prompt"
    } else if i.manual_in_context > 0 {
        "as context"
    } else {
        "dropped"
    }
}

/// Where the project memory's compaction instruction went, over `runs`' totals.
fn memory_cell(i: &Instructed) -> &'static str {
    if i.summary_calls == 0 {
        "–"
    } else if i.memory_in_prompt > 0 {
        "in prompt"
    } else if i.memory_in_context > 0 {
        "as context"
    } else {
        "not sent"
    }
}

/// Appends the section for `strategies` (in report order) over `runs` (every summarizer), or
/// nothing when no session carried instructions.
pub(crate) fn instructions(out: &mut String, runs: &[RunResult], summarizer: &str, strategies: &[&str]) {
    let runs: Vec<&RunResult> = runs.iter().filter(|r| instructed(r)).collect();
    if runs.is_empty() {
        return;
    }
    let mut summarizers = vec![summarizer];
    if summarizer != "prompted" && runs.iter().any(|r| r.summarizer == "prompted") {
        summarizers.push("prompted");
    }
    let _ = writeln!(out, "\n## User compaction instructions\n");
    let _ = writeln!(
        out,
        "Over the sessions whose user gives compaction instructions: manual commands typed with instructions (`/compact focus on …`) and a \
         standing instruction in project memory (\"when you compact, keep the exact lines about …\", at the end of the system prompt). \
         Manual: what the strategy did with the typed text (no command: its harness has none, or it refuses text; dropped: it compacted \
         without the text; in prompt: in the summary call's instructions; as context: only in its system prompt or transcript). Memory: where \
         the memory's instruction went in the summary calls. Then facts retained (verbatim or recoverable) at the last request that needed \
         them, kept/needed pooled over seeds, by the instruction naming them (none: the same sessions' other facts), with `{}`.\n",
        summarizers.join("` and with `")
    );
    let groups = [(Some(NamedBy::Manual), "named by manual"), (Some(NamedBy::Memory), "named by memory"), (None, "not named")];
    let mut header = vec!["strategy".to_owned(), "manual: ran/asked".to_owned(), "manual text".to_owned(), "memory rule".to_owned()];
    for (_, name) in &groups {
        for s in &summarizers {
            header.push(format!("{name} ({s})"));
        }
    }
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|---|---:|---|---|{}", "---:|".repeat(header.len() - 4));
    for st in strategies {
        let mine: Vec<&RunResult> = runs.iter().copied().filter(|r| r.strategy == *st).collect();
        let mut total = Instructed::default();
        for r in mine.iter().filter(|r| r.summarizer == summarizer) {
            let i = &r.instructed;
            total.manual_asked += i.manual_asked;
            total.manual_ran += i.manual_ran;
            total.manual_in_prompt += i.manual_in_prompt;
            total.manual_in_context += i.manual_in_context;
            total.memory_in_prompt += i.memory_in_prompt;
            total.memory_in_context += i.memory_in_context;
            total.summary_calls += i.summary_calls;
        }
        let mut cells = vec![
            st.to_string(),
            format!("{}/{}", total.manual_ran, total.manual_asked),
            manual_cell(&total).to_owned(),
            memory_cell(&total).to_owned(),
        ];
        for (named, _) in &groups {
            for s in &summarizers {
                let facts = mine.iter().filter(|r| r.summarizer == *s).flat_map(|r| &r.facts).filter(|f| f.named_by == *named);
                cells.push(share(facts.map(|f| &f.last)));
            }
        }
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use compactbench_eval::facts::NamedBy;
    use compactbench_eval::results::{Instructed, Status};

    use super::*;

    /// Each cell from the runs' totals and the facts' `named_by`, the prompted runs in their own
    /// columns, strategies without instructed sessions left as dashes, and nothing at all when
    /// no session had instructions.
    #[test]
    fn shows_where_instructions_went_and_what_they_kept() {
        let mut runs = crate::tests::runs();
        let mut empty = String::new();
        instructions(&mut empty, &runs, "extractive", &["none", "sum"]);
        assert_eq!(empty, "", "no instructed session, no section");

        let named = |f: &mut compactbench_eval::results::FactOutcome, by: Option<NamedBy>, last: Status| {
            f.named_by = by;
            f.last = last;
        };
        let sum = runs.iter().position(|r| r.strategy == "sum").expect("the fixture has sum");
        let mut run = runs[sum].clone();
        run.instructed = Instructed { manual_asked: 2, manual_ran: 2, manual_in_prompt: 1, memory_in_context: 3, summary_calls: 3, ..Instructed::default() };
        let mut facts = vec![run.facts[0].clone(), run.facts[0].clone(), run.facts[0].clone()];
        named(&mut facts[0], Some(NamedBy::Manual), Status::Lost);
        named(&mut facts[1], Some(NamedBy::Memory), Status::VerbatimSummary);
        named(&mut facts[2], None, Status::Stale);
        run.facts = facts;
        let mut prompted = run.clone();
        prompted.summarizer = "prompted".into();
        prompted.facts[0].last = Status::VerbatimSummary;
        let mut bare = run.clone();
        bare.strategy = "codex".into();
        bare.instructed = Instructed { manual_asked: 2, summary_calls: 1, ..Instructed::default() };
        runs.extend([run, prompted, bare]);
        let mut out = String::new();
        instructions(&mut out, &runs, "extractive", &["none", "sum", "codex"]);
        let table: String = out.lines().filter(|l| l.starts_with('|')).map(|l| format!("{l}\n")).collect();
        expect![[r#"
            | strategy | manual: ran/asked | manual text | memory rule | named by manual (extractive) | named by manual (prompted) | named by memory (extractive) | named by memory (prompted) | not named (extractive) | not named (prompted) |
            |---|---:|---|---|---:|---:|---:|---:|---:|---:|
            | none | 0/0 | – | – | – | – | – | – | – | – |
            | sum | 2/2 | in prompt | as context | 0/1 | 1/1 | 1/1 | 1/1 | 0/1, 1 stale | 0/1, 1 stale |
            | codex | 0/2 | no command | not sent | 0/1 | – | 1/1 | – | 0/1, 1 stale | – |
        "#]]
        .assert_eq(&table);
    }
}
