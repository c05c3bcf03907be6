//! Compaction under pressure, per strategy over every scenario and seed: what happened to the
//! summary requests the provider refused, and whether the strategy found its way back under the
//! window.
//!
//! The runner plays the provider's window for the summarizer (the session's own model): a
//! summary request larger than the window is rejected unanswered, and the strategy's own
//! fallback decides what follows. Its original's fallback shows in the figures: a retry with
//! less (Claude Code's `truncateHeadForPTLRetry`, Codex's oldest-item trim, Goose's
//! tool-response ladder) recovers inside the attempt; a harness without one fails the attempt and
//! tries again at a later request, and a context that never shrinks again makes every later
//! attempt larger still: a failing streak.

use std::fmt::Write;

use compactbench_eval::results::RunResult;

/// One strategy's pressure figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Pressure {
    /// Summary calls rejected as larger than the window.
    pub(crate) rejected: u32,
    /// Compaction attempts that had at least one call rejected.
    pub(crate) met_rejection: usize,
    /// Of those, attempts that still succeeded (a retry with less fit, or a fallback without
    /// the summary).
    pub(crate) recovered: usize,
    /// Compaction attempts that failed, whatever the cause.
    pub(crate) failed: usize,
    /// The most failed attempts in a row in one run (a success ends a streak).
    pub(crate) longest_streak: usize,
    /// Requests sent larger than the window.
    pub(crate) over_window_requests: usize,
}

/// The figures of `runs` (one strategy's).
pub(crate) fn pressure(runs: &[&RunResult]) -> Pressure {
    let mut p = Pressure::default();
    for r in runs {
        let mut streak = 0;
        for c in &r.compactions {
            p.rejected += c.summary_calls_over_window;
            let failed = c.error.is_some();
            if c.summary_calls_over_window > 0 {
                p.met_rejection += 1;
                p.recovered += usize::from(!failed);
            }
            p.failed += usize::from(failed);
            streak = if failed { streak + 1 } else { 0 };
            p.longest_streak = p.longest_streak.max(streak);
        }
        p.over_window_requests += r.requests.iter().filter(|q| q.overflow).count();
    }
    p
}

/// Appends the pressure table for `strategies` (in report order) over `runs`: the strategies
/// that met a rejection or failed an attempt; one line when none did.
pub(crate) fn pressure_table(out: &mut String, runs: &[&RunResult], strategies: &[&str]) {
    let _ = writeln!(out, "\n## Compaction under pressure\n");
    let rows: Vec<(&str, Pressure)> = strategies
        .iter()
        .map(|st| (*st, pressure(&runs.iter().copied().filter(|r| r.strategy == *st).collect::<Vec<_>>())))
        .filter(|(_, p)| p.rejected > 0 || p.failed > 0)
        .collect();
    if rows.is_empty() {
        let _ = writeln!(out, "No summary request exceeded the window and no compaction attempt failed.");
        return;
    }
    let _ = writeln!(
        out,
        "Over every scenario and seed; strategies that met a refused summary request or failed a compaction attempt. The summarizer is \
         the session's own model: a summary request larger than the window (by the runner's exact count, as its harness sends it) is \
         refused unanswered, as the provider would (\"prompt is too long\", `context_length_exceeded`), and the strategy's own fallback \
         takes over. Recovered: attempts that met a refusal and still compacted (a retry with less fit). Longest failing streak: failed \
         attempts in a row in one run, each at a later request (the compaction loop users report). Requests over window: main requests \
         sent larger than the window. Some harnesses size a summary request by their own estimate before sending it (Amp's draft, \
         Codex's remote path, OpenCode V2's fit check, oh-my-pi's input windows); what each original does on a refusal, and whether \
         our crate does the same, is in reports/README.md.\n"
    );
    let _ = writeln!(out, "| strategy | summary calls refused | attempts that met one | recovered | failed attempts | longest failing streak | requests over window |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for (st, p) in rows {
        let _ = writeln!(
            out,
            "| {st} | {} | {} | {} | {} | {} | {} |",
            p.rejected, p.met_rejection, p.recovered, p.failed, p.longest_streak, p.over_window_requests
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compactbench_eval::results::CompactionRecord;

    /// Refusals are summed, an attempt that met one counts as recovered only when it succeeded,
    /// and a success ends a failing streak.
    #[test]
    fn counts_refusals_recoveries_and_streaks() {
        let mut run = crate::tests::runs().swap_remove(1);
        let base = CompactionRecord { error: None, summary_calls_over_window: 0, ..run.compactions[0].clone() };
        let failed = |over: u32| CompactionRecord { error: Some("ContextOverflow: prompt is too long".into()), kinds: vec![], summary_calls_over_window: over, ..base.clone() };
        run.compactions = vec![
            CompactionRecord { summary_calls_over_window: 2, ..base.clone() },
            failed(1),
            failed(1),
            base.clone(),
            failed(0),
            failed(1),
            failed(1),
        ];
        let p = pressure(&[&run]);
        assert_eq!(p.rejected, 6);
        assert_eq!((p.met_rejection, p.recovered), (5, 1));
        assert_eq!((p.failed, p.longest_streak), (5, 3));
        let mut out = String::new();
        pressure_table(&mut out, &[&run], &[run.strategy.as_str()]);
        assert!(out.contains(&format!("| {} | 6 | 5 | 1 | 5 | 3 |", run.strategy)), "{out}");
        run.compactions = vec![base];
        let mut out = String::new();
        pressure_table(&mut out, &[&run], &[run.strategy.as_str()]);
        assert!(out.contains("No summary request exceeded"), "{out}");
    }
}
