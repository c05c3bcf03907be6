//! The model-judged probes (`--judge`) beside the needle probes, per strategy.
//!
//! For each fact the judge answered a question about at the last request that needed it, the
//! answer quoted the needle, named the fact's tagged key, or missed. Set beside the needle
//! probe of the same request, two disagreements are worth a column each: a needle in the
//! request that the model still missed (buried or ignored), and a fact whose needle is gone
//! but whose name the model gave (a summary that rephrased it, or the model found it in a file
//! the request names).

use std::fmt::Write;

use compactbench_eval::judge::Answer;
use compactbench_eval::results::RunResult;

/// Appends the judged-probe table for `strategies` over `runs`, if any fact was judged.
pub(crate) fn judged(out: &mut String, runs: &[&RunResult], strategies: &[&str]) {
    if !runs.iter().flat_map(|r| &r.facts).any(|f| f.judged.is_some()) {
        return;
    }
    let _ = writeln!(out, "\n## Model-judged probes\n");
    let _ = writeln!(
        out,
        "The judge model answered one question per fact kind at the last request that needed each fact; its answer quoted the \
         needle, named the fact's tagged key, missed, or the call failed. The last two columns compare with the needle probe \
         of the same request.\n"
    );
    let _ = writeln!(out, "| strategy | judged | quoted | named | missed | failed | in request, missed | not in request, named |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for st in strategies {
        let facts = runs.iter().filter(|r| r.strategy == *st).flat_map(|r| &r.facts);
        let (mut all, mut counts, mut buried, mut rephrased) = (0, [0u32; 4], 0, 0);
        for (f, j) in facts.filter_map(|f| f.judged.as_ref().map(|j| (f, j))) {
            all += 1;
            counts[j.answer as usize] += 1;
            buried += u32::from(f.last.is_verbatim() && j.answer == Answer::Missed);
            rephrased += u32::from(!f.last.is_verbatim() && j.answer != Answer::Missed && j.answer != Answer::Failed);
        }
        if all == 0 {
            continue;
        }
        let pct = |n: u32| format!("{:.0}%", 100.0 * f64::from(n) / f64::from(all));
        let _ = writeln!(
            out,
            "| {st} | {all} | {} | {} | {} | {} | {buried} | {rephrased} |",
            pct(counts[Answer::Quoted as usize]),
            pct(counts[Answer::Named as usize]),
            pct(counts[Answer::Missed as usize]),
            counts[Answer::Failed as usize]
        );
    }
}
