//! Asking the strategy to compact at a moment, and recording the attempt.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use compactbench_core::{Cx, Error, ErrorKind, Moment, Role, Shape, StopReason, Summarizer, Summary, SummaryContext, SummaryRequest, Window};
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
        let prefix = Prefix { tokens: tokens_before, messages: &self.measured.tokens, shared };
        let observed = Observed {
            inner: self.env.summarizer,
            counter: self.env.counter,
            prefix,
            cut_off: AtomicU32::new(0),
            micros: AtomicU64::new(0),
            window: (self.scenario.model.window, self.scenario.model.provider),
            cost: Mutex::new(CallCost { last_fresh: self.last_fresh.take(), ..CallCost::default() }),
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
struct Prefix<'a> {
    /// Exact tokens of the view as a request (per-request overhead included).
    tokens: u64,
    /// Exact tokens of each of its messages.
    messages: &'a [u64],
    /// How many of its first messages the last main request also began with.
    shared: usize,
}

impl Prefix<'_> {
    /// Exact tokens of the view's first `n` messages.
    fn first(&self, n: usize) -> u64 {
        self.messages[..n.min(self.messages.len())].iter().sum()
    }
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
    /// Calls whose request exceeded the window, rejected as the provider would.
    over_window: u32,
    /// The run's previous fresh call (system prompt, user message): the only prefix a fresh call
    /// can share.
    last_fresh: Option<(String, String)>,
    /// Where the calls carried the user's compaction instructions.
    reach: Instructed,
}

impl CallCost {
    /// What `request`, sent as its context says, costs: its input and cached tokens, and the
    /// fresh call it leaves as the next one's cache. Nothing is recorded yet: a request the
    /// provider rejects is neither billed nor cached.
    fn price(&self, request: &SummaryRequest, prefix: Prefix<'_>, counter: &TokenCounter) -> Priced {
        let instruction = || optional_message_tokens(counter, &request.instructions);
        match request.context {
            SummaryContext::Prefix | SummaryContext::Fork => {
                // The view as the main request would send it, the instruction appended as a final
                // user turn.
                let cached = if self.prefix_sent { prefix.tokens - PER_REQUEST_OVERHEAD } else { prefix.first(prefix.shared) };
                Priced { input: prefix.tokens + instruction(), cached, fresh: None }
            }
            SummaryContext::TrimmedPrefix { newest } => {
                // The view's first messages only: the cache serves what of them an earlier
                // request of the same content sent.
                let kept = prefix.messages.len().saturating_sub(newest);
                let held = prefix.first(kept);
                let cached = if self.prefix_sent { held } else { prefix.first(prefix.shared.min(kept)) };
                Priced { input: held + instruction() + PER_REQUEST_OVERHEAD, cached, fresh: None }
            }
            SummaryContext::Fresh => {
                let user = request.user_message();
                let system = optional_message_tokens(counter, &request.system);
                let cached = match &self.last_fresh {
                    Some((s, u)) if *s == request.system => system + shared_tokens(counter, u, &user),
                    _ => 0,
                };
                Priced { input: system + user_tokens(counter, &user) + PER_REQUEST_OVERHEAD, cached, fresh: Some((request.system.clone(), user)) }
            }
        }
    }

    /// Records a sent `request` priced at `priced`.
    fn send(&mut self, request: &SummaryRequest, priced: Priced) {
        self.context.get_or_insert(request.context);
        self.input += priced.input;
        self.cached += priced.cached;
        match priced.fresh {
            Some(fresh) => self.last_fresh = Some(fresh),
            None => self.prefix_sent = true,
        }
    }
}

/// One summary call's price (see [`CallCost::price`]).
struct Priced {
    input: u64,
    cached: u64,
    /// A fresh call's system prompt and user message.
    fresh: Option<(String, String)>,
}

/// Exact tokens of what `request` itself holds (system prompt, transcript, instructions) as
/// one request. A prefix call is priced as the whole view plus its instruction, but a
/// strategy that retries with the oldest turns dropped sends less than the view: what the
/// provider counts is what the request holds.
fn held_tokens(counter: &TokenCounter, request: &SummaryRequest) -> u64 {
    optional_message_tokens(counter, &request.system) + user_tokens(counter, &request.user_message()) + PER_REQUEST_OVERHEAD
}

/// [`user_tokens`] of a message the request leaves out when `text` is empty (a system prompt,
/// an appended instruction).
fn optional_message_tokens(counter: &TokenCounter, text: &str) -> u64 {
    if text.is_empty() { 0 } else { user_tokens(counter, text) }
}

/// The provider's rejection of a request of `tokens` against a window of `window`, worded as
/// the scenario's provider words it (strategies that read the figures out of it, as Claude
/// Code does for its retry, find them where the original finds them).
fn context_overflow(provider: Shape, tokens: u64, window: u64) -> Error {
    let message = match provider {
        Shape::Anthropic => format!("prompt is too long: {tokens} tokens > {window} maximum"),
        Shape::OpenaiChat => format!(
            "context_length_exceeded: This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."
        ),
        Shape::OpenaiResponses => "context_length_exceeded: Your input exceeds the context window of this model. Please adjust your input and try again.".to_owned(),
        Shape::Gemini => format!("The input token count ({tokens}) exceeds the maximum number of tokens allowed ({window})."),
    };
    Error::new(ErrorKind::ContextOverflow, message)
}

impl Instructed {
    /// Counts one summary call, and where it carries `typed` (what the user typed after a manual
    /// command) and `rule` (the project memory's compaction instruction): in its instructions,
    /// or only in its system prompt or transcript.
    fn see(&mut self, request: &SummaryRequest, typed: Option<&str>, rule: &str) {
        self.summary_calls += 1;
        // memchr's substring search: std's two-way search over every transcript was a visible
        // share of the run.
        let place = |text: &str| {
            let finder = memchr::memmem::Finder::new(text);
            let holds = |hay: &str| finder.find(hay.as_bytes()).is_some();
            if holds(&request.instructions) {
                (1, 0)
            } else if holds(&request.system) || holds(&request.transcript) {
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
///
/// It also plays the provider's window: the summarizer is the session's own model, so a summary
/// request larger than the window is rejected unanswered ([`ErrorKind::ContextOverflow`]), as
/// the provider would, and the strategy's own fallback decides what happens next (retry with
/// less, give up, try again at the next request). Offline summarizers accept any size, so
/// without this no strategy would ever meet the failure its original was built to survive.
struct Observed<'a> {
    inner: &'a dyn Summarizer,
    counter: &'a TokenCounter,
    prefix: Prefix<'a>,
    /// The scenario's window and the provider that enforces it.
    window: (u64, Shape),
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
        let lock = || self.cost.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let priced = lock().price(request, self.prefix, self.counter);
        let (window, provider) = self.window;
        // Only a request priced over the window can be over it: the rarer exact count of what it
        // holds is taken then (a fresh call and a trimmed prefix are priced by exactly what they
        // hold).
        if priced.input > window {
            let held = match request.context {
                SummaryContext::TrimmedPrefix { .. } | SummaryContext::Fresh => priced.input,
                SummaryContext::Prefix | SummaryContext::Fork => held_tokens(self.counter, request),
            };
            if held > window {
                lock().over_window += 1;
                return Err(context_overflow(provider, priced.input.min(held), window));
            }
        }
        let mut micros = 0;
        let summary = timed(&mut micros, || self.inner.summarize(request));
        self.micros.fetch_add(micros, Ordering::Relaxed);
        {
            // Sent whether or not it is answered; the answer's tokens counted exactly.
            let mut cost = lock();
            cost.send(request, priced);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers every call, counting them.
    struct Counting(AtomicU32);

    impl Summarizer for Counting {
        fn name(&self) -> &str {
            "counting"
        }

        fn summarize(&self, _: &SummaryRequest) -> Result<Summary, Error> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Ok(Summary { text: "S".into(), input_tokens: 0, output_tokens: 1, stop: StopReason::Complete })
        }
    }

    fn request(context: SummaryContext, words: usize) -> SummaryRequest {
        SummaryRequest {
            purpose: "test".into(),
            context,
            system: String::new(),
            transcript: "alpha beta gamma delta\n".repeat(words / 4),
            instructions: "Summarize.".into(),
            max_output_tokens: 100,
        }
    }

    /// A summary request larger than the window never reaches the summarizer: it is refused as
    /// the scenario's provider words it, counted, and left out of the cost; one that fits is
    /// answered; a prefix call whose own content fits (a retry that dropped the oldest turns) is
    /// sent even though the whole view would not fit, and a trimmed prefix is judged by the view
    /// messages it holds.
    #[test]
    fn refuses_summary_requests_over_the_window() {
        let counter = TokenCounter::default();
        let inner = Counting(AtomicU32::new(0));
        let observed = |messages: &'static [u64]| Observed {
            inner: &inner,
            counter: &counter,
            prefix: Prefix { tokens: messages.iter().sum::<u64>() + PER_REQUEST_OVERHEAD, messages, shared: 1 },
            window: (1_000, Shape::Anthropic),
            cut_off: AtomicU32::new(0),
            micros: AtomicU64::new(0),
            cost: Mutex::new(CallCost::default()),
            typed: None,
            rule: "",
        };

        let o = observed(&[]);
        let err = o.summarize(&request(SummaryContext::Fresh, 4_000)).unwrap_err();
        assert_eq!(err.kind, ErrorKind::ContextOverflow);
        let gap = err.message.strip_prefix("prompt is too long: ").and_then(|m| m.strip_suffix(" tokens > 1000 maximum"));
        assert!(gap.and_then(|n| n.parse::<u64>().ok()).is_some_and(|n| n > 1_000), "{}", err.message);
        let cost = o.cost.into_inner().unwrap();
        assert_eq!((inner.0.load(Ordering::Relaxed), cost.over_window, cost.input), (0, 1, 0));

        let o = observed(&[]);
        assert!(o.summarize(&request(SummaryContext::Fresh, 400)).is_ok());
        assert_eq!(inner.0.load(Ordering::Relaxed), 1);

        // The view is over the window, the request's own content is not.
        let o = observed(&[1_000, 4_000]);
        assert!(o.summarize(&request(SummaryContext::Prefix, 400)).is_ok());
        let cost = o.cost.into_inner().unwrap();
        assert_eq!((inner.0.load(Ordering::Relaxed), cost.over_window), (2, 0));
        // Both over: refused, worded as an OpenAI server words it.
        let mut o = observed(&[1_000, 4_000]);
        o.window.1 = Shape::OpenaiChat;
        let err = o.summarize(&request(SummaryContext::Prefix, 4_000)).unwrap_err();
        assert!(err.message.starts_with("context_length_exceeded"), "{}", err.message);
        assert_eq!(inner.0.load(Ordering::Relaxed), 2);

        // A trimmed prefix holds the view's first messages, whatever its own rendering weighs:
        // sent and priced by them when they fit, the cache serving the shared first one.
        let o = observed(&[400, 300, 3_000]);
        assert!(o.summarize(&request(SummaryContext::TrimmedPrefix { newest: 1 }, 4_000)).is_ok());
        let cost = o.cost.into_inner().unwrap();
        let instruction = user_tokens(&counter, "Summarize.");
        assert_eq!((inner.0.load(Ordering::Relaxed), cost.over_window), (3, 0));
        assert_eq!((cost.input, cost.cached), (700 + instruction + PER_REQUEST_OVERHEAD, 400));
        // Left out too little to fit: refused by the same count.
        let o = observed(&[400, 300, 3_000]);
        let err = o.summarize(&request(SummaryContext::TrimmedPrefix { newest: 0 }, 40)).unwrap_err();
        assert_eq!(err.kind, ErrorKind::ContextOverflow);
        assert!(err.message.contains(&format!("{} tokens", 3_700 + instruction + PER_REQUEST_OVERHEAD)), "{}", err.message);
        assert_eq!(inner.0.load(Ordering::Relaxed), 3);
    }
}
