//! What one run of one strategy over one session produced.
//!
//! These are the eval's own types; the report crate converts them into the rows and records it
//! writes (it owns `results.json`'s format). Their serde derives are for the CLI's resume
//! journal (`cells.jsonl`, read back by `eval --resume`), not for any report.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::facts::FactKind;

/// A fact's state in one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The needle is in the request, in a kept (or replaced) log message.
    VerbatimKept,
    /// The needle is in the request, in a message a checkpoint re-injected.
    VerbatimInjected,
    /// The needle is in the request, in a summary.
    VerbatimSummary,
    /// Not in the request, but a path named in the request reads back to bytes holding it.
    Recoverable,
    /// Neither.
    Lost,
    /// A value the fact replaced is in the request without the statement that superseded it
    /// (`superseded_value` facts): the request presents an old value as current, whether or not
    /// the current one is there too. Ordered after `Lost`: a stale value misleads, a lost one
    /// only has to be found again.
    Stale,
}

impl Status {
    /// Whether the needle is in the request itself.
    pub fn is_verbatim(self) -> bool {
        matches!(self, Status::VerbatimKept | Status::VerbatimInjected | Status::VerbatimSummary)
    }

    /// Snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::VerbatimKept => "verbatim_kept",
            Status::VerbatimInjected => "verbatim_injected",
            Status::VerbatimSummary => "verbatim_summary",
            Status::Recoverable => "recoverable",
            Status::Lost => "lost",
            Status::Stale => "stale",
        }
    }
}

/// One model request as it would have been sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Request number, from 0.
    pub index: u32,
    /// Session step the request answers.
    pub step: u32,
    /// Exact tokens of the request.
    pub tokens: u64,
    /// Tokens of the longest prefix shared with the previous request (prompt-cache reuse).
    pub cached_tokens: u64,
    /// Messages in the view.
    pub messages: u32,
    /// Still over the window after any overflow compaction: the provider would reject it.
    pub overflow: bool,
    /// Compactions so far.
    pub rounds: u32,
    /// Violations per shape, in `Shape::ALL` order.
    pub violations: [u32; 4],
}

/// `&'static str` by another name: serde's derive would otherwise tie the field to its input.
type StaticName = &'static str;

/// One compaction attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactionRecord {
    /// The request it preceded.
    pub request: u32,
    /// The session step it preceded.
    pub step: u32,
    /// The first session step its window keeps verbatim (`None` if it keeps none or
    /// inherits the previous window).
    pub first_kept_step: Option<u32>,
    /// `turn_end`, `before_request`, `overflow` or `manual`.
    #[serde(deserialize_with = "names::one")]
    pub moment: StaticName,
    /// The newest message when it ran was a tool result: the compaction interrupted the
    /// agent's loop rather than waiting for the turn's end (most real compactions do).
    pub mid_loop: bool,
    /// The strategy's reason.
    pub reason: String,
    /// Kinds of the appended checkpoints, in order (empty when it failed or did nothing).
    #[serde(deserialize_with = "names::list")]
    pub kinds: Vec<&'static str>,
    /// Exact tokens of the view before.
    pub tokens_before: u64,
    /// Exact tokens of the view after.
    pub tokens_after: u64,
    /// The strategy's own estimate of the context before (from its checkpoints).
    pub estimated_before: u64,
    /// Exact tokens of re-injected messages.
    pub injected_tokens: u64,
    /// Summarizer calls.
    pub summarizer_calls: u32,
    /// Summarizer input tokens, as the strategy reports them (its checkpoints' usage).
    pub summarizer_input: u64,
    /// Summarizer output tokens, as the strategy reports them.
    pub summarizer_output: u64,
    /// Summaries that stopped at their output cap (`stop == Length`), whether or not the
    /// strategy then used them: the seed article's "truncation loop".
    pub summaries_cut_off: u32,
    /// How its summary calls were sent (`prefix`, `fresh`, `fork`; the first call's when they
    /// differ; empty when it made none): `SummaryRequest::context`.
    #[serde(default, deserialize_with = "names::one")]
    pub summary_context: StaticName,
    /// Exact tokens its summary calls sent, measured as requests: for a `prefix` or `fork` call
    /// the view as the main request would send it plus the instruction as a final user turn;
    /// for a `fresh` call its system prompt and user message.
    #[serde(default)]
    pub summary_request_tokens: u64,
    /// Of those, served from the prompt cache: the prefix a `prefix`/`fork` call shares with the
    /// last main request (as `RequestRecord::cached_tokens`), the prefix a `fresh` call shares
    /// with the run's previous fresh call.
    #[serde(default)]
    pub summary_cached_tokens: u64,
    /// Exact tokens of the summary calls' answers.
    #[serde(default)]
    pub summary_output_tokens: u64,
    /// Of its summary calls, those whose request was larger than the scenario's window: the
    /// runner rejects them unanswered, as the provider would ("prompt is too long"), and the
    /// strategy's fallback takes over.
    #[serde(default)]
    pub summary_calls_over_window: u32,
    /// The error, if the compaction failed (nothing was appended).
    pub error: Option<String>,
}

/// What happened to one planted fact.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FactOutcome {
    /// Fact id.
    pub id: String,
    /// Kind.
    pub kind: FactKind,
    /// The quarter of the session (by step, 1 to 4) it was planted in: the oldest work is
    /// what compaction drops first.
    pub planted_quarter: u8,
    /// Requests that needed it.
    pub needed: u32,
    /// Of those, how many had it in each state.
    pub probes: BTreeMap<Status, u32>,
    /// State at the last request that needed it.
    pub last: Status,
    /// First request at which it was lost, if ever.
    pub lost_at: Option<u32>,
    /// Compactions it had been through (since planting) when first lost.
    pub lost_after_rounds: Option<u32>,
    /// Index into the run's `compactions` of the compaction that dropped it (the newest
    /// successful one before `lost_at`).
    pub lost_by: Option<u32>,
    /// State at the first request after each compaction it went through: `[0]` after the
    /// first, `[1]` after the second, … (the drift curve).
    pub after_round: Vec<Status>,
    /// The model-judged probe, when the run had a judge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judged: Option<crate::judge::Judged>,
    /// The user's compaction instruction that names it, if one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named_by: Option<crate::facts::NamedBy>,
}

/// Where the user's compaction instructions went in one run (all zero when the session has
/// none). A summary call carries a text "in its prompt" when its instructions hold it (what a
/// summarizer is asked to do), "as context" when only its system prompt or transcript does (it
/// rides along with the conversation, as project memory in a re-sent system prompt does).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instructed {
    /// Manual compaction commands the user typed.
    pub manual_asked: u32,
    /// Of those, the ones the strategy acted on (decided to compact; failures included).
    pub manual_ran: u32,
    /// Summary calls of those compactions with the typed text in their prompt.
    pub manual_in_prompt: u32,
    /// ... with it only as context.
    pub manual_in_context: u32,
    /// Summary calls of the run with the project memory's compaction instruction in their prompt.
    pub memory_in_prompt: u32,
    /// ... with it only as context.
    pub memory_in_context: u32,
    /// Summary calls of the run.
    pub summary_calls: u32,
}

/// One run: one strategy, one scenario, one seed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Strategy id.
    pub strategy: String,
    /// Scenario name.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// Name of the summarizer the strategy was given.
    pub summarizer: String,
    /// The scenario's window.
    pub window: u64,
    /// Requests in order. Journaled beside the run (the journal adds them).
    #[serde(skip)]
    pub requests: Vec<RequestRecord>,
    /// Compaction attempts in order.
    pub compactions: Vec<CompactionRecord>,
    /// Facts that were needed at least once.
    pub facts: Vec<FactOutcome>,
    /// Violation counts per shape and rule over all requests.
    #[serde(deserialize_with = "names::nested")]
    pub violations: BTreeMap<&'static str, BTreeMap<&'static str, u32>>,
    /// The first violation of each (shape, rule), in the order they happened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violation_examples: Vec<ViolationExample>,
    /// Entries in the log at the end (messages plus checkpoints).
    pub log_entries: usize,
    /// Output tokens of the session's assistant messages (priced as output).
    pub output_tokens: u64,
    /// Whether the user's compaction instructions reached the run's summary calls.
    #[serde(default)]
    pub instructed: Instructed,
    /// What subagents cost (all zero unless the run delegated exploration spans).
    pub child: ChildCost,
    /// Where the run's wall time went (not deterministic: reported in `timing.md` only).
    /// Journaled beside the run.
    #[serde(skip)]
    pub phases: Phases,
}

/// The first request that broke a provider rule, for the report's explanation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViolationExample {
    /// Provider shape (`anthropic`, ...).
    #[serde(deserialize_with = "names::one")]
    pub shape: StaticName,
    /// Rule name (`orphan_result`, ...).
    #[serde(deserialize_with = "names::one")]
    pub rule: StaticName,
    /// Request index.
    pub request: u32,
    /// The validator's words (call ids, roles).
    pub detail: String,
    /// Log entry ids of the messages involved.
    pub entries: Vec<u32>,
}

/// Wall time of one run by phase, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phases {
    /// `Strategy::project`: building views.
    pub project: u64,
    /// `Strategy::decide`.
    pub decide: u64,
    /// `Strategy::compact`, summarizer calls included.
    pub compact: u64,
    /// Of `compact`, time inside the summarizer.
    pub summarize: u64,
    /// Exact token counts of views (tiktoken, memoized per message).
    pub measure: u64,
    /// Lowering to the four provider shapes and validating them.
    pub validate: u64,
    /// Fact probes (needle search, pointer reads).
    pub probe: u64,
}

impl Phases {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Phases) {
        self.project += other.project;
        self.decide += other.decide;
        self.compact += other.compact;
        self.summarize += other.summarize;
        self.measure += other.measure;
        self.validate += other.validate;
        self.probe += other.probe;
    }
}

/// Reading back the `&'static str` names (moments, checkpoint kinds, shapes, rules): each
/// distinct name is leaked once and shared after, so a resumed eval holds a few dozen.
mod names {
    use std::collections::{BTreeMap, HashSet};
    use std::sync::{Mutex, OnceLock};

    use serde::{Deserialize, Deserializer};

    fn intern(name: String) -> &'static str {
        static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
        let mut names = NAMES.get_or_init(Mutex::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(known) = names.get(name.as_str()) {
            return known;
        }
        let leaked: &'static str = Box::leak(name.into_boxed_str());
        names.insert(leaked);
        leaked
    }

    pub(super) fn one<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
        String::deserialize(d).map(intern)
    }

    pub(super) fn list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<&'static str>, D::Error> {
        Ok(Vec::<String>::deserialize(d)?.into_iter().map(intern).collect())
    }

    pub(super) fn nested<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<&'static str, BTreeMap<&'static str, u32>>, D::Error> {
        let outer = BTreeMap::<String, BTreeMap<String, u32>>::deserialize(d)?;
        Ok(outer.into_iter().map(|(k, inner)| (intern(k), inner.into_iter().map(|(k, n)| (intern(k), n)).collect())).collect())
    }
}

/// What subagents cost: their own requests, with their own prompt-cache prefixes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChildCost {
    /// Subagent requests.
    pub requests: u32,
    /// Their input tokens.
    pub input_tokens: u64,
    /// Of those, tokens in the prefix shared with the subagent's previous request.
    pub cached_tokens: u64,
    /// Their output tokens (tool calls and the final report).
    pub output_tokens: u64,
}
