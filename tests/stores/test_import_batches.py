"""``import_session`` given ``EventBatches`` (issue 31 §6): every store takes the log a
batch at a time inside one transaction, stores the same events as one whole sequence
would, and stores nothing when any batch, or the reading of one, fails."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from core.batches import EventBatches
from core.errors import InvalidEventError, SessionNotFoundError
from core.log import NewEvent, Replace, SessionHeader
from core.logfile import LogImportError
from stores import SessionStore

T0 = 1_700_000_000_000


def notes(start: int, count: int) -> list[NewEvent]:
    return [
        NewEvent("x/note", {"n": i, "text": "é" * (i % 7)}, time=T0 + i)
        for i in range(start, start + count)
    ]


def batches(*parts: Sequence[NewEvent]) -> EventBatches:
    return EventBatches(parts)


async def test_batches_store_what_one_sequence_stores(store: SessionStore) -> None:
    whole = [
        *notes(0, 700),
        NewEvent("assistant/message", {"i": 0}, "append", None, T0 + 700),
        *notes(701, 50),
        NewEvent("assistant/message", {}, Replace(700, 700), [700], T0 + 751),
    ]
    parts = [whole[:250], whole[250:251], whole[251:701], whole[701:]]
    await store.import_session(SessionHeader("whole", T0), whole)
    header = SessionHeader("parts", T0, "/w")
    assert await store.import_session(header, batches(*parts)) == header
    got = await store.read_events("parts")
    assert got == await store.read_events("whole")
    assert [e.seq for e in got] == list(range(len(whole)))
    assert await store.import_session(SessionHeader("none", T0), batches()) == SessionHeader(
        "none", T0
    )
    assert await store.read_events("none") == []


async def test_a_failed_batch_stores_nothing(store: SessionStore) -> None:
    bad_op = NewEvent("assistant/message", {}, Replace(0, 5000), [0], T0)
    with pytest.raises(InvalidEventError):
        await store.import_session(
            SessionHeader("bad", T0), batches(notes(0, 300), notes(300, 300), [bad_op])
        )

    def failing() -> Iterator[Sequence[NewEvent]]:
        yield notes(0, 500)
        yield notes(500, 500)
        raise LogImportError("invalid JSON (boom)", 1003)

    with pytest.raises(LogImportError, match="line 1003"):
        await store.import_session(SessionHeader("torn", T0), EventBatches(failing()))
    for sid in ("bad", "torn"):
        with pytest.raises(SessionNotFoundError):
            await store.read_header(sid)
    assert await store.list_headers() == []
