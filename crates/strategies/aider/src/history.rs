//! `ChatSummary` from `aider/history.py`: the split-half recursion and `summarize_all`.

use compactbench_core::{Cx, EntryId, Error, Message, Summarizer, SummarizerUsage, SummaryContext, SummaryRequest};

use crate::prompt;
use crate::tokens::Counter;
use crate::AiderConfig;

/// Aider's `min_split`: at most this many messages are summarized whole.
const MIN_SPLIT: usize = 4;
/// Recursion deeper than this summarizes everything.
const MAX_DEPTH: u32 = 3;
/// Kept free of the weak model's input window when sizing the head.
const HEAD_RESERVE: i64 = 512;
/// Head budget base when the weak model's `max_input_tokens` is unknown.
const UNKNOWN_MAX_INPUT: u64 = 4096;
/// The assistant reply `summarize` appends after a trailing non-assistant message (literal).
pub(crate) const OK: &str = "Ok.";
/// Aider's message when every summarizer model failed (literal).
pub(crate) const ALL_FAILED: &str = "summarizer unexpectedly failed for all models";

/// Where an item of Aider's done list comes from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Source {
    /// A log message.
    Entry(EntryId),
    /// The summary made by this compaction.
    Summary,
    /// A message that is not in the log: an earlier summary or `Ok.` carried over, or a new `Ok.`.
    Injected(Message),
}

/// One message of Aider's done list: its dict (`role`, `content`), its size, and its origin.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub(crate) role: &'static str,
    pub(crate) content: String,
    pub(crate) tokens: u64,
    pub(crate) source: Source,
}

impl Item {
    /// The item with its size as `tokenize` counts it (`token_count(msg)`).
    pub(crate) fn new(counter: &Counter<'_>, role: &'static str, content: String, source: Source) -> Item {
        let tokens = counter.message(role, &content);
        Item { role, content, tokens, source }
    }

    fn ok(counter: &Counter<'_>) -> Item {
        Item::new(counter, "assistant", OK.into(), Source::Injected(Message::assistant(OK)))
    }
}

/// The `max_tokens` Aider gives `ChatSummary`: the flag, or the main model's
/// `max_chat_history_tokens = min(max(max_input_tokens / 16, 1024), 8192)` (a Python float).
pub(crate) fn max_tokens(flag: Option<u64>, max_input_tokens: u64) -> f64 {
    match flag {
        Some(n) => n as f64,
        None => (max_input_tokens as f64 / 16.0).clamp(1024.0, 8192.0),
    }
}

/// `ChatSummary.too_big`: the sum of per-message counts (`total`) strictly above `max_tokens`.
pub(crate) fn too_big(total: u64, max_tokens: f64) -> bool {
    total as f64 > max_tokens
}

pub(crate) fn total(items: &[Item]) -> u64 {
    items.iter().map(|i| i.tokens).sum()
}

/// One `ChatSummary` run, with what it cost and what it dropped.
pub(crate) struct ChatSummary<'a> {
    max_tokens: f64,
    /// `models[0].info["max_input_tokens"] or 4096`, minus 512.
    head_budget: i64,
    models: u32,
    max_output: u64,
    summarizer: &'a dyn Summarizer,
    counter: Counter<'a>,
    pub(crate) usage: SummarizerUsage,
    /// Deepest recursion reached.
    pub(crate) depth: u32,
    /// Log messages cut from the head by the head budget: neither summarized nor kept.
    pub(crate) dropped: Vec<EntryId>,
}

impl<'a> ChatSummary<'a> {
    /// The `ChatSummary` of `config` (`aider/main.py`): its first model (the weak model) bounds
    /// the head, and counts.
    pub(crate) fn new(config: &AiderConfig, cx: &Cx<'a>) -> ChatSummary<'a> {
        let weak = config.weak_model_max_input_tokens.unwrap_or(cx.model.window);
        ChatSummary {
            max_tokens: max_tokens(config.max_chat_history_tokens, cx.model.window),
            head_budget: (if weak == 0 { UNKNOWN_MAX_INPUT } else { weak }) as i64 - HEAD_RESERVE,
            models: config.summarizer_models,
            max_output: cx.model.max_output,
            summarizer: cx.summarizer,
            counter: Counter::of(cx),
            usage: SummarizerUsage::default(),
            depth: 0,
            dropped: Vec::new(),
        }
    }

    /// `ChatSummary.summarize`: the recursion, then `Ok.` if the result does not end with an
    /// assistant message.
    pub(crate) fn summarize(&mut self, messages: Vec<Item>) -> Result<Vec<Item>, Error> {
        let mut out = self.summarize_real(messages, 0)?;
        if out.last().is_some_and(|m| m.role != "assistant") {
            out.push(Item::ok(&self.counter));
        }
        Ok(out)
    }

    fn summarize_real(&mut self, messages: Vec<Item>, depth: u32) -> Result<Vec<Item>, Error> {
        self.depth = self.depth.max(depth);
        if !too_big(total(&messages), self.max_tokens) && depth == 0 {
            return Ok(messages);
        }
        if messages.len() <= MIN_SPLIT || depth > MAX_DEPTH {
            return self.summarize_all(&messages);
        }

        // The tail grows from the newest message while it stays strictly under half.
        let half = (self.max_tokens / 2.0).floor();
        let mut tail_tokens = 0u64;
        let mut split = messages.len();
        for i in (0..messages.len()).rev() {
            let t = messages[i].tokens;
            if ((tail_tokens + t) as f64) < half {
                tail_tokens += t;
                split = i;
            } else {
                break;
            }
        }
        // The head must end with an assistant message.
        while split > 1 && messages[split - 1].role != "assistant" {
            split -= 1;
        }
        if split <= MIN_SPLIT {
            return self.summarize_all(&messages);
        }

        let mut head = messages;
        let tail = head.split_off(split);

        // Release behaviour: oldest first, stop at the first overflow; the rest of the head is
        // silently lost.
        let mut keep = Vec::with_capacity(head.len());
        let mut running = 0i64;
        let mut rest = head.into_iter();
        for item in rest.by_ref() {
            running += item.tokens as i64;
            if running > self.head_budget {
                if let Source::Entry(id) = item.source {
                    self.dropped.push(id);
                }
                break;
            }
            keep.push(item);
        }
        self.dropped.extend(rest.filter_map(|i| match i.source {
            Source::Entry(id) => Some(id),
            _ => None,
        }));

        let mut result = self.summarize_all(&keep)?;
        let summary_tokens = self.counter.list(result.iter().map(|i| (i.role, i.content.as_str())));
        let tail_tokens = total(&tail);
        result.extend(tail);
        if ((summary_tokens + tail_tokens) as f64) < self.max_tokens {
            return Ok(result);
        }
        self.summarize_real(result, depth + 1)
    }

    /// `ChatSummary.summarize_all`: one summary of `messages`, trying each model in turn.
    pub(crate) fn summarize_all(&mut self, messages: &[Item]) -> Result<Vec<Item>, Error> {
        let request = SummaryRequest {
            purpose: "chat-history".into(),
            // spec (d): system = the summarize prompt, user = the flattened transcript.
            context: SummaryContext::Fresh,
            system: prompt::SUMMARIZE_SYSTEM.into(),
            transcript: transcript(messages),
            instructions: String::new(),
            max_output_tokens: self.max_output,
        };
        let mut last_kind = None;
        for _model in 0..self.models {
            self.usage.calls += 1;
            match self.summarizer.summarize(&request) {
                Ok(summary) => {
                    self.usage.input_tokens += summary.input_tokens;
                    self.usage.output_tokens += summary.output_tokens;
                    let content = format!("{}{}", prompt::SUMMARY_PREFIX, summary.text);
                    return Ok(vec![Item::new(&self.counter, "user", content, Source::Summary)]);
                }
                Err(e) => {
                    // Aider prints the error and tries the next model.
                    self.usage.failures += 1;
                    last_kind = Some(e.kind);
                }
            }
        }
        Err(Error::new(last_kind.unwrap_or(compactbench_core::ErrorKind::Other), ALL_FAILED))
    }
}

/// The user message of the summarizer call: `# USER` / `# ASSISTANT` blocks, newline-terminated.
fn transcript(messages: &[Item]) -> String {
    let mut content = String::new();
    for m in messages {
        let header = match m.role {
            "user" => "# USER\n",
            "assistant" => "# ASSISTANT\n",
            _ => continue,
        };
        content.push_str(header);
        content.push_str(&m.content);
        if !content.ends_with('\n') {
            content.push('\n');
        }
    }
    content
}
