//! Amp (ampcode): thread handoff with read-back of earlier threads, and (variant) the in-thread
//! compaction Amp later added back beside it.
//!
//! **Closed source: modelled.** Amp's agent is not public and no repository is involved, so
//! there is no source commit to cite. This crate follows `shared/specs/amp.md`, whose sources
//! are the Amp news post "Handoff" (Nov 2025) \[doc\], the Amp guide "Context management" \[doc\]
//! and the Amp post "Read Bigger Threads" (read through a third-party copy, later than Handoff)
//! \[doc, third-party copy\]. Amp publishes no trigger, prompt, output cap or token estimator, so
//! almost every rule below is a modelling choice, marked **\[assume\]** with its evidence;
//! documented behaviour is marked **\[doc\]**.
//!
//! # `amp` (default): handoff
//! The row id is `amp` (the registry names a crate's default row after the crate); it **is**
//! the handoff model of the spec (`amp/handoff`).
//!
//! ## Trigger
//! Amp's handoff is manual, `/handoff <goal>` \[doc\]; the replay has no human, so the crate
//! hands off automatically when `tokens >= floor(85% × W)` before a model request
//! ([`AmpConfig::handoff_percent`]; 85% lies between the 80–90% thresholds of open harnesses)
//! \[assume, spec (b)\], and also when the request would overflow the window \[assume\]. The goal
//! is the latest user request in the thread, the closest automatic stand-in for what a human
//! would type \[assume\]. [`Moment::Manual`] (and [`AmpStrategy::handoff`]) is the manual
//! `/handoff <goal>`: what the user typed is the goal, verbatim, in the draft request and the
//! seed message (a bare `/handoff` takes the latest request); `amp/compaction` has no manual
//! command and skips it. Project memory (AGENTS.md) reaches the draft call only inside the old
//! thread's system text, which the fork reuses (context, not instructions) \[assume: the spec's
//! (d) names no other input\]. Nothing is
//! checked at [`Moment::TurnEnd`]: the check before the next request follows right after the
//! user message, whose text then becomes the goal. A thread holding nothing but its seed
//! message is never handed off again (nothing new to hand over) \[assume\].
//!
//! ## Token estimator
//! Amp's own is unknown; the spec's stand-in is the benchmark tokenizer \[assume\], which a
//! strategy may not call. The crate takes the closest thing it is given: the newest reply's
//! provider usage (the exact prompt tokens of the request it answered, plus its output) plus
//! `ceil(chars / 4)` (UTF-16) of every later message; without usage in the thread (a fresh
//! thread), `ceil(chars / 4)` of the whole view \[assume\]. A new thread holds no reply of the
//! old one, so no stale usage is ever read.
//!
//! ## Selection and the new thread
//! Nothing of the old thread is carried over verbatim \[doc\]: the new thread's view is the
//! system prompt (kept by the projection, which stands for Amp's fresh system prompt with the
//! project instructions) and one **user** message \[assume, spec (e)\], in this order:
//! `Goal: <goal>` (the goal verbatim), the drafted prompt, `Relevant files:` with one path per
//! line (paths only, never contents \[doc: "a list of relevant files"\]), and the reference to the
//! parent thread. The draft is sent unedited (no human edits it) \[assume\]. Recorded as a
//! [`CheckpointKind::Handoff`](compactbench_core::CheckpointKind::Handoff) checkpoint with
//! [`Window::Kept`](compactbench_core::Window::Kept) of no entries.
//!
//! The relevant files are the paths the draft names, intersected with the files the old thread
//! touched, in the order the thread first touched them \[assume, spec (d)\]. "Touched" means the
//! path argument of a read, write or edit call, recognized through core's
//! [`tool_kind`](compactbench_core::tools::tool_kind) / [`tool_path`](compactbench_core::tools::tool_path)
//! so sessions recorded with any harness's tool names count; a path is "named" when it occurs
//! in the draft as a whole token (not inside a longer path) \[assume\].
//!
//! ## Draft request
//! One request to the session model with the old thread as it stands (the system prompt as the
//! request's system text, then every message as one Anthropic Messages JSON object per line:
//! Amp's native messages) and a final instruction paraphrasing the spec: write the first
//! message of a new thread that pursues the goal, keeping only what it needs (decisions,
//! constraints, current state, open problems), then list the relevant file paths. Output cap
//! 4,000 tokens \[assume, spec (d)\]. A draft cut off at the cap is used as it is \[assume\].
//!
//! ## Threads and read-back
//! Thread ids have Amp's shape, `T-` followed by a UUID (as the Amp CLI lists them)
//! \[assume for the exact form\]; here they are derived deterministically from the session's
//! first message and the thread's number, so a replay always names the same threads. At each
//! handoff the old thread is written, whole and unchanged, to the
//! [`VirtualStore`] under its thread URL
//! `https://ampcode.com/threads/T-…` and recorded as an offload; the new thread's message names
//! that URL, so a probe that reads the pointer reads the old thread itself \[doc: the old thread
//! stays untouched and addressable\]. The stored thread is a Markdown rendering (one heading per
//! message, with its position in the thread and role; tool calls labelled as attempts and tool
//! results as observed output) headed by the thread id and its parent's id (format \[assume\]).
//!
//! [`AmpStrategy::read_thread`] is Amp's `read_thread` tool \[doc\] as the spec models it
//! \[assume, spec (h)\]: BM25 keyword search (light suffix stemming) over the stored messages of
//! the thread, and of its ancestors when asked (each stored thread names its parent, so
//! ancestors are reachable transitively); the best hits ranked newest first; one second-model
//! call with a 2,000-token cap extracting the answer, told that newer messages revise older
//! ones, that tool calls are attempts and not outcomes, and that handoff summaries are
//! orientation only \[doc behaviour, "Read Bigger Threads"\]; summaries are never offered as
//! evidence. The answer ends with the message references it was built from.
//!
//! ## Repeated handoff
//! Thread N+1's draft is written from thread N only (thread N's view: its seed message and its
//! own messages), so older detail reaches it only through drafts or through `read_thread` on an
//! ancestor \[assume, spec (f)\]. Each thread keeps its own stable prompt prefix; the old
//! thread's cache is simply unused \[assume\].
//!
//! ## Failures
//! Draft request fails: no new thread, the active thread stays as it is (the error is
//! returned, the log unchanged) \[assume, spec (g)\]; no retry limit is documented, so the next
//! request over the threshold tries again. Old thread too large for the draft request: the
//! oldest messages are dropped from the draft input only (never from the thread or the stored
//! copy), then any tool results left without their call, until system text, messages,
//! instruction and output cap fit the window by the estimator above \[assume, spec (g)\].
//!
//! # `amp/compaction` (variant)
//! A later Amp post says compaction was added back (threads compacted more than 68 times)
//! \[doc, third-party copy\], parameters unpublished. Modelled on the `claude-code` crate's full
//! compaction, the closest documented closed-source behaviour \[assume, spec (b)\]: the same
//! trigger as handoff (so the two rows differ only in what happens at the threshold)
//! \[assume\]; everything but the system prompt is summarized (the previous summary included)
//! and nothing is kept verbatim; the summary is one user message at the start of the thread;
//! a paraphrased sectioned summary prompt; output cap `min(20,000, max_output)`; the same
//! failure rules as the draft. No pointer to the pre-compaction messages is given: none is
//! documented for the compacted thread itself \[assume\].
//!
//! # Deviations
//! - Deliberate: the handoff fires automatically at a threshold; in Amp a human types
//!   `/handoff` and may edit the draft (no human in a replay).
//! - Deliberate: the relevant-files list is computed (draft ∩ touched files), not drafted.
//! - Deliberate: `read_thread` is a method, not a tool the replayed agent calls: sessions are
//!   replayed, so the agent never asks. Probes see old threads through the URL in the handoff
//!   message; the runner's probe reads one pointer deep, so a fact only in a grandparent thread
//!   counts as lost even though `read_thread` with ancestors would find it.
//! - Deliberate: thread mentions, fork and edit/restore of past messages \[doc\] are not
//!   modelled: a replay has no UI.
//! - Deliberate: the estimator is provider usage plus `chars / 4`, not the benchmark
//!   tokenizer the spec names (strategies decide with their own estimate).
//! - Modelled: how the summary calls are sent (`SummaryRequest::context`). The handoff draft is a
//!   `Fork` (spec (d) \[assume\]: the old thread's messages plus a final instruction, its answer
//!   seeding a new thread); in-thread compaction a `Prefix` (parameters unpublished, as Claude
//!   Code's); `read_thread` a `Fresh` prompt (a subagent with its own system prompt).

use compactbench_core::{Checkpoint, Cx, Decision, Error, Fidelity, Incremental, Log, Moment, Replay, Strategy, StrategyInfo, Summarizer, View, VirtualStore};

mod compaction;
mod count;
mod fit;
mod handoff;
mod read;
mod thread;
mod wire;

/// Amp's settings as this crate models them (none is published; see the crate docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmpConfig {
    /// Hand off (or compact) when the estimated context reaches this percentage of the
    /// window (85).
    pub handoff_percent: u64,
}

impl Default for AmpConfig {
    fn default() -> AmpConfig {
        AmpConfig { handoff_percent: 85 }
    }
}

impl AmpConfig {
    /// `floor(handoff_percent × W / 100)`.
    fn threshold(&self, window: u64) -> u64 {
        window * self.handoff_percent / 100
    }
}

/// What happens at the threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// A new thread seeded with a handoff draft.
    Handoff,
    /// In-thread compaction.
    Compaction,
}

/// Amp's thread handoff (default) or in-thread compaction (see the crate docs).
pub struct AmpStrategy {
    info: StrategyInfo,
    config: AmpConfig,
    mode: Mode,
}

const SOURCE: &str = "closed source, modelled from shared/specs/amp.md (Amp news \"Handoff\" Nov 2025; \
                      guide \"Context management\"; post \"Read Bigger Threads\", third-party copy)";

impl AmpStrategy {
    /// Thread handoff with `config` (report id `amp`).
    pub fn new(config: AmpConfig) -> AmpStrategy {
        let summary = format!(
            "before each request, if usage + est. >= {}% of window: new thread seeded with a drafted \
             handoff message (goal, draft, relevant files, parent thread URL); old thread stored and readable",
            config.handoff_percent
        );
        AmpStrategy {
            info: StrategyInfo {
                id: "amp".into(),
                harness: "amp".into(),
                source: SOURCE.into(),
                summary,
                fidelity: Fidelity::Modelled,
            },
            config,
            mode: Mode::Handoff,
        }
    }

    /// In-thread compaction with `config` (report id `amp/compaction`).
    pub fn compaction(config: AmpConfig) -> AmpStrategy {
        let summary = format!(
            "before each request, if usage + est. >= {}% of window: summarize the whole thread, keep nothing verbatim",
            config.handoff_percent
        );
        AmpStrategy {
            info: StrategyInfo {
                id: "amp/compaction".into(),
                harness: "amp".into(),
                source: SOURCE.into(),
                summary,
                fidelity: Fidelity::Modelled,
            },
            config,
            mode: Mode::Compaction,
        }
    }

    /// `/handoff <goal>`: starts a new thread from the current one, pursuing `goal`, whatever
    /// the context size. Returns the checkpoint to append; on error the log stays as it is.
    pub fn handoff(&self, log: &Log, goal: &str, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let view = self.project(log);
        let tokens = count::context_tokens(&view);
        handoff::run(log, &view, Some(goal), "manual", tokens, cx).map(|cp| vec![cp])
    }

    /// Amp's `read_thread`: answers `question` from the stored thread `thread` (its id
    /// `T-…` or its URL), and from its ancestors when `ancestors` is set. The answer is the
    /// extraction model's reply followed by the message references it was given.
    pub fn read_thread(
        &self,
        store: &VirtualStore,
        thread: &str,
        question: &str,
        ancestors: bool,
        summarizer: &dyn Summarizer,
    ) -> Result<String, Error> {
        read::read_thread(store, thread, question, ancestors, summarizer)
    }
}

/// The default: thread handoff (`amp`).
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(AmpStrategy::new(AmpConfig::default()))
}

/// Every row to report: thread handoff (`amp`, the spec's `amp/handoff`), then in-thread
/// compaction (`amp/compaction`).
pub fn variants() -> Vec<Box<dyn Strategy>> {
    vec![strategy(), Box::new(AmpStrategy::compaction(AmpConfig::default()))]
}

impl Strategy for AmpStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::default_view(self))
    }

    fn decide(&self, _log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        if !thread::has_new_messages(view) {
            return Decision::Skip;
        }
        let reason = match self.mode {
            Mode::Handoff => "handoff",
            Mode::Compaction => "compaction",
        };
        match at {
            Moment::TurnEnd => Decision::Skip,
            Moment::BeforeRequest if count::context_tokens(view) >= self.config.threshold(cx.model.window) => {
                Decision::compact(reason)
            }
            Moment::BeforeRequest => Decision::Skip,
            Moment::Overflow => Decision::compact(format!("{reason} (overflow)")),
            // `/handoff <goal>` [doc]; the compaction mode has no documented command (Amp
            // removed `/compact` when handoff came) [assume].
            Moment::Manual if self.mode == Mode::Handoff => Decision::compact("handoff (manual)"),
            Moment::Manual => Decision::Skip,
        }
    }

    fn compact(&self, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let tokens = count::context_tokens(view);
        let trigger = match at {
            Moment::Overflow => "overflow",
            Moment::Manual => "manual",
            Moment::TurnEnd | Moment::BeforeRequest => "threshold",
        };
        // What the user typed after `/handoff` is the goal; a bare `/handoff` falls back to the
        // latest request, as the automatic handoff does.
        let goal = cx.manual.map(str::trim).filter(|g| !g.is_empty()).map(str::to_owned);
        let cp = match self.mode {
            Mode::Handoff => handoff::run(log, view, goal.as_deref(), trigger, tokens, cx)?,
            Mode::Compaction => compaction::run(view, trigger, tokens, cx)?,
        };
        Ok(vec![cp])
    }
}

#[cfg(test)]
mod tests;
