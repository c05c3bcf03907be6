"""Which replies move aider's cur_messages into done_messages, from aider-chat 0.86.2's own code.

Run `target/fidelity/aider-chat-0.86.2/venv/bin/python fidelity/aider/failed_match.py` (the venv
`cargo xtask fidelity` installs). It runs `Coder.run_one` of an `EditBlockCoder` on a scratch
file with only the model replaced (`Coder.send` returns fixed replies) and prints the two lists
after each case. crates/strategies/aider (Text shape) follows what it shows:
- a reply whose SEARCH block fails to match still moves the exchange (`apply_updates` returns
  the edited paths collected before `apply_edits` raises); the reflection stays in cur;
- a malformed reply (no `=======`) moves nothing (`get_edits` raises first).
"""

import os
import socket
import tempfile

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["HF_HUB_OFFLINE"] = "1"


def _no_network(*_args, **_kwargs):
    raise OSError("failed_match.py: network disabled")


socket.socket.connect = _no_network

from aider import models  # noqa: E402
from aider.coders import Coder  # noqa: E402
from aider.io import InputOutput  # noqa: E402

models.Model.get_model_info = lambda self, name: {"max_input_tokens": 100000}
models.Model.simple_send_with_retries = lambda self, messages: "summary"

FAILS = "a.py\n```python\n<<<<<<< SEARCH\nx = 5\n=======\nx = 6\n>>>>>>> REPLACE\n```\n"
MALFORMED = "a.py\n```python\n<<<<<<< SEARCH\nx = 1\n```\n"

replies = []


def fake_send(self, messages, model=None, functions=None):
    self.partial_response_content = replies.pop(0)
    self.partial_response_function_call = dict()
    return
    yield


Coder.send = fake_send


def run(*answers):
    """The roles and first lines of done_messages and cur_messages after one request."""
    replies[:] = list(answers)
    with tempfile.TemporaryDirectory() as root:
        os.chdir(root)
        with open("a.py", "w") as f:
            f.write("x = 1\ny = 2\n")
        io = InputOutput(yes=True, pretty=False, fancy_input=False)
        coder = Coder.create(
            main_model=models.Model("gpt-4o"), edit_format="diff", io=io, fnames=["a.py"],
            use_git=False, stream=False, auto_lint=False, map_tokens=0,
        )
        coder.run_one("change x", preproc=False)
        first = lambda ms: [(m["role"], m["content"].splitlines()[0]) for m in ms]  # noqa: E731
        return first(coder.done_messages), first(coder.cur_messages)


for name, answers in [("failed match", (FAILS, "I cannot fix it.")), ("malformed", (MALFORMED, "I cannot fix it."))]:
    done, cur = run(*answers)
    print(f"{name}:\n  done {done}\n  cur  {cur}")
