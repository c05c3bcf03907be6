"""Fidelity driver for OpenHands V0's condensers (PyPI openhands-ai 1.0.0, whose
`openhands/memory/` and `openhands/events/` are those of All-Hands-AI/OpenHands@156d0686).

Usage: driver.py CONDENSER, one of `amortized-forgetting`, `llm-summarizing-v0` (the rows of
crates/strategies/openhands `variants()`), each built with its config class's defaults
(`openhands/core/config/condenser_config.py`), as `Condenser.from_config` builds it.

Per case: each exported event is read back with V0's own `event_from_dict`
(`openhands/events/serialization/event.py`), its `compactbench_message` (the log message it
comes from) taken off first; `View.from_events` (`openhands/memory/view.py`) gives the view the
agent's `condensed_history` condenses.

Answer, from V0's own functions:
- `compact`: `condenser.should_condense(view)` (`RollingCondenser.condense` returns a
  `Condensation` exactly then);
- `kept`: when `condenser.condense(view)` returns a `Condensation`, the native index of every
  view event its `CondensationAction.forgotten` does not name (the summary observation it
  inserts is no stored event), one per log message; null when it returns the view;
- `tokens_before`: null, V0's condensers count events, never tokens.

Mocked: the summarizer LLM's `completion` (a fixed summary).
"""

import json
import logging
import os
import sys
from types import SimpleNamespace

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LOG_LEVEL", "ERROR")

from openhands.core.config.condenser_config import AmortizedForgettingCondenserConfig, LLMSummarizingCondenserConfig
from openhands.core.config.llm_config import LLMConfig
from openhands.events.action.agent import CondensationAction
from openhands.events.serialization.event import event_from_dict
from openhands.memory.condenser.condenser import Condensation
from openhands.memory.condenser.impl import AmortizedForgettingCondenser, LLMSummarizingCondenser
from openhands.memory.view import View

logging.disable(logging.WARNING)

FIXED_SUMMARY = "## Goal\nContinue the task.\n\n## Progress\nWork is under way."


class FixedLLM:
    """What `LLMSummarizingCondenser.get_condensation` uses of its LLM, with a fixed reply."""

    config = SimpleNamespace(model="fixed")
    metrics = SimpleNamespace(get=lambda: {})

    def format_messages_for_llm(self, messages):
        return messages

    def completion(self, **kwargs):
        message = SimpleNamespace(content=FIXED_SUMMARY)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)], model_dump=lambda: {})


def build(name):
    # The config classes' defaults, passed as `from_config` passes them (model_dump of the config).
    if name == "amortized-forgetting":
        return AmortizedForgettingCondenser(**AmortizedForgettingCondenserConfig().model_dump(exclude={"type"}))
    if name == "llm-summarizing-v0":
        config = LLMSummarizingCondenserConfig(llm_config=LLMConfig())
        return LLMSummarizingCondenser(llm=FixedLLM(), **config.model_dump(exclude={"type", "llm_config"}))
    raise SystemExit(f"unknown condenser {name}")


CONDENSER = build(sys.argv[1])


def answer(case):
    events, message = [], {}
    for i, d in enumerate(case["session"]):
        d = dict(d)
        message[i] = d.pop("compactbench_message")
        events.append(event_from_dict(d))
    native = {e.id: i for i, e in enumerate(events)}
    view = View.from_events(events)
    out = {"id": case["id"], "first_kept": None, "kept": None, "split_turn": None, "tokens_before": None, "error": None}
    out["compact"] = CONDENSER.should_condense(view)
    result = CONDENSER.condense(view)
    if isinstance(result, Condensation):
        forgotten = set(result.action.forgotten)
        kept, last = [], None
        for e in view.events:
            if e.id in forgotten or e.id not in native:
                continue
            i = native[e.id]
            if message[i] != last:
                kept.append(i)
            last = message[i]
        out["kept"] = kept
        print(case["id"], len(view), "forgets", len(forgotten), file=sys.stderr)
    return out


for line in sys.stdin:
    case = json.loads(line)
    try:
        out = answer(case)
    except Exception as e:  # the original threw: report it, keep serving
        out = {"id": case["id"], "compact": False, "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(out), flush=True)
