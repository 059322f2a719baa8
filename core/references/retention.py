"""Retention (SPEC §4.7): fit one source object into ``max_reference_bytes``, exactly.

The size is kept as a running total (fixed overhead + per-item JSON sizes + commas). The
drop phase walks back from the newest item and JSON-sizes only what it keeps (dropped
items cost one UTF-8 length each); each kept item's size is updated when it is shortened,
and the "longest current text, earliest on ties" item comes from a lazy heap: O(n log n)
at worst.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple

from core.jsoncodec import utf8_len
from core.references.config import SESSION_REFERENCE_BUDGET_EXCEEDED, SessionReferenceError
from core.references.projection import ProjectedMessage
from core.references.tagsafe import tag_safe_json_size, tag_safe_utf8_size

__all__ = [
    "EncodedMessage",
    "RetainedEncoded",
    "RetainedSource",
    "RetentionStats",
    "omitted_marker",
    "retain_encoded",
    "retain_source",
    "retain_source_after",
    "retention_cut",
    "truncate_head_tail",
]

_MARKER_HEAD: Final = "\n[… omitted "
_MARKER_TAIL: Final = " UTF-8 bytes …]"
_MARKER_FIXED_BYTES: Final = utf8_len(_MARKER_HEAD) + utf8_len(_MARKER_TAIL)


def omitted_marker(omitted_bytes: int) -> str:
    """The note that replaces the middle of a shortened text."""
    return f"{_MARKER_HEAD}{omitted_bytes}{_MARKER_TAIL}"


def _is_continuation(byte: int) -> bool:
    return (byte & 0xC0) == 0x80


def truncate_head_tail(text: str, target: int) -> tuple[str, int]:
    """Shorten ``text`` to at most ``target`` UTF-8 bytes, keeping its head and tail.

    Returns ``(new_text, omitted_bytes)``. A text that already fits comes back unchanged.
    The kept size ``r`` is the largest in ``0..target`` for which head + tail + marker
    fits. That fit is monotone in ``r`` (kept bytes never shrink as ``r`` grows, and the
    marker's digit count falls by at most one per extra kept byte), so ``r`` is found by
    binary search. When not even the bare marker fits, the text becomes empty.

    The text is measured and cut as JavaScript's ``TextEncoder`` encodes it: a lone
    surrogate is 3 bytes and comes back as U+FFFD, so the kept text is valid UTF-8.
    """
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= target:
        return text, 0
    return _cut(data, target)


def _cut(data: bytes, target: int) -> tuple[str, int]:
    """``truncate_head_tail`` of the text whose UTF-8 (``surrogatepass``) is ``data``,
    longer than ``target`` bytes."""
    total = len(data)

    def kept(r: int) -> tuple[int, int]:
        head = (r + 1) // 2  # r <= target < total, so head and tail never overlap
        while 0 < head < total and _is_continuation(data[head]):
            head -= 1
        tail_start = total - r // 2
        while tail_start < total and _is_continuation(data[tail_start]):
            tail_start += 1
        return head, tail_start

    def size(r: int) -> int:
        head, tail_start = kept(r)
        kept_bytes = head + total - tail_start
        return kept_bytes + _MARKER_FIXED_BYTES + len(str(total - kept_bytes))

    if size(0) > target:
        return "", total
    lo, hi = 0, target
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if size(mid) <= target:
            lo = mid
        else:
            hi = mid - 1
    head, tail_start = kept(lo)
    omitted = tail_start - head
    new_text = _valid_utf8(data[:head]) + _valid_utf8(data[tail_start:]) + omitted_marker(omitted)
    return new_text, omitted


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _valid_utf8(part: bytes) -> str:
    """Decode one kept part, each lone surrogate becoming U+FFFD (as ``TextEncoder`` does).

    ``surrogatepass`` and U+FFFD both take 3 bytes with the same lead/continuation
    shape, so the cut positions and every count are the same either way; replacing
    per part means a high surrogate ending the head and a low one starting the tail
    can never read as one character.
    """
    text = part.decode("utf-8", "surrogatepass")
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


@dataclass(frozen=True, slots=True)
class RetentionStats:
    """What retention did to one source (SPEC §4.7)."""

    compacted: bool
    original_messages: int
    retained_messages: int
    omitted_messages: int
    omitted_bytes: int

    @property
    def truncated(self) -> bool:
        return self.omitted_messages > 0 or self.omitted_bytes > 0


@dataclass(frozen=True, slots=True)
class RetainedSource:
    """The source object (plain JSON, keys in contract order) and its stats."""

    source: dict[str, Any]
    stats: RetentionStats


def _budget_exceeded(session_id: str, max_bytes: int, why: str) -> SessionReferenceError:
    return SessionReferenceError(
        f"session {session_id!r} does not fit in {max_bytes} bytes: {why}",
        SESSION_REFERENCE_BUDGET_EXCEEDED,
        session_id=session_id,
    )


def _shell(
    session_id: str, label: str, cwd: str | None, captured_through_seq: int | None
) -> dict[str, Any]:
    return {
        "sessionId": session_id,
        "label": label,
        "cwd": cwd,
        "capturedThroughSeq": captured_through_seq,
        "conversation": [],
    }


def _overhead() -> dict[str, int]:
    return {
        role: tag_safe_json_size({"role": role, "text": ""}) - 2 for role in ("user", "assistant")
    }


def retention_cut(
    *,
    session_id: str,
    label: str,
    cwd: str | None,
    captured_through_seq: int | None,
    outline: Sequence[tuple[str, bool, int]],
    max_bytes: int,
) -> int:
    """Where ``retain_source`` may start needing texts, knowing only each message's
    ``(role, checkpoint, UTF-8 bytes of its text)``.

    Every message before the returned index that is not a checkpoint is dropped by
    ``retain_source`` whatever its text: its drop phase sizes an item as its role's
    overhead plus the JSON size of its text, never less than the text's UTF-8 bytes plus
    two quotes, so its walk back from the newest stops at this index or after it (this
    walk is the same one with those lower bounds). ``retain_source_after`` then gives the
    exact result from the checkpoints before the index and the messages from it on.
    """
    overhead = _overhead()
    total = tag_safe_json_size(_shell(session_id, label, cwd, captured_through_seq))
    count = len(outline)
    last = count - 1
    kept = 0
    for i, (role, checkpoint, size) in enumerate(outline):
        if checkpoint or i == last:
            total += overhead[role] + size + 2
            kept += 1
    cursor = last - 1
    while cursor >= 0:
        role, checkpoint, size = outline[cursor]
        if not checkpoint:
            least = overhead[role] + size + 2
            if total + least + kept > max_bytes:
                break
            total += least
            kept += 1
        cursor -= 1
    return max(cursor, 0)


def retain_source_after(
    *,
    session_id: str,
    label: str,
    cwd: str | None,
    captured_through_seq: int | None,
    messages: Sequence[ProjectedMessage],
    skipped_messages: int,
    skipped_bytes: int,
    max_bytes: int,
) -> RetainedSource:
    """``retain_source`` of a conversation of which only the checkpoints before a
    ``retention_cut`` and the messages from it on are given (``messages``); the others,
    ``skipped_messages`` non-checkpoint messages of ``skipped_bytes`` UTF-8 bytes, count
    as omitted. Byte for byte what ``retain_source`` returns for the whole conversation."""
    retained = retain_encoded(
        session_id=session_id,
        label=label,
        cwd=cwd,
        captured_through_seq=captured_through_seq,
        messages=[encode_message(m) for m in messages],
        skipped_messages=skipped_messages,
        skipped_bytes=skipped_bytes,
        max_bytes=max_bytes,
    )
    shell = retained.shell
    shell["conversation"] = [
        {"role": role, "text": data.decode("utf-8", "surrogatepass")}
        for role, data in retained.conversation
    ]
    return RetainedSource(shell, retained.stats)


def retain_source(
    *,
    session_id: str,
    label: str,
    cwd: str | None,
    captured_through_seq: int | None,
    messages: Sequence[ProjectedMessage],
    max_bytes: int,
) -> RetainedSource:
    """Drop, then shorten, until the tag-safe JSON of the source object fits ``max_bytes``.

    Raises ``BUDGET_EXCEEDED`` when it cannot fit (never returns a partial source). The
    steps run on the texts' UTF-8 (``retain_encoded``, what ``prepare`` runs).
    """
    return retain_source_after(
        session_id=session_id,
        label=label,
        cwd=cwd,
        captured_through_seq=captured_through_seq,
        messages=messages,
        skipped_messages=0,
        skipped_bytes=0,
        max_bytes=max_bytes,
    )


class EncodedMessage(NamedTuple):
    """A ``ProjectedMessage`` with its text held as UTF-8 (``surrogatepass``): what
    ``prepare`` keeps while it reads, about half of a ``str`` with any character beyond
    Latin-1 in it."""

    role: Literal["user", "assistant"]
    data: bytes
    checkpoint: bool = False


def encode_message(message: ProjectedMessage) -> EncodedMessage:
    return EncodedMessage(
        message.role, message.text.encode("utf-8", "surrogatepass"), message.checkpoint
    )


@dataclass(frozen=True, slots=True)
class RetainedEncoded:
    """``RetainedSource`` with the texts left in UTF-8: ``shell`` is the source object
    with an empty ``conversation``, whose items are ``conversation``'s ``(role, UTF-8 of
    the text)`` (see ``core.references.prompt.render_reference_prompt_encoded``)."""

    shell: dict[str, Any]
    conversation: list[tuple[str, bytes]]
    stats: RetentionStats


def retain_encoded(
    *,
    session_id: str,
    label: str,
    cwd: str | None,
    captured_through_seq: int | None,
    messages: Sequence[EncodedMessage],
    skipped_messages: int = 0,
    skipped_bytes: int = 0,
    max_bytes: int,
) -> RetainedEncoded:
    """Retention (SPEC §4.7) of the messages with their texts in UTF-8 (``surrogatepass``),
    the kept texts left in UTF-8 so that no text is ever held as a ``str`` beside the
    others (``prepare``'s path; ``retain_source`` and ``retain_source_after`` decode its
    result). ``skipped_*`` as in ``retain_source_after``."""
    shell = _shell(session_id, label, cwd, captured_through_seq)
    count = len(messages)
    overhead = _overhead()
    datas = [m.data for m in messages]
    alive = [True] * count
    omitted_messages = 0
    omitted_bytes = 0

    # 1. Drop the oldest items that are neither a checkpoint nor the newest. Dropping goes
    # oldest first and stops as soon as the rest fits, so what survives is the fixed part
    # (checkpoints and the newest) plus the longest run of newest droppable items that fits
    # with it: found walking back from the newest, sizing only the items that are kept
    # (plus one). A dropped item only needs its UTF-8 length, never its JSON size.
    sizes = [0] * count  # JSON size of each alive item (dropped ones are never read)
    total = tag_safe_json_size(shell)
    kept = 0
    last = count - 1
    for i, message in enumerate(messages):
        if message.checkpoint or i == last:
            sizes[i] = overhead[message.role] + tag_safe_utf8_size(message.data)
            total += sizes[i]
            kept += 1
    cursor = last - 1
    while cursor >= 0:
        message = messages[cursor]
        if not message.checkpoint:
            size = overhead[message.role] + tag_safe_utf8_size(message.data)
            if total + size + kept > max_bytes:  # kept + 1 items need kept commas
                break
            sizes[cursor] = size
            total += size
            kept += 1
        cursor -= 1
    for i in range(cursor + 1):
        if not messages[i].checkpoint:
            alive[i] = False
            omitted_messages += 1
            omitted_bytes += len(datas[i])
    total += max(kept - 1, 0)  # the commas between the kept items

    # 2. Shorten the longest current text (earliest on ties) from its original.
    if total > max_bytes:
        current_bytes = {i: len(datas[i]) for i in range(count) if alive[i]}
        item_omitted = dict.fromkeys(current_bytes, 0)
        heap = [(-b, i) for i, b in current_bytes.items()]
        heapq.heapify(heap)
        while total > max_bytes:
            while heap and -heap[0][0] != current_bytes[heap[0][1]]:
                heapq.heappop(heap)  # stale: that item was shortened since
            if not heap:
                raise _budget_exceeded(session_id, max_bytes, "no message is left to shorten")
            longest, i = -heap[0][0], heap[0][1]
            if longest == 0:
                raise _budget_exceeded(session_id, max_bytes, "every message is already empty")
            target = max(0, longest - (total - max_bytes))
            original = messages[i].data
            if len(original) <= target:
                new_data, omitted = original, 0
            else:
                new_text, omitted = _cut(original, target)
                new_data = new_text.encode("utf-8", "surrogatepass")
            if new_data == datas[i]:
                raise _budget_exceeded(session_id, max_bytes, "shortening changes nothing")
            new_size = overhead[messages[i].role] + tag_safe_utf8_size(new_data)
            total += new_size - sizes[i]
            sizes[i] = new_size
            omitted_bytes += omitted - item_omitted[i]
            item_omitted[i] = omitted
            datas[i] = new_data
            current_bytes[i] = len(new_data)
            heapq.heapreplace(heap, (-current_bytes[i], i))

    conversation: list[tuple[str, bytes]] = [
        (messages[i].role, datas[i]) for i in range(count) if alive[i]
    ]
    stats = RetentionStats(
        compacted=any(m.checkpoint for m in messages),
        original_messages=count + skipped_messages,
        retained_messages=len(conversation),
        omitted_messages=omitted_messages + skipped_messages,
        omitted_bytes=omitted_bytes + skipped_bytes,
    )
    return RetainedEncoded(shell, conversation, stats)
