//! Asking the strategy to compact at a moment, and recording the attempt.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use compactbench_core::{Cx, Error, ErrorKind, Moment, Role, StopReason, Summarizer, Summary, SummaryRequest, Window};

use super::{timed, Run};
use crate::results::CompactionRecord;

impl Run<'_> {
    /// Asks the strategy whether to compact at `at` and, if it plans to, compacts and
    /// records the attempt. Returns whether checkpoints were appended.
    pub(super) fn maybe_compact(&mut self, at: Moment) -> bool {
        self.project();
        let plan = timed(&mut self.phases.decide, || {
            let cx = Cx {
                model: &self.scenario.model,
                summarizer: self.env.summarizer,
                store: &mut self.store,
                tokenizer: self.env.counter,
                failures: self.failures,
            };
            self.replay.decide(&self.log, at, &cx)
        });
        let Some(plan) = plan else { return false };
        let reason = plan.reason().to_owned();
        let tokens_before = self.measure();
        let observed = CutOffCounter { inner: self.env.summarizer, cut_off: AtomicU32::new(0), micros: AtomicU64::new(0) };
        let result = timed(&mut self.phases.compact, || {
            let mut cx = Cx {
                model: &self.scenario.model,
                summarizer: &observed,
                store: &mut self.store,
                tokenizer: self.env.counter,
                failures: self.failures,
            };
            self.replay.compact(&self.log, plan, &mut cx)
        });
        self.phases.summarize += observed.micros.load(Ordering::Relaxed);
        let newest = self.log.messages().next_back().map(|(_, m)| m);
        let mid_loop = newest.is_some_and(|m| m.role == Role::Tool || m.tool_result_ids().next().is_some());
        let mut record = CompactionRecord {
            request: self.request,
            step: self.step as u32,
            first_kept_step: None,
            moment: match at {
                Moment::TurnEnd => "turn_end",
                Moment::BeforeRequest => "before_request",
                Moment::Overflow => "overflow",
            },
            mid_loop,
            reason,
            kinds: Vec::new(),
            tokens_before,
            tokens_after: tokens_before,
            estimated_before: 0,
            injected_tokens: 0,
            summarizer_calls: 0,
            summarizer_input: 0,
            summarizer_output: 0,
            summaries_cut_off: observed.cut_off.into_inner(),
            error: None,
        };
        let compacted = match result {
            Ok(checkpoints) if checkpoints.is_empty() => return false,
            Ok(checkpoints) => {
                for cp in checkpoints {
                    let first_kept = match &cp.window {
                        Window::From(id) => self.entry_step.get(id).copied(),
                        Window::Kept(ids) => ids.iter().filter_map(|id| self.entry_step.get(id)).min().copied(),
                        Window::Inherit => None,
                    };
                    if cp.window != Window::Inherit {
                        record.first_kept_step = first_kept.map(|s| s as u32);
                    }
                    record.kinds.push(cp.kind.as_str());
                    record.estimated_before = record.estimated_before.max(cp.tokens_before);
                    record.injected_tokens += cp.injected.iter().map(|m| self.env.counter.count_message(m)).sum::<u64>();
                    record.summarizer_calls += cp.summarizer.calls;
                    record.summarizer_input += cp.summarizer.input_tokens;
                    record.summarizer_output += cp.summarizer.output_tokens;
                    self.push_checkpoint(cp);
                }
                self.rounds += 1;
                self.failures = 0;
                self.prober.sync(&self.log);
                record.tokens_after = self.measure();
                true
            }
            // Degenerate input is a normal outcome, not a failure worth a row.
            Err(e) if e.kind == ErrorKind::NothingToCompact => return false,
            Err(e) => {
                self.failures += 1;
                record.error = Some(e.to_string());
                false
            }
        };
        self.compactions.push(record);
        compacted
    }
}

/// The run's summarizer, counting the summaries that stopped at their output cap: strategies
/// report calls and tokens in their checkpoints, but a cut-off summary they rejected leaves no
/// checkpoint, and the report must count it all the same.
struct CutOffCounter<'a> {
    inner: &'a dyn Summarizer,
    cut_off: AtomicU32,
    /// Time spent in the summarizer (for the phase profile).
    micros: AtomicU64,
}

impl Summarizer for CutOffCounter<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let mut micros = 0;
        let summary = timed(&mut micros, || self.inner.summarize(request));
        self.micros.fetch_add(micros, Ordering::Relaxed);
        let summary = summary?;
        if summary.stop == StopReason::Length {
            self.cut_off.fetch_add(1, Ordering::Relaxed);
        }
        Ok(summary)
    }
}
