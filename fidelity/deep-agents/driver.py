"""Fidelity driver for Deep Agents (deepagents 0.7.32 + langchain 1.5.2 + langchain-core 1.8.4).

Per case: rebuild the LangChain messages the exporter wrote (`messages_from_dict`), build the
summarization middleware exactly as `create_deep_agent` does (`create_summarization_middleware`
with a chat model whose profile has `max_input_tokens` = the case's window and `max_tokens` = its
output cap), and run its own `wrap_model_call` once. Only the model is mocked: the chat model
answers every call (the summary call included) with a fixed text, and the handler standing for
the agent's model call returns a fixed reply.

Answer: `compact` when the summarization middleware's `wrap_model_call` did more than pass the
(argument-truncated) request through: a summarization event, a clipped tool tail, or its own
"still over the input budget" error. The filesystem middleware's evictions before it are
reported apart: `rewritten` names the state messages it replaced (tool results over the limit,
through `_intercept_large_tool_result` as `wrap_tool_call` runs it when the tool returns) or
shows the model as a preview (the newest human message over the limit, through
`_evict_and_truncate_messages`, which tags it in state), and `rewritten_text` the text each
then holds (`_extract_text_from_message`, as the middleware measures it). `first_kept` is the new event's `cutoff_index` (a
raw-state index); `tokens_before` is the middleware's `_count_tokens` over the system prompt and
the effective messages (previous summary + kept tail), as it counts them first. A previous
summary arrives as the session's `event`: the private `_summarization_event` state.
"""

import json
import os
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from protocol import serve  # noqa: E402  (fidelity/protocol.py)

from deepagents.backends.filesystem import FilesystemBackend
from deepagents.middleware._message_eviction import _extract_text_from_message
from deepagents.middleware.filesystem import TOOLS_EXCLUDED_FROM_EVICTION, FilesystemMiddleware
from deepagents.middleware.summarization import (
    SUMMARIZATION_EVENT_KEY,
    SUMMARIZATION_SESSION_ID_KEY,
    create_summarization_middleware,
)
from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage, messages_from_dict
from langchain_core.outputs import ChatGeneration, ChatResult

warnings.simplefilter("ignore")

# Same text as crates/fidelity/src/ours.rs FIXED_SUMMARY.
FIXED_SUMMARY = "## Goal\nContinue the task.\n\n## Progress\nWork is under way."


class FixedChatModel(BaseChatModel):
    """The mocked model: fixed answers, the case's provider, profile and output cap."""

    llm_type: str = "fixed-chat"
    provider: str = "openai"
    max_tokens: int | None = None

    @property
    def _llm_type(self) -> str:
        return self.llm_type

    def _get_ls_params(self, stop=None, **kwargs):
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = self.provider
        return params

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=AIMessage(FIXED_SUMMARY))])


def answer(case, backend):
    settings = case["settings"]
    session = case["session"]
    model = FixedChatModel(
        # `_get_approximate_token_counter` keys its 3.3 chars/token on this prefix.
        llm_type="anthropic-chat" if settings["anthropic"] else "fixed-chat",
        provider=settings["provider"],
        max_tokens=case["model"]["max_output_tokens"],
        profile={"max_input_tokens": case["model"]["context_window"]},
    )
    middleware = create_summarization_middleware(model, backend)
    system = session["system_message"]
    system = messages_from_dict([system])[0] if system else None
    messages = messages_from_dict(session["messages"])
    # The filesystem middleware acts first: oversized tool results were evicted when the tool
    # returned (`wrap_tool_call`, skipped for the excluded tools), and an oversized newest human
    # message is evicted by its `wrap_model_call`, which wraps the summarization middleware.
    filesystem = FilesystemMiddleware(backend=backend)
    rewritten = {}
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage) and message.name not in TOOLS_EXCLUDED_FROM_EVICTION:
            messages[i] = filesystem._intercept_large_tool_result(message)
            if messages[i] is not message:
                rewritten[i] = messages[i]
    state = {"messages": messages}
    if session["event"] is not None:
        event = dict(session["event"])
        event["summary_message"] = messages_from_dict([event["summary_message"]])[0]
        state[SUMMARIZATION_SESSION_ID_KEY] = event.pop("session_id")
        state[SUMMARIZATION_EVENT_KEY] = event
    request = ModelRequest(model=model, messages=messages, system_message=system, tools=[], state=state)
    human = filesystem._evict_and_truncate_messages(request)
    if human is not None:
        # A message it tagged (a new eviction) or showed as a preview (an earlier one).
        for i, (before, after) in enumerate(zip(request.messages, human[0], strict=True)):
            if after is not before:
                rewritten[i] = after
        request = request.override(messages=human[0])
    tokens_before = middleware._count_tokens(middleware._get_effective_messages(request), system, [])

    def handler(req):
        return ModelResponse(result=[AIMessage("ok")])

    out = {
        "compact": False,
        "first_kept": None,
        "kept": None,
        "split_turn": None,
        "tokens_before": tokens_before,
        "rewritten": sorted(rewritten),
        "rewritten_text": {str(i): _extract_text_from_message(m) for i, m in rewritten.items()},
    }
    try:
        response = middleware.wrap_model_call(request, handler)
    except ContextOverflowError:
        # Over the input budget with nothing left to cut: it acted, and failed the request.
        out["compact"] = True
        return out
    if isinstance(response, ExtendedModelResponse):
        out["compact"] = True
        update = response.command.update if response.command else {}
        event = update.get(SUMMARIZATION_EVENT_KEY)
        if event is not None:
            out["first_kept"] = event["cutoff_index"]
    return out


def main():
    with tempfile.TemporaryDirectory() as root:
        backend = FilesystemBackend(root_dir=root, virtual_mode=True)

        def answer_dumped(case):
            if os.environ.get("DA_DUMP"):  # keep the input, to replay cases by hand
                with open(os.environ["DA_DUMP"], "a") as dump:
                    dump.write(json.dumps(case) + "\n")
            return answer(case, backend)

        serve(answer_dumped)


if __name__ == "__main__":
    main()
