//! Google Antigravity (CLI `agy`, Antigravity 2.0 app, SDKs): threshold-triggered
//! sliding-window history compaction, with side questions (`/btw`) kept out of the main
//! trajectory.
//!
//! **Closed source: modelled.** The agent backend is not public; only its configuration
//! surface, CLI commands and user observations are documented. This crate follows
//! `shared/specs/antigravity.md`, whose sources are:
//! - `google-antigravity/antigravity-cli@4ebbda8e3215ab7d6d0b751c096204bf4641e001`,
//!   `docs/reference.md` (slash commands: no `/compact`; `/btw`, `/context`, `/rewind`,
//!   `/fork`, `/clear`, `/resume`) and `docs/docs-cli-conversations.md` \[doc\];
//! - `google-antigravity/antigravity-cli@18f012f4899184444a7278e0beb31552d209a693`,
//!   `CHANGELOG.md` \[doc\];
//! - the Antigravity Dart SDK package `antigravity` 0.19.0, API reference of
//!   `CompactionConfig` (`token_threshold` / `tokenThreshold`, deprecated
//!   `checkpoint_interval_tokens`) \[doc\];
//! - the Antigravity Python SDK 0.1.17 release notes (repository discussion #210:
//!   "sliding-window history compaction"; `CapabilitiesConfig.compaction_threshold`
//!   deprecated) \[doc\];
//! - the third-party Rust bridge `agy-bridge` (threshold 950,000 for 1M-token models) \[RE\];
//! - Google AI developers forum thread 119071 and the dev.to tutorial "Antigravity CLI
//!   Tutorial Part 2" (rewind behaviour, transcript location) \[user\].
//!
//! Selection, prompt, checkpoint shape and failure handling are undocumented: every rule not
//! tagged \[doc\], \[RE\] or \[user\] is a modelling choice, tagged **\[assume\]** with its evidence.
//! Treat the crate as a plausible reconstruction, not a port.
//!
//! ## Trigger
//! `CompactionConfig.token_threshold` is the token ceiling of the conversation history
//! \[doc\]; `checkpoint_interval_tokens` is its deprecated alias, used when `token_threshold`
//! is unset \[doc; precedence \[assume\]\]; unset, the backend default is unknown and the crate
//! takes `floor(95% × W)`, matching the only published number, 950,000 for a 1M window \[RE,
//! assume\] ([`AntigravityConfig`]). Compaction runs when `history_tokens >= threshold`
//! ("ceiling" wording \[assume\]) before each model request (a server-side window is applied
//! when the request is assembled \[assume\]). A provider overflow is treated like a threshold
//! crossing, once per turn \[assume: as most open harnesses do\]. The CLI has no `/compact`
//! \[doc\]; [`Moment::Manual`] stands for the benchmark's manual trigger the spec asks for
//! (users report a `/compact` turn \[user\]) \[assume\]: the same sliding-window summary with no
//! threshold. With no documented command there are no documented arguments, so what the user
//! types is dropped; project memory (GEMINI.md, AGENTS.md rules) stays in the agent's system
//! prompt, which the summary call replaces with its own (spec (d)) \[assume\].
//!
//! ## Token estimator
//! The backend counts "conversation history" tokens with, presumably, the model tokenizer;
//! the spec's stand-in is the benchmark tokenizer \[assume\], which a strategy may not call. The
//! crate takes the newest reply's provider usage (exact prompt tokens of the request it
//! answered plus its output) plus `ceil(chars / 4)` (UTF-16) of every later view message; only
//! replies received after the newest compaction count (an older reply's usage measured the
//! pre-compaction history); without one, `ceil(chars / 4)` of the whole view \[assume\]. Turn
//! sizes for the retained window are `ceil(chars / 4)` per message \[assume\].
//!
//! ## Selection (sliding window)
//! "Sliding window" \[doc\] implies a retained recent window plus a compacted older part
//! \[assume for all of the following\]: whole user turns (a user message and the assistant and
//! tool messages after it) are kept from the newest backwards while their sum stays within
//! `retain_tokens = floor(20% × W)` (between DeepSeek's 16% and Gemini CLI's 30%); the latest
//! user turn is always kept, even when larger. The cut falls only at a user-turn boundary, so
//! a tool call and its result are never separated. Everything before the cut is summarized;
//! nothing is pruned without a summary.
//!
//! ## Summarizer call
//! Undocumented \[assume\]: the compacted messages as role-prefixed text (`User:`,
//! `Assistant:`, `Tool call:`, `Tool result:`), preceded by the previous summary if any, sent
//! to the session model with a generic structured-summary instruction (goal, constraints,
//! progress, files, open problems, next step). Output cap 8,192 tokens (a mid value among
//! open harnesses, DeepSeek's). A reply cut off at the cap is used as it is \[assume\].
//!
//! ## Checkpoint and next request
//! Summaries are tracked as checkpoints (`checkpoint_interval_tokens` alias) \[doc\]. The view
//! becomes `[system, user(summary), retained turns…]`: the summary is a **user** message at
//! the start of the history, the most common shape in open harnesses \[assume\]; the system
//! prompt is rebuilt every request and nothing else is re-injected \[assume\]. The full
//! transcript stays on disk (`transcript_full.jsonl`) \[user\], but no documented tool lets the
//! model read it, so no pointer is given.
//!
//! ## Repeated compaction
//! The previous summary is part of the next summarizer input and is replaced by the new one:
//! one summary in view (anchored update) \[assume\].
//!
//! ## Failures
//! Summarizer error: history unchanged, the request goes out as it is, no retry \[assume\]
//! (the error is returned and the log stays as it was).
//!
//! ## Side paths
//! - `/btw <query>`: a side question answered in the background without interrupting the
//!   task \[doc\]; [`AntigravityStrategy::btw`] makes one out-of-band call over the current
//!   view and appends nothing, so the main history is unchanged \[assume: by analogy with
//!   Claude Code's same-named command\]. The seed's "separate checkpoint buffer" for
//!   side-question distillations is not supported by the documentation (spec (k)) and is not
//!   modelled. Replayed sessions contain no side questions, so the runner never calls it.
//! - `/rewind` (`/undo`): users report it is linear and destructive \[user\];
//!   [`AntigravityStrategy::rewind`] appends a truncate checkpoint that keeps the view up to
//!   the chosen message and drops the rest from view, with no pointer (the log, being
//!   append-only, still holds them; nothing in the session can reach them).
//! - `/fork` (`/branch`): clones the conversation into a new session \[doc\];
//!   [`AntigravityStrategy::fork`] returns a copy of the log (files are not cloned: the
//!   replay has none).
//! - `/context` (read-only panel), `/clear`, `/resume` and the `[Pasted text #X +Y lines]`
//!   placeholders are UI and not modelled.
//!
//! # Deviations
//! - Deliberate: the estimator is provider usage plus `chars / 4`, not the benchmark
//!   tokenizer the spec names (strategies decide with their own estimate).
//! - Deliberate: the deprecated `CapabilitiesConfig.compaction_threshold` (Python SDK) is not
//!   exposed; `checkpoint_interval_tokens` stands for the deprecated-alias path.
//! - Deliberate: side paths are methods, not commands in the replay (sessions have none).
//! - Modelled: how the summary calls are sent (`SummaryRequest::context`): compaction as a `Fresh`
//!   prompt (spec (d) \[assume\]: role-prefixed text under its own instruction), `/btw` as a `Fork`
//!   of the conversation as it stands.

use compactbench_core::{Checkpoint, Cx, Decision, EntryId, Error, Fidelity, Incremental, Log, Moment, Replay, Strategy, StrategyInfo, Summarizer, View};

mod compact;
mod count;
mod side;
mod turns;

/// Antigravity's `CompactionConfig` as this crate models it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AntigravityConfig {
    /// `token_threshold` (`tokenThreshold` in Dart): the history ceiling in tokens; `None`
    /// takes the deprecated alias, else the backend default (`floor(95% × W)` here).
    pub token_threshold: Option<u64>,
    /// `checkpoint_interval_tokens`: deprecated alias of `token_threshold`.
    pub checkpoint_interval_tokens: Option<u64>,
    /// Percentage of the window kept as recent whole user turns (20).
    pub retain_percent: u64,
}

impl Default for AntigravityConfig {
    fn default() -> AntigravityConfig {
        AntigravityConfig { token_threshold: None, checkpoint_interval_tokens: None, retain_percent: 20 }
    }
}

/// Backend default threshold as a percentage of the window \[RE: 950,000 of 1,000,000\].
const DEFAULT_THRESHOLD_PERCENT: u64 = 95;

impl AntigravityConfig {
    /// The effective ceiling for a model with `window` tokens.
    fn threshold(&self, window: u64) -> u64 {
        self.token_threshold.or(self.checkpoint_interval_tokens).unwrap_or(window * DEFAULT_THRESHOLD_PERCENT / 100)
    }

    /// `floor(retain_percent × W / 100)`.
    fn retain_tokens(&self, window: u64) -> u64 {
        window * self.retain_percent / 100
    }
}

/// Antigravity's sliding-window history compaction (see the crate docs).
pub struct AntigravityStrategy {
    info: StrategyInfo,
    config: AntigravityConfig,
}

const SOURCE: &str = "closed source, modelled from shared/specs/antigravity.md \
                      (google-antigravity/antigravity-cli@4ebbda8e3215ab7d6d0b751c096204bf4641e001 docs; \
                      Dart SDK antigravity 0.19.0 CompactionConfig; Python SDK 0.1.17 notes)";

impl AntigravityStrategy {
    /// The strategy with `config`.
    pub fn new(config: AntigravityConfig) -> AntigravityStrategy {
        let threshold = match (config.token_threshold, config.checkpoint_interval_tokens) {
            (Some(t), _) | (None, Some(t)) => format!("{t} tokens"),
            (None, None) => format!("{DEFAULT_THRESHOLD_PERCENT}% of window"),
        };
        AntigravityStrategy {
            info: StrategyInfo {
                id: "antigravity".into(),
                harness: "antigravity".into(),
                source: SOURCE.into(),
                summary: format!(
                    "before each request, if usage + est. >= {threshold}: summarize all but the newest whole \
                     user turns within {}% of window (latest turn always kept); user summary first",
                    config.retain_percent
                ),
                fidelity: Fidelity::Modelled,
            },
            config,
        }
    }

    /// `/btw <question>`: answers a side question from the current conversation with one
    /// out-of-band call and appends nothing, so the main history is unchanged.
    pub fn btw(&self, log: &Log, question: &str, summarizer: &dyn Summarizer) -> Result<String, Error> {
        side::btw(&self.project(log), question, summarizer)
    }

    /// `/rewind` to the message `to`: the checkpoint to append, which keeps the view up to
    /// and including `to` and drops everything after it from view.
    pub fn rewind(&self, log: &Log, to: EntryId) -> Result<Vec<Checkpoint>, Error> {
        side::rewind(&self.project(log), to).map(|cp| vec![cp])
    }

    /// `/fork`: the conversation cloned into a new session; later messages of either do not
    /// reach the other.
    pub fn fork(&self, log: &Log) -> Log {
        log.clone()
    }
}

/// The default configuration (`token_threshold` unset: 95% of the window).
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(AntigravityStrategy::new(AntigravityConfig::default()))
}

impl Strategy for AntigravityStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::default_view(self))
    }

    fn decide(&self, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        match at {
            Moment::TurnEnd => Decision::Skip,
            Moment::BeforeRequest if count::history_tokens(log, view) >= self.config.threshold(cx.model.window) => {
                Decision::compact("threshold")
            }
            Moment::BeforeRequest => Decision::Skip,
            Moment::Overflow if compact::overflow_handled_this_turn(log) => Decision::Skip,
            Moment::Overflow => Decision::compact("overflow"),
            Moment::Manual => Decision::compact("manual"),
        }
    }

    fn compact(&self, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let trigger = match at {
            Moment::Overflow => "overflow",
            Moment::Manual => "manual",
            Moment::TurnEnd | Moment::BeforeRequest => "threshold",
        };
        let tokens = count::history_tokens(log, view);
        let retain = self.config.retain_tokens(cx.model.window);
        compact::run(view, retain, trigger, tokens, cx).map(|cp| vec![cp])
    }
}

#[cfg(test)]
mod tests;
