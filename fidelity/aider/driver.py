"""Fidelity driver for aider-chat: its own coder loop, history flow and ChatSummary on each case.

Per case (one JSON line in, one out; protocol in fidelity/README.md) the exporter
(crates/fidelity/src/originals/aider.rs) sends the session's history messages in order, not
aider's two lists: `done` (what an earlier compaction left as aider's done list, else empty),
`messages` ({role, content, request} dicts; assistant ones also carry `reply`, the text aider's
model would write, with the session's edit calls as SEARCH/REPLACE blocks, and `edits`, those
blocks with whether the session applied them) and `synthetic` (positions that are no log
messages: earlier summaries, "Ok.").

- The lists: a real `EditBlockCoder` (`Coder.create`, edit format `diff`, no git, in a scratch
  folder) replays the messages. A request opens a new prompt (`init_before_message`, as
  `run_one` does); every user message followed by an assistant one is sent with aider's own
  `send_message`, whose model returns that reply: aider appends both to `cur_messages`, parses
  the reply (`get_edits`), applies it (`apply_updates`, on the scratch files) and, when it edited
  anything, runs `move_back_cur_messages`, all as in a session. So `done_messages`,
  `cur_messages` and when they move are aider's own bookkeeping.
- Trigger: the `summarize_start` (`ChatSummary.too_big(done_messages)`) of any move in the last
  prompt (the turn that just ended) that started the background worker; tokens before: done's
  at the newest such start.
- Selection: aider's lists at the turn's end after `summarize_end` (the worker's
  `ChatSummary.summarize`, applied when its snapshot still matches, as the next request would),
  or, when the trigger did not fire, `summarize` called directly on `done_messages`, as a
  compaction now would. Kept = the log messages that come back, then `cur_messages`.

Glue of ours (each marked GLUE below):
- The model: `Coder.send` returns the log's reply (no network), `Model.simple_send_with_retries`
  (the summarizer) a fixed text, and `Model.get_model_info` the case's window, as a
  `--model-metadata-file` would.
- What aider stores as the reply is the log's message as our crate maps it (edit calls as
  `name {json args}`), put back after `apply_updates` parsed the blocks: both sides count the
  same text. Aider's model would have written the blocks, which aider would store and count.
- The scratch files hold the SEARCH texts the session applied (so those blocks apply and the
  others fail to match, as in the session); which ones applied is the session's outcome.
- Tool results are the next prompt text aider sends with the following reply (in aider such
  feedback comes back through `run_one`'s reflection loop or command output); a user message
  with no reply after it (parallel results, a cut session) and a later system message are
  appended to `cur_messages` without a send, and an assistant message without a user message
  before it is stored and applied the way `send_message`'s tail does (see _reply_alone).
- No confirmation pair: `files_content_gpt_edits_no_repo` is emptied, so `move_back_cur_messages`
  appends no "I updated the files." / "Ok." (our logs hold none; crate docs, Deviations).
  Commands are never run (`suggest_shell_commands` off), the lint and test steps are off (their
  outcomes are in the log), `check_tokens` (a warning about the window) is skipped, and the
  prompt is not built (`format_messages` only runs its `summarize_end`; see Replay).
- Earlier prompts do not summarize: the log holds no compaction after `done`, so the case asks
  about the state in which none happened; `summarize_start` runs from the last prompt on.

Token counts are aider's own `Model.token_count` (litellm's tokenizer for the model's name:
tiktoken cl100k_base per message for every scenario model; our crate counts the same way through
the injected exact tokenizer), or with `--tokens estimate` the same code over `ceil(len / 4)`
(see _Chars4).
"""

import contextlib
import os
import socket
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from protocol import serve  # noqa: E402  (fidelity/protocol.py)

# Nothing may reach the network: litellm's bundled cost map, and no sockets at all.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["HF_HUB_OFFLINE"] = "1"


def _no_network(*_args, **_kwargs):
    raise OSError("fidelity driver: network disabled")


socket.socket.connect = _no_network
socket.create_connection = _no_network

from aider import models  # noqa: E402
from aider.coders import Coder  # noqa: E402
from aider.coders.chat_chunks import ChatChunks  # noqa: E402
from aider.coders.editblock_prompts import EditBlockPrompts  # noqa: E402
from aider.history import ChatSummary  # noqa: E402
from aider.io import InputOutput  # noqa: E402

# Same text as crates/fidelity/src/ours.rs FIXED_SUMMARY.
FIXED_SUMMARY = "## Goal\nContinue the task.\n\n## Progress\nWork is under way."

CATALOG = {}


def fake_model_info(self, name):
    return dict(CATALOG.get(name, {}))


def fake_send(self, messages):
    return FIXED_SUMMARY


models.Model.get_model_info = fake_model_info
models.Model.simple_send_with_retries = fake_send


class _Chars4(list):
    """`ceil(len / 4)` pseudo-tokens (our crate's estimate before it had the exact tokenizer) in
    place of the BPE encoder litellm selects, for `--tokens estimate`: aider's logic over a
    character estimate, to tell logic differences from tokenizer ones. Our crate now counts with
    the real encoder, so it agrees with the default mode, not with this one."""

    def __init__(self, text):
        super().__init__([0] * -(-len(text) // 4))
        self.ids = self

    @classmethod
    def encode(cls, text, **_kwargs):
        return cls(text)


# --tokens litellm (default): aider's own Model.token_count, litellm's tokenizer for the name.
if "--tokens" in sys.argv and sys.argv[sys.argv.index("--tokens") + 1] == "estimate":
    from aider.llm import litellm

    litellm.utils._select_tokenizer = lambda *a, **k: {"type": "huggingface_tokenizer", "tokenizer": _Chars4}


class QuietIO(InputOutput):
    """Aider's own InputOutput answering yes to every question (`--yes-always`), with its output
    on stderr: stdout carries the protocol."""

    def __init__(self):
        super().__init__(yes=True, pretty=False, fancy_input=False, input_history_file=None, chat_history_file=None)

    def tool_output(self, *args, **kwargs):
        print(*args, file=sys.stderr)

    def tool_warning(self, msg="", *args, **kwargs):
        print(f"warning: {msg}", file=sys.stderr)

    def tool_error(self, msg="", *args, **kwargs):
        print(f"error: {msg}", file=sys.stderr)

    def assistant_output(self, *args, **kwargs):
        pass

    def ai_output(self, *args, **kwargs):
        pass

    def user_input(self, *args, **kwargs):
        pass

    def append_chat_history(self, *args, **kwargs):
        pass


_MODELS = {}


def model_for(spec):
    key = (spec["name"], spec["context_window"], spec["max_output_tokens"])
    if key not in _MODELS:
        # Aider looks its catalog up under the canonical name (e.g. gemini-2.5-pro is an alias).
        name = models.MODEL_ALIASES.get(spec["name"], spec["name"])
        CATALOG[name] = {
            "max_input_tokens": spec["context_window"],
            "max_output_tokens": spec["max_output_tokens"],
        }
        # --weak-model set to the model itself: our crate's default (one summarizer model).
        _MODELS[key] = models.Model(name, weak_model=name, editor_model=False)
    return _MODELS[key]


# GLUE: the model's reply is the log's; `Coder.send` is the one call that reaches a model.
def fake_coder_send(self, messages, model=None, functions=None):
    self.sent_user = self.cur_messages[-1]  # the prompt send_message just appended
    self.partial_response_content = self.next_reply
    self.partial_response_function_call = dict()
    return
    yield


Coder.send = fake_coder_send
# GLUE: no confirmation pair after applied edits (our logs hold none).
EditBlockPrompts.files_content_gpt_edits_no_repo = ""


def _prepare_files(root, edits):
    """GLUE: each file a reply's blocks name holds the SEARCH texts the session applied, so those
    blocks match and the failed ones do not."""
    texts = {}
    for edit in edits:
        texts.setdefault(edit["path"], [])
        if edit["applied"] and edit["original"]:
            original = edit["original"]
            texts[edit["path"]].append(original if original.endswith("\n") else original + "\n")
    for path, originals in texts.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.isdir(full):
            continue
        with open(full, "w") as f:
            f.write("".join(originals) or "# scratch\n")


class Replay:
    """One case's session through a real EditBlockCoder: aider's lists and its trigger."""

    def __init__(self, main, summarizer, root, done):
        self.coder = Coder.create(
            main_model=main, edit_format="diff", io=QuietIO(), fnames=[], use_git=False,
            stream=False, auto_lint=False, auto_test=False, map_tokens=0,
            suggest_shell_commands=False, detect_urls=False, done_messages=list(done),
            summarizer=summarizer,
        )
        coder = self.coder
        # GLUE: a warning about the window only (`confirm_ask`, answered yes); lists untouched.
        coder.check_tokens = lambda messages: True
        # GLUE: the prompt is not built: only our fake model would read it, and counting it
        # whole on every send (format_chat_chunks' reminder check) is quadratic in the session.
        # Its one effect on the lists, `summarize_end` (applying a finished summary before the
        # next request), is kept.
        coder.format_messages = self._format_messages
        # id(dict aider stores) -> our position; the dicts are held too (`alive`), so no later
        # dict (a summary) can take the id of one a summary dropped.
        self.logged = {}
        self.alive = []
        self.pending_reply = None
        self.triggered = False
        self.tokens_before = None
        self.summarizing = False
        coder.summarize_start = self._summarize_start
        apply_updates = coder.apply_updates

        def apply_and_restore():
            edited = apply_updates()
            self._restore_reply()
            return edited

        coder.apply_updates = apply_and_restore

    def _format_messages(self):
        self.coder.summarize_end()
        return ChatChunks()

    def _summarize_start(self):
        """Aider's own summarize_start from the last prompt on (GLUE: none before, see the
        docstring); records whether it started the worker and done's tokens then."""
        if not self.summarizing:
            return
        coder = self.coder
        before = coder.summarizer_thread
        Coder.summarize_start(coder)
        if coder.summarizer_thread is not None and coder.summarizer_thread is not before:
            # The newest worker's: the summary in the lists at the turn's end is the last one
            # started (an earlier one was applied before it, or discarded by it).
            self.tokens_before = sum(t for t, _ in coder.summarizer.tokenize(list(coder.done_messages)))
            self.triggered = True

    def _restore_reply(self):
        """GLUE: the stored reply is the log's message as our crate maps it (see docstring)."""
        msg = self.pending_reply
        if msg is None:
            return True
        for d in reversed(self.coder.cur_messages):
            if d.get("role") == "assistant" and id(d) not in self.logged:
                d["content"] = msg["content"]
                self.logged[id(d)] = msg["position"]
                self.alive.append(d)
                self.pending_reply = None
                return True
        return False

    def prompt(self):
        self.coder.init_before_message()

    def send(self, user, reply):
        coder = self.coder
        _prepare_files(coder.root, reply.get("edits", []))
        coder.next_reply = reply["reply"]
        self.pending_reply = reply
        coder.sent_user = None
        list(coder.send_message(user["content"]))
        # The prompt dict send_message appended (moved into done if the reply edited).
        if coder.sent_user is not None:
            self.logged[id(coder.sent_user)] = user["position"]
            self.alive.append(coder.sent_user)
        # send_message returned before apply_updates (a file mention), or aider stored no reply
        # (an empty one): GLUE, the log's message is in cur all the same.
        if not self._restore_reply():
            self._append(reply)
            self.pending_reply = None

    def _append(self, msg):
        d = {"role": msg["role"], "content": msg["content"]}
        self.logged[id(d)] = msg["position"]
        self.alive.append(d)
        self.coder.cur_messages.append(d)

    def alone(self, msg):
        """GLUE: a message aider would not send on its own (see the docstring)."""
        if msg["role"] != "assistant":
            self._append(msg)
            return
        _reply_alone(self, msg)


def _reply_alone(replay, msg):
    """An assistant message with no user message before it: stored, parsed and applied as
    `send_message` does after the model replied (add_assistant_reply_to_cur_messages,
    apply_updates, move_back_cur_messages)."""
    coder = replay.coder
    _prepare_files(coder.root, msg.get("edits", []))
    d = {"role": "assistant", "content": msg["content"]}
    replay.logged[id(d)] = msg["position"]
    replay.alive.append(d)
    coder.cur_messages.append(d)
    coder.partial_response_content = msg["reply"]
    replay.pending_reply = None
    edited = coder.apply_updates()
    if edited:
        coder.move_back_cur_messages(coder.gpt_prompts.files_content_gpt_edits_no_repo)


def answer(req):
    main = model_for(req["model"])
    settings = req.get("settings") or {}
    session = req["session"]
    # aider/main.py: ChatSummary([weak_model, main_model], --max-chat-history-tokens or the model's).
    summarizer = ChatSummary(
        [main.weak_model, main],
        settings.get("max_chat_history_tokens") or main.max_chat_history_tokens,
    )
    done = session["done"]
    messages = [dict(m, position=len(done) + i) for i, m in enumerate(session["messages"])]
    requests = [i for i, m in enumerate(messages) if m.get("request")]
    last_prompt = requests[-1] if requests else 0

    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as root, contextlib.redirect_stdout(sys.stderr):
        os.chdir(root)
        try:
            replay = Replay(main, summarizer, root, done)
            coder = replay.coder
            # The prompt the first messages belong to (after an earlier compaction they may
            # continue one), as run_one starts it.
            replay.prompt()
            for i, d in enumerate(coder.done_messages):
                replay.logged[id(d)] = i
                replay.alive.append(d)
            i = 0
            while i < len(messages):
                msg = messages[i]
                if i == last_prompt:
                    replay.summarizing = True
                if msg.get("request"):
                    replay.prompt()
                nxt = messages[i + 1] if i + 1 < len(messages) else None
                if msg["role"] == "user" and nxt is not None and nxt["role"] == "assistant":
                    if i + 1 == last_prompt:
                        replay.summarizing = True
                    replay.send(msg, nxt)
                    i += 2
                else:
                    replay.alone(msg)
                    i += 1

            compact = replay.triggered
            if compact:
                coder.summarize_end()
                result = coder.done_messages
                tokens_before = replay.tokens_before
            else:
                result = summarizer.summarize(list(coder.done_messages))
                tokens_before = sum(t for t, _ in summarizer.tokenize(coder.done_messages))
            cur = coder.cur_messages
        finally:
            os.chdir(cwd)

    # Kept = log messages that come back verbatim; earlier summaries and "Ok." are none.
    synthetic = set(session.get("synthetic", []))
    kept = [replay.logged[id(m)] for m in result + cur if id(m) in replay.logged]
    kept = [k for k in kept if k not in synthetic]
    return {
        "id": req["id"],
        "compact": compact,
        "first_kept": None,
        "kept": kept,
        "split_turn": None,
        "tokens_before": tokens_before,
        "error": None,
    }


def main():
    serve(answer)


if __name__ == "__main__":
    main()
