"""Fidelity driver for Kimi CLI's variant K1 (PyPI kimi-cli 1.15.0, kosong 0.43, Python 3.13).

1.15.0 is the newest release whose compaction is MoonshotAI/kimi-cli@3108621c (PR #639): the
check is inline in `KimiSoul._agent_loop` (`token_count + reserved_context_size >=
max_context_size`), there is no `should_auto_compact`, no pending estimate and no
`CompactionResult`, and `compact_context` leaves the counter at `clear()`'s 0. So unlike
fidelity/kimi-cli/driver.py this one runs the soul's own loop and compaction rather than named
helpers.

Per case: replay the exported context records (fidelity/kimi-cli/driver.py's: one exporter)
into Kimi's own `Context` (kimi_cli/soul/context.py) as the soul writes them: kosong `Message`s with
`append_message` (a reply's tool results built by `tool_result_to_message` and appended as one
batch, as `_grow_context` does), `update_token_count(TokenUsage.total)` after a reply, and at an
earlier compaction the soul's own `compact_context`, its summarizer standing in by returning the
messages the exporter already wrote (the summary, then the kept tail), so Kimi's code clears the
counter. The exported `system_prompt` is not replayed: 1.15.0's context file holds none (the
agent keeps it), and K1's counter is provider usage only.

Answer, from Kimi's own code:
- `compact`: one step of `KimiSoul._agent_loop` on a soul holding that context, the case's
  window as `max_context_size` and `LoopControl` (defaults, or the case's settings): true when
  the loop's check calls `compact_context` (its `SimpleCompaction.compact` is the first call
  stopped), false when it goes on to `_step` (stopped before any model call);
- `first_kept`: `SimpleCompaction().prepare(context.history)` (what `SimpleCompaction.compact`
  calls): the record of the first message of `to_preserve`, or null when it prepares no
  summarizer call;
- `tokens_before`: `context.token_count`, the counter the check reads.
Stubbed, never deciding: the model (no call is reached), `wire_send` (the UI's event channel),
the approval queue and D-Mail's checkpoint counter.
"""

import asyncio
import sys
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from protocol import serve  # noqa: E402  (fidelity/protocol.py)

from kimi_cli.config import LoopControl
from kimi_cli.soul import kimisoul
from kimi_cli.soul.compaction import SimpleCompaction
from kimi_cli.soul.context import Context
from kimi_cli.soul.kimisoul import KimiSoul
from kimi_cli.soul.message import tool_result_to_message
from kimi_cli.utils.logging import logger
from kosong.chat_provider import TokenUsage
from kosong.message import Message
from kosong.tooling import ToolResult, ToolReturnValue

logger.remove()
# No wire (UI) runs here; the loop's events go nowhere.
kimisoul.wire_send = lambda message: None


class Compacted(Exception):
    """The loop's check called `compact_context`."""


class Stepped(Exception):
    """The loop's check passed and it went on to the model call."""


class CheckOnly:
    """The soul's `_compaction` while asking the check: stop at its first call."""

    async def compact(self, messages, llm):
        raise Compacted()


class Rewrite:
    """The soul's `_compaction` while replaying an earlier compaction: the context already
    holds what that compaction returned (its summary, then the kept tail)."""

    async def compact(self, messages, llm):
        return list(messages)


class Approvals:
    """No tool asks for approval before the loop stops."""

    async def fetch_request(self):
        await asyncio.Event().wait()


def soul(context, window, settings):
    """A `KimiSoul` around `context`, with only what `_agent_loop` and `compact_context` read."""
    s = KimiSoul.__new__(KimiSoul)
    s._context = context
    # `[loop_control]` of config.toml: the defaults, or what the case sets.
    s._loop_control = LoopControl(**settings)
    s._runtime = SimpleNamespace(llm=SimpleNamespace(max_context_size=window, chat_provider=None))
    # Not a `KimiToolset`: no MCP tools to wait for.
    s._agent = SimpleNamespace(toolset=None)
    s._approval = Approvals()
    s._steer_queue = asyncio.Queue()
    # The default agent has no SendDMail, so its checkpoints add no user message.
    s._checkpoint_with_user_message = False
    s._denwa_renji = SimpleNamespace(set_n_checkpoints=lambda n: None)
    s._compaction = Rewrite()
    return s


async def replay(session, path, s):
    """Kimi's context after the exported records, and the record index of each history message."""
    context = s._context
    origin = []  # record index of each history message
    batch, batch_origin = [], []

    async def flush():
        if batch:
            await context.append_message(list(batch))
            origin.extend(batch_origin)
            batch.clear()
            batch_origin.clear()

    for i, record in enumerate(session["records"]):
        role = record["role"]
        if role == "_tool_result":
            result = ToolResult(tool_call_id=record["tool_call_id"], return_value=ToolReturnValue.model_validate(record["return_value"]))
            batch.append(tool_result_to_message(result))
            batch_origin.append(i)
            continue
        await flush()
        if role == "_usage":
            await context.update_token_count(TokenUsage(**record["usage"]).total)
        elif role == "_compaction":
            # Everything so far is what that compaction wrote; Kimi's `compact_context` clears
            # the context (and its counter) and appends it again.
            await s.compact_context()
        else:
            await context.append_message(Message.model_validate(record))
            origin.append(i)
    await flush()
    return origin


async def check(s):
    """Run the agent loop up to its first call: the compaction or the step."""

    async def step():
        raise Stepped()

    s._compaction = CheckOnly()
    s._step = step
    try:
        await s._agent_loop()
    except Compacted:
        return True
    except Stepped:
        return False
    raise RuntimeError("the agent loop returned before its check")


async def answer(case, folder):
    path = Path(folder) / f"context-{abs(hash(case['id']))}.jsonl"
    s = soul(Context(path), case["model"]["context_window"], case.get("settings", {}))
    origin = await replay(case["session"], path, s)
    count = s._context.token_count
    history = list(s._context.history)
    compact_message, to_preserve = SimpleCompaction().prepare(history)
    first_kept = None
    if compact_message is not None:
        first_kept = origin[len(history) - len(to_preserve)]
    compact = await check(s)
    # `clear()` rotated the file aside (`context-N_1.jsonl`, ...).
    for f in Path(folder).glob(f"{path.stem}*"):
        f.unlink()
    return {"compact": compact, "first_kept": first_kept, "kept": None, "split_turn": None, "tokens_before": count}


def main():
    with tempfile.TemporaryDirectory() as folder:
        serve(lambda case: asyncio.run(answer(case, folder)))


if __name__ == "__main__":
    main()
