"""Fidelity driver for Kimi CLI (PyPI kimi-cli 1.52.0, kosong 0.56).

Per case: replay the exported context records into Kimi's own `Context` (kimi_cli/soul/context.py)
the way the soul writes them: kosong `Message`s with `append_message` (a reply's tool results
built by `tool_result_to_message` and appended as one batch, as `_grow_context` does),
`update_token_count(TokenUsage.total)` after a reply, and after an earlier compaction
`update_token_count(CompactionResult.estimated_token_count)`.

Answer, from Kimi's own functions:
- `compact`: `should_auto_compact(context.token_count_with_pending, window, trigger_ratio=...,
  reserved_context_size=...)` with the `LoopControl` defaults, as step 2c of `_agent_loop` calls it;
- `first_kept`: `SimpleCompaction().prepare(context.history)` (what `compact_context` and
  `SimpleCompaction.compact` call): the record of the first message of `to_preserve`, or null when
  it prepares no summarizer call;
- `tokens_before`: `token_count_with_pending`, the counter the trigger reads.
No model is called (prepare only builds the summarizer's input), so nothing needs mocking.
"""

import asyncio
import sys
import os
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from protocol import serve  # noqa: E402  (fidelity/protocol.py)

from kimi_cli.config import LoopControl
from kimi_cli.soul.compaction import CompactionResult, SimpleCompaction, should_auto_compact
from kimi_cli.soul.context import Context
from kimi_cli.soul.message import tool_result_to_message
from kimi_cli.utils.logging import logger
from kosong.chat_provider import TokenUsage
from kosong.message import Message
from kosong.tooling import ToolResult, ToolReturnValue

logger.remove()


async def replay(session, path):
    """Kimi's context after the exported records, and the record index of each history message."""
    context = Context(path)
    await context.write_system_prompt(session["system_prompt"])
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
            # Everything so far is what that compaction wrote: its summary, then the kept tail.
            result = CompactionResult(messages=list(context.history), usage=TokenUsage(**record["usage"]))
            await context.update_token_count(result.estimated_token_count)
        else:
            await context.append_message(Message.model_validate(record))
            origin.append(i)
    await flush()
    return context, origin


async def answer(case, folder):
    path = Path(folder) / f"context-{abs(hash(case['id']))}.jsonl"
    path.unlink(missing_ok=True)
    context, origin = await replay(case["session"], path)
    # `[loop_control]` of config.toml: the defaults, or what the case sets.
    loop = LoopControl(**case.get("settings", {}))
    count = context.token_count_with_pending
    compact = should_auto_compact(
        count,
        case["model"]["context_window"],
        trigger_ratio=loop.compaction_trigger_ratio,
        reserved_context_size=loop.reserved_context_size,
    )
    history = list(context.history)
    compact_message, to_preserve = SimpleCompaction().prepare(history)
    first_kept = None
    if compact_message is not None:
        first_kept = origin[len(history) - len(to_preserve)]
    path.unlink(missing_ok=True)
    return {"compact": compact, "first_kept": first_kept, "kept": None, "split_turn": None, "tokens_before": count}


def main():
    with tempfile.TemporaryDirectory() as folder:
        serve(lambda case: asyncio.run(answer(case, folder)))


if __name__ == "__main__":
    main()
