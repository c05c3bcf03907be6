//! Our side: what our strategy crate decides and selects for a case.

use compactbench_core::{
    Checkpoint, Cx, Decision, EntryId, Error, Log, ModelProfile, Moment, Origin, StopReason, Strategy, Summarizer, Summary, SummaryRequest,
    VirtualStore, Window,
};

use std::collections::BTreeMap;
use std::sync::OnceLock;

use compactbench_tokens::TokenCounter;

use crate::{rewrite_text, Answer, Case};

/// The exact tokenizer our strategies count through (`Cx::tokenizer`), as the runner gives
/// them: one memoized counter for the process.
pub fn tokenizer() -> &'static TokenCounter {
    static COUNTER: OnceLock<TokenCounter> = OnceLock::new();
    COUNTER.get_or_init(TokenCounter::default)
}

/// The mocked model call: a short fixed summary (the originals' drivers mock theirs too, so
/// neither side's selection depends on what a model would write).
pub struct FixedSummarizer;

/// The text both sides' mocked model calls return.
pub const FIXED_SUMMARY: &str = "## Goal\nContinue the task.\n\n## Progress\nWork is under way.";

impl Summarizer for FixedSummarizer {
    fn name(&self) -> &str {
        "fixed"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        Ok(Summary {
            text: FIXED_SUMMARY.into(),
            input_tokens: request.user_message().len() as u64 / 4,
            output_tokens: FIXED_SUMMARY.len() as u64 / 4,
            stop: StopReason::Complete,
        })
    }
}

/// Whether our strategy's trigger fires on `log` at `moment` with `model`.
pub fn decides_to_compact(strategy: &dyn Strategy, log: &Log, moment: Moment, model: &ModelProfile) -> bool {
    let view = strategy.project(log);
    let mut store = VirtualStore::new();
    let cx = Cx::new(model, &FixedSummarizer, &mut store, tokenizer());
    matches!(strategy.decide(log, &view, moment, &cx), Decision::Compact { .. })
}

/// Our answer: the trigger, and the selection of the compaction we would run now (run even
/// when the trigger did not fire, as a manual compaction would, so selection is compared on
/// every case where both sides can select). `rewrites`: which in-place rewrites the original's
/// driver reports ([`crate::Original::rewrites`]); `apart`: its `compact` leaves them out
/// ([`crate::Original::rewrites_apart`]).
pub fn answer(strategy: &dyn Strategy, case: &Case, moment: Moment, rewrites: fn(&Checkpoint) -> bool, apart: bool) -> Answer {
    let compact = decides_to_compact(strategy, &case.log, moment, &case.model);
    let view = strategy.project(&case.log);
    let mut store = VirtualStore::new();
    let mut cx = Cx::new(&case.model, &FixedSummarizer, &mut store, tokenizer());
    let mut out = Answer { compact, ..Answer::default() };
    let Ok(checkpoints) = strategy.compact(&case.log, &view, moment, &mut cx) else { return out };
    let reported = |cp: &&Checkpoint| cp.window == Window::Inherit && rewrites(cp);
    // An entry rewritten twice shows its newest replacement's text.
    let text: BTreeMap<EntryId, String> =
        checkpoints.iter().filter(reported).flat_map(|cp| &cp.replacements).map(|r| (r.entry, rewrite_text(&r.message))).collect();
    out.rewritten = Some(text.keys().copied().collect());
    out.rewritten_text = Some(text);
    // Our trigger fired for them alone: the original's (apart from them) did not.
    if apart && !checkpoints.iter().any(|cp| !reported(&cp)) {
        out.compact = false;
    }
    if let Some(cp) = checkpoints.iter().find(|cp| cp.window != Window::Inherit) {
        match &cp.window {
            Window::From(id) => out.first_kept = Some(*id),
            Window::Kept(ids) => out.kept = Some(ids.clone()),
            Window::Inherit => unreachable!("filtered above"),
        }
        out.tokens_before = Some(cp.tokens_before);
        out.split_turn = cp.details.get("split_turn").or_else(|| cp.details.get("isSplitTurn")).and_then(|v| v.as_bool());
    }
    out
}

/// The entries our view of `log` shows, as they are or through a stand-in, sorted: what a
/// strategy that keeps events in every view and records no checkpoint keeps (V0's recent
/// events), for an original whose driver reports that ([`crate::Original::in_view`]).
pub fn view_kept(strategy: &dyn Strategy, log: &Log) -> Vec<EntryId> {
    let mut out: Vec<EntryId> = strategy.project(log).messages.into_iter().filter_map(|m| m.origin.entry()).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The entries our view of `log` shows as a stand-in, sorted: a message other than the log's
/// sent in its place (`Replaced(entry, by)`, `by` another entry) that no checkpoint records,
/// as V0's masked observations are, for an original whose driver reports those
/// ([`crate::Original::in_view`]). A message cut where it is sent (`Replaced(entry,
/// entry)`: V0's message builder truncating a long result) is not the condenser's doing and
/// not counted.
pub fn view_rewrites(strategy: &dyn Strategy, log: &Log) -> Vec<EntryId> {
    let mut out: Vec<EntryId> = strategy
        .project(log)
        .messages
        .into_iter()
        .filter_map(|m| match m.origin {
            Origin::Replaced(entry, by) if by != entry && log.message(entry) != Some(&m.message) => Some(entry),
            _ => None,
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Message, Shape};
    use compactbench_strategy_openhands::{OpenhandsConfig, OpenhandsStrategy};

    use super::*;

    /// V0's observation masking stores nothing: what it masked is read from the view, and a
    /// result inside its attention window is not, even where the message builder truncates it.
    #[test]
    fn masked_observations_are_read_from_the_view() {
        let mut log = Log::new();
        log.push_message(Message::system("be brief"));
        log.push_message(Message::user("ask"));
        for n in 0..3 {
            let id = format!("c{n}");
            log.push_message(Message::tool_call(&id, "read", serde_json::json!({"path": format!("{n}.rs")})));
            let long = if n == 2 { "x".repeat(40_000) } else { String::new() };
            log.push_message(Message::tool_result(&id, "read", format!("contents of {n}.rs{long}"), false));
        }
        let masking = OpenhandsStrategy::new(OpenhandsConfig::ObservationMasking { attention_window: 2 }).unwrap();
        // Eight events, one per message: the results at 3 and 5 are outside the newest two,
        // the one at 7 is not (only cut to V0's 30 000 characters).
        assert!(masking.project(&log).messages.iter().any(|m| m.origin == Origin::Replaced(EntryId(7), EntryId(7))));
        assert_eq!(view_rewrites(&masking, &log), [EntryId(3), EntryId(5)]);
        let case = Case::new("t", log.clone(), ModelProfile { name: "m".into(), window: 100_000, max_output: 8_192, provider: Shape::Anthropic, pricing: Default::default() });
        assert_eq!(answer(&masking, &case, Moment::BeforeRequest, crate::originals::all_rewrites, false).rewritten, Some(Vec::new()), "no checkpoint records them");
        let unmasked = OpenhandsStrategy::new(OpenhandsConfig::ObservationMasking { attention_window: 100 }).unwrap();
        assert!(view_rewrites(&unmasked, &log).is_empty());
        // A masked result is still sent (as its stand-in), its call no longer.
        assert_eq!(view_kept(&masking, &log), [0, 1, 3, 5, 6, 7].map(EntryId));
        assert_eq!(view_kept(&unmasked, &log), (0..8).map(EntryId).collect::<Vec<_>>());
    }
}
