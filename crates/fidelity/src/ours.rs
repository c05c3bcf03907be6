//! Our side: what our strategy crate decides and selects for a case.

use compactbench_core::{Checkpoint, Cx, Decision, EntryId, Error, Log, ModelProfile, Moment, StopReason, Strategy, Summarizer, Summary, SummaryRequest, VirtualStore, Window};

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
