//! Cursor (agent chat and CLI): older messages summarized into a segment of their own, distinct
//! from the live latest turn, with a chat-history file to search for what the summary lost;
//! long tool outputs written to files; large attached files condensed.
//!
//! **Closed source: modelled.** Cursor's agent is not public and no repository is involved, so
//! there is no source commit to cite. This crate follows `shared/specs/cursor.md`, whose sources
//! are the Cursor docs page "Summarization" (agent → chat → summarization) \[doc\], the Cursor
//! blog post "Dynamic context discovery" (Jan 2026) \[doc\], Cursor forum thread 102842 (staff
//! answer) \[user/staff\] and Cursor forum threads 135943 and 160865 \[user\]. Selection, prompt,
//! exact threshold and checkpoint shape are undocumented: every rule not tagged \[doc\] or
//! \[user\] is a modelling choice, tagged **\[assume\]** with its evidence.
//!
//! Two layers: the modelled rules as functions of the log and view (`count`, `offload`,
//! `summarize`, and the [`Strategy`] methods here); a run keeps only the default view.
//!
//! ## Trigger
//! Older messages are summarized when the conversation exceeds the window \[doc\]; users see it
//! fire at about 59% \[user\]. Summarizing must start before the hard limit, so the crate
//! compacts when `tokens >= floor(trigger_percent × W / 100)` before a model request,
//! `trigger_percent = 90` by default and configurable (the spec asks to also run the
//! user-observed 59) ([`CursorConfig`]) \[assume\]. A provider overflow is treated like a
//! threshold crossing, once per turn \[assume\]. [`Moment::Manual`] is the manual `/summarize`
//! (the CLI also lists `/compress`) \[doc/user\]: it summarizes whatever the size, given
//! something before the latest user turn. The docs give the command no arguments \[doc\], so
//! anything typed after it is dropped; project memory (rules) is not part of the summary call,
//! which has its own system text \[assume, spec (d)\].
//!
//! ## Token estimator
//! Cursor's own is unknown; the spec's stand-in is the benchmark tokenizer \[assume\], which a
//! strategy may not call. The crate takes the newest reply's provider usage (exact prompt tokens
//! of the request it answered plus its output) plus `ceil(chars / 4)` (UTF-16, as Cursor's
//! TypeScript would count) of every later view message; only replies received after the newest
//! summary count (a kept reply's usage measured the longer history); without one,
//! `ceil(chars / 4)` of the whole view \[assume\].
//!
//! ## Selection
//! Older messages are summarized, recent ones kept \[doc\]; the split is unknown. Everything
//! before the **latest user turn** (the newest user message and the assistant and tool
//! messages after it) is replaced by one summary; that turn stays verbatim \[assume: the doc's
//! "older messages summarized" and the ≈ 1k-token result users see from ≈ 190k \[user\] suggest
//! a short retained part\]. The cut is at a user-turn boundary, so a call and its result stay
//! together. With nothing before the latest turn (one user turn) there is nothing to summarize.
//!
//! ## Summarizer call
//! Undocumented \[assume\]: the summarized messages as role-prefixed text (as the context showed
//! them, offloaded outputs as their previews), preceded by the previous summary if any, with a
//! generic structured-summary instruction (goal, decisions, files touched, errors, next step)
//! and a line naming the chat-history file. Output cap 2,000 tokens (the ≈ 1k summaries users
//! observe, with headroom) \[assume\]. A reply cut off at the cap is used as it is \[assume\].
//!
//! ## Checkpoint and next request
//! The summary replaces the older messages and is shown as a "summarized conversation" segment
//! distinct from the live conversation \[doc as described in seed 004; not re-verified\]. View
//! \[assume\]: `[system (with the project rules, rebuilt every request), user(summary +
//! history-file pointer), latest user turn…]`. Chat-only instructions survive only through the
//! summary; users report rules are not reliably kept \[user\].
//!
//! ## Repeated compaction
//! The previous summary is part of the next summarizer input (summary of summary); one summary
//! in view \[assume\].
//!
//! ## Failures
//! Summarizer error: history unchanged, the request goes out; an overflow error surfaces
//! \[assume\]. The error is returned and the log stays as it was.
//!
//! ## Recovery
//! - **Chat-history file** \[doc\]: at each summary the whole history so far (every log message,
//!   in full, with earlier summaries where they happened) is written to the
//!   [`VirtualStore`] at `.cursor/chat-history/history-<n>.md` (path and format \[assume\]) and
//!   recorded as an offload; the summary message names it, so the agent (and the benchmark's
//!   probe) can search it. [`CursorStrategy::grep`] is that search (matching lines with their
//!   numbers) \[assume for the tool shape\].
//! - **Long tool outputs** \[doc\]: a tool, MCP or terminal output over 8,000 characters (UTF-16
//!   units) is written to `.cursor/tool-outputs/<call id>.txt` and replaced in context by its
//!   first 1,000 characters and the path (threshold, preview and path \[assume\]), before the
//!   first request that would carry it; [`CursorStrategy::grep`] searches it too. Recorded as an
//!   offload checkpoint; when the threshold is then still reached, the summary follows in the
//!   same step.
//! - **File and folder condensation** \[doc\]: [`CursorStrategy::attach`] renders an attached
//!   file in full, as its signatures over `condense_at` tokens (8,000), or as its name only over
//!   `name_only_at` (32,000) (thresholds \[assume\]); condensed forms tell the agent to read the
//!   file to expand it. Replayed sessions attach no files, so the runner never calls it.
//!
//! # Deviations
//! - Deliberate: the estimator is provider usage plus `chars / 4`, not the benchmark tokenizer
//!   the spec names (strategies decide with their own estimate).
//! - Deliberate: the search over files is a method, not a tool the replayed agent calls
//!   (sessions are replayed); probes read the files through the paths in the request.
//! - Deliberate: a summarizer failure in a step that also offloaded tool outputs drops that
//!   offload too (one error for the step); it is redone before the next request.
//! - Deliberate: "excluded" attachments (the third condensation level) are not separated from
//!   name-only ones; folder condensation is not modelled (no folders are attached in a replay).
//! - Modelled: the summary call is sent as a `Fresh` prompt (`SummaryRequest::context`; spec (d)
//!   \[assume\]: role-prefixed text under a generic instruction).

use std::borrow::Cow;

use compactbench_core::{Checkpoint, Cx, Decision, Error, Fidelity, Incremental, Log, Message, Moment, Replay, Strategy, StrategyInfo, View, VirtualStore};

mod attach;
mod count;
mod offload;
mod summarize;

/// Cursor's settings as this crate models them (none is published; see the crate docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CursorConfig {
    /// Summarize when the estimate reaches this percentage of the window (90; users observe 59).
    pub trigger_percent: u64,
    /// Tool outputs longer than this many characters go to a file (8,000).
    pub offload_chars: u64,
    /// Characters of an offloaded output kept in context as its preview (1,000).
    pub preview_chars: usize,
    /// Attached files over this many tokens are shown as their signatures (8,000).
    pub condense_at: u64,
    /// Attached files over this many tokens are shown by name only (32,000).
    pub name_only_at: u64,
}

impl Default for CursorConfig {
    fn default() -> CursorConfig {
        CursorConfig { trigger_percent: 90, offload_chars: 8_000, preview_chars: 1_000, condense_at: 8_000, name_only_at: 32_000 }
    }
}

impl CursorConfig {
    /// `floor(trigger_percent × W / 100)`.
    fn threshold(&self, window: u64) -> u64 {
        window * self.trigger_percent / 100
    }
}

/// Cursor's summarization with file-based recovery (see the crate docs).
pub struct CursorStrategy {
    info: StrategyInfo,
    config: CursorConfig,
}

const SOURCE: &str = "closed source, modelled from shared/specs/cursor.md (Cursor docs \"Summarization\"; \
                      blog \"Dynamic context discovery\" Jan 2026; forum threads 102842, 135943, 160865)";

impl CursorStrategy {
    /// The strategy with `config`.
    pub fn new(config: CursorConfig) -> CursorStrategy {
        let summary = format!(
            "before each request: tool outputs > {} chars to files; if usage + est. >= {}% of window, summarize all \
             but the latest user turn (summary names a chat-history file)",
            config.offload_chars, config.trigger_percent
        );
        CursorStrategy {
            info: StrategyInfo {
                id: "cursor".into(),
                harness: "cursor".into(),
                source: SOURCE.into(),
                summary,
                fidelity: Fidelity::Modelled,
            },
            config,
        }
    }

    /// The user-context message for a file attached to a prompt: in full, condensed to its
    /// signatures, or by name only, as its size demands.
    pub fn attach(&self, path: &str, content: &str) -> Message {
        attach::attach(&self.config, path, content)
    }

    /// Searches a file the strategy wrote (a chat-history file or an offloaded output) for
    /// `pattern`: every line containing it, as `<line number>: <line>`, numbered from 1. Empty
    /// when the file does not exist or nothing matches.
    pub fn grep(&self, store: &VirtualStore, path: &str, pattern: &str) -> Vec<String> {
        let Some(text) = store.read(path) else { return Vec::new() };
        text.lines().enumerate().filter(|(_, l)| l.contains(pattern)).map(|(i, l)| format!("{}: {l}", i + 1)).collect()
    }
}

/// The default configuration (summarize at 90% of the window).
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(CursorStrategy::new(CursorConfig::default()))
}

impl Strategy for CursorStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::default_view(self))
    }

    fn decide(&self, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        match at {
            Moment::TurnEnd => Decision::Skip,
            Moment::BeforeRequest if !offload::candidates(&self.config, view).is_empty() => Decision::compact("tool output"),
            Moment::BeforeRequest if count::context_tokens(log, view) >= self.config.threshold(cx.model.window) => {
                Decision::compact("threshold")
            }
            Moment::BeforeRequest => Decision::Skip,
            Moment::Overflow if summarize::overflow_handled_this_turn(log) => Decision::Skip,
            Moment::Overflow => Decision::compact("overflow"),
            Moment::Manual => Decision::compact("manual"),
        }
    }

    /// Offloads long tool outputs, then summarizes when the threshold is (still) reached, on
    /// overflow, or at `/summarize` ([`Moment::Manual`]) without any output to offload.
    fn compact(&self, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let tokens = count::context_tokens(log, view);
        let mut out = Vec::new();
        // The view itself unless outputs were offloaded (no copy of the whole context).
        let mut working = Cow::Borrowed(view);
        let mut tokens_now = tokens;
        if let Some(done) = offload::run(&self.config, log, view, tokens, cx) {
            working = Cow::Owned(done.view);
            tokens_now = tokens.saturating_sub(done.saved);
            out.push(done.checkpoint);
            if !matches!(at, Moment::Overflow | Moment::Manual) && tokens_now < self.config.threshold(cx.model.window) {
                return Ok(out);
            }
        }
        let trigger = match at {
            Moment::Overflow => "overflow",
            Moment::Manual => "manual",
            Moment::TurnEnd | Moment::BeforeRequest => "threshold",
        };
        match summarize::run(log, &working, trigger, tokens_now, cx) {
            Ok(cp) => out.push(cp),
            // Only the offload had something to do.
            Err(e) if e.kind == compactbench_core::ErrorKind::NothingToCompact && !out.is_empty() => {}
            Err(e) => return Err(e),
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
