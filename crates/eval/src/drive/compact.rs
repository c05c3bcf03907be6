//! Asking the strategy to compact at a moment, and recording the attempt.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use compactbench_core::{Cx, Error, ErrorKind, Moment, Role, StopReason, Summarizer, Summary, SummaryContext, SummaryRequest, Window};
use compactbench_tokens::{TokenCounter, PER_MESSAGE_OVERHEAD, PER_REQUEST_OVERHEAD};

use super::{timed, Run};
use crate::results::{CompactionRecord, Instructed};

impl Run<'_> {
    /// Asks the strategy whether to compact at `at` and, if it plans to, compacts and
    /// records the attempt. At [`Moment::Manual`], `typed` is what the user typed after the
    /// command. Returns whether checkpoints were appended.
    pub(super) fn maybe_compact(&mut self, at: Moment, typed: Option<&str>) -> bool {
        self.project();
        let plan = timed(&mut self.phases.decide, || {
            let cx = Cx {
                model: &self.scenario.model,
                summarizer: self.env.summarizer,
                store: &mut self.store,
                tokenizer: self.env.counter,
                failures: self.failures,
                manual: typed,
            };
            self.replay.decide(&self.log, at, &cx)
        });
        self.instructed.manual_asked += u32::from(at == Moment::Manual);
        let Some(plan) = plan else { return false };
        self.instructed.manual_ran += u32::from(at == Moment::Manual);
        let reason = plan.reason().to_owned();
        let tokens_before = self.measure();
        // A summary call sent as the conversation's own prefix reuses what the last main request
        // left in the cache, counted as that request's `cached_tokens` is.
        let shared = self.shared_with_previous();
        let prefix = Prefix { tokens: tokens_before, cached: self.measured.tokens[..shared].iter().sum() };
        let observed = Observed {
            inner: self.env.summarizer,
            counter: self.env.counter,
            prefix,
            cut_off: AtomicU32::new(0),
            micros: AtomicU64::new(0),
            cost: Mutex::new(CallCost { last_fresh: self.last_fresh.take(), window: self.scenario.model.window, ..CallCost::default() }),
            typed: typed.filter(|t| !t.is_empty()),
            rule: &self.session.instructions.memory_rule,
        };
        let result = timed(&mut self.phases.compact, || {
            let mut cx = Cx {
                model: &self.scenario.model,
                summarizer: &observed,
                store: &mut self.store,
                tokenizer: self.env.counter,
                failures: self.failures,
                manual: typed,
            };
            self.replay.compact(&self.log, plan, &mut cx)
        });
        self.phases.summarize += observed.micros.load(Ordering::Relaxed);
        let cut_off = observed.cut_off.into_inner();
        let cost = observed.cost.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.last_fresh = cost.last_fresh;
        let reach = cost.reach;
        self.instructed.manual_in_prompt += reach.manual_in_prompt;
        self.instructed.manual_in_context += reach.manual_in_context;
        self.instructed.memory_in_prompt += reach.memory_in_prompt;
        self.instructed.memory_in_context += reach.memory_in_context;
        self.instructed.summary_calls += reach.summary_calls;
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
                Moment::Manual => "manual",
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
            summaries_cut_off: cut_off,
            summary_context: cost.context.map_or("", SummaryContext::as_str),
            summary_request_tokens: cost.input,
            summary_cached_tokens: cost.cached,
            summary_output_tokens: cost.output,
            summary_calls_over_window: cost.over_window,
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

/// The view a compaction starts from, as a summary call sent with the conversation as its
/// prefix sees it.
#[derive(Clone, Copy)]
struct Prefix {
    /// Exact tokens of the view as a request (per-request overhead included).
    tokens: u64,
    /// Of those, the prefix shared with the last main request.
    cached: u64,
}

/// What the summary calls of one compaction sent and got back, measured as requests.
#[derive(Default)]
struct CallCost {
    /// The one context of its calls (`None` before the first; calls of mixed contexts keep the
    /// first).
    context: Option<SummaryContext>,
    /// Exact tokens sent, per-request overhead included.
    input: u64,
    /// Of those, served from the prompt cache.
    cached: u64,
    /// Exact tokens of the answers.
    output: u64,
    /// A prefix call of this compaction has been sent: a second one finds the whole view cached.
    prefix_sent: bool,
    /// The scenario's window, and the calls whose request exceeded it.
    window: u64,
    over_window: u32,
    /// The run's previous fresh call (system prompt, user message): the only prefix a fresh call
    /// can share.
    last_fresh: Option<(String, String)>,
    /// Where the calls carried the user's compaction instructions.
    reach: Instructed,
}

impl CallCost {
    /// Adds `request`, sent as its context says, to the calls' input and cached tokens.
    fn send(&mut self, request: &SummaryRequest, prefix: Prefix, counter: &TokenCounter) {
        self.context.get_or_insert(request.context);
        let before = self.input;
        match request.context {
            SummaryContext::Prefix | SummaryContext::Fork => {
                // The view as the main request would send it, the instruction appended as a final
                // user turn.
                let instruction = if request.instructions.is_empty() { 0 } else { user_tokens(counter, &request.instructions) };
                self.input += prefix.tokens + instruction;
                self.cached += if self.prefix_sent { prefix.tokens - PER_REQUEST_OVERHEAD } else { prefix.cached };
                self.prefix_sent = true;
            }
            SummaryContext::Fresh => {
                let user = request.user_message();
                let system = if request.system.is_empty() { 0 } else { user_tokens(counter, &request.system) };
                self.input += system + user_tokens(counter, &user) + PER_REQUEST_OVERHEAD;
                self.cached += match &self.last_fresh {
                    Some((s, u)) if *s == request.system => system + shared_tokens(counter, u, &user),
                    _ => 0,
                };
                self.last_fresh = Some((request.system.clone(), user));
            }
        }
        self.over_window += u32::from(self.input - before > self.window);
    }
}

impl Instructed {
    /// Counts one summary call, and where it carries `typed` (what the user typed after a manual
    /// command) and `rule` (the project memory's compaction instruction): in its instructions,
    /// or only in its system prompt or transcript.
    fn see(&mut self, request: &SummaryRequest, typed: Option<&str>, rule: &str) {
        self.summary_calls += 1;
        let place = |text: &str| {
            if request.instructions.contains(text) {
                (1, 0)
            } else if request.system.contains(text) || request.transcript.contains(text) {
                (0, 1)
            } else {
                (0, 0)
            }
        };
        if let Some(typed) = typed {
            let (prompt, context) = place(typed);
            self.manual_in_prompt += prompt;
            self.manual_in_context += context;
        }
        if !rule.is_empty() {
            let (prompt, context) = place(rule);
            self.memory_in_prompt += prompt;
            self.memory_in_context += context;
        }
    }
}

/// Exact tokens of a message holding `text` (a summary call's system prompt or user message):
/// counted by segments, since a transcript mostly repeats lines counted before.
fn user_tokens(counter: &TokenCounter, text: &str) -> u64 {
    counter.count_text_segmented(text) + PER_MESSAGE_OVERHEAD
}

/// Tokens of the prefix `a` and `b` share, cut back to its last line break (a whole message
/// when they are equal).
fn shared_tokens(counter: &TokenCounter, a: &str, b: &str) -> u64 {
    if a == b {
        return user_tokens(counter, b);
    }
    let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    match b[..common].rfind('\n') {
        Some(cut) => counter.count_text_segmented(&b[..=cut]) + PER_MESSAGE_OVERHEAD,
        None => 0,
    }
}

/// The run's summarizer, measuring each summary call as a request (what it sends, how much of
/// it the prompt cache holds, what comes back) and counting the summaries that stopped at their
/// output cap: strategies report calls and tokens in their checkpoints, but a cut-off summary
/// they rejected leaves no checkpoint, and the report must count it all the same.
struct Observed<'a> {
    inner: &'a dyn Summarizer,
    counter: &'a TokenCounter,
    prefix: Prefix,
    cut_off: AtomicU32,
    /// Time spent in the summarizer (for the phase profile).
    micros: AtomicU64,
    cost: Mutex<CallCost>,
    /// What the user typed after a manual command (`None` otherwise or when bare), and the
    /// project memory's compaction instruction (`""`: none), looked for in each call.
    typed: Option<&'a str>,
    rule: &'a str,
}

impl Summarizer for Observed<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let mut micros = 0;
        let summary = timed(&mut micros, || self.inner.summarize(request));
        self.micros.fetch_add(micros, Ordering::Relaxed);
        {
            // Sent whether or not it is answered; the answer's tokens counted exactly.
            let mut cost = self.cost.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            cost.send(request, self.prefix, self.counter);
            cost.reach.see(request, self.typed, self.rule);
            if let Ok(s) = &summary {
                cost.output += self.counter.count_text_segmented(&s.text);
            }
        }
        let summary = summary?;
        if summary.stop == StopReason::Length {
            self.cut_off.fetch_add(1, Ordering::Relaxed);
        }
        Ok(summary)
    }
}
