"""Reference cards: what a stored session-reference snapshot says, for every host to show.

A card is built only from the snapshot message stored in the target log (its source
metadata and the prompt JSON); the referenced sessions are never read again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.log import message_text
from core.references.prompt import is_session_reference_source, parse_reference_prompt

__all__ = [
    "CardSource",
    "ReferenceCard",
    "card_summary",
    "card_title",
    "is_session_reference_message",
    "openable_sources",
    "parse_reference_card",
]


@dataclass(frozen=True, slots=True)
class CardSource:
    label: str
    session_id: str
    cwd: str | None
    captured_through_seq: int | None
    original_messages: int
    retained_messages: int
    omitted_messages: int
    omitted_bytes: int
    compacted: bool
    truncated: bool
    conversation: tuple[tuple[str, str], ...]  # (role, text) exactly as the model received it


@dataclass(frozen=True, slots=True)
class ReferenceCard:
    sources: tuple[CardSource, ...]
    prompt: str


def is_session_reference_message(message: Mapping[str, Any]) -> bool:
    return is_session_reference_source(message.get("source"))


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _str(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


def parse_reference_card(message: Mapping[str, Any]) -> ReferenceCard | None:
    """The card of a stored snapshot message; ``None`` if it is not one.

    Tolerates damaged or foreign data (an imported log): missing pieces read as empty.
    """
    if not is_session_reference_message(message):
        return None
    prompt = message_text(message)
    objects: Sequence[Any] = parse_reference_prompt(prompt) or []
    metadata = message["source"].get("references")
    metas: Sequence[Any] = metadata if isinstance(metadata, list) else []
    sources: list[CardSource] = []
    for i in range(max(len(metas), len(objects))):
        meta = metas[i] if i < len(metas) and isinstance(metas[i], Mapping) else {}
        obj = objects[i] if i < len(objects) and isinstance(objects[i], Mapping) else {}
        conversation = obj.get("conversation")
        items = conversation if isinstance(conversation, list) else []
        seq = meta.get("capturedThroughSeq", obj.get("capturedThroughSeq"))
        sources.append(
            CardSource(
                label=_str(meta.get("label"), _str(obj.get("label"))),
                session_id=_str(meta.get("sessionId"), _str(obj.get("sessionId"))),
                cwd=obj.get("cwd") if isinstance(obj.get("cwd"), str) else None,
                captured_through_seq=_int(seq) if isinstance(seq, int) else None,
                original_messages=_int(meta.get("originalMessages"), len(items)),
                retained_messages=_int(meta.get("retainedMessages"), len(items)),
                omitted_messages=_int(meta.get("omittedMessages")),
                omitted_bytes=_int(meta.get("omittedBytes")),
                compacted=meta.get("compacted") is True,
                truncated=meta.get("truncated") is True,
                conversation=tuple(
                    (_str(item.get("role")), _str(item.get("text")))
                    for item in items
                    if isinstance(item, Mapping)
                ),
            )
        )
    return ReferenceCard(tuple(sources), prompt)


def openable_sources(card: ReferenceCard) -> tuple[CardSource, ...]:
    """The sources a host may offer to open: those that name a session (a damaged log may
    hold none), each id once (the first of its sources), in the card's order."""
    seen: set[str] = set()
    out: list[CardSource] = []
    for source in card.sources:
        if source.session_id and source.session_id not in seen:
            seen.add(source.session_id)
            out.append(source)
    return tuple(out)


def card_title(card: ReferenceCard) -> str:
    """``Referenced sessions · label1, label2`` (labels are untrusted: render as plain text)."""
    return "Referenced sessions · " + ", ".join(s.label for s in card.sources)


def card_summary(card: ReferenceCard) -> str:
    """One line: messages kept / original and the truncated/compacted flags when true."""
    kept = sum(s.retained_messages for s in card.sources)
    original = sum(s.original_messages for s in card.sources)
    parts = [f"{kept}/{original} messages kept"]
    if any(s.truncated for s in card.sources):
        parts.append("truncated")
    if any(s.compacted for s in card.sources):
        parts.append("compacted")
    return " · ".join(parts)
