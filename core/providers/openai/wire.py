"""The chat-completions wire format: the endpoint's URL, the text as it may be sent, and
the deltas read back from a chunk."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import httpx

from core.providers.base import ReasoningDelta, StreamEvent, TextDelta
from core.surrogates import merge_surrogate_pairs

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def chat_completions_url(base_url: str) -> str:
    """``{base_url}/chat/completions`` with the endpoint in the path, before any query;
    a base that already names the endpoint is kept."""
    url = httpx.URL(base_url.strip())
    path = url.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path += "/chat/completions"
    return str(url.copy_with(path=path))


def wire_text(text: str) -> str:
    """``text`` as it may go over the wire: valid UTF-8, a surrogate pair as its character
    (SPEC §4.1: the model receives 🚀, not two U+FFFD), each lone surrogate as U+FFFD.

    Only what is sent changes; the session log keeps the text exactly.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", merge_surrogate_pairs(text))
    return text


def _first_choice(chunk: Mapping[str, Any]) -> Mapping[str, Any] | None:
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
            return choice
    return None


def _deltas(delta: Mapping[str, Any]) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    reasoning = delta.get("reasoning_content")
    if not isinstance(reasoning, str) or not reasoning:
        reasoning = delta.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        events.append(ReasoningDelta(reasoning))
    content = delta.get("content")
    if isinstance(content, str) and content:
        events.append(TextDelta(content))
    return events
