//! Claude Code: the compaction of Anthropic's Claude Code CLI, and (variant) the Anthropic
//! API's server-side context management.
//!
//! **Closed source: modelled.** Claude Code's product code is not public. This crate follows
//! `shared/specs/claude-code.md`, which collects vendor documentation and the changelog
//! (`anthropics/claude-code@5cfc0a1905ce0c0a9bd81d8a90fe6b62ff614357`, `CHANGELOG.md` only),
//! third-party reverse engineering of the shipped bundle (RE) and user reports. Every choice
//! where those are silent is marked **\[assume\]** below; everything else is tagged with its
//! evidence (**\[doc\]**, **\[RE\]**). The API variant follows the Anthropic API docs ("Context
//! editing", "Compaction") and the parameter types of
//! `anthropics/anthropic-sdk-python@887ee67f90b7bbaa97ade97ae892cc34d2c9fa45`
//! (`beta_clear_tool_uses_20250919_edit_param.py`, `beta_compact_20260112_edit_param.py`).
//!
//! Two layers: the modelled algorithm as plain functions of the log and view (`client`,
//! `trigger`, `microcompact`, `full`, `attach`, `ptl`; `api` for the variant), called by the
//! [`Strategy`] methods from scratch and by a run's [`Replay`], which keeps the default view
//! and, for the API variant (`replay.rs`), each message's estimate and the edits `decide`
//! found for `compact` at the same log state.
//!
//! # `claude-code` (default)
//!
//! ## Trigger
//! `W_eff = W − min(max_output, 20_000)` and the auto-compact threshold
//! `T = W_eff − 13_000` \[RE\]; `W` is the model window, or `autoCompactWindow` when that is
//! smaller ([`ClaudeCodeConfig::auto_compact_window`]; taking the minimum is \[assume\]).
//! `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE` can only lower it: `min(floor(W_eff × pct / 100), T)`
//! \[RE #31806\]. Warning (`T − 20_000`) and blocking (`W_eff − 3_000`) limits are computed
//! for completeness; the replay has no UI and no blocking prompt \[RE\].
//! The check runs before every model request ([`Moment::BeforeRequest`], the top of Claude
//! Code's query loop) with `tokens >= T` (inclusive \[assume\]); nothing is checked at
//! [`Moment::TurnEnd`] because the next request's check follows right after the user message.
//! At [`Moment::Overflow`] (the provider's prompt-too-long error) Claude Code compacts
//! reactively \[doc 2.1.142\]. `auto_compact = false` disables both \[assume for the reactive
//! path\].
//!
//! ## Token estimator
//! The last reply's provider usage (`input_tokens + cache_creation_input_tokens +
//! cache_read_input_tokens + output_tokens`: [`Usage::total`](compactbench_core::Usage::total),
//! cache writes included) plus `ceil(chars / 4)` (UTF-16) of every view message after that reply \[RE; the
//! local formula is \[assume\]\]. Text, thinking and tool results count their text, a tool call
//! its name plus its JSON arguments, media its `tokens`. Without any usage in view (session
//! start) the whole view, system prompt included, is estimated \[assume\].
//!
//! ## Selection: full compaction
//! Everything in the working view except the leading system prompt and the **newest round**
//! goes to the summarizer: the previous summary and its re-injected attachments, then every
//! message up to the newest assistant message. That message and everything after it (its
//! tool results) stay **verbatim** after the summary ([`Window::Kept`](compactbench_core::Window::Kept)),
//! and the summary says so \[black box: 2.1.332, where `compact_boundary` reports them as
//! `preserved_messages`; seen in every run of `cargo xtask fidelity --black-box`\]. When the
//! newest assistant message opens the view, nothing is kept and everything is summarized
//! \[assume\]. Partial compaction ("Summarize from / up to here") and session-memory
//! compaction are manual or flag-gated and not reproduced.
//!
//! The variant `claude-code/v2.1.68` keeps the older behaviour the reverse-engineering
//! write-ups describe (2.1.68): nothing kept verbatim, the recently read files re-attached
//! \[RE\].
//!
//! The variant `claude-code/v2.1.20` is `claude-code/v2.1.68` with the older threshold:
//! releases up to 2.1.20 reserved `min(CLAUDE_CODE_MAX_OUTPUT_TOKENS, model max output)` below
//! the window, 32,000 by default, so `T = W − min(max_output, 32_000) − 13_000` (155,000 on a
//! 200k window) \[src: the shipped bundles, npm 2.1.19 and 2.1.20 `cli.js`; 2.1.21 caps the
//! reservation at 20,000; changelog 2.1.21 fixed auto-compact firing too early on
//! models with large output limits\]. The recorded Claude Code 1.0.53, 2.0.76 and 2.1.19 compactions in
//! bench-data fired at about 155k. Modelled as the cap only: what else changed between 2.1.20
//! and 2.1.68 (documents in the summary call since 2.1.47) is not in our sessions.
//!
//! ## Summarizer call
//! A forked call replaying the conversation \[RE; changelog 2.1.69\]: system text = the
//! session's system prompt (the fork reuses it for the prompt cache) \[assume\]; transcript =
//! every message as one Anthropic Messages JSON object per line (images kept since 2.1.70,
//! documents replaced by `[document]` since 2.1.47 \[doc\]); instructions = a paraphrase of the
//! 9-section compact prompt with the literal `<analysis>` and `<summary>` tags, plus
//! [`ClaudeCodeConfig::compact_instructions`]. Output cap `min(20_000, max_output)` \[RE; the
//! `min` is \[assume\]\]. The reply's `<analysis>` block is stripped and `<summary>…</summary>`
//! becomes `Summary:\n…` \[RE `formatCompactSummary`\]. A reply cut off at the cap is used as
//! it is (no check is reported) \[assume\]; an empty reply fails the compaction \[RE\].
//!
//! ## Manual compaction and project memory
//! `/compact [focus instructions]` \[doc\] is [`Moment::Manual`]: a full compaction whatever
//! the threshold, `auto_compact` and the circuit breaker say, with the typed text appended to
//! the compact prompt under the literal heading `Additional Instructions:` (spec (e): what
//! `/compact <text>` in `-p --resume` mode sends); a bare `/compact` adds nothing. A "Compact
//! Instructions" section in CLAUDE.md is **not** appended to the prompt: the spec's (d) says it
//! is \[user\], but anthropics/claude-code #89797 measured it applied in 0 of 354 bare `/compact`
//! runs (all fell back to the stock template), so the crate follows the measurement. The
//! project memory reaches the call only as the conversation does: our sessions keep it at the
//! end of the system prompt, which the forked call reuses as its system text (above), as
//! context beside the prompt rather than in it. The API variant has no manual command (its
//! edits run server-side on each request) and skips [`Moment::Manual`].
//!
//! ## Checkpoint and re-injection
//! One **user** message \[doc 2.1.69\]: a preamble saying the session continues from an earlier
//! conversation that ran out of context, the formatted summary, a pointer to the full
//! transcript, and the instruction to resume without asking the user \[RE
//! `getCompactUserSummaryMessage`, paraphrased\]. The transcript pointer is real: the whole log
//! (as JSONL, one record per message plus `compact_boundary` records) is written to the
//! [`VirtualStore`](compactbench_core::VirtualStore) at `~/.claude/projects/-workspace/session.jsonl`
//! and recorded as an offload ([`ClaudeCodeConfig::transcript_pointer`]; the path is
//! \[assume\]). Then, as user messages in [`Checkpoint::injected`](compactbench_core::Checkpoint)
//! in the order `[instructions file, plan, files, skills, todo list]` \[spec (e); order
//! \[assume\]\]:
//! - **Instructions file (CLAUDE.md)** \[doc: re-read from disk\]: [`ClaudeCodeConfig::claude_md`];
//!   by default the text of the session's leading system messages, which in our scenarios hold
//!   the project rules a CLAUDE.md would \[assume\]. The system prompt itself also stays in
//!   view, so those rules appear twice after a compaction (see Deviations).
//! - **Plan**: the newest `ExitPlanMode` call's `plan`, or the newest write to a path under
//!   `.claude/plans/` \[assume: the plan file of plan mode\].
//! - **Files**, when the compaction runs as a turn starts (the view ends with the user's new
//!   message), not in the middle of a turn's tool loop \[black box: 2.1.332 re-attached the
//!   5 most recently read files in every turn-start compaction and none in any mid-turn one;
//!   `claude-code/v2.1.68` re-attaches them always \[RE\]\]; a shell `cat <file>` counts as a read
//!   of that file \[black box 2.1.332; not in `claude-code/v2.1.68`\]. \[doc, RE `collectFilesToKeep`\]: paths of read/edit/write calls (core's
//!   [`tool_kind`](compactbench_core::tools::tool_kind) and `path`/`file_path` arguments),
//!   most recently touched first over the whole log \[assume\], skipping memory files
//!   (`CLAUDE.md`, `CLAUDE.local.md`, `MEMORY.md`) and the plan file, then the first 5. Each
//!   shows the newest content the log has for it (the last successful read result or write
//!   content) \[assume: the replay has no disk\]; a file over 5,000 tokens, or one whose content
//!   the log never shows (edited only), becomes a path reference without content \[doc;
//!   edited-only is \[assume\]\]. Attachments are kept while their total stays within 50,000
//!   tokens \[RE\] (cannot bind under the other caps).
//! - **Skills** \[doc\]: results of `Skill` tool calls (name from `skill`/`command`/`name`),
//!   newest invocation per skill; each body cut to its first 5,000 tokens; newest first while
//!   the total stays within 25,000, so the oldest are dropped \[assume: the tool result stands
//!   for the skill body Claude Code injects\].
//! - **Todo list** \[doc 1.0.11\]: the newest `TodoWrite` call's `todos`.
//!
//! ## Micro-compaction (flag-gated, off)
//! With [`ClaudeCodeConfig::microcompact`] on and an idle gap over 60 minutes before the first
//! request of a turn, the content of all but the 5 most recent compactable tool results
//! (read, write, edit, search, shell, list, web search/fetch) becomes the literal
//! `[Old tool result content cleared]`, calls untouched \[RE\]; then the threshold is checked
//! on the reduced context, so older tool outputs are cleared first and the conversation is
//! summarized only if still needed \[doc "How Claude Code works"\]. The replay has no clock, so
//! the gap is a configured assumption ([`ClaudeCodeConfig::microcompact_gap_minutes`], unset =
//! never). The count-based "cached" micro-compaction (server-side `cache_edits`) is not
//! modelled: its thresholds are not public.
//!
//! ## Failures
//! - Summarizer request too long \[RE `truncateHeadForPTLRetry`\]: an error containing
//!   "prompt is too long" (gap parsed from `N tokens > M`) or of kind `ContextOverflow` (the
//!   runner's provider rejection by exact count); the request is sent whatever its size, as
//!   the original sends it. The oldest
//!   API-round groups (a group starts at each assistant message) are dropped, enough to cover
//!   the gap or else 20% of the groups, keeping at least one; a remainder starting with an
//!   assistant message gets a synthetic user marker; at most 3 retries \[RE `MAX_PTL_RETRIES`\].
//! - Circuit breaker \[doc 2.1.76\]: after 3 consecutive failed compactions
//!   ([`Cx::failures`](compactbench_core::Cx), kept by the runner) auto and reactive
//!   compaction stop for the session. [`Strategy::compact`] itself never checks it: a direct
//!   call stands for `/compact`, which stays available \[assume\].
//! - Thrash guard \[doc 2.1.89; RE `AUTO_COMPACT_THRASHING_THRESHOLD`\]: a compaction whose
//!   next trigger comes within 3 model replies is a rapid refill; after 3 in a row the next
//!   automatic compaction is refused. Claude Code ends the turn with an error; the replay
//!   cannot stop, so the strategy skips (the request then goes out over the threshold, or
//!   overflows) until 3 replies have passed since the last compaction. Counted from the log
//!   over the whole session (the RE is unclear whether it resets per prompt) \[assume\].
//! - Any failure leaves the log unchanged.
//!
//! # `claude-code/api-context-management` (variant)
//! No Claude Code client: a bare Messages API client with beta
//! `context-management-2025-06-27` and `compact-2026-01-12`, edits applied in this order
//! \[assume\], each request:
//! - `clear_tool_uses_20250919`: when the prompt's input tokens exceed the trigger (default
//!   100,000), the results of all but the `keep` (3) most recent tool uses are replaced by
//!   `[cleared]` (placeholder text not documented \[assume\]) unless the tool is in
//!   `exclude_tools`; inputs too when `clear_tool_inputs`. With `clear_at_least`, nothing is
//!   cleared unless that many tokens would go. Recorded as a prune checkpoint; the log (the
//!   client's history) is unchanged.
//! - `compact_20260112`: when the prompt (after clearing) exceeds the trigger (default
//!   150,000; below 50,000 is invalid and rejected by
//!   [`ClaudeCodeStrategy::api_context_management`]), the whole prompt is summarized and
//!   every earlier block is dropped; the compaction block is a summary message at position 0,
//!   user role so the request stays valid \[assume\]; the server's prompt is paraphrased (state,
//!   next steps, learnings, in `<summary>`) unless `instructions` replaces it.
//!   `pause_after_compaction` is recorded in the checkpoint details only.
//!
//! The server counts with the real tokenizer; this crate may not, so it estimates the
//! unedited prompt with `ceil(chars / 4)` \[assume\].
//!
//! # Deviations
//! - Deliberate: the instructions file is re-injected while the system prompt stays in view;
//!   in Claude Code the system prompt holds no CLAUDE.md, so with the default `claude_md`
//!   our rules are counted twice after a compaction. Set `claude_md` to the file's own text
//!   (or `Some(String::new())` for none) to avoid that.
//! - Deliberate: file contents come from the log (no disk); edits are not applied to them.
//! - Modelling note: the transcript pointer makes every earlier message recoverable by a real
//!   read of the virtual store, which is what Claude Code's summary offers the model; turn it
//!   off (`transcript_pointer = false`) to measure the summary and attachments alone.
//! - Modelling note (API variant): the API's default triggers (100,000 and 150,000 input
//!   tokens) assume a 200k-token window; on smaller windows the prompt overflows before either
//!   fires, as it would for an API user who kept the defaults.
//! - Deliberate: hooks, partial and
//!   session-memory compaction, the fallback model, image stripping over 32 MB, output
//!   styles, nested and path-scoped rules, auto memory, deferred tool schemas and the 1M
//!   context switches are not modelled: a replayed session has none of them.
//! - Deliberate: the thrash guard skips instead of failing the turn (see Failures), and a
//!   summarizer failure after a micro-compaction also drops that micro-compaction (the
//!   strategy returns one error for the whole step).
//! - Deliberate (API variant): `clear_thinking_20251015` and `compact-2026-09-04` (on-demand
//!   compaction) are not modelled; clearing is cumulative in our log, whereas the server
//!   recomputes it per request (the same result while the prompt only grows); `keep` counts
//!   every tool use, excluded ones included \[assume\]; `clear_tool_inputs` as a tool list is
//!   not modelled (all or none).

use compactbench_core::{Checkpoint, Cx, Decision, Error, ErrorKind, Fidelity, Incremental, Log, Moment, Replay, Strategy, StrategyInfo, View};

use crate::api::{Edits, Estimates};
use crate::replay::ApiReplay;

mod api;
mod attach;
mod client;
mod count;
mod full;
mod microcompact;
mod prompt;
mod ptl;
mod replay;
mod trigger;
mod wire;

/// Claude Code's compaction settings with Claude Code's defaults, plus the API variant's
/// edit parameters (`api_*`) with the API's defaults. Each mode reads only its own fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaudeCodeConfig {
    /// `autoCompactEnabled` (`/config` "Auto-compact"; `DISABLE_AUTO_COMPACT` sets it off):
    /// automatic and reactive compaction.
    pub auto_compact: bool,
    /// `autoCompactWindow` / `CLAUDE_CODE_AUTO_COMPACT_WINDOW`: the window used for the
    /// threshold arithmetic when smaller than the model's.
    pub auto_compact_window: Option<u64>,
    /// `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE` (1..=100; other values are ignored): can only lower
    /// the threshold.
    pub autocompact_pct_override: Option<u64>,
    /// The most of the model's output limit reserved below the window: 20,000 since 2.1.21
    /// (`MAX_OUTPUT_TOKENS_FOR_SUMMARY`), 32,000 before (the default of
    /// `CLAUDE_CODE_MAX_OUTPUT_TOKENS`, which capped the whole reservation).
    pub output_reservation_cap: u64,
    /// The project-root CLAUDE.md re-injected after each compaction. `None` takes the text of
    /// the session's leading system messages; `Some("")` re-injects nothing.
    pub claude_md: Option<String>,
    /// Extra summary instructions (a "compact instructions" section of CLAUDE.md, or the
    /// focus text of `/compact`), appended to the compact prompt.
    pub compact_instructions: Option<String>,
    /// Whether the summary names the transcript file and the transcript is written to the
    /// virtual store.
    pub transcript_pointer: bool,
    /// Keep the newest round (the newest assistant message and its tool results) verbatim after
    /// the summary, as 2.1.332 does; off, nothing is kept (2.1.68).
    pub keep_last_round: bool,
    /// When the recently read files are re-attached after the summary.
    pub restore_files: RestoreFiles,
    /// Count a shell `cat <file>` as a read of that file (2.1.332 re-attaches such files).
    pub cat_reads: bool,
    /// The feature flag of time-based micro-compaction (off by default in Claude Code).
    pub microcompact: bool,
    /// Idle minutes assumed before each turn's first request (the replay has no clock);
    /// time-based micro-compaction fires when this exceeds 60. `None` never fires.
    pub microcompact_gap_minutes: Option<u64>,
    /// API `clear_tool_uses_20250919` trigger in input tokens; `None` disables the edit.
    pub api_clear_trigger: Option<u64>,
    /// API `clear_tool_uses_20250919` `keep`: most recent tool uses left intact.
    pub api_clear_keep: u64,
    /// API `clear_tool_uses_20250919` `clear_at_least`: minimum tokens an edit must remove.
    pub api_clear_at_least: Option<u64>,
    /// API `clear_tool_uses_20250919` `exclude_tools`: tool names never cleared.
    pub api_exclude_tools: Vec<String>,
    /// API `clear_tool_uses_20250919` `clear_tool_inputs`: also clear the calls' inputs.
    pub api_clear_tool_inputs: bool,
    /// API `compact_20260112` trigger in input tokens (minimum 50,000); `None` disables it.
    pub api_compact_trigger: Option<u64>,
    /// API `compact_20260112` `pause_after_compaction`.
    pub api_pause_after_compaction: bool,
    /// API `compact_20260112` `instructions`: replaces the default summarization prompt.
    pub api_compact_instructions: Option<String>,
}

impl Default for ClaudeCodeConfig {
    fn default() -> ClaudeCodeConfig {
        ClaudeCodeConfig {
            auto_compact: true,
            auto_compact_window: None,
            autocompact_pct_override: None,
            output_reservation_cap: trigger::MAX_OUTPUT_TOKENS_FOR_SUMMARY,
            claude_md: None,
            compact_instructions: None,
            transcript_pointer: true,
            keep_last_round: true,
            restore_files: RestoreFiles::AtTurnStart,
            cat_reads: true,
            microcompact: false,
            microcompact_gap_minutes: None,
            api_clear_trigger: Some(api::CLEAR_TRIGGER),
            api_clear_keep: api::CLEAR_KEEP,
            api_clear_at_least: None,
            api_exclude_tools: Vec::new(),
            api_clear_tool_inputs: false,
            api_compact_trigger: Some(api::COMPACT_TRIGGER),
            api_pause_after_compaction: false,
            api_compact_instructions: None,
        }
    }
}

/// When recently read files are re-attached after a compaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreFiles {
    /// After every compaction (2.1.68 as reverse engineered).
    Always,
    /// Only after a compaction that runs when a turn starts (the view ends with the user's new
    /// message), not after one in the middle of a turn's tool loop (2.1.332, black box).
    AtTurnStart,
    /// Never.
    Never,
}

/// Which system the strategy models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The Claude Code CLI.
    Client,
    /// The Anthropic API's server-side context management.
    Api,
}

/// Claude Code's compaction, or the Anthropic API's context management (see the crate docs).
pub struct ClaudeCodeStrategy {
    info: StrategyInfo,
    config: ClaudeCodeConfig,
    mode: Mode,
}

const SOURCE: &str = "closed source, modelled from shared/specs/claude-code.md (anthropics/claude-code@5cfc0a1905ce0c0a9bd81d8a90fe6b62ff614357 CHANGELOG.md, docs, reverse engineering)";
const API_SOURCE: &str = "Anthropic API docs (context-management-2025-06-27, compact-2026-01-12), anthropics/anthropic-sdk-python@887ee67f90b7bbaa97ade97ae892cc34d2c9fa45";

impl ClaudeCodeStrategy {
    /// Claude Code's client-side compaction with `config`.
    pub fn new(config: ClaudeCodeConfig) -> ClaudeCodeStrategy {
        ClaudeCodeStrategy {
            info: StrategyInfo {
                id: "claude-code".into(),
                harness: "claude-code".into(),
                source: SOURCE.into(),
                summary: if config.keep_last_round {
                    "before each request, if usage + est. >= window - min(max_output, 20k) - 13k: \
                     summarize all but the newest round, keep that round verbatim; re-inject CLAUDE.md, plan, \
                     skills, todos, and at a turn's start 5 recent files; transcript pointer"
                } else {
                    "before each request, if usage + est. >= window - min(max_output, 20k) - 13k: \
                     summarize everything, keep nothing verbatim; re-inject CLAUDE.md, plan, \
                     5 recent files, skills, todos; transcript pointer"
                }
                .into(),
                fidelity: Fidelity::Modelled,
            },
            config,
            mode: Mode::Client,
        }
    }

    /// Claude Code as the 2.1.68 write-ups describe it (`claude-code/v2.1.68`): nothing kept
    /// verbatim, the recently read files re-attached.
    pub fn release_2_1_68() -> ClaudeCodeStrategy {
        let config = ClaudeCodeConfig { keep_last_round: false, restore_files: RestoreFiles::Always, cat_reads: false, ..ClaudeCodeConfig::default() };
        let mut s = ClaudeCodeStrategy::new(config);
        s.info.id = "claude-code/v2.1.68".into();
        s
    }

    /// Claude Code up to 2.1.20 (`claude-code/v2.1.20`): as `claude-code/v2.1.68`, but the
    /// threshold reserves up to 32,000 output tokens below the window, not 20,000 (167k → 155k
    /// on a 200k window with a 32k output limit).
    pub fn release_2_1_20() -> ClaudeCodeStrategy {
        let mut s = ClaudeCodeStrategy::release_2_1_68();
        s.config.output_reservation_cap = trigger::DEFAULT_MAX_OUTPUT_TOKENS;
        s.info.id = "claude-code/v2.1.20".into();
        s.info.summary = s.info.summary.replace("min(max_output, 20k)", "min(max_output, 32k)");
        s
    }

    /// The Anthropic API's server-side context management with the `api_*` fields of
    /// `config`. Fails as the API does when the compaction trigger is below 50,000 tokens.
    pub fn api_context_management(config: ClaudeCodeConfig) -> Result<ClaudeCodeStrategy, Error> {
        if let Some(t) = config.api_compact_trigger {
            if t < api::COMPACT_TRIGGER_MIN {
                return Err(Error::new(
                    ErrorKind::Other,
                    format!("invalid compact_20260112 trigger {t}: must be at least {}", api::COMPACT_TRIGGER_MIN),
                ));
            }
        }
        let clear = config.api_clear_trigger.map_or("no clearing".to_owned(), |t| {
            format!("over {t} input tokens clear all but {} tool results", config.api_clear_keep)
        });
        let compact = config
            .api_compact_trigger
            .map_or("no compaction".to_owned(), |t| format!("over {t} summarize everything"));
        Ok(ClaudeCodeStrategy {
            info: StrategyInfo {
                id: "claude-code/api-context-management".into(),
                harness: "claude-code".into(),
                source: API_SOURCE.into(),
                summary: format!("server-side, each request: {clear}; then {compact}"),
                fidelity: Fidelity::Modelled,
            },
            config,
            mode: Mode::Api,
        })
    }
}

/// The default: Claude Code's client-side compaction.
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(ClaudeCodeStrategy::new(ClaudeCodeConfig::default()))
}

/// Every row to report: Claude Code (`claude-code`), the 2.1.68 and 2.1.20 behaviours
/// (`claude-code/v2.1.68`, `claude-code/v2.1.20`), then the API's server-side context
/// management with its defaults (`claude-code/api-context-management`).
pub fn variants() -> Vec<Box<dyn Strategy>> {
    let api = ClaudeCodeStrategy::api_context_management(ClaudeCodeConfig::default())
        .expect("the API's default triggers are valid");
    vec![
        strategy(),
        Box::new(ClaudeCodeStrategy::release_2_1_68()),
        Box::new(ClaudeCodeStrategy::release_2_1_20()),
        Box::new(api),
    ]
}

impl Strategy for ClaudeCodeStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        match self.mode {
            Mode::Client => Box::new(Incremental::default_view(self)),
            Mode::Api => Box::new(ApiReplay::new(&self.config)),
        }
    }

    fn decide(&self, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        match self.mode {
            Mode::Client => client::decide(&self.config, log, view, at, cx),
            Mode::Api => {
                let edits = api::decide(&self.config, log, view, at, &Estimates::of(log));
                edits.as_ref().and_then(Edits::reason).map_or(Decision::Skip, Decision::compact)
            }
        }
    }

    fn compact(&self, log: &Log, view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        match self.mode {
            Mode::Client => client::compact(&self.config, log, view, at, cx),
            Mode::Api => api::compact(&self.config, view, &api::edits(&self.config, log, view, &Estimates::of(log)), cx),
        }
    }
}

#[cfg(test)]
mod tests;
