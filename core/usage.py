"""The context and cost meter: tokens of the next request, share of the context window,
tokens and cost of the session's replies so far.

The provider's reported usage is used where it is known (an OpenAI-compatible reply's
``prompt_tokens``/``completion_tokens``); everything else is an estimate (about four UTF-8
bytes a token) and marked as one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.engine import ChatSession, provider_messages
from core.jsoncodec import utf8_len
from core.log import ASSISTANT_MESSAGE, Event, message_text
from core.paging import event_pages, read_last_seq
from core.profiles import Profile
from core.providers.base import ProviderMessage
from core.store import SessionStore

__all__ = [
    "BYTES_PER_TOKEN",
    "MESSAGE_OVERHEAD_TOKENS",
    "DraftUsage",
    "ReplyTotals",
    "SessionUsage",
    "add_reply",
    "estimate_tokens",
    "format_tokens",
    "measure",
    "measure_draft",
    "messages_tokens",
    "next_request",
    "reply_tokens",
    "session_usage",
    "sum_replies",
]

BYTES_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens a chat format adds around each message (role and separators), roughly."""


def estimate_tokens(text: str) -> int:
    """About how many tokens ``text`` is: its UTF-8 bytes over four, rounded up."""
    return math.ceil(utf8_len(text) / BYTES_PER_TOKEN)


def messages_tokens(messages: Sequence[ProviderMessage]) -> int:
    """An estimate of a request made of ``messages``."""
    return sum(estimate_tokens(m.text) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def reply_tokens(data: Mapping[str, Any]) -> tuple[int, int, bool] | None:
    """``(input, output, exact)`` of one ``assistant/message``'s ``usage``: the provider's
    token counts when it reported them, else an estimate from the characters the offline
    model reports; ``None`` when the reply has no usage."""
    usage = data.get("usage")
    if not isinstance(usage, Mapping):
        return None
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if prompt is not None and completion is not None:
        return prompt, completion, True
    chars_in, chars_out = _count(usage.get("prompt_chars")), _count(usage.get("completion_chars"))
    if chars_in is not None and chars_out is not None:
        return (
            math.ceil(chars_in / BYTES_PER_TOKEN),
            math.ceil(chars_out / BYTES_PER_TOKEN),
            False,
        )
    return None


@dataclass
class ReplyTotals:
    """Tokens (and cost, per each reply's profile) of a session's replies."""

    input_tokens: int = 0
    output_tokens: int = 0
    replies: int = 0
    exact: bool = True
    cost: float = 0.0
    priced: bool = False


def add_reply(
    totals: ReplyTotals,
    data: Mapping[str, Any],
    profiles: Mapping[str, Profile],
    current: Profile,
) -> None:
    """Count one ``assistant/message`` (priced at the profile that answered it when that
    one is still configured with prices, else at ``current``'s)."""
    counted = reply_tokens(data)
    if counted is None:
        return
    tokens_in, tokens_out, exact = counted
    totals.input_tokens += tokens_in
    totals.output_tokens += tokens_out
    totals.replies += 1
    totals.exact = totals.exact and exact
    name = data.get("profile")
    profile = profiles.get(name) if isinstance(name, str) else None
    if profile is None or not profile.has_prices:
        profile = current
    cost = profile.cost(tokens_in, tokens_out)
    if cost is not None:
        totals.cost += cost
        totals.priced = True


async def sum_replies(
    store: SessionStore,
    session_id: str,
    profiles: Mapping[str, Profile],
    current: Profile,
    through: int | None = None,
) -> tuple[ReplyTotals, int | None]:
    """Every reply of the session's log (retried and compacted ones too: they were paid
    for), read in bounded pages; and the last seq read."""
    if through is None:
        _header, through = await read_last_seq(store, session_id)
    totals = ReplyTotals()
    async for page in event_pages(store, session_id, through):
        for event in page:
            if event.type == ASSISTANT_MESSAGE:
                add_reply(totals, event.data, profiles, current)
    return totals, through


def next_request(surface: Sequence[Event], messages: Sequence[ProviderMessage]) -> tuple[int, bool]:
    """Tokens of the next request made of ``messages`` (the system prompt and
    ``surface``): the last reply's reported prompt plus its completion when it ends the
    surface and its provider counted them (``exact``), else an estimate."""
    if surface and surface[-1].type == ASSISTANT_MESSAGE:
        counted = reply_tokens(surface[-1].data)
        if counted is not None and counted[2]:
            return counted[0] + counted[1], True
    return messages_tokens(messages), False


@dataclass(frozen=True, slots=True)
class SessionUsage:
    """What ``dsh usage`` prints and the status line shows."""

    profile: str
    input_tokens: int
    output_tokens: int
    cost: float | None
    next_request_tokens: int
    context_window: int
    next_request_exact: bool
    context_window_assumed: bool
    replies: int
    tokens_exact: bool = True
    """Whether ``input_tokens`` and ``output_tokens`` are all the provider's counts (the
    offline model's are estimates)."""

    @property
    def share(self) -> float:
        """The next request's share of the context window (0.0–…)."""
        return self.next_request_tokens / self.context_window if self.context_window else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": None if self.cost is None else round(self.cost, 6),
            "next_request_tokens": self.next_request_tokens,
            "context_window": self.context_window,
            "next_request_exact": self.next_request_exact,
            "replies": self.replies,
        }


def session_usage(
    profile: Profile,
    totals: ReplyTotals,
    next_tokens: int,
    next_exact: bool,
) -> SessionUsage:
    return SessionUsage(
        profile=profile.name,
        input_tokens=totals.input_tokens,
        output_tokens=totals.output_tokens,
        cost=totals.cost if profile.has_prices or totals.priced else None,
        next_request_tokens=next_tokens,
        context_window=profile.window,
        next_request_exact=next_exact,
        context_window_assumed=profile.context_window is None,
        replies=totals.replies,
        tokens_exact=totals.exact,
    )


@dataclass(frozen=True, slots=True)
class DraftUsage:
    """What a draft's mentions would add before it is sent."""

    references: int
    snapshot_bytes: int
    tokens: int


def format_tokens(count: int) -> str:
    """``812``, ``4.1k``, ``41k``, ``1.2M``, ``12M``: a token count as the meter shows it."""
    if count < 1000:
        return str(count)
    if count < 9_950:
        return f"{count / 1000:.1f}k".replace(".0k", "k")
    if count < 999_500:
        return f"{round(count / 1000)}k"
    if count < 9_950_000:
        return f"{count / 1_000_000:.1f}M".replace(".0M", "M")
    return f"{round(count / 1_000_000)}M"


async def measure(chat: ChatSession, profiles: Mapping[str, Profile]) -> SessionUsage:
    """The meter of ``chat``'s session on its profile (``profiles``: every configured one,
    to price each reply at the profile that answered it)."""
    profile = chat.profile or Profile("offline", builtin=True)
    snapshot = await chat.query.read_surface(chat.session_id)
    messages = provider_messages(snapshot.events, system=chat.system_prompt)
    next_tokens, exact = next_request(snapshot.events, messages)
    totals, _through = await sum_replies(
        chat.store, chat.session_id, profiles, profile, snapshot.captured_through_seq
    )
    return session_usage(profile, totals, next_tokens, exact)


async def measure_draft(chat: ChatSession, draft: str) -> DraftUsage:
    """What sending ``draft`` adds to the next request: its references (count, snapshot
    bytes) and the tokens of the snapshot and message. Raises ``SessionReferenceError``
    as a send would (a reference too big, unreadable, …)."""
    prepared = await chat.prepare_draft(draft)
    pending = provider_messages([e.data for e in prepared.batch], system=None)
    snapshot_bytes = 0
    if prepared.snapshot is not None:
        snapshot_bytes = utf8_len(message_text(prepared.snapshot))
    return DraftUsage(len(prepared.references), snapshot_bytes, messages_tokens(pending))
