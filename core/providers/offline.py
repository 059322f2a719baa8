"""The offline provider: no network, no key, deterministic replies that show what arrived.

It reads the conversation exactly as a model would (plain text messages) and answers with
the request and, for every referenced-sessions snapshot in front of it, each source's label
and how many messages reached it — so a user can see the feature work without a model.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from core.providers.base import Finish, ProviderMessage, StreamEvent, TextDelta, Usage
from core.references.prompt import parse_reference_prompt

__all__ = ["OfflineProvider", "describe_snapshot", "offline_reply", "offline_summary"]

_OMITTED = re.compile(r"\[… omitted \d+ UTF-8 bytes …\]\Z")
_WORD = re.compile(r"\S+\s*|\s+")


def describe_snapshot(source: Mapping[str, Any]) -> str:
    """One line about one referenced session, from what the model can see of it."""
    label = source.get("label")
    conversation = source.get("conversation")
    items = conversation if isinstance(conversation, list) else []
    texts = [str(item.get("text", "")) for item in items if isinstance(item, Mapping)]
    flags = []
    if any(t.startswith("<compacted-summary>") for t in texts):
        flags.append("compacted")
    if any(_OMITTED.search(t) for t in texts):
        flags.append("truncated")
    count = len(texts)
    line = f"- {label!s}: {count} message{'s' if count != 1 else ''} received"
    return line + (f" ({', '.join(flags)})" if flags else "")


def offline_reply(messages: Sequence[ProviderMessage]) -> str:
    """The deterministic reply to the last user request in ``messages``."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        return "Offline model: there is no request to answer."
    last = users[-1]
    request = messages[last].text
    sources: list[Mapping[str, Any]] = []
    if last > 0 and messages[last - 1].role == "user":
        parsed = parse_reference_prompt(messages[last - 1].text) or []
        sources = [s for s in parsed if isinstance(s, Mapping)]
    lines = [
        "Offline model (no network): here is what I received.",
        "",
        f"Request: {request}" if "\n" not in request else "Request:\n" + request,
    ]
    if sources:
        lines += ["", f"Referenced sessions ({len(sources)}):"]
        lines += [describe_snapshot(s) for s in sources]
    earlier = sum(1 for m in messages[:last] if m.role != "system") - (1 if sources else 0)
    lines += ["", f"Earlier messages in this conversation: {earlier}."]
    return "\n".join(lines)


def offline_summary(messages: Sequence[ProviderMessage]) -> str:
    """A deterministic compaction summary: one bounded line per message."""
    lines = [f"Summary of {sum(1 for m in messages if m.role != 'system')} earlier messages:"]
    for message in messages:
        if message.role == "system":
            continue
        first = message.text.strip().splitlines()[0] if message.text.strip() else ""
        if len(first) > 120:
            first = first[:119] + "…"
        lines.append(f"- {message.role}: {first}")
    return "\n".join(lines)


class OfflineProvider:
    """A ``ModelProvider`` that streams ``offline_reply`` word by word."""

    name = "offline"

    def __init__(self, model: str = "echo-1", *, chunk_delay: float = 0.0) -> None:
        self.model = model
        self.chunk_delay = chunk_delay

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        reply = offline_reply(messages)
        words = _WORD.findall(reply)
        for word in words:
            if cancel is not None and cancel.is_set():
                return
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            else:
                await asyncio.sleep(0)
            yield TextDelta(word)
        yield Usage(
            {"prompt_chars": sum(len(m.text) for m in messages), "completion_chars": len(reply)}
        )
        yield Finish("stop")

    async def summarize(self, messages: Sequence[ProviderMessage]) -> str:
        await asyncio.sleep(0)
        return offline_summary(messages)

    async def aclose(self) -> None:
        return None
