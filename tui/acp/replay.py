"""A stored session as ACP ``session/update``s, for ``session/load``.

Direct user messages replay as user message chunks (their stored, readable ``@label`` text),
replies as agent message chunks (reasoning as thought chunks), and each injected snapshot as
one compact reference card — the labels and what was kept, never the snapshot JSON, which
stays in the log for the model only. Tool results, plugin context and unknown events are not
replayed. Every chunk carries the stored message id, so a client can tell messages apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from acp import text_block
from acp.schema import AgentMessageChunk, AgentThoughtChunk, UserMessageChunk

from core.cards import ReferenceCard
from core.log import Event, message_text
from tui.acp.text import client_label, client_text
from tui.shared.items import TranscriptItem, classify_surface

__all__ = ["ReplayUpdate", "card_text", "replay_updates"]

ReplayUpdate = UserMessageChunk | AgentMessageChunk | AgentThoughtChunk

_COMPACT_OPEN = "<compacted-summary>"
_COMPACT_CLOSE = "</compacted-summary>"


def card_text(card: ReferenceCard) -> str:
    """One line: ``Referenced sessions · a, b — 3/5 messages kept · 2 omitted … · truncated``."""
    labels = ", ".join(client_label(source.label) for source in card.sources)
    kept = sum(s.retained_messages for s in card.sources)
    original = sum(s.original_messages for s in card.sources)
    omitted = sum(s.omitted_messages for s in card.sources)
    omitted_bytes = sum(s.omitted_bytes for s in card.sources)
    parts = [f"{kept}/{original} messages kept"]
    if omitted or omitted_bytes:
        parts.append(
            f"{omitted} message{'s' if omitted != 1 else ''} omitted ({omitted_bytes:,} bytes)"
        )
    if any(s.truncated for s in card.sources):
        parts.append("truncated")
    if any(s.compacted for s in card.sources):
        parts.append("compacted")
    return f"Referenced sessions · {labels} — {' · '.join(parts)}"


def _message_id(message: Mapping[str, Any]) -> str | None:
    value = message.get("id")
    return client_text(value) if isinstance(value, str) and value else None


def _user(text: str, message_id: str | None) -> UserMessageChunk:
    return UserMessageChunk(
        session_update="user_message_chunk",
        content=text_block(client_text(text)),
        message_id=message_id,
    )


def _agent(text: str, message_id: str | None) -> AgentMessageChunk:
    return AgentMessageChunk(
        session_update="agent_message_chunk",
        content=text_block(client_text(text)),
        message_id=message_id,
    )


def _thought(text: str, message_id: str | None) -> AgentThoughtChunk:
    return AgentThoughtChunk(
        session_update="agent_thought_chunk",
        content=text_block(client_text(text)),
        message_id=message_id,
    )


def _assistant(data: Mapping[str, Any]) -> list[ReplayUpdate]:
    message = data.get("message")
    if not isinstance(message, Mapping):
        return []
    message_id = _message_id(message)
    out: list[ReplayUpdate] = []
    content = message.get("content")
    for block in content if isinstance(content, (list, tuple)) else ():
        if (
            isinstance(block, Mapping)
            and block.get("type") == "reasoning"
            and isinstance(block.get("text"), str)
            and block["text"]
        ):
            out.append(_thought(block["text"], message_id))
    text = message_text(message)
    notes: list[str] = []
    if data.get("finish") == "interrupted" or data.get("interrupted") is True:
        notes.append("[interrupted: the reply was stopped]")
    error = data.get("error")
    if isinstance(error, Mapping):
        notes.append(f"[error: {client_label(str(error.get('message', '')))}]")
    if notes:
        text = "\n\n".join([text, *notes]) if text else "\n\n".join(notes)
    if text:
        out.append(_agent(text, message_id))
    return out


def _item_updates(item: TranscriptItem) -> list[ReplayUpdate]:
    data = item.event.data
    if item.kind == "card" and item.card is not None:
        # Ends with a blank line: a client that ignores message ids joins the card and
        # the request that follows it into one readable user message.
        return [_user(card_text(item.card) + "\n\n", _message_id(data))]
    if item.kind == "user":
        text = message_text(data)
        return [_user(text, _message_id(data))] if text else []
    if item.kind == "steering":
        message = data.get("message")
        if isinstance(message, Mapping) and (text := message_text(message)):
            return [_user(text, _message_id(message))]
        return []
    if item.kind == "assistant":
        return _assistant(data)
    if item.kind == "checkpoint":
        summary = message_text(data).strip()
        summary = summary.removeprefix(_COMPACT_OPEN).removesuffix(_COMPACT_CLOSE).strip()
        return [_agent("Summary of the earlier conversation:\n\n" + summary, _message_id(data))]
    return []  # tool results, plugin context, unknown events: not part of the conversation


def replay_updates(surface: Sequence[Event]) -> list[ReplayUpdate]:
    """The updates that show ``surface`` (a folded current surface) in a client, in order."""
    out: list[ReplayUpdate] = []
    for item in classify_surface(surface):
        out.extend(_item_updates(item))
    return out
