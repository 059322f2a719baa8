"""The SessionStore contract (SPEC §2, §3), run against every store: sessions, immutability
of what is read, the store's lifecycle, imports (appends: ``test_store_appends``; reads
and strings: ``test_store_reads``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from typing import Any

import pytest

from core.errors import InvalidEventError, SessionExistsError, SessionNotFoundError, StoreError
from core.log import NewEvent, Replace, SessionHeader, now_ms
from core.timestamps import MAX_EPOCH_MS
from stores import MemorySessionStore, SessionStore, SqliteSessionStore
from tests.stores.store_behaviour_helpers import ASSISTANT, CHUNK, MSG, TITLE, add, seqs

# --------------------------------------------------------------------------- sessions


def test_every_store_satisfies_the_protocol() -> None:
    from stores.postgres import PostgresSessionStore

    assert isinstance(MemorySessionStore(), SessionStore)
    assert issubclass(SqliteSessionStore, SessionStore)
    assert issubclass(PostgresSessionStore, SessionStore)


async def test_create_session_defaults(store: SessionStore) -> None:
    before = now_ms()
    header = await store.create_session()
    after = now_ms()
    assert str(uuid.UUID(header.id)) == header.id
    assert uuid.UUID(header.id).version == 4
    assert before <= header.created_at <= after
    assert header.cwd is None
    assert await store.read_header(header.id) == header
    assert await store.read_events(header.id) == []


async def test_create_session_explicit(store: SessionStore) -> None:
    header = await store.create_session("s1", cwd="/tmp/x", created_at=5)
    assert (header.id, header.cwd, header.created_at) == ("s1", "/tmp/x", 5)
    assert await store.list_headers() == [header]


async def test_duplicate_session_id_rejected(store: SessionStore) -> None:
    first = await store.create_session("dup", created_at=1)
    with pytest.raises(SessionExistsError) as info:
        await store.create_session("dup", created_at=2, cwd="/other")
    assert info.value.session_id == "dup"
    assert await store.list_headers() == [first]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"session_id": 1},
        {"session_id": b"bytes"},
        {"cwd": b"/bytes"},
        {"cwd": 3},
        {"created_at": True},
        {"created_at": 1.5},
        {"created_at": "1"},
        {"created_at": 2**63},
        {"created_at": -(2**63) - 1},
        {"created_at": 2**63 - 1},  # pinned on top of every list forever
        {"created_at": -1},
        {"created_at": MAX_EPOCH_MS + 1},
    ],
)
async def test_create_session_validates_types(store: SessionStore, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidEventError):
        await store.create_session(**kwargs)
    assert await store.list_headers() == []


async def test_created_at_accepts_1970_to_year_9999(store: SessionStore) -> None:
    # issue 31: a clock that ran ahead loses nothing (the time is shown as its date)
    low = await store.create_session("low", created_at=0)
    ahead = await store.create_session("ahead", created_at=now_ms() + 400 * 86_400_000)
    high = await store.create_session("high", created_at=MAX_EPOCH_MS)
    assert await store.list_headers() == [high, ahead, low]
    later = await store.append("ahead", "x", {}, time=now_ms() + 3 * 86_400_000)
    last = await store.append_batch("low", [NewEvent("x", {}, time=MAX_EPOCH_MS)])
    assert (later.seq, last[0].time) == (0, MAX_EPOCH_MS)


async def test_list_order_newest_first_ties_by_code_point(store: SessionStore) -> None:
    # Code-point order: "\ud7ff" < "\ude00\ud83d" (two lone surrogates) < "\ue000" < "\uffff"
    # < "😀".
    tied = ["\U0001f600", "\ude00\ud83d", "b", "\uffff", "a", "\ue000", "\ud7ff", "", "\x00"]
    for sid in tied:
        await store.create_session(sid, created_at=100)
    await store.create_session("new", created_at=200)
    await store.create_session("old", created_at=0)
    ids = [h.id for h in await store.list_headers()]
    assert ids == ["new", *sorted(tied), "old"]
    assert sorted(tied)[-4:] == ["\ude00\ud83d", "\ue000", "\uffff", "\U0001f600"]


async def test_delete_session(store: SessionStore) -> None:
    a = await store.create_session("a", created_at=1)
    await store.create_session("b", created_at=2)
    await add(store, "a", 3)
    await add(store, "b", 2)
    await store.append("b", TITLE, {"title": "B"})
    await store.delete_session("b")
    assert await store.list_headers() == [a]
    assert await store.read_titles() == {}
    with pytest.raises(SessionNotFoundError):
        await store.read_events("b")
    with pytest.raises(SessionNotFoundError):
        await store.delete_session("b")
    assert seqs(await store.read_events("a")) == [0, 1, 2]
    # The id is free again and its log starts over.
    await store.create_session("b", created_at=3)
    assert seqs(await add(store, "b", 1)) == [0]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.append("nope", "x", {}),
        lambda s: s.append_batch("nope", [NewEvent("x", {})]),
        lambda s: s.append_batch("nope", []),
        lambda s: s.read_header("nope"),
        lambda s: s.read_events("nope"),
        lambda s: s.read_surface_events("nope"),
        lambda s: s.delete_session("nope"),
    ],
)
async def test_unknown_session(store: SessionStore, call: Any) -> None:
    await store.create_session("other")
    with pytest.raises(SessionNotFoundError) as info:
        await call(store)
    assert info.value.session_id == "nope"
    assert await store.read_events("other") == []


async def test_unknown_session_is_checked_before_event_rules(store: SessionStore) -> None:
    # The session is looked up first for a valid event; an invalid event is invalid anyway.
    with pytest.raises(SessionNotFoundError):
        await store.append("nope", MSG, {}, surface_op="append")


@pytest.mark.parametrize("bad", [1, None, b"id", ["id"]])
async def test_non_str_session_ids_in_lookups(store: SessionStore, bad: Any) -> None:
    with pytest.raises(TypeError):
        await store.read_events(bad)
    with pytest.raises(TypeError):
        await store.append(bad, "x", {})
    with pytest.raises(TypeError):
        await store.read_titles([bad])


async def test_read_titles_rejects_a_bare_string(store: SessionStore) -> None:
    with pytest.raises(TypeError):
        await store.read_titles("abc")


# --------------------------------------------------------------------------- immutability


async def test_returned_data_is_frozen_and_detached(store: SessionStore) -> None:
    await store.create_session("s")
    data: dict[str, Any] = {"list": [1, {"x": [2]}], "obj": {"k": "v"}}
    returned = await store.append("s", MSG, data, surface_op="append")
    source_seqs = [0]
    replaced = await store.append(
        "s", ASSISTANT, {}, surface_op=Replace(0, 0), source_event_seqs=source_seqs
    )
    # Mutating the caller's input afterwards changes nothing stored or returned.
    data["list"].append(3)
    data["obj"]["k"] = "changed"
    data["new"] = 1
    source_seqs.append(99)
    assert replaced.source_event_seqs == (0,)
    for event in (returned, (await store.read_events("s"))[0]):
        assert event.data == {"list": [1, {"x": [2]}], "obj": {"k": "v"}}
        assert event.data is not data
        with pytest.raises(TypeError):
            event.data["new"] = 1  # type: ignore[index]
        with pytest.raises(TypeError):
            event.data["list"].append(4)
        with pytest.raises(TypeError):
            event.data["list"][1]["x"].append(5)
        with pytest.raises(TypeError):
            event.data["obj"]["k"] = "x"
        with pytest.raises(dataclasses.FrozenInstanceError):
            event.seq = 5  # type: ignore[misc]
    # Reading twice gives equal results; nothing a caller does to one read leaks into another.
    first = await store.read_events("s")
    first.clear()
    assert len(await store.read_events("s")) == 2


# --------------------------------------------------------------------------- lifecycle


async def test_closed_store_refuses_work(store: SessionStore) -> None:
    await store.create_session("s")
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(StoreError):
        await store.list_headers()
    with pytest.raises(StoreError):
        await store.append("s", "x", {})


async def test_cancelled_append_leaves_the_store_usable(store: SessionStore) -> None:
    await store.create_session("s")
    for _ in range(20):
        task = asyncio.ensure_future(
            store.append_batch("s", [NewEvent(CHUNK, {"i": i}) for i in range(50)])
        )
        await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    # Each cancelled batch either landed whole or not at all, and the store still works.
    log = await store.read_events("s")
    assert len(log) % 50 == 0
    assert seqs(log) == list(range(len(log)))
    assert (await add(store, "s", 1))[0].seq == len(log)


# --------------------------------------------------------------------------- import


async def test_import_session_all_or_nothing(store: SessionStore) -> None:
    header = SessionHeader("imported\ud800", created_at=5, cwd="/c")
    log = [
        NewEvent(MSG, {"i": 0}, "append", None, 1),
        NewEvent(MSG, {"i": 1}, "append", None, 2),
        NewEvent(TITLE, {"title": "t"}, None, None, 3),
        NewEvent(ASSISTANT, {}, Replace(0, 1), [0, 1], 4),
    ]
    assert await store.import_session(header, log) == header
    assert await store.list_headers() == [header]
    events = await store.read_events(header.id)
    assert [(e.seq, e.time) for e in events] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    with pytest.raises(SessionExistsError):
        await store.import_session(header, [])
    bad = SessionHeader("other", created_at=6)
    with pytest.raises(InvalidEventError):
        await store.import_session(bad, [*log[:3], NewEvent(ASSISTANT, {}, Replace(0, 1), [0])])
    with pytest.raises(InvalidEventError):
        await store.import_session(SessionHeader("x", created_at=True), [])
    assert await store.list_headers() == [header]
    assert await store.import_session(SessionHeader("empty", 7), []) == SessionHeader("empty", 7)
    assert await store.read_events("empty") == []
