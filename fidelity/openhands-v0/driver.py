"""Fidelity driver for OpenHands V0's condensers (PyPI openhands-ai 1.0.0, whose
`openhands/memory/` and `openhands/events/` are those of All-Hands-AI/OpenHands@156d0686).

Usage: driver.py CONDENSER [--request], CONDENSER one of `amortized-forgetting`,
`llm-summarizing-v0`, `structured-summary`, `observation-masking`, `recent-events`,
`conversation-window`, `pipeline` (the rows of crates/strategies/openhands `variants()`), each
built with its config class's defaults (`openhands/core/config/condenser_config.py`), as
`Condenser.from_config` builds it; `pipeline` is the web app's default
(`openhands/server/session/session.py`: conversation window, browser output with
`attention_window=2`, LLM summarizing with `keep_first=4` and `max_size=120`). `--request`: the
context window overflowed, so the agent controller appended a `CondensationRequestAction`
(`agent_controller.py`) to the session before the condenser runs.

Per case: each exported event is read back with V0's own `event_from_dict`
(`openhands/events/serialization/event.py`), its `compactbench_message` (the log message it
comes from) taken off first; `View.from_events` (`openhands/memory/view.py`) gives the view the
agent's `condensed_history` condenses.

Answer, from V0's own functions:
- `compact`: whether `condenser.condense(view)` returns a `Condensation` (a rolling condenser
  does exactly when its `should_condense` says so; the others never do);
- `kept`: when it returns a `Condensation`, the native index of every view event its
  `CondensationAction.forgotten` does not name (the summary observation it inserts is no
  stored event), one per log message; null when it returns a view, except for the condensers
  that act only on the view they return (observation masking, recent events): there what they
  keep is what the agent sends of that view, so `kept` is the first native index of every log
  message whose event (or stand-in) has a message in what `CodeActAgent._get_messages` builds
  (`ConversationMemory.process_events`, with the first user message of the whole history and
  `LLMConfig.max_message_chars`; it puts the system prompt and the first user message back,
  and sends a tool-call message only with all its results), sorted;
- `rewritten` (observation masking only): the native index of every view event the view it
  returns shows as another event (its `<MASKED>` stand-in);
- `tokens_before`: null, V0's condensers count events, never tokens.

Only to tell which event each built message comes from, the driver wraps the message
builder's `_process_action`, `_process_observation` and `_filter_unmatched_tool_calls`
(recording, never changing, what they return or hold back).

Mocked: the summarizer LLM's `completion` (a fixed summary; the structured summary condenser's
forced tool call is not made, so it keeps an empty state summary, as ours does on a reply that
is not the call's JSON).
"""

import logging
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from protocol import serve  # noqa: E402  (fidelity/protocol.py)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LOG_LEVEL", "ERROR")

from openhands.core.config.condenser_config import (
    AmortizedForgettingCondenserConfig,
    BrowserOutputCondenserConfig,
    LLMSummarizingCondenserConfig,
    ObservationMaskingCondenserConfig,
    RecentEventsCondenserConfig,
    StructuredSummaryCondenserConfig,
)
from openhands.core.config.agent_config import AgentConfig
from openhands.core.config.llm_config import LLMConfig
from openhands.events.action import MessageAction, SystemMessageAction
from openhands.events.serialization.event import event_from_dict
from openhands.memory.condenser.condenser import Condensation
from openhands.memory.condenser.impl import (
    AmortizedForgettingCondenser,
    BrowserOutputCondenser,
    CondenserPipeline,
    ConversationWindowCondenser,
    LLMSummarizingCondenser,
    ObservationMaskingCondenser,
    RecentEventsCondenser,
    StructuredSummaryCondenser,
)
from openhands.memory.conversation_memory import ConversationMemory
from openhands.memory.view import View

logging.disable(logging.WARNING)

FIXED_SUMMARY = "## Goal\nContinue the task.\n\n## Progress\nWork is under way."


class FixedLLM:
    """What the summarizing condensers' `get_condensation` use of their LLM, with a fixed reply."""

    config = SimpleNamespace(model="fixed")
    metrics = SimpleNamespace(get=lambda: {})

    def format_messages_for_llm(self, messages):
        return messages

    def is_function_calling_active(self):
        return True

    def completion(self, **kwargs):
        message = SimpleNamespace(content=FIXED_SUMMARY, tool_calls=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)], model_dump=lambda: {})


def config_args(config, *llm):
    # The config's fields as `from_config` passes them (model_dump of the config).
    return config.model_dump(exclude={"type", *llm})


def build(name):
    if name == "amortized-forgetting":
        return AmortizedForgettingCondenser(**config_args(AmortizedForgettingCondenserConfig()))
    if name == "llm-summarizing-v0":
        return LLMSummarizingCondenser(llm=FixedLLM(), **config_args(LLMSummarizingCondenserConfig(llm_config=LLMConfig()), "llm_config"))
    if name == "structured-summary":
        config = StructuredSummaryCondenserConfig(llm_config=LLMConfig())
        return StructuredSummaryCondenser(llm=FixedLLM(), **config_args(config, "llm_config"))
    if name == "observation-masking":
        return ObservationMaskingCondenser(**config_args(ObservationMaskingCondenserConfig()))
    if name == "recent-events":
        return RecentEventsCondenser(**config_args(RecentEventsCondenserConfig()))
    if name == "conversation-window":
        return ConversationWindowCondenser()
    if name == "pipeline":
        summarizing = LLMSummarizingCondenserConfig(llm_config=LLMConfig(), keep_first=4, max_size=120)
        return CondenserPipeline(
            ConversationWindowCondenser(),
            BrowserOutputCondenser(**config_args(BrowserOutputCondenserConfig(attention_window=2))),
            LLMSummarizingCondenser(llm=FixedLLM(), **config_args(summarizing, "llm_config")),
        )
    raise SystemExit(f"unknown condenser {name}")


CONDENSER = build(sys.argv[1])
REQUEST = "--request" in sys.argv[2:]
# Which condensers rewrite events in the view they return (and so answer `rewritten`).
REWRITES = sys.argv[1] == "observation-masking"
# Which condensers act only on the view they return, so that what they keep is what the agent
# sends of it (and `kept` comes from the message builder).
SENT = sys.argv[1] in ("observation-masking", "recent-events")


class SessionPrompt:
    """The prompt manager `ConversationMemory` asks for a system prompt only when the view has
    none; in a V0 session the one it gives is the session's own system message."""

    def __init__(self, content):
        self.content = content

    def get_system_message(self, **kwargs):
        return self.content


# The event each message `ConversationMemory.process_events` builds comes from, by `id()` of
# the message (the messages are kept alive in SENDING so no `id()` is reused during a case).
SOURCE, SENDING = {}, []
_filter = ConversationMemory._filter_unmatched_tool_calls


def filter_unmatched_tool_calls(messages):
    # Its copies of a tool-call message (some calls dropped) come from that message's event.
    by_call = {c.id: SOURCE[id(m)] for m in messages if m.role == "assistant" and m.tool_calls for c in m.tool_calls}
    for m in _filter(messages):
        if id(m) not in SOURCE:
            SOURCE[id(m)] = by_call[m.tool_calls[0].id]
            SENDING.append(m)
        yield m


ConversationMemory._filter_unmatched_tool_calls = staticmethod(filter_unmatched_tool_calls)


def sent(events, shown, history):
    """The events of `shown` (the view a condenser returned for view `events` of session
    `history`) whose messages `CodeActAgent._get_messages` sends, each as the view event it
    stands for (a stand-in as the event it replaced)."""
    SOURCE.clear()
    SENDING.clear()
    system = next((e for e in history if isinstance(e, SystemMessageAction)), None)
    memory = ConversationMemory(AgentConfig(), SessionPrompt(system.content if system else None))
    process_action, process_observation = memory._process_action, memory._process_observation

    def recording(process, event_key, held_key):
        # The messages an event's processing returns or holds back (a tool-call message until
        # its results are in, a result until its call's message is sent) come from that event.
        def wrapped(**kw):
            held = kw[held_key]
            before = {id(m) for m in held.values()}
            out = process(**kw)
            for m in out + [m for m in held.values() if id(m) not in before]:
                SOURCE[id(m)] = kw[event_key]
                SENDING.append(m)
            return out

        return wrapped

    action = recording(process_action, "action", "pending_tool_call_action_messages")
    observation = recording(process_observation, "obs", "tool_call_id_to_message")

    memory._process_action, memory._process_observation = action, observation
    # `CodeActAgent._get_initial_user_message`: the first user message of the whole history.
    initial = next((e for e in history if isinstance(e, MessageAction) and e.source == "user"), None)
    messages = memory.process_events(list(shown), initial, LLMConfig().max_message_chars, False)
    # A stand-in (not a view event) replaces the view event at its place (masking keeps the
    # view's length).
    in_view = {id(e) for e in events}
    stands_for = {id(s): e for e, s in zip(events, shown) if id(s) not in in_view}
    stored = {e.id for e in history}
    out = []
    for m in messages:
        e = SOURCE[id(m)]
        # The system prompt `_ensure_system_message` puts back is the session's own.
        out.append(system if isinstance(e, SystemMessageAction) and e.id not in stored else stands_for.get(id(e), e))
    return out


def answer(case):
    events, message = [], {}
    for i, d in enumerate(case["session"]):
        d = dict(d)
        message[i] = d.pop("compactbench_message")
        events.append(event_from_dict(d))
    native = {e.id: i for i, e in enumerate(events)}
    if REQUEST:
        request = {"id": max(native, default=-1) + 1, "source": "agent", "action": "condensation_request", "args": {}, "message": ""}
        events.append(event_from_dict(request))
    view = View.from_events(events)
    out = {"first_kept": None, "kept": None, "split_turn": None, "tokens_before": None}
    result = CONDENSER.condense(view)
    out["compact"] = isinstance(result, Condensation)
    if REWRITES:
        out["rewritten"] = [native[e.id] for e, shown in zip(view.events, result.events) if shown is not e and e.id in native]
    if SENT:
        first = {}
        for i in range(len(events) - REQUEST):
            first.setdefault(message[i], i)
        out["kept"] = sorted({first[message[native[e.id]]] for e in sent(view.events, result.events, events) if e.id in native})
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


serve(answer)
