"""Fidelity driver for aider-chat: its own Coder history flow and ChatSummary on each case.

Per case (one JSON line in, one out; protocol in fidelity/README.md) the session holds aider's
two lists as the exporter wrote them (`done_messages`, `cur_messages`: {role, content} dicts)
and `edited`: whether the turn just ended applied edits (aider's `apply_updates()` result);
`synthetic` lists the items that are no log messages (earlier summaries, "Ok.").

- Trigger: aider's own `Coder.move_back_cur_messages` (run when edits were applied, as
  `send_message` does; no confirmation note, see crates/strategies/aider) whose
  `summarize_start` asks `ChatSummary.too_big(done_messages)` and starts the background worker.
- Selection: the worker's `ChatSummary.summarize` (joined by `summarize_end`), or, when the
  trigger did not fire, `summarize` called directly on `done_messages`, as a compaction now
  would. Kept = the input dicts that come back (by identity), then `cur_messages`.

Only the model is replaced: `Model.simple_send_with_retries` (the summarizer's completion)
returns a fixed text, and `Model.get_model_info` (aider's model catalog, which it would fetch
from the network) returns the case's window, as a `--model-metadata-file` would. Token counts
are aider's own `Model.token_count` (litellm's tokenizer for the model's name: tiktoken
cl100k_base per message for every scenario model; our crate counts the same way through the
injected exact tokenizer), or with `--tokens estimate` the same code over `ceil(len / 4)`
(see _Chars4).
"""

import os
import socket
import sys

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
from aider.coders.base_coder import Coder  # noqa: E402
from aider.history import ChatSummary  # noqa: E402

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


class QuietIO:
    def tool_warning(self, msg):
        print(f"warning: {msg}", file=sys.stderr)

    def tool_output(self, msg):
        print(msg, file=sys.stderr)


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


def answer(req):
    main = model_for(req["model"])
    settings = req.get("settings") or {}
    session = req["session"]
    # aider/main.py: ChatSummary([weak_model, main_model], --max-chat-history-tokens or the model's).
    summarizer = ChatSummary(
        [main.weak_model, main],
        settings.get("max_chat_history_tokens") or main.max_chat_history_tokens,
    )

    native = session["done_messages"] + session["cur_messages"]
    coder = Coder.__new__(Coder)
    coder.io = QuietIO()
    coder.verbose = False
    coder.summarizer = summarizer
    coder.summarizer_thread = None
    coder.summarized_done_messages = []
    coder.summarizing_messages = None
    coder.done_messages = list(session["done_messages"])
    coder.cur_messages = list(session["cur_messages"])

    if session["edited"]:
        coder.move_back_cur_messages(None)
    compact = coder.summarizer_thread is not None

    done = coder.done_messages
    tokens_before = sum(t for t, _ in summarizer.tokenize(done))
    if compact:
        coder.summarize_end()
        result = coder.done_messages
    else:
        result = summarizer.summarize(list(done))

    # Kept = log messages that come back verbatim; earlier summaries and "Ok." are none.
    synthetic = set(session.get("synthetic", []))
    position = {id(m): i for i, m in enumerate(native) if i not in synthetic}
    kept = [position[id(m)] for m in result + coder.cur_messages if id(m) in position]
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
