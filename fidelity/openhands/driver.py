"""Fidelity driver for the OpenHands SDK (PyPI openhands-sdk 1.58.2).

Per case: the exported events are read back with the SDK's own `Event.model_validate` and
turned into a view with `View.from_events` (condensations applied, view properties enforced),
as the conversation state keeps it. The condenser is the SDK's `default_condenser` (what the
default agent runs: `LLMSummarizingCondenser`, max_size 80, keep_first 4), or with a case's
`settings` (`max_size`, `keep_first`, `max_tokens`) the condenser built with those parameters
over `default_condenser`'s; the agent LLM is an
`LLM` whose `max_input_tokens` is the case's window, as the agent passes it for token checks.

Answer, from the SDK's own functions:
- `compact`: `condenser.condensation_requirement(view, agent_llm)` is not None (any reason:
  request, tokens, events), the check `RollingCondenser.condense` makes before a request;
- `kept`: `condenser.condense(view, agent_llm)` (get_condensation, or the hard context reset
  when a hard requirement finds nothing to forget): the native index of every view event the
  returned `Condensation` does not forget, one index per LLM message (the actions of one batch
  share one `llm_response_id`, one message of ours); null when `condense` returns the view;
- `tokens_before`: `get_total_token_count(view.events, agent_llm)`.

Mocked: the summarizer LLM's call (`LLM.generate`, a fixed summary). Token counting is the
SDK's own: `get_total_token_count` (LiteLLM `token_counter` with the model's tiktoken
encoding), as it ships.
"""

import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from protocol import serve  # noqa: E402  (fidelity/protocol.py)

# No network: LiteLLM's bundled model map, no banner, windows under 16k allowed.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
os.environ.setdefault("ALLOW_SHORT_CONTEXT_WINDOWS", "true")

import logging

from openhands.sdk.context.condenser import utils
from openhands.sdk.context.condenser.llm_summarizing_condenser import LLMSummarizingCondenser, default_condenser
from openhands.sdk.context.view import View
from openhands.sdk.event import ActionEvent, Condensation, Event
from openhands.sdk.llm import LLM, Message, TextContent

logging.disable(logging.WARNING)

FIXED_SUMMARY = "## Goal\nContinue the task.\n\n## Progress\nWork is under way."


def fake_generate(self, messages, **kwargs):
    return SimpleNamespace(message=Message(role="assistant", content=[TextContent(text=FIXED_SUMMARY)]), id="summary")


LLM.generate = fake_generate


count = utils.get_total_token_count


def answer(case):
    events = [Event.model_validate(e) for e in case["session"]]
    native = {e.id: i for i, e in enumerate(events)}
    view = View.from_events(events)
    model = case["model"]
    agent_llm = LLM(model=model["name"], max_input_tokens=model["context_window"], usage_id="agent")
    llm = LLM(model=model["name"], usage_id="condenser")
    condenser = default_condenser(llm)
    if case.get("settings"):
        params = {"max_size": condenser.max_size, "keep_first": condenser.keep_first, "max_tokens": condenser.max_tokens}
        condenser = LLMSummarizingCondenser(llm=llm, **(params | case["settings"]))
    out = {"first_kept": None, "kept": None, "split_turn": None}
    out["compact"] = condenser.condensation_requirement(view, agent_llm=agent_llm) is not None
    out["tokens_before"] = count(view.events, agent_llm)
    reasons = condenser.get_condensation_reasons(view, agent_llm=agent_llm)
    result = condenser.condense(view, agent_llm=agent_llm)
    forgotten = len(result.forgotten_event_ids) if isinstance(result, Condensation) else None
    print(case["id"], sorted(r.value for r in reasons), len(view), forgotten, "condensations", sum(isinstance(e, Condensation) for e in events), file=sys.stderr)
    if isinstance(result, Condensation):
        kept, batch = [], None
        for e in view.events:
            if e.id in result.forgotten_event_ids or e.id not in native:
                continue
            if isinstance(e, ActionEvent) and e.llm_response_id == batch:
                continue
            batch = e.llm_response_id if isinstance(e, ActionEvent) else None
            kept.append(native[e.id])
        out["kept"] = kept
    return out


serve(answer)
