//! Aider: recursive split-half summarization of the chat history from before the last applied
//! edit (`ChatSummary` in `aider/history.py`).
//!
//! # Sources
//! - The newest release on PyPI, **`aider-chat` 0.86.2**, read in `aider/history.py`
//!   (`ChatSummary.too_big`, `tokenize`, `summarize`, `summarize_real`, `summarize_all`),
//!   `aider/coders/base_coder.py` (`summarize_start`, `summarize_worker`, `summarize_end`,
//!   `move_back_cur_messages`, `format_chat_chunks`, `send_message`, `Coder.create`),
//!   `aider/coders/chat_chunks.py`, `aider/models.py` (`max_chat_history_tokens`,
//!   `token_count`, `simple_send_with_retries`), `aider/main.py` (the `ChatSummary` wiring) and
//!   `aider/prompts.py` (`summarize`, `summary_prefix`). Its `history.py` is byte-identical to
//!   the spec's canonical commit `Aider-AI/aider@5dc9490bb35f9729ef2c95d00a19ccd30c26339c`
//!   (last changed in `19a786416`). Spec: `shared/specs/aider.md`.
//!
//! # Mapping Aider's two lists onto the log
//! Aider keeps `done_messages` (history) and `cur_messages` (the exchange since the last reply
//! that edited) and only ever summarizes `done_messages`. `send_message` moves `cur_messages`
//! into `done_messages` right after a reply whose edits `apply_updates` returned (every block it
//! parsed, applied or not); what comes after that reply (command output, later replies, the
//! failed-match reflection) and questions answered without edits stay in `cur_messages` and are
//! never summarized, however large. Here a reply *writes an edit* when it holds an assistant tool
//! call that [`tool_kind`](compactbench_core::tools::tool_kind) classifies as an edit or a write,
//! whatever its result (so the behaviour fires whichever harness recorded the session), or
//! SEARCH/REPLACE blocks Aider parses (see Text shape). The done part of the view is everything
//! up to and including the newest reply that wrote an edit (plus what the previous compaction
//! left as done); the rest is cur. A *turn* is a user message and everything up to the next user
//! message that is a request (not one of the messages Aider adds itself, see Text shape).
//!
//! # Text shape
//! Aider itself never sends tool calls: its model writes SEARCH/REPLACE blocks and suggests
//! shell commands in plain text, and Aider adds what happened to the chat as user messages.
//! Module `chat` writes and reads those formats; the strategy declares them as its chat shape
//! ([`Strategy::text_chat`]), in which the runner replays sessions (its `+text` rows):
//! - An assistant message writes an edit when its text parses as Aider's `get_edits` parses a
//!   reply (`find_original_update_blocks` in `aider/coders/editblock_coder.py`: file name within
//!   three lines before `<<<<<<< SEARCH`, then `=======`, then `>>>>>>> REPLACE`; shell fences
//!   skipped) into at least one block. A malformed reply applies nothing (`get_edits` raises).
//!   A block that **failed to match** still counts: `Coder.apply_updates`
//!   (`aider/coders/base_coder.py`) collects the edited paths before
//!   `EditBlockCoder.apply_edits` raises its `# N SEARCH/REPLACE block(s) failed to match!`
//!   reflection and returns them, and `send_message` calls `move_back_cur_messages` for any
//!   returned path. Measured by running aider-chat 0.86.2's `Coder.run_one` with the model
//!   mocked (`fidelity/aider/failed_match.py`): after a reply whose only block failed to match,
//!   `done_messages` holds the request, the reply, `I updated the files.` and `Ok.`; the
//!   reflection and the next reply are in `cur_messages`.
//! - Aider's own user messages do not open a turn: command output (`Output from …`,
//!   `handle_shell_commands`), the edit confirmation (`I updated the files.`,
//!   `files_content_gpt_edits_no_repo`) and the failed-match reflection belong to the exchange
//!   that caused them, as in Aider, where they never start a new request.
//!
//! # Trigger
//! Aider runs `summarize_start` right after each move (`move_back_cur_messages`, after every
//! reply that edits): when `too_big(done)` it starts the summarizer in a background thread on
//! done as it stands. The next `send_message` applies the result before it builds its request
//! (`format_messages` → `format_chat_chunks` → `summarize_end`): mid-turn, before the next
//! reply's request, when the turn goes on (reflection, command output), or before the next
//! prompt's request after the turn's last reply. So this crate compacts where that request is
//! built: at [`Moment::BeforeRequest`] after a move mid-turn, and at [`Moment::TurnEnd`] after
//! the turn's last one (the runner's turn end comes before the next prompt's request, with
//! nothing in between that changes done; the prompt joins cur either way). The later replies of
//! the turn stay verbatim behind the summary, in cur until the next move.
//!
//! The condition is `too_big(done)`: `Σ tokens(msg) > max_tokens` (strict), with
//! `max_tokens` = `--max-chat-history-tokens` ([`AiderConfig::max_chat_history_tokens`]) or the
//! main model's `max_chat_history_tokens = min(max(max_input_tokens / 16, 1024), 8192)` (a
//! float in Aider, kept as one; `max_input_tokens` is the profile's window). Done only grows
//! between checkpoints, so a summary is due exactly when a reply of the current turn wrote an
//! edit since the newest checkpoint and done is over the limit; a move whose summary was applied
//! is before that checkpoint. A turn none of whose replies wrote an edit never triggers.
//! [`Moment::Overflow`] and [`Moment::Manual`] never compact: Aider has no overflow compaction
//! (it only warns and suggests `/drop` or `/clear`) and no compaction command.
//!
//! The compaction runs Aider's loop over the moves of the current turn not yet handled
//! (`session::run_moves`): each appends what was cur to done, starts the summarizer when done is
//! too big, and puts its result in done's place before the next move. In a run that is the one
//! move whose summary is due; on a log cut without the turn's mid-turn summaries (the fidelity
//! check's cases) each is applied in turn, as Aider applied them. Tokens before are done's at
//! the newest start.
//!
//! # Selection (`summarize` → `summarize_real`, depth 0)
//! 1. Total ≤ `max_tokens` at depth 0 → unchanged.
//! 2. At most 4 messages (`min_split`), or depth > 3 → `summarize_all` (everything becomes one
//!    summary).
//! 3. Tail: from the newest message, add messages while `tail + t < max_tokens // 2` (strict).
//! 4. Move the split left until the message before it is an assistant message (stop at 1).
//! 5. Split ≤ 4 → `summarize_all`.
//! 6. Head budget: the head is walked **oldest first**, keeping messages while the running sum
//!    stays ≤ `max_input_tokens − 512` of the first summarizer model (the weak model; 4096 when
//!    unknown; [`AiderConfig::weak_model_max_input_tokens`]). At the first overflow the walk
//!    stops: the **newer** head messages are dropped, neither summarized nor kept (release
//!    behaviour, see Deviations).
//! 7. The kept head becomes one summary; if `tokens(summary) + tokens(tail) < max_tokens` the
//!    result is `summary + tail`, otherwise the same procedure recurses on `summary + tail`
//!    with depth + 1.
//!
//! Finally, `summarize` appends an assistant `Ok.` (literal) when the result does not end with an
//! assistant message (always after `summarize_all`). The tail is kept verbatim; no pairing rule
//! is applied because Aider's history is plain text (see Deviations).
//!
//! # Summarizer call
//! System: the paraphrased `prompts.summarize`. User message: for every user and assistant
//! message, `# USER\n` / `# ASSISTANT\n` (literal) and its content, newline-terminated; other
//! roles are skipped. No instructions follow the transcript and no output cap is set by Aider,
//! so the profile's `max_output` (the provider default) is passed. The models are tried in order
//! `[weak_model, main_model]` (both our one summarizer, [`AiderConfig::summarizer_models`]
//! attempts); the first reply wins, whatever its stop reason or length (Aider does not look at
//! either). The summary is one **user** message: a paraphrase of `prompts.summary_prefix`
//! followed by the reply. A later compaction summarizes that summary again (it opens the next
//! transcript under `# USER`).
//!
//! # View
//! `ChatChunks.all_messages()` sends system, examples, read-only files, repo map, **done**
//! (summary, tail, `Ok.`), chat files, **cur**, reminder. The projection
//! (`AiderStrategy::project`) rebuilds: leading system messages, then the done list exactly as
//! the newest checkpoint left it (its order is kept in the checkpoint's `details.layout`, since
//! an `Ok.` can sit after the tail), then every later message.
//!
//! # Two layers
//! From scratch (module `session`, with `ChatSummary` in `history`): the view, the turn split
//! and `summarize_start` computed from the whole log; the [`Strategy`] methods call these. The
//! run's [`Replay`] (module `replay`) keeps the view and the turn split (`session::Exchanges`,
//! fed one history message at a time) as messages are appended, rebuilds both from the log
//! after a checkpoint, and decides and compacts with the same `summarize_start` and `compact`.
//!
//! # Token estimator
//! Aider counts with its model's real tokenizer, so this crate counts exactly through the
//! injected tokenizer ([`Cx::tokenizer`]) in the encodings litellm picks (module `tokens` cites
//! litellm 1.81.10 and tiktoken 0.12.0, as aider-chat 0.86.2 pins them): one message
//! (`Model.token_count(msg)`, for `too_big`, the tail walk, the head budget and
//! `tokens_before`) is `cl100k_base` tokens of `json.dumps({"role": role, "content": content})`
//! whatever the model name; a list (`litellm.token_counter`, the recursion test's summary) is 3
//! per message plus the tokens of `role` and `content`, plus 3, in `o200k_base` for litellm's
//! OpenAI chat names that tiktoken maps to it (`gpt-4o*`, `gpt-4.1*`, `gpt-5*`, `o1`/`o3`/`o4`),
//! else `cl100k_base`.
//!
//! The model name is the profile's (our weak model is the main model, as `--weak-model` set to
//! it). A message's Aider dict has role `user` / `assistant` / `system` (tool results become
//! `user`, as Aider adds command output to the chat as user messages) and content = its text
//! parts, tool calls as `name {json args}`, tool result texts and `[mime]` for media, joined by
//! newlines; reasoning is left out (Aider strips it from the stored reply).
//!
//! # Failures
//! A failed attempt (our summarizer's `Err`) moves on to the next model. When all fail, Aider
//! raises `ValueError("summarizer unexpectedly failed for all models")`; the background worker
//! swallows it and leaves its result at `[]`, which `summarize_end` then assigns to
//! `done_messages`: the history is wiped. Default ([`AiderConfig::wipe_history_on_failure`]):
//! a [`CheckpointKind::Truncate`](compactbench_core::CheckpointKind) checkpoint that keeps none
//! of the done messages. Flag off: an error is returned and the log is unchanged.
//!
//! # Deviations
//! - Deliberate (spec corrected by the release): the spec's steps 6–7 and cases 7–8 follow the
//!   older `Aider-AI/aider@e568d095` (head walked newest first, oldest dropped; tail ignored in
//!   the recursion test). The release (and the canonical commit) walks the head oldest first
//!   (commit `188e9e111`) and counts the tail; we follow the release. Case 1's 32,000 → 2,048 is
//!   2,000 in the source (`32000 / 16`).
//! - Deliberate: the edit-confirmation race. After starting the worker Aider appends a note
//!   that the edits were made or committed and an assistant `Ok.` to `done_messages`; the worker
//!   copies the list as its first statement. In CPython the new thread wins that race (measured:
//!   2,000 of 2,000 runs of the same pattern on 3.11), so the snapshot differs and the finished
//!   summary is discarded, on every edit. The runner's logs have no such confirmation pair, so
//!   the snapshot matches and the summary is applied by default;
//!   [`AiderConfig::confirmation_race`] reproduces the race (summary discarded, failure never
//!   wipes) and returns an error of kind `Rejected`.
//! - Deliberate: the confirmation pair itself, the system prompt's examples, read-only files,
//!   repo map, chat files (fresh file contents every request) and reminder are not in the log,
//!   so they are not reproduced; the view holds only the conversation.
//! - Deliberate: Aider's history has no tool calls. The split rule "head ends with an assistant
//!   message" is applied to the mapped roles as written, so the tail can start with tool results
//!   whose call was summarized; the pairing violation this makes is left for the runner to
//!   record, not repaired.
//! - Deliberate: a summarization that fails without wiping ([`AiderConfig::wipe_history_on_failure`]
//!   off, not Aider's behaviour) or is discarded ([`AiderConfig::confirmation_race`]) leaves
//!   nothing in the log, so it is tried again at the next moment of the turn that asks (the next
//!   request or the turn's end); Aider starts a worker only at the next move.
//! - Deliberate: start-up summarization of a restored `.aider.chat.history.md`, `/clear` and
//!   `/reset` have no event in the runner's sessions. The chat-mode switch path
//!   (`summarize_all` of the done list without `Ok.`, history kept on failure) is implemented
//!   and tested but never fires in runs.
//! - Deliberate: per-model retries with back-off inside `simple_send_with_retries` are left to
//!   the summarizer; a failed or cancelled compaction records no summarizer usage, because an
//!   error appends nothing.
//!
//! # Measured against the original (compactbench-fidelity)
//! `fidelity/aider/driver.py` replays each case's messages through aider-chat 0.86.2's own coder
//! loop (an `EditBlockCoder`'s `send_message`, with the model returning the log's replies, edit
//! calls written as SEARCH/REPLACE blocks): aider's own `apply_updates` and
//! `move_back_cur_messages` build `done_messages` / `cur_messages`, its `summarize_start`
//! (`ChatSummary.too_big`) triggers and `ChatSummary.summarize` selects, at turn ends, including
//! lists left by earlier compactions, with aider's own `Model.token_count`.
//! - That replay found two differences in the lists, fixed here: the crate moved a whole turn at
//!   its end (results and replies after the edit included) where aider moves right after the
//!   reply that edits, and it did not count an edit whose result was an error, where aider
//!   moves for every block it parses. Before the fix: trigger 270/275, selection 59/181,
//!   tokens-before 6/181.
//! - After it (277 cases): trigger 277/277, selection 171/181, tokens-before 151/181; every
//!   remaining difference was aider summarizing mid-turn, where the crate then summarized once
//!   at the turn's end.
//! - With the summary applied at the request after the move (Trigger) and the summary prefix
//!   worded to the original's size (302 cases; the history family's logs are the crate's own
//!   replays, so the case set moved): trigger 302/302, selection 169/169, tokens-before
//!   169/169. Before the prefix, 13 cases differed by one token in tokens-before (an earlier
//!   summary in done at the newest start).
//! - Earlier, with the lists written by our exporter after the crate's own rules (circular for
//!   the split; trigger and selection logic checked):
//!   with the exact tokenizer (207 cases): trigger 207/207, selection 138/138, tokens-before
//!   138/138. Trigger, tail walk, assistant snap, head budget,
//!   recursion, `Ok.` and the repeated-compaction list all match.
//! - Before (the crate estimated `ceil(len / 4)` of the same strings, 202 cases): trigger
//!   199/202, selection 76/131, tokens-before 0/131; aider's counts were 1.02–1.25× ours
//!   (median 1.18×), so we triggered later and walked a longer tail. With that estimate swapped
//!   into aider's code (`--tokens estimate`) everything agreed: the logic was never the gap.
//! - Not reproduced (names the scenarios never use): litellm gives cohere `command-r`, Anthropic
//!   catalog names other than `claude-3*` (e.g. `claude-sonnet-4-5`, the `sonnet` alias),
//!   `llama-2` / `replicate` and `llama-3` names a Hugging Face tokenizer; we count those with
//!   `cl100k_base`. Aider's other aliases are not resolved (only `4o` changes an encoding).
//! - The summary prefix is a paraphrase of `prompts.summary_prefix` worded to its size in
//!   tokens (module `prompt`), so a summary in done weighs what Aider's does.

mod chat;
mod history;
mod prompt;
mod replay;
mod session;
mod tokens;

use compactbench_core::{Checkpoint, Cx, Decision, Error, Fidelity, Log, Moment, Replay, Strategy, StrategyInfo, TextChat, View};

#[cfg(test)]
mod tests;

/// Aider's settings that shape its history summarization, with its defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AiderConfig {
    /// `--max-chat-history-tokens`; `None` uses the main model's `max_chat_history_tokens`
    /// (`min(max(window / 16, 1024), 8192)`).
    pub max_chat_history_tokens: Option<u64>,
    /// `max_input_tokens` of the first summarizer model (the weak model), which bounds the head
    /// sent to it; `None` means no separate weak model (Aider then uses the main model, so the
    /// profile's window). `Some(0)` stands for "unknown" (Aider falls back to 4096).
    pub weak_model_max_input_tokens: Option<u64>,
    /// Summarizer models tried in order (`[weak_model, main_model]`: 2, even when the weak model
    /// is the main model).
    pub summarizer_models: u32,
    /// A background summarization that fails for every model empties the history (source
    /// behaviour); off keeps the history and reports the error.
    pub wipe_history_on_failure: bool,
    /// Reproduce the edit-confirmation race: the worker's snapshot misses the confirmation pair,
    /// so every result (summary or failure) is discarded and the history kept.
    pub confirmation_race: bool,
}

impl Default for AiderConfig {
    fn default() -> Self {
        AiderConfig {
            max_chat_history_tokens: None,
            weak_model_max_input_tokens: None,
            summarizer_models: 2,
            wipe_history_on_failure: true,
            confirmation_race: false,
        }
    }
}

/// Aider's chat-history summarization (see the crate docs).
pub struct AiderStrategy {
    info: StrategyInfo,
    config: AiderConfig,
}

impl AiderStrategy {
    /// The strategy with `config`.
    pub fn new(config: AiderConfig) -> AiderStrategy {
        AiderStrategy {
            info: StrategyInfo {
                id: "aider".into(),
                harness: "aider".into(),
                source: "aider-chat 0.86.2 (Aider-AI/aider@5dc9490bb35f9729ef2c95d00a19ccd30c26339c)".into(),
                summary: "after a reply that wrote an edit, before the next request, history over max_chat_history_tokens is \
                          split in half by tokens; the older half becomes a user summary, the newer half is kept (recursive)"
                    .into(),
                fidelity: Fidelity::Source,
            },
            config,
        }
    }
}

impl Default for AiderStrategy {
    fn default() -> Self {
        AiderStrategy::new(AiderConfig::default())
    }
}

/// Aider with its default settings.
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(AiderStrategy::default())
}

impl Strategy for AiderStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(replay::AiderReplay::new(&self.config))
    }

    fn decide(&self, log: &Log, view: &View, at: Moment, cx: &Cx<'_>) -> Decision {
        session::decide(&self.config, log, view, at, cx)
    }

    fn compact(&self, log: &Log, view: &View, _at: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        session::compact(&self.config, log, view, cx)
    }

    fn project(&self, log: &Log) -> View {
        session::project(log)
    }

    fn text_chat(&self) -> Option<&dyn TextChat> {
        Some(&chat::AiderChat)
    }

    fn explain_violation(&self, rule: &str) -> Option<&str> {
        // See Deviations: the split only looks for an assistant message before the tail.
        (rule == "orphan_result").then_some(
            concat!(
                "not in the original: Aider's history is plain text (tool output is a user message, calls are text), ",
                "so the request Aider sends has no tool blocks to pair; our sessions carry native tool calls, and ",
                "Aider's split, which only needs an assistant message before the tail, can keep a result whose call ",
                "went into the summary (the aider+text rows replay the same sessions in Aider's text shape and ",
                "break no rule)",
            ),
        )
    }
}
