//! Goose (Block, now `aaif-goose/goose`): auto-compaction by whole-conversation summary,
//! background tool-pair summaries, and the offload of huge tool outputs.
//!
//! # Source
//! Spec `shared/specs/goose.md`, read against:
//! - `aaif-goose/goose@006bd233c78aeea0a4026700cd27b3c478431672` (canonical)
//!   `crates/goose/src/context_mgmt/mod.rs` (`check_if_compaction_needed`, `compact_messages`,
//!   `do_compact`, `filter_tool_responses`, `format_message_for_compacting`,
//!   `extract_file_history`, `compute_tool_call_cutoff`, `tool_ids_to_summarize`,
//!   `summarize_tool_call`), `crates/goose/src/prompts/compaction.md`,
//!   `crates/goose/src/agents/reply_parts.rs` (`update_session_metrics`);
//! - `aaif-goose/goose@cced800372e3a4e4452be597abf496bced8fcf82`
//!   `crates/goose/src/agents/state_machine/ops_compaction.rs` (`CompactionOperation`:
//!   proactive check before each model call, reactive path, `MAX_CONTEXT_ERROR_COMPACTIONS`);
//! - `aaif-goose/goose@8b81c363989d83983dc18c89af51fdad74e4e660`
//!   `crates/goose/src/agents/state_machine/ops_tool_pair_compaction.rs`;
//! - `aaif-goose/goose@13ec267659c32fcd6f7ff34167267cc6883ae211`
//!   `crates/goose/src/agents/large_response_handler.rs`;
//! - `crates/goose/src/token_counter.rs` (`count_chat_tokens`; stored version, commit not pinned).
//!
//! # Trigger
//! Before every model request ([`Moment::BeforeRequest`]) whose conversation ends with a
//! user or tool message: compact when `current_tokens / window > threshold` (strictly;
//! `GOOSE_AUTO_COMPACT_THRESHOLD`, default 0.8; `<= 0` or `>= 1` disables it).
//! `current_tokens` is `session.total_tokens`: the provider-reported total (input + output)
//! of the newest model response, or, when a compaction came after it, the summary's output
//! tokens (what `update_session_metrics` stores after a compaction). Before either exists, the
//! local estimate over the agent-visible messages. A provider overflow ([`Moment::Overflow`])
//! compacts reactively, whatever the threshold, while this turn has had at most 2 earlier
//! reactive compactions. A user message `/compact` (literal) compacts manually, and so does
//! [`Moment::Manual`] (the user types `/compact` at the prompt): `compact_messages(...,
//! manual_compact = true)` takes no text, so anything typed after the command is dropped
//! (spec (b)). Project memory (`.goosehints`) lives in the agent's system prompt, which the
//! summary call replaces with the `compaction.md` template (spec (d)): the summarizer never
//! sees it.
//!
//! # Kept, summarized, dropped
//! - **Full compaction**: every agent-visible message is summarized and becomes
//!   agent-invisible; nothing is kept verbatim. The view is then the system prompt, the
//!   summary as a **user** message, a continuation **assistant** message (conversation,
//!   tool-loop or manual text), and for auto compaction a fresh user message repeating the
//!   newest agent-visible text-only user message, then everything newer. Earlier summaries,
//!   continuations and copies are ordinary messages to the next compaction (summary of
//!   summary; an old summary can even be picked as the "user message" to repeat).
//! - **Summary call**: system prompt = the paraphrased `compaction.md` with the file lists
//!   (`extract_file_history`); the history, one `[user]: …` / `[assistant]: …` group per
//!   message, reasoning dropped. If the provider refuses the call as too large
//!   (`ContextLengthExceeded`, the runner's `ContextOverflow`), 10 %, 20 %, 50 %, 100 % of the
//!   tool-response messages are left out, middle first; after that the compaction fails. Any
//!   other summarizer error fails it at once (log unchanged).
//! - **Tool pairs** (`GOOSE_TOOL_PAIR_SUMMARIZATION`, on): before a request without a full
//!   compaction, when more than `cutoff + 10` agent-visible tool calls lie outside the
//!   current turn (`cutoff = clamp(3 * int(window * threshold) / 20,000, 10, 500)`), the oldest
//!   10 pairs are summarized one call each; both messages of a pair become agent-invisible and
//!   the summaries are appended as user messages (the state-machine behaviour).
//! - **Large outputs**: a tool result text over 200,000 characters (50,000 for shell tools) is
//!   written to the virtual store at `/tmp/goose_mcp_responses/mcp_response_<timestamp>.txt`
//!   and replaced by a redirect naming that path ([`CheckpointKind::Offload`]).
//!
//! Goose keeps compacted messages user-visible but agent-invisible; the crate models what
//! the agent sees: [`Strategy::project`] replays the log, hiding and appending as each
//! checkpoint did, and the view is the agent-visible part.
//!
//! # Layers
//! The algorithm is plain functions of the log and its view: the conversation
//! (`conversation.rs`), the checks and the compactions (`compact.rs`, `tool_pairs.rs`,
//! `offload.rs`). A run keeps only the view ([`Incremental::reprojected`]).
//!
//! # Token estimator
//! Goose's `count_chat_tokens` with the o200k BPE count replaced by `ceil(bytes / 4)`
//! (Goose is Rust; no real tokenizer is used for decisions): 4 per message plus its texts,
//! tool requests as `id:name:<Debug of the arguments>`, tool response texts; +3 reply primer
//! per message in the fallback estimate (each message is counted as its own chat). The
//! system prompt is not counted there, as in the original. Character thresholds (offload)
//! count code points.
//!
//! # Session mapping
//! - The tool messages answering one assistant message are one Goose user message (Goose
//!   batches a turn's tool responses), for counting, serializing, the removal ladder and pair
//!   matching. A system message after the first non-system message is a user message.
//! - Goose keys file lists and the shell offload threshold on its own tool names; a session
//!   recorded with another harness's names is mapped through [`compactbench_core::tools::tool_kind`]
//!   (read → `read`, write/edit → `write`/`edit`, shell → `developer__shell`) and paths come
//!   from [`compactbench_core::tools::tool_path`].
//! - A tool result with `is_error` is an MCP result flagged as an error (its text is kept),
//!   not a protocol error (which Goose would serialize as `tool_response: [error]`).
//!
//! # Reproduced as the original behaves
//! - The summary call has no output cap of its own (the model's maximum is sent) and a summary
//!   cut off at the cap is used as is.
//! - `filter_tool_responses` stops at the ends of its middle-out walk: at 100 % an odd number
//!   of tool responses keeps one, and a single tool response is never removed.
//! - After a compaction, `session.total_tokens` is the summary's output tokens until the next
//!   response, so the first check after a compaction underestimates the view.
//! - The reported total lags one message behind (a large tool result is counted only after
//!   the next response); the overflow path catches what the threshold misses.
//! - Tool-pair summaries appended after the newest tool result, and hidden pairs whose
//!   assistant message also carried text, are not repaired; validators record what breaks.
//!
//! # Deviations
//! - Deliberate: Goose renders the history inside the system prompt and sends a one-line user
//!   message; here the history is the request's transcript (the start of the user message) and
//!   the system prompt holds the rest of the rendered template. Same text, split so the
//!   seam's summarizer can read the material. Prompt texts are paraphrased.
//! - Deliberate: on a failed compaction Goose shows an error message and ends the turn; a
//!   replay cannot end the turn, so the check simply runs again at the next request.
//! - Deliberate: a large output is offloaded at the first check after it is logged (always
//!   before the next request) rather than as the tool returns; timestamps in file names come
//!   from a clock driven by log positions, so runs are reproducible.
//! - Deliberate: the budget hint `<compaction>~Nk tokens remaining</compaction>`, the
//!   pre-inference recount of the prepared request (an open PR), `/clear`, providers that
//!   manage their own context, the fast model and provider-level retries are not modelled.
//! - Modelled: the count is the canonical one (`check_if_compaction_needed`: the reported total
//!   alone, else the estimate), checked at the state machine's moment (before every model call,
//!   mid tool loop included); the state machine's "reported total plus what was added since"
//!   and the legacy loop's once-per-user-message check are not used. Tool-pair summaries are
//!   appended as the state machine does (the legacy loop inserts them itself).
//! - Modelled: reactive compactions count per turn from the newest user text message in the
//!   log (the kickoff), and only successful ones count, as only they leave a hidden error.

use std::borrow::Cow;

use compactbench_core::{Checkpoint, Cx, Decision, Entry, Error, Fidelity, Incremental, Log, Message, Moment, Replay, Role, Strategy, StrategyInfo, View};

mod compact;
mod conversation;
mod offload;
mod prompt;
mod tokens;
mod tool_pairs;

#[cfg(test)]
mod tests;

use compact::{compact_messages, Trigger};
use conversation::{agent_messages, conversation, kickoff, op, OP_COMPACT};
use tokens::current_tokens;

/// `DEFAULT_COMPACTION_THRESHOLD`.
pub(crate) const DEFAULT_COMPACTION_THRESHOLD: f64 = 0.8;
/// `MAX_CONTEXT_ERROR_COMPACTIONS`: earlier reactive compactions a turn may have had.
pub(crate) const MAX_CONTEXT_ERROR_COMPACTIONS: usize = 2;
/// The manual command (literal).
pub(crate) const COMPACT_COMMAND: &str = "/compact";

/// Goose's compaction settings, with the original's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct GooseConfig {
    /// `GOOSE_AUTO_COMPACT_THRESHOLD` (default 0.8); `<= 0` or `>= 1` disables auto compaction.
    pub threshold: f64,
    /// `GOOSE_TOOL_PAIR_SUMMARIZATION` (default true).
    pub tool_pair_summarization: bool,
}

impl Default for GooseConfig {
    fn default() -> Self {
        GooseConfig { threshold: DEFAULT_COMPACTION_THRESHOLD, tool_pair_summarization: true }
    }
}

/// Goose's context management: threshold summary of the whole conversation, tool-pair
/// summaries and large-output offload.
pub struct GooseStrategy {
    info: StrategyInfo,
    config: GooseConfig,
}

/// Goose with its default settings.
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(GooseStrategy::new(GooseConfig::default()))
}

impl GooseStrategy {
    /// Goose with `config`.
    pub fn new(config: GooseConfig) -> GooseStrategy {
        GooseStrategy {
            info: StrategyInfo {
                id: "goose".into(),
                harness: "goose".into(),
                source: "aaif-goose/goose@006bd233c78aeea0a4026700cd27b3c478431672".into(),
                summary: "Summarizes the whole conversation when tokens exceed 80% of the window (summary, \
continuation, last user text); old tool pairs summarized in tens; huge outputs offloaded to files."
                    .into(),
                fidelity: Fidelity::Source,
            },
            config,
        }
    }

    /// The proactive check: the agent's newest message is a user (or tool) message and the
    /// tokens are strictly over the threshold.
    fn over_threshold(&self, log: &Log, agent: &[&Message], window: u64) -> bool {
        let threshold = self.config.threshold;
        if threshold <= 0.0 || threshold >= 1.0 || agent.last().is_none_or(|m| m.role == Role::Assistant) {
            return false;
        }
        (current_tokens(log) as f64 / window as f64) > threshold
    }

    fn cutoff(&self, window: u64) -> usize {
        tool_pairs::compute_tool_call_cutoff(window, self.config.threshold)
    }
}

/// The newest log entry is the user's `/compact`.
fn manual_pending(log: &Log) -> bool {
    matches!(log.entries().next_back(), Some((_, Entry::Message(m)))
        if m.role == Role::User && m.text().trim() == COMPACT_COMMAND)
}

/// The reactive path still applies: this turn has had at most
/// [`MAX_CONTEXT_ERROR_COMPACTIONS`] reactive compactions (each hid one context-length error;
/// only successful ones are in the log).
fn reactive_allowed(log: &Log) -> bool {
    let from = kickoff(log);
    let hidden_errors = log
        .checkpoints()
        .rev()
        .take_while(|(id, _)| from.is_none_or(|k| *id > k))
        .filter(|(_, cp)| {
            op(cp) == Some(OP_COMPACT)
                && cp.details.get("trigger").and_then(|t| t.as_str()) == Some(Trigger::Overflow.as_str())
        })
        .count();
    hidden_errors <= MAX_CONTEXT_ERROR_COMPACTIONS
}

impl Strategy for GooseStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::reprojected(self))
    }

    fn decide(&self, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        if !offload::waiting(view).is_empty() {
            return Decision::compact("large-output");
        }
        match at {
            Moment::TurnEnd => Decision::Skip,
            Moment::Manual => Decision::compact("manual"),
            Moment::Overflow if reactive_allowed(log) => Decision::compact("overflow"),
            Moment::Overflow => Decision::Skip,
            Moment::BeforeRequest => {
                if manual_pending(log) {
                    return Decision::compact("manual");
                }
                let agent = agent_messages(log, view);
                if self.over_threshold(log, &agent, cx.model.window) {
                    return Decision::compact("threshold");
                }
                let requests = agent.iter().map(|m| m.tool_call_ids().count()).sum();
                let protected = tool_pairs::current_turn_requests(log);
                if self.config.tool_pair_summarization && tool_pairs::due(requests, self.cutoff(cx.model.window), protected) {
                    return Decision::compact("tool-pairs");
                }
                Decision::Skip
            }
        }
    }

    /// The offload of waiting outputs first, then a full compaction or a batch of tool-pair
    /// summaries.
    fn compact(&self, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let mut out = Vec::new();
        // The offload changes what these messages say, not which they are.
        let agent = agent_messages(log, view);
        // Outputs are offloaded first: Goose rewrites them before they enter the conversation.
        let log: Cow<'_, Log> = match offload::offload(log, &offload::waiting(view), cx.store, current_tokens(log)) {
            Some(cp) => {
                let mut work = log.clone();
                work.push_checkpoint(cp.clone());
                out.push(cp);
                Cow::Owned(work)
            }
            None => Cow::Borrowed(log),
        };
        let conversation = conversation(&log);
        let trigger = match at {
            Moment::Overflow if reactive_allowed(&log) => Some(Trigger::Overflow),
            Moment::Manual => Some(Trigger::Manual),
            Moment::BeforeRequest if manual_pending(&log) => Some(Trigger::Manual),
            Moment::BeforeRequest if self.over_threshold(&log, &agent, cx.model.window) => Some(Trigger::Threshold),
            _ => None,
        };
        let tokens_before = current_tokens(&log);
        if let Some(trigger) = trigger {
            out.push(compact_messages(&conversation, trigger, self.config.threshold, tokens_before, cx)?);
        } else if at == Moment::BeforeRequest && self.config.tool_pair_summarization {
            let cutoff = self.cutoff(cx.model.window);
            out.extend(tool_pairs::summarize_pairs(&log, &conversation, cutoff, tokens_before, cx));
        }
        Ok(out)
    }

    fn project(&self, log: &Log) -> View {
        conversation(log).view()
    }
}
