//! Pi: the compaction of Pi's coding agent (`packages/coding-agent`).
//!
//! # Sources
//! - Default (`pi`): the newest published release, npm `@earendil-works/pi-coding-agent`
//!   **1.6.0** (dist-tag `latest` on 2026-12-04; Pi moved from `@mariozechner/*` to
//!   `@earendil-works/*` after 0.73.1), read in `dist/core/compaction/{compaction,utils}.js`,
//!   `dist/core/agent-session.js` (`_checkCompaction`, `_compactBeforeNextAssistantResponse`),
//!   `dist/core/settings-defaults.js`, `dist/core/settings-manager.js`, and in its dependency
//!   `@earendil-works/pi-ai` 1.6.0 `dist/api/simple-options.js` (output cap),
//!   `dist/utils/retry.js` and `dist/utils/overflow.js`.
//! - Variant `pi/v0.73`: npm `@mariozechner/pi-coding-agent` **0.73.1**, the last release
//!   under the old name, read in the same files (`dist/core/messages.js` and
//!   `dist/utils/overflow.js` of `@mariozechner/pi-ai` 0.73.1).
//! - Variant `pi/v0.58`: the canonical commit of our spec,
//!   `badlogic/pi-mono@83378aad7e74a0e2bb8f37c007a9685fb4609d8a` (right after tag v0.58.3),
//!   files `packages/coding-agent/src/core/compaction/{compaction,utils}.ts`,
//!   `src/core/session-manager.ts`, `src/core/agent-session.ts`, `src/core/messages.ts`,
//!   `packages/ai/src/utils/overflow.ts`. Spec: `shared/specs/pi.md`.
//! - Variant `pi/v0.14`: the compaction Pi ran from 0.13.0 to 0.14.2, before
//!   `badlogic/pi-mono@4227fd5996096887757de90ba22760ac9f307b30` ("Fix auto-compaction TUI
//!   integration and cut point logic", first released in 0.15.0). Read at tag v0.14.2,
//!   `badlogic/pi-mono@33a2bcf2031f732a1305b19721b97c69e9bf2c02`: `packages/coding-agent/src/
//!   compaction.ts`, `src/session-manager.ts` (`loadSessionFromEntries`), `src/settings-manager.ts`
//!   and `src/tui/tui-renderer.ts` (`checkAutoCompaction`, `executeCompaction`,
//!   `handleCompactCommand`). Pi recorded the compactions of
//!   `bench-data/transcripts/pi__pi-mono__before-compaction.jsonl` with it (2025-12-08).
//!
//! ## What 1.6.0 does differently from 0.73.1 (followed by `pi` only)
//! 1. **A check between model calls**: before each next model call of a run
//!    (`prepareNextTurnWithContext` → `_compactBeforeNextAssistantResponse`) Pi compacts
//!    (`threshold`) if `estimateProjectedContextTokens` exceeds `window − reserveTokens`. That
//!    estimate is the last valid usage plus chars/4 of what followed, if that reply is newer
//!    than the latest compaction; otherwise chars/4 of every projected message, system prompt
//!    included. `tokensBefore` uses the same estimate. (We check at
//!    [`Moment::BeforeRequest`] when the newest message is a tool result: the first call after
//!    a user message follows the turn-end check.)
//! 2. **No output cap of its own** (#9512): `generateSummary` no longer passes `maxTokens`, so
//!    pi-ai sends the model's output limit for the history and the turn-prefix call alike
//!    ([`ModelProfile::max_output`](compactbench_core::ModelProfile)).
//! 3. **Cut-off summaries are rejected**: a `length` stop fails the compaction
//!    (`getSummarizationFailure`: "generation hit the token cap and the summary is
//!    incomplete"); nothing is appended.
//! 4. **Transient failures are retried**: each summarization call goes through
//!    `retryAssistantCall` with the default `retry` settings (`maxRetries = 3`); we retry
//!    [`ErrorKind::Timeout`](compactbench_core::ErrorKind) and `Transport` (timeouts,
//!    connection and HTTP 5xx errors match pi-ai's retryable patterns) up to three times.
//! 5. **Thinking is left out of the transcript** (`serializeConversation`): a ruled-out
//!    hypothesis that lives only in thinking never reaches the summarizer.
//! 6. **Split turns**: the two calls run one after the other; with no complete turn before the
//!    split turn the history part is the *previous summary* (or `No prior history.` when there
//!    is none), so an earlier summary is no longer lost. The turn-prefix request is
//!    `# Conversation\n…\n\n# Instructions\n…` with a new prompt (paraphrased).
//! 7. **Nothing to summarize, no compaction**: `prepareCompaction` returns nothing when both
//!    the history and the turn prefix are empty (all of the context fits the keep budget).
//! 8. **Cut fallback**: when the keep budget is crossed inside trailing tool results that no
//!    cut point follows, the cut is the last cut point (their call), not the first one.
//! 9. The summarization system prompt says "an AI assistant" instead of "an AI coding
//!    assistant" (paraphrased either way).
//!
//! Checked and unchanged in 1.6.0: defaults (`reserveTokens = 16384`, `keepRecentTokens =
//! 20000`; new per-model overrides default to the same), `shouldCompact`, the turn-end check
//! with the stale-usage guard, the once-only overflow recovery, the scan start at the previous
//! first kept entry (now via the projection), the initial and update prompts, the 2000-char
//! tool-result cut, the file lists and the summary wrapper.
//!
//! ## What 0.73.1 does differently from the canonical commit (`pi/v0.73` and `pi`)
//! 1. `prepareCompaction` starts its scan at the previous compaction's `firstKeptEntryId`
//!    (falling back to the entry after it), not right after the previous compaction entry:
//!    messages an earlier compaction kept are kept again or folded into the next summary
//!    (fix for issue #2608; the canonical gap drops them silently).
//! 2. Compaction entries are skipped when collecting the messages to summarize, so an older
//!    summary is never serialized as conversation.
//! 3. `tokensBefore` is estimated over the whole rebuilt context (`buildSessionContext`), not
//!    over the entries from the previous compaction on.
//! 4. Overflow detection (pi-ai 0.73.1) knows two more provider messages (`request_too_large`,
//!    Ollama's `prompt too long; exceeded (max) context length`), ignores errors that are
//!    throttling or rate limits, and treats a `length` stop with no output and an input of at
//!    least 99% of the window as overflow (our messages carry no stop reason, so that last
//!    rule cannot fire here).
//! 5. The summarizer call passes the session's thinking level instead of `reasoning: "high"`
//!    (not modelled: [`SummaryRequest`](compactbench_core::SummaryRequest) has no reasoning knob).
//!
//! Checked and unchanged in 0.73.1: output caps `floor(0.8 × reserve)` and
//! `floor(0.5 × reserve)` (no cap by the model's own maximum), no "nothing to summarize"
//! early return (an empty conversation is still summarized), `length`-stopped summaries
//! accepted (only `error` is rejected), the two split-turn calls run in parallel, the
//! `No prior history.` edge case, estimator, cut points, serializer, file lists, summary
//! wrapper, `buildSessionContext` (no system-message snapshot), settings without per-model
//! overrides, trigger, stale-usage guard and the once-only overflow recovery. The later
//! variants the spec lists as V2–V4 are not in 0.73.1; 1.6.0 carries the length-stop
//! rejection (item 3 above).
//!
//! ## What 0.13.0–0.14.2 do (followed by `pi/v0.14` only)
//! The sources: `compaction.ts` is the same from 86e5a70e (0.13.0, where
//! `calculateContextTokens` reads `totalTokens`) to 4227fd59's parent, but for one change in
//! 0.14.0 (bd0d0676, bash mode): `generateSummary` passes the messages through
//! `messageTransformer` (a `!cmd` bash execution becomes user text) and sends the prompt as a
//! text block. `session-manager.ts` and the TUI's compaction methods are the same in v0.13.2
//! and v0.14.2. The registry here holds no 0.14.x; npm `@mariozechner/pi-coding-agent` 0.13.2
//! holds exactly tag v0.13.2's sources (every `sourcesContent` of its source maps), so its
//! code is what compactbench-fidelity runs. What 4227fd59 changed: the check moved to the end
//! of a run (`agent_end`), and the cut moves back over non-message entries before the kept
//! user message (our log has none); 0.17.0 (a38e6190) brought the estimates below.
//! 1. **Trigger**: the TUI checks every assistant reply when it ends (`message_end`), mid-run
//!    too: the newest non-aborted reply's `calculateContextTokens` (`totalTokens`, or the sum
//!    of the parts) `> contextWindow − reserveTokens` (16384). A reply is checked once; there
//!    is no stale-usage guard, no check before a prompt and no overflow recovery. We check a
//!    reply with tool calls at [`Moment::BeforeRequest`] after its results, a final reply at
//!    [`Moment::TurnEnd`], and never at [`Moment::Overflow`].
//! 2. **Cut** (`findCutPoint`): only entries after the previous compaction entry are looked
//!    at. With no user message among them, all of them are kept; with no reply, the last
//!    turn. Otherwise the replies' usage is read newest first; at the first one at least
//!    `keepRecentTokens` (20000) below the newest, the first kept entry is the user message at
//!    or before the reply after it, so whole turns are kept and no turn is split. Messages the
//!    previous compaction kept (before its entry) are neither kept nor summarized again.
//! 3. **Summary** (`generateSummary`): one call with no system prompt: the previous summary as
//!    a user message `Previous session summary:\n…`, the messages before the cut as they are
//!    (thinking, tool calls, whole tool results), then the prompt (paraphrased) as the last
//!    user message, with `\n\nAdditional focus: …` after `/compact <text>`; cap
//!    `floor(0.8 × reserveTokens)`. pi-ai answers a failed call with an errored reply, whose
//!    (absent) text becomes the summary: a failed call still compacts, with an empty summary.
//!    A cut-off reply is used as it is. No split-turn call, no file lists.
//! 4. `tokensBefore` is the newest reply's usage (0 without one). The summary message and the
//!    view (`loadSessionFromEntries`: the summary, then every message from the first kept
//!    entry on) are as in the later releases. `/compact` needs two messages ("Nothing to
//!    compact (no messages yet)") and runs with automatic compaction off.
//!
//! # Trigger
//! `contextTokens > contextWindow − reserveTokens` (strict), defaults `reserveTokens = 16384`,
//! `keepRecentTokens = 20000`, `enabled = true` ([`PiConfig`]). Pi checks on the last
//! assistant message after each agent run (`agent_end`) and again before sending a new
//! prompt; both happen at [`Moment::TurnEnd`]. `contextTokens` is that reply's provider usage
//! (`totalTokens`); for a failed reply it is the last good reply's usage plus the chars/4
//! estimates of every later message, skipped if that usage predates the latest compaction.
//! A reply older than the latest compaction never triggers (stale usage).
//!
//! Up to 0.73.1 there is **no check at [`Moment::BeforeRequest`]**: nothing is checked
//! between the model calls of one run, so a long multi-tool run can overflow mid-run
//! (signalridge/dotfiles#794). 1.6.0 checks there (see above).
//!
//! Overflow: at [`Moment::Overflow`] (the runner's stand-in for the provider's "prompt is too
//! long" error) and at `TurnEnd` for a failed reply whose text matches pi-ai's overflow
//! patterns or a reply whose `input + cacheRead` exceeds the window, Pi compacts with reason
//! `overflow` and retries. It does so at most once until a new user message or a good reply
//! arrives; we read that from the log (an overflow checkpoint after the newest user message
//! and good reply means recovery was already attempted). `enabled = false` also disables it.
//!
//! # Selection
//! `findCutPoint` walks back from the newest entry summing chars/4 estimates until
//! `keepRecentTokens` is reached and cuts at the nearest user or assistant message at or after
//! that point (tool results are never a cut point, so a call keeps its results). Everything
//! from the cut (`firstKeptEntryId`) on is kept verbatim; complete turns before it are
//! summarized; if the cut falls inside a turn, that turn's start is summarized by a second
//! call (`turn-prefix`, cap `floor(0.5 × reserve)`) and merged after the literal
//! `\n\n---\n\n**Turn Context (split turn):**\n\n`. With no complete turns before a split
//! turn the history part is the literal `No prior history.` and the previous summary is lost.
//! Nothing is pruned or dropped without a summary — except, in `pi/v0.58`, the messages the
//! previous compaction kept (issue #2608).
//!
//! The summarizer gets a `<conversation>` block (`[User]: `, `[Assistant]: `,
//! `[Assistant thinking]: `, `[Assistant tool calls]: `, `[Tool result]: ` with each tool
//! result cut to 2000 characters plus `[... N more characters truncated]`), the
//! `<previous-summary>` block if there is one, and the initial or update prompt
//! (paraphrased; Pi's headings kept), capped at `floor(0.8 × reserve)` output tokens.
//! Paths of `read`/`write`/`edit` calls in the summarized messages (plus the previous
//! compaction's lists, carried in `details`) are appended as `<read-files>` and
//! `<modified-files>`; a modified path leaves the read list.
//!
//! The summary is stored as a user message `The conversation history before this point was
//! compacted into the following summary:\n\n<summary>\n…\n</summary>`, first after the system
//! prompt ([`Window::From`](compactbench_core::Window) `firstKeptEntryId`,
//! [`SummaryPosition::AfterSystem`](compactbench_core::SummaryPosition)); the default
//! projection rebuilds Pi's `buildSessionContext`. Nothing else is re-injected.
//!
//! # Token estimator
//! `estimateTokens` = `ceil(chars / 4)` over UTF-16 lengths per role: user text only (1.6.0:
//! plus 4800 per image, `estimateTextAndImageContentChars`); assistant text + thinking + tool
//! name + `JSON.stringify(arguments)`; tool result text plus 4800 per image; a compaction
//! summary its raw text. Provider usage comes from
//! [`Usage`](compactbench_core::Usage) (`totalTokens = input + output + cacheRead +
//! cacheWrite`, so `calculateContextTokens` counts cache writes), except the silent-overflow
//! check, which reads `input + cacheRead` only and so leaves cache writes out.
//!
//! # Failures
//! A summarizer error fails the compaction (`Auto-compaction failed: Summarization failed: …`,
//! or `Context overflow recovery failed: …`) and nothing is appended; 1.6.0 first retries a
//! transient one up to three times. A summary cut off at the output cap is accepted as it is
//! up to 0.73.1 and fails the compaction in 1.6.0. When the last entry already is a
//! compaction there is nothing to prepare and the compaction ends without a checkpoint.
//!
//! # Measured against the original (compactbench-fidelity)
//! `fidelity/pi/driver.mjs` runs each release's own `AgentSession` checks on a bare session
//! (`_compactBeforeNextAssistantResponse` for 1.6.0 before a request after tool results,
//! `_checkCompaction` at a turn's end) and `prepareCompaction` for the selection, on sessions
//! exported with our checkpoints as Pi `compaction` entries. Trigger, first kept entry,
//! split-turn flag and `tokensBefore` agree on every case (1.6.0 before a request 346/346,
//! at a turn's end 207/207; 0.73.1 213/213). Found and fixed: 1.6.0 counts images in user
//! messages, and (the late-system input class, 1.6.0 at a turn's end: 3 of 743 cases) it keeps
//! system prompt changes on the branch as `system` message entries and estimates them
//! (`estimateTokens`, case `system`): a later system message of ours is such an entry, counted
//! in the cut walk and, without fresh usage, joined into the current system message
//! (`getCurrentSystemMessage`). Not covered by the measured sessions, and left as they are:
//! - `_overflowRecoveryAttempted` is session state; the driver starts each case with it unset,
//!   we read it back from the log (see Deviations).
//! - Our `isSplitTurn` in checkpoint details is the preparation's flag, kept for this check
//!   (Pi's entry has no such field).
//!
//! `pi/v0.14` is checked against npm 0.13.2 by `fidelity/pi/driver-0.13.mjs`: the TUI's own
//! `checkAutoCompaction` on a bare `TuiRenderer`, and `compact` itself for the selection (its
//! model call answered by an aborted signal, so it summarizes nothing), on legacy session files
//! with our checkpoints as `compaction` entries. Trigger, first kept entry and `tokensBefore`
//! agree on every case (before a request, after a reply's tool results, 240/240; at a turn's
//! end 225/225). Both compactions Pi recorded in
//! `bench-data/transcripts/pi__pi-mono__before-compaction.jsonl` keep from the step Pi kept
//! from (session steps 285 and 533), where `pi` keeps from 252 and 517.
//!
//! # Deviations
//! - A reply marked failed ([`Message::failure`](compactbench_core::Message::failure), Pi's
//!   `stopReason` `"aborted"` or `"error"`) gives no usage to `getAssistantUsage`, even with
//!   partial usage; its content is estimated, cut at and summarized like any reply. At
//!   [`Moment::TurnEnd`] the check that stands for both of Pi's (see the trigger above) reads an
//!   aborted reply as the pre-prompt `_checkCompaction(lastAssistant, false)` does: its partial
//!   usage directly (1.6.0 only when non-zero, else the estimate); an errored one's text is the
//!   provider's error message, tested for overflow; an aborted one is never an overflow.
//!   0.14 skips aborted replies only, in its trigger and its cut; an errored one counts its usage.
//! - Deliberate: an assistant message without usage (or with all-zero usage) and without a
//!   failure marker stands for Pi's failed reply too (the convention from before the marker),
//!   and its text for the provider's error message. Real replies in a replayed session always
//!   carry usage.
//! - Not modelled: Pi drops failed replies from later requests (`transformMessages`), and
//!   omits retried attempts from its projection (`context_edit`).
//! - Deliberate: usage has no cache-write count and no separate `totalTokens`; both are taken
//!   from [`Usage`](compactbench_core::Usage) (cache write 0, total = input + output + cache read).
//! - Deliberate: the "overflow recovery attempted" flag is read back from the log; an
//!   overflow compaction that failed (summarizer error) leaves no trace, so unlike Pi a later
//!   overflow in the same turn may try again.
//! - Deliberate: Pi runs the history and turn-prefix calls in parallel; we call them in that
//!   order, one after the other, and stop at the first failure (Pi's `Promise.all` rejects
//!   too, so the outcome — no checkpoint — is the same).
//! - Manual `/compact [instructions]` is [`Moment::Manual`] (`AgentSession.compact
//!   (customInstructions)`, spec (b)): the same preparation and calls with no threshold, even
//!   with `enabled = false`; the instructions follow the history call's prompt after a blank
//!   line as `Additional focus: ` (literal, spec (d)), and the turn-prefix call gets none (spec
//!   (d)). Its "Already compacted" and "Nothing to compact" errors are thrown to the user and
//!   change nothing, so the crate skips when there is nothing to prepare; a failure is returned
//!   without the automatic paths' prefixes. Project memory (AGENTS.md) is part of the agent's
//!   system prompt, which the summary call replaces with `SUMMARIZATION_SYSTEM_PROMPT` (spec
//!   (d)): the summarizer never sees it.
//! - Deliberate: extension
//!   hooks (`session_before_compact`, `fromHook`), branch summaries, bash executions and custom
//!   messages are not reproduced; our sessions have no such entries. Pi then walks the cut back
//!   over metadata entries (model/thinking changes); our log has none, so that walk is a no-op.
//! - Deliberate: the system prompt is the log's leading system messages and is not part of
//!   Pi's branch path; a system message later in the log is no cut point and is not
//!   serialized, and before 1.6.0 it counts 0 tokens (those releases have no such role; 1.6.0's
//!   are prompt changes, see above).
//! - Deliberate: a tool message with several results is read as several Pi tool-result
//!   messages (one estimate and one `[Tool result]` block each), as Pi stores them.
//! - Deliberate: truncation to 2000 UTF-16 units stops before a surrogate pair it would split.
//! - Not modelled: the thinking level / reasoning option of the summarizer call, abort
//!   signals and the 100 ms delayed retry; the runner retries after an overflow compaction.
//! - Deliberate (1.6.0): the retry backoff (2 s doubling) is not waited out; pi-ai's check of
//!   the error text against its retryable patterns is read from our error kind.
//! - Deliberate (1.6.0): pi-ai clamps the output cap to the room left in the context window
//!   (`clampMaxTokensToContext`); summary requests here are far below the window, so the cap
//!   is the model's output limit as is.
//! - Deliberate (0.14): Pi aborts the run it compacts in (`executeCompaction`): the checked
//!   reply's tool calls get no results and the user prompts again. The runner's session goes
//!   on, so we compact before its next request, after those results, with the same cut (only
//!   user messages cut), `tokensBefore` and summary input.
//! - Deliberate (0.14): its bash executions (`!cmd`) are no turn boundaries, but our importer
//!   reads them as user messages, so a replayed 0.14.x session would cut at one; none precede
//!   the fixture's compactions. (0.13.2 has no bash mode; 0.14.x turns them into user text for
//!   the summary call, as our transcript does.)
//! - Deliberate (0.14): aborted replies are skipped and errored ones count their usage (0
//!   when all zero); a reply without usage and without a failure marker counts 0 (the fidelity
//!   exporter writes it as errored).
//! - Deliberate (0.14): the summary call's messages reach the summarizer as pi-ai's message
//!   objects, one JSON object a line (what `complete` receives; the provider's own rendering is
//!   not modelled), and its prompt is paraphrased.
//! - Deliberate (1.6.0): overflow detection reads 0.73.1's provider patterns; the ones 1.6.0
//!   adds (LiteLLM, Together, z.ai, DashScope, DS4, any HTTP 413) only matter for a replayed
//!   failed reply whose text matches them. Context edits, codemode nested calls and
//!   virtual-model routing (new entry kinds in 1.6.0) do not occur in our log.

use compactbench_core::{Checkpoint, Cx, Decision, Error, Fidelity, Incremental, Log, Moment, Replay, Strategy, StrategyInfo, View};

mod cut;
mod prepare;
mod session;
mod summarize;
mod trigger;
mod v0_14;

use trigger::Trigger;

/// Pi's compaction settings (`compaction.*` in `settings.json`), with Pi's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PiConfig {
    /// `compaction.enabled`: automatic compaction on or off (threshold and overflow paths).
    pub enabled: bool,
    /// `compaction.reserveTokens`: head-room kept below the window; also sizes the summary
    /// output caps (80% for the history summary, 50% for a turn prefix).
    pub reserve_tokens: u64,
    /// `compaction.keepRecentTokens`: estimated tokens of recent history kept verbatim.
    pub keep_recent_tokens: u64,
}

impl Default for PiConfig {
    fn default() -> PiConfig {
        PiConfig { enabled: true, reserve_tokens: 16384, keep_recent_tokens: 20000 }
    }
}

/// Which release of Pi's estimate-based compaction the strategy follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// npm `@earendil-works/pi-coding-agent` 1.6.0 (checks between model calls, rejects
    /// cut-off summaries, no thinking in the transcript, the model's output limit as cap).
    Npm1_6_0,
    /// npm `@mariozechner/pi-coding-agent` 0.73.1 (scan from the previous first kept entry).
    Npm0_73_1,
    /// badlogic/pi-mono@83378aad, v0.58.3 (scan after the previous compaction; #2608 gap).
    Canonical0_58,
}

/// Which compaction the strategy follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Algorithm {
    /// Since 0.17.0: chars/4 estimates, cuts at user or assistant messages, split turns.
    Estimates(Release),
    /// 0.13.0–0.14.2: provider usage, cuts at user messages after the previous compaction.
    Usage,
}

/// Pi's compaction (see the crate docs).
pub struct PiStrategy {
    info: StrategyInfo,
    config: PiConfig,
    algorithm: Algorithm,
}

impl PiStrategy {
    /// Pi as released in npm `@earendil-works/pi-coding-agent` 1.6.0, with `config`.
    pub fn new(config: PiConfig) -> PiStrategy {
        PiStrategy::with_release(config, Release::Npm1_6_0)
    }

    /// Pi as released in npm `@mariozechner/pi-coding-agent` 0.73.1, with `config`.
    pub fn v0_73(config: PiConfig) -> PiStrategy {
        PiStrategy::with_release(config, Release::Npm0_73_1)
    }

    /// Pi at the canonical commit badlogic/pi-mono@83378aad (v0.58.3), with `config`.
    pub fn v0_58(config: PiConfig) -> PiStrategy {
        PiStrategy::with_release(config, Release::Canonical0_58)
    }

    /// Pi 0.13.0–0.14.2 (badlogic/pi-mono tag v0.14.2, before 4227fd59), with `config`.
    pub fn v0_14(config: PiConfig) -> PiStrategy {
        PiStrategy {
            info: StrategyInfo {
                id: "pi/v0.14".into(),
                harness: "pi".into(),
                source: "badlogic/pi-mono@33a2bcf2031f732a1305b19721b97c69e9bf2c02 (v0.14.2; compaction unchanged from v0.13.0 to 4227fd5996096887757de90ba22760ac9f307b30^, checked against npm @mariozechner/pi-coding-agent@0.13.2)".into(),
                summary: format!(
                    "after each reply, if its usage > window - {}: summarize what followed the previous compaction \
                     up to the user message opening the turn whose usage is ~{} below the newest (usage only, \
                     whole turns kept; what the previous compaction kept is dropped)",
                    config.reserve_tokens, config.keep_recent_tokens
                ),
                fidelity: Fidelity::Source,
            },
            config,
            algorithm: Algorithm::Usage,
        }
    }

    fn with_release(config: PiConfig, release: Release) -> PiStrategy {
        let (id, source, scan) = match release {
            Release::Npm1_6_0 => (
                "pi",
                "npm @earendil-works/pi-coding-agent@1.6.0 (earendil-works/pi, formerly badlogic/pi-mono; spec canonical badlogic/pi-mono@83378aad7e74a0e2bb8f37c007a9685fb4609d8a)",
                "also checks between model calls; rejects cut-off summaries",
            ),
            Release::Npm0_73_1 => (
                "pi/v0.73",
                "npm @mariozechner/pi-coding-agent@0.73.1 (badlogic/pi-mono; spec canonical badlogic/pi-mono@83378aad7e74a0e2bb8f37c007a9685fb4609d8a)",
                "rescans from the previous first kept entry",
            ),
            Release::Canonical0_58 => (
                "pi/v0.58",
                "badlogic/pi-mono@83378aad7e74a0e2bb8f37c007a9685fb4609d8a (v0.58.3)",
                "scans only after the previous compaction (#2608 gap)",
            ),
        };
        PiStrategy {
            info: StrategyInfo {
                id: id.into(),
                harness: "pi".into(),
                source: source.into(),
                summary: format!(
                    "after a turn, if usage > window - {}: summarize all but the last ~{} est. tokens \
                     (cut at a user/assistant message, split-turn prefix summary); {scan}",
                    config.reserve_tokens, config.keep_recent_tokens
                ),
                fidelity: Fidelity::Source,
            },
            config,
            algorithm: Algorithm::Estimates(release),
        }
    }

    /// What Pi `release` would do at `at`, or `None`.
    fn trigger(&self, release: Release, log: &Log, at: Moment, window: u64) -> Option<Trigger> {
        // `compaction.enabled` turns off the automatic paths only: `/compact` always runs.
        if !self.config.enabled && at != Moment::Manual {
            return None;
        }
        match at {
            Moment::TurnEnd => trigger::check_turn_end(log, &self.config, release, window),
            // 1.6.0 checks the projected context before each next model call of a run;
            // earlier releases check nothing between the model calls of a run.
            Moment::BeforeRequest => match release {
                Release::Npm1_6_0 => trigger::check_next_turn(log, &self.config, window),
                Release::Npm0_73_1 | Release::Canonical0_58 => None,
            },
            Moment::Overflow => (!trigger::overflow_attempted(log)).then_some(Trigger::Overflow),
            Moment::Manual => Some(Trigger::Manual),
        }
    }
}

/// The default: Pi as released in npm `@earendil-works/pi-coding-agent` 1.6.0.
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(PiStrategy::new(PiConfig::default()))
}

/// Every row to report: the newest release (`pi`), the last release under the old package
/// name (`pi/v0.73`), the canonical commit (`pi/v0.58`), then the usage-based compaction of
/// 0.13.0–0.14.2 (`pi/v0.14`).
pub fn variants() -> Vec<Box<dyn Strategy>> {
    vec![
        strategy(),
        Box::new(PiStrategy::v0_73(PiConfig::default())),
        Box::new(PiStrategy::v0_58(PiConfig::default())),
        Box::new(PiStrategy::v0_14(PiConfig::default())),
    ]
}

impl Strategy for PiStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::default_view(self))
    }

    fn decide(&self, log: &Log, _view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        let path = session::branch_path(log);
        let release = match self.algorithm {
            Algorithm::Estimates(release) => release,
            // "Already compacted" is thrown to the user and appends nothing.
            Algorithm::Usage => {
                return match v0_14::trigger(log, at, &self.config, cx.model.window) {
                    Some(trigger) if prepare::can_prepare(&path) => Decision::compact(trigger.as_str()),
                    _ => Decision::Skip,
                };
            }
        };
        let Some(trigger) = self.trigger(release, log, at, cx.model.window) else { return Decision::Skip };
        // With nothing to prepare (the last entry already is a compaction) Pi starts the
        // auto-compaction and ends it without a result; skipping has the same effect.
        let preparable = match release {
            // 1.6.0 also prepares nothing when there is nothing to summarize (all is kept), so
            // only a real preparation tells; its `tokensBefore` (hence the 0 system tokens)
            // does not matter here.
            Release::Npm1_6_0 => prepare::prepare_compaction(&path, 0, self.config.keep_recent_tokens, release).is_some(),
            Release::Npm0_73_1 | Release::Canonical0_58 => prepare::can_prepare(&path),
        };
        if !preparable {
            return Decision::Skip;
        }
        Decision::compact(trigger.as_str())
    }

    fn compact(&self, log: &Log, _view: &View, at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        let release = match self.algorithm {
            Algorithm::Estimates(release) => release,
            Algorithm::Usage => return Ok(v0_14::compact(log, &self.config, cx.manual, cx.summarizer).into_iter().collect()),
        };
        let trigger = match at {
            Moment::Overflow => Trigger::Overflow,
            Moment::BeforeRequest => Trigger::Threshold,
            Moment::TurnEnd => self.trigger(release, log, Moment::TurnEnd, cx.model.window).unwrap_or(Trigger::Threshold),
            Moment::Manual => Trigger::Manual,
        };
        // Pi prepares from the session's branch path itself, not from the agent's messages.
        let path = session::branch_path(log);
        let Some(prep) = prepare::prepare_compaction(&path, session::system_chars(log), self.config.keep_recent_tokens, release) else {
            return Ok(Vec::new());
        };
        let caps = summarize::Caps::of(release, self.config.reserve_tokens, cx.model.max_output);
        let checkpoint = summarize::compact(&prep, caps, release, trigger, cx.manual, cx.summarizer)?;
        Ok(vec![checkpoint])
    }
}

#[cfg(test)]
mod tests;
