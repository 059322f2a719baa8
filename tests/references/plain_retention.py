"""The retention algorithm of SPEC §4.7 written out on ``str``, as ``core`` ran it before
its texts were kept in UTF-8 (issue 15): the independent oracle the property tests compare
``core.references.retention`` with (which must give the same bytes)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from core.jsoncodec import utf8_len
from core.references.projection import ProjectedMessage
from core.references.retention import (
    RetainedSource,
    RetentionStats,
    _budget_exceeded,
    _overhead,
    _shell,
    truncate_head_tail,
)
from core.references.tagsafe import tag_safe_json_size


def plain_retain_source(
    *,
    session_id: str,
    label: str,
    cwd: str | None,
    captured_through_seq: int | None,
    messages: Sequence[ProjectedMessage],
    max_bytes: int,
) -> RetainedSource:
    """Drop, then shorten, until the tag-safe JSON of the source object fits ``max_bytes``.

    Raises ``BUDGET_EXCEEDED`` when it cannot fit (never returns a partial source).
    """
    shell = _shell(session_id, label, cwd, captured_through_seq)
    count = len(messages)
    overhead = _overhead()
    texts = [m.text for m in messages]
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
            sizes[i] = overhead[message.role] + tag_safe_json_size(message.text)
            total += sizes[i]
            kept += 1
    cursor = last - 1
    while cursor >= 0:
        message = messages[cursor]
        if not message.checkpoint:
            size = overhead[message.role] + tag_safe_json_size(message.text)
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
            omitted_bytes += utf8_len(texts[i])
    total += max(kept - 1, 0)  # the commas between the kept items

    # 2. Shorten the longest current text (earliest on ties) from its original.
    if total > max_bytes:
        current_bytes = {i: utf8_len(texts[i]) for i in range(count) if alive[i]}
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
            new_text, omitted = truncate_head_tail(messages[i].text, target)
            if new_text == texts[i]:
                raise _budget_exceeded(session_id, max_bytes, "shortening changes nothing")
            new_size = overhead[messages[i].role] + tag_safe_json_size(new_text)
            total += new_size - sizes[i]
            sizes[i] = new_size
            omitted_bytes += omitted - item_omitted[i]
            item_omitted[i] = omitted
            texts[i] = new_text
            current_bytes[i] = utf8_len(new_text)
            heapq.heapreplace(heap, (-current_bytes[i], i))

    conversation = [{"role": messages[i].role, "text": texts[i]} for i in range(count) if alive[i]]
    shell["conversation"] = conversation
    stats = RetentionStats(
        compacted=any(m.checkpoint for m in messages),
        original_messages=count,
        retained_messages=len(conversation),
        omitted_messages=omitted_messages,
        omitted_bytes=omitted_bytes,
    )
    return RetainedSource(shell, stats)


def plain_retain_source_after(
    *,
    messages: Sequence[ProjectedMessage],
    skipped_messages: int,
    skipped_bytes: int,
    **args: Any,
) -> RetainedSource:
    """``plain_retain_source`` with ``skipped_messages`` more messages of ``skipped_bytes``
    counted as omitted (what ``retain_source_after`` means)."""
    retained = plain_retain_source(messages=messages, **args)
    stats = retained.stats
    return RetainedSource(
        retained.source,
        RetentionStats(
            compacted=stats.compacted,
            original_messages=stats.original_messages + skipped_messages,
            retained_messages=stats.retained_messages,
            omitted_messages=stats.omitted_messages + skipped_messages,
            omitted_bytes=stats.omitted_bytes + skipped_bytes,
        ),
    )
