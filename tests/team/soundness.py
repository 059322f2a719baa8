"""The invariant every fault test checks afterwards: nothing stored twice or half.

Every session's seqs run 0..n-1 with no gap; no message is stored twice (message ids are
unique in the log); every reply (a turn's ``assistant/chunk`` events, its
``assistant/message`` and its ``turn/end``) is either whole (``finish: completed``) or
partial and marked (``finish`` ``interrupted`` or ``error``, with ``interrupted: true`` or
an ``error``, and a ``turn/end`` saying the same); its chunks are stored once each, in
order, and the text they hold is the start of the message's text. A turn whose text was
shown (text chunks stored) but that has no message is a half-stored reply.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from core.log import ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TURN_END, Event
from core.store import SessionStore

__all__ = ["assert_log_sound", "assert_store_sound"]


def _message_id(event: Event) -> str | None:
    data: Mapping[str, Any] = event.data
    message = data.get("message") if "message" in data else data
    if isinstance(message, Mapping) and isinstance(message.get("id"), str):
        return str(message["id"])
    return None


def _text(message: Mapping[str, Any]) -> str:
    return "".join(
        str(block.get("text", ""))
        for block in message.get("content", [])
        if isinstance(block, Mapping) and block.get("type") == "text"
    )


def assert_log_sound(events: Sequence[Event], where: str = "the session") -> None:
    """Raise ``AssertionError`` (naming ``where``) unless ``events`` is a sound log."""
    seqs = [e.seq for e in events]
    assert seqs == list(range(len(events))), f"{where}: seqs are not 0..n-1: {seqs}"
    ids = [i for i in map(_message_id, events) if i is not None]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    assert not twice, f"{where}: messages stored twice: {twice}"

    chunks: dict[int, list[Event]] = defaultdict(list)
    messages: dict[int, list[Event]] = defaultdict(list)
    ends: dict[int, list[Event]] = defaultdict(list)
    for event in events:
        turn = event.data.get("turn")
        if event.type == ASSISTANT_CHUNK:
            chunks[turn].append(event)
        elif event.type == ASSISTANT_MESSAGE:
            messages[turn].append(event)
        elif event.type == TURN_END:
            ends[turn].append(event)
    for turn in sorted(set(chunks) | set(messages) | set(ends), key=str):
        at = f"{where}, turn {turn}"
        assert len(messages[turn]) <= 1, f"{at}: {len(messages[turn])} replies"
        assert len(ends[turn]) <= 1, f"{at}: {len(ends[turn])} turn ends"
        indexes = [c.data["chunk"]["index"] for c in chunks[turn]]
        assert indexes == sorted(set(indexes)), f"{at}: chunks twice or out of order: {indexes}"
        shown = "".join(
            c.data["chunk"]["text"]
            for c in chunks[turn]
            if c.data["chunk"].get("type") == "text-delta"
        )
        if not messages[turn]:
            assert not shown, f"{at}: text shown ({shown[:40]!r}…) but no reply stored"
            continue
        data = messages[turn][0].data
        finish = data.get("finish")
        assert ends[turn], f"{at}: a reply without its turn/end"
        end = ends[turn][0]
        assert end.seq > messages[turn][0].seq, f"{at}: turn/end before the reply"
        assert end.data.get("status") == finish, f"{at}: turn/end {end.data} vs finish {finish}"
        if finish == "completed":
            assert "error" not in data and not data.get("interrupted"), f"{at}: {data}"
        else:
            assert finish in ("interrupted", "error"), f"{at}: finish {finish!r}"
            assert data.get("interrupted") or data.get("error"), f"{at}: partial, unmarked"
        if indexes == list(range(len(indexes))):  # every chunk stored: they start the text
            assert _text(data["message"]).startswith(shown), f"{at}: chunks are not its text"


async def assert_store_sound(store: SessionStore) -> None:
    """``assert_log_sound`` for every session ``store`` lists."""
    for header in await store.list_headers():
        assert_log_sound(await store.read_events(header.id), f"session {header.id!r}")
