"""The obvious quadratic retention of SPEC §4.7, shared by the tests and the benchmark.

It re-serialises the whole source object after every drop/shorten step: slow, but a
literal reading of the spec, so our linear implementation is compared against it byte
for byte. The head/tail truncation is passed in (the tests use a code-point-literal
one, the benchmark a byte-level one that finishes on multi-megabyte texts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from core.references import (
    SESSION_REFERENCE_BUDGET_EXCEEDED,
    SessionReferenceError,
    stringify_tag_safe_json,
)

__all__ = ["NaiveItem", "naive_retain", "nbytes"]

Truncate = Callable[[str, int], tuple[str, int]]


@dataclass
class NaiveItem:
    role: str
    original: str
    text: str
    checkpoint: bool
    omitted: int = 0


def nbytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def naive_retain(
    items: list[NaiveItem], max_bytes: int, header: Mapping[str, Any], truncate: Truncate
) -> tuple[dict[str, Any], tuple[int, int, int, int]]:
    """The retained source object (``header`` holds sessionId, label, cwd and
    capturedThroughSeq, in that order) and (original, retained, omitted messages,
    omitted bytes). ``items`` is consumed."""
    original = len(items)

    def source() -> dict[str, Any]:
        return {**header, "conversation": [{"role": i.role, "text": i.text} for i in items]}

    def size() -> int:
        return nbytes(stringify_tag_safe_json(source()))

    dropped = dropped_bytes = 0
    while size() > max_bytes:
        candidates = [k for k, i in enumerate(items) if not i.checkpoint and k != len(items) - 1]
        if not candidates:
            break
        gone = items.pop(candidates[0])
        dropped += 1
        dropped_bytes += nbytes(gone.original)
    while (current_size := size()) > max_bytes:
        if not items:
            raise SessionReferenceError("no item", SESSION_REFERENCE_BUDGET_EXCEEDED)
        longest = max(range(len(items)), key=lambda k: (nbytes(items[k].text), -k))
        item = items[longest]
        current = nbytes(item.text)
        if current == 0:
            raise SessionReferenceError("empty", SESSION_REFERENCE_BUDGET_EXCEEDED)
        new_text, omitted = truncate(item.original, max(0, current - (current_size - max_bytes)))
        if new_text == item.text:
            raise SessionReferenceError("no change", SESSION_REFERENCE_BUDGET_EXCEEDED)
        item.text, item.omitted = new_text, omitted
    omitted_bytes = dropped_bytes + sum(i.omitted for i in items)
    return source(), (original, len(items), dropped, omitted_bytes)
